//! The seam between the engine and whatever executes runs: Docker (bollard) on a GPU box,
//! or the simulator. A runtime executes one attempt's stages and reports what it sees;
//! the engine owns state, parsing, diagnosis and policy.

pub mod docker;
pub mod hosts;
pub mod sim;
pub mod slurm;

use crate::model::{Pipe, RunId, Stage, Stream, Variant};
use crate::plan::{BenchKind, CommandView, SimSpec};
use async_trait::async_trait;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Everything needed to execute one attempt of one run.
#[derive(Debug, Clone)]
pub struct RunJob {
    pub run: RunId,
    pub attempt: u32,
    pub key: String,
    pub sweep: String,
    pub commit: String,
    pub parent: Option<String>,
    pub variant: Variant,
    pub image: String,
    pub model: Option<String>,
    /// Executed exactly as written.
    pub command: String,
    pub view: CommandView,
    pub kind: BenchKind,
    /// Device ids the scheduler assigned (empty for 0-GPU test runs).
    pub gpus: Vec<u32>,
    pub server_start_timeout: Duration,
    pub run_timeout: Duration,
    /// Extra environment from fix recipes (e.g. a port-bug workaround).
    pub env: BTreeMap<String, String>,
    /// Fix recipes to apply inside the container before the run.
    pub fixes: Vec<String>,
    pub patch: Option<PathBuf>,
    pub patch_dir: Option<String>,
    pub vllm_version: Option<String>,
    /// The commit's human image (a missing baseline can be derived from it).
    pub human_image: Option<String>,
    /// Parent → commit, from the clone at plan load.
    pub changes: Option<Vec<crate::plan::clone::FileChange>>,
    /// What the sim reproduces; ignored by real runtimes.
    pub sim: Option<SimSpec>,
    /// Deterministic seed for this attempt (sim).
    pub seed: u64,
    /// The sweep's benchmark invocations, one per commit (the engine's; shared by every
    /// attempt on every host, seeded from the store on resume).
    pub decisions: std::sync::Arc<crate::rewrite::decisions::Decisions>,
}

/// How an attempt ended, as far as the runtime can tell (the engine diagnoses why).
#[derive(Debug, Clone, PartialEq)]
pub enum RunEnd {
    /// The benchmark command ran to completion with this exit code.
    BenchExited {
        exit_code: i64,
    },
    /// The server process exited before or during the benchmark.
    ServerDied {
        exit_code: Option<i64>,
    },
    /// A stage ran past its time limit.
    Timeout {
        stage: Stage,
    },
    ImageMissing {
        message: String,
    },
    DiskFull {
        message: String,
    },
    PatchFailed {
        message: String,
    },
    /// The benchmark command cannot run on this image as it stands (no interpreter that
    /// imports vllm, no benchmarks folder, a flag no side accepts, a missing dataset).
    /// Known before any server started.
    BenchInvalid {
        message: String,
    },
    /// The run's image has to be built from source (compiled code changed) and no build
    /// was allowed, or the build failed; the message says which, with the deciding line.
    NeedsBuild {
        message: String,
    },
    /// The runtime itself failed (Docker unreachable, …).
    Error {
        stage: Stage,
        message: String,
    },
    Cancelled,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RunReport {
    pub end: RunEnd,
    /// Files the benchmark wrote (`--save-result`), copied out, for the parser.
    pub result_files: Vec<PathBuf>,
}

impl RunReport {
    pub fn new(end: RunEnd) -> Self {
        RunReport {
            end,
            result_files: Vec::new(),
        }
    }
}

/// What a runtime reports while it works.
#[derive(Debug, Clone, PartialEq)]
pub enum RuntimeMsg {
    Stage(Stage),
    Log {
        stream: Stream,
        pipe: Pipe,
        line: String,
    },
    Pull {
        layer: String,
        done: u64,
        total: u64,
    },
    FixApplied {
        recipe: String,
    },
    Provenance {
        key: String,
        value: String,
    },
    /// This attempt decided its commit's invocation (see `rewrite::decisions`): stored, so
    /// a restart runs the same.
    Decided(Box<crate::rewrite::Invocation>),
    Done(RunReport),
}

/// The runtime's handle for reporting one attempt. Sends apply backpressure: a runtime that
/// prints faster than the engine consumes waits instead of growing memory.
#[derive(Clone)]
pub struct RunSink {
    pub run: RunId,
    pub attempt: u32,
    tx: mpsc::Sender<(RunId, u32, RuntimeMsg)>,
}

impl RunSink {
    pub fn new(run: RunId, attempt: u32, tx: mpsc::Sender<(RunId, u32, RuntimeMsg)>) -> Self {
        RunSink { run, attempt, tx }
    }
    pub async fn send(&self, msg: RuntimeMsg) {
        // The engine going away means the sweep is over; nothing to report to.
        let _ = self.tx.send((self.run, self.attempt, msg)).await;
    }
    pub async fn stage(&self, stage: Stage) {
        self.send(RuntimeMsg::Stage(stage)).await
    }
    pub async fn log(&self, stream: Stream, pipe: Pipe, line: impl Into<String>) {
        self.send(RuntimeMsg::Log {
            stream,
            pipe,
            line: line.into(),
        })
        .await
    }
    pub async fn pull(&self, layer: impl Into<String>, done: u64, total: u64) {
        self.send(RuntimeMsg::Pull {
            layer: layer.into(),
            done,
            total,
        })
        .await
    }
}

#[async_trait]
pub trait Runtime: Send + Sync + 'static {
    fn name(&self) -> &'static str;

