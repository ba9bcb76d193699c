//! Resume: compare the plan with the one the store last ran, and rebuild the engine's state
//! from the stored runs. The diff and the reconstruction are pure; [`prepare`] applies them
//! to a store.

use super::{Store, StoreObserver};
use crate::category::Category;
use crate::event::{now_ms, Command, Envelope, Event};
use crate::model::{Outcome, RunId, RunState};
use crate::observer::Observer;
use crate::plan::Plan;
use crate::record::{PlanSnapshot, RunInfo, RunSummary};
use crate::state::{RunRecord, SweepState};
use std::collections::{BTreeMap, BTreeSet};

/// How the plan changed since the store last ran it (by run key).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlanDiff {
    pub hash_changed: bool,
    /// Runs new to the store (new commits, variants or agents): they are queued.
    pub added: Vec<String>,
    /// Runs the store has that the plan no longer lists: kept and reported.
    pub removed: Vec<String>,
    /// Runs whose command, model, GPU, image or patch changed since they last ran.
    pub changed: Vec<(String, Vec<&'static str>)>,
}

impl PlanDiff {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

pub fn diff(docs: &BTreeMap<String, RunSummary>, new: &[RunInfo]) -> PlanDiff {
    let mut d = PlanDiff::default();
    let new_keys: BTreeSet<&str> = new.iter().map(|r| r.key.as_str()).collect();
    for r in new {
        match docs.get(&r.key) {
            None => d.added.push(r.key.clone()),
            Some(doc) => {
                let c = r.changes_from(doc.ran_as());
                if !c.is_empty() {
                    d.changed.push((r.key.clone(), c));
                }
            }
        }
    }
    for (k, doc) in docs {
        if !new_keys.contains(k.as_str()) && !doc.removed {
            d.removed.push(k.clone());
        }
    }
    d
}

/// What to re-queue on resume beyond runs caught mid-flight.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResumeOptions {
    /// `--retry-failed [CATEGORY]`: `Some(None)` re-queues every failed run.
    pub retry_failed: Option<Option<Category>>,
    /// `--rerun-changed`: re-run finished runs whose command (model, GPU, image) changed.
    pub rerun_changed: bool,
}

/// The stored record of every run of the new plan (fresh for new runs), and which runs to
/// re-queue with the reason.
pub(crate) fn reconstruct(
    new: &[RunInfo],
    docs: &BTreeMap<String, RunSummary>,
    diff: &PlanDiff,
    opts: &ResumeOptions,
) -> (Vec<RunRecord>, Vec<(usize, String)>) {
    let changed: BTreeMap<&str, &Vec<&'static str>> =
        diff.changed.iter().map(|(k, c)| (k.as_str(), c)).collect();
    let mut records = Vec::with_capacity(new.len());
    let mut requeue = Vec::new();
    for (i, r) in new.iter().enumerate() {
        let rec = docs
            .get(&r.key)
            .map(|d| d.record.clone())
            .unwrap_or_default();
        let failed = match &rec.state {
            RunState::Finished {
                outcome: Outcome::Failed { category },
            }
            | RunState::Held { category } => Some(*category),
            // Not run because another run of its model was refused (see the engine's
            // `end_model_runs`): it comes back with that category.
            RunState::Finished { outcome }
                if outcome.skipped_by() == Some(crate::model::SkipBy::ModelRefused) =>
            {
                Some(Category::GatedModelAuth)
            }
            _ => None,
        };
        if let (Some(want), Some(cat)) = (&opts.retry_failed, failed) {
            if want.is_none_or(|w| w == cat) {
                requeue.push((i, format!("--retry-failed: was failed({cat})")));
                records.push(rec);
                continue;
            }
        }
        if let Some(what) = changed.get(r.key.as_str()) {
            if opts.rerun_changed
                && matches!(rec.state, RunState::Finished { .. } | RunState::Held { .. })
            {
                requeue.push((i, format!("--rerun-changed: {} changed", what.join(", "))));
            }
        }
        records.push(rec);
    }
    (records, requeue)
}

