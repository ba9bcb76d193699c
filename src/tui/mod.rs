//! The operator's terminal UI: ratatui + crossterm on tokio, over the engine.
//!
//! One `tokio::select!` loop takes terminal input, the engine's envelopes (through an
//! unbounded channel, so drawing never blocks the engine), GPU samples and a render tick;
//! it redraws at most every `refresh_ms` while things change, and once a second when idle
//! (for clocks). State lives in [`app::App`]; drawing in [`views`] is pure.

pub mod app;
pub mod config;
mod drive;
pub mod export;
pub mod gpu;
pub mod keymap;
pub mod link;
pub mod session;
pub mod terminal;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_gpu;
#[cfg(test)]
mod tests_numbers;
#[cfg(test)]
mod tests_operators;
#[cfg(test)]
mod tests_selection;
pub mod theme;
pub mod views;

use app::{App, Effect, Pane, View};
use crossterm::event::{Event as TermEvent, KeyEventKind, MouseButton, MouseEventKind};
use keymap::{Key, KeyMap};
use std::path::{Path, PathBuf};
use std::time::Duration;
use theme::Theme;

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
    /// The night's activity log so far (the daemon sends it on attach).
    pub initial_activity: Vec<crate::report::activity::Entry>,
    /// The store's calibration (the daemon sends it on attach).
    pub calibration: crate::stats::Calibration,
    /// When the night's window closes (epoch ms), for the header.
    pub window_closes_ms: Option<u64>,
    /// A run's typical wall-clock length, where the runtime says it (the sim's speed).
    pub run_prior_ms: Option<u64>,
    /// Bell and terminal title when runs start waiting for the operator.
    pub bell: bool,
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
            initial_activity: Vec::new(),
            calibration: Default::default(),
            window_closes_ms: None,
            run_prior_ms: None,
            bell: cfg.bell,
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

pub(crate) fn on_mouse(app: &mut App, kind: MouseEventKind, x: u16, y: u16) {
    // The operator moves the cursor: the next key acts on what they clicked.
    app.hits.shown.set(None);
    if app.ui.popup.is_some() {
        if matches!(kind, MouseEventKind::Down(_)) {
            app.ui.popup = None;
        }
        return;
    }
    let logs = app.hits.logs.get();
    match kind {
        MouseEventKind::Down(MouseButton::Left) => {
            if app.ui.view == View::Results {
                let r = app.hits.results_rows.get();
                if inside(r, x, y) {
                    let row = app.hits.results_offset.get() + (y - r.y) as usize;
                    let rows = app.result_rows();
                    if row < rows.len() {
                        app.ui.results.selected.select_row(&rows, row);
                    }
                }
                return;
            }
            let q = app.hits.queue_rows.get();
            if app.ui.view == View::Sweep && inside(q, x, y) {
                let row = app.hits.queue_offset.get() + (y - q.y) as usize;
                if row < app.night.cells.len() {
                    app.ui.auto_select = false;
                    app.ui.focus = Pane::Queue;
                    app.ui.sel_commit = row;
                    let (cx, w) = app.hits.queue_cells_x.get();
                    if x >= cx && w > 0 {
                        app.ui.sel_variant = (((x - cx) / w) as usize)
                            .min(app.night.variants.len().saturating_sub(1));
                    }
                    app.ui.log_scroll = 0;
                    app.ui.follow = true;
                }
            } else if inside(logs, x, y) {
                app.ui.focus = Pane::Logs;
            }
        }
        MouseEventKind::ScrollUp | MouseEventKind::ScrollDown => {
            let up = kind == MouseEventKind::ScrollUp;
            if app.ui.view != View::Results && inside(logs, x, y) {
                app.scroll_logs(if up { 3 } else { -3 });
            } else {
                let saved = app.ui.focus;
                app.ui.focus = Pane::Queue;
                app.move_selection(if up { -3 } else { 3 });
                app.ui.focus = saved;
            }
        }
        _ => {}
    }
}

