//! Integration tests of the Docker runtime against the machine's Docker engine and the
//! stand-in vLLM images (scripts/build-standin.sh, built offline, reused when present).
//! Every test prints "SKIP: ..." and returns when Docker is unreachable, except in CI
//! (`CI=true`), where a missing Docker engine fails the test instead.

mod common;

use common::{git, logs_text, run_one, sharegpt_file, TOKEN};
use nightshift::model::Stage;
use nightshift::runtime::docker::secrets::Secrets;
use nightshift::runtime::docker::{DockerConfig, DockerRuntime};
use nightshift::runtime::{RunEnd, RunJob, RunSink, Runtime, RuntimeMsg};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// A vLLM-like clone with `benchmarks/` at a parent and three PR commits.
fn vllm_clone(dir: &Path) -> (String, Vec<String>) {
    std::fs::create_dir_all(dir.join("benchmarks")).unwrap();
    git(dir, &["init", "-q"]);
    for s in [
        "benchmark_serving.py",
        "benchmark_throughput.py",
        "benchmark_latency.py",
    ] {
        std::fs::write(dir.join("benchmarks").join(s), "# stand-in\n").unwrap();
    }
    git(dir, &["add", "."]);
    git(dir, &["commit", "-qm", "parent"]);
    let parent = git(dir, &["rev-parse", "HEAD"]);
    let mut prs = Vec::new();
    for i in 0..3 {
        std::fs::write(dir.join("benchmarks/README"), format!("pr {i}\n")).unwrap();
        git(dir, &["add", "."]);
        git(dir, &["commit", "-qm", "pr"]);
        prs.push(git(dir, &["rev-parse", "HEAD"]));
    }
    (parent, prs)
}

/// Its second file is outside the package: the image holds vLLM installed (no source
/// tree), so that hunk is dropped and recorded, and the rest applies.
const GOOD_PATCH: &str = "--- a/vllm/worker/model_runner.py\n+++ b/vllm/worker/model_runner.py\n@@ -1 +1,2 @@\n # model_runner\n+# faster\n--- a/tests/test_model_runner.py\n+++ b/tests/test_model_runner.py\n@@ -1 +1 @@\n-def test_old(): pass\n+def test_new(): pass\n";
const BAD_PATCH: &str = "--- a/vllm/worker/model_runner.py\n+++ b/vllm/worker/model_runner.py\n@@ -1 +1,2 @@\n # something else entirely\n+# faster\n";

/// 3 commits × (baseline, human, agent:a1), serving. Commit A: the human image has the
/// aimv2 conflict; B: the human server OOMs while loading; C: the agent patch does not apply.
fn fixture(dir: &Path, sweep: &str) -> (PathBuf, Vec<String>) {
    let src = dir.join("vllm");
    let (parent, prs) = vllm_clone(&src);
    let hf = dir.join("hf");
    std::fs::create_dir_all(&hf).unwrap();
    let commits = [
        (prs[0].as_str(), "aimv2", "serving"),
        (prs[1].as_str(), "oom", "serving"),
        (prs[2].as_str(), "latest", "serving"),
    ];
    let mut toml = format!(
        r#"schema_version = 1
name = "{sweep}"
[defaults]
gpu_type = "H100"
gpu_count = 1
hf_cache = "{hf}"
shm_size = "1g"
server_start_timeout_s = 60
run_timeout_s = 120
variants = ["baseline", "human", "agent"]
vllm_src = "{src}"
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
        hf = hf.display(),
        src = src.display(),
        sharegpt = sharegpt_file(dir).display()
    );
    std::fs::create_dir_all(dir.join("patches")).unwrap();
    for (c, human, kind) in commits {
        let cmd = if kind == "serving" {
            "python benchmarks/benchmark_serving.py --model standin/tiny --num-prompts 20"
        } else {
            "python3 benchmarks/benchmark_throughput.py --model standin/tiny --input-len 8 --output-len 8"
        };
        toml.push_str(&format!(
            "[[commits]]\ncommit = \"{c}\"\nparent = \"{parent}\"\nmodel = \"standin/tiny\"\ngpu_config = \"H100:1\"\nvllm_version = \"0.8.5\"\nperf_command = '''{cmd}'''\nimages = {{ human = \"nightshift-standin:{human}\" }}\n"
        ));
        let patch = if c == prs[2] { BAD_PATCH } else { GOOD_PATCH };
        std::fs::write(dir.join(format!("patches/{}.diff", &c[..8])), patch).unwrap();
    }
    let path = dir.join("plan.toml");
    std::fs::write(&path, toml).unwrap();
    (path, prs)
}

