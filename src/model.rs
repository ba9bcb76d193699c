//! The domain model: a run is commit × variant × attempt, moving through explicit stages to
//! one terminal outcome. Transitions are checked here, in one place, so the engine, the
//! store and every view agree on what a legal history looks like.

use crate::category::Category;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Which build of vLLM a run measures.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum Variant {
    /// The parent commit's vLLM.
    Baseline,
    /// The PR commit's vLLM.
    Human,
    /// The baseline image with the named agent's patch applied.
    Agent(String),
}

impl Variant {
    pub fn agent_id(&self) -> Option<&str> {
        match self {
            Variant::Agent(id) => Some(id),
            _ => None,
        }
    }
    /// Baseline first so the variants of a commit are measured back to back against it.
    pub fn order(&self) -> u8 {
        match self {
            Variant::Baseline => 0,
            Variant::Human => 1,
            Variant::Agent(_) => 2,
        }
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Variant::Baseline => f.write_str("baseline"),
            Variant::Human => f.write_str("human"),
            Variant::Agent(id) => write!(f, "agent:{id}"),
        }
    }
}

impl From<Variant> for String {
    fn from(v: Variant) -> String {
        v.to_string()
    }
}

impl TryFrom<String> for Variant {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl std::str::FromStr for Variant {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "baseline" => Ok(Variant::Baseline),
            "human" => Ok(Variant::Human),
            _ => match s.strip_prefix("agent:") {
                Some(id) if !id.is_empty() => Ok(Variant::Agent(id.to_string())),
                _ => Err(format!(
                    "unknown variant `{s}` (expected baseline, human or agent:<id>)"
                )),
            },
        }
    }
}

/// A commit's index in the plan (`plan.commits[i]`), as runs and the queue point at it:
/// not its rank in the night's order ([`crate::night::order::Rank`]), not its hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CommitIx(pub usize);

/// Index of a run in the expanded plan. Stable for one plan; the store maps it to a
/// textual key (commit/variant) so it survives plan edits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RunId(pub u32);

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// The working stages of one attempt, in the order they happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    PreparingImage,
    StartingContainer,
    LoadingServer,
    Benchmarking,
    Parsing,
}

impl Stage {
    pub const ALL: [Stage; 5] = [
        Stage::PreparingImage,
        Stage::StartingContainer,
        Stage::LoadingServer,
        Stage::Benchmarking,
        Stage::Parsing,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::PreparingImage => "preparing_image",
            Stage::StartingContainer => "starting_container",
            Stage::LoadingServer => "loading_server",
            Stage::Benchmarking => "benchmarking",
            Stage::Parsing => "parsing",
        }
    }
    pub fn short(self) -> &'static str {
        match self {
            Stage::PreparingImage => "image",
            Stage::StartingContainer => "container",
            Stage::LoadingServer => "server",
            Stage::Benchmarking => "bench",
            Stage::Parsing => "parse",
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a finished attempt ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    Success,
    Failed {
        category: Category,
    },
    /// Set aside: `by` says who and why as a type (behaviour reads it), `reason` in words
    /// (people read it; rewording it changes nothing).
    Skipped {
        reason: String,
        #[serde(default, skip_serializing_if = "SkipBy::is_unknown")]
        by: SkipBy,
    },
    Cancelled,
}

/// Who set a run aside.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipBy {
    /// A skip stored before skips had a type: [`Outcome::skipped_by`] reads its words once.
    #[default]
    Unknown,
    /// The plan or what was known before the night: `skip = true`, an invalid command, no
    /// image, preflight, more GPUs than the box has.
    Plan,
    /// An operator (`s`, `S`, a failure group, `:skip-category`): `u` may undo it.
    Operator,
    /// The policy after a diagnosis (a category it skips, a commit-wide decision).
    Policy,
    /// Not run because another run of its model was refused (a gated model): `run
    /// --retry-failed gated_model_auth` brings it back with that category.
    ModelRefused,
    /// Kept in reserve until spare time asks for it: an adaptive repeat held back, a drift
    /// reference not yet due. Not part of the night's progress.
    Reserve,
}

