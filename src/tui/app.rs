//! The view model: a [`SweepState`] folded from the engine's envelopes, bounded log rings
//! per run, GPU history, and what the operator is looking at. Pure: keys go in, effects
//! (commands for the engine, a pager, an export) come out; the loop in `mod.rs` does them.

mod actions;
mod command;
mod complete;
mod disk_logs;
mod events;
mod keys;
mod results;
mod ui;

pub use complete::complete;
pub(crate) use results::needs_a_look;
pub use results::{ResultsState, RowSelection, StatusFilter, RESULT_COLUMNS};
pub use ui::Ui;

use super::gpu::{GpuMsg, GpuSource};
use super::keymap::{Action, Key, KeyMap};
use super::theme::Theme;
use crate::category::Category;
use crate::event::{Command, Envelope, Event, GpuSample};
use crate::model::{Outcome, Pipe, RunId, RunState, Stream, Variant};
use crate::plan::Plan;
use crate::report::groups::{FailureGroup, Member};
use crate::state::SweepState;
use ratatui::layout::Rect;
use std::cell::Cell;
use std::collections::{BTreeMap, VecDeque};
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
    pub plan: Arc<Plan>,
    pub state: SweepState,
    pub runtime: String,
    pub gpus_total: u32,
    /// A daemon owns the sweep: quitting detaches (or stops it, if asked).
    pub attached: bool,
    pub now_ms: u64,
    pub finished: bool,
    pub variants: Vec<Variant>,
    /// commit → variant column → its (first repeat's) run.
    pub cells: Vec<Vec<Option<RunId>>>,
    pub baseline_of: Vec<Option<RunId>>,
    /// plan image → its runs: a prefetch (pull, overlay, build) logs by image, and its
    /// lines show in the log pane of each run still waiting for that image.
    runs_by_image: std::collections::HashMap<String, Vec<RunId>>,
    pub logs: Vec<Option<Box<RunLogs>>>,
    pub lines_in_memory: usize,
    pub lines_seen: u64,
    finished_order: VecDeque<RunId>,
    pub pull_layers: BTreeMap<RunId, BTreeMap<String, (u64, u64)>>,
    pub gpu_source: GpuSource,
    pub gpus: Vec<GpuView>,
    /// When each run entered its present state, as this client saw it happen (the active
    /// panel's "held 12m" and "in stage 40s").
    pub entered_ms: std::collections::HashMap<RunId, u64>,
    /// Operator actions (signed, with their outcome) and the policy's own decisions, oldest
    /// first (the last [`ACTIVITY_KEPT`]).
    pub activity: std::collections::VecDeque<crate::report::activity::Entry>,
    /// This client's signature on the commands it sends (`ops@tui:4321`).
    pub me: Option<String>,
    /// The fix recipes a `:fix-group` may name (built-in and the operator's), checked and
    /// completed where they are typed.
    pub recipes: Vec<String>,
    pub theme: Theme,
    /// The box's noise bands from `nightshift calibrate`, as the daemon's store holds them:
    /// the results view judges as `results` does.
    pub calibration: crate::stats::Calibration,
    /// When the night's window closes (epoch ms): shown in the header beside the ETA.
    pub window_closes_ms: Option<u64>,
    /// A run's typical wall-clock length where the runtime says it (the sim at its speed):
    /// the ETA's prior before any run ended.
    pub run_prior_ms: Option<u64>,
    /// Runs whose logs were read from disk once (an attached client's view of the lines
    /// from before it attached).
    from_disk: std::collections::HashSet<RunId>,
    pub keymap: KeyMap,
    pub hits: Hits,
    pub log_dir: Option<std::path::PathBuf>,
    /// What this client shows and where the operator is in it.
    pub ui: Ui,
    /// What is kept between frames because making it again is too slow.
    caches: Caches,
}

/// What the frames keep because making it again is too slow; each cleared when what it was
/// made from changes.
#[derive(Default)]
struct Caches {
    /// The bands the night's own repeats teach, learned over every run as `results` learns
    /// them (the compare view builds one commit's report, which alone would learn from that
    /// commit only). Forgotten when a run ends; learned again when next asked.
    learned: std::cell::RefCell<Option<crate::stats::Calibration>>,
    /// The last ETA and what it was made from (the second and the runs ended): a replay of
    /// the schedule is milliseconds at 10,000 runs, too much for every frame.
    eta_cache: std::cell::RefCell<Option<EtaMemo>>,
    /// The failure groups, with the fingerprint of the states they were made from.
    groups: std::cell::RefCell<Option<(GroupsKey, Arc<Vec<FailureGroup>>)>>,
    /// The comparison report (the 3-way view), with the fingerprint of the states it was
    /// made from: building it is milliseconds at 1,000 runs, too much for every frame.
    report: std::cell::RefCell<Option<(ReportKey, Arc<crate::report::Report>)>>,
}

