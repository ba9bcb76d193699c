//! `results` and `calibrate` end to end on sim sweeps: the calibrated band in the verdicts,
//! the report from run summaries equal to the report from the event log, checked options.
//! Apart from `store.rs`, whose crash loop counts kills against a timing budget that other
//! sweeps running beside it would eat.

use nightshift::store::Store;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_nightshift");

fn plan_text(commits: &[(&str, &str)]) -> String {
    let mut t = String::from(
        "schema_version = 1\nname = \"crash\"\n[defaults]\nvariants = [\"baseline\", \"human\", \"agent\"]\n[images]\norg = \"o\"\nhuman = \"{org}/h:{commit}\"\nbaseline = \"{org}/b:{commit}\"\nagent = \"{baseline_image}\"\n[[agents]]\nid = \"a\"\n",
    );
    for (c, extra) in commits {
        t.push_str(&format!(
            "[[commits]]\ncommit = \"{c}\"\nparent = \"{c}0000\"\nmodel = \"m/x\"\ngpu_config = \"H100:1\"\nperf_command = '''python benchmarks/benchmark_throughput.py --model m/x --input-len 256 --output-len 256{extra}'''\n"
        ));
    }
    t
}

fn write_plan(dir: &Path, text: &str) -> PathBuf {
    let p = dir.join("plan.toml");
    std::fs::write(&p, text).unwrap();
    p
}

fn run_ok(plan: &Path, store: &Path, extra: &[&str]) -> (i32, String, String) {
    let o = Command::new(BIN)
        .args([
            "run",
            plan.to_str().unwrap(),
            "--runtime",
            "sim",
            "--headless",
            "--gpus",
            "2",
        ])
        .args(["--speed", "max", "--store", store.to_str().unwrap()])
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into(),
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

#[test]
fn calibrate_saves_a_band_that_results_use() {
    let tmp = tempfile::tempdir().unwrap();
    let commits: Vec<(String, &str)> = (0..3).map(|i| (format!("d{i:07x}"), "")).collect();
    let refs: Vec<(&str, &str)> = commits.iter().map(|(c, e)| (c.as_str(), *e)).collect();
    let plan = write_plan(tmp.path(), &plan_text(&refs));
    let store = tmp.path().join("store");
    let o = Command::new(BIN)
        .args(["calibrate", plan.to_str().unwrap(), "--runtime", "sim"])
        .args(["--commits", "3", "--repeats", "4", "--gpus", "2", "--store"])
        .arg(&store)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("throughput_output_tok_s@unknown: ±"), "{out}");
    assert!(tmp.path().join("store-calibration").is_dir());
    assert_eq!(run_ok(&plan, &store, &[]).0, 0);
    let o = Command::new(BIN)
        .args(["results", "--store"])
        .arg(&store)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    // Single runs are judged by the calibrated band, and nothing says "uncalibrated".
    assert!(text.contains("(calibrate)"), "{text}");
    assert!(text.contains("noise band"), "{text}");
    assert!(!text.contains("threshold uncalibrated"), "{text}");
    // Bad usage is exit 2 with a message.
    let o = Command::new(BIN)
        .args(["calibrate", plan.to_str().unwrap(), "--repeats", "1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--repeats 2 or more"));
}

#[test]
fn results_from_run_summaries_match_results_from_the_event_log() {
    use nightshift::report;
    let tmp = tempfile::tempdir().unwrap();
    let commits: Vec<(String, &str)> = (0..4).map(|i| (format!("e{i:07x}"), "")).collect();
    let refs: Vec<(&str, &str)> = commits.iter().map(|(c, e)| (c.as_str(), *e)).collect();
    let plan = write_plan(
        tmp.path(),
        &plan_text(&refs).replace("[defaults]\n", "[defaults]\nrepeats = 3\n"),
    );
    let store = tmp.path().join("store");
    assert_eq!(run_ok(&plan, &store, &[]).0, 0);
    let s = Store::open(&store, false).unwrap();
    let full = s.docs().unwrap();
    let fast = s.summary_docs();
    let opts = report::Options::with_threshold(2.0);
    let a = report::render_table(&report::build(&s.in_order(&full), &opts));
    let b = report::render_table(&report::build(&s.in_order(&fast), &opts));
    assert_eq!(a, b);
    assert!(a.contains("n=3"), "{a}");
}

