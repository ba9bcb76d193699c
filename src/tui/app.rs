//! The view model, in three parts: the [`Night`] a client folds from its sweep's envelopes
//! (the state, bounded log rings per run, GPU history), the [`Ui`] (what this operator is
//! looking at), and what frames keep because it is slow to make (`seen::Caches`). Pure:
//! envelopes change the night, keys change the `Ui` and return effects (commands for the
//! engine, a pager, an export) that the loop in `drive.rs` does.

mod actions;
mod command;
mod complete;
mod disk_logs;
mod events;
mod fold;
mod keys;
mod night;
mod results;
mod seen;
mod ui;

pub use complete::complete;
pub use night::Night;
pub(crate) use results::needs_a_look;
pub use results::{ResultsState, RowSelection, StatusFilter, RESULT_COLUMNS};
use seen::Caches;
pub(crate) use seen::Seen;
pub use ui::Ui;

use super::gpu::{GpuMsg, GpuSource};
use super::keymap::{Action, Key, KeyMap};
use super::theme::Theme;
use crate::category::Category;
use crate::event::{Command, Envelope, Event, GpuSample};
use crate::model::{Outcome, Pipe, RunId, RunState, Stream};
use crate::plan::Plan;
use crate::state::SweepState;
use ratatui::layout::Rect;
use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::Arc;

/// Lines kept in memory per run and log tab; the full log is on disk.
pub const RING_LINES: usize = 5_000;
/// Lines kept in memory over all runs; the rings of long-finished runs go first.
pub const TOTAL_LINES: usize = 400_000;
pub const GPU_HISTORY: usize = 120;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    Sweep,
    Logs,
    Results,
    /// One row per commit: the variants' medians and the comparisons' verdicts.
    ThreeWay,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pane {
    Queue,
    Logs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogTab {
    Server,
    Bench,
}

impl LogTab {
    pub fn label(self) -> &'static str {
        match self {
            LogTab::Server => "server",
            LogTab::Bench => "benchmark",
        }
    }
}

#[derive(Debug, Clone)]
pub struct LogLine {
    pub text: Box<str>,
    pub error: bool,
    /// `docker`/`pull` lines share the server tab; they carry their origin.
    pub tag: Option<&'static str>,
}

#[derive(Debug, Default)]
pub struct RunLogs {
    pub server: VecDeque<LogLine>,
    pub bench: VecDeque<LogLine>,
    /// Lines dropped from the rings (still in the files on disk).
    pub dropped: u64,
}

impl RunLogs {
    pub fn tab(&self, t: LogTab) -> &VecDeque<LogLine> {
        match t {
            LogTab::Server => &self.server,
            LogTab::Bench => &self.bench,
        }
    }
    fn len(&self) -> usize {
        self.server.len() + self.bench.len()
    }
}

pub(crate) fn is_error_line(s: &str) -> bool {
    const NEEDLES: [&str; 8] = [
        "Error",
        "ERROR",
        "error:",
        "Traceback",
        "Exception",
        "FAILED",
        "Killed",
        "out of memory",
    ];
    NEEDLES.iter().any(|n| s.contains(n))
}

