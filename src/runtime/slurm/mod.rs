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

pub mod config;
pub mod launcher;
pub mod logs;
pub mod state;
pub mod submit;

pub use config::{SlurmArgs, SlurmConfig};

use super::{RunEnd, RunJob, RunReport, RunSink, Runtime, RuntimeMsg};
use crate::model::{Pipe, Stage, Stream};
use crate::runtime::docker::recipes::{FixStep, RecipeSteps};
use async_trait::async_trait;
use logs::{End, JobFiles, Marker};
use state::{Client, JobInfo};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Written in a job's directory once an attempt has reported its outcome: a later attempt
/// of the run (a retry) must submit anew instead of re-reading it.
const CONSUMED: &str = "consumed";

pub struct SlurmRuntime {
    cfg: SlurmConfig,
    client: Client,
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

/// How an image pull failure reads in docker's, apptainer's and enroot's words.
fn image_missing(text: &str) -> Option<String> {
    const SIGNS: &[&str] = &[
        "Unable to find image",
        "pull access denied",
        "manifest unknown",
        "repository does not exist",
        "No such image",
        "FATAL:   Unable to handle docker://",
        "[ERROR] URI",
    ];
    let hit = text
        .lines()
        .rev()
        .find(|l| SIGNS.iter().any(|s| l.contains(s)) && !l.contains("locally"))
        .or_else(|| text.lines().find(|l| l.contains("Unable to find image")))?;
    Some(hit.trim().to_string())
}

impl SlurmRuntime {
    pub fn new(cfg: SlurmConfig) -> Self {
        let client = Client {
            bin: cfg.bin.clone(),
            restd: cfg.restd.clone(),
        };
        SlurmRuntime {
            cfg,
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

    /// The run's job from an earlier nightshift, if one is queued, running, or finished
    /// with an outcome nobody has taken.
    async fn find_existing(&self, job: &RunJob) -> Option<Followed> {
        let name = submit::job_name(&job.sweep, &job.key);
        if let Ok(jobs) = self.client.jobs_named(&name).await {
            for j in jobs.into_iter().filter(|j| j.name == name) {
                let dir = PathBuf::from(&j.workdir);
                if !j.is_over() && dir.is_dir() && !dir.join(CONSUMED).exists() {
                    return Some(Followed {
                        id: j.id,
                        dir,
                        attached: true,
                        submitted: Instant::now(),
                    });
                }
            }
        }
        // Finished while nobody watched: its files say how.
        let latest = std::fs::read_dir(self.run_dir(job))
            .ok()?
            .flatten()
            .filter_map(|e| {
                let n: u32 = e.file_name().to_str()?.strip_prefix('a')?.parse().ok()?;
                Some((n, e.path()))
            })
            .max_by_key(|(n, _)| *n)?
            .1;
        if latest.join(CONSUMED).exists() {
            return None;
        }
        let id = std::fs::read_to_string(latest.join("jobid")).ok()?;
        let status = std::fs::read_to_string(latest.join("status")).unwrap_or_default();
        let ended = status
            .lines()
            .any(|l| matches!(logs::marker(l), Marker::End(e) if !matches!(e, End::Launcher(_))));
        ended.then(|| Followed {
            id: id.trim().to_string(),
            dir: latest,
            attached: true,
            submitted: Instant::now(),
        })
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

    /// Follow the job to its end: files into the sink, markers into stages, Slurm's state.
    async fn follow(
        &self,
        job: &RunJob,
        f: &Followed,
        sink: &RunSink,
        cancel: &CancellationToken,
    ) -> RunReport {
        let mut files = JobFiles::new(&f.dir, self.cfg.secrets.clone());
        let mut stage = Stage::PreparingImage;
        let mut end: Option<End> = None;
        let mut launcher_exit: Option<i64> = None;
        let mut info: Option<JobInfo> = None;
        let mut running_seen = false;
        let mut failures = 0u32;
        let mut next_poll = Instant::now();
        loop {
            tokio::select! {
                _ = cancel.cancelled() => {
                    self.cancel_job(&f.id, sink).await;
                    self.take(&mut files, sink, true, &mut stage, &mut end, &mut launcher_exit).await;
                    return RunReport::new(RunEnd::Cancelled);
                }
                _ = tokio::time::sleep(Duration::from_millis(250)) => {}
            }
            self.take(
                &mut files,
                sink,
                false,
                &mut stage,
                &mut end,
                &mut launcher_exit,
            )
            .await;
            if launcher_exit.is_some() {
                break;
            }
            if Instant::now() < next_poll {
                continue;
            }
            match self.client.job(&f.id).await {
                Ok(j) => {
                    failures = 0;
                    if j.is_running() && !running_seen {
                        running_seen = true;
                        let waited = f.submitted.elapsed().as_secs_f64();
                        let msg = if f.attached {
                            format!(
                                "slurm job {} running on {} ({}), followed again after a restart",
                                j.id, j.nodes, j.gres
                            )
                        } else {
                            sink.send(RuntimeMsg::Provenance {
                                key: "slurm_start_s".into(),
                                value: format!("{waited:.3}"),
                            })
                            .await;
                            format!(
                                "slurm job {} running on {} ({}) {waited:.2} s after sbatch",
                                j.id, j.nodes, j.gres
                            )
                        };
                        self.dlog(sink, Pipe::Stdout, msg).await;
                    }
                    self.report_changes(info.as_ref(), &j, sink).await;
                    let over = j.is_over();
                    let poll = if j.is_pending() {
                        submit::POLL_PENDING
                    } else {
                        submit::POLL_RUNNING
                    };
                    info = Some(j);
                    if over {
                        break;
                    }
                    next_poll = Instant::now() + poll;
                }
                Err(e) => {
                    failures += 1;
                    // A controller restart is not the run's failure; a job nobody knows of
                    // for a minute is over.
                    if failures >= 60 {
                        self.dlog(sink, Pipe::Stderr, format!("slurm: {e}")).await;
                        break;
                    }
                    next_poll = Instant::now() + submit::POLL_RUNNING;
                }
            }
        }
        self.take(
            &mut files,
            sink,
            true,
            &mut stage,
            &mut end,
            &mut launcher_exit,
        )
        .await;
        let run_end = self.decide(f, end, stage, info.as_ref(), sink).await;
        let mut report = RunReport::new(run_end);
        if matches!(report.end, RunEnd::BenchExited { .. }) {
            if let Ok(rd) = std::fs::read_dir(f.dir.join("results")) {
                report.result_files = rd.flatten().map(|e| e.path()).collect();
                report.result_files.sort();
            }
        }
        let _ = job;
        report
    }

    /// What the GPU panel shows of the job (state, node, allocation), when it changes.
    async fn report_changes(&self, before: Option<&JobInfo>, j: &JobInfo, sink: &RunSink) {
        let prov = |k: &str, v: String| RuntimeMsg::Provenance {
            key: k.into(),
            value: v,
        };
        let state = |i: &JobInfo| {
            if i.is_pending() && !i.reason.is_empty() && i.reason != "None" {
                format!("{} ({})", i.state, i.reason)
            } else {
                i.state.clone()
            }
        };
        if before.map(state) != Some(state(j)) {
            if j.is_pending() {
                self.dlog(
                    sink,
                    Pipe::Stdout,
                    format!("slurm job {} {}", j.id, state(j)),
                )
                .await;
            }
            sink.send(prov("slurm_state", state(j))).await;
        }
        if !j.gres.is_empty() && before.map(|b| &b.gres) != Some(&j.gres) {
            sink.send(prov("slurm_gres", j.gres.clone())).await;
        }
        if !j.nodes.is_empty() && before.map(|b| &b.nodes) != Some(&j.nodes) {
            sink.send(prov("slurm_node", j.nodes.clone())).await;
        }
    }

    /// Deliver the files' new lines and act on the status markers.
    async fn take(
        &self,
        files: &mut JobFiles,
        sink: &RunSink,
        last: bool,
        stage: &mut Stage,
        end: &mut Option<End>,
        launcher_exit: &mut Option<i64>,
    ) {
        for m in files.pump(sink, last).await {
            match m {
                Marker::Stage(s) => {
                    if s > *stage {
                        *stage = s;
                        sink.stage(s).await;
                    }
                }
                Marker::Provenance(k, v) => {
                    sink.send(RuntimeMsg::Provenance { key: k, value: v }).await
                }
                Marker::FixOk(r) => sink.send(RuntimeMsg::FixApplied { recipe: r }).await,
                Marker::Ready(s) => {
                    self.dlog(
                        sink,
                        Pipe::Stdout,
                        format!("server ready ({s} s after it started)"),
                    )
                    .await;
                    sink.send(RuntimeMsg::Provenance {
                        key: "server_ready_s".into(),
                        value: s.to_string(),
                    })
                    .await;
                }
                Marker::Node { node, gpus } => {
                    sink.send(RuntimeMsg::Provenance {
                        key: "slurm_alloc".into(),
                        value: format!("{node} gpus={gpus}"),
                    })
                    .await
                }
                Marker::End(End::Launcher(c)) => *launcher_exit = Some(c),
                Marker::End(e) => {
                    if end.is_none() {
                        *end = Some(e);
                    }
                }
                Marker::Other(_) => {}
            }
        }
    }

    async fn decide(
        &self,
        f: &Followed,
        end: Option<End>,
        stage: Stage,
        info: Option<&JobInfo>,
        sink: &RunSink,
    ) -> RunEnd {
        match end {
            Some(End::BenchExit(c)) => return RunEnd::BenchExited { exit_code: c },
            Some(End::ServerExit(c)) => return RunEnd::ServerDied { exit_code: Some(c) },
            Some(End::Timeout(s)) => return RunEnd::Timeout { stage: s },
            Some(End::Invalid(m)) => return RunEnd::BenchInvalid { message: m },
            Some(End::PatchFailed(m)) => return RunEnd::PatchFailed { message: m },
            Some(End::FixFailed(m)) => {
                return err(Stage::StartingContainer, format!("fix recipe {m}"))
            }
            Some(End::Launcher(_)) | None => {}
        }
        let state = info.map(|i| i.state.as_str()).unwrap_or("UNKNOWN");
        match state {
            "TIMEOUT" => return RunEnd::Timeout { stage },
            // The cluster took the job away (a node died, a higher-priority job): not the
            // run's failure, so it goes back to the queue without spending a retry.
            "NODE_FAIL" | "PREEMPTED" | "BOOT_FAIL" | "DEADLINE" => {
                self.dlog(
                    sink,
                    Pipe::Stderr,
                    format!("slurm job {} ended {state}: re-queued", f.id),
                )
                .await;
                return RunEnd::Cancelled;
            }
            _ => {}
        }
        let launcher_err = JobFiles::launcher_err(&f.dir);
        if stage == Stage::PreparingImage {
            if let Some(line) = image_missing(&launcher_err) {
                return RunEnd::ImageMissing {
                    message: self.cfg.secrets.redact(&line),
                };
            }
        }
        let last = launcher_err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim();
        err(
            stage,
            self.cfg.secrets.redact(&format!(
                "slurm job {} ended {state} (exit {}) before its script reported an end{}",
                f.id,
                info.and_then(|i| i.exit.clone())
                    .unwrap_or_else(|| "?".into()),
                if last.is_empty() {
                    String::new()
                } else {
                    format!(": {last}")
                }
            )),
        )
    }

    /// scancel, then wait (bounded) until Slurm has let the job go, so its GPUs are free
    /// when the engine hands them to the next run.
    async fn cancel_job(&self, id: &str, sink: &RunSink) {
        if let Err(e) = self.client.run("scancel", &[id.to_string()]).await {
            self.dlog(sink, Pipe::Stderr, format!("scancel {id}: {e}"))
                .await;
            return;
        }
        self.dlog(sink, Pipe::Stdout, format!("scancel {id}")).await;
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            match self.client.job(id).await {
                Ok(j) if !j.is_over() => tokio::time::sleep(Duration::from_millis(250)).await,
                _ => return,
            }
        }
    }
}

fn mark_consumed(dir: &Path) {
    let _ = std::fs::write(dir.join(CONSUMED), "");
}

/// The processes' own files may print the token (a server echoing its environment); the
/// directory is owner-only while the job runs, and the token is masked once it is over.
fn redact_files(dir: &Path, secrets: &crate::runtime::docker::secrets::Secrets) {
    if !secrets.has_token() {
        return;
    }
    for name in logs::FILES {
        let p = dir.join(name);
        let Ok(bytes) = std::fs::read(&p) else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes);
        let masked = secrets.redact(&text);
        if masked != text {
            let _ = std::fs::write(&p, masked);
        }
    }
}

#[async_trait]
impl Runtime for SlurmRuntime {
    fn name(&self) -> &'static str {
        "slurm"
    }

