//! The store end to end: a sim sweep SIGKILLed at random moments and restarted, then the
//! invariants; locked and damaged stores; resume, plan changes, --retry-failed.

use nightshift::model::RunState;
use nightshift::store::Store;
use rand::{Rng, SeedableRng};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

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

fn cmd(plan: &Path, store: &Path, speed: &str, extra: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args([
        "run",
        plan.to_str().unwrap(),
        "--runtime",
        "sim",
        "--headless",
        "--gpus",
        "2",
    ])
    .args(["--speed", speed, "--store", store.to_str().unwrap()])
    .args(extra)
    .stdin(Stdio::null());
    c
}

fn run_ok(plan: &Path, store: &Path, extra: &[&str]) -> (i32, String, String) {
    let o = cmd(plan, store, "max", extra).output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into(),
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

/// Every run: terminal, attempts numbered 1..=n with none lost, every attempt but the last
/// ended, at most one success, and the event log agrees.
/// `reruns`: the test re-ran finished runs on purpose (`--rerun-changed`), so a run may
/// hold more than one successful attempt — each still exactly once.
fn check_invariants(store: &Path, reruns: bool) {
    let s = Store::open(store, false).unwrap();
    let events = s.events().unwrap();
    for d in s.docs().unwrap().values() {
        assert!(
            d.record.state.is_terminal(),
            "{}: {}",
            d.key,
            d.record.state
        );
        let started: Vec<u32> = d
            .attempts
            .iter()
            .filter(|a| a.started_ms.is_some())
            .map(|a| a.attempt)
            .collect();
        let expect: Vec<u32> = (1..=started.len() as u32).collect();
        assert_eq!(started, expect, "{}: attempts {:?}", d.key, d.attempts);
        for a in &d.attempts {
            assert!(
                a.end.is_some(),
                "{} attempt {} never ended",
                d.key,
                a.attempt
            );
        }
        let successes = d
            .attempts
            .iter()
            .filter(|a| a.status() == "success")
            .count();
        assert!(reruns || successes <= 1, "{}: {successes} successes", d.key);
        let last = d.attempts.last().expect("an attempt or a skip");
        assert_eq!(last.end.as_ref(), Some(&d.record.state), "{}", d.key);
        // Every attempt the event log saw start is in the doc, and each ended once.
        let mut starts = 0;
        let mut ends = 0;
        for (_, e) in events
            .iter()
            .filter(|(_, e)| e.key.as_deref() == Some(&d.key))
        {
            if let nightshift::event::Event::State { from, to, .. } = &e.env.event {
                if *from == RunState::Queued && to.is_active() {
                    starts += 1;
                }
                if to.is_terminal() && !from.is_terminal() {
                    ends += 1;
                }
            }
        }
        assert_eq!(starts, started.len(), "{}", d.key);
        assert!(ends >= 1, "{}", d.key);
    }
}

#[test]
fn crash_loop_loses_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let commits: Vec<(String, &str)> = (0..12).map(|i| (format!("c{i:07x}"), "")).collect();
    let refs: Vec<(&str, &str)> = commits.iter().map(|(c, e)| (c.as_str(), *e)).collect();
    let plan = write_plan(tmp.path(), &plan_text(&refs));
    let store = tmp.path().join("store");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(6);
    let mut kills = 0;
    for _ in 0..40 {
        let mut child = cmd(&plan, &store, "400", &[])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // A debug build takes 100–300 ms to reach the store (more on a loaded CI box): most
        // kills should land after that, some before.
        std::thread::sleep(Duration::from_millis(rng.random_range(100..600)));
        match child.try_wait().unwrap() {
            Some(_) => break,
            None => {
                child.kill().unwrap(); // SIGKILL
                child.wait().unwrap();
                kills += 1;
            }
        }
        if kills >= 25 {
            break;
        }
    }
    assert!(kills >= 20, "only {kills} kills");
    let (code, out, err) = run_ok(&plan, &store, &[]);
    assert!(code == 0, "final run: {code}\n{out}\n{err}");
    check_invariants(&store, false);
    let s = Store::open(&store, false).unwrap();
    assert_eq!(s.docs().unwrap().len(), 36);
    // Most kills land after the store was opened (a kill before that, on a loaded box,
    // leaves no life behind): the sweep was resumed many times.
    assert!(s.life() > kills / 2, "{} lives for {kills} kills", s.life());
}

