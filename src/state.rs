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
}

impl RunRecord {
    /// The attempts the policy counts against a run's retries: interrupted ones do not.
    pub fn counted_attempts(&self) -> u32 {
        self.attempt.saturating_sub(self.interrupted).max(1)
    }
}

/// How every re-queue of an interrupted attempt's detail begins (see [`RunRecord::interrupted`]).
pub const INTERRUPTED: &str = "interrupted";

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SweepState {
    pub runs: Vec<RunRecord>,
    pub paused: Option<String>,
    /// Models whose runs the breaker stopped, with why (the sweep itself goes on).
    #[serde(default)]
    pub paused_models: BTreeMap<String, String>,
    pub started_ms: Option<u64>,
    pub finished: bool,
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
            }
            Event::State {
                run,
                attempt,
                from,
                to,
                detail,
                gpus,
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
                            r.finding = None;
                            r.started_ms = Some(at);
                            r.finished_ms = None;
                            r.pull = None;
                            r.gpus = gpus.clone();
                        }
                        r.stages.push((*stage, at));
                    }
                    RunState::Finished { .. } | RunState::Held { .. } => {
                        r.finished_ms = Some(at);
                    }
                    RunState::Queued => {
                        if from.is_active()
                            && detail
                                .as_deref()
                                .is_some_and(|d| d.starts_with(INTERRUPTED))
                        {
                            r.interrupted += 1;
                        }
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
            Event::Pull {
                run, done, total, ..
            } => {
                if let Some(r) = self.runs.get_mut(run.0 as usize) {
                    r.pull = Some((*done, *total));
                }
            }
            Event::Paused { reason } => self.paused = Some(reason.clone()),
            Event::ModelPaused { model, reason } => {
                self.paused_models.insert(model.clone(), reason.clone());
            }
            Event::Resumed => {
                self.paused = None;
                self.paused_models.clear();
            }
            Event::SweepFinished { .. } => self.finished = true,
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

    /// Failures by category, counting held runs too (they failed, awaiting a decision).
    pub fn failures_by_category(&self) -> BTreeMap<Category, usize> {
        let mut m = BTreeMap::new();
        for r in &self.runs {
            let cat = match &r.state {
                RunState::Finished {
                    outcome: Outcome::Failed { category },
                } => Some(*category),
                RunState::Held { category } => Some(*category),
                _ => None,
            };
            if let Some(c) = cat {
                *m.entry(c).or_insert(0) += 1;
            }
        }
        m
    }

    /// Mean wall time of finished attempts that ran (for the ETA).
    pub fn mean_run_ms(&self) -> Option<u64> {
        let (sum, n) = self
            .runs
            .iter()
            .filter_map(|r| Some(r.finished_ms?.saturating_sub(r.started_ms?)))
            .fold((0u64, 0u64), |(s, n), d| (s.saturating_add(d), n + 1));
        (n > 0).then(|| sum / n)
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
