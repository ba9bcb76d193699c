//! The link against a scripted daemon on a real Unix socket: a daemon that dies without a
//! word and comes back is reconnected to (its state taken as a resync, commands go to the
//! new one); one that does not come back is given up on after the patience.

use super::*;
use crate::event::{Command, Envelope};
use crate::model::RunId;
use tokio::net::UnixListener;

fn meta(pid: u32) -> Meta {
    Meta {
        pid,
        sweep: "s".into(),
        plan_path: "p.toml".into(),
        store: "st".into(),
        log_dir: "logs".into(),
        runtime: "sim".into(),
        gpus: 1,
        window_closes_ms: None,
        run_prior_ms: None,
    }
}

fn welcome(pid: u32) -> String {
    protocol::line(&DaemonMsg::Welcome {
        version: protocol::VERSION,
        meta: meta(pid),
        plan_text: String::new(),
        state: SweepState::new(2),
        calibration: Default::default(),
        activity: Vec::new(),
    })
}

fn event(seq: u64, event: Event) -> String {
    protocol::line(&DaemonMsg::Event {
        env: Envelope {
            seq,
            at_ms: 1,
            event,
        },
    })
}

/// Accept one client on `listener`, read its hello, welcome it as daemon `pid`, say
/// `lines`, and hand back the connection's reader (for the commands it sends).
async fn serve_one(
    listener: &UnixListener,
    pid: u32,
    lines: &[String],
) -> (Lines<BufReader<OwnedReadHalf>>, OwnedWriteHalf) {
    let (s, _) = listener.accept().await.unwrap();
    let (r, mut w) = s.into_split();
    let mut r = BufReader::new(r).lines();
    let hello = r.next_line().await.unwrap().unwrap();
    assert!(hello.contains("hello"), "{hello}");
    w.write_all(welcome(pid).as_bytes()).await.unwrap();
    for l in lines {
        w.write_all(l.as_bytes()).await.unwrap();
    }
    (r, w)
}

fn drain(rx: &mut UnboundedReceiver<Incoming>) -> Vec<String> {
    let mut out = Vec::new();
    while let Ok(m) = rx.try_recv() {
        out.push(match m {
            Incoming::Event(env) => format!("event {}", env.seq),
            Incoming::State(_) => "state".into(),
            Incoming::Note(n) => format!("note {n}"),
        });
    }
    out
}

#[tokio::test]
async fn a_daemon_that_dies_without_a_word_is_waited_for_and_reconnected_to() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().to_path_buf();
    let path = protocol::socket_path(&store);
    let listener = UnixListener::bind(&path).unwrap();
    let daemon = tokio::spawn(async move {
        // The first daemon says one event and dies (its socket goes with it).
        let first = serve_one(&listener, 1, &[event(1, Event::Resumed)]).await;
        drop(first);
        drop(listener);
        std::fs::remove_file(&path).unwrap();
        tokio::time::sleep(Duration::from_millis(600)).await;
        // The second comes back on the same store, reads a command, and finishes.
        let listener = UnixListener::bind(&path).unwrap();
        let (mut r, mut w) = serve_one(&listener, 2, &[]).await;
        let command = r.next_line().await.unwrap().unwrap();
        let done = event(9, Event::SweepFinished { interrupted: false });
        w.write_all(done.as_bytes()).await.unwrap();
        command
    });
    let (conn, first) = connect(&store).await.unwrap();
    assert_eq!(first.meta.pid, 1);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (cmd_tx, cmd_rx) = tokio::sync::mpsc::unbounded_channel();
    let pumping = tokio::spawn(pump(
        store.clone(),
        conn,
        tx,
        cmd_rx,
        Duration::from_secs(10),
        None,
    ));
    // Once reconnected, a command reaches the new daemon.
    let mut seen = Vec::new();
    while !seen
        .iter()
        .any(|s: &String| s.starts_with("note reconnected"))
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
        seen.extend(drain(&mut rx));
    }
    cmd_tx.send(Command::Skip { run: RunId(1) }).unwrap();
    let said = tokio::time::timeout(Duration::from_secs(10), pumping)
        .await
        .expect("the link ends when the sweep does")
        .unwrap();
    seen.extend(drain(&mut rx));
    assert_eq!(said, (true, None));
    let command = daemon.await.unwrap();
    assert!(command.contains("skip"), "{command}");
    assert_eq!(seen[0], "event 1");
    assert!(seen[1].starts_with("note the daemon went away"), "{seen:?}");
    assert_eq!(seen[2], "state");
    assert!(seen[3].contains("(pid 2)"), "{seen:?}");
    assert_eq!(seen[4], "event 9");
}

