//! The judge on hand-made facts: each rule, and what it leaves unchecked.

use super::facts::{BoxFacts, CommitFacts, Era, Facts, ImageState, Known, ModelFacts, PatchState};
use super::{judge, Report, Severity, Verdict};
use crate::plan::Plan;
use std::collections::BTreeMap;
use std::path::Path;

const GIB: u64 = 1 << 30;

fn plan(cmd: &str, extra: &str) -> Plan {
    let text = format!(
        "schema_version = 1\n[[agents]]\nid = \"a\"\npatch = \"p.diff\"\n[[commits]]\ncommit = \"{}\"\nparent = \"{}\"\nmodel = \"org/m\"\n{extra}perf_command = '''{cmd}'''\n",
        "a".repeat(40),
        "b".repeat(40)
    );
    Plan::from_str_at("t.toml", text, Path::new("."), Path::new("t.toml")).unwrap()
}

fn facts(model: ModelFacts, era: &str) -> Facts {
    let mut eras = BTreeMap::new();
    for v in ["baseline", "human", "agent:a"] {
        eras.insert(
            v.to_string(),
            Known::Yes(Era {
                version: era.into(),
                source: "test".into(),
            }),
        );
    }
    let mut models = BTreeMap::new();
    models.insert("org/m".to_string(), model);
    Facts {
        commits: vec![CommitFacts {
            eras,
            ..CommitFacts::default()
        }],
        models,
        host: BoxFacts {
            gpus: Known::Yes(8),
            gpu_mem: Known::Yes((80 * GIB, "test".into())),
            cache_free: None,
        },
        not_reached: vec![],
    }
}

fn model(bytes: u64, config: serde_json::Value) -> ModelFacts {
    ModelFacts {
        exists: Some(true),
        config: Some(config),
        weights_bytes: Some(bytes),
        source: "test".into(),
        ..ModelFacts::default()
    }
}

const LAT: &str = "python benchmarks/benchmark_latency.py --model org/m";

#[test]
fn a_fitting_model_on_a_fine_era_is_ready() {
    let p = plan(LAT, "");
    let f = facts(model(16 * GIB, serde_json::json!({})), "0.6.0");
    let r = &judge(&p, &f)[0];
    assert_eq!(r.verdict, Verdict::Ready, "{r:?}");
    assert!(r.unchecked.is_empty(), "{r:?}");
}

#[test]
fn weights_count_tp_and_quantisation_at_load() {
    // 140 GiB bf16 at TP 1: blocked; at TP 2 (2 × 80 × 0.9 = 144): fits tightly (a risk).
    let f = facts(
        model(140 * GIB, serde_json::json!({"torch_dtype": "bfloat16"})),
        "0.6.0",
    );
    assert_eq!(judge(&plan(LAT, ""), &f)[0].verdict, Verdict::Blocked);
    let tp2 = judge(
        &plan(&format!("{LAT} -tp 2"), "gpu_config = \"H100:2\"\n"),
        &f,
    );
    assert_eq!(tp2[0].verdict, Verdict::AtRisk, "{:?}", tp2[0]);
    // The same checkpoint quantised to fp8 at load takes half: fits on one GPU with room.
    let fp8 = judge(&plan(&format!("{LAT} --quantization fp8"), ""), &f);
    assert_eq!(fp8[0].verdict, Verdict::AtRisk, "{:?}", fp8[0]);
    let small = facts(model(100 * GIB, serde_json::json!({})), "0.6.0");
    let fp8 = judge(&plan(&format!("{LAT} --quantization fp8"), ""), &small);
    assert_eq!(fp8[0].verdict, Verdict::Ready, "{:?}", fp8[0]);
}