#[test]
fn results_options_are_checked_and_html_is_one_page() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = write_plan(tmp.path(), &plan_text(&[("f1111111", "")]));
    let store = tmp.path().join("store");
    assert_eq!(run_ok(&plan, &store, &[]).0, 0);
    for bad in [
        &["--alpha", "2"][..],
        &["--token-share", "-1"],
        &["--format", "pdf"],
    ] {
        let o = Command::new(BIN)
            .args(["results", "--store"])
            .arg(&store)
            .args(bad)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{bad:?}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("expected"),
            "{bad:?}"
        );
    }
    let o = Command::new(BIN)
        .args(["results", "--format", "html", "--alpha", "0.01", "--store"])
        .arg(&store)
        .output()
        .unwrap();
    let page = String::from_utf8_lossy(&o.stdout);
    assert!(page.starts_with("<!doctype html>") && page.ends_with("</html>"));
    assert!(page.contains("α=0.01"), "{page}");
    let o = Command::new(BIN)
        .args(["results", "--format", "json", "--store"])
        .arg(&store)
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(doc["summary"]["alpha"].as_f64().is_some());
    assert!(!doc["records"].as_array().unwrap().is_empty());
}

/// The table as the full report over the run summaries draws it (no kept rows).
fn full_table(store: &Path, judge: nightshift::report::Judge) -> String {
    nightshift::report::render_table(&full_report(store, judge))
}

fn full_report(store: &Path, judge: nightshift::report::Judge) -> nightshift::report::Report {
    use nightshift::report;
    let s = Store::open(store, false).unwrap();
    let docs = s.summary_docs();
    let mut opts = report::Options::of(judge);
    opts.calibration = s.calibration();
    report::build(&s.in_order(&docs), &opts)
}

fn results_cli(store: &Path, extra: &[&str]) -> String {
    results_logged(store, extra).0
}

