//! The activity log: every operator action (who sent it, and what came of it) and every
//! decision the policy took on its own, one line each, in the order they happened. One
//! source for the TUI's activity pane, `show` and the digest: all fold the same events.

use crate::event::{Command, Envelope, Event};
use crate::model::{Outcome, RunId, RunState, SkipBy};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub at_ms: u64,
    /// A client's id (`ops@tui:4321`, `ops@cli`), `operator` (an older client that did not
    /// sign), `policy`, or `resume`.
    pub source: String,
    /// What was done, runs named by their key.
    pub what: String,
    /// `done`, why it was refused, or the policy's reason.
    pub outcome: String,
    /// The run acted on, when one was.
    pub run: Option<RunId>,
}

impl Entry {
    pub fn refused(&self) -> bool {
        self.outcome.starts_with("refused")
    }

    /// Sent by an operator's client (not the policy, nor the resume that re-queued runs).
    pub(crate) fn by_operator(&self) -> bool {
        !matches!(self.source.as_str(), "policy" | "resume")
    }
}

/// The entry `env` makes in the log, if any. `key` names a run (its plan key).
pub fn entry(env: &Envelope, key: &dyn Fn(RunId) -> String) -> Option<Entry> {
    let at_ms = env.at_ms;
    let e = |source: &str, what: String, outcome: String, run: Option<RunId>| Entry {
        at_ms,
        source: source.to_string(),
        what,
        outcome,
        run,
    };
    match &env.event {
        Event::Operator {
            command,
            by,
            outcome,
        } => Some(e(
            by.as_deref().unwrap_or("operator"),
            describe(command, key),
            outcome.clone().unwrap_or_else(|| "done".into()),
            command.run(),
        )),
        Event::State {
            run,
            from,
            to,
            detail,
            ..
        } => {
            let detail = detail.clone().unwrap_or_default();
            // The operator's own changes are logged with their command.
            let skipped_by = match to {
                RunState::Finished { outcome } => outcome.skipped_by(),
                _ => None,
            };
            if detail.starts_with("operator") || skipped_by == Some(SkipBy::Operator) {
                return None;
            }
            // Runs kept in reserve (adaptive repeats, references not yet due) are the
            // plan's, not a decision of the night's.
            if skipped_by == Some(SkipBy::Reserve) {
                return None;
            }
            let what = match to {
                RunState::Held { category } => format!("hold {} ({category})", key(*run)),
                RunState::Finished {
                    outcome: Outcome::Skipped { .. },
                } => format!("skip {}", key(*run)),
                RunState::Queued if matches!(from, RunState::Active { .. }) => {
                    format!("retry {}", key(*run))
                }
                // Adaptive repeats: the policy spends spare time on an unknown verdict.
                RunState::Queued if detail.starts_with("extra repeat") => {
                    format!("add a repeat: {}", key(*run))
                }
                RunState::Queued if detail.starts_with("drift reference") => {
                    format!("run the reference: {}", key(*run))
                }
                _ => return None,
            };
            Some(e("policy", what, detail, Some(*run)))
        }
        Event::Paused { reason, by }
            if by.or_of_text(reason) != crate::model::PauseBy::Operator =>
        {
            Some(e("policy", "pause the sweep".into(), reason.clone(), None))
        }
        Event::Drift { shift } => Some(e(
            "reference",
            "the box drifted".into(),
            shift.describe(),
            None,
        )),
        Event::ModelPaused { model, reason } => Some(e(
            "policy",
            format!("stop {model}'s runs"),
            reason.clone(),
            None,
        )),
        _ => None,
    }
}

/// `command` with its runs named by key, capitalised for a question ("Skip c1/human").
pub(crate) fn describe_for(command: &Command, key: &dyn Fn(RunId) -> String) -> String {
    let d = describe(command, key);
    let mut c = d.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or(d)
}

/// `command` with its runs named by key (`#23` means nothing in the morning).
fn describe(command: &Command, key: &dyn Fn(RunId) -> String) -> String {
    let text = command.describe();
    match command.run() {
        Some(r) => text.replace(&r.to_string(), &key(r)),
        None => text,
    }
}

/// Every entry of `events`, oldest first.
pub fn log<'a>(
    events: impl IntoIterator<Item = &'a Envelope>,
    key: &dyn Fn(RunId) -> String,
) -> Vec<Entry> {
    events.into_iter().filter_map(|e| entry(e, key)).collect()
}

/// `HH:MM:SS` in UTC: the digest and `show` are read on other machines than the box's.
pub fn clock(ms: u64) -> String {
    jiff::Timestamp::from_millisecond(ms as i64)
        .map(|t| t.strftime("%H:%M:%S").to_string())
        .unwrap_or_else(|_| "--:--:--".into())
}

/// One line: `HH:MM:SS  source  what — outcome`, times in UTC.
pub fn line(e: &Entry) -> String {
    format!(
        "{}  {}  {} — {}",
        clock(e.at_ms),
        e.source,
        e.what,
        e.outcome
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::category::Category;

    fn env(event: Event) -> Envelope {
        Envelope {
            seq: 0,
            at_ms: 1_795_636_000_000,
            event,
        }
    }
    fn key(r: RunId) -> String {
        format!("abc/run{}", r.0)
    }

    #[test]
    fn operator_actions_name_their_client_and_outcome() {
        let e = entry(
            &env(Event::Operator {
                command: Command::Skip { run: RunId(23) },
                by: Some("ops@tui:4321".into()),
                outcome: Some("done".into()),
            }),
            &key,
        )
        .unwrap();
        assert_eq!(e.source, "ops@tui:4321");
        assert_eq!(e.what, "skip abc/run23");
        assert_eq!(e.outcome, "done");
        assert_eq!(e.run, Some(RunId(23)));
        assert!(
            line(&e).contains("ops@tui:4321  skip abc/run23 — done"),
            "{}",
            line(&e)
        );
        // An unsigned command (an older client) is the operator's.
        let e = entry(
            &env(Event::Operator {
                command: Command::Pause,
                by: None,
                outcome: None,
            }),
            &key,
        )
        .unwrap();
        assert_eq!(
            (e.source.as_str(), e.outcome.as_str()),
            ("operator", "done")
        );
    }

    #[test]
    fn policy_decisions_are_logged_and_operator_changes_are_not_twice() {
        let held = env(Event::State {
            run: RunId(2),
            attempt: 1,
            from: RunState::Active {
                stage: crate::model::Stage::LoadingServer,
            },
            to: RunState::Held {
                category: Category::CudaOom,
            },
            detail: Some("needs an operator: cuda_oom".into()),
            gpus: vec![],
            interrupted: false,
        });
        let e = entry(&held, &key).unwrap();
        assert_eq!(e.source, "policy");
        assert!(e.what.starts_with("hold abc/run2"), "{}", e.what);
        let by_operator = env(Event::State {
            run: RunId(2),
            attempt: 1,
            from: RunState::Held {
                category: Category::CudaOom,
            },
            to: RunState::Queued,
            detail: Some("operator: retry".into()),
            gpus: vec![],
            interrupted: false,
        });
        assert_eq!(entry(&by_operator, &key), None);
    }
}
