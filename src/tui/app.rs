//! The view model: a [`SweepState`] folded from the engine's envelopes, bounded log rings
//! per run, GPU history, and what the operator is looking at. Pure: keys go in, effects
//! (commands for the engine, a pager, an export) come out; the loop in `mod.rs` does them.

use super::gpu::{GpuMsg, GpuSource};
use super::keymap::{Action, Key, KeyMap};
use super::theme::Theme;
use crate::category::Category;
use crate::event::{Command, Envelope, Event, GpuSample};
use crate::model::{Outcome, Pipe, RunId, RunState, Stream, Variant};
use crate::plan::Plan;
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

pub fn is_error_line(s: &str) -> bool {
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusFilter {
    Success,
    Failed,
    Held,
    Skipped,
    Active,
    Queued,
}

impl StatusFilter {
    pub const ALL: [StatusFilter; 6] = [
        StatusFilter::Success,
        StatusFilter::Failed,
        StatusFilter::Held,
        StatusFilter::Skipped,
        StatusFilter::Active,
        StatusFilter::Queued,
    ];
    pub fn label(self) -> &'static str {
        match self {
            StatusFilter::Success => "success",
            StatusFilter::Failed => "failed",
            StatusFilter::Held => "held",
            StatusFilter::Skipped => "skipped",
            StatusFilter::Active => "active",
            StatusFilter::Queued => "queued",
        }
    }
    pub fn matches(self, s: &RunState) -> bool {
        matches!(
            (self, s),
            (StatusFilter::Queued, RunState::Queued)
                | (StatusFilter::Active, RunState::Active { .. })
                | (StatusFilter::Held, RunState::Held { .. })
                | (
                    StatusFilter::Success,
                    RunState::Finished {
                        outcome: Outcome::Success
                    }
                )
                | (
                    StatusFilter::Failed,
                    RunState::Finished {
                        outcome: Outcome::Failed { .. }
                    }
                )
                | (
                    StatusFilter::Skipped,
                    RunState::Finished {
                        outcome: Outcome::Skipped { .. } | Outcome::Cancelled
                    }
                )
        )
    }
}

pub const RESULT_COLUMNS: [&str; 9] = [
    "commit", "variant", "model", "status", "category", "headline", "Δ base", "attempt", "title",
];

#[derive(Debug, Clone, Default)]
pub struct ResultsState {
    pub sort_col: usize,
    pub reverse: bool,
    pub status: Option<StatusFilter>,
    pub category: Option<Category>,
    pub model: Option<String>,
    pub text: Option<String>,
    pub selected: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Confirm {
    Quit,
    /// Attached to a daemon: detach, or stop the sweep?
    Detach,
    Cancel(RunId),
    SkipCategory(Category),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Popup {
    Help { scroll: usize },
    Detail(RunId),
    Confirm(Confirm),
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
}

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
    pub view: View,
    pub focus: Pane,
    pub sel_commit: usize,
    pub sel_variant: usize,
    /// Until the operator moves, the selection follows the newest active run.
    pub auto_select: bool,
    pub log_tab: LogTab,
    pub follow: bool,
    /// Lines between the bottom of the log pane and the end of the ring.
    pub log_scroll: usize,
    pub search: Option<String>,
    /// Index (into the shown ring) of the current match.
    pub search_at: Option<usize>,
    pub results: ResultsState,
    pub popup: Option<Popup>,
    pub input: Option<Input>,
    pub toast: Option<String>,
    pub theme: Theme,
    /// The box's noise bands from `nightshift calibrate`, as the daemon's store holds them:
    /// the results view judges as `results` does.
    pub calibration: crate::stats::Calibration,
    /// The bands the night's own repeats teach, learned over every run as `results` learns
    /// them (the compare view builds one commit's report, which alone would learn from that
    /// commit only). Forgotten when a run ends; learned again when next asked.
    learned: std::cell::RefCell<Option<crate::stats::Calibration>>,
    pub keymap: KeyMap,
    pub hits: Hits,
    pub log_dir: Option<std::path::PathBuf>,
}

impl App {
    /// How the results view and its exports judge: `results`' defaults, the bands learned
    /// from the whole night's repeats and the box's calibration over them (one definition
    /// with the CLI's report, whichever commits a view builds).
    pub fn report_options(&self) -> crate::report::Options {
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
        if let Some(c) = self.learned.borrow().as_ref() {
            return c.clone();
        }
        let docs = crate::tui::export::docs(self);
        let refs: Vec<&crate::store::record::RunDoc> = docs.iter().collect();
        let c = crate::report::learn_bands(&refs);
        *self.learned.borrow_mut() = Some(c.clone());
        c
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
            view: View::Sweep,
            focus: Pane::Queue,
            sel_commit: 0,
            sel_variant: 0,
            auto_select: true,
            log_tab: LogTab::Server,
            follow: true,
            log_scroll: 0,
            search: None,
            search_at: None,
            results: ResultsState::default(),
            popup: None,
            input: None,
            toast: None,
            theme,
            calibration: Default::default(),
            learned: Default::default(),
            keymap,
            hits: Hits::default(),
            log_dir: None,
        }
    }

