//! The Docker runtime, through the Docker API (bollard; no docker CLI). One attempt:
//! image (inspect → disk check → pull with progress) → prep container for fix recipes and
//! agent patches, committed to an image → the run container (labelled; GPUs, shm/ipc, HF
//! cache, token, server port on 127.0.0.1) → server ready on `/health` + `/v1/models`
//! (serving) → the benchmark by exec, as made runnable for this image (`invoke`: probe the
//! interpreter, learn the client's flags, recorded rewrites) → teardown. Stages mirror the sim.

pub mod auth;
pub mod build;
pub mod container;
mod derive;
pub mod doctor;
pub mod exec;
pub mod health;
pub mod image;
pub mod invoke;
pub mod recipes;
pub mod results;
pub mod secrets;
pub mod stock;
pub mod upload;
mod weights;

use super::{RunEnd, RunJob, RunReport, RunSink, Runtime, RuntimeMsg};
use crate::model::{Pipe, Stage, Stream};
use crate::plan::Plan;
use async_trait::async_trait;
use bollard::models::ContainerConfig;
use bollard::query_parameters::{CommitContainerOptions, RemoveImageOptions};
use bollard::Docker;
use exec::LineOut;
use futures_util::StreamExt;
use recipes::{FixStep, RecipeSteps};
use secrets::Secrets;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Plan-level context the runtime needs (from the plan's `[defaults]` and `[images]`).
#[derive(Debug, Clone)]
pub struct DockerConfig {
    /// Host directory mounted at /root/.cache/huggingface.
    pub hf_cache: Option<PathBuf>,
    pub shm_size: Option<String>,
    pub ipc: Option<String>,
    /// The operator's vLLM git clone: `benchmarks/` is taken from it at each variant's commit.
    pub vllm_src: Option<PathBuf>,
    /// Refuse to pull with less free space than this on Docker's root directory.
    pub min_free_bytes: u64,
    /// SIGTERM → SIGKILL grace period at teardown.
    pub stop_grace_s: i32,
    /// Ask Docker for the run's GPUs (driver nvidia). Off on machines without the NVIDIA
    /// toolkit (the stand-in tests): the scheduler still accounts GPUs, containers get none.
    pub gpu_requests: bool,
    pub secrets: Secrets,
    /// `[datasets]`: name → host path, mounted read-only where a command needs them.
    pub datasets: std::collections::BTreeMap<String, PathBuf>,
    /// Fetch model weights into `hf_cache` before the server starts (None: the server
    /// fetches its own, as vLLM does by default).
    pub weights: Option<crate::prefetch::Hub>,
    /// The smallest GPU's memory (NVML), for the weights-fit check.
    pub gpu_mem_per_gpu: Option<u64>,
    /// Bring images onto the box ahead of their runs (the engine then starts a run only
    /// once its image is here), and remove those no remaining run needs for room.
    pub prefetch: bool,
    /// Images built from source where an overlay cannot make them.
    pub build: build::BuildConfig,
    /// `[defaults] warmup_requests`: sent before each serving benchmark measures.
    pub warmup_requests: u32,
}

/// vLLM images are 17–22 GB; a pull needs room to download and extract.
pub const DEFAULT_MIN_FREE_BYTES: u64 = 25_000_000_000;

pub use crate::plan::expand_path;

impl DockerConfig {
    pub fn from_plan(plan: &Plan) -> Self {
        let base = plan
            .path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let d = &plan.defaults;
        DockerConfig {
            hf_cache: d.hf_cache.as_deref().map(|p| expand_path(p, &base)),
            shm_size: d.shm_size.clone(),
            ipc: d.ipc.clone(),
            vllm_src: d.vllm_src.as_deref().map(|p| expand_path(p, &base)),
            min_free_bytes: DEFAULT_MIN_FREE_BYTES,
            stop_grace_s: 10,
            gpu_requests: true,
            secrets: Secrets::from_env(),
            datasets: plan.datasets.clone(),
            weights: d
                .fetch_weights
                .then(|| {
                    crate::prefetch::Hub::from_env(
                        d.hf_cache
                            .as_deref()
                            .map(|p| expand_path(p, &base))
                            .as_deref(),
                    )
                    .ok()
                })
                .flatten(),
            gpu_mem_per_gpu: None,
            warmup_requests: d.warmup_requests,
            prefetch: true,
            build: build::BuildConfig::default(),
        }
    }
}

pub struct DockerRuntime {
    docker: Docker,
    cfg: DockerConfig,
    /// Set on first use, inside the engine's tokio runtime: API version negotiated, and
    /// Docker's root directory (for the free-space check) when the engine reports it.
    ready: tokio::sync::OnceCell<Option<PathBuf>>,
    recipes: Arc<dyn RecipeSteps>,
    caches: invoke::Caches,
    /// Where pulls find registry credentials (the operator's Docker config by default).
    auth: auth::DockerAuth,
    /// One maker per image tag: a prefetch and a run that both find a baseline missing
    /// must not derive or build it twice (or collide on the prep container's name).
    making: Mutex<std::collections::HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Ask the server's readiness from inside its container (an engine on another machine
    /// publishes the port there, not here); see `runtime::hosts`.
    probe_in_container: bool,
}

/// Connect to the local engine and agree on an API version (Debian's 20.10 speaks 1.41;
/// operators run newer engines).
pub async fn connect() -> anyhow::Result<Docker> {
    let d = Docker::connect_with_local_defaults()?;
    Ok(d.negotiate_version().await?)
}

/// Keeps a container alive without a server (prep containers, offline benchmarks).
fn keeper() -> Vec<String> {
    vec!["tail".into(), "-f".into(), "/dev/null".into()]
}

/// What an attempt created and must take down.
#[derive(Default)]
struct Leftovers {
    /// Name, and whether its main process deserves a grace period (a server does; a
    /// `tail` keeper, PID 1 without a SIGTERM handler, would only make Docker wait).
    containers: Vec<(String, bool)>,
    images: Vec<String>,
    followers: Vec<JoinHandle<()>>,
}

/// Time spent waiting on Docker or the server, to tell nightshift's own overhead apart.
#[derive(Default)]
struct Clock(Mutex<Duration>);

impl Clock {
    async fn wait<T>(&self, f: impl Future<Output = T>) -> T {
        let t = Instant::now();
        let r = f.await;
        if let Ok(mut w) = self.0.lock() {
            *w += t.elapsed();
        }
        r
    }
    fn waited(&self) -> Duration {
        self.0.lock().map(|w| *w).unwrap_or_default()
    }
}

/// Touched just before the benchmark starts (see `copy_results`).
const RESULT_MARKER: &str = "/tmp/.nightshift-bench-start";

/// The first regular file of a tar archive (what `GET /archive` returns for one file).
fn save_first_file(tarball: &[u8], dest: &Path) -> Result<PathBuf, String> {
    let mut archive = tar::Archive::new(tarball);
    let entries = archive.entries().map_err(|e| e.to_string())?;
    for entry in entries {
        let mut entry = entry.map_err(|e| e.to_string())?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let name = entry
            .path()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_os_string()))
            .ok_or("a result file without a name")?;
        std::fs::create_dir_all(dest).map_err(|e| e.to_string())?;
        let out = dest.join(name);
        let mut f = std::fs::File::create(&out).map_err(|e| e.to_string())?;
        std::io::copy(&mut entry, &mut f).map_err(|e| e.to_string())?;
        return Ok(out);
    }
    Err("the archive holds no file".into())
}

