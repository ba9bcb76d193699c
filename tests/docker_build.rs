//! Images built from source where an overlay cannot make them (real git clone, real
//! Docker, the stand-in image): a baseline whose commit changes compiled code, an agent
//! whose patch does, a recipe that "finishes" without installing, and building switched off.

mod common;

use common::{cat_in, docker_config, git, logs_text, provenance, run_one};
use nightshift::model::Variant;
use nightshift::plan::clone::Clone;
use nightshift::runtime::docker::build::BuildConfig;
use nightshift::runtime::docker::{DockerConfig, DockerRuntime};
use nightshift::runtime::{RunEnd, RunJob, RuntimeMsg};
use std::path::Path;
use std::process::Command;

/// parent: an installable vLLM project with kernels (setup.py, CMakeLists.txt, csrc/, the
/// package); commit: adds a kernel.
fn clone(dir: &Path) -> (String, String) {
    std::fs::create_dir_all(dir.join("vllm/worker")).unwrap();
    std::fs::create_dir_all(dir.join("csrc/attention")).unwrap();
    std::fs::write(
        dir.join("CMakeLists.txt"),
        "project(vllm_extensions LANGUAGES CXX CUDA)\n",
    )
    .unwrap();
    std::fs::write(dir.join("csrc/ops.cu"), "// ops\n").unwrap();
    std::fs::write(dir.join("csrc/attention/paged.cu"), "// paged\n").unwrap();
    std::fs::write(dir.join("csrc/torch_bindings.cpp"), "// bindings\n").unwrap();
    git(dir, &["init", "-q"]);
    std::fs::write(
        dir.join("setup.py"),
        "from setuptools import setup\nsetup()\n",
    )
    .unwrap();
    std::fs::write(dir.join("vllm/__init__.py"), "").unwrap();
    std::fs::write(dir.join("vllm/version.py"), "__version__ = \"0.8.5\"\n").unwrap();
    std::fs::write(dir.join("vllm/worker/model_runner.py"), "# parent\n").unwrap();
    // Each test its own parent hash (and image tags), even within one second.
    std::fs::write(dir.join("where"), dir.display().to_string()).unwrap();
    git(dir, &["add", "."]);
    git(dir, &["commit", "-qm", "parent"]);
    git(dir, &["tag", "v0.8.5"]);
    let parent = git(dir, &["rev-parse", "HEAD"]);
    std::fs::create_dir_all(dir.join("csrc")).unwrap();
    std::fs::write(dir.join("csrc/k.cu"), "// k\n").unwrap();
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", "kernel"]);
    (parent, git(dir, &["rev-parse", "HEAD"]))
}

fn runtime(src: &Path, build: BuildConfig) -> DockerRuntime {
    DockerRuntime::new(DockerConfig {
        build,
        ..docker_config(Some(src))
    })
    .unwrap()
}

fn job(variant: Variant, image: &str, parent: &str, commit: &str, src: &Path) -> RunJob {
    let changes = Clone::open(src)
        .unwrap()
        .changes(&[(commit.to_string(), parent.to_string())])
        .unwrap()
        .remove(&(commit.to_string(), parent.to_string()));
    RunJob {
        key: format!("{}/{variant}", &commit[..12]),
        commit: commit.into(),
        parent: Some(parent.into()),
        variant,
        human_image: Some("nightshift-standin:latest".into()),
        changes,
        ..common::job(
            image,
            "python3 benchmarks/benchmark_latency.py --model standin/tiny --input-len 8 --output-len 8",
        )
    }
}

fn rmi(tag: &str) {
    let _ = Command::new("docker").args(["rmi", "-f", tag]).output();
}

const MISSING: &str = "nightshift-standin:no-such-baseline";