    pub fn selected_run(&self) -> Option<RunId> {
        self.cells
            .get(self.sel_commit)
            .and_then(|row| row.get(self.sel_variant))
            .copied()
            .flatten()
    }

    pub(crate) fn select_run(&mut self, run: RunId) {
        let spec = &self.plan.runs[run.0 as usize];
        self.sel_commit = spec.commit;
        if let Some(c) = self.variants.iter().position(|v| *v == spec.variant) {
            self.sel_variant = c;
        }
        self.log_scroll = 0;
        self.search_at = None;
    }

    // ---- events -------------------------------------------------------------------

    pub fn on_envelope(&mut self, env: &Envelope) {
        let _ = self.state.apply(env);
        match &env.event {
            Event::SweepStarted { runtime, gpus, .. } => {
                self.runtime = runtime.clone();
                self.gpus_total = *gpus;
                self.finished = false;
            }
            Event::SweepFinished { .. } => self.finished = true,
            Event::Log {
                run,
                stream,
                pipe,
                line,
                ..
            } => self.push_log(*run, *stream, *pipe, line),
            Event::Pull {
                run,
                layer,
                done,
                total,
            } => {
                self.pull_layers
                    .entry(*run)
                    .or_default()
                    .insert(layer.clone(), (*done, *total));
            }
            Event::Gpu { sample } => self.push_gpu(sample.clone()),
            Event::Image {
                image,
                status,
                detail,
            } => self.push_image_line(image, *status, detail),
            Event::State {
                run, to, attempt, ..
            } => {
                if let RunState::Active {
                    stage: crate::model::Stage::PreparingImage,
                } = to
                {
                    self.pull_layers.remove(run);
                    // The rings span attempts; say where a new one begins.
                    let has_lines = self
                        .logs
                        .get(run.0 as usize)
                        .is_some_and(|l| l.as_ref().is_some_and(|l| l.len() > 0));
                    if has_lines {
                        let marker = format!("──── attempt {attempt} ────");
                        self.push_log(*run, Stream::Server, Pipe::Stdout, &marker);
                        self.push_log(*run, Stream::Bench, Pipe::Stdout, &marker);
                    }
                }
                if matches!(to, RunState::Finished { .. } | RunState::Held { .. }) {
                    self.finished_order.push_back(*run);
                    self.learned.take();
                }
                if self.auto_select {
                    let cur = self.selected_run();
                    let cur_active = cur.is_some_and(|r| self.state.run(r).state.is_active());
                    if to.is_active() && !cur_active {
                        self.select_run(*run);
                    } else if Some(*run) == cur && !to.is_active() {
                        // The one we watched ended: move to the newest still running.
                        if let Some(next) = self.newest_active() {
                            self.select_run(next);
                        }
                    }
                }
            }
            _ => {}
        }
    }

    fn newest_active(&self) -> Option<RunId> {
        self.state
            .runs
            .iter()
            .enumerate()
            .filter(|(_, r)| r.state.is_active())
            .max_by_key(|(_, r)| r.started_ms.unwrap_or(0))
            .map(|(i, _)| RunId(i as u32))
    }

