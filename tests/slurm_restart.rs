//! The Slurm runtime across a restart of nightshift, against a real Slurm (see tests/slurm.rs):
//! a job still running is followed again, a job that finished meanwhile is read back, and
//! neither is submitted twice.

mod common;

use common::slurm::{plan_file, walk, SERVING};
use nightshift::runtime::slurm::{SlurmConfig, SlurmRuntime};
use nightshift::runtime::{RunEnd, RunSink, Runtime};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// kill -9 of a headless nightshift while its run's job runs, then the same command again:
/// the run follows the same job to its result; nothing is resubmitted.
#[test]
fn slurm_restart_reattaches_without_resubmitting() {
    require_slurm!();
    let tmp = tempfile::tempdir().unwrap();
    let sweep = format!("ns-slurm-rs-{}", std::process::id());
    let path = plan_file(
        tmp.path(),
        &sweep,
        &[("latest", true)],
        // A slow server: the kill lands while the job runs.
        "STANDIN_LOAD_MS=6000 python benchmarks/benchmark_serving.py --model standin/tiny --num-prompts 10",
        r#"["human"]"#,
    );
    let shared = tmp.path().join("shared");
    let store = tmp.path().join("store");
    let run = || {
        let mut c = Command::new(env!("CARGO_BIN_EXE_nightshift"));
        c.arg("run")
            .arg(&path)
            .args([
                "--runtime",
                "slurm",
                "--headless",
                "--gpus",
                "1",
                "--slurm-no-gpu-requests",
            ])
            .arg("--store")
            .arg(&store)
            .arg("--slurm-shared-dir")
            .arg(&shared)
            .env("XDG_CONFIG_HOME", tmp.path().join("config"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        c
    };
    let mut first = run().spawn().unwrap();
    let prefix = format!("ns:{sweep}:");
    let deadline = Instant::now() + Duration::from_secs(90);
    let job_id = loop {
        assert!(Instant::now() < deadline, "the job never ran");
        let q = Command::new("squeue")
            .args(["-h", "-o", "%i|%j|%T"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&q.stdout).into_owned();
        if let Some(l) = text
            .lines()
            .find(|l| l.contains(&prefix) && l.ends_with("|RUNNING"))
        {
            break l.split('|').next().unwrap().to_string();
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    std::thread::sleep(Duration::from_secs(2));
    first.kill().unwrap();
    let killed = first.wait_with_output().unwrap();
    eprintln!(
        "first nightshift killed while job {job_id} ran:\n{}",
        String::from_utf8_lossy(&killed.stdout)
    );

    let out = run().output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("second nightshift:\n{stdout}\n{stderr}");
    assert_eq!(out.status.code(), Some(0), "the resumed sweep succeeds");
    assert!(stdout.contains("success 1"), "one success");
    assert!(
        format!("{stdout}{stderr}").contains(&format!("slurm job {job_id} (")),
        "the restart names the job it follows again"
    );
    assert!(
        !stdout.contains("removed leftover: slurm"),
        "nothing was removed"
    );
    // One job for the run: the first attempt's directory only, its job the one killed over.
    let run_dir = shared.join(&sweep);
    let attempts: Vec<PathBuf> = walk(&run_dir)
        .into_iter()
        .filter(|p| p.ends_with("jobid"))
        .collect();
    assert_eq!(attempts.len(), 1, "resubmitted: {attempts:?}");
    assert_eq!(
        std::fs::read_to_string(&attempts[0]).unwrap().trim(),
        job_id
    );
    let logs: String = walk(&store)
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with("docker.stdout.log"))
        .map(|p| std::fs::read_to_string(p).unwrap_or_default())
        .collect();
    assert!(
        logs.contains(&format!("re-attached to slurm job {job_id}")),
        "no re-attach in the logs:\n{logs}"
    );
}

/// A job that finished while no nightshift followed it (the follower dropped mid-run, as a
/// crash drops it) is read from its directory by the next attempt: its result, no new job.
/// A later attempt after that outcome was taken submits anew.
#[tokio::test(flavor = "multi_thread")]
async fn slurm_finished_while_away_is_read_not_resubmitted() {
    require_slurm!();
    let tmp = tempfile::tempdir().unwrap();
    let shared = tmp.path().join("shared");
    let mut cfg = SlurmConfig::new(shared.clone());
    cfg.gpu_requests = false;
    cfg.datasets = BTreeMap::from([("sharegpt".to_string(), common::sharegpt_file(tmp.path()))]);
    let rt = Arc::new(SlurmRuntime::new(cfg));
    let mut job = common::job("nightshift-standin:latest", SERVING);
    job.sweep = format!("ns-slurm-away-{}", std::process::id());
    let attempt = |job: &nightshift::runtime::RunJob| {
        let (tx, mut rx) = tokio::sync::mpsc::channel(1 << 16);
        let sink = RunSink::new(job.run, job.attempt, tx);
        let drain = tokio::spawn(async move {
            let mut lines = Vec::new();
            while let Some((_, _, m)) = rx.recv().await {
                if let nightshift::runtime::RuntimeMsg::Log { line, .. } = m {
                    lines.push(line);
                }
            }
            lines
        });
        let (rt, job) = (rt.clone(), job.clone());
        (
            tokio::spawn(async move { rt.execute(job, sink, CancellationToken::new()).await }),
            drain,
        )
    };
    // Attempt 1: followed until the job runs, then the follower is dropped.
    let (exec, _) = attempt(&job);
    let prefix = format!("ns:{}:", job.sweep);
    let squeue = || {
        let q = Command::new("squeue")
            .args(["-h", "-o", "%j|%T"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&q.stdout)
            .lines()
            .filter(|l| l.starts_with(&prefix))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let t = Instant::now();
    while !squeue().iter().any(|l| l.ends_with("|RUNNING")) {
        assert!(t.elapsed() < Duration::from_secs(60), "the job never ran");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    exec.abort();
    let _ = exec.await;
    while !squeue().is_empty() {
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "the job never ended"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Attempt 2: the finished job's outcome, from its files.
    job.attempt = 2;
    let (exec, drain) = attempt(&job);
    let report = exec.await.unwrap();
    let lines = drain.await.unwrap();
    assert_eq!(
        report.end,
        RunEnd::BenchExited { exit_code: 0 },
        "{lines:#?}"
    );
    assert!(
        lines.iter().any(|l| l.contains("re-attached to slurm job")),
        "{lines:#?}"
    );
    assert!(
        lines.iter().any(|l| l.contains("Serving Benchmark Result")),
        "the result lines reach the parser"
    );
    let jobs = || {
        walk(&shared)
            .into_iter()
            .filter(|p| p.ends_with("jobid"))
            .count()
    };
    assert_eq!(jobs(), 1, "resubmitted");
    // Attempt 3 (a retry): that outcome was taken; a new job.
    job.attempt = 3;
    let (exec, drain) = attempt(&job);
    assert_eq!(
        exec.await.unwrap().end,
        RunEnd::BenchExited { exit_code: 0 }
    );
    let lines = drain.await.unwrap();
    assert!(
        lines.iter().any(|l| l.starts_with("submitted slurm job")),
        "{lines:#?}"
    );
    assert_eq!(jobs(), 2);
}
