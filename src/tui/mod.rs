//! The operator's terminal UI: ratatui + crossterm on tokio, over the engine.
//!
//! One `tokio::select!` loop takes terminal input, the engine's envelopes (through an
//! unbounded channel, so drawing never blocks the engine), GPU samples and a render tick;
//! it redraws at most every `refresh_ms` while things change, and once a second when idle
//! (for clocks). State lives in [`app::App`]; drawing in [`views`] is pure.

pub mod app;
pub mod bench;
pub mod config;
pub mod export;
pub mod gpu;
pub mod keymap;
pub mod session;
pub mod terminal;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_gpu;
#[cfg(test)]
mod tests_numbers;
#[cfg(test)]
mod tests_selection;
pub mod theme;
pub mod views;

use crate::engine::observer::ChannelObserver;
use crate::engine::{CommandSender, Engine, EngineOptions};
use crate::plan::Plan;
use crate::runtime::sim::{SimRuntime, Speed};
use crate::runtime::Runtime;
use app::{App, Effect, Pane, View};
use crossterm::event::{Event as TermEvent, KeyEventKind, MouseButton, MouseEventKind};
use keymap::{Key, KeyMap};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use theme::Theme;
use tokio_util::sync::CancellationToken;

/// The example plan, inside the binary so `nightshift demo` works from anywhere.
pub const EXAMPLE_PLAN: &str = include_str!("../../examples/iso-vllm.toml");

pub fn example_plan() -> Plan {
    Plan::from_str_at(
        "examples/iso-vllm.toml",
        EXAMPLE_PLAN.to_string(),
        Path::new("."),
        Path::new("examples/iso-vllm.toml"),
    )
    .expect("the embedded example plan is valid")
}

#[derive(clap::Args, Debug, Clone)]
pub struct DemoArgs {
    /// Sim speed: a factor (200 = 200× faster than real) or `max`.
    #[arg(long, default_value = "200")]
    pub speed: String,
    /// The sim's seed: the same seed gives the same night.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Simulated GPUs.
    #[arg(long, default_value_t = 8)]
    pub gpus: u32,
    /// Theme: dark, light, high-contrast, or a file name in the config's themes/.
    #[arg(long, env = "NIGHTSHIFT_THEME")]
    pub theme: Option<String>,
    /// Config file (default: $XDG_CONFIG_HOME/nightshift/config.toml).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Where full logs go (default: a temporary directory).
    #[arg(long)]
    pub log_dir: Option<PathBuf>,
}

pub struct TuiOptions {
    pub theme: Theme,
    pub keymap: KeyMap,
    pub refresh: Duration,
    pub gpu_period: Duration,
    /// Synthesize GPU samples (sim runtime) instead of asking NVML.
    pub simulate_gpus: bool,
    pub log_dir: Option<PathBuf>,
    /// The state the engine resumes from (the store), so the first events fold onto it.
    pub initial_state: Option<crate::state::SweepState>,
    /// The store's calibration (the daemon sends it on attach).
    pub calibration: crate::stats::Calibration,
    /// When the night's window closes (epoch ms), for the header.
    pub window_closes_ms: Option<u64>,
}

impl TuiOptions {
    /// Config file, then flag/env theme, then `NO_COLOR`.
    pub fn load(
        theme: Option<&str>,
        config: Option<&Path>,
        simulate_gpus: bool,
        log_dir: Option<PathBuf>,
    ) -> anyhow::Result<TuiOptions> {
        let cfg = config::Config::load(config)?;
        let name = theme
            .map(str::to_string)
            .or_else(|| {
                std::env::var("NIGHTSHIFT_THEME")
                    .ok()
                    .filter(|s| !s.is_empty())
            })
            .or(cfg.theme.clone())
            .unwrap_or_else(|| "dark".into());
        let themes_dir = config
            .and_then(|c| c.parent().map(|p| p.join("themes")))
            .or_else(|| config::config_dir().map(|d| d.join("themes")));
        let mut theme = Theme::load(&name, themes_dir.as_deref())?;
        if std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()) {
            theme = theme.monochrome();
        }
        let keymap = KeyMap::default()
            .with_overrides(&cfg.key_overrides())
            .map_err(|e| anyhow::anyhow!("config: {e}"))?;
        Ok(TuiOptions {
            theme,
            keymap,
            refresh: Duration::from_millis(cfg.refresh_ms),
            gpu_period: Duration::from_millis(cfg.gpu_sample_ms),
            simulate_gpus,
            log_dir,
            initial_state: None,
            calibration: Default::default(),
            window_closes_ms: None,
        })
    }
}

