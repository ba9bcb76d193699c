//! Unknown failures as the engine handles them: the operator's one decision for a whole
//! failure group (skip, retry or fix every run of one kind), and the bound on how long a
//! held unknown failure waits when nobody is attached to decide.

use super::*;
use crate::failure_kind;
use std::sync::atomic::Ordering;

/// Held unknown failures and the bound on their wait: how long one may wait with nobody
/// attached, who is attached, and when each one's wait ends.
#[derive(Default)]
pub(super) struct Held {
    /// How long an unknown failure the operator's policy holds may wait with no client
    /// attached before it fails and the night goes on (`--alert-held-min`).
    pub(super) held_limit: Option<Duration>,
    /// Clients attached to the daemon (None: the operator's TUI runs in this process).
    pub(super) clients: Option<Arc<std::sync::atomic::AtomicUsize>>,
    /// Held unknown failures: when their wait ends, for which attempt.
    pub(super) held_until: HashMap<RunId, (Instant, u32)>,
}

/// What the operator decided for a group.
pub(super) enum GroupDecision {
    Skip,
    Retry,
    Fix(String),
}

impl Engine {
    /// Runs of failure group `kind` (an id or a prefix of one) that a decision can still
    /// change: held, failed, or queued to retry after failing with it.
    fn group_runs(&self, kind: &str) -> Vec<RunId> {
        self.state
            .runs
            .iter()
            .enumerate()
            .filter(|(_, r)| {
                matches!(
                    r.state,
                    RunState::Held { .. }
                        | RunState::Queued
                        | RunState::Finished {
                            outcome: Outcome::Failed { .. }
                        }
                )
            })
            .filter(|(_, r)| {
                r.finding
                    .as_ref()
                    .and_then(failure_kind::unknown_kind_id)
                    .is_some_and(|id| failure_kind::id_matches(&id, kind))
            })
            .map(|(i, _)| RunId(i as u32))
            .collect()
    }

    pub(super) fn decide_group(&mut self, kind: &str, what: GroupDecision) -> anyhow::Result<()> {
        if let GroupDecision::Fix(r) = &what {
            if self.recipes.get(r).is_none() {
                tracing_warn(&format!("fix {r} for group {kind}: no such recipe"));
                return Ok(());
            }
        }
        for run in self.group_runs(kind) {
            let queued = self.state.run(run).state == RunState::Queued;
            match &what {
                GroupDecision::Skip => self.skip(
                    run,
                    crate::model::SkipBy::Operator,
                    &format!(
                        "{}: failure group {kind}",
                        crate::state::SKIPPED_BY_OPERATOR
                    ),
                )?,
                GroupDecision::Retry if queued => {
                    // Waiting out a backoff: it goes now.
                    self.schedule.clear_backoff(run);
                }
                GroupDecision::Retry => self.requeue(run, None)?,
                GroupDecision::Fix(r) if queued => {
                    self.queue_fix(run, r)?;
                    self.schedule.clear_backoff(run);
                }
                GroupDecision::Fix(r) => self.requeue(run, Some(r.clone()))?,
            }
        }
        Ok(())
    }

    /// Hold a run for the operator with its reason; an unknown failure's wait is bounded.
    pub(super) fn hold(
        &mut self,
        run: RunId,
        category: Category,
        reason: &str,
        finding: &Finding,
    ) -> anyhow::Result<()> {
        // `S` made this category a rule for the night: the run ends, failed then skipped
        // as the operator said, instead of waking them again.
        if let Some(n) = self.rules.skip_rules.get_mut(&category) {
            *n += 1;
            let covered = *n;
            self.set_state(
                run,
                RunState::Finished {
                    outcome: Outcome::Failed { category },
                },
                Some(reason.to_string()),
            )?;
            return self.skip(
                run,
                crate::model::SkipBy::Operator,
                &format!(
                    "{}: all {category} (the operator's rule for the night; {covered} run(s) since)",
                    crate::state::SKIPPED_BY_OPERATOR
                ),
            );
        }
        // A fix rule for this category: retried with its recipe, once per run (a run that
        // had it and failed again is held as it would be).
        let had = |r: &str| self.state.run(run).fixes.iter().any(|f| f == r);
        if let Some((recipe, n)) = self.rules.fix_rules.get(&category).cloned() {
            if !had(&recipe) {
                self.rules
                    .fix_rules
                    .insert(category, (recipe.clone(), n + 1));
                // Straight back to the queue: nobody is woken for what the rule decides.
                self.queue_fix(run, &recipe)?;
                return self.set_state(
                    run,
                    RunState::Queued,
                    Some(format!(
                        "operator: retry with fix {recipe} (the operator's rule for all {category}; {} run(s) since)",
                        n + 1
                    )),
                );
            }
        }
        self.set_state(run, RunState::Held { category }, Some(reason.to_string()))?;
        self.bound_hold(run, finding);
        Ok(())
    }

    /// A held run, known failure or unknown: it waits at most the held limit unless
    /// someone is attached, so a night nobody watches still ends (the held alert fires at
    /// the same limit).
    pub(super) fn bound_hold(&mut self, run: RunId, _finding: &Finding) {
        let (Some(limit), true) = (self.held.held_limit, self.opts.wait_for_operator) else {
            return;
        };
        let attempt = self.state.run(run).attempt;
        let at = Instant::now()
            .checked_add(limit)
            .unwrap_or_else(Instant::now);
        self.held.held_until.insert(run, (at, attempt));
    }

    fn attended(&self) -> bool {
        self.held
            .clients
            .as_ref()
            .is_none_or(|c| c.load(Ordering::Relaxed) > 0)
    }

    /// Held runs whose wait is over: with a client attached they wait on (the
    /// operator is there); with none they fail and the night goes on.
    pub(super) fn expire_holds(&mut self) -> anyhow::Result<()> {
        let now = Instant::now();
        let due: Vec<(RunId, u32)> = self
            .held
            .held_until
            .iter()
            .filter(|(_, (t, _))| *t <= now)
            .map(|(r, (_, a))| (*r, *a))
            .collect();
        let limit = self.held.held_limit.unwrap_or_default();
        for (run, attempt) in due {
            self.held.held_until.remove(&run);
            let rec = self.state.run(run);
            let RunState::Held { category } = rec.state else {
                continue;
            };
            if rec.attempt != attempt {
                continue;
            }
            if self.attended() {
                let at = now.checked_add(limit).unwrap_or(now);
                self.held.held_until.insert(run, (at, attempt));
                continue;
            }
            let kind = rec.finding.as_ref().map(failure_kind::kind_id_of);
            self.set_state(
                run,
                RunState::Finished {
                    outcome: Outcome::Failed { category },
                },
                Some(format!(
                    "held {} for the operator with nobody attached — failed, the night goes on (failure group {}; r retries it)",
                    fmt_wait(limit),
                    kind.unwrap_or_else(|| "?".into())
                )),
            )?;
        }
        Ok(())
    }
}

fn fmt_wait(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 60 {
        format!("{} min", s / 60)
    } else {
        format!("{s} s")
    }
}
