//! The sweep daemon with the real binary: a sweep that outlives its terminal (tmux killed
//! as an SSH drop would), two clients attached at once over the socket, and a daemon
//! killed with -9 whose stale socket the next one takes over.

use nightshift::daemon::protocol::{self, ClientMsg, DaemonMsg, Want};
use nightshift::event::{Command as Cmd, Event};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

mod support;
use support::daemon::*;

#[test]
fn a_sweep_outlives_its_terminal_and_attaches_again() {
    if !require_tmux() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let plan = plan(tmp.path(), 30);
    let store = tmp.path().join("store");
    let s = store.to_str().unwrap();
    let first = Tmux::new(
        "first",
        &format!(
            "{BIN} run {} --runtime sim --gpus 2 --speed 5 --store {s}",
            plan.display()
        ),
    );
    wait_for("the TUI attached to the daemon", 30, || {
        first.screen().contains("queue")
    });
    // The SSH session drops: the terminal and every process in it get SIGHUP.
    first.kill_server();
    std::thread::sleep(Duration::from_millis(500));
    let (code, line) = status(&store);
    assert_eq!(code, 0, "the sweep must outlive its terminal: {line}");
    assert!(line.contains("night running"), "{line}");
    let second = Tmux::new("second", &format!("{BIN} attach --store {s}; sleep 30"));
    wait_for("progress after attaching again", 30, || {
        let sc = second.screen();
        sc.contains("queue") && sc.contains("done")
    });
    // q asks; d detaches and the sweep goes on.
    second.run(&["send-keys", "q"]);
    wait_for("the detach question", 10, || {
        second.screen().contains("leave the sweep?")
    });
    second.run(&["send-keys", "d"]);
    wait_for("the client to detach", 10, || {
        second.screen().contains("detached, the sweep goes on")
    });
    assert_eq!(status(&store).0, 0);
    let o = stop_now(&store);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (code, line) = status(&store);
    assert_eq!(code, 1, "{line}");
}

struct Client {
    r: BufReader<UnixStream>,
    w: UnixStream,
}

