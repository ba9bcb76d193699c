//! The seeds' commands against stand-in images that fail the way real ones do (no bare
//! `python`, strict argparse clients, datasets that must exist, shims from v0.10.2): the
//! runtime probes the interpreter, learns the client's flags from `--help`, and runs the
//! command as rewritten, recording every change.

mod common;

use common::{argv, family_image, logs_text, provenance, run_one, sharegpt_file};
use nightshift::runtime::docker::{DockerConfig, DockerRuntime};
use nightshift::runtime::{RunEnd, RunJob};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

fn config(dir: &Path, sharegpt: bool) -> DockerConfig {
    let mut datasets = BTreeMap::new();
    if sharegpt {
        datasets.insert("sharegpt".to_string(), sharegpt_file(dir));
    }
    DockerConfig {
        datasets,
        ..common::docker_config(None)
    }
}

fn job(image: &str, command: &str, commit: &str, version: &str) -> RunJob {
    RunJob {
        key: format!("{commit}/human"),
        sweep: format!("ns-real-{}", std::process::id()),
        commit: commit.into(),
        vllm_version: Some(version.into()),
        ..common::job(image, command)
    }
}

fn docker_run(image: &str, args: &[&str]) -> (i32, String) {
    let out = Command::new("docker")
        .args(["run", "--rm", "--entrypoint", args[0], image])
        .args(&args[1..])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// The stand-in is not kinder than a real image: the seeds' commands as written fail.
#[test]
fn the_seeds_commands_fail_as_written_on_a_real_layout() {
    require_docker!();
    let img = "nightshift-standin:latest";
    let (code, text) = docker_run(img, &["sh", "-c", "python --version"]);
    assert_ne!(code, 0, "an official image has no bare python: {text}");
    let (code, text) = docker_run(
        img,
        &[
            "python3",
            "benchmarks/benchmark_serving.py",
            "--model",
            "m",
            "--dtype",
            "float16",
        ],
    );
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("error: unrecognized arguments: --dtype float16"),
        "{text}"
    );
    let (code, text) = docker_run(
        img,
        &["python3", "benchmarks/benchmark_serving.py", "--model", "m"],
    );
    assert_eq!(
        code, 1,
        "no dataset: the client opens ShareGPT and has no path: {text}"
    );
    let (code, text) = docker_run(
        img,
        &["python3", "benchmarks/benchmark_serving.py", "--help"],
    );
    assert_eq!(code, 0);
    assert!(
        text.contains("options:") && text.contains("--dataset-path"),
        "{text}"
    );
}

/// Engine flags go to the server, ShareGPT is mounted, the interpreter is found; the
/// argv as executed is recorded, and the client is one the era accepts.
#[tokio::test(flavor = "multi_thread")]
async fn serving_command_is_split_and_runs() {
    require_docker!();
    let tmp = tempfile::tempdir().unwrap();
    let rt = DockerRuntime::new(config(tmp.path(), true)).unwrap();
    let cmd = "python benchmarks/benchmark_serving.py --model standin/tiny --dtype float16 --num-prompts 10 --seed 0";
    let (end, msgs) = run_one(&rt, job("nightshift-standin:latest", cmd, "c1", "0.8.5")).await;
    let logs = logs_text(&msgs);
    assert_eq!(end, RunEnd::BenchExited { exit_code: 0 }, "{logs}");
    assert!(logs.contains("Serving Benchmark Result"), "{logs}");
    assert_eq!(
        provenance(&msgs, "interpreter").as_deref(),
        Some("/usr/bin/python3")
    );
    let bench = argv(&msgs, "bench_argv");
    let server = argv(&msgs, "server_argv");
    assert_eq!(bench[0], "/usr/bin/python3");
    assert_eq!(bench[1], "/vllm-workspace/benchmarks/benchmark_serving.py");
    assert!(!bench.contains(&"--dtype".to_string()), "{bench:?}");
    assert!(
        bench
            .windows(2)
            .any(|w| w[0] == "--dataset-path" && w[1].starts_with("/nightshift/datasets/")),
        "{bench:?}"
    );
    assert!(
        server.windows(2).any(|w| w == ["--dtype", "float16"]),
        "{server:?}"
    );
    let flags = provenance(&msgs, "client_flags").unwrap();
    assert!(flags.starts_with("--help"), "{flags}");
    let rewrites = provenance(&msgs, "rewrites").unwrap();
    for rule in [
        "\"split\"",
        "\"dataset\"",
        "\"interpreter\"",
        "\"per_request\"",
    ] {
        assert!(rewrites.contains(rule), "{rule} missing from {rewrites}");
    }
    // Per-request latencies asked for (0.8.5 has --save-detailed), the result file copied
    // out, and its arrays read: ten requests, each with a TTFT.
    assert!(bench.contains(&"--save-detailed".to_string()), "{bench:?}");
    let copied = logs
        .lines()
        .find_map(|l| {
            l.split(" to ")
                .nth(1)
                .filter(|_| l.contains("copied result file"))
        })
        .unwrap_or_else(|| panic!("no result file copied: {logs}"));
    let bytes = std::fs::read(copied.trim()).unwrap();
    let per = nightshift::requests::from_result_json(&bytes).expect("per-request arrays");
    assert_eq!((per.requests, per.failed), (10, 0));
    assert_eq!(per.values[0].len(), 10);
    assert!(provenance(&msgs, "bench_source")
        .unwrap()
        .contains("image nightshift-standin:latest"));
    // A second variant of the same commit on the same image: the probe and --help are cached.
    let (end, msgs2) = run_one(&rt, job("nightshift-standin:latest", cmd, "c1", "0.8.5")).await;
    assert_eq!(end, RunEnd::BenchExited { exit_code: 0 });
    assert_eq!(argv(&msgs2, "bench_argv"), bench);
    assert!(
        !logs_text(&msgs2).contains("probe"),
        "second probe on a cached image"
    );
}

