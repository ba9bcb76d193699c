//! `nightshift bench engine`: the engine with the sim runtime at max speed over many runs,
//! with the store and log writers attached as in a real sweep; prints runs/s and peak RSS.

use crate::engine::{Engine, EngineOptions};
use crate::plan::Plan;
use crate::runtime::sim::{SimRuntime, Speed};
use std::fmt::Write;
use std::sync::Arc;
use std::time::Instant;

/// A synthetic plan with `runs` runs (commits × baseline/human/agent), a realistic mix of
/// kinds and failures, kept in memory.
pub fn synthetic_plan(runs: usize) -> Plan {
    synthetic_plan_of(runs, &["serving", "throughput", "latency"])
}

/// [`synthetic_plan`] with only the benchmark kinds named (`serving`, `throughput`,
/// `latency`), in turn.
pub fn synthetic_plan_of(runs: usize, kinds: &[&str]) -> Plan {
    Plan::from_str_at(
        "bench.toml",
        synthetic_plan_text(runs, kinds),
        std::path::Path::new("."),
        std::path::Path::new("bench.toml"),
    )
    .expect("synthetic plan is valid")
}

/// The TOML of [`synthetic_plan_of`], for benchmarks that hand a plan file to a daemon.
pub fn synthetic_plan_text(runs: usize, kinds: &[&str]) -> String {
    synthetic_plan_text_logging(runs, kinds, 0)
}

/// [`synthetic_plan_text`] where every run's server prints `log_kb` KB of request logs.
pub fn synthetic_plan_text_logging(runs: usize, kinds: &[&str], log_kb: u64) -> String {
    let commits = runs.div_ceil(3);
    let mut t = String::from(
        "schema_version = 1\nname = \"bench\"\n[defaults]\nvariants = [\"baseline\", \"human\", \"agent\"]\n[[agents]]\nid = \"a\"\n",
    );
    let cmds = [
        ("serving", "python benchmarks/benchmark_serving.py --model m/x --num-prompts 100"),
        ("throughput", "python benchmarks/benchmark_throughput.py --model m/x --input-len 256 --output-len 256"),
        ("latency", "python benchmarks/benchmark_latency.py --model m/x --batch-size 1"),
    ];
    let cmds: Vec<_> = cmds.iter().filter(|(k, _)| kinds.contains(k)).collect();
    let fails = [
        "",
        "",
        "",
        "broken_pipe",
        "cuda_oom",
        "no_metrics",
        "aimv2_conflict",
        "image_not_found",
    ];
    for i in 0..commits {
        let (_, cmd) = cmds[i % cmds.len()];
        // Run keys use the first 12 hex digits of the commit: keep them distinct.
        let _ = writeln!(t, "[[commits]]\ncommit = \"{i:012x}{:028x}\"\nparent = \"{i:012x}{:028x}\"\nmodel = \"m/x\"\ngpu_config = \"H100:1\"\nperf_command = '''{cmd}'''", 0xabc, 0xdef);
        let f = fails[i % fails.len()];
        if !f.is_empty() {
            let _ = writeln!(
                t,
                "sim = {{ fail = \"{f}\", transient = true, log_kb = {log_kb} }}"
            );
        } else if log_kb > 0 {
            let _ = writeln!(t, "sim = {{ log_kb = {log_kb} }}");
        }
    }
    t
}

fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
}