    /// A prefetch's line (a build's log, a status) into each run still waiting for it.
    fn push_image_line(&mut self, image: &str, status: crate::event::ImageStatus, detail: &str) {
        use crate::event::ImageStatus;
        let line = match status {
            ImageStatus::Log if detail.is_empty() => return, // pull progress: the bar shows it
            ImageStatus::Log => detail.to_string(),
            s => format!("image {image} {}: {detail}", s.as_str()),
        };
        let pipe = match status {
            ImageStatus::Failed | ImageStatus::Full => Pipe::Stderr,
            _ => Pipe::Stdout,
        };
        let waiting: Vec<RunId> = self
            .runs_by_image
            .get(image)
            .into_iter()
            .flatten()
            .copied()
            .filter(|r| {
                matches!(
                    self.state.run(*r).state,
                    RunState::Queued
                        | RunState::Active {
                            stage: crate::model::Stage::PreparingImage
                        }
                )
            })
            .collect();
        for r in waiting {
            self.push_log(r, Stream::Docker, pipe, &line);
        }
    }

    fn push_log(&mut self, run: RunId, stream: Stream, pipe: Pipe, line: &str) {
        let Some(slot) = self.logs.get_mut(run.0 as usize) else {
            return;
        };
        self.lines_seen += 1;
        let logs = slot.get_or_insert_with(Default::default);
        let (ring, tag) = match stream {
            Stream::Bench => (&mut logs.bench, None),
            Stream::Server => (&mut logs.server, None),
            Stream::Docker => (&mut logs.server, Some("docker")),
            Stream::Pull => (&mut logs.server, Some("pull")),
        };
        let error = is_error_line(line) || (pipe == Pipe::Stderr && tag.is_some());
        ring.push_back(LogLine {
            text: line.into(),
            error,
            tag,
        });
        let tab = if stream == Stream::Bench {
            LogTab::Bench
        } else {
            LogTab::Server
        };
        if ring.len() > RING_LINES {
            ring.pop_front();
            logs.dropped += 1;
            if let Some(a) = self.search_at.as_mut() {
                *a = a.saturating_sub(1);
            }
        } else {
            self.lines_in_memory += 1;
        }
        if !self.follow && self.selected_run() == Some(run) && self.log_tab == tab {
            self.log_scroll += 1;
        }
        while self.lines_in_memory > TOTAL_LINES {
            let Some(old) = self.finished_order.pop_front() else {
                break;
            };
            if Some(old) == self.selected_run() {
                continue;
            }
            if let Some(l) = self.logs[old.0 as usize].take() {
                self.lines_in_memory -= l.len();
            }
        }
    }

    pub fn on_gpu(&mut self, msg: GpuMsg) {
        match msg {
            GpuMsg::Unavailable(why) => self.gpu_source = GpuSource::Unavailable(why),
            GpuMsg::Samples(samples) => {
                self.gpu_source = GpuSource::Nvml;
                let n = samples
                    .iter()
                    .map(|(s, _)| s.index + 1)
                    .max()
                    .unwrap_or(0)
                    .max(self.gpus_total);
                let holders = super::gpu::holders(&self.state, n);
                for (mut s, pids) in samples {
                    s.run = holders
                        .get(s.index as usize)
                        .copied()
                        .flatten()
                        .map(|h| h.0);
                    let foreign = if s.run.is_none() { pids.len() } else { 0 };
                    let i = s.index as usize;
                    self.push_gpu(s);
                    self.gpus[i].foreign = foreign;
                }
            }
        }
    }

    pub fn sim_gpu_tick(&mut self) {
        self.gpu_source = GpuSource::Simulated;
        for s in super::gpu::synthesize(&self.state, self.gpus_total, self.now_ms) {
            self.push_gpu(s);
        }
    }

    fn push_gpu(&mut self, s: GpuSample) {
        let i = s.index as usize;
        while self.gpus.len() <= i {
            let index = self.gpus.len() as u32;
            self.gpus.push(GpuView {
                foreign: 0,
                // Until its own sample arrives, a GPU reads as "no sample".
                sample: GpuSample {
                    index,
                    name: String::new(),
                    util_pct: 0,
                    mem_used_mib: 0,
                    mem_total_mib: 0,
                    temp_c: 0,
                    power_w: 0,
                    run: None,
                },
                util: VecDeque::new(),
                mem_pct: VecDeque::new(),
            });
        }
        let g = &mut self.gpus[i];
        g.util.push_back(s.util_pct as u64);
        g.mem_pct
            .push_back(s.mem_used_mib * 100 / s.mem_total_mib.max(1));
        if g.util.len() > GPU_HISTORY {
            g.util.pop_front();
            g.mem_pct.pop_front();
        }
        g.sample = s;
    }