#[test]
fn locked_store_is_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = write_plan(tmp.path(), &plan_text(&[("c1234567", "")]));
    let store = tmp.path().join("store");
    let held = Store::open(&store, true).unwrap();
    let (code, _, err) = run_ok(&plan, &store, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("in use by another nightshift"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // `results` reads a store in use from a snapshot copy.
    let o = Command::new(BIN)
        .args(["results", "--store"])
        .arg(&store)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    drop(held);
    let o = Command::new(BIN)
        .args(["results", "--store"])
        .arg(&store)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
}

#[test]
fn damaged_store_is_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = write_plan(tmp.path(), &plan_text(&[("c1234567", "")]));
    // Garbage where a store should be.
    let junk = tmp.path().join("junk");
    std::fs::create_dir_all(&junk).unwrap();
    std::fs::write(junk.join("notes.txt"), "hello").unwrap();
    let (code, _, err) = run_ok(&plan, &junk, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("damaged"), "{err}");
    // A real store whose files were overwritten with garbage.
    let store = tmp.path().join("store");
    assert_eq!(run_ok(&plan, &store, &[]).0, 0);
    for f in ["db", "conf"] {
        std::fs::write(store.join(f), vec![0xA5u8; 4096]).unwrap();
    }
    let (code, _, err) = run_ok(&plan, &store, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("error: store"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let o = Command::new(BIN)
        .args(["results", "--store"])
        .arg(&store)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

fn results_of(store: &Path) -> (i32, String, String) {
    let o = Command::new(BIN)
        .args(["results", "--format", "csv", "--store"])
        .arg(store)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into(),
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

/// A store the database engine refuses: both `run` and `results` refuse it naming the
/// salvage command, and `salvage` exports every run from the files' bytes.
#[test]
fn a_corrupt_store_is_refused_and_salvaged() {
    let tmp = tempfile::tempdir().unwrap();
    let commits = [("c1234567", ""), ("d1234567", ""), ("e1234567", "")];
    let plan = write_plan(tmp.path(), &plan_text(&commits));
    let store = tmp.path().join("store");
    assert_eq!(run_ok(&plan, &store, &[]).0, 0);
    // sled's config and the head of its log destroyed; the records further on survive.
    std::fs::write(store.join("conf"), vec![0xA5u8; 64]).unwrap();
    let mut db = std::fs::read(store.join("db")).unwrap();
    db[..512].fill(0);
    std::fs::write(store.join("db"), &db).unwrap();
    let before = std::fs::read(store.join("db")).unwrap();

    let (code, _, err) = run_ok(&plan, &store, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("nightshift salvage --store"), "{err}");
    let (code, _, err) = results_of(&store);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("nightshift salvage --store"), "{err}");

    let out = tmp.path().join("salvage.jsonl");
    let o = Command::new(BIN)
        .args(["salvage", "--store"])
        .arg(&store)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["salvaged"], "salvage");
    assert_eq!(lines[0]["method"], "raw_scan", "{err}");
    let mut keys: Vec<String> = lines
        .iter()
        .filter(|l| l["salvaged"] == "run")
        .map(|l| l["key"].as_str().unwrap().to_string())
        .collect();
    keys.sort();
    let mut want: Vec<String> = commits
        .iter()
        .flat_map(|(c, _)| ["agent:a", "baseline", "human"].map(|v| format!("{c}/{v}")))
        .collect();
    want.sort();
    assert_eq!(keys, want);
    // Every salvaged run is the version that ended, not an earlier one.
    for l in lines.iter().filter(|l| l["salvaged"] == "run") {
        let state = &l["record"]["state"];
        assert!(state.to_string().contains("finished"), "{l}");
    }
    assert!(lines.iter().any(|l| l["salvaged"] == "event"));
    // Salvage never writes to the store.
    assert_eq!(std::fs::read(store.join("db")).unwrap(), before);
}

/// 4–16 KiB of random bytes anywhere in the database: either nothing readable was lost (the
/// bytes hit dead space), or `run` and `results` refuse the store naming `salvage` and
/// `run` writes nothing. Never a resume on a store missing part of its history.
#[test]
fn random_damage_is_refused_or_harmless_never_written_on() {
    let tmp = tempfile::tempdir().unwrap();
    let commits: Vec<(String, &str)> = (0..12).map(|i| (format!("{i:x}abcdef1"), "")).collect();
    let refs: Vec<(&str, &str)> = commits.iter().map(|(c, e)| (c.as_str(), *e)).collect();
    let plan = write_plan(tmp.path(), &plan_text(&refs));
    let store = tmp.path().join("store");
    assert_eq!(run_ok(&plan, &store, &[]).0, 0);
    let salvage = |dir: &Path, out: &Path| {
        let o = Command::new(BIN)
            .args(["salvage", "--store"])
            .arg(dir)
            .arg("--out")
            .arg(out)
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        std::fs::read_to_string(out)
            .unwrap()
            .lines()
            .filter(|l| l.contains("\"salvaged\":\"event\"") || l.contains("\"salvaged\":\"run\""))
            .count()
    };
    let whole = salvage(&store, &tmp.path().join("whole.jsonl"));
    let size = std::fs::metadata(store.join("db")).unwrap().len() as usize;
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let (mut refused, mut harmless) = (0, 0);
    for i in 0..12 {
        let copy = tmp.path().join(format!("damaged-{i}"));
        std::fs::create_dir_all(&copy).unwrap();
        for f in ["db", "conf"] {
            std::fs::copy(store.join(f), copy.join(f)).unwrap();
        }
        let mut db = std::fs::read(copy.join("db")).unwrap();
        let len = [4096usize, 8192, 16384][rng.random_range(0..3)];
        let at = rng.random_range(0..size - len);
        rng.fill(&mut db[at..at + len]);
        std::fs::write(copy.join("db"), &db).unwrap();
        let (code, _, err) = run_ok(&plan, &copy, &[]);
        if code == 2 {
            assert!(err.contains("nightshift salvage --store"), "{err}");
            assert!(
                std::fs::read(copy.join("db")).unwrap() == db,
                "a refused store was written"
            );
            let (code, _, err) = results_of(&copy);
            assert_eq!(code, 2, "results read a store run refused: {err}");
            assert!(
                std::fs::read(copy.join("db")).unwrap() == db,
                "results wrote a damaged store"
            );
            refused += 1;
        } else {
            // Accepted: then nothing that was there before is missing.
            let now = salvage(&copy, &tmp.path().join(format!("s{i}.jsonl")));
            assert!(
                now >= whole,
                "damage at {at}+{len} accepted with {} records lost: {err}",
                whole - now
            );
            harmless += 1;
        }
    }
    assert!(refused > 0, "no damage was refused ({harmless} harmless)");
}

/// A store on a read-only mount (or another user's files) is still read.
#[test]
fn a_read_only_store_can_be_read() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = write_plan(tmp.path(), &plan_text(&[("c1234567", "")]));
    let store = tmp.path().join("store");
    assert_eq!(run_ok(&plan, &store, &[]).0, 0);
    let chmod = |mode: &str| {
        let ok = Command::new("chmod")
            .args(["-R", mode])
            .arg(tmp.path())
            .status()
            .unwrap()
            .success();
        assert!(ok);
    };
    chmod("a+rX,a-w");
    // root writes anywhere: read as nobody, for whom the files are read-only.
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
        .args(["results", "--format", "csv", "--store"])
        .arg(&store)
        .env("TMPDIR", "/tmp")
        .output()
        .unwrap();
    chmod("u+w");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("c1234567"));
}

