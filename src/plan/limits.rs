//! Upper bounds on the numbers a plan gives, checked before anything is allocated or
//! looped over by them. A typo (`repeats = 4294967295`) must be an error at its
//! file:line:col, not an allocation failure (exit 134) or a night of three million runs.
//! Each bound is far above any real sweep and far below what would hurt the box.

use super::*;

/// Repeats per commit. Repeats buy statistical power, and the verdicts are measured at
/// N = 1, 3 and 5 (`nightshift bench stats`); a single repeat of a serving benchmark
/// takes minutes, so 100 repeats of one commit's three variants is already more than a
/// night holds, while a typo (`4294967295`) would size the runs before anything runs.
pub const MAX_REPEATS: u32 = 100;
/// Drift reference runs a night may spend at most.
pub const MAX_REFERENCE_RUNS: u32 = 50;

/// Commits in one plan (inline and from `commits_file` together). A night holds ~100; a
/// benchmark of 100 000 runs (`bench engine --runs 100000`) generates ~33 000.
pub const MAX_COMMITS: usize = 50_000;

/// Runs in one plan (commits × variants × repeats): every run is held in memory by the
/// engine, the store and the TUI. 200 000 covers the benchmarks' synthetic plans; a real
/// night is a few hundred.
pub const MAX_RUNS: usize = 200_000;

pub use crate::command::MAX_GPUS;

/// A timeout of a week is already no timeout for one run; unbounded, the seconds overflow
/// the runtimes' arithmetic (Slurm's time limit adds both timeouts).
pub const MAX_TIMEOUT_S: u64 = 7 * 24 * 3600;

/// Warm-up requests before a serving benchmark measures: tens are typical; each one is a
/// request the night waits for.
pub const MAX_WARMUP_REQUESTS: u32 = 10_000;

/// The sim's request log per run (KB): 16 GiB is beyond any real server's log, and keeps
/// the sim's `log_kb × 1024` from overflowing.
pub const MAX_SIM_LOG_KB: u64 = 16 << 20;

impl Builder {
    /// The `[defaults]` numbers against their bounds (zeros included), each error at the
    /// field's position.
    pub(super) fn check_default_limits(&mut self, d: &raw::RawDefaults, src: &SourceFile) {
        let whole = 0..src.text.len();
        let at = |key: &str| src.field_loc(&whole, key);
        if let Some(n) = d.gpu_count {
            if n > MAX_GPUS {
                self.error(
                    at("gpu_count"),
                    None,
                    "gpu_count",
                    format!("gpu_count = {n} is more than one run can take (at most {MAX_GPUS})"),
                );
            }
        }
        if let Some(n) = d.repeats {
            if n > MAX_REPEATS {
                self.error(
                    at("repeats"),
                    None,
                    "repeats",
                    format!("repeats = {n} is too many (at most {MAX_REPEATS} per commit)"),
                );
            }
        }
        for (key, v) in [
            ("server_start_timeout_s", d.server_start_timeout_s),
            ("run_timeout_s", d.run_timeout_s),
        ] {
            if let Some(msg) = v.and_then(timeout_problem) {
                self.error(at(key), None, "timeout", format!("{key} = {msg}"));
            }
        }
        for (k, v) in d.timeout_s_by_gpus.iter().flatten() {
            if let Some(msg) = timeout_problem(*v) {
                self.error(
                    at("timeout_s_by_gpus"),
                    None,
                    "timeout",
                    format!("timeout_s_by_gpus.{k} = {msg}"),
                );
            }
        }
        if let Some(n) = d.warmup_requests {
            if n > MAX_WARMUP_REQUESTS {
                self.error(
                    at("warmup_requests"),
                    None,
                    "warmup_requests",
                    format!("warmup_requests = {n} is too many (at most {MAX_WARMUP_REQUESTS})"),
                );
            }
        }
    }

    /// More commits than [`MAX_COMMITS`]: an error at the first one beyond, and the rest
    /// dropped before they are checked one by one.
    pub(super) fn check_commit_count(
        &mut self,
        commits: &mut Vec<(RawCommit, Option<Loc>, FieldLocator)>,
    ) {
        if commits.len() > MAX_COMMITS {
            self.error(
                commits[MAX_COMMITS].1.clone(),
                None,
                "commits",
                format!(
                    "the plan has {} commits, more than {MAX_COMMITS}: this one is the first beyond the limit",
                    commits.len()
                ),
            );
            commits.truncate(MAX_COMMITS);
        }
    }
}

/// Why a timeout in seconds is out of range, if it is.
fn timeout_problem(s: u64) -> Option<String> {
    if s == 0 {
        Some("0 would end every run at once (expected 1 or more seconds)".into())
    } else if s > MAX_TIMEOUT_S {
        Some(format!(
            "{s} is more than a week (at most {MAX_TIMEOUT_S} seconds)"
        ))
    } else {
        None
    }
}

/// An agent's patch read by nightshift (preflight, the diagnoser) is at most this long:
/// real patches are kilobytes; a path that names a device or a huge file costs no memory.
pub const MAX_PATCH_BYTES: u64 = 16 << 20;
