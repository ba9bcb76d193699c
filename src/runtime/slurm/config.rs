//! The Slurm runtime's settings: `run --runtime slurm` flags (each also read from a
//! `NIGHTSHIFT_SLURM_*` environment variable, so a cluster's defaults can live in the
//! operator's shell profile), plus what the plan says about containers.

use super::launcher::Launcher;
use crate::plan::Plan;
use crate::rewrite::{self, eras, Facts, Invocation};
use crate::runtime::docker::secrets::Secrets;
use crate::runtime::{RunEnd, RunJob};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// `run`'s Slurm options (used with `--runtime slurm`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct SlurmArgs {
    /// Slurm partition for the runs' jobs (default: the cluster's default partition).
    #[arg(long, value_name = "NAME", env = "NIGHTSHIFT_SLURM_PARTITION")]
    pub slurm_partition: Option<String>,
    /// How a job starts the run's container on its node: pyxis, apptainer or docker.
    #[arg(
        long,
        value_name = "LAUNCHER",
        env = "NIGHTSHIFT_SLURM_LAUNCHER",
        default_value = "docker"
    )]
    pub slurm_launcher: String,
    /// A directory every node sees at the same path (job scripts, logs, results).
    /// Default: `.nightshift-slurm` next to the plan.
    #[arg(long, value_name = "DIR", env = "NIGHTSHIFT_SLURM_SHARED_DIR")]
    pub slurm_shared_dir: Option<PathBuf>,
    /// slurmrestd's URL (e.g. http://head:6820) for job states; token from `SLURM_JWT`.
    #[arg(long, value_name = "URL", env = "NIGHTSHIFT_SLURM_RESTD")]
    pub slurm_restd: Option<String>,
    /// An extra sbatch argument (repeatable), e.g. `--account=lab` or `--qos=low`.
    #[arg(long, value_name = "ARG", allow_hyphen_values = true)]
    pub slurm_sbatch_arg: Vec<String>,
    /// Do not ask the launcher for the job's GPUs (test clusters whose GPUs are not real).
    #[arg(long)]
    pub slurm_no_gpu_requests: bool,
    /// Where the Slurm clients are (a directory ending in `/`; default: PATH).
    #[arg(long, value_name = "DIR/", env = "NIGHTSHIFT_SLURM_BIN")]
    pub slurm_bin: Option<String>,
}

#[derive(Debug, Clone)]
pub struct SlurmConfig {
    pub partition: Option<String>,
    pub launcher: Launcher,
    pub shared_dir: PathBuf,
    pub restd: Option<String>,
    pub sbatch_args: Vec<String>,
    pub gpu_requests: bool,
    /// Prefix of the Slurm clients' paths (empty: PATH).
    pub bin: String,
    /// Host directory mounted at the HF cache in the container (shared with the nodes).
    pub hf_cache: Option<PathBuf>,
    pub shm_size: Option<String>,
    pub ipc: Option<String>,
    /// `[datasets]`: name → path, which the nodes must see at the same place.
    pub datasets: BTreeMap<String, PathBuf>,
    pub secrets: Secrets,
}

impl SlurmConfig {
    /// Settings for `shared_dir`, with the plan's containers settings.
    pub fn new(shared_dir: PathBuf) -> Self {
        SlurmConfig {
            partition: None,
            launcher: Launcher::Docker,
            shared_dir,
            restd: None,
            sbatch_args: Vec::new(),
            gpu_requests: true,
            bin: String::new(),
            hf_cache: None,
            shm_size: None,
            ipc: None,
            datasets: BTreeMap::new(),
            secrets: Secrets::from_env(),
        }
    }

    pub fn from_plan(plan: &Plan, args: &SlurmArgs) -> Result<Self, String> {
        let base = plan
            .path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let launcher: Launcher = args
            .slurm_launcher
            .parse()
            .map_err(|e| format!("--slurm-launcher: {e}"))?;
        let shared = match &args.slurm_shared_dir {
            Some(d) => crate::plan::expand_path(&d.display().to_string(), &base),
            None => base.join(".nightshift-slurm"),
        };
        let shared = if shared.is_absolute() {
            shared
        } else {
            std::env::current_dir()
                .map_err(|e| format!("--slurm-shared-dir: {e}"))?
                .join(shared)
        };
        std::fs::create_dir_all(&shared)
            .map_err(|e| format!("--slurm-shared-dir {}: {e}", shared.display()))?;
        if let Some(u) = &args.slurm_restd {
            if !(u.starts_with("http://") || u.starts_with("https://")) {
                return Err(format!("--slurm-restd {u}: an http:// or https:// URL"));
            }
        }
        let bin = match &args.slurm_bin {
            Some(b) if !b.is_empty() && !b.ends_with('/') => format!("{b}/"),
            Some(b) => b.clone(),
            None => String::new(),
        };
        let d = &plan.defaults;
        Ok(SlurmConfig {
            partition: args.slurm_partition.clone(),
            launcher,
            shared_dir: shared,
            restd: args.slurm_restd.clone(),
            sbatch_args: args.slurm_sbatch_arg.clone(),
            gpu_requests: !args.slurm_no_gpu_requests,
            bin,
            hf_cache: d
                .hf_cache
                .as_deref()
                .map(|p| crate::plan::expand_path(p, &base)),
            shm_size: d.shm_size.clone(),
            ipc: d.ipc.clone(),
            datasets: plan.datasets.clone(),
            secrets: Secrets::from_env(),
        })
    }
}

/// The commit's command made runnable from the era tables (the login node cannot ask the
/// image's client for its `--help`; the interpreter and benchmarks folder are found by the
/// job itself). Deterministic per commit, so every variant runs the same benchmark.
pub fn invocation(
    job: &RunJob,
    datasets: &BTreeMap<String, PathBuf>,
) -> Result<Invocation, RunEnd> {
    let version = job
        .vllm_version
        .as_deref()
        .and_then(crate::diagnose::predict::PyVersion::parse);
    let kind = super::submit::kind_of(job);
    let tables = rewrite::tables(kind, version.as_ref());
    let facts = Facts {
        model: job.model.as_deref(),
        kind: Some(job.kind),
        version: version.as_ref(),
        client: &tables.0,
        server: &tables.1,
        shim: eras::is_shim(version.as_ref()),
        cli_bench: eras::has_cli_bench(kind, version.as_ref()),
        datasets,
    };
    let mut inv =
        rewrite::plan(&job.view, &facts).map_err(|r| RunEnd::BenchInvalid { message: r.reason })?;
    // Per-request latencies as on Docker: the same result file, copied back by the job.
    rewrite::per_request(&mut inv, &tables.0);
    Ok(inv)
}
