//! `Schedule`: the one answer to "which run starts now, and on which GPUs". It owns
//! everything that question reads — the GPUs, the queue and its order, the backoffs, the
//! night's window and the run lengths learned tonight, which images are on the box, the
//! pauses — and learns all of it from the engine's events (`apply`) and three calls the
//! events do not carry (`backoff`, `learned`, `ended`). Pure: the time is always passed in,
//! so every rule here is tested with an invented `now` (tests at the end of this file).

use super::{may_backfill, GpuPool, Place, Queue};
use crate::event::{Event, ImageStatus};
use crate::model::{CommitIx, RunId, RunState};
use crate::night::order::{Rank, Ranks};
use crate::plan::{Plan, RunSpec};
use crate::state::SweepState;
use crate::window::{Lengths, Window};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct Schedule {
    plan: Arc<Plan>,
    pool: GpuPool,
    queue: Queue,
    /// Each commit's rank tonight ([`crate::night::order`]); absent: its plan index.
    ranks: Ranks,
    /// A run waiting out a backoff starts no earlier than this.
    not_before: HashMap<RunId, Instant>,
    window: Option<Window>,
    lengths: Lengths,
    /// A run's expected wall length before any has ended tonight (for backfilling).
    typical: Duration,
    /// Runtimes that fetch images ahead gate a run on its image; `None`: they do not.
    images: Option<HashMap<String, ImageStatus>>,
    /// Runs holding GPUs: since when, on which.
    in_flight: HashMap<RunId, (Instant, Vec<u32>)>,
    paused: bool,
    paused_models: BTreeSet<String>,
    /// Something happened that may let a queued run start (a GPU freed, a run queued, a
    /// resume, a backoff ended, an image arrived). Looking only then keeps a 10,000-run
    /// sweep linear.
    dirty: bool,
}

impl Schedule {
    pub fn new(plan: Arc<Plan>, gpus: u32) -> Schedule {
        Schedule {
            plan,
            pool: GpuPool::new(gpus),
            queue: Queue::default(),
            ranks: Ranks::default(),
            not_before: HashMap::new(),
            window: None,
            lengths: Lengths::default(),
            typical: Duration::from_secs(600),
            images: None,
            in_flight: HashMap::new(),
            paused: false,
            paused_models: BTreeSet::new(),
            dirty: true,
        }
    }

    pub(crate) fn set_window(&mut self, w: Option<Window>) {
        self.window = w;
    }

    pub fn window(&self) -> Option<&Window> {
        self.window.as_ref()
    }

    /// The commits' order tonight (commit index → rank).
    pub(crate) fn set_ranks(&mut self, ranks: Ranks) {
        self.ranks = ranks;
    }

    pub fn rank(&self, commit: CommitIx) -> Rank {
        self.ranks.of(commit)
    }

    /// A run's expected wall length before any has ended tonight.
    pub(crate) fn set_typical(&mut self, typical: Duration) {
        self.typical = typical;
    }

    /// From now on a run waits for its image (the runtime fetches images ahead).
    pub(crate) fn gate_images(&mut self) {
        self.images.get_or_insert_with(HashMap::new);
    }

    /// The queue mirrors `state`: built once at the start (a resumed state never emitted
    /// its `Queued` events), then kept in step by [`Schedule::apply`].
    pub fn rebuild(&mut self, state: &SweepState) {
        self.queue = Queue::default();
        self.paused = state.paused.is_some();
        self.paused_models = state.paused_models.keys().cloned().collect();
        for (i, r) in state.runs.iter().enumerate() {
            let spec = &self.plan.runs[i];
            if !spec.reference
                && (r.attempt > 0 || !matches!(r.state, RunState::Queued | RunState::Active { .. }))
            {
                self.queue.commit_started(self.place(spec).0, &r.gpus);
            }
        }
        for (i, r) in state.runs.iter().enumerate() {
            let spec = &self.plan.runs[i];
            if r.state == RunState::Queued && spec.gpus <= self.pool.total() {
                let (place, order) = self.place(spec);
                self.queue.push(i, place, order, spec.gpus);
            }
        }
        self.dirty = true;
    }

