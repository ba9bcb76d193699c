//! `nightshift salvage`: export what is still readable from a store the database engine
//! refuses to open, so a damaged store never costs the night's results.
//!
//! First try the database itself on a private copy (sled recovers a copy as after a crash,
//! which is enough when only the original's lock or permissions are in the way). If that
//! fails, scan the database files' raw bytes: values are compact JSON (see `enc` in the
//! store), so run summaries, events and the plan snapshot can be found and decoded where
//! they lie, whatever the engine's own structures around them look like. A log-structured
//! file holds older versions of a run's summary too; the one furthest along wins.

use super::{Store, StoredEvent};
use crate::record::{PlanSnapshot, RunSummary};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// The database opened (from a copy): everything it holds.
    Database,
    /// The database did not open: records found in its files' bytes.
    RawScan,
}

#[derive(Debug)]
pub struct Salvaged {
    pub method: Method,
    pub plan: Option<PlanSnapshot>,
    pub runs: Vec<RunSummary>,
    /// Ordered by sequence number, each once.
    pub events: Vec<(u64, StoredEvent)>,
}

/// Salvage `dir`, never writing to it.
pub fn salvage(dir: &Path) -> anyhow::Result<Salvaged> {
    if let Some(s) = from_copy(dir) {
        return Ok(s);
    }
    raw_scan(dir)
}

fn from_copy(dir: &Path) -> Option<Salvaged> {
    let copy = std::env::temp_dir().join(format!("nightshift-salvage-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&copy);
    let opened = super::copy_db(dir, &copy)
        .ok()
        .and_then(|_| Store::open(&copy, false).ok())
        .and_then(|store| {
            let events = store.events().ok()?;
            Some(Salvaged {
                method: Method::Database,
                plan: store.plan().cloned(),
                runs: store.runs().values().cloned().collect(),
                events,
            })
        });
    let _ = std::fs::remove_dir_all(&copy);
    opened
}

/// The database's files: everything in the store but the logs, our own runtime files and
/// what reads keep (`view.*`, derived from the rest).
fn db_files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)?.flatten() {
        let name = e.file_name();
        if name == "logs"
            || name == "nightshift.sock"
            || name == "daemon.log"
            || name.to_string_lossy().starts_with("view.")
        {
            continue;
        }
        let ty = e.file_type()?;
        if ty.is_dir() {
            db_files(&e.path(), out)?;
        } else if ty.is_file() {
            out.push(e.path());
        }
    }
    Ok(())
}

fn raw_scan(dir: &Path) -> anyhow::Result<Salvaged> {
    let mut files = Vec::new();
    db_files(dir, &mut files).map_err(|e| anyhow::anyhow!("cannot list {}: {e}", dir.display()))?;
    files.sort();
    let mut found = Found::default();
    for f in &files {
        // An unreadable file is one less source, not the end of the salvage.
        if let Ok(bytes) = std::fs::read(f) {
            found.scan(&bytes);
        }
    }
    let mut runs: Vec<RunSummary> = found.runs.into_values().collect();
    runs.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(Salvaged {
        method: Method::RawScan,
        plan: found.plan,
        runs,
        events: found.events.into_iter().collect(),
    })
}

#[derive(Default)]
struct Found {
    plan: Option<PlanSnapshot>,
    runs: BTreeMap<String, RunSummary>,
    events: BTreeMap<u64, StoredEvent>,
}

/// How far along a run's summary is: a later version has started more attempts or ended.
fn progress(r: &RunSummary) -> (Option<u64>, u32, bool, Option<u64>) {
    (
        r.last_start,
        r.record.attempt,
        r.record.state.is_terminal(),
        r.record.finished_ms,
    )
}