/// `results`' text and how many commits' rows it rebuilt (from its debug log).
fn results_logged(store: &Path, extra: &[&str]) -> (String, usize) {
    let o = Command::new(BIN)
        .args(["results", "--store"])
        .arg(store)
        .args(extra)
        .env("NIGHTSHIFT_LOG", "debug")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    let rebuilt = err
        .lines()
        .find_map(|l| l.split("results: ").nth(1)?.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no count of rebuilt rows in {err}"));
    (String::from_utf8(o.stdout).unwrap(), rebuilt)
}

/// The table's rows are kept in the store between reads (the sweep's end keeps them, a
/// read keeps what it rebuilt): what `results` prints with kept rows, rebuilt rows or a
/// mix is the full report, and a row kept for another judge, a damaged entry or a commit
/// added since is never shown stale.
#[test]
fn kept_rows_read_as_the_full_report() {
    use nightshift::report::Judge;
    let tmp = tempfile::tempdir().unwrap();
    let commits: Vec<(String, &str)> = (0..5).map(|i| (format!("b{i:07x}"), "")).collect();
    let refs: Vec<(&str, &str)> = commits.iter().map(|(c, e)| (c.as_str(), *e)).collect();
    let text = plan_text(&refs).replace("[defaults]\n", "[defaults]\nrepeats = 2\n");
    let plan = write_plan(tmp.path(), &text);
    let store = tmp.path().join("store");
    assert_eq!(run_ok(&plan, &store, &[]).0, 0);
    let want = full_table(&store, Judge::default());
    assert!(want.contains("n=2"), "{want}");
    // The sweep's end kept every row: the morning's first read rebuilds none.
    assert_eq!(results_logged(&store, &[]), (want.clone(), 0));
    let md = nightshift::report::render_md(&full_report(&store, Judge::default()));
    assert_eq!(results_logged(&store, &["--format", "md"]), (md, 0));
    {
        let s = Store::open(&store, false).unwrap();
        let ids: Vec<&str> = s.commits_in_order().iter().map(|(c, _)| *c).collect();
        let kept = s.kept("table", &ids);
        assert_eq!(kept.len(), 5);
        assert!(kept.iter().all(Option::is_some), "every row kept");
        // A damaged entry is rebuilt, not shown.
        let mut entries: Vec<(&str, &[u8])> = ids
            .iter()
            .zip(&kept)
            .map(|(id, b)| (*id, b.as_deref().unwrap()))
            .collect();
        entries[1].1 = b"{\"inputs\": 1, torn";
        s.keep("table", &entries).unwrap();
    }
    // Only the damaged row is rebuilt.
    assert_eq!(results_logged(&store, &[]), (want.clone(), 1));
    // Another judge: none of the default judge's rows are reused.
    let strict = Judge {
        threshold: 5.0,
        ..Judge::default()
    };
    let at5 = results_cli(&store, &["--threshold", "5"]);
    assert_eq!(at5, full_table(&store, strict));
    assert!(at5.contains("exceeds 5%"), "{at5}");
    assert_eq!(results_cli(&store, &[]), want);
    // A commit added to the plan and run: its row appears, the others still read right.
    let mut more = refs.clone();
    more.push(("b9999999", ""));
    let text = plan_text(&more).replace("[defaults]\n", "[defaults]\nrepeats = 2\n");
    let plan = write_plan(tmp.path(), &text);
    assert_eq!(run_ok(&plan, &store, &[]).0, 0);
    let (after, rebuilt) = results_logged(&store, &[]);
    assert_eq!(after, full_table(&store, Judge::default()));
    assert_eq!(rebuilt, 0, "the second sweep's end kept its rows");
    assert!(after.contains("b9999999"), "{after}");
}

/// The daemon answers `results` from its live store while runs change under it: at every
/// event of a sweep the kept table must read as a full rebuild (a run changed in memory and
/// not yet written is never served from a kept row).
#[test]
fn the_kept_table_is_never_stale_during_a_sweep() {
    use nightshift::daemon::results::results_text;
    use nightshift::engine::{Engine, EngineOptions};
    use nightshift::event::Envelope;
    use nightshift::observer::Observer;
    use nightshift::report;
    use nightshift::store::resume::{self, ResumeOptions};
    use std::sync::{Arc, Mutex};

    struct Check {
        store: Arc<Mutex<Store>>,
        reads: usize,
        stale: Vec<String>,
    }
    impl Observer for Check {
        fn on_event(&mut self, env: &Envelope) -> anyhow::Result<()> {
            let s = self.store.lock().unwrap();
            let kept = results_text(&s, "table", &[], report::Judge::default())?;
            let docs = s.summary_docs();
            let opts = report::Options::of(report::Judge::default());
            let full = report::render_table(&report::build(&s.in_order(&docs), &opts));
            self.reads += 1;
            if kept != full && self.stale.len() < 3 {
                self.stale
                    .push(format!("after {:?}:\n{kept}\n---\n{full}", env.event));
            }
            Ok(())
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let plan = Arc::new(nightshift::plan::synthetic::synthetic_plan_of(
        24,
        &["serving"],
    ));
    let store = Store::open(&tmp.path().join("store"), true).unwrap();
    let (obs, state, _) = resume::prepare(store, &plan, &ResumeOptions::default()).unwrap();
    let shared = obs.shared();
    let report = Arc::new(Mutex::new((0, Vec::new())));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let out = report.clone();
    rt.block_on(async move {
        let (engine, _c) = Engine::new(
            plan.clone(),
            Arc::new(nightshift::runtime::sim::SimRuntime::new(
                nightshift::runtime::sim::Speed::Max,
            )),
            EngineOptions {
                gpus: 2,
                seed: 3,
                wait_for_operator: false,
            },
        );
        let mut engine = engine.with_state(state).with_time_scale(0.0);
        engine.observe(Box::new(obs));
        engine.observe(Box::new(Reporting(
            Check {
                store: shared,
                reads: 0,
                stale: Vec::new(),
            },
            out,
        )));
        engine
            .run(tokio_util::sync::CancellationToken::new())
            .await
            .unwrap();
    });
    let (reads, stale) = std::mem::take(&mut *report.lock().unwrap());
    assert!(reads > 100, "only {reads} reads");
    assert!(stale.is_empty(), "{}", stale.join("\n=====\n"));

    /// Hands the check's counts out when the engine drops its observers.
    struct Reporting(Check, Arc<Mutex<(usize, Vec<String>)>>);
    impl Observer for Reporting {
        fn on_event(&mut self, env: &Envelope) -> anyhow::Result<()> {
            self.0.on_event(env)
        }
    }
    impl Drop for Reporting {
        fn drop(&mut self) {
            *self.1.lock().unwrap() = (self.0.reads, std::mem::take(&mut self.0.stale));
        }
    }
}

/// A commit title and an agent id with control characters, as a TOML plan spells them.
fn hostile_plan(commit: &str) -> String {
    plan_text(&[(commit, "")])
        .replace("id = \"a\"", "id = \"a\\u001b[2J\\u0007\\u009b\"")
        .replace(
            "model = \"m/x\"",
            "title = \"\\u001b[2J\\u0007evil\\r\\n\\u009b31m\"\nmodel = \"m/x\"",
        )
}

/// What reached a terminal: none of the controls raw, and `shown` (them escaped).
fn assert_inert(what: &str, out: &str, shown: &str) {
    for c in ['\x1b', '\x07', '\r', '\u{9b}'] {
        assert!(!out.contains(c), "{what}: raw {c:?} in\n{out}");
    }
    assert!(out.contains(shown), "{what}: no {shown} in\n{out}");
}

/// A plan's title and agent id with escape sequences, a bell, a carriage return and a C1
/// control: the headless lines, `results` (every format), `show`, `digest` and the
/// digests the sweep writes show them escaped, never raw.
#[test]
fn hostile_plan_text_reaches_no_output_raw() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = write_plan(tmp.path(), &hostile_plan("a1111111"));
    let store = tmp.path().join("store");
    let (code, out, err) = run_ok(&plan, &store, &[]);
    assert_eq!(code, 0, "{out}{err}");
    let title = "\\x1b[2J\\x07evil\\x0d\\x0a\\x9b31m";
    let page = "\\x1b[2J\\x07evil\\x0d";
    assert_inert("headless", &out, "agent:a\\x1b[2J\\x07\\x9b");
    for (args, shown) in [
        (&["results"][..], title),
        (&["results", "--format", "md"], title),
        (&["results", "--format", "html"], page),
        (&["show", "a1111111"], title),
        // Data formats: JSON's own escapes (the same values), CSV's fields as the table's.
        (&["results", "--format", "json"], "\\u009b31m"),
        (
            &["results", "--format", "jsonl"],
            "agent:a\\u001b[2J\\u0007\\u009b",
        ),
        (&["results", "--format", "csv"], "agent:a\\x1b[2J\\x07\\x9b"),
        (
            &["show", "a1111111", "--json"],
            "agent:a\\u001b[2J\\u0007\\u009b",
        ),
        (&["digest"], title),
        (&["digest", "--format", "html"], page),
    ] {
        let o = Command::new(BIN)
            .args(args)
            .arg("--store")
            .arg(&store)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {o:?}");
        assert_inert(&format!("{args:?}"), &text, shown);
    }
    for (file, shown) in [("digest.md", title), ("digest.html", page)] {
        let text = std::fs::read_to_string(store.join(file)).unwrap();
        assert_inert(file, &text, shown);
    }
}

/// A store holding a socket (a daemon's, left behind) and a link, in a directory nobody
/// may write: `results` reads it from a snapshot of its regular files, taken elsewhere.
#[test]
fn a_read_only_store_with_a_socket_is_read_from_a_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = write_plan(tmp.path(), &plan_text(&[("b1111111", "")]));
    let store = tmp.path().join("store");
    assert_eq!(run_ok(&plan, &store, &[]).0, 0);
    // A daemon's socket, left by one that died: nobody listens.
    drop(std::os::unix::net::UnixListener::bind(store.join("nightshift.sock")).unwrap());
    // A link to a directory elsewhere: not followed, not copied.
    std::fs::create_dir(tmp.path().join("elsewhere")).unwrap();
    std::os::unix::fs::symlink(tmp.path().join("elsewhere"), store.join("link")).unwrap();
    let listing = |d: &Path| {
        let mut v: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        v.sort();
        v
    };
    let before = listing(&store);
    let chmod = |mode: &str, p: &Path| {
        let ok = Command::new("chmod")
            .args(["-R", mode])
            .arg(p)
            .status()
            .unwrap()
            .success();
        assert!(ok);
    };
    chmod("a+rX", tmp.path());
    chmod("a-w", &store);
    // root writes anywhere: read as nobody, for whom the store is read-only.
    let root = unsafe { libc::geteuid() } == 0;
    let mut c = if root {
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
            BIN,
        ]);
        c
    } else {
        Command::new(BIN)
    };
    let o = c
        .args(["results", "--store"])
        .arg(&store)
        .env("TMPDIR", "/tmp")
        .output()
        .unwrap();
    chmod("u+w", &store);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("b1111111"));
    assert_eq!(listing(&store), before, "nothing is written into the store");
}

