//! Everything that happens is an [`Event`]; operator intent flows back as a [`Command`].
//! The engine folds events into state, the store persists them, views render them.

use crate::category::{Action, Category};
use crate::model::{Pipe, RunId, RunState, Stream};
use serde::{Deserialize, Serialize};
use std::time::{SystemTime, UNIX_EPOCH};

/// A failure explained: what went wrong, the line that proves it, and what happens next.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub category: Category,
    pub evidence: String,
    pub action: Action,
    pub recipe: Option<String>,
    /// One readable sentence for the operator ("aimv2_conflict — applying fix …").
    pub reason: String,
    /// Predicted from the plan (e.g. the vLLM version), not observed in a log.
    #[serde(default)]
    pub predicted: bool,
    /// The diagnosis's confidence, 0..=1 (absent in records written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f32>,
    /// For `other`: the final line of the last traceback and the first ERROR line.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub telling: Vec<String>,
    /// For a failure no signature names: the id of its failure kind
    /// (the failure_kind module), worked out once when it was diagnosed so that reads group
    /// without normalising every line again (absent in records written before it existed:
    /// then it is worked out when read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// One GPU's sample (NVML adapter, or the sim).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSample {
    pub index: u32,
    pub name: String,
    pub util_pct: u32,
    pub mem_used_mib: u64,
    pub mem_total_mib: u64,
    pub temp_c: u32,
    pub power_w: u32,
    pub run: Option<RunId>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    SweepStarted {
        name: String,
        runs: usize,
        gpus: u32,
        runtime: String,
    },
    /// A run changed state (checked by [`crate::model::transition`]).
    State {
        run: RunId,
        attempt: u32,
        from: RunState,
        to: RunState,
        detail: Option<String>,
        gpus: Vec<u32>,
        /// The attempt was cut short by a shutdown or a crash, not ended by its run: it is
        /// re-queued and counted as an interruption. Read by type; a store written before
        /// it existed says so in `detail`'s words (`state::INTERRUPTED`).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        interrupted: bool,
    },
    Log {
        run: RunId,
        attempt: u32,
        stream: Stream,
        pipe: Pipe,
        line: String,
    },
    Pull {
        run: RunId,
        layer: String,
        done: u64,
        total: u64,
    },
    Metric {
        run: RunId,
        attempt: u32,
        key: String,
        value: f64,
    },
    VllmVersion {
        run: RunId,
        version: String,
    },
    /// The drift reference moved beyond the noise band since the night's first: the box,
    /// not the code, changed between two references.
    Drift {
        shift: Box<crate::stats::drift::Shift>,
    },
    /// The attempt's per-request latencies (`--save-detailed`), summarised and kept
    /// bounded: quantiles with bootstrap intervals, and the compressed sample.
    Requests {
        run: RunId,
        attempt: u32,
        requests: Box<crate::requests::Requests>,
    },
    Diagnosed {
        run: RunId,
        attempt: u32,
        finding: Finding,
    },
    FixApplied {
        run: RunId,
        attempt: u32,
        recipe: String,
    },
    /// Provenance the runtime learned (image digest, GPU names, host).
    Provenance {
        run: RunId,
        attempt: u32,
        key: String,
        value: String,
    },
    /// The commit's benchmark invocation, decided by this attempt for every variant.
    Decided {
        run: RunId,
        attempt: u32,
        commit: String,
        invocation: Box<crate::rewrite::Invocation>,
    },
    Paused {
        reason: String,
        /// Who paused it (who may lift it). Absent in stores and clients older than the
        /// type: [`crate::model::PauseBy::of_text`] reads the reason then.
        #[serde(default, skip_serializing_if = "crate::model::PauseBy::is_unknown")]
        by: crate::model::PauseBy,
    },
    /// The breaker stopped one model's runs (they fail alike); the rest go on.
    /// `Resumed` lifts it.
    ModelPaused {
        model: String,
        reason: String,
    },
    Resumed,
    /// An operator's command as the engine took it: who sent it (a client's id, `cli:USER`;
    /// none from an older client) and what came of it (`done`, or why it was refused).
    Operator {
        command: Command,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        outcome: Option<String>,
    },
    Gpu {
        sample: GpuSample,
    },
    SweepFinished {
        interrupted: bool,
    },
    /// An image brought onto the box ahead of its runs, made ready, or removed for room.
    Image {
        image: String,
        status: ImageStatus,
        detail: String,
    },
}

/// Where an image stands in prefetch and eviction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ImageStatus {
    Fetching,
    /// A line of the fetch's log (pull status, derivation).
    Log,
    Ready,
    Failed,
    Evicted,
    /// The next image does not fit yet; runs in flight will make room.
    Waiting,
    /// Nothing can make room: the sweep pauses for the operator.
    Full,
}

