//! The sweep store: everything a night produced, persisted so a crash loses nothing and a
//! resume continues where the night stopped.
//!
//! The storage engine sits behind [`Backend`] (three key/value trees: `meta`, `events`,
//! `runs`); [`sled`](self::sled) is the one we ship. [`Store`] holds the logic: schema
//! version and migrations, the plan snapshot, one [`RunDoc`] per run key, and the event log
//! keyed by a big-endian sequence number. [`StoreObserver`] persists a running sweep and
//! flushes every state transition before the engine acts on it. Full logs stay in files
//! under `<store>/logs`; run docs hold their paths and sizes.

pub mod cli;
pub mod record;
pub mod report;
pub mod resume;
pub mod show;
pub mod sled;

use crate::engine::observer::Observer;
use crate::event::{Envelope, Event};
use crate::model::{Pipe, RunState, Stage};
use crate::state::SweepState;
use record::{LogFile, PlanSnapshot, RunDoc, StateChange};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The schema this build writes. Older stores are migrated on open; newer ones refused.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tree {
    Meta,
    Events,
    Runs,
}

/// A visitor of (key, value) entries.
pub type Visit<'a> = dyn FnMut(&[u8], &[u8]) -> anyhow::Result<()> + 'a;

/// A small ordered key/value engine with named trees. Replace sled by implementing this.
pub trait Backend: Send {
    fn get(&self, t: Tree, key: &[u8]) -> anyhow::Result<Option<Vec<u8>>>;
    fn put(&self, t: Tree, key: &[u8], value: &[u8]) -> anyhow::Result<()>;
    fn remove(&self, t: Tree, key: &[u8]) -> anyhow::Result<()>;
    /// Visit every entry in key order.
    fn scan(&self, t: Tree, f: &mut Visit<'_>) -> anyhow::Result<()>;
    fn last_key(&self, t: Tree) -> anyhow::Result<Option<Vec<u8>>>;
    fn len(&self, t: Tree) -> usize;
    /// Make every write so far durable.
    fn flush(&self) -> anyhow::Result<()>;
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store {} is in use by another nightshift process (one process per store; wait for it to finish or stop it)", dir.display())]
    Locked { dir: PathBuf },
    #[error("store {} is damaged: {why}. Nothing was changed; move it aside to start afresh, or restore it from a backup", dir.display())]
    Damaged { dir: PathBuf, why: String },
    #[error("store {} has schema version {found}; this nightshift reads up to {SCHEMA_VERSION}: upgrade nightshift", dir.display())]
    TooNew { dir: PathBuf, found: u32 },
    #[error("store {}: {why}", dir.display())]
    Io { dir: PathBuf, why: String },
    #[error("no store at {} (run a sweep first, or pass --store DIR)", dir.display())]
    Missing { dir: PathBuf },
    #[error("store {} holds sweep `{found}`, not `{wanted}` (pass another --store)", dir.display())]
    OtherSweep {
        dir: PathBuf,
        found: String,
        wanted: String,
    },
}

/// One stored event: which life of the process wrote it, and the run's key (run ids are
/// only stable within one plan).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredEvent {
    pub life: u32,
    pub key: Option<String>,
    pub env: Envelope,
}

pub struct Store {
    dir: PathBuf,
    backend: Box<dyn Backend>,
    docs: BTreeMap<String, RunDoc>,
    plan: Option<PlanSnapshot>,
    next_seq: u64,
    life: u32,
}

const K_SCHEMA: &[u8] = b"schema_version";
const K_PLAN: &[u8] = b"plan";
const K_LIVES: &[u8] = b"lives";

fn u32_of(v: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(v.try_into().ok()?))
}

impl Store {
    /// Open (and with `create`, make) the store in `dir`.
    pub fn open(dir: &Path, create: bool) -> Result<Store, StoreError> {
        let looks_like_sled = dir.join("db").is_file() && dir.join("conf").is_file();
        let empty = std::fs::read_dir(dir)
            .map(|mut d| d.next().is_none())
            .unwrap_or(true);
        if !looks_like_sled {
            if !create && empty {
                return Err(StoreError::Missing {
                    dir: dir.to_path_buf(),
                });
            }
            let only_logs = std::fs::read_dir(dir)
                .map(|d| d.flatten().all(|e| e.file_name() == "logs"))
                .unwrap_or(true);
            if !only_logs {
                return Err(StoreError::Damaged {
                    dir: dir.to_path_buf(),
                    why: "it is not a nightshift store (no database files)".into(),
                });
            }
            if !create {
                return Err(StoreError::Missing {
                    dir: dir.to_path_buf(),
                });
            }
            std::fs::create_dir_all(dir).map_err(|e| StoreError::Io {
                dir: dir.to_path_buf(),
                why: e.to_string(),
            })?;
        }
        let backend = self::sled::SledBackend::open(dir)?;
        Self::with_backend(dir, Box::new(backend), create)
    }

