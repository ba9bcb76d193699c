//! Plan loading and validation, through the library and the real binary.

use nightshift::model::Variant;
use nightshift::plan::{LoadError, Plan};
use std::path::Path;
use std::process::Command;

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/plans")
        .join(name)
}

fn nightshift(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nightshift"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run nightshift");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn errors(name: &str) -> Vec<String> {
    match Plan::load(&fixture(name)) {
        Err(LoadError::Invalid(d)) => d.iter().map(|d| d.to_string()).collect(),
        Err(e) => panic!("{name}: unexpected {e}"),
        Ok(_) => panic!("{name}: should not load"),
    }
}

#[test]
fn minimal_plan_expands_to_three_variants_with_templated_images() {
    let p = Plan::load(&fixture("minimal.toml")).unwrap();
    assert_eq!(p.runs.len(), 3);
    let by: Vec<(String, Option<String>)> = p
        .runs
        .iter()
        .map(|r| (r.variant.to_string(), r.image.clone()))
        .collect();
    assert_eq!(
        by[0],
        (
            "baseline".into(),
            Some("anonymous/vllm-baseline:baseline-64172a976c8d".into())
        )
    );
    assert_eq!(
        by[1],
        (
            "human".into(),
            Some("anonymous/vllm-bench:3a243095e5e7b655b63ab08fbd5936cb40850415".into())
        )
    );
    assert_eq!(
        by[2],
        (
            "agent:claude_code".into(),
            Some("anonymous/vllm-baseline:baseline-64172a976c8d".into())
        )
    );
    assert_eq!(p.runs[2].patch.as_deref(), Some("patches/3a243095.diff"));
    assert_eq!(p.runs[2].variant, Variant::Agent("claude_code".into()));
    assert!(p
        .runs
        .iter()
        .all(|r| r.skip_reason.is_none() && r.gpus == 1));
    assert_eq!(p.runs[1].key, "3a243095e5e7/human");
}

#[test]
fn syntax_errors_name_file_line_and_column() {
    let e = errors("syntax_error.toml");
    assert_eq!(e.len(), 1);
    assert!(e[0].contains("syntax_error.toml:7:1"), "{e:?}");
}

#[test]
fn unknown_fields_are_errors_with_position() {
    let e = errors("unknown_field.toml");
    assert!(e[0].contains("unknown_field.toml:6:1"), "{e:?}");
    assert!(e[0].contains("server_start_timout_s"), "{e:?}");
}

#[test]
fn bad_hash_names_the_value_position() {
    let e = errors("bad_hash.toml");
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(e[0].contains("bad_hash.toml:10:10"), "{e:?}");
    assert!(e[0].contains("expected 40 hex digits"), "{e:?}");
}

#[test]
fn jsonl_errors_name_the_line() {
    let e = errors("bad_jsonl.toml");
    assert!(e[0].contains("bad.jsonl:2:"), "{e:?}");
    assert!(e[0].contains("perf_comand"), "{e:?}");
}

#[test]
fn every_invalid_rule_and_warning() {
    let p = Plan::load(&fixture("rules.toml")).unwrap();
    let rule = |c: &str| {
        p.commits
            .iter()
            .find(|x| x.commit.starts_with(c))
            .unwrap()
            .invalid
            .as_ref()
            .map(|i| i.rule)
    };
    assert_eq!(rule("1111"), Some("tp_exceeds_gpus"));
    assert_eq!(rule("3333"), None);
    assert_eq!(rule("5555"), Some("placeholder"));
    assert_eq!(rule("7777"), Some("optional_brackets"));
    assert_eq!(rule("9999"), Some("missing"));
    // A flag neither the era's serving client nor its server takes.
    assert_eq!(rule("bbbb"), Some("bench_command_invalid"));
    let why = &p
        .commits
        .iter()
        .find(|c| c.commit.starts_with("bbbb"))
        .unwrap()
        .invalid;
    assert!(
        why.as_ref().unwrap().detail.contains("--batch-size"),
        "{why:?}"
    );
    let kinds: Vec<&str> = p.warnings.iter().map(|w| w.kind).collect();
    for k in ["script_path", "model_mismatch", "mode_mismatch", "gpu_type"] {
        assert!(kinds.contains(&k), "missing warning {k}: {kinds:?}");
    }
    // Invalid commits are skipped with the reason; the valid one runs.
    let runnable: Vec<&str> = p
        .runs
        .iter()
        .filter(|r| r.skip_reason.is_none())
        .map(|r| r.key.as_str())
        .collect();
    assert_eq!(
        runnable,
        vec!["333333333333/baseline", "333333333333/human"]
    );
    assert!(p.runs[0]
        .skip_reason
        .as_deref()
        .unwrap()
        .contains("tp_exceeds_gpus"));
    // The JSONL commits carry their file positions.
    let c = p
        .commits
        .iter()
        .find(|x| x.commit.starts_with("5555"))
        .unwrap();
    assert!(c
        .loc
        .as_ref()
        .unwrap()
        .to_string()
        .ends_with("rules.jsonl:1:1"));
}

