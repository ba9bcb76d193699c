//! What the store keeps per run: the run as planned ([`RunInfo`]), its folded state, every
//! attempt ([`AttemptDoc`]) and its state history; and the results record derived from them
//! (one per commit × variant × attempt, as in `spec/plan-format.md` "Results record").

use crate::event::{Envelope, Finding};
use crate::model::{RunState, Stage, Variant};
use crate::plan::{Plan, RunSpec};
use crate::state::RunRecord;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

mod history;
pub mod logs;

/// One run as the plan describes it (a snapshot: the plan file may change between nights).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    pub key: String,
    pub commit: String,
    pub parent: Option<String>,
    pub title: String,
    pub variant: Variant,
    pub repeat: u32,
    /// A warm-up repeat: stored, left out of the statistics.
    #[serde(default)]
    pub warmup: bool,
    /// An adaptive repeat (past the plan's `repeats`, run because the comparison was
    /// unknown). Absent from older stores: false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub extra: bool,
    /// A drift reference run (`[defaults] reference`): kept out of the comparisons, read
    /// for the box's drift. Older stores: false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reference: bool,
    pub model: Option<String>,
    /// `TYPE:COUNT`, e.g. `H100:1`.
    pub gpu: String,
    pub gpus: u32,
    pub command: Option<String>,
    pub kind: Option<String>,
    pub image: Option<String>,
    pub patch: Option<String>,
    pub skip_reason: Option<String>,
    /// A fix accepted before the night for the run's commit (`run --fixes`): what it
    /// changed and why ("measured with a substitute model, …").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed: Option<String>,
}

impl RunInfo {
    pub(crate) fn from_spec(plan: &Plan, spec: &RunSpec) -> RunInfo {
        let c = plan.commit_of(spec);
        RunInfo {
            key: spec.key.clone(),
            commit: c.commit.clone(),
            parent: c.parent.clone(),
            title: c.title.clone(),
            variant: spec.variant.clone(),
            repeat: spec.repeat,
            warmup: spec.warmup,
            extra: spec.extra,
            reference: spec.reference,
            model: c.model.clone(),
            gpu: c.gpu.to_string(),
            gpus: spec.gpus,
            command: c.perf_command.clone(),
            kind: c
                .kind()
                .and_then(|k| serde_json::to_value(k).ok())
                .and_then(|v| v.as_str().map(str::to_string)),
            image: spec.image.clone(),
            patch: spec.patch.clone(),
            skip_reason: spec.skip_reason.clone(),
            fixed: c.fixed.clone(),
        }
    }

    /// What makes two versions of a run measure different things.
    pub(crate) fn changes_from(&self, old: &RunInfo) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.command != old.command {
            v.push("command");
        }
        if self.model != old.model {
            v.push("model");
        }
        if self.gpu != old.gpu {
            v.push("gpu");
        }
        if self.image != old.image {
            v.push("image");
        }
        if self.patch != old.patch {
            v.push("patch");
        }
        v
    }

    pub fn gpu_type(&self) -> &str {
        self.gpu.split(':').next().unwrap_or("")
    }
}

/// The plan as last run: its hash and its runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanSnapshot {
    pub name: String,
    pub hash: String,
    pub path: String,
    /// The plan's runs; empty as stored (each run's summary keeps its own, with its order).
    pub runs: Vec<RunInfo>,
    pub saved_ms: u64,
}