/// Longest an image pull may take (22 GB on a slow link is well under this).
const PULL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3 * 3600);
/// Longest one fix-recipe step may take.
const FIX_STEP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30 * 60);

fn err(stage: Stage, message: impl std::fmt::Display) -> RunEnd {
    RunEnd::Error {
        stage,
        message: message.to_string(),
    }
}

fn exit_code_of(
    r: Option<Result<bollard::models::ContainerWaitResponse, bollard::errors::Error>>,
) -> Option<i64> {
    match r {
        Some(Ok(w)) => Some(w.status_code),
        Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. })) => Some(code),
        _ => None,
    }
}

impl DockerRuntime {
    /// No request is made here (it may run outside any tokio runtime); the API version is
    /// negotiated on first use.
    pub fn new(cfg: DockerConfig) -> anyhow::Result<Self> {
        Ok(DockerRuntime {
            docker: Docker::connect_with_local_defaults()?,
            cfg,
            ready: tokio::sync::OnceCell::new(),
            recipes: Arc::new(crate::diagnose::RecipeBook::builtin()),
            caches: invoke::Caches::default(),
            auth: auth::DockerAuth::from_env(),
            making: Mutex::default(),
            probe_in_container: false,
        })
    }

    /// A runtime on another engine (a `[[hosts]]` entry): readiness is asked inside the
    /// container, through that engine.
    pub fn on_engine(cfg: DockerConfig, docker: Docker) -> Self {
        DockerRuntime {
            docker,
            cfg,
            ready: tokio::sync::OnceCell::new(),
            recipes: Arc::new(crate::diagnose::RecipeBook::builtin()),
            caches: invoke::Caches::default(),
            auth: auth::DockerAuth::from_env(),
            making: Mutex::default(),
            probe_in_container: true,
        }
    }

    /// Hold while making `tag`; whoever waited then finds it made.
    async fn making(&self, tag: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = {
            let mut m = self.making.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(m.entry(tag.to_string()).or_default())
        };
        lock.lock_owned().await
    }

    async fn init(&self) -> Result<Option<&Path>, String> {
        let root = self
            .ready
            .get_or_try_init(|| async {
                // Clones share the negotiated version.
                self.docker
                    .clone()
                    .negotiate_version()
                    .await
                    .map_err(|e| format!("Docker not reachable: {e}"))?;
                Ok::<_, String>(
                    self.docker
                        .info()
                        .await
                        .ok()
                        .and_then(|i| i.docker_root_dir)
                        .map(PathBuf::from),
                )
            })
            .await?;
        Ok(root.as_deref())
    }

    /// Another recipe source (the operator's RecipeBook with overrides, or a test's).
    pub fn with_recipes(mut self, recipes: Arc<dyn RecipeSteps>) -> Self {
        self.recipes = recipes;
        self
    }

    /// Another Docker config for registry credentials (default: `$DOCKER_CONFIG`, else
    /// `~/.docker/config.json`, read at each pull).
    pub fn with_registry_auth(mut self, auth: auth::DockerAuth) -> Self {
        self.auth = auth;
        self
    }

    pub fn docker(&self) -> &Docker {
        &self.docker
    }

    async fn dlog(&self, sink: &RunSink, pipe: Pipe, line: impl AsRef<str>) {
        sink.log(Stream::Docker, pipe, self.cfg.secrets.redact(line.as_ref()))
            .await
    }

    fn out<'a>(&'a self, sink: &'a RunSink, stream: Stream) -> LineOut<'a> {
        LineOut {
            sink,
            stream,
            secrets: &self.cfg.secrets,
            capture: None,
        }
    }

    async fn prepare_image(
        &self,
        image: &str,
        sink: &RunSink,
        clock: &Clock,
    ) -> Result<image::ImageInfo, RunEnd> {
        if image.is_empty() {
            return Err(RunEnd::ImageMissing {
                message: "no image for this run (check the plan's [images] templates)".into(),
            });
        }
        if let Some(i) = clock.wait(image::inspect(&self.docker, image)).await {
            self.dlog(
                sink,
                Pipe::Stdout,
                format!("image {image} present ({})", i.id),
            )
            .await;
            return Ok(i);
        }
        if let Ok(Some(root)) = self.init().await {
            if let Some(free) = image::free_bytes(root) {
                if free < self.cfg.min_free_bytes {
                    let msg = format!(
                        "not pulling {image}: {:.1} GB free on Docker's root {} — an image needs about {:.0} GB; free space (docker image prune) first",
                        free as f64 / 1e9,
                        root.display(),
                        self.cfg.min_free_bytes as f64 / 1e9
                    );
                    sink.log(Stream::Pull, Pipe::Stderr, msg.clone()).await;
                    return Err(RunEnd::DiskFull { message: msg });
                }
            }
        }
        // A stalled registry must not hold a run (and its GPUs) forever.
        let pulled = tokio::time::timeout(
            PULL_TIMEOUT,
            clock.wait(image::pull(&self.docker, image, &self.auth, sink)),
        );
        let Ok(pulled) = pulled.await else {
            return Err(RunEnd::Timeout {
                stage: Stage::PreparingImage,
            });
        };
        match pulled {
            Ok(()) => {}
            Err(image::ImageError::Missing(m)) => return Err(RunEnd::ImageMissing { message: m }),
            Err(image::ImageError::DiskFull(m)) => return Err(RunEnd::DiskFull { message: m }),
            Err(image::ImageError::Other(m)) => {
                return Err(err(Stage::PreparingImage, format!("pulling {image}: {m}")))
            }
        }
        clock
            .wait(image::inspect(&self.docker, image))
            .await
            .ok_or_else(|| {
                err(
                    Stage::PreparingImage,
                    format!("{image} missing after its pull"),
                )
            })
    }

