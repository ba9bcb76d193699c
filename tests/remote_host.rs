//! Remote Docker hosts against real engines: this machine's engine and a second dockerd on
//! its own socket, data root and bridge (`scripts/docker-host-up.sh`), standing in for a
//! GPU box elsewhere. The second engine is stopped mid-run: its runs must be re-queued and
//! finish on the first, nothing lost or duplicated. Prints "SKIP: ..." and returns when
//! Docker (or root, for the second engine) is missing, except in CI (`CI=true`).

mod common;

use nightshift::event::Event;
use nightshift::model::{Outcome, RunId, RunState, Stage};
use nightshift::runtime::docker::secrets::Secrets;
use nightshift::runtime::docker::DockerConfig;
use nightshift::runtime::hosts::{config, Hosts, MultiHost};
use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/docker-host-up.sh");
const NAME: &str = "ns-d2";

/// The second engine up with the stand-in images: (its unix:// URL, its tcp:// URL, the
/// client certificate directory for TLS); Err: why not.
fn second_engine() -> Result<(String, String, String), String> {
    common::standin()?;
    let out = Command::new(SCRIPT)
        .arg(NAME)
        .output()
        .map_err(|e| format!("{SCRIPT}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "no second Docker engine: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let mut lines = text.lines();
    let unix = lines.next().unwrap_or_default().to_string();
    let (tcp, tls) = lines
        .next()
        .and_then(|l| l.split_once(' '))
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .ok_or_else(|| format!("{SCRIPT} printed no tcp:// line: {text}"))?;
    Ok((unix, tcp, tls))
}

fn plan_file(dir: &std::path::Path, sweep: &str) -> std::path::PathBuf {
    plan_file_loading(dir, sweep, 4000)
}

/// [`plan_file`] with servers that take `load_ms` to load (printing as they go).
fn plan_file_loading(dir: &std::path::Path, sweep: &str, load_ms: u64) -> std::path::PathBuf {
    plan_file_with(dir, sweep, load_ms, false)
}

/// [`plan_file_loading`], with a third commit whose server runs out of memory while loading
/// (`failing`).
fn plan_file_with(
    dir: &std::path::Path,
    sweep: &str,
    load_ms: u64,
    failing: bool,
) -> std::path::PathBuf {
    let mut toml = format!(
        r#"schema_version = 1
name = "{sweep}"
[defaults]
gpu_type = "H100"
gpu_count = 1
shm_size = "256m"
server_start_timeout_s = 60
run_timeout_s = 120
variants = ["baseline", "human"]
[datasets]
sharegpt = "{sharegpt}"
[images]
org = "nightshift-standin"
human = "{{org}}:latest"
baseline = "{{org}}:latest"
"#,
        sharegpt = common::sharegpt_file(dir).display()
    );
    for i in 0..2u64 {
        // A slow server (4 s to load): the engine is stopped while runs are in flight.
        toml.push_str(&format!(
            "[[commits]]\ncommit = \"{:08x}{}\"\nparent = \"{:08x}{}\"\nmodel = \"standin/tiny\"\ngpu_config = \"H100:1\"\nvllm_version = \"0.8.5\"\nperf_command = '''STANDIN_LOAD_MS={load_ms} python benchmarks/benchmark_serving.py --model standin/tiny --num-prompts 10'''\n",
            0xd0c0_0000u64 + i,
            "0".repeat(32),
            0xbee0_0000u64 + i,
            "0".repeat(32)
        ));
    }
    if failing {
        toml.push_str(&format!(
            "[[commits]]\ncommit = \"{:08x}{}\"\nparent = \"{:08x}{}\"\nmodel = \"standin/tiny\"\ngpu_config = \"H100:1\"\nvllm_version = \"0.8.5\"\nperf_command = '''STANDIN_FAIL=oom STANDIN_LOAD_MS={load_ms} python benchmarks/benchmark_serving.py --model standin/tiny --num-prompts 10'''\n",
            0xfa11_0000u64,
            "0".repeat(32),
            0xfa11_0001u64,
            "0".repeat(32)
        ));
    }
    let p = dir.join("plan.toml");
    std::fs::write(&p, toml).unwrap();
    p
}

/// The engine over `hosts` as one runtime, for `plan` on the stand-in: quick teardown, no
/// prefetch, no token; its time scale short (backoffs in hundredths).
fn engine_on(
    plan: &Arc<nightshift::plan::Plan>,
    hosts: Vec<config::HostSpec>,
) -> (Arc<MultiHost>, nightshift::engine::Engine) {
    let mut cfg = DockerConfig::from_plan(plan);
    cfg.stop_grace_s = 2;
    cfg.prefetch = false;
    cfg.secrets = Secrets::with_token(None);
    let multi = Arc::new(
        MultiHost::new(
            hosts,
            &cfg,
            Arc::new(nightshift::diagnose::RecipeBook::builtin()),
        )
        .unwrap(),
    );
    let (engine, _cmds) = nightshift::engine::Engine::new(
        plan.clone(),
        Arc::new(Hosts(multi.clone())),
        nightshift::engine::EngineOptions {
            gpus: multi.total_gpus(),
            seed: 1,
            wait_for_operator: false,
        },
    );
    (multi, engine.with_time_scale(0.02))
}

#[tokio::test(flavor = "multi_thread")]
async fn remote_host_lost_mid_run_requeues_its_runs() {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let (d2, d2_tcp, d2_tls) = match second_engine() {
        Ok(urls) => urls,
        Err(why) if ci => panic!("CI=true and the remote host test cannot run: {why}"),
        Err(why) => {
            eprintln!("SKIP: {why}");
            return;
        }
    };
    let tmp = tempfile::tempdir().unwrap();
    let sweep = format!("ns-remote-{}", std::process::id());
    let plan = Arc::new(nightshift::plan::Plan::load(&plan_file(tmp.path(), &sweep)).unwrap());
    // The second engine first: the engine's lowest slots (its first runs) land on it. It is
    // reached as a remote engine is: TCP with TLS, client certificate and all.
    let hosts = config::parse(&format!(
        "[[hosts]]\nname = \"d2\"\ndocker_host = \"{d2_tcp}\"\ntls_dir = \"{d2_tls}\"\ngpus = 2\ngpu_requests = false\n\
         [[hosts]]\nname = \"local\"\ndocker_host = \"unix:///var/run/docker.sock\"\ngpus = 4\ngpu_requests = false\n"
    ))
    .unwrap();
    let (multi, engine) = engine_on(&plan, hosts);
    let mut engine = engine;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    engine.observe(Box::new(move |env: &nightshift::event::Envelope| {
        let _ = tx.send((Instant::now(), env.event.clone()));
        Ok(())
    }));
    let sweep_task = tokio::spawn(engine.run(CancellationToken::new()));

    // Watch: which host each attempt runs on; stop d2 once two of its runs load a server.
    let mut host_of: BTreeMap<(RunId, u32), String> = BTreeMap::new();
    let mut loading_on_d2: Vec<RunId> = Vec::new();
    let mut lost_at: Option<Instant> = None;
    let mut on_d2_at_loss: Vec<RunId> = Vec::new();
    let mut back: BTreeMap<RunId, Duration> = BTreeMap::new();
    let mut successes: BTreeMap<RunId, u32> = BTreeMap::new();
    while let Some((at, ev)) = rx.recv().await {
        match ev {
            Event::Provenance {
                run,
                attempt,
                key,
                value,
            } if key == "host" => {
                host_of.insert((run, attempt), value);
            }
            Event::State {
                run,
                attempt,
                to:
                    RunState::Active {
                        stage: Stage::LoadingServer,
                    },
                ..
            } => {
                let host = host_of.get(&(run, attempt)).cloned().unwrap_or_default();
                match lost_at {
                    None if host == "d2" => {
                        loading_on_d2.push(run);
                        if loading_on_d2.len() == 2 {
                            std::thread::sleep(Duration::from_millis(500));
                            on_d2_at_loss = loading_on_d2.clone();
                            lost_at = Some(Instant::now());
                            let st = Command::new(SCRIPT)
                                .args(["--stop", NAME])
                                .status()
                                .unwrap();
                            assert!(st.success());
                            eprintln!("stopped d2 with runs {on_d2_at_loss:?} loading on it");
                        }
                    }
                    Some(t) if on_d2_at_loss.contains(&run) => {
                        assert_eq!(host, "local", "{run} re-placed on the host that is down");
                        back.entry(run).or_insert(at.duration_since(t));
                    }
                    _ => {}
                }
            }
            Event::State {
                run,
                to:
                    RunState::Finished {
                        outcome: Outcome::Success,
                    },
                ..
            } => {
                *successes.entry(run).or_default() += 1;
            }
            Event::SweepFinished { .. } => break,
            _ => {}
        }
    }
    let (summary, state) = sweep_task.await.unwrap().unwrap();
    let detected = multi
        .losses()
        .iter()
        .find(|(h, _)| h == "d2")
        .map(|(_, t)| t.duration_since(lost_at.expect("d2 was stopped")));
    eprintln!("d2 loss noticed after {detected:?}");
    for (run, d) in &back {
        eprintln!("HOST LOSS → RUNNING ELSEWHERE: {run} server loading on `local` {:.2} s after d2 was stopped", d.as_secs_f64());
    }
    // Nothing lost: every run succeeded. Nothing duplicated: one success each, and the
    // interrupted attempts spent no retry.
    assert_eq!(
        summary.counts.success,
        plan.runs.len(),
        "{:?}",
        summary.counts
    );
    assert!(successes.values().all(|n| *n == 1), "{successes:?}");
    assert_eq!(successes.len(), plan.runs.len());
    assert_eq!(on_d2_at_loss.len(), 2);
    for run in &on_d2_at_loss {
        let r = &state.runs[run.0 as usize];
        assert!(r.interrupted >= 1, "{run}: {r:?}");
        assert_eq!(r.counted_attempts(), 1, "{run} spent a retry");
        assert!(back.contains_key(run), "{run} never ran again");
    }
    assert!(detected.is_some(), "the loss was never noticed");
    assert_eq!(multi.up().get("d2"), Some(&false), "d2 is marked down");

    // It answers again: marked up (its slots are offered again).
    second_engine().unwrap();
    let t = Instant::now();
    while multi.up().get("d2") != Some(&true) {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "d2 never marked up again"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // What the stop left on d2 (its containers were stopped, not removed) went when it
    // came back; nothing is left on the local engine either.
    let left = |h: &str| {
        let out = Command::new("docker")
            .args([
                "-H",
                h,
                "ps",
                "-aq",
                "--filter",
                &format!("label=nightshift.sweep={sweep}"),
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(left("unix:///var/run/docker.sock"), "");
    assert_eq!(
        left(&d2),
        "",
        "the revived host kept the interrupted runs' containers"
    );
}

/// A wrong hosts file is bad usage (exit 2) naming file:line:col; `--hosts` with another
/// runtime too. Needs no Docker.
#[test]
fn remote_host_bad_hosts_file_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = plan_file(tmp.path(), "ns-remote-usage");
    let hosts = tmp.path().join("hosts.toml");
    std::fs::write(
        &hosts,
        "[[hosts]]\nname = \"a\"\ndocker_host = \"unix:///x.sock\"\ngpu = 2\n",
    )
    .unwrap();
    let run = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_nightshift"))
            .arg("run")
            .arg(&plan)
            .args(["--headless", "--store"])
            .arg(tmp.path().join("store"))
            .arg("--hosts")
            .arg(&hosts)
            .args(extra)
            .env("XDG_CONFIG_HOME", tmp.path().join("config"))
            .output()
            .unwrap()
    };
    let out = run(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("{}:4:1", hosts.display())), "{err}");
    let out = run(&["--runtime", "sim"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--runtime docker"));
}

/// A proxy in front of this machine's Docker that holds back every `/_ping` by `delay`
/// while `slow` is set — a Docker busy with a big pull or commit — and passes everything
/// else through untouched.
async fn slow_ping_proxy(
    listen: std::path::PathBuf,
    delay: Duration,
    slow: Arc<std::sync::atomic::AtomicBool>,
    held: Arc<std::sync::atomic::AtomicUsize>,
) {
    use std::sync::atomic::Ordering;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::UnixListener::bind(&listen).unwrap();
    loop {
        let Ok((client, _)) = listener.accept().await else {
            return;
        };
        let (slow, held) = (slow.clone(), held.clone());
        tokio::spawn(async move {
            let Ok(up) = tokio::net::UnixStream::connect("/var/run/docker.sock").await else {
                return;
            };
            let (mut cr, mut cw) = client.into_split();
            let (mut ur, mut uw) = up.into_split();
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut ur, &mut cw).await;
            });
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = match cr.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                let ping = buf[..n].windows(6).any(|w| w == b"/_ping");
                if ping && slow.load(Ordering::SeqCst) {
                    held.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(delay).await;
                }
                if uw.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
        });
    }
}

/// Docker answering `/_ping` slower than the ping timeout for the whole of two runs (a
/// busy engine) cancels neither: the host is never marked down while its runs' streams
/// still deliver bytes, and runs that complete keep their results though the last pings
/// before and after completion fail.
#[tokio::test(flavor = "multi_thread")]
async fn slow_pings_cancel_no_run_and_discard_no_result() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    if let Err(why) = common::standin() {
        if ci {
            panic!("CI=true and the slow-ping test cannot run: {why}");
        }
        eprintln!("SKIP: {why}");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let sock = tmp.path().join("docker.sock");
    let slow = Arc::new(AtomicBool::new(true));
    let held = Arc::new(AtomicUsize::new(0));
    tokio::spawn(slow_ping_proxy(
        sock.clone(),
        Duration::from_secs(7),
        slow.clone(),
        held.clone(),
    ));
    while !sock.exists() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let sweep = format!("ns-slowping-{}", std::process::id());
    // Servers that take 24 s to load: long enough for the health check to miss four pings.
    // And one commit whose server dies while loading (CUDA OOM): a run that
    // fails on its own while the pings are slow must not take the host's other runs.
    let plan = Arc::new(
        nightshift::plan::Plan::load(&plan_file_with(tmp.path(), &sweep, 24_000, true)).unwrap(),
    );
    let hosts = config::parse(&format!(
        "[[hosts]]\nname = \"busy\"\ndocker_host = \"unix://{}\"\ngpus = 4\ngpu_requests = false\n",
        sock.display()
    ))
    .unwrap();
    let (multi, engine) = engine_on(&plan, hosts);
    let (summary, state) = tokio::time::timeout(
        Duration::from_secs(150),
        engine.run(CancellationToken::new()),
    )
    .await
    .expect("the sweep ends")
    .unwrap();
    let pings_held = held.load(Ordering::SeqCst);
    slow.store(false, Ordering::SeqCst);
    eprintln!(
        "{} pings held back 7 s (timeout 5 s); counts {:?}",
        pings_held, summary.counts
    );
    // The pings really were slow, enough of them to have marked the host down.
    assert!(pings_held >= 4, "only {pings_held} pings were held back");
    assert!(
        multi.losses().is_empty(),
        "marked down: {:?}",
        multi.losses()
    );
    assert_eq!(summary.counts.success, 4, "{:?}", summary.counts);
    assert_eq!(summary.counts.failed, 2, "{:?}", summary.counts);
    for r in &state.runs {
        assert_eq!(r.interrupted, 0, "a run was cut short by a ping: {r:?}");
    }
    // The failing runs kept their diagnosis (not re-queued as a lost host's).
    for r in state.runs.iter().filter(|r| {
        !matches!(
            r.state,
            nightshift::model::RunState::Finished {
                outcome: nightshift::model::Outcome::Success
            }
        )
    }) {
        assert!(r.finding.is_some(), "the diagnosis was thrown away: {r:?}");
    }
}
