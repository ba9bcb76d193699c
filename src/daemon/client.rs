//! Clients of a sweep's daemon: `attach` (the TUI over the socket), `status` (one line) and
//! `stop`.

use super::protocol::{self, ClientMsg, DaemonMsg, Want};
use crate::tui::session::{Incoming, Link, Owner};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

/// A daemon answers on the store's socket.
pub fn alive(store: &Path) -> bool {
    std::os::unix::net::UnixStream::connect(protocol::socket_path(store)).is_ok()
}

/// Some process holds the store's database (sled takes an exclusive `flock` on `db`).
fn store_held(store: &Path) -> bool {
    let Ok(f) = std::fs::File::open(store.join("db")) else {
        return false;
    };
    rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockShared).is_err()
}

fn not_running(store: &Path) -> String {
    let stale = protocol::socket_path(store).exists();
    format!(
        "nightshift: no sweep is running on {}{}",
        store.display(),
        if stale {
            " (its daemon is gone: `nightshift run PLAN --store DIR` takes the store over and resumes)"
        } else {
            ""
        }
    )
}

/// Ask once: hello with `want`, then the daemon's first answer.
fn ask(store: &Path, want: Want) -> Result<DaemonMsg, String> {
    let path = protocol::socket_path(store);
    let mut s = std::os::unix::net::UnixStream::connect(&path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::PermissionDenied {
            // Another user's live daemon looks like this too: never call it gone.
            format!(
                "nightshift: the sweep's socket {} is not yours to connect to (permission denied): the store belongs to another user",
                path.display()
            )
        } else {
            not_running(store)
        }
    })?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let line = hello(&mut s, want)?;
    serde_json::from_str(&line).map_err(|e| format!("nightshift: the daemon's answer: {e}"))
}

/// Say hello with `want`; the daemon's first line back.
fn hello(s: &mut std::os::unix::net::UnixStream, want: Want) -> Result<String, String> {
    let hello = ClientMsg::Hello {
        version: protocol::VERSION,
        want,
    };
    s.write_all(protocol::line(&hello).as_bytes())
        .map_err(|e| format!("nightshift: writing to the daemon: {e}"))?;
    let mut line = String::new();
    BufReader::new(&*s)
        .read_line(&mut line)
        .map_err(|e| format!("nightshift: reading from the daemon: {e}"))?;
    Ok(line)
}

/// `nightshift status`: one line; exit 0 while a sweep is alive, 1 when none is.
pub fn status(store: &Path) -> i32 {
    match ask(store, Want::Status) {
        Ok(DaemonMsg::Status { line }) => {
            println!("{line}");
            0
        }
        Ok(DaemonMsg::Refused { why }) => {
            tracing::error!("{why}");
            2
        }
        Ok(other) => {
            tracing::error!("unexpected answer {other:?}");
            2
        }
        Err(e) => {
            println!("{e}");
            1
        }
    }
}

/// `nightshift stop [--now]`: without `--now` the sweep stops once its runs in flight
/// finish; with it, they are cancelled (and re-queued for the next `run`). Waits for the
/// daemon to go when `--now`.
pub fn stop(store: &Path, now: bool) -> i32 {
    match ask(store, Want::Stop { now }) {
        Ok(DaemonMsg::Stopping { .. }) => {}
        Ok(DaemonMsg::Refused { why }) => {
            tracing::error!("{why}");
            return 2;
        }
        Ok(other) => {
            tracing::error!("unexpected answer {other:?}");
            return 2;
        }
        Err(e) => {
            tracing::error!("{e}");
            return 1;
        }
    }
    if !now {
        println!("nightshift: the sweep on {} stops once its runs in flight finish (no new runs start); `nightshift stop --now` cancels them", store.display());
        return 0;
    }
    // Gone means the store is free again (the daemon has exited, or at least let go of
    // the database), so `stop --now && run` works.
    let t0 = Instant::now();
    while (alive(store) || store_held(store)) && t0.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(100));
    }
    if alive(store) || store_held(store) {
        tracing::warn!(
            "the daemon is still stopping after 60 s (runs in flight being torn down); `nightshift status` tells when it has gone"
        );
        return 1;
    }
    println!("nightshift: stopped; runs in flight were re-queued (`nightshift run PLAN` resumes)");
    0
}

/// `nightshift attach`: the TUI on the store's running sweep.
pub fn attach(store: &Path) -> i32 {
    attach_to(store, None)
}

