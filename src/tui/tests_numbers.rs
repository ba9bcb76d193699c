//! The screen at 3 a.m. (#25): what a skip leaves of a failure's cause, and numbers that
//! must not be wrong or stale — stage times without the wait for the operator, how a
//! stopped stage ended, elapsed on a finished sweep, a re-queued run's GPU, progress over
//! runnable runs, the ETA while paused, and banners only for the question still open.

use super::app::App;
use super::tests::{key, render, scene, Feed, T0};
use crate::category::{Action as PolicyAction, Category};
use crate::event::{Event, Finding};
use crate::model::{Outcome, RunId, RunState, Stage};

/// The first `n` runs the plan can run, past the ones [`scene`] uses.
fn runnable(app: &App, n: usize) -> Vec<u32> {
    app.night
        .plan
        .runs
        .iter()
        .filter(|s| s.skip_reason.is_none() && s.id.0 > 20)
        .take(n)
        .map(|s| s.id.0)
        .collect()
}

fn select(app: &mut App, run: u32) {
    app.ui.auto_select = false;
    app.ui.sel_commit = app.night.plan.runs[run as usize].commit;
    app.ui.sel_variant = app
        .night
        .variants
        .iter()
        .position(|v| *v == app.night.plan.runs[run as usize].variant)
        .unwrap();
}

/// Run `run` through its stages from `at` (7 s each) up to the server, diagnosed with
/// `category` and held 2 s into its server stage.
fn hold(app: &mut App, f: &mut Feed, at: u64, run: u32, category: Category) {
    f.stages(app, at, run, Stage::LoadingServer);
    f.send(
        app,
        at + 16_000,
        Event::Diagnosed {
            run: RunId(run),
            attempt: 1,
            finding: Finding {
                category,
                evidence: "manifest for anonymous/vllm-bench:x not found: manifest unknown".into(),
                action: PolicyAction::Operator,
                recipe: Some("some-fix".into()),
                reason: format!("{category}: needs a decision"),
                predicted: false,
                confidence: Some(0.9),
                telling: vec![],
                kind: None,
            },
        },
    );
    f.state(app, at + 16_000, run, RunState::Held { category });
}

fn skipped() -> RunState {
    RunState::Finished {
        outcome: Outcome::skipped(
            crate::model::SkipBy::Operator,
            "skipped by the operator: all image_not_found",
        ),
    }
}

/// `S` on held image_not_found runs: each is skipped, and `:filter category=` still finds
/// each by its cause, as the category column names it.
#[test]
fn runs_skipped_after_a_diagnosis_keep_their_category() {
    let mut app = scene();
    let mut f = Feed { seq: 1_000 };
    let runs = runnable(&app, 3);
    for r in &runs {
        hold(&mut app, &mut f, 150_000, *r, Category::ImageNotFound);
    }
    for r in &runs {
        f.state(&mut app, 3_600_000, *r, skipped());
    }
    app.run_command_line("filter category=image_not_found");
    let want: Vec<RunId> = runs.iter().map(|r| RunId(*r)).collect();
    assert_eq!(app.result_rows(), want);
    let s = render(&app, 160, 48);
    assert!(s.contains("⊘ skipped"), "{s}");
    assert!(s.contains("image_not_found"), "{s}");
    // The queue's cell names the cause too, as it does for a held or failed run.
    key(&mut app, '1');
    select(&mut app, runs[0]);
    let s = render(&app, 160, 48);
    assert!(s.contains("▸⊘ image_no"), "{s}");
}

/// Held 2 s into the server stage and skipped an hour later: the server stage took 2 s,
/// and it is marked as where the run stopped (✗), not done.
#[test]
fn a_stage_time_leaves_out_the_time_held() {
    let mut app = scene();
    let mut f = Feed { seq: 1_000 };
    let run = runnable(&app, 1)[0];
    hold(&mut app, &mut f, 150_000, run, Category::ImageNotFound);
    f.state(&mut app, 3_750_000, run, skipped());
    app.night.now_ms = T0 + 3_800_000;
    select(&mut app, run);
    let s = render(&app, 160, 48);
    assert!(
        s.contains("✓ container 7.0s → ✗ server 2.0s → · bench"),
        "{s}"
    );
}

/// A run cancelled while its server loaded: the server stage did not complete.
#[test]
fn a_cancelled_runs_stage_is_not_shown_done() {
    let mut app = scene();
    let mut f = Feed { seq: 1_000 };
    let run = runnable(&app, 1)[0];
    f.stages(&mut app, 150_000, run, Stage::LoadingServer);
    let to = RunState::Finished {
        outcome: Outcome::Cancelled,
    };
    f.state(&mut app, 170_000, run, to);
    select(&mut app, run);
    let s = render(&app, 160, 48);
    assert!(
        s.contains("✓ container 7.0s → ⊘ server 6.0s → · bench"),
        "{s}"
    );
    assert!(!s.contains("✓ server"), "{s}");
}

