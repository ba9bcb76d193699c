//! `nightshift attach` and `run` with the TUI: the TUI over a daemon's socket. The face
//! wires the link (the daemon's protocol on one side, the TUI's session on the other); the
//! TUI itself knows only the link.

use crate::daemon::client::{not_running, why_ended, Started};
use crate::daemon::protocol::{self, ClientMsg, DaemonMsg, Want};
use crate::tui::session::{Incoming, Link, Owner};
use std::path::Path;
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

/// `nightshift attach`: the TUI on the store's running sweep.
pub fn attach(store: &Path) -> i32 {
    attach_to(store, None)
}

/// `nightshift run PLAN` (with the TUI): start the store's daemon in the background unless
/// one runs already, then attach. `argv` is this process's command line, reused for the
/// daemon with `--headless` (and the store made explicit).
pub(crate) fn start_and_attach(
    a: &crate::daemon::commands::RunArgs,
    argv: Vec<std::ffi::OsString>,
) -> i32 {
    let dir = match crate::daemon::commands::resolve_dir(a.store.clone(), &a.plan.name) {
        Ok(d) => d,
        Err(c) => return c,
    };
    if crate::daemon::client::alive(&dir) {
        tracing::info!(
            "a sweep is already running on {}: attaching to it",
            dir.display()
        );
        return attach(&dir);
    }
    match crate::daemon::spawn_background(&dir, argv, a.store.is_none()) {
        Ok(child) => attach_to(&dir, Some(Started::watch(child))),
        Err(code) => code,
    }
}

/// `attach`, for a daemon this process may have started.
pub(crate) fn attach_to(store: &Path, started: Option<Started>) -> i32 {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        tracing::error!("the TUI needs a terminal (`nightshift status` prints one line)");
        return 2;
    }
    crate::rt::block_on(attach_async(store, started))
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
    let (meta, plan_text, state, calibration, activity) =
        match serde_json::from_str::<DaemonMsg>(&first) {
            Ok(DaemonMsg::Welcome {
                meta,
                plan_text,
                state,
                calibration,
                activity,
                ..
            }) => (meta, plan_text, state, calibration, activity),
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
    opts.initial_activity = activity;
    opts.calibration = calibration;
    opts.window_closes_ms = meta.window_closes_ms;
    opts.run_prior_ms = meta.run_prior_ms;
    let (in_tx, in_rx) = tokio::sync::mpsc::unbounded_channel();
    let (ended_tx, ended_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        // A daemon that finishes says so (its last events); one that stops on a failure
        // says why; one that crashes says nothing.
        let (mut saw_end, mut stopped_for) = (false, None);
        let mut told_unknown = false;
        while let Ok(Some(l)) = lines.next_line().await {
            let m = match serde_json::from_str::<DaemonMsg>(&l) {
                Ok(DaemonMsg::Event { env }) => {
                    match &env.event {
                        crate::event::Event::SweepFinished { .. } => saw_end = true,
                        crate::event::Event::Paused { reason, .. } if env.seq == u64::MAX => {
                            stopped_for = Some(reason.clone())
                        }
                        _ => {}
                    }
                    Incoming::Event(env)
                }
                Ok(DaemonMsg::Resync { state, dropped }) => {
                    saw_end |= state.finished;
                    if in_tx.send(Incoming::State(state)).is_err() {
                        break;
                    }
                    Incoming::Note(format!(
                        "this client fell behind: {dropped} event(s) dropped, the sweep's state sent again (the log panes miss their lines)"
                    ))
                }
                Ok(DaemonMsg::Refused { why }) => {
                    Incoming::Note(format!("the daemon refused: {why}"))
                }
                Ok(_) => continue,
                // Said once, not skipped in silence: a newer daemon speaks of things this
                // client cannot show.
                Err(_) if !told_unknown => {
                    told_unknown = true;
                    let head: String = l.chars().take(60).collect();
                    Incoming::Note(format!(
                        "a message this client does not understand (a newer daemon?): {head}…"
                    ))
                }
                Err(_) => continue,
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
                "nightshift: {} of {} runnable runs done{}",
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
