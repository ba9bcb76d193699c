//! Prefetch against a local HTTP server standing in for the Hugging Face Hub: the
//! endpoints hf-hub and nightshift call (model info with `?blobs=true`, `resolve` with
//! `etag`/`x-repo-commit` headers and range requests), gated repos, and request counts.
//! Nothing leaves 127.0.0.1.

use nightshift::prefetch::cli::{run, WantedDataset, WantedModel};
use nightshift::prefetch::{
    Budget, DatasetOutcome, FetchError, FileState, FitProblem, Hub, PrefetchError, Progress,
    SHAREGPT,
};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Instant;

mod common;

use common::hub::{sha256, tiny_model, FakeHub, Req, HUB_TOKEN};

const TOKEN: &str = HUB_TOKEN;
const C1: &str = "1111111111111111111111111111111111111111";
const C2: &str = "2222222222222222222222222222222222222222";

#[tokio::test]
async fn fetch_lands_in_the_hf_cache_layout_and_a_second_fetch_downloads_nothing() {
    let fake = FakeHub::start();
    fake.add("org/tiny", C1, &tiny_model());
    let tmp = tempfile::tempdir().unwrap();
    let hub = fake.hub(tmp.path(), Some(TOKEN));

    let files = hub.plan_model("org/tiny", None).await.unwrap();
    let mut names: Vec<&str> = files.files.iter().map(|f| f.path.as_str()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "config.json",
            "model-00001-of-00002.safetensors",
            "model-00002-of-00002.safetensors",
            "model.safetensors.index.json",
            "tokenizer.json"
        ]
    );
    assert_eq!(files.commit, C1);
    assert_eq!(files.weights_bytes(), 3000);
    assert_eq!(files.cached_bytes(), 0);

    let mut lines = Vec::new();
    let s = hub
        .fetch_model(&files, |p: Progress| lines.push(p.to_string()))
        .await
        .unwrap();
    assert_eq!(s.downloaded_files, 5);
    assert_eq!(s.downloaded_bytes, files.total_bytes());
    assert!(lines.iter().any(|l| l.contains("(100%)")), "{lines:?}");

    let repo = tmp.path().join("hub/models--org--tiny");
    assert_eq!(std::fs::read_to_string(repo.join("refs/main")).unwrap(), C1);
    let snap = repo.join("snapshots").join(C1);
    let shard = tiny_model()[4].1.clone();
    assert_eq!(
        std::fs::read_link(snap.join("model-00001-of-00002.safetensors")).unwrap(),
        Path::new("../../blobs").join(sha256(&shard))
    );
    assert_eq!(
        std::fs::read(snap.join("model-00001-of-00002.safetensors")).unwrap(),
        shard
    );
    assert!(repo.join("blobs").join(sha256(&shard)).is_file());
    assert!(!snap.join("README.md").exists() && !snap.join("consolidated.safetensors").exists());
    assert!(!repo.join("refs").join(C1).exists());

    // Every request carried the token; no progress line shows it.
    let reqs = fake.requests();
    assert!(reqs
        .iter()
        .all(|r| r.auth.as_deref() == Some(&*format!("Bearer {TOKEN}"))));
    assert!(lines.iter().all(|l| !l.contains(TOKEN)));

    let before = fake.content_gets();
    let again = hub.plan_model("org/tiny", None).await.unwrap();
    assert!(again.files.iter().all(|f| f.state == FileState::Cached));
    assert_eq!(again.to_download_bytes(), 0);
    let s = hub.fetch_model(&again, |_| {}).await.unwrap();
    assert_eq!((s.downloaded_files, s.cached_files), (0, 5));
    assert_eq!(
        fake.content_gets(),
        before,
        "a cached model is not fetched again"
    );
    // Only the model-info call went out the second time.
    let new: Vec<Req> = fake.requests().into_iter().skip(reqs.len()).collect();
    assert_eq!(new.len(), 1, "{new:?}");
    assert!(new[0]
        .path
        .starts_with("/api/models/org/tiny/revision/main"));
}