/// Who paused the sweep, and so who may lift it: behaviour reads this, never the reason's
/// words (those are for people).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PauseBy {
    /// A pause stored before pauses had a type: [`PauseBy::of_text`] reads its words once.
    #[default]
    Unknown,
    /// `p` or `:pause`: only an operator lifts it.
    Operator,
    /// The disk watch: a directory the night writes to is below its floor. The watch lifts
    /// its own pause once space is back, never another.
    Disk,
    /// The image budget: the next image does not fit and no image can be removed.
    ImageBudget,
    /// The policy, after a failure of a category that pauses the sweep.
    Policy,
    /// The store or the run logs failed and the sweep stopped (the daemon's last word).
    Failure,
}

impl PauseBy {
    pub(crate) fn is_unknown(&self) -> bool {
        *self == PauseBy::Unknown
    }

    /// An old store's pause, from its words (the only place words decide).
    pub(crate) fn of_text(reason: &str) -> PauseBy {
        if reason.starts_with(crate::state::DISK_PAUSE) {
            PauseBy::Disk
        } else if reason.starts_with(crate::state::PAUSED_BY_OPERATOR) {
            PauseBy::Operator
        } else if reason.starts_with("disk budget:") {
            PauseBy::ImageBudget
        } else if reason.starts_with("the sweep stopped:") {
            PauseBy::Failure
        } else {
            PauseBy::Policy
        }
    }

    /// This pause's kind: its type, or for an old one its words.
    pub(crate) fn or_of_text(self, reason: &str) -> PauseBy {
        if self.is_unknown() {
            PauseBy::of_text(reason)
        } else {
            self
        }
    }
}

impl SkipBy {
    pub(crate) fn is_unknown(&self) -> bool {
        *self == SkipBy::Unknown
    }

    /// An old store's skip, from its words (the only place words decide: stores written
    /// since carry the type).
    pub(crate) fn of_text(reason: &str) -> SkipBy {
        if reason.starts_with(crate::state::SKIPPED_BY_OPERATOR) {
            SkipBy::Operator
        } else if reason.starts_with(crate::category::NOT_RUN_GATED) {
            SkipBy::ModelRefused
        } else if reason.starts_with(crate::state::HELD_BACK)
            || reason.starts_with(crate::state::REFERENCE_WAITS)
        {
            SkipBy::Reserve
        } else {
            SkipBy::Plan
        }
    }
}

impl Outcome {
    pub fn status(&self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Failed { .. } => "failed",
            Outcome::Skipped { .. } => "skipped",
            Outcome::Cancelled => "cancelled",
        }
    }
    pub fn category(&self) -> Option<Category> {
        match self {
            Outcome::Failed { category } => Some(*category),
            _ => None,
        }
    }

    /// A skip, by whom (its type; an old store's read from its words).
    pub fn skipped(by: SkipBy, reason: impl Into<String>) -> Outcome {
        Outcome::Skipped {
            reason: reason.into(),
            by,
        }
    }

    /// Who set it aside, when it is a skip.
    pub fn skipped_by(&self) -> Option<SkipBy> {
        match self {
            Outcome::Skipped { by, reason } => Some(match by {
                SkipBy::Unknown => SkipBy::of_text(reason),
                b => *b,
            }),
            _ => None,
        }
    }
}

impl RunState {
    /// A run kept in reserve (an adaptive repeat held back, a reference not yet due).
    pub fn in_reserve(&self) -> bool {
        matches!(self, RunState::Finished { outcome } if outcome.skipped_by() == Some(SkipBy::Reserve))
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Failed { category } => write!(f, "failed({category})"),
            Outcome::Skipped { reason, .. } => write!(f, "skipped({reason})"),
            o => f.write_str(o.status()),
        }
    }
}

/// Where a run is. `Held` is a failed attempt waiting for the operator's key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum RunState {
    #[default]
    Queued,
    Active {
        stage: Stage,
    },
    Held {
        category: Category,
    },
    Finished {
        outcome: Outcome,
    },
}

impl RunState {
    pub fn is_terminal(&self) -> bool {
        matches!(self, RunState::Finished { .. })
    }
    pub fn is_active(&self) -> bool {
        matches!(self, RunState::Active { .. })
    }
    pub fn label(&self) -> String {
        match self {
            RunState::Queued => "queued".into(),
            RunState::Active { stage } => stage.to_string(),
            RunState::Held { category } => format!("held({category})"),
            RunState::Finished { outcome } => outcome.to_string(),
        }
    }
}

impl fmt::Display for RunState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

