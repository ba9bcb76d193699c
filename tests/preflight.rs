//! `nightshift preflight` on a plan over a real git clone with release tags and an HF cache
//! holding config.json and the safetensors index of its models, with no network
//! (`--offline`): eras from history, the Llama 3.1 rope on old vLLM, weights vs GPU memory,
//! agent patches checked with `git apply --check` on the parent, a commit with no command.

mod common;

use common::git;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

struct Fixture {
    _tmp: tempfile::TempDir,
    plan: std::path::PathBuf,
    /// name → full hash
    commits: Vec<(&'static str, String)>,
}

fn write(p: &Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn commit(dir: &Path, file: &str, text: &str, msg: &str) -> String {
    write(&dir.join(file), text);
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", msg]);
    git(dir, &["rev-parse", "HEAD"]).trim().to_string()
}

/// A model in the HF cache layout: refs/main → snapshot with config.json and the index.
fn cached_model(hub: &Path, id: &str, config: &str, total: u64) {
    let repo = hub.join(format!("models--{}", id.replace('/', "--")));
    write(
        &repo.join("refs/main"),
        "0123456789abcdef0123456789abcdef01234567",
    );
    let snap = repo.join("snapshots/0123456789abcdef0123456789abcdef01234567");
    write(&snap.join("config.json"), config);
    write(
        &snap.join("model.safetensors.index.json"),
        &format!(
            r#"{{"metadata": {{"total_size": {total}}}, "weight_map": {{"a": "model-00001-of-00001.safetensors"}}}}"#
        ),
    );
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("vllm");
    std::fs::create_dir_all(&src).unwrap();
    git(&src, &["init", "-q"]);
    let models = "vllm/model_executor/models/__init__.py";
    let old_base = commit(
        &src,
        models,
        "_MODELS = {\n    \"LlamaForCausalLM\": (\"llama\", \"LlamaForCausalLM\"),\n}\n",
        "v0.4.0",
    );
    git(&src, &["tag", "v0.4.0"]);
    let old = commit(&src, "vllm/core/scheduler.py", "x = 1\n", "old pr");
    let new_base = commit(&src, "vllm/core/block.py", "y = 1\n", "more");
    git(&src, &["tag", "v0.6.0"]);
    let new = commit(&src, "vllm/core/scheduler.py", "x = 2\n", "new pr");
    let huge = commit(&src, "vllm/core/other.py", "z = 1\n", "huge pr");
    let nocmd = commit(&src, "vllm/core/other.py", "z = 2\n", "no command");

    let hub = tmp.path().join("hf/hub");
    let llama = r#"{"architectures": ["LlamaForCausalLM"], "torch_dtype": "bfloat16"}"#;
    cached_model(&hub, "org/small-llama", llama, 16_060_522_496);
    cached_model(
        &hub,
        "org/llama-3.1-8b",
        r#"{"architectures": ["LlamaForCausalLM"], "torch_dtype": "bfloat16",
            "rope_scaling": {"factor": 8.0, "rope_type": "llama3", "low_freq_factor": 1.0}}"#,
        16_060_522_496,
    );
    cached_model(&hub, "org/huge-moe", llama, 700_000_000_000);

    // Patches: one applies to the parent of `new`, one does not (context that is not there).
    let patches = tmp.path().join("patches");
    let good = "diff --git a/vllm/core/block.py b/vllm/core/block.py\n--- a/vllm/core/block.py\n+++ b/vllm/core/block.py\n@@ -1 +1 @@\n-y = 1\n+y = 3\n";
    let bad = "diff --git a/vllm/core/block.py b/vllm/core/block.py\n--- a/vllm/core/block.py\n+++ b/vllm/core/block.py\n@@ -1 +1 @@\n-y = 42\n+y = 43\n";
    write(&patches.join(format!("{}.diff", &new[..8])), good);
    write(&patches.join(format!("{}.diff", &old[..8])), good);
    write(&patches.join(format!("{}.diff", &huge[..8])), bad);
    // `nocmd` and the missing-patch commit have no patch file.

    // Another commit on the new era whose patch file was never copied to the box.
    let missing_patch = commit(&src, "vllm/core/third.py", "w = 1\n", "missing patch");
    let cmd = |m: &str| {
        format!("python benchmarks/benchmark_throughput.py --model {m} --input-len 128 --output-len 128")
    };
    let entry = |c: &str, p: &str, m: &str, command: Option<String>| {
        let mut s = format!("\n[[commits]]\ncommit = \"{c}\"\nparent = \"{p}\"\nmodel = \"{m}\"\ngpu_config = \"H100:1\"\n");
        if let Some(cmd) = command {
            s += &format!("perf_command = '''{cmd}'''\n");
        }
        s
    };
    let mut text = format!(
        r#"schema_version = 1
name = "preflight-fixture"
[defaults]
hf_cache = "{hf}"
vllm_src = "{src}"
gpu_type = "H100"
[images]
org = "nightshift-test"
[[agents]]
id = "claude_code"
patch = "patches/{{commit8}}.diff"
"#,
        hf = tmp.path().join("hf").display(),
        src = src.display(),
    );
    text += &entry(
        &new,
        &new_base,
        "org/small-llama",
        Some(cmd("org/small-llama")),
    );
    text += &entry(
        &old,
        &old_base,
        "org/llama-3.1-8b",
        Some(cmd("org/llama-3.1-8b")),
    );
    text += &entry(&huge, &new, "org/huge-moe", Some(cmd("org/huge-moe")));
    text += &entry(
        &missing_patch,
        &nocmd,
        "org/small-llama",
        Some(cmd("org/small-llama")),
    );
    text += &entry(&nocmd, &huge, "org/small-llama", None);
    let plan = tmp.path().join("plan.toml");
    std::fs::write(&plan, text).unwrap();
    Fixture {
        _tmp: tmp,
        plan,
        commits: vec![
            ("ready", new),
            ("llama31_on_v0_4", old),
            ("too_large", huge),
            ("missing_patch", missing_patch),
            ("no_command", nocmd),
        ],
    }
}

fn preflight(plan: &Path, extra: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nightshift"))
        .arg("preflight")
        .arg(plan)
        .args(extra)
        .env("XDG_CACHE_HOME", plan.parent().unwrap().join("cache"))
        .env_remove("HF_TOKEN")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn by_commit<'a>(doc: &'a Value, full: &str) -> &'a Value {
    doc["commits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["commit"] == full)
        .unwrap_or_else(|| panic!("{full} not in the report: {doc:#}"))
}

fn categories(c: &Value, variant_prefix: &str) -> Vec<String> {
    c["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["variant"].as_str().unwrap().starts_with(variant_prefix))
        .map(|r| r["category"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn verdicts_from_history_cache_and_patches() {
    let f = fixture();
    let (code, out, err) = preflight(
        &f.plan,
        &["--json", "--offline", "--no-docker", "--gpus", "8"],
    );
    assert_eq!(code, 1, "some commits are blocked: {err}");
    let doc: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let get = |name: &str| {
        let full = &f.commits.iter().find(|(n, _)| *n == name).unwrap().1;
        by_commit(&doc, full).clone()
    };

    let ready = get("ready");
    assert_eq!(ready["verdict"], "ready", "{ready:#}");
    assert!(
        ready["eras"]["human"]
            .as_str()
            .unwrap()
            .starts_with("0.6.0"),
        "{ready:#}"
    );

    let rope = get("llama31_on_v0_4");
    assert_eq!(rope["verdict"], "blocked", "{rope:#}");
    assert!(
        categories(&rope, "").contains(&"rope_scaling_incompatible".to_string()),
        "{rope:#}"
    );
    assert!(rope["eras"]["baseline"]
        .as_str()
        .unwrap()
        .starts_with("0.4.0"));

    let big = get("too_large");
    assert_eq!(big["verdict"], "blocked");
    assert!(
        categories(&big, "all").contains(&"model_too_large".to_string()),
        "{big:#}"
    );
    // Its patch does not apply to its parent: the agent variant is named.
    assert!(
        categories(&big, "agent").contains(&"agent_patch_failed".to_string()),
        "{big:#}"
    );

    let missing = get("missing_patch");
    assert_eq!(missing["verdict"], "blocked");
    assert_eq!(
        categories(&missing, "agent"),
        ["agent_patch_failed"],
        "{missing:#}"
    );
    assert!(categories(&missing, "human").is_empty() && categories(&missing, "all").is_empty());

    let none = get("no_command");
    assert_eq!(none["verdict"], "blocked");
    assert!(categories(&none, "").contains(&"no_command".to_string()));

    assert_eq!(doc["summary"]["commits"], 5);
    assert_eq!(doc["summary"]["ready"], 1);
    assert_eq!(doc["summary"]["blocked"], 4);
    // Offline: the images were not asked about, and that is said.
    assert!(
        ready["unchecked"]
            .as_array()
            .unwrap()
            .iter()
            .any(|u| u.as_str().unwrap().contains("image")),
        "{ready:#}"
    );
}

#[test]
fn the_table_names_each_blocked_commit_and_bad_plans_exit_2() {
    let f = fixture();
    let (code, out, _) = preflight(&f.plan, &["--offline", "--no-docker", "--gpus", "8"]);
    assert_eq!(code, 1);
    for (name, full) in &f.commits[1..] {
        assert!(out.contains(&full[..8]), "{name} missing from:\n{out}");
    }
    assert!(
        out.contains("preflight: 5 commits: 1 ready, 0 at risk, 4 blocked"),
        "{out}"
    );
    let (code, _, err) = preflight(Path::new("/nonexistent/plan.toml"), &[]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn too_few_gpus_block_and_an_unknown_box_is_unchecked() {
    let f = fixture();
    let (_, out, _) = preflight(&f.plan, &["--json", "--offline", "--no-docker"]);
    let doc: Value = serde_json::from_str(&out).unwrap();
    let ready = by_commit(&doc, &f.commits[0].1);
    // No NVML here and no --gpus: the GPU count is listed as unchecked, not passed.
    assert!(
        ready["unchecked"]
            .as_array()
            .unwrap()
            .iter()
            .any(|u| u.as_str().unwrap().contains("GPU count")),
        "{ready:#}"
    );
    let (_, out, _) = preflight(
        &f.plan,
        &["--json", "--offline", "--no-docker", "--gpus", "0"],
    );
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(by_commit(&doc, &f.commits[0].1)["verdict"], "blocked");
}

/// A plan named relative to where the operator stands: its patch paths are read from the
/// plan's folder, not from the clone's (where git runs).
#[test]
fn a_relative_plan_path_finds_its_patches() {
    let f = fixture();
    let dir = f.plan.parent().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_nightshift"))
        .args([
            "preflight",
            "plan.toml",
            "--json",
            "--offline",
            "--no-docker",
            "--gpus",
            "8",
        ])
        .current_dir(dir)
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ready = by_commit(&doc, &f.commits[0].1);
    assert_eq!(ready["verdict"], "ready", "{ready:#}");
}

/// From named to fixed: `--suggest` writes the substitute model kept as data for a Llama 3.1
/// commit on vLLM before 0.5.3.post1; `--fixes` applies it to every variant (preflight no
/// longer blocks it), and a sweep run with it records the fix where the morning reads.
#[test]
fn suggest_writes_a_substitute_that_fixes_apply_and_record() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("vllm");
    std::fs::create_dir_all(&src).unwrap();
    git(&src, &["init", "-q"]);
    let models = "vllm/model_executor/models/__init__.py";
    let base = commit(
        &src,
        models,
        "_MODELS = {\n    \"LlamaForCausalLM\": (\"llama\", \"LlamaForCausalLM\"),\n}\n",
        "v0.4.0",
    );
    git(&src, &["tag", "v0.4.0"]);
    let pr = commit(&src, "vllm/core/scheduler.py", "x = 1\n", "pr");
    let hub = tmp.path().join("hf/hub");
    cached_model(
        &hub,
        "meta-llama/Llama-3.1-8B-Instruct",
        r#"{"architectures": ["LlamaForCausalLM"], "torch_dtype": "bfloat16",
            "rope_scaling": {"factor": 8.0, "rope_type": "llama3"}}"#,
        16_060_522_496,
    );
    cached_model(
        &hub,
        "meta-llama/Meta-Llama-3-8B-Instruct",
        r#"{"architectures": ["LlamaForCausalLM"], "torch_dtype": "bfloat16"}"#,
        16_060_522_496,
    );
    let text = format!(
        "schema_version = 1\nname = \"fixes\"\n[defaults]\nhf_cache = \"{}\"\nvllm_src = \"{}\"\ngpu_type = \"H100\"\nvariants = [\"baseline\", \"human\"]\n[images]\norg = \"o\"\n[[commits]]\ncommit = \"{pr}\"\nparent = \"{base}\"\nmodel = \"meta-llama/Llama-3.1-8B-Instruct\"\ngpu_config = \"H100:1\"\nperf_command = '''python benchmarks/benchmark_throughput.py --model meta-llama/Llama-3.1-8B-Instruct --input-len 128 --output-len 128'''\n",
        tmp.path().join("hf").display(),
        src.display()
    );
    let plan = tmp.path().join("plan.toml");
    std::fs::write(&plan, text).unwrap();
    let args = ["--offline", "--no-docker", "--gpus", "8"];
    let (code, out, err) = preflight(&plan, &[&args[..], &["--suggest"]].concat());
    assert_eq!(code, 0, "{out}{err}");
    let fixes = tmp.path().join("plan.fixes.toml");
    let written = std::fs::read_to_string(&fixes).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    assert!(written.contains("kind = \"substitute_model\""), "{written}");
    assert!(
        written.contains("--model meta-llama/Meta-Llama-3-8B-Instruct"),
        "{written}"
    );
    assert!(out.contains("1 of 1 blocked commits have a fix"), "{out}");

    // Judged with the fix: the rope block is gone for every variant.
    let f = fixes.to_str().unwrap();
    let (_, out, err) = preflight(&plan, &[&args[..], &["--json", "--fixes", f]].concat());
    let doc: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    let c = by_commit(&doc, &pr);
    assert!(
        !categories(c, "").contains(&"rope_scaling_incompatible".to_string()),
        "{c:#}"
    );
    assert_eq!(c["model"], "meta-llama/Meta-Llama-3-8B-Instruct", "{c:#}");

    // A sweep run with it: the fix is in the results and the digest.
    let store = tmp.path().join("store");
    let o = Command::new(env!("CARGO_BIN_EXE_nightshift"))
        .args([
            "run",
            plan.to_str().unwrap(),
            "--runtime",
            "sim",
            "--headless",
            "--gpus",
            "1",
            "--speed",
            "max",
        ])
        .args(["--fixes", f, "--store", store.to_str().unwrap()])
        .env("XDG_CACHE_HOME", tmp.path().join("cache"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(
        said.contains("fixed before the night: measured with a substitute model"),
        "{said}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let results = Command::new(env!("CARGO_BIN_EXE_nightshift"))
        .args(["results", "--store", store.to_str().unwrap()])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&results.stdout);
    assert!(table.contains("fixed before the night: measured with a substitute model, meta-llama/Meta-Llama-3-8B-Instruct"), "{table}");
    let digest = std::fs::read_to_string(store.join("digest.md")).unwrap();
    assert!(digest.contains("## Fixed before the night (1)"), "{digest}");

    // A bad fixes file is refused with its place, exit 2.
    std::fs::write(&fixes, "[[fix]]\ncommit = \"zz\"\n").unwrap();
    let (code, _, err) = preflight(&plan, &[&args[..], &["--fixes", f]].concat());
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("plan.fixes.toml"), "{err}");
}

/// The table is for 80 columns (#34): the example plan's 95 commits, offline and without
/// their agent patches, say each shared finding once with its count (not 86 times), and
/// every line but the one-line summary fits 80 columns.
#[test]
fn the_table_reads_at_80_columns_and_says_a_shared_finding_once() {
    let plan = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/iso-vllm.toml");
    let home = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_nightshift"))
        .args(["preflight", plan, "--offline", "--no-docker", "--gpus", "8"])
        .env("HF_HOME", home.path())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    for l in out.lines().filter(|l| !l.starts_with("preflight:")) {
        assert!(l.chars().count() <= 80, "wider than 80: {l}");
    }
    let shared = out
        .split("said once for the commits that share it:")
        .nth(1)
        .unwrap_or_else(|| panic!("no shared findings:\n{out}"));
    assert!(shared.contains("agent_patch_failed"), "{shared}");
    assert!(
        shared.contains("<commit>"),
        "the hash said as a place: {shared}"
    );
    let refs = out.matches("agent_patch_failed [").count();
    let full = out.matches("model_patch.diff").count();
    assert!(refs >= 3, "each commit names it by its letter: {refs}");
    assert_eq!(full, 1, "its words said once:\n{out}");
    assert!(
        out.lines().any(|l| l.starts_with("preflight: 95 commits")),
        "{out}"
    );
}