impl App {
    /// How the results view and its exports judge: `results`' defaults, the bands learned
    /// from the whole night's repeats and the box's calibration over them (one definition
    /// with the CLI's report, whichever commits a view builds).
    pub(crate) fn report_options(&self) -> crate::report::Options {
        let mut o = crate::report::Options::of(crate::report::Judge::default());
        let mut bands = self.learned_bands();
        for (k, b) in &self.calibration.bands {
            bands.bands.insert(k.clone(), b.clone());
        }
        o.calibration = bands;
        o
    }

    fn learned_bands(&self) -> crate::stats::Calibration {
        // Without repeats there is nothing to learn: no pass over the runs per frame.
        if !self.plan.runs.iter().any(|r| r.repeat > 0) {
            return Default::default();
        }
        if let Some(c) = self.caches.learned.borrow().as_ref() {
            return c.clone();
        }
        let docs = self.docs();
        let refs: Vec<&crate::record::RunDoc> = docs.iter().collect();
        let c = crate::report::learn_bands(&refs);
        *self.caches.learned.borrow_mut() = Some(c.clone());
        c
    }

    /// The runs as the report reads them, from the live state (one attempt each).
    pub fn docs(&self) -> Vec<crate::record::RunDoc> {
        use crate::record::{RunDoc, RunInfo};
        self.plan
            .runs
            .iter()
            .map(|spec| {
                RunDoc::of_record(
                    RunInfo::from_spec(&self.plan, spec),
                    self.state.run(spec.id),
                )
            })
            .collect()
    }

    pub fn new(plan: Arc<Plan>, gpus: u32, theme: Theme, keymap: KeyMap) -> App {
        let mut variants: Vec<Variant> = Vec::new();
        for r in &plan.runs {
            if !variants.contains(&r.variant) {
                variants.push(r.variant.clone());
            }
        }
        variants.sort_by(|a, b| a.order().cmp(&b.order()).then(a.cmp(b)));
        let mut cells = vec![vec![None; variants.len()]; plan.commits.len()];
        for r in &plan.runs {
            let col = variants.iter().position(|v| *v == r.variant).unwrap_or(0);
            let cell = &mut cells[r.commit][col];
            if cell.is_none() {
                *cell = Some(r.id);
            }
        }
        let baseline_of = plan
            .runs
            .iter()
            .map(|r| {
                let col = variants.iter().position(|v| *v == Variant::Baseline)?;
                cells[r.commit][col].filter(|b| *b != r.id)
            })
            .collect();
        let mut runs_by_image: std::collections::HashMap<String, Vec<RunId>> = Default::default();
        for r in &plan.runs {
            if let Some(img) = &r.image {
                runs_by_image.entry(img.clone()).or_default().push(r.id);
            }
        }
        App {
            runs_by_image,
            ui: Ui::default(),
            caches: Caches::default(),
            attached: false,
            state: SweepState::for_plan(&plan),
            logs: (0..plan.runs.len()).map(|_| None).collect(),
            plan,
            runtime: String::new(),
            gpus_total: gpus,
            now_ms: 0,
            finished: false,
            variants,
            cells,
            baseline_of,
            lines_in_memory: 0,
            lines_seen: 0,
            finished_order: VecDeque::new(),
            pull_layers: BTreeMap::new(),
            gpu_source: GpuSource::Waiting,
            gpus: Vec::new(),
            entered_ms: Default::default(),
            activity: Default::default(),
            me: None,
            recipes: crate::diagnose::recipe::RecipeBook::builtin()
                .all()
                .iter()
                .map(|r| r.name.clone())
                .collect(),
            theme,
            calibration: Default::default(),
            from_disk: Default::default(),
            window_closes_ms: None,
            run_prior_ms: None,
            keymap,
            hits: Hits::default(),
            log_dir: None,
        }
    }

    /// The night's failure groups (unknown failures of one kind each), largest first.
    /// Made again only when a run's state or attempt changed since (a frame per refresh
    /// would otherwise normalise every failed run's line).
    pub(crate) fn failure_groups(&self) -> Arc<Vec<FailureGroup>> {
        let key = self.groups_key();
        if let Some((k, g)) = self.caches.groups.borrow().as_ref() {
            if *k == key {
                return g.clone();
            }
        }
        let g = Arc::new(crate::report::groups::group(self.plan.runs.iter().map(
            |spec| {
                let model = self.plan.commit_of(spec).model.as_deref();
                Member::of_record(&spec.key, model, self.state.run(spec.id))
            },
        )));
        *self.caches.groups.borrow_mut() = Some((key, g.clone()));
        g
    }

