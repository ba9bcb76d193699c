//! The sweep store: everything a night produced, persisted so a crash loses nothing and a
//! resume continues where the night stopped.
//!
//! The storage engine sits behind [`Backend`] (three key/value trees: `meta`, `events`,
//! `runs`); [`sled`](self::sled) is the one we ship. [`Store`] holds the logic: schema
//! version and migrations, the plan snapshot, one small [`RunSummary`] per run key (current
//! state, attempt, metrics; rewritten on a state transition, never growing), and the
//! append-only event log keyed by a big-endian sequence number, each event written once.
//! Histories (attempts, state changes) are derived from the log when read
//! ([`Store::docs`]). [`StoreObserver`] persists a running sweep and flushes every state
//! transition before the engine acts on it; other events ride along with the next flush.
//! Full logs stay in files under `<store>/logs`; the ending event of an attempt names them.
//! What reads keep between them (the results table's rows) is a file beside the database,
//! [`view`]: derived, rebuilt whenever missing or stale.

mod observer;
pub mod pause;
pub mod resume;
pub mod salvage;
pub mod sled;
pub mod view;

pub use observer::{Durability, StoreObserver};

use crate::event::Envelope;
use crate::record::{LogFile, PlanSnapshot, RunDoc, RunSummary, StoredEvent};
use serde::{de::DeserializeOwned, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The schema this build writes. Older stores are migrated on open; newer ones refused.
/// v1 rewrote each run's whole history on every change; v2 keeps small run summaries and
/// derives histories from the event log.
pub const SCHEMA_VERSION: u32 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tree {
    Meta,
    Events,
    Runs,
}

/// A visitor of (key, value) entries.
pub type Visit<'a> = dyn FnMut(&[u8], &[u8]) -> anyhow::Result<()> + 'a;

/// A small ordered key/value engine with named trees. Replace sled by implementing this.
pub trait Backend: Send + Sync {
    fn get(&self, t: Tree, key: &[u8]) -> anyhow::Result<Option<Vec<u8>>>;
    fn put(&self, t: Tree, key: &[u8], value: &[u8]) -> anyhow::Result<()>;
    fn remove(&self, t: Tree, key: &[u8]) -> anyhow::Result<()>;
    /// Visit every entry in key order.
    fn scan(&self, t: Tree, f: &mut Visit<'_>) -> anyhow::Result<()>;
    fn last_key(&self, t: Tree) -> anyhow::Result<Option<Vec<u8>>>;
    fn first_key(&self, t: Tree) -> anyhow::Result<Option<Vec<u8>>>;
    fn len(&self, t: Tree) -> usize;
    /// Make every write so far durable.
    fn flush(&self) -> anyhow::Result<()>;
}

/// Some process holds the store's database (sled's exclusive `flock` on `db`).
fn held(dir: &Path) -> bool {
    let Ok(f) = std::fs::File::open(dir.join("db")) else {
        return false;
    };
    rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockShared).is_err()
}

/// How values are encoded: compact JSON (self-describing, so the internally tagged event
/// enums round-trip; readable with any JSON tool in an emergency).
fn enc<T: Serialize>(v: &T) -> anyhow::Result<Vec<u8>> {
    Ok(serde_json::to_vec(v)?)
}
fn dec<T: DeserializeOwned>(b: &[u8]) -> anyhow::Result<T> {
    Ok(serde_json::from_slice(b)?)
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store {} is in use by another nightshift process (one process per store; wait for it to finish or stop it)", dir.display())]
    Locked { dir: PathBuf },
    #[error("store {} is damaged: {why}. Nothing was changed; `nightshift salvage --store {} --out FILE` exports what is readable, then move it aside to start afresh, or restore it from a backup", dir.display(), dir.display())]
    Damaged { dir: PathBuf, why: String },
    /// The database files cannot be written (read-only mount, another owner's files):
    /// readers go through a copy, a sweep cannot run on it.
    #[error("store {} is read-only ({why}); a sweep cannot run on it, but results, show and digest read it", dir.display())]
    ReadOnly { dir: PathBuf, why: String },
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

pub struct Store {
    dir: PathBuf,
    /// Shared with [`Store::reader`]s: the database is safe to read and write from many
    /// threads at once.
    backend: Arc<dyn Backend>,
    runs: BTreeMap<String, RunSummary>,
    /// Each run summary's stored bytes, hashed: what a kept read was made from. Missing
    /// while a summary changed in memory and is not yet written.
    digests: std::collections::HashMap<String, u64>,
    plan: Option<PlanSnapshot>,
    next_seq: u64,
    life: u32,
    /// A copy of a live store this was opened from, removed when done (after the backend).
    copy: Option<TempCopy>,
}

struct TempCopy(PathBuf);

impl Drop for TempCopy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const K_SCHEMA: &[u8] = b"schema_version";
const K_PLAN: &[u8] = b"plan";
const K_LIVES: &[u8] = b"lives";
const K_CALIBRATION: &[u8] = b"calibration";
/// `invocation/<commit>`: the commit's benchmark invocation.
const K_INVOCATION: &[u8] = b"invocation/";

/// A commit's invocation as stored, with the perf command it was decided for.
#[derive(Serialize, serde::Deserialize)]
struct Decided {
    command: String,
    invocation: crate::rewrite::Invocation,
}

fn u32_of(v: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(v.try_into().ok()?))
}

/// The event log is one unbroken sequence (events are never removed): a gap means part of
/// the database could not be read back (sled recovers a damaged log to its last readable
/// entry and drops the rest), which a resume would write on as if nothing were missing.
fn check_event_log(backend: &dyn Backend) -> Result<(), String> {
    let seq = |k: Option<Vec<u8>>| {
        k.and_then(|k| Some(u64::from_be_bytes(k.as_slice().try_into().ok()?)))
    };
    let first = seq(backend.first_key(Tree::Events).map_err(|e| e.to_string())?);
    let last = seq(backend.last_key(Tree::Events).map_err(|e| e.to_string())?);
    let (Some(first), Some(last)) = (first, last) else {
        return Ok(());
    };
    let want = last.saturating_sub(first).saturating_add(1);
    let have = backend.len(Tree::Events) as u64;
    if have != want {
        return Err(format!(
            "its event log holds {have} events where its sequence {first}..={last} says {want}: {} could not be read back",
            want.abs_diff(have)
        ));
    }
    Ok(())
}

fn next_seq_of(backend: &dyn Backend) -> anyhow::Result<u64> {
    Ok(backend
        .last_key(Tree::Events)?
        .and_then(|k| Some(u64::from_be_bytes(k.as_slice().try_into().ok()?)))
        .map_or(1, |s| s + 1))
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
            // What the sweep's daemon puts there before the database exists.
            let only_ours = std::fs::read_dir(dir)
                .map(|d| {
                    d.flatten().all(|e| {
                        let n = e.file_name();
                        n == "logs"
                            || n == "nightshift.sock"
                            || n == "daemon.log"
                            || n == "daemon.lock"
                    })
                })
                .unwrap_or(true);
            if !only_ours {
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
        // Database files that were there but hold no schema were overwritten or damaged
        // (sled recovers garbage as an empty database): starting afresh on them would
        // write over whatever salvage could still find in their bytes.
        if looks_like_sled && matches!(backend.get(Tree::Meta, K_SCHEMA), Ok(None)) {
            return Err(StoreError::Damaged {
                dir: dir.to_path_buf(),
                why: "its database files are there but hold no store (overwritten or damaged)"
                    .into(),
            });
        }
        Self::with_backend(dir, Box::new(backend), create)
    }

    /// Open over any backend (tests, other engines).
    pub(crate) fn with_backend(
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
            Some(b) => {
                Some(dec(&b).map_err(|e| damaged(format!("unreadable plan snapshot: {e}")))?)
            }
            None => None,
        };
        let life = backend
            .get(Tree::Meta, K_LIVES)
            .ok()
            .flatten()
            .and_then(|v| u32_of(&v))
            .unwrap_or(0);
        // Read in key order, decoded on every core: the summaries are most of an open's
        // work at 10,000 runs.
        let mut raw: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        backend
            .scan(Tree::Runs, &mut |k, v| {
                raw.push((k.to_vec(), v.to_vec()));
                Ok(())
            })
            .map_err(|e| damaged(format!("{e:#}")))?;
        let (runs, digests) = {
            use rayon::prelude::*;
            let decoded: Vec<(RunSummary, u64)> = raw
                .par_iter()
                .map(|(k, v)| {
                    let run = dec::<RunSummary>(v).map_err(|e| {
                        damaged(format!(
                            "unreadable run {}: {e}",
                            String::from_utf8_lossy(k)
                        ))
                    })?;
                    Ok((run, view::digest(v)))
                })
                .collect::<Result<_, StoreError>>()?;
            let digests = decoded.iter().map(|(r, d)| (r.key.clone(), *d)).collect();
            let runs: BTreeMap<String, RunSummary> = decoded
                .into_iter()
                .map(|(r, _)| (r.key.clone(), r))
                .collect();
            (runs, digests)
        };
        check_event_log(backend.as_ref()).map_err(&damaged)?;
        let next_seq = next_seq_of(backend.as_ref()).map_err(|e| damaged(e.to_string()))?;
        Ok(Store {
            dir: dir.to_path_buf(),
            backend: Arc::from(backend),
            runs,
            digests,
            plan,
            next_seq,
            life,
            copy: None,
        })
    }

    /// Check a store before a sweep writes on it: sled's own recovery truncates a damaged
    /// log at its first unreadable entry, on the files, as it opens them. So the checks of
    /// [`Store::open`] run first on a private copy; a store that fails them is refused with
    /// its files untouched. A store another process holds is left to `open` (it refuses).
    pub fn verify(dir: &Path) -> Result<(), StoreError> {
        if !dir.join("db").is_file() || held(dir) {
            return Ok(());
        }
        let copy = tempfile::Builder::new()
            .prefix("nightshift-verify-")
            .tempdir()
            .map_err(|e| StoreError::Damaged {
                dir: dir.to_path_buf(),
                why: format!("no room to check it first ({e})"),
            })?;
        copy_db(dir, copy.path()).map_err(|e| StoreError::Damaged {
            dir: dir.to_path_buf(),
            why: format!("its files cannot be read ({e})"),
        })?;
        match Store::open(copy.path(), false) {
            Err(StoreError::Damaged { why, .. }) => Err(StoreError::Damaged {
                dir: dir.to_path_buf(),
                why,
            }),
            _ => Ok(()),
        }
    }

    /// A reader of this store as it is now, for a query that may take a while (`results`,
    /// `show`, the digest at 10,000 runs): it shares the database and copies the run
    /// summaries (milliseconds), so the live store's lock is held only for the copy and
    /// the engine's writes never wait on a query's computation.
    pub fn reader(&self) -> Store {
        Store {
            dir: self.dir.clone(),
            backend: Arc::clone(&self.backend),
            runs: self.runs.clone(),
            digests: self.digests.clone(),
            plan: self.plan.clone(),
            next_seq: self.next_seq,
            life: self.life,
            copy: None,
        }
    }

    /// This store was opened from `copy`, a snapshot of the live store in `dir`.
    pub(crate) fn snapshot_of(mut self, dir: &Path, copy: PathBuf) -> Store {
        self.dir = dir.to_path_buf();
        self.copy = Some(TempCopy(copy));
        self
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub(crate) fn logs_dir(&self) -> PathBuf {
        self.dir.join("logs")
    }
    pub fn plan(&self) -> Option<&PlanSnapshot> {
        self.plan.as_ref()
    }
    /// Every run's summary (current state), by key. Cheap: loaded on open.
    pub fn runs(&self) -> &BTreeMap<String, RunSummary> {
        &self.runs
    }
    pub fn run(&self, key: &str) -> Option<&RunSummary> {
        self.runs.get(key)
    }
    pub fn life(&self) -> u32 {
        self.life
    }
    /// The seq the next appended event gets.
    pub(crate) fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Every run with its attempts and state history, derived from the event log.
    pub fn docs(&self) -> anyhow::Result<BTreeMap<String, RunDoc>> {
        let mut docs: BTreeMap<String, RunDoc> = self
            .runs
            .iter()
            .map(|(k, s)| (k.clone(), RunDoc::of_summary(s)))
            .collect();
        self.backend.scan(Tree::Events, &mut |k, v| {
            let seq = u64::from_be_bytes(k.try_into()?);
            let ev: StoredEvent = dec(v)?;
            if let Some(key) = &ev.key {
                if let (Some(d), Some(s)) = (docs.get_mut(key), self.runs.get(key)) {
                    d.apply(seq, &ev, s);
                }
            }
            Ok(())
        })?;
        Ok(docs)
    }

    /// Every run as the report reads it — one attempt, its folded record — from the run
    /// summaries loaded on open, without reading the event log: enough for `results` as a
    /// table, Markdown or HTML. Histories (every attempt) come from [`Store::docs`].
    pub fn summary_docs(&self) -> BTreeMap<String, RunDoc> {
        use rayon::prelude::*;
        // One clone of each summary's parts, on every core (10,000 runs: the read path of
        // `results`).
        let docs: Vec<(String, RunDoc)> = self
            .runs
            .par_iter()
            .map(|(k, s)| (k.clone(), summary_doc(k, s)))
            .collect();
        docs.into_iter().collect()
    }

    /// `docs` in plan order (removed runs last, by key).
    pub fn in_order<'a>(&self, docs: &'a BTreeMap<String, RunDoc>) -> Vec<&'a RunDoc> {
        let mut out: Vec<&RunDoc> = docs.values().collect();
        let order = |d: &RunDoc| self.runs.get(&d.key).map_or(u32::MAX, |s| s.order);
        // Cached: one summary lookup per run, not one per comparison (10,000 runs).
        out.sort_by_cached_key(|d| view::order_key(d.removed, order(d)));
        out
    }

    /// Count a new life of the sweep (a process that opened it to run).
    pub(crate) fn begin_life(&mut self) -> anyhow::Result<u32> {
        self.life += 1;
        self.backend
            .put(Tree::Meta, K_LIVES, &self.life.to_be_bytes())?;
        Ok(self.life)
    }

    /// The box's noise bands from `nightshift calibrate` (empty when never calibrated, or
    /// unreadable: a report then says "threshold uncalibrated" rather than failing).
    pub fn calibration(&self) -> crate::stats::Calibration {
        self.backend
            .get(Tree::Meta, K_CALIBRATION)
            .ok()
            .flatten()
            .and_then(|b| dec(&b).ok())
            .unwrap_or_default()
    }

    /// GPU time free while runs waited, over every life of the sweep (`report::idle`).
    pub fn idle(&self) -> Option<crate::report::idle::Idle> {
        let events = self.events().ok()?;
        Some(crate::report::idle::of(events.iter().map(|(_, s)| &s.env)))
    }

    /// The activity log (`report::activity`) from the event log, runs named by their key.
    pub fn activity(&self) -> Vec<crate::report::activity::Entry> {
        let Ok(events) = self.events() else {
            return Vec::new();
        };
        events
            .iter()
            .filter_map(|(_, s)| {
                let key = |r: crate::model::RunId| s.key.clone().unwrap_or_else(|| r.to_string());
                crate::report::activity::entry(&s.env, &key)
            })
            .collect()
    }

    /// Each commit's benchmark invocation decided so far (`rewrite::decisions`), with the
    /// command it was decided for: commit → (command, invocation).
    pub fn invocations(&self) -> BTreeMap<String, (String, crate::rewrite::Invocation)> {
        let mut m = BTreeMap::new();
        let _ = self.backend.scan(Tree::Meta, &mut |k, v| {
            if let Some(commit) = k.strip_prefix(K_INVOCATION) {
                // One unreadable decision is decided again, never a reason to stop.
                if let (Ok(c), Ok(d)) = (std::str::from_utf8(commit), dec::<Decided>(v)) {
                    m.insert(c.to_string(), (d.command, d.invocation));
                }
            }
            Ok(())
        });
        m
    }

    /// Keep a commit's invocation for `command`; the first kept stands until the plan
    /// gives the commit another command.
    pub(crate) fn put_invocation(
        &mut self,
        commit: &str,
        command: &str,
        inv: &crate::rewrite::Invocation,
    ) -> anyhow::Result<()> {
        let key = [K_INVOCATION, commit.as_bytes()].concat();
        let same = self
            .backend
            .get(Tree::Meta, &key)?
            .and_then(|b| dec::<Decided>(&b).ok())
            .is_some_and(|d| d.command == command);
        if !same {
            let d = Decided {
                command: command.to_string(),
                invocation: inv.clone(),
            };
            self.backend.put(Tree::Meta, &key, &enc(&d)?)?;
        }
        Ok(())
    }

    pub(crate) fn put_calibration(&mut self, c: &crate::stats::Calibration) -> anyhow::Result<()> {
        self.backend.put(Tree::Meta, K_CALIBRATION, &enc(c)?)?;
        self.backend.flush()
    }

    /// Save the plan snapshot without its run list: each run's summary holds its part, and
    /// one multi-megabyte value would be copied whole each time sled relocates it.
    pub(crate) fn put_plan(&mut self, mut snap: PlanSnapshot) -> anyhow::Result<()> {
        snap.runs.clear();
        self.backend.put(Tree::Meta, K_PLAN, &enc(&snap)?)?;
        self.plan = Some(snap);
        Ok(())
    }

    pub(crate) fn put_run(&mut self, run: RunSummary) -> anyhow::Result<()> {
        let bytes = enc(&run)?;
        self.backend.put(Tree::Runs, run.key.as_bytes(), &bytes)?;
        self.digests.insert(run.key.clone(), view::digest(&bytes));
        self.runs.insert(run.key.clone(), run);
        Ok(())
    }

    fn write_run(&mut self, key: &str) -> anyhow::Result<()> {
        if let Some(run) = self.runs.get(key) {
            let bytes = enc(run)?;
            self.backend.put(Tree::Runs, key.as_bytes(), &bytes)?;
            self.digests.insert(key.to_string(), view::digest(&bytes));
        }
        Ok(())
    }

    /// Append one event to the log (written once, never rewritten).
    pub(crate) fn append_event(
        &mut self,
        key: Option<String>,
        env: &Envelope,
        logs: Vec<LogFile>,
    ) -> anyhow::Result<u64> {
        let seq = self.next_seq;
        let ev = StoredEvent {
            life: self.life,
            key,
            env: env.clone(),
            logs,
        };
        self.backend
            .put(Tree::Events, &seq.to_be_bytes(), &enc(&ev)?)?;
        self.next_seq += 1;
        Ok(seq)
    }

    /// Every stored event, in order.
    pub fn events(&self) -> anyhow::Result<Vec<(u64, StoredEvent)>> {
        let mut v = Vec::new();
        self.backend.scan(Tree::Events, &mut |k, val| {
            let seq = u64::from_be_bytes(k.try_into()?);
            v.push((seq, dec(val)?));
            Ok(())
        })?;
        Ok(v)
    }

    pub fn flush(&self) -> anyhow::Result<()> {
        self.backend.flush()
    }
}