    /// Create and start a keeper container of `image` (no token, no GPUs: what is committed
    /// from it must not hold secrets).
    async fn prep_container(
        &self,
        job: &RunJob,
        image: &str,
        role: &str,
        lo: &Mutex<Leftovers>,
        clock: &Clock,
    ) -> Result<String, RunEnd> {
        let name = container::name(job, role);
        lo.lock().unwrap().containers.push((name.clone(), false));
        let spec = container::Spec {
            image: image.to_string(),
            entrypoint: keeper(),
            env: Vec::new(),
            labels: container::labels(job, role),
            gpus: Vec::new(),
            shm_size: None,
            ipc: None,
            binds: Vec::new(),
            port: None,
            workdir: None,
        };
        clock
            .wait(container::create(&self.docker, &name, spec))
            .await
            .map_err(|e| err(Stage::StartingContainer, format!("creating {name}: {e}")))?;
        clock
            .wait(self.docker.start_container(&name, None))
            .await
            .map_err(|e| err(Stage::StartingContainer, format!("starting {name}: {e}")))?;
        Ok(name)
    }

    /// Commit `container` as `repo:tag` (one argument: they name one reference), keeping the base image's entrypoint and command
    /// (not the keeper's).
    async fn commit(
        &self,
        container: &str,
        (repo, tag): (&str, &str),
        base: &image::ImageInfo,
        comment: &str,
        made_for: &str,
        clock: &Clock,
    ) -> Result<(), RunEnd> {
        clock
            .wait(self.docker.commit_container(
                CommitContainerOptions {
                    container: Some(container.to_string()),
                    repo: Some(repo.to_string()),
                    tag: Some(tag.to_string()),
                    comment: Some(comment.to_string()),
                    pause: true,
                    ..Default::default()
                },
                ContainerConfig {
                    entrypoint: base.entrypoint.clone(),
                    cmd: base.cmd.clone(),
                    // Eviction removes it with the plan image it stands for.
                    labels: Some([(stock::MADE_FOR.to_string(), made_for.to_string())].into()),
                    ..Default::default()
                },
            ))
            .await
            .map(|_| ())
            .map_err(|e| {
                err(
                    Stage::StartingContainer,
                    format!("committing {container}: {e}"),
                )
            })
    }

    async fn remove_now(&self, name: &str, lo: &Mutex<Leftovers>, clock: &Clock) {
        clock.wait(container::teardown(&self.docker, name, 0)).await;
        lo.lock().unwrap().containers.retain(|c| c.0 != name);
    }

    /// Exec the recipes' steps in a prep container and commit the fixed image (reused by
    /// every later run of the same image with the same recipes).
    async fn apply_fixes(
        &self,
        job: &RunJob,
        image: &str,
        base: &image::ImageInfo,
        sink: &RunSink,
        lo: &Mutex<Leftovers>,
        clock: &Clock,
    ) -> Result<String, RunEnd> {
        let mut with_steps: Vec<(String, Vec<FixStep>)> = Vec::new();
        for r in &job.fixes {
            match self.recipes.steps(r) {
                Some(s) if !s.is_empty() => with_steps.push((r.clone(), s)),
                Some(_) => {
                    self.dlog(
                        sink,
                        Pipe::Stdout,
                        format!("fix recipe {r}: environment only"),
                    )
                    .await;
                    sink.send(RuntimeMsg::FixApplied { recipe: r.clone() })
                        .await;
                }
                None => {
                    self.dlog(
                        sink,
                        Pipe::Stderr,
                        format!("fix recipe {r}: unknown to the Docker runtime; not applied"),
                    )
                    .await
                }
            }
        }
        if with_steps.is_empty() {
            return Ok(image.to_string());
        }
        // `commit_image = false`: the steps run again on every attempt, in an image of its
        // own removed at teardown, instead of a fixed image that later runs reuse.
        let (kept, fresh): (Vec<_>, Vec<_>) = with_steps
            .into_iter()
            .partition(|(r, _)| self.recipes.commits(r));
        let mut image = image.to_string();
        if !kept.is_empty() {
            let names: Vec<String> = kept.iter().map(|(r, _)| r.clone()).collect();
            let target = image::fixed_ref(&image, &names);
            image = self
                .fix_into(job, &image, base, &kept, target, true, sink, lo, clock)
                .await?;
        }
        if !fresh.is_empty() {
            let (repo, tag) = image::patched_ref(&job.sweep, &job.key, job.attempt);
            let target = (repo, format!("{tag}-fix"));
            lo.lock()
                .unwrap()
                .images
                .push(format!("{}:{}", target.0, target.1));
            image = self
                .fix_into(job, &image, base, &fresh, target, false, sink, lo, clock)
                .await?;
        }
        Ok(image)
    }