/// `bench engine`: the product's path — the engine with the sled store (a flush per state
/// transition) and the full-log writer attached, on the sim at max speed.
pub fn engine(runs: usize) -> i32 {
    let plan = Arc::new(synthetic_plan(runs));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio");
    let n = plan.runs.len();
    let tmp = match tempfile::tempdir() {
        Ok(t) => t,
        Err(e) => {
            tracing::error!("a temporary store: {e}");
            return 1;
        }
    };
    let prepared = crate::store::Store::open(&tmp.path().join("store"), true)
        .map_err(anyhow::Error::from)
        .and_then(|s| {
            crate::store::resume::prepare(s, &plan, &crate::store::resume::ResumeOptions::default())
        });
    let (obs, state, _) = match prepared {
        Ok(p) => p,
        Err(e) => {
            tracing::error!("store: {e:#}");
            return 1;
        }
    };
    let keys = plan.runs.iter().map(|r| r.key.clone()).collect();
    let logs = crate::engine::logs::LogWriter::new(tmp.path().join("logs"), keys);
    let started = Instant::now();
    let result = rt.block_on(async {
        let (engine, _cmds) = Engine::new(
            plan.clone(),
            Arc::new(SimRuntime::new(Speed::Max)),
            EngineOptions {
                gpus: 8,
                seed: 1,
                wait_for_operator: false,
            },
        );
        let mut engine = engine.with_state(state).with_time_scale(0.0);
        // As the daemon wires them: the I/O on threads of its own.
        engine.observe(crate::engine::offthread::logs(logs)?);
        engine.observe(crate::engine::offthread::store(obs)?);
        engine.run(tokio_util::sync::CancellationToken::new()).await
    });
    let elapsed = started.elapsed();
    match result {
        Ok((summary, _)) => {
            println!(
                "engine bench (store and log writers attached): {n} runs ({} finished) in {:.3}s",
                summary.counts.done(),
                elapsed.as_secs_f64()
            );
            println!("  runs/s       {:.0}", n as f64 / elapsed.as_secs_f64());
            if let Some(kib) = peak_rss_kib() {
                println!("  peak RSS     {:.1} MiB", kib as f64 / 1024.0);
            }
            println!(
                "  success {} failed {} skipped {}",
                summary.counts.success, summary.counts.failed, summary.counts.skipped
            );
            0
        }
        Err(e) => {
            tracing::error!("{e:#}");
            1
        }
    }
}

/// [`synthetic_plan_of`] (serving) where every `every`-th commit fails with an error no
/// signature names on every variant, retry or not: a night with unknown failures to group.
pub fn synthetic_plan_with_unknowns(runs: usize, every: usize) -> Plan {
    let mut t = String::new();
    for (i, block) in synthetic_plan_text(runs, &["serving"])
        .split("[[commits]]\n")
        .enumerate()
    {
        if i == 0 {
            t.push_str(block);
            continue;
        }
        t.push_str("[[commits]]\n");
        // Blocks count from 1: commit i - 1.
        if (i - 1) % every.max(1) == 1 {
            let kept: Vec<&str> = block.lines().filter(|l| !l.starts_with("sim = ")).collect();
            t.push_str(&kept.join("\n"));
            t.push_str("\nsim = { fail = \"other\" }\n");
        } else {
            t.push_str(block);
        }
    }
    Plan::from_str_at(
        "bench.toml",
        t,
        std::path::Path::new("."),
        std::path::Path::new("bench.toml"),
    )
    .expect("synthetic plan is valid")
}

/// `bench groups [--runs N] [--store DIR]`: how long a store of N runs (a third of its
/// commits failing with an unknown error) takes to group its failures, as `results`,
/// `show` and `diagnose --learn` do (from the run summaries in memory), median of 5. With
/// `--store DIR` the filled store is kept and a second call only measures.
pub fn groups(runs: usize, keep: Option<&std::path::Path>) -> i32 {
    let tmp;
    let dir = match keep {
        Some(d) => d.to_path_buf(),
        None => {
            tmp = match tempfile::tempdir() {
                Ok(t) => t,
                Err(e) => {
                    tracing::error!("a temporary store: {e}");
                    return 1;
                }
            };
            tmp.path().join("store")
        }
    };
    if !dir.join("db").is_file() {
        let plan = Arc::new(synthetic_plan_with_unknowns(runs, 3));
        match crate::daemon::commands::fill_store(&plan, &dir) {
            Ok(d) => println!(
                "groups bench: filled {} runs in {:.1}s (sim at max speed)",
                plan.runs.len(),
                d.as_secs_f64()
            ),
            Err(c) => return c,
        }
    }
    let store = match crate::store::Store::open(&dir, false) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("{e}");
            return 2;
        }
    };
    let n = store.runs().len();
    let mut ms = Vec::new();
    let mut groups = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        groups = crate::daemon::results::groups_of(&store);
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    ms.sort_by(f64::total_cmp);
    let failures: usize = groups.iter().map(|g| g.count).sum();
    println!(
        "groups bench: {n} runs, {failures} unknown failures in {} group(s) in {}",
        groups.len(),
        dir.display()
    );
    println!(
        "  grouping           {:.1} ms (median of 5; {:.1}–{:.1})",
        ms[ms.len() / 2],
        ms[0],
        ms[ms.len() - 1]
    );
    0
}
