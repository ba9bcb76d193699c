//! Registry credentials against a real registry: Debian's `docker-registry` on 127.0.0.1
//! with htpasswd auth (and nginx in front of it answering 429), the stand-in pushed to it
//! with bollard, pulled back through the Docker runtime with credentials read from a
//! Docker config file written here. Wrong or missing credentials end as `registry_auth`,
//! a rate limit as `registry_rate_limited`, as the engine diagnoses and decides them.
//!
//! Needs Docker (see `require_docker!`) and `docker-registry`, `nginx` and `htpasswd`
//! (scripts/test.sh installs them): without them the tests print SKIP, except in CI
//! (`CI=true`), where they fail.

mod common;

use common::{logs_text, run_one};
use nightshift::category::{Action, Category};
use nightshift::event::{Envelope, Event, Finding};
use nightshift::model::{Outcome, RunState};
use nightshift::runtime::docker::auth::DockerAuth;
use nightshift::runtime::docker::{image, DockerConfig, DockerRuntime};
use nightshift::runtime::{RunEnd, RunSink, RuntimeMsg};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const USER: &str = "nightshift";
const PASSWORD: &str = "pw-MARKER-n3ver-logged";
const STANDIN: &str = "nightshift-standin:latest";

/// The programs the tests start, found on PATH (nginx lives in /usr/sbin).
struct Tools {
    registry: PathBuf,
    nginx: PathBuf,
    htpasswd: PathBuf,
}