    // ---- queries ------------------------------------------------------------------

    pub fn shown_log(&self) -> Option<&VecDeque<LogLine>> {
        let run = self.selected_run()?;
        Some(self.logs.get(run.0 as usize)?.as_ref()?.tab(self.log_tab))
    }

    /// Estimated time left: measured mean run time × remaining GPU demand / GPUs.
    pub fn eta_ms(&self) -> Option<u64> {
        let mean = self.state.mean_run_ms()?;
        let demand: u64 = self
            .state
            .runs
            .iter()
            .zip(&self.plan.runs)
            .filter(|(r, _)| matches!(r.state, RunState::Queued | RunState::Active { .. }))
            .map(|(_, s)| s.gpus.max(1) as u64)
            .sum();
        Some(mean * demand / self.gpus_total.max(1) as u64)
    }

    pub fn gpus_busy(&self) -> u32 {
        super::gpu::holders(&self.state, self.gpus_total)
            .iter()
            .filter(|h| h.is_some())
            .count() as u32
    }

    /// Rows of the results view after filtering and sorting.
    pub fn result_rows(&self) -> Vec<RunId> {
        let f = &self.results;
        let text = f.text.as_ref().map(|t| t.to_lowercase());
        let model = f.model.as_ref().map(|t| t.to_lowercase());
        let rows: Vec<RunId> = self
            .plan
            .runs
            .iter()
            .filter(|spec| {
                let r = self.state.run(spec.id);
                let c = self.plan.commit_of(spec);
                f.status.is_none_or(|s| s.matches(&r.state))
                    && f.category
                        .is_none_or(|cat| run_category(&r.state, r.finding.as_ref()) == Some(cat))
                    && model
                        .as_ref()
                        .is_none_or(|m| c.model.as_deref().unwrap_or("").to_lowercase().contains(m))
                    && text.as_ref().is_none_or(|t| {
                        spec.key.to_lowercase().contains(t)
                            || c.title.to_lowercase().contains(t)
                            || c.model.as_deref().unwrap_or("").to_lowercase().contains(t)
                            || r.state.label().to_lowercase().contains(t)
                    })
            })
            .map(|s| s.id)
            .collect();
        let col = f.sort_col;
        let mut keyed: Vec<(SortKey, RunId)> = rows
            .into_iter()
            .map(|r| (self.sort_key(r, col), r))
            .collect();
        keyed.sort_by(|(ka, a), (kb, b)| ka.cmp_to(kb, f.reverse).then(a.cmp(b)));
        keyed.into_iter().map(|(_, r)| r).collect()
    }

    fn sort_key(&self, run: RunId, col: usize) -> SortKey {
        let spec = &self.plan.runs[run.0 as usize];
        let c = self.plan.commit_of(spec);
        let r = self.state.run(run);
        match col {
            0 => SortKey::Text(c.commit.clone()),
            1 => SortKey::Num(spec.variant.order() as f64),
            2 => SortKey::Text(c.model.clone().unwrap_or_default()),
            3 => SortKey::Text(r.state.label()),
            4 => SortKey::Text(
                run_category(&r.state, r.finding.as_ref())
                    .map(|c| c.to_string())
                    .unwrap_or_default(),
            ),
            5 => SortKey::Opt(headline(&r.metrics).map(|h| h.1)),
            6 => SortKey::Opt(self.delta_pct(run)),
            7 => SortKey::Num(r.attempt as f64),
            _ => SortKey::Text(c.title.clone()),
        }
    }

    /// The headline metric's improvement over this commit's baseline, in percent (positive
    /// is better whichever way the metric points; `crate::metric::delta_label` words it).
    pub fn delta_pct(&self, run: RunId) -> Option<f64> {
        let base = self.baseline_of.get(run.0 as usize).copied().flatten()?;
        let (k, v) = headline(&self.state.run(run).metrics)?;
        let b = *self.state.run(base).metrics.get(k)?;
        crate::metric::improvement_pct(k, v, b)
    }

    // ---- keys ---------------------------------------------------------------------