/// The daemon this client started, reaped by a thread of its own (never left a zombie); its
/// exit status tells a crash from an end.
pub struct Started(Arc<std::sync::Mutex<Option<std::process::ExitStatus>>>);

impl Started {
    pub fn watch(mut child: std::process::Child) -> Started {
        let slot = Arc::new(std::sync::Mutex::new(None));
        let set = slot.clone();
        std::thread::Builder::new()
            .name("daemon-reaper".into())
            .spawn(move || {
                if let Ok(st) = child.wait() {
                    *set.lock().unwrap_or_else(|e| e.into_inner()) = Some(st);
                }
            })
            .ok();
        Started(slot)
    }

    /// How it ended, once it has (waits a little: the socket closes just before the exit).
    fn status(&self) -> Option<std::process::ExitStatus> {
        for _ in 0..20 {
            if let Some(s) = *self.0.lock().unwrap_or_else(|e| e.into_inner()) {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

/// Why the daemon's connection ended, for the TUI: `Ok` when the sweep finished (or was
/// stopped) as it should, else what is known of the crash.
fn why_ended(
    saw_end: bool,
    stopped_for: Option<String>,
    started: Option<&Started>,
    store: &Path,
) -> Result<(), String> {
    use std::os::unix::process::ExitStatusExt;
    if saw_end && stopped_for.is_none() {
        return Ok(());
    }
    let how = match started.and_then(Started::status) {
        Some(st) => match (st.code(), st.signal()) {
            (_, Some(sig)) => format!(" (killed by signal {sig})"),
            (Some(code), _) => format!(" (exit status {code})"),
            _ => String::new(),
        },
        None => String::new(),
    };
    let why = stopped_for.map(|w| format!(": {w}")).unwrap_or_default();
    Err(format!(
        "the sweep's daemon ended without finishing{how}{why} — its log: {}; `nightshift run PLAN --store {}` resumes the sweep",
        store.join(super::LOG).display(),
        store.display()
    ))
}

/// `attach`, for a daemon this process may have started.
pub fn attach_to(store: &Path, started: Option<Started>) -> i32 {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        tracing::error!("the TUI needs a terminal (`nightshift status` prints one line)");
        return 2;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(attach_async(store, started))
}

async fn attach_async(store: &Path, started: Option<Started>) -> i32 {
    let stream = match tokio::net::UnixStream::connect(protocol::socket_path(store)).await {
        Ok(s) => s,
        Err(_) => {
            eprintln!("{}", not_running(store));
            return 1;
        }
    };
    let (r, mut w) = stream.into_split();
    let mut lines = tokio::io::BufReader::new(r).lines();
    let hello = ClientMsg::Hello {
        version: protocol::VERSION,
        want: Want::Attach,
    };
    if let Err(e) = w.write_all(protocol::line(&hello).as_bytes()).await {
        tracing::error!("writing to the daemon: {e}");
        return 1;
    }
    let first = match lines.next_line().await {
        Ok(Some(l)) => l,
        _ => {
            tracing::error!("the daemon closed the connection before its snapshot");
            return 1;
        }
    };
    let (meta, plan_text, state, calibration) = match serde_json::from_str::<DaemonMsg>(&first) {
        Ok(DaemonMsg::Welcome {
            meta,
            plan_text,
            state,
            calibration,
            ..
        }) => (meta, plan_text, state, calibration),
        Ok(DaemonMsg::Refused { why }) => {
            tracing::error!("{why}");
            return 2;
        }
        other => {
            tracing::error!("unexpected first message from the daemon: {other:?}");
            return 2;
        }
    };
    let box_defaults = crate::tui::config::Config::load(None)
        .map(|c| c.box_defaults())
        .unwrap_or_default();
    let plan = match crate::plan::Plan::from_text_with(&meta.plan_path, plan_text, &box_defaults) {
        Ok(p) if p.runs.len() == state.runs.len() => p,
        Ok(_) => {
            tracing::error!("{} no longer expands to the daemon's runs; attach from a checkout of the plan it runs",
                meta.plan_path.display()
            );
            return 2;
        }
        Err(e) => {
            tracing::error!("the daemon's plan: {e}");
            return 2;
        }
    };
    let simulate = meta.runtime == "sim";
    let mut opts =
        match crate::tui::TuiOptions::load(None, None, simulate, Some(meta.log_dir.clone())) {
            Ok(o) => o,
            Err(e) => {
                tracing::error!("{e:#}");
                return 2;
            }
        };
    opts.initial_state = Some(state);
    opts.calibration = calibration;
    opts.window_closes_ms = meta.window_closes_ms;
    let (in_tx, in_rx) = tokio::sync::mpsc::unbounded_channel();
    let (ended_tx, ended_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        // A daemon that finishes says so (its last events); one that stops on a failure
        // says why; one that crashes says nothing.
        let (mut saw_end, mut stopped_for) = (false, None);
        while let Ok(Some(l)) = lines.next_line().await {
            let m = match serde_json::from_str::<DaemonMsg>(&l) {
                Ok(DaemonMsg::Event { env }) => {
                    match &env.event {
                        crate::event::Event::SweepFinished { .. } => saw_end = true,
                        crate::event::Event::Paused { reason } if env.seq == u64::MAX => {
                            stopped_for = Some(reason.clone())
                        }
                        _ => {}
                    }
                    Incoming::Event(env)
                }
                Ok(DaemonMsg::Resync { state, .. }) => {
                    saw_end |= state.finished;
                    Incoming::State(state)
                }
                _ => continue,
            };
            if in_tx.send(m).is_err() {
                break;
            }
        }
        let _ = ended_tx.send((saw_end, stopped_for));
    });
    let store_dir = store.to_path_buf();
    let (cmd_tx, mut cmd_rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(command) = cmd_rx.recv().await {
            let line = protocol::line(&ClientMsg::Command { command });
            if w.write_all(line.as_bytes()).await.is_err() {
                break;
            }
        }
    });
    let link = Link {
        events: in_rx,
        commands: cmd_tx,
        ended: Box::pin(async move {
            let (saw_end, stopped_for) = ended_rx.await.unwrap_or((false, None));
            tokio::task::spawn_blocking(move || {
                why_ended(saw_end, stopped_for, started.as_ref(), &store_dir)
            })
            .await
            .unwrap_or(Ok(()))
        }),
        owner: Owner::Attached,
        gpus: meta.gpus.max(1),
        runtime: Some(meta.runtime.clone()),
    };
    match crate::tui::session::run(Arc::new(plan), link, opts).await {
        Ok(exit) => {
            println!(
                "nightshift: {} of {} runs done{}",
                exit.done,
                exit.total,
                if exit.detached {
                    format!(
                        "; detached, the sweep goes on (`nightshift attach --store {}` rejoins)",
                        store.display()
                    )
                } else {
                    String::new()
                }
            );
            exit.code()
        }
        Err(e) => {
            tracing::error!("{e:#}");
            1
        }
    }
}

/// Send one operator command to the live daemon on `store`, as an attached client would
/// (attach, the command, leave). Err says why not (no daemon, refused).
pub fn send_command(store: &Path, command: crate::event::Command) -> Result<(), String> {
    let mut s = std::os::unix::net::UnixStream::connect(protocol::socket_path(store))
        .map_err(|_| not_running(store))?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok();
    // The welcome first: the daemon reads commands only from an attached client.
    let line = hello(&mut s, Want::Attach)?;
    match serde_json::from_str::<DaemonMsg>(&line) {
        Ok(DaemonMsg::Welcome { .. }) => {}
        Ok(DaemonMsg::Refused { why }) => return Err(why),
        Ok(other) => return Err(format!("unexpected answer {other:?}")),
        Err(e) => return Err(format!("nightshift: the daemon's answer: {e}")),
    }
    s.write_all(protocol::line(&ClientMsg::Command { command }).as_bytes())
        .map_err(|e| format!("nightshift: writing to the daemon: {e}"))?;
    // Closing our side: the daemon reads the command, then the end.
    let _ = s.shutdown(std::net::Shutdown::Write);
    Ok(())
}

/// A query (`results`, `show`, `digest`) answered by the live daemon: None when no daemon
/// runs on `store` (the caller reads the store itself); else the text, or the error and its
/// exit status.
pub fn query_text(store: &Path, want: Want) -> Option<Result<String, (i32, String)>> {
    if !alive(store) {
        return None;
    }
    Some(match ask(store, want) {
        Ok(DaemonMsg::Output { text, error, code }) => match error {
            Some(e) => Err((code, e)),
            None => Ok(text),
        },
        Ok(DaemonMsg::Refused { why }) => Err((2, why)),
        Ok(other) => Err((2, format!("unexpected answer {other:?}"))),
        Err(e) => Err((1, e.to_string())),
    })
}

/// [`query_text`], printed: the exit status, or None when no daemon runs on `store`.
pub fn query(store: &Path, want: Want) -> Option<i32> {
    query_text(store, want).map(crate::daemon::commands::answer)
}