/// A transition the state machine refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("illegal transition {from} -> {to}")]
pub struct IllegalTransition {
    pub from: String,
    pub to: String,
}

/// Whether `to` is also a new attempt (a re-queue after the previous attempt ended).
pub(crate) fn starts_new_attempt(from: &RunState, to: &RunState) -> bool {
    matches!(to, RunState::Queued)
        && matches!(from, RunState::Held { .. } | RunState::Finished { .. })
}

/// The checked reducer for one run's state. Stages only move forward (a run that needs no
/// server skips `loading_server`); any working stage may end in a failure or cancellation;
/// held and finished runs can be re-queued (failures are never sticky) or skipped.
pub fn transition(from: &RunState, to: &RunState) -> Result<(), IllegalTransition> {
    use RunState::*;
    let ok = match (from, to) {
        (Queued, Active { stage }) => *stage == Stage::PreparingImage,
        (Queued, Finished { outcome }) => {
            matches!(outcome, Outcome::Skipped { .. } | Outcome::Cancelled)
        }
        (Active { stage: a }, Active { stage: b }) => b > a,
        (Active { stage }, Finished { outcome }) => match outcome {
            Outcome::Success => *stage == Stage::Parsing,
            Outcome::Failed { .. } | Outcome::Cancelled => true,
            // A run is skipped only between attempts, never yanked mid-stage.
            Outcome::Skipped { .. } => false,
        },
        (Active { .. }, Held { .. }) => true,
        // An interrupted attempt (crash, resume) goes back to the queue as a new attempt.
        (Active { .. }, Queued) => true,
        (Held { .. }, Queued) => true,
        (Held { .. }, Finished { outcome }) => !matches!(outcome, Outcome::Success),
        (Finished { .. }, Queued) => true,
        // The operator's undo of a skip puts a held run back as it was.
        (
            Finished {
                outcome: Outcome::Skipped { .. },
            },
            Held { .. },
        ) => true,
        (
            Finished {
                outcome: Outcome::Failed { .. },
            },
            Finished {
                outcome: Outcome::Skipped { .. },
            },
        ) => true,
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(IllegalTransition {
            from: from.label(),
            to: to.label(),
        })
    }
}

/// The labels nightshift marks its containers with: how it finds a sweep's leftovers, and
/// how the operator's shell (the TUI's `!`) finds a run's container.
pub mod labels {
    pub const LABEL_SWEEP: &str = "nightshift.sweep";
    pub const LABEL_RUN: &str = "nightshift.run";
    pub const LABEL_KEY: &str = "nightshift.key";
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_states() -> Vec<RunState> {
        let mut v = vec![RunState::Queued];
        v.extend(Stage::ALL.iter().map(|s| RunState::Active { stage: *s }));
        v.push(RunState::Held {
            category: Category::CudaOom,
        });
        v.push(RunState::Finished {
            outcome: Outcome::Success,
        });
        v.push(RunState::Finished {
            outcome: Outcome::Failed {
                category: Category::NoMetrics,
            },
        });
        v.push(RunState::Finished {
            outcome: Outcome::skipped(SkipBy::Plan, "x"),
        });
        v.push(RunState::Finished {
            outcome: Outcome::Cancelled,
        });
        v
    }

    #[test]
    fn happy_path_is_legal() {
        let path = [
            RunState::Queued,
            RunState::Active {
                stage: Stage::PreparingImage,
            },
            RunState::Active {
                stage: Stage::StartingContainer,
            },
            RunState::Active {
                stage: Stage::LoadingServer,
            },
            RunState::Active {
                stage: Stage::Benchmarking,
            },
            RunState::Active {
                stage: Stage::Parsing,
            },
            RunState::Finished {
                outcome: Outcome::Success,
            },
        ];
        for w in path.windows(2) {
            transition(&w[0], &w[1]).unwrap();
        }
    }

    #[test]
    fn offline_benchmarks_skip_the_server_stage() {
        transition(
            &RunState::Active {
                stage: Stage::StartingContainer,
            },
            &RunState::Active {
                stage: Stage::Benchmarking,
            },
        )
        .unwrap();
    }