/// On tokio's paused clock: the minute of patience passes in no wall time.
#[tokio::test(start_paused = true)]
async fn a_daemon_that_does_not_come_back_is_given_up_on_after_the_patience() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().to_path_buf();
    let path = protocol::socket_path(&store);
    let listener = UnixListener::bind(&path).unwrap();
    let daemon = tokio::spawn(async move {
        drop(serve_one(&listener, 1, &[]).await);
        drop(listener);
        std::fs::remove_file(&path).unwrap();
    });
    let (conn, _) = connect(&store).await.unwrap();
    daemon.await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (_cmd_tx, cmd_rx) = tokio::sync::mpsc::unbounded_channel();
    let t0 = tokio::time::Instant::now();
    let said = pump(store, conn, tx, cmd_rx, PATIENCE, None).await;
    assert_eq!(said, (false, None));
    let waited = t0.elapsed();
    assert!(
        waited >= PATIENCE && waited < PATIENCE + Duration::from_secs(5),
        "{waited:?}"
    );
    let seen = drain(&mut rx);
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(seen[0].contains("waiting up to 60 s"), "{seen:?}");
}

#[tokio::test]
async fn a_daemon_that_says_the_sweep_ended_is_not_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().to_path_buf();
    let listener = UnixListener::bind(protocol::socket_path(&store)).unwrap();
    let stopped = event(
        u64::MAX,
        Event::Paused {
            reason: "the sweep stopped: disk full".into(),
            by: crate::model::PauseBy::Failure,
        },
    );
    let daemon = tokio::spawn(async move { drop(serve_one(&listener, 1, &[stopped]).await) });
    let (conn, _) = connect(&store).await.unwrap();
    daemon.await.unwrap();
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let (_cmd_tx, cmd_rx) = tokio::sync::mpsc::unbounded_channel();
    let said = tokio::time::timeout(
        Duration::from_secs(5),
        pump(store, conn, tx, cmd_rx, PATIENCE, None),
    )
    .await
    .expect("not waited for");
    assert_eq!(said, (false, Some("the sweep stopped: disk full".into())));
}

/// The daemon this client started has exited: its dropped socket is a crash to say now, not
/// a restart to wait a minute for (no "waiting" note, no reconnect).
#[tokio::test(start_paused = true)]
async fn its_own_daemon_exited_is_not_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().to_path_buf();
    let listener = UnixListener::bind(protocol::socket_path(&store)).unwrap();
    let daemon = tokio::spawn(async move { drop(serve_one(&listener, 1, &[]).await) });
    let (conn, _) = connect(&store).await.unwrap();
    daemon.await.unwrap();
    let own = Started::watch(std::process::Command::new("true").spawn().unwrap());
    // Its reaper is a real thread: wait (bounded) for it to see the exit.
    for _ in 0..200 {
        if own.has_exited() {
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    assert!(own.has_exited(), "`true` did not exit within 5 s");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (_cmd_tx, cmd_rx) = tokio::sync::mpsc::unbounded_channel();
    let said = pump(store, conn, tx, cmd_rx, PATIENCE, Some(own)).await;
    assert_eq!(said, (false, None));
    let seen = drain(&mut rx);
    assert!(seen.iter().all(|s| !s.contains("waiting")), "{seen:?}");
}
