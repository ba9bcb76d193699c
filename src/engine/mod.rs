//! The engine: one `tokio::select!` loop that starts runs on the runtime as GPUs allow,
//! folds what they report into state, parses and diagnoses, asks the policy what to do,
//! and applies operator commands. Every change goes out as an event to the observers
//! (store, logs, views) before the engine acts on it.

mod commands;
mod finish;
mod groups;
pub mod images;
pub mod logs;
pub mod offthread;
mod reference;
pub mod repeats;
mod rules;
mod start;

use crate::category::{Action, Category};
use crate::diagnose::{self, Catalog, FailureContext, RecipeBook, RecipeScope, Scanner};
use crate::event::{now_ms, Command, Envelope, Event, Finding, ImageStatus};
use crate::model::{Outcome, PauseBy, RunId, RunState, SkipBy, Stage, Stream};
use crate::observer::Observer;
use crate::parse::{self, StreamParser};
use crate::plan::{BenchKind, Plan};
use crate::policy::{Policy, PolicyConfig};
use crate::rewrite::decisions::Decisions;
use crate::runtime::{RunEnd, RunJob, RunReport, RunSink, Runtime, RuntimeMsg};
use crate::scheduler::Schedule;
use crate::state::SweepState;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// GPUs on this machine (never oversubscribed).
    pub gpus: u32,
    /// Seed for deterministic simulation and backoff jitter.
    pub seed: u64,
    /// Keep held runs waiting for an operator (TUI). Headless: held runs end as failed
    /// when nothing else is left to do, and the sweep can be resumed to retry them.
    pub wait_for_operator: bool,
}

/// A run being executed.
struct Active {
    attempt: u32,
    stage: Stage,
    cancel: CancellationToken,
    cancel_requested: bool,
    parser: StreamParser,
    scanner: Scanner,
    gpus: Vec<u32>,
    started: Instant,
    version_seen: bool,
}

use crate::category::NOT_RUN_GATED;

#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub counts: crate::state::Counts,
    pub failures: BTreeMap<Category, usize>,
    pub wall: Duration,
    pub gpu_seconds: f64,
    pub paused: Option<String>,
    pub interrupted: bool,
    pub leftovers_removed: Vec<String>,
    /// Runs that need more GPUs than this sweep has: they stay queued for a run that has
    /// them (`(runs, most GPUs any of them needs)`), never skipped for good.
    pub needs_more_gpus: (usize, u32),
    /// The window closed (`--until`) with these commits not started: they could not finish
    /// in time and stay queued for the next night.
    pub window_closed: Option<Vec<String>>,
}

pub struct Engine {
    plan: Arc<Plan>,
    /// Each commit's benchmark invocation, shared with every attempt (`rewrite::decisions`).
    decisions: Arc<Decisions>,
    runtime: Arc<dyn Runtime>,
    opts: EngineOptions,
    state: SweepState,
    /// What may start now and on which GPUs: the one place that decides it.
    schedule: Schedule,
    policy: Policy,
    catalog: Arc<Catalog>,
    recipes: Arc<RecipeBook>,
    observers: Vec<Box<dyn Observer>>,
    seq: u64,
    active: HashMap<RunId, Active>,
    /// Plan-time predictions (e.g. the port-binding bug), shown before the night starts.
    predicted: HashMap<RunId, Finding>,
    gpu_ms: u128,
    /// Multiplies policy delays (backoff): 1 for real runtimes, 1/speed for the sim.
    time_scale: f64,
    cmd_rx: mpsc::UnboundedReceiver<Command>,
    msg_tx: mpsc::Sender<(RunId, u32, RuntimeMsg)>,
    msg_rx: mpsc::Receiver<(RunId, u32, RuntimeMsg)>,
    /// A pause the sweep starts in: the disk watch found a directory below its floor, or
    /// the operator's pause outlived the last daemon (`store::pause`).
    start_paused: Option<(String, PauseBy)>,
    /// Runs ended when adaptive repeats were last considered (see `repeats`).
    repeats_looked_at: Option<(usize, u64)>,
    /// Drift reference runs: when the last was released, the shifts told.
    drift: reference::Drift,
    /// What the operator (and the recipes) decided that later attempts follow.
    rules: rules::Rules,
    /// Images ahead of the GPUs (runtimes that prefetch): the budget, what the engine
    /// tells the image task and what it hears back (which images a run may start on is
    /// the schedule's).
    prefetch: images::Prefetch,
    /// Held unknown failures, waiting for a client to decide within a bound.
    held: groups::Held,
}

