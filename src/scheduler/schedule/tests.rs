//! The schedule's rules as tables, on an invented clock: nothing here sleeps or reads the
//! wall clock, so each rule is checked at the instant it changes its answer.

use super::*;
use crate::model::{Outcome, Stage};
use std::path::Path;

/// One commit per `(gpu_config, model)`, variants baseline and human, each with images.
fn plan(commits: &[(&str, &str)]) -> Arc<Plan> {
    let mut t = String::from(
        "schema_version = 1\nname = \"t\"\n[defaults]\nvariants = [\"baseline\", \"human\"]\n",
    );
    for (i, (gpus, model)) in commits.iter().enumerate() {
        t.push_str(&format!(
            "[[commits]]\ncommit = \"{:040x}\"\nparent = \"{:040x}\"\nmodel = \"{model}\"\ngpu_config = \"{gpus}\"\nperf_command = '''python benchmarks/benchmark_serving.py --model {model}'''\nimages = {{ human = \"img/h{i}\", baseline = \"img/b{i}\" }}\n",
            i + 0xabc0,
            i + 0xdef0
        ));
    }
    Arc::new(Plan::from_str_at("t.toml", t, Path::new("."), Path::new("t.toml")).unwrap())
}

fn fresh(plan: &Arc<Plan>, gpus: u32) -> Schedule {
    let mut s = Schedule::new(plan.clone(), gpus);
    s.rebuild(&SweepState::for_plan(plan));
    s
}

fn state(run: RunId, from: RunState, to: RunState, gpus: Vec<u32>) -> Event {
    Event::State {
        run,
        attempt: 1,
        from,
        to,
        detail: None,
        gpus,
        interrupted: false,
    }
}

fn active() -> RunState {
    RunState::Active {
        stage: Stage::PreparingImage,
    }
}

/// Everything the schedule names at `now`, started as the engine starts them.
fn starts(s: &mut Schedule, now: Instant) -> Vec<(u32, Vec<u32>)> {
    let mut out = Vec::new();
    while let Some((id, gpus)) = s.next(now) {
        s.apply(&state(id, RunState::Queued, active(), gpus.clone()));
        out.push((id.0, gpus));
    }
    out
}

fn end(s: &mut Schedule, run: u32) {
    let done = RunState::Finished {
        outcome: Outcome::Success,
    };
    s.apply(&state(RunId(run), active(), done, vec![]));
    s.ended(RunId(run));
}

fn ids(v: &[(u32, Vec<u32>)]) -> Vec<u32> {
    v.iter().map(|(i, _)| *i).collect()
}

const MIN: Duration = Duration::from_secs(60);

#[test]
fn a_commit_runs_its_variants_back_to_back_on_the_same_gpus() {
    let p = plan(&[("H100:1", "m/a"), ("H100:1", "m/b")]);
    let mut s = fresh(&p, 1);
    let t0 = Instant::now();
    // Baseline (order 0) of the first commit first; then its human, on the GPU it used.
    assert_eq!(starts(&mut s, t0), vec![(0, vec![0])]);
    end(&mut s, 0);
    assert_eq!(starts(&mut s, t0), vec![(1, vec![0])]);
    end(&mut s, 1);
    assert_eq!(ids(&starts(&mut s, t0)), vec![2]);
    // Nothing changed since the last look: no work, no answer.
    assert_eq!(s.next(t0), None);
}

#[test]
fn a_backoff_holds_a_run_until_its_instant_and_the_operator_can_end_it() {
    let p = plan(&[("H100:1", "m/a")]);
    let mut s = fresh(&p, 1);
    let t0 = Instant::now();
    let until = t0 + 5 * MIN;
    s.backoff(RunId(0), until);
    // The human waits behind nothing: only the baseline is backed off.
    assert_eq!(ids(&starts(&mut s, t0)), vec![1]);
    end(&mut s, 1);
    assert_eq!(s.wake(t0), Some(until));
    for (at, want) in [(until - Duration::from_millis(1), vec![]), (until, vec![0])] {
        s.tick(at);
        assert_eq!(ids(&starts(&mut s, at)), want, "at {:?}", at - t0);
    }
    // The operator's retry ends a backoff at once.
    let mut s = fresh(&p, 1);
    s.backoff(RunId(0), until);
    s.backoff(RunId(1), until);
    assert!(starts(&mut s, t0).is_empty());
    assert!(s.clear_backoff(RunId(1)));
    assert!(!s.clear_backoff(RunId(1)));
    assert_eq!(ids(&starts(&mut s, t0)), vec![1]);
}

