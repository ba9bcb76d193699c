//! Why a run did not succeed, worked out in one place for every output that reads run
//! documents: the results summary and cells, `results --filter category=`, `show` and the
//! digest. A run skipped after a diagnosis keeps its category (the skip was the operator's
//! decision about that failure, not a cause of its own), and a run re-queued for another
//! attempt has none until that attempt fails.

use crate::category::Category;
use crate::model::{Outcome, RunState};
use crate::record::{AttemptDoc, RunDoc};

/// The failure category a run stands for as it is now; see the module's note.
pub fn category(doc: &RunDoc) -> Option<Category> {
    // The stored record says what the run is doing now (a synthetic doc without one has
    // only its attempts to go by): going again, it has not failed yet.
    if doc.record.attempt > 0
        && matches!(doc.record.state, RunState::Queued | RunState::Active { .. })
    {
        return None;
    }
    match doc.representative() {
        Some(a) => of_attempt(doc, a),
        // Skipped before any attempt started: its record and prediction are all it has.
        None => crate::state::outcome_category(&doc.record.state, diagnosis(doc, None)),
    }
}

/// The failure category attempt `a` of `doc` ended with (held, failed, or skipped after a
/// diagnosis).
pub(crate) fn of_attempt(doc: &RunDoc, a: &AttemptDoc) -> Option<Category> {
    if let Some(c) = a.category() {
        return Some(c);
    }
    match &a.end {
        Some(
            s @ RunState::Finished {
                outcome: Outcome::Skipped { .. },
            },
        ) => crate::state::outcome_category(s, diagnosis(doc, Some(a))),
        _ => None,
    }
}

/// Whether a run is skipped: its attempt's end, or its record when no attempt started.
pub(crate) fn is_skipped(doc: &RunDoc) -> bool {
    let skipped = |s: &RunState| {
        matches!(
            s,
            RunState::Finished {
                outcome: Outcome::Skipped { .. }
            }
        )
    };
    match doc.representative() {
        Some(a) => a.end.as_ref().is_some_and(skipped),
        None => skipped(&doc.record.state),
    }
}

/// The diagnosis a skip at attempt `a` followed: that attempt's, else the last earlier
/// attempt's (a held run retried, then skipped before the retry started), else the
/// record's, else the plan's prediction.
fn diagnosis<'a>(doc: &'a RunDoc, a: Option<&'a AttemptDoc>) -> Option<&'a crate::event::Finding> {
    let n = a.map_or(u32::MAX, |a| a.attempt);
    a.and_then(|a| a.findings.last())
        .or_else(|| {
            doc.attempts
                .iter()
                .rev()
                .filter(|e| e.attempt < n)
                .find_map(|e| e.findings.last())
        })
        .or(doc.record.finding.as_ref())
        .or(doc.predicted.as_ref())
}