/// Where operators send commands to a running engine.
pub type CommandSender = mpsc::UnboundedSender<Command>;

impl Engine {
    pub fn new(
        plan: Arc<Plan>,
        runtime: Arc<dyn Runtime>,
        opts: EngineOptions,
    ) -> (Engine, CommandSender) {
        let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
        let (msg_tx, msg_rx) = mpsc::channel(4096);
        let state = SweepState::for_plan(&plan);
        let recipes = Arc::new(RecipeBook::builtin());
        let engine = Engine {
            rules: rules::Rules::default(),
            prefetch: images::Prefetch::default(),
            held: groups::Held::default(),
            decisions: Arc::default(),
            schedule: Schedule::new(plan.clone(), opts.gpus),
            plan,
            runtime,
            opts,
            state,
            policy: Policy::new(PolicyConfig::default(), recipes.clone()),
            catalog: Arc::new(Catalog::builtin()),
            recipes,
            observers: Vec::new(),
            seq: 0,
            active: HashMap::new(),
            predicted: HashMap::new(),
            gpu_ms: 0,
            time_scale: 1.0,
            cmd_rx,
            msg_tx,
            msg_rx,
            start_paused: None,
            repeats_looked_at: None,
            drift: Default::default(),
        };
        (engine, cmd_tx)
    }

    /// Operator configuration: policy per category, extra signatures and recipes.
    pub fn with_diagnosis(
        mut self,
        cfg: PolicyConfig,
        catalog: Arc<Catalog>,
        recipes: Arc<RecipeBook>,
    ) -> Self {
        self.policy = Policy::new(cfg, recipes.clone());
        self.catalog = catalog;
        self.recipes = recipes;
        self
    }

    /// Scale policy delays (retry backoff) to the runtime's clock: the sim at 100× waits
    /// a hundredth of the real backoff, at max speed none.
    /// The disk budget for images brought ahead of their runs.
    pub fn with_image_budget(mut self, budget: crate::images::Budget) -> Self {
        self.prefetch.image_budget = budget;
        self
    }

    /// An unknown failure held because the operator's policy says `operator` for it waits
    /// at most `limit` while no client is attached ([`Engine::count_clients`]), then fails.
    pub fn with_held_limit(mut self, limit: Duration) -> Self {
        self.held.held_limit = Some(limit);
        self
    }

    /// Start paused, for `why` and by whom, before any run is given GPUs.
    pub(crate) fn with_start_paused(mut self, why: Option<(String, PauseBy)>) -> Self {
        self.start_paused = why;
        self
    }

    /// The night ends when the window closes: no run starts that cannot finish before it.
    /// The box's calibration: the noise band drift references are judged by.
    pub(crate) fn with_calibration(mut self, c: crate::stats::Calibration) -> Self {
        self.drift.calibration = c;
        self
    }

    pub fn with_window(mut self, w: Option<crate::window::Window>) -> Self {
        self.schedule.set_window(w);
        self
    }

    /// The daemon's count of attached clients: nobody attached means nobody to decide.
    pub fn count_clients(&mut self, clients: Arc<std::sync::atomic::AtomicUsize>) {
        self.held.clients = Some(clients);
    }

    pub fn with_time_scale(mut self, scale: f64) -> Self {
        self.time_scale = if scale.is_finite() {
            scale.max(0.0)
        } else {
            1.0
        };
        self
    }

    /// Start from a stored state (resume). Runs caught mid-flight become new attempts.
    pub fn with_state(mut self, state: SweepState) -> Self {
        if state.runs.len() == self.state.runs.len() {
            self.decisions = Arc::new(Decisions::seeded(&state.invocations));
            self.state = state;
        }
        self
    }

    pub fn observe(&mut self, o: Box<dyn Observer>) {
        self.observers.push(o);
    }

    pub fn state(&self) -> &SweepState {
        &self.state
    }

