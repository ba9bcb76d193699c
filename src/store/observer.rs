//! The store as an engine observer: a running sweep persisted event by event, each state
//! transition flushed before the engine acts on it.

use super::*;
use crate::event::Event;
use crate::model::{Pipe, RunState, Stage};
use crate::observer::Observer;
use crate::state::SweepState;
use std::collections::BTreeSet;

/// How hard the observer pushes writes to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Flush on every state transition before the engine acts on it (the default).
    EveryTransition,
    /// Flush only when the sweep ends (benchmarks).
    AtEnd,
}

/// Persists a running sweep. Folds the same events as the engine (so its picture of each
/// run is the engine's), appends each event once to the log and keeps each run's summary;
/// a state transition (with the events before it) is flushed before `on_event` returns.
pub struct StoreObserver {
    /// Shared with the sweep's daemon, which answers `results` and `show` from it.
    store: std::sync::Arc<std::sync::Mutex<Store>>,
    keys: Vec<String>,
    state: SweepState,
    dirty: BTreeSet<usize>,
    durability: Durability,
    log_dir: Option<PathBuf>,
    /// Commit → its perf command, kept with each decided invocation.
    commands: std::collections::BTreeMap<String, String>,
}

impl StoreObserver {
    pub fn new(store: Store, keys: Vec<String>, state: SweepState) -> StoreObserver {
        let log_dir = Some(store.logs_dir());
        StoreObserver {
            store: std::sync::Arc::new(std::sync::Mutex::new(store)),
            keys,
            state,
            dirty: BTreeSet::new(),
            durability: Durability::EveryTransition,
            log_dir,
            commands: Default::default(),
        }
    }
    pub fn commands(mut self, c: std::collections::BTreeMap<String, String>) -> Self {
        self.commands = c;
        self
    }
    pub(crate) fn log_dir(mut self, d: Option<PathBuf>) -> Self {
        self.log_dir = d;
        self
    }
    pub fn state(&self) -> &SweepState {
        &self.state
    }
    /// The store, for the daemon's queries (held briefly: the observer writes through it).
    pub fn shared(&self) -> std::sync::Arc<std::sync::Mutex<Store>> {
        self.store.clone()
    }
    pub(crate) fn logs_dir(&self) -> PathBuf {
        self.lock().logs_dir()
    }
    fn lock(&self) -> std::sync::MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn logs_of(&self, key: &str, attempt: u32) -> Vec<LogFile> {
        let Some(dir) = &self.log_dir else {
            return Vec::new();
        };
        let probe = crate::record::logs::log_path(dir, key, attempt, "x", Pipe::Stdout);
        let Some(adir) = probe.parent() else {
            return Vec::new();
        };
        let mut v: Vec<LogFile> = std::fs::read_dir(adir)
            .map(|d| {
                d.flatten()
                    .filter_map(|e| {
                        let m = e.metadata().ok()?;
                        m.is_file().then(|| LogFile {
                            path: e.path().display().to_string(),
                            bytes: m.len(),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        v.sort_by(|a, b| a.path.cmp(&b.path));
        v
    }
}

impl Observer for StoreObserver {
    fn on_event(&mut self, env: &Envelope) -> anyhow::Result<()> {
        let run = match &env.event {
            Event::Log { .. } | Event::Gpu { .. } | Event::Pull { .. } => return Ok(()),
            // A fetch's log lines are in the log directory's images.log, not the store.
            Event::Image {
                status: crate::event::ImageStatus::Log,
                ..
            } => return Ok(()),
            Event::State { run, .. }
            | Event::Metric { run, .. }
            | Event::VllmVersion { run, .. }
            | Event::Requests { run, .. }
            | Event::Diagnosed { run, .. }
            | Event::FixApplied { run, .. }
            | Event::Provenance { run, .. }
            | Event::Decided { run, .. } => Some(run.0 as usize),
            // An operator's command on a run is that run's too (`show` lists it).
            Event::Operator { command, .. } => command.run().map(|r| r.0 as usize),
            _ => None,
        };
        if run.is_some_and(|i| i >= self.keys.len()) {
            return Ok(());
        }
        self.state.apply(env).map_err(|e| {
            anyhow::anyhow!("store: the stored state disagrees with the engine: {e}")
        })?;
        let key = run.map(|i| self.keys[i].clone());
        let store_arc = self.store.clone();
        let mut store = store_arc.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(k) = &key {
            if !store.runs.contains_key(k) {
                anyhow::bail!("store: no record for run {k}");
            }
        }
        let mut logs = Vec::new();
        let mut transition = false;
        if let Event::Decided {
            commit, invocation, ..
        } = &env.event
        {
            // Durable before the attempt goes on: a restart must run the same benchmark.
            let command = self.commands.get(commit).map_or("", String::as_str);
            store.put_invocation(commit, command, invocation)?;
            transition = true;
        }
        if let (Some(i), Some(k)) = (run, &key) {
            if let Event::State {
                attempt, from, to, ..
            } = &env.event
            {
                transition = true;
                // An attempt ends when it leaves the active states; its log files are closed
                // by then (the log writer observes first), so their sizes are final.
                if from.is_active() && !to.is_active() {
                    let ending = if *to == RunState::Queued {
                        attempt.saturating_sub(1)
                    } else {
                        *attempt
                    };
                    logs = self.logs_of(k, ending);
                }
            }
            let seq = store.next_seq;
            store.digests.remove(k);
            let s = store.runs.get_mut(k).expect("checked above");
            match &env.event {
                Event::State {
                    to:
                        RunState::Active {
                            stage: Stage::PreparingImage,
                        },
                    ..
                } => s.last_start = Some(seq),
                Event::Diagnosed { finding, .. } if finding.predicted => {
                    s.predicted = Some(finding.clone())
                }
                _ => {}
            }
            s.record = self.state.runs[i].clone();
            // Written with the next flush: a summary is rewritten at most once per transition.
            self.dirty.insert(i);
        }
        store.follow_pause(&env.event)?;
        store.append_event(key, env, logs)?;
        let end = matches!(env.event, Event::SweepFinished { .. });
        if transition || end {
            for i in std::mem::take(&mut self.dirty) {
                store.write_run(&self.keys[i])?;
            }
            if self.durability == Durability::EveryTransition || end {
                store.flush()?;
            }
        }
        Ok(())
    }
}