#[test]
fn per_commit_overrides_win_over_templates() {
    let text = r#"
schema_version = 1
[images]
org = "acme"
[[agents]]
id = "a1"
[[commits]]
commit = "3a243095e5e7b655b63ab08fbd5936cb40850415"
perf_command = "python benchmarks/benchmark_serving.py --model m"
images = { human = "acme/fixed:1", baseline = "acme/base:full-hash" }
"#;
    let p = Plan::from_str_at("t.toml", text.into(), Path::new("."), Path::new("t.toml")).unwrap();
    let img: Vec<_> = p.runs.iter().map(|r| r.image.clone().unwrap()).collect();
    assert_eq!(
        img,
        vec!["acme/base:full-hash", "acme/fixed:1", "acme/base:full-hash"]
    );
}

#[test]
fn unknown_template_fields_are_errors() {
    let text = "schema_version = 1\n[images]\nhuman = \"{org}/x:{sha}\"\n";
    let e =
        Plan::from_str_at("t.toml", text.into(), Path::new("."), Path::new("t.toml")).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("t.toml:3:9") && msg.contains("{sha}"), "{msg}");
}

#[test]
fn schema_version_must_be_1() {
    let e = Plan::from_str_at(
        "t.toml",
        "schema_version = 2\n".into(),
        Path::new("."),
        Path::new("t.toml"),
    )
    .unwrap_err();
    assert!(e.to_string().contains("t.toml:1:18"), "{e}");
}

