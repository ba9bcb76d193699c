//! Sweep state folded from events. Pure: the engine, the store and the TUI all build the
//! same picture from the same events, and an illegal transition is refused here.

use crate::category::Category;
use crate::event::{Envelope, Event, Finding};
use crate::model::{transition, IllegalTransition, Outcome, RunId, RunState, Stage};
use crate::plan::Plan;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub state: RunState,
    /// 1-based; 0 before the first attempt starts.
    pub attempt: u32,
    /// (stage, start ms) of the current/last attempt.
    pub stages: Vec<(Stage, u64)>,
    pub started_ms: Option<u64>,
    pub finished_ms: Option<u64>,
    pub gpus: Vec<u32>,
    pub metrics: BTreeMap<String, f64>,
    pub finding: Option<Finding>,
    /// Recipes applied to this run, over all attempts (provenance).
    pub fixes: Vec<String>,
    pub vllm_version: Option<String>,
    pub provenance: BTreeMap<String, String>,
    pub pull: Option<(u64, u64)>,
    pub detail: Option<String>,
    /// Attempts cut short by a crash, Ctrl-C or a stop: they spend no retry.
    #[serde(default)]
    pub interrupted: u32,
    /// The last attempt's per-request quantiles, without the sample (which the store
    /// keeps): what the screens show beside a P99.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<Box<crate::requests::Requests>>,
}

impl RunRecord {
    /// The attempts the policy counts against a run's retries: interrupted ones do not.
    pub fn counted_attempts(&self) -> u32 {
        self.attempt.saturating_sub(self.interrupted).max(1)
    }

    /// The failure category this run's outcome stands on (see [`outcome_category`]).
    pub fn category(&self) -> Option<Category> {
        outcome_category(&self.state, self.finding.as_ref())
    }
}

/// The failure category of a run that has stopped: held or failed with one, or skipped
/// after a diagnosis (the operator's `S` on held runs, a queued run skipped for its
/// predicted finding). A skip is a decision about a failure, not a cause of its own: the
/// cause must survive it in every filter, count and digest. Runs still to run, successes
/// and runs skipped or cancelled with no finding have none.
pub(crate) fn outcome_category(state: &RunState, finding: Option<&Finding>) -> Option<Category> {
    match state {
        RunState::Held { category } => Some(*category),
        RunState::Finished { outcome } => match outcome {
            Outcome::Failed { category } => Some(*category),
            Outcome::Skipped { .. } => finding.map(|f| f.category),
            Outcome::Success | Outcome::Cancelled => None,
        },
        RunState::Queued | RunState::Active { .. } => None,
    }
}

/// How an interrupted attempt's re-queue detail began before `Event::State` carried
/// `interrupted` (old stores are read by these words; see [`RunRecord::interrupted`]).
pub const INTERRUPTED: &str = "interrupted";

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SweepState {
    pub runs: Vec<RunRecord>,
    pub paused: Option<String>,
    /// Who paused it (see [`crate::model::PauseBy`]); `Unknown` while not paused.
    #[serde(default, skip_serializing_if = "crate::model::PauseBy::is_unknown")]
    pub paused_by: crate::model::PauseBy,
    /// Models whose runs the breaker stopped, with why (the sweep itself goes on).
    #[serde(default)]
    pub paused_models: BTreeMap<String, String>,
    pub started_ms: Option<u64>,
    pub finished: bool,
    /// When the sweep last said it finished (none while it runs).
    #[serde(default)]
    pub finished_ms: Option<u64>,
    /// Each commit's benchmark invocation, once decided (the first decision stands).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub invocations: BTreeMap<String, crate::rewrite::Invocation>,
    /// Drifts of the box the reference runs showed tonight (`engine::reference`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drifts: Vec<crate::stats::drift::Shift>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Counts {
    pub total: usize,
    pub queued: usize,
    pub active: usize,
    pub held: usize,
    pub success: usize,
    pub failed: usize,
    pub skipped: usize,
    pub cancelled: usize,
}