impl ImageStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ImageStatus::Fetching => "fetching",
            ImageStatus::Log => "log",
            ImageStatus::Ready => "ready",
            ImageStatus::Failed => "failed",
            ImageStatus::Evicted => "evicted",
            ImageStatus::Waiting => "waiting",
            ImageStatus::Full => "full",
        }
    }
}

/// An event with its sequence number and wall-clock time (ms since the epoch).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    pub seq: u64,
    pub at_ms: u64,
    pub event: Event,
}

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// What the operator asks for (TUI keys, CLI flags).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Command {
    /// Apply the suggested (or named) fix recipe and retry.
    ApplyFix {
        run: RunId,
        recipe: Option<String>,
    },
    Retry {
        run: RunId,
    },
    Skip {
        run: RunId,
    },
    /// Skip every queued or held run whose (predicted or observed) category is this one.
    SkipCategory {
        category: Category,
    },
    /// A rule for the rest of the night: every held run of this category is retried with
    /// `recipe`, and so is each later one (a run that already had it and failed again is
    /// held as it would be).
    FixCategory {
        category: Category,
        recipe: String,
    },
    /// The operator's one decision for a failure group (unknown failures of one kind,
    /// named by its id or a prefix of 4+ digits, see the failure_kind module): skip
    /// every held, failed or queued run of it.
    SkipGroup {
        kind: String,
    },
    /// Retry every held or failed run of the group (now, for those waiting to retry).
    RetryGroup {
        kind: String,
    },
    /// Apply `recipe` to every held, failed or queued run of the group and retry it.
    FixGroup {
        kind: String,
        recipe: String,
    },
    Pause,
    Resume,
    /// The daemon's disk watch: `Some(why)` pauses the sweep (a directory it writes to is
    /// below its floor), `None` lifts such a pause once space is back. Never an operator's
    /// pause: that one only the operator lifts.
    DiskSpace {
        low: Option<String>,
    },
    Cancel {
        run: RunId,
    },
    /// Undo an operator's skip: the run is queued again, as long as it is still the skipped
    /// run (nothing has replaced or re-run it since).
    Unskip {
        run: RunId,
    },
    /// Stop the sweep: cancel runs in flight; it can be resumed later.
    Shutdown,
    /// `command` from a named client, acting on the run as that client saw it: when the
    /// run's state is no longer `saw` (another client or the policy moved it meanwhile),
    /// the engine refuses and says so, and the client asks its operator again.
    Signed {
        by: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        saw: Option<RunState>,
        command: Box<Command>,
    },
}

impl Command {
    pub fn describe(&self) -> String {
        match self {
            Command::ApplyFix { run, recipe } => match recipe {
                Some(r) => format!("apply fix {r} to {run}"),
                None => format!("apply suggested fix to {run}"),
            },
            Command::Retry { run } => format!("retry {run}"),
            Command::Skip { run } => format!("skip {run}"),
            Command::SkipCategory { category } => format!("skip all {category}"),
            Command::FixCategory { category, recipe } => {
                format!("apply fix {recipe} to all {category}")
            }
            Command::SkipGroup { kind } => format!("skip failure group {kind}"),
            Command::RetryGroup { kind } => format!("retry failure group {kind}"),
            Command::FixGroup { kind, recipe } => {
                format!("apply fix {recipe} to failure group {kind}")
            }
            Command::Pause => "pause".into(),
            Command::Resume => "resume".into(),
            Command::DiskSpace { low: Some(why) } => format!("pause: {why}"),
            Command::DiskSpace { low: None } => "resume: disk space is back".into(),
            Command::Cancel { run } => format!("cancel {run}"),
            Command::Unskip { run } => format!("undo the skip of {run}"),
            Command::Shutdown => "shutdown".into(),
            Command::Signed { command, .. } => command.describe(),
        }
    }
}

/// Who sends commands from this process: `USER@FACE:PID` (`ops@tui:4321`), for the
/// activity log and to name the client whose action another's command collided with.
/// Whether the signer the daemon recorded (`name (uid N)`: the kernel's uid beside the
/// name the client sent) is `me`, the name this client sends.
pub(crate) fn signed_by(recorded: &str, me: &str) -> bool {
    recorded.split(" (uid ").next() == Some(me)
}

pub fn signer(face: &str) -> String {
    let user: String = std::env::var("USER")
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        .take(32)
        .collect();
    let user = if user.is_empty() {
        format!("uid{}", rustix::process::getuid().as_raw())
    } else {
        user
    };
    format!("{user}@{face}:{}", std::process::id())
}

impl Command {
    /// The run a command acts on, when it acts on one.
    pub fn run(&self) -> Option<RunId> {
        match self {
            Command::ApplyFix { run, .. }
            | Command::Retry { run }
            | Command::Skip { run }
            | Command::Cancel { run }
            | Command::Unskip { run } => Some(*run),
            Command::Signed { command, .. } => command.run(),
            _ => None,
        }
    }
}