impl PlanSnapshot {
    pub fn of(plan: &Plan) -> PlanSnapshot {
        PlanSnapshot {
            name: plan.name.clone(),
            hash: plan.hash.clone(),
            path: plan.path.display().to_string(),
            runs: plan
                .runs
                .iter()
                .map(|s| RunInfo::from_spec(plan, s))
                .collect(),
            saved_ms: crate::event::now_ms(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogFile {
    pub path: String,
    pub bytes: u64,
}

/// One state change of a run, as it happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateChange {
    pub at_ms: u64,
    pub attempt: u32,
    pub from: RunState,
    pub to: RunState,
    pub detail: Option<String>,
}

/// One attempt of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AttemptDoc {
    pub attempt: u32,
    pub started_ms: Option<u64>,
    pub finished_ms: Option<u64>,
    pub stages: Vec<(Stage, u64)>,
    /// How the attempt ended: a finished state, held, or `queued` when interrupted.
    pub end: Option<RunState>,
    pub interrupted: bool,
    pub detail: Option<String>,
    pub gpus: Vec<u32>,
    pub metrics: BTreeMap<String, f64>,
    pub findings: Vec<Finding>,
    pub fixes: Vec<String>,
    pub provenance: BTreeMap<String, String>,
    pub vllm_version: Option<String>,
    /// The run as planned when this attempt started (command as run, image, patch).
    pub info: Option<RunInfo>,
    pub logs: Vec<LogFile>,
    /// Per-request latencies (`--save-detailed`): quantiles with intervals and the bounded
    /// sample. Older stores: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<Box<crate::requests::Requests>>,
}

impl AttemptDoc {
    pub fn status(&self) -> &'static str {
        match &self.end {
            None => "running",
            Some(RunState::Finished { outcome }) => outcome.status(),
            Some(RunState::Held { .. }) => "held",
            Some(RunState::Queued) => "interrupted",
            Some(RunState::Active { .. }) => "running",
        }
    }
    pub fn category(&self) -> Option<crate::category::Category> {
        match &self.end {
            Some(RunState::Finished { outcome }) => outcome.category(),
            Some(RunState::Held { category }) => Some(*category),
            _ => None,
        }
    }
}

/// What the store keeps per run, keyed by [`RunSpec::key`]: small and bounded (the run as
/// planned, its folded current state), rewritten only on a state transition. Histories
/// (attempts, state changes) are not kept here: they are derived from the event log when
/// read (see [`RunDoc`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub key: String,
    pub info: RunInfo,
    /// The engine's folded state: current state, attempt, the current attempt's metrics.
    pub record: RunRecord,
    /// A finding made from the plan before any attempt ran.
    pub predicted: Option<Finding>,
    /// Not in the plan any more (kept: a night's results are never thrown away).
    pub removed: bool,
    /// Event seq of the last attempt's start, to tell which plan it ran as.
    pub last_start: Option<u64>,
    /// Earlier versions of `info`: `(until, info)` holds for attempts started before event
    /// seq `until`. Grows only when the plan changes the run.
    pub earlier: Vec<(u64, RunInfo)>,
    /// Position in the plan last run (the stored plan snapshot keeps no run list).
    #[serde(default)]
    pub order: u32,
}

impl RunSummary {
    pub fn new(info: RunInfo) -> RunSummary {
        RunSummary {
            key: info.key.clone(),
            info,
            record: RunRecord::default(),
            predicted: None,
            removed: false,
            last_start: None,
            earlier: Vec::new(),
            order: 0,
        }
    }

    /// The run as planned when event `seq` happened.
    pub(crate) fn info_at(&self, seq: u64) -> &RunInfo {
        self.earlier
            .iter()
            .find(|(until, _)| seq < *until)
            .map_or(&self.info, |(_, i)| i)
    }

    /// What the run last ran as: the plan of its last started attempt, else the current one.
    pub(crate) fn ran_as(&self) -> &RunInfo {
        self.last_start.map_or(&self.info, |s| self.info_at(s))
    }

    /// Replace the planned run from event seq `from` on, keeping the old one for history.
    pub(crate) fn replan(&mut self, info: RunInfo, from: u64) {
        if info != self.info {
            let old = std::mem::replace(&mut self.info, info);
            self.earlier.push((from, old));
        }
    }
}

/// Everything the store knows about one run, as read: the summary plus every attempt and
/// state change, derived from the event log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunDoc {
    pub key: String,
    pub info: RunInfo,
    pub record: RunRecord,
    pub attempts: Vec<AttemptDoc>,
    pub history: Vec<StateChange>,
    /// A finding made from the plan before any attempt ran.
    pub predicted: Option<Finding>,
    /// Not in the plan any more (kept: a night's results are never thrown away).
    #[serde(default)]
    pub removed: bool,
}

