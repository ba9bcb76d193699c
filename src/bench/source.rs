//! `nightshift bench source`: what reading a variant's own tree costs preflight. The
//! argparse reader on real vLLM sources (the releases `scripts/vllm-sources.py` keeps), and
//! the whole per-variant path: the files shown by git from a clone, read, and the flag
//! rules' evidence, as `preflight` runs it for each variant.

use crate::plan::clone::Clone;
use crate::rewrite::argparse_src::read;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const FILES: &[&str] = &[
    "vllm/engine/arg_utils.py",
    "vllm/entrypoints/openai/cli_args.py",
    "benchmarks/benchmark_serving.py",
    "benchmarks/benchmark_latency.py",
];

fn sources() -> PathBuf {
    std::env::var_os("NIGHTSHIFT_VLLM_SOURCES")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|h| PathBuf::from(h).join(".cache/nightshift/real-vllm/sources"))
        })
        .unwrap_or_default()
}

fn git(dir: &Path, args: &[&str]) -> anyhow::Result<String> {
    let o = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "b")
        .env("GIT_AUTHOR_EMAIL", "b@b")
        .env("GIT_COMMITTER_NAME", "b")
        .env("GIT_COMMITTER_EMAIL", "b@b")
        .output()?;
    anyhow::ensure!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    Ok(String::from_utf8_lossy(&o.stdout).trim().to_string())
}

pub fn run(runs: usize, out: &mut dyn Write) -> anyhow::Result<()> {
    let src = sources();
    let releases: Vec<String> = ["0.6.4.post1", "0.6.5"]
        .iter()
        .filter(|r| src.join(r).join(FILES[0]).is_file())
        .map(|r| r.to_string())
        .collect();
    anyhow::ensure!(
        !releases.is_empty(),
        "no vLLM sources under {} (scripts/vllm-sources.py fetches them)",
        src.display()
    );
    let n = runs.clamp(1, 200);
    writeln!(
        out,
        "argparse source reader, {n} reads each (vLLM's own files):"
    )?;
    for r in &releases {
        for f in FILES {
            let Ok(text) = std::fs::read_to_string(src.join(r).join(f)) else {
                continue;
            };
            let t = Instant::now();
            let mut options = 0;
            for _ in 0..n {
                options = read(&text).map_or(0, |o| o.set.options.len());
            }
            let per = t.elapsed().as_secs_f64() / n as f64;
            writeln!(
                out,
                "  {r:<12} {f:<38} {:>6.1} KB  {options:>4} options  {:>7.3} ms  {:>6.1} MB/s",
                text.len() as f64 / 1024.0,
                per * 1e3,
                text.len() as f64 / per / 1e6
            )?;
        }
    }
    // The per-variant path: a clone holding the first release's files, git shows them.
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path();
    git(dir, &["init", "-q"])?;
    for f in FILES
        .iter()
        .chain(["vllm/config.py", "vllm/worker/model_runner.py"].iter())
    {
        let from = src.join(&releases[0]).join(f);
        if from.is_file() {
            let to = dir.join(f);
            std::fs::create_dir_all(to.parent().unwrap_or(dir))?;
            std::fs::copy(from, to)?;
        }
    }
    git(dir, &["add", "-A"])?;
    git(dir, &["commit", "-qm", "release"])?;
    let rev = git(dir, &["rev-parse", "HEAD"])?;
    let clone = Clone::open(dir).ok_or_else(|| anyhow::anyhow!("the bench clone does not open"))?;
    let cmds = [
        "python benchmarks/benchmark_serving.py --model m --enable-prefix-caching --enable-chunked-prefill",
        "python benchmarks/benchmark_latency.py --model m --speculative-model '[ngram]' --num-speculative-tokens 5",
    ];
    let m = n.min(20);
    writeln!(
        out,
        "per variant in preflight (git cat-file + read + rules), {m} each:"
    )?;
    for cmd in cmds {
        let view = crate::command::CommandView::parse(cmd).map_err(anyhow::Error::msg)?;
        let kind = view.kind.unwrap_or_default();
        let t = Instant::now();
        let mut told = false;
        for _ in 0..m {
            told = crate::preflight::source::flags_at(&clone, &rev, &view, kind).is_some();
            let _ = crate::preflight::source::rule_evidence(&clone, &rev, &view);
        }
        writeln!(
            out,
            "  {:<10} {:>7.2} ms per variant (tree told: {told})",
            kind.as_str(),
            t.elapsed().as_secs_f64() * 1e3 / m as f64
        )?;
    }
    Ok(())
}