fn sweep_containers(sweep: &str) -> Vec<String> {
    let out = Command::new("docker")
        .args([
            "ps",
            "-aq",
            "--filter",
            &format!("label=nightshift.sweep={sweep}"),
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

fn all_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            all_files(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// Printer output captured in memory.
#[derive(Clone, Default)]
struct SharedBuf(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for SharedBuf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The sweep as `nightshift run PLAN --runtime docker --headless --log-dir DIR` runs it,
/// in-process: engine + headless printer + log writer over the Docker runtime. (Not via the
/// binary: a shared cargo target dir lets other checkouts overwrite it mid-test.)
#[tokio::test(flavor = "multi_thread")]
async fn headless_sweep_end_to_end() {
    require_docker!();
    let tmp = tempfile::tempdir().unwrap();
    let sweep = format!("ns-e2e-{}", std::process::id());
    let (plan_path, prs) = fixture(tmp.path(), &sweep);
    let (a, b, c) = (&prs[0][..12], &prs[1][..12], &prs[2][..12]);
    let logs = tmp.path().join("logs");
    let plan = std::sync::Arc::new(nightshift::plan::Plan::load(&plan_path).unwrap());
    let mut cfg = DockerConfig::from_plan(&plan);
    cfg.secrets = Secrets::with_token(Some(TOKEN.into()));
    cfg.gpu_requests = false;
    cfg.stop_grace_s = 5;
    let rt = std::sync::Arc::new(DockerRuntime::new(cfg).unwrap());
    let (engine, _cmds) = nightshift::engine::Engine::new(
        plan.clone(),
        rt,
        nightshift::engine::EngineOptions {
            gpus: 3,
            seed: 1,
            wait_for_operator: false,
        },
    );
    // Policy backoffs (a 30 s retry after an OOM) shortened; Docker runs in real time.
    let mut engine = engine.with_time_scale(0.02);
    let buf = SharedBuf::default();
    engine.observe(Box::new(nightshift::headless::Printer::new(
        plan.clone(),
        buf.clone(),
    )));
    let keys = plan.runs.iter().map(|r| r.key.clone()).collect();
    engine.observe(Box::new(nightshift::engine::logs::LogWriter::new(
        logs.clone(),
        keys,
    )));
    let t = Instant::now();
    let (summary, _state) = engine.run(CancellationToken::new()).await.unwrap();
    let mut out = buf.clone();
    nightshift::headless::print_summary(&mut out, &plan, &summary).unwrap();
    let stdout = String::from_utf8_lossy(&buf.0.lock().unwrap()).to_string();
    eprintln!(
        "sweep took {:.1} s\n--- output\n{stdout}",
        t.elapsed().as_secs_f64()
    );
    assert!(!summary.interrupted && summary.counts.queued == 0);

    // No container of the sweep is left.
    assert_eq!(sweep_containers(&sweep), Vec::<String>::new());

    // The token is in no log, output or store.
    assert!(!stdout.contains(TOKEN));
    let mut files = Vec::new();
    all_files(tmp.path(), &mut files);
    let mut server_lines = 0;
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains(TOKEN), "token found in {}", f.display());
        if f.ends_with("server.stdout.log") {
            server_lines += text.lines().count();
            if text.contains("HF_TOKEN=") {
                assert!(text.contains("HF_TOKEN=[REDACTED]"));
            }
        }
    }
    assert!(server_lines > 0, "no server log on disk");
    assert!(
        files.iter().any(|f| std::fs::read_to_string(f)
            .is_ok_and(|t| t.contains("hunks for tests/test_model_runner.py are dropped"))),
        "the dropped hunk is not recorded in any run log"
    );

    // Every line on disk: the stand-in's 200 kB progress line and its unterminated last line.
    let bench_err: Vec<&PathBuf> = files
        .iter()
        .filter(|f| f.ends_with("bench.stderr.log"))
        .collect();
    assert!(!bench_err.is_empty(), "no benchmark stderr logs");
    let mut long_seen = false;
    for f in &bench_err {
        let text = std::fs::read_to_string(f).unwrap();
        if text
            .lines()
            .any(|l| l.len() > 200_000 && l.ends_with("199.00it/s]"))
        {
            long_seen = true;
            assert!(
                text.contains("benchmark finished (no newline at end)"),
                "last unterminated line missing in {}",
                f.display()
            );
        }
    }
    assert!(long_seen, "the 200 kB line was not kept whole");
    // Streams kept apart: result lines only in stdout logs.
    for f in &bench_err {
        let text = std::fs::read_to_string(f).unwrap();
        assert!(!text.contains("Serving Benchmark Result"));
    }

    // Outcomes, as the headless printer shows them ("#1 <commit12>/human a2 success").
    let has = |key: &str, words: &[&str]| {
        stdout
            .lines()
            .any(|l| l.contains(key) && words.iter().all(|w| l.contains(w)))
    };
    assert!(has(&format!("{a}/human"), &["diagnosed aimv2_conflict"]));
    assert!(has(
        &format!("{a}/human"),
        &["retry with fix aimv2-exist-ok"]
    ));
    assert!(
        has(&format!("{a}/human"), &["a2", "success"]),
        "aimv2 fixed → success on retry"
    );
    assert!(
        has(&format!("{b}/human"), &["diagnosed cuda_oom"]),
        "OOM → cuda_oom"
    );
    assert!(has(
        &format!("{c}/agent:a1"),
        &["diagnosed agent_patch_failed"]
    ));
    for ok in [
        format!("{a}/baseline"),
        format!("{a}/agent:a1"),
        format!("{b}/baseline"),
        format!("{b}/agent:a1"),
        format!("{c}/baseline"),
        format!("{c}/human"),
    ] {
        assert!(has(&ok, &["a1", "success"]), "{ok} should succeed");
    }
    assert!(
        stdout.contains("success 7  failed 2"),
        "7 successes, 2 failures"
    );
}

fn job(image: &str, command: &str, sweep: &str, parent: &str, attempt: u32) -> RunJob {
    RunJob {
        attempt,
        sweep: sweep.into(),
        commit: parent.into(),
        parent: Some(parent.into()),
        ..common::job(image, command)
    }
}

fn runtime(src: &Path) -> DockerRuntime {
    DockerRuntime::new(config(src)).unwrap()
}

fn config(src: &Path) -> DockerConfig {
    DockerConfig {
        hf_cache: None,
        shm_size: Some("256m".into()),
        ipc: None,
        vllm_src: Some(src.to_path_buf()),
        min_free_bytes: 0,
        stop_grace_s: 2,
        gpu_requests: false,
        secrets: Secrets::with_token(Some(TOKEN.into())),
        weights: None,
        gpu_mem_per_gpu: None,
        warmup_requests: 0,
        prefetch: true,
        build: Default::default(),
        datasets: std::collections::BTreeMap::from([(
            "sharegpt".to_string(),
            sharegpt_file(src.parent().unwrap_or(src)),
        )]),
    }
}

/// aimv2: fails at import; the recipe's `sed` runs in a prep container, which is committed
/// to the fixed tag; the retry on that image serves and benchmarks for real.
#[tokio::test(flavor = "multi_thread")]
async fn aimv2_fix_commit_and_retry() {
    require_docker!();
    let tmp = tempfile::tempdir().unwrap();
    let (parent, _) = vllm_clone(&tmp.path().join("vllm"));
    let src = tmp.path().join("vllm");
    let rt = runtime(&src);
    let sweep = format!("ns-aimv2-{}", std::process::id());
    let cmd = "python benchmarks/benchmark_serving.py --model standin/tiny --num-prompts 5";
    let _ = Command::new("docker")
        .args(["rmi", "-f", "nightshift-standin:aimv2-nsfix-aimv2-exist-ok"])
        .output();

    let t = Instant::now();
    let (end, msgs) = run_one(
        &rt,
        job("nightshift-standin:aimv2", cmd, &sweep, &parent, 1),
    )
    .await;
    assert!(
        matches!(end, RunEnd::ServerDied { exit_code: Some(1) }),
        "{end:?}"
    );
    assert!(
        t.elapsed() < Duration::from_secs(20),
        "server death noticed at once"
    );
    assert!(logs_text(&msgs).contains("'aimv2' is already used by a Transformers config"));

    let mut j = job("nightshift-standin:aimv2", cmd, &sweep, &parent, 2);
    j.fixes = vec!["aimv2-exist-ok".into()];
    let (end, msgs) = run_one(&rt, j).await;
    let text = logs_text(&msgs);
    assert_eq!(end, RunEnd::BenchExited { exit_code: 0 }, "{text}");
    assert!(msgs
        .iter()
        .any(|m| matches!(m, RuntimeMsg::FixApplied { recipe } if recipe == "aimv2-exist-ok")));
    assert!(text.contains("committed fixed image nightshift-standin:aimv2-nsfix-aimv2-exist-ok"));
    assert!(text.contains("Serving Benchmark Result"));
    assert!(!text.contains(TOKEN));
    let stages: Vec<Stage> = msgs
        .iter()
        .filter_map(|m| match m {
            RuntimeMsg::Stage(s) => Some(*s),
            _ => None,
        })
        .collect();
    assert_eq!(
        stages,
        [
            Stage::PreparingImage,
            Stage::StartingContainer,
            Stage::LoadingServer,
            Stage::Benchmarking
        ]
    );
    assert_eq!(sweep_containers(&sweep), Vec::<String>::new());
}

/// `commit_image = false` (here set by an operator override, as a plan's `[[recipe]]`
/// would): every attempt runs the recipe's steps again in an image of its own, removed at
/// teardown; no fixed image is kept for later runs.
#[tokio::test(flavor = "multi_thread")]
async fn a_fix_without_commit_image_is_redone_each_attempt_and_not_kept() {
    require_docker!();
    let tmp = tempfile::tempdir().unwrap();
    let (parent, _) = vllm_clone(&tmp.path().join("vllm"));
    let src = tmp.path().join("vllm");
    let mut recipe = nightshift::diagnose::RecipeBook::builtin()
        .get("aimv2-exist-ok")
        .unwrap()
        .clone();
    recipe.commit_image = false;
    let text = toml::to_string(&std::collections::BTreeMap::from([(
        "recipe",
        vec![recipe],
    )]))
    .unwrap();
    let book = nightshift::diagnose::RecipeBook::builtin()
        .with_overrides(&text, "recipes.toml")
        .unwrap();
    let rt = runtime(&src).with_recipes(std::sync::Arc::new(book));
    let sweep = format!("ns-nocommit-{}", std::process::id());
    let cmd = "python benchmarks/benchmark_serving.py --model standin/tiny --num-prompts 5";
    let images = || {
        let o = Command::new("docker")
            .args(["images", "--format", "{{.Repository}}:{{.Tag}}"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    for attempt in 1..=2 {
        let mut j = job("nightshift-standin:aimv2", cmd, &sweep, &parent, attempt);
        j.fixes = vec!["aimv2-exist-ok".into()];
        let (end, msgs) = run_one(&rt, j).await;
        let text = logs_text(&msgs);
        assert_eq!(end, RunEnd::BenchExited { exit_code: 0 }, "{text}");
        assert!(text.contains("commit_image = false: not kept"), "{text}");
        assert!(!text.contains("reusing fixed image"), "{text}");
        assert!(text.contains("Serving Benchmark Result"));
        // (The kept tag itself is another test's to make: only this test's images count.)
        let now = images();
        let leftover = format!("-a{attempt}-fix\n");
        assert!(
            !now.contains(&leftover),
            "the attempt's image is removed: {now}"
        );
    }
    assert_eq!(sweep_containers(&sweep), Vec::<String>::new());
}

/// An offline benchmark (no server): the container idles, the command runs by exec and
/// prints its result; no server stage.
#[tokio::test(flavor = "multi_thread")]
async fn throughput_runs_without_server() {
    require_docker!();
    let tmp = tempfile::tempdir().unwrap();
    let (parent, _) = vllm_clone(&tmp.path().join("vllm"));
    let rt = runtime(&tmp.path().join("vllm"));
    let sweep = format!("ns-tput-{}", std::process::id());
    let cmd = "python3 benchmarks/benchmark_throughput.py --model standin/tiny --input-len 8";
    let (end, msgs) = run_one(
        &rt,
        job("nightshift-standin:latest", cmd, &sweep, &parent, 1),
    )
    .await;
    let text = logs_text(&msgs);
    assert_eq!(end, RunEnd::BenchExited { exit_code: 0 }, "{text}");
    assert!(text.contains("Throughput: 24.61 requests/s"));
    assert!(!msgs.contains(&RuntimeMsg::Stage(Stage::LoadingServer)));
    assert_eq!(sweep_containers(&sweep), Vec::<String>::new());
}

/// `--output-json`: the file the benchmark writes is copied out of the container for the
/// parser, and its exact numbers win over the printed, rounded ones.
#[tokio::test(flavor = "multi_thread")]
async fn result_files_are_copied_out() {
    require_docker!();
    let tmp = tempfile::tempdir().unwrap();
    let (parent, _) = vllm_clone(&tmp.path().join("vllm"));
    let rt = runtime(&tmp.path().join("vllm"));
    let sweep = format!("ns-json-{}", std::process::id());
    let cmd = "python3 benchmarks/benchmark_throughput.py --model standin/tiny --input-len 8 --output-len 8 --output-json /tmp/tput.json";
    let j = job("nightshift-standin:latest", cmd, &sweep, &parent, 1);
    let (tx, mut rx) = tokio::sync::mpsc::channel(1 << 16);
    let sink = RunSink::new(j.run, j.attempt, tx);
    let drain = tokio::spawn(async move { while rx.recv().await.is_some() {} });
    let report = rt.execute(j, sink, CancellationToken::new()).await;
    drain.await.unwrap();
    assert_eq!(report.end, RunEnd::BenchExited { exit_code: 0 });
    assert_eq!(report.result_files.len(), 1, "{:?}", report.result_files);
    let parsed = nightshift::parse::parse_bytes(&std::fs::read(&report.result_files[0]).unwrap());
    assert_eq!(parsed.metrics.get("throughput_req_s"), Some(&24.6123456789));
    assert_eq!(sweep_containers(&sweep), Vec::<String>::new());
}

/// CUDA-graph capture hang → server-start timeout, container removed.
#[tokio::test(flavor = "multi_thread")]
async fn hang_times_out_and_tears_down() {
    require_docker!();
    let tmp = tempfile::tempdir().unwrap();
    let (parent, _) = vllm_clone(&tmp.path().join("vllm"));
    let src = tmp.path().join("vllm");
    let rt = runtime(&src);
    let sweep = format!("ns-hang-{}", std::process::id());
    let mut j = job(
        "nightshift-standin:hang",
        "python benchmarks/benchmark_serving.py --model standin/tiny",
        &sweep,
        &parent,
        1,
    );
    j.server_start_timeout = Duration::from_secs(3);
    let (end, msgs) = run_one(&rt, j).await;
    assert_eq!(
        end,
        RunEnd::Timeout {
            stage: Stage::LoadingServer
        }
    );
    assert!(logs_text(&msgs).contains("Capturing"));
    assert_eq!(sweep_containers(&sweep), Vec::<String>::new());
}

/// A missing image: with too little free space on Docker's root the pull is refused up
/// front (disk_full); otherwise it is pulled, and here, with no registry reachable, the
/// run ends at the image stage with the daemon's message. No container either way.
#[tokio::test(flavor = "multi_thread")]
async fn missing_image_disk_check_then_pull() {
    require_docker!();
    let tmp = tempfile::tempdir().unwrap();
    let sweep = format!("ns-pull-{}", std::process::id());
    let image = "nightshift-standin:no-such-tag";
    let cmd = "vllm bench serve --model standin/tiny";
    let cfg_rt = runtime(tmp.path());
    let (end, msgs) = {
        let rt = DockerRuntime::new(DockerConfig {
            min_free_bytes: u64::MAX,
            ..config(tmp.path())
        })
        .unwrap();
        run_one(&rt, job(image, cmd, &sweep, "HEAD", 1)).await
    };
    assert!(
        matches!(&end, RunEnd::DiskFull { message } if message.contains("not pulling")),
        "{end:?}"
    );
    assert!(!msgs.contains(&RuntimeMsg::Stage(Stage::StartingContainer)));
    let (end, msgs) = run_one(&cfg_rt, job(image, cmd, &sweep, "HEAD", 1)).await;
    assert!(
        matches!(
            &end,
            RunEnd::ImageMissing { .. }
                | RunEnd::Error {
                    stage: Stage::PreparingImage,
                    ..
                }
        ),
        "{end:?}"
    );
    assert!(logs_text(&msgs).contains("Pulling nightshift-standin:no-such-tag"));
    assert_eq!(sweep_containers(&sweep), Vec::<String>::new());
}

/// Cancelling a run in flight (operator cancel, Ctrl-C) returns promptly and leaves no
/// container behind.
#[tokio::test(flavor = "multi_thread")]
async fn cancel_returns_promptly_and_tears_down() {
    require_docker!();
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime(tmp.path());
    let sweep = format!("ns-cancel-{}", std::process::id());
    let (tx, mut rx) = tokio::sync::mpsc::channel(1 << 16);
    let j = job(
        "nightshift-standin:hang",
        "vllm bench serve --model standin/tiny",
        &sweep,
        "HEAD",
        1,
    );
    let sink = RunSink::new(j.run, j.attempt, tx);
    let drain = tokio::spawn(async move { while rx.recv().await.is_some() {} });
    let cancel = CancellationToken::new();
    let c2 = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        c2.cancel();
    });
    let t = Instant::now();
    let report = rt.execute(j, sink, cancel).await;
    assert_eq!(report.end, RunEnd::Cancelled);
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert_eq!(sweep_containers(&sweep), Vec::<String>::new());
    drain.abort();
}

/// Leftovers of an earlier nightshift of the sweep are found by label and removed.
#[tokio::test(flavor = "multi_thread")]
async fn leftovers_are_removed() {
    require_docker!();
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime(tmp.path());
    let sweep = format!("ns-left-{}", std::process::id());
    let out = Command::new("docker")
        .args([
            "run",
            "-d",
            "--label",
            &format!("nightshift.sweep={sweep}"),
            "--entrypoint",
            "tail",
            "nightshift-standin:latest",
            "-f",
            "/dev/null",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let removed = rt.cleanup_leftovers(&sweep).await.unwrap();
    assert_eq!(removed.len(), 1, "{removed:?}");
    assert_eq!(sweep_containers(&sweep), Vec::<String>::new());
}