impl RunDoc {
    pub fn new(info: RunInfo) -> RunDoc {
        RunDoc {
            key: info.key.clone(),
            info,
            record: RunRecord::default(),
            attempts: Vec::new(),
            history: Vec::new(),
            predicted: None,
            removed: false,
        }
    }

    pub(crate) fn attempt_mut(&mut self, n: u32) -> &mut AttemptDoc {
        if let Some(i) = self.attempts.iter().position(|a| a.attempt == n) {
            return &mut self.attempts[i];
        }
        self.attempts.push(AttemptDoc {
            attempt: n,
            ..Default::default()
        });
        self.attempts.sort_by_key(|a| a.attempt);
        let i = self
            .attempts
            .iter()
            .position(|a| a.attempt == n)
            .expect("just pushed");
        &mut self.attempts[i]
    }

    /// A doc whose one attempt is the run's folded record: what the current state knows,
    /// without earlier attempts or history. Enough for the report, which reads one attempt
    /// per run — so `results` and the TUI need no scan of the event log.
    pub(crate) fn of_record(info: RunInfo, rec: &RunRecord) -> RunDoc {
        let mut d = RunDoc::new(info.clone());
        d.record = rec.clone();
        d.push_attempt_of(rec.clone(), Some(info));
        d
    }

    /// [`RunDoc::of_record`] for a record the caller gives up (`results` on 10,000 runs):
    /// its parts move into the one attempt, which runs as the doc's `info`; the doc's own
    /// record keeps only what readers of such a doc use (state, attempt, times).
    pub(crate) fn of_owned_record(info: RunInfo, rec: RunRecord) -> RunDoc {
        let mut d = RunDoc::new(info);
        d.record = RunRecord {
            state: rec.state.clone(),
            attempt: rec.attempt,
            started_ms: rec.started_ms,
            finished_ms: rec.finished_ms,
            interrupted: rec.interrupted,
            ..Default::default()
        };
        d.push_attempt_of(rec, None);
        d
    }

    fn push_attempt_of(&mut self, rec: RunRecord, info: Option<RunInfo>) {
        if rec.attempt > 0 {
            let end = match &rec.state {
                RunState::Active { .. } => None,
                s => Some(s.clone()),
            };
            self.attempts.push(AttemptDoc {
                attempt: rec.attempt,
                started_ms: rec.started_ms,
                finished_ms: rec.finished_ms,
                stages: rec.stages,
                end,
                gpus: rec.gpus,
                metrics: rec.metrics,
                findings: rec.finding.into_iter().collect(),
                fixes: rec.fixes,
                provenance: rec.provenance,
                vllm_version: rec.vllm_version,
                info,
                ..Default::default()
            });
        }
    }

    /// The attempt that stands for this run in a comparison: the last successful one, else
    /// the last one.
    pub(crate) fn representative(&self) -> Option<&AttemptDoc> {
        self.attempts
            .iter()
            .rev()
            .find(|a| a.status() == "success")
            .or_else(|| self.attempts.last())
    }
}

/// The results record: one per commit × variant × attempt (JSON output of `results`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultRecord {
    pub key: String,
    pub commit: String,
    pub variant: String,
    pub agent: Option<String>,
    pub attempt: u32,
    pub status: String,
    pub category: Option<String>,
    pub error: Option<String>,
    pub started_at: Option<u64>,
    pub finished_at: Option<u64>,
    pub duration_s: Option<f64>,
    pub metrics: BTreeMap<String, f64>,
    pub provenance: Provenance,
    /// Median and P99 of the per-request latencies with their intervals, where the client
    /// saved them (the bounded sample stays in the store).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub request_quantiles: Vec<crate::requests::Quantile>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    pub image: Option<String>,
    pub image_digest: Option<String>,
    pub vllm_version: Option<String>,
    pub gpu_names: Option<String>,
    pub driver: Option<String>,
    pub gpu_indices: Vec<u32>,
    pub perf_command: Option<String>,
    pub model: Option<String>,
    pub gpu: String,
    pub patch_hash: Option<String>,
    pub fixes: Vec<String>,
    pub host: Option<String>,
    /// The interpreter the probe found (it imports vllm in the image).
    #[serde(default)]
    pub interpreter: Option<String>,
    /// Where `benchmarks/` came from (the clone at a commit, or the image's copy).
    #[serde(default)]
    pub bench_source: Option<String>,
    /// Whether the client's flags were learned from its `--help` or an era table.
    #[serde(default)]
    pub client_flags: Option<String>,
    /// The benchmark and server command lines as executed (secrets redacted).
    #[serde(default)]
    pub bench_argv: Option<Vec<String>>,
    #[serde(default)]
    pub server_argv: Option<Vec<String>>,
    #[serde(default)]
    pub dataset_mounts: Vec<String>,
    /// Every change made to the perf command, with its reason.
    #[serde(default)]
    pub rewrites: Vec<crate::rewrite::Rewrite>,
    pub other: BTreeMap<String, String>,
}