/// What [`prepare`] found and did, for the operator.
#[derive(Debug, Clone, Default)]
pub struct ResumeReport {
    pub resumed: bool,
    pub diff: PlanDiff,
    pub kept_finished: usize,
    pub interrupted: usize,
    pub requeued: Vec<(String, String)>,
    /// Changed runs kept as they were (no --rerun-changed).
    pub changed_kept: usize,
    /// The pause the store's last life ended in, for the new life to carry or lift
    /// ([`super::pause::carry`]).
    pub ended_pause: Option<super::pause::StoredPause>,
}

impl ResumeReport {
    pub fn lines(&self) -> Vec<String> {
        let mut v = Vec::new();
        if !self.resumed {
            return v;
        }
        v.push(format!(
            "resuming: {} finished runs kept, {} caught mid-flight re-queued as new attempts",
            self.kept_finished, self.interrupted
        ));
        if self.diff.hash_changed {
            v.push("the plan changed since the last run".into());
        }
        if !self.diff.added.is_empty() {
            v.push(format!("  {} new runs queued", self.diff.added.len()));
        }
        for k in &self.diff.removed {
            v.push(format!("  removed from the plan (kept in the store): {k}"));
        }
        if self.changed_kept > 0 {
            v.push(format!(
                "  {} finished runs changed command/model/GPU since they ran; kept (re-run them with --rerun-changed)",
                self.changed_kept
            ));
        }
        for (k, why) in &self.requeued {
            v.push(format!("  re-queued {k}: {why}"));
        }
        v
    }
}

/// Each commit's perf command as the plan gives it.
pub(crate) fn commands_of(plan: &Plan) -> std::collections::BTreeMap<String, String> {
    plan.commits
        .iter()
        .map(|c| (c.commit.clone(), c.perf_command.clone().unwrap_or_default()))
        .collect()
}