#[test]
fn duplicate_and_ambiguous_hashes_are_errors() {
    let text = r#"schema_version = 1
[[commits]]
commit = "abcdef12"
perf_command = "python benchmarks/benchmark_serving.py --model m"
[[commits]]
commit = "abcdef1234"
perf_command = "python benchmarks/benchmark_serving.py --model m"
"#;
    let e = Plan::from_str_at("t.toml", text.into(), Path::new("."), Path::new("t.toml"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("ambiguous prefix"), "{e}");
}

#[test]
fn example_plan_checks_and_lists_the_invalid_seed_commits() {
    let (code, out, err) = nightshift(&["plan", "check", "examples/iso-vllm.toml"]);
    assert_eq!(code, 0, "{err}");
    let line = |c: &str| {
        out.lines()
            .find(|l| l.contains(c))
            .unwrap_or_else(|| panic!("{c} not listed:\n{out}"))
            .to_string()
    };
    assert!(line("526de822 placeholder").contains("BS"));
    assert!(line("3127e975 missing").contains("no perf_command"));
    assert!(out.contains("unknown_parent"));
}

#[test]
fn plan_check_exits_2_on_bad_plans_with_positions() {
    for (f, pos) in [
        ("syntax_error.toml", ":7:1"),
        ("unknown_field.toml", ":6:1"),
        ("bad_hash.toml", ":10:10"),
    ] {
        let path = format!("tests/fixtures/plans/{f}");
        let (code, _, err) = nightshift(&["plan", "check", &path]);
        assert_eq!(code, 2, "{f}: {err}");
        assert!(err.contains(&format!("{path}{pos}")), "{f}: {err}");
    }
    let (code, _, err) = nightshift(&["plan", "check", "tests/fixtures/plans/nope.toml"]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot read"));
}

#[test]
fn plan_show_json_gives_runs_with_images_and_command_views() {
    let (code, out, _) = nightshift(&["plan", "show", "--json", "examples/iso-vllm.toml"]);
    assert_eq!(code, 0);
    let runs: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(runs.len(), 285);
    let r = runs
        .iter()
        .find(|r| r["key"] == "015069b01741/human")
        .unwrap();
    assert_eq!(
        r["image"],
        "anonymous/vllm-bench:015069b01741e9ecb9e604c7fe87fbdfc306ebe5"
    );
    assert_eq!(r["command_view"]["kind"], "serving");
    assert_eq!(r["command_view"]["model"], "Qwen/Qwen3-7B-Instruct");
}

#[test]
fn import_regenerates_the_example_plan() {
    // Absent seeds skip outside CI; any other exit 2 is the import failing, not a skip.
    let seeds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/seed-commits.json");
    if !seeds.is_file() {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "CI=true and {} is not there",
            seeds.display()
        );
        eprintln!("SKIP: {} not present", seeds.display());
        return;
    }
    let (code, out, err) = nightshift(&[
        "plan",
        "import",
        "--from",
        "seed-json",
        "../shared/data/seed-commits.json",
    ]);
    assert_eq!(code, 0, "plan import failed: {err}");
    let example = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/iso-vllm.toml"),
    )
    .unwrap();
    let strip = |s: &str| {
        s.lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(
        strip(&out),
        strip(&example),
        "examples/iso-vllm.toml is stale: regenerate it"
    );
}

#[test]
fn every_seed_command_shape_gets_a_view() {
    let p = Plan::load(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples/iso-vllm.toml")
            .as_path(),
    )
    .unwrap();
    let with_cmd: Vec<_> = p
        .commits
        .iter()
        .filter(|c| c.perf_command.is_some())
        .collect();
    assert_eq!(with_cmd.len(), 94);
    for c in with_cmd {
        let v = c
            .view
            .as_ref()
            .unwrap_or_else(|| panic!("{}: no view", c.commit));
        assert!(
            v.kind.is_some(),
            "{}: no kind for {:?}",
            c.commit,
            c.perf_command
        );
        // A command naming no model runs the script's default (facebook/opt-125m).
        let names_model = c
            .perf_command
            .as_deref()
            .is_some_and(|p| p.contains("--model"));
        assert!(v.model.is_some() || !names_model, "{}: no model", c.commit);
        assert!(
            c.gpu.count >= v.tp * v.pp || c.invalid.is_some(),
            "{}",
            c.commit
        );
    }
    let c = p
        .commits
        .iter()
        .find(|c| c.commit.starts_with("21d93c14"))
        .unwrap();
    assert_eq!((c.view.as_ref().unwrap().tp, c.gpu.count), (8, 8));
}

#[test]
fn a_closed_pipe_ends_a_report_quietly() {
    use std::io::Read;
    let mut child = Command::new(env!("CARGO_BIN_EXE_nightshift"))
        .args(["plan", "show", "--json", "examples/iso-vllm.toml"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 16];
    child
        .stdout
        .as_mut()
        .unwrap()
        .read_exact(&mut first)
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_ne!(out.status.code(), Some(101), "{err}");
}

/// What cannot run is an error at its position, and `plan check` exits 2 on it.
#[test]
fn plans_that_cannot_run_are_rejected_with_positions() {
    let dir = tempfile::tempdir().unwrap();
    let commit = "[[commits]]\ncommit = \"3a243095e5e7b655b63ab08fbd5936cb40850415\"\nparent = \"64172a976c8d975b3aec946f1675716d2532d94f\"\n";
    let cmd = |c: &str| format!("perf_command = '''{c}'''\n");
    let serving = "python benchmarks/benchmark_serving.py --model m/x --num-prompts 10";
    let cases = [
        (
            "gpu_count",
            format!("schema_version = 1\n[defaults]\ngpu_count = 0\n{commit}{}", cmd(serving)),
            ":3:13: gpu_count = 0 cannot run",
        ),
        (
            "tp",
            format!("schema_version = 1\n{commit}{}", cmd(&format!("{serving} -tp 0"))),
            ":5:16: commit 3a243095e5e7b655b63ab08fbd5936cb40850415: perf_command: `-tp 0` cannot run",
        ),
        (
            "agent",
            format!("schema_version = 1\n[defaults]\nvariants = [\"baseline\", \"agent\"]\n{commit}{}", cmd(serving)),
            ":3:12: variant `agent` but the plan has no [[agents]]",
        ),
        (
            "agent_per_commit",
            format!("schema_version = 1\n{commit}variants = [\"agent\"]\n{}", cmd(serving)),
            ":5:12: commit 3a243095e5e7b655b63ab08fbd5936cb40850415: variant `agent` but the plan has no [[agents]]",
        ),
        (
            "name",
            format!("schema_version = 1\nname = \"  \"\n{commit}{}", cmd(serving)),
            ":2:8: name is empty",
        ),
    ];
    for (what, text, want) in cases {
        let p = dir.path().join(format!("{what}.toml"));
        std::fs::write(&p, &text).unwrap();
        let errs = match Plan::load(&p) {
            Err(LoadError::Invalid(d)) => d.iter().map(|d| d.to_string()).collect::<Vec<_>>(),
            other => panic!("{what}: should not load: {:?}", other.map(|p| p.runs.len())),
        };
        assert!(
            errs.iter()
                .any(|e| e.contains(want) && e.starts_with(&*p.display().to_string())),
            "{what}: {errs:?}"
        );
        let (code, _, err) = nightshift(&["plan", "check", p.to_str().unwrap()]);
        assert_eq!(code, 2, "{what}: {err}");
        assert!(err.contains(want), "{what}: {err}");
    }
}

#[test]
fn plan_check_says_runnable_no_when_every_run_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("none.toml");
    std::fs::write(
        &p,
        "schema_version = 1\n[defaults]\non_invalid = \"skip\"\n[[commits]]\ncommit = \"3a243095e5e7b655b63ab08fbd5936cb40850415\"\nparent = \"64172a976c8d975b3aec946f1675716d2532d94f\"\nperf_command = '''python benchmarks/benchmark_serving.py --model MODEL'''\n",
    )
    .unwrap();
    let (code, out, err) = nightshift(&["plan", "check", p.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(out.contains("runnable: no"), "{out}");
    let ok = fixture("minimal.toml");
    let (_, out, _) = nightshift(&["plan", "check", ok.to_str().unwrap()]);
    assert!(out.contains("runnable: yes"), "{out}");
}

#[test]
fn a_parent_matching_two_commits_is_ambiguous_and_one_match_is_not() {
    let plan = |parent: &str| {
        format!(
            "schema_version = 1\n[[commits]]\ncommit = \"abcdef1234567\"\nperf_command = \"python benchmarks/benchmark_serving.py --model m\"\n[[commits]]\ncommit = \"abcdef1299999\"\nperf_command = \"python benchmarks/benchmark_serving.py --model m\"\n[[commits]]\ncommit = \"0123456789ab\"\nparent = \"{parent}\"\nperf_command = \"python benchmarks/benchmark_serving.py --model m\"\n"
        )
    };
    let load = |t: String| Plan::from_str_at("t.toml", t, Path::new("."), Path::new("t.toml"));
    let e = load(plan("abcdef12")).unwrap_err().to_string();
    assert!(
        e.contains("parent `abcdef12` is ambiguous: it matches 2 commits"),
        "{e}"
    );
    // One commit extends it, or it extends one: not ambiguous.
    assert!(load(plan("abcdef123456")).is_ok());
    assert!(load(plan("abcdef1234567aaaa")).is_ok());
}

#[test]
fn repeats_per_plan_and_per_commit_interleave_with_a_discarded_warmup() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixture("minimal.toml"))
        .unwrap()
        .replace(
            "[defaults]\n",
            "[defaults]\nrepeats = 2\nwarmup = \"discard_first\"\n",
        )
        + "\n[[commits]]\ncommit = \"4b243095e5e7b655b63ab08fbd5936cb40850415\"\nparent = \"64172a976c8d975b3aec946f1675716d2532d94f\"\nmodel = \"m\"\nrepeats = 4\nperf_command = 'python benchmarks/benchmark_serving.py --model m'\n";
    let path = dir.path().join("plan.toml");
    std::fs::write(&path, text).unwrap();
    let p = Plan::load(&path).unwrap();
    let of = |c: usize| p.runs.iter().filter(|r| r.commit == c).collect::<Vec<_>>();
    assert_eq!(of(0).len(), 6);
    assert_eq!(of(1).len(), 12);
    // Keys name the repeat; the first repeat of each variant is the warm-up.
    assert!(of(1).iter().any(|r| r.key == "4b243095e5e7/human/r4"));
    for r in of(1) {
        assert_eq!(r.warmup, r.repeat == 0, "{}", r.key);
    }
    // Randomised blocks: every block of the schedule holds one repeat of each variant, and
    // the scheduler's order follows the blocks, not the variants.
    let mut runs = of(1);
    runs.sort_by_key(|r| r.order);
    for (i, block) in runs.chunks(3).enumerate() {
        assert!(block.iter().all(|r| r.repeat == i as u32), "{i}");
    }
    // repeats = 0 on a commit is an error naming the field.
    let bad = std::fs::read_to_string(&path)
        .unwrap()
        .replace("repeats = 4", "repeats = 0");
    std::fs::write(&path, bad).unwrap();
    match Plan::load(&path) {
        Err(LoadError::Invalid(d)) => {
            assert!(d
                .iter()
                .any(|d| d.to_string().contains("repeats must be at least 1")))
        }
        other => panic!("{:?}", other.map(|p| p.runs.len())),
    }
}

/// A hostile `repeats` is refused at its file:line:col with exit 2: it used to abort the
/// binary (allocating 3 × 4 294 967 295 runs, exit 134). `/dev/zero` as the plan is
/// refused by name instead of growing memory.
#[test]
fn plan_check_refuses_huge_repeats_at_the_field_and_devices_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixture("minimal.toml"))
        .unwrap()
        .replace("[defaults]\n", "[defaults]\nrepeats = 4294967295\n");
    let line = 1 + text.lines().position(|l| l.starts_with("repeats")).unwrap();
    let path = dir.path().join("huge.toml");
    std::fs::write(&path, text).unwrap();
    let path = path.to_str().unwrap();
    let (code, _, err) = nightshift(&["plan", "check", path]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(&format!("{path}:{line}:11: ")), "{err}");
    assert!(err.contains("at most 100"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    if cfg!(unix) {
        let (code, _, err) = nightshift(&["plan", "check", "/dev/zero"]);
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains("/dev/zero") && err.contains("character device"),
            "{err}"
        );
    }
}

/// Two commits sharing their first 12 hex digits: their runs' keys differ (the whole hash),
/// so neither's results can replace the other's; every other commit keeps the short key.
#[test]
fn commits_sharing_twelve_hex_digits_get_distinct_run_keys() {
    let a = format!("abcdef123456{}", "0".repeat(28));
    let b = format!("abcdef123456{}", "1".repeat(28));
    let c = "1".repeat(40);
    let mut text = String::from("schema_version = 1\n");
    for h in [&a, &b, &c] {
        text += &format!("[[commits]]\ncommit = \"{h}\"\nparent = \"{}\"\nperf_command = \"python benchmarks/benchmark_serving.py --model m\"\n", "2".repeat(40));
    }
    let p = Plan::from_str_at("t.toml", text, Path::new("."), Path::new("t.toml")).unwrap();
    let keys: std::collections::BTreeSet<&str> = p.runs.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(keys.len(), p.runs.len(), "{keys:?}");
    assert!(keys.contains(format!("{a}/human").as_str()), "{keys:?}");
    assert!(keys.contains(format!("{b}/baseline").as_str()), "{keys:?}");
    assert!(
        keys.contains(format!("{}/human", &c[..12]).as_str()),
        "{keys:?}"
    );
}