impl ResultRecord {
    pub fn of(doc: &RunDoc, a: &AttemptDoc) -> ResultRecord {
        let info = a.info.as_ref().unwrap_or(&doc.info);
        let mut other = a.provenance.clone();
        let mut take = |k: &[&str]| k.iter().find_map(|k| other.remove(*k));
        let image_digest = take(&["image_digest", "digest"]);
        let gpu_names = take(&["gpu_names", "gpu_name", "gpus"]);
        let driver = take(&["driver", "driver_version"]);
        let patch_hash = take(&["patch_hash", "patch_sha256"]);
        let host = take(&["host", "hostname"]);
        let image = take(&["image"]).or(info.image.clone());
        let interpreter = take(&["interpreter"]);
        let bench_source = take(&["bench_source"]);
        let client_flags = take(&["client_flags"]);
        let bench_argv = take(&["bench_argv"]).and_then(|j| serde_json::from_str(&j).ok());
        let server_argv = take(&["server_argv"]).and_then(|j| serde_json::from_str(&j).ok());
        let dataset_mounts = take(&["dataset_mounts"])
            .and_then(|j| serde_json::from_str(&j).ok())
            .unwrap_or_default();
        let rewrites = take(&["rewrites"])
            .and_then(|j| serde_json::from_str(&j).ok())
            .unwrap_or_default();
        let error = a
            .findings
            .last()
            .map(|f| f.evidence.clone())
            .filter(|_| a.status() != "success")
            .or_else(|| match &a.end {
                Some(RunState::Finished {
                    outcome: crate::model::Outcome::Skipped { reason, .. },
                }) => Some(reason.clone()),
                _ => None,
            });
        ResultRecord {
            key: doc.key.clone(),
            commit: info.commit.clone(),
            variant: info.variant.to_string(),
            agent: info.variant.agent_id().map(str::to_string),
            attempt: a.attempt,
            status: a.status().to_string(),
            category: a.category().map(|c| c.as_str().to_string()),
            error,
            started_at: a.started_ms,
            finished_at: a.finished_ms,
            duration_s: match (a.started_ms, a.finished_ms) {
                (Some(s), Some(f)) => Some(f.saturating_sub(s) as f64 / 1000.0),
                _ => None,
            },
            metrics: a.metrics.clone(),
            request_quantiles: a
                .requests
                .as_ref()
                .map(|r| r.quantiles.clone())
                .unwrap_or_default(),
            provenance: Provenance {
                image,
                image_digest,
                vllm_version: a.vllm_version.clone(),
                gpu_names,
                driver,
                gpu_indices: a.gpus.clone(),
                perf_command: info.command.clone(),
                model: info.model.clone(),
                gpu: info.gpu.clone(),
                patch_hash,
                fixes: a.fixes.clone(),
                host,
                interpreter,
                bench_source,
                client_flags,
                bench_argv,
                server_argv,
                dataset_mounts,
                rewrites,
                other,
            },
        }
    }
}

/// One stored event: which life of the process wrote it, and the run's key (run ids are
/// only stable within one plan).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredEvent {
    pub life: u32,
    pub key: Option<String>,
    pub env: Envelope,
    /// The log files of an attempt, on the event that ended it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub logs: Vec<LogFile>,
}