    /// Run `recipes`' steps in a prep container of `image` and commit it as `target`
    /// (`reuse`: an image already there under that name is taken as it is).
    #[allow(clippy::too_many_arguments)]
    async fn fix_into(
        &self,
        job: &RunJob,
        image: &str,
        base: &image::ImageInfo,
        recipes: &[(String, Vec<FixStep>)],
        (repo, tag): (String, String),
        reuse: bool,
        sink: &RunSink,
        lo: &Mutex<Leftovers>,
        clock: &Clock,
    ) -> Result<String, RunEnd> {
        let names: Vec<String> = recipes.iter().map(|(r, _)| r.clone()).collect();
        let fixed = format!("{repo}:{tag}");
        if reuse
            && clock
                .wait(image::inspect(&self.docker, &fixed))
                .await
                .is_some()
        {
            self.dlog(sink, Pipe::Stdout, format!("reusing fixed image {fixed}"))
                .await;
        } else {
            let name = self.prep_container(job, image, "fix", lo, clock).await?;
            for (r, steps) in recipes {
                for step in steps {
                    self.fix_step(job, &name, r, step, sink, clock).await?;
                }
            }
            self.commit(
                &name,
                (&repo, &tag),
                base,
                &format!("nightshift fix: {}", names.join(", ")),
                &job.image,
                clock,
            )
            .await?;
            let how = if reuse {
                "committed fixed image"
            } else {
                "fixed this attempt's image (commit_image = false: not kept)"
            };
            self.dlog(sink, Pipe::Stdout, format!("{how} {fixed}"))
                .await;
            self.remove_now(&name, lo, clock).await;
        }
        for r in names {
            sink.send(RuntimeMsg::FixApplied { recipe: r }).await;
        }
        Ok(fixed)
    }

    /// One recipe step in the prep container `name`.
    async fn fix_step(
        &self,
        job: &RunJob,
        name: &str,
        r: &str,
        step: &FixStep,
        sink: &RunSink,
        clock: &Clock,
    ) -> Result<(), RunEnd> {
        let fail = |m: String| err(Stage::StartingContainer, format!("fix recipe {r}: {m}"));
        match step {
            FixStep::Shell { run } => {
                self.dlog(
                    sink,
                    Pipe::Stdout,
                    format!("fix recipe {r}: $ {}", run.trim()),
                )
                .await;
                let mut out = self.out(sink, Stream::Docker);
                let step = clock.wait(exec::run(
                    &self.docker,
                    name,
                    vec!["sh".into(), "-c".into(), run.clone()],
                    None,
                    &mut out,
                ));
                // A `pip install` that hangs must not hold the run forever.
                let code = tokio::time::timeout(FIX_STEP_TIMEOUT, step)
                    .await
                    .map_err(|_| fail(format!("step ran past {} s", FIX_STEP_TIMEOUT.as_secs())))?
                    .map_err(|e| fail(e.to_string()))?;
                if code != 0 {
                    return Err(fail(format!("step exited with status {code}")));
                }
            }
            FixStep::CopyFromSource { path, dest } => {
                let Some(src) = &self.cfg.vllm_src else {
                    return Err(fail(format!(
                        "needs {path} from a vLLM clone; set `vllm_src` in the plan"
                    )));
                };
                let commit = self.benchmarks_commit(job);
                let data = upload::file_at_commit(src, commit, path)
                    .await
                    .map_err(|e| fail(format!("{e:#}")))?;
                let vllm_dir = self
                    .exec_stdout(name, crate::diagnose::recipe::FIND_VLLM_DIR, sink, clock)
                    .await;
                let dest = dest.replace(
                    crate::diagnose::recipe::VLLM_DIR_VAR,
                    vllm_dir.as_deref().unwrap_or("/").trim_end_matches('/'),
                );
                let (dir, file) = dest.rsplit_once('/').unwrap_or(("/", dest.as_str()));
                let dir = if dir.is_empty() { "/" } else { dir };
                let tar = upload::single_file_tar(file, &data).map_err(|e| fail(e.to_string()))?;
                self.upload(name, dir, tar, clock)
                    .await
                    .map_err(|e| fail(format!("copying {path} to {dest}: {e}")))?;
                self.dlog(
                    sink,
                    Pipe::Stdout,
                    format!("fix recipe {r}: copied {path} at {commit} to {dest}"),
                )
                .await;
            }
        }
        Ok(())
    }

    /// Run a shell snippet in the container; its lines go to the docker log (redacted)
    /// and are also returned, for commands whose output decides something.
    async fn exec_captured(
        &self,
        container: &str,
        script: String,
        sink: &RunSink,
        clock: &Clock,
    ) -> (Result<i64, String>, Vec<(Pipe, String)>) {
        let mut captured = Vec::new();
        let mut out = LineOut {
            sink,
            stream: Stream::Docker,
            secrets: &self.cfg.secrets,
            capture: Some(&mut captured),
        };
        let code = clock
            .wait(exec::run(
                &self.docker,
                container,
                vec!["sh".into(), "-c".into(), script],
                None,
                &mut out,
            ))
            .await
            .map_err(|e| e.to_string());
        (code, captured)
    }

    /// The last absolute path a helper command prints on stdout.
    async fn exec_stdout(
        &self,
        container: &str,
        cmd: &str,
        sink: &RunSink,
        clock: &Clock,
    ) -> Option<String> {
        let (_, captured) = self.exec_captured(container, cmd.into(), sink, clock).await;
        captured
            .into_iter()
            .rev()
            .find(|(p, l)| *p == Pipe::Stdout && l.starts_with('/'))
            .map(|(_, l)| l.trim().to_string())
    }