/// A run as the report reads it from its summary alone (see [`Store::summary_docs`]).
fn summary_doc(k: &str, s: &RunSummary) -> RunDoc {
    let ran_as = s.ran_as();
    let mut d = RunDoc::of_owned_record(ran_as.clone(), s.record.clone());
    d.key = k.to_string();
    if ran_as != &s.info {
        // The doc is the run as planned now; its attempt ran as planned then.
        if let Some(a) = d.attempts.first_mut() {
            a.info = Some(std::mem::replace(&mut d.info, s.info.clone()));
        } else {
            d.info = s.info.clone();
        }
    }
    d.predicted = s.predicted.clone();
    d.removed = s.removed;
    d
}

/// Upgrade a store written with an older schema, in place; each version adds one step here
/// and then records itself.
pub(crate) fn migrate(backend: &dyn Backend, from: u32) -> anyhow::Result<()> {
    // MIGRATIONS[i] upgrades schema version i + 1 to i + 2.
    const MIGRATIONS: &[fn(&dyn Backend) -> anyhow::Result<()>] = &[v1_to_v2];
    for v in from.max(1)..SCHEMA_VERSION {
        let step = MIGRATIONS
            .get(v as usize - 1)
            .ok_or_else(|| anyhow::anyhow!("no migration from schema version {v}"))?;
        step(backend)?;
        backend.put(Tree::Meta, K_SCHEMA, &(v + 1).to_be_bytes())?;
    }
    backend.flush()
}

