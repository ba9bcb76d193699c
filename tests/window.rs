//! The night's window with the real binary on the sim: `--until` short of what the plan
//! needs. Every commit that started has its whole result, what did not fit is named and
//! stays queued, and the sweep ends by itself within the window.

mod support;
use nightshift::model::RunState;
use std::time::{Duration, Instant};
use support::daemon::*;

#[test]
fn a_short_window_finishes_what_it_starts_and_names_what_did_not_fit() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = plan(tmp.path(), 12);
    let store = tmp.path().join("store");
    let t0 = Instant::now();
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
    let took = t0.elapsed();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("nightshift: window: closes in 30m"), "{text}");
    // Within the window, give or take 5 minutes of sim time (3 s).
    assert!(
        took < Duration::from_secs(18 + 3 + 2),
        "took {took:?}\n{text}"
    );
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