    /// Open over any backend (tests, other engines).
    pub fn with_backend(
        dir: &Path,
        backend: Box<dyn Backend>,
        create: bool,
    ) -> Result<Store, StoreError> {
        let damaged = |why: String| StoreError::Damaged {
            dir: dir.to_path_buf(),
            why,
        };
        let version = backend
            .get(Tree::Meta, K_SCHEMA)
            .map_err(|e| damaged(e.to_string()))?;
        match version {
            None => {
                if backend.len(Tree::Runs) > 0 || backend.len(Tree::Events) > 0 {
                    return Err(damaged("its schema version is missing".into()));
                }
                if !create {
                    return Err(StoreError::Missing {
                        dir: dir.to_path_buf(),
                    });
                }
                backend
                    .put(Tree::Meta, K_SCHEMA, &SCHEMA_VERSION.to_be_bytes())
                    .and_then(|_| backend.flush())
                    .map_err(|e| StoreError::Io {
                        dir: dir.to_path_buf(),
                        why: e.to_string(),
                    })?;
            }
            Some(v) => {
                let v = u32_of(&v).ok_or_else(|| damaged("bad schema version".into()))?;
                if v > SCHEMA_VERSION {
                    return Err(StoreError::TooNew {
                        dir: dir.to_path_buf(),
                        found: v,
                    });
                }
                if v < SCHEMA_VERSION {
                    migrate(backend.as_ref(), v).map_err(|e| damaged(format!("{e:#}")))?;
                }
            }
        }
        let plan = match backend
            .get(Tree::Meta, K_PLAN)
            .map_err(|e| damaged(e.to_string()))?
        {
            Some(b) => Some(
                serde_json::from_slice(&b)
                    .map_err(|e| damaged(format!("unreadable plan snapshot: {e}")))?,
            ),
            None => None,
        };
        let life = backend
            .get(Tree::Meta, K_LIVES)
            .ok()
            .flatten()
            .and_then(|v| u32_of(&v))
            .unwrap_or(0);
        let mut docs = BTreeMap::new();
        backend
            .scan(Tree::Runs, &mut |k, v| {
                let doc: RunDoc = serde_json::from_slice(v).map_err(|e| {
                    anyhow::anyhow!("unreadable run {}: {e}", String::from_utf8_lossy(k))
                })?;
                docs.insert(doc.key.clone(), doc);
                Ok(())
            })
            .map_err(|e| damaged(format!("{e:#}")))?;
        let next_seq = backend
            .last_key(Tree::Events)
            .map_err(|e| damaged(e.to_string()))?
            .and_then(|k| Some(u64::from_be_bytes(k.as_slice().try_into().ok()?)))
            .map_or(1, |s| s + 1);
        Ok(Store {
            dir: dir.to_path_buf(),
            backend,
            docs,
            plan,
            next_seq,
            life,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn logs_dir(&self) -> PathBuf {
        self.dir.join("logs")
    }
    pub fn plan(&self) -> Option<&PlanSnapshot> {
        self.plan.as_ref()
    }
    pub fn docs(&self) -> &BTreeMap<String, RunDoc> {
        &self.docs
    }
    pub fn doc(&self, key: &str) -> Option<&RunDoc> {
        self.docs.get(key)
    }
    pub fn life(&self) -> u32 {
        self.life
    }

    /// Docs in plan order (removed runs last, by key).
    pub fn docs_in_order(&self) -> Vec<&RunDoc> {
        let mut out = Vec::with_capacity(self.docs.len());
        let mut seen = BTreeSet::new();
        if let Some(p) = &self.plan {
            for r in &p.runs {
                if let Some(d) = self.docs.get(&r.key) {
                    out.push(d);
                    seen.insert(r.key.as_str());
                }
            }
        }
        out.extend(
            self.docs
                .values()
                .filter(|d| !seen.contains(d.key.as_str())),
        );
        out
    }

    /// Count a new life of the sweep (a process that opened it to run).
    pub fn begin_life(&mut self) -> anyhow::Result<u32> {
        self.life += 1;
        self.backend
            .put(Tree::Meta, K_LIVES, &self.life.to_be_bytes())?;
        Ok(self.life)
    }

    pub fn put_plan(&mut self, snap: PlanSnapshot) -> anyhow::Result<()> {
        self.backend
            .put(Tree::Meta, K_PLAN, &serde_json::to_vec(&snap)?)?;
        self.plan = Some(snap);
        Ok(())
    }

    pub fn put_doc(&mut self, doc: RunDoc) -> anyhow::Result<()> {
        self.backend
            .put(Tree::Runs, doc.key.as_bytes(), &serde_json::to_vec(&doc)?)?;
        self.docs.insert(doc.key.clone(), doc);
        Ok(())
    }

    fn write_doc(&self, key: &str) -> anyhow::Result<()> {
        if let Some(doc) = self.docs.get(key) {
            self.backend
                .put(Tree::Runs, key.as_bytes(), &serde_json::to_vec(doc)?)?;
        }
        Ok(())
    }

    pub fn append_event(&mut self, key: Option<String>, env: &Envelope) -> anyhow::Result<u64> {
        let seq = self.next_seq;
        let ev = StoredEvent {
            life: self.life,
            key,
            env: env.clone(),
        };
        self.backend
            .put(Tree::Events, &seq.to_be_bytes(), &serde_json::to_vec(&ev)?)?;
        self.next_seq += 1;
        Ok(seq)
    }

    /// Every stored event, in order.
    pub fn events(&self) -> anyhow::Result<Vec<(u64, StoredEvent)>> {
        let mut v = Vec::new();
        self.backend.scan(Tree::Events, &mut |k, val| {
            let seq = u64::from_be_bytes(k.try_into()?);
            v.push((seq, serde_json::from_slice(val)?));
            Ok(())
        })?;
        Ok(v)
    }

    pub fn flush(&self) -> anyhow::Result<()> {
        self.backend.flush()
    }
}

/// Upgrade a store written with an older schema, in place. v1 is the first schema, so there
/// is nothing to do yet; each later version adds one step here and then records itself.
pub fn migrate(backend: &dyn Backend, from: u32) -> anyhow::Result<()> {
    // MIGRATIONS[i] upgrades schema version i + 1 to i + 2.
    const MIGRATIONS: &[fn(&dyn Backend) -> anyhow::Result<()>] = &[];
    for v in from.max(1)..SCHEMA_VERSION {
        let step = MIGRATIONS
            .get(v as usize - 1)
            .ok_or_else(|| anyhow::anyhow!("no migration from schema version {v}"))?;
        step(backend)?;
        backend.put(Tree::Meta, K_SCHEMA, &(v + 1).to_be_bytes())?;
    }
    backend.flush()
}

/// `$XDG_DATA_HOME/nightshift` (or `~/.local/share/nightshift`).
pub fn data_root() -> Option<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_DATA_HOME").filter(|x| !x.is_empty()) {
        return Some(PathBuf::from(x).join("nightshift"));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".local/share/nightshift"))
}

