//! The TUI's line to a daemon over its socket: hello and welcome, the daemon's messages in
//! as the session's `Incoming`, the operator's commands out — and a daemon that goes away
//! without saying the sweep ended (a crash, `kill -9`, a restart of the box's service) is
//! waited for: the client reconnects with backoff, for a bounded time, and takes the new
//! daemon's state as a resync. A daemon that finished or stopped on a failure says so and
//! is not waited for.

use crate::daemon::client::Started;
use crate::daemon::protocol::{self, ClientMsg, DaemonMsg, Meta, Want};
use crate::event::Event;
use crate::state::SweepState;
use crate::tui::link::Incoming;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

/// How long an attached client waits for a daemon that went away to come back.
pub(crate) const PATIENCE: Duration = Duration::from_secs(60);

/// What a daemon says first.
pub(crate) struct Welcome {
    pub meta: Meta,
    pub plan_text: String,
    pub state: SweepState,
    pub calibration: crate::stats::Calibration,
    pub activity: Vec<crate::report::activity::Entry>,
}

/// Why no welcome came.
#[derive(Debug)]
pub(crate) enum NoWelcome {
    /// Nothing listens on the store's socket.
    NotRunning,
    /// The daemon answered with a refusal (another version, …).
    Refused(String),
    /// The connection broke or said something else first.
    Broken(String),
}

/// One connection to the daemon, welcomed.
pub(crate) struct Conn {
    lines: Lines<BufReader<OwnedReadHalf>>,
    w: OwnedWriteHalf,
}

/// Connect to the store's daemon and say hello (each step bounded: a daemon that accepts
/// and never answers is not waited on for ever).
pub(crate) async fn connect(store: &Path) -> Result<(Conn, Welcome), NoWelcome> {
    let bound = Duration::from_secs(30);
    let path = protocol::socket_path(store);
    let stream = tokio::net::UnixStream::connect(&path)
        .await
        .map_err(|_| NoWelcome::NotRunning)?;
    let (r, mut w) = stream.into_split();
    let mut lines = BufReader::new(r).lines();
    let hello = ClientMsg::Hello {
        version: protocol::VERSION,
        want: Want::Attach,
    };
    let said = tokio::time::timeout(bound, w.write_all(protocol::line(&hello).as_bytes())).await;
    if !matches!(said, Ok(Ok(()))) {
        return Err(NoWelcome::Broken("writing to the daemon failed".into()));
    }
    let first = match tokio::time::timeout(bound, lines.next_line()).await {
        Ok(Ok(Some(l))) => l,
        _ => {
            return Err(NoWelcome::Broken(
                "the daemon closed the connection before its snapshot".into(),
            ))
        }
    };
    match serde_json::from_str::<DaemonMsg>(&first) {
        Ok(DaemonMsg::Welcome {
            meta,
            plan_text,
            state,
            calibration,
            activity,
            ..
        }) => Ok((
            Conn { lines, w },
            Welcome {
                meta,
                plan_text,
                state,
                calibration,
                activity,
            },
        )),
        Ok(DaemonMsg::Refused { why }) => Err(NoWelcome::Refused(why)),
        other => Err(NoWelcome::Broken(format!(
            "unexpected first message from the daemon: {other:?}"
        ))),
    }
}

/// How one connection ended.
enum Ended {
    /// The sweep finished, or the daemon stopped on a failure and said why.
    Said {
        finished: bool,
        stopped_for: Option<String>,
    },
    /// The connection dropped with nothing said: the daemon may come back.
    Dropped,
    /// The session is gone (the operator quit or detached).
    ClientGone,
}