/// v1 kept a whole [`RunDoc`] per run; v2 keeps its summary (the history is in the log).
fn v1_to_v2(backend: &dyn Backend) -> anyhow::Result<()> {
    let next = next_seq_of(backend)?;
    let order: BTreeMap<String, u32> = match backend.get(Tree::Meta, K_PLAN)? {
        Some(b) => dec::<PlanSnapshot>(&b)?
            .runs
            .iter()
            .enumerate()
            .map(|(i, r)| (r.key.clone(), i as u32))
            .collect(),
        None => BTreeMap::new(),
    };
    let mut runs = Vec::new();
    backend.scan(Tree::Runs, &mut |_, v| {
        let d: RunDoc = serde_json::from_slice(v)?;
        let ran_as = d.attempts.iter().rev().find_map(|a| a.info.clone());
        let mut s = RunSummary::new(d.info.clone());
        s.record = d.record;
        s.predicted = d.predicted;
        s.removed = d.removed;
        s.order = order.get(&s.key).copied().unwrap_or(u32::MAX);
        if let Some(old) = ran_as.filter(|i| *i != d.info) {
            s.earlier.push((next, old));
            s.last_start = Some(0);
        }
        runs.push(s);
        Ok(())
    })?;
    for s in runs {
        backend.put(Tree::Runs, s.key.as_bytes(), &enc(&s)?)?;
    }
    Ok(())
}
/// `$XDG_DATA_HOME/nightshift` (or `~/.local/share/nightshift`).
pub(crate) fn data_root() -> Option<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_DATA_HOME").filter(|x| !x.is_empty()) {
        return Some(PathBuf::from(x).join("nightshift"));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".local/share/nightshift"))
}

