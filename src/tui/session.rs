//! The TUI's event loop over a [`Link`]: events in, commands out. The link is an engine in
//! this process (the demo) or a sweep daemon through its socket (`run`, `attach`); the
//! loop does not know which, except for what quitting means.
//!
//! One `tokio::select!` takes terminal input, the sweep's events (unbounded on this side,
//! so drawing never blocks the reader), GPU samples and a render tick; it redraws at most
//! every `refresh` while things change, and once a second when idle (for clocks).

use super::app::App;
use super::link::{take, Link, Owner};
use super::{drive, gpu, terminal, views, TuiExit, TuiOptions};
use crate::event::Command;
use crate::plan::Plan;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// Run the screen until the operator quits or detaches, or a signal arrives.
pub async fn run(plan: Arc<Plan>, link: Link, opts: TuiOptions) -> anyhow::Result<TuiExit> {
    let Link {
        events: mut rx,
        commands: cmds,
        mut ended,
        owner,
        gpus,
        runtime,
    } = link;
    let mut app = App::new(plan.clone(), gpus, opts.theme.clone(), opts.keymap.clone());
    app.me = Some(crate::event::signer("tui"));
    // The operator's recipes too (the daemon reads the same config dir).
    if let Ok(o) = crate::overrides::Overrides::load(crate::tui::config::config_dir().as_deref()) {
        app.night.recipes = o.recipes.all().iter().map(|r| r.name.clone()).collect();
    }
    app.log_dir = opts.log_dir.clone();
    app.attached = matches!(owner, Owner::Attached);
    if let Some(r) = runtime {
        app.night.runtime = r;
    }
    if let Some(st) = opts.initial_state.clone() {
        app.on_state(st);
    }
    app.night.calibration = opts.calibration.clone();
    app.night.activity = opts.initial_activity.iter().cloned().collect();
    app.night.window_closes_ms = opts.window_closes_ms;
    app.night.run_prior_ms = opts.run_prior_ms;
    let (gtx, grx) = tokio::sync::mpsc::unbounded_channel();
    if !opts.simulate_gpus {
        gpu::spawn_nvml(opts.gpu_period, gtx);
    } else {
        drop(gtx);
    }

    let stderr_log = opts
        .log_dir
        .clone()
        .unwrap_or_else(std::env::temp_dir)
        .join("nightshift-stderr.log");
    let mut guard = terminal::Guard::enter(Some(stderr_log))?;
    let mut input = crossterm::event::EventStream::new();
    #[cfg(unix)]
    // An external SIGINT too (`kill -INT`, a supervisor): its default action would end the
    // process with the terminal still raw. (Ctrl-C at the keyboard is a key in raw mode.)
    let signal: Pin<Box<dyn Future<Output = ()> + Send>> = {
        use tokio::signal::unix::{signal, SignalKind};
        let (mut term, mut hup, mut int) = (
            signal(SignalKind::terminate())?,
            signal(SignalKind::hangup())?,
            signal(SignalKind::interrupt())?,
        );
        Box::pin(async move {
            tokio::select! {
                _ = term.recv() => {},
                _ = hup.recv() => {},
                _ = int.recv() => {},
            }
        })
    };
    #[cfg(not(unix))]
    let signal: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(std::future::pending());
    let drove = drive::drive(
        &mut app,
        &mut guard,
        drive::Wires {
            input: &mut input,
            events: &mut rx,
            commands: &cmds,
            ended: &mut ended,
            gpus: grx,
            signal,
        },
        &opts,
    )
    .await?;
    let (sweep_done, sweep_err) = (drove.sweep_done, drove.sweep_err);
    let stop_sweep = drove.stop_sweep;

    // In this process, quitting stops the sweep (runs in flight are re-queued); attached,
    // it stops it only when asked, and otherwise leaves the daemon running.
    let stop = match &owner {
        Owner::InProcess(shutdown) => Some(shutdown.clone()),
        Owner::Attached if stop_sweep => None,
        Owner::Attached => {
            if !sweep_done {
                app.ui.toast =
                    Some("detached: the sweep goes on (`nightshift attach` rejoins)".into());
            }
            return finish(guard, &app, sweep_err, !sweep_done);
        }
    };
    if !sweep_done {
        let _ = cmds.send(Command::Shutdown);
        if let Some(s) = &stop {
            s.cancel();
        }
        app.ui.toast = Some("stopping: cancelling runs in flight…".into());
        app.night.now_ms = crate::event::now_ms();
        let _ = guard.term.draw(|f| views::draw(f, &app));
        let _ = tokio::time::timeout(Duration::from_secs(15), &mut ended).await;
        while let Ok(m) = rx.try_recv() {
            take(&mut app, m);
        }
    }
    finish(guard, &app, sweep_err, false)
}

fn finish(
    guard: terminal::Guard,
    app: &App,
    sweep_err: Option<String>,
    detached: bool,
) -> anyhow::Result<TuiExit> {
    let stderr_log = guard.stderr_log.clone();
    drop(guard);
    if let Some(p) = stderr_log.filter(|p| std::fs::metadata(p).is_ok_and(|m| m.len() > 0)) {
        tracing::info!(
            "warnings printed while the screen was open are in {}",
            p.display()
        );
    }
    if let Some(e) = sweep_err {
        tracing::error!("the sweep stopped: {e}");
    }
    let c = app.night.state.counts();
    // Done of the runnable runs, as the header said it the moment before.
    let p = app.night.progress();
    Ok(TuiExit {
        done: p.done,
        total: p.total,
        finished: c.done() == c.total,
        detached,
        failed: c.failed + c.held,
    })
}