    /// Upload the agent's patch and apply it strictly; commit a per-attempt image.
    #[allow(clippy::too_many_arguments)]
    async fn apply_patch(
        &self,
        job: &RunJob,
        image: &str,
        base: &image::ImageInfo,
        sink: &RunSink,
        lo: &Mutex<Leftovers>,
        clock: &Clock,
    ) -> Result<String, RunEnd> {
        let failed = |m: String| RunEnd::PatchFailed { message: m };
        let Some(path) = &job.patch else {
            return Err(failed("agent variant without a patch file".into()));
        };
        let data = tokio::fs::read(path)
            .await
            .map_err(|e| failed(format!("cannot read patch {}: {e}", path.display())))?;
        {
            use sha2::Digest;
            let h = sha2::Sha256::digest(&data);
            let hex: String = h.iter().map(|b| format!("{b:02x}")).collect();
            sink.send(RuntimeMsg::Provenance {
                key: "patch_sha256".into(),
                value: hex,
            })
            .await;
        }
        if let Some(built) = self.patch_build(job, image, sink, lo, clock).await? {
            return Ok(built);
        }
        let name = self.prep_container(job, image, "patch", lo, clock).await?;
        let tar = upload::single_file_tar("nightshift-agent.patch", &data)
            .map_err(|e| err(Stage::StartingContainer, e))?;
        self.upload(&name, "/tmp", tar, clock).await.map_err(|e| {
            err(
                Stage::StartingContainer,
                format!("uploading the patch: {e}"),
            )
        })?;
        // The plan's patch_dir where the image has it (ISO-Bench baselines: the editable
        // tree); else the installed package's parent (a baseline derived by overlay keeps
        // vLLM where the human image had it).
        let configured = match &job.patch_dir {
            Some(d) => exec::capture(
                &self.docker,
                &name,
                vec!["test".into(), "-d".into(), d.clone()],
                Vec::new(),
            )
            .await
            .is_ok_and(|(code, _)| code == 0)
            .then(|| d.clone()),
            None => None,
        };
        let dir = match configured {
            Some(d) => d,
            None => {
                let d = self.vllm_parent_dir(&name, sink, clock).await;
                if let Some(p) = &job.patch_dir {
                    self.dlog(
                        sink,
                        Pipe::Stdout,
                        format!("{p} is not in this image: the patch applies where vllm is installed ({d})"),
                    )
                    .await;
                }
                d
            }
        };
        let p = "/tmp/nightshift-agent.patch";
        let script = format!(
            "cd {dir} || exit 3; if command -v patch >/dev/null 2>&1; then \
             echo '$ patch -p1 --dry-run'; patch -p1 --dry-run -i {p} || exit 1; \
             echo '$ patch -p1'; patch -p1 -i {p} || exit 2; \
             else echo '$ git apply --check'; git apply --check {p} || exit 1; \
             echo '$ git apply'; git apply {p} || exit 2; fi",
            dir = shell_words::quote(&dir)
        );
        self.dlog(
            sink,
            Pipe::Stdout,
            format!("applying the patch of agent {} in {dir}", job.variant),
        )
        .await;
        let (code, captured) = self.exec_captured(&name, script, sink, clock).await;
        let code =
            code.map_err(|e| err(Stage::StartingContainer, format!("applying the patch: {e}")))?;
        if code != 0 {
            let evidence = captured
                .iter()
                .rev()
                .map(|(_, l)| l.trim())
                .find(|l| !l.is_empty() && !l.starts_with("$ "))
                .unwrap_or("")
                .to_string();
            let what = match code {
                1 => "does not apply (dry run)",
                2 => "failed while applying",
                3 => "has no directory to apply in",
                _ => "could not be applied",
            };
            return Err(failed(format!(
                "patch {} {what} in {dir}: {evidence}",
                path.display()
            )));
        }
        let (repo, tag) = image::patched_ref(&job.sweep, &job.key, job.attempt);
        let patched = format!("{repo}:{tag}");
        lo.lock().unwrap().images.push(patched.clone());
        self.commit(
            &name,
            (&repo, &tag),
            base,
            "nightshift agent patch",
            &job.image,
            clock,
        )
        .await?;
        self.remove_now(&name, lo, clock).await;
        Ok(patched)
    }

    /// Where `patch -p1` runs by default: the parent of the installed `vllm` package.
    async fn vllm_parent_dir(&self, container: &str, sink: &RunSink, clock: &Clock) -> String {
        let cmd = "python3 -c 'import os, importlib.util; print(os.path.dirname(os.path.dirname(importlib.util.find_spec(\"vllm\").origin)))'";
        self.exec_stdout(container, cmd, sink, clock)
            .await
            .unwrap_or_else(|| "/".into())
    }

