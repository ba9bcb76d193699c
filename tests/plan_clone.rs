//! A plan resolved against a real git clone: abbreviated and upper-case hashes, unknown
//! parents, the files each commit changed, and commits that touch compiled code.

mod common;

use common::git;
use nightshift::plan::{BoxDefaults, Plan};
use std::path::Path;

/// parent: a.py b.py; pr: a.py changed, b.py deleted, c.py added; kernel: csrc/k.cu.
fn clone(dir: &Path) -> (String, String, String) {
    std::fs::create_dir_all(dir.join("vllm")).unwrap();
    git(dir, &["init", "-q"]);
    std::fs::write(dir.join("vllm/a.py"), "a = 1\n").unwrap();
    std::fs::write(dir.join("vllm/b.py"), "b = 1\n").unwrap();
    git(dir, &["add", "."]);
    git(dir, &["commit", "-qm", "parent"]);
    let parent = git(dir, &["rev-parse", "HEAD"]);
    std::fs::write(dir.join("vllm/a.py"), "a = 2\n").unwrap();
    std::fs::remove_file(dir.join("vllm/b.py")).unwrap();
    std::fs::write(dir.join("vllm/c.py"), "c = 1\n").unwrap();
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", "pr"]);
    let pr = git(dir, &["rev-parse", "HEAD"]);
    std::fs::create_dir_all(dir.join("csrc")).unwrap();
    std::fs::write(dir.join("csrc/k.cu"), "// kernel\n").unwrap();
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", "kernel"]);
    let kernel = git(dir, &["rev-parse", "HEAD"]);
    (parent, pr, kernel)
}

#[test]
fn abbreviated_upper_case_and_parentless_commits_resolve_from_the_clone() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("vllm");
    let (parent, pr, kernel) = clone(&src);
    let plan_text = format!(
        r#"schema_version = 1
[defaults]
vllm_src = "{src}"
variants = ["baseline", "human"]
[images]
human = "org/bench:{{commit}}"
baseline = "org/base:baseline-{{parent12}}"
[[commits]]
commit = "{pr_upper}"
perf_command = '''python benchmarks/benchmark_latency.py --model m'''
images = {{ human = "org/fixed:pr" }}
[[commits]]
commit = "{kernel8}"
parent = "{pr12}"
perf_command = '''python benchmarks/benchmark_latency.py --model m'''
[[commits]]
commit = "deadbeefdead"
parent = "{parent}"
perf_command = '''python benchmarks/benchmark_latency.py --model m'''
"#,
        src = src.display(),
        pr_upper = pr[..8].to_ascii_uppercase(),
        kernel8 = &kernel[..8],
        pr12 = &pr[..12],
    );
    let path = tmp.path().join("plan.toml");
    std::fs::write(&path, plan_text).unwrap();
    let plan = Plan::load_with(&path, &BoxDefaults::default()).unwrap();

    let c0 = &plan.commits[0];
    assert_eq!(
        c0.commit, pr,
        "the abbreviated upper-case hash is the full one"
    );
    assert_eq!(
        c0.parent.as_deref(),
        Some(parent.as_str()),
        "an unknown parent is commit^"
    );
    let mut files: Vec<(char, &str)> = c0
        .changes
        .as_ref()
        .unwrap()
        .iter()
        .map(|f| (f.status, f.path.as_str()))
        .collect();
    files.sort();
    assert_eq!(
        files,
        vec![('A', "vllm/c.py"), ('D', "vllm/b.py"), ('M', "vllm/a.py")]
    );
    assert_eq!(c0.files_changed.len(), 3);
    // Per-commit settings survive an upper-case hash.
    let human = plan
        .runs
        .iter()
        .find(|r| r.key == format!("{}/human", &pr[..12]))
        .unwrap();
    assert_eq!(human.image.as_deref(), Some("org/fixed:pr"));
    let base = plan
        .runs
        .iter()
        .find(|r| r.key == format!("{}/baseline", &pr[..12]))
        .unwrap();
    assert_eq!(
        base.image.as_deref(),
        Some(format!("org/base:baseline-{}", &parent[..12]).as_str())
    );

    let c1 = &plan.commits[1];
    assert_eq!(c1.commit, kernel);
    assert_eq!(c1.parent.as_deref(), Some(pr.as_str()));
    let human = plan
        .runs
        .iter()
        .find(|r| r.key == format!("{}/human", &kernel[..12]))
        .unwrap();
    assert_eq!(
        human.image.as_deref(),
        Some(format!("org/bench:{kernel}").as_str()),
        "a full-hash tag"
    );

    assert!(plan
        .warnings
        .iter()
        .any(|w| w.kind == "not_in_clone" && w.message.contains("deadbeefdead")));
    assert!(
        plan.resolved[0].contains("resolved from"),
        "{:?}",
        plan.resolved
    );

    let mut out = Vec::new();
    nightshift::plan::report::check_summary(&plan, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("resolved from the vLLM clone"), "{text}");
    assert!(
        text.contains(&format!("{} (csrc/k.cu)", &kernel[..8])),
        "{text}"
    );
}

#[test]
fn without_a_clone_it_warns_as_before() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("plan.toml");
    std::fs::write(
        &path,
        "schema_version = 1\n[defaults]\nvllm_src = \"/nonexistent/vllm\"\n[[commits]]\ncommit = \"abcdef12\"\nperf_command = '''python benchmarks/benchmark_latency.py --model m'''\n",
    )
    .unwrap();
    let plan = Plan::load_with(&path, &BoxDefaults::default()).unwrap();
    assert!(plan.resolved.is_empty());
    assert!(plan.warnings.iter().any(|w| w.kind == "unknown_parent"));
}