#[derive(Debug, Clone)]
pub struct GpuView {
    pub sample: GpuSample,
    /// Compute processes on this GPU that belong to no run of this sweep (another user,
    /// a leftover container): the operator should know before the next run OOMs.
    pub foreign: usize,
    pub util: VecDeque<u64>,
    pub mem_pct: VecDeque<u64>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Confirm {
    Quit,
    /// Attached to a daemon: detach, or stop the sweep?
    Detach,
    Cancel(RunId),
    SkipCategory(Category),
    /// Retry every held run of the category with the recipe, and each later one tonight.
    FixCategory(Category, String),
    /// Another operator decided this run moments ago: send `command` over their decision?
    Override {
        by: String,
        what: String,
        ago_s: u64,
        command: Command,
    },
}

/// How recent another operator's decision on a run must be for a second one to ask first:
/// two people acting on one held run at human speed, not a decision from hours ago.
pub const OVERRIDE_ASK_MS: u64 = 120_000;

#[derive(Debug, Clone, PartialEq)]
pub enum Popup {
    Help {
        scroll: usize,
    },
    Detail(RunId),
    Confirm(Confirm),
    /// One decision for every run of a failure group (its id): skip, retry or fix all.
    Group(String),
    /// The activity log, newest first.
    Activity {
        scroll: usize,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    Search,
    Command,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Input {
    pub kind: InputKind,
    pub text: String,
}

/// What the loop must do after a key.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    Send(Command),
    /// A shell in the run's container, the TUI suspended meanwhile.
    Shell(RunId),
    /// Put this text on the terminal's clipboard (OSC 52).
    Copy(String),
    Quit,
    /// Leave the daemon's sweep running.
    Detach,
    /// Ask the daemon to stop the sweep, then leave.
    StopSweep,
    Pager(RunId),
    Export(Option<String>),
}

/// Screen areas from the last draw, for mouse hit-testing.
#[derive(Debug, Default)]
pub struct Hits {
    pub queue_rows: Cell<Rect>,
    pub queue_offset: Cell<usize>,
    pub queue_cells_x: Cell<(u16, u16)>,
    pub logs: Cell<Rect>,
    pub results_rows: Cell<Rect>,
    pub results_offset: Cell<usize>,
    /// The run the action keys applied to when the screen was last drawn: a key acts on the
    /// run the operator saw selected, even if events moved the list since.
    pub shown: Cell<Option<RunId>>,
    /// How far the help screen can scroll at its last drawn size.
    pub help_max: Cell<usize>,
    /// The detail popup's last scrollable line (set as it is drawn).
    pub detail_max: Cell<usize>,
}

/// Activity entries a client keeps (the store keeps them all).
pub const ACTIVITY_KEPT: usize = 2000;

pub struct App {
    /// The night this client folds from the daemon's envelopes.
    pub night: Night,
    /// A daemon owns the sweep: quitting detaches (or stops it, if asked).
    pub attached: bool,
    /// This client's signature on the commands it sends (`ops@tui:4321`).
    pub me: Option<String>,
    pub keymap: KeyMap,
    pub hits: Hits,
    pub log_dir: Option<std::path::PathBuf>,
    /// What this client shows and where the operator is in it.
    pub ui: Ui,
    /// What is kept between frames because making it again is too slow.
    caches: Caches,
}

impl App {
    /// What a key or a frame reads: the night and this client's settings, beside its `Ui`.
    pub(crate) fn seen(&self) -> Seen<'_> {
        Seen {
            night: &self.night,
            keymap: &self.keymap,
            hits: &self.hits,
            me: self.me.as_deref(),
            attached: self.attached,
            caches: &self.caches,
        }
    }

    /// The `Ui` to change and the rest to read, borrowed apart: a key's handler moves the
    /// operator through a night it cannot change.
    pub(crate) fn split(&mut self) -> (&mut Ui, Seen<'_>) {
        let App {
            night,
            ui,
            keymap,
            hits,
            me,
            attached,
            caches,
            ..
        } = self;
        let seen = Seen {
            night,
            keymap,
            hits,
            me: me.as_deref(),
            attached: *attached,
            caches,
        };
        (ui, seen)
    }

    pub fn new(plan: Arc<Plan>, gpus: u32, theme: Theme, keymap: KeyMap) -> App {
        App {
            night: Night::new(plan, gpus),
            ui: Ui::new(theme),
            caches: Caches::default(),
            attached: false,
            me: None,
            keymap,
            hits: Hits::default(),
            log_dir: None,
        }
    }