#[test]
fn an_unlisted_era_and_a_local_version_are_unchecked_never_old() {
    let p = plan(LAT, "vllm_version = \"0.0.0+local\"\n");
    let mut f = facts(model(GIB, serde_json::json!({})), "0.6.0");
    f.commits[0].eras.clear();
    let r = &judge(&p, &f)[0];
    assert!(r.eras.is_empty(), "0.0.0+local names no era: {r:?}");
    assert!(
        r.unchecked.iter().any(|u| u.starts_with("era of human")),
        "{r:?}"
    );
    // A Llama 3.1 rope with no era known is not blocked: it is unknown.
    let rope = model(
        GIB,
        serde_json::json!({"rope_scaling": {"rope_type": "llama3"}}),
    );
    let mut f = facts(rope, "0.4.2");
    assert_eq!(judge(&p, &f)[0].verdict, Verdict::Blocked);
    f.commits[0].eras.clear();
    assert_ne!(judge(&p, &f)[0].verdict, Verdict::Blocked);
}

#[test]
fn images_and_patches_name_their_variant() {
    let p = plan(LAT, "");
    let mut f = facts(model(GIB, serde_json::json!({})), "0.6.0");
    let cf = &mut f.commits[0];
    cf.images.insert(
        "human".into(),
        ImageState::Local {
            size: None,
            id: None,
        },
    );
    cf.images.insert(
        "baseline".into(),
        ImageState::Missing {
            detail: "not in the registry".into(),
        },
    );
    cf.patches.insert(
        "agent:a".into(),
        PatchState::DoesNotApply {
            path: "p.diff".into(),
            error: "error: patch failed: x.py:1".into(),
        },
    );
    let r = &judge(&p, &f)[0];
    assert_eq!(r.verdict, Verdict::Blocked);
    let blocked = r.blocked_variants();
    assert_eq!(blocked, ["agent:a"], "{r:?}");
    // The missing baseline can be derived from the human image: a risk, not a block.
    let b = r.reasons.iter().find(|x| x.variant == "baseline").unwrap();
    assert_eq!(
        (b.severity, b.category.as_str()),
        (Severity::Risk, "image_derived")
    );
    let rep = Report::new(vec![r.clone()], vec![], 1);
    assert_eq!(rep.summary.runs_blocked, 1);
    assert_eq!(rep.exit_code(), 1);
}

#[test]
fn the_night_skips_exactly_the_blocked_variants() {
    let mut p = plan(LAT, "");
    let mut f = facts(model(GIB, serde_json::json!({})), "0.6.0");
    f.commits[0].patches.insert(
        "agent:a".into(),
        PatchState::Missing {
            path: "p.diff".into(),
        },
    );
    let rep = Report::new(judge(&p, &f), vec![], 1);
    assert_eq!(super::cli::skip_blocked(&mut p, &rep), 1);
    let skipped: Vec<_> = p
        .runs
        .iter()
        .filter_map(|r| r.skip_reason.as_deref().map(|s| (r.variant.to_string(), s)))
        .collect();
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0].0, "agent:a");
    assert!(super::cli::named_before_night(skipped[0].1), "{skipped:?}");
    assert!(skipped[0].1.contains("agent_patch_failed"));
}

#[test]
fn a_context_beyond_the_models_is_named_only_when_plain() {
    use super::judge::context_beyond_model;
    use crate::command::CommandView;
    let v = |cmd: &str| CommandView::parse(cmd).unwrap();
    let cfg = serde_json::json!({"max_position_embeddings": 2048});
    let long = v("vllm bench serve --model m --max-model-len 8192");
    assert!(context_beyond_model(&long, &cfg)
        .unwrap()
        .contains("--max-model-len 8192 is beyond the model's 2048"));
    assert!(
        context_beyond_model(&v("vllm bench serve --model m --max-model-len 2048"), &cfg).is_none()
    );
    // The operator allowed it, the rope stretches it, or two keys disagree: no evidence.
    let allowed =
        v("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vllm bench serve --model m --max-model-len 8192");
    assert!(context_beyond_model(&allowed, &cfg).is_none());
    let rope = serde_json::json!({"max_position_embeddings": 2048, "rope_scaling": {"type": "yarn", "factor": 4.0}});
    assert!(context_beyond_model(&long, &rope).is_none());
    let two = serde_json::json!({"max_position_embeddings": 2048, "seq_length": 4096});
    assert!(context_beyond_model(&long, &two).is_none());
}

