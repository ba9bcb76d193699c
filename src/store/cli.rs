//! The store side of the CLI: `run` with a store (resume), `results`, `show`, `bench store`.
//! Kept here so `src/cli.rs` only routes.

use super::resume::{self, ResumeOptions};
use super::{report, show, Store, StoreError};
use crate::category::Category;
use crate::engine::{Engine, EngineOptions};
use crate::plan::Plan;
use crate::runtime::Runtime;
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
    /// `--retry-failed [CATEGORY]`: `Some(None)` for every category.
    pub retry_failed: Option<Option<String>>,
    pub rerun_changed: bool,
    /// Scales policy delays to the runtime's clock (see `Engine::with_time_scale`).
    pub time_scale: f64,
}

fn store_error(e: &StoreError) -> i32 {
    eprintln!("error: {e}");
    2
}

/// Open the store of a sweep for running it; exit code on failure.
pub fn open_for_run(dir: &Path, plan: &Plan) -> Result<Store, i32> {
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

pub fn resolve_dir(store: Option<PathBuf>, sweep: &str) -> Result<PathBuf, i32> {
    match store.or_else(|| super::default_dir(sweep)) {
        Some(d) => Ok(d),
        None => {
            eprintln!("error: no store directory: set XDG_DATA_HOME or HOME, or pass --store DIR");
            Err(2)
        }
    }
}

/// `nightshift run PLAN --headless` with a store: start or resume the sweep.
pub fn run_headless(a: RunArgs) -> i32 {
    let retry_failed = match &a.retry_failed {
        None => None,
        Some(None) => Some(None),
        Some(Some(c)) if c == "all" || c.is_empty() => Some(None),
        Some(Some(c)) => match c.parse::<Category>() {
            Ok(c) => Some(Some(c)),
            Err(e) => {
                eprintln!("error: --retry-failed: {e}");
                return 2;
            }
        },
    };
    let dir = match resolve_dir(a.store.clone(), &a.plan.name) {
        Ok(d) => d,
        Err(c) => return c,
    };
    let store = match open_for_run(&dir, &a.plan) {
        Ok(s) => s,
        Err(c) => return c,
    };
    let opts = ResumeOptions {
        retry_failed,
        rerun_changed: a.rerun_changed,
    };
    let plan = a.plan.clone();
    let (obs, state, rep) = match resume::prepare(store, &plan, &opts) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("error: store {}: {e:#}", dir.display());
            return 2;
        }
    };
    println!("store {}", dir.display());
    for l in rep.lines() {
        println!("{l}");
    }
    let log_dir = a.log_dir.clone().unwrap_or_else(|| obs.store().logs_dir());
    let obs = obs.log_dir(Some(log_dir.clone()));
    let tokio_rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    tokio_rt.block_on(async move {
        let (engine, _cmds) = Engine::new(
            plan.clone(),
            a.runtime,
            EngineOptions {
                gpus: a.gpus,
                seed: a.seed,
                wait_for_operator: false,
            },
        );
        let mut engine = engine.with_state(state).with_time_scale(a.time_scale);
        engine.observe(Box::new(crate::headless::Printer::new(
            plan.clone(),
            std::io::stdout(),
        )));
        let keys = plan.runs.iter().map(|r| r.key.clone()).collect();
        // Logs first: their files are closed (sizes final) before the store records them.
        engine.observe(Box::new(crate::engine::logs::LogWriter::new(log_dir, keys)));
        engine.observe(Box::new(obs));
        let shutdown = CancellationToken::new();
        crate::cli::spawn_signal_handler(shutdown.clone());
        match engine.run(shutdown).await {
            Ok((summary, _state)) => {
                let _ = crate::headless::print_summary(&mut std::io::stdout(), &plan, &summary);
                if summary.interrupted || summary.paused.is_some() || summary.counts.queued > 0 {
                    1
                } else {
                    0
                }
            }
            Err(e) => {
                eprintln!("error: {e:#}");
                1
            }
        }
    })
}