    /// The daemon's whole state, sent when this client fell behind and events were
    /// dropped. Selections are runs and commits, not rows, so they stay where they were;
    /// what was made from the old state is made again.
    pub(crate) fn on_state(&mut self, state: SweepState) {
        // A snapshot of a sweep that already ended: the screen says finished, not running.
        self.night.finished |= state.finished;
        self.night.state = state;
        self.caches.learned.take();
        self.caches.groups.take();
        let watched = self.selected_run();
        if self.ui.auto_select
            && !watched.is_some_and(|r| self.night.state.run(r).state.is_active())
        {
            if let Some(r) = self.night.newest_active() {
                self.select_run(r);
            }
        }
    }

    // ---- the operator's moves, for the loop and the views: each is `Ui`'s, given the night

    pub(crate) fn on_key(&mut self, key: Key) -> Vec<Effect> {
        let (ui, at) = self.split();
        ui.on_key(&at, key)
    }

    pub(crate) fn on_action(&mut self, action: Action) -> Vec<Effect> {
        let (ui, at) = self.split();
        ui.on_action(&at, action)
    }

    #[cfg(test)]
    pub(crate) fn run_command_line(&mut self, line: &str) -> Vec<Effect> {
        let (ui, at) = self.split();
        ui.run_command_line(&at, line)
    }

    pub(crate) fn move_selection(&mut self, n: isize) {
        let (ui, at) = self.split();
        ui.move_selection(&at, n)
    }

    pub(crate) fn scroll_logs(&mut self, n: isize) {
        let (ui, at) = self.split();
        ui.scroll_logs(&at, n)
    }

    pub(crate) fn select_run(&mut self, run: RunId) {
        let (ui, at) = self.split();
        ui.select_run(&at, run)
    }

    pub(crate) fn selected_run(&self) -> Option<RunId> {
        self.ui.selected_run(&self.seen())
    }

    pub(crate) fn action_run(&self) -> Option<RunId> {
        self.ui.action_run(&self.seen())
    }

    pub(crate) fn result_rows(&self) -> Vec<RunId> {
        self.ui.result_rows(&self.seen())
    }

    pub(crate) fn results_selection(&self) -> (Vec<RunId>, Option<usize>) {
        self.ui.results_selection(&self.seen())
    }

    pub(crate) fn delta_pct(&self, run: RunId) -> Option<f64> {
        self.ui.delta_pct(&self.seen(), run)
    }

    pub(crate) fn skippable(&self, cat: Category) -> usize {
        self.ui.skippable(&self.seen(), cat)
    }

    pub(crate) fn shown_log(&self) -> Option<&VecDeque<LogLine>> {
        self.ui.shown_log(&self.seen())
    }

    // ---- queries ------------------------------------------------------------------
}

pub use crate::state::Progress;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Focus {
    Queue,
    Logs,
    Results,
}

/// The failure category of a run, observed or predicted: a run that stopped has the one
/// its outcome stands on (skipped after a diagnosis keeps it, see
/// [`crate::state::outcome_category`]); one still to run, its latest finding's.
pub(crate) fn run_category(
    state: &RunState,
    finding: Option<&crate::event::Finding>,
) -> Option<Category> {
    match state {
        RunState::Queued | RunState::Active { .. } => finding.map(|f| f.category),
        _ => crate::state::outcome_category(state, finding),
    }
}

/// The one number shown in a queue cell: the kind's headline metric.
pub use crate::metric::headline;

/// Byte ranges of `q` in `s`; smart case (case-insensitive unless `q` has capitals).
pub(crate) fn find_all<'a>(
    s: &'a str,
    q: &'a str,
) -> Box<dyn Iterator<Item = (usize, usize)> + 'a> {
    if q.is_empty() {
        return Box::new(std::iter::empty());
    }
    if q.chars().any(|c| c.is_uppercase()) || !s.is_ascii() || !q.is_ascii() {
        Box::new(s.match_indices(q).map(|(i, m)| (i, i + m.len())))
    } else {
        let n = q.len();
        let hay = s.as_bytes();
        let needle = q.as_bytes();
        Box::new(
            (0..=hay.len().saturating_sub(n))
                .filter(move |&i| hay.len() >= n && hay[i..i + n].eq_ignore_ascii_case(needle))
                .map(move |i| (i, i + n)),
        )
    }
}