/// Progress over the runnable runs: the header, `status`, the quit popup and the exit line
/// say the same "done of runnable" (see [`SweepState::progress`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Runnable runs that ended (succeeded, failed, skipped or cancelled).
    pub done: usize,
    /// Runs the plan can run.
    pub total: usize,
    /// Runnable runs skipped or cancelled.
    pub skipped: usize,
    /// Runnable runs waiting their turn.
    pub queued: usize,
    /// Runs the plan marks unrunnable: never run, never counted in the progress.
    pub not_runnable: usize,
    /// Adaptive repeats held back (run only if their comparison stays unknown): not
    /// counted in the progress either until released.
    pub in_reserve: usize,
}

impl Progress {
    pub(crate) fn pct(&self) -> usize {
        (self.done * 100).checked_div(self.total).unwrap_or(0)
    }
}

/// The reason an adaptive repeat carries while held back, until its commit's comparison
/// asks for it (see `engine::repeats`) or the night ends.
pub const HELD_BACK: &str =
    "extra repeat held back: run only while the commit's comparison is unknown (max_repeats)";

/// The words of an operator's pause.
pub const PAUSED_BY_OPERATOR: &str = "paused by the operator";

/// How a pause for disk space begins (`disk::Watch`).
pub const DISK_PAUSE: &str = "disk space: ";

/// The reason every skip the operator asked for starts with (`u` may undo those).
pub const SKIPPED_BY_OPERATOR: &str = "skipped by the operator";

/// The reason a drift reference run carries while it waits to be due (see
/// `engine::reference`).
pub const REFERENCE_WAITS: &str =
    "drift reference waiting: run at its interval and at the night's end (reference_every_min)";

impl Counts {
    pub fn done(&self) -> usize {
        self.success + self.failed + self.skipped + self.cancelled
    }
}

impl SweepState {
    pub fn new(runs: usize) -> Self {
        SweepState {
            runs: vec![RunRecord::default(); runs],
            ..Default::default()
        }
    }

    pub fn for_plan(plan: &Plan) -> Self {
        Self::new(plan.runs.len())
    }

    pub fn run(&self, id: RunId) -> &RunRecord {
        &self.runs[id.0 as usize]
    }

