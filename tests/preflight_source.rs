//! Preflight reading vLLM's own source at each variant's revision: a git clone whose commits
//! carry the real argparse definitions and engine code of vLLM releases (from their PyPI
//! sdists, fetched by `scripts/vllm-sources.py`, sha256 checked, never kept in the repo).
//! What the seed plan needs of it: an option the PR under test adds (`xgrammar` for
//! `--guided-decoding-backend`), a `BooleanOptionalAction` that came in a release
//! (`--no-enable-prefix-caching`), and option combinations whose failing code a tree holds
//! (chunked prefill × prefix caching before e3580537; ngram without its lookup window).

mod common;

use common::git;
use nightshift::rewrite::argparse_src::read;
use nightshift::rewrite::flags::Arity;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const FILES: &[&str] = &[
    "vllm/engine/arg_utils.py",
    "vllm/entrypoints/openai/cli_args.py",
    "vllm/config.py",
    "vllm/worker/model_runner.py",
    "benchmarks/benchmark_serving.py",
    "benchmarks/benchmark_latency.py",
];

/// The releases' sources, or why they cannot be had (CI fails then; elsewhere SKIP).
fn sources() -> Option<PathBuf> {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new("python3")
        .arg(format!("{root}/scripts/vllm-sources.py"))
        .output();
    let why = match out {
        Ok(o) if o.status.success() => {
            return Some(PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        }
        Ok(o) => String::from_utf8_lossy(&o.stderr).into_owned(),
        Err(e) => e.to_string(),
    };
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("CI=true and vLLM's sources could not be fetched from PyPI: {why}");
    }
    eprintln!("SKIP: vLLM's sources could not be fetched from PyPI: {why}");
    None
}

fn release(src: &Path, v: &str, path: &str) -> String {
    std::fs::read_to_string(src.join(v).join(path)).unwrap()
}

#[test]
fn the_real_argparse_definitions_read_per_release() {
    let Some(src) = sources() else { return };
    let engine = |v: &str| read(&release(&src, v, "vllm/engine/arg_utils.py")).unwrap();
    let old = engine("0.6.4.post1").set;
    let new = engine("0.6.5").set;
    assert!(old.complete && new.complete && old.underscores);
    assert!(old.options.len() > 80, "{}", old.options.len());
    assert_eq!(
        old.choices("--guided-decoding-backend").unwrap(),
        ["outlines", "lm-format-enforcer"]
    );
    assert!(new
        .choices("--guided-decoding-backend")
        .unwrap()
        .contains(&"xgrammar".to_string()));
    assert_eq!(old.arity("--enable-prefix-caching"), Some(Arity::Flag));
    assert!(!old.accepts("--no-enable-prefix-caching"));
    assert_eq!(new.arity("--no-enable-prefix-caching"), Some(Arity::Flag));
    assert_eq!(old.arity("--enable-chunked-prefill"), Some(Arity::Optional));
    assert_eq!(old.arity("--tensor-parallel-size"), Some(Arity::One));
    assert_eq!(old.arity("-tp"), Some(Arity::One));
    // The latency script adds the engine's options; the serving script has its own.
    let latency = read(&release(
        &src,
        "0.6.4.post1",
        "benchmarks/benchmark_latency.py",
    ))
    .unwrap();
    assert!(latency.engine_args);
    assert!(latency.set.accepts("--num-iters-warmup"));
    let serving = read(&release(
        &src,
        "0.6.4.post1",
        "benchmarks/benchmark_serving.py",
    ))
    .unwrap();
    assert!(!serving.engine_args && serving.set.accepts("--max-concurrency"));
    assert!(serving.set.choices("--dataset-name").is_some());
    let server = read(&release(
        &src,
        "0.6.4.post1",
        "vllm/entrypoints/openai/cli_args.py",
    ));
    assert!(server.unwrap().set.accepts("--api-key"));
}

struct Clone {
    dir: PathBuf,
}

impl Clone {
    /// A commit whose tree holds `v`'s files (those it has), over what was there.
    fn commit(&self, v: &str, src: &Path, only: &[&str], msg: &str) -> String {
        for f in FILES.iter().filter(|f| only.is_empty() || only.contains(f)) {
            let from = src.join(v).join(f);
            if from.exists() {
                let to = self.dir.join(f);
                std::fs::create_dir_all(to.parent().unwrap()).unwrap();
                std::fs::copy(&from, &to).unwrap();
            }
        }
        git(&self.dir, &["add", "-A"]);
        git(&self.dir, &["commit", "--allow-empty", "-qm", msg]);
        git(&self.dir, &["rev-parse", "HEAD"])
    }
}

fn preflight(plan: &Path) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_nightshift"))
        .arg("preflight")
        .arg(plan)
        .args(["--json", "--offline", "--no-docker", "--gpus", "8"])
        .env("XDG_CACHE_HOME", plan.parent().unwrap().join("cache"))
        .env_remove("HF_TOKEN")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{e}: {text}{}", String::from_utf8_lossy(&out.stderr)))
}