fn open_pager(guard: &mut terminal::Guard, app: &mut App, run: crate::model::RunId) {
    let Some(dir) = app.log_dir.clone() else {
        app.ui.toast = Some("no log directory for this sweep".into());
        return;
    };
    let key = &app.night.plan.runs[run.0 as usize].key;
    let attempt = app.night.state.run(run).attempt.max(1);
    // The server's own log first (what the operator came for), then Docker's and the
    // pull's; this attempt's files, then the earlier attempts' (`:n` in less goes back).
    let streams: &[&str] = match app.ui.log_tab {
        app::LogTab::Server => &["server", "docker", "pull"],
        app::LogTab::Bench => &["bench"],
    };
    let mut files = Vec::new();
    for a in (1..=attempt).rev() {
        for s in streams {
            for pipe in [crate::model::Pipe::Stdout, crate::model::Pipe::Stderr] {
                let p = crate::record::logs::log_path(&dir, key, a, s, pipe);
                if p.exists() {
                    files.push(p);
                }
            }
        }
    }
    if files.is_empty() {
        app.ui.toast = Some(format!("no log files yet for {key} attempt {attempt}"));
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
        app.ui.toast = Some(format!("could not run {prog}: {e}"));
    }
}

/// A shell in `run`'s container (`docker exec -it`, bash where the image has it), the TUI
/// suspended meanwhile as lazydocker does; `exit` comes back. Only this machine's Docker:
/// a run on a remote host or on the sim has no container here, and the toast says so.
fn open_shell(guard: &mut terminal::Guard, app: &mut App, run: crate::model::RunId) {
    use crate::model::labels::LABEL_KEY;
    let key = app.night.plan.runs[run.0 as usize].key.clone();
    if app.night.runtime == "sim" {
        app.ui.toast = Some("the sim runs no containers: no shell to open".into());
        return;
    }
    // `docker ps --filter` takes labels as `label=K=V`; newest first, so a container of
    // another sweep with the same run key (rare) loses to this night's.
    let found = std::process::Command::new("docker")
        .args(["ps", "-q", "--filter"])
        .arg(shell_filter(LABEL_KEY, &key))
        .output();
    let id = match found {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
            .lines()
            .next()
            .unwrap_or("")
            .trim()
            .to_string(),
        Ok(o) => {
            app.ui.toast = Some(format!(
                "docker ps: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ));
            return;
        }
        Err(e) => {
            app.ui.toast = Some(format!("could not run docker: {e}"));
            return;
        }
    };
    if id.is_empty() {
        app.ui.toast = Some(format!(
            "no container of {key} on this machine's Docker (a remote host's runs are not reachable from here)"
        ));
        return;
    }
    let status = guard.suspend(|| {
        println!("nightshift: a shell in {key}'s container {id}; `exit` returns to the sweep");
        std::process::Command::new("docker")
            .args([
                "exec",
                "-it",
                &id,
                "sh",
                "-c",
                "command -v bash >/dev/null && exec bash || exec sh",
            ])
            .status()
    });
    if let Err(e) = status {
        app.ui.toast = Some(format!("docker exec: {e}"));
    }
}

/// The `docker ps` filter for containers labelled `label=value`.
pub fn shell_filter(label: &str, value: &str) -> String {
    format!("label={label}={value}")
}

/// Put `text` on the clipboard of the terminal the TUI runs in — over ssh and tmux too
/// (with `set-clipboard on`) — by OSC 52.
fn copy_osc52(text: &str) {
    use base64::Engine;
    use std::io::Write;
    let b64 = base64::engine::general_purpose::STANDARD.encode(text);
    let mut out = std::io::stdout();
    let _ = write!(out, "\x1b]52;c;{b64}\x07");
    let _ = out.flush();
}

/// A bell and the held count in the terminal's title when more runs wait for the
/// operator than before: the screen may be in another tab at 3 a.m.
pub(crate) fn announce_held(app: &App, before: usize, on: bool) {
    use std::io::Write;
    let held = app.night.state.counts().held;
    if !on || held <= before {
        return;
    }
    let mut out = std::io::stdout();
    let title = format!("nightshift: {held} held · {}", app.night.plan.name);
    let _ = crossterm::execute!(
        out,
        crossterm::terminal::SetTitle(crate::sanitize::terminal(&title))
    );
    let _ = out.write_all(b"\x07");
    let _ = out.flush();
}
