//! Nobody awake: failures no signature names end the night's way, not the operator's. A
//! daemon night (the background daemon, which would wait for an operator) where 8 of 20
//! commits die of the same unknown error finishes by itself, each of those runs failed after
//! at most two attempts, and the morning finds them as one failure group; one model failing
//! alike again and again stops that model only; a hold the operator's policy asks for lasts
//! only while someone is attached, or a bounded time.

use nightshift::category::Category;
use nightshift::daemon::protocol::{self, ClientMsg, DaemonMsg, Want};
use nightshift::event::{Command as Cmd, Envelope, Event};
use nightshift::model::{Outcome, RunState};
use nightshift::plan::Plan;
use nightshift::state::SweepState;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_nightshift");

/// A plan of `commits` (model, failing with `other` on every variant or not), three
/// variants each.
fn plan_text(commits: &[(&str, bool)]) -> String {
    let mut t = String::from(
        "schema_version = 1\nname = \"unknowns\"\n[defaults]\nvariants = [\"baseline\", \"human\", \"agent\"]\n[images]\norg = \"o\"\nhuman = \"{org}/h:{commit}\"\nbaseline = \"{org}/b:{commit}\"\nagent = \"{baseline_image}\"\n[[agents]]\nid = \"a1\"\npatch = \"patches/{commit8}.diff\"\n",
    );
    for (i, (model, fails)) in commits.iter().enumerate() {
        t.push_str(&format!(
            "[[commits]]\ncommit = \"{:012x}{:028x}\"\nparent = \"{:012x}{:028x}\"\nmodel = \"{model}\"\ngpu_config = \"H100:1\"\nvllm_version = \"0.6.{}\"\nperf_command = '''python benchmarks/benchmark_serving.py --model {model}'''\n{}\n",
            0xc0de00 + i,
            0,
            0xba5e00 + i,
            0,
            3 + i % 2,
            if *fails { "sim = { fail = \"other\" }" } else { "" }
        ));
    }
    t
}

fn write_plan(dir: &Path, commits: &[(&str, bool)]) -> PathBuf {
    let p = dir.join("plan.toml");
    std::fs::write(&p, plan_text(commits)).unwrap();
    p
}

/// The daemon as `nightshift run PLAN` starts it in the background (not `--headless`'s
/// foreground: this one waits for an operator where its policy says so).
fn background_daemon(plan: &Path, store: &Path, out: &Path) -> Daemon {
    let log = std::fs::File::create(out).unwrap();
    Daemon(
        Command::new(BIN)
            .args(["run", plan.to_str().unwrap(), "--runtime", "sim"])
            .args(["--gpus", "4", "--speed", "max", "--store"])
            .arg(store)
            .arg("--headless")
            .env("NIGHTSHIFT_DAEMON", "1")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap(),
    )
}