    /// The comparison report over the live state, as `results` judges it, made again only
    /// when a run's state or attempt has changed since.
    pub fn report(&self) -> Arc<crate::report::Report> {
        let key = (
            self.state.counts(),
            self.state.runs.iter().map(|r| u64::from(r.attempt)).sum(),
        );
        if let Some((k, r)) = self.caches.report.borrow().as_ref() {
            if *k == key {
                return r.clone();
            }
        }
        let docs = self.docs();
        let refs: Vec<&crate::record::RunDoc> = docs.iter().collect();
        let r = Arc::new(crate::report::build(&refs, &self.report_options()));
        *self.caches.report.borrow_mut() = Some((key, r.clone()));
        r
    }

    fn groups_key(&self) -> GroupsKey {
        let c = self.state.counts();
        let attempts = self.state.runs.iter().map(|r| u64::from(r.attempt)).sum();
        (c.failed, c.held, c.skipped, attempts)
    }

    /// The failure group of a run's unknown failure, if it has one.
    pub(crate) fn group_of(&self, run: RunId) -> Option<FailureGroup> {
        let spec = self.plan.runs.get(run.0 as usize)?;
        let model = self.plan.commit_of(spec).model.as_deref();
        let id = Member::of_record(&spec.key, model, self.state.run(run)).unknown_kind()?;
        self.failure_groups().iter().find(|g| g.id == id).cloned()
    }

    /// The daemon's whole state, sent when this client fell behind and events were
    /// dropped. Selections are runs and commits, not rows, so they stay where they were;
    /// what was made from the old state is made again.
    pub(crate) fn on_state(&mut self, state: SweepState) {
        // A snapshot of a sweep that already ended: the screen says finished, not running.
        self.finished |= state.finished;
        self.state = state;
        self.caches.learned.take();
        self.caches.groups.take();
        let watched = self.selected_run();
        if self.ui.auto_select && !watched.is_some_and(|r| self.state.run(r).state.is_active()) {
            if let Some(r) = self.newest_active() {
                self.select_run(r);
            }
        }
    }

    pub(crate) fn selected_run(&self) -> Option<RunId> {
        self.cells
            .get(self.ui.sel_commit)
            .and_then(|row| row.get(self.ui.sel_variant))
            .copied()
            .flatten()
    }

    pub(crate) fn select_run(&mut self, run: RunId) {
        let spec = &self.plan.runs[run.0 as usize];
        self.ui.sel_commit = spec.commit;
        if let Some(c) = self.variants.iter().position(|v| *v == spec.variant) {
            self.ui.sel_variant = c;
        }
        self.ui.log_scroll = 0;
        self.ui.search_at = None;
    }

    // ---- queries ------------------------------------------------------------------

    pub(crate) fn shown_log(&self) -> Option<&VecDeque<LogLine>> {
        let run = self.selected_run()?;
        Some(
            self.logs
                .get(run.0 as usize)?
                .as_ref()?
                .tab(self.ui.log_tab),
        )
    }

    /// How far the night is over the runs the plan can run. The runs it marks unrunnable
    /// (no image, an invalid command, `skip = true`) end in the first second: counted as
    /// done they would put the bar at half way before anything ran.
    pub fn progress(&self) -> Progress {
        // Called while drawing (the header, popups): no allocation per frame.
        let runs = &self.plan.runs;
        self.state
            .progress(|i| runs.get(i).is_some_and(|s| s.skip_reason.is_some()))
    }

    /// The finding a run waits on: the diagnosis of what it is held or failed with. An
    /// earlier one (the run fixed, retried or skipped since) is history, not a question:
    /// no banner offers keys for it.
    pub(crate) fn current_finding(&self, run: RunId) -> Option<&crate::event::Finding> {
        let r = self.state.runs.get(run.0 as usize)?;
        let now = match &r.state {
            RunState::Held { category }
            | RunState::Finished {
                outcome: Outcome::Failed { category },
            } => *category,
            _ => return None,
        };
        r.finding.as_ref().filter(|f| f.category == now)
    }

    /// How long the sweep has run: frozen at its end once it has ended (see
    /// [`SweepState::elapsed_ms`]).
    pub(crate) fn elapsed_ms(&self) -> Option<u64> {
        self.state.elapsed_ms(self.now_ms, self.finished)
    }

