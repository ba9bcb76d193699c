//! The simulated runtime: plays runs with vLLM's real log and result formats for the era
//! the commit's version implies, reproduces the seed reports' failures per commit, and is
//! deterministic for a seed. It stands in for Docker + a GPU + vLLM; its run-to-run noise
//! (and the odd failed request) is a model ([`crate::stats::noise`]); it does not cover real
//! container lifecycles or real parsing edge cases in the wild.

mod text;

use super::{RunEnd, RunJob, RunReport, RunSink, Runtime};
use crate::category::Category;
use crate::model::{Pipe, Stage, Stream};
use crate::stats::noise;
use async_trait::async_trait;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;
use text::Era;
use tokio_util::sync::CancellationToken;

/// How fast simulated time runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Speed {
    /// Real seconds are divided by this factor.
    Factor(f64),
    /// No sleeping at all (scale tests, benchmarks).
    Max,
}

impl std::str::FromStr for Speed {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "max" {
            return Ok(Speed::Max);
        }
        match s.trim_end_matches('x').parse::<f64>() {
            // Slower than 1000× real time is never useful and overflows timers.
            Ok(f) if f.is_finite() && f >= 0.001 => Ok(Speed::Factor(f)),
            _ => Err(format!("speed `{s}` is not a positive number or `max`")),
        }
    }
}

pub struct SimRuntime {
    speed: Speed,
    /// This simulated box's run-to-run noise.
    noise: noise::BoxNoise,
    /// Images "pulled" so far: the first run of an image shows a pull with progress.
    pulled: Mutex<HashSet<String>>,
    /// Where serving runs leave their per-request file (as `--save-detailed` would),
    /// made on first use; None when no temporary directory can be made.
    results: std::sync::OnceLock<Option<tempfile::TempDir>>,
}

impl Speed {
    /// How engine delays (retry backoff) scale on this clock.
    pub(crate) fn time_scale(self) -> f64 {
        match self {
            Speed::Max => 0.0,
            Speed::Factor(f) => 1.0 / f,
        }
    }
}

impl SimRuntime {
    pub fn new(speed: Speed) -> Self {
        SimRuntime {
            speed,
            noise: noise::BoxNoise::of(0),
            pulled: Mutex::new(HashSet::new()),
            results: std::sync::OnceLock::new(),
        }
    }

    /// Another simulated box: its own noise levels and drift (`--seed`).
    pub(crate) fn on_box(mut self, box_seed: u64) -> Self {
        self.noise = noise::BoxNoise::of(box_seed);
        self
    }

    /// The run's per-request arrays as a result file (only the arrays: the summary numbers
    /// are the printed block's), for the engine's per-request path. None when it cannot
    /// be written (the run still succeeds: the summary is the result).
    fn per_request_file(
        &self,
        job: &RunJob,
        effect: f64,
        draw: &noise::Draw,
    ) -> Option<std::path::PathBuf> {
        let dir = self
            .results
            .get_or_init(|| {
                tempfile::Builder::new()
                    .prefix("nightshift-sim-")
                    .tempdir()
                    .ok()
            })
            .as_ref()?;
        let path = dir.path().join(format!(
            "{}-a{}.json",
            job.key.replace('/', "_"),
            job.attempt
        ));
        let body = noise::per_request_json(effect, draw, job.seed ^ u64::from(job.run.0));
        std::fs::write(&path, body).ok()?;
        Some(path)
    }

    /// Sleep `secs` of simulated time; false when cancelled.
    async fn wait(&self, secs: f64, cancel: &CancellationToken) -> bool {
        match self.speed {
            Speed::Max => {
                tokio::task::yield_now().await;
                !cancel.is_cancelled()
            }
            Speed::Factor(f) => {
                let d = Duration::try_from_secs_f64((secs / f).max(0.0))
                    .unwrap_or(Duration::from_secs(86_400));
                tokio::select! {
                    _ = tokio::time::sleep(d) => true,
                    _ = cancel.cancelled() => false,
                }
            }
        }
    }
}