/// Reads never stall the night (#23): while `results` is computed on a 10,000-run store,
/// the engine — which flushes the same store at every state transition — goes on
/// scheduling. The query takes the live store's lock only to copy the run summaries
/// (`daemon::server::answer_query`, the daemon's own path); were the lock held for the
/// computation, the engine's store observer would wait the whole query out.
#[test]
fn the_engine_keeps_scheduling_while_results_runs_on_a_10k_run_store() {
    use nightshift::daemon::protocol::Want;
    use nightshift::engine::{Engine, EngineOptions};
    use nightshift::event::Envelope;
    use nightshift::store::resume::{self, ResumeOptions};
    use nightshift::store::Store;
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};
    let tmp = tempfile::tempdir().unwrap();
    let plan = Arc::new(nightshift::plan::synthetic::synthetic_plan_of(
        10_000,
        &["serving"],
    ));
    let store = Store::open(&tmp.path().join("store"), true).unwrap();
    let (obs, state, _) = resume::prepare(store, &plan, &ResumeOptions::default()).unwrap();
    assert!(obs.state().runs.len() >= 10_000);
    let shared = obs.shared();
    let transitions: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let seen = transitions.clone();
    let stop = tokio_util::sync::CancellationToken::new();
    let stopping = stop.clone();
    let engine = std::thread::spawn(move || {
        nightshift::rt::block_on(async move {
            let (engine, _c) = Engine::new(
                plan.clone(),
                Arc::new(nightshift::runtime::sim::SimRuntime::new(
                    nightshift::runtime::sim::Speed::Max,
                )),
                EngineOptions {
                    gpus: 8,
                    seed: 3,
                    wait_for_operator: false,
                },
            );
            let mut engine = engine.with_state(state).with_time_scale(0.0);
            // The store first, as in the daemon: an event is seen after it is stored.
            engine.observe(Box::new(obs));
            engine.observe(Box::new(move |env: &Envelope| {
                if matches!(env.event, nightshift::event::Event::State { .. }) {
                    seen.lock().unwrap().push(Instant::now());
                }
                Ok(())
            }));
            engine.run(stopping).await.unwrap();
        })
    });
    let count = |t: &Arc<Mutex<Vec<Instant>>>| t.lock().unwrap().len();
    let t0 = Instant::now();
    // Well into the night: many runs have results to compare.
    while count(&transitions) < 3000 {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "the engine never got going"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let q0 = Instant::now();
    let out = nightshift::daemon::server::answer_query(
        &shared,
        Want::Results {
            format: "table".into(),
            filter: None,
            judge: Default::default(),
        },
    )
    .expect("results");
    let q1 = Instant::now();
    stop.cancel();
    engine.join().unwrap();
    assert!(out.lines().count() > 1000, "a results table of 10,000 runs");
    let during: Vec<Instant> = transitions
        .lock()
        .unwrap()
        .iter()
        .copied()
        .filter(|t| *t >= q0 && *t <= q1)
        .collect();
    let took = q1 - q0;
    let longest_gap = during
        .windows(2)
        .map(|w| w[1] - w[0])
        .chain(during.first().map(|f| *f - q0))
        .chain(during.last().map(|l| q1 - *l))
        .max()
        .unwrap_or(took);
    eprintln!(
        "results on 10,000 runs took {took:?}; {} transitions meanwhile, longest gap {longest_gap:?}",
        during.len()
    );
    assert!(
        during.len() >= 5,
        "the engine made {} transitions during a {took:?} query",
        during.len()
    );
    assert!(
        longest_gap < took / 2,
        "the engine stood still {longest_gap:?} of a {took:?} query"
    );
}

/// Readers never take the writer's lock: with `results` in a loop on the store (a cron
/// digest, `watch results`), every `run` starts.
#[test]
fn run_starts_every_time_while_results_loops() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = write_plan(
        tmp.path(),
        &plan_text(&[("aaaa1111", ""), ("bbbb2222", "")]),
    );
    let store = tmp.path().join("store");
    let (code, out, err) = run_ok(&plan, &store, &[]);
    assert_eq!(code, 0, "{out}{err}");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (stop, store) = (stop.clone(), store.clone());
            std::thread::spawn(move || {
                let mut n = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let o = Command::new(BIN)
                        .args(["results", "--store", store.to_str().unwrap()])
                        .output()
                        .unwrap();
                    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
                    n += 1;
                }
                n
            })
        })
        .collect();
    for i in 0..8 {
        let (code, out, err) = run_ok(&plan, &store, &[]);
        assert!(
            code != 2 && !err.contains("in use"),
            "run {i} refused while results read: {code}\n{out}{err}"
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let reads: usize = readers.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(reads >= 8, "only {reads} results ran beside the runs");
}
