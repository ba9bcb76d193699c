//! Facts about an attempt that are not in its log lines: where it stopped, how it ended,
//! what the pull and the patch step reported. The runtime fills this in; the scanner
//! weighs it against what the lines say.

use crate::model::Stage;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FailureContext {
    /// The stage the attempt was in when it ended.
    pub stage: Option<Stage>,
    /// Exit code of the process that ended the attempt (server or benchmark).
    pub exit_code: Option<i64>,
    /// Signal name if it was killed (`SIGKILL`, `SIGSEGV`…).
    pub signal: Option<String>,
    /// The stage ran past its time limit (see `stage` for which one).
    pub timed_out: bool,
    /// A serving benchmark (an HTTP server was started).
    pub serving: bool,
    /// vLLM version of the image, when known (`GET /version`, the log, or the plan).
    pub vllm_version: Option<String>,
    /// The benchmark command exited (whatever its status).
    pub bench_finished: bool,
    /// The parser found a result block.
    pub has_result: bool,
    /// `successful_requests` from the result block, when it has one.
    pub successful_requests: Option<f64>,
    /// The agent's patch did not apply.
    pub patch_failed: bool,
    /// The image pull failed with this message.
    pub pull_error: Option<String>,
    /// The image does not exist (locally, and the registry says so / is unreachable).
    pub image_missing: bool,
    /// The runtime saw the disk fill up (and its cleanup did not free enough).
    pub disk_full: bool,
    /// The runtime found the benchmark command cannot run on the image, and why.
    pub bench_invalid: Option<String>,
    /// The run's image needs a build from source that was off or failed, and why.
    pub needs_build: Option<String>,
    /// An agent run: the files its patch changes (paths inside the tree, `vllm/x.py`).
    pub patched_files: Vec<String>,
    /// The result block is no measurement, and why ([`crate::validity`]).
    pub invalid_result: Option<String>,
}

impl FailureContext {
    /// The attempt measured something: a result with at least one successful request,
    /// and nothing else went wrong.
    pub fn succeeded(&self) -> bool {
        self.has_result
            && self.successful_requests.is_none_or(|n| n > 0.0)
            && self.invalid_result.is_none()
            && !self.timed_out
            && !self.patch_failed
            && self.pull_error.is_none()
            && !self.image_missing
            && !self.disk_full
            && self.bench_invalid.is_none()
            && self.needs_build.is_none()
            && self.exit_code.is_none_or(|c| c == 0)
            && self.signal.is_none()
    }

    /// The facts alone say the attempt failed.
    pub(crate) fn shows_failure(&self) -> bool {
        self.exit_code.is_some_and(|c| c != 0)
            || self.signal.is_some()
            || self.timed_out
            || self.patch_failed
            || self.bench_invalid.is_some()
            || self.needs_build.is_some()
            || self.pull_error.is_some()
            || self.image_missing
            || self.disk_full
            || self.no_metrics()
    }

    /// nightshift's own start-up timeout fired: the server (or its container) did not
    /// become healthy within `server_start_timeout` (the runtime ends such an attempt as
    /// a timeout while the stage is still starting or loading the server).
    pub(crate) fn start_timed_out(&self) -> bool {
        self.timed_out
            && !matches!(
                self.stage,
                Some(Stage::PreparingImage | Stage::Benchmarking | Stage::Parsing)
            )
    }

    /// The benchmark finished but produced nothing usable.
    pub fn no_metrics(&self) -> bool {
        self.bench_finished
            && (!self.has_result || self.successful_requests.is_some_and(|n| n <= 0.0))
    }

    /// How the process ended, as a sentence (for fallback evidence).
    pub(crate) fn exit_description(&self) -> Option<String> {
        match (&self.signal, self.exit_code) {
            (Some(sig), _) => Some(format!(
                "process killed by {sig}{}",
                kill_hint(Some(sig), None)
            )),
            (None, Some(c)) if c != 0 => Some(format!(
                "process exited with status {c}{}",
                kill_hint(None, Some(c))
            )),
            _ => None,
        }
    }
}

fn kill_hint(sig: Option<&str>, code: Option<i64>) -> &'static str {
    match (sig, code) {
        (Some("SIGKILL") | Some("KILL") | Some("9"), _) | (_, Some(137)) => {
            " (out of host memory, or killed by the runtime)"
        }
        (Some("SIGSEGV") | Some("SEGV") | Some("11"), _) | (_, Some(139)) => {
            " (segmentation fault)"
        }
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn success_and_failure_facts() {
        let ok = FailureContext {
            has_result: true,
            successful_requests: Some(100.0),
            bench_finished: true,
            exit_code: Some(0),
            ..Default::default()
        };
        assert!(ok.succeeded() && !ok.shows_failure());
        let zero = FailureContext {
            successful_requests: Some(0.0),
            ..ok.clone()
        };
        assert!(!zero.succeeded() && zero.no_metrics() && zero.shows_failure());
        assert!(!FailureContext::default().shows_failure());
        let killed = FailureContext {
            exit_code: Some(137),
            ..Default::default()
        };
        assert!(killed.exit_description().unwrap().contains("host memory"));
        let start = FailureContext {
            stage: Some(Stage::LoadingServer),
            timed_out: true,
            ..Default::default()
        };
        assert!(start.start_timed_out() && start.shows_failure());
        for stage in [Stage::PreparingImage, Stage::Benchmarking, Stage::Parsing] {
            let other = FailureContext {
                stage: Some(stage),
                ..start.clone()
            };
            assert!(!other.start_timed_out(), "{stage:?}");
        }
    }
}