/// What this attempt will do, decided up front from the plan's sim spec and the seed.
fn planned_failure(job: &RunJob) -> Option<Category> {
    let sim = job.sim.as_ref()?;
    let cat: Category = sim.fail.as_deref()?.parse().ok()?;
    let variant = job.variant.to_string();
    let applies = sim.variants.is_empty()
        || sim
            .variants
            .iter()
            .any(|v| *v == variant || (v == "agent" && job.variant.agent_id().is_some()));
    if !applies {
        return None;
    }
    // Fixable failures go away once their recipe (or workaround env) has been applied,
    // transient ones on a retry: what the seeds' operators did by hand.
    let fixed = match cat {
        Category::Aimv2Conflict
        | Category::NumpyAbi
        | Category::FaUtilsMissing
        | Category::LogitsWarperImport
        | Category::PyairportsMissing => !job.fixes.is_empty(),
        Category::VersionPortBug => job.env.contains_key("VLLM_WORKER_MULTIPROC_METHOD"),
        _ => false,
    };
    if fixed || (sim.transient && job.attempt > 1) {
        return None;
    }
    Some(cat)
}

#[async_trait]
impl Runtime for SimRuntime {
    fn name(&self) -> &'static str {
        "sim"
    }

    /// The sim's attempt: a model load of 60–180 s and a benchmark of 40–200 s, plus the
    /// image and container steps.
    fn typical_run(&self) -> Duration {
        Duration::from_secs(250)
    }

    async fn cleanup_leftovers(&self, _sweep: &str) -> anyhow::Result<Vec<String>> {
        Ok(Vec::new())
    }

    async fn execute(&self, job: RunJob, sink: RunSink, cancel: CancellationToken) -> RunReport {
        let mut rng = ChaCha8Rng::seed_from_u64(job.seed);
        let fail = planned_failure(&job);
        let era = Era::from_version(job.vllm_version.as_deref(), &job.commit);
        let version = era.version_string(job.vllm_version.as_deref());
        let model = job
            .model
            .clone()
            .unwrap_or_else(|| "facebook/opt-125m".into());
        macro_rules! step {
            ($secs:expr) => {
                if !self.wait($secs, &cancel).await {
                    return RunReport::new(RunEnd::Cancelled);
                }
            };
        }
        macro_rules! log {
            ($stream:expr, $pipe:expr, $line:expr) => {
                sink.log($stream, $pipe, $line).await
            };
        }

        // Image.
        let first_pull = self
            .pulled
            .lock()
            .map(|mut p| p.insert(job.image.clone()))
            .unwrap_or(false);
        match fail {
            Some(Category::ImageNotFound) => {
                step!(2.0);
                let msg = format!("Error response from daemon: manifest for {} not found: manifest unknown: manifest unknown", job.image);
                log!(Stream::Pull, Pipe::Stderr, msg.clone());
                return RunReport::new(RunEnd::ImageMissing { message: msg });
            }
            Some(Category::DiskFull) => {
                step!(30.0);
                let msg = format!("failed to register layer: write /var/lib/docker/overlay2/{:x}/diff/usr/lib/libcudnn.so: no space left on device", rng.random::<u64>());
                log!(Stream::Pull, Pipe::Stderr, msg.clone());
                return RunReport::new(RunEnd::DiskFull { message: msg });
            }
            _ => {}
        }
        if first_pull {
            let layers = [
                ("a1b2c3d4e5f6", 7_500_000_000u64),
                ("0f9e8d7c6b5a", 11_200_000_000),
                ("5566778899aa", 850_000_000),
            ];
            log!(
                Stream::Pull,
                Pipe::Stdout,
                format!("Pulling from {}", job.image)
            );
            for step_i in 1..=5u64 {
                step!(24.0);
                for (layer, total) in layers {
                    sink.pull(layer, total * step_i / 5, total).await;
                }
            }
            log!(
                Stream::Pull,
                Pipe::Stdout,
                format!("Digest: sha256:{:064x}", rng.random::<u128>())
            );
            log!(
                Stream::Pull,
                Pipe::Stdout,
                format!("Status: Downloaded newer image for {}", job.image)
            );
        } else {
            step!(0.5);
        }

        sink.stage(Stage::StartingContainer).await;
        // What a real box records for comparability checks: the driver and the GPUs.
        for (key, value) in [
            ("driver", "550.54.15 (simulated)".to_string()),
            (
                "gpu_names",
                format!("{}× NVIDIA H100 80GB HBM3 (simulated)", job.gpus.len()),
            ),
        ] {
            sink.send(super::RuntimeMsg::Provenance {
                key: key.into(),
                value,
            })
            .await;
        }
        log!(
            Stream::Docker,
            Pipe::Stdout,
            format!(
                "container ns-{} created on GPUs {:?}",
                job.key.replace('/', "-"),
                job.gpus
            )
        );
        for fix in &job.fixes {
            log!(
                Stream::Docker,
                Pipe::Stdout,
                format!("applying fix recipe {fix}")
            );
            step!(20.0);
            sink.send(super::RuntimeMsg::FixApplied {
                recipe: fix.clone(),
            })
            .await;
        }
        if let Some(id) = job.variant.agent_id() {
            if fail == Some(Category::AgentPatchFailed) {
                let msg = "1 out of 2 hunks FAILED -- saving rejects to file vllm/worker/model_runner.py.rej".to_string();
                log!(
                    Stream::Docker,
                    Pipe::Stdout,
                    format!("checking patch of agent {id}: patch -p1 --dry-run")
                );
                log!(Stream::Docker, Pipe::Stderr, msg.clone());
                return RunReport::new(RunEnd::PatchFailed { message: msg });
            }
            log!(
                Stream::Docker,
                Pipe::Stdout,
                format!("patch of agent {id} applies cleanly; applied with patch -p1")
            );
        }
        step!(2.0);

        let serving = job.kind.needs_server();
        // Server (serving) or in-process engine (offline): the same startup lines.
        let (server_stream, startup_pipe) = if serving {
            (Stream::Server, Pipe::Stdout)
        } else {
            (Stream::Bench, Pipe::Stdout)
        };
        if serving {
            sink.stage(Stage::LoadingServer).await;
        } else {
            sink.stage(Stage::Benchmarking).await;
        }
        let start_lines = text::startup(era, &version, &model, &mut rng);
        let import_failure = matches!(
            fail,
            Some(
                Category::Aimv2Conflict
                    | Category::NumpyAbi
                    | Category::FaUtilsMissing
                    | Category::LogitsWarperImport
                    | Category::PyairportsMissing
            )
        );
        if import_failure {
            step!(8.0);
            for l in text::import_failure(fail.expect("checked"), &mut rng) {
                log!(server_stream, Pipe::Stderr, l);
            }
            return RunReport::new(if serving {
                RunEnd::ServerDied { exit_code: Some(1) }
            } else {
                RunEnd::BenchExited { exit_code: 1 }
            });
        }
        let load_secs = rng.random_range(60.0..180.0);
        let per_line = load_secs / start_lines.len().max(1) as f64;
        for (i, l) in start_lines.iter().enumerate() {
            step!(per_line);
            log!(server_stream, startup_pipe, l.clone());
            if i == start_lines.len() / 2 {
                match fail {
                    Some(Category::CudaOom) => {
                        for l in text::oom(&mut rng) {
                            log!(server_stream, Pipe::Stderr, l);
                        }
                        return RunReport::new(if serving {
                            RunEnd::ServerDied { exit_code: Some(1) }
                        } else {
                            RunEnd::BenchExited { exit_code: 1 }
                        });
                    }
                    Some(Category::GatedModelAuth) => {
                        for l in text::gated(&model) {
                            log!(server_stream, Pipe::Stderr, l);
                        }
                        return RunReport::new(if serving {
                            RunEnd::ServerDied { exit_code: Some(1) }
                        } else {
                            RunEnd::BenchExited { exit_code: 1 }
                        });
                    }
                    Some(Category::ServerStartTimeout) if serving => {
                        step!(job.server_start_timeout.as_secs_f64());
                        return RunReport::new(RunEnd::Timeout {
                            stage: Stage::LoadingServer,
                        });
                    }
                    Some(Category::CudaGraphCaptureTimeout) => {
                        log!(server_stream, Pipe::Stderr, "Capturing CUDA graph shapes:  43%|████▎     | 15/35 [00:09<00:12,  1.62it/s]".to_string());
                        step!(job.server_start_timeout.as_secs_f64());
                        return RunReport::new(RunEnd::Timeout {
                            stage: if serving {
                                Stage::LoadingServer
                            } else {
                                Stage::Benchmarking
                            },
                        });
                    }
                    Some(Category::Other) => {
                        for l in text::other_crash(&mut rng) {
                            log!(server_stream, Pipe::Stderr, l);
                        }
                        return RunReport::new(if serving {
                            RunEnd::ServerDied { exit_code: Some(1) }
                        } else {
                            RunEnd::BenchExited { exit_code: 1 }
                        });
                    }
                    _ => {}
                }
            }
        }
        if serving {
            for l in text::ready(era) {
                log!(Stream::Server, Pipe::Stderr, l);
            }
            if fail == Some(Category::VersionPortBug) {
                log!(Stream::Server, Pipe::Stderr, "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use".to_string());
                log!(
                    Stream::Server,
                    Pipe::Stderr,
                    "INFO:     Waiting for application shutdown.".to_string()
                );
                log!(
                    Stream::Server,
                    Pipe::Stderr,
                    "INFO:     Application shutdown complete.".to_string()
                );
                return RunReport::new(RunEnd::ServerDied { exit_code: Some(1) });
            }
            sink.stage(Stage::Benchmarking).await;
            log!(Stream::Bench, Pipe::Stdout, format!("Namespace(backend='vllm', base_url=None, host='127.0.0.1', port=8000, model='{model}', num_prompts=100, request_rate=inf)"));
            log!(
                Stream::Bench,
                Pipe::Stdout,
                "Starting initial single prompt test run...".to_string()
            );
            log!(
                Stream::Bench,
                Pipe::Stdout,
                "Initial test run completed. Starting main benchmark run...".to_string()
            );
            log!(
                Stream::Bench,
                Pipe::Stdout,
                "Traffic request rate: inf".to_string()
            );
        }
        let bench_secs = rng.random_range(40.0..200.0);
        let log_kb = job.sim.as_ref().map_or(0, |s| s.log_kb);
        let mut request = 0u64;
        for pct in [10, 30, 50, 70, 90, 100] {
            step!(bench_secs / 6.0);
            // Request logging: about log_kb KB over the benchmark, in vLLM's shape.
            let mut bytes = 0u64;
            while bytes < log_kb * 1024 / 6 {
                request += 1;
                let l = text::request_log(request, &model);
                bytes += l.len() as u64 + 1;
                log!(Stream::Server, Pipe::Stdout, l);
            }
            log!(
                Stream::Bench,
                Pipe::Stderr,
                format!(
                    "{pct:>3}%|{:<10}| {}/100 [00:{:02}<00:{:02}]",
                    "█".repeat(pct / 10),
                    pct,
                    pct / 3,
                    (100 - pct) / 3
                )
            );
            if pct == 50 && serving {
                log!(
                    Stream::Server,
                    Pipe::Stdout,
                    text::server_stats(era, &mut rng)
                );
            }
        }
        match fail {
            Some(Category::BrokenPipe) => {
                for l in text::broken_pipe() {
                    log!(Stream::Bench, Pipe::Stderr, l);
                }
                return RunReport::new(RunEnd::BenchExited { exit_code: 1 });
            }
            Some(Category::BenchTimeout) => {
                step!(job.run_timeout.as_secs_f64());
                return RunReport::new(RunEnd::Timeout {
                    stage: Stage::Benchmarking,
                });
            }
            Some(Category::NoMetrics) => {
                log!(
                    Stream::Bench,
                    Pipe::Stdout,
                    "Benchmark finished.".to_string()
                );
                return RunReport::new(RunEnd::BenchExited { exit_code: 0 });
            }
            _ => {}
        }
        // The variant's true effect, the same on every repeat, under this box's noise at
        // this run's place in the night.
        let effect = noise::true_effect(&job.commit, &job.variant);
        let draw = noise::draw(&self.noise, job.seed, u64::from(job.run.0));
        for l in text::result_block(job.kind, era, effect, &draw) {
            log!(Stream::Bench, Pipe::Stdout, l);
        }
        let mut report = RunReport::new(RunEnd::BenchExited { exit_code: 0 });
        if serving {
            report
                .result_files
                .extend(self.per_request_file(&job, effect, &draw));
        }
        report
    }
}