/// An ISO-Bench baseline: vLLM editable at /opt/vllm_baseline, the scripts in its tree.
#[tokio::test(flavor = "multi_thread")]
async fn baseline_family_runs_from_its_tree() {
    require_docker!();
    let img = family_image(
        "baseline",
        "0.6.4",
        &[],
        "nightshift-standin:t-baseline-0.6.4",
    );
    let tmp = tempfile::tempdir().unwrap();
    let rt = DockerRuntime::new(config(tmp.path(), true)).unwrap();
    let cmd = "python benchmarks/benchmark_serving.py --model standin/tiny --enable-prefix-caching --num-prompts 8";
    let (end, msgs) = run_one(&rt, job(&img, cmd, "c2", "0.6.4")).await;
    let logs = logs_text(&msgs);
    assert_eq!(end, RunEnd::BenchExited { exit_code: 0 }, "{logs}");
    let bench = argv(&msgs, "bench_argv");
    assert_eq!(
        bench[1], "/opt/vllm_baseline/benchmarks/benchmark_serving.py",
        "{bench:?}"
    );
    assert!(argv(&msgs, "server_argv").contains(&"--enable-prefix-caching".to_string()));
}

/// From v0.10.2 the scripts are shims: the runtime runs `vllm bench serve` instead.
#[tokio::test(flavor = "multi_thread")]
async fn shim_era_runs_the_cli() {
    require_docker!();
    let img = family_image("human", "0.10.2", &[], "nightshift-standin:t-human-0.10.2");
    let tmp = tempfile::tempdir().unwrap();
    let rt = DockerRuntime::new(config(tmp.path(), false)).unwrap();
    let cmd = "python benchmarks/benchmark_serving.py --model standin/tiny --dataset-name random --random-input-len 8 --random-output-len 8 --num-prompts 8";
    let (end, msgs) = run_one(&rt, job(&img, cmd, "c3", "0.10.2")).await;
    let logs = logs_text(&msgs);
    assert_eq!(end, RunEnd::BenchExited { exit_code: 0 }, "{logs}");
    let bench = argv(&msgs, "bench_argv");
    assert_eq!(
        bench[..3],
        ["/usr/local/bin/vllm", "bench", "serve"],
        "the image's console script runs `vllm bench serve`: {bench:?}"
    );
    assert!(provenance(&msgs, "rewrites").unwrap().contains("\"cli\""));
}

