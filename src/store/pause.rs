//! The sweep's pause, kept across its daemon's lives. An operator who pressed `p` at 01:10
//! to fix something by hand has not said "go" when the daemon dies at 01:20 (a kill, a
//! crash, a reboot) and is started again: the new life starts paused, as the old one ended,
//! and says why. Only an operator lifts their own pause (`p`, space): where nobody can
//! (`--headless`, no client), the run a person started by hand is their resume, and it
//! says so. Other pauses are not carried: the disk watch measures again at the start, and a
//! policy's pause was for the night that hit it.
//!
//! The pause is one key in the store's meta tree, written (and flushed) as the engine
//! pauses and removed as it resumes: reading it back is one lookup, not a scan of the
//! night's events.

use super::{dec, enc, Store, Tree};
use crate::model::PauseBy;
use serde::{Deserialize, Serialize};

const K_PAUSE: &[u8] = b"pause";

/// A pause as the store keeps it: the life it was made in, its words and who made it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredPause {
    pub life: u32,
    pub reason: String,
    pub by: PauseBy,
}

/// How a new life of the sweep starts, given the pause the previous one ended in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Carry {
    /// Nothing to carry: the previous life ended unpaused, or in a pause not the operator's.
    Nothing,
    /// Start paused again, with these words and by this kind.
    Keep { reason: String, by: PauseBy },
    /// The operator's pause ends here, and the daemon says why.
    Lift { reason: String, why: &'static str },
}

/// Words added to a pause carried into a new life (once, however many lives it outlives).
pub const KEPT: &str = "; kept from the daemon's last run";

/// The start of a new life: the pause the previous life ended in (see
/// [`Store::ended_pause`]), and whether this life can wait for an operator to lift it (a
/// daemon clients attach to, not `--headless`).
pub fn carry(ended: Option<StoredPause>, can_wait: bool) -> Carry {
    let Some(p) = ended else {
        return Carry::Nothing;
    };
    if p.by.or_of_text(&p.reason) != PauseBy::Operator {
        return Carry::Nothing;
    }
    if can_wait {
        Carry::Keep {
            reason: format!("{}{KEPT}", p.reason.trim_end_matches(KEPT)),
            by: PauseBy::Operator,
        }
    } else {
        Carry::Lift {
            reason: p.reason,
            why: "nobody can lift it in a --headless run: this run, started by hand, resumes it",
        }
    }
}

impl Store {
    /// Keep the sweep's pause as the engine's events make and lift it.
    pub(crate) fn follow_pause(&mut self, event: &crate::event::Event) -> anyhow::Result<()> {
        use crate::event::Event;
        match event {
            Event::Paused { reason, by } => self.put_pause(Some((reason, by.or_of_text(reason)))),
            Event::Resumed => self.put_pause(None),
            _ => Ok(()),
        }
    }

    /// The pause the sweep is in (written as the engine pauses), or none once it resumes.
    pub(crate) fn put_pause(&mut self, pause: Option<(&str, PauseBy)>) -> anyhow::Result<()> {
        match pause {
            Some((reason, by)) => self.backend.put(
                Tree::Meta,
                K_PAUSE,
                &enc(&StoredPause {
                    life: self.life,
                    reason: reason.to_string(),
                    by,
                })?,
            )?,
            None => self.backend.remove(Tree::Meta, K_PAUSE)?,
        }
        // An operator's decision is durable before the next one is taken.
        self.backend.flush()
    }

    /// The pause the last life ended in (call before [`Store::begin_life`]): one from an
    /// older life was lifted by the lives since, which started unpaused.
    pub(crate) fn ended_pause(&self) -> Option<StoredPause> {
        self.pause().filter(|p| p.life == self.life)
    }

    /// The stored pause; an unreadable one is no pause (the night runs, and says so in
    /// its log), never a reason not to start.
    pub fn pause(&self) -> Option<StoredPause> {
        let bytes = self.backend.get(Tree::Meta, K_PAUSE).ok().flatten()?;
        match dec(&bytes) {
            Ok(p) => Some(p),
            Err(e) => {
                tracing::warn!("store: the stored pause is unreadable ({e}); starting unpaused");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(reason: &str) -> Option<StoredPause> {
        Some(StoredPause {
            life: 3,
            reason: reason.into(),
            by: PauseBy::Operator,
        })
    }

    #[test]
    fn the_operators_pause_outlives_its_daemon_where_a_client_can_lift_it() {
        let kept = carry(op("paused by the operator (ops@tui:42)"), true);
        assert_eq!(
            kept,
            Carry::Keep {
                reason: format!("paused by the operator (ops@tui:42){KEPT}"),
                by: PauseBy::Operator
            }
        );
        // Outliving a second daemon does not stack the words.
        let Carry::Keep { reason, .. } = kept else {
            unreachable!()
        };
        assert!(matches!(
            carry(op(&reason), true),
            Carry::Keep { reason, .. } if reason.matches("kept from").count() == 1
        ));
    }

    #[test]
    fn a_headless_start_by_hand_resumes_and_says_so() {
        assert!(matches!(
            carry(op("paused by the operator"), false),
            Carry::Lift { why, .. } if why.contains("--headless")
        ));
    }

    #[test]
    fn only_the_operators_pause_is_carried() {
        assert_eq!(carry(None, true), Carry::Nothing);
        for by in [
            PauseBy::Disk,
            PauseBy::Policy,
            PauseBy::ImageBudget,
            PauseBy::Failure,
        ] {
            let p = Some(StoredPause {
                life: 3,
                reason: "disk space: store below its floor".into(),
                by,
            });
            assert_eq!(carry(p, true), Carry::Nothing, "{by:?}");
        }
        // A pause stored before pauses had a type is read from its words.
        let old = Some(StoredPause {
            life: 3,
            reason: "paused by the operator".into(),
            by: PauseBy::Unknown,
        });
        assert!(matches!(carry(old, true), Carry::Keep { .. }));
        let policy = Some(StoredPause {
            life: 3,
            reason: "every run of the last 5 failed".into(),
            by: PauseBy::Unknown,
        });
        assert_eq!(carry(policy, true), Carry::Nothing);
    }
}
