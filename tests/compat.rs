//! What older nightshifts wrote, read by today's (#36): a store of schema v1 (whole run
//! documents per run) opens, migrates in place and gives the same `results` as the store
//! of the same night written today; and the daemon's messages as they are today are
//! pinned line by line (a message that changes shape fails here until `protocol::VERSION`
//! is considered and the fixture written again), while protocol v1's lines still read.
//!
//! The fixtures are checked in (`tests/fixtures/compat/`). `NIGHTSHIFT_UPDATE_FIXTURES=1
//! cargo test --test compat` writes them again from a sim night of today's binary.

use base64::Engine as _;
use nightshift::daemon::protocol::{self, ClientMsg, DaemonMsg};
use nightshift::store::{sled::SledBackend, Backend, Store, Tree};
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/compat")
}

fn updating() -> bool {
    std::env::var_os("NIGHTSHIFT_UPDATE_FIXTURES").is_some()
}

fn ns(args: &[&str], dir: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_nightshift"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run nightshift");
    assert!(
        out.status.code() == Some(0),
        "{args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const PLAN: &str = "schema_version = 1\nname = \"compat\"\n[defaults]\nvariants = [\"baseline\", \"human\"]\nrepeats = 2\n\
[[commits]]\ncommit = \"0000000000000000000000000000000000abc001\"\nparent = \"0000000000000000000000000000000000def001\"\ngpu_config = \"H100:1\"\n\
perf_command = '''python benchmarks/benchmark_serving.py --model m/x1'''\n\
[[commits]]\ncommit = \"0000000000000000000000000000000000abc002\"\nparent = \"0000000000000000000000000000000000def002\"\ngpu_config = \"H100:1\"\n\
perf_command = '''python benchmarks/benchmark_throughput.py --model m/x2 --input-len 64 --output-len 64'''\n";

/// A tree's entries as (key, value) in base64.
type Dump = Vec<(String, String, String)>;

fn b64(b: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(b)
}

fn unb64(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD.decode(s).unwrap()
}

fn tree_name(t: Tree) -> &'static str {
    match t {
        Tree::Meta => "meta",
        Tree::Events => "events",
        Tree::Runs => "runs",
    }
}

/// Today's sim night, written as schema v1 kept it: every Meta entry but the schema (set
/// to 1), the event log as is, and a whole run document per run in place of its summary.
fn make_v1_dump(dir: &Path) -> (Dump, String) {
    std::fs::write(dir.join("p.toml"), PLAN).unwrap();
    ns(
        &[
            "run",
            "p.toml",
            "--headless",
            "--runtime",
            "sim",
            "--speed",
            "max",
            "--seed",
            "3",
            "--store",
            "v2",
        ],
        dir,
    );
    let results = ns(&["results", "--store", "v2"], dir);
    let store = Store::open(&dir.join("v2"), false).unwrap();
    let docs = store.docs().unwrap();
    drop(store);
    let backend = SledBackend::open(&dir.join("v2")).unwrap();
    let mut dump: Dump = Vec::new();
    for t in [Tree::Meta, Tree::Events] {
        backend
            .scan(t, &mut |k, v| {
                let v = if t == Tree::Meta && k == b"schema_version" {
                    1u32.to_be_bytes().to_vec()
                } else {
                    v.to_vec()
                };
                dump.push((tree_name(t).into(), b64(k), b64(&v)));
                Ok(())
            })
            .unwrap();
    }
    for (k, d) in &docs {
        dump.push((
            "runs".into(),
            b64(k.as_bytes()),
            b64(&serde_json::to_vec(d).unwrap()),
        ));
    }
    (dump, results)
}