/// The default store of a sweep: `<data root>/<sweep name>`.
pub fn default_dir(sweep: &str) -> Option<PathBuf> {
    let safe: String = sweep
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    data_root().map(|r| r.join(safe))
}

/// How hard the observer pushes writes to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Flush on every state transition before the engine acts on it (the default).
    EveryTransition,
    /// Flush only when the sweep ends (benchmarks).
    AtEnd,
}

/// Persists a running sweep. Folds the same events as the engine (so its picture of each
/// run is the engine's) and writes run docs and the event log; a state transition is
/// flushed before `on_event` returns.
pub struct StoreObserver {
    store: Store,
    keys: Vec<String>,
    state: SweepState,
    dirty: BTreeSet<usize>,
    durability: Durability,
    log_dir: Option<PathBuf>,
}

impl StoreObserver {
    pub fn new(store: Store, keys: Vec<String>, state: SweepState) -> StoreObserver {
        let log_dir = Some(store.logs_dir());
        StoreObserver {
            store,
            keys,
            state,
            dirty: BTreeSet::new(),
            durability: Durability::EveryTransition,
            log_dir,
        }
    }
    pub fn durability(mut self, d: Durability) -> Self {
        self.durability = d;
        self
    }
    pub fn log_dir(mut self, d: Option<PathBuf>) -> Self {
        self.log_dir = d;
        self
    }
    pub fn state(&self) -> &SweepState {
        &self.state
    }
    pub fn store(&self) -> &Store {
        &self.store
    }
    pub fn into_store(self) -> Store {
        self.store
    }

    fn write_dirty(&mut self) -> anyhow::Result<()> {
        for i in std::mem::take(&mut self.dirty) {
            self.store.write_doc(&self.keys[i])?;
        }
        Ok(())
    }

