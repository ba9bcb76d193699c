//! An observer that does its I/O on a thread of its own: sled flushes and log-file writes
//! never run on the thread that drives the engine's select loop (and with it the runtimes'
//! messages, the operator's commands and the clients' feed).
//!
//! Ordering and durability stay what they were: events reach the inner observer in the
//! order the engine emitted them, and a *barrier* event (a state transition, the sweep's
//! end; for the store also a pause or resume) is acknowledged only once the inner observer has handled it and everything before
//! it, so the engine still never acts on a transition that is not on disk. Other events
//! (log lines) are queued, bounded: a disk slower than the runs makes the engine wait
//! instead of memory grow. An error of the inner observer surfaces on the next event.

use crate::event::{Envelope, Event};
use crate::observer::Observer;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Events queued ahead of the I/O thread before the engine waits.
const QUEUE: usize = 1024;

/// How long the engine waits for a barrier before it calls the disk hung: a flush that
/// never returns (a dead NFS server, a wedged device) must end the sweep with a message,
/// not hang the night without one.
const BARRIER_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);

enum Msg {
    Event(Envelope),
    Barrier(Envelope, SyncSender<Result<(), String>>),
}

pub struct OffThread {
    tx: Option<SyncSender<Msg>>,
    failed: Arc<Mutex<Option<String>>>,
    barrier: fn(&Event) -> bool,
    thread: Option<JoinHandle<()>>,
    name: String,
}

/// A run's state changed, or the sweep ended: what the store flushes on and what closes
/// a run's log files (their sizes are final before the store records them).
pub fn transition(e: &Event) -> bool {
    matches!(e, Event::State { .. } | Event::SweepFinished { .. })
}

/// The log writer on its own thread.
pub fn logs(w: super::logs::LogWriter) -> std::io::Result<Box<dyn Observer>> {
    Ok(Box::new(OffThread::new(
        "ns-logs",
        Box::new(w),
        transition,
    )?))
}

/// What the store has before anyone hears of it: a transition, the sweep's end, and the
/// sweep's pause and resume (a pause is kept across the daemon's lives, `store::pause`: a
/// client that saw `p` taken must find it kept if the daemon dies the next moment).
pub(crate) fn durable(e: &Event) -> bool {
    transition(e) || matches!(e, Event::Paused { .. } | Event::Resumed)
}

/// The store's observer on its own thread.
pub fn store(o: crate::store::StoreObserver) -> std::io::Result<Box<dyn Observer>> {
    Ok(Box::new(OffThread::new("ns-store", Box::new(o), durable)?))
}

impl OffThread {
    /// Run `inner` on a thread named `name`; `barrier` picks the events the engine waits for.
    pub fn new(
        name: &str,
        inner: Box<dyn Observer>,
        barrier: fn(&Event) -> bool,
    ) -> std::io::Result<OffThread> {
        let (tx, rx) = sync_channel(QUEUE);
        let failed = Arc::new(Mutex::new(None));
        let seen = failed.clone();
        let thread = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || serve(inner, rx, seen))?;
        Ok(OffThread {
            tx: Some(tx),
            failed,
            barrier,
            thread: Some(thread),
            name: name.to_string(),
        })
    }

    fn failure(&self) -> Option<String> {
        self.failed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

fn serve(mut inner: Box<dyn Observer>, rx: Receiver<Msg>, failed: Arc<Mutex<Option<String>>>) {
    for msg in rx {
        let (env, reply) = match msg {
            Msg::Event(env) => (env, None),
            Msg::Barrier(env, reply) => (env, Some(reply)),
        };
        let already = failed.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let result = match already {
            // After a failure nothing more is written: the engine is stopping the sweep.
            Some(why) => Err(why),
            None => inner.on_event(&env).map_err(|e| format!("{e:#}")),
        };
        if let Err(why) = &result {
            failed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get_or_insert_with(|| why.clone());
        }
        if let Some(reply) = reply {
            let _ = reply.send(result);
        }
    }
}

impl Observer for OffThread {
    fn on_event(&mut self, env: &Envelope) -> anyhow::Result<()> {
        if let Some(why) = self.failure() {
            anyhow::bail!(why);
        }
        let tx = self.tx.as_ref().expect("sender lives until drop");
        let gone = || anyhow::anyhow!("the observer's I/O thread is gone");
        if (self.barrier)(&env.event) {
            let (reply, answer) = sync_channel(1);
            tx.send(Msg::Barrier(env.clone(), reply))
                .map_err(|_| gone())?;
            let r = match answer.recv_timeout(BARRIER_LIMIT) {
                Ok(r) => r,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(format!(
                    "the {} thread did not finish writing within {} s (a hung disk?)",
                    self.name,
                    BARRIER_LIMIT.as_secs()
                )),
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return Err(gone()),
            };
            if let Err(why) = &r {
                self.failed
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get_or_insert_with(|| why.clone());
            }
            r.map_err(anyhow::Error::msg)
        } else {
            tx.send(Msg::Event(env.clone())).map_err(|_| gone())
        }
    }
}

impl Drop for OffThread {
    /// Everything queued is written before the observer is gone; after a failure the
    /// thread is left to itself (it may be stuck in a write that never returns, and the
    /// daemon exits without it).
    fn drop(&mut self) {
        drop(self.tx.take());
        let failed = self.failure().is_some();
        if let Some(t) = self.thread.take() {
            if !failed {
                let _ = t.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{RunId, RunState};

    fn env(seq: u64, event: Event) -> Envelope {
        Envelope {
            seq,
            at_ms: 0,
            event,
        }
    }

    fn state(run: u32) -> Event {
        Event::State {
            run: RunId(run),
            attempt: 1,
            from: RunState::Queued,
            to: RunState::Queued,
            detail: None,
            gpus: Vec::new(),
            interrupted: false,
        }
    }

    #[test]
    fn order_is_kept_barriers_wait_and_failures_surface() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let inner = move |e: &Envelope| {
            std::thread::sleep(std::time::Duration::from_millis(1));
            log.lock().unwrap().push(e.seq);
            if e.seq == 7 {
                anyhow::bail!("disk full");
            }
            Ok(())
        };
        let mut o = OffThread::new("test-io", Box::new(inner), transition).unwrap();
        for seq in 1..=4 {
            o.on_event(&env(seq, Event::Resumed)).unwrap();
        }
        // A barrier returns only once it and everything before it were handled.
        o.on_event(&env(5, state(0))).unwrap();
        assert_eq!(*seen.lock().unwrap(), vec![1, 2, 3, 4, 5]);
        o.on_event(&env(6, Event::Resumed)).unwrap();
        let e = o.on_event(&env(7, state(1))).unwrap_err();
        assert!(e.to_string().contains("disk full"), "{e}");
        // Nothing more reaches the inner observer after a failure.
        assert!(o.on_event(&env(8, Event::Resumed)).is_err());
        drop(o);
        assert_eq!(*seen.lock().unwrap(), vec![1, 2, 3, 4, 5, 6, 7]);
    }
}