#[test]
fn a_v1_store_opens_migrates_and_gives_the_same_results() {
    let store_fixture = fixtures().join("store-v1.json");
    let results_fixture = fixtures().join("store-v1.results.txt");
    if updating() {
        let tmp = tempfile::tempdir().unwrap();
        let (dump, results) = make_v1_dump(tmp.path());
        std::fs::create_dir_all(fixtures()).unwrap();
        std::fs::write(&store_fixture, serde_json::to_string_pretty(&dump).unwrap()).unwrap();
        std::fs::write(&results_fixture, results).unwrap();
    }
    let dump: Dump =
        serde_json::from_str(&std::fs::read_to_string(&store_fixture).unwrap()).unwrap();
    let want = std::fs::read_to_string(&results_fixture).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("old");
    std::fs::create_dir_all(&dir).unwrap();
    {
        let b = SledBackend::open(&dir).unwrap();
        for (t, k, v) in &dump {
            let tree = match t.as_str() {
                "meta" => Tree::Meta,
                "events" => Tree::Events,
                _ => Tree::Runs,
            };
            b.put(tree, &unb64(k), &unb64(v)).unwrap();
        }
        b.flush().unwrap();
        assert_eq!(
            b.get(Tree::Meta, b"schema_version").unwrap(),
            Some(1u32.to_be_bytes().to_vec()),
            "the fixture is a v1 store"
        );
    }
    // Opened by today's store: migrated in place, then read as any store.
    let s = Store::open(&dir, false).unwrap();
    assert_eq!(s.runs().len(), 8);
    drop(s);
    let b = SledBackend::open(&dir).unwrap();
    assert_eq!(
        b.get(Tree::Meta, b"schema_version").unwrap(),
        Some(nightshift::store::SCHEMA_VERSION.to_be_bytes().to_vec())
    );
    drop(b);
    let got = ns(&["results", "--store", "old"], tmp.path());
    assert_eq!(got, want, "the migrated v1 store reads differently");
}

/// Today's messages, one per line: what a daemon of this version sends and a client sends.
fn todays_lines() -> Vec<String> {
    use nightshift::event::{Command as Cmd, Envelope, Event, Finding};
    use nightshift::model::{Outcome, RunId, RunState, SkipBy, Stage};
    let plan = nightshift::plan::Plan::from_str_at(
        "p.toml",
        PLAN.to_string(),
        Path::new("."),
        Path::new("p.toml"),
    )
    .unwrap();
    let mut state = nightshift::state::SweepState::for_plan(&plan);
    let env = |seq: u64, event: Event| Envelope {
        seq,
        at_ms: 1_764_300_000_000 + seq,
        event,
    };
    let p = nightshift::requests::PerRequest {
        requests: 3,
        failed: 1,
        values: [
            vec![120.0, 150.0],
            vec![25.0, 45.0],
            vec![20.0, 30.0, 25.0],
            vec![],
        ],
    };
    let events = vec![
        env(
            1,
            Event::State {
                run: RunId(0),
                attempt: 1,
                from: RunState::Queued,
                to: RunState::Active {
                    stage: Stage::PreparingImage,
                },
                detail: None,
                gpus: vec![0],
                interrupted: false,
            },
        ),
        env(
            2,
            Event::Metric {
                run: RunId(0),
                attempt: 1,
                key: "output_throughput_tok_s".into(),
                value: 640.5,
            },
        ),
        env(
            3,
            Event::Requests {
                run: RunId(0),
                attempt: 1,
                requests: Box::new(nightshift::requests::Requests::of(&p, 7)),
            },
        ),
        env(
            4,
            Event::State {
                run: RunId(1),
                attempt: 0,
                from: RunState::Queued,
                to: RunState::Finished {
                    outcome: Outcome::skipped(SkipBy::Operator, "skipped by the operator"),
                },
                detail: Some("skipped by the operator".into()),
                gpus: vec![],
                interrupted: false,
            },
        ),
        env(
            5,
            Event::Drift {
                shift: Box::new(nightshift::stats::drift::Shift {
                    metric: "output_throughput_tok_s".into(),
                    key: "c/baseline/ref2".into(),
                    from_ms: 0,
                    to_ms: 7_200_000,
                    delta_pct: -6.1,
                    band_pct: 4.3,
                    calibrated: true,
                }),
            },
        ),
        env(
            6,
            Event::Diagnosed {
                run: RunId(2),
                attempt: 1,
                finding: Finding {
                    category: nightshift::category::Category::CudaOom,
                    evidence: "CUDA out of memory".into(),
                    action: nightshift::category::Action::Retry,
                    recipe: None,
                    reason: "r".into(),
                    predicted: false,
                    confidence: None,
                    telling: vec![],
                    kind: None,
                },
            },
        ),
    ];
    for e in &events {
        state.apply(e).unwrap();
    }
    let mut lines = vec![
        protocol::line(&ClientMsg::Hello {
            version: protocol::VERSION,
            want: protocol::Want::Attach,
        }),
        protocol::line(&ClientMsg::Command {
            command: Cmd::Skip { run: RunId(3) },
        }),
    ];
    for e in events {
        lines.push(protocol::line(&DaemonMsg::Event { env: e }));
    }
    lines.push(protocol::line(&DaemonMsg::Resync { state, dropped: 12 }));
    lines.push(protocol::line(&DaemonMsg::Refused {
        why: "not a command this daemon knows".into(),
    }));
    lines.push(protocol::line(&DaemonMsg::Output {
        text: "t".into(),
        error: None,
        code: 0,
    }));
    lines
}

