//! The operator's commands (pause, retry, skip, apply a fix, …) as the engine applies them.

use super::*;

/// A run's state in one word, for a refusal the operator reads at a glance.
fn word(s: &RunState) -> String {
    match s {
        RunState::Queued => "queued".into(),
        RunState::Active { stage } => format!("running ({stage})"),
        RunState::Held { category } => format!("held ({category})"),
        RunState::Finished { outcome } => outcome.status().into(),
    }
}

/// The reason an operator's skip carries (an undo is only for these).
pub(super) use crate::state::SKIPPED_BY_OPERATOR;

impl Engine {
    pub(super) fn on_command(&mut self, cmd: Command) -> anyhow::Result<()> {
        // The disk watch repeats its pause at every tick while below the floor: only one
        // that changes something (the sweep runs) is an event.
        if matches!(cmd, Command::DiskSpace { low: Some(_) }) && self.state.paused.is_some() {
            return Ok(());
        }
        let (by, saw, cmd) = match cmd {
            Command::Signed { by, saw, command } => (Some(by), saw, *command),
            c => (None, None, c),
        };
        let outcome = match self.refusal(&cmd, saw.as_ref(), by.as_deref()) {
            Some(why) => format!("refused: {why}"),
            None => "done".to_string(),
        };
        let refused = outcome != "done";
        self.emit(Event::Operator {
            command: cmd.clone(),
            by: by.clone(),
            outcome: Some(outcome),
        })?;
        if refused {
            return Ok(());
        }
        if let (Some(run), Some(who)) = (cmd.run(), &by) {
            self.rules.acted.insert(run, who.clone());
        }
        self.carry_out(cmd)
    }

    /// Why `cmd` is not carried out, if it is not: the run moved since the client saw it
    /// (another client, or the policy), or the command has nothing to act on.
    fn refusal(&self, cmd: &Command, saw: Option<&RunState>, by: Option<&str>) -> Option<String> {
        if matches!(cmd, Command::Signed { .. }) {
            return Some("a signed command inside a signed command".into());
        }
        // A recipe nobody wrote does nothing: say so, with the ones there are.
        let recipe = match cmd {
            Command::FixGroup { recipe, .. } | Command::FixCategory { recipe, .. } => Some(recipe),
            Command::ApplyFix {
                recipe: Some(r), ..
            } => Some(r),
            _ => None,
        };
        if let Some(r) = recipe {
            if self.recipes.get(r).is_none() {
                return Some(format!(
                    "there is no fix recipe `{r}` (recipes: {})",
                    self.recipes
                        .all()
                        .iter()
                        .map(|r| r.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        let run = cmd.run()?;
        if run.0 as usize >= self.state.runs.len() {
            return Some(format!("there is no run {run}"));
        }
        let now = &self.state.run(run).state;
        if let Some(saw) = saw {
            if saw != now {
                let who = match self.rules.acted.get(&run) {
                    Some(w) if Some(w.as_str()) != by => format!(" by {w}"),
                    Some(_) => String::new(),
                    None => " by the policy".into(),
                };
                return Some(format!(
                    "{run} was just {}{who} (it was {} when you acted); look again and act on it as it is now",
                    word(now),
                    word(saw)
                ));
            }
        }
        let nothing = |what: &str| Some(format!("{run} is {now}: nothing to {what}"));
        match cmd {
            Command::Retry { .. } | Command::ApplyFix { .. }
                if !matches!(now, RunState::Held { .. } | RunState::Finished { .. }) =>
            {
                nothing("retry")
            }
            Command::Skip { .. } => {
                let to = RunState::Finished {
                    outcome: Outcome::skipped(SkipBy::Plan, String::new()),
                };
                crate::model::transition(now, &to)
                    .is_err()
                    .then(|| format!("{run} is {now}: nothing to skip"))
            }
            Command::Unskip { .. } => match now {
                RunState::Finished { outcome }
                    if outcome.skipped_by() == Some(SkipBy::Operator) =>
                {
                    None
                }
                _ => Some(format!(
                    "{run} is {now}, no longer a run the operator skipped: nothing to undo"
                )),
            },
            Command::Cancel { .. } if !now.is_active() && *now != RunState::Queued => {
                nothing("cancel")
            }
            _ => None,
        }
    }

    fn carry_out(&mut self, cmd: Command) -> anyhow::Result<()> {
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
            Command::Skip { run } => self.skip(run, SkipBy::Operator, SKIPPED_BY_OPERATOR)?,
            Command::Unskip { run } => {
                self.schedule.clear_backoff(run);
                // A held run goes back to being held, with its diagnosis: undoing a skip
                // restores, it never starts an attempt the operator did not ask for.
                match self.rules.before_skip.remove(&run) {
                    Some(held @ RunState::Held { .. }) => {
                        self.set_state(
                            run,
                            held,
                            Some("operator: skip undone, held again".into()),
                        )?;
                        if let Some(f) = self.state.run(run).finding.clone() {
                            self.bound_hold(run, &f);
                        }
                    }
                    _ => {
                        self.set_state(run, RunState::Queued, Some("operator: skip undone".into()))?
                    }
                }
            }
            Command::SkipCategory { category } => {
                // A rule for the rest of the night, not a one-shot (see `hold`).
                self.rules.skip_rules.entry(category).or_insert(0);
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
                        self.skip(
                            id,
                            SkipBy::Operator,
                            &format!("{SKIPPED_BY_OPERATOR}: all {category}"),
                        )?;
                    }
                }
            }
            Command::FixCategory { category, recipe } => {
                // A rule for the rest of the night, as `S` is (see `hold`).
                self.rules.fix_rules.insert(category, (recipe.clone(), 0));
                let held: Vec<RunId> = (0..self.state.runs.len() as u32)
                    .map(RunId)
                    .filter(|id| {
                        matches!(self.state.run(*id).state,
                            RunState::Held { category: c } if c == category)
                    })
                    .filter(|id| !self.state.run(*id).fixes.contains(&recipe))
                    .collect();
                for id in held {
                    self.requeue(id, Some(recipe.clone()))?;
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
                        reason: crate::state::PAUSED_BY_OPERATOR.into(),
                        by: PauseBy::Operator,
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
                    self.emit(Event::Paused {
                        reason: why,
                        by: PauseBy::Disk,
                    })?;
                }
            }
            Command::DiskSpace { low: None } => {
                // The watch lifts its own pause, never an operator's or the policy's.
                if self.state.paused_by == PauseBy::Disk {
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
            Command::Shutdown | Command::Signed { .. } => {}
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
            self.schedule.clear_backoff(run);
            let detail = match fix {
                Some(f) => format!("operator: retry with fix {f}"),
                None => "operator: retry".into(),
            };
            self.set_state(run, RunState::Queued, Some(detail))?;
        }
        Ok(())
    }

    pub(super) fn skip(&mut self, run: RunId, by: SkipBy, reason: &str) -> anyhow::Result<()> {
        if run.0 as usize >= self.state.runs.len() {
            return Ok(());
        }
        let st = self.state.run(run).state.clone();
        let to = RunState::Finished {
            outcome: Outcome::skipped(by, reason),
        };
        if crate::model::transition(&st, &to).is_ok() {
            if by == SkipBy::Operator && matches!(st, RunState::Held { .. }) {
                self.rules.before_skip.insert(run, st);
            }
            self.set_state(run, to, Some(reason.into()))?;
        }
        Ok(())
    }
}
