//! The Slurm runtime against a real Slurm (Debian's slurm-wlm + munge, one node with 8
//! GPUs declared as a gres count; `scripts/slurm-up.sh` sets it up) running the stand-in
//! vLLM images with the `docker run` launcher. Every test prints "SKIP: ..." and returns
//! when Slurm or Docker is missing, except in CI (`CI=true`), where that fails the test.

mod common;

use nightshift::model::{RunState, Variant};
use nightshift::runtime::docker::secrets::Secrets;
use nightshift::runtime::docker::{DockerConfig, DockerRuntime};
use nightshift::runtime::slurm::{SlurmConfig, SlurmRuntime};
use nightshift::runtime::{RunEnd, RunSink, Runtime};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Slurm answers here (set up by scripts/slurm-up.sh when we may); Err: why not.
fn slurm() -> Result<(), String> {
    let root = env!("CARGO_MANIFEST_DIR");
    let up = format!("{root}/scripts/slurm-up.sh");
    if Command::new(&up)
        .arg("--check")
        .status()
        .is_ok_and(|s| s.success())
    {
        return Ok(());
    }
    // Root may install and start it (CI does, through scripts/test.sh, before the tests).
    let out = Command::new(&up)
        .output()
        .map_err(|e| format!("{up}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "Slurm unavailable: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

macro_rules! require_slurm {
    () => {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true");
        if let Err(why) = common::standin().and_then(|_| slurm()) {
            if ci {
                panic!("CI=true and the Slurm tests cannot run: {why}");
            }
            eprintln!("SKIP: {why}");
            return;
        }
    };
}

const GOOD_PATCH: &str = "--- a/vllm/worker/model_runner.py\n+++ b/vllm/worker/model_runner.py\n@@ -1 +1,2 @@\n # model_runner\n+# faster\n";
const BAD_PATCH: &str = "--- a/vllm/worker/model_runner.py\n+++ b/vllm/worker/model_runner.py\n@@ -1 +1,2 @@\n # something else entirely\n+# faster\n";

/// `commits` × (baseline, human, agent:a1) on stand-in images: (human image tag, patch ok).
fn plan_file(
    dir: &Path,
    sweep: &str,
    commits: &[(&str, bool)],
    cmd: &str,
    variants: &str,
) -> PathBuf {
    let mut toml = format!(
        r#"schema_version = 1
name = "{sweep}"
[defaults]
gpu_type = "H100"
gpu_count = 1
shm_size = "256m"
server_start_timeout_s = 60
run_timeout_s = 120
variants = {variants}
[datasets]
sharegpt = "{sharegpt}"
[images]
org = "nightshift-standin"
human = "{{org}}:latest"
baseline = "{{org}}:latest"
agent = "{{baseline_image}}"
patch_dir = "/usr/local/lib/python3.12/dist-packages"
[[agents]]
id = "a1"
patch = "patches/{{commit8}}.diff"
"#,
        sharegpt = common::sharegpt_file(dir).display()
    );
    std::fs::create_dir_all(dir.join("patches")).unwrap();
    for (i, (human, patch_ok)) in commits.iter().enumerate() {
        let c = commit_hash(i);
        let p = format!("{:08x}{}", 0xbeef0000u64 + i as u64, "0".repeat(32));
        toml.push_str(&format!(
            "[[commits]]\ncommit = \"{c}\"\nparent = \"{p}\"\nmodel = \"standin/tiny\"\ngpu_config = \"H100:1\"\nvllm_version = \"0.8.5\"\nperf_command = '''{cmd}'''\nimages = {{ human = \"nightshift-standin:{human}\" }}\n"
        ));
        let text = if *patch_ok { GOOD_PATCH } else { BAD_PATCH };
        std::fs::write(dir.join(format!("patches/{}.diff", &c[..8])), text).unwrap();
    }
    let path = dir.join("plan.toml");
    std::fs::write(&path, toml).unwrap();
    path
}

fn commit_hash(i: usize) -> String {
    format!("{:08x}{}", 0xc0ffee00u64 + i as u64, "0".repeat(32))
}

const SERVING: &str =
    "python benchmarks/benchmark_serving.py --model standin/tiny --num-prompts 10";

/// How each run ended, and which metrics it has: the structure both runtimes must share.
fn outcomes(
    plan: &nightshift::plan::Plan,
    state: &nightshift::state::SweepState,
) -> BTreeMap<String, (String, BTreeSet<String>)> {
    plan.runs
        .iter()
        .map(|spec| {
            let r = &state.runs[spec.id.0 as usize];
            let status = match &r.state {
                RunState::Finished { outcome } => match outcome {
                    nightshift::model::Outcome::Failed { category } => {
                        format!("failed:{}", category.as_str())
                    }
                    o => o.status().to_string(),
                },
                RunState::Held { category } => format!("held:{}", category.as_str()),
                s => format!("{s:?}"),
            };
            (
                spec.key.clone(),
                (status, r.metrics.keys().cloned().collect()),
            )
        })
        .collect()
}

async fn run_sweep(
    plan: Arc<nightshift::plan::Plan>,
    rt: Arc<dyn Runtime>,
    gpus: u32,
) -> nightshift::state::SweepState {
    let (engine, _cmds) = nightshift::engine::Engine::new(
        plan,
        rt,
        nightshift::engine::EngineOptions {
            gpus,
            seed: 1,
            wait_for_operator: false,
        },
    );
    // Policy backoffs shortened; the runs themselves take real time.
    let engine = engine.with_time_scale(0.02);
    let (summary, state) = engine.run(CancellationToken::new()).await.unwrap();
    assert!(
        !summary.interrupted && summary.counts.queued == 0,
        "{:?}",
        summary.counts
    );
    state
}

fn slurm_config(shared: &Path, plan: &nightshift::plan::Plan) -> SlurmConfig {
    let mut cfg = SlurmConfig::new(shared.to_path_buf());
    cfg.gpu_requests = false;
    cfg.shm_size = Some("256m".into());
    cfg.datasets = plan.datasets.clone();
    cfg.secrets = Secrets::with_token(Some(common::TOKEN.into()));
    cfg
}

/// A small plan (3 commits × baseline, human, agent) through Slurm and through Docker:
/// the same outcomes and the same metrics per run. Commit 0's human image has the aimv2
/// conflict (fixed by its recipe, in the job, then a success), commit 1's runs out of GPU
/// memory, commit 2's agent patch does not apply.
#[tokio::test(flavor = "multi_thread")]
async fn slurm_sweep_matches_docker() {
    require_slurm!();
    let tmp = tempfile::tempdir().unwrap();
    let sweep = format!("ns-slurm-{}", std::process::id());
    let path = plan_file(
        tmp.path(),
        &sweep,
        &[("aimv2", true), ("oom", true), ("latest", false)],
        SERVING,
        r#"["baseline", "human", "agent"]"#,
    );
    let plan = Arc::new(nightshift::plan::Plan::load(&path).unwrap());
    let shared = tmp.path().join("shared");
    let rt = Arc::new(SlurmRuntime::new(slurm_config(&shared, &plan)));
    let t = Instant::now();
    // Three at a time: more than one node holds (2 CPUs each), so a two-node cluster
    // (scripts/slurm-up.sh) runs them on both.
    let state = run_sweep(plan.clone(), rt, 3).await;
    let on_slurm = outcomes(&plan, &state);
    // What the GPU panel shows: each run's job, its node and allocation.
    let mut nodes = BTreeSet::new();
    for r in &state.runs {
        assert!(
            r.provenance.contains_key("slurm_job_id"),
            "{:?}",
            r.provenance
        );
        assert_eq!(
            r.provenance.get("slurm_gres").map(String::as_str),
            Some("gres:gpu:1")
        );
        let node = r.provenance.get("slurm_node").cloned().unwrap_or_default();
        assert!(!node.is_empty());
        nodes.insert(node);
    }
    let cluster = Command::new("sinfo")
        .args(["-h", "-N", "-o", "%N"])
        .output()
        .unwrap();
    let cluster: BTreeSet<String> = String::from_utf8_lossy(&cluster.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    eprintln!("nodes used: {nodes:?} of {cluster:?}");
    if cluster.len() >= 2 {
        assert!(
            nodes.len() >= 2,
            "one node of {cluster:?} did all the work: {nodes:?}"
        );
    }
    eprintln!("slurm sweep: {:.1} s", t.elapsed().as_secs_f64());

    let mut dcfg = DockerConfig::from_plan(&plan);
    dcfg.gpu_requests = false;
    dcfg.stop_grace_s = 2;
    dcfg.prefetch = false;
    dcfg.secrets = Secrets::with_token(Some(common::TOKEN.into()));
    let drt = Arc::new(DockerRuntime::new(dcfg).unwrap());
    let t = Instant::now();
    let on_docker = outcomes(&plan, &run_sweep(plan.clone(), drt, 3).await);
    eprintln!("docker sweep: {:.1} s", t.elapsed().as_secs_f64());
    for (k, v) in &on_slurm {
        eprintln!("{k}: slurm {} {:?}", v.0, v.1.len());
    }
    assert_eq!(on_slurm, on_docker, "Slurm and Docker disagree");

    // What the plan means to happen, happened (so agreement is not agreement on nothing).
    let by_variant = |commit: usize, v: &str| -> &(String, BTreeSet<String>) {
        let spec = plan
            .runs
            .iter()
            .filter(|r| {
                let c = &plan.commit_of(r).commit;
                *c == commit_hash(commit)
            })
            .find(|r| {
                matches!(
                    (&r.variant, v),
                    (Variant::Baseline, "baseline")
                        | (Variant::Human, "human")
                        | (Variant::Agent(_), "agent")
                )
            })
            .unwrap();
        &on_slurm[&spec.key]
    };
    assert_eq!(
        by_variant(0, "human").0,
        "success",
        "aimv2 fixed in the job, then a success"
    );
    assert_eq!(by_variant(1, "human").0, "failed:cuda_oom");
    assert_eq!(by_variant(2, "agent").0, "failed:agent_patch_failed");
    for c in 0..3 {
        let (status, metrics) = by_variant(c, "baseline");
        assert_eq!(status, "success");
        for k in ["ttft_mean_ms", "tpot_mean_ms", "request_throughput_req_s"] {
            assert!(metrics.contains(k), "baseline of commit {c} lacks {k}");
        }
    }
    // No container and no job of the sweep is left.
    let ps = Command::new("docker")
        .args([
            "ps",
            "-aq",
            "--filter",
            &format!("label=nightshift.sweep={sweep}"),
        ])
        .output()
        .unwrap();
    assert!(
        ps.stdout.is_empty(),
        "containers left: {}",
        String::from_utf8_lossy(&ps.stdout)
    );
    let q = Command::new("squeue")
        .args(["-h", "-o", "%j"])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&q.stdout).contains(&sweep));
    // The token reached no file on the shared filesystem.
    for f in walk(&shared) {
        let text = String::from_utf8_lossy(&std::fs::read(&f).unwrap()).into_owned();
        assert!(!text.contains(common::TOKEN), "token in {}", f.display());
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// The per-run submission overhead: sbatch → the job running, over several jobs; and a
/// cancel is an scancel that leaves nothing behind.
#[tokio::test(flavor = "multi_thread")]
async fn slurm_submission_overhead_and_cancel() {
    require_slurm!();
    let tmp = tempfile::tempdir().unwrap();
    let mut cfg = SlurmConfig::new(tmp.path().join("shared"));
    cfg.gpu_requests = false;
    cfg.datasets = BTreeMap::from([("sharegpt".to_string(), common::sharegpt_file(tmp.path()))]);
    let rt = Arc::new(SlurmRuntime::new(cfg));
    let mut waits = Vec::new();
    let mut calls: Vec<f64> = Vec::new();
    for i in 0..5 {
        let mut job = common::job(
            "nightshift-standin:latest",
            "STANDIN_LOAD_MS=60000 python benchmarks/benchmark_serving.py --model standin/tiny --num-prompts 5",
        );
        job.key = format!("overhead{i}/human");
        job.sweep = format!("ns-slurm-oh-{}", std::process::id());
        let (tx, mut rx) = tokio::sync::mpsc::channel(1 << 16);
        let sink = RunSink::new(job.run, job.attempt, tx);
        let cancel = CancellationToken::new();
        let c2 = cancel.clone();
        let t = Instant::now();
        let exec = tokio::spawn({
            let (rt, job) = (rt.clone(), job.clone());
            async move { rt.execute(job, sink, c2).await }
        });
        let mut start = None;
        let mut loading = false;
        let mut seen = Vec::new();
        let mut sbatch_ms = None;
        while let Some((_, _, m)) = tokio::time::timeout(Duration::from_secs(60), rx.recv())
            .await
            .expect("the job reports within a minute")
        {
            match m {
                nightshift::runtime::RuntimeMsg::Provenance { key, value }
                    if key == "slurm_start_s" =>
                {
                    start = value.parse::<f64>().ok();
                }
                nightshift::runtime::RuntimeMsg::Stage(nightshift::model::Stage::LoadingServer) => {
                    loading = true;
                    break;
                }
                nightshift::runtime::RuntimeMsg::Log { line, .. }
                    if line.starts_with("submitted slurm job") =>
                {
                    sbatch_ms = line
                        .split(" in ")
                        .nth(1)
                        .and_then(|r| r.split(" ms").next())
                        .and_then(|n| n.parse::<f64>().ok());
                }
                m => seen.push(format!("{m:?}")),
            }
        }
        if !loading {
            let r = exec.await;
            panic!("the server never started loading: {seen:#?} {r:?}");
        }
        let took = t.elapsed();
        cancel.cancel();
        let report = exec.await.unwrap();
        assert_eq!(report.end, RunEnd::Cancelled);
        let s = start.expect("slurm_start_s reported");
        let ms = sbatch_ms.expect("the sbatch call's duration is logged");
        eprintln!(
            "job {i}: sbatch call {ms:.0} ms; sbatch → running {s:.2} s; execute → server loading {:.2} s",
            took.as_secs_f64()
        );
        waits.push(s);
        calls.push(ms);
        let ps = Command::new("docker")
            .args([
                "ps",
                "-aq",
                "--filter",
                &format!("label=nightshift.sweep={}", job.sweep),
            ])
            .output()
            .unwrap();
        assert!(ps.stdout.is_empty(), "cancel left a container");
    }
    waits.sort_by(|a, b| a.total_cmp(b));
    calls.sort_by(|a, b| a.total_cmp(b));
    eprintln!("sbatch call: median {:.0} ms", calls[calls.len() / 2]);
    eprintln!(
        "SLURM SUBMISSION OVERHEAD (sbatch → RUNNING) over {} jobs: min {:.2} s, median {:.2} s, max {:.2} s",
        waits.len(),
        waits[0],
        waits[waits.len() / 2],
        waits[waits.len() - 1]
    );
}

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

/// Bad Slurm settings are bad usage (exit 2), said before anything is submitted; needs no
/// Slurm.
#[test]
fn slurm_bad_settings_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let path = plan_file(
        tmp.path(),
        "ns-slurm-usage",
        &[("latest", true)],
        SERVING,
        r#"["human"]"#,
    );
    for (args, says) in [
        (
            vec!["--slurm-launcher", "podman"],
            "unknown launcher `podman`",
        ),
        (
            vec!["--slurm-restd", "ftp://head"],
            "an http:// or https:// URL",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_nightshift"))
            .arg("run")
            .arg(&path)
            .args(["--runtime", "slurm", "--headless", "--store"])
            .arg(tmp.path().join("store"))
            .args(&args)
            .env("XDG_CONFIG_HOME", tmp.path().join("config"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
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