    fn logs_of(&self, key: &str, attempt: u32) -> Vec<LogFile> {
        let Some(dir) = &self.log_dir else {
            return Vec::new();
        };
        let probe = crate::engine::logs::log_path(dir, key, attempt, "x", Pipe::Stdout);
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
            Event::State { run, .. }
            | Event::Metric { run, .. }
            | Event::VllmVersion { run, .. }
            | Event::Diagnosed { run, .. }
            | Event::FixApplied { run, .. }
            | Event::Provenance { run, .. } => Some(run.0 as usize),
            _ => None,
        };
        if run.is_some_and(|i| i >= self.keys.len()) {
            return Ok(());
        }
        self.state.apply(env).map_err(|e| {
            anyhow::anyhow!("store: the stored state disagrees with the engine: {e}")
        })?;
        let key = run.map(|i| self.keys[i].clone());
        let doc = match &key {
            Some(k) => {
                if !self.store.docs.contains_key(k) {
                    anyhow::bail!("store: no record for run {k}");
                }
                self.store.docs.get_mut(k)
            }
            None => None,
        };
        let at = env.at_ms;
        let mut transition = false;
        match (&env.event, doc) {
            (
                Event::Metric {
                    attempt,
                    key: m,
                    value,
                    ..
                },
                Some(d),
            ) => {
                d.attempt_mut(*attempt).metrics.insert(m.clone(), *value);
                self.dirty.insert(run.unwrap_or_default());
                return Ok(());
            }
            (
                Event::State {
                    attempt,
                    from,
                    to,
                    detail,
                    gpus,
                    ..
                },
                Some(d),
            ) => {
                transition = true;
                d.history.push(StateChange {
                    at_ms: at,
                    attempt: *attempt,
                    from: from.clone(),
                    to: to.clone(),
                    detail: detail.clone(),
                });
                let ending = if from.is_active() && *to == RunState::Queued {
                    attempt.saturating_sub(1)
                } else {
                    *attempt
                };
                let info = d.info.clone();
                match to {
                    RunState::Active {
                        stage: Stage::PreparingImage,
                    } => {
                        let a = d.attempt_mut(*attempt);
                        a.started_ms = Some(at);
                        a.stages = vec![(Stage::PreparingImage, at)];
                        a.gpus = gpus.clone();
                        a.info = Some(info);
                    }
                    RunState::Active { stage } => d.attempt_mut(*attempt).stages.push((*stage, at)),
                    RunState::Queued if !from.is_active() => {}
                    _ => {
                        let k = d.key.clone();
                        let logs = if from.is_active() {
                            Some(self.logs_of(&k, ending))
                        } else {
                            None
                        };
                        let d = self.store.docs.get_mut(&k).expect("present");
                        let a = d.attempt_mut(ending);
                        a.end = Some(to.clone());
                        a.interrupted = *to == RunState::Queued;
                        a.detail = detail.clone();
                        a.finished_ms = Some(at);
                        if let Some(l) = logs {
                            a.logs = l;
                        }
                    }
                }
                let i = run.unwrap_or_default();
                let d = self.store.docs.get_mut(&self.keys[i]).expect("present");
                d.record = self.state.runs[i].clone();
                self.dirty.insert(i);
            }
            (
                Event::Diagnosed {
                    attempt, finding, ..
                },
                Some(d),
            ) => {
                if finding.predicted {
                    d.predicted = Some(finding.clone());
                } else {
                    d.attempt_mut(*attempt).findings.push(finding.clone());
                }
                self.dirty.insert(run.unwrap_or_default());
            }
            (
                Event::FixApplied {
                    attempt, recipe, ..
                },
                Some(d),
            ) => {
                let a = d.attempt_mut(*attempt);
                if !a.fixes.contains(recipe) {
                    a.fixes.push(recipe.clone());
                }
                self.dirty.insert(run.unwrap_or_default());
            }
            (
                Event::Provenance {
                    attempt,
                    key: k,
                    value,
                    ..
                },
                Some(d),
            ) => {
                d.attempt_mut(*attempt)
                    .provenance
                    .insert(k.clone(), value.clone());
                self.dirty.insert(run.unwrap_or_default());
            }
            (Event::VllmVersion { version, .. }, Some(d)) => {
                let n = d.record.attempt.max(1);
                d.attempt_mut(n).vllm_version = Some(version.clone());
                self.dirty.insert(run.unwrap_or_default());
            }
            _ => {}
        }
        self.store.append_event(key, env)?;
        let end = matches!(env.event, Event::SweepFinished { .. });
        if transition || end {
            self.write_dirty()?;
            if self.durability == Durability::EveryTransition || end {
                self.store.flush()?;
            }
        }
        Ok(())
    }
}