/// The store for `results`/`show`: `--store`, else the only sweep under the data root.
pub fn find_store(store: Option<PathBuf>) -> Result<Store, i32> {
    let dir = match store {
        Some(d) => d,
        None => {
            let Some(root) = super::data_root() else {
                eprintln!("error: pass --store DIR (no XDG_DATA_HOME or HOME)");
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
                    eprintln!(
                        "error: no sweeps under {} (pass --store DIR)",
                        root.display()
                    );
                    return Err(2);
                }
                _ => {
                    eprintln!(
                        "error: several sweeps under {}; pass --store DIR, one of:",
                        root.display()
                    );
                    for s in sweeps {
                        eprintln!("  {}", s.display());
                    }
                    return Err(2);
                }
            }
        }
    };
    Store::open(&dir, false).map_err(|e| store_error(&e))
}

pub fn results(store: Option<PathBuf>, format: &str, filter: Option<&str>, threshold: f64) -> i32 {
    let filter = match report::parse_filter(filter.unwrap_or("")) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: --filter: {e}");
            return 2;
        }
    };
    if !["table", "json", "csv", "md"].contains(&format) {
        eprintln!("error: --format `{format}` (expected table, json, csv or md)");
        return 2;
    }
    let store = match find_store(store) {
        Ok(s) => s,
        Err(c) => return c,
    };
    let text = results_text(&store, format, &filter, threshold);
    out(&text)
}

/// Write to stdout; a closed pipe (`| head`) is not an error.
fn out(text: &str) -> i32 {
    use std::io::Write;
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
    0
}

pub fn results_text(
    store: &Store,
    format: &str,
    filter: &[(String, bool, String)],
    threshold: f64,
) -> String {
    let docs: Vec<_> = store
        .docs_in_order()
        .into_iter()
        .filter(|d| report::matches(d, filter))
        .collect();
    match format {
        "json" => report::render_json(&docs),
        "csv" => report::render_csv(&docs),
        "md" => report::render_md(&report::build(&docs, threshold)),
        _ => report::render_table(&report::build(&docs, threshold)),
    }
}

pub fn show_cmd(store: Option<PathBuf>, what: &str) -> i32 {
    let store = match find_store(store) {
        Ok(s) => s,
        Err(c) => return c,
    };
    let docs = store.docs_in_order();
    let sel = show::select(&docs, what);
    if sel.is_empty() {
        eprintln!(
            "error: no run or commit `{what}` in {}",
            store.dir().display()
        );
        return 2;
    }
    out(&show::render(&sel))
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
/// (flushing only at the end), then the open time, `results` time and bytes per run.
pub fn bench(runs: usize) -> i32 {
    let plan = Arc::new(crate::bench::synthetic_plan(runs));
    let tmp = std::env::temp_dir().join(format!("nightshift-bench-store-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let store = match Store::open(&tmp, true) {
        Ok(s) => s,
        Err(e) => return store_error(&e),
    };
    let t0 = Instant::now();
    let (obs, state, _) = match resume::prepare(store, &plan, &ResumeOptions::default()) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("error: {e:#}");
            return 1;
        }
    };
    let obs = obs.durability(super::Durability::AtEnd).log_dir(None);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio");
    let res = rt.block_on(async {
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
    if let Err(e) = res {
        eprintln!("error: {e:#}");
        return 1;
    }
    let fill = t0.elapsed();
    let n = plan.runs.len();
    let t1 = Instant::now();
    let store = match Store::open(&tmp, false) {
        Ok(s) => s,
        Err(e) => return store_error(&e),
    };
    let open = t1.elapsed();
    let t2 = Instant::now();
    let table = results_text(&store, "table", &[], 2.0);
    let t_table = t2.elapsed();
    let t3 = Instant::now();
    let json = results_text(&store, "json", &[], 2.0);
    let t_json = t3.elapsed();
    let events = store.events().map(|e| e.len()).unwrap_or(0);
    drop(store);
    let bytes = dir_bytes(&tmp);
    println!(
        "store bench: {n} runs stored ({events} events) in {:.2}s (sim, max speed)",
        fill.as_secs_f64()
    );
    println!("  open               {:.1} ms", open.as_secs_f64() * 1000.0);
    println!(
        "  results (table)    {:.1} ms ({} bytes)",
        t_table.as_secs_f64() * 1000.0,
        table.len()
    );
    println!(
        "  results (json)     {:.1} ms ({} records)",
        t_json.as_secs_f64() * 1000.0,
        json.lines().count()
    );
    println!(
        "  on disk            {:.1} MiB, {:.0} bytes/run",
        bytes as f64 / 1048576.0,
        bytes as f64 / n as f64
    );
    let _ = std::fs::remove_dir_all(&tmp);
    0
}
