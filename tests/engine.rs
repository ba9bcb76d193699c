//! The engine over the sim runtime, driven through its command channel as the TUI does.

use nightshift::category::Category;
use nightshift::engine::{CommandSender, Engine, EngineOptions};
use nightshift::event::{Command, Envelope, Event};
use nightshift::model::{Outcome, RunId, RunState};
use nightshift::plan::Plan;
use nightshift::runtime::sim::{SimRuntime, Speed};
use std::path::Path;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

fn plan(commits: &[(&str, &str)]) -> Arc<Plan> {
    let mut t = String::from(
        "schema_version = 1\nname = \"t\"\n[defaults]\nvariants = [\"baseline\", \"human\"]\n",
    );
    for (i, (cmd, extra)) in commits.iter().enumerate() {
        t.push_str(&format!(
            "[[commits]]\ncommit = \"{:040x}\"\nparent = \"{:040x}\"\ngpu_config = \"H100:1\"\nperf_command = '''{cmd}'''\n{extra}\n",
            i + 0xabc0,
            i + 0xdef0
        ));
    }
    Arc::new(Plan::from_str_at("t.toml", t, Path::new("."), Path::new("t.toml")).unwrap())
}

const SERVE: &str = "python benchmarks/benchmark_serving.py --model m/x";

type Log = Arc<Mutex<Vec<Envelope>>>;

type Driven = (
    nightshift::engine::Summary,
    nightshift::state::SweepState,
    Vec<Envelope>,
);

/// Runs the engine; `react` sees every event and may send commands.
async fn drive(
    plan: Arc<Plan>,
    gpus: u32,
    wait: bool,
    react: impl FnMut(&Envelope, &CommandSender) + Send + 'static,
) -> Driven {
    drive_with(plan, gpus, wait, None, react).await
}

/// As [`drive`], with the operator's policy settings.
async fn drive_with(
    plan: Arc<Plan>,
    gpus: u32,
    wait: bool,
    policy: Option<nightshift::policy::PolicyConfig>,
    react: impl FnMut(&Envelope, &CommandSender) + Send + 'static,
) -> Driven {
    let (engine, cmds) = Engine::new(
        plan,
        Arc::new(SimRuntime::new(Speed::Max)),
        EngineOptions {
            gpus,
            seed: 1,
            wait_for_operator: wait,
        },
    );
    let mut engine = engine.with_time_scale(0.0);
    if let Some(cfg) = policy {
        engine = engine.with_diagnosis(
            cfg,
            Arc::new(nightshift::diagnose::Catalog::builtin()),
            Arc::new(nightshift::diagnose::RecipeBook::builtin()),
        );
    }
    let log: Log = Arc::new(Mutex::new(Vec::new()));
    let l2 = log.clone();
    let tx = cmds.clone();
    let mut react = react;
    engine.observe(Box::new(move |env: &Envelope| {
        l2.lock().unwrap().push(env.clone());
        react(env, &tx);
        Ok(())
    }));
    let (s, st) = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        engine.run(CancellationToken::new()),
    )
    .await
    .expect("engine finished")
    .unwrap();
    let events = log.lock().unwrap().clone();
    (s, st, events)
}

fn finished(st: &nightshift::state::SweepState) -> bool {
    st.runs.iter().all(|r| r.state.is_terminal())
}

#[tokio::test]
async fn a_held_run_retried_by_the_operator_succeeds_on_a_new_attempt() {
    let p = plan(&[(
        SERVE,
        "sim = { fail = \"cuda_oom\", variants = [\"human\"], transient = true }",
    )]);
    let (s, st, events) = drive(p, 1, true, |env, tx| {
        if let Event::State {
            run,
            to: RunState::Held { .. },
            ..
        } = &env.event
        {
            tx.send(Command::Retry { run: *run }).unwrap();
        }
    })
    .await;
    assert!(finished(&st));
    assert_eq!(s.counts.success, 2);
    assert_eq!(st.run(RunId(1)).attempt, 2);
    assert!(events.iter().any(|e| matches!(
        &e.event,
        Event::Diagnosed {
            run: RunId(1),
            attempt: 1,
            ..
        }
    )));
}

