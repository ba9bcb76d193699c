//! The Slurm runtime against a real Slurm (Debian's slurm-wlm + munge; `scripts/slurm-up.sh`
//! sets up this host and a second node in a network namespace, 8 GPUs each as a gres count)
//! running the stand-in vLLM images with the `docker run` launcher. Every test prints
//! "SKIP: ..." and returns when Slurm or Docker is missing, except in CI (`CI=true`), where
//! that fails the test.

mod common;

use common::slurm::{commit_hash, outcomes, plan_file, run_sweep, slurm_config, walk, SERVING};
use nightshift::model::Variant;
use nightshift::runtime::docker::secrets::Secrets;
use nightshift::runtime::docker::{DockerConfig, DockerRuntime};
use nightshift::runtime::slurm::{SlurmConfig, SlurmRuntime};
use nightshift::runtime::{RunEnd, RunSink, Runtime};
use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

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
        // The start may be said just after the first stage (the job's output and the
        // controller's poll race): what the attempt sent before it ended counts.
        while let Ok((_, _, m)) = rx.try_recv() {
            if let nightshift::runtime::RuntimeMsg::Provenance { key, value } = m {
                if key == "slurm_start_s" && start.is_none() {
                    start = value.parse::<f64>().ok();
                }
            }
        }
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

/// With `--slurm-restd`, the job's state comes from slurmrestd (JWT from `scontrol token`):
/// the run ends as it does through squeue, with the node and state the panel shows.
#[tokio::test(flavor = "multi_thread")]
async fn slurm_state_through_slurmrestd() {
    require_slurm!();
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    if std::net::TcpStream::connect("127.0.0.1:6820").is_err() {
        assert!(
            !ci,
            "CI=true and no slurmrestd on 127.0.0.1:6820 (scripts/slurm-up.sh starts it)"
        );
        eprintln!("SKIP: no slurmrestd on 127.0.0.1:6820");
        return;
    }
    let token = Command::new("scontrol")
        .args(["token", "lifespan=900"])
        .output()
        .unwrap();
    let token = String::from_utf8_lossy(&token.stdout)
        .trim()
        .trim_start_matches("SLURM_JWT=")
        .to_string();
    assert!(!token.is_empty(), "scontrol token gave none");
    // Read by the runtime at each request (never stored, never logged).
    std::env::set_var("SLURM_JWT", &token);
    let tmp = tempfile::tempdir().unwrap();
    let mut cfg = SlurmConfig::new(tmp.path().join("shared"));
    cfg.gpu_requests = false;
    cfg.restd = Some("http://127.0.0.1:6820".into());
    cfg.datasets = BTreeMap::from([("sharegpt".to_string(), common::sharegpt_file(tmp.path()))]);
    let rt = SlurmRuntime::new(cfg);
    let mut job = common::job("nightshift-standin:latest", SERVING);
    job.sweep = format!("ns-slurm-restd-{}", std::process::id());
    let (tx, mut rx) = tokio::sync::mpsc::channel(1 << 16);
    let sink = RunSink::new(job.run, job.attempt, tx);
    let collect = tokio::spawn(async move {
        let mut v = Vec::new();
        while let Some((_, _, m)) = rx.recv().await {
            v.push(m);
        }
        v
    });
    let report = rt.execute(job, sink, CancellationToken::new()).await;
    let msgs = collect.await.unwrap();
    assert_eq!(
        report.end,
        RunEnd::BenchExited { exit_code: 0 },
        "{msgs:#?}"
    );
    let states: Vec<String> = msgs
        .iter()
        .filter_map(|m| match m {
            nightshift::runtime::RuntimeMsg::Provenance { key, value } if key == "slurm_state" => {
                Some(value.clone())
            }
            _ => None,
        })
        .collect();
    assert!(states.iter().any(|s| s == "RUNNING"), "{states:?}");
    assert!(common::provenance(&msgs, "slurm_node").is_some_and(|n| !n.is_empty()));
    assert!(
        !common::logs_text(&msgs).contains(&token),
        "the token was logged"
    );
}