    /// Fold one event. State changes are checked; everything else is recorded.
    pub fn apply(&mut self, env: &Envelope) -> Result<(), IllegalTransition> {
        let at = env.at_ms;
        match &env.event {
            Event::SweepStarted { .. } => {
                self.started_ms.get_or_insert(at);
                self.finished = false;
                self.finished_ms = None;
            }
            Event::State {
                run,
                attempt,
                from,
                to,
                detail,
                gpus,
                interrupted,
            } => {
                let Some(r) = self.runs.get_mut(run.0 as usize) else {
                    return Err(IllegalTransition {
                        from: format!("{run} (unknown run)"),
                        to: to.label(),
                    });
                };
                if &r.state != from {
                    return Err(IllegalTransition {
                        from: format!("{} (event said {from})", r.state),
                        to: to.label(),
                    });
                }
                transition(from, to)?;
                r.attempt = *attempt;
                r.detail = detail.clone();
                match to {
                    RunState::Active { stage } => {
                        if *stage == Stage::PreparingImage {
                            r.stages.clear();
                            r.metrics.clear();
                            r.requests = None;
                            r.finding = None;
                            r.started_ms = Some(at);
                            r.finished_ms = None;
                            r.pull = None;
                            r.gpus = gpus.clone();
                        }
                        r.stages.push((*stage, at));
                    }
                    RunState::Finished { .. } | RunState::Held { .. } => match from {
                        // The attempt stopped working when it was held: the wait for the
                        // operator is no stage's time, and no run time for the ETA.
                        RunState::Held { .. } => {}
                        // Skipped or cancelled before it started: this attempt has no
                        // start, stages or GPUs (those were an earlier attempt's).
                        RunState::Queued => {
                            r.stages.clear();
                            r.started_ms = None;
                            r.finished_ms = Some(at);
                        }
                        _ => r.finished_ms = Some(at),
                    },
                    RunState::Queued => {
                        if from.is_active() {
                            // Interrupted: the attempt ended here, not whenever the next starts.
                            r.finished_ms = Some(at);
                            // By type; a store written before the type says it in words.
                            if *interrupted
                                || detail
                                    .as_deref()
                                    .is_some_and(|d| d.starts_with(INTERRUPTED))
                            {
                                r.interrupted += 1;
                            }
                        }
                        // A queued run holds no GPU: the old one is the last attempt's.
                        r.gpus.clear();
                    }
                }
                r.state = to.clone();
            }
            Event::Metric {
                run, key, value, ..
            } => {
                if let Some(r) = self.runs.get_mut(run.0 as usize) {
                    r.metrics.insert(key.clone(), *value);
                }
            }
            Event::Drift { shift } => self.drifts.push((**shift).clone()),
            Event::Requests { run, requests, .. } => {
                if let Some(r) = self.runs.get_mut(run.0 as usize) {
                    r.requests = Some(Box::new(crate::requests::Requests {
                        sample: String::new(),
                        ..(**requests).clone()
                    }));
                }
            }
            Event::VllmVersion { run, version } => {
                if let Some(r) = self.runs.get_mut(run.0 as usize) {
                    r.vllm_version = Some(version.clone());
                }
            }
            Event::Diagnosed { run, finding, .. } => {
                if let Some(r) = self.runs.get_mut(run.0 as usize) {
                    r.finding = Some(finding.clone());
                }
            }
            Event::FixApplied { run, recipe, .. } => {
                if let Some(r) = self.runs.get_mut(run.0 as usize) {
                    if !r.fixes.contains(recipe) {
                        r.fixes.push(recipe.clone());
                    }
                }
            }
            Event::Provenance {
                run, key, value, ..
            } => {
                if let Some(r) = self.runs.get_mut(run.0 as usize) {
                    r.provenance.insert(key.clone(), value.clone());
                }
            }
            Event::Decided {
                commit, invocation, ..
            } => {
                self.invocations
                    .entry(commit.clone())
                    .or_insert_with(|| (**invocation).clone());
            }
            Event::Pull {
                run, done, total, ..
            } => {
                if let Some(r) = self.runs.get_mut(run.0 as usize) {
                    r.pull = Some((*done, *total));
                }
            }
            Event::Paused { reason, by } => {
                self.paused = Some(reason.clone());
                self.paused_by = by.or_of_text(reason);
            }
            Event::ModelPaused { model, reason } => {
                self.paused_models.insert(model.clone(), reason.clone());
            }
            Event::Resumed => {
                self.paused = None;
                self.paused_by = crate::model::PauseBy::Unknown;
                self.paused_models.clear();
            }
            Event::SweepFinished { .. } => {
                self.finished = true;
                self.finished_ms = Some(at);
            }
            Event::Log { .. }
            | Event::Operator { .. }
            | Event::Gpu { .. }
            | Event::Image { .. } => {}
        }
        Ok(())
    }

    pub fn counts(&self) -> Counts {
        let mut c = Counts {
            total: self.runs.len(),
            ..Default::default()
        };
        for r in &self.runs {
            match &r.state {
                RunState::Queued => c.queued += 1,
                RunState::Active { .. } => c.active += 1,
                RunState::Held { .. } => c.held += 1,
                RunState::Finished { outcome } => match outcome {
                    Outcome::Success => c.success += 1,
                    Outcome::Failed { .. } => c.failed += 1,
                    Outcome::Skipped { .. } => c.skipped += 1,
                    Outcome::Cancelled => c.cancelled += 1,
                },
            }
        }
        c
    }

    /// Progress over the runs the plan can run; `unrunnable(i)` says run i is marked
    /// unrunnable (no image, an invalid command, `skip = true`): those end in the first
    /// second, and counted as done they would put the bar at half way before anything ran.
    pub fn progress(&self, unrunnable: impl Fn(usize) -> bool) -> Progress {
        let mut p = Progress::default();
        for (i, r) in self.runs.iter().enumerate() {
            if unrunnable(i) {
                p.not_runnable += 1;
                continue;
            }
            if r.state.in_reserve() {
                p.in_reserve += 1;
                continue;
            }
            p.total += 1;
            match &r.state {
                RunState::Finished { outcome } => {
                    p.done += 1;
                    if matches!(outcome, Outcome::Skipped { .. } | Outcome::Cancelled) {
                        p.skipped += 1;
                    }
                }
                RunState::Queued => p.queued += 1,
                _ => {}
            }
        }
        p
    }