#[test]
fn resume_keeps_finished_runs_and_detects_plan_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = write_plan(
        tmp.path(),
        &plan_text(&[("c1111111", ""), ("c2222222", "")]),
    );
    let store = tmp.path().join("store");
    assert_eq!(run_ok(&plan, &store, &[]).0, 0);
    let before = Store::open(&store, false).unwrap().docs().unwrap();
    // Same plan again: nothing re-runs.
    let (code, out, _) = run_ok(&plan, &store, &[]);
    assert_eq!(code, 0);
    assert!(out.contains("6 finished runs kept"), "{out}");
    assert_eq!(
        Store::open(&store, false).unwrap().docs().unwrap()["c1111111/human"].attempts,
        before["c1111111/human"].attempts
    );
    // A new commit, a removed one, a changed command.
    let plan = write_plan(
        tmp.path(),
        &plan_text(&[("c1111111", " --batch-size 8"), ("c3333333", "")]),
    );
    let (code, out, _) = run_ok(&plan, &store, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("3 new runs queued"), "{out}");
    assert!(
        out.contains("removed from the plan (kept in the store): c2222222/baseline"),
        "{out}"
    );
    assert!(out.contains("--rerun-changed"), "{out}");
    let s = Store::open(&store, false).unwrap();
    assert_eq!(
        s.docs().unwrap()["c1111111/human"].attempts,
        before["c1111111/human"].attempts
    );
    assert!(s.docs().unwrap()["c2222222/human"].removed);
    assert!(s.docs().unwrap()["c3333333/human"]
        .record
        .state
        .is_terminal());
    drop(s);
    let (code, out, _) = run_ok(&plan, &store, &["--rerun-changed"]);
    assert_eq!(code, 0, "{out}");
    let s = Store::open(&store, false).unwrap();
    let docs = s.docs().unwrap();
    let d = &docs["c1111111/human"];
    assert_eq!(
        d.attempts.len(),
        before["c1111111/human"].attempts.len() + 1,
        "{out}"
    );
    drop(s);
    check_invariants(&store, true);
}