impl Found {
    fn scan(&mut self, bytes: &[u8]) {
        for start in memchr::memchr_iter(b'{', bytes) {
            let rest = &bytes[start..];
            if rest.starts_with(br#"{"key":""#) {
                if let Some(run) = first::<RunSummary>(rest) {
                    self.add_run(run);
                }
            } else if rest.starts_with(br#"{"life":"#) {
                if let Some(ev) = first::<StoredEvent>(rest) {
                    self.events.entry(ev.env.seq).or_insert(ev);
                }
            } else if rest.starts_with(br#"{"name":""#) {
                if let Some(plan) = first::<PlanSnapshot>(rest) {
                    if self
                        .plan
                        .as_ref()
                        .is_none_or(|p| p.saved_ms <= plan.saved_ms)
                    {
                        self.plan = Some(plan);
                    }
                }
            }
        }
    }

    fn add_run(&mut self, run: RunSummary) {
        match self.runs.get(&run.key) {
            Some(have) if progress(have) > progress(&run) => {}
            _ => {
                self.runs.insert(run.key.clone(), run);
            }
        }
    }
}

/// The one JSON value that starts `bytes`, if it decodes as `T`.
fn first<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Option<T> {
    serde_json::Deserializer::from_slice(bytes)
        .into_iter::<T>()
        .next()?
        .ok()
}

/// Write the salvage as JSON Lines: a header line, the plan, then runs and events, each with
/// a `salvaged` field naming what it is (`salvage`, `plan`, `run`, `event`).
pub(crate) fn write_jsonl(s: &Salvaged, dir: &Path, out: &mut dyn Write) -> anyhow::Result<()> {
    let line = |out: &mut dyn Write, kind: &str, v: serde_json::Value| -> anyhow::Result<()> {
        let mut obj = serde_json::Map::new();
        obj.insert("salvaged".into(), kind.into());
        match v {
            serde_json::Value::Object(m) => obj.extend(m),
            other => {
                obj.insert("value".into(), other);
            }
        }
        serde_json::to_writer(&mut *out, &obj)?;
        out.write_all(b"\n")?;
        Ok(())
    };
    line(
        out,
        "salvage",
        serde_json::json!({
            "store": dir.display().to_string(),
            "method": s.method,
            "runs": s.runs.len(),
            "events": s.events.len(),
            "plan": s.plan.is_some(),
            "logs": dir.join("logs").display().to_string(),
        }),
    )?;
    if let Some(p) = &s.plan {
        line(out, "plan", serde_json::to_value(p)?)?;
    }
    for r in &s.runs {
        line(out, "run", serde_json::to_value(r)?)?;
    }
    for (seq, e) in &s.events {
        let mut v = serde_json::to_value(e)?;
        if let serde_json::Value::Object(m) = &mut v {
            m.insert("seq".into(), (*seq).into());
        }
        line(out, "event", v)?;
    }
    Ok(())
}

/// `nightshift salvage`: exit 0 with something salvaged, 1 with nothing, 2 on bad usage.
pub fn main(dir: &Path, out: Option<&Path>) -> i32 {
    if !dir.is_dir() {
        tracing::error!("no store at {}", dir.display());
        tracing::error!("no store at {}", dir.display());
        return 2;
    }
    let s = match salvage(dir) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("{e:#}");
            return 1;
        }
    };
    let written = match out {
        Some(path) => std::fs::File::create(path)
            .map_err(anyhow::Error::from)
            .and_then(|f| {
                let mut w = std::io::BufWriter::new(f);
                write_jsonl(&s, dir, &mut w)?;
                w.flush()?;
                Ok(())
            }),
        None => write_jsonl(&s, dir, &mut std::io::stdout().lock()),
    };
    if let Err(e) = written {
        tracing::error!("writing the salvage: {e:#}");
        return 2;
    }
    eprintln!(
        "salvaged {} runs, {} events{} from {} ({}); the full logs under {} are untouched",
        s.runs.len(),
        s.events.len(),
        if s.plan.is_some() {
            " and the plan"
        } else {
            ""
        },
        dir.display(),
        match s.method {
            Method::Database => "the database opened from a copy",
            Method::RawScan => "the database did not open: records read from its files",
        },
        dir.join("logs").display(),
    );
    if s.runs.is_empty() && s.events.is_empty() {
        1
    } else {
        0
    }
}