    /// Time left, from the schedule replayed forward ([`crate::eta`]): the queue in the
    /// scheduler's order on the sweep's GPUs, each run as long as tonight's runs of its
    /// model and kind took, runs in flight for what is left of theirs.
    pub(crate) fn eta(&self) -> Option<crate::eta::Eta> {
        let ended = self.state.counts().done();
        let key = (self.now_ms / 1000, ended);
        if let Some((k, e)) = *self.caches.eta_cache.borrow() {
            if k == key {
                return e;
            }
        }
        let e = crate::eta::estimate(&self.eta_input(), self.gpus_total.max(1));
        *self.caches.eta_cache.borrow_mut() = Some((key, e));
        e
    }

    fn eta_input(&self) -> Vec<(crate::eta::Need, crate::eta::Now)> {
        use crate::eta::{Need, Now};
        let started: std::collections::HashSet<usize> = self
            .state
            .runs
            .iter()
            .zip(&self.plan.runs)
            .filter(|(r, _)| r.started_ms.is_some())
            .map(|(_, s)| s.commit)
            .collect();
        // The engine's order of commits: the replay starts runs as the scheduler will.
        let ranks = match self.window_closes_ms {
            Some(_) => crate::night::order::window_ranks(&self.plan),
            None => crate::night::order::plan_ranks(&self.plan, self.gpus_total),
        };
        self.state
            .runs
            .iter()
            .zip(&self.plan.runs)
            .map(|(r, spec)| {
                let c = self.plan.commit_of(spec);
                let need = Need {
                    gpus: spec.gpus.max(1),
                    group: format!("{}|{}", c.model.as_deref().unwrap_or("?"), c.needs_server()),
                    order: (
                        ranks.get(&spec.commit).copied().unwrap_or(spec.commit),
                        spec.order,
                    ),
                    // The sim's runs are as long as its speed makes them: the daemon says
                    // how long (no prior without it).
                    prior_ms: if self.runtime == "sim" {
                        self.run_prior_ms.unwrap_or(0)
                    } else {
                        c.kind().unwrap_or_default().typical_secs() * 1000
                    },
                    commit_started: started.contains(&spec.commit),
                };
                let now = match r.state {
                    RunState::Queued if spec.skip_reason.is_none() => Now::Queued,
                    RunState::Active { .. } => Now::Active {
                        elapsed_ms: self
                            .now_ms
                            .saturating_sub(r.started_ms.unwrap_or(self.now_ms)),
                    },
                    // Lengths come from runs that ran to a result: a run that failed in
                    // its first second says nothing of how long the next will take.
                    RunState::Finished {
                        outcome: Outcome::Success,
                    } => Now::Done {
                        took_ms: r
                            .finished_ms
                            .zip(r.started_ms)
                            .map(|(f, s)| f.saturating_sub(s)),
                    },
                    _ => Now::Done { took_ms: None },
                };
                (need, now)
            })
            .collect()
    }

    /// Why free GPUs sit idle while runs wait: the sweep is paused, or the first waiting
    /// run in the scheduler's order needs more GPUs than are free, and the scheduler keeps
    /// them for it (smaller runs pass only if they end before it could start, see
    /// [`crate::scheduler::may_backfill`]). `(run, GPUs it needs)`, or `None` for paused.
    pub(crate) fn idle_reason(&self) -> Option<Option<(RunId, u32)>> {
        if self.state.paused.is_some() {
            return Some(None);
        }
        let free = self.gpus_total.saturating_sub(self.gpus_busy());
        if free == 0 {
            return None;
        }
        let started: std::collections::HashSet<usize> = self
            .state
            .runs
            .iter()
            .zip(&self.plan.runs)
            .filter(|(r, _)| r.started_ms.is_some())
            .map(|(_, s)| s.commit)
            .collect();
        let (i, spec) = self
            .state
            .runs
            .iter()
            .zip(&self.plan.runs)
            .enumerate()
            .filter(|(_, (r, s))| {
                r.state == RunState::Queued && s.skip_reason.is_none() && s.gpus <= self.gpus_total
            })
            .map(|(i, (_, s))| (i, s))
            .min_by_key(|(_, s)| (!started.contains(&s.commit), s.commit, s.order))?;
        (spec.gpus > free).then_some(Some((RunId(i as u32), spec.gpus)))
    }

    pub(crate) fn gpus_busy(&self) -> u32 {
        super::gpu::holders(&self.state, self.gpus_total)
            .iter()
            .filter(|h| h.is_some())
            .count() as u32
    }
}

/// An ETA and what it was made from: (the second, runs ended).
type EtaMemo = ((u64, usize), Option<crate::eta::Eta>);

pub use crate::state::Progress;

/// What the cached failure groups were made from: failed, held, skipped, attempts.
type GroupsKey = (usize, usize, usize, u64);
/// Runs per state and attempts over all: the report changes only when some run's does.
type ReportKey = (crate::state::Counts, u64);

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
