//! Adaptive repeats in a night (#35): the same sim night with `max_repeats` ends with fewer
//! unknown comparisons than with fixed repeats, and a held-back repeat is released only
//! when no other run waits (never at the cost of a commit not yet run).

use nightshift::engine::repeats::{open, HELD_BACK};
use nightshift::engine::{Engine, EngineOptions};
use nightshift::event::{Envelope, Event};
use nightshift::model::{Outcome, RunState, Variant};
use nightshift::plan::Plan;
use nightshift::runtime::sim::{SimRuntime, Speed};
use nightshift::stats::{adaptive::Steps, Config};
use std::path::Path;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

const COMMITS: usize = 16;

fn plan(repeats: u32, max_repeats: u32) -> Arc<Plan> {
    let mut t = format!(
        "schema_version = 1\nname = \"t\"\n[defaults]\nvariants = [\"baseline\", \"human\"]\nrepeats = {repeats}\nmax_repeats = {max_repeats}\n"
    );
    for i in 0..COMMITS {
        t.push_str(&format!(
            "[[commits]]\ncommit = \"{:040x}\"\nparent = \"{:040x}\"\ngpu_config = \"H100:1\"\nperf_command = '''python benchmarks/benchmark_serving.py --model m/x{i}'''\n",
            i + 0xabc0,
            i + 0xdef0
        ));
    }
    Arc::new(Plan::from_str_at("t.toml", t, Path::new("."), Path::new("t.toml")).unwrap())
}

/// The night, its final state and every event.
async fn night(p: Arc<Plan>) -> (nightshift::state::SweepState, Vec<Envelope>) {
    let (engine, _cmds) = Engine::new(
        p,
        Arc::new(SimRuntime::new(Speed::Max)),
        EngineOptions {
            gpus: 4,
            seed: 7,
            wait_for_operator: false,
        },
    );
    let mut engine = engine.with_time_scale(0.0);
    let log = Arc::new(Mutex::new(Vec::new()));
    let l2 = log.clone();
    engine.observe(Box::new(move |env: &Envelope| {
        l2.lock().unwrap().push(env.clone());
        Ok(())
    }));
    let (_, st) = engine.run(CancellationToken::new()).await.unwrap();
    let events = log.lock().unwrap().clone();
    (st, events)
}

/// Commits whose human-vs-baseline comparison is still unknown, judged as the night judges.
fn unknown(p: &Plan, st: &nightshift::state::SweepState) -> usize {
    let steps = Steps {
        min: p.defaults.repeats as usize,
        step: 1,
        cap: p.defaults.max_repeats as usize,
    };
    let cfg = Config {
        alpha: steps.alpha_per_look(0.05),
        ..Default::default()
    };
    let all: Vec<Vec<(Variant, Vec<f64>)>> = (0..p.commits.len())
        .map(|c| {
            let mut sides = vec![(Variant::Baseline, vec![]), (Variant::Human, vec![])];
            for spec in p.runs.iter().filter(|s| s.commit == c) {
                let r = st.run(spec.id);
                if r.state
                    == (RunState::Finished {
                        outcome: Outcome::Success,
                    })
                {
                    let v = r.metrics["output_throughput_tok_s"];
                    let side = if spec.variant == Variant::Baseline {
                        0
                    } else {
                        1
                    };
                    sides[side].1.push(v);
                }
            }
            sides
        })
        .collect();
    // Judged as the morning's `results` judges: with the band the night's own repeats teach.
    let groups: Vec<Vec<f64>> = all
        .iter()
        .flatten()
        .map(|(_, v)| v.clone())
        .filter(|v| v.len() > 1)
        .collect();
    let band = nightshift::stats::band::learn(&groups, "learned");
    all.iter()
        .filter(|sides| open("output_throughput_tok_s", sides, band.as_ref(), &cfg).is_some())
        .count()
}

#[tokio::test]
async fn adaptive_repeats_leave_fewer_unknown_verdicts_and_never_jump_the_queue() {
    let fixed = plan(2, 2);
    let adaptive = plan(2, 6);
    let (st_f, _) = night(fixed.clone()).await;
    let (st_a, events) = night(adaptive.clone()).await;
    let (u_f, u_a) = (unknown(&fixed, &st_f), unknown(&adaptive, &st_a));
    let added = events
        .iter()
        .filter(|e| matches!(&e.event, Event::State { to: RunState::Queued, detail: Some(d), .. } if d.starts_with("extra repeat")))
        .count();
    eprintln!("unknown after the night: fixed {u_f} / adaptive {u_a} of {COMMITS} (repeats added: {added})");
    assert!(added > 0, "some comparison was unknown after 2 repeats");
    assert!(u_a < u_f, "fixed {u_f} unknown, adaptive {u_a}");
    // Every planned run ran; only held-back repeats may end not run.
    for spec in &adaptive.runs {
        let r = st_a.run(spec.id);
        let held_back = matches!(&r.state, RunState::Finished { outcome: Outcome::Skipped { reason, .. } } if reason.starts_with(HELD_BACK));
        assert!(spec.extra || !held_back, "{} held back", spec.key);
        if !spec.extra {
            assert!(r.attempt >= 1, "{} never ran", spec.key);
        }
    }
    // A release happens only while no planned run waits: fold the events and check.
    let mut st = nightshift::state::SweepState::for_plan(&adaptive);
    for e in &events {
        if let Event::State {
            to: RunState::Queued,
            detail: Some(d),
            ..
        } = &e.event
        {
            if d.starts_with("extra repeat") {
                let waiting = adaptive
                    .runs
                    .iter()
                    .filter(|s| !s.extra && st.run(s.id).state == RunState::Queued)
                    .count();
                assert_eq!(waiting, 0, "released while {waiting} planned runs waited");
            }
        }
        let _ = st.apply(e);
    }
}

#[test]
fn max_repeats_below_repeats_is_refused_where_it_is_written() {
    let t = "schema_version = 1\nname = \"t\"\n[defaults]\nrepeats = 3\nmax_repeats = 2\n[[commits]]\ncommit = \"abc\"\nperf_command = 'python benchmarks/benchmark_serving.py --model m/x'\n";
    let e = Plan::from_str_at("t.toml", t.into(), Path::new("."), Path::new("t.toml"))
        .map(|_| ())
        .expect_err("refused");
    let text = format!("{e:#}");
    assert!(text.contains("t.toml:5:"), "{text}");
    assert!(
        text.contains("max_repeats = 2 must lie between repeats (3)"),
        "{text}"
    );
    // The held-back runs of a plan that allows more: keyed r3.., marked extra.
    let p = plan(2, 4);
    let extras: Vec<&str> = p
        .runs
        .iter()
        .filter(|r| r.extra)
        .map(|r| r.key.as_str())
        .collect();
    assert_eq!(extras.len(), COMMITS * 2 * 2);
    assert!(
        extras
            .iter()
            .all(|k| k.ends_with("/r3") || k.ends_with("/r4")),
        "{extras:?}"
    );
}