    /// Failures by category, counting held runs too (they failed, awaiting a decision) and
    /// runs skipped after a diagnosis (see [`outcome_category`]).
    pub(crate) fn failures_by_category(&self) -> BTreeMap<Category, usize> {
        let mut m = BTreeMap::new();
        for c in self.runs.iter().filter_map(RunRecord::category) {
            *m.entry(c).or_insert(0) += 1;
        }
        m
    }

    #[cfg(test)]
    /// Mean wall time of the attempts that ran to an end: held and finished runs; a queued
    /// run's times are an earlier attempt's. The tests' view of the times the fold keeps
    /// (the ETA learns from `eta`'s own history).
    pub(crate) fn mean_run_ms(&self) -> Option<u64> {
        let (sum, n) = self
            .runs
            .iter()
            .filter(|r| matches!(r.state, RunState::Held { .. } | RunState::Finished { .. }))
            .filter_map(|r| Some(r.finished_ms?.saturating_sub(r.started_ms?)))
            .fold((0u64, 0u64), |(s, n), d| (s.saturating_add(d), n + 1));
        (n > 0).then(|| sum / n)
    }

    /// How long the sweep has run, over all its lives: from the earliest start it recorded
    /// (a resumed sweep's runs started before this life's `SweepStarted`) to `now_ms`, or,
    /// once it has `ended`, to its last run's end (a finished store opened again must not
    /// count from the reopening, nor keep counting).
    pub(crate) fn elapsed_ms(&self, now_ms: u64, ended: bool) -> Option<u64> {
        let first_run = self.runs.iter().filter_map(|r| r.started_ms).min();
        let start = match (self.started_ms, first_run) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b)?,
        };
        let end = if ended || self.finished {
            self.runs
                .iter()
                .filter_map(|r| r.finished_ms)
                .max()
                .or(self.finished_ms)
                .unwrap_or(start)
        } else {
            now_ms
        };
        Some(end.saturating_sub(start))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(event: Event) -> Envelope {
        Envelope {
            seq: 0,
            at_ms: 1000,
            event,
        }
    }

    /// Interruptions and pauses are read by their type; a store written before the types
    /// is read by its words, once, and the type wins over the words.
    #[test]
    fn interruptions_and_pauses_by_type_old_stores_by_words() {
        use crate::model::PauseBy;
        let mut s = SweepState::new(1);
        let active = RunState::Active {
            stage: Stage::PreparingImage,
        };
        for (attempt, detail, interrupted, counted) in [
            (1, "the box went away", true, 1),
            (2, "interrupted by shutdown", false, 2),
            (3, "retry after 30s", false, 2),
        ] {
            let step = |from: RunState, to: RunState, detail: Option<String>, interrupted| {
                env(Event::State {
                    run: RunId(0),
                    attempt,
                    from,
                    to,
                    detail,
                    gpus: vec![],
                    interrupted,
                })
            };
            s.apply(&step(RunState::Queued, active.clone(), None, false))
                .unwrap();
            s.apply(&step(
                active.clone(),
                RunState::Queued,
                Some(detail.into()),
                interrupted,
            ))
            .unwrap();
            assert_eq!(s.runs[0].interrupted, counted, "{detail}");
        }
        let old = |reason: &str| -> Envelope {
            let line =
                format!(r#"{{"seq":1,"at_ms":1,"event":{{"type":"paused","reason":"{reason}"}}}}"#);
            serde_json::from_str(&line).unwrap()
        };
        for (reason, by) in [
            ("disk space: /store has 1 GiB free", PauseBy::Disk),
            ("paused by the operator", PauseBy::Operator),
            ("disk budget: img needs room", PauseBy::ImageBudget),
            ("cuda_oom: every run fails alike", PauseBy::Policy),
        ] {
            s.apply(&old(reason)).unwrap();
            assert_eq!(s.paused_by, by, "{reason}");
            s.apply(&env(Event::Resumed)).unwrap();
            assert_eq!(s.paused_by, PauseBy::Unknown);
        }
        // Words that look like the disk watch's do not make a policy's pause its own.
        s.apply(&env(Event::Paused {
            reason: "disk space: said by a recipe".into(),
            by: PauseBy::Policy,
        }))
        .unwrap();
        assert_eq!(s.paused_by, PauseBy::Policy);
    }

    #[test]
    fn interrupted_attempts_spend_no_retry() {
        let mut s = SweepState::new(1);
        let run = RunId(0);
        let active = RunState::Active {
            stage: Stage::PreparingImage,
        };
        let go = |s: &mut SweepState,
                  attempt: u32,
                  from: RunState,
                  to: RunState,
                  detail: Option<&str>| {
            s.apply(&env(Event::State {
                run,
                attempt,
                from,
                to,
                detail: detail.map(str::to_string),
                gpus: vec![0],
                interrupted: false,
            }))
            .unwrap();
        };
        // Attempt 1: Ctrl-C. Attempt 2: a crash found at resume. Attempt 3: a real failure
        // that the policy re-queues for a retry.
        go(&mut s, 1, RunState::Queued, active.clone(), None);
        go(
            &mut s,
            1,
            active.clone(),
            RunState::Queued,
            Some("interrupted by shutdown"),
        );
        go(&mut s, 2, RunState::Queued, active.clone(), None);
        go(
            &mut s,
            2,
            active.clone(),
            RunState::Queued,
            Some("interrupted: re-queued as a new attempt"),
        );
        go(&mut s, 3, RunState::Queued, active.clone(), None);
        assert_eq!(s.run(run).counted_attempts(), 1);
        go(
            &mut s,
            3,
            active.clone(),
            RunState::Queued,
            Some("broken_pipe — retry 1/2"),
        );
        go(&mut s, 4, RunState::Queued, active, None);
        assert_eq!(s.run(run).interrupted, 2);
        assert_eq!(s.run(run).counted_attempts(), 2);
    }

    /// One run's history, event by event, at the given times.
    fn fold(s: &mut SweepState, steps: &[(u64, RunState, Vec<u32>)]) {
        for (at, to, gpus) in steps {
            let r = s.run(RunId(0));
            let from = r.state.clone();
            let attempt = match (&from, to) {
                (RunState::Held { .. }, RunState::Queued) => r.attempt + 1,
                _ => r.attempt.max(1),
            };
            s.apply(&Envelope {
                seq: 0,
                at_ms: *at,
                event: Event::State {
                    run: RunId(0),
                    attempt,
                    from,
                    to: to.clone(),
                    detail: None,
                    gpus: gpus.clone(),
                    interrupted: false,
                },
            })
            .unwrap();
        }
    }

    fn finding(category: Category) -> Event {
        Event::Diagnosed {
            run: RunId(0),
            attempt: 1,
            finding: Finding {
                category,
                evidence: "manifest unknown".into(),
                action: crate::category::Action::Operator,
                recipe: None,
                reason: "needs a decision".into(),
                predicted: false,
                confidence: None,
                telling: vec![],
                kind: None,
            },
        }
    }

    fn active(stage: Stage) -> RunState {
        RunState::Active { stage }
    }

    fn skipped() -> RunState {
        RunState::Finished {
            outcome: Outcome::skipped(
                crate::model::SkipBy::Operator,
                "skipped by the operator: all image_not_found",
            ),
        }
    }

    /// `S` on held runs: each is skipped, and each still says what it failed of.
    #[test]
    fn a_run_skipped_after_a_diagnosis_keeps_its_category() {
        let mut s = SweepState::new(1);
        let held = RunState::Held {
            category: Category::ImageNotFound,
        };
        fold(&mut s, &[(1_000, active(Stage::PreparingImage), vec![0])]);
        s.apply(&env(finding(Category::ImageNotFound))).unwrap();
        fold(&mut s, &[(2_000, held, vec![]), (9_000, skipped(), vec![])]);
        assert_eq!(s.counts().skipped, 1);
        assert_eq!(s.run(RunId(0)).category(), Some(Category::ImageNotFound));
        assert_eq!(
            s.failures_by_category().get(&Category::ImageNotFound),
            Some(&1)
        );
        // Skipped with no diagnosis (the plan's own skip): no cause to keep.
        let mut plain = SweepState::new(1);
        fold(&mut plain, &[(1_000, skipped(), vec![])]);
        assert!(plain.failures_by_category().is_empty());
    }

    /// Held at 2 s, skipped by the operator at 1 h: the attempt (and its last stage) ran
    /// 1.5 s, and the ETA's mean run time says so.
    #[test]
    fn time_held_is_no_stage_time() {
        let mut s = SweepState::new(1);
        let held = RunState::Held {
            category: Category::CudaOom,
        };
        fold(
            &mut s,
            &[
                (500, active(Stage::PreparingImage), vec![0]),
                (1_000, active(Stage::StartingContainer), vec![]),
                (2_000, held, vec![]),
                (3_600_000, skipped(), vec![]),
            ],
        );
        let r = s.run(RunId(0));
        assert_eq!(r.finished_ms, Some(2_000));
        assert_eq!(s.mean_run_ms(), Some(1_500));
    }

    /// Held on GPU 3, retried: queued again, it holds no GPU until it starts; skipped before
    /// it starts, it has no start (the old one was the first attempt's).
    #[test]
    fn a_requeued_run_holds_no_gpu_and_a_run_skipped_before_starting_has_no_start() {
        let mut s = SweepState::new(1);
        let held = RunState::Held {
            category: Category::CudaOom,
        };
        fold(
            &mut s,
            &[
                (500, active(Stage::PreparingImage), vec![3]),
                (2_000, held, vec![]),
                (3_000, RunState::Queued, vec![]),
            ],
        );
        assert!(s.run(RunId(0)).gpus.is_empty(), "{:?}", s.run(RunId(0)));
        fold(&mut s, &[(4_000, skipped(), vec![])]);
        let r = s.run(RunId(0));
        assert_eq!((r.started_ms, r.finished_ms), (None, Some(4_000)));
        assert!(r.stages.is_empty());
        assert_eq!(s.mean_run_ms(), None);
    }

    /// A finished sweep opened again (a resumed daemon with nothing left to do starts and
    /// finishes at once): elapsed is the night's, from its first start to its last end,
    /// and it does not grow.
    #[test]
    fn elapsed_is_the_sweeps_recorded_start_to_finish() {
        let mut s = SweepState::new(1);
        fold(
            &mut s,
            &[
                (1_000, active(Stage::PreparingImage), vec![0]),
                (2_000, active(Stage::StartingContainer), vec![]),
                (3_000, active(Stage::LoadingServer), vec![]),
                (4_000, active(Stage::Benchmarking), vec![]),
                (5_000, active(Stage::Parsing), vec![]),
                (
                    61_000,
                    RunState::Finished {
                        outcome: Outcome::Success,
                    },
                    vec![],
                ),
            ],
        );
        // This life: started and finished hours later.
        let reopened = |event| Envelope {
            seq: 0,
            at_ms: 7_200_000,
            event,
        };
        s.apply(&reopened(Event::SweepStarted {
            name: "n".into(),
            runs: 1,
            gpus: 1,
            runtime: "sim".into(),
        }))
        .unwrap();
        assert_eq!(s.elapsed_ms(7_200_000, false), Some(7_199_000));
        s.apply(&reopened(Event::SweepFinished { interrupted: false }))
            .unwrap();
        assert_eq!(s.elapsed_ms(7_200_000, false), Some(60_000));
        assert_eq!(s.elapsed_ms(99_999_999, false), Some(60_000));
    }

    #[test]
    fn folds_a_run_and_refuses_a_stale_from_state() {
        let mut s = SweepState::new(1);
        let run = RunId(0);
        s.apply(&env(Event::State {
            run,
            attempt: 1,
            from: RunState::Queued,
            to: RunState::Active {
                stage: Stage::PreparingImage,
            },
            detail: None,
            gpus: vec![0],
            interrupted: false,
        }))
        .unwrap();
        assert_eq!(s.counts().active, 1);
        assert_eq!(s.run(run).gpus, vec![0]);
        let stale = s.apply(&env(Event::State {
            run,
            attempt: 1,
            from: RunState::Queued,
            to: RunState::Active {
                stage: Stage::PreparingImage,
            },
            detail: None,
            gpus: vec![],
            interrupted: false,
        }));
        assert!(stale.is_err());
        s.apply(&env(Event::Metric {
            run,
            attempt: 1,
            key: "ttft_mean_ms".into(),
            value: 12.5,
        }))
        .unwrap();
        assert_eq!(s.run(run).metrics["ttft_mean_ms"], 12.5);
    }
}