/// (category, text) of each reason for variants starting with `prefix`.
fn reasons(doc: &Value, commit: &str, prefix: &str) -> Vec<(String, String)> {
    let c = doc["commits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["commit"] == commit)
        .unwrap_or_else(|| panic!("{commit}: {doc:#}"));
    c["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["variant"].as_str().unwrap().starts_with(prefix) || r["variant"] == "all")
        .map(|r| {
            (
                r["category"].as_str().unwrap().to_string(),
                r["text"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn preflight_judges_each_variant_by_its_own_tree() {
    let Some(src) = sources() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let cl = Clone {
        dir: tmp.path().join("vllm"),
    };
    std::fs::create_dir_all(&cl.dir).unwrap();
    git(&cl.dir, &["init", "-q"]);
    // v0.5.5; the PR that let chunked prefill and prefix caching work together (its tree
    // is v0.6.0's model runner); v0.6.4.post1; the PR adding xgrammar (v0.6.5's engine
    // arguments); v0.6.5.
    let r055 = cl.commit("0.5.5", &src, &[], "v0.5.5");
    git(&cl.dir, &["tag", "v0.5.5"]);
    let chunked_pr = cl.commit(
        "0.6.0",
        &src,
        &["vllm/worker/model_runner.py"],
        "chunked + prefix",
    );
    let r064 = cl.commit("0.6.4.post1", &src, &[], "v0.6.4.post1");
    git(&cl.dir, &["tag", "v0.6.4.post1"]);
    let xgrammar_pr = cl.commit("0.6.5", &src, &["vllm/engine/arg_utils.py"], "xgrammar");
    let r065 = cl.commit("0.6.5", &src, &[], "v0.6.5");
    git(&cl.dir, &["tag", "v0.6.5"]);

    let entry = |c: &str, p: &str, cmd: &str| {
        format!("\n[[commits]]\ncommit = \"{c}\"\nparent = \"{p}\"\nmodel = \"org/m\"\ngpu_config = \"H100:1\"\nperf_command = '''{cmd}'''\n")
    };
    let mut text = format!(
        "schema_version = 1\nname = \"source\"\n[defaults]\nhf_cache = \"{}\"\nvllm_src = \"{}\"\ngpu_type = \"H100\"\n[images]\norg = \"nightshift-test\"\n",
        tmp.path().join("hf").display(),
        cl.dir.display()
    );
    text += &entry(&chunked_pr, &r055, "python benchmarks/benchmark_serving.py --model org/m --enable-prefix-caching --enable-chunked-prefill --max-num-batched-tokens 2048");
    text += &entry(
        &xgrammar_pr,
        &r064,
        "python benchmarks/benchmark_serving.py --model org/m --guided-decoding-backend xgrammar",
    );
    text += &entry(&r065, &xgrammar_pr, "python3 benchmarks/benchmark_latency.py --model org/m --batch-size 8 --no-enable-prefix-caching");
    // Same command, on a parent whose engine has no `--no-` spelling yet.
    let plain = cl.commit("0.6.5", &src, &[], "later");
    text += &entry(&plain, &r064, "python3 benchmarks/benchmark_latency.py --model org/m --batch-size 8 --no-enable-prefix-caching");
    text += &entry(&r064, &r055, "python benchmarks/benchmark_latency.py --model org/m --speculative-model '[ngram]' --num-speculative-tokens 5 --input-len 550");
    let plan = tmp.path().join("plan.toml");
    std::fs::write(&plan, text).unwrap();
    let doc = preflight(&plan);

    // Chunked prefill with prefix caching: the parent's model runner raises; the PR's not.
    let base = reasons(&doc, &chunked_pr, "baseline");
    assert!(
        base.iter()
            .any(|(c, t)| c == "server_config_invalid"
                && t.contains("chunked prefill cannot be used")),
        "{base:?}"
    );
    let human = reasons(&doc, &chunked_pr, "human");
    assert!(
        !human.iter().any(|(c, _)| c == "server_config_invalid"),
        "{human:?}"
    );

    // xgrammar: the parent's choices lack it (same release as the PR: only the tree tells).
    let base = reasons(&doc, &xgrammar_pr, "baseline");
    assert!(
        base.iter().any(|(c, t)| c == "bench_command_invalid"
            && t.contains("invalid choice: 'xgrammar'")
            && t.contains("vllm/engine/arg_utils.py")),
        "{base:?}"
    );
    let human = reasons(&doc, &xgrammar_pr, "human");
    assert!(
        !human.iter().any(|(c, _)| c == "bench_command_invalid"),
        "{human:?}"
    );

    // --no-enable-prefix-caching: accepted where the engine defines BooleanOptionalAction.
    let ok = reasons(&doc, &r065, "");
    assert!(
        !ok.iter().any(|(c, _)| c == "bench_command_invalid"),
        "{ok:?}"
    );
    let base = reasons(&doc, &plain, "baseline");
    assert!(
        base.iter()
            .any(|(c, t)| c == "bench_command_invalid" && t.contains("--no-enable-prefix-caching")),
        "{base:?}"
    );
    assert!(!reasons(&doc, &plain, "human")
        .iter()
        .any(|(c, _)| c == "bench_command_invalid"));

    // ngram without its lookup window: every variant's config.py raises.
    for v in ["baseline", "human"] {
        let r = reasons(&doc, &r064, v);
        assert!(
            r.iter()
                .any(|(c, t)| c == "server_config_invalid" && t.contains("ngram")),
            "{v}: {r:?}"
        );
    }
}