/// How the TUI ended.
#[derive(Debug, Clone, PartialEq)]
pub struct TuiExit {
    pub done: usize,
    pub total: usize,
    pub finished: bool,
    /// The client left a daemon's sweep running.
    pub detached: bool,
    /// Runs that failed or wait for the operator.
    pub failed: usize,
}

impl TuiExit {
    /// The README's contract: 0 when the work is done and nothing failed (or the client
    /// only detached, leaving the sweep running), 1 when runs failed or are left undone.
    pub fn code(&self) -> i32 {
        if self.detached || (self.finished && self.failed == 0) {
            0
        } else {
            1
        }
    }
}

/// `nightshift demo`.
pub fn demo(args: DemoArgs) -> i32 {
    let speed: Speed = match args.speed.parse() {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("--speed: {e}");
            return 2;
        }
    };
    // Without --log-dir the demo's logs live in a temporary directory removed when it ends.
    let (tmp, log_dir) = match &args.log_dir {
        Some(d) => (None, d.clone()),
        None => match tempfile::Builder::new()
            .prefix("nightshift-demo-")
            .tempdir()
        {
            Ok(t) => {
                let p = t.path().to_path_buf();
                (Some(t), p)
            }
            Err(e) => {
                tracing::error!("a temporary log directory: {e}");
                return 2;
            }
        },
    };
    let opts = match TuiOptions::load(
        args.theme.as_deref(),
        args.config.as_deref(),
        true,
        Some(log_dir),
    ) {
        Ok(o) => o,
        Err(e) => {
            tracing::error!("{e:#}");
            return 2;
        }
    };
    let code = start(
        Arc::new(example_plan()),
        Arc::new(SimRuntime::new(speed)),
        args.gpus,
        args.seed,
        speed.time_scale(),
        opts,
    );
    drop(tmp);
    code
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(f)
}

fn finish(result: anyhow::Result<TuiExit>, resumable: bool) -> i32 {
    match result {
        Ok(exit) => {
            println!(
                "nightshift: {} of {} runs done{}",
                exit.done,
                exit.total,
                match (exit.finished, resumable) {
                    (true, _) => "",
                    (false, true) => "; run the same command to resume",
                    (false, false) => " (the demo keeps no store)",
                }
            );
            // The demo is a demo: its simulated failures are not the operator's.
            if resumable {
                exit.code()
            } else {
                0
            }
        }
        Err(e) => {
            tracing::error!("{e:#}");
            1
        }
    }
}

fn start(
    plan: Arc<Plan>,
    runtime: Arc<dyn Runtime>,
    gpus: u32,
    seed: u64,
    time_scale: f64,
    opts: TuiOptions,
) -> i32 {
    if !std::io::stdout().is_terminal() {
        tracing::error!("the TUI needs a terminal (use `nightshift run --headless` for logs)");
        return 2;
    }
    finish(
        block_on(async move {
            let (engine, cmds) = Engine::new(
                plan.clone(),
                runtime,
                EngineOptions {
                    gpus,
                    seed,
                    wait_for_operator: true,
                },
            );
            // (run_tui adds the log writer: one per sweep, or every line is written twice.)
            let engine = engine.with_time_scale(time_scale);
            run_tui(plan, engine, cmds, opts).await
        }),
        false,
    )
}

/// The TUI over an engine in this process (the demo): returns when the operator quits or a
/// signal arrives; the sweep stops with it.
pub async fn run_tui(
    plan: Arc<Plan>,
    mut engine: Engine,
    cmds: CommandSender,
    opts: TuiOptions,
) -> anyhow::Result<TuiExit> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    engine.observe(Box::new(ChannelObserver(tx)));
    if let Some(dir) = &opts.log_dir {
        let keys = plan.runs.iter().map(|r| r.key.clone()).collect();
        engine.observe(crate::engine::offthread::logs(
            crate::engine::logs::LogWriter::new(dir.clone(), keys),
        )?);
    }
    let shutdown = CancellationToken::new();
    let engine_task = tokio::spawn(engine.run(shutdown.clone()));
    let ended: session::Ended = Box::pin(async move {
        match engine_task.await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(format!("{e:#}")),
            Err(e) => Err(format!("the engine task failed: {e}")),
        }
    });
    let link = session::Link {
        events: session::envelopes(rx),
        commands: cmds,
        ended,
        owner: session::Owner::InProcess(shutdown),
        gpus: 8,
        runtime: None,
    };
    session::run(plan, link, opts).await
}