/// Carry messages both ways until the sweep ends or the session goes; a dropped daemon is
/// waited for up to `patience` — unless it is `own`, the daemon this client started, and
/// it has exited: that is a crash to say now, not a restart to wait for. Returns (the
/// sweep finished, why it stopped).
pub(crate) async fn pump(
    store: PathBuf,
    mut conn: Conn,
    tx: UnboundedSender<Incoming>,
    mut commands: UnboundedReceiver<crate::event::Command>,
    patience: Duration,
    own: Option<Started>,
) -> (bool, Option<String>) {
    let mut told_unknown = false;
    loop {
        match serve(&mut conn, &tx, &mut commands, &mut told_unknown).await {
            Ended::Said {
                finished,
                stopped_for,
            } => return (finished, stopped_for),
            Ended::ClientGone => return (false, None),
            Ended::Dropped => {}
        }
        if let Some(own) = &own {
            if exits_soon(own).await {
                return (false, None);
            }
        }
        let note = format!(
            "the daemon went away without a word: waiting up to {} s for it to come back",
            patience.as_secs()
        );
        if tx.send(Incoming::Note(note)).is_err() {
            return (false, None);
        }
        match reconnect(&store, patience).await {
            Some((c, welcome)) => {
                conn = c;
                let back = format!(
                    "reconnected to the daemon (pid {}): the sweep's state sent again",
                    welcome.meta.pid
                );
                let finished = welcome.state.finished;
                if tx.send(Incoming::State(welcome.state)).is_err()
                    || tx.send(Incoming::Note(back)).is_err()
                {
                    return (false, None);
                }
                if finished {
                    return (true, None);
                }
            }
            None => return (false, None),
        }
    }
}

/// Whether the daemon this client started exits within a second of its socket closing
/// (it closes the socket just before it exits; its reaper thread then sees the status).
async fn exits_soon(own: &Started) -> bool {
    for _ in 0..20 {
        if own.has_exited() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// Try again with backoff (¼ s doubling to 4 s) until `patience` is spent.
async fn reconnect(store: &Path, patience: Duration) -> Option<(Conn, Welcome)> {
    let give_up = tokio::time::Instant::now() + patience;
    let mut wait = Duration::from_millis(250);
    loop {
        tokio::time::sleep(
            wait.min(give_up.saturating_duration_since(tokio::time::Instant::now())),
        )
        .await;
        match connect(store).await {
            Ok(c) => return Some(c),
            // A daemon that refuses this client will not change its mind.
            Err(NoWelcome::Refused(_)) => return None,
            Err(_) if tokio::time::Instant::now() >= give_up => return None,
            Err(_) => wait = (wait * 2).min(Duration::from_secs(4)),
        }
    }
}

/// One connection: the daemon's lines in, the session's commands out.
async fn serve(
    conn: &mut Conn,
    tx: &UnboundedSender<Incoming>,
    commands: &mut UnboundedReceiver<crate::event::Command>,
    told_unknown: &mut bool,
) -> Ended {
    // A daemon that finishes says so (its last events); one that stops on a failure says
    // why; one that crashes says nothing.
    let (mut finished, mut stopped_for) = (false, None);
    loop {
        let line = tokio::select! {
            l = conn.lines.next_line() => l,
            c = commands.recv() => {
                let Some(command) = c else { return Ended::ClientGone };
                let line = protocol::line(&ClientMsg::Command { command });
                if conn.w.write_all(line.as_bytes()).await.is_err() {
                    return Ended::Dropped;
                }
                continue;
            }
        };
        let Ok(Some(l)) = line else {
            return if finished || stopped_for.is_some() {
                Ended::Said {
                    finished,
                    stopped_for,
                }
            } else {
                Ended::Dropped
            };
        };
        let m = match serde_json::from_str::<DaemonMsg>(&l) {
            Ok(DaemonMsg::Event { env }) => {
                match &env.event {
                    Event::SweepFinished { .. } => finished = true,
                    Event::Paused { reason, .. } if env.seq == u64::MAX => {
                        stopped_for = Some(reason.clone())
                    }
                    _ => {}
                }
                Incoming::Event(env)
            }
            Ok(DaemonMsg::Resync { state, dropped }) => {
                finished |= state.finished;
                if tx.send(Incoming::State(state)).is_err() {
                    return Ended::ClientGone;
                }
                Incoming::Note(format!(
                    "this client fell behind: {dropped} event(s) dropped, the sweep's state sent again (the log panes miss their lines)"
                ))
            }
            Ok(DaemonMsg::Refused { why }) => Incoming::Note(format!("the daemon refused: {why}")),
            Ok(_) => continue,
            // Said once, not skipped in silence: a newer daemon speaks of things this
            // client cannot show.
            Err(_) if !*told_unknown => {
                *told_unknown = true;
                let head: String = l.chars().take(60).collect();
                Incoming::Note(format!(
                    "a message this client does not understand (a newer daemon?): {head}…"
                ))
            }
            Err(_) => continue,
        };
        if tx.send(m).is_err() {
            return Ended::ClientGone;
        }
    }
}

#[cfg(test)]
mod tests;