#[tokio::test(flavor = "multi_thread")]
async fn a_baseline_with_compiled_changes_is_built_verified_and_benchmarked() {
    require_docker!();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("vllm");
    let (parent, commit) = clone(&src);
    let tag = format!("nightshift-standin:nsbuild-{}", &parent[..12]);
    rmi(&tag);
    let rt = runtime(&src, BuildConfig::default());
    let (end, msgs) = run_one(&rt, job(Variant::Baseline, MISSING, &parent, &commit, &src)).await;
    let logs = logs_text(&msgs);
    assert_eq!(end, RunEnd::BenchExited { exit_code: 0 }, "{logs}");
    let origin = provenance(&msgs, "image_origin").expect("provenance of a built image");
    assert!(
        origin.contains("built from source") && origin.contains(&parent),
        "{origin}"
    );
    assert!(
        logs.contains("build │ Step"),
        "the build log streams: {logs}"
    );
    // The runtime image had no nvcc, compiler or ccache: the template installed those of
    // torch's CUDA, and the compile ran with the box's arch list, jobs and the ccache volume.
    for want in [
        "torch is built for CUDA 12.4",
        "installing: cuda-nvcc-12-4",
        "Cuda compilation tools, release 12.4",
        "ccache volume nightshift-ccache",
        "CCACHE_DIR=/root/.cache/ccache",
        "CUDA target architectures: ",
        "Using ccache as the CUDA compiler launcher",
        "[4/4] Linking CXX shared module",
    ] {
        assert!(logs.contains(want), "{want} in the build log: {logs}");
    }
    // ninja's [N/M] lines come as progress, up to all of them.
    let progress: Vec<(u64, u64)> = msgs
        .iter()
        .filter_map(|m| match m {
            RuntimeMsg::Pull { layer, done, total } if layer == "build" => Some((*done, *total)),
            _ => None,
        })
        .collect();
    assert_eq!(progress, vec![(1, 4), (2, 4), (3, 4), (4, 4)], "{logs}");
    eprintln!(
        "{}",
        logs.lines()
            .find(|l| l.contains("built and verified"))
            .unwrap_or_default()
    );
    assert_eq!(
        cat_in(&tag, "/opt/nightshift-build/.nightshift-commit").as_deref(),
        Some(parent.as_str())
    );
    // The kernel is the commit's, not the parent's: not in the baseline's tree.
    assert_eq!(cat_in(&tag, "/opt/nightshift-build/csrc/k.cu"), None);
    // A second run reuses the build.
    let (end, msgs) = run_one(&rt, job(Variant::Baseline, MISSING, &parent, &commit, &src)).await;
    assert_eq!(end, RunEnd::BenchExited { exit_code: 0 });
    assert!(logs_text(&msgs).contains("built from source earlier"));
    rmi(&tag);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_build_that_finishes_without_installing_fails_with_its_reason() {
    require_docker!();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("vllm");
    let (parent, commit) = clone(&src);
    rmi(&format!("nightshift-standin:nsbuild-{}", &parent[..12]));
    let lazy = BuildConfig {
        dockerfile: "FROM {base}\nCOPY . /opt/nightshift-build\nRUN echo pretending to install\n"
            .into(),
        ..BuildConfig::default()
    };
    let rt = runtime(&src, lazy);
    let (end, msgs) = run_one(&rt, job(Variant::Baseline, MISSING, &parent, &commit, &src)).await;
    match end {
        RunEnd::NeedsBuild { message } => assert!(
            message.contains("instead of the built tree"),
            "{message}\n{}",
            logs_text(&msgs)
        ),
        other => panic!("expected needs_build, got {other:?}"),
    }
    // The old recipe (pip straight on the runtime image): no CUDA compiler, as CMake says.
    let bare = BuildConfig {
        dockerfile: "FROM {base}\nCOPY . /opt/nightshift-build\nWORKDIR /opt/nightshift-build\nRUN python3 -m pip install --no-build-isolation -e .\n".into(),
        ..BuildConfig::default()
    };
    let rt = runtime(&src, bare);
    let (end, msgs) = run_one(&rt, job(Variant::Baseline, MISSING, &parent, &commit, &src)).await;
    let logs = logs_text(&msgs);
    match end {
        RunEnd::NeedsBuild { message } => assert!(
            message.contains("failed") && logs.contains("No CMAKE_CXX_COMPILER could be found"),
            "{message}\n{logs}"
        ),
        other => panic!("expected needs_build, got {other:?}"),
    }
    // With the compilers but no arch list (no GPU in a build): torch's warning, then its error.
    let no_arch = BuildConfig {
        dockerfile: "FROM {base}\nRUN apt-get install -y build-essential cuda-nvcc-12-4\nENV PATH=/usr/local/cuda-12.4/bin:$PATH\nCOPY . /opt/nightshift-build\nWORKDIR /opt/nightshift-build\nRUN python3 -m pip install --no-build-isolation -e .\n".into(),
        ..BuildConfig::default()
    };
    let rt = runtime(&src, no_arch);
    let (end, msgs) = run_one(&rt, job(Variant::Baseline, MISSING, &parent, &commit, &src)).await;
    let logs = logs_text(&msgs);
    match end {
        RunEnd::NeedsBuild { message } => assert!(
            logs.contains("TORCH_CUDA_ARCH_LIST is not set")
                && logs.contains("IndexError: list index out of range"),
            "{message}\n{logs}"
        ),
        other => panic!("expected needs_build, got {other:?}"),
    }
    // A recipe whose step fails: the deciding line is pip's error.
    let broken = BuildConfig {
        dockerfile: "FROM {base}\nCOPY . /opt/nightshift-build\nRUN cd / && python3 -m pip install -e /nowhere\n".into(),
        ..BuildConfig::default()
    };
    let rt = runtime(&src, broken);
    let (end, _) = run_one(&rt, job(Variant::Baseline, MISSING, &parent, &commit, &src)).await;
    match end {
        RunEnd::NeedsBuild { message } => {
            assert!(message.contains("failed"), "{message}")
        }
        other => panic!("expected needs_build, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn building_off_ends_as_needs_build() {
    require_docker!();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("vllm");
    let (parent, commit) = clone(&src);
    let off = BuildConfig {
        enabled: false,
        ..BuildConfig::default()
    };
    let rt = runtime(&src, off);
    let (end, _) = run_one(&rt, job(Variant::Baseline, MISSING, &parent, &commit, &src)).await;
    match end {
        RunEnd::NeedsBuild { message } => {
            assert!(message.contains("csrc/k.cu"), "{message}")
        }
        other => panic!("expected needs_build, got {other:?}"),
    }
    // An agent whose patch touches compiled code, on an image that exists.
    let patch = tmp.path().join("agent.patch");
    std::fs::write(
        &patch,
        "diff --git a/csrc/new.cu b/csrc/new.cu\nnew file mode 100644\n--- /dev/null\n+++ b/csrc/new.cu\n@@ -0,0 +1 @@\n+// agent kernel\n",
    )
    .unwrap();
    let mut j = job(
        Variant::Agent("a1".into()),
        "nightshift-standin:latest",
        &parent,
        &commit,
        &src,
    );
    j.patch = Some(patch.clone());
    let (end, _) = run_one(&rt, j.clone()).await;
    match end {
        RunEnd::NeedsBuild { message } => {
            assert!(
                message.contains("agent a1") && message.contains("csrc/new.cu"),
                "{message}"
            )
        }
        other => panic!("expected needs_build, got {other:?}"),
    }
    // With building on, the agent's tree (parent + patch) is built and benchmarked.
    let rt = runtime(&src, BuildConfig::default());
    let (end, msgs) = run_one(&rt, j).await;
    let logs = logs_text(&msgs);
    assert_eq!(end, RunEnd::BenchExited { exit_code: 0 }, "{logs}");
    let origin = provenance(&msgs, "image_origin").expect("provenance");
    assert!(origin.contains("+ patch"), "{origin}");
    let tag = logs
        .lines()
        .find_map(|l| l.split("built and verified ").nth(1))
        .and_then(|r| r.split(' ').next())
        .expect("the built tag")
        .to_string();
    assert_eq!(
        cat_in(&tag, "/opt/nightshift-build/csrc/new.cu").as_deref(),
        Some("// agent kernel\n")
    );
    rmi(&tag);
}
