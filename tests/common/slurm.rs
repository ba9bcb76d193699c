//! Helpers of the Slurm tests (tests/slurm.rs, tests/slurm_restart.rs): Slurm reachable
//! (set up by scripts/slurm-up.sh where we may), a small plan on the stand-in images, the
//! outcome of each run, a sweep through any runtime.

use nightshift::model::RunState;
use nightshift::runtime::docker::secrets::Secrets;
use nightshift::runtime::slurm::SlurmConfig;
use nightshift::runtime::Runtime;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Slurm answers here (set up by scripts/slurm-up.sh when we may); Err: why not.
pub fn slurm() -> Result<(), String> {
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

#[macro_export]
macro_rules! require_slurm {
    () => {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true");
        if let Err(why) = common::standin().and_then(|_| common::slurm::slurm()) {
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
pub fn plan_file(
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
        sharegpt = super::sharegpt_file(dir).display()
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

pub fn commit_hash(i: usize) -> String {
    format!("{:08x}{}", 0xc0ffee00u64 + i as u64, "0".repeat(32))
}

pub const SERVING: &str =
    "python benchmarks/benchmark_serving.py --model standin/tiny --num-prompts 10";

/// How each run ended, and which metrics it has: the structure both runtimes must share.
pub fn outcomes(
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

pub async fn run_sweep(
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

pub fn slurm_config(shared: &Path, plan: &nightshift::plan::Plan) -> SlurmConfig {
    let mut cfg = SlurmConfig::new(shared.to_path_buf());
    cfg.gpu_requests = false;
    cfg.shm_size = Some("256m".into());
    cfg.datasets = plan.datasets.clone();
    cfg.secrets = Secrets::with_token(Some(super::TOKEN.into()));
    cfg
}

pub fn walk(dir: &Path) -> Vec<PathBuf> {
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