fn on_terminal_event(app: &mut App, ev: TermEvent) -> Vec<Effect> {
    match ev {
        TermEvent::Key(k) if k.kind != KeyEventKind::Release => app.on_key(Key::from_event(&k)),
        TermEvent::Mouse(m) => {
            on_mouse(app, m.kind, m.column, m.row);
            vec![]
        }
        _ => vec![],
    }
}

fn inside(r: ratatui::layout::Rect, x: u16, y: u16) -> bool {
    x >= r.x && x < r.x + r.width && y >= r.y && y < r.y + r.height
}

pub fn on_mouse(app: &mut App, kind: MouseEventKind, x: u16, y: u16) {
    // The operator moves the cursor: the next key acts on what they clicked.
    app.hits.shown.set(None);
    if app.popup.is_some() {
        if matches!(kind, MouseEventKind::Down(_)) {
            app.popup = None;
        }
        return;
    }
    let logs = app.hits.logs.get();
    match kind {
        MouseEventKind::Down(MouseButton::Left) => {
            if app.view == View::Results {
                let r = app.hits.results_rows.get();
                if inside(r, x, y) {
                    let row = app.hits.results_offset.get() + (y - r.y) as usize;
                    let rows = app.result_rows();
                    if row < rows.len() {
                        app.results.selected.select_row(&rows, row);
                    }
                }
                return;
            }
            let q = app.hits.queue_rows.get();
            if app.view == View::Sweep && inside(q, x, y) {
                let row = app.hits.queue_offset.get() + (y - q.y) as usize;
                if row < app.cells.len() {
                    app.auto_select = false;
                    app.focus = Pane::Queue;
                    app.sel_commit = row;
                    let (cx, w) = app.hits.queue_cells_x.get();
                    if x >= cx && w > 0 {
                        app.sel_variant =
                            (((x - cx) / w) as usize).min(app.variants.len().saturating_sub(1));
                    }
                    app.log_scroll = 0;
                    app.follow = true;
                }
            } else if inside(logs, x, y) {
                app.focus = Pane::Logs;
            }
        }
        MouseEventKind::ScrollUp | MouseEventKind::ScrollDown => {
            let up = kind == MouseEventKind::ScrollUp;
            if app.view != View::Results && inside(logs, x, y) {
                app.scroll_logs(if up { 3 } else { -3 });
            } else {
                let saved = app.focus;
                app.focus = Pane::Queue;
                app.move_selection(if up { -3 } else { 3 });
                app.focus = saved;
            }
        }
        _ => {}
    }
}

fn open_pager(guard: &mut terminal::Guard, app: &mut App, run: crate::model::RunId) {
    let Some(dir) = app.log_dir.clone() else {
        app.toast = Some("no log directory for this sweep".into());
        return;
    };
    let key = &app.plan.runs[run.0 as usize].key;
    let attempt = app.state.run(run).attempt.max(1);
    // The server's own log first (what the operator came for), then Docker's and the
    // pull's; this attempt's files, then the earlier attempts' (`:n` in less goes back).
    let streams: &[&str] = match app.log_tab {
        app::LogTab::Server => &["server", "docker", "pull"],
        app::LogTab::Bench => &["bench"],
    };
    let mut files = Vec::new();
    for a in (1..=attempt).rev() {
        for s in streams {
            for pipe in [crate::model::Pipe::Stdout, crate::model::Pipe::Stderr] {
                let p = crate::engine::logs::log_path(&dir, key, a, s, pipe);
                if p.exists() {
                    files.push(p);
                }
            }
        }
    }
    if files.is_empty() {
        app.toast = Some(format!("no log files yet for {key} attempt {attempt}"));
        return;
    }
    let pager = std::env::var("PAGER")
        .ok()
        .filter(|p| !p.trim().is_empty())
        .unwrap_or_else(|| "less -R".into());
    let mut words = shell_words::split(&pager).unwrap_or_else(|_| vec!["less".into()]);
    let prog = words.remove(0);
    let status = guard.suspend(|| {
        std::process::Command::new(&prog)
            .args(&words)
            .args(&files)
            .status()
    });
    if let Err(e) = status {
        app.toast = Some(format!("could not run {prog}: {e}"));
    }
}