    fn emit(&mut self, event: Event) -> anyhow::Result<()> {
        self.seq += 1;
        let env = Envelope {
            seq: self.seq,
            at_ms: now_ms(),
            event,
        };
        if let Err(e) = self.state.apply(&env) {
            // A runtime reporting an impossible step is a bug there, not a reason to lose
            // the sweep: record it as a log line and carry on.
            tracing_warn(&format!("ignored event: {e}"));
            return Ok(());
        }
        self.schedule.apply(&env.event);
        for o in &mut self.observers {
            o.on_event(&env)?;
        }
        Ok(())
    }

    fn set_state(
        &mut self,
        run: RunId,
        to: RunState,
        detail: Option<String>,
    ) -> anyhow::Result<()> {
        self.transition(run, to, detail, false)
    }

    /// An attempt a shutdown or a crash cut short goes back to the queue, counted as an
    /// interruption (by type: the words are for people).
    fn requeue_interrupted(&mut self, run: RunId, detail: &str) -> anyhow::Result<()> {
        self.transition(run, RunState::Queued, Some(detail.into()), true)
    }

    fn transition(
        &mut self,
        run: RunId,
        to: RunState,
        detail: Option<String>,
        interrupted: bool,
    ) -> anyhow::Result<()> {
        let rec = self.state.run(run);
        let from = rec.state.clone();
        let attempt = if crate::model::starts_new_attempt(&from, &to)
            || (from.is_active() && to == RunState::Queued)
        {
            rec.attempt + 1
        } else if from == RunState::Queued && to.is_active() {
            rec.attempt.max(1)
        } else {
            rec.attempt
        };
        let gpus = self
            .active
            .get(&run)
            .map(|a| a.gpus.clone())
            .unwrap_or_default();
        self.prefetch.demand_dirty = true;
        self.emit(Event::State {
            run,
            attempt,
            from,
            to,
            detail,
            gpus,
            interrupted,
        })
    }

    /// Run the sweep until every run is finished, the operator shuts it down, or (headless)
    /// only held or paused work remains.
    pub async fn run(
        mut self,
        shutdown: CancellationToken,
    ) -> anyhow::Result<(Summary, SweepState)> {
        let started = Instant::now();
        let mut summary = Summary::default();
        match self.runtime.cleanup_leftovers(&self.plan.name).await {
            Ok(removed) => summary.leftovers_removed = removed,
            Err(e) => tracing_warn(&format!("could not look for leftovers: {e:#}")),
        }
        let (name, runs, gpus, rt) = (
            self.plan.name.clone(),
            self.plan.runs.len(),
            self.opts.gpus,
            self.runtime.name().to_string(),
        );
        self.emit(Event::SweepStarted {
            name,
            runs,
            gpus,
            runtime: rt,
        })?;
        let ranks = self.commit_ranks();
        self.schedule.set_ranks(ranks);
        self.schedule
            .set_typical(self.runtime.typical_run().mul_f64(self.time_scale));
        self.schedule.rebuild(&self.state);
        self.prepare_runs()?;
        if let Some((reason, by)) = self.start_paused.take() {
            if self.state.paused.is_none() {
                self.emit(Event::Paused { reason, by })?;
            }
        }
        let image_stop = CancellationToken::new();
        self.start_images(&image_stop);
        let _stop_images = image_stop.drop_guard();

        // An observer that fails (store, log disk full) ends the sweep; runs in flight are
        // then torn down, not abandoned holding GPUs.
        let outcome: anyhow::Result<()> = async {
            loop {
                if !shutdown.is_cancelled() {
                    self.release_repeats()?;
                    self.release_references()?;
                    self.start_runs()?;
                }
                self.send_demand();
                if self.active.is_empty() && self.ends_here(&shutdown, &mut summary)? {
                    break;
                }
                // The schedule's own changes of mind (a backoff over, the window's
                // close), a held run's bound, the next drift reference.
                let now = Instant::now();
                let scheduled = self.schedule.wake(now.into_std()).map(Instant::from_std);
                let reference = self.next_reference_due().filter(|t| *t > now);
                let wake = scheduled
                    .iter()
                    .chain(self.held.held_until.values().map(|(t, _)| t))
                    .chain(reference.as_ref())
                    .min()
                    .copied()
                    .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
                tokio::select! {
                    Some((run, attempt, msg)) = self.msg_rx.recv() => self.on_runtime(run, attempt, msg)?,
                    Some(r) = recv_report(&mut self.prefetch.image_rx) => self.on_image(r)?,
                    Some(cmd) = self.cmd_rx.recv() => {
                        if cmd == Command::Shutdown {
                            shutdown.cancel();
                        }
                        self.on_command(cmd)?;
                    }
                    _ = tokio::time::sleep_until(wake) => {
                        self.schedule.tick(Instant::now().into_std());
                        self.expire_holds()?;
                    }
                    _ = shutdown.cancelled(), if !self.active.is_empty() && !self.active.values().all(|a| a.cancel.is_cancelled()) => {
                        for a in self.active.values() {
                            a.cancel.cancel();
                        }
                    }
                }
            }
            Ok(())
        }
        .await;
        if let Err(e) = outcome {
            self.abort_in_flight().await;
            return Err(e);
        }
        self.summarize(&mut summary, started);
        self.emit(Event::SweepFinished {
            interrupted: summary.interrupted,
        })?;
        Ok((summary, self.state))
    }

