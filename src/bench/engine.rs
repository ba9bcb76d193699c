//! `nightshift bench engine`: the engine with the sim runtime at max speed over many runs,
//! with the store and log writers attached as in a real sweep; prints runs/s and peak RSS.

use crate::engine::{Engine, EngineOptions};
use crate::runtime::sim::{SimRuntime, Speed};
use std::sync::Arc;
use std::time::Instant;

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
    let plan = Arc::new(crate::plan::synthetic::synthetic_plan(runs));
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
    let result = crate::rt::block_on(async {
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
        let plan = Arc::new(crate::plan::synthetic::synthetic_plan_with_unknowns(
            runs, 3,
        ));
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