#[tokio::test]
async fn lfs_files_come_through_the_hubs_cdn_redirect_without_the_token() {
    let fake = FakeHub::start();
    fake.st.redirect_lfs.store(true, Ordering::Relaxed);
    let mut files = tiny_model();
    files[4].1 = (0..(25u32 << 20)).map(|i| (i % 253) as u8).collect();
    fake.add("org/tiny", C1, &files);
    let tmp = tempfile::tempdir().unwrap();
    let hub = fake.hub(tmp.path(), Some(TOKEN));
    let plan = hub.plan_model("org/tiny", None).await.unwrap();
    hub.fetch_model(&plan, |_| {}).await.unwrap();
    let snap = tmp.path().join("hub/models--org--tiny/snapshots").join(C1);
    assert_eq!(
        std::fs::read(snap.join("model-00001-of-00002.safetensors")).unwrap(),
        files[4].1
    );
    let reqs = fake.requests();
    let (cdn, hub_side): (Vec<&Req>, Vec<&Req>) =
        reqs.iter().partition(|r| r.path.starts_with("/cdn/"));
    assert_eq!(cdn.len(), 2, "both shards through the redirect: {reqs:?}");
    assert!(
        cdn.iter().all(|r| r.auth.is_none()),
        "the token stays on the Hub: {cdn:#?}"
    );
    assert!(hub_side.iter().all(|r| r.auth.is_some()));
}

/// The real Hub answers `resolve` of a small file with a 307 to a path of its own: the
/// size probe follows it on the Hub, and the files arrive whole.
#[tokio::test]
async fn the_hubs_own_redirects_for_small_files_are_followed() {
    let fake = FakeHub::start();
    fake.st.redirect_small.store(true, Ordering::Relaxed);
    fake.st.hide_sizes.store(true, Ordering::Relaxed);
    fake.add("org/tiny", C1, &tiny_model());
    let tmp = tempfile::tempdir().unwrap();
    let hub = fake.hub(tmp.path(), Some(TOKEN));
    let plan = hub.plan_model("org/tiny", None).await.unwrap();
    let config = plan.files.iter().find(|f| f.path == "config.json").unwrap();
    assert_eq!(
        config.size,
        br#"{"architectures":["LlamaForCausalLM"]}"#.len() as u64
    );
    hub.fetch_model(&plan, |_| {}).await.unwrap();
    let snap = tmp.path().join("hub/models--org--tiny/snapshots").join(C1);
    assert_eq!(
        std::fs::read(snap.join("config.json")).unwrap(),
        br#"{"architectures":["LlamaForCausalLM"]}"#
    );
    assert!(fake
        .requests()
        .iter()
        .any(|r| r.path.starts_with("/api/resolve-cache/models/org/tiny/")));
}

#[tokio::test]
async fn a_listing_without_sizes_is_probed_per_file_without_leaking_the_token() {
    let fake = FakeHub::start();
    fake.st.redirect_lfs.store(true, Ordering::Relaxed);
    fake.st.hide_sizes.store(true, Ordering::Relaxed);
    fake.add("org/tiny", C1, &tiny_model());
    let tmp = tempfile::tempdir().unwrap();
    let hub = fake.hub(tmp.path(), Some(TOKEN));
    let plan = hub.plan_model("org/tiny", None).await.unwrap();
    let shard = plan
        .files
        .iter()
        .find(|f| f.path == "model-00001-of-00002.safetensors")
        .unwrap();
    assert_eq!(
        (shard.size, shard.blob.clone()),
        (2000, sha256(&[1u8; 2000]))
    );
    let probes: Vec<Req> = fake
        .requests()
        .into_iter()
        .filter(|r| r.range.as_deref() == Some("bytes=0-0"))
        .collect();
    assert_eq!(probes.len(), 5, "{probes:?}");
    assert!(
        probes.iter().all(|r| !r.path.starts_with("/cdn/")),
        "x-linked-size answers"
    );
    hub.fetch_model(&plan, |_| {}).await.unwrap();
    let cdn: Vec<Req> = fake
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with("/cdn/"))
        .collect();
    assert!(!cdn.is_empty() && cdn.iter().all(|r| r.auth.is_none()));
}