/// What cannot run is known before any server starts, and says why.
#[tokio::test(flavor = "multi_thread")]
async fn refused_before_any_server_starts() {
    require_docker!();
    let tmp = tempfile::tempdir().unwrap();
    let rt = DockerRuntime::new(config(tmp.path(), false)).unwrap();
    let (end, msgs) = run_one(
        &rt,
        job("nightshift-standin:latest", "python benchmarks/benchmark_serving.py --model standin/tiny --batch-size 2 --dataset-name random", "c4", "0.8.5"),
    )
    .await;
    match &end {
        RunEnd::BenchInvalid { message } => assert!(message.contains("--batch-size"), "{message}"),
        other => panic!("expected BenchInvalid, got {other:?}"),
    }
    assert!(!msgs.iter().any(|m| matches!(
        m,
        nightshift::runtime::RuntimeMsg::Stage(nightshift::model::Stage::LoadingServer)
    )));
    let (end, _) = run_one(
        &rt,
        job(
            "nightshift-standin:latest",
            "python benchmarks/benchmark_serving.py --model standin/tiny",
            "c5",
            "0.8.5",
        ),
    )
    .await;
    match &end {
        RunEnd::BenchInvalid { message } => assert!(message.contains("[datasets]"), "{message}"),
        other => panic!("expected BenchInvalid for the missing ShareGPT file, got {other:?}"),
    }
    // An old official image has no benchmarks folder, and there is no clone.
    let img = family_image(
        "official",
        "0.4.2",
        &[],
        "nightshift-standin:t-official-0.4.2",
    );
    let (end, _) = run_one(
        &rt,
        job(
            &img,
            "python benchmarks/benchmark_serving.py --model standin/tiny --dataset-name sonnet",
            "c6",
            "0.4.2",
        ),
    )
    .await;
    match &end {
        RunEnd::BenchInvalid { message } => {
            assert!(message.contains("no benchmarks folder"), "{message}")
        }
        other => panic!("expected BenchInvalid for no benchmarks folder, got {other:?}"),
    }
}

/// Weights come into the host's HF cache before the server-start clock (a stand-in Hub
/// on 127.0.0.1), once; a gated repo stops the run before any container starts.
#[tokio::test(flavor = "multi_thread")]
async fn weights_are_fetched_before_the_server_starts() {
    require_docker!();
    let fake = common::hub::FakeHub::start();
    fake.add("standin/tiny", &"3".repeat(40), &common::hub::tiny_model());
    fake.add("standin/gated", &"4".repeat(40), &common::hub::tiny_model());
    fake.gate("standin/gated");
    let tmp = tempfile::tempdir().unwrap();
    let mut cfg = config(tmp.path(), false);
    cfg.hf_cache = Some(tmp.path().to_path_buf());
    cfg.weights = Some(fake.hub(tmp.path(), None));
    let rt = DockerRuntime::new(cfg).unwrap();
    let cmd = "python3 benchmarks/benchmark_serving.py --model standin/tiny --dataset-name random --random-input-len 8 --num-prompts 4";
    let (end, msgs) = run_one(&rt, job("nightshift-standin:latest", cmd, "w1", "0.8.5")).await;
    let logs = logs_text(&msgs);
    assert_eq!(end, RunEnd::BenchExited { exit_code: 0 }, "{logs}");
    assert!(logs.contains("weights of standin/tiny ready"), "{logs}");
    let pulled = msgs
        .iter()
        .any(|m| matches!(m, nightshift::runtime::RuntimeMsg::Pull { layer, .. } if layer.starts_with("weights ")));
    assert!(pulled, "weights progress reported");
    let snap = tmp.path().join("hub/models--standin--tiny/snapshots");
    assert!(
        std::fs::read_dir(&snap).unwrap().next().is_some(),
        "weights in the HF cache layout"
    );
    let fetched = fake.weight_gets();
    let (end, _) = run_one(&rt, job("nightshift-standin:latest", cmd, "w1", "0.8.5")).await;
    assert_eq!(end, RunEnd::BenchExited { exit_code: 0 });
    assert_eq!(
        fake.weight_gets(),
        fetched,
        "cached weights are not fetched again"
    );

    let gated = "python3 benchmarks/benchmark_serving.py --model standin/gated --dataset-name random --random-input-len 8";
    let (end, msgs) = run_one(&rt, job("nightshift-standin:latest", gated, "w2", "0.8.5")).await;
    assert!(matches!(end, RunEnd::Error { .. }), "{end:?}");
    assert!(
        logs_text(&msgs).contains("401 Client Error"),
        "{}",
        logs_text(&msgs)
    );
    assert!(!msgs.iter().any(|m| matches!(
        m,
        nightshift::runtime::RuntimeMsg::Stage(nightshift::model::Stage::LoadingServer)
    )));
}