    /// Bring images onto the box ahead of the runs, when the runtime does.
    fn start_images(&mut self, stop: &CancellationToken) {
        if !self.runtime.prefetches() {
            return;
        }
        let (demand_tx, demand_rx) = tokio::sync::watch::channel(self.demand());
        let (tx, rx) = mpsc::channel(1024);
        tokio::spawn(images::run(
            self.runtime.clone(),
            self.prefetch.image_budget.clone(),
            demand_rx,
            tx,
            stop.clone(),
        ));
        self.prefetch.demand_tx = Some(demand_tx);
        self.prefetch.image_rx = Some(rx);
        // From now on a run waits for its image to be on the box.
        self.schedule.gate_images();
    }

    /// With nothing in flight: whether the sweep ends now. It ends when shut down, when the
    /// window refuses every queued run, or when nothing is left it may run — headless,
    /// held runs are then finalized; with an operator, held, paused and breaker-stopped
    /// work keeps it waiting.
    fn ends_here(
        &mut self,
        shutdown: &CancellationToken,
        summary: &mut Summary,
    ) -> anyhow::Result<bool> {
        if shutdown.is_cancelled() {
            summary.interrupted = true;
            return Ok(true);
        }
        // Runs of a model the breaker stopped wait like a paused sweep's.
        let queued_waiting = self.state.runs.iter().enumerate().any(|(i, r)| {
            r.state == RunState::Queued
                && self.plan.runs[i].gpus <= self.opts.gpus
                && !self.schedule.model_paused(i)
        });
        let now = Instant::now().into_std();
        // The window has closed for every queued run: the night ends here, with what did
        // not fit queued for the next.
        if queued_waiting && self.schedule.window_refuses_all(&self.state, now) {
            summary.window_closed = Some(self.not_started_commits());
            return Ok(true);
        }
        // The window has closed: nothing more starts tonight, attended or not. Held runs
        // stay held in the store for the morning (`run` again resumes them).
        if self.schedule.window_closed(now) {
            summary.window_closed = Some(self.not_started_commits());
            return Ok(true);
        }
        let held = self.state.counts().held > 0;
        let paused = self.state.paused.is_some();
        // Without an operator, other models' runs go on; once only the stopped model's are
        // left, the sweep ends with them queued, as a pause does.
        let waiting_models = !self.state.paused_models.is_empty();
        if !self.opts.wait_for_operator {
            if paused || (!queued_waiting && !held) {
                return Ok(true);
            }
            if !queued_waiting && held {
                self.finalize_held()?;
                return Ok(true);
            }
            return Ok(false);
        }
        Ok(!queued_waiting && !held && !paused && !waiting_models)
    }

    /// The night's summary from the final state.
    fn summarize(&self, summary: &mut Summary, started: Instant) {
        summary.counts = self.state.counts();
        summary.needs_more_gpus = self
            .state
            .runs
            .iter()
            .zip(self.plan.runs.iter())
            .filter(|(r, spec)| r.state == RunState::Queued && spec.gpus > self.opts.gpus)
            .fold((0, 0), |(n, most), (_, spec)| (n + 1, most.max(spec.gpus)));
        summary.failures = self.state.failures_by_category();
        summary.wall = started.elapsed();
        summary.gpu_seconds = self.gpu_ms as f64 / 1000.0;
        summary.paused = self.state.paused.clone().or_else(|| {
            let models: Vec<&String> = self.state.paused_models.keys().collect();
            (!models.is_empty()).then(|| {
                let list: Vec<&str> = models.iter().map(|m| m.as_str()).collect();
                format!(
                    "breaker: the runs of {} wait (resume to run them)",
                    list.join(", ")
                )
            })
        });
    }

