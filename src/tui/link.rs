//! The line between a screen and its sweep: what comes in (events, a whole state, a note),
//! what goes out (commands, signed by this client), and who owns the sweep. Both the
//! session (the real terminal) and the loop (`drive`, any screen) speak it, so it sits
//! beneath both.

use super::app::App;
use crate::event::{Command, Envelope};
use crate::state::SweepState;
use std::future::Future;
use std::pin::Pin;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio_util::sync::CancellationToken;

/// What comes over a link.
#[derive(Debug)]
pub enum Incoming {
    Event(Envelope),
    /// The sweep's whole state (after the client fell behind and events were dropped).
    State(SweepState),
    /// Something the operator should read about the link itself (events dropped, a
    /// message refused or not understood): a toast.
    Note(String),
}

/// Resolves when the sweep on the other side is gone (finished, stopped, disconnected).
pub type Ended = Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

/// Who owns the sweep, which decides what quitting does.
pub enum Owner {
    /// The engine runs in this process: quitting stops it.
    InProcess(CancellationToken),
    /// A daemon owns it: quitting detaches (or, if asked, stops the sweep).
    Attached,
}

pub struct Link {
    pub events: UnboundedReceiver<Incoming>,
    pub commands: UnboundedSender<Command>,
    pub ended: Ended,
    pub owner: Owner,
    /// GPUs the sweep schedules on (the header and GPU panel before the first sample).
    pub gpus: u32,
    /// The runtime's name when the sweep started before this client (else its start event
    /// says).
    pub runtime: Option<String>,
}

/// Envelopes from an in-process engine as link messages.
pub(crate) fn envelopes(mut rx: UnboundedReceiver<Envelope>) -> UnboundedReceiver<Incoming> {
    let (tx, out) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(env) = rx.recv().await {
            if tx.send(Incoming::Event(env)).is_err() {
                return;
            }
        }
    });
    out
}

pub(crate) fn take(app: &mut App, m: Incoming) {
    match m {
        Incoming::Event(env) => app.on_envelope(&env),
        Incoming::State(st) => app.on_state(st),
        Incoming::Note(text) => app.ui.toast = Some(text),
    }
}

/// `cmd` signed by this client, with the state of its run as this screen showed it: the
/// engine refuses it if the run has moved since (another client, the policy), and names who.
pub(crate) fn sign(app: &App, cmd: Command) -> Command {
    let Some(by) = app.me.clone() else {
        return cmd;
    };
    let saw = cmd
        .run()
        .filter(|r| (r.0 as usize) < app.night.state.runs.len())
        .map(|r| app.night.state.run(r).state.clone());
    Command::Signed {
        by,
        saw,
        command: Box::new(cmd),
    }
}