/// What an image's own client and server said of their flags on an earlier night is
/// evidence: the release whose server lacks an engine flag is named before the night, the
/// one whose server has it is not (the era tables alone know neither).
#[test]
fn an_images_own_help_names_a_flag_its_release_lacks() {
    use crate::rewrite::flags::FlagSet;
    use crate::runtime::docker::memo::Learned;
    let cmd = "vllm bench serve --model org/m --custom-histogram-buckets 1 --dataset-name random";
    let p = plan(cmd, "");
    let mut f = facts(model(GIB, serde_json::json!({})), "0.32.0");
    let client = FlagSet::from_list("--model --dataset-name --num-prompts", true);
    let server =
        |extra: &str| FlagSet::from_list(&format!("--model --port --host --dtype {extra}"), true);
    // Without an earlier night's answers the flag is the engine's to judge: not blocked.
    assert!(judge(&p, &f)[0].blocked_variants().is_empty());
    let cf = &mut f.commits[0];
    cf.learned.insert(
        "baseline".into(),
        Learned {
            client: Some(client.clone()),
            server: Some(server("")),
        },
    );
    cf.learned.insert(
        "human".into(),
        Learned {
            client: Some(client),
            server: Some(server("--custom-histogram-buckets")),
        },
    );
    let r = &judge(&p, &f)[0];
    assert_eq!(r.blocked_variants(), ["baseline"], "{r:?}");
    let why = r.reasons.iter().find(|x| x.variant == "baseline").unwrap();
    assert!(why.text.contains("--custom-histogram-buckets"), "{why:?}");
    assert!(why.text.contains("own --help"), "{why:?}");
}

fn plan_at(commit: &str, cmd: &str) -> Plan {
    let text = format!(
        "schema_version = 1\n[[agents]]\nid = \"a\"\npatch = \"p.diff\"\n[[commits]]\ncommit = \"{commit}\"\nparent = \"{}\"\nmodel = \"org/m\"\nperf_command = '''{cmd}'''\n",
        "b".repeat(40)
    );
    Plan::from_str_at("t.toml", text, Path::new("."), Path::new("t.toml")).unwrap()
}

fn blocked_variants(r: &super::CommitReport, category: &str) -> Vec<String> {
    r.reasons
        .iter()
        .filter(|x| x.category == category && x.severity == Severity::Blocks)
        .map(|x| x.variant.clone())
        .collect()
}

/// Without a clone, a known failing combination is judged by release, and the commit that
/// removed the failure is not blamed for its parent's code.
#[test]
fn flag_rules_by_release_spare_the_commit_that_fixed_them() {
    let cmd = "python benchmarks/benchmark_serving.py --model org/m --enable-prefix-caching --enable-chunked-prefill --max-num-batched-tokens 2048";
    let f = facts(model(GIB, serde_json::json!({})), "0.5.5");
    let fix = judge(
        &plan_at("e3580537a41a46b0f3cd750b86b633c1857a8c90", cmd),
        &f,
    );
    assert_eq!(
        blocked_variants(&fix[0], "server_config_invalid"),
        ["baseline", "agent:a"],
        "{:?}",
        fix[0]
    );
    let other = judge(&plan(cmd, ""), &f);
    assert_eq!(
        blocked_variants(&other[0], "server_config_invalid").len(),
        3
    );
    // Switched off by its value: not given.
    let off = judge(
        &plan(
            &cmd.replace("--enable-chunked-prefill", "--enable-chunked-prefill False"),
            "",
        ),
        &f,
    );
    assert!(blocked_variants(&off[0], "server_config_invalid").is_empty());
    let later = facts(model(GIB, serde_json::json!({})), "0.6.0");
    assert!(
        blocked_variants(&judge(&plan(cmd, ""), &later)[0], "server_config_invalid").is_empty()
    );
}