/// Open the sweep in `store` for `plan`: diff the plan, mark removed runs, rebuild the
/// state, persist re-queues (durably, as state transitions), and save the plan snapshot.
/// Returns the observer to hand to the engine and the state for `Engine::with_state`.
pub fn prepare(
    mut store: Store,
    plan: &Plan,
    opts: &ResumeOptions,
) -> anyhow::Result<(StoreObserver, SweepState, ResumeReport)> {
    let snap = PlanSnapshot::of(plan);
    let resumed = store.plan().is_some();
    let old_hash = store.plan().map(|p| p.hash.clone());
    let ended_pause = store.ended_pause();
    let mut d = diff(store.runs(), &snap.runs);
    d.hash_changed = old_hash.is_some_and(|h| h != plan.hash);
    let (records, requeue) = reconstruct(&snap.runs, store.runs(), &d, opts);
    store.begin_life()?;
    for k in &d.removed {
        if let Some(mut run) = store.run(k).cloned() {
            run.removed = true;
            store.put_run(run)?;
        }
    }
    let from = store.next_seq();
    for (i, info) in snap.runs.iter().enumerate() {
        let order = i as u32;
        match store.run(&info.key) {
            Some(run) if run.info == *info && !run.removed && run.order == order => {}
            Some(run) => {
                let mut run = run.clone();
                run.replan(info.clone(), from);
                run.removed = false;
                run.order = order;
                store.put_run(run)?;
            }
            None => {
                let mut run = RunSummary::new(info.clone());
                run.order = order;
                store.put_run(run)?;
            }
        }
    }
    store.put_plan(snap.clone())?;
    store.flush()?;

    let mut report = ResumeReport {
        resumed,
        ended_pause,
        ..Default::default()
    };
    for r in &records {
        if r.state.is_terminal() {
            report.kept_finished += 1;
        } else if r.state.is_active() {
            report.interrupted += 1;
        }
    }
    let requeued: BTreeSet<usize> = requeue.iter().map(|(i, _)| *i).collect();
    report.changed_kept = d
        .changed
        .iter()
        .filter(|(k, _)| {
            let i = snap.runs.iter().position(|r| &r.key == k);
            i.is_some_and(|i| records[i].state.is_terminal() && !requeued.contains(&i))
        })
        .count();
    report.kept_finished -= requeue.len().min(report.kept_finished);
    report.diff = d;

    let keys: Vec<String> = snap.runs.iter().map(|r| r.key.clone()).collect();
    let mut state = SweepState::new(records.len());
    // The night began with its first run, in whichever life: its elapsed time counts from
    // there, not from when a re-queued run starts again.
    state.started_ms = records.iter().filter_map(|r| r.started_ms).min();
    state.runs = records;
    // A commit's decided invocation stands while the plan gives it the same command.
    let commands = commands_of(plan);
    state.invocations = store
        .invocations()
        .into_iter()
        .filter(|(c, (cmd, _))| commands.get(c) == Some(cmd))
        .map(|(c, (_, inv))| (c, inv))
        .collect();
    let mut obs = StoreObserver::new(store, keys, state).commands(commands);
    for (i, why) in requeue {
        let rec = obs.state().runs[i].clone();
        let run = RunId(i as u32);
        obs.on_event(&Envelope {
            seq: 0,
            at_ms: now_ms(),
            event: Event::Operator {
                command: Command::Retry { run },
                by: Some("resume".into()),
                outcome: Some("done".into()),
            },
        })?;
        obs.on_event(&Envelope {
            seq: 0,
            at_ms: now_ms(),
            event: Event::State {
                run,
                attempt: rec.attempt + 1,
                from: rec.state.clone(),
                to: RunState::Queued,
                detail: Some(why.clone()),
                gpus: vec![],
                interrupted: false,
            },
        })?;
        report.requeued.push((snap.runs[i].key.clone(), why));
    }
    let state = obs.state().clone();
    Ok((obs, state, report))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Variant;

    fn info(key: &str, cmd: &str) -> RunInfo {
        RunInfo {
            key: key.into(),
            commit: key.split('/').next().unwrap().into(),
            parent: None,
            title: String::new(),
            variant: Variant::Baseline,
            repeat: 0,
            warmup: false,
            extra: false,
            reference: false,
            model: Some("m".into()),
            gpu: "H100:1".into(),
            gpus: 1,
            command: Some(cmd.into()),
            kind: None,
            image: None,
            patch: None,
            skip_reason: None,
            fixed: None,
        }
    }

    fn doc(i: RunInfo, state: RunState, attempt: u32) -> RunSummary {
        let mut d = RunSummary::new(i);
        d.record.state = state;
        d.record.attempt = attempt;
        d
    }

    #[test]
    fn diff_finds_added_removed_and_changed() {
        let mut docs = BTreeMap::new();
        docs.insert(
            "a/baseline".into(),
            doc(info("a/baseline", "x"), RunState::Queued, 0),
        );
        docs.insert(
            "b/baseline".into(),
            doc(info("b/baseline", "x"), RunState::Queued, 0),
        );
        let new = vec![info("a/baseline", "y"), info("c/baseline", "x")];
        let d = diff(&docs, &new);
        assert_eq!(d.added, vec!["c/baseline".to_string()]);
        assert_eq!(d.removed, vec!["b/baseline".to_string()]);
        assert_eq!(d.changed, vec![("a/baseline".to_string(), vec!["command"])]);
    }

    #[test]
    fn finished_runs_are_kept_and_failures_requeued_only_when_asked() {
        let ok = RunState::Finished {
            outcome: Outcome::Success,
        };
        let oom = RunState::Finished {
            outcome: Outcome::Failed {
                category: Category::CudaOom,
            },
        };
        let mut docs = BTreeMap::new();
        docs.insert(
            "a/baseline".into(),
            doc(info("a/baseline", "x"), ok.clone(), 1),
        );
        docs.insert(
            "b/baseline".into(),
            doc(info("b/baseline", "x"), oom.clone(), 2),
        );
        let new = vec![info("a/baseline", "x"), info("b/baseline", "x")];
        let d = diff(&docs, &new);
        let (recs, rq) = reconstruct(&new, &docs, &d, &ResumeOptions::default());
        assert_eq!(recs[0].state, ok);
        assert_eq!(recs[1].state, oom);
        assert!(rq.is_empty());
        let opts = ResumeOptions {
            retry_failed: Some(Some(Category::NoMetrics)),
            ..Default::default()
        };
        assert!(reconstruct(&new, &docs, &d, &opts).1.is_empty());
        let opts = ResumeOptions {
            retry_failed: Some(None),
            ..Default::default()
        };
        assert_eq!(reconstruct(&new, &docs, &d, &opts).1[0].0, 1);
    }

    #[test]
    fn runs_not_tried_for_a_gated_model_come_back_with_retry_failed() {
        // As an older store has them: the kind read from the words (a new store carries
        // `SkipBy::ModelRefused` from the engine).
        let skipped = |reason: &str| RunState::Finished {
            outcome: Outcome::skipped(crate::model::SkipBy::Unknown, reason),
        };
        let mut docs = BTreeMap::new();
        let gated = format!("{}m is gated", crate::category::NOT_RUN_GATED);
        docs.insert(
            "a/baseline".into(),
            doc(info("a/baseline", "x"), skipped(&gated), 0),
        );
        docs.insert(
            "b/baseline".into(),
            doc(info("b/baseline", "x"), skipped("invalid: missing"), 0),
        );
        let new = vec![info("a/baseline", "x"), info("b/baseline", "x")];
        let d = diff(&docs, &new);
        let retry = |c: Option<Category>| ResumeOptions {
            retry_failed: Some(c),
            ..Default::default()
        };
        let rq = reconstruct(&new, &docs, &d, &retry(Some(Category::GatedModelAuth))).1;
        assert_eq!(rq.iter().map(|r| r.0).collect::<Vec<_>>(), vec![0]);
        assert!(
            reconstruct(&new, &docs, &d, &retry(Some(Category::CudaOom)))
                .1
                .is_empty()
        );
    }

    #[test]
    fn changed_runs_rerun_only_with_the_flag() {
        let ok = RunState::Finished {
            outcome: Outcome::Success,
        };
        let mut docs = BTreeMap::new();
        docs.insert("a/baseline".into(), doc(info("a/baseline", "x"), ok, 1));
        let new = vec![info("a/baseline", "y")];
        let d = diff(&docs, &new);
        assert!(reconstruct(&new, &docs, &d, &ResumeOptions::default())
            .1
            .is_empty());
        let opts = ResumeOptions {
            rerun_changed: true,
            ..Default::default()
        };
        assert_eq!(reconstruct(&new, &docs, &d, &opts).1.len(), 1);
    }

    /// A daemon dies with its first run in flight; the next life re-queues and restarts
    /// it. The night's elapsed time still counts from that first start.
    #[test]
    fn a_resumed_nights_elapsed_time_counts_from_its_first_life() {
        use crate::model::Stage;
        let tmp = tempfile::tempdir().unwrap();
        let plan = crate::plan::synthetic::synthetic_plan_of(4, &["serving"]);
        let dir = tmp.path().join("store");
        let t0 = 1_700_000_000_000u64;
        let env = |seq: u64, at_ms: u64, event: Event| Envelope { seq, at_ms, event };
        let start = |seq, at, attempt, from: RunState| {
            env(
                seq,
                at,
                Event::State {
                    run: RunId(0),
                    attempt,
                    from,
                    to: RunState::Active {
                        stage: Stage::PreparingImage,
                    },
                    detail: None,
                    gpus: vec![0],
                    interrupted: false,
                },
            )
        };
        let sweep_started = |seq, at| {
            env(
                seq,
                at,
                Event::SweepStarted {
                    name: "n".into(),
                    runs: 4,
                    gpus: 1,
                    runtime: "sim".into(),
                },
            )
        };
        {
            let s = Store::open(&dir, true).unwrap();
            let (mut obs, _, _) = prepare(s, &plan, &ResumeOptions::default()).unwrap();
            obs.on_event(&sweep_started(1, t0)).unwrap();
            obs.on_event(&start(2, t0 + 1_000, 1, RunState::Queued))
                .unwrap();
            obs.shared().lock().unwrap().flush().unwrap();
        }
        let s = Store::open(&dir, false).unwrap();
        let (_, mut state, rep) = prepare(s, &plan, &ResumeOptions::default()).unwrap();
        assert_eq!(rep.interrupted, 1);
        assert_eq!(state.started_ms, Some(t0 + 1_000));
        // The next life: its own start, and the interrupted run again.
        state.apply(&sweep_started(3, t0 + 60_000)).unwrap();
        let requeue = Event::State {
            run: RunId(0),
            attempt: 2,
            from: state.run(RunId(0)).state.clone(),
            to: RunState::Queued,
            detail: Some("interrupted".into()),
            gpus: vec![],
            interrupted: true,
        };
        state.apply(&env(4, t0 + 60_500, requeue)).unwrap();
        state
            .apply(&start(5, t0 + 61_000, 2, RunState::Queued))
            .unwrap();
        assert_eq!(state.elapsed_ms(t0 + 70_000, false), Some(69_000));
    }
}
