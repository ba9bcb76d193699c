//! The Slurm runtime: each attempt is one batch job (`sbatch --gres=gpu:N --time …`, the run
//! key in its name and comment) whose script starts the run's container with the configured
//! launcher (pyxis, apptainer, docker; `launcher`). The job writes its processes' output and
//! a status file to its directory on the shared filesystem (`submit`); the runtime follows
//! those files into the RunSink, so the engine's parser and diagnoser read the same lines as
//! on Docker (`logs`), and asks Slurm for the job's state (`state`). Cancel is `scancel`.
//!
//! A restarted nightshift does not resubmit: `execute` first looks for the run's job by name
//! (queued or running) and, failing that, for a finished job whose outcome no attempt has
//! taken yet (the `consumed` file), and follows it instead.

mod attach;
pub mod config;
mod follow;
pub mod launcher;
pub mod logs;
pub mod state;
pub mod submit;
mod watch;

pub use config::{SlurmArgs, SlurmConfig};

use super::{RunEnd, RunJob, RunReport, RunSink, Runtime, RuntimeMsg};
use crate::model::{Pipe, Stage, Stream};
use crate::runtime::docker::recipes::{FixStep, RecipeSteps};
use async_trait::async_trait;
use state::Client;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

pub struct SlurmRuntime {
    cfg: SlurmConfig,
    client: Client,
    watch: watch::Watch,
    recipes: Arc<dyn RecipeSteps>,
}

fn err(stage: Stage, message: impl std::fmt::Display) -> RunEnd {
    RunEnd::Error {
        stage,
        message: message.to_string(),
    }
}

/// A job this attempt follows, submitted now or by an earlier nightshift.
struct Followed {
    id: String,
    dir: PathBuf,
    attached: bool,
    submitted: Instant,
}

impl SlurmRuntime {
    pub fn new(cfg: SlurmConfig) -> Self {
        let client = Client {
            bin: cfg.bin.clone(),
            restd: cfg.restd.clone(),
        };
        SlurmRuntime {
            cfg,
            watch: watch::Watch::new(client.clone()),
            client,
            recipes: Arc::new(crate::diagnose::RecipeBook::builtin()),
        }
    }