#[test]
fn ngram_needs_its_lookup_window_until_the_flag_went() {
    let cmd = "python benchmarks/benchmark_latency.py --model org/m --speculative-model '[ngram]' --num-speculative-tokens 5";
    let f = facts(
        model(GIB, serde_json::json!({})),
        "0.6.4.dev22+g5b8a1fde.d20241016",
    );
    let r = &judge(&plan(cmd, ""), &f)[0];
    assert_eq!(
        blocked_variants(r, "server_config_invalid").len(),
        3,
        "{r:?}"
    );
    let window = format!("{cmd} --ngram-prompt-lookup-max 4");
    let r = &judge(&plan(&window, ""), &f)[0];
    assert!(
        blocked_variants(r, "server_config_invalid").is_empty(),
        "{r:?}"
    );
}

/// An option value a release's choices lack: the parent of the commit that added it is
/// refused, the commit itself is not, though both report the same release.
#[test]
fn a_choice_added_by_the_commit_under_test_blocks_only_its_parent() {
    let cmd =
        "python benchmarks/benchmark_serving.py --model org/m --guided-decoding-backend xgrammar";
    let f = facts(
        model(GIB, serde_json::json!({})),
        "0.6.4.post2.dev218+g3257d449",
    );
    let r = &judge(
        &plan_at("9323a3153b20d4a2ca7ac04a2784609d6ce656e0", cmd),
        &f,
    )[0];
    assert_eq!(
        blocked_variants(r, "bench_command_invalid"),
        ["baseline", "agent:a"],
        "{r:?}"
    );
    assert!(
        r.reasons
            .iter()
            .any(|x| x.text.contains("invalid choice: 'xgrammar'")),
        "{r:?}"
    );
    let f = facts(model(GIB, serde_json::json!({})), "0.6.5");
    assert!(blocked_variants(&judge(&plan(cmd, ""), &f)[0], "bench_command_invalid").is_empty());
    // Clone evidence wins over the release: the commit is in the parent's history.
    let mut f = facts(model(GIB, serde_json::json!({})), "0.6.4");
    for v in ["baseline", "agent:a", "human"] {
        let mut e = BTreeMap::new();
        e.insert(
            "--guided-decoding-backend=xgrammar".to_string(),
            Known::Yes(false),
        );
        f.commits[0].rule_evidence.insert(v.into(), e);
    }
    assert!(blocked_variants(&judge(&plan(cmd, ""), &f)[0], "bench_command_invalid").is_empty());
}

#[test]
fn downloads_beyond_the_caches_free_space_are_a_named_risk() {
    let p = plan(LAT, "");
    let mut f = facts(model(30 * GIB, serde_json::json!({})), "0.6.0");
    f.host.cache_free = Some(20 * GIB);
    let r = &judge(&p, &f)[0];
    assert_eq!(r.verdict, Verdict::AtRisk, "{r:?}");
    let why = r
        .reasons
        .iter()
        .find(|x| x.category == "disk_full")
        .unwrap();
    assert!(
        why.text.contains("20.0 GiB free") || why.text.contains("20 GiB"),
        "{}",
        why.text
    );
    // Already in the cache: nothing to download.
    f.models.get_mut("org/m").unwrap().source = "hf cache".into();
    assert_eq!(judge(&p, &f)[0].verdict, Verdict::Ready);
    // Room enough.
    f.models.get_mut("org/m").unwrap().source = "hub".into();
    f.host.cache_free = Some(400 * GIB);
    assert_eq!(judge(&p, &f)[0].verdict, Verdict::Ready);
}

/// A patch with files outside the package: preflight says beforehand what the night does
/// with them on an installed package (dropped, recorded), and does not block.
#[test]
fn hunks_outside_the_package_are_said_before_the_night() {
    let p = plan(LAT, "");
    let mut f = facts(model(GIB, serde_json::json!({})), "0.6.0");
    f.commits[0].patches.insert(
        "agent:a".into(),
        PatchState::Present {
            path: "p.diff".into(),
            checked: Known::Yes(()),
            needs_build: vec![],
            outside_package: vec!["tests/test_x.py".into()],
        },
    );
    let r = &judge(&p, &f)[0];
    assert_eq!(r.verdict, Verdict::Ready, "{r:?}");
    assert!(
        r.unchecked
            .iter()
            .any(|u| u.contains("tests/test_x.py") && u.contains("dropped")),
        "{r:?}"
    );
}
