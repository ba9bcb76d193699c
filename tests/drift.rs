//! Drift reference runs (#35) in a night: the plan names a commit and variant; its first
//! reference runs at the start, the next at the interval while the night goes on, one more
//! at the end, the rest stay in reserve; each that ends is judged against the first. The
//! judging and the flags on comparisons made across a drift are tested in
//! `stats::drift` and `report::tests`.

use nightshift::engine::{Engine, EngineOptions};
use nightshift::event::{Envelope, Event};
use nightshift::model::{Outcome, RunState};
use nightshift::plan::Plan;
use nightshift::runtime::sim::{SimRuntime, Speed};
use std::path::Path;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

fn plan(extra: &str) -> Result<Plan, String> {
    let mut t = format!(
        "schema_version = 1\nname = \"t\"\n[defaults]\nvariants = [\"baseline\", \"human\"]\n{extra}\n"
    );
    for i in 0..12 {
        t.push_str(&format!(
            "[[commits]]\ncommit = \"{:040x}\"\nparent = \"{:040x}\"\ngpu_config = \"H100:1\"\nperf_command = '''python benchmarks/benchmark_serving.py --model m/x{i}'''\n",
            i + 0xabc0,
            i + 0xdef0
        ));
    }
    Plan::from_str_at("t.toml", t, Path::new("."), Path::new("t.toml")).map_err(|e| e.to_string())
}

#[tokio::test]
async fn references_run_at_the_start_at_intervals_and_at_the_end() {
    // The sim's typical run is 250 s: every 10 min is every 3 runs at full speed.
    let p = Arc::new(
        plan("reference = \"000000000000000000000000000000000000abc3/baseline\"\nreference_every_min = 10\nreference_runs = 20").unwrap(),
    );
    let refs: Vec<_> = p
        .runs
        .iter()
        .filter(|s| s.reference)
        .map(|s| s.id)
        .collect();
    assert_eq!(refs.len(), 20);
    assert!(p.runs[refs[0].0 as usize]
        .key
        .ends_with("abc3/baseline/ref1"));
    let (engine, _cmds) = Engine::new(
        p.clone(),
        Arc::new(SimRuntime::new(Speed::Max)),
        EngineOptions {
            gpus: 2,
            seed: 7,
            wait_for_operator: false,
        },
    );
    let mut engine = engine.with_time_scale(0.0);
    let log = Arc::new(Mutex::new(Vec::<Envelope>::new()));
    let l2 = log.clone();
    engine.observe(Box::new(move |env: &Envelope| {
        l2.lock().unwrap().push(env.clone());
        Ok(())
    }));
    let (_, st) = engine.run(CancellationToken::new()).await.unwrap();
    let events = log.lock().unwrap().clone();
    // Order of first starts.
    let starts: Vec<u32> = {
        let mut seen = std::collections::BTreeSet::new();
        events
            .iter()
            .filter_map(|e| match &e.event {
                Event::State {
                    run,
                    to: RunState::Active { .. },
                    ..
                } if seen.insert(run.0) => Some(run.0),
                _ => None,
            })
            .collect()
    };
    let first_ref = starts
        .iter()
        .position(|r| *r == refs[0].0)
        .expect("ref1 ran");
    assert!(
        first_ref < 2,
        "the first reference starts with the night: {starts:?}"
    );
    let ran: Vec<usize> = refs
        .iter()
        .filter_map(|id| starts.iter().position(|r| *r == id.0))
        .collect();
    // 24 planned runs, a reference every ~3 ended: several in the night, one at the end.
    assert!(
        ran.len() >= 4 && ran.len() < refs.len(),
        "{} references ran",
        ran.len()
    );
    let last_planned = p
        .runs
        .iter()
        .filter(|s| !s.reference)
        .filter_map(|s| starts.iter().position(|r| *r == s.id.0))
        .max()
        .unwrap();
    assert!(
        *ran.last().unwrap() > last_planned,
        "a reference at the end"
    );
    for id in &refs {
        let r = st.run(*id);
        match &r.state {
            RunState::Finished {
                outcome: Outcome::Success,
            } => {}
            RunState::Finished {
                outcome: Outcome::Skipped { reason, .. },
            } => {
                assert!(r.state.in_reserve(), "{reason}")
            }
            other => panic!("reference {id:?} ended {other:?}"),
        }
    }
    // Every planned run ran; the references never counted as the commit's repeats.
    for s in p.runs.iter().filter(|s| !s.reference) {
        assert!(st.run(s.id).attempt >= 1, "{} never ran", s.key);
    }
    let progress = st.progress(|_| false);
    assert_eq!(progress.in_reserve, refs.len() - ran.len());
}