    #[test]
    fn illegal_transitions_are_rejected() {
        use RunState::*;
        let bad = [
            (
                Queued,
                Active {
                    stage: Stage::Benchmarking,
                },
            ),
            (
                Queued,
                Finished {
                    outcome: Outcome::Success,
                },
            ),
            (
                Queued,
                Held {
                    category: Category::Other,
                },
            ),
            (
                Active {
                    stage: Stage::Benchmarking,
                },
                Active {
                    stage: Stage::LoadingServer,
                },
            ),
            (
                Active {
                    stage: Stage::Benchmarking,
                },
                Active {
                    stage: Stage::Benchmarking,
                },
            ),
            (
                Active {
                    stage: Stage::Benchmarking,
                },
                Finished {
                    outcome: Outcome::Success,
                },
            ),
            (
                Active {
                    stage: Stage::Benchmarking,
                },
                Finished {
                    outcome: Outcome::skipped(SkipBy::Plan, "r"),
                },
            ),
            (
                Held {
                    category: Category::Other,
                },
                Finished {
                    outcome: Outcome::Success,
                },
            ),
            (
                Held {
                    category: Category::Other,
                },
                Active {
                    stage: Stage::PreparingImage,
                },
            ),
            (
                Finished {
                    outcome: Outcome::Success,
                },
                Active {
                    stage: Stage::PreparingImage,
                },
            ),
            (
                Finished {
                    outcome: Outcome::Success,
                },
                Finished {
                    outcome: Outcome::Cancelled,
                },
            ),
        ];
        for (from, to) in bad {
            assert!(
                transition(&from, &to).is_err(),
                "{from} -> {to} should be illegal"
            );
        }
    }

    #[test]
    fn every_pair_is_decided_and_requeue_is_always_possible_after_an_end() {
        for from in all_states() {
            for to in all_states() {
                let legal = transition(&from, &to).is_ok();
                if matches!(from, RunState::Held { .. } | RunState::Finished { .. })
                    && to == RunState::Queued
                {
                    assert!(legal, "{from} must be re-queueable");
                    assert!(starts_new_attempt(&from, &to));
                }
                if from.is_terminal() && to.is_active() {
                    assert!(!legal);
                }
            }
        }
    }

    #[test]
    fn variant_text_round_trip() {
        for v in [
            Variant::Baseline,
            Variant::Human,
            Variant::Agent("claude_code".into()),
        ] {
            assert_eq!(v.to_string().parse::<Variant>().unwrap(), v);
        }
        assert!("agent:".parse::<Variant>().is_err());
        assert!("robot".parse::<Variant>().is_err());
    }

    /// A skip carries who set it aside as a type; a store written before the type reads
    /// it from the words once, and rewording a reason changes nothing for new ones.
    #[test]
    fn skips_carry_their_kind_and_old_stores_read_it_from_the_words() {
        let old: Outcome =
            serde_json::from_str(r#"{"status":"skipped","reason":"skipped by the operator"}"#)
                .unwrap();
        assert_eq!(old.skipped_by(), Some(SkipBy::Operator));
        let old_gated: Outcome = serde_json::from_str(&format!(
            r#"{{"status":"skipped","reason":"{}m is gated"}}"#,
            crate::category::NOT_RUN_GATED
        ))
        .unwrap();
        assert_eq!(old_gated.skipped_by(), Some(SkipBy::ModelRefused));
        let new = Outcome::skipped(SkipBy::Reserve, "reworded at will");
        let text = serde_json::to_string(&new).unwrap();
        assert!(text.contains(r#""by":"reserve""#), "{text}");
        let back: Outcome = serde_json::from_str(&text).unwrap();
        assert_eq!(back.skipped_by(), Some(SkipBy::Reserve));
        assert!(RunState::Finished { outcome: back }.in_reserve());
        assert_eq!(Outcome::Success.skipped_by(), None);
    }
}

/// Where a log line came from. Streams are kept apart on disk and in the diagnosis
/// catalog (a signature says which stream it trusts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stream {
    /// The vLLM server process (container main process).
    Server,
    /// The benchmark client (exec in the container, or the offline benchmark).
    Bench,
    /// The runtime's own steps: container lifecycle, patch application, fix recipes.
    Docker,
    /// Image pull messages.
    Pull,
}

impl Stream {
    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Server => "server",
            Stream::Bench => "bench",
            Stream::Docker => "docker",
            Stream::Pull => "pull",
        }
    }
}

/// Which pipe of a process a line was written to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pipe {
    Stdout,
    Stderr,
}
