//! The session's loop, generic over where it draws: one `tokio::select!` over terminal
//! input, the link's messages (unbounded on this side, so drawing never blocks the
//! reader), GPU samples, a render tick, the sweep's end and a signal. It redraws at most
//! every `refresh` while things change, and once a second when idle (for clocks). The real
//! terminal (`terminal::Guard`) and ratatui's `TestBackend` are both a [`Screen`], so the
//! loop itself — keys to commands, resyncs, notes, two clients on one sweep — is tested in
//! process (`drive/tests.rs`); tmux stays the end-to-end check.

use super::app::{App, Effect};
use super::gpu::GpuMsg;
use super::link::{sign, take, Ended, Incoming};
use super::{export, on_terminal_event, terminal, views, TuiOptions};
use crate::event::Command;
use crate::model::RunId;
use crossterm::event::Event as TermEvent;
use futures_util::{Stream, StreamExt};
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio::time::Instant;

/// Where the loop draws, and what only a real terminal can do.
pub(crate) trait Screen {
    type Backend: ratatui::backend::Backend;
    fn terminal(&mut self) -> &mut ratatui::Terminal<Self::Backend>;
    /// `v`: the run's whole log in the operator's pager.
    fn pager(&mut self, app: &mut App, _run: RunId) {
        app.ui.toast = Some("no pager on this screen".into());
    }
    /// `e`: a shell in the run's container.
    fn shell(&mut self, app: &mut App, _run: RunId) {
        app.ui.toast = Some("no shell on this screen".into());
    }
}

impl Screen for terminal::Guard {
    type Backend = ratatui::backend::CrosstermBackend<std::io::Stdout>;
    fn terminal(&mut self) -> &mut ratatui::Terminal<Self::Backend> {
        &mut self.term
    }
    fn pager(&mut self, app: &mut App, run: RunId) {
        super::open_pager(self, app, run)
    }
    fn shell(&mut self, app: &mut App, run: RunId) {
        super::open_shell(self, app, run)
    }
}

/// What the loop listens to and sends on.
pub(crate) struct Wires<'a, I> {
    pub input: &'a mut I,
    pub events: &'a mut UnboundedReceiver<Incoming>,
    pub commands: &'a UnboundedSender<Command>,
    pub ended: &'a mut Ended,
    pub gpus: UnboundedReceiver<GpuMsg>,
    /// Resolves on a signal that ends the screen (SIGTERM, SIGHUP, an external SIGINT).
    pub signal: Pin<Box<dyn Future<Output = ()> + Send>>,
}

/// How the loop ended.
#[derive(Debug, Default)]
pub(crate) struct Drove {
    /// The operator asked to stop the sweep (not only to leave the screen).
    pub stop_sweep: bool,
    /// The sweep on the other side ended while the screen was up.
    pub sweep_done: bool,
    /// Why it stopped, when it stopped on a failure.
    pub sweep_err: Option<String>,
}

pub(crate) async fn drive<S, I>(
    app: &mut App,
    screen: &mut S,
    w: Wires<'_, I>,
    opts: &TuiOptions,
) -> anyhow::Result<Drove>
where
    S: Screen,
    I: Stream<Item = std::io::Result<TermEvent>> + Unpin,
{
    let Wires {
        input,
        events: rx,
        commands: cmds,
        ended,
        gpus: mut grx,
        mut signal,
    } = w;
    let mut tick = tokio::time::interval(opts.refresh);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut gpu_tick = tokio::time::interval(opts.gpu_period);
    gpu_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let (mut dirty, mut draw_now) = (true, true);
    let mut last_draw = Instant::now();
    let mut out = Drove::default();
    loop {
        if draw_now
            || (dirty && last_draw.elapsed() >= opts.refresh)
            || last_draw.elapsed() >= Duration::from_secs(1)
        {
            app.night.now_ms = crate::event::now_ms();
            app.load_logs_from_disk();
            screen
                .terminal()
                .draw(|f| views::draw(f, app))
                .map_err(|e| anyhow::anyhow!("drawing the screen: {e}"))?;
            last_draw = Instant::now();
            (dirty, draw_now) = (false, false);
        }
        tokio::select! {
            Some(m) = rx.recv() => {
                let held_before = app.night.state.counts().held;
                take(app, m);
                // Take what is already there in one go; a flood must not starve keys.
                for _ in 0..20_000 {
                    match rx.try_recv() {
                        Ok(m) => take(app, m),
                        Err(_) => break,
                    }
                }
                super::announce_held(app, held_before, opts.bell);
                dirty = true;
            }
            ev = input.next() => match ev {
                Some(Ok(ev)) => {
                    draw_now = true;
                    let effects = on_terminal_event(app, ev);
                    if apply(app, screen, cmds, effects, &mut out) {
                        break;
                    }
                }
                Some(Err(_)) | None => break,
            },
            Some(m) = grx.recv() => {
                app.night.on_gpu(m);
                dirty = true;
            }
            _ = gpu_tick.tick(), if opts.simulate_gpus => {
                app.night.now_ms = crate::event::now_ms();
                app.night.sim_gpu_tick();
                dirty = true;
            }
            _ = tick.tick() => {}
            r = &mut *ended, if !out.sweep_done => {
                out.sweep_done = true;
                app.night.finished = true;
                // What was sent before the end is still worth showing.
                while let Ok(m) = rx.try_recv() {
                    take(app, m);
                }
                app.ui.toast = Some(match &r {
                    Ok(()) if app.attached => "the sweep's daemon has ended — browse the results (3), q quits".into(),
                    Ok(()) => "sweep finished — browse the results (3), q quits".into(),
                    Err(e) => format!("sweep stopped: {e}"),
                });
                out.sweep_err = r.err();
                dirty = true;
            }
            _ = &mut signal => break,
        }
    }
    Ok(out)
}

/// Carry out what a key asked for; whether the screen should close.
fn apply<S: Screen>(
    app: &mut App,
    screen: &mut S,
    cmds: &UnboundedSender<Command>,
    effects: Vec<Effect>,
    out: &mut Drove,
) -> bool {
    let mut quit = false;
    for e in effects {
        match e {
            Effect::Quit | Effect::Detach => quit = true,
            Effect::StopSweep => {
                out.stop_sweep = true;
                quit = true;
            }
            Effect::Send(cmd) => {
                app.ui.toast = Some(format!("→ {}", cmd.describe()));
                let _ = cmds.send(sign(app, cmd));
            }
            Effect::Pager(run) => screen.pager(app, run),
            Effect::Shell(run) => screen.shell(app, run),
            Effect::Copy(text) => super::copy_osc52(&text),
            Effect::Export(path) => {
                app.ui.toast = Some(match export::write(app, path.as_deref()) {
                    Ok((c, j)) => format!("exported {} and {}", c.display(), j.display()),
                    Err(e) => format!("export failed: {e}"),
                });
            }
        }
    }
    quit
}

#[cfg(test)]
mod tests;