#[tokio::test]
async fn pause_holds_the_queue_and_resume_releases_it() {
    let p = plan(&[(SERVE, ""), (SERVE, "")]);
    let started = Arc::new(Mutex::new(0usize));
    let s2 = started.clone();
    let (s, st, events) = drive(p, 1, true, move |env, tx| match &env.event {
        Event::SweepStarted { .. } => tx.send(Command::Pause).unwrap(),
        Event::Paused { .. } => tx.send(Command::Resume).unwrap(),
        Event::State {
            to:
                RunState::Active {
                    stage: nightshift::model::Stage::PreparingImage,
                },
            ..
        } => *s2.lock().unwrap() += 1,
        _ => {}
    })
    .await;
    assert!(finished(&st));
    assert_eq!(s.counts.success, 4);
    let paused_at = events
        .iter()
        .position(|e| matches!(e.event, Event::Paused { .. }))
        .unwrap();
    let resumed_at = events
        .iter()
        .position(|e| matches!(e.event, Event::Resumed))
        .unwrap();
    assert!(
        !events[paused_at..resumed_at].iter().any(|e| matches!(
            &e.event,
            Event::State {
                to: RunState::Active {
                    stage: nightshift::model::Stage::PreparingImage
                },
                ..
            }
        )),
        "a run started while paused"
    );
    assert_eq!(*started.lock().unwrap(), 4);
}

#[tokio::test]
async fn operator_skip_and_cancel_end_queued_runs() {
    let p = plan(&[(SERVE, ""), (SERVE, "")]);
    let (s, st, _) = drive(p, 1, true, |env, tx| {
        if let Event::SweepStarted { .. } = &env.event {
            tx.send(Command::Skip { run: RunId(2) }).unwrap();
            tx.send(Command::Cancel { run: RunId(3) }).unwrap();
        }
    })
    .await;
    assert!(finished(&st));
    assert_eq!(
        (s.counts.success, s.counts.skipped, s.counts.cancelled),
        (2, 1, 1)
    );
    assert!(
        matches!(&st.run(RunId(2)).state, RunState::Finished { outcome: Outcome::Skipped { reason, .. } } if reason.contains("operator"))
    );
}

#[tokio::test]
async fn runs_needing_more_gpus_than_the_machine_stay_queued_not_hung() {
    let p = plan(&[
        (
            "python benchmarks/benchmark_throughput.py --model m/x -tp 1",
            "",
        ),
        (SERVE, ""),
    ]);
    let (s, _, _) = drive(p.clone(), 0, false, |_, _| {}).await;
    // Not skipped for good: queued for a sweep that has the GPUs, and said so.
    // (The serving commit's runs are skipped by the plan for their own reason.)
    assert_eq!((s.counts.skipped, s.counts.queued), (2, 2));
    assert_eq!(s.needs_more_gpus, (2, 1));
    let (s, st, _) = drive(p, 1, false, |_, _| {}).await;
    assert!(finished(&st));
    assert_eq!((s.counts.success, s.needs_more_gpus), (2, (0, 0)));
}

#[tokio::test]
async fn shutdown_requeues_runs_in_flight() {
    let p = plan(&[(SERVE, "")]);
    let (mut engine, cmds) = Engine::new(
        p,
        Arc::new(SimRuntime::new(Speed::Factor(1.0))),
        EngineOptions {
            gpus: 1,
            seed: 1,
            wait_for_operator: false,
        },
    );
    let tx = cmds.clone();
    engine.observe(Box::new(move |env: &Envelope| {
        if let Event::State {
            to: RunState::Active { .. },
            ..
        } = &env.event
        {
            let _ = tx.send(Command::Shutdown);
        }
        Ok(())
    }));
    let (s, st) = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        engine.run(CancellationToken::new()),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(s.interrupted);
    assert_eq!(st.run(RunId(0)).state, RunState::Queued);
    assert_eq!(
        st.run(RunId(0)).attempt,
        2,
        "the interrupted attempt is counted; the next one is new"
    );
}