fn find(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/usr/bin".into()])
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

fn tools() -> Result<Tools, String> {
    common::standin()?;
    let get = |p: &str, pkg: &str| {
        find(p).ok_or_else(|| format!("{p} not found (apt-get install {pkg})"))
    };
    Ok(Tools {
        registry: get("docker-registry", "docker-registry")?,
        nginx: get("nginx", "nginx")?,
        htpasswd: get("htpasswd", "apache2-utils")?,
    })
}

macro_rules! require_tools {
    () => {
        match tools() {
            Ok(t) => t,
            Err(why) => {
                if std::env::var("CI").is_ok_and(|v| v == "true") {
                    panic!("CI=true and the registry tests cannot run: {why}");
                }
                eprintln!("SKIP: {why}");
                return;
            }
        }
    };
}

/// A process this test started, killed (by its own pid) when dropped.
struct Proc {
    child: Child,
    log: PathBuf,
}

impl Proc {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn spawn(program: &Path, args: &[&str], log: PathBuf) -> Proc {
    let out = std::fs::File::create(&log).unwrap();
    let child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", program.display()));
    Proc { child, log }
}

/// Waits until `port` answers HTTP on `/v2/` with `status`.
fn wait_http(p: &mut Proc, port: u16, status: &str) {
    use std::io::{Read, Write};
    let t = Instant::now();
    loop {
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            let _ = s.write_all(b"GET /v2/ HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
            let mut buf = [0u8; 64];
            let n = s.read(&mut buf).unwrap_or(0);
            if String::from_utf8_lossy(&buf[..n]).contains(status) {
                return;
            }
        }
        if let Ok(Some(st)) = p.child.try_wait() {
            panic!("exited with {st} before answering:\n{}", p.log());
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "port {port} never answered {status}:\n{}",
            p.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `docker-registry serve` on 127.0.0.1 with htpasswd (bcrypt) auth, storage in `dir`.
fn start_registry(t: &Tools, dir: &Path) -> (Proc, u16) {
    let out = Command::new(&t.htpasswd)
        .args(["-Bbn", USER, PASSWORD])
        .output()
        .unwrap();
    assert!(out.status.success(), "htpasswd: {out:?}");
    std::fs::write(dir.join("htpasswd"), &out.stdout).unwrap();
    let port = free_port();
    let config = dir.join("registry.yml");
    std::fs::write(
        &config,
        format!(
            "version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: {root}\n\
             http:\n  addr: 127.0.0.1:{port}\n  secret: nightshift-test\n\
             auth:\n  htpasswd:\n    realm: nightshift-test\n    path: {pw}\n",
            root = dir.join("storage").display(),
            pw = dir.join("htpasswd").display(),
        ),
    )
    .unwrap();
    let mut p = spawn(
        &t.registry,
        &["serve", config.to_str().unwrap()],
        dir.join("registry.log"),
    );
    wait_http(&mut p, port, " 401 ");
    (p, port)
}

/// nginx in front of the registry: `/v2/` passes through, every manifest request is
/// answered 429 with Docker Hub's body (and a `Retry-After` the daemon does not relay).
fn start_rate_limiter(t: &Tools, dir: &Path, upstream: u16) -> (Proc, u16) {
    let port = free_port();
    let d = dir.display();
    let conf = dir.join("nginx.conf");
    std::fs::write(
        &conf,
        format!(
            r#"daemon off;
master_process off;
pid {d}/nginx.pid;
error_log {d}/nginx-error.log warn;
events {{ worker_connections 64; }}
http {{
  access_log off;
  client_body_temp_path {d}/body;
  proxy_temp_path {d}/proxy;
  fastcgi_temp_path {d}/fastcgi;
  uwsgi_temp_path {d}/uwsgi;
  scgi_temp_path {d}/scgi;
  server {{
    listen 127.0.0.1:{port};
    location /v2/ {{
      proxy_pass http://127.0.0.1:{upstream};
      proxy_set_header Host $http_host;
    }}
    location ~ /manifests/ {{
      add_header Retry-After 120 always;
      default_type application/json;
      return 429 '{{"errors":[{{"code":"TOOMANYREQUESTS","message":"You have reached your pull rate limit. You may increase the limit by authenticating and upgrading: https://www.docker.com/increase-rate-limit"}}]}}';
    }}
  }}
}}
"#
        ),
    )
    .unwrap();
    let mut p = spawn(
        &t.nginx,
        &[
            "-p",
            dir.to_str().unwrap(),
            "-e",
            dir.join("nginx-error.log").to_str().unwrap(),
            "-c",
            conf.to_str().unwrap(),
        ],
        dir.join("nginx.log"),
    );
    wait_http(&mut p, port, " 401 ");
    (p, port)
}

fn base64(s: &str) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in s.as_bytes().chunks(3) {
        let mut n = 0u32;
        for (i, b) in chunk.iter().enumerate() {
            n |= (*b as u32) << (16 - 8 * i);
        }
        for i in 0..4 {
            out.push(if i <= chunk.len() {
                A[(n >> (18 - 6 * i) & 63) as usize] as char
            } else {
                '='
            });
        }
    }
    out
}

/// A Docker CLI config as `docker login HOST` writes it.
fn docker_config(dir: &Path, host: &str, password: &str) -> PathBuf {
    let p = dir.join("config.json");
    std::fs::write(
        &p,
        format!(
            r#"{{"auths": {{"{host}": {{"auth": "{}"}}}}}}"#,
            base64(&format!("{USER}:{password}"))
        ),
    )
    .unwrap();
    p
}

fn credentials(host: &str) -> bollard::auth::DockerCredentials {
    bollard::auth::DockerCredentials {
        username: Some(USER.into()),
        password: Some(PASSWORD.into()),
        serveraddress: Some(host.into()),
        ..Default::default()
    }
}

/// Tags `local` as `repo:tag` and pushes it with credentials; the local tag is removed
/// again, so that the only way back is a pull.
async fn push(docker: &bollard::Docker, local: &str, repo: &str, tag: &str, host: &str) {
    use bollard::query_parameters::{PushImageOptions, RemoveImageOptions, TagImageOptions};
    use futures_util::StreamExt;
    docker
        .tag_image(
            local,
            Some(TagImageOptions {
                repo: Some(repo.into()),
                tag: Some(tag.into()),
            }),
        )
        .await
        .unwrap();
    let mut s = docker.push_image(
        repo,
        Some(PushImageOptions {
            tag: Some(tag.into()),
            ..Default::default()
        }),
        Some(credentials(host)),
    );
    while let Some(m) = s.next().await {
        let m = m.unwrap_or_else(|e| panic!("pushing {repo}:{tag}: {e}"));
        if let Some(e) = m.error_detail.and_then(|e| e.message) {
            panic!("pushing {repo}:{tag}: {e}");
        }
    }
    docker
        .remove_image(
            &format!("{repo}:{tag}"),
            Some(RemoveImageOptions {
                noprune: false,
                ..Default::default()
            }),
            None,
        )
        .await
        .unwrap();
}

/// The stand-in with one layer of its own (`size` pseudo-random bytes), so that a pull
/// really downloads something: its other layers are on this machine already.
async fn fresh_image(docker: &bollard::Docker, repo: &str, tag: &str, size: usize) {
    use bollard::models::{ContainerConfig, ContainerCreateBody};
    use bollard::query_parameters::{
        CommitContainerOptions, CreateContainerOptions, RemoveContainerOptions,
        UploadToContainerOptions,
    };
    let mut x: u64 =
        0x9e37_79b9_7f4a_7c15 ^ std::process::id() as u64 ^ nightshift::event::now_ms();
    let data: Vec<u8> = (0..size)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let name = format!("ns-registry-fresh-{}-{tag}", std::process::id());
    let c = docker
        .create_container(
            Some(CreateContainerOptions {
                name: Some(name.clone()),
                ..Default::default()
            }),
            ContainerCreateBody {
                image: Some(STANDIN.into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(data.len() as u64);
    h.set_mode(0o644);
    h.set_cksum();
    b.append_data(&mut h, "nightshift-fresh.bin", &data[..])
        .unwrap();
    docker
        .upload_to_container(
            &c.id,
            Some(UploadToContainerOptions {
                path: "/".into(),
                ..Default::default()
            }),
            bollard::body_full(b.into_inner().unwrap().into()),
        )
        .await
        .unwrap();
    docker
        .commit_container(
            CommitContainerOptions {
                container: Some(c.id.clone()),
                repo: Some(repo.into()),
                tag: Some(tag.into()),
                ..Default::default()
            },
            ContainerConfig::default(),
        )
        .await
        .unwrap();
    docker
        .remove_container(
            &c.id,
            Some(RemoveContainerOptions {
                force: true,
                ..Default::default()
            }),
        )
        .await
        .unwrap();
}

fn config() -> DockerConfig {
    common::docker_config(None)
}

fn runtime(docker_config: &Path) -> DockerRuntime {
    DockerRuntime::new(config())
        .unwrap()
        .with_registry_auth(DockerAuth::from_file(docker_config))
}

const THROUGHPUT: &str =
    "python3 benchmarks/benchmark_throughput.py --model standin/tiny --input-len 8 --output-len 8";

fn present(image: &str) -> bool {
    Command::new("docker")
        .args(["image", "inspect", image])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Good credentials from a config file: the pull carries them, layers come down with
/// progress, and the run on the pulled image goes on to its result.
#[tokio::test(flavor = "multi_thread")]
async fn pull_with_credentials_from_a_docker_config() {
    let t = require_tools!();
    let tmp = tempfile::tempdir().unwrap();
    let (reg, port) = start_registry(&t, tmp.path());
    let host = format!("127.0.0.1:{port}");
    let docker = nightshift::runtime::docker::connect().await.unwrap();
    let repo = format!("{host}/nightshift/standin");
    push(&docker, STANDIN, &repo, "latest", &host).await;
    let fresh_size = 8 << 20;
    let fresh_local = format!("ns-registry-fresh-{}", std::process::id());
    fresh_image(&docker, &fresh_local, "v1", fresh_size).await;
    push(&docker, &format!("{fresh_local}:v1"), &repo, "fresh", &host).await;
    // The local copy goes, so that its layer must come down from the registry (the
    // engine reports nothing per layer when every layer is already here).
    docker
        .remove_image(
            &format!("{fresh_local}:v1"),
            None::<bollard::query_parameters::RemoveImageOptions>,
            None,
        )
        .await
        .unwrap();
    let image = format!("{repo}:latest");
    let fresh = format!("{repo}:fresh");
    assert!(!present(&image) && !present(&fresh));
    let cfg = docker_config(tmp.path(), &host, PASSWORD);

    // The pull alone: a new layer, downloaded with progress.
    let (tx, mut rx) = tokio::sync::mpsc::channel(1 << 16);
    let sink = RunSink::new(nightshift::model::RunId(0), 1, tx);
    let collect = tokio::spawn(async move {
        let mut v = Vec::new();
        while let Some((_, _, m)) = rx.recv().await {
            v.push(m);
        }
        v
    });
    let started = Instant::now();
    let pulled = image::pull(&docker, &fresh, &DockerAuth::from_file(&cfg), &sink).await;
    let took = started.elapsed();
    drop(sink);
    let msgs = collect.await.unwrap();
    let text = logs_text(&msgs);
    assert!(pulled.is_ok(), "{text}\n--- registry\n{}", reg.log());
    assert!(present(&fresh));
    assert!(
        text.contains(&format!(
            "Pulling {fresh} with credentials for {host} (auths in {})",
            cfg.display()
        )),
        "{text}"
    );
    let layers: std::collections::BTreeSet<&str> = msgs
        .iter()
        .filter_map(|m| match m {
            RuntimeMsg::Pull { layer, done, total } if done == total => Some(layer.as_str()),
            _ => None,
        })
        .collect();
    assert!(!layers.is_empty(), "no layer progress: {text}");
    eprintln!(
        "figure: pulled {fresh} ({} MiB new layer, stand-in layers present) from the local registry with basic auth in {:.2} s",
        fresh_size >> 20,
        took.as_secs_f64()
    );

    // The stand-in itself, through the runtime: pulled with the credentials, then run.
    let rt = runtime(&cfg);
    let started = Instant::now();
    let (end, msgs) = run_one(&rt, common::job(&image, THROUGHPUT)).await;
    let text = logs_text(&msgs);
    assert_eq!(end, RunEnd::BenchExited { exit_code: 0 }, "{text}");
    assert!(
        text.contains(&format!("Pulling {image} with credentials for {host}")),
        "{text}"
    );
    assert!(text.contains("Throughput: "), "{text}");
    eprintln!(
        "figure: stand-in pulled from the local registry and benchmarked in {:.2} s",
        started.elapsed().as_secs_f64()
    );
    // The password is in no message.
    assert!(!format!("{msgs:?}").contains(PASSWORD));

    for i in [&image, &fresh, &format!("{fresh_local}:v1")] {
        let _ = docker
            .remove_image(
                i,
                None::<bollard::query_parameters::RemoveImageOptions>,
                None,
            )
            .await;
    }
}

/// What the engine made of a sweep: every finding, final states, all events as text.
#[derive(Default)]
struct Seen {
    findings: Vec<(u32, u32, Finding)>,
    success: Vec<u32>,
    text: String,
}

/// A plan of one human run per image (throughput, 1 GPU each).
fn plan(dir: &Path, name: &str, images: &[&str]) -> Arc<nightshift::plan::Plan> {
    let mut toml = format!(
        "schema_version = 1\nname = \"{name}\"\n[defaults]\ngpu_type = \"H100\"\ngpu_count = 1\n\
         run_timeout_s = 120\nvariants = [\"human\"]\n[images]\norg = \"nightshift\"\nhuman = \"{STANDIN}\"\n"
    );
    for (i, img) in images.iter().enumerate() {
        let c = format!("{:040x}", 0xc0ffee + i);
        let p = format!("{:040x}", 0xbeef + i);
        toml.push_str(&format!(
            "[[commits]]\ncommit = \"{c}\"\nparent = \"{p}\"\nmodel = \"standin/tiny\"\ngpu_config = \"H100:1\"\n\
             vllm_version = \"0.8.5\"\nperf_command = '''{THROUGHPUT}'''\nimages = {{ human = \"{img}\" }}\n"
        ));
    }
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, toml).unwrap();
    Arc::new(nightshift::plan::Plan::load(&path).unwrap())
}

/// Runs `plan` through the engine on the Docker runtime with `docker_config`; `done`
/// decides from what was seen so far when to stop (else the sweep runs out).
async fn sweep(
    plan: Arc<nightshift::plan::Plan>,
    docker_config: &Path,
    gpus: u32,
    budget: Option<nightshift::images::Budget>,
    done: impl Fn(&Seen) -> bool + Send + 'static,
) -> (nightshift::engine::Summary, Seen) {
    let rt = Arc::new(runtime(docker_config));
    let (engine, _cmds) = nightshift::engine::Engine::new(
        plan,
        rt,
        nightshift::engine::EngineOptions {
            gpus,
            seed: 1,
            wait_for_operator: false,
        },
    );
    // Backoffs scaled down (10 min → 0.6 s); Docker runs in real time.
    let mut engine = engine.with_time_scale(0.001);
    // The box's real free disk must not decide a test: without a budget of its own a test
    // keeps no headroom and expects images of the stand-in's size, not a real vLLM's 20 GB
    // (CI machines may have less free than the defaults assume). Either way the shared
    // stand-in image is never evicted from under the tests running beside this one.
    let mut budget = budget.unwrap_or(nightshift::images::Budget {
        min_free: 0,
        default_size: 64 << 20,
        ..Default::default()
    });
    budget.keep.insert(STANDIN.to_string());
    engine = engine.with_image_budget(budget);
    let seen = Arc::new(Mutex::new(Seen::default()));
    let stop = CancellationToken::new();
    {
        let (seen, stop) = (seen.clone(), stop.clone());
        engine.observe(Box::new(move |env: &Envelope| {
            let mut s = seen.lock().unwrap();
            s.text.push_str(&format!("{:?}\n", env.event));
            match &env.event {
                Event::Diagnosed {
                    run,
                    attempt,
                    finding,
                } => s.findings.push((run.0, *attempt, finding.clone())),
                Event::State {
                    run,
                    to:
                        RunState::Finished {
                            outcome: Outcome::Success,
                        },
                    ..
                } => s.success.push(run.0),
                _ => {}
            }
            if done(&s) {
                stop.cancel();
            }
            Ok(())
        }));
    }
    let guard = {
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(240)).await;
            stop.cancel();
        })
    };
    let (summary, _state) = engine.run(stop).await.unwrap();
    guard.abort();
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    (summary, seen)
}

/// Wrong credentials, and none at all: `registry_auth`, held for the operator with the
/// `docker login` hint — not `image_not_found`, and the image is not derived or retried.
#[tokio::test(flavor = "multi_thread")]
async fn wrong_or_missing_credentials_are_registry_auth() {
    let t = require_tools!();
    let tmp = tempfile::tempdir().unwrap();
    let (reg, port) = start_registry(&t, tmp.path());
    let host = format!("127.0.0.1:{port}");
    let docker = nightshift::runtime::docker::connect().await.unwrap();
    let repo = format!("{host}/nightshift/standin");
    push(&docker, STANDIN, &repo, "latest", &host).await;
    let image = format!("{repo}:latest");
    let name = format!("ns-regauth-{}", std::process::id());

    for (case, cfg, line) in [
        (
            "wrong password",
            docker_config(tmp.path(), &host, "not-the-password"),
            "unauthorized: authentication required",
        ),
        (
            "no config file",
            tmp.path().join("absent/config.json"),
            "no basic auth credentials",
        ),
    ] {
        let (summary, seen) =
            sweep(plan(tmp.path(), &name, &[&image]), &cfg, 1, None, |_| false).await;
        assert_eq!(seen.findings.len(), 1, "{case}: {}", seen.text);
        let (_, attempt, f) = &seen.findings[0];
        assert_eq!(*attempt, 1);
        assert_eq!(
            f.category,
            Category::RegistryAuth,
            "{case}: {f:?}\n--- registry\n{}",
            reg.log()
        );
        assert!(f.evidence.contains(line), "{case}: {}", f.evidence);
        assert_eq!(f.action, Action::Operator, "{case}");
        assert!(f.reason.contains("docker login"), "{case}: {}", f.reason);
        assert_eq!(
            summary.failures.get(&Category::RegistryAuth),
            Some(&1),
            "{case}"
        );
        assert!(summary.paused.is_none(), "{case}");
        assert!(!seen.text.contains(PASSWORD) && !seen.text.contains("not-the-password"));
        assert!(!present(&image), "{case}");
    }
}

/// A registry answering 429: `registry_rate_limited`, pulled again later without
/// spending a retry or touching the breaker, while another run uses the GPU meanwhile.
#[tokio::test(flavor = "multi_thread")]
async fn rate_limited_pulls_wait_and_other_runs_go_on() {
    let t = require_tools!();
    let tmp = tempfile::tempdir().unwrap();
    let (_reg, port) = start_registry(&t, tmp.path());
    let (nginx, limited) = start_rate_limiter(&t, tmp.path(), port);
    let host = format!("127.0.0.1:{limited}");
    let image = format!("{host}/nightshift/standin:latest");
    let cfg = docker_config(tmp.path(), &host, PASSWORD);
    let name = format!("ns-ratelimit-{}", std::process::id());
    // Run 0 is rate-limited; run 1's image is here. One GPU: run 0 must not hold it.
    let (summary, seen) = sweep(
        plan(tmp.path(), &name, &[&image, STANDIN]),
        &cfg,
        1,
        None,
        |s: &Seen| s.success.contains(&1) && s.findings.iter().filter(|f| f.0 == 0).count() >= 3,
    )
    .await;
    let limited: Vec<_> = seen.findings.iter().filter(|f| f.0 == 0).collect();
    assert!(
        limited.len() >= 3,
        "{}\n--- nginx\n{}",
        seen.text,
        nginx.log()
    );
    for (_, attempt, f) in &limited {
        assert_eq!(f.category, Category::RegistryRateLimited, "{f:?}");
        assert!(f.evidence.contains("toomanyrequests"), "{}", f.evidence);
        assert_eq!(f.action, Action::Retry, "attempt {attempt}: {}", f.reason);
        assert!(f.reason.contains("spends no retry"), "{}", f.reason);
    }
    // Past the default retry limit (2) it still waits its turn.
    assert!(limited.iter().any(|f| f.1 >= 3), "{limited:?}");
    assert!(seen.success.contains(&1), "{}", seen.text);
    assert!(summary.paused.is_none() && !seen.text.contains("Paused"));
    assert!(!seen.text.contains(PASSWORD));
}

/// Four images of 8 MB each (a 4 MB layer of their own on the stand-in's), room for two:
/// the engine brings each onto the box before its run takes the GPU, removes the ones no
/// remaining run needs, and never has more than the budget's worth on disk.
#[tokio::test(flavor = "multi_thread")]
async fn eviction_keeps_the_sweeps_images_within_the_budget() {
    let t = require_tools!();
    let tmp = tempfile::tempdir().unwrap();
    let (_reg, port) = start_registry(&t, tmp.path());
    let host = format!("127.0.0.1:{port}");
    let docker = nightshift::runtime::docker::connect().await.unwrap();
    let repo = format!("{host}/nightshift/evict");
    let local = format!("ns-evict-{}", std::process::id());
    let mut images = Vec::new();
    for i in 0..4 {
        let tag = format!("c{i}");
        fresh_image(&docker, &local, &tag, 4 << 20).await;
        push(&docker, &format!("{local}:{tag}"), &repo, &tag, &host).await;
        docker
            .remove_image(
                &format!("{local}:{tag}"),
                None::<bollard::query_parameters::RemoveImageOptions>,
                None,
            )
            .await
            .unwrap();
        images.push(format!("{repo}:{tag}"));
    }
    let cfg = docker_config(tmp.path(), &host, PASSWORD);
    let size = |img: &str| -> u64 {
        let out = Command::new("docker")
            .args(["image", "inspect", "--format", "{{.Size}}", img])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or(0)
    };
    let budget = nightshift::images::Budget {
        min_free: 0,
        max_bytes: Some(20 << 20),
        max_fetches: 2,
        lookahead: 4,
        default_size: 9 << 20,
        keep: Default::default(),
    };
    let watched = images.clone();
    let peak = Arc::new(Mutex::new(0u64));
    let peak_seen = peak.clone();
    let refs: Vec<&str> = images.iter().map(String::as_str).collect();
    let name = format!("ns-evict-{}", std::process::id());
    let (summary, seen) = sweep(
        plan(tmp.path(), &name, &refs),
        &cfg,
        1,
        Some(budget),
        move |s: &Seen| {
            // After every image event: what is on disk of the sweep's images.
            if s.text
                .lines()
                .last()
                .is_some_and(|l| l.starts_with("Image {"))
            {
                let on_disk: u64 = watched.iter().map(|i| size(i)).sum();
                let mut p = peak_seen.lock().unwrap();
                *p = (*p).max(on_disk);
            }
            false
        },
    )
    .await;
    assert_eq!(summary.counts.success, 4, "{}", seen.text);
    let evicted = seen.text.matches("status: Evicted").count();
    assert!(evicted >= 2, "{}", seen.text);
    let fetched = seen.text.matches("status: Fetching").count();
    assert_eq!(fetched, 4, "{}", seen.text);
    let peak = *peak.lock().unwrap();
    eprintln!("figure: 4 images of ~8 MiB, budget 20 MiB: {fetched} fetched ahead, {evicted} evicted, peak {:.1} MiB on disk", peak as f64 / (1 << 20) as f64);
    assert!(peak > 0 && peak <= 20 << 20, "peak {peak}");
    // Each run took the GPU only once its image was ready, and its attempt found it here.
    for (i, img) in images.iter().enumerate() {
        let ready = seen
            .text
            .find(&format!("Image {{ image: \"{img}\", status: Ready"))
            .unwrap_or_else(|| panic!("{img} never ready: {}", seen.text));
        let started = seen
            .text
            .find(&format!(
                "State {{ run: RunId({i}), attempt: 1, from: Queued"
            ))
            .unwrap_or_else(|| panic!("run {i} never started: {}", seen.text));
        assert!(ready < started, "run {i} started before {img} was ready");
        assert!(
            seen.text.contains(&format!("image {img} present")),
            "{}",
            seen.text
        );
    }
    for img in &images {
        let _ = Command::new("docker").args(["rmi", "-f", img]).output();
    }
}

/// Preflight asks the real registry for manifests with the Docker config's credentials:
/// an image pushed there exists (digest, size), a tag never pushed is missing, and a wrong
/// password is a refusal naming `docker login` — with no secret in any message.
#[tokio::test(flavor = "multi_thread")]
async fn preflight_asks_the_registry_for_manifests() {
    use nightshift::preflight::facts::ImageState;
    use nightshift::runtime::docker::auth::DockerAuth;
    let t = require_tools!();
    let tmp = tempfile::tempdir().unwrap();
    let (reg, port) = start_registry(&t, tmp.path());
    let host = format!("127.0.0.1:{port}");
    let docker = nightshift::runtime::docker::connect().await.unwrap();
    let repo = format!("{host}/nightshift/preflight");
    push(&docker, STANDIN, &repo, "there", &host).await;
    let client = nightshift::preflight::registry::client();
    let good = DockerAuth::from_file(docker_config(tmp.path(), &host, PASSWORD));

    match nightshift::preflight::registry::lookup(&client, &good, &format!("{repo}:there")).await {
        ImageState::Registry { digest, size } => {
            assert!(digest.starts_with("sha256:"), "{digest}");
            assert!(size > 1 << 20, "the stand-in's layers: {size}");
        }
        other => panic!("{other:?}\n--- registry\n{}", reg.log()),
    }
    // Asked with HEAD by tag (a GET counts as a pull on Docker Hub); the size by digest.
    let log = reg.log();
    let by_tag = |method: &str| {
        log.lines().any(|l| {
            l.contains(&format!("http.request.method={method}"))
                && l.contains("/v2/nightshift/preflight/manifests/there")
        })
    };
    assert!(by_tag("HEAD") && !by_tag("GET"), "{log}");
    match nightshift::preflight::registry::lookup(&client, &good, &format!("{repo}:never-pushed"))
        .await
    {
        ImageState::Missing { detail } => assert!(detail.contains("never-pushed"), "{detail}"),
        other => panic!("{other:?}"),
    }
    let wrong = DockerAuth::from_file(docker_config(tmp.path(), &host, "not-the-password"));
    match nightshift::preflight::registry::lookup(&client, &wrong, &format!("{repo}:there")).await {
        ImageState::Denied { detail } => {
            assert!(detail.contains("docker login"), "{detail}");
            assert!(!detail.contains("not-the-password") && !detail.contains(PASSWORD));
        }
        other => panic!("{other:?}"),
    }
    let none = DockerAuth::from_file(tmp.path().join("absent/config.json"));
    assert!(matches!(
        nightshift::preflight::registry::lookup(&client, &none, &format!("{repo}:there")).await,
        ImageState::Denied { .. }
    ));
}