#[test]
fn a_reference_the_plan_cannot_run_is_refused_where_it_is_written() {
    let e = plan("reference = \"ffffffffff/baseline\"").unwrap_err();
    assert!(
        e.contains("t.toml:5:") && e.contains("no commit of the plan starts with"),
        "{e}"
    );
    let e = plan("reference = \"000000000000000000000000000000000000abc3/agent\"").unwrap_err();
    assert!(e.contains("has no `agent` run"), "{e}");
    let e =
        plan("reference = \"000000000000000000000000000000000000abc3\"\nreference_every_min = 5")
            .unwrap_err();
    assert!(
        e.contains("t.toml:6:") && e.contains("between 10 and 1440"),
        "{e}"
    );
}

/// The order of first starts of a night of `plan` on `gpus` GPUs.
async fn start_order(p: Arc<Plan>, gpus: u32) -> Vec<usize> {
    let (engine, _cmds) = Engine::new(
        p.clone(),
        Arc::new(SimRuntime::new(Speed::Max)),
        EngineOptions {
            gpus,
            seed: 7,
            wait_for_operator: false,
        },
    );
    let mut engine = engine.with_time_scale(0.0);
    let log = Arc::new(Mutex::new(Vec::<u32>::new()));
    let l2 = log.clone();
    engine.observe(Box::new(move |env: &Envelope| {
        if let Event::State {
            run,
            to: RunState::Active { .. },
            ..
        } = &env.event
        {
            let mut l = l2.lock().unwrap();
            if !l.contains(&run.0) {
                l.push(run.0);
            }
        }
        Ok(())
    }));
    engine.run(CancellationToken::new()).await.unwrap();
    let order = log.lock().unwrap().clone();
    order.into_iter().map(|r| r as usize).collect()
}

/// asv's rounds: every commit's first round before any commit's second, so the box's slow
/// drift over the night lands on every commit alike; `interleave = "commits"` keeps a
/// commit's repeats back to back (a box short of disk pulls each image once).
#[tokio::test]
async fn repeats_are_interleaved_across_commits_in_rounds() {
    let p = Arc::new(plan("repeats = 3").unwrap());
    let order = start_order(p.clone(), 1).await;
    let rounds: Vec<u32> = order.iter().map(|i| p.runs[*i].repeat).collect();
    assert_eq!(rounds.len(), 12 * 2 * 3);
    assert!(
        rounds.windows(2).all(|w| w[0] <= w[1]),
        "rounds in order: {rounds:?}"
    );
    // Within a round a commit's variants stay together.
    let commits: Vec<usize> = order.iter().map(|i| p.runs[*i].commit).collect();
    assert!(commits[..24].chunks(2).all(|c| c[0] == c[1]), "{commits:?}");

    let p = Arc::new(plan("repeats = 3\ninterleave = \"commits\"").unwrap());
    let order = start_order(p.clone(), 1).await;
    let commits: Vec<usize> = order.iter().map(|i| p.runs[*i].commit).collect();
    assert!(
        commits[..6].iter().all(|c| *c == commits[0]),
        "back to back: {commits:?}"
    );
}