    /// Fold one of the engine's events (after the state accepted it).
    pub fn apply(&mut self, event: &Event) {
        match event {
            Event::State {
                run,
                from,
                to,
                gpus,
                ..
            } => {
                let i = run.0 as usize;
                if *to == RunState::Queued || (from.is_active() && !to.is_active()) {
                    self.dirty = true;
                }
                let Some(spec) = self.plan.runs.get(i) else {
                    return;
                };
                if *to == RunState::Queued && spec.gpus <= self.pool.total() {
                    let (place, order) = self.place(spec);
                    self.queue.push(i, place, order, spec.gpus);
                } else if *to != RunState::Queued {
                    self.queue.remove(i);
                }
                if to.is_active() && !spec.reference {
                    self.queue.commit_started(self.place(spec).0, gpus);
                }
            }
            // As the state folds them: a resume lifts the sweep's pause and the breaker's.
            Event::Resumed => {
                self.paused = false;
                self.paused_models.clear();
                self.dirty = true;
            }
            Event::SweepStarted { .. } => self.dirty = true,
            Event::Paused { .. } => self.paused = true,
            Event::ModelPaused { model, .. } => {
                self.paused_models.insert(model.clone());
            }
            Event::Image { image, status, .. } => {
                if let Some(images) = &mut self.images {
                    match status {
                        ImageStatus::Ready | ImageStatus::Failed => {
                            images.insert(image.clone(), *status);
                            self.dirty = true;
                        }
                        ImageStatus::Evicted => {
                            images.remove(image);
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }

    /// `run` (queued again) waits until `until` before it may start.
    pub(crate) fn backoff(&mut self, run: RunId, until: Instant) {
        self.not_before.insert(run, until);
    }

    /// The operator sends a waiting run now: its backoff is over. Whether it had one.
    pub(crate) fn clear_backoff(&mut self, run: RunId) -> bool {
        let had = self.not_before.remove(&run).is_some();
        self.dirty |= had;
        had
    }

    /// A run of `model` got to its benchmark's end in `took` (wall).
    pub fn learned(&mut self, model: Option<&str>, took: Duration) {
        self.lengths.record(model, took);
    }

    /// A run in flight ended (or was torn down): its GPUs are free.
    pub fn ended(&mut self, run: RunId) {
        if let Some((_, gpus)) = self.in_flight.remove(&run) {
            self.pool.release(&gpus);
            self.dirty = true;
        }
    }

    /// When the schedule next changes its mind on its own: a backoff ends, or the window
    /// closes (only ahead of `now`: a past instant would wake the loop for ever).
    pub(crate) fn wake(&self, now: Instant) -> Option<Instant> {
        let closes = self.window.as_ref().map(|w| w.closes).filter(|t| *t > now);
        self.not_before.values().copied().chain(closes).min()
    }

    /// Time passed (the loop woke): backoffs over by `now` end.
    pub fn tick(&mut self, now: Instant) {
        self.not_before.retain(|_, t| *t > now);
        self.dirty = true;
    }

    /// The run to start now and the GPUs it takes (they are taken), or `None`. Called
    /// until it says `None`: "while the schedule names a run, start it".
    pub fn next(&mut self, now: Instant) -> Option<(RunId, Vec<u32>)> {
        if self.paused || !self.dirty {
            return None;
        }
        let eligible = |i: usize| self.eligible(i, now);
        // The first waiting run keeps its place: others pass it only by backfilling.
        let head = self.queue.head(eligible);
        let passes = |i: usize| match head {
            Some((h, need)) if h != i && need > self.pool.free() => self.backfills(need, i, now),
            _ => true,
        };
        let Some(index) = self.queue.pick(&self.pool, |i| eligible(i) && passes(i)) else {
            self.dirty = false;
            return None;
        };
        let spec = &self.plan.runs[index];
        let preferred = self.queue.preferred(self.place(spec).0).to_vec();
        let gpus = self.pool.take(spec.gpus, &preferred)?;
        let id = RunId(index as u32);
        self.in_flight.insert(id, (now, gpus.clone()));
        Some((id, gpus))
    }

    /// May queued run `i` start now, GPUs aside: its backoff is over, its image is on the
    /// box (or fetching it failed: the attempt pulls and the failure is diagnosed), its
    /// model is not stopped by the breaker, and the window has time for it.
    fn eligible(&self, i: usize, now: Instant) -> bool {
        self.not_before
            .get(&RunId(i as u32))
            .is_none_or(|t| *t <= now)
            && self.image_ok(i)
            && !self.model_paused(i)
            && self.window_allows(i, now)
    }

    fn image_ok(&self, i: usize) -> bool {
        let Some(images) = &self.images else {
            return true;
        };
        match self.plan.runs[i].image.as_deref() {
            None | Some("") => true,
            Some(img) => matches!(
                images.get(img),
                Some(ImageStatus::Ready | ImageStatus::Failed)
            ),
        }
    }

    /// Run `i`'s model is stopped by the breaker: it waits, queued, holding no GPU.
    pub(crate) fn model_paused(&self, i: usize) -> bool {
        !self.paused_models.is_empty()
            && self
                .model(&self.plan.runs[i])
                .is_some_and(|m| self.paused_models.contains(m))
    }

    fn model(&self, spec: &RunSpec) -> Option<&str> {
        self.plan.commit_of(spec).model.as_deref()
    }

    /// May queued run `i` start ahead of a waiting run that needs `head` GPUs
    /// ([`may_backfill`], with the lengths learned tonight)?
    fn backfills(&self, head: u32, i: usize, now: Instant) -> bool {
        let expect = |run: usize| {
            self.lengths
                .expect_or(self.model(&self.plan.runs[run]), self.typical)
        };
        let ends: Vec<(Duration, u32)> = self
            .in_flight
            .iter()
            .map(|(id, (started, gpus))| {
                let ran = now.saturating_duration_since(*started);
                (expect(id.0 as usize).saturating_sub(ran), gpus.len() as u32)
            })
            .collect();
        may_backfill(
            self.pool.free(),
            head,
            &ends,
            self.plan.runs[i].gpus,
            expect(i),
        )
    }

    /// May queued run `i` start at `now`, as far as the window is concerned?
    fn window_allows(&self, i: usize, now: Instant) -> bool {
        let Some(w) = &self.window else {
            return true;
        };
        let spec = &self.plan.runs[i];
        let (place, _) = self.place(spec);
        let started = self.queue.is_started(place);
        let fits_now = self.queue.queued_gpus(place) <= self.pool.free();
        w.may_start(
            now,
            self.lengths.expect(self.model(spec), w),
            started,
            fits_now,
        )
    }

    /// The window has closed for every queued run that could otherwise start.
    pub(crate) fn window_refuses_all(&self, state: &SweepState, now: Instant) -> bool {
        self.window.is_some()
            && state.runs.iter().enumerate().all(|(i, r)| {
                r.state != RunState::Queued
                    || self.plan.runs[i].gpus > self.pool.total()
                    || self.model_paused(i)
                    || !self.window_allows(i, now)
            })
    }

    /// The window has closed: nothing more starts tonight.
    pub fn window_closed(&self, now: Instant) -> bool {
        self.window.as_ref().is_some_and(|w| w.closed(now))
    }

    /// Does the window leave time at `now` for `gpu_runs` more GPU-runs of `model` in
    /// waves of the box's GPUs (one more while runs in flight hold them)? As strict as
    /// the window is with runs once queued. No window: always.
    pub(crate) fn window_has_time(&self, model: Option<&str>, gpu_runs: u32, now: Instant) -> bool {
        let Some(w) = &self.window else {
            return true;
        };
        let waves = gpu_runs.div_ceil(self.pool.total().max(1)).max(1)
            + u32::from(gpu_runs > self.pool.free());
        w.may_start(now, self.lengths.expect(model, w) * waves, true, true)
    }

    /// Where a run sorts: its round, then its commit's rank, then its order there (a round
    /// of a commit stays together: its variants back to back on the same GPUs); a drift
    /// reference ahead of everything (it is due now: at the start, at its interval, at the
    /// end).
    pub fn place(&self, spec: &RunSpec) -> (Place, u8) {
        if spec.reference {
            (Place(0), 0)
        } else {
            let stride = self.plan.commits.len() + 1;
            let place = spec.round as usize * stride + self.rank(CommitIx(spec.commit)).0 + 1;
            (Place(place), spec.order)
        }
    }

    /// The key a queued run sorts by (for what must follow the queue's order, e.g. which
    /// images to fetch first).
    pub(crate) fn sort_key(&self, spec: &RunSpec) -> (bool, Place, u8, usize) {
        let (place, order) = self.place(spec);
        (
            !self.queue.is_started(place),
            place,
            order,
            spec.id.0 as usize,
        )
    }

    pub fn free(&self) -> u32 {
        self.pool.free()
    }
}

#[cfg(test)]
mod tests;