#[tokio::test]
async fn a_partial_blob_is_resumed_with_a_range_request() {
    let fake = FakeHub::start();
    let mut files = tiny_model();
    files[4].1 = (0..3_000_000u32).map(|i| (i % 249) as u8).collect();
    fake.add("org/tiny", C1, &files);
    let tmp = tempfile::tempdir().unwrap();
    let hub = fake.hub(tmp.path(), Some(TOKEN));
    let plan = hub.plan_model("org/tiny", None).await.unwrap();
    // What an interrupted download (ours or huggingface_hub's) leaves behind.
    let blobs = tmp.path().join("hub/models--org--tiny/blobs");
    std::fs::create_dir_all(&blobs).unwrap();
    let sha = sha256(&files[4].1);
    std::fs::write(
        blobs.join(format!("{sha}.incomplete")),
        &files[4].1[..1_000_000],
    )
    .unwrap();
    hub.fetch_model(&plan, |_| {}).await.unwrap();
    assert_eq!(std::fs::read(blobs.join(&sha)).unwrap(), files[4].1);
    assert!(fake
        .requests()
        .iter()
        .any(|r| r.range.as_deref() == Some("bytes=1000000-")));
    assert!(!blobs.join(format!("{sha}.incomplete")).exists());
}

#[tokio::test]
async fn a_new_commit_with_the_same_blobs_is_linked_not_downloaded() {
    let fake = FakeHub::start();
    fake.add("org/tiny", C1, &tiny_model());
    let tmp = tempfile::tempdir().unwrap();
    let hub = fake.hub(tmp.path(), Some(TOKEN));
    let files = hub.plan_model("org/tiny", None).await.unwrap();
    hub.fetch_model(&files, |_| {}).await.unwrap();
    let mut next = tiny_model();
    next[3].1 = br#"{"model":{"v":2}}"#.to_vec();
    fake.add("org/tiny", C2, &next);
    let before = fake.content_gets();
    let files = hub.plan_model("org/tiny", None).await.unwrap();
    assert_eq!(files.commit, C2);
    assert_eq!(
        files.to_download().count(),
        1,
        "only the changed tokenizer.json"
    );
    let s = hub.fetch_model(&files, |_| {}).await.unwrap();
    assert_eq!((s.downloaded_files, s.linked_files), (1, 4));
    assert_eq!(fake.content_gets(), before + 1);
    let repo = tmp.path().join("hub/models--org--tiny");
    assert_eq!(std::fs::read_to_string(repo.join("refs/main")).unwrap(), C2);
}

#[tokio::test]
async fn gated_repo_without_a_token_fails_with_words_the_diagnoser_knows() {
    let fake = FakeHub::start();
    let files: Vec<_> = tiny_model()
        .into_iter()
        .filter(|(n, _)| !n.contains("index"))
        .collect();
    fake.add("meta/gated", C1, &files);
    fake.gate("meta/gated");
    let tmp = tempfile::tempdir().unwrap();
    for token in [None, Some("hf_WRONGtoken0123456789abcdefghij")] {
        let hub = fake.hub(tmp.path(), token);
        let plan = hub.plan_model("meta/gated", None).await.unwrap();
        let e = hub.fetch_model(&plan, |_| {}).await.unwrap_err();
        assert!(matches!(e, FetchError::Auth { status: 401, .. }), "{e:?}");
        let msg = e.to_string();
        assert!(msg.contains("401 Client Error"), "{msg}");
        assert!(
            msg.contains("Access to model meta/gated is restricted"),
            "{msg}"
        );
        assert!(!msg.contains("hf_WRONGtoken"), "{msg}");
        let d = nightshift::diagnose::diagnose_text(
            &nightshift::diagnose::Catalog::builtin(),
            msg.as_bytes(),
        );
        assert_eq!(d.category.as_str(), "gated_model_auth");
    }
    // With the right token it downloads.
    let hub = fake.hub(tmp.path(), Some(TOKEN));
    let plan = hub.plan_model("meta/gated", None).await.unwrap();
    hub.fetch_model(&plan, |_| {}).await.unwrap();
}

