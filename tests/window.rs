//! The night's window with the real binary on the sim: `--until` short of what the plan
//! needs. Every commit that started has its whole result, what did not fit is named and
//! stays queued, and the sweep ends by itself within the window.

mod support;
use nightshift::engine::{Engine, EngineOptions};
use nightshift::model::RunState;
use nightshift::runtime::sim::{SimRuntime, Speed};
use nightshift::window::Window;
use std::sync::Arc;
use std::time::Duration;
use support::daemon::*;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

#[test]
fn a_short_window_finishes_what_it_starts_and_names_what_did_not_fit() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = plan(tmp.path(), 12);
    let store = tmp.path().join("store");
    // 30 minutes of sim time at 100×: 18 s of wall time, well short of 12 commits.
    let out = headless_run(
        &plan,
        &[
            "--gpus",
            "2",
            "--speed",
            "100",
            "--until",
            "+30m",
            "--store",
            store.to_str().unwrap(),
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("nightshift: window: closes in 30m"), "{text}");
    // When the night ends on the window's clock is checked on the engine's own clock
    // (`the_window_ends_the_night_on_the_engines_clock`), not on this box's wall.
    let line = text
        .lines()
        .find(|l| l.contains("the window closed:"))
        .unwrap_or_else(|| panic!("no window line: {text}"));
    let s = nightshift::store::Store::open(&store, false).unwrap();
    let mut by_commit: std::collections::BTreeMap<String, Vec<&RunState>> = Default::default();
    for r in s.runs().values() {
        let commit = r.key.split('/').next().unwrap().to_string();
        by_commit.entry(commit).or_default().push(&r.record.state);
    }
    let (mut whole, mut untouched) = (0, 0);
    for (commit, states) in &by_commit {
        let done = states
            .iter()
            .filter(|s| matches!(s, RunState::Finished { .. }))
            .count();
        if done == 0 {
            assert!(states.iter().all(|s| **s == RunState::Queued), "{commit}");
            assert!(line.contains(&commit[..8]), "{commit} not named: {line}");
            untouched += 1;
        } else {
            assert_eq!(done, states.len(), "{commit} started but is not whole");
            whole += 1;
        }
    }
    assert!(
        whole >= 2 && untouched >= 2,
        "{whole} whole, {untouched} not started"
    );
}

#[test]
fn a_bad_window_is_refused_at_the_flag() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = plan(tmp.path(), 1);
    for bad in ["25:00", "+6x", "tomorrow"] {
        let out = headless_run(&plan, &["--until", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("--until"),
            "{bad}"
        );
    }
    let out = headless_run(
        &plan,
        &[
            "--until",
            "+1h",
            "--speed",
            "max",
            "--store",
            tmp.path().join("s").to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs a clock"));
}

/// Adaptive repeats spend the window's spare time and no more: a step is released only
/// while the window still has time for it (tonight's run lengths), so the night ends with
/// every planned run done, some repeats added, none left queued for a window that closed,
/// and the rest in reserve.
#[test]
fn added_repeats_stop_where_the_window_has_no_time_left() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = plan(tmp.path(), 2);
    let text = std::fs::read_to_string(&plan)
        .unwrap()
        .replace("[defaults]\n", "[defaults]\nmax_repeats = 40\n");
    std::fs::write(&plan, text).unwrap();
    let store = tmp.path().join("store");
    let out = headless_run(
        &plan,
        &[
            "--gpus",
            "2",
            "--speed",
            "100",
            "--until",
            "+30m",
            "--store",
            store.to_str().unwrap(),
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let s = nightshift::store::Store::open(&store, false).unwrap();
    let (mut added, mut reserve) = (0, 0);
    for r in s.runs().values() {
        match &r.record.state {
            RunState::Finished {
                outcome: nightshift::model::Outcome::Success,
            } => added += usize::from(r.info.extra),
            RunState::Finished {
                outcome: nightshift::model::Outcome::Skipped { .. },
            } if r.record.state.in_reserve() => reserve += 1,
            RunState::Finished { .. } => {}
            other => panic!("{} ended {other:?}\n{text}", r.key),
        }
        if !r.info.extra {
            assert_eq!(r.record.attempt, 1, "{} planned and not run", r.key);
        }
    }
    assert!(
        added > 0 && reserve > 0,
        "added {added}, in reserve {reserve}\n{text}"
    );
}

/// The window's rule on the engine's own clock: tokio's, paused, so a night of sim time at
/// its real pace (a run takes minutes) passes in no wall time and nothing here reads the
/// wall. Every commit that started ends whole, the night ends within the window (give or
/// take one run's spread: a run starts only if tonight's median says it finishes), and
/// what did not start is named.
#[tokio::test(start_paused = true)]
async fn the_window_ends_the_night_on_the_engines_clock() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = Arc::new(nightshift::plan::Plan::load(&plan(tmp.path(), 12)).unwrap());
    let sim = Arc::new(SimRuntime::new(Speed::Factor(1.0)));
    let typical = nightshift::runtime::Runtime::typical_run(&*sim);
    let (engine, _cmds) = Engine::new(
        plan.clone(),
        sim,
        EngineOptions {
            gpus: 2,
            seed: 3,
            wait_for_operator: false,
        },
    );
    let t0 = Instant::now();
    let length = Duration::from_secs(30 * 60);
    let engine = engine.with_window(Some(Window {
        closes: (t0 + length).into_std(),
        scale: 1.0,
        start_late: false,
        typical,
    }));
    let (summary, st) = engine.run(CancellationToken::new()).await.unwrap();
    let night = t0.elapsed();
    assert!(
        night > length / 2 && night <= length + typical / 5,
        "the night took {night:?} of a {length:?} window"
    );
    let named = summary.window_closed.expect("the window closed");
    let mut by_commit: std::collections::BTreeMap<usize, Vec<&RunState>> = Default::default();
    for (i, r) in st.runs.iter().enumerate() {
        by_commit
            .entry(plan.runs[i].commit)
            .or_default()
            .push(&r.state);
    }
    let (mut whole, mut untouched) = (0, 0);
    for (c, states) in &by_commit {
        let short = &plan.commits[*c].commit[..8];
        if states.iter().all(|s| **s == RunState::Queued) {
            assert!(
                named.iter().any(|n| n == short),
                "{short} not named: {named:?}"
            );
            untouched += 1;
        } else {
            assert!(
                states
                    .iter()
                    .all(|s| matches!(s, RunState::Finished { .. })),
                "{short} started but is not whole: {states:?}"
            );
            whole += 1;
        }
    }
    assert!(
        whole >= 3 && untouched >= 3,
        "{whole} whole, {untouched} not started"
    );
}