    pub fn on_key(&mut self, key: Key) -> Vec<Effect> {
        self.toast = None;
        if let Some(input) = self.input.as_mut() {
            use crossterm::event::KeyCode;
            match key.code {
                KeyCode::Esc => self.input = None,
                KeyCode::Enter => {
                    let Input { kind, text } = self.input.take().expect("input");
                    return match kind {
                        InputKind::Search => {
                            self.set_search(text);
                            vec![]
                        }
                        InputKind::Command => self.run_command_line(&text),
                    };
                }
                KeyCode::Backspace if input.text.pop().is_none() => self.input = None,
                KeyCode::Backspace => {}
                KeyCode::Char(c) if !key.ctrl => input.text.push(c),
                _ => {}
            }
            return vec![];
        }
        if let Some(Popup::Confirm(what)) = &self.popup {
            use crossterm::event::KeyCode;
            let what = what.clone();
            if what == Confirm::Detach {
                self.popup = None;
                return match key.code {
                    KeyCode::Char('d') | KeyCode::Char('q') | KeyCode::Enter => {
                        vec![Effect::Detach]
                    }
                    KeyCode::Char('s') => vec![Effect::StopSweep],
                    _ => vec![],
                };
            }
            return match key.code {
                KeyCode::Char('y') | KeyCode::Char('Y') | KeyCode::Enter => {
                    self.popup = None;
                    match what {
                        Confirm::Quit => vec![Effect::Quit],
                        Confirm::Detach => vec![Effect::Detach],
                        Confirm::Cancel(run) => vec![Effect::Send(Command::Cancel { run })],
                        Confirm::SkipCategory(category) => {
                            vec![Effect::Send(Command::SkipCategory { category })]
                        }
                    }
                }
                KeyCode::Char('n') | KeyCode::Esc | KeyCode::Char('q') => {
                    self.popup = None;
                    vec![]
                }
                _ => vec![],
            };
        }
        let Some(action) = self.keymap.action(key) else {
            return vec![];
        };
        self.on_action(action)
    }