    fn benchmarks_commit<'a>(&self, job: &'a RunJob) -> &'a str {
        match job.variant {
            crate::model::Variant::Human => &job.commit,
            _ => job.parent.as_deref().unwrap_or(&job.commit),
        }
    }

    async fn attempt(
        &self,
        job: &RunJob,
        sink: &RunSink,
        lo: &Mutex<Leftovers>,
        clock: &Clock,
    ) -> RunReport {
        macro_rules! tryr {
            ($e:expr) => {
                match $e {
                    Ok(v) => v,
                    Err(end) => return RunReport::new(end),
                }
            };
        }
        sink.stage(Stage::PreparingImage).await;
        let (mut image, info) = tryr!(self.obtain_image(job, sink, lo, clock).await);
        sink.send(RuntimeMsg::Provenance {
            key: "image_id".into(),
            value: info.id.clone(),
        })
        .await;
        // The driver and GPU models, so `results` can flag comparisons across either.
        for (key, value) in gpu_facts(&job.gpus) {
            sink.send(RuntimeMsg::Provenance { key, value }).await;
        }
        if let Some(d) = &info.digest {
            sink.send(RuntimeMsg::Provenance {
                key: "image_digest".into(),
                value: d.clone(),
            })
            .await;
        }
        sink.stage(Stage::StartingContainer).await;
        if !job.fixes.is_empty() {
            image = tryr!(self.apply_fixes(job, &image, &info, sink, lo, clock).await);
        }
        if job.variant.agent_id().is_some() {
            image = tryr!(self.apply_patch(job, &image, &info, sink, lo, clock).await);
        }
        let setup = tryr!(self.setup(job, &image, sink, lo, clock).await);
        let weights_env = match setup.invocation.model.as_deref().or(job.model.as_deref()) {
            Some(m) => tryr!(self.ensure_weights(job, m, sink, clock).await),
            None => Vec::new(),
        };
        let workdir = setup.facts.workdir.clone();
        let serving = job.kind.needs_server();
        let port = serving.then_some(setup.invocation.port);
        let entrypoint = match &setup.resolved.server_argv {
            Some(argv) => argv.clone(),
            None => keeper(),
        };
        let mut env: Vec<String> = job.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        if serving {
            // The command's env prefix configures vLLM (e.g. an attention backend): the
            // server gets it too, as does the benchmark (by exec).
            env.extend(setup.env.iter().cloned());
        }
        env.extend(weights_env);
        env.extend(self.cfg.secrets.container_env());
        let mut binds = Vec::new();
        if let Some(h) = &self.cfg.hf_cache {
            binds.push(format!(
                "{}:{}",
                h.display(),
                container::HF_CACHE_IN_CONTAINER
            ));
        }
        binds.extend(invoke::dataset_binds(&setup.invocation));
        let ipc = self.cfg.ipc.clone();
        let shm_size = if ipc.as_deref() == Some("host") {
            None
        } else {
            self.cfg.shm_size.as_deref().and_then(container::parse_size)
        };
        let name = container::name(job, "run");
        lo.lock().unwrap().containers.push((name.clone(), serving));
        let t_create = Instant::now();
        let spec = container::Spec {
            image: image.clone(),
            entrypoint: entrypoint.clone(),
            env,
            labels: container::labels(job, "run"),
            gpus: if self.cfg.gpu_requests {
                job.gpus.clone()
            } else {
                Vec::new()
            },
            shm_size,
            ipc,
            binds,
            port,
            workdir: Some(workdir.clone()),
        };
        tryr!(clock
            .wait(container::create(&self.docker, &name, spec))
            .await
            .map_err(|e| err(Stage::StartingContainer, format!("creating {name}: {e}"))));
        self.dlog(
            sink,
            Pipe::Stdout,
            format!(
                "container {name} created from {image} on GPUs {:?}: {}",
                job.gpus,
                shell_words::join(&entrypoint)
            ),
        )
        .await;
        if let Some(tar) = setup.bench_tar.clone() {
            tryr!(self
                .upload(&name, &workdir, tar, clock)
                .await
                .map_err(|e| err(
                    Stage::StartingContainer,
                    format!("uploading benchmarks/: {e}")
                )));
            self.dlog(
                sink,
                Pipe::Stdout,
                format!(
                    "uploaded benchmarks/ at {} to {workdir}",
                    self.benchmarks_commit(job)
                ),
            )
            .await;
        }
        tryr!(clock
            .wait(self.docker.start_container(&name, None))
            .await
            .map_err(|e| err(Stage::StartingContainer, format!("starting {name}: {e}"))));
        let mut wait = Box::pin(self.docker.wait_container(&name, None));

        if let Some(port) = port {
            sink.stage(Stage::LoadingServer).await;
            let follower = {
                let docker = self.docker.clone();
                let sink = sink.clone();
                let secrets = self.cfg.secrets.clone();
                let name = name.clone();
                tokio::spawn(async move {
                    let logs = docker.logs(
                        &name,
                        Some(bollard::query_parameters::LogsOptions {
                            follow: true,
                            stdout: true,
                            stderr: true,
                            ..Default::default()
                        }),
                    );
                    let mut out = LineOut {
                        sink: &sink,
                        stream: Stream::Server,
                        secrets: &secrets,
                        capture: None,
                    };
                    let _ = exec::pump(Box::pin(logs), &mut out).await;
                })
            };
            lo.lock().unwrap().followers.push(follower);
            let Some(host_port) = clock
                .wait(container::host_port(&self.docker, &name, port))
                .await
            else {
                // A server that dies at once leaves no port mapping behind.
                if let Ok(r) = tokio::time::timeout(Duration::from_secs(5), wait.next()).await {
                    let code = exit_code_of(r);
                    self.flush_followers(lo).await;
                    return RunReport::new(RunEnd::ServerDied { exit_code: code });
                }
                return RunReport::new(err(
                    Stage::LoadingServer,
                    format!("no host port published for {port}/tcp"),
                ));
            };
            // The readiness wait is the server's time, not nightshift's.
            let failed = clock
                .wait(async {
                    let deadline = tokio::time::sleep(job.server_start_timeout);
                    tokio::pin!(deadline);
                    loop {
                        let ready = tokio::select! {
                            r = wait.next() => {
                                let code = exit_code_of(r);
                                self.flush_followers(lo).await;
                                return Some(RunEnd::ServerDied { exit_code: code });
                            }
                            _ = &mut deadline => return Some(RunEnd::Timeout { stage: Stage::LoadingServer }),
                            ok = async {
                                if self.probe_in_container {
                                    health::ready_in(&self.docker, &name, port).await
                                } else {
                                    health::ready(host_port).await
                                }
                            } => ok,
                        };
                        if ready {
                            return None;
                        }
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                })
                .await;
            if let Some(end) = failed {
                return RunReport::new(end);
            }
            self.dlog(
                sink,
                Pipe::Stdout,
                format!(
                    "server ready on 127.0.0.1:{host_port} ({:.3} s after container create)",
                    t_create.elapsed().as_secs_f64()
                ),
            )
            .await;
            sink.send(RuntimeMsg::Provenance {
                key: "server_ready_s".into(),
                value: format!("{:.3}", t_create.elapsed().as_secs_f64()),
            })
            .await;
        }

        sink.stage(Stage::Benchmarking).await;
        if serving && setup.invocation.warmup_requests > 0 {
            let sent = tokio::time::timeout(
                job.run_timeout,
                health::warm_up_in(&self.docker, &name, &setup),
            );
            let line = match sent.await {
                Ok(Ok(w)) => w.to_string(),
                Ok(Err(e)) => format!("warm-up not sent ({e}); the benchmark runs without it"),
                Err(_) => "warm-up cut short at the run's timeout".to_string(),
            };
            sink.send(RuntimeMsg::Provenance {
                key: "warmup".into(),
                value: line.clone(),
            })
            .await;
            self.dlog(sink, Pipe::Stdout, line).await;
        }
        let wanted = results::wanted(&job.view, &workdir);
        if !wanted.is_empty() {
            // Marks the start so "the JSON this run wrote" can be told from older ones.
            let _ = self
                .exec_stdout(&name, &format!("touch {RESULT_MARKER}"), sink, clock)
                .await;
        }
        let t_bench = Instant::now();
        let mut out = self.out(sink, Stream::Bench);
        let mut bench_env = setup.env.clone();
        bench_env.extend(job.env.iter().map(|(k, v)| format!("{k}={v}")));
        let bench = exec::run_with_env(
            &self.docker,
            &name,
            setup.resolved.bench_argv.clone(),
            Some(workdir),
            bench_env,
            &mut out,
        );
        let end = tokio::select! {
            r = bench => match r {
                Ok(code) => RunEnd::BenchExited { exit_code: code },
                Err(e) => err(Stage::Benchmarking, format!("benchmark exec: {e}")),
            },
            r = wait.next() => {
                let code = exit_code_of(r);
                if serving {
                    RunEnd::ServerDied { exit_code: code }
                } else {
                    err(Stage::Benchmarking, format!("container exited ({code:?}) during the benchmark"))
                }
            }
            _ = tokio::time::sleep(job.run_timeout) => RunEnd::Timeout { stage: Stage::Benchmarking },
        };
        if let Ok(mut w) = clock.0.lock() {
            *w += t_bench.elapsed();
        }
        let mut report = RunReport::new(end);
        if matches!(report.end, RunEnd::BenchExited { .. }) {
            report.result_files = self.copy_results(job, &name, &wanted, sink, clock).await;
        }
        report
    }

    /// Copy the benchmark's result files out (tar over the API) for the parser. A file
    /// that cannot be fetched is reported and skipped: stdout is still parsed.
    async fn copy_results(
        &self,
        job: &RunJob,
        container: &str,
        wanted: &[results::Wanted],
        sink: &RunSink,
        clock: &Clock,
    ) -> Vec<PathBuf> {
        let dest = std::env::temp_dir()
            .join("nightshift-results")
            .join(job.key.replace('/', "_"))
            .join(format!("attempt-{}", job.attempt));
        let mut files = Vec::new();
        for w in wanted {
            let path = match w {
                results::Wanted::File(p) => Some(p.clone()),
                results::Wanted::NewestJsonIn(dir) => {
                    let cmd = format!(
                        "ls -1t $(find '{dir}' -maxdepth 1 -name '*.json' -newer {RESULT_MARKER}) 2>/dev/null | head -n 1"
                    );
                    self.exec_stdout(container, &cmd, sink, clock).await
                }
            };
            let Some(path) = path else { continue };
            let opts =
                bollard::query_parameters::DownloadFromContainerOptions { path: path.clone() };
            let mut stream = self.docker.download_from_container(container, Some(opts));
            let mut tarball = Vec::new();
            let mut failed = None;
            while let Some(chunk) = clock.wait(stream.next()).await {
                match chunk {
                    Ok(b) => tarball.extend_from_slice(&b),
                    Err(e) => {
                        failed = Some(e.to_string());
                        break;
                    }
                }
            }
            let saved = match failed {
                Some(e) => Err(e),
                None => save_first_file(&tarball, &dest),
            };
            match saved {
                Ok(p) => {
                    self.dlog(
                        sink,
                        Pipe::Stdout,
                        format!("copied result file {path} to {}", p.display()),
                    )
                    .await;
                    files.push(p);
                }
                Err(e) => {
                    self.dlog(
                        sink,
                        Pipe::Stderr,
                        format!("result file {path} not copied: {e}"),
                    )
                    .await
                }
            }
        }
        files
    }

    /// Let the log followers deliver what the container printed last.
    async fn flush_followers(&self, lo: &Mutex<Leftovers>) {
        let followers: Vec<JoinHandle<()>> = std::mem::take(&mut lo.lock().unwrap().followers);
        for f in followers {
            let abort = f.abort_handle();
            if tokio::time::timeout(Duration::from_secs(10), f)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
    }

    async fn teardown(&self, lo: &Mutex<Leftovers>, sink: &RunSink, grace_s: i32, clock: &Clock) {
        let (containers, images) = {
            let mut l = lo.lock().unwrap();
            (
                std::mem::take(&mut l.containers),
                std::mem::take(&mut l.images),
            )
        };
        for (c, graceful) in containers.iter().rev() {
            let grace = if *graceful { grace_s } else { 0 };
            if let Some(what) = clock
                .wait(container::teardown(&self.docker, c, grace))
                .await
            {
                self.dlog(sink, Pipe::Stdout, what).await;
            }
        }
        clock.wait(self.flush_followers(lo)).await;
        for i in images {
            let _ = clock
                .wait(self.docker.remove_image(
                    &i,
                    Some(RemoveImageOptions {
                        force: true,
                        ..Default::default()
                    }),
                    None,
                ))
                .await;
        }
    }
}

/// GPUs NVML sees (0 without a driver: runs that need GPUs then wait, 0-GPU runs proceed).
/// The smallest GPU's total memory, for the weights-fit check (None without NVML).
pub fn min_gpu_memory() -> Option<u64> {
    let nvml = nvml_wrapper::Nvml::init().ok()?;
    (0..nvml.device_count().ok()?)
        .filter_map(|i| nvml.device_by_index(i).ok()?.memory_info().ok())
        .map(|m| m.total)
        .min()
}

/// The NVIDIA driver version and the names of `gpus`, from NVML (nothing without it).
fn gpu_facts(gpus: &[u32]) -> Vec<(String, String)> {
    let Ok(nvml) = nvml_wrapper::Nvml::init() else {
        return Vec::new();
    };
    let mut v = Vec::new();
    if let Ok(d) = nvml.sys_driver_version() {
        v.push(("driver".to_string(), d));
    }
    let names: Vec<String> = gpus
        .iter()
        .filter_map(|i| nvml.device_by_index(*i).ok()?.name().ok())
        .collect();
    if !names.is_empty() {
        v.push(("gpu_names".to_string(), names.join(", ")));
    }
    v
}

pub fn visible_gpus() -> u32 {
    gpu_census().unwrap_or(0)
}

/// How many GPUs NVML sees, or why it sees none.
pub fn gpu_census() -> Result<u32, String> {
    let nvml = nvml_wrapper::Nvml::init().map_err(|e| format!("NVML cannot start ({e})"))?;
    match nvml.device_count() {
        Ok(0) => Err("NVML runs but lists no GPU".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("NVML cannot count GPUs ({e})")),
    }
}

/// For `nightshift run --runtime docker`: check that Docker answers (with a hint when it
/// does not), then build the runtime from the plan. Err is the exit status.
pub fn for_cli(
    plan: &Plan,
    opts: &crate::cli::DockerOptions,
    gpus: Option<u32>,
    recipes: Arc<crate::diagnose::RecipeBook>,
) -> Result<Arc<dyn Runtime>, i32> {
    let check = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|_| 1)?
        .block_on(async { connect().await.map(|_| ()) });
    if let Err(e) = check {
        tracing::error!("Docker is not reachable: {e}");
        tracing::info!("hint: start dockerd and check access to /var/run/docker.sock (or DOCKER_HOST); `nightshift doctor` checks everything a sweep needs");
        return Err(1);
    }
    let mut cfg = DockerConfig::from_plan(plan);
    cfg.gpu_mem_per_gpu = min_gpu_memory();
    cfg.min_free_bytes = opts.min_free_bytes;
    cfg.build = opts.build.clone();
    if let Some(f) = &opts.build_dockerfile {
        match std::fs::read_to_string(f) {
            Ok(t) if t.contains("{base}") => cfg.build.dockerfile = t,
            Ok(_) => {
                tracing::error!(
                    "{}: a build template must start from {{base}} (e.g. `FROM {{base}}`)",
                    f.display()
                );
                return Err(2);
            }
            Err(e) => {
                tracing::error!("--build-dockerfile {}: {e}", f.display());
                return Err(2);
            }
        }
    }
    // No GPU is a broken night, not one where every run is skipped: say so before it
    // starts. An explicit --gpus N on such a box means N slots without device requests.
    if let Err(why) = gpu_census() {
        match gpus {
            None => {
                tracing::error!("no GPU visible: {why}");
                tracing::info!("hint: check the NVIDIA driver (`nvidia-smi`); on a box without GPUs, `--gpus N` runs N slots without device requests (rehearsals, CI), `--gpus 0` only what needs no GPU");
                return Err(2);
            }
            Some(n) => {
                tracing::warn!("no GPU visible ({why}): {n} slots without GPU device requests");
                cfg.gpu_requests = false;
            }
        }
    }
    match DockerRuntime::new(cfg) {
        // The engine's book: a recipe the operator changed is the one offered and the one run.
        Ok(rt) => Ok(Arc::new(rt.with_recipes(recipes))),
        Err(e) => {
            tracing::error!("Docker: {e}");
            Err(1)
        }
    }
}

