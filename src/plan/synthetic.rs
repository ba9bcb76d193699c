//! Synthetic plans for the benchmarks and tests: many commits, a realistic mix of kinds and
//! failures, with no file behind them.

use super::Plan;
use std::fmt::Write;

/// A synthetic plan with `runs` runs (commits × baseline/human/agent), a realistic mix of
/// kinds and failures, kept in memory.
pub(crate) fn synthetic_plan(runs: usize) -> Plan {
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
pub(crate) fn synthetic_plan_text(runs: usize, kinds: &[&str]) -> String {
    synthetic_plan_text_logging(runs, kinds, 0)
}

/// [`synthetic_plan_text`] where every run's server prints `log_kb` KB of request logs.
pub(crate) fn synthetic_plan_text_logging(runs: usize, kinds: &[&str], log_kb: u64) -> String {
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

/// [`synthetic_plan_of`] (serving) where every `every`-th commit fails with an error no
/// signature names on every variant, retry or not: a night with unknown failures to group.
pub(crate) fn synthetic_plan_with_unknowns(runs: usize, every: usize) -> Plan {
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
