//! The application's commands against a store: `run` with a store (resume), `results`,
//! `show`, `digest`, `bench store`. The daemon layer wires plan, engine, store and clients;
//! `src/cli.rs` only routes.

pub use super::results::results_text;
use crate::category::Category;
use crate::engine::{Engine, EngineOptions};
use crate::plan::Plan;
use crate::report;
use crate::report::show;
use crate::runtime::Runtime;
use crate::store::resume::{self, ResumeOptions};
use crate::store::{Store, StoreError};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

pub struct RunArgs {
    pub plan: Arc<Plan>,
    pub runtime: Arc<dyn Runtime>,
    pub gpus: u32,
    pub seed: u64,
    pub store: Option<PathBuf>,
    pub log_dir: Option<PathBuf>,
    /// The free space (MiB) below which the sweep pauses (store and run logs).
    pub min_free_mib: u64,
    /// `--until` and `--start-late`.
    pub window: Option<(crate::window::Until, bool)>,
    /// `--retry-failed [CATEGORY]`: `Some(None)` for every category.
    pub retry_failed: Option<Option<String>>,
    pub rerun_changed: bool,
    /// Scales policy delays to the runtime's clock (see `Engine::with_time_scale`).
    pub time_scale: f64,
    /// Disk budget and keep list for prefetch and eviction.
    pub budget: crate::images::Budget,
    /// Where the daemon's alerts go, and how often.
    pub alerts: (crate::alerts::Targets, crate::alerts::Limits),
    /// The operator's policy, catalog and recipes: one of each, shared by engine and runtime.
    pub overrides: crate::overrides::Overrides,
}

pub(crate) fn store_error(e: &StoreError) -> i32 {
    tracing::error!("{e}");
    2
}

/// Open the store of a sweep for running it; exit code on failure.
pub(crate) fn open_for_run(dir: &Path, plan: &Plan) -> Result<Store, i32> {
    Store::verify(dir).map_err(|e| store_error(&e))?;
    let store = Store::open(dir, true).map_err(|e| store_error(&e))?;
    if let Some(p) = store.plan() {
        if p.name != plan.name {
            return Err(store_error(&StoreError::OtherSweep {
                dir: dir.to_path_buf(),
                found: p.name.clone(),
                wanted: plan.name.clone(),
            }));
        }
    }
    Ok(store)
}

pub(crate) fn resolve_dir(store: Option<PathBuf>, sweep: &str) -> Result<PathBuf, i32> {
    match store.or_else(|| crate::store::default_dir(sweep)) {
        Some(d) => Ok(d),
        None => {
            tracing::error!("no store directory: set XDG_DATA_HOME or HOME, or pass --store DIR");
            Err(2)
        }
    }
}

/// What a run (headless or TUI) starts from: the store's observer, the resumed state and
/// where the full logs go.
pub struct Prepared {
    pub obs: crate::store::StoreObserver,
    pub state: crate::state::SweepState,
    pub log_dir: PathBuf,
    /// The pause the sweep's last life ended in (see `store::pause`).
    pub ended_pause: Option<crate::store::pause::StoredPause>,
}

/// Open (or create) the sweep's store, apply `--retry-failed` / `--rerun-changed`, and say
/// what resuming found. Errors are printed; the `Err` is the exit status.
pub(crate) fn prepare_run(a: &RunArgs) -> Result<Prepared, i32> {
    let retry_failed = match &a.retry_failed {
        None => None,
        Some(None) => Some(None),
        Some(Some(c)) if c == "all" || c.is_empty() => Some(None),
        Some(Some(c)) => match c.parse::<Category>() {
            Ok(c) => Some(Some(c)),
            Err(e) => {
                tracing::error!("--retry-failed: {e}");
                return Err(2);
            }
        },
    };
    let dir = resolve_dir(a.store.clone(), &a.plan.name)?;
    let store = open_for_run(&dir, &a.plan)?;
    let opts = ResumeOptions {
        retry_failed,
        rerun_changed: a.rerun_changed,
    };
    let (obs, state, rep) = match resume::prepare(store, &a.plan, &opts) {
        Ok(x) => x,
        Err(e) => {
            tracing::error!("store {}: {e:#}", dir.display());
            return Err(2);
        }
    };
    let log_dir = a.log_dir.clone().unwrap_or_else(|| obs.logs_dir());
    // The run logs' directory is tried now, not at the first run's first line at 3 a.m.
    if let Err(e) = usable_dir(&log_dir) {
        tracing::error!("run log directory {}: {e}", log_dir.display());
        return Err(2);
    }
    crate::daemon::console::say(format_args!("store {}", dir.display()));
    for l in rep.lines() {
        crate::daemon::console::say(l);
    }
    let obs = obs.log_dir(Some(log_dir.clone()));
    Ok(Prepared {
        obs,
        state,
        log_dir,
        ended_pause: rep.ended_pause,
    })
}

