//! The engine: one `tokio::select!` loop that starts runs on the runtime as GPUs allow,
//! folds what they report into state, parses and diagnoses, asks the policy what to do,
//! and applies operator commands. Every change goes out as an event to the observers
//! (store, logs, views) before the engine acts on it.

pub mod images;
pub mod logs;
pub mod observer;
pub mod offthread;

use crate::category::{Action, Category};
use crate::diagnose::{self, Catalog, FailureContext, RecipeBook, RecipeScope, Scanner};
use crate::event::{now_ms, Command, Envelope, Event, Finding, ImageStatus};
use crate::model::{Outcome, RunId, RunState, Stage, Stream};
use crate::parse::{self, StreamParser};
use crate::plan::{BenchKind, Plan};
use crate::policy::{Policy, PolicyConfig};
use crate::runtime::{RunEnd, RunJob, RunReport, RunSink, Runtime, RuntimeMsg};
use crate::scheduler::{GpuPool, Queue};
use crate::state::SweepState;
use observer::Observer;
use std::collections::{BTreeMap, HashMap, HashSet};
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

/// How the reason of a run skipped because its model is gated begins.
pub const NOT_RUN_GATED: &str = "not run (gated_model_auth): ";

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
}

pub struct Engine {
    plan: Arc<Plan>,
    runtime: Arc<dyn Runtime>,
    opts: EngineOptions,
    state: SweepState,
    pool: GpuPool,
    policy: Policy,
    catalog: Arc<Catalog>,
    recipes: Arc<RecipeBook>,
    observers: Vec<Box<dyn Observer>>,
    seq: u64,
    active: HashMap<RunId, Active>,
    not_before: HashMap<RunId, Instant>,
    /// Fixes to apply on the next attempt of a run.
    pending_fixes: HashMap<RunId, Vec<String>>,
    /// Environment added to every variant of a commit by commit-scope recipes.
    commit_env: HashMap<usize, BTreeMap<String, String>>,
    /// Commit-scope recipes already spread to every variant of a commit (by commit index).
    commit_recipes: HashSet<(usize, String)>,
    /// Plan-time predictions (e.g. the port-binding bug), shown before the night starts.
    predicted: HashMap<RunId, Finding>,
    gpu_ms: u128,
    /// Something happened that may let a queued run start (a GPU freed, a run queued, a
    /// resume, a backoff ended). Scheduling only then keeps a 10,000-run sweep linear.
    schedule_dirty: bool,
    queue: Queue,
    /// Multiplies policy delays (backoff): 1 for real runtimes, 1/speed for the sim.
    time_scale: f64,
    cmd_rx: mpsc::UnboundedReceiver<Command>,
    msg_tx: mpsc::Sender<(RunId, u32, RuntimeMsg)>,
    msg_rx: mpsc::Receiver<(RunId, u32, RuntimeMsg)>,
    /// Images ahead of the GPUs (runtimes that prefetch): the budget, what the engine
    /// tells the image task, what it hears back, and which images a run may start on.
    image_budget: crate::images::Budget,
    demand_tx: Option<tokio::sync::watch::Sender<images::Demand>>,
    image_rx: Option<mpsc::Receiver<images::Report>>,
    image_state: HashMap<String, ImageStatus>,
    demand_dirty: bool,
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
            pool: GpuPool::new(opts.gpus),
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
            not_before: HashMap::new(),
            pending_fixes: HashMap::new(),
            commit_env: HashMap::new(),
            commit_recipes: HashSet::new(),
            predicted: HashMap::new(),
            gpu_ms: 0,
            schedule_dirty: true,
            queue: Queue::default(),
            time_scale: 1.0,
            cmd_rx,
            msg_tx,
            msg_rx,
            image_budget: crate::images::Budget::default(),
            demand_tx: None,
            image_rx: None,
            image_state: HashMap::new(),
            demand_dirty: true,
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
        self.image_budget = budget;
        self
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
        match &env.event {
            Event::State {
                run,
                from,
                to,
                gpus,
                ..
            } => {
                let i = run.0 as usize;
                if *to == RunState::Queued || (from.is_active() && !to.is_active()) {
                    self.schedule_dirty = true;
                }
                if let Some(spec) = self.plan.runs.get(i) {
                    if *to == RunState::Queued && spec.gpus <= self.opts.gpus {
                        self.queue
                            .push(i, spec.commit, spec.variant.order(), spec.gpus);
                    } else if *to != RunState::Queued {
                        self.queue.remove(i);
                    }
                    if to.is_active() {
                        self.queue.commit_started(spec.commit, gpus);
                    }
                }
            }
            Event::Resumed | Event::SweepStarted { .. } => self.schedule_dirty = true,
            _ => {}
        }
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
        self.demand_dirty = true;
        self.emit(Event::State {
            run,
            attempt,
            from,
            to,
            detail,
            gpus,
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
        self.rebuild_queue();
        self.prepare_runs()?;
        let image_stop = CancellationToken::new();
        if self.runtime.prefetches() {
            let (demand_tx, demand_rx) = tokio::sync::watch::channel(self.demand());
            let (tx, rx) = mpsc::channel(1024);
            tokio::spawn(images::run(
                self.runtime.clone(),
                self.image_budget.clone(),
                demand_rx,
                tx,
                image_stop.clone(),
            ));
            self.demand_tx = Some(demand_tx);
            self.image_rx = Some(rx);
        }
        let _stop_images = image_stop.drop_guard();

        // An observer that fails (store, log disk full) ends the sweep; runs in flight are
        // then torn down, not abandoned holding GPUs.
        let outcome: anyhow::Result<()> = async {
            loop {
                if !shutdown.is_cancelled() {
                    self.start_runs()?;
                }
                self.send_demand();
                if self.active.is_empty() {
                    if shutdown.is_cancelled() {
                        summary.interrupted = true;
                        break;
                    }
                    // Runs of a model the breaker stopped wait like a paused sweep's.
                    let queued_waiting = self.state.runs.iter().enumerate().any(|(i, r)| {
                        r.state == RunState::Queued
                            && self.plan.runs[i].gpus <= self.opts.gpus
                            && !self.model_paused(i)
                    });
                    let held = self.state.counts().held > 0;
                    let paused = self.state.paused.is_some();
                    // Without an operator, other models' runs go on; once only the stopped
                    // model's are left, the sweep ends with them queued, as a pause does.
                    let waiting_models = !self.state.paused_models.is_empty();
                    if !self.opts.wait_for_operator {
                        if paused || (!queued_waiting && !held) {
                            break;
                        }
                        if !queued_waiting && held {
                            self.finalize_held()?;
                            break;
                        }
                    } else if !queued_waiting && !held && !paused && !waiting_models {
                        break;
                    }
                }
                let wake = self
                    .not_before
                    .values()
                    .min()
                    .copied()
                    .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
                tokio::select! {
                    Some((run, attempt, msg)) = self.msg_rx.recv() => self.on_runtime(run, attempt, msg)?,
                    Some(r) = recv_report(&mut self.image_rx) => self.on_image(r)?,
                    Some(cmd) = self.cmd_rx.recv() => {
                        if cmd == Command::Shutdown {
                            shutdown.cancel();
                        }
                        self.on_command(cmd)?;
                    }
                    _ = tokio::time::sleep_until(wake) => {
                        let now = Instant::now();
                        self.not_before.retain(|_, t| *t > now);
                        self.schedule_dirty = true;
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
        self.emit(Event::SweepFinished {
            interrupted: summary.interrupted,
        })?;
        Ok((summary, self.state))
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
                    if let Some(a) = self.active.remove(&run) {
                        self.pool.release(&a.gpus);
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
                        self.commit_env
                            .entry(spec.commit)
                            .or_default()
                            .extend(r.env.clone());
                        self.commit_recipes.insert((spec.commit, f.clone()));
                    }
                }
            }
        }
        for spec in &plan.runs {
            let id = spec.id;
            let st = self.state.run(id).state.clone();
            if st.is_active() {
                self.set_state(
                    id,
                    RunState::Queued,
                    Some(format!(
                        "{}: re-queued as a new attempt",
                        crate::state::INTERRUPTED
                    )),
                )?;
            }
            if self.state.run(id).state != RunState::Queued {
                continue;
            }
            // A run that needs more GPUs than this sweep has stays queued: the next `run`
            // with the GPUs (`--gpus N`, another box) picks it up. Skipping it would be for good.
            if let Some(reason) = spec.skip_reason.clone() {
                self.skip(id, &reason)?;
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

    /// Whether run `i`'s model is one the breaker stopped.
    fn model_paused(&self, i: usize) -> bool {
        let paused = &self.state.paused_models;
        !paused.is_empty()
            && self
                .plan
                .commit_of(&self.plan.runs[i])
                .model
                .as_ref()
                .is_some_and(|m| paused.contains_key(m))
    }

    fn start_runs(&mut self) -> anyhow::Result<()> {
        if self.state.paused.is_some() || !self.schedule_dirty {
            return Ok(());
        }
        self.schedule_dirty = false;
        loop {
            let now = Instant::now();
            let not_before = &self.not_before;
            let image_ok = |i: usize| self.image_ok(i);
            // A model the breaker stopped: its runs wait, queued, holding no GPU.
            let eligible = |i: usize| {
                not_before.get(&RunId(i as u32)).is_none_or(|t| *t <= now)
                    && image_ok(i)
                    && !self.model_paused(i)
            };
            let Some(index) = self.queue.pick(&self.pool, eligible) else {
                return Ok(());
            };
            let spec = &self.plan.runs[index];
            let preferred = self.queue.preferred(spec.commit).to_vec();
            let gpus = self
                .pool
                .take(spec.gpus, &preferred)
                .expect("scheduler picked a run that fits");
            self.start(RunId(index as u32), gpus)?;
        }
    }

    /// The queue mirrors the state: rebuilt once (a resumed state never emitted its
    /// `Queued` events), then kept in step by `emit`.
    fn rebuild_queue(&mut self) {
        self.queue = Queue::default();
        for (i, r) in self.state.runs.iter().enumerate() {
            let spec = &self.plan.runs[i];
            if r.attempt > 0 || !matches!(r.state, RunState::Queued | RunState::Active { .. }) {
                self.queue.commit_started(spec.commit, &r.gpus);
            }
        }
        for (i, r) in self.state.runs.iter().enumerate() {
            let spec = &self.plan.runs[i];
            if r.state == RunState::Queued && spec.gpus <= self.opts.gpus {
                self.queue
                    .push(i, spec.commit, spec.variant.order(), spec.gpus);
            }
        }
        self.schedule_dirty = true;
    }

    fn start(&mut self, id: RunId, gpus: Vec<u32>) -> anyhow::Result<()> {
        let attempt = self.state.run(id).attempt.max(1);
        let cancel = CancellationToken::new();
        self.active.insert(
            id,
            Active {
                attempt,
                stage: Stage::PreparingImage,
                cancel: cancel.clone(),
                cancel_requested: false,
                parser: StreamParser::new(),
                scanner: Scanner::new(self.catalog.clone()),
                gpus: gpus.clone(),
                started: Instant::now(),
                version_seen: false,
            },
        );
        self.set_state(
            id,
            RunState::Active {
                stage: Stage::PreparingImage,
            },
            None,
        )?;
        let spec_commit = self.plan.runs[id.0 as usize].commit;
        let mut env = self
            .commit_env
            .get(&spec_commit)
            .cloned()
            .unwrap_or_default();
        // Fixes stick to a run: a retry after a fixed attempt must not run on the unfixed
        // image again (the runtime reuses the committed fixed image).
        let mut fixes = self.state.run(id).fixes.clone();
        for f in self.pending_fixes.remove(&id).unwrap_or_default() {
            if !fixes.contains(&f) {
                fixes.push(f);
            }
        }
        for f in &fixes {
            if let Some(r) = self.recipes.get(f) {
                env.extend(r.env.clone());
            }
        }
        let job = RunJob {
            env,
            fixes,
            ..self.job(id, attempt, gpus)
        };
        let runtime = self.runtime.clone();
        let sink = RunSink::new(id, attempt, self.msg_tx.clone());
        tokio::spawn(async move {
            let done = sink.clone();
            let (rt, held) = (runtime.clone(), job.clone());
            // A runtime that panics must still end the attempt and hand its GPUs back, but
            // only once what it started is gone (`Done` is what releases them).
            let report =
                match tokio::spawn(async move { runtime.execute(job, sink, cancel).await }).await {
                    Ok(r) => r,
                    Err(e) => {
                        let reclaimed = match rt.reclaim(&held).await {
                            Ok(lines) => lines.join("; "),
                            Err(r) => format!("could not reclaim its containers: {r:#}"),
                        };
                        RunReport::new(RunEnd::Error {
                            stage: Stage::PreparingImage,
                            message: format!("runtime task failed: {e} {reclaimed}")
                                .trim_end()
                                .to_string(),
                        })
                    }
                };
            done.send(RuntimeMsg::Done(report)).await;
        });
        Ok(())
    }

    /// The job for an attempt of `id`, without the fixes and environment the engine adds.
    fn job(&self, id: RunId, attempt: u32, gpus: Vec<u32>) -> RunJob {
        let plan = &self.plan;
        let spec = &plan.runs[id.0 as usize];
        let commit = plan.commit_of(spec);
        let view = commit.view.clone().unwrap_or_else(|| {
            crate::plan::CommandView::parse("true").expect("trivial command parses")
        });
        RunJob {
            run: id,
            attempt,
            key: spec.key.clone(),
            sweep: plan.name.clone(),
            commit: commit.commit.clone(),
            parent: commit.parent.clone(),
            variant: spec.variant.clone(),
            image: spec.image.clone().unwrap_or_default(),
            model: commit.model.clone(),
            command: commit.perf_command.clone().unwrap_or_default(),
            view,
            kind: commit.kind().unwrap_or(BenchKind::Serving),
            gpus,
            server_start_timeout: Duration::from_secs(spec.server_start_timeout_s),
            run_timeout: Duration::from_secs(spec.run_timeout_s),
            env: BTreeMap::new(),
            fixes: Vec::new(),
            patch: spec.patch.as_ref().map(|p| {
                plan.path
                    .parent()
                    .unwrap_or(std::path::Path::new("."))
                    .join(p)
            }),
            patch_dir: plan.images.patch_dir.clone(),
            vllm_version: commit.vllm_version.clone(),
            human_image: plan
                .runs
                .iter()
                .find(|r| r.commit == spec.commit && r.variant == crate::model::Variant::Human)
                .and_then(|r| r.image.clone()),
            changes: commit.changes.clone(),
            sim: commit.sim.clone(),
            seed: mix(self.opts.seed, &spec.key, attempt),
        }
    }

    /// What the remaining runs need of images, for the image task.
    fn demand(&self) -> images::Demand {
        let mut d = images::Demand::default();
        let mut all = std::collections::BTreeSet::new();
        for (i, r) in self.state.runs.iter().enumerate() {
            let Some(img) = self.plan.runs[i].image.as_ref().filter(|s| !s.is_empty()) else {
                continue;
            };
            all.insert(img.clone());
            match &r.state {
                RunState::Queued => {
                    d.upcoming.push(img.clone());
                    d.needed.insert(img.clone());
                    if !d.jobs.contains_key(img) {
                        let job = self.job(RunId(i as u32), r.attempt.max(1), Vec::new());
                        d.jobs.insert(img.clone(), job);
                    }
                }
                RunState::Held { .. } => {
                    d.needed.insert(img.clone());
                }
                s if s.is_active() => {
                    d.needed.insert(img.clone());
                    d.in_use.insert(img.clone());
                }
                _ => {}
            }
        }
        d.all = all.into_iter().collect();
        d
    }

    fn send_demand(&mut self) {
        if !self.demand_dirty {
            return;
        }
        self.demand_dirty = false;
        if self.demand_tx.is_some() {
            let d = self.demand();
            if let Some(tx) = &self.demand_tx {
                tx.send_replace(d);
            }
        }
    }

    /// Whether run `index` may take GPUs as far as its image goes: it is on the box, or
    /// fetching it ahead failed (the attempt then pulls and the failure is diagnosed).
    fn image_ok(&self, index: usize) -> bool {
        if self.demand_tx.is_none() {
            return true;
        }
        match self.plan.runs[index].image.as_deref() {
            None | Some("") => true,
            Some(img) => matches!(
                self.image_state.get(img),
                Some(ImageStatus::Ready | ImageStatus::Failed)
            ),
        }
    }

    fn on_image(&mut self, r: images::Report) -> anyhow::Result<()> {
        if let Some((run, layer, done, total)) = r.pull {
            return self.emit(Event::Pull {
                run,
                layer,
                done,
                total,
            });
        }
        match r.status {
            ImageStatus::Ready | ImageStatus::Failed => {
                self.image_state.insert(r.image.clone(), r.status);
                self.schedule_dirty = true;
            }
            ImageStatus::Evicted => {
                self.image_state.remove(&r.image);
            }
            ImageStatus::Full if self.state.paused.is_none() => {
                self.emit(Event::Paused {
                    reason: format!("disk budget: {} needs room — {}", r.image, r.detail),
                })?;
            }
            _ => {}
        }
        self.emit(Event::Image {
            image: r.image,
            status: r.status,
            detail: r.detail,
        })
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
            RuntimeMsg::Done(report) => self.finish(run, report)?,
        }
        Ok(())
    }

    fn finish(&mut self, run: RunId, report: RunReport) -> anyhow::Result<()> {
        let Some(a) = self.active.remove(&run) else {
            return Ok(());
        };
        self.pool.release(&a.gpus);
        self.gpu_ms += a.started.elapsed().as_millis() * a.gpus.len() as u128;
        let spec = self.plan.runs[run.0 as usize].clone();
        let commit = self.plan.commit_of(&spec).clone();
        let stage = a.stage;
        let attempt = a.attempt;
        if report.end == RunEnd::Cancelled {
            // Operator cancel ends the run; a shutdown re-queues it for the next resume.
            let to = if a.cancel_requested {
                RunState::Finished {
                    outcome: Outcome::Cancelled,
                }
            } else {
                RunState::Queued
            };
            let detail = if a.cancel_requested {
                "cancelled by the operator"
            } else {
                "interrupted by shutdown"
            };
            return self.set_state(run, to, Some(detail.into()));
        }
        let mut result = a.parser.finish();
        for f in &report.result_files {
            if let Ok(bytes) = std::fs::read(f) {
                let r = parse::parse_bytes(&bytes);
                if r.has_result() {
                    result.metrics.extend(r.metrics);
                }
            }
        }
        let bench_exit = match report.end {
            RunEnd::BenchExited { exit_code } => Some(exit_code),
            _ => None,
        };
        if bench_exit.is_some() && stage < Stage::Parsing {
            self.set_state(
                run,
                RunState::Active {
                    stage: Stage::Parsing,
                },
                None,
            )?;
        }
        let ok = bench_exit == Some(0)
            && result.has_result()
            && result.successful_requests().is_none_or(|n| n > 0.0);
        if ok {
            // The streamed values usually are the result already; only what differs (an
            // earlier block's value, a result file's number) is sent again.
            let streamed = self.state.run(run).metrics.clone();
            for (k, v) in result.metrics.clone() {
                if streamed.get(&k) == Some(&v) {
                    continue;
                }
                self.emit(Event::Metric {
                    run,
                    attempt,
                    key: k,
                    value: v,
                })?;
            }
            self.policy.record_success_of(commit.model.as_deref());
            return self.set_state(
                run,
                RunState::Finished {
                    outcome: Outcome::Success,
                },
                None,
            );
        }
        let ctx = FailureContext {
            stage: Some(stage),
            exit_code: match &report.end {
                RunEnd::BenchExited { exit_code } => Some(*exit_code),
                RunEnd::ServerDied { exit_code } => *exit_code,
                _ => None,
            },
            signal: None,
            timed_out: matches!(report.end, RunEnd::Timeout { .. }),
            serving: commit.needs_server(),
            vllm_version: self
                .state
                .run(run)
                .vllm_version
                .clone()
                .or(commit.vllm_version.clone()),
            bench_finished: bench_exit.is_some(),
            has_result: result.has_result(),
            successful_requests: result.successful_requests(),
            patch_failed: matches!(report.end, RunEnd::PatchFailed { .. }),
            pull_error: match &report.end {
                RunEnd::ImageMissing { message } | RunEnd::DiskFull { message } => {
                    Some(message.clone())
                }
                _ => None,
            },
            image_missing: matches!(report.end, RunEnd::ImageMissing { .. }),
            bench_invalid: match &report.end {
                RunEnd::BenchInvalid { message } => Some(message.clone()),
                _ => None,
            },
            needs_build: match &report.end {
                RunEnd::NeedsBuild { message } => Some(message.clone()),
                _ => None,
            },
            disk_full: matches!(report.end, RunEnd::DiskFull { .. }),
        };
        let diagnosis = a
            .scanner
            .conclude(&ctx)
            .unwrap_or_else(|| diagnose::Diagnosis {
                category: Category::Other,
                evidence: end_text(&report.end),
                stream: None,
                line_no: None,
                recipe: None,
                predicted: false,
                confidence: diagnose::confidence::GUESS,
                telling: vec![],
            });
        let applied = self.state.run(run).fixes.clone();
        // A crash, Ctrl-C or stop that cut attempts short spends none of the run's retries.
        let counted = self.state.run(run).counted_attempts();
        let decision = self.policy.decide_in(
            Some(&commit.commit),
            commit.model.as_deref(),
            &diagnosis,
            counted,
            &applied,
        );
        let category = diagnosis.category;
        let finding = Finding {
            category,
            evidence: if diagnosis.evidence.is_empty() {
                end_text(&report.end)
            } else {
                diagnosis.evidence.clone()
            },
            action: decision.action,
            recipe: decision.recipe.clone().or(diagnosis.recipe.clone()),
            reason: decision.reason.clone(),
            predicted: false,
            confidence: Some(diagnosis.confidence),
            telling: diagnosis.telling.clone(),
        };
        self.emit(Event::Diagnosed {
            run,
            attempt,
            finding: finding.clone(),
        })?;
        if let Some(reason) = &decision.pause_sweep {
            self.emit(Event::Paused {
                reason: reason.clone(),
            })?;
        }
        if let Some((model, reason)) = &decision.hold_model {
            self.emit(Event::ModelPaused {
                model: model.clone(),
                reason: reason.clone(),
            })?;
        }
        let failed = RunState::Finished {
            outcome: Outcome::Failed { category },
        };
        match decision.action {
            Action::Retry => {
                self.set_state(run, failed, Some(decision.reason.clone()))?;
                let delay = Duration::try_from_secs_f64(
                    decision.retry_after.unwrap_or_default().as_secs_f64() * self.time_scale,
                )
                .unwrap_or(Duration::from_secs(86_400));
                let at = Instant::now()
                    .checked_add(delay)
                    .unwrap_or_else(Instant::now);
                self.not_before.insert(run, at);
                self.set_state(
                    run,
                    RunState::Queued,
                    Some(format!("retry after {}s", delay.as_secs())),
                )?;
            }
            Action::AutoFix => {
                self.set_state(run, failed, Some(decision.reason.clone()))?;
                if let Some(r) = &finding.recipe {
                    self.queue_fix(run, r)?;
                }
                self.set_state(
                    run,
                    RunState::Queued,
                    Some(format!(
                        "retry with fix {}",
                        finding.recipe.clone().unwrap_or_default()
                    )),
                )?;
            }
            Action::Operator => self.set_state(
                run,
                RunState::Held { category },
                Some(decision.reason.clone()),
            )?,
            Action::PauseSweep => {
                self.set_state(
                    run,
                    RunState::Held { category },
                    Some(decision.reason.clone()),
                )?;
                if self.state.paused.is_none() {
                    self.emit(Event::Paused {
                        reason: decision.reason.clone(),
                    })?;
                }
            }
            Action::Skip => {
                self.set_state(run, failed, Some(decision.reason.clone()))?;
                if category == Category::GatedModelAuth {
                    self.end_model_runs(run, category)?;
                }
            }
        }
        Ok(())
    }

    /// A gated model (no token, or no access) fails every run of it alike: skip the model's
    /// queued runs (their reason begins [`NOT_RUN_GATED`], so `run --retry-failed
    /// gated_model_auth` brings them back once the token has access); the night goes on.
    fn end_model_runs(&mut self, run: RunId, category: Category) -> anyhow::Result<()> {
        let model = self
            .plan
            .commit_of(&self.plan.runs[run.0 as usize])
            .model
            .clone();
        let Some(model) = model else {
            return Ok(());
        };
        let same: Vec<RunId> = self
            .plan
            .runs
            .iter()
            .filter(|s| s.id != run && self.state.run(s.id).state == RunState::Queued)
            .filter(|s| self.plan.commit_of(s).model.as_deref() == Some(model.as_str()))
            .map(|s| s.id)
            .collect();
        for id in same {
            self.skip(id, &format!(
                "{NOT_RUN_GATED}{model} is gated or needs a token with access (run {run} was refused); `run --retry-failed {category}` once it has"
            ))?;
        }
        Ok(())
    }

    fn queue_fix(&mut self, run: RunId, recipe: &str) -> anyhow::Result<()> {
        let commit = self.plan.runs[run.0 as usize].commit;
        self.pending_fixes
            .entry(run)
            .or_default()
            .push(recipe.to_string());
        let Some(r) = self.recipes.get(recipe) else {
            return Ok(());
        };
        // Spread once per commit, by name: a recipe of steps only has no env to compare.
        if r.scope != RecipeScope::Commit || !self.commit_recipes.insert((commit, r.name.clone())) {
            return Ok(());
        }
        // Commit-scope workarounds apply to every variant so they stay comparable: variants
        // that already ended without it run again with it.
        let env = r.env.clone();
        self.commit_env.entry(commit).or_default().extend(env);
        let siblings: Vec<RunId> = self
            .plan
            .runs
            .iter()
            .filter(|s| s.commit == commit && s.id != run && s.skip_reason.is_none())
            .map(|s| s.id)
            .collect();
        for id in siblings {
            let ended = matches!(
                self.state.run(id).state,
                RunState::Held { .. }
                    | RunState::Finished {
                        outcome: Outcome::Success | Outcome::Failed { .. }
                    }
            );
            if self.state.run(id).state == RunState::Queued {
                self.pending_fixes
                    .entry(id)
                    .or_default()
                    .push(recipe.to_string());
            }
            if ended {
                self.pending_fixes
                    .entry(id)
                    .or_default()
                    .push(recipe.to_string());
                self.set_state(
                    id,
                    RunState::Queued,
                    Some(format!(
                        "re-run with commit-wide fix {recipe} so the variants stay comparable"
                    )),
                )?;
            }
        }
        Ok(())
    }

    fn on_command(&mut self, cmd: Command) -> anyhow::Result<()> {
        self.emit(Event::Operator {
            command: cmd.clone(),
        })?;
        match cmd {
            Command::Retry { run } => self.requeue(run, None)?,
            Command::ApplyFix { run, recipe } => {
                let recipe = recipe.or_else(|| {
                    self.state
                        .run(run)
                        .finding
                        .as_ref()
                        .and_then(|f| f.recipe.clone())
                });
                if let Some(r) = recipe {
                    self.requeue(run, Some(r))?;
                }
            }
            Command::Skip { run } => self.skip(run, "skipped by the operator")?,
            Command::SkipCategory { category } => {
                let ids: Vec<RunId> = (0..self.state.runs.len() as u32).map(RunId).collect();
                for id in ids {
                    let r = self.state.run(id);
                    let matches = match &r.state {
                        RunState::Held { category: c } => *c == category,
                        RunState::Queued => {
                            self.predicted
                                .get(&id)
                                .is_some_and(|f| f.category == category)
                                || r.finding.as_ref().is_some_and(|f| f.category == category)
                        }
                        _ => false,
                    };
                    if matches {
                        self.skip(id, &format!("skipped by the operator: all {category}"))?;
                    }
                }
            }
            Command::Pause => {
                if self.state.paused.is_none() {
                    self.emit(Event::Paused {
                        reason: "paused by the operator".into(),
                    })?;
                }
            }
            Command::Resume => {
                if self.state.paused.is_some() || !self.state.paused_models.is_empty() {
                    self.emit(Event::Resumed)?;
                }
            }
            Command::Cancel { run } => {
                if let Some(a) = self.active.get_mut(&run) {
                    a.cancel_requested = true;
                    a.cancel.cancel();
                } else if self.state.run(run).state == RunState::Queued {
                    self.set_state(
                        run,
                        RunState::Finished {
                            outcome: Outcome::Cancelled,
                        },
                        Some("cancelled by the operator".into()),
                    )?;
                }
            }
            Command::Shutdown => {}
        }
        Ok(())
    }

    fn requeue(&mut self, run: RunId, fix: Option<String>) -> anyhow::Result<()> {
        if run.0 as usize >= self.state.runs.len() {
            return Ok(());
        }
        let st = self.state.run(run).state.clone();
        if matches!(st, RunState::Held { .. } | RunState::Finished { .. }) {
            if let Some(f) = &fix {
                self.queue_fix(run, f)?;
            }
            self.not_before.remove(&run);
            let detail = match fix {
                Some(f) => format!("operator: retry with fix {f}"),
                None => "operator: retry".into(),
            };
            self.set_state(run, RunState::Queued, Some(detail))?;
        }
        Ok(())
    }

    fn skip(&mut self, run: RunId, reason: &str) -> anyhow::Result<()> {
        if run.0 as usize >= self.state.runs.len() {
            return Ok(());
        }
        let st = self.state.run(run).state.clone();
        let to = RunState::Finished {
            outcome: Outcome::Skipped {
                reason: reason.into(),
            },
        };
        if crate::model::transition(&st, &to).is_ok() {
            self.set_state(run, to, Some(reason.into()))?;
        }
        Ok(())
    }
}

fn end_text(end: &RunEnd) -> String {
    match end {
        RunEnd::BenchExited { exit_code } => format!("benchmark exited with status {exit_code}"),
        RunEnd::ServerDied { exit_code } => match exit_code {
            Some(c) => format!("server exited with status {c}"),
            None => "server exited".into(),
        },
        RunEnd::Timeout { stage } => format!("{stage} timed out"),
        RunEnd::ImageMissing { message }
        | RunEnd::DiskFull { message }
        | RunEnd::PatchFailed { message }
        | RunEnd::BenchInvalid { message }
        | RunEnd::NeedsBuild { message } => message.clone(),
        RunEnd::Error { stage, message } => format!("{stage}: {message}"),
        RunEnd::Cancelled => "cancelled".into(),
    }
}

/// A per-attempt seed: the same sweep seed, run and attempt always give the same value.
/// The next report of the image task; never, when there is none.
async fn recv_report(rx: &mut Option<mpsc::Receiver<images::Report>>) -> Option<images::Report> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

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