#[tokio::test]
async fn a_missing_model_is_not_found() {
    let fake = FakeHub::start();
    let tmp = tempfile::tempdir().unwrap();
    let e = fake
        .hub(tmp.path(), None)
        .plan_model("org/nope", None)
        .await
        .unwrap_err();
    assert!(
        matches!(e, FetchError::NotFound { status: 404, .. }),
        "{e:?}"
    );
    assert!(e.to_string().contains("Repository Not Found"), "{e}");
}

#[tokio::test]
async fn size_checks_fail_before_any_download() {
    let fake = FakeHub::start();
    fake.add("org/tiny", C1, &tiny_model());
    let tmp = tempfile::tempdir().unwrap();
    let hub = fake.hub(tmp.path(), Some(TOKEN));
    let disk = Budget {
        gpu_mem_per_gpu: None,
        tp: 1,
        free_disk: Some(1024),
    };
    let e = hub
        .ensure_model("org/tiny", None, &disk, |_| {})
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            PrefetchError::Fit {
                problem: FitProblem::Disk { .. },
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .contains("There is not enough space on the disk"),
        "{e}"
    );
    let gpu = Budget {
        gpu_mem_per_gpu: Some(1000),
        tp: 2,
        free_disk: None,
    };
    let e = hub
        .ensure_model("org/tiny", None, &gpu, |_| {})
        .await
        .unwrap_err();
    assert!(e.to_string().contains("larger than GPU memory × TP"), "{e}");
    // Only the small safetensors index was read, to know which shards vLLM loads.
    assert_eq!(fake.weight_gets(), 0, "no weights were requested");
    assert!(fake
        .requests()
        .iter()
        .all(|r| r.path.ends_with("/api/models/org/tiny/revision/main")
            || r.path.ends_with("model.safetensors.index.json")));
    assert!(!tmp.path().join("hub/models--org--tiny/blobs").exists());
}

#[tokio::test]
async fn ensure_model_falls_back_to_the_cache_when_the_hub_is_unreachable() {
    let fake = FakeHub::start();
    fake.add("org/tiny", C1, &tiny_model());
    let tmp = tempfile::tempdir().unwrap();
    let budget = Budget::disk_only();
    fake.hub(tmp.path(), Some(TOKEN))
        .ensure_model("org/tiny", None, &budget, |_| {})
        .await
        .unwrap();
    // Port 9 on loopback: nothing listens, the connection is refused.
    let offline = Hub::new("http://127.0.0.1:9", None, tmp.path().join("hub")).unwrap();
    let p = offline
        .ensure_model("org/tiny", None, &budget, |_| {})
        .await
        .unwrap();
    assert!(p.files.offline);
    assert_eq!(p.summary.cached_files, 5);
    let empty = tempfile::tempdir().unwrap();
    let none = Hub::new("http://127.0.0.1:9", None, empty.path().join("hub")).unwrap();
    let e = none
        .ensure_model("org/tiny", None, &budget, |_| {})
        .await
        .unwrap_err();
    assert!(
        matches!(e, PrefetchError::Fetch(FetchError::Network { .. })),
        "{e:?}"
    );
}

#[tokio::test]
async fn sharegpt_is_fetched_to_its_path_once() {
    let fake = FakeHub::start();
    let body = vec![b'x'; 300_000];
    fake.add(
        &format!("datasets/{}", SHAREGPT.repo),
        C1,
        &[(SHAREGPT.file, body.clone())],
    );
    let tmp = tempfile::tempdir().unwrap();
    let hub = fake.hub(tmp.path(), Some(TOKEN));
    let dest = tmp.path().join("data/sharegpt.json");
    let got = hub
        .fetch_dataset_file(SHAREGPT.repo, SHAREGPT.file, &dest, |_| {})
        .await
        .unwrap();
    assert_eq!(got, DatasetOutcome::Downloaded { bytes: 300_000 });
    assert_eq!(std::fs::read(&dest).unwrap(), body);
    let gets = fake.content_gets();
    let got = hub
        .fetch_dataset_file(SHAREGPT.repo, SHAREGPT.file, &dest, |_| {})
        .await
        .unwrap();
    assert_eq!(got, DatasetOutcome::Present { bytes: 300_000 });
    assert_eq!(fake.content_gets(), gets);
    assert!(fake
        .requests()
        .iter()
        .all(|r| r.path.starts_with("/datasets/anon8231489123/")));
}

