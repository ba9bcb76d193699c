//! Histories derived at read time: a run's attempts and state changes are folded from the
//! event log (written once per event), never stored as growing records.

use super::{RunDoc, RunSummary, StateChange, StoredEvent};
use crate::event::Event;
use crate::model::{RunState, Stage};

impl RunDoc {
    /// A doc with the summary's current picture and no history yet.
    pub(crate) fn of_summary(s: &RunSummary) -> RunDoc {
        RunDoc {
            key: s.key.clone(),
            info: s.info.clone(),
            record: s.record.clone(),
            attempts: Vec::new(),
            history: Vec::new(),
            predicted: s.predicted.clone(),
            removed: s.removed,
        }
    }

    /// Fold one stored event of this run (event `seq`) into its attempts and history.
    pub fn apply(&mut self, seq: u64, ev: &StoredEvent, summary: &RunSummary) {
        let at = ev.env.at_ms;
        match &ev.env.event {
            Event::State {
                attempt,
                from,
                to,
                detail,
                gpus,
                ..
            } => {
                self.history.push(StateChange {
                    at_ms: at,
                    attempt: *attempt,
                    from: from.clone(),
                    to: to.clone(),
                    detail: detail.clone(),
                });
                // An attempt interrupted back to the queue is numbered as the next one.
                let ending = if from.is_active() && *to == RunState::Queued {
                    attempt.saturating_sub(1)
                } else {
                    *attempt
                };
                match to {
                    RunState::Active {
                        stage: Stage::PreparingImage,
                    } => {
                        let a = self.attempt_mut(*attempt);
                        a.started_ms = Some(at);
                        a.stages = vec![(Stage::PreparingImage, at)];
                        a.gpus = gpus.clone();
                        a.info = Some(summary.info_at(seq).clone());
                    }
                    RunState::Active { stage } => {
                        self.attempt_mut(*attempt).stages.push((*stage, at))
                    }
                    RunState::Queued if !from.is_active() => {}
                    _ => {
                        let a = self.attempt_mut(ending);
                        a.end = Some(to.clone());
                        a.interrupted = *to == RunState::Queued;
                        a.detail = detail.clone();
                        a.finished_ms = Some(at);
                        if from.is_active() {
                            a.logs = ev.logs.clone();
                        }
                    }
                }
            }
            Event::Metric {
                attempt,
                key,
                value,
                ..
            } => {
                self.attempt_mut(*attempt)
                    .metrics
                    .insert(key.clone(), *value);
            }
            Event::Requests {
                attempt, requests, ..
            } => {
                self.attempt_mut(*attempt).requests = Some(requests.clone());
            }
            Event::Diagnosed {
                attempt, finding, ..
            } => {
                if finding.predicted {
                    self.predicted = Some(finding.clone());
                } else {
                    self.attempt_mut(*attempt).findings.push(finding.clone());
                }
            }
            Event::FixApplied {
                attempt, recipe, ..
            } => {
                let a = self.attempt_mut(*attempt);
                if !a.fixes.contains(recipe) {
                    a.fixes.push(recipe.clone());
                }
            }
            Event::Provenance {
                attempt,
                key,
                value,
                ..
            } => {
                self.attempt_mut(*attempt)
                    .provenance
                    .insert(key.clone(), value.clone());
            }
            Event::VllmVersion { version, .. } => {
                // The attempt of the run's latest state change.
                let n = self.history.last().map_or(1, |h| h.attempt.max(1));
                self.attempt_mut(n).vllm_version = Some(version.clone());
            }
            _ => {}
        }
    }
}