    /// Remove what an earlier nightshift of this sweep left behind (containers by label).
    /// Returns one line per thing removed, for the operator.
    async fn cleanup_leftovers(&self, sweep: &str) -> anyhow::Result<Vec<String>>;

    /// Execute one attempt. Must return promptly after `cancel` fires, having torn down
    /// whatever it started.
    async fn execute(&self, job: RunJob, sink: RunSink, cancel: CancellationToken) -> RunReport;

    /// Take down whatever `job`'s attempt left running when [`Runtime::execute`] did not
    /// return normally (it panicked). The engine hands the attempt's GPUs on only after
    /// this returns, so a GPU is never given to a run while another's container holds it.
    async fn reclaim(&self, _job: &RunJob) -> anyhow::Result<Vec<String>> {
        Ok(Vec::new())
    }

    /// How long one attempt typically takes, in this runtime's own time: the night's
    /// window plans with it until tonight's runs say better. A served vLLM benchmark is
    /// 12–25 minutes from container to result, an offline one 6–15.
    fn typical_run(&self) -> std::time::Duration {
        std::time::Duration::from_secs(15 * 60)
    }

    /// Whether this runtime brings images onto the box ahead of the runs, so that a run
    /// gets its GPUs only once its image is there ([`Runtime::fetch_image`]).
    fn prefetches(&self) -> bool {
        false
    }

    /// Bring `job`'s image onto the box with no GPU held: pull it, or make it when it is
    /// missing (a derived baseline). Err: the end the run's attempt would meet too.
    async fn fetch_image(
        &self,
        _job: RunJob,
        _sink: RunSink,
        _cancel: CancellationToken,
    ) -> Result<(), RunEnd> {
        Ok(())
    }

    /// Free bytes on the images' disk (None: unknown), and for each of `images` that is on
    /// the box, the bytes it and the images made from it (fixed, derived) take.
    async fn image_stock(&self, _images: &[String]) -> (Option<u64>, BTreeMap<String, u64>) {
        (None, BTreeMap::new())
    }

    /// Remove `image` and the images made from it; returns the bytes freed.
    async fn evict_image(&self, _image: &str) -> Result<u64, String> {
        Ok(0)
    }
}