    /// Cancel every run in flight and wait (bounded) for the runtimes to tear down.
    async fn abort_in_flight(&mut self) {
        for a in self.active.values() {
            a.cancel.cancel();
        }
        let deadline = Instant::now() + Duration::from_secs(120);
        while !self.active.is_empty() {
            match tokio::time::timeout_at(deadline, self.msg_rx.recv()).await {
                Ok(Some((run, _, RuntimeMsg::Done(_)))) => {
                    if self.active.remove(&run).is_some() {
                        self.schedule.ended(run);
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
    }

    /// Skip what cannot run, re-queue what a crash interrupted, predict known bugs.
    fn prepare_runs(&mut self) -> anyhow::Result<()> {
        let plan = self.plan.clone();
        // Commit-wide workarounds recorded before a restart still apply to the commit.
        for spec in &plan.runs {
            for f in self.state.run(spec.id).fixes.clone() {
                if let Some(r) = self.recipes.get(&f) {
                    if r.scope == RecipeScope::Commit {
                        self.rules
                            .commit_env
                            .entry(spec.commit)
                            .or_default()
                            .extend(r.env.clone());
                        self.rules.commit_recipes.insert((spec.commit, f.clone()));
                    }
                }
            }
        }
        for spec in &plan.runs {
            let id = spec.id;
            let st = self.state.run(id).state.clone();
            if st.is_active() {
                self.requeue_interrupted(id, "interrupted: re-queued as a new attempt")?;
            }
            if self.state.run(id).state != RunState::Queued {
                continue;
            }
            // A run that needs more GPUs than this sweep has stays queued: the next `run`
            // with the GPUs (`--gpus N`, another box) picks it up. Skipping it would be for good.
            if let Some(reason) = spec.skip_reason.clone() {
                self.skip(id, SkipBy::Plan, &reason)?;
                continue;
            }
            // Adaptive repeats wait until their commit's comparison asks for them.
            if spec.extra {
                self.skip(id, SkipBy::Reserve, repeats::HELD_BACK)?;
                continue;
            }
            // Drift references after the night's first wait until they are due.
            if spec.reference && plan.runs.iter().any(|s| s.reference && s.id < id) {
                self.skip(id, SkipBy::Reserve, reference::REFERENCE_WAITS)?;
                continue;
            }
            let commit = plan.commit_of(spec);
            if let Some(v) = &commit.vllm_version {
                if let Some(d) = diagnose::predict_port_bug(v, commit.needs_server()) {
                    let finding = Finding {
                        category: d.category,
                        evidence: d.evidence,
                        action: Action::Operator,
                        recipe: d.recipe,
                        reason: format!("predicted {} (vLLM {v}, serving)", d.category),
                        predicted: true,
                        confidence: Some(d.confidence),
                        telling: d.telling,
                        kind: None,
                    };
                    self.predicted.insert(id, finding.clone());
                    let attempt = self.state.run(id).attempt;
                    self.emit(Event::Diagnosed {
                        run: id,
                        attempt,
                        finding,
                    })?;
                }
            }
        }
        Ok(())
    }

    fn finalize_held(&mut self) -> anyhow::Result<()> {
        let held: Vec<(RunId, Category)> = self
            .state
            .runs
            .iter()
            .enumerate()
            .filter_map(|(i, r)| match r.state {
                RunState::Held { category } => Some((RunId(i as u32), category)),
                _ => None,
            })
            .collect();
        for (id, category) in held {
            self.set_state(
                id,
                RunState::Finished {
                    outcome: Outcome::Failed { category },
                },
                Some(
                    "held for an operator; none attached (headless) — retry with --retry-failed"
                        .into(),
                ),
            )?;
        }
        Ok(())
    }

    /// The night's order, as `bench night` plays it: commits needing many GPUs first (the
    /// box is empty at dusk; later, an 8-GPU run waits for the last 1-GPU run while up to
    /// seven GPUs idle), then the rest longest first — within the operator's priorities.
    /// With a window, the most wanted and cheapest commits first, so what does not fit is
    /// the least wanted.
    fn commit_ranks(&self) -> crate::night::order::Ranks {
        if self.schedule.window().is_some() {
            crate::night::order::window_ranks(&self.plan)
        } else {
            crate::night::order::plan_ranks(&self.plan, self.opts.gpus)
        }
    }

    /// Commits with queued runs and none started: what did not fit the window.
    fn not_started_commits(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for (i, r) in self.state.runs.iter().enumerate() {
            let spec = &self.plan.runs[i];
            let commit_ran = || {
                self.plan
                    .runs
                    .iter()
                    .any(|s| s.commit == spec.commit && self.state.run(s.id).attempt > 0)
            };
            if r.state == RunState::Queued && !commit_ran() {
                let c = &self.plan.commit_of(spec).commit;
                let short: String = c.chars().take(8).collect();
                if !out.contains(&short) {
                    out.push(short);
                }
            }
        }
        out
    }

    fn on_runtime(&mut self, run: RunId, attempt: u32, msg: RuntimeMsg) -> anyhow::Result<()> {
        let Some(a) = self.active.get_mut(&run) else {
            return Ok(());
        };
        if a.attempt != attempt {
            return Ok(());
        }
        match msg {
            RuntimeMsg::Stage(stage) => {
                if stage > a.stage {
                    a.stage = stage;
                    self.set_state(run, RunState::Active { stage }, None)?;
                }
            }
            RuntimeMsg::Log { stream, pipe, line } => {
                // Arrival time lets the scanner judge capture's pace (a hang is silence).
                let at = a.started.elapsed().as_secs_f64();
                a.scanner.feed_at(stream, &line, Some(at));
                let mut updates = Vec::new();
                if stream == Stream::Bench {
                    updates = a.parser.feed_line(line.as_bytes());
                }
                let mut version = None;
                if stream == Stream::Server && !a.version_seen {
                    if let Some(v) = parse::detect_version(&line) {
                        a.version_seen = true;
                        version = Some(v);
                    }
                }
                self.emit(Event::Log {
                    run,
                    attempt,
                    stream,
                    pipe,
                    line,
                })?;
                for u in updates {
                    self.emit(Event::Metric {
                        run,
                        attempt,
                        key: u.key,
                        value: u.value,
                    })?;
                }
                if let Some(version) = version {
                    self.emit(Event::VllmVersion { run, version })?;
                }
            }
            RuntimeMsg::Pull { layer, done, total } => self.emit(Event::Pull {
                run,
                layer,
                done,
                total,
            })?,
            RuntimeMsg::FixApplied { recipe } => self.emit(Event::FixApplied {
                run,
                attempt,
                recipe,
            })?,
            RuntimeMsg::Provenance { key, value } => self.emit(Event::Provenance {
                run,
                attempt,
                key,
                value,
            })?,
            RuntimeMsg::Decided(invocation) => {
                let spec = &self.plan.runs[run.0 as usize];
                let commit = self.plan.commit_of(spec).commit.clone();
                self.emit(Event::Decided {
                    run,
                    attempt,
                    commit,
                    invocation,
                })?
            }
            RuntimeMsg::Done(report) => self.finish(run, report)?,
        }
        Ok(())
    }
}

/// The next report of the image task; never, when there is none.
async fn recv_report(rx: &mut Option<mpsc::Receiver<images::Report>>) -> Option<images::Report> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// A per-attempt seed: the same sweep seed, run and attempt always give the same value.
pub fn mix(seed: u64, key: &str, attempt: u32) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
    for b in key.bytes().chain(attempt.to_le_bytes()) {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn tracing_warn(msg: &str) {
    tracing::warn!("{msg}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_are_stable_and_distinct() {
        assert_eq!(mix(1, "a/baseline", 1), mix(1, "a/baseline", 1));
        assert_ne!(mix(1, "a/baseline", 1), mix(1, "a/baseline", 2));
        assert_ne!(mix(1, "a/baseline", 1), mix(2, "a/baseline", 1));
    }
}