    /// Nothing is removed: a job still queued or running is this sweep's work in flight,
    /// followed again when its run resumes (see `execute`).
    async fn cleanup_leftovers(&self, sweep: &str) -> anyhow::Result<Vec<String>> {
        let prefix = submit::job_name(sweep, "");
        let jobs = self
            .client
            .jobs_named(&prefix)
            .await
            .map_err(|e| anyhow::anyhow!(e))?;
        Ok(jobs
            .into_iter()
            .map(|j| {
                format!(
                    "slurm job {} ({}) is still {} on {}: its run follows it again instead of resubmitting",
                    j.id, j.name, j.state, if j.nodes.is_empty() { "no node yet" } else { &j.nodes }
                )
            })
            .collect())
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
        let report = self.follow(&job, &followed, &sink, &cancel).await;
        redact_files(&followed.dir, &self.cfg.secrets);
        mark_consumed(&followed.dir);
        report
    }
}

/// For `nightshift run --runtime slurm`: Slurm answers, the launcher and shared directory
/// make sense; the GPUs to keep busy (the partition's, unless `--gpus`). Err: exit status.
pub fn for_cli(
    plan: &crate::plan::Plan,
    args: &SlurmArgs,
    gpus: Option<u32>,
    recipes: Arc<crate::diagnose::RecipeBook>,
) -> Result<(Arc<dyn Runtime>, u32), i32> {
    let cfg = SlurmConfig::from_plan(plan, args).map_err(|e| {
        eprintln!("error: {e}");
        2
    })?;
    let rt = SlurmRuntime::new(cfg).with_recipes(recipes);
    let probe = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|_| 1)?
        .block_on(rt.client.partition_gpus(rt.cfg.partition.as_deref()));
    let total = match probe {
        Ok(n) => n,
        Err(e) => {
            eprintln!("error: Slurm is not reachable: {e}");
            eprintln!("hint: run on a login node (sinfo, sbatch, squeue, scancel on PATH), or set --slurm-bin DIR/");
            return Err(1);
        }
    };
    let gpus = gpus.unwrap_or(total);
    if gpus == 0 {
        eprintln!(
            "nightshift: partition {} declares no GPUs (gres gpu): only runs that need none can start; --gpus N sets how many to keep busy",
            rt.cfg.partition.as_deref().unwrap_or("(default)")
        );
    }
    Ok((Arc::new(rt), gpus))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_failures_read_as_missing_images() {
        let t = "Unable to find image 'org/x:1' locally\ndocker: Error response from daemon: pull access denied for org/x, repository does not exist\n";
        assert!(image_missing(t).unwrap().contains("pull access denied"));
        assert_eq!(image_missing("bash: docker: command not found\n"), None);
    }
}
