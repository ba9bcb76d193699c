//! Fuzzing the plan loader with proptest: any text, and plan-shaped TOML with hostile
//! values, loads or fails with located errors; it never panics. A long run (one core):
//!
//! ```sh
//! NIGHTSHIFT_PROPTEST_CASES=100000 nice -n 19 cargo test --release --test plan_props -- --test-threads 1
//! ```

mod support;

use nightshift::plan::{LoadError, Plan};
use proptest::prelude::*;
use std::path::Path;

fn load(text: String) -> Result<Plan, LoadError> {
    // A base folder with nothing in it: `commits_file` and `vllm_src` values resolve to
    // paths that do not exist.
    Plan::from_str_at(
        "fuzz.toml",
        text,
        Path::new("/nonexistent-nightshift-fuzz"),
        Path::new("fuzz.toml"),
    )
}

/// A value a field might be given: right, wrong type, empty, huge, hostile.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("0".to_string()),
        Just("-1".to_string()),
        Just("4294967296".to_string()),
        Just("1e400".to_string()),
        Just("true".to_string()),
        Just("\"\"".to_string()),
        Just("[]".to_string()),
        Just("{}".to_string()),
        Just("\"H100:0\"".to_string()),
        Just("\"H100:65\"".to_string()),
        Just("[\"baseline\", \"agent\", \"agent:x\", \"bogus\"]".to_string()),
        Just("\"{commit}{parent12}{nope}\"".to_string()),
        Just("\"{\"".to_string()),
        "\"[a-f0-9]{0,45}\"",
        "\"\\PC{0,40}\"".prop_map(|s| s.replace('\\', "\\\\")),
        (0u32..100).prop_map(|n| n.to_string()),
    ]
}

fn command() -> impl Strategy<Value = String> {
    let benign = prop::sample::select(vec![
        "--model m/x",
        "-tp 2",
        "--num-prompts 10",
        "--backend vllm",
        "--seed 1",
    ]);
    let hostile = prop::sample::select(vec![
        "--model m/x",
        "-tp 0",
        "-tp 2",
        "--tp=8",
        "--pp 0",
        "--pipeline-parallel-size=2",
        "--num-prompts N",
        "--dataset-path <path>",
        "[--seed 0]",
        "$MODEL",
        "...",
        "--x=",
        "--backend vllm",
        "=",
        "'",
        "\"",
        "\\",
        "--tensor-parallel-size",
        "-tp",
        "é",
    ]);
    (
        prop::sample::select(vec![
            "python benchmarks/benchmark_serving.py",
            "python3 -m vllm.entrypoints.cli.main bench throughput",
            "vllm bench latency",
            "VLLM_USE_V1=1 python benchmark_prefix_caching.py",
            "",
            "bash -c",
        ]),
        prop::collection::vec(prop_oneof![6 => benign, 1 => hostile], 0..8),
    )
        .prop_map(|(launcher, flags)| format!("{launcher} {}", flags.join(" ")))
}

fn commit_table() -> impl Strategy<Value = String> {
    // Mostly well-formed, so loads that succeed exercise the expansion too.
    let hash = || prop_oneof![4 => "[a-f0-9]{40}", 1 => "[a-fA-F0-9]{0,44}"];
    let field = prop_oneof![
        3 => prop::sample::select(vec![
            ("gpu_config", "\"H100:2\""),
            ("benchmark_mode", "\"serving\""),
            ("model", "\"m/x\""),
            ("variants", "[\"human\", \"agent\"]"),
            ("skip", "true"),
            ("vllm_version", "\"0.6.3\""),
        ])
        .prop_map(|(k, v)| (k, v.to_string())),
        1 => (
            prop::sample::select(vec![
                "gpu_config", "benchmark_mode", "model", "variants", "images", "patches",
                "skip", "vllm_version", "files_changed", "title", "bogus",
            ]),
            value(),
        ),
    ];
    (
        hash(),
        prop::option::of(hash()),
        command(),
        prop::collection::vec(field, 0..4),
    )
        .prop_map(|(commit, parent, cmd, extra)| {
            let mut t = format!("[[commits]]\ncommit = \"{commit}\"\n");
            if let Some(p) = parent {
                t.push_str(&format!("parent = \"{p}\"\n"));
            }
            t.push_str(&format!(
                "perf_command = '''{}'''\n",
                cmd.replace("'''", "")
            ));
            for (k, v) in extra {
                t.push_str(&format!("{k} = {v}\n"));
            }
            t
        })
}