#[test]
fn a_waiting_tp8_run_lets_only_runs_that_end_in_its_shadow_pass() {
    // Commit 0 (1 GPU) runs; commit 1 needs 8 and waits; commit 2's 1-GPU runs may pass
    // it only if they end before commit 0's run frees the 8th GPU.
    let p = plan(&[("H100:1", "m/a"), ("H100:8", "m/big"), ("H100:1", "m/c")]);
    let t0 = Instant::now();
    for (learned_c, passes) in [(5 * MIN, true), (30 * MIN, false)] {
        let mut s = fresh(&p, 8);
        s.learned(Some("m/a"), 10 * MIN);
        s.learned(Some("m/c"), learned_c);
        s.set_typical(10 * MIN);
        let first = ids(&starts(&mut s, t0));
        // Commit 0's baseline and human start side by side (2 GPUs); the TP-8 waits.
        assert_eq!(first[..2], [0, 1], "{first:?}");
        let passed = first.iter().any(|i| *i >= 4);
        assert_eq!(passed, passes, "commit 2 expected {learned_c:?}: {first:?}");
        assert!(!first.contains(&2) && !first.contains(&3));
    }
}

#[test]
fn the_window_starts_a_commit_only_if_its_variants_can_finish() {
    let p = plan(&[("H100:1", "m/a")]);
    let t0 = Instant::now();
    let window = |closes| Window {
        closes,
        scale: 1.0,
        start_late: false,
        typical: 10 * MIN,
    };
    // (minutes left, GPUs): one GPU runs the two variants one after the other (20 min),
    // two GPUs side by side (10 min).
    for (left, gpus, want) in [
        (19, 1, vec![]),
        (20, 1, vec![0]),
        (9, 2, vec![]),
        (10, 2, vec![0, 1]),
    ] {
        let mut s = fresh(&p, gpus);
        s.set_window(Some(window(t0 + left * MIN)));
        assert_eq!(ids(&starts(&mut s, t0)), want, "{left} min on {gpus} GPUs");
    }
    // Once a variant started, the next may start while it alone can finish.
    let mut s = fresh(&p, 1);
    s.set_window(Some(window(t0 + 20 * MIN)));
    assert_eq!(ids(&starts(&mut s, t0)), vec![0]);
    end(&mut s, 0);
    let late = t0 + 11 * MIN;
    assert!(
        starts(&mut s, late).is_empty(),
        "9 min left for a 10 min run"
    );
    let mut s = fresh(&p, 1);
    s.set_window(Some(window(t0 + 20 * MIN)));
    starts(&mut s, t0);
    end(&mut s, 0);
    assert_eq!(ids(&starts(&mut s, t0 + 10 * MIN)), vec![1]);
    assert!(s.window_closed(t0 + 20 * MIN) && !s.window_closed(t0 + 19 * MIN));
}

#[test]
fn a_run_waits_for_its_image_when_images_are_fetched_ahead() {
    let p = plan(&[("H100:1", "m/a")]);
    let mut s = fresh(&p, 2);
    s.gate_images();
    let t0 = Instant::now();
    assert!(starts(&mut s, t0).is_empty());
    let image = |image: &str, status| Event::Image {
        image: image.into(),
        status,
        detail: String::new(),
    };
    s.apply(&image("img/h0", ImageStatus::Fetching));
    assert!(starts(&mut s, t0).is_empty());
    s.apply(&image("img/h0", ImageStatus::Ready));
    assert_eq!(ids(&starts(&mut s, t0)), vec![1]);
    // A failed fetch lets the run start: its attempt pulls and the failure is diagnosed.
    s.apply(&image("img/b0", ImageStatus::Failed));
    assert_eq!(ids(&starts(&mut s, t0)), vec![0]);
}

#[test]
fn pauses_stop_starts_and_a_resume_lifts_them() {
    let p = plan(&[("H100:1", "m/a"), ("H100:1", "m/b")]);
    let t0 = Instant::now();
    let mut s = fresh(&p, 4);
    s.apply(&Event::Paused {
        reason: "disk".into(),
        by: crate::model::PauseBy::Disk,
    });
    assert!(starts(&mut s, t0).is_empty());
    s.apply(&Event::ModelPaused {
        model: "m/a".into(),
        reason: "breaker".into(),
    });
    s.apply(&Event::Resumed);
    assert_eq!(ids(&starts(&mut s, t0)), vec![0, 1, 2, 3]);
    // The breaker stops one model's runs only.
    let mut s = fresh(&p, 4);
    s.apply(&Event::ModelPaused {
        model: "m/a".into(),
        reason: "breaker".into(),
    });
    assert_eq!(ids(&starts(&mut s, t0)), vec![2, 3]);
    assert!(s.model_paused(0) && !s.model_paused(2));
}

#[test]
fn a_run_needing_more_gpus_than_the_box_has_never_starts_nor_holds_the_queue() {
    let p = plan(&[("H100:8", "m/big"), ("H100:1", "m/a")]);
    let mut s = fresh(&p, 4);
    assert_eq!(ids(&starts(&mut s, Instant::now())), vec![2, 3]);
}