#[tokio::test]
async fn aimv2_is_fixed_automatically_and_the_fix_is_recorded() {
    let p = plan(&[(SERVE, "sim = { fail = \"aimv2_conflict\" }")]);
    let (s, st, events) = drive(p, 1, false, |_, _| {}).await;
    assert_eq!(s.counts.success, 2, "{:?}", s);
    for r in &st.runs {
        assert_eq!(r.attempt, 2);
        assert_eq!(r.fixes, vec!["aimv2-exist-ok".to_string()]);
    }
    assert!(events.iter().any(|e| matches!(&e.event, Event::Diagnosed { finding, .. } if finding.category == nightshift::category::Category::Aimv2Conflict && finding.evidence.contains("'aimv2' is already used"))));
}

#[tokio::test]
async fn an_environment_workaround_goes_to_every_variant_of_the_commit() {
    // Only the human variant trips over NumPy 2; numpy<2 may change what is measured, so
    // the baseline gets it too (re-run if it had already ended), with nobody asked.
    let p = plan(&[(
        SERVE,
        "sim = { fail = \"numpy_abi\", variants = [\"human\"] }",
    )]);
    let (s, st, _) = drive(p, 1, false, |_, _| {}).await;
    assert_eq!((s.counts.success, s.counts.held), (2, 0), "{s:?}");
    for r in &st.runs {
        assert_eq!(r.fixes, vec!["numpy-lt-2".to_string()], "{r:?}");
    }
}

#[tokio::test]
async fn a_gated_model_ends_its_runs_and_the_night_goes_on() {
    let p = plan(&[
        (SERVE, "sim = { fail = \"gated_model_auth\" }"),
        (SERVE, ""),
        ("python benchmarks/benchmark_serving.py --model other/y", ""),
    ]);
    let (s, st, events) = drive(p, 1, false, |_, _| {}).await;
    assert!(s.paused.is_none(), "{s:?}");
    assert!(!events
        .iter()
        .any(|e| matches!(e.event, Event::Paused { .. })));
    // m/x: the refused run fails, its other runs are not tried (skipped, saying why, and
    // brought back by --retry-failed gated_model_auth); other/y runs.
    let c = &s.counts;
    assert_eq!((c.failed, c.skipped, c.success), (1, 3, 2), "{s:?}");
    assert_eq!(s.failures.get(&Category::GatedModelAuth), Some(&1));
    let d = st.runs[3].detail.as_deref().unwrap();
    assert!(d.starts_with(nightshift::category::NOT_RUN_GATED), "{d}");
    assert!(d.contains("m/x is gated"), "{d}");
}

#[tokio::test]
async fn port_bug_is_predicted_from_the_version_and_skipped_with_one_command() {
    let p = plan(&[
        (SERVE, "vllm_version = \"0.6.4.post2.dev375+gd263bd9d\""),
        (
            "python benchmarks/benchmark_throughput.py --model m/x --input-len 8 --output-len 8",
            "vllm_version = \"0.6.4\"",
        ),
    ]);
    let (s, st, events) = drive(p, 1, true, |env, tx| {
        if let Event::SweepStarted { .. } = &env.event {
            tx.send(Command::Pause).unwrap();
            tx.send(Command::SkipCategory {
                category: nightshift::category::Category::VersionPortBug,
            })
            .unwrap();
            tx.send(Command::Resume).unwrap();
        }
    })
    .await;
    let predicted: Vec<RunId> = events
        .iter()
        .filter_map(|e| match &e.event {
            Event::Diagnosed { run, finding, .. } if finding.predicted => Some(*run),
            _ => None,
        })
        .collect();
    assert_eq!(
        predicted,
        vec![RunId(0), RunId(1)],
        "only the serving commit is predicted"
    );
    assert!(finished(&st));
    // Runs of the serving commit that had not started were skipped; offline ones ran.
    assert!(s.counts.skipped >= 1, "{s:?}");
    assert!(matches!(
        st.run(RunId(2)).state,
        RunState::Finished {
            outcome: Outcome::Success
        }
    ));
    assert!(matches!(
        st.run(RunId(3)).state,
        RunState::Finished {
            outcome: Outcome::Success
        }
    ));
}

