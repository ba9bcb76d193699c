//! The Docker runtime, through the Docker API (bollard; no docker CLI). One attempt:
//! image (inspect → disk check → pull with progress) → prep container for fix recipes and
//! agent patches, committed to an image → the run container (labelled; GPUs, shm/ipc, HF
//! cache, token, server port on 127.0.0.1) → server ready on `/health` + `/v1/models`
//! (serving) → the benchmark by exec, as made runnable for this image (`invoke`: probe the
//! interpreter, learn the client's flags, recorded rewrites) → teardown. Stages mirror the sim.
//! `attempt.rs` walks those steps, `prepare.rs` the image and prep container, `fixes.rs`
//! and `patch.rs` what goes into it; this file holds the runtime's state and its
//! [`Runtime`] face.

mod attempt;
pub mod auth;
pub mod build;
pub mod container;
mod derive;
pub mod doctor;
pub mod exec;
mod fixes;
pub mod health;
pub mod image;
pub mod invoke;
pub mod memo;
mod patch;
mod patch_host;
mod prepare;
pub mod recipes;
pub mod results;
pub mod secrets;
pub mod stock;
pub mod upload;
mod weights;

use super::{RunEnd, RunJob, RunReport, RunSink, Runtime, RuntimeMsg};

/// The label nightshift puts on images it commits: the plan image they stand for (here,
/// beneath `stock`, which evicts by it, and `build`, which makes such images).
pub const MADE_FOR: &str = "nightshift.made_for";
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

pub(crate) use crate::plan::expand_path;

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
            gpu_requests: d.gpu_requests,
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
    /// Where result files copied out of containers wait for the parser: a folder of this
    /// runtime's own (random name, this user only), removed with it. A shared, guessable
    /// `$TMPDIR/nightshift-results` let two sweeps read each other's files.
    results_dir: std::sync::OnceLock<Result<tempfile::TempDir, String>>,
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
            results_dir: std::sync::OnceLock::new(),
        })
    }

    /// A runtime on another engine (a `[[hosts]]` entry): readiness is asked inside the
    /// container, through that engine.
    pub(crate) fn on_engine(cfg: DockerConfig, docker: Docker) -> Self {
        DockerRuntime {
            docker,
            cfg,
            ready: tokio::sync::OnceCell::new(),
            recipes: Arc::new(crate::diagnose::RecipeBook::builtin()),
            caches: invoke::Caches::default(),
            auth: auth::DockerAuth::from_env(),
            making: Mutex::default(),
            probe_in_container: true,
            results_dir: std::sync::OnceLock::new(),
        }
    }

    /// This runtime's private folder for result files (made on first use).
    fn results_dir(&self) -> Result<&Path, String> {
        self.results_dir
            .get_or_init(|| {
                tempfile::Builder::new()
                    .prefix("nightshift-results-")
                    .tempdir()
                    .map_err(|e| format!("a private folder for result files: {e}"))
            })
            .as_ref()
            .map(|d| d.path())
            .map_err(Clone::clone)
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

    fn benchmarks_commit<'a>(&self, job: &'a RunJob) -> &'a str {
        match job.variant {
            crate::model::Variant::Human => &job.commit,
            _ => job.parent.as_deref().unwrap_or(&job.commit),
        }
    }
}

/// GPUs NVML sees (0 without a driver: runs that need GPUs then wait, 0-GPU runs proceed).
/// The smallest GPU's total memory, for the weights-fit check (None without NVML).
pub(crate) fn min_gpu_memory() -> Option<u64> {
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

pub(crate) fn visible_gpus() -> u32 {
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

/// What the Docker runtime takes from the command line (`run`'s image options).
#[derive(Debug, Clone)]
pub struct DockerOptions {
    pub min_free_bytes: u64,
    pub build: build::BuildConfig,
    pub build_dockerfile: Option<std::path::PathBuf>,
}

/// How many runs may hold a slot at once: `--gpus N`, else the GPUs NVML sees, else for a
/// plan that asks for no GPUs one (a CPU vLLM takes every core it is given).
pub fn slots(plan: &Plan, gpus: Option<u32>) -> u32 {
    gpus.unwrap_or_else(|| {
        let seen = visible_gpus();
        if seen == 0 && !plan.defaults.gpu_requests {
            1
        } else {
            seen
        }
    })
}

/// For `nightshift run --runtime docker`: check that Docker answers (with a hint when it
/// does not), then build the runtime from the plan. Err is the exit status.
pub(crate) fn for_cli(
    plan: &Plan,
    opts: &DockerOptions,
    gpus: Option<u32>,
    recipes: Arc<crate::diagnose::RecipeBook>,
) -> Result<Arc<dyn Runtime>, i32> {
    let check = crate::rt::block_on(async { connect().await.map(|_| ()) });
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
        // A template is a few lines; a device or a FIFO named here must not stall the night.
        match crate::bounded::read_file(f, 1 << 20).and_then(|b| {
            String::from_utf8(b).map_err(|e| std::io::Error::other(format!("not UTF-8 text: {e}")))
        }) {
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
    if !plan.defaults.gpu_requests {
        tracing::info!(
            "the plan asks for no GPUs (gpu_requests = false): {} slot(s), containers get no device",
            slots(plan, gpus)
        );
    } else if let Err(why) = gpu_census() {
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
        let attempt = attempt::Attempt {
            rt: self,
            job: &job,
            sink: &sink,
            lo: &lo,
            clock: &clock,
        };
        let attempt = std::panic::AssertUnwindSafe(attempt.run());
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