    pub fn on_action(&mut self, action: Action) -> Vec<Effect> {
        if let Some(Popup::Help { scroll }) = &mut self.popup {
            match action {
                Action::Down => *scroll += 1,
                Action::Up => *scroll = scroll.saturating_sub(1),
                Action::Quit | Action::Back | Action::Help | Action::Enter => self.popup = None,
                _ => {}
            }
            return vec![];
        }
        if matches!(self.popup, Some(Popup::Detail(_))) {
            match action {
                Action::Quit | Action::Back | Action::Enter => {
                    self.popup = None;
                    return vec![];
                }
                Action::OpenPager | Action::ApplyFix | Action::Retry | Action::Skip => {
                    self.popup = None;
                }
                _ => return vec![],
            }
        }
        // What the last frame showed selected; taken, so a second key without a redraw in
        // between (a test, a paste) sees the selection as it is now.
        let run = self.hits.shown.take().or_else(|| self.action_run());
        match action {
            Action::Help => self.popup = Some(Popup::Help { scroll: 0 }),
            Action::Detach if self.attached => return vec![Effect::Detach],
            Action::Detach => {
                self.toast = Some("nothing to detach from: this sweep runs in this process".into())
            }
            Action::Quit if self.attached && !self.finished => {
                self.popup = Some(Popup::Confirm(Confirm::Detach));
            }
            Action::Quit => {
                if self.state.counts().active > 0 && !self.finished {
                    self.popup = Some(Popup::Confirm(Confirm::Quit));
                } else {
                    return vec![Effect::Quit];
                }
            }
            Action::Back => {
                if self.search.is_some() {
                    self.search = None;
                    self.search_at = None;
                } else if self.view != View::Sweep {
                    self.view = View::Sweep;
                } else {
                    self.auto_select = true;
                    self.follow = true;
                    self.log_scroll = 0;
                    if let Some(r) = self.newest_active() {
                        self.select_run(r);
                    }
                }
            }
            Action::Up | Action::Down | Action::PageUp | Action::PageDown => {
                let n: isize = match action {
                    Action::Up => -1,
                    Action::Down => 1,
                    Action::PageUp => -20,
                    _ => 20,
                };
                self.move_selection(n);
            }
            Action::Top => match self.list_focus() {
                Focus::Queue => {
                    self.auto_select = false;
                    self.sel_commit = 0;
                }
                Focus::Results => self.results.selected = 0,
                Focus::Logs => {
                    self.follow = false;
                    self.log_scroll = self.shown_log().map_or(0, |l| l.len());
                }
            },
            Action::Bottom => match self.list_focus() {
                Focus::Queue => {
                    self.auto_select = false;
                    self.sel_commit = self.cells.len().saturating_sub(1);
                }
                Focus::Results => {
                    self.results.selected = self.result_rows().len().saturating_sub(1)
                }
                Focus::Logs => {
                    self.follow = true;
                    self.log_scroll = 0;
                }
            },
            Action::Left | Action::Right => {
                let right = action == Action::Right;
                if self.view == View::Results {
                    let n = RESULT_COLUMNS.len();
                    self.results.sort_col = if right {
                        (self.results.sort_col + 1) % n
                    } else {
                        (self.results.sort_col + n - 1) % n
                    };
                } else {
                    self.auto_select = false;
                    let n = self.variants.len().max(1);
                    self.sel_variant = if right {
                        (self.sel_variant + 1) % n
                    } else {
                        (self.sel_variant + n - 1) % n
                    };
                    self.log_scroll = 0;
                }
            }
            Action::Enter => {
                if let Some(r) = run {
                    self.popup = Some(Popup::Detail(r));
                }
            }
            Action::NextPane => {
                self.focus = match self.focus {
                    Pane::Queue => Pane::Logs,
                    Pane::Logs => Pane::Queue,
                }
            }
            Action::View(n) => {
                self.view = match n {
                    2 => View::Logs,
                    3 => View::Results,
                    _ => View::Sweep,
                }
            }
            Action::ApplyFix => {
                if let Some(r) = run {
                    let rec = self.state.run(r);
                    match rec.finding.as_ref().and_then(|f| f.recipe.clone()) {
                        Some(recipe) => {
                            return vec![Effect::Send(Command::ApplyFix {
                                run: r,
                                recipe: Some(recipe),
                            })]
                        }
                        None => self.toast = Some(format!("no fix is known for {r}")),
                    }
                }
            }
            Action::Retry => {
                if let Some(r) = run {
                    return vec![Effect::Send(Command::Retry { run: r })];
                }
            }
            Action::Skip => {
                if let Some(r) = run {
                    return vec![Effect::Send(Command::Skip { run: r })];
                }
            }
            Action::SkipCategory => {
                let cat = run.and_then(|r| {
                    let rec = self.state.run(r);
                    run_category(&rec.state, rec.finding.as_ref())
                });
                match cat {
                    Some(c) => self.popup = Some(Popup::Confirm(Confirm::SkipCategory(c))),
                    None => self.toast = Some("the selected run has no failure category".into()),
                }
            }
            Action::PauseResume => {
                let cmd = if self.state.paused.is_some() || !self.state.paused_models.is_empty() {
                    Command::Resume
                } else {
                    Command::Pause
                };
                return vec![Effect::Send(cmd)];
            }
            Action::Cancel => {
                if let Some(r) = run {
                    let st = &self.state.run(r).state;
                    if st.is_active() || *st == RunState::Queued {
                        self.popup = Some(Popup::Confirm(Confirm::Cancel(r)));
                    } else {
                        self.toast = Some(format!("{r} is not running or queued"));
                    }
                }
            }
            Action::OpenPager => {
                if let Some(r) = run {
                    return vec![Effect::Pager(r)];
                }
            }
            Action::Export => return vec![Effect::Export(None)],
            Action::CycleTheme => {
                self.theme = self.theme.next_builtin();
                self.toast = Some(format!("theme: {}", self.theme.name));
            }
            Action::Search => {
                self.input = Some(Input {
                    kind: InputKind::Search,
                    text: String::new(),
                })
            }
            Action::SearchNext => self.jump_match(true),
            Action::SearchPrev => self.jump_match(false),
            Action::CommandLine => {
                self.input = Some(Input {
                    kind: InputKind::Command,
                    text: String::new(),
                })
            }
            Action::Follow => {
                self.follow = !self.follow;
                if self.follow {
                    self.log_scroll = 0;
                }
            }
            Action::LogTab => {
                self.log_tab = match self.log_tab {
                    LogTab::Server => LogTab::Bench,
                    LogTab::Bench => LogTab::Server,
                };
                self.log_scroll = 0;
                self.search_at = None;
            }
            Action::SortNext => {
                self.results.sort_col = (self.results.sort_col + 1) % RESULT_COLUMNS.len()
            }
            Action::SortReverse => self.results.reverse = !self.results.reverse,
            Action::FilterStatus => {
                self.results.status = match self.results.status {
                    None => Some(StatusFilter::ALL[0]),
                    Some(s) => {
                        let i = StatusFilter::ALL.iter().position(|x| *x == s).unwrap_or(0);
                        StatusFilter::ALL.get(i + 1).copied()
                    }
                };
                self.results.selected = 0;
            }
        }
        vec![]
    }