impl Client {
    fn attach(store: &Path) -> (Client, DaemonMsg) {
        let s = UnixStream::connect(protocol::socket_path(store)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut c = Client {
            r: BufReader::new(s.try_clone().unwrap()),
            w: s,
        };
        c.send(&ClientMsg::Hello {
            version: protocol::VERSION,
            want: Want::Attach,
        });
        let first = c.next();
        (c, first)
    }
    fn send(&mut self, m: &ClientMsg) {
        self.w.write_all(protocol::line(m).as_bytes()).unwrap();
    }
    fn next(&mut self) -> DaemonMsg {
        let mut l = String::new();
        self.r.read_line(&mut l).unwrap();
        serde_json::from_str(&l).unwrap_or_else(|e| panic!("{e}: {l:?}"))
    }
    fn until(&mut self, what: &str, mut ok: impl FnMut(&Event) -> bool) {
        for _ in 0..100_000 {
            if let DaemonMsg::Event { env } = self.next() {
                if ok(&env.event) {
                    return;
                }
            }
        }
        panic!("no {what}");
    }
}

#[test]
fn two_clients_see_the_same_sweep_and_either_may_command() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = plan(tmp.path(), 40);
    let store = tmp.path().join("store");
    let mut daemon = headless(&plan, &store, "5");
    wait_for("the daemon's socket", 30, || {
        UnixStream::connect(protocol::socket_path(&store)).is_ok()
    });
    let (mut a, wa) = Client::attach(&store);
    let (mut b, wb) = Client::attach(&store);
    for w in [&wa, &wb] {
        match w {
            DaemonMsg::Welcome { meta, state, .. } => {
                assert_eq!(meta.sweep, "night");
                assert_eq!(state.runs.len(), 80);
            }
            other => panic!("expected a welcome, got {other:?}"),
        }
    }
    // The socket is the owner's alone.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(protocol::socket_path(&store))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0, "socket mode {mode:o}");
    // One pauses; both see it.
    b.send(&ClientMsg::Command {
        command: Cmd::Pause,
    });
    a.until("pause", |e| matches!(e, Event::Paused { .. }));
    b.until("pause", |e| matches!(e, Event::Paused { .. }));
    let (_, line) = status(&store);
    assert!(line.contains("paused"), "{line}");
    // The other resumes; both see it.
    a.send(&ClientMsg::Command {
        command: Cmd::Resume,
    });
    a.until("resume", |e| matches!(e, Event::Resumed));
    b.until("resume", |e| matches!(e, Event::Resumed));
    // `results` and `show` are answered by the live daemon from its store, not a copy.
    let r = Command::new(BIN)
        .args([
            "results",
            "--store",
            store.to_str().unwrap(),
            "--format",
            "jsonl",
        ])
        .output()
        .unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&r.stdout),
        String::from_utf8_lossy(&r.stderr),
    );
    assert!(r.status.success(), "{err}");
    assert!(!err.contains("snapshot"), "{err}");
    // One record per attempt: the two runs in flight, as the daemon sees them now.
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(out.contains("\"status\":\"running\""), "{out}");
    let r = Command::new(BIN)
        .args(["digest", "--store", store.to_str().unwrap()])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&r.stdout);
    assert!(r.status.success());
    assert!(out.contains("80 runs: 78 queued, 2 running"), "{out}");
    let r = Command::new(BIN)
        .args([
            "show",
            "c0000000/baseline",
            "--store",
            store.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(r.status.success());
    assert!(String::from_utf8_lossy(&r.stdout).contains("c0000000/baseline"));
    let r = Command::new(BIN)
        .args(["show", "nope", "--store", store.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(2));
    // Runs by their number, as the screens name them.
    let r = Command::new(BIN)
        .args(["show", "#1", "--store", store.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&r.stdout).starts_with("run c0000000/human"));
    for bad in [
        &["show", "#80"][..],
        &["show", "#x"],
        &["results", "--filter", "status=bogus"],
    ] {
        let r = Command::new(BIN)
            .args(bad)
            .args(["--store", store.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(r.status.code(), Some(2), "{bad:?}");
    }
    // A client of another protocol version is refused, with why.
    let s = UnixStream::connect(protocol::socket_path(&store)).unwrap();
    let mut old = Client {
        r: BufReader::new(s.try_clone().unwrap()),
        w: s,
    };
    old.send(&ClientMsg::Hello {
        version: protocol::VERSION + 1,
        want: Want::Status,
    });
    assert!(matches!(old.next(), DaemonMsg::Refused { .. }));
    stop_now(&store);
    let _ = daemon.wait();
}

#[test]
fn a_killed_daemons_socket_is_taken_over() {
    let (_tmp, plan, store, mut daemon) = started(6, "5");
    daemon.kill().unwrap(); // SIGKILL: the socket file stays
    daemon.wait().unwrap();
    assert!(protocol::socket_path(&store).exists());
    let (code, line) = status(&store);
    assert_eq!(code, 1, "{line}");
    assert!(line.contains("its daemon is gone"), "{line}");
    // A second daemon may not start while one is alive…
    let mut again = headless(&plan, &store, "max");
    let t0 = Instant::now();
    let code = loop {
        if let Some(s) = again.try_wait().unwrap() {
            break s.code();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the resumed sweep hangs"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    // …but a dead one's store is taken over and the sweep finishes.
    assert_eq!(code, Some(0));
    assert!(!protocol::socket_path(&store).exists());
    let o = Command::new(BIN)
        .args([
            "results",
            "--store",
            store.to_str().unwrap(),
            "--format",
            "jsonl",
        ])
        .output()
        .unwrap();
    // Every attempt is a record; an interrupted one is not an outcome.
    let mut finals = std::collections::BTreeMap::<String, usize>::new();
    for l in String::from_utf8_lossy(&o.stdout).lines() {
        let r: serde_json::Value = serde_json::from_str(l).unwrap();
        let n = finals
            .entry(r["key"].as_str().unwrap().to_string())
            .or_default();
        if r["status"] != "interrupted" {
            *n += 1;
        }
    }
    assert_eq!(finals.len(), 12, "{finals:?}");
    assert!(
        finals.values().all(|n| *n == 1),
        "one final outcome per run: {finals:?}"
    );
}

#[test]
fn a_second_daemon_on_a_live_store_is_refused() {
    let (_tmp, plan, store, mut daemon) = started(40, "2");
    let o = Command::new(BIN)
        .args([
            "run",
            plan.to_str().unwrap(),
            "--runtime",
            "sim",
            "--headless",
        ])
        .args(["--store", store.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("already running") && err.contains("attach"),
        "{err}"
    );
    stop_now(&store);
    let _ = daemon.wait();
}

/// On the Docker runtime, a box where NVML sees no GPU is a start error naming the cause
/// (not a night of skipped runs); `--gpus N` makes N slots without device requests.
#[test]
fn no_visible_gpu_is_an_error_at_start() {
    if nightshift::runtime::docker::gpu_census().is_ok() {
        eprintln!("SKIP: this box has GPUs");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let plan = plan(tmp.path(), 1);
    let o = Command::new(BIN)
        .args([
            "run",
            plan.to_str().unwrap(),
            "--headless",
            "--runtime",
            "docker",
        ])
        .args(["--store", tmp.path().join("store").to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    // Without Docker the error is Docker's (exit 1); with it, the GPU's (exit 2).
    if err.contains("Docker is not reachable") {
        assert!(std::env::var("CI").map_or(true, |v| v != "true"), "{err}");
        return;
    }
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("no GPU visible") && err.contains("--gpus N"),
        "{err}"
    );
}

/// Racing `run`s on a store with a stale socket (a daemon killed with -9): one daemon binds
/// and stays reachable, every other is refused; none removes the winner's socket.
#[test]
fn racing_runs_on_a_stale_store_leave_one_reachable_daemon() {
    let (_tmp, plan, store, mut first) = started(6, "5");
    first.kill().unwrap();
    first.wait().unwrap();
    assert!(protocol::socket_path(&store).exists());
    let mut racers: Vec<Daemon> = (0..4).map(|_| headless(&plan, &store, "0.05")).collect();
    // The losers end (refused); exactly one goes on serving.
    wait_for("the losing daemons to end", 60, || {
        racers
            .iter_mut()
            .map(|d| d.try_wait().unwrap().is_none())
            .filter(|alive| *alive)
            .count()
            <= 1
    });
    let codes: Vec<Option<i32>> = racers
        .iter_mut()
        .filter_map(|d| d.try_wait().unwrap().map(|s| s.code()))
        .collect();
    assert_eq!(codes.len(), 3, "{codes:?}");
    assert!(codes.iter().all(|c| *c == Some(2)), "{codes:?}");
    // The winner answers on the socket, now and a little later.
    for _ in 0..3 {
        let (code, line) = status(&store);
        assert_eq!(code, 0, "the surviving daemon is unreachable: {line}");
        std::thread::sleep(Duration::from_millis(300));
    }
    stop_now(&store);
}

/// `stop` in a run's first moments finds the starting daemon (it holds the store's lock
/// before its socket answers) instead of saying no sweep is running.
#[test]
fn stop_right_after_run_finds_the_starting_daemon() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = plan(tmp.path(), 6);
    let store = tmp.path().join("store");
    let mut d = headless(&plan, &store, "0.05");
    // As soon as the lock file exists (the daemon's first moment with the store).
    wait_for("the daemon's lock", 30, || {
        store.join("daemon.lock").exists()
    });
    let o = stop_now(&store);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("no sweep is running"), "{err}");
    assert_eq!(o.status.code(), Some(0), "{err}");
    let t0 = Instant::now();
    while d.try_wait().unwrap().is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the daemon did not stop"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// After the end, `status` says how the last night ended and where its digest is.
#[test]
fn status_after_the_end_gives_the_outcome_and_the_digest() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = plan(tmp.path(), 3);
    let store = tmp.path().join("store");
    let o = headless_to_end(&plan, &store);
    assert!(o.status.code().is_some(), "{o:?}");
    let (code, line) = status(&store);
    assert_eq!(code, 1, "{line}");
    assert!(line.contains("no sweep is running"), "{line}");
    assert!(
        line.contains("the last night on this store: 6 runs: 6 success"),
        "{line}"
    );
    assert!(
        line.contains(&format!("digest: {}", store.join("digest.md").display())),
        "{line}"
    );
}

/// A command's signer is the connection's uid as the kernel gives it (SO_PEERCRED); the
/// name a client sends is only a label beside it, so nobody acts in another's name.
#[test]
fn the_signer_is_the_peers_uid_with_its_name_beside_it() {
    let (_tmp, _plan, store, mut daemon) = started(40, "5");
    let (mut a, _) = Client::attach(&store);
    let uid = unsafe { libc::geteuid() };
    a.send(&ClientMsg::Command {
        command: Cmd::Signed {
            by: "root (uid 4242)".into(),
            saw: None,
            command: Box::new(Cmd::Pause),
        },
    });
    a.send(&ClientMsg::Command {
        command: Cmd::Resume,
    });
    let mut seen = Vec::new();
    a.until("both commands", |e| {
        if let Event::Operator { by, .. } = e {
            seen.push(by.clone().unwrap_or_default());
        }
        seen.len() >= 2
    });
    assert_eq!(seen[0], format!("root (uid {uid})"), "{seen:?}");
    assert_eq!(seen[1], format!("uid {uid}"), "{seen:?}");
    stop_now(&store);
    let _ = daemon.wait();
}

/// `nightshift wait` blocks until the night ends (0) or the limit passes (4); 1 when no
/// sweep runs.
#[test]
fn wait_blocks_until_the_night_ends_or_its_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let none = Command::new(BIN)
        .args([
            "wait",
            "--store",
            tmp.path().join("nothing").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(none.status.code(), Some(1), "{none:?}");
    let (_tmp, _plan, store, mut daemon) = started(40, "2");
    let o = Command::new(BIN)
        .args(["wait", "--timeout", "1", "--store", store.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let waiting = Command::new(BIN)
        .args([
            "wait",
            "--timeout",
            "120",
            "--store",
            store.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    stop_now(&store);
    let o = waiting.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let _ = daemon.wait();
}

/// An operator who paused the night has not said "go" when its daemon dies: the daemon
/// started next (as the TUI starts one) begins paused, runs nothing until a client resumes
/// it, and outlives a second death the same way; a `--headless` run started by hand, where
/// no client could lift the pause, is the operator's resume and says so.
#[test]
fn an_operators_pause_outlives_a_killed_daemon() {
    use nightshift::model::PauseBy;
    let tmp = tempfile::tempdir().unwrap();
    let plan = plan(tmp.path(), 20);
    let store = tmp.path().join("store");
    let mut first = background(&plan, &store, "2");
    wait_for("the first daemon", 30, || status(&store).0 == 0);
    let (mut c, _) = Client::attach(&store);
    c.send(&ClientMsg::Command {
        command: Cmd::Pause,
    });
    c.until("pause", |e| matches!(e, Event::Paused { .. }));
    first.kill().unwrap();
    first.wait().unwrap();

    for life in ["second", "third"] {
        // At full speed the 40 runs would end in a second or two if it were not paused.
        let mut next = background(&plan, &store, "max");
        wait_for(life, 30, || status(&store).0 == 0);
        let (c, welcome) = Client::attach(&store);
        let DaemonMsg::Welcome { state, .. } = welcome else {
            panic!("expected a welcome, got {welcome:?}");
        };
        // Welcomed into the pause, even before the new life's first event.
        let reason = state.paused.clone().unwrap_or_default();
        assert_eq!(state.paused_by, PauseBy::Operator, "{life}: {reason:?}");
        assert_eq!(reason.matches("kept from").count(), 1, "{life}: {reason}");
        std::thread::sleep(Duration::from_millis(1500));
        let (code, line) = status(&store);
        assert_eq!(code, 0, "{life}: {line}");
        assert!(line.contains("paused"), "{life}: {line}");
        assert!(
            next.try_wait().unwrap().is_none(),
            "{life} ended while paused"
        );
        drop(c);
        next.kill().unwrap();
        next.wait().unwrap();
    }

    let out = headless_to_end(&plan, &store);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("started by hand, resumes it"), "{text}");
    assert_eq!(out.status.code(), Some(0), "{text}");
}