/// When attempt `a` stopped working: the moment it left its last stage (held, failed,
/// interrupted). A held run's wait for the operator is no run time, so a skip or a
/// failure decided later does not stretch it. Docs without a history (read from the run
/// summaries) end when their record says.
pub(crate) fn worked_until(doc: &RunDoc, a: &AttemptDoc) -> Option<u64> {
    doc.history
        .iter()
        .find(|h| {
            let ending = if h.to == RunState::Queued {
                h.attempt.saturating_sub(1)
            } else {
                h.attempt
            };
            ending == a.attempt && h.from.is_active() && !h.to.is_active()
        })
        .map(|h| h.at_ms)
        .or(a.finished_ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::category::Action;
    use crate::event::Finding;
    use crate::model::Variant;
    use crate::record::StateChange;

    fn finding(c: Category) -> Finding {
        Finding {
            category: c,
            evidence: "manifest unknown".into(),
            action: Action::Operator,
            recipe: None,
            reason: "r".into(),
            predicted: false,
            confidence: None,
            telling: vec![],
            kind: None,
        }
    }

    fn skipped() -> RunState {
        RunState::Finished {
            outcome: Outcome::skipped(
                crate::model::SkipBy::Operator,
                "skipped by the operator: all image_not_found",
            ),
        }
    }

    /// Held on image_not_found, then skipped with `S`: the attempt keeps its cause.
    #[test]
    fn a_skip_after_a_diagnosis_keeps_the_category() {
        let mut d = crate::report::tests::doc("c1", Variant::Human, "x", 1.0);
        d.attempts[0].metrics.clear();
        d.attempts[0].end = Some(skipped());
        d.attempts[0].findings = vec![finding(Category::ImageNotFound)];
        assert_eq!(category(&d), Some(Category::ImageNotFound));
        // Without a diagnosis, a skip has no cause.
        d.attempts[0].findings.clear();
        assert_eq!(category(&d), None);
        // Retried, then skipped before the retry started: the earlier attempt's diagnosis.
        let mut first = d.attempts[0].clone();
        first.end = Some(RunState::Held {
            category: Category::ImageNotFound,
        });
        first.findings = vec![finding(Category::ImageNotFound)];
        d.attempts[0].attempt = 2;
        d.attempts[0].started_ms = None;
        d.attempts.insert(0, first);
        assert_eq!(category(&d), Some(Category::ImageNotFound));
    }

    /// Skipped before any attempt, for its predicted finding: the prediction is its cause.
    #[test]
    fn a_run_skipped_for_its_prediction_keeps_it() {
        let mut d = crate::report::tests::doc("c1", Variant::Human, "x", 1.0);
        d.attempts.clear();
        d.record.state = skipped();
        d.predicted = Some(finding(Category::VersionPortBug));
        assert_eq!(category(&d), Some(Category::VersionPortBug));
        // Re-queued after a failure: no failure until the next attempt fails.
        d.record.state = RunState::Queued;
        d.record.attempt = 2;
        assert_eq!(category(&d), None);
    }

    /// One run's events as the engine emits them, folded every way a doc is read: the
    /// event log's history (`show`, the digest), the run summary (`results`), the live
    /// record (the TUI). Each must name the same cause for the skipped run.
    fn each_doc(events: &[crate::event::Event]) -> Vec<RunDoc> {
        use crate::event::{Envelope, Event};
        use crate::record::StoredEvent;
        use crate::record::{RunInfo, RunSummary};
        let info: RunInfo = crate::report::tests::doc("c1", Variant::Human, "x", 1.0).info;
        let mut state = crate::state::SweepState::new(1);
        let mut summary = RunSummary::new(info.clone());
        let mut stored = Vec::new();
        for (i, event) in events.iter().enumerate() {
            let env = Envelope {
                seq: i as u64,
                // Wall-clock times: an end measured from an unset start would be huge.
                at_ms: 1_795_636_000_000 + 1_000 * i as u64,
                event: event.clone(),
            };
            state.apply(&env).unwrap();
            if let Event::Diagnosed { finding, .. } = event {
                if finding.predicted {
                    summary.predicted = Some(finding.clone());
                }
            }
            stored.push(StoredEvent {
                life: 1,
                key: Some(info.key.clone()),
                env,
                logs: vec![],
            });
        }
        summary.record = state.run(crate::model::RunId(0)).clone();
        let mut log = RunDoc::of_summary(&summary);
        for (i, e) in stored.iter().enumerate() {
            log.apply(i as u64, e, &summary);
        }
        let mut from_summary = RunDoc::of_owned_record(info.clone(), summary.record.clone());
        from_summary.predicted = summary.predicted.clone();
        let live = RunDoc::of_record(info, &summary.record);
        vec![log, from_summary, live]
    }

    fn step(attempt: u32, from: RunState, to: RunState) -> crate::event::Event {
        crate::event::Event::State {
            run: crate::model::RunId(0),
            attempt,
            from,
            to,
            detail: None,
            gpus: vec![3],
            interrupted: false,
        }
    }

    fn diagnosed(attempt: u32, predicted: bool) -> crate::event::Event {
        let mut f = finding(Category::ImageNotFound);
        f.predicted = predicted;
        crate::event::Event::Diagnosed {
            run: crate::model::RunId(0),
            attempt,
            finding: f,
        }
    }

    #[test]
    fn every_read_of_a_skipped_run_names_its_cause() {
        use crate::model::Stage;
        let held = || RunState::Held {
            category: Category::ImageNotFound,
        };
        let start = || RunState::Active {
            stage: Stage::PreparingImage,
        };
        let ran = vec![
            step(1, RunState::Queued, start()),
            diagnosed(1, false),
            step(1, start(), held()),
        ];
        // Held, then `S`.
        let mut held_then_skipped = ran.clone();
        held_then_skipped.push(step(1, held(), skipped()));
        // Held, retried, then `S` before the retry started.
        let mut retried_then_skipped = ran;
        retried_then_skipped.push(step(2, held(), RunState::Queued));
        retried_then_skipped.push(step(2, RunState::Queued, skipped()));
        // Predicted from the plan, skipped with `S` before any attempt.
        let predicted = vec![diagnosed(0, true), step(0, RunState::Queued, skipped())];
        let filter = crate::report::parse_filter("category=image_not_found").unwrap();
        for events in [held_then_skipped, retried_then_skipped, predicted] {
            for d in each_doc(&events) {
                assert_eq!(category(&d), Some(Category::ImageNotFound), "{d:#?}");
                assert!(is_skipped(&d), "{d:#?}");
                assert!(crate::report::matches(&d, &filter), "{d:#?}");
                let shown = crate::report::show::render(&[&d]);
                assert!(!shown.contains("+1795"), "{shown}");
            }
        }
    }

    /// Held at 2 s, skipped at 1 h: the attempt worked until 2 s.
    #[test]
    fn work_ends_when_the_run_is_held() {
        let mut d = crate::report::tests::doc("c1", Variant::Human, "x", 1.0);
        d.attempts[0].finished_ms = Some(3_600_000);
        let held = RunState::Held {
            category: Category::CudaOom,
        };
        let active = RunState::Active {
            stage: crate::model::Stage::LoadingServer,
        };
        for (at, from, to) in [(2_000, active, held.clone()), (3_600_000, held, skipped())] {
            d.history.push(StateChange {
                at_ms: at,
                attempt: 1,
                from,
                to,
                detail: None,
            });
        }
        assert_eq!(worked_until(&d, &d.attempts[0]), Some(2_000));
        d.history.clear();
        assert_eq!(worked_until(&d, &d.attempts[0]), Some(3_600_000));
    }
}