#[async_trait]
impl Runtime for DockerRuntime {
    fn name(&self) -> &'static str {
        "docker"
    }

    async fn cleanup_leftovers(&self, sweep: &str) -> anyhow::Result<Vec<String>> {
        self.init().await.map_err(|e| anyhow::anyhow!(e))?;
        let mut lines = Vec::new();
        for (id, name) in container::of_sweep(&self.docker, sweep).await? {
            let shown = if name.is_empty() { id.clone() } else { name };
            container::teardown(&self.docker, &id, 0).await;
            lines.push(format!(
                "removed container {shown} left by an earlier nightshift of sweep {sweep}"
            ));
        }
        Ok(lines)
    }

    async fn reclaim(&self, job: &RunJob) -> anyhow::Result<Vec<String>> {
        self.init().await.map_err(|e| anyhow::anyhow!(e))?;
        let mut lines = Vec::new();
        for (id, name) in container::of_attempt(&self.docker, job).await? {
            container::teardown(&self.docker, &id, 0).await;
            lines.push(format!(
                "removed container {} of a failed attempt",
                if name.is_empty() { id } else { name }
            ));
        }
        Ok(lines)
    }

    fn prefetches(&self) -> bool {
        self.cfg.prefetch
    }

    async fn fetch_image(
        &self,
        job: RunJob,
        sink: RunSink,
        cancel: CancellationToken,
    ) -> Result<(), RunEnd> {
        self.fetch(job, sink, cancel).await
    }

    async fn image_stock(
        &self,
        images: &[String],
    ) -> (Option<u64>, std::collections::BTreeMap<String, u64>) {
        self.stock(images).await
    }

    async fn evict_image(&self, image: &str) -> Result<u64, String> {
        self.evict(image).await
    }

    async fn execute(&self, job: RunJob, sink: RunSink, cancel: CancellationToken) -> RunReport {
        let lo = Mutex::new(Leftovers::default());
        let clock = Clock::default();
        let t0 = Instant::now();
        if let Err(e) = self.init().await {
            return RunReport::new(err(Stage::PreparingImage, e));
        }
        // A panic inside the attempt must not skip the teardown below: the containers it
        // started would hold their GPUs after the engine handed them on.
        let attempt = std::panic::AssertUnwindSafe(self.attempt(&job, &sink, &lo, &clock));
        let mut report = tokio::select! {
            r = futures_util::FutureExt::catch_unwind(attempt) => r.unwrap_or_else(|p| {
                let why = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                RunReport::new(err(Stage::StartingContainer, format!("the Docker runtime failed: {why}")))
            }),
            _ = cancel.cancelled() => RunReport::new(RunEnd::Cancelled),
        };
        // Messages carry Docker's and the container's words into evidence and the store.
        match &mut report.end {
            RunEnd::ImageMissing { message }
            | RunEnd::DiskFull { message }
            | RunEnd::PatchFailed { message }
            | RunEnd::NeedsBuild { message }
            | RunEnd::Error { message, .. } => *message = self.cfg.secrets.redact(message),
            _ => {}
        }
        let grace = if report.end == RunEnd::Cancelled {
            2
        } else {
            self.cfg.stop_grace_s
        };
        self.teardown(&lo, &sink, grace, &clock).await;
        let total = t0.elapsed();
        let own = total.saturating_sub(clock.waited());
        self.dlog(
            &sink,
            Pipe::Stdout,
            format!(
                "attempt took {:.3} s; nightshift's own time {:.1} ms (the rest waiting on Docker and the server)",
                total.as_secs_f64(),
                own.as_secs_f64() * 1e3
            ),
        )
        .await;
        report
    }
}