    /// The run an action applies to: the results row in the results view, else the queue
    /// selection.
    pub fn action_run(&self) -> Option<RunId> {
        if self.view == View::Results {
            self.result_rows().get(self.results.selected).copied()
        } else {
            self.selected_run()
        }
    }

    fn list_focus(&self) -> Focus {
        match (self.view, self.focus) {
            (View::Results, _) => Focus::Results,
            (View::Logs, _) | (View::Sweep, Pane::Logs) => Focus::Logs,
            _ => Focus::Queue,
        }
    }

    pub fn move_selection(&mut self, n: isize) {
        match self.list_focus() {
            Focus::Queue => {
                self.auto_select = false;
                let max = self.cells.len().saturating_sub(1) as isize;
                self.sel_commit = (self.sel_commit as isize + n).clamp(0, max) as usize;
                self.log_scroll = 0;
                self.search_at = None;
            }
            Focus::Results => {
                let max = self.result_rows().len().saturating_sub(1) as isize;
                self.results.selected =
                    (self.results.selected as isize + n).clamp(0, max.max(0)) as usize;
            }
            Focus::Logs => self.scroll_logs(-n),
        }
    }

    /// Positive scrolls back in time.
    pub fn scroll_logs(&mut self, n: isize) {
        let len = self.shown_log().map_or(0, |l| l.len()) as isize;
        let s = (self.log_scroll as isize + n).clamp(0, len);
        self.log_scroll = s as usize;
        self.follow = s == 0;
    }

    fn set_search(&mut self, text: String) {
        if text.is_empty() {
            self.search = None;
            self.search_at = None;
            return;
        }
        if self.view == View::Results {
            self.results.text = Some(text);
            self.results.selected = 0;
            return;
        }
        self.search = Some(text);
        self.search_at = None;
        self.jump_match(false);
    }

    pub fn line_matches(&self, line: &str) -> bool {
        match &self.search {
            Some(q) => find_all(line, q).next().is_some(),
            None => false,
        }
    }

    /// Move to the next (older with `false`... newer with `true`) matching line and
    /// scroll so it is in view.
    fn jump_match(&mut self, forward: bool) {
        let Some(q) = self.search.clone() else {
            return;
        };
        let Some(lines) = self.shown_log() else {
            return;
        };
        let len = lines.len();
        if len == 0 {
            return;
        }
        let start = self
            .search_at
            .unwrap_or(len.saturating_sub(1 + self.log_scroll));
        let hit = if forward {
            (start + 1..len)
                .chain(0..=start.min(len - 1))
                .find(|&i| find_all(&lines[i].text, &q).next().is_some())
        } else {
            let from = if self.search_at.is_some() { start } else { len };
            (0..from)
                .rev()
                .chain((from..len).rev())
                .find(|&i| find_all(&lines[i].text, &q).next().is_some())
        };
        match hit {
            Some(i) => {
                self.search_at = Some(i);
                // Put the match a few lines above the bottom edge.
                self.log_scroll = (len - 1 - i).saturating_sub(3);
                self.follow = self.log_scroll == 0 && i + 1 == len;
                if !self.follow && self.log_scroll == 0 {
                    self.follow = false;
                }
            }
            None => self.toast = Some(format!("no match for `{q}`")),
        }
    }

