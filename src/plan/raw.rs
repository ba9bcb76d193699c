//! The plan file as written: serde structs that refuse unknown fields, so a typo is an
//! error with a position instead of a silently ignored setting.

use serde::Deserialize;
use std::collections::BTreeMap;
use toml::Spanned;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPlan {
    pub schema_version: Spanned<i64>,
    pub name: Option<String>,
    pub repo: Option<String>,
    pub commits_file: Option<Spanned<String>>,
    #[serde(default)]
    pub defaults: RawDefaults,
    #[serde(default)]
    pub images: Option<Spanned<RawImages>>,
    #[serde(default)]
    pub agents: Vec<Spanned<RawAgent>>,
    #[serde(default)]
    pub commits: Vec<Spanned<RawCommit>>,
    /// Where dataset files live on this box: `sharegpt`, `sonnet`, or any name a command
    /// uses as its dataset path (e.g. a Hub dataset id). Mounted read-only for the client.
    #[serde(default)]
    pub datasets: Option<Spanned<BTreeMap<String, String>>>,
    /// This sweep's overrides of the policy, the fix recipes and the diagnosis signatures,
    /// in the config files' own shapes; read and checked by the overrides module.
    #[serde(default, rename = "policy")]
    _policy: Option<serde::de::IgnoredAny>,
    #[serde(default, rename = "recipe")]
    _recipe: Option<serde::de::IgnoredAny>,
    #[serde(default, rename = "signature")]
    _signature: Option<serde::de::IgnoredAny>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDefaults {
    pub gpu_type: Option<String>,
    pub gpu_count: Option<u32>,
    pub hf_cache: Option<String>,
    pub shm_size: Option<String>,
    pub ipc: Option<String>,
    pub server_start_timeout_s: Option<u64>,
    pub run_timeout_s: Option<u64>,
    pub timeout_s_by_gpus: Option<BTreeMap<String, u64>>,
    pub repeats: Option<u32>,
    /// Adaptive repeats: up to this many a variant, each one past `repeats` run only while
    /// the commit's comparison is still unknown, in the night's spare time (default:
    /// `repeats`, none added).
    pub max_repeats: Option<u32>,
    /// Drift: a reference run (`COMMIT/VARIANT`, a commit of the plan) benchmarked at the
    /// start, every `reference_every_min` minutes and at the end of the night, so that a
    /// box drifting over the night is told from a change in the code.
    pub reference: Option<String>,
    pub reference_every_min: Option<u32>,
    /// How many reference runs the night may spend at most (default 6).
    pub reference_runs: Option<u32>,
    /// What the first of several repeats is for (default `none`).
    pub warmup: Option<Warmup>,
    /// Requests sent to the server before each serving benchmark measures (default 0).
    pub warmup_requests: Option<u32>,
    pub variants: Option<Vec<String>>,
    pub on_invalid: Option<OnInvalid>,
    /// How repeats are ordered over the night (default `rounds`).
    pub interleave: Option<Interleave>,
    pub vllm_src: Option<String>,
    /// Fetch model weights into `hf_cache` on the host before each server starts
    /// (default true); false leaves it to vLLM inside the container.
    pub fetch_weights: Option<bool>,
    /// Ask Docker for each run's GPUs (default true); false for CPU images.
    pub gpu_requests: Option<bool>,
}

/// The warm-up policy for runs with repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Warmup {
    /// Every repeat counts.
    #[default]
    None,
    /// The first repeat of each variant warms caches and clocks: it is run and stored, but
    /// left out of the statistics (and marked so).
    DiscardFirst,
}

/// How a plan's repeats are spread over the night.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Interleave {
    /// asv's way: every commit's first round (each variant once), then every commit's
    /// second, so a slow drift of the box over the night lands on every commit alike
    /// rather than on the few whose repeats ran back to back while it moved.
    #[default]
    Rounds,
    /// A commit's repeats back to back: its images are needed for the shortest time
    /// (a box short of disk pulls each image once).
    Commits,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum OnInvalid {
    /// Record invalid commits as skipped with the reason and run the rest.
    #[default]
    Skip,
    /// Refuse to run the plan.
    Fail,
    /// Run them anyway (the operator knows better).
    Run,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawImages {
    pub org: Option<String>,
    pub human: Option<String>,
    pub baseline: Option<String>,
    pub agent: Option<String>,
    pub patch_dir: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAgent {
    pub id: String,
    pub model: Option<String>,
    pub patch: Option<String>,
}

/// One commit, from `[[commits]]` or a line of the JSONL `commits_file`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCommit {
    pub commit: Option<String>,
    pub parent: Option<String>,
    pub title: Option<String>,
    pub pr_url: Option<String>,
    pub model: Option<String>,
    pub gpu_config: Option<String>,
    pub benchmark_mode: Option<String>,
    pub perf_command: Option<String>,
    #[serde(default)]
    pub files_changed: Vec<String>,
    #[serde(default)]
    pub images: BTreeMap<String, String>,
    #[serde(default)]
    pub patches: BTreeMap<String, String>,
    #[serde(default)]
    pub skip: bool,
    pub notes: Option<String>,
    /// nightshift extension: the vLLM version of the commit's images when known, so the
    /// port-binding bug can be predicted before the night starts.
    pub vllm_version: Option<String>,
    /// nightshift extension: variants for this commit only (default: `[defaults].variants`).
    pub variants: Option<Vec<String>>,
    /// nightshift extension: repeats for this commit only (default: `[defaults].repeats`).
    pub repeats: Option<u32>,
    /// nightshift extension: how much the operator wants this commit tonight (higher runs
    /// earlier; default 0). Under a window, what does not fit is the least wanted.
    #[serde(default)]
    pub priority: i32,
    /// nightshift extension, read only by the sim runtime: the outcome to reproduce.
    pub sim: Option<SimSpec>,
}

/// What the simulated runtime should reproduce for a commit (from the seed reports).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct SimSpec {
    /// A failure category name, or absent for success.
    pub fail: Option<String>,
    /// Which variants fail (default: all).
    #[serde(default)]
    pub variants: Vec<String>,
    /// Whether a retry (or the category's fix) makes it succeed.
    #[serde(default)]
    pub transient: bool,
    /// Request-log lines the server prints while benchmarking, in KB (a chatty vLLM with
    /// request logging on): for measuring the daemon under a night's worth of logs.
    #[serde(default)]
    pub log_kb: u64,
}
