//! The operator's commands (pause, retry, skip, apply a fix, …) as the engine applies them.

use super::*;

impl Engine {
    pub(super) fn on_command(&mut self, cmd: Command) -> anyhow::Result<()> {
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
            Command::SkipGroup { kind } => {
                self.decide_group(&kind, super::groups::GroupDecision::Skip)?
            }
            Command::RetryGroup { kind } => {
                self.decide_group(&kind, super::groups::GroupDecision::Retry)?
            }
            Command::FixGroup { kind, recipe } => {
                self.decide_group(&kind, super::groups::GroupDecision::Fix(recipe))?
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
            Command::DiskSpace { low: Some(why) } => {
                if self.state.paused.is_none() {
                    self.emit(Event::Paused { reason: why })?;
                }
            }
            Command::DiskSpace { low: None } => {
                let ours = self
                    .state
                    .paused
                    .as_deref()
                    .is_some_and(|r| r.starts_with(crate::disk::PREFIX));
                if ours {
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

    pub(super) fn requeue(&mut self, run: RunId, fix: Option<String>) -> anyhow::Result<()> {
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

    pub(super) fn skip(&mut self, run: RunId, reason: &str) -> anyhow::Result<()> {
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