/// The default store of a sweep: `<data root>/<sweep name>`.
pub(crate) fn default_dir(sweep: &str) -> Option<PathBuf> {
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

/// Copy a store's database files (not its logs) into `to`: regular files and the
/// directories that hold them, nothing else. A live store holds the daemon's socket, and
/// a store may hold a FIFO or a link: copying a socket fails, reading a FIFO waits for a
/// writer, and a link is not followed (its target is not the store's). Only `from` is
/// read, so a read-only store is copied as well as any.
pub(crate) fn copy_db(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)?.flatten() {
        let name = e.file_name();
        if name == "logs" {
            continue;
        }
        // The entry's own type (links are not followed).
        let kind = e.file_type()?;
        if kind.is_dir() {
            copy_db(&e.path(), &to.join(&name))?;
        } else if kind.is_file() {
            copy_file(&e.path(), &to.join(&name))?;
        }
    }
    Ok(())
}

/// Copy one regular file of a store. Opened without following a link and without waiting
/// on a FIFO (the entry may have been replaced since it was listed), and checked to be a
/// regular file once open. The copy is its owner's to write whatever the original's mode:
/// the database engine opens its files for writing.
fn copy_file(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut src = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(from)?;
    if !src.metadata()?.is_file() {
        return Ok(());
    }
    let mut dst = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(to)?;
    std::io::copy(&mut src, &mut dst)?;
    Ok(())
}