#[tokio::test]
async fn prefetch_command_reports_then_fetches() {
    let fake = FakeHub::start();
    fake.add("org/tiny", C1, &tiny_model());
    fake.add(
        &format!("datasets/{}", SHAREGPT.repo),
        C1,
        &[(SHAREGPT.file, vec![b'y'; 5000])],
    );
    let tmp = tempfile::tempdir().unwrap();
    let hub = fake.hub(tmp.path(), Some(TOKEN));
    let models = vec![WantedModel {
        id: "org/tiny".into(),
        revision: None,
        gpus: 1,
        commits: 3,
    }];
    let datasets = vec![
        WantedDataset {
            name: "sharegpt".into(),
            path: tmp.path().join("sg.json"),
            source: Some(&SHAREGPT),
        },
        WantedDataset {
            name: "sonnet".into(),
            path: tmp.path().join("sonnet.txt"),
            source: None,
        },
    ];
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = run(
        &hub,
        &models,
        &datasets,
        Some(80 << 30),
        true,
        false,
        &mut out,
        &mut err,
    )
    .await;
    let text = String::from_utf8(out).unwrap();
    assert_eq!(code, 1, "sonnet is missing: {text}");
    assert!(text.contains("model   org/tiny  5 files"), "{text}");
    assert!(text.contains("to fetch"), "{text}");
    assert!(
        text.contains("dataset sonnet") && text.contains("✗ missing"),
        "{text}"
    );
    assert_eq!(fake.weight_gets(), 0, "a dry run fetches nothing");
    assert!(!tmp.path().join("hub/models--org--tiny").exists());

    std::fs::write(tmp.path().join("sonnet.txt"), "roses").unwrap();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = run(
        &hub,
        &models,
        &datasets,
        Some(80 << 30),
        false,
        false,
        &mut out,
        &mut err,
    )
    .await;
    let (text, log) = (
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    );
    assert_eq!(code, 0, "{text}\n{log}");
    assert!(log.contains("prefetch: org/tiny ready"), "{log}");
    assert!(log.contains("prefetch: dataset sharegpt ready"), "{log}");
    assert!(!text.contains(TOKEN) && !log.contains(TOKEN));
    assert_eq!(
        std::fs::read(tmp.path().join("sg.json")).unwrap().len(),
        5000
    );
}