/// A JSON value's shape: objects keep their keys, arrays their first element's shape,
/// numbers, strings and booleans only their kind.
fn shape(v: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::Object(o) => Value::Object(o.iter().map(|(k, v)| (k.clone(), shape(v))).collect()),
        Value::Array(a) => Value::Array(a.first().map(shape).into_iter().collect()),
        Value::Number(_) => Value::from(0),
        Value::String(_) => Value::from(""),
        other => other.clone(),
    }
}

/// Today's messages are pinned: each line of the fixture reads as today's types and
/// writes back whole, and today's messages have its shape. A change of shape fails
/// here: bump `protocol::VERSION` if an older client could misread it, then write the
/// fixture again.
#[test]
fn todays_messages_read_and_write_as_pinned() {
    let path = fixtures().join(format!("wire-v{}.jsonl", protocol::VERSION));
    if updating() {
        std::fs::create_dir_all(fixtures()).unwrap();
        std::fs::write(&path, todays_lines().concat()).unwrap();
    }
    let text = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "no {} for protocol {}: a new version writes its fixture (NIGHTSHIFT_UPDATE_FIXTURES=1)",
            path.display(),
            protocol::VERSION
        )
    });
    // The shape (keys, nesting, kinds of values), not the values: a statistic computed
    // differently changes numbers, a message changed changes its shape.
    let today = todays_lines();
    assert_eq!(text.lines().count(), today.len());
    for (pinned, now) in text.lines().zip(&today) {
        let (a, b): (serde_json::Value, serde_json::Value) = (
            serde_json::from_str(pinned).unwrap(),
            serde_json::from_str(now).unwrap(),
        );
        assert_eq!(
            shape(&a),
            shape(&b),
            "a message changed shape: bump protocol::VERSION if an older client could misread it, then write the fixture again\npinned: {pinned}\ntoday:  {now}"
        );
    }
    for l in text.lines() {
        let back = match serde_json::from_str::<ClientMsg>(l) {
            Ok(c) => protocol::line(&c),
            Err(_) => protocol::line(
                &serde_json::from_str::<DaemonMsg>(l).unwrap_or_else(|e| panic!("{e}: {l}")),
            ),
        };
        // Read and written back whole (floats to within serde_json's last digit).
        let (a, b): (serde_json::Value, serde_json::Value) = (
            serde_json::from_str(back.trim_end()).unwrap(),
            serde_json::from_str(l).unwrap(),
        );
        assert_eq!(shape(&a), shape(&b), "{l}");
    }
}

/// Protocol v1's lines (before per-request data, drifts and typed skips) still read: the
/// new fields have defaults, a v1 skip's kind comes from its words.
#[test]
fn protocol_v1_lines_still_read() {
    let text = std::fs::read_to_string(fixtures().join("wire-v1.jsonl")).unwrap();
    let mut n = 0;
    for l in text.lines().filter(|l| !l.trim().is_empty()) {
        let m: DaemonMsg = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
        if let DaemonMsg::Event { env } = &m {
            if let nightshift::event::Event::State {
                to: nightshift::model::RunState::Finished { outcome },
                ..
            } = &env.event
            {
                assert_eq!(
                    outcome.skipped_by(),
                    Some(nightshift::model::SkipBy::Operator)
                );
            }
        }
        n += 1;
    }
    assert!(n >= 3, "{n} lines");
}