fn plan_text() -> impl Strategy<Value = String> {
    let field = prop_oneof![
        3 => prop::sample::select(vec![
            ("gpu_count", "2"),
            ("variants", "[\"baseline\", \"human\", \"agent\"]"),
            ("repeats", "2"),
            ("on_invalid", "\"skip\""),
            ("ipc", "\"host\""),
            ("timeout_s_by_gpus", "{ \"1\" = 60, \"x\" = 1 }"),
        ])
        .prop_map(|(k, v)| (k, v.to_string())),
        1 => (
            prop::sample::select(vec![
                "gpu_count", "gpu_type", "variants", "repeats", "on_invalid", "ipc",
                "shm_size", "timeout_s_by_gpus", "run_timeout_s", "vllm_src", "bogus",
            ]),
            value(),
        ),
    ];
    (
        prop_oneof![4 => Just(None), 1 => prop::option::of(value())],
        prop_oneof![2 => Just(None), 1 => prop::option::of(value())],
        prop::collection::vec(field, 0..5),
        prop::collection::vec(
            prop_oneof![4 => "[a-z][a-z0-9_]{0,8}", 1 => "[a-z0-9_/ ]{0,12}"],
            0..3,
        ),
        prop::collection::vec(commit_table(), 0..6),
        prop_oneof![4 => Just(None), 1 => prop::option::of(value())],
    )
        .prop_map(|(schema, name, defaults, agents, commits, commits_file)| {
            let mut t = format!(
                "schema_version = {}\n",
                schema.unwrap_or_else(|| "1".into())
            );
            if let Some(n) = name {
                t.push_str(&format!("name = {n}\n"));
            }
            if let Some(f) = commits_file {
                t.push_str(&format!("commits_file = {f}\n"));
            }
            t.push_str("[defaults]\n");
            for (k, v) in defaults {
                t.push_str(&format!("{k} = {v}\n"));
            }
            for id in agents {
                t.push_str(&format!(
                    "[[agents]]\nid = \"{id}\"\npatch = \"p/{{commit8}}.diff\"\n"
                ));
            }
            for c in commits {
                t.push_str(&c);
            }
            t
        })
}

proptest! {
    #![proptest_config(support::config())]

    #[test]
    fn any_text_never_panics(text in "\\PC{0,600}") {
        let _ = load(text);
    }

    #[test]
    fn any_bytes_as_text_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let _ = load(String::from_utf8_lossy(&bytes).into_owned());
    }

    /// Plan-shaped input: loads, or fails with every error located in the file.
    #[test]
    fn plan_shaped_text_loads_or_fails_with_positions(text in plan_text()) {
        match load(text.clone()) {
            Ok(p) => {
                if std::env::var_os("NIGHTSHIFT_FUZZ_TRACE").is_some() {
                    eprintln!("loaded: {} commits, {} runs", p.commits.len(), p.runs.len());
                }
                // Every run points at a commit of the plan and needs at least one GPU.
                for r in &p.runs {
                    prop_assert!(r.commit < p.commits.len());
                    prop_assert!(r.gpus >= 1, "{}", text);
                }
            }
            Err(LoadError::Invalid(diags)) => {
                prop_assert!(!diags.is_empty());
                for d in diags {
                    if let Some(l) = &d.loc {
                        prop_assert!(l.line >= 1 && l.col >= 1);
                        prop_assert!(l.line <= text.lines().count().max(1) + 1, "{} in\n{}", d, text);
                    }
                }
            }
            Err(_) => {}
        }
    }
}