/// Panics in every attempt; counts attempts started and reclaimed, and notes an attempt
/// started on the one GPU before the last one's containers were reclaimed.
#[derive(Default)]
struct PanickingRuntime {
    started: std::sync::atomic::AtomicU32,
    reclaimed: std::sync::atomic::AtomicU32,
    early: std::sync::atomic::AtomicU32,
}

#[async_trait::async_trait]
impl nightshift::runtime::Runtime for PanickingRuntime {
    fn name(&self) -> &'static str {
        "panics"
    }
    async fn cleanup_leftovers(&self, _sweep: &str) -> anyhow::Result<Vec<String>> {
        Ok(vec![])
    }
    async fn execute(
        &self,
        _job: nightshift::runtime::RunJob,
        _sink: nightshift::runtime::RunSink,
        _cancel: CancellationToken,
    ) -> nightshift::runtime::RunReport {
        use std::sync::atomic::Ordering::SeqCst;
        if self.started.fetch_add(1, SeqCst) != self.reclaimed.load(SeqCst) {
            self.early.fetch_add(1, SeqCst);
        }
        panic!("runtime bug");
    }
    async fn reclaim(&self, job: &nightshift::runtime::RunJob) -> anyhow::Result<Vec<String>> {
        // Slow, as removing a real container is: the GPU must wait for it.
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        self.reclaimed
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(vec![format!("removed container of {}", job.key)])
    }
}

#[tokio::test]
async fn a_panicking_runtime_ends_the_attempt_and_frees_its_gpu() {
    use std::sync::atomic::Ordering::SeqCst;
    let p = plan(&[(SERVE, "")]);
    let rt = Arc::new(PanickingRuntime::default());
    let (engine, _cmds) = Engine::new(
        p,
        rt.clone(),
        EngineOptions {
            gpus: 1,
            seed: 1,
            wait_for_operator: false,
        },
    );
    let (s, st) = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        engine.with_time_scale(0.0).run(CancellationToken::new()),
    )
    .await
    .expect("no hang")
    .unwrap();
    assert!(finished(&st));
    assert_eq!(s.counts.failed, 2, "{s:?}");
    let f = st.run(RunId(0)).finding.clone().unwrap();
    assert!(f.evidence.contains("runtime task failed"), "{f:?}");
    assert!(f.evidence.contains("removed container of"), "{f:?}");
    // Every panicked attempt was reclaimed, each before its GPU went to the next one.
    assert!(rt.started.load(SeqCst) >= 2);
    assert_eq!(rt.reclaimed.load(SeqCst), rt.started.load(SeqCst));
    assert_eq!(rt.early.load(SeqCst), 0);
}

#[tokio::test]
async fn a_failing_observer_stops_the_sweep_and_tears_runs_down() {
    let p = plan(&[(SERVE, ""), (SERVE, "")]);
    let (mut engine, _cmds) = Engine::new(
        p,
        Arc::new(SimRuntime::new(Speed::Factor(50.0))),
        EngineOptions {
            gpus: 2,
            seed: 1,
            wait_for_operator: false,
        },
    );
    engine.observe(Box::new(|env: &Envelope| match &env.event {
        Event::State {
            to:
                RunState::Active {
                    stage: nightshift::model::Stage::StartingContainer,
                },
            ..
        } => Err(anyhow::anyhow!("disk full")),
        _ => Ok(()),
    }));
    let r = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        engine.run(CancellationToken::new()),
    )
    .await
    .expect("returns promptly");
    assert!(r.unwrap_err().to_string().contains("disk full"));
}

