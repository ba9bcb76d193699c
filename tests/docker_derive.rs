//! A missing baseline derived from the human image by overlaying the parent's Python files
//! (real git clone, real Docker, the stand-in image), verified before it is benchmarked.

mod common;

use common::{cat_in, docker_config, git, logs_text, provenance, run_one};
use nightshift::model::Variant;
use nightshift::plan::clone::Clone;
use nightshift::runtime::docker::DockerRuntime;
use nightshift::runtime::{RunEnd, RunJob};
use std::path::Path;
use std::process::Command;

const SITE: &str = "/usr/local/lib/python3.12/dist-packages";

/// parent: model_runner.py (parent's text), old.py; commit: model_runner.py as in the
/// stand-in image, new.py added, old.py deleted, a test file changed.
fn clone(dir: &Path) -> (String, String) {
    std::fs::create_dir_all(dir.join("vllm/worker")).unwrap();
    std::fs::create_dir_all(dir.join("tests")).unwrap();
    git(dir, &["init", "-q"]);
    std::fs::write(
        dir.join("vllm/worker/model_runner.py"),
        "# model_runner of the parent\n",
    )
    .unwrap();
    std::fs::write(dir.join("vllm/old.py"), "OLD = True\n").unwrap();
    std::fs::write(dir.join("tests/test_x.py"), "# t\n").unwrap();
    // Each test its own parent hash (and image tags), even within one second.
    std::fs::write(dir.join("where"), dir.display().to_string()).unwrap();
    git(dir, &["add", "."]);
    git(dir, &["commit", "-qm", "parent"]);
    let parent = git(dir, &["rev-parse", "HEAD"]);
    std::fs::write(dir.join("vllm/worker/model_runner.py"), "# model_runner\n").unwrap();
    std::fs::remove_file(dir.join("vllm/old.py")).unwrap();
    std::fs::write(dir.join("vllm/new.py"), "NEW = True\n").unwrap();
    std::fs::write(dir.join("tests/test_x.py"), "# t2\n").unwrap();
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", "pr"]);
    (parent, git(dir, &["rev-parse", "HEAD"]))
}

fn runtime(src: &Path) -> DockerRuntime {
    DockerRuntime::new(docker_config(Some(src))).unwrap()
}

fn baseline_job(missing: &str, parent: &str, commit: &str, src: &Path) -> RunJob {
    let changes = Clone::open(src)
        .unwrap()
        .changes(&[(commit.to_string(), parent.to_string())])
        .unwrap()
        .remove(&(commit.to_string(), parent.to_string()));
    RunJob {
        key: format!("{}/baseline", &commit[..12]),
        commit: commit.into(),
        parent: Some(parent.into()),
        variant: Variant::Baseline,
        human_image: Some("nightshift-standin:latest".into()),
        changes,
        ..common::job(
            missing,
            "python3 benchmarks/benchmark_latency.py --model standin/tiny --input-len 8 --output-len 8",
        )
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_baseline_is_derived_verified_and_benchmarked() {
    require_docker!();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("vllm");
    let (parent, commit) = clone(&src);
    let tag = format!("nightshift-standin:nsbase-{}", &parent[..12]);
    let _ = Command::new("docker").args(["rmi", "-f", &tag]).output();
    let rt = runtime(&src);
    let job = baseline_job(
        "nightshift-standin:no-such-baseline",
        &parent,
        &commit,
        &src,
    );
    let (end, msgs) = run_one(&rt, job).await;
    let logs = logs_text(&msgs);
    assert_eq!(end, RunEnd::BenchExited { exit_code: 0 }, "{logs}");
    let origin =
        provenance(&msgs, "image_origin").expect("the result says how its image came to be");
    assert!(
        origin.contains("derived by overlay from nightshift-standin:latest"),
        "{origin}"
    );
    assert!(
        origin.contains("M vllm/worker/model_runner.py")
            && origin.contains("A vllm/new.py")
            && origin.contains("D vllm/old.py"),
        "{origin}"
    );
    assert!(
        !origin.contains("tests/"),
        "files outside the package are not overlaid: {origin}"
    );
    let secs = logs
        .lines()
        .find(|l| l.contains("derived and verified"))
        .unwrap_or_default();
    eprintln!("{secs}");
    // The derived image holds the parent's files.
    assert_eq!(
        cat_in(&tag, &format!("{SITE}/vllm/worker/model_runner.py")).as_deref(),
        Some("# model_runner of the parent\n")
    );
    assert_eq!(
        cat_in(&tag, &format!("{SITE}/vllm/old.py")).as_deref(),
        Some("OLD = True\n")
    );
    assert_eq!(cat_in(&tag, &format!("{SITE}/vllm/new.py")), None);
    // A second baseline run of the commit reuses it.
    let job = baseline_job(
        "nightshift-standin:no-such-baseline",
        &parent,
        &commit,
        &src,
    );
    let (end, msgs) = run_one(&rt, job).await;
    assert_eq!(end, RunEnd::BenchExited { exit_code: 0 });
    assert!(logs_text(&msgs).contains("baseline derived by overlay earlier"));
    let _ = Command::new("docker").args(["rmi", "-f", &tag]).output();
}

/// A prefetch and the run itself find the baseline missing at the same moment: one
/// derivation, both get the image (no second overlay, no clash of prep containers).
#[tokio::test(flavor = "multi_thread")]
async fn a_prefetch_and_its_run_derive_once() {
    use nightshift::runtime::{RunSink, Runtime};
    require_docker!();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("vllm");
    let (parent, commit) = clone(&src);
    let tag = format!("nightshift-standin:nsbase-{}", &parent[..12]);
    let _ = Command::new("docker").args(["rmi", "-f", &tag]).output();
    let rt = runtime(&src);
    let job = baseline_job(
        "nightshift-standin:no-such-baseline",
        &parent,
        &commit,
        &src,
    );
    let (tx, mut rx) = tokio::sync::mpsc::channel(1 << 12);
    let drain = tokio::spawn(async move {
        let mut lines = Vec::new();
        while let Some((_, _, m)) = rx.recv().await {
            lines.push(m);
        }
        lines
    });
    let sink = RunSink::new(job.run, 0, tx);
    let cancel = tokio_util::sync::CancellationToken::new();
    let (fetched, (end, msgs)) =
        tokio::join!(rt.fetch_image(job.clone(), sink, cancel), run_one(&rt, job));
    let fetch_logs = logs_text(&drain.await.unwrap());
    let run_logs = logs_text(&msgs);
    assert_eq!(fetched, Ok(()), "{fetch_logs}");
    assert_eq!(end, RunEnd::BenchExited { exit_code: 0 }, "{run_logs}");
    let overlays = [&fetch_logs, &run_logs]
        .iter()
        .filter(|l| l.contains("derived and verified"))
        .count();
    assert_eq!(overlays, 1, "fetch:\n{fetch_logs}\nrun:\n{run_logs}");
    let _ = Command::new("docker").args(["rmi", "-f", &tag]).output();
}