/// `warmup_requests`: on a client without `--num-warmups` (0.8.5) nightshift sends them from
/// inside the container, and the server answers them before the benchmark starts; on one
/// with it (0.11.1+) the client is asked to. Recorded as a rewrite either way.
#[tokio::test(flavor = "multi_thread")]
async fn warmup_requests_reach_the_server_before_the_benchmark() {
    require_docker!();
    let tmp = tempfile::tempdir().unwrap();
    let rt = DockerRuntime::new(DockerConfig {
        warmup_requests: 3,
        ..config(tmp.path(), false)
    })
    .unwrap();
    // Its own commit: the weights test's w1 runs at the same time in this process, and two
    // attempts of one sweep, commit, variant and attempt would name the same container.
    let cmd = "python3 benchmarks/benchmark_serving.py --model standin/tiny --dataset-name random --random-input-len 8 --random-output-len 8 --num-prompts 4";
    let (end, msgs) = run_one(&rt, job("nightshift-standin:latest", cmd, "wu1", "0.8.5")).await;
    let logs = logs_text(&msgs);
    assert_eq!(end, RunEnd::BenchExited { exit_code: 0 }, "{logs}");
    let warm = provenance(&msgs, "warmup").unwrap_or_default();
    assert!(warm.contains("3 of 3 requests"), "{warm}\n{logs}");
    let rewrites = provenance(&msgs, "rewrites").unwrap();
    assert!(rewrites.contains("\"warmup\""), "{rewrites}");
    assert!(!argv(&msgs, "bench_argv").contains(&"--num-warmups".to_string()));
    // The server saw the warm-up's completions before the benchmark client's first line.
    let lines: Vec<(&nightshift::model::Stream, &str)> = msgs
        .iter()
        .filter_map(|m| match m {
            nightshift::runtime::RuntimeMsg::Log { stream, line, .. } => {
                Some((stream, line.as_str()))
            }
            _ => None,
        })
        .collect();
    let first_bench = lines
        .iter()
        .position(|(s, _)| **s == nightshift::model::Stream::Bench)
        .expect("benchmark output");
    let warm_at = lines
        .iter()
        .position(|(_, l)| l.starts_with("warm-up: "))
        .expect("the warm-up line");
    assert!(warm_at < first_bench, "{logs}");
    let served = lines[..first_bench]
        .iter()
        .filter(|(s, l)| {
            **s == nightshift::model::Stream::Server && l.contains("POST /v1/completions")
        })
        .count();
    assert!(
        served >= 3,
        "{served} completions before the benchmark\n{logs}"
    );

    let img = family_image("human", "0.11.1", &[], "nightshift-standin:t-human-0.11.1");
    let cmd = "vllm bench serve --model standin/tiny --dataset-name random --random-input-len 8 --random-output-len 8 --num-prompts 4";
    let (end, msgs) = run_one(&rt, job(&img, cmd, "wu2", "0.11.1")).await;
    let logs = logs_text(&msgs);
    assert_eq!(end, RunEnd::BenchExited { exit_code: 0 }, "{logs}");
    let bench = argv(&msgs, "bench_argv");
    assert!(
        bench.windows(2).any(|w| w == ["--num-warmups", "3"]),
        "{bench:?}"
    );
    assert!(
        provenance(&msgs, "warmup").is_none(),
        "the client sends them"
    );
}

/// `!` finds a run's container by its label as `docker ps` reads filters (`label=K=V`),
/// on this machine's real engine.
#[test]
fn the_shell_key_finds_the_runs_container_by_its_label() {
    require_docker!();
    let key = format!("shellkey{}/human", std::process::id());
    let name = format!("ns-shell-test-{}", std::process::id());
    let up = std::process::Command::new("docker")
        .args(["run", "-d", "--rm", "--name", &name, "--label"])
        .arg(format!("{}={key}", nightshift::model::labels::LABEL_KEY))
        .args([
            "--entrypoint",
            "sh",
            "nightshift-standin:latest",
            "-c",
            "sleep 30",
        ])
        .output()
        .unwrap();
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    let id = String::from_utf8_lossy(&up.stdout).trim().to_string();
    let found = std::process::Command::new("docker")
        .args(["ps", "-q", "--no-trunc", "--filter"])
        .arg(nightshift::tui::shell_filter(
            nightshift::model::labels::LABEL_KEY,
            &key,
        ))
        .output()
        .unwrap();
    let _ = std::process::Command::new("docker")
        .args(["rm", "-f", &name])
        .output();
    assert!(
        found.status.success(),
        "{}",
        String::from_utf8_lossy(&found.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&found.stdout).trim(), id);
}
