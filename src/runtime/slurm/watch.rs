//! One `squeue` for every job the runtime follows, at most every [`FRESH`]: a night with
//! 64 jobs in flight asks the controller once per tick, not 64 times (Slurm admins watch
//! for clients that hammer slurmctld). A job missing from the answer has left the queue;
//! only then is it asked about alone (`scontrol`, `sacct`). slurmrestd is asked per job.

use super::state::{parse_squeue, Client, JobInfo, SQUEUE_FORMAT};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How old an answer may be before it is asked again (under the fastest poll period).
const FRESH: Duration = Duration::from_millis(200);

#[derive(Default)]
struct Snapshot {
    at: Option<Instant>,
    jobs: Vec<JobInfo>,
}

pub struct Watch {
    client: Client,
    /// Job id → how many followers.
    ids: std::sync::Mutex<BTreeMap<String, usize>>,
    snapshot: tokio::sync::Mutex<Snapshot>,
}

impl Watch {
    pub fn new(client: Client) -> Self {
        Watch {
            client,
            ids: std::sync::Mutex::new(BTreeMap::new()),
            snapshot: tokio::sync::Mutex::new(Snapshot::default()),
        }
    }

    fn ids(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, usize>> {
        self.ids.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn follow(&self, id: &str) {
        *self.ids().entry(id.to_string()).or_default() += 1;
    }

    pub(crate) fn unfollow(&self, id: &str) {
        let mut ids = self.ids();
        if let Some(n) = ids.get_mut(id) {
            *n -= 1;
            if *n == 0 {
                ids.remove(id);
            }
        }
    }

    /// The job's state, from the shared snapshot while it is queued or running.
    pub async fn job(&self, id: &str) -> Result<JobInfo, String> {
        if self.client.restd.is_some() {
            return self.client.job(id).await;
        }
        let mut snap = self.snapshot.lock().await;
        if snap.at.is_none_or(|t| t.elapsed() > FRESH) {
            let mut ids: Vec<String> = self.ids().keys().cloned().collect();
            if !ids.iter().any(|i| i == id) {
                ids.push(id.to_string());
            }
            let args = [
                "-h".to_string(),
                "-o".into(),
                SQUEUE_FORMAT.into(),
                "-j".into(),
                ids.join(","),
            ];
            match self.client.run("squeue", &args).await {
                Ok(text) => {
                    snap.jobs = parse_squeue(&text);
                    snap.at = Some(Instant::now());
                }
                Err(_) => snap.at = None,
            }
        }
        if snap.at.is_some() {
            if let Some(j) = snap.jobs.iter().find(|j| j.id == id) {
                return Ok(j.clone());
            }
        }
        drop(snap);
        self.client.job(id).await
    }
}
