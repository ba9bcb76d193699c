//! `nightshift attach` and `run` with the TUI: the TUI over a daemon's socket. The face
//! wires the link (the daemon's protocol on one side, the TUI's session on the other); the
//! TUI itself knows only the link.

use super::link::{self, NoWelcome};
use crate::daemon::client::{not_running, why_ended, Started};
use crate::tui::link::{Link, Owner};
use std::path::Path;
use std::sync::Arc;

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
    let (conn, welcome) = match link::connect(store).await {
        Ok(c) => c,
        Err(NoWelcome::NotRunning) => {
            eprintln!("{}", not_running(store));
            return 1;
        }
        Err(NoWelcome::Refused(why)) => {
            tracing::error!("{why}");
            return 2;
        }
        Err(NoWelcome::Broken(why)) => {
            tracing::error!("{why}");
            return 1;
        }
    };
    let link::Welcome {
        meta,
        plan_text,
        state,
        calibration,
        activity,
    } = welcome;
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
    let (cmd_tx, cmd_rx) = tokio::sync::mpsc::unbounded_channel();
    let store_dir = store.to_path_buf();
    // The daemon's messages in, commands out; a daemon gone without a word is waited for.
    let pumping = tokio::spawn(link::pump(
        store_dir.clone(),
        conn,
        in_tx,
        cmd_rx,
        link::PATIENCE,
        started.clone(),
    ));
    let link = Link {
        events: in_rx,
        commands: cmd_tx,
        ended: Box::pin(async move {
            let (saw_end, stopped_for) = pumping.await.unwrap_or((false, None));
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