/// A sweep that finished an hour ago, opened again: elapsed is the night's (its first
/// start to its last run's end), not the time since it was opened, and it stays put.
#[test]
fn elapsed_on_a_finished_sweep_is_its_recorded_length() {
    let mut app = scene();
    let mut f = Feed { seq: 1_000 };
    f.send(
        &mut app,
        120_000,
        Event::SweepFinished { interrupted: false },
    );
    app.night.finished = true;
    app.night.now_ms = T0 + 3_600_000;
    let s = render(&app, 160, 48);
    // The scene's last run ended (its agent run held) at 60 s; it started at 0.
    assert!(s.contains("elapsed 1m00s"), "{s}");
    // Nothing more will run: no time left to estimate.
    assert!(s.contains("ETA —"), "{s}");
    app.night.now_ms = T0 + 7_200_000;
    assert!(render(&app, 160, 48).contains("elapsed 1m00s"));
    // The same state as the daemon's snapshot on attach (this client saw no end event).
    let mut fresh = scene();
    let mut st = app.night.state.clone();
    st.finished = true;
    fresh.night.finished = false;
    fresh.on_state(st);
    fresh.night.now_ms = T0 + 7_200_000;
    let s = render(&fresh, 160, 48);
    assert!(s.contains("FINISHED") && s.contains("elapsed 1m00s"), "{s}");
}

/// Held on GPU n, then retried: queued again it holds no GPU, and the panel names none.
#[test]
fn a_requeued_run_shows_no_old_gpu() {
    let mut app = scene();
    let mut f = Feed { seq: 1_000 };
    let run = runnable(&app, 1)[0];
    hold(&mut app, &mut f, 150_000, run, Category::CudaOom);
    assert!(!app.night.state.run(RunId(run)).gpus.is_empty());
    f.state(&mut app, 200_000, run, RunState::Queued);
    select(&mut app, run);
    assert!(app.night.state.run(RunId(run)).gpus.is_empty());
    let s = render(&app, 160, 48);
    let line = s
        .lines()
        .find(|l| l.contains("· queued"))
        .expect("the run panel's state line");
    assert!(!line.contains("GPU"), "{line}");
}

/// The plan's unrunnable runs end in the first seconds: the bar does not count them as
/// done, and the header says how many there are.
#[test]
fn progress_counts_runnable_runs_only() {
    let mut app = scene();
    let mut f = Feed { seq: 1_000 };
    let unrunnable: Vec<u32> = app
        .night
        .plan
        .runs
        .iter()
        .filter(|s| s.skip_reason.is_some())
        .map(|s| s.id.0)
        .collect();
    assert!(unrunnable.len() >= 20, "{}", unrunnable.len());
    for r in &unrunnable {
        let to = RunState::Finished {
            outcome: Outcome::skipped(crate::model::SkipBy::Plan, "no image for baseline"),
        };
        f.state(&mut app, 1_600, *r, to);
    }
    let total = app.night.plan.runs.len() - unrunnable.len();
    let s = render(&app, 160, 48);
    assert!(s.contains(&format!(" 4/{total} done ")), "{s}");
    assert!(s.contains("   1%"), "{s}");
    assert!(
        // The store's count (as status and the digest say it), the unrunnable said apart.
        s.contains(&format!(
            "⊘ {} skipped ({} not runnable)",
            unrunnable.len() + 1,
            unrunnable.len()
        )),
        "{s}"
    );
}

/// Paused, nothing starts: the ETA says paused instead of standing still.
#[test]
fn the_eta_says_paused_while_paused() {
    let mut app = scene();
    let mut f = Feed { seq: 1_000 };
    assert!(!render(&app, 160, 48).contains("ETA paused"));
    f.send(
        &mut app,
        100_000,
        Event::Paused {
            reason: "paused by the operator".into(),
            by: crate::model::PauseBy::Operator,
        },
    );
    let s = render(&app, 160, 48);
    assert!(s.contains("ETA paused"), "{s}");
}

/// The "press f" banner is for the question still open: gone once the run is retried
/// with the fix (queued again) or skipped, in the run panel and over the log pane.
#[test]
fn the_diagnosis_banner_leaves_once_the_run_is_fixed_or_skipped() {
    let banner = "press f to apply fix";
    let mut app = scene();
    let mut f = Feed { seq: 1_000 };
    // The scene's held run (#2) asks.
    select(&mut app, 2);
    assert!(render(&app, 160, 48).contains(banner));
    // Fixed: re-queued with the fix, before its next attempt starts.
    let from = app.night.state.run(RunId(2)).state.clone();
    f.send(
        &mut app,
        100_000,
        Event::State {
            run: RunId(2),
            attempt: 2,
            from,
            to: RunState::Queued,
            detail: Some("operator: retry with fix aimv2-exist-ok".into()),
            gpus: vec![],
            interrupted: false,
        },
    );
    let s = render(&app, 160, 48);
    assert!(!s.contains(banner), "{s}");
    assert!(s.contains("operator: retry with fix aimv2-exist-ok"), "{s}");
    key(&mut app, '2');
    assert!(!render(&app, 160, 48).contains(banner));
    key(&mut app, '1');
    // Skipped after it: no question left either.
    let run = runnable(&app, 1)[0];
    hold(&mut app, &mut f, 150_000, run, Category::ImageNotFound);
    select(&mut app, run);
    assert!(render(&app, 160, 48).contains(banner));
    f.state(&mut app, 3_600_000, run, skipped());
    let s = render(&app, 160, 48);
    assert!(!s.contains(banner), "{s}");
    key(&mut app, '2');
    assert!(!render(&app, 160, 48).contains(banner));
}
