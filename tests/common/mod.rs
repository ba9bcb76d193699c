//! Helpers shared by the Docker integration tests: Docker reachable (or a CI failure),
//! the stand-in images built, a small ShareGPT file, one attempt's messages.
#![allow(dead_code, unused_macros)]

pub mod hub;
pub mod slurm;

use nightshift::model::{RunId, Variant};
use nightshift::plan::{BenchKind, CommandView};
use nightshift::runtime::docker::secrets::Secrets;
use nightshift::runtime::docker::{DockerConfig, DockerRuntime};
use nightshift::runtime::{RunEnd, RunJob, RunSink, Runtime, RuntimeMsg};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use tokio_util::sync::CancellationToken;

pub const TOKEN: &str = "hf_MARKERtokenNEVERshowN0wh3re";

/// Docker reachable and the stand-in images built; Err = why the test is skipped.
pub fn standin() -> Result<(), String> {
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    READY
        .get_or_init(|| {
            // Its own thread: callers may be inside a tokio runtime.
            let ping = std::thread::spawn(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap()
                    .block_on(nightshift::runtime::docker::connect())
                    .map(|_| ())
            })
            .join()
            .unwrap();
            if let Err(e) = ping {
                return Err(format!("Docker unreachable: {e}"));
            }
            let root = env!("CARGO_MANIFEST_DIR");
            let out = Command::new(format!("{root}/scripts/build-standin.sh"))
                .output()
                .expect("run scripts/build-standin.sh");
            assert!(
                out.status.success(),
                "building the stand-in images failed:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            Ok(())
        })
        .clone()
}

#[macro_export]
macro_rules! require_docker {
    () => {
        if let Err(why) = common::standin() {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("CI=true and the Docker tests cannot run: {why}");
            }
            eprintln!("SKIP: {why}");
            return;
        }
    };
}

pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Collects what a runtime reports for one attempt.
pub async fn run_one(rt: &DockerRuntime, job: RunJob) -> (RunEnd, Vec<RuntimeMsg>) {
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
    (report.end, collect.await.unwrap())
}

/// A small ShareGPT-format file (what commands that name no dataset open).
pub fn sharegpt_file(dir: &Path) -> PathBuf {
    let p = dir.join("ShareGPT_V3_unfiltered_cleaned_split.json");
    if !p.exists() {
        let rows: Vec<String> = (0..24)
            .map(|i| {
                format!(
                    r#"{{"id":"r{i}","conversations":[{{"from":"human","value":"question {i} about the night shift"}},{{"from":"gpt","value":"{}"}}]}}"#,
                    "answer ".repeat(8 + i % 16)
                )
            })
            .collect();
        std::fs::write(&p, format!("[{}]", rows.join(","))).unwrap();
    }
    p
}

pub fn logs_text(msgs: &[RuntimeMsg]) -> String {
    msgs.iter()
        .filter_map(|m| match m {
            RuntimeMsg::Log { line, .. } => Some(line.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A stand-in image of `family` at vLLM `version` (scripts/standin-image.sh), tagged `tag`.
pub fn family_image(family: &str, version: &str, extra: &[&str], tag: &str) -> String {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new(format!("{root}/scripts/standin-image.sh"))
        .args(["--family", family, "--version", version, "--quiet"])
        .args(extra)
        .arg(tag)
        .output()
        .expect("run scripts/standin-image.sh");
    assert!(
        out.status.success(),
        "standin-image.sh {family} {version}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    tag.to_string()
}

/// The value of a provenance key the runtime reported.
pub fn provenance(msgs: &[RuntimeMsg], key: &str) -> Option<String> {
    msgs.iter().rev().find_map(|m| match m {
        RuntimeMsg::Provenance { key: k, value } if k == key => Some(value.clone()),
        _ => None,
    })
}

/// A provenance value that is a JSON list of strings (an argv).
pub fn argv(msgs: &[RuntimeMsg], key: &str) -> Vec<String> {
    provenance(msgs, key)
        .map(|j| serde_json::from_str(&j).expect("argv provenance is JSON"))
        .unwrap_or_default()
}

/// One human attempt of `command` on `image` (vLLM 0.8.5, GPU 0, short time limits).
pub fn job(image: &str, command: &str) -> RunJob {
    let view = CommandView::parse(command).unwrap();
    RunJob {
        run: RunId(0),
        attempt: 1,
        key: "k/human".into(),
        sweep: format!("ns-test-{}", std::process::id()),
        commit: "c".into(),
        parent: None,
        variant: Variant::Human,
        image: image.into(),
        model: Some("standin/tiny".into()),
        command: command.into(),
        kind: view.kind.unwrap_or(BenchKind::Serving),
        view,
        gpus: vec![0],
        server_start_timeout: std::time::Duration::from_secs(30),
        run_timeout: std::time::Duration::from_secs(60),
        env: Default::default(),
        fixes: vec![],
        patch: None,
        patch_dir: None,
        vllm_version: Some("0.8.5".into()),
        human_image: None,
        changes: None,
        sim: None,
        seed: 0,
        decisions: Default::default(),
    }
}

/// The runtime settings the Docker tests share: no GPUs, no HF token, no datasets, the
/// clone at `src` when given.
pub fn docker_config(src: Option<&Path>) -> DockerConfig {
    DockerConfig {
        hf_cache: None,
        shm_size: Some("256m".into()),
        ipc: None,
        vllm_src: src.map(Path::to_path_buf),
        min_free_bytes: 0,
        stop_grace_s: 2,
        gpu_requests: false,
        secrets: Secrets::with_token(None),
        datasets: Default::default(),
        weights: None,
        gpu_mem_per_gpu: None,
        warmup_requests: 0,
        prefetch: true,
        build: Default::default(),
    }
}

/// A file's text in `image` (None: it is not there).
pub fn cat_in(image: &str, path: &str) -> Option<String> {
    let out = Command::new("docker")
        .args(["run", "--rm", "--entrypoint", "cat", image, path])
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}