    /// The operator's recipe book (with overrides), as the engine offers it.
    pub fn with_recipes(mut self, recipes: Arc<dyn RecipeSteps>) -> Self {
        self.recipes = recipes;
        self
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    fn run_dir(&self, job: &RunJob) -> PathBuf {
        self.cfg
            .shared_dir
            .join(submit::key_dir(&job.sweep))
            .join(submit::key_dir(&job.key))
    }

    async fn dlog(&self, sink: &RunSink, pipe: Pipe, line: impl AsRef<str>) {
        sink.log(Stream::Docker, pipe, self.cfg.secrets.redact(line.as_ref()))
            .await
    }

    /// Write the scripts and `sbatch` them.
    async fn submit(&self, job: &RunJob, sink: &RunSink) -> Result<Followed, RunEnd> {
        let dir = self.run_dir(job).join(format!("a{}", job.attempt));
        let fail = |m: String| err(Stage::PreparingImage, m);
        if dir.exists() {
            // A submission that died before sbatch answered; nothing follows it.
            let _ = std::fs::remove_dir_all(&dir);
        }
        std::fs::create_dir_all(&dir).map_err(|e| {
            fail(format!(
                "cannot create the job directory {}: {e}",
                dir.display()
            ))
        })?;
        {
            use std::os::unix::fs::PermissionsExt;
            // Owner-only: what the processes print may hold the token until it is masked.
            let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700));
        }
        let plan = config::invocation(job, &self.cfg.datasets)?;
        for m in &plan.mounts {
            if !m.host.exists() {
                return Err(RunEnd::BenchInvalid {
                    message: format!(
                        "dataset `{}` is not at {} ({})",
                        m.name,
                        m.host.display(),
                        crate::plan::DATASET_HINT
                    ),
                });
            }
        }
        let resolved = submit::resolve(&plan);
        let mut fixes = Vec::new();
        for r in &job.fixes {
            match self.recipes.steps(r) {
                Some(steps) => {
                    if steps
                        .iter()
                        .any(|s| matches!(s, FixStep::CopyFromSource { .. }))
                    {
                        self.dlog(sink, Pipe::Stderr, format!("fix recipe {r}: its copy-from-clone step does not run on Slurm (no clone on the node); shell steps only")).await;
                    }
                    fixes.push((r.clone(), steps));
                }
                None => {
                    self.dlog(
                        sink,
                        Pipe::Stderr,
                        format!("fix recipe {r}: unknown; not applied"),
                    )
                    .await
                }
            }
        }
        let patch = match (&job.patch, job.variant.agent_id()) {
            (Some(p), Some(_)) => {
                std::fs::copy(p, dir.join("agent.patch")).map_err(|e| RunEnd::PatchFailed {
                    message: format!("cannot read patch {}: {e}", p.display()),
                })?;
                true
            }
            (None, Some(_)) => {
                return Err(RunEnd::PatchFailed {
                    message: "agent variant without a patch file".into(),
                })
            }
            _ => false,
        };
        let mut env: Vec<(String, String)> = plan.env.clone();
        env.extend(job.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        let inner = submit::inner_script(
            job,
            &submit::Inner {
                resolved: &resolved,
                program: &plan.program,
                port: plan.port,
                env,
                fixes,
                patch,
                patch_dir: job.patch_dir.as_deref(),
            },
        );
        let mut binds: Vec<String> = Vec::new();
        if let Some(h) = &self.cfg.hf_cache {
            binds.push(format!(
                "{}:{}",
                h.display(),
                crate::runtime::docker::container::HF_CACHE_IN_CONTAINER
            ));
        }
        binds.extend(crate::runtime::docker::invoke::dataset_binds(&plan));
        let container = launcher::Container {
            image: job.image.clone(),
            binds,
            gpu_requests: self.cfg.gpu_requests,
            token: self.cfg.secrets.has_token(),
            shm_size: self.cfg.shm_size.clone(),
            ipc: self.cfg.ipc.clone(),
            labels: vec![
                ("nightshift.sweep".into(), job.sweep.clone()),
                ("nightshift.run".into(), job.key.clone()),
            ],
        };
        let batch = submit::batch_script(job, &dir, self.cfg.launcher, &container);
        let write = |name: &str, text: &str| -> Result<(), RunEnd> {
            use std::os::unix::fs::PermissionsExt;
            let p = dir.join(name);
            std::fs::write(&p, text)
                .and_then(|_| std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)))
                .map_err(|e| fail(format!("cannot write {}: {e}", p.display())))
        };
        write("inner.sh", &inner)?;
        write("batch.sh", &batch)?;
        let prov = |k: &str, v: String| RuntimeMsg::Provenance {
            key: k.into(),
            value: v,
        };
        let json = |v: &[String]| serde_json::to_string(v).unwrap_or_default();
        sink.send(prov("bench_argv", json(&resolved.bench_argv)))
            .await;
        if let Some(s) = &resolved.server_argv {
            sink.send(prov("server_argv", json(s))).await;
        }
        for r in plan.rewrites.iter().chain(&resolved.rewrites) {
            self.dlog(sink, Pipe::Stdout, format!("rewrite {r}")).await;
        }
        let mut args = submit::sbatch_args(
            job,
            &dir,
            self.cfg.partition.as_deref(),
            &self.cfg.sbatch_args,
        );
        args.push(dir.join("batch.sh").display().to_string());
        let mut cmd = tokio::process::Command::new(format!("{}sbatch", self.cfg.bin));
        cmd.args(&args)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        // The token reaches the job through its environment (sbatch exports ours), never
        // through a file on the shared filesystem.
        for kv in self.cfg.secrets.container_env() {
            if let Some((k, v)) = kv.split_once('=') {
                cmd.env(k, v);
            }
        }
        let t = Instant::now();
        let out = cmd
            .output()
            .await
            .map_err(|e| fail(format!("cannot run sbatch: {e}")))?;
        let took = t.elapsed();
        if !out.status.success() {
            return Err(fail(format!(
                "sbatch refused the job: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        // `--parsable`: "ID" or "ID;cluster".
        let text = String::from_utf8_lossy(&out.stdout);
        let id = text.trim().split(';').next().unwrap_or("").to_string();
        if id.is_empty() || !id.chars().all(|c| c.is_ascii_digit() || c == '_') {
            return Err(fail(format!("sbatch printed no job id: {}", text.trim())));
        }
        let _ = std::fs::write(dir.join("jobid"), &id);
        self.dlog(
            sink,
            Pipe::Stdout,
            format!(
                "submitted slurm job {id} ({}) in {:.0} ms: sbatch {}",
                submit::job_name(&job.sweep, &job.key),
                took.as_secs_f64() * 1e3,
                shell_words::join(&args)
            ),
        )
        .await;
        sink.send(prov("slurm_job_id", id.clone())).await;
        Ok(Followed {
            id,
            dir,
            attached: false,
            submitted: t,
        })
    }
}

#[async_trait]
impl Runtime for SlurmRuntime {
    fn name(&self) -> &'static str {
        "slurm"
    }

    /// Nothing is removed: a job still queued or running is this sweep's work in flight,
    /// followed again when its run resumes (see `execute`); each is named for the operator.
    async fn cleanup_leftovers(&self, sweep: &str) -> anyhow::Result<Vec<String>> {
        let prefix = submit::job_name(sweep, "");
        let jobs = self
            .client
            .jobs_named(&prefix)
            .await
            .map_err(|e| anyhow::anyhow!(e))?;
        // Said, not returned: the caller reports what it returns as removed.
        for j in jobs {
            tracing::info!(
                "slurm job {} ({}) is still {} on {}: its run follows it again instead of resubmitting",
                j.id,
                j.name,
                j.state,
                if j.nodes.is_empty() { "no node yet" } else { &j.nodes }
            );
        }
        Ok(Vec::new())
    }

    async fn execute(&self, job: RunJob, sink: RunSink, cancel: CancellationToken) -> RunReport {
        sink.stage(Stage::PreparingImage).await;
        let followed = match self.find_existing(&job).await {
            Some(f) => {
                self.dlog(
                    &sink,
                    Pipe::Stdout,
                    format!(
                        "re-attached to slurm job {} ({}) submitted by an earlier nightshift; not resubmitting",
                        f.id,
                        f.dir.display()
                    ),
                )
                .await;
                sink.send(RuntimeMsg::Provenance {
                    key: "slurm_job_id".into(),
                    value: f.id.clone(),
                })
                .await;
                f
            }
            None => {
                let submitted = tokio::select! {
                    r = self.submit(&job, &sink) => r,
                    _ = cancel.cancelled() => Err(RunEnd::Cancelled),
                };
                match submitted {
                    Ok(f) => f,
                    Err(end) => return RunReport::new(end),
                }
            }
        };
        self.watch.follow(&followed.id);
        let report = self.follow(&followed, &sink, &cancel).await;
        self.watch.unfollow(&followed.id);
        attach::redact_files(&followed.dir, &self.cfg.secrets);
        attach::mark_consumed(&followed.dir);
        report
    }
}

/// For `nightshift run --runtime slurm`: Slurm answers, the launcher and shared directory
/// make sense; the GPUs to keep busy (the partition's, unless `--gpus`). Err: exit status.
pub(crate) fn for_cli(
    plan: &crate::plan::Plan,
    args: &SlurmArgs,
    gpus: Option<u32>,
    recipes: Arc<crate::diagnose::RecipeBook>,
) -> Result<(Arc<dyn Runtime>, u32), i32> {
    let cfg = SlurmConfig::from_plan(plan, args).map_err(|e| {
        tracing::error!("{e}");
        2
    })?;
    let rt = SlurmRuntime::new(cfg).with_recipes(recipes);
    let probe = crate::rt::block_on(rt.client.partition_gpus(rt.cfg.partition.as_deref()));
    let total = match probe {
        Ok(n) => n,
        Err(e) => {
            tracing::error!("Slurm is not reachable: {e}");
            tracing::info!("hint: run on a login node (sinfo, sbatch, squeue, scancel on PATH), or set --slurm-bin DIR/");
            return Err(1);
        }
    };
    let gpus = gpus.unwrap_or(total);
    if gpus == 0 {
        tracing::warn!("partition {} declares no GPUs (gres gpu): only runs that need none can start; --gpus N sets how many to keep busy",
            rt.cfg.partition.as_deref().unwrap_or("(default)")
        );
    }
    Ok((Arc::new(rt), gpus))
}