    /// `:` commands, k9s-style.
    pub fn run_command_line(&mut self, line: &str) -> Vec<Effect> {
        let mut parts = line.split_whitespace();
        let cmd = parts.next().unwrap_or("");
        let rest: Vec<&str> = parts.collect();
        let arg = rest.join(" ");
        match cmd {
            "" => {}
            "q" | "quit" => return self.on_action(Action::Quit),
            "q!" | "quit!" => return vec![Effect::Quit],
            "help" | "h" => self.popup = Some(Popup::Help { scroll: 0 }),
            "pause" => return vec![Effect::Send(Command::Pause)],
            "resume" => return vec![Effect::Send(Command::Resume)],
            "export" => return vec![Effect::Export((!arg.is_empty()).then_some(arg))],
            "sweep" | "1" => self.view = View::Sweep,
            "logs" | "2" => self.view = View::Logs,
            "results" | "3" => self.view = View::Results,
            "theme" => match Theme::load(
                &arg,
                super::config::config_dir()
                    .map(|d| d.join("themes"))
                    .as_deref(),
            ) {
                Ok(t) => {
                    self.theme = if self.theme.mono { t.monochrome() } else { t };
                }
                Err(e) => self.toast = Some(e.to_string()),
            },
            "skip-category" => match arg.parse::<Category>() {
                Ok(c) => self.popup = Some(Popup::Confirm(Confirm::SkipCategory(c))),
                Err(e) => self.toast = Some(e),
            },
            "sort" => match RESULT_COLUMNS.iter().position(|c| *c == arg) {
                Some(i) => {
                    self.results.sort_col = i;
                    self.view = View::Results;
                }
                None => self.toast = Some(format!("columns: {}", RESULT_COLUMNS.join(", "))),
            },
            "filter" => {
                self.view = View::Results;
                self.results.selected = 0;
                if arg.is_empty() || arg == "clear" {
                    self.results = ResultsState {
                        sort_col: self.results.sort_col,
                        reverse: self.results.reverse,
                        ..Default::default()
                    };
                } else if let Some(v) = arg.strip_prefix("status=") {
                    match StatusFilter::ALL.iter().find(|s| s.label() == v) {
                        Some(s) => self.results.status = Some(*s),
                        None => self.toast = Some(format!("unknown status `{v}`")),
                    }
                } else if let Some(v) = arg.strip_prefix("category=") {
                    match v.parse::<Category>() {
                        Ok(c) => self.results.category = Some(c),
                        Err(e) => self.toast = Some(e),
                    }
                } else if let Some(v) = arg.strip_prefix("model=") {
                    self.results.model = Some(v.to_string());
                } else {
                    self.results.text = Some(arg);
                }
            }
            other => self.toast = Some(format!("unknown command `:{other}` (try :help)")),
        }
        vec![]
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Focus {
    Queue,
    Logs,
    Results,
}

enum SortKey {
    Text(String),
    Num(f64),
    Opt(Option<f64>),
}

impl SortKey {
    /// Missing values sort last in either direction.
    fn cmp_to(&self, o: &SortKey, reverse: bool) -> std::cmp::Ordering {
        use std::cmp::Ordering::*;
        let dir = |x: std::cmp::Ordering| if reverse { x.reverse() } else { x };
        match (self, o) {
            (SortKey::Text(a), SortKey::Text(b)) => dir(a.cmp(b)),
            (SortKey::Num(a), SortKey::Num(b)) => dir(a.total_cmp(b)),
            (SortKey::Opt(a), SortKey::Opt(b)) => match (a, b) {
                (Some(a), Some(b)) => dir(a.total_cmp(b)),
                (Some(_), None) => Less,
                (None, Some(_)) => Greater,
                (None, None) => Equal,
            },
            _ => Equal,
        }
    }
}

/// The failure category of a run, observed or predicted.
pub fn run_category(state: &RunState, finding: Option<&crate::event::Finding>) -> Option<Category> {
    match state {
        RunState::Held { category } => Some(*category),
        RunState::Finished { outcome } => outcome.category(),
        _ => finding.map(|f| f.category),
    }
}

/// The one number shown in a queue cell: the kind's headline metric.
pub use crate::metric::headline;

/// Byte ranges of `q` in `s`; smart case (case-insensitive unless `q` has capitals).
pub fn find_all<'a>(s: &'a str, q: &'a str) -> Box<dyn Iterator<Item = (usize, usize)> + 'a> {
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
