//! After a restart: the run's job found again instead of resubmitted. A job still queued
//! or running is found by its name; one that finished while nobody watched, by its
//! directory (a status file with an end, no `consumed` file).

use super::logs::{self, End, Marker};
use super::{submit, Followed, SlurmRuntime};
use crate::runtime::RunJob;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Written in a job's directory once an attempt has reported its outcome: a later attempt
/// of the run (a retry) must submit anew instead of re-reading it.
pub(super) const CONSUMED: &str = "consumed";

impl SlurmRuntime {
    /// The run's job from an earlier nightshift, if one is queued, running, or finished
    /// with an outcome nobody has taken.
    pub(super) async fn find_existing(&self, job: &RunJob) -> Option<Followed> {
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
}

pub(super) fn mark_consumed(dir: &Path) {
    let _ = std::fs::write(dir.join(CONSUMED), "");
}

/// The processes' own files may print the token (a server echoing its environment); the
/// directory is owner-only while the job runs, and the token is masked once it is over.
pub(super) fn redact_files(dir: &Path, secrets: &crate::runtime::docker::secrets::Secrets) {
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