/// The breaker stops the model that fails alike on commit after commit, not the sweep: the
/// other model's runs all run; the stopped model's wait queued, holding no GPU, until the
/// operator resumes.
#[tokio::test]
async fn the_breaker_pauses_only_the_model_that_fails_alike() {
    let big = "model = \"m/big\"\nsim = { fail = \"cuda_oom\" }";
    let small = "model = \"m/small\"";
    let p = plan(&[
        (SERVE, big),
        (SERVE, big),
        (SERVE, big),
        (SERVE, small),
        (SERVE, small),
    ]);
    let cfg = nightshift::policy::PolicyConfig {
        breaker_threshold: 2,
        ..Default::default()
    };
    let mut st = nightshift::state::SweepState::for_plan(&p);
    let mut resumed = false;
    let (_s, st, events) = drive_with(p, 1, true, Some(cfg), move |env, tx| {
        let s = &mut st;
        let _ = s.apply(env);
        // Once m/small is done and m/big waits: check nothing of m/big started meanwhile,
        // then resume: m/big's runs start again.
        let small_done = (6..10).all(|i| s.runs[i].state.is_terminal());
        if small_done && !resumed && !s.paused_models.is_empty() {
            assert!(s.paused.is_none(), "the sweep itself never paused");
            assert_eq!(s.runs[4].state, RunState::Queued);
            assert_eq!(s.runs[5].state, RunState::Queued);
            resumed = true;
            let _ = tx.send(Command::Resume);
        }
        // Resumed, m/big fails alike again and is stopped again: its last run waits.
        if resumed && matches!(env.event, Event::ModelPaused { .. }) {
            assert_eq!(s.runs[5].state, RunState::Queued);
            let _ = tx.send(Command::Shutdown);
        }
    })
    .await;
    let paused: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.event {
            Event::ModelPaused { model, .. } => Some(model.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(paused, ["m/big", "m/big"]);
    assert!(!events
        .iter()
        .any(|e| matches!(e.event, Event::Paused { .. })));
    for i in 6..10 {
        assert_eq!(
            st.runs[i].state,
            RunState::Finished {
                outcome: Outcome::Success
            },
            "run {i}"
        );
    }
    // After the resume m/big's runs ran again (run 4 is its third commit's baseline).
    assert_ne!(st.runs[4].state, RunState::Queued);
}

#[tokio::test]
async fn a_pause_for_disk_space_lifts_itself_but_never_the_operators() {
    // The disk watch pauses and then finds space again: the night goes on by itself.
    let p = plan(&[(SERVE, ""), (SERVE, "")]);
    let (s, st, events) = drive(p, 1, true, move |env, tx| match &env.event {
        Event::SweepStarted { .. } => tx
            .send(Command::DiskSpace {
                low: Some(format!(
                    "{}store /s has 1 MiB free",
                    nightshift::disk::PREFIX
                )),
            })
            .unwrap(),
        Event::Paused { .. } => tx.send(Command::DiskSpace { low: None }).unwrap(),
        _ => {}
    })
    .await;
    assert!(finished(&st));
    assert_eq!(s.counts.success, 4);
    assert!(events.iter().any(
        |e| matches!(&e.event, Event::Paused { reason, .. } if reason.contains("1 MiB free"))
    ));
    // The operator's pause stays until the operator lifts it.
    let p = plan(&[(SERVE, "")]);
    let (_, _, events) = drive(p, 1, true, move |env, tx| match &env.event {
        Event::SweepStarted { .. } => tx.send(Command::Pause).unwrap(),
        Event::Paused { .. } => {
            tx.send(Command::DiskSpace { low: None }).unwrap();
            tx.send(Command::Shutdown).unwrap();
        }
        _ => {}
    })
    .await;
    assert!(!events.iter().any(|e| matches!(e.event, Event::Resumed)));
}

/// The disk watch sends its pause at every tick while below the floor: the operator's
/// resume during a disk pause is paused again, and repeats while paused are no events.
#[tokio::test]
async fn a_resume_below_the_disk_floor_is_paused_again() {
    let p = plan(&[(SERVE, "")]);
    let low = || Command::DiskSpace {
        low: Some(format!(
            "{}store /s has 1 MiB free",
            nightshift::disk::PREFIX
        )),
    };
    let pauses = std::sync::atomic::AtomicUsize::new(0);
    let (_, _, events) = drive(p, 1, true, move |env, tx| match &env.event {
        Event::SweepStarted { .. } => tx.send(low()).unwrap(),
        Event::Paused { .. } => {
            let n = pauses.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            // Ticks repeat while paused; then the operator resumes; the next tick pauses.
            tx.send(low()).unwrap();
            tx.send(low()).unwrap();
            if n == 0 {
                tx.send(Command::Resume).unwrap();
                tx.send(low()).unwrap();
            } else {
                tx.send(Command::Shutdown).unwrap();
            }
        }
        _ => {}
    })
    .await;
    let paused = events
        .iter()
        .filter(|e| matches!(e.event, Event::Paused { .. }))
        .count();
    assert_eq!(paused, 2, "paused at the start and again after the resume");
    let disk_cmds = events
        .iter()
        .filter(|e| {
            matches!(
                &e.event,
                Event::Operator {
                    command: Command::DiskSpace { .. },
                    ..
                }
            )
        })
        .count();
    assert_eq!(disk_cmds, 2, "repeats while paused are not events");
}

/// Two clients on one run (#25): A skips it; B, who still saw it queued, retries it — the
/// engine refuses B and names A; A's undo queues the run again and it runs. Every action is
/// in the events with its signer and outcome.
#[tokio::test]
async fn a_command_on_a_run_that_moved_is_refused_and_a_skip_can_be_undone() {
    let p = plan(&[(SERVE, "")]);
    let once = std::sync::atomic::AtomicBool::new(false);
    let signed = |by: &str, saw: Option<RunState>, command: Command| Command::Signed {
        by: by.into(),
        saw,
        command: Box::new(command),
    };
    let (_, st, events) = drive(p, 1, false, move |env, tx| {
        if matches!(env.event, Event::SweepStarted { .. })
            && !once.swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            // With one GPU the second run waits, queued, for the first.
            let run = RunId(1);
            tx.send(signed(
                "ana@tui:1",
                Some(RunState::Queued),
                Command::Skip { run },
            ))
            .unwrap();
            tx.send(signed(
                "bo@tui:2",
                Some(RunState::Queued),
                Command::Retry { run },
            ))
            .unwrap();
            tx.send(signed("ana@tui:1", None, Command::Unskip { run }))
                .unwrap();
            // Undoing again: the run is no longer the skipped run.
            tx.send(signed("ana@tui:1", None, Command::Unskip { run }))
                .unwrap();
        }
    })
    .await;
    let ops: Vec<(String, String, String)> = events
        .iter()
        .filter_map(|e| match &e.event {
            Event::Operator {
                command,
                by,
                outcome,
            } => Some((
                by.clone().unwrap_or_default(),
                command.describe(),
                outcome.clone().unwrap_or_default(),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(ops.len(), 4, "{ops:?}");
    assert_eq!(
        ops[0],
        ("ana@tui:1".into(), "skip #1".into(), "done".into())
    );
    assert_eq!(ops[1].0, "bo@tui:2");
    assert!(
        ops[1]
            .2
            .starts_with("refused: #1 was just skipped by ana@tui:1"),
        "{ops:?}"
    );
    assert_eq!(ops[2].2, "done", "{ops:?}");
    assert!(ops[3].2.starts_with("refused"), "a second undo: {ops:?}");
    // The undone skip ran: both runs succeeded, each once.
    assert!(
        st.runs.iter().all(|r| r.state
            == RunState::Finished {
                outcome: Outcome::Success
            }),
        "{:?}",
        st.runs
    );
    let lines: Vec<String> = nightshift::report::activity::log(&events, &|r| format!("k{}", r.0))
        .iter()
        .map(nightshift::report::activity::line)
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("bo@tui:2  retry k1 — refused")),
        "{lines:#?}"
    );
}

/// A fix recipe nobody wrote is refused with the names of those there are (#34): before,
/// `:fix-group bogus` was logged `— done` and nothing was done.
#[tokio::test]
async fn an_unknown_fix_recipe_is_refused_and_the_known_ones_named() {
    let p = plan(&[(SERVE, "")]);
    let once = std::sync::atomic::AtomicBool::new(false);
    let (_, _, events) = drive(p, 1, false, move |env, tx| {
        if matches!(env.event, Event::SweepStarted { .. })
            && !once.swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            tx.send(Command::FixGroup {
                kind: "k1".into(),
                recipe: "bogus".into(),
            })
            .unwrap();
            tx.send(Command::ApplyFix {
                run: RunId(0),
                recipe: Some("bogus".into()),
            })
            .unwrap();
        }
    })
    .await;
    let outcomes: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.event {
            Event::Operator { outcome, .. } => outcome.clone(),
            _ => None,
        })
        .collect();
    assert_eq!(outcomes.len(), 2, "{outcomes:?}");
    for o in &outcomes {
        assert!(
            o.starts_with("refused: there is no fix recipe `bogus`")
                && o.contains("aimv2-exist-ok"),
            "{o}"
        );
    }
}

/// A fix rule for the night (`:fix-category`): the held run is retried with the recipe, and
/// each later run failing the same way is retried with it at once instead of waking the
/// operator again; every run ends a success with the fix recorded.
#[tokio::test]
async fn a_fix_rule_covers_the_held_run_and_each_later_one() {
    let p = plan(&[
        (SERVE, "vllm_version = \"0.6.4.post2.dev375+gd263bd9d\"\nsim = { fail = \"version_port_bug\" }"),
        (
            "python benchmarks/benchmark_serving.py --model m/y",
            "vllm_version = \"0.6.4.post2.dev375+gd263bd9d\"\nsim = { fail = \"version_port_bug\" }",
        ),
        (
            "python benchmarks/benchmark_serving.py --model m/z",
            "vllm_version = \"0.6.4.post2.dev375+gd263bd9d\"\nsim = { fail = \"version_port_bug\" }",
        ),
    ]);
    let mut sent = false;
    let (s, st, events) = drive(p, 1, true, move |env, tx| {
        if let Event::State {
            to: RunState::Held { category },
            ..
        } = &env.event
        {
            assert!(!sent, "held again after the rule: {env:?}");
            sent = true;
            tx.send(Command::FixCategory {
                category: *category,
                recipe: "port-bug-spawn".into(),
            })
            .unwrap();
        }
    })
    .await;
    assert!(finished(&st), "{s:?}");
    assert_eq!(s.counts.success, 6, "{s:?}\n{:#?}", st.runs);
    for r in &st.runs {
        assert!(r.fixes.contains(&"port-bug-spawn".to_string()), "{r:?}");
    }
    let covered = events.iter().filter(|e| matches!(&e.event, Event::State { detail: Some(d), .. } if d.contains("the operator's rule for all version_port_bug"))).count();
    let details: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.event {
            Event::State {
                run,
                detail: Some(d),
                ..
            } => Some(format!("{run}: {d}")),
            _ => None,
        })
        .collect();
    assert!(
        covered >= 1,
        "later runs were covered by the rule: {details:#?}"
    );
}