#[test]
fn retry_failed_requeues_failures() {
    let tmp = tempfile::tempdir().unwrap();
    let mut text = plan_text(&[("c1111111", "")]);
    text.push_str("sim = { fail = \"no_metrics\", variants = [\"human\"] }\n");
    let plan = write_plan(tmp.path(), &text);
    let store = tmp.path().join("store");
    let _ = run_ok(&plan, &store, &[]);
    let s = Store::open(&store, false).unwrap();
    let docs = s.docs().unwrap();
    let d = &docs["c1111111/human"];
    assert!(matches!(d.record.state, RunState::Finished { .. }));
    assert_eq!(
        d.attempts.last().unwrap().status(),
        "failed",
        "{:?}",
        d.attempts
    );
    let n = d.attempts.len();
    drop(s);
    // A category that does not match re-queues nothing.
    let (_, out, _) = run_ok(&plan, &store, &["--retry-failed", "cuda_oom"]);
    assert!(!out.contains("re-queued c"), "{out}");
    let (_, out, err) = run_ok(&plan, &store, &["--retry-failed"]);
    assert!(
        out.contains("re-queued c1111111/human: --retry-failed"),
        "{out}{err}"
    );
    let s = Store::open(&store, false).unwrap();
    assert!(s.docs().unwrap()["c1111111/human"].attempts.len() > n);
    drop(s);
    check_invariants(&store, false);
    let (code, _, err) = run_ok(&plan, &store, &["--retry-failed", "bogus"]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn results_formats_and_show() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = write_plan(tmp.path(), &plan_text(&[("c1111111", "")]));
    let store = tmp.path().join("store");
    assert_eq!(run_ok(&plan, &store, &[]).0, 0);
    for f in ["table", "json", "jsonl", "csv", "md"] {
        let o = Command::new(BIN)
            .args(["results", "--format", f, "--store"])
            .arg(&store)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{f}");
        assert!(!o.stdout.is_empty());
    }
    let o = Command::new(BIN)
        .args([
            "results",
            "--format",
            "jsonl",
            "--filter",
            "variant=human",
            "--store",
        ])
        .arg(&store)
        .output()
        .unwrap();
    // One record per attempt of the one human run (a retried attempt adds a record).
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!lines.is_empty());
    assert!(lines.iter().all(|r| r["variant"] == "human"), "{lines:?}");
    let attempts: Vec<u64> = lines
        .iter()
        .map(|r| r["attempt"].as_u64().unwrap())
        .collect();
    assert_eq!(attempts, (1..=attempts.len() as u64).collect::<Vec<_>>());
    let o = Command::new(BIN)
        .args(["show", "c1111111", "--store"])
        .arg(&store)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("run c1111111/baseline") && text.contains("stage"),
        "{text}"
    );
    let o = Command::new(BIN)
        .args(["show", "nope0000", "--store"])
        .arg(&store)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}
