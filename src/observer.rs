//! Observers see every event after the engine has folded it: the headless printer, the
//! log files, the store, the TUI feed. An observer error stops the sweep (a store that
//! cannot persist must not let the engine act on unpersisted state).

use crate::event::Envelope;

pub trait Observer: Send {
    fn on_event(&mut self, env: &Envelope) -> anyhow::Result<()>;
}

/// Forwards events to another task (the TUI) without ever blocking the engine.
pub struct ChannelObserver(pub tokio::sync::mpsc::UnboundedSender<Envelope>);

impl Observer for ChannelObserver {
    fn on_event(&mut self, env: &Envelope) -> anyhow::Result<()> {
        // A closed receiver means the view went away; the sweep goes on.
        let _ = self.0.send(env.clone());
        Ok(())
    }
}

impl<F: FnMut(&Envelope) -> anyhow::Result<()> + Send> Observer for F {
    fn on_event(&mut self, env: &Envelope) -> anyhow::Result<()> {
        self(env)
    }
}