/// A daemon that dies with the test.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn wait_exit(d: &mut Daemon, secs: u64, log: &Path) -> i32 {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(secs) {
        if let Some(st) = d.0.try_wait().unwrap() {
            return st.code().unwrap_or(-1);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = Command::new(BIN).args(["status", "--store"]).status();
    panic!(
        "the night did not finish by itself in {secs}s; daemon output:\n{}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

fn bin(args: &[&str]) -> (i32, String, String) {
    let o = Command::new(BIN).args(args).output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Every event the store kept.
fn events(store: &Path) -> Vec<Envelope> {
    let s = nightshift::store::Store::open(store, false).unwrap();
    s.events()
        .unwrap()
        .into_iter()
        .map(|(_, e)| e.env)
        .collect()
}

#[test]
fn a_night_of_unknown_failures_finishes_by_itself_and_groups_them() {
    let tmp = tempfile::tempdir().unwrap();
    // 8 of 20 commits, spread among the others, fail alike on every variant.
    let failing = [1, 3, 6, 8, 11, 13, 16, 18];
    let commits: Vec<(&str, bool)> = (0..20).map(|i| ("m/x", failing.contains(&i))).collect();
    let plan = write_plan(tmp.path(), &commits);
    let store = tmp.path().join("store");
    let log = tmp.path().join("daemon.out");
    let mut d = background_daemon(&plan, &store, &log);
    let code = wait_exit(&mut d, 180, &log);
    let out = std::fs::read_to_string(&log).unwrap();
    assert_eq!(code, 0, "the night ended unfinished:\n{out}");

    // No pause, no held run, ever.
    let evs = events(&store);
    for e in &evs {
        match &e.event {
            Event::Paused { reason, .. } => panic!("the sweep paused: {reason}"),
            Event::ModelPaused { model, reason } => panic!("{model} paused: {reason}"),
            Event::State {
                to: RunState::Held { .. },
                run,
                ..
            } => panic!("run {run} was held"),
            _ => {}
        }
    }
    let p = Plan::from_str_at(
        "plan.toml",
        std::fs::read_to_string(&plan).unwrap(),
        tmp.path(),
        &plan,
    )
    .unwrap();
    let s = nightshift::store::Store::open(&store, false).unwrap();
    let mut lines = std::collections::BTreeSet::new();
    let mut failed_runs = 0;
    for spec in &p.runs {
        let r = &s.run(&spec.key).unwrap().record;
        if failing.contains(&spec.commit) {
            failed_runs += 1;
            assert_eq!(
                r.state,
                RunState::Finished {
                    outcome: Outcome::Failed {
                        category: Category::Other
                    }
                },
                "{}",
                spec.key
            );
            assert!(
                (1..=2).contains(&r.attempt),
                "{}: {} attempts",
                spec.key,
                r.attempt
            );
            let f = r.finding.as_ref().unwrap();
            assert!(f.reason.contains("failed after 1 retry"), "{}", f.reason);
            lines.insert(
                nightshift::failure_kind::telling_line(&f.evidence, &f.telling).to_string(),
            );
        } else {
            assert_eq!(
                r.state,
                RunState::Finished {
                    outcome: Outcome::Success
                },
                "{}",
                spec.key
            );
        }
    }
    assert_eq!(failed_runs, 24);
    // The lines differ (numbers, hashes, paths, addresses) and are one kind.
    assert!(lines.len() > 1, "{lines:?}");
    let kinds: std::collections::BTreeSet<String> = lines
        .iter()
        .map(|l| nightshift::failure_kind::FailureKind::of_line(l).id)
        .collect();
    assert_eq!(kinds.len(), 1, "{lines:#?}");
    let kind = kinds.into_iter().next().unwrap();
    drop(s);

    // The digest shows the 24 failed runs as one group with its count.
    let digest = std::fs::read_to_string(store.join("digest.md")).unwrap();
    let section = digest
        .split("### other (24)")
        .nth(1)
        .unwrap_or_else(|| panic!("no `### other (24)`:\n{digest}"));
    let section = section.split("\n## ").next().unwrap();
    let items: Vec<&str> = section.lines().filter(|l| l.starts_with("- ")).collect();
    assert_eq!(items.len(), 1, "{section}");
    assert!(items[0].starts_with("- **24 runs**:"), "{}", items[0]);
    assert!(items[0].contains(&kind), "{}", items[0]);

    // `results`: a "Failure groups" section; `--group` lists its runs.
    let st = store.to_str().unwrap();
    let (c, table, _) = bin(&["results", "--store", st]);
    assert_eq!(c, 0);
    assert!(
        table.contains("failure groups: 24 unknown failures in 1 group"),
        "{table}"
    );
    assert!(table.contains(&kind), "{table}");
    let (c, md, _) = bin(&["results", "--store", st, "--format", "md"]);
    assert_eq!(c, 0);
    assert!(md.contains("## Failure groups"), "{md}");
    assert!(md.contains(&format!("| `{kind}` | 24 runs |")), "{md}");
    let (c, group, err) = bin(&["results", "--store", st, "--group", &kind[..6]]);
    assert_eq!(c, 0, "{err}");
    assert!(
        group.starts_with(&format!("failure group {kind} — 24 runs")),
        "{group}"
    );
    assert_eq!(group.matches("failed(other)").count(), 24, "{group}");
    // Deciding needs a live sweep: said, not silently dropped.
    let (c, _, err) = bin(&["results", "--store", st, "--group", &kind, "--skip"]);
    assert_eq!(c, 1, "{err}");
    assert!(err.contains("live sweep"), "{err}");
    // `show`: the run's kind and its group's size.
    let key = &p.runs[3].key; // commit 1's baseline
    let (c, show, _) = bin(&["show", key, "--store", st]);
    assert_eq!(c, 0);
    assert!(
        show.contains(&format!(
            "group    failure group {kind} (24 runs in the group)"
        )),
        "{show}"
    );
    assert!(show.contains(&format!("kind: {kind} ")), "{show}");

    // Promoted to a named signature, it is checked and then names the failure.
    let catalog = tmp.path().join("config").join("catalog.toml");
    let (c, learned, err) = bin(&[
        "diagnose",
        "--learn",
        &kind,
        "--category",
        "engine_core_init_failed",
        "--store",
        st,
        "--catalog",
        catalog.to_str().unwrap(),
    ]);
    assert_eq!(c, 0, "{err}");
    assert!(
        learned.contains(&format!("name = \"learned-{kind}\"")),
        "{learned}"
    );
    let o = nightshift::overrides::Overrides::load(Some(catalog.parent().unwrap())).unwrap();
    for l in &lines {
        let d = nightshift::diagnose::diagnose_text(&o.catalog, l.as_bytes());
        assert_eq!(d.category, Category::EngineCoreInitFailed, "{l}");
    }
    let (c, _, err) = bin(&[
        "diagnose",
        "--learn",
        &kind,
        "--category",
        "engine_core_init_failed",
        "--store",
        st,
        "--catalog",
        catalog.to_str().unwrap(),
    ]);
    assert_eq!(c, 2, "learned once: {err}");
}

/// A client attached to the daemon: the welcome's state, then folded events.
struct Client {
    state: SweepState,
    w: UnixStream,
    r: BufReader<UnixStream>,
}

impl Client {
    fn attach(store: &Path) -> Client {
        let s = UnixStream::connect(protocol::socket_path(store)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut w = s.try_clone().unwrap();
        let hello = ClientMsg::Hello {
            version: protocol::VERSION,
            want: Want::Attach,
        };
        w.write_all(protocol::line(&hello).as_bytes()).unwrap();
        let mut r = BufReader::new(s);
        let mut l = String::new();
        r.read_line(&mut l).unwrap();
        let state = match serde_json::from_str::<DaemonMsg>(&l).unwrap() {
            DaemonMsg::Welcome { state, .. } => state,
            other => panic!("{other:?}"),
        };
        Client { state, w, r }
    }

    fn send(&mut self, command: Cmd) {
        let m = ClientMsg::Command { command };
        self.w.write_all(protocol::line(&m).as_bytes()).unwrap();
    }

    /// Folds events until `done` holds (or the daemon goes); every event seen.
    fn until(&mut self, secs: u64, mut done: impl FnMut(&SweepState) -> bool) -> Vec<Event> {
        let t0 = Instant::now();
        let mut seen = Vec::new();
        while !done(&self.state) {
            assert!(
                t0.elapsed() < Duration::from_secs(secs),
                "timed out; counts {:?}",
                self.state.counts()
            );
            let mut l = String::new();
            if self.r.read_line(&mut l).unwrap() == 0 {
                break;
            }
            match serde_json::from_str::<DaemonMsg>(&l).unwrap() {
                DaemonMsg::Event { env } => {
                    let _ = self.state.apply(&env);
                    seen.push(env.event);
                }
                DaemonMsg::Resync { state, .. } => self.state = state,
                _ => {}
            }
        }
        seen
    }
}

#[test]
fn one_model_failing_alike_on_five_commits_pauses_that_model_only() {
    let tmp = tempfile::tempdir().unwrap();
    // m/big fails alike on each of its commits; m/small's, between them, succeed.
    let mut commits = Vec::new();
    for _ in 0..6 {
        commits.push(("m/big", true));
        commits.push(("m/small", false));
    }
    let plan = write_plan(tmp.path(), &commits);
    let p = Plan::from_str_at(
        "plan.toml",
        std::fs::read_to_string(&plan).unwrap(),
        tmp.path(),
        &plan,
    )
    .unwrap();
    let small: Vec<usize> = p
        .runs
        .iter()
        .filter(|s| p.commit_of(s).model.as_deref() == Some("m/small"))
        .map(|s| s.id.0 as usize)
        .collect();
    let big_last: Vec<usize> = p
        .runs
        .iter()
        .filter(|s| s.commit == 10)
        .map(|s| s.id.0 as usize)
        .collect();
    assert_eq!((small.len(), big_last.len()), (18, 3));
    let store = tmp.path().join("store");
    let log = tmp.path().join("daemon.out");
    let _d = background_daemon(&plan, &store, &log);
    let t0 = Instant::now();
    while UnixStream::connect(protocol::socket_path(&store)).is_err() {
        assert!(t0.elapsed() < Duration::from_secs(30), "no socket");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut c = Client::attach(&store);
    let seen = c.until(120, |st| {
        st.paused_models.contains_key("m/big")
            && small.iter().all(|i| st.runs[*i].state.is_terminal())
            && st.counts().active == 0
    });
    let st = c.state.clone();
    assert!(st.paused.is_none(), "the sweep paused: {:?}", st.paused);
    assert!(
        !seen.iter().any(|e| matches!(e, Event::Paused { .. })),
        "a sweep-wide pause"
    );
    let why = &st.paused_models["m/big"];
    assert!(
        why.starts_with("breaker tripped: 5 × other [kind "),
        "{why}"
    );
    assert!(why.ends_with(" in a row on m/big"), "{why}");
    // The other model's runs all went on, and succeeded.
    for i in &small {
        assert_eq!(
            st.runs[*i].state,
            RunState::Finished {
                outcome: Outcome::Success
            },
            "run {i}"
        );
    }
    // m/big's last commit waits, never started; nothing is held.
    for i in &big_last {
        assert_eq!(st.runs[*i].state, RunState::Queued, "run {i}");
        assert_eq!(st.runs[*i].attempt, 0, "run {i}");
    }
    assert_eq!(st.counts().held, 0);
    // The operator decides for the group once: skip every run of it (the waiting ones too).
    let kind = st
        .runs
        .iter()
        .filter_map(|r| r.finding.as_ref())
        .find_map(nightshift::failure_kind::unknown_kind)
        .unwrap();
    let st_dir = store.to_str().unwrap();
    let (code, out, err) = bin(&["results", "--store", st_dir, "--group", &kind.id, "--skip"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!(
            "sent to the sweep: skip failure group {}",
            kind.id
        )),
        "{out}"
    );
    c.until(30, |st| {
        st.runs
            .iter()
            .filter(|r| {
                matches!(
                    r.state,
                    RunState::Finished {
                        outcome: Outcome::Failed { .. }
                    }
                )
            })
            .count()
            == 0
    });
    // The queued runs of the paused model were never failures of the group: still queued.
    for i in &big_last {
        assert_eq!(c.state.runs[*i].state, RunState::Queued, "run {i}");
    }
    c.send(Cmd::Shutdown);
}

/// An engine on the sim over one failing and one passing commit, with `other = "operator"`
/// (the failing commit's runs are held), waiting for an operator.
fn holding_engine(tmp: &Path) -> nightshift::engine::Engine {
    holding_engine_with_commands(tmp).0
}

fn holding_engine_with_commands(
    tmp: &Path,
) -> (
    nightshift::engine::Engine,
    nightshift::engine::CommandSender,
) {
    holding_engine_of(tmp, &[("m/x", true), ("m/x", false)])
}

fn holding_engine_of(
    tmp: &Path,
    commits: &[(&str, bool)],
) -> (
    nightshift::engine::Engine,
    nightshift::engine::CommandSender,
) {
    use nightshift::engine::{Engine, EngineOptions};
    use nightshift::runtime::sim::{SimRuntime, Speed};
    use std::sync::Arc;
    let text = plan_text(commits);
    let plan = Arc::new(Plan::from_str_at("p.toml", text, tmp, &tmp.join("p.toml")).unwrap());
    let cfg = nightshift::policy::PolicyConfig::from_toml("[actions]\nother = \"operator\"\n", "p")
        .unwrap();
    let (engine, cmds) = Engine::new(
        plan,
        Arc::new(SimRuntime::new(Speed::Max)),
        EngineOptions {
            gpus: 2,
            seed: 1,
            wait_for_operator: true,
        },
    );
    let engine = engine.with_time_scale(0.0).with_diagnosis(
        cfg,
        Arc::new(nightshift::diagnose::Catalog::builtin()),
        Arc::new(nightshift::diagnose::RecipeBook::builtin()),
    );
    (engine, cmds)
}

/// The engine alone: `other = "operator"` holds, but with nobody attached only for the
/// held limit; then the run fails and the night ends. On the engine's clock (tokio's,
/// paused): the client's 0.7 s and the limit's 0.3 s pass in no wall time.
#[tokio::test(start_paused = true)]
async fn an_explicit_hold_lasts_only_while_someone_is_attached() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let tmp = tempfile::tempdir().unwrap();
    let clients = Arc::new(AtomicUsize::new(1));
    let mut engine = holding_engine(tmp.path()).with_held_limit(Duration::from_millis(300));
    engine.count_clients(clients.clone());
    let held = Arc::new(AtomicUsize::new(0));
    let h2 = held.clone();
    let c2 = clients.clone();
    engine.observe(Box::new(move |env: &Envelope| {
        if let Event::State {
            to: RunState::Held { .. },
            ..
        } = env.event
        {
            // Held while someone is attached; then they leave.
            if h2.fetch_add(1, Ordering::SeqCst) == 2 {
                let c = c2.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(700)).await;
                    c.store(0, Ordering::SeqCst);
                });
            }
        }
        Ok(())
    }));
    let t0 = tokio::time::Instant::now();
    let (summary, st) = tokio::time::timeout(
        Duration::from_secs(30),
        engine.run(tokio_util::sync::CancellationToken::new()),
    )
    .await
    .expect("the night ends by itself")
    .unwrap();
    // Every variant of the failing commit was held, then failed; the other succeeded.
    assert_eq!(held.load(Ordering::SeqCst), 3);
    assert_eq!((summary.counts.failed, summary.counts.success), (3, 3));
    assert_eq!(summary.counts.held, 0);
    // Held at least while the client stayed (0.7 s), not forever.
    assert!(
        t0.elapsed() >= Duration::from_millis(700),
        "{:?}",
        t0.elapsed()
    );
    for r in st.runs.iter().take(3) {
        assert!(
            r.detail
                .as_deref()
                .is_some_and(|d| d.contains("with nobody attached")),
            "{:?}",
            r.detail
        );
    }
}

/// With an operator attached the held runs wait, but not past the window: at `--until`
/// the night ends by itself, the held runs stay held for the morning. On the engine's
/// clock (tokio's, paused).
#[tokio::test(start_paused = true)]
async fn the_window_ends_an_attended_night_with_its_held_runs_kept() {
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;
    let tmp = tempfile::tempdir().unwrap();
    let window = nightshift::window::Window {
        closes: (tokio::time::Instant::now() + Duration::from_millis(1500)).into_std(),
        scale: 1.0,
        start_late: true,
        typical: Duration::from_millis(10),
    };
    let mut engine = holding_engine(tmp.path())
        .with_held_limit(Duration::from_secs(3600))
        .with_window(Some(window));
    // Someone stays attached all night: holds would wait for them forever.
    engine.count_clients(Arc::new(AtomicUsize::new(1)));
    let t0 = tokio::time::Instant::now();
    let (summary, st) = tokio::time::timeout(
        Duration::from_secs(20),
        engine.run(tokio_util::sync::CancellationToken::new()),
    )
    .await
    .expect("the window ends the night")
    .unwrap();
    assert!(
        t0.elapsed() >= Duration::from_millis(1400),
        "{:?}",
        t0.elapsed()
    );
    assert!(summary.window_closed.is_some(), "{summary:?}");
    assert!(!summary.interrupted);
    assert_eq!((summary.counts.held, summary.counts.success), (3, 3));
    assert!(st
        .runs
        .iter()
        .take(3)
        .all(|r| matches!(r.state, RunState::Held { .. })));
}

/// `u` restores: undoing the operator's skip of a held run puts it back held, with its
/// diagnosis and its attempt, and starts nothing.
#[tokio::test]
async fn undoing_a_skip_of_a_held_run_holds_it_again() {
    use nightshift::model::RunId;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let tmp = tempfile::tempdir().unwrap();
    let (engine, cmds) = holding_engine_with_commands(tmp.path());
    let mut engine = engine.with_held_limit(Duration::from_secs(3600));
    engine.count_clients(Arc::new(AtomicUsize::new(1)));
    let held = Arc::new(AtomicUsize::new(0));
    let starts = Arc::new(AtomicUsize::new(0));
    let (h, s2) = (held.clone(), starts.clone());
    engine.observe(Box::new(move |env: &Envelope| {
        match &env.event {
            Event::State { run, to, .. } if *run == RunId(0) => match to {
                RunState::Held { .. } => {
                    if h.fetch_add(1, Ordering::SeqCst) == 0 {
                        let _ = cmds.send(Cmd::Skip { run: RunId(0) });
                        let _ = cmds.send(Cmd::Unskip { run: RunId(0) });
                    } else {
                        let _ = cmds.send(Cmd::Shutdown);
                    }
                }
                RunState::Active {
                    stage: nightshift::model::Stage::PreparingImage,
                } => {
                    s2.fetch_add(1, Ordering::SeqCst);
                }
                _ => {}
            },
            _ => {}
        }
        Ok(())
    }));
    let (_, st) = tokio::time::timeout(
        Duration::from_secs(20),
        engine.run(tokio_util::sync::CancellationToken::new()),
    )
    .await
    .expect("the night ends")
    .unwrap();
    assert_eq!(held.load(Ordering::SeqCst), 2, "held, skipped, held again");
    let r = &st.runs[0];
    assert!(matches!(r.state, RunState::Held { .. }), "{:?}", r.state);
    assert_eq!(r.attempt, 1, "no attempt was started by the undo");
    assert_eq!(
        starts.load(Ordering::SeqCst),
        1,
        "one attempt started, the first"
    );
    assert!(r.finding.is_some(), "the diagnosis is kept");
}

/// `S` is a rule for the rest of the night: runs that fail with the category later are
/// skipped as the operator said, without waking them again.
#[tokio::test]
async fn skipping_a_category_holds_for_the_rest_of_the_night() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let tmp = tempfile::tempdir().unwrap();
    let commits = [
        ("m/x", true),
        ("m/y", true),
        ("m/z", true),
        ("m/w", true),
        ("m/v", false),
    ];
    let (engine, cmds) = holding_engine_of(tmp.path(), &commits);
    let mut engine = engine.with_held_limit(Duration::from_secs(3600));
    engine.count_clients(Arc::new(AtomicUsize::new(1)));
    let held = Arc::new(AtomicUsize::new(0));
    let h = held.clone();
    engine.observe(Box::new(move |env: &Envelope| {
        if let Event::State {
            to: RunState::Held { category },
            ..
        } = &env.event
        {
            if h.fetch_add(1, Ordering::SeqCst) == 0 {
                let _ = cmds.send(Cmd::SkipCategory {
                    category: *category,
                });
            }
        }
        Ok(())
    }));
    let (summary, st) = tokio::time::timeout(
        Duration::from_secs(20),
        engine.run(tokio_util::sync::CancellationToken::new()),
    )
    .await
    .expect("the night ends by itself: nothing is left held")
    .unwrap();
    assert_eq!(summary.counts.held, 0);
    let failing = 12;
    let skipped: Vec<&str> = st
        .runs
        .iter()
        .filter_map(|r| match &r.state {
            RunState::Finished {
                outcome: Outcome::Skipped { reason, .. },
            } => Some(reason.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(skipped.len(), failing, "{skipped:?}");
    assert!(
        held.load(Ordering::SeqCst) < failing,
        "the operator was woken {} times",
        held.load(Ordering::SeqCst)
    );
    assert!(
        skipped
            .iter()
            .any(|r| r.contains("the operator's rule for the night")),
        "{skipped:?}"
    );
}

/// `nightshift wait` returns 3 once a run waits for a decision: the plan's own policy holds
/// the failing commit's runs (`other = "operator"`) in a background daemon; a second
/// `wait` attaching while they are held returns 3 at once (from the daemon's welcome).
#[test]
fn wait_returns_3_when_a_run_is_held() {
    let tmp = tempfile::tempdir().unwrap();
    let text = plan_text(&[("m/x", true), ("m/x", false)]);
    // The policy table goes before the first [[commits]]: after it, keys would belong there.
    let (head, commits) = text.split_at(text.find("[[commits]]").unwrap());
    let plan = tmp.path().join("plan.toml");
    std::fs::write(
        &plan,
        format!("{head}[policy.actions]\nother = \"operator\"\n{commits}"),
    )
    .unwrap();
    let store = tmp.path().join("store");
    let log = tmp.path().join("daemon.out");
    let mut d = background_daemon(&plan, &store, &log);
    let s = store.to_str().unwrap();
    // Until the daemon answers (a wait before it binds says no sweep runs: 1).
    let t0 = Instant::now();
    let (code, out, _) = loop {
        let r = bin(&["wait", "--timeout", "120", "--store", s]);
        if r.0 != 1 || t0.elapsed() > Duration::from_secs(30) {
            break r;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        code,
        3,
        "{out}\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert!(
        out.contains("held") || out.contains("wait for a decision"),
        "{out}"
    );
    let (code, out, _) = bin(&["wait", "--timeout", "5", "--store", s]);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("wait for a decision"), "{out}");
    let _ = bin(&["stop", "--now", "--store", s]);
    wait_exit(&mut d, 60, &log);
}