#[test]
fn prefetch_subcommand_reads_the_plan() {
    let fake = FakeHub::start();
    fake.add("org/tiny", C1, &tiny_model());
    fake.add(
        &format!("datasets/{}", SHAREGPT.repo),
        C1,
        &[(SHAREGPT.file, vec![b'z'; 4096])],
    );
    let tmp = tempfile::tempdir().unwrap();
    let hf = tmp.path().join("hf");
    let sg = tmp.path().join("ShareGPT_V3_unfiltered_cleaned_split.json");
    let plan = tmp.path().join("plan.toml");
    std::fs::write(
        &plan,
        format!(
            r#"schema_version = 1
name = "pf"
[defaults]
gpu_type = "H100"
gpu_count = 1
hf_cache = "{}"
variants = ["baseline", "human"]
[datasets]
sharegpt = "{}"
[[commits]]
commit = "3a243095e5e7b655b63ab08fbd5936cb40850415"
parent = "0a243095e5e7b655b63ab08fbd5936cb40850415"
perf_command = "python benchmarks/benchmark_serving.py --model org/tiny --dataset-name sharegpt --num-prompts 10"
images = {{ human = "acme/fixed:1", baseline = "acme/base:1" }}
"#,
            hf.display(),
            sg.display()
        ),
    )
    .unwrap();
    let bin = env!("CARGO_BIN_EXE_nightshift");
    let go = |args: &[&str]| {
        std::process::Command::new(bin)
            .args(args)
            .env("HF_ENDPOINT", &fake.url)
            .env("HF_TOKEN", TOKEN)
            .env_remove("HUGGING_FACE_HUB_TOKEN")
            .output()
            .unwrap()
    };
    let p = plan.to_str().unwrap();
    let o = go(&["prefetch", p, "--dry-run"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        text.contains("org/tiny") && text.contains("to fetch"),
        "{text}"
    );
    assert!(!hf.join("hub").exists(), "dry run");
    let o = go(&["prefetch", p, "--models-only"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(hf.join("hub/models--org--tiny/refs/main").is_file());
    assert!(!sg.exists(), "--models-only");
    let o = go(&["prefetch", p]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(std::fs::metadata(&sg).unwrap().len(), 4096);
    assert!(!String::from_utf8_lossy(&o.stderr).contains(TOKEN));
    assert_eq!(
        go(&["prefetch", "/no/such/plan.toml"]).status.code(),
        Some(2)
    );
    assert_eq!(
        go(&["prefetch", p, "--models-only", "--datasets-only"])
            .status
            .code(),
        Some(2)
    );
}

/// Figures for the report: `cargo test --release --test prefetch -- --ignored --nocapture`.
#[tokio::test]
#[ignore]
async fn measure_download_throughput_and_cached_check() {
    let fake = FakeHub::start();
    let big: Vec<u8> = (0..(200u32 << 20)).map(|i| (i % 251) as u8).collect();
    fake.add(
        "org/big",
        C1,
        &[
            ("config.json", b"{}".to_vec()),
            ("tokenizer.json", b"{}".to_vec()),
            ("tokenizer_config.json", b"{}".to_vec()),
            ("model.safetensors", big),
        ],
    );
    let tmp = tempfile::tempdir().unwrap();
    let hub = fake.hub(tmp.path(), Some(TOKEN));
    let t = Instant::now();
    let files = hub.plan_model("org/big", None).await.unwrap();
    hub.fetch_model(&files, |_| {}).await.unwrap();
    let s = t.elapsed().as_secs_f64();
    println!(
        "200 MiB model from the local stand-in: {s:.2} s, {:.0} MiB/s",
        200.0 / s
    );
    let t = Instant::now();
    let n = 20;
    for _ in 0..n {
        let files = hub.plan_model("org/big", None).await.unwrap();
        hub.fetch_model(&files, |_| {}).await.unwrap();
    }
    println!(
        "plan + verify of the cached 4-file model: {:.1} ms each",
        t.elapsed().as_secs_f64() * 1000.0 / f64::from(n)
    );
}

/// A server started with `--load-format dummy` makes its weights up: only the metadata
/// comes (config, tokenizer, index), no weight byte moves, and a box too small for the
/// weights is not refused.
#[tokio::test]
async fn dummy_load_format_fetches_metadata_only() {
    let fake = FakeHub::start();
    fake.add("org/tiny", C1, &tiny_model());
    let tmp = tempfile::tempdir().unwrap();
    let hub = fake.hub(tmp.path(), Some(TOKEN));
    let tiny_gpu = Budget {
        gpu_mem_per_gpu: Some(1000),
        tp: 1,
        free_disk: Some(1 << 30),
    };
    let prep = hub
        .ensure_model_with("org/tiny", None, &tiny_gpu, false, |_| {})
        .await
        .unwrap();
    assert!(
        prep.files.files.iter().all(|f| !f.weights),
        "{:?}",
        prep.files.files
    );
    assert_eq!(fake.weight_gets(), 0);
    let snap = tmp.path().join("hub/models--org--tiny/snapshots").join(C1);
    assert!(snap.join("config.json").is_file());
    assert!(snap.join("tokenizer.json").is_file());
    assert!(!snap.join("model-00001-of-00002.safetensors").exists());
}