/// A directory the night will write into: made if missing, and a file created and removed
/// in it.
fn usable_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    if !dir.is_dir() {
        return Err(std::io::Error::other("not a directory"));
    }
    let probe = dir.join(format!(".nightshift-probe-{}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)?;
    std::fs::remove_file(&probe)
}

/// The store for `results`/`show`/`digest`: `--store`, else the only sweep under the data
/// root. A reader never takes the writer's lock (sled's is exclusive: a `results` in a
/// loop would refuse every `run`): it reads a snapshot of the database taken now. Only
/// when no snapshot opens is the store itself opened, for its own error.
pub(crate) fn find_store(store: Option<PathBuf>) -> Result<Store, i32> {
    let dir = find_dir(store)?;
    if let Some(s) = snapshot(&dir) {
        return Ok(s);
    }
    // No snapshot opened: the store's own error, without letting sled's recovery touch it.
    Store::verify(&dir).map_err(|e| store_error(&e))?;
    match Store::open(&dir, false) {
        Err(e @ StoreError::Locked { .. }) => {
            open_snapshot(&dir, "is in use by a running sweep", e)
        }
        Err(e @ StoreError::ReadOnly { .. }) => open_snapshot(&dir, "is read-only", e),
        other => other.map_err(|e| store_error(&e)),
    }
}

/// A snapshot of the store at `dir` opened from a private copy, when it is a store.
pub(crate) fn snapshot(dir: &Path) -> Option<Store> {
    if !dir.join("db").is_file() {
        return None;
    }
    let copy = tempfile::Builder::new()
        .prefix("nightshift-snapshot-")
        .tempdir()
        .ok()?
        .keep();
    match crate::store::copy_db(dir, &copy)
        .ok()
        .and_then(|_| Store::open(&copy, false).ok())
    {
        Some(s) => Some(s.snapshot_of(dir, copy)),
        None => {
            let _ = std::fs::remove_dir_all(&copy);
            None
        }
    }
}

/// The store directory a command means: `--store`, else the only sweep under the data root.
pub(crate) fn find_dir(store: Option<PathBuf>) -> Result<PathBuf, i32> {
    Ok(match store {
        Some(d) => d,
        None => {
            let Some(root) = crate::store::data_root() else {
                tracing::error!("pass --store DIR (no XDG_DATA_HOME or HOME)");
                return Err(2);
            };
            let mut sweeps: Vec<PathBuf> = std::fs::read_dir(&root)
                .map(|d| {
                    d.flatten()
                        .map(|e| e.path())
                        .filter(|p| p.is_dir())
                        .collect()
                })
                .unwrap_or_default();
            sweeps.sort();
            match sweeps.len() {
                1 => sweeps.remove(0),
                0 => {
                    tracing::error!("no sweeps under {} (pass --store DIR)", root.display());
                    return Err(2);
                }
                _ => {
                    tracing::error!(
                        "several sweeps under {}; pass --store DIR, one of:",
                        root.display()
                    );
                    for s in sweeps {
                        eprintln!("  {}", s.display());
                    }
                    return Err(2);
                }
            }
        }
    })
}

/// A store in use by a running sweep (sled holds it exclusively) is read from a copy of its
/// database files taken now. The copy is not atomic, but sled recovers it as it would after
/// a crash: to the last complete write. If that fails, say the store is in use.
/// A read-only store is read the same way: sled cannot open files it may not write.
fn open_snapshot(dir: &Path, why: &str, refused: StoreError) -> Result<Store, i32> {
    for _ in 0..3 {
        // A fresh private directory each time: nothing planted in /tmp is written through.
        let Ok(copy) = tempfile::Builder::new()
            .prefix("nightshift-snapshot-")
            .tempdir()
            .map(|d| d.keep())
        else {
            continue;
        };
        let opened = crate::store::copy_db(dir, &copy)
            .ok()
            .and_then(|_| Store::open(&copy, false).ok());
        match opened {
            Some(s) => {
                tracing::info!(
                    "store {} {why}; showing a snapshot taken now",
                    dir.display()
                );
                return Ok(s.snapshot_of(dir, copy));
            }
            None => {
                let _ = std::fs::remove_dir_all(&copy);
            }
        }
    }
    Err(store_error(&refused))
}

/// `results --format`: `json` is one document, `jsonl` one results record per line.
pub const FORMATS: &[&str] = &["table", "json", "jsonl", "csv", "md", "html"];

/// `results`' arguments checked before any store is opened: Err is the message and exit 2.
pub(crate) fn check_results_args(format: &str, filter: Option<&str>) -> Result<(), String> {
    report::parse_filter(filter.unwrap_or("")).map_err(|e| format!("--filter: {e}"))?;
    // `table:N`: the table for N columns (the client's terminal).
    let narrow = format
        .strip_prefix("table:")
        .is_some_and(|w| w.parse::<u16>().is_ok_and(|w| w >= 40));
    if !FORMATS.contains(&format) && !narrow {
        return Err(format!(
            "--format `{format}` (expected one of: {})",
            FORMATS.join(", ")
        ));
    }
    Ok(())
}

/// `results` over an open store (this process's, or the live daemon's).
pub(crate) fn results_for(
    store: &Store,
    format: &str,
    filter: Option<&str>,
    judge: report::Judge,
) -> Result<String, (i32, String)> {
    check_results_args(format, filter).map_err(|e| (2, e))?;
    judge.check().map_err(|e| (2, e))?;
    let filter = report::parse_filter(filter.unwrap_or("")).map_err(|e| (2, e.to_string()))?;
    results_text(store, format, &filter, judge)
        .map_err(|e| (2, format!("store {}: {e:#}", store.dir().display())))
}

/// `show` over an open store.
pub(crate) fn show_for(store: &Store, what: &str, json: bool) -> Result<String, (i32, String)> {
    let all = store
        .docs()
        .map_err(|e| (2, format!("store {}: {e:#}", store.dir().display())))?;
    let docs = store.in_order(&all);
    let sel = show::select(&docs, what);
    if sel.is_empty() {
        return Err((
            2,
            format!("no run or commit `{what}` in {}", store.dir().display()),
        ));
    }
    let groups = super::results::groups_of(store);
    if json {
        return Ok(show::render_json_in(&sel, &groups));
    }
    let mut text = show::render_in(&sel, &groups);
    // Who acted on these runs, and what the policy decided for them.
    let keys: std::collections::HashSet<&str> = sel.iter().map(|d| d.info.key.as_str()).collect();
    let mine: Vec<_> = store
        .activity()
        .into_iter()
        .filter(|e| e.what.split_whitespace().any(|w| keys.contains(w)))
        .collect();
    if !mine.is_empty() {
        text.push_str("activity (UTC):\n");
        for e in &mine {
            text.push_str(&format!(
                "  {}\n",
                crate::sanitize::terminal(&crate::report::activity::line(e))
            ));
        }
    }
    Ok(text)
}

/// `results --group ID`: one failure group and its runs.
pub(crate) fn group_for(store: &Store, id: &str) -> Result<String, (i32, String)> {
    let groups = super::results::groups_of(store);
    let g = report::groups::find(&groups, id).map_err(|e| (2, e))?;
    let members: Vec<report::groups::Member> = store
        .runs()
        .values()
        .map(report::groups::Member::of_summary)
        .collect();
    Ok(report::groups::render_detail(g, &members))
}

/// Print a query's answer: the text, or the error with its exit status.
pub fn answer(r: Result<String, (i32, String)>) -> i32 {
    match r {
        Ok(text) => out(&text),
        Err((code, e)) => {
            tracing::error!("{e}");
            code
        }
    }
}

pub fn results(
    store: Option<PathBuf>,
    format: &str,
    filter: Option<&str>,
    judge: report::Judge,
) -> i32 {
    if let Err(e) = check_results_args(format, filter).and_then(|_| judge.check()) {
        tracing::error!("{e}");
        return 2;
    }
    let store = match find_store(store) {
        Ok(s) => s,
        Err(c) => return c,
    };
    answer(results_for(&store, format, filter, judge))
}

/// Write to stdout; a closed pipe (`| head`) is not an error.
fn out(text: &str) -> i32 {
    use std::io::Write;
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
    0
}

/// The morning digest of an open store, as Markdown or one HTML page.
pub(crate) fn digest_for(store: &Store, format: &str) -> Result<String, (i32, String)> {
    let all = store
        .docs()
        .map_err(|e| (2, format!("store {}: {e:#}", store.dir().display())))?;
    let docs = store.in_order(&all);
    let name = store.plan().map_or("sweep", |p| p.name.as_str());
    // Judged as `results` judges by default, with the box's calibration.
    let mut opts = report::Options::of(report::Judge::default());
    opts.calibration = store.calibration();
    let mut d = crate::digest::build(name, &docs, &opts, crate::event::now_ms());
    d.activity = store.activity();
    d.idle = store.idle();
    match format {
        "md" => Ok(crate::digest::markdown(&d)),
        "html" => Ok(crate::digest::html::render(&d)),
        f => Err((2, format!("--format `{f}` (expected md or html)"))),
    }
}

/// Write the digest next to the store (`digest.md`, `digest.html`): the sweep's end does this.
pub(crate) fn write_digest(store: &Store) -> anyhow::Result<(PathBuf, PathBuf)> {
    let md = store.dir().join("digest.md");
    let html = store.dir().join("digest.html");
    for (path, format) in [(&md, "md"), (&html, "html")] {
        let text = digest_for(store, format).map_err(|(_, e)| anyhow::anyhow!(e))?;
        std::fs::write(path, text)?;
    }
    Ok((md, html))
}

pub(crate) fn show_cmd(store: Option<PathBuf>, what: &str, json: bool) -> i32 {
    let store = match find_store(store) {
        Ok(s) => s,
        Err(c) => return c,
    };
    answer(show_for(&store, what, json))
}

fn dir_bytes(p: &Path) -> u64 {
    std::fs::read_dir(p)
        .map(|d| {
            d.flatten()
                .map(|e| match e.metadata() {
                    Ok(m) if m.is_dir() => dir_bytes(&e.path()),
                    Ok(m) => m.len(),
                    Err(_) => 0,
                })
                .sum()
        })
        .unwrap_or(0)
}

/// `nightshift bench store --runs N`: a sim sweep of N runs at max speed into a fresh store
/// under `$TMPDIR`, with the real durability (a flush per state transition); then the bytes
/// on disk, the open time after close, `results` times (table, json) and bytes again.
pub fn bench(runs: usize, keep: Option<&Path>) -> i32 {
    if let Some(dir) = keep {
        if dir.join("db").is_file() {
            return bench_reads(dir);
        }
        // Serving runs: the most metrics per run, and the kind every parser build reads.
        let plan = Arc::new(crate::plan::synthetic::synthetic_plan_of(
            runs,
            &["serving"],
        ));
        return bench_in(&plan, dir);
    }
    let plan = Arc::new(crate::plan::synthetic::synthetic_plan_of(
        runs,
        &["serving"],
    ));
    let tmp = std::env::temp_dir().join(format!("nightshift-bench-store-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let code = bench_in(&plan, &tmp);
    let _ = std::fs::remove_dir_all(&tmp);
    code
}

/// Open and `results` on a kept bench store, five times each (the median and the range:
/// the first read may find the files out of the page cache, or rebuild the kept rows when
/// the build changed).
fn bench_reads(dir: &Path) -> i32 {
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
    let (mut open, mut table, mut md, mut jsonl) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut runs = 0;
    for _ in 0..5 {
        let t = Instant::now();
        let store = match Store::open(dir, false) {
            Ok(s) => s,
            Err(e) => return store_error(&e),
        };
        open.push(ms(t.elapsed()));
        runs = store.runs().len();
        for (format, into) in [
            ("table", &mut table),
            ("md", &mut md),
            ("jsonl", &mut jsonl),
        ] {
            let t = Instant::now();
            if let Err(e) = results_text(&store, format, &[], report::Judge::default()) {
                tracing::error!("{e:#}");
                return 1;
            }
            into.push(ms(t.elapsed()));
        }
    }
    let line = |name: &str, v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        println!(
            "  {name:<18} {:.1} ms (median of {}; {:.1}–{:.1})",
            v[v.len() / 2],
            v.len(),
            v[0],
            v[v.len() - 1]
        );
    };
    println!("store bench (reads): {runs} runs in {}", dir.display());
    line("open", &mut open);
    line("results (table)", &mut table);
    line("results (md)", &mut md);
    line("results (jsonl)", &mut jsonl);
    0
}

/// Fill a fresh store at `dir` with a sim sweep of `plan` at max speed (8 GPUs), with the
/// real durability (a flush per state transition): what the store benches read.
pub(crate) fn fill_store(plan: &Arc<Plan>, dir: &Path) -> Result<std::time::Duration, i32> {
    let t0 = Instant::now();
    let store = Store::open(dir, true).map_err(|e| store_error(&e))?;
    let (obs, state, _) = resume::prepare(store, plan, &ResumeOptions::default()).map_err(|e| {
        tracing::error!("{e:#}");
        1
    })?;
    let obs = obs.log_dir(None);
    let res = crate::rt::block_on(async {
        let (engine, _c) = Engine::new(
            plan.clone(),
            Arc::new(crate::runtime::sim::SimRuntime::new(
                crate::runtime::sim::Speed::Max,
            )),
            EngineOptions {
                gpus: 8,
                seed: 1,
                wait_for_operator: false,
            },
        );
        let mut engine = engine.with_state(state).with_time_scale(0.0);
        engine.observe(Box::new(obs));
        engine.run(CancellationToken::new()).await
    });
    // The engine drops its observers (and so the store) when the sweep ends.
    if let Err(e) = res {
        tracing::error!("{e:#}");
        return Err(1);
    }
    Ok(t0.elapsed())
}

fn bench_in(plan: &Arc<Plan>, tmp: &Path) -> i32 {
    let n = plan.runs.len();
    let fill = match fill_store(plan, tmp) {
        Ok(d) => d,
        Err(c) => return c,
    };
    let bytes_end = dir_bytes(tmp);
    let t1 = Instant::now();
    let store = match Store::open(tmp, false) {
        Ok(s) => s,
        Err(e) => return store_error(&e),
    };
    let open = t1.elapsed();
    let bytes_reopen = dir_bytes(tmp);
    let timed = |format: &str| {
        let t = Instant::now();
        let text = results_text(&store, format, &[], report::Judge::default());
        (
            t.elapsed(),
            text.unwrap_or_else(|e| format!("error: {e:#}")),
        )
    };
    let (t_table, table) = timed("table");
    // Every attempt's record: the event log is read (histories only when asked).
    let (t_json, json) = timed("jsonl");
    let events = store.events().map(|e| e.len()).unwrap_or(0);
    drop(store);
    let bytes_close = dir_bytes(tmp);
    let mib = |b: u64| {
        format!(
            "{:.1} MiB, {:.0} bytes/run",
            b as f64 / 1048576.0,
            b as f64 / n as f64
        )
    };
    println!(
        "store bench: {n} runs, {events} events stored in {:.2}s (sim at max speed, flushed on every state transition)",
        fill.as_secs_f64()
    );
    println!(
        "  fill               {:.2} s ({:.2} ms/run)",
        fill.as_secs_f64(),
        fill.as_secs_f64() * 1000.0 / n as f64
    );
    println!("  open               {:.1} ms", open.as_secs_f64() * 1000.0);
    println!(
        "  results (table)    {:.1} ms ({} bytes; every row built and kept)",
        t_table.as_secs_f64() * 1000.0,
        table.len()
    );
    println!(
        "  results (jsonl)    {:.1} ms ({} records)",
        t_json.as_secs_f64() * 1000.0,
        json.lines().count()
    );
    println!("  on disk, sweep end {}", mib(bytes_end));
    println!("  on disk, reopened  {}", mib(bytes_reopen));
    println!("  on disk, closed    {}", mib(bytes_close));
    0
}
