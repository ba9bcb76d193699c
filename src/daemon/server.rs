//! The daemon's side of the socket: a hub the engine feeds (a mirror of the sweep state and
//! a bounded broadcast of events) and one task per client. A slow client never slows the
//! engine: it lags, loses events from the broadcast, and gets the current state instead.

use super::protocol::{self, ClientMsg, DaemonMsg, Meta, Want};
use crate::engine::observer::Observer;
use crate::engine::CommandSender;
use crate::event::{Command, Envelope, Event};
use crate::state::SweepState;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

/// Events buffered per client before it counts as lagging (a second or two of a busy
/// night's log lines).
const CLIENT_BUFFER: usize = 16_384;

/// What every client task shares.
pub struct Hub {
    state: Mutex<SweepState>,
    meta: Mutex<Meta>,
    events: broadcast::Sender<Arc<Envelope>>,
    plan_text: String,
    cmds: CommandSender,
    shutdown: CancellationToken,
    /// The live store, for `results` and `show`.
    store: Option<Arc<Mutex<crate::store::Store>>>,
    /// Clients attached now (the engine lets a held unknown failure wait only while one is).
    clients: Arc<AtomicUsize>,
}

/// One attached client, counted while it lives.
struct Attached(Arc<AtomicUsize>);

impl Attached {
    fn new(n: &Arc<AtomicUsize>) -> Attached {
        n.fetch_add(1, Ordering::SeqCst);
        Attached(n.clone())
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Hub {
    pub fn new(
        state: SweepState,
        meta: Meta,
        plan_text: String,
        cmds: CommandSender,
        shutdown: CancellationToken,
        store: Option<Arc<Mutex<crate::store::Store>>>,
    ) -> Arc<Hub> {
        Arc::new(Hub {
            state: Mutex::new(state),
            meta: Mutex::new(meta),
            events: broadcast::channel(CLIENT_BUFFER).0,
            plan_text,
            cmds,
            shutdown,
            store,
            clients: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// The count of clients attached now, shared.
    pub fn clients(&self) -> Arc<AtomicUsize> {
        self.clients.clone()
    }

    /// The store's calibration (a small read; none without a store).
    fn calibration(&self) -> crate::stats::Calibration {
        self.store.as_ref().map_or_else(Default::default, |s| {
            s.lock().unwrap_or_else(|e| e.into_inner()).calibration()
        })
    }

    /// Answer a query from the live store, off the async workers (it reads sled).
    async fn query(&self, want: Want) -> DaemonMsg {
        let Some(store) = self.store.clone() else {
            return DaemonMsg::Output {
                text: String::new(),
                error: Some("this daemon keeps no store".into()),
                code: 2,
            };
        };
        let r = tokio::task::spawn_blocking(move || {
            let s = store.lock().unwrap_or_else(|e| e.into_inner());
            match want {
                Want::Results {
                    format,
                    filter,
                    judge,
                } => crate::daemon::commands::results_for(&s, &format, filter.as_deref(), judge),
                Want::Show { what, json } => crate::daemon::commands::show_for(&s, &what, json),
                Want::Digest { format } => crate::daemon::commands::digest_for(&s, &format),
                Want::Group { id } => crate::daemon::commands::group_for(&s, &id),
                _ => Err((2, "not a query".into())),
            }
        })
        .await
        .unwrap_or_else(|e| Err((1, format!("the query failed: {e}"))));
        match r {
            Ok(text) => DaemonMsg::Output {
                text,
                error: None,
                code: 0,
            },
            Err((code, e)) => DaemonMsg::Output {
                text: String::new(),
                error: Some(e),
                code,
            },
        }
    }

    /// The state now and every event after it.
    pub fn subscribe(&self) -> (SweepState, broadcast::Receiver<Arc<Envelope>>) {
        let st = self.state();
        (st.clone(), self.events.subscribe())
    }

    pub fn shutdown(&self) -> &CancellationToken {
        &self.shutdown
    }

    fn state(&self) -> std::sync::MutexGuard<'_, SweepState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn meta(&self) -> Meta {
        self.meta.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The one-line status (`nightshift status`, shell prompts).
    pub fn status_line(&self) -> String {
        let st = self.state();
        let m = self.meta();
        let c = st.counts();
        let phase = match (&st.paused, st.finished) {
            (_, true) => "finished".to_string(),
            (Some(why), _) => format!("paused ({why})"),
            (None, _) if !st.paused_models.is_empty() => format!(
                "running, runs of {} paused by the breaker, {} waiting for the operator",
                st.paused_models
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", "),
                c.held
            ),
            (None, _) if c.held > 0 => format!("running, {} waiting for the operator", c.held),
            (None, _) => "running".to_string(),
        };
        format!(
            "nightshift: {} {phase}: {}/{} done ({} ok, {} failed, {} skipped), {} active; pid {}, store {}",
            m.sweep,
            c.done(),
            c.total,
            c.success,
            c.failed,
            c.skipped,
            c.active,
            m.pid,
            m.store.display()
        )
    }

    /// Stop the sweep: at once (runs in flight re-queued), or pause and stop once the runs
    /// in flight have finished.
    fn stop(self: &Arc<Self>, now: bool) {
        if now {
            let _ = self.cmds.send(Command::Shutdown);
            self.shutdown.cancel();
            return;
        }
        let _ = self.cmds.send(Command::Pause);
        let hub = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                if hub.state().counts().active == 0 {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            }
            let _ = hub.cmds.send(Command::Shutdown);
            hub.shutdown.cancel();
        });
    }
}

/// The engine's observer that feeds the hub.
pub struct HubObserver(pub Arc<Hub>);

impl Observer for HubObserver {
    fn on_event(&mut self, env: &Envelope) -> anyhow::Result<()> {
        // State and broadcast under one lock: a client subscribing under the same lock sees
        // every event after its snapshot exactly once.
        let mut st = self.0.state();
        let _ = st.apply(env);
        if let Event::SweepStarted { runtime, gpus, .. } = &env.event {
            let mut m = self.0.meta.lock().unwrap_or_else(|e| e.into_inner());
            m.runtime = runtime.clone();
            m.gpus = *gpus;
        }
        let _ = self.0.events.send(Arc::new(env.clone()));
        Ok(())
    }
}

/// Why the socket cannot be taken.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error("a sweep is already running on this store (its socket {0} answers): `nightshift attach` joins it")]
    Live(PathBuf),
    #[error("cannot listen on {path}: {why}")]
    Io { path: PathBuf, why: String },
}

/// Listen on the store's socket, owner-only. A socket file nobody answers on is stale (a
/// daemon killed with -9): it is taken over, and the `bool` says so.
pub fn bind(store: &Path) -> Result<(UnixListener, bool), BindError> {
    let path = protocol::socket_path(store);
    let stale = path.exists();
    if stale {
        if std::os::unix::net::UnixStream::connect(&path).is_ok() {
            return Err(BindError::Live(path));
        }
        let _ = std::fs::remove_file(&path);
    }
    let io = |e: std::io::Error| BindError::Io {
        path: path.clone(),
        why: e.to_string(),
    };
    // Created owner-only from the start: no window in which others could connect.
    let old = unsafe { libc::umask(0o177) };
    let bound = UnixListener::bind(&path);
    unsafe { libc::umask(old) };
    bound.map(|l| (l, stale)).map_err(io)
}

/// Serve clients until the shutdown token fires.
pub async fn serve(listener: UnixListener, hub: Arc<Hub>) {
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let hub = Arc::clone(&hub);
                    tokio::spawn(async move {
                        let _ = client(stream, hub).await;
                    });
                }
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
            },
            _ = hub.shutdown.cancelled() => break,
        }
    }
}

async fn send(w: &mut (impl AsyncWriteExt + Unpin), msg: &DaemonMsg) -> std::io::Result<()> {
    w.write_all(protocol::line(msg).as_bytes()).await
}

async fn client(stream: UnixStream, hub: Arc<Hub>) -> std::io::Result<()> {
    let (r, w) = stream.into_split();
    let mut w = tokio::io::BufWriter::new(w);
    let mut lines = BufReader::new(r).lines();
    let Some(first) = lines.next_line().await? else {
        return Ok(());
    };
    let want = match serde_json::from_str::<ClientMsg>(&first) {
        Ok(ClientMsg::Hello { version, want }) if version == protocol::VERSION => want,
        Ok(ClientMsg::Hello { version, .. }) => {
            let why = format!(
                "protocol version {version} is not this daemon's ({}); use the same nightshift binary",
                protocol::VERSION
            );
            send(&mut w, &DaemonMsg::Refused { why }).await?;
            return w.flush().await;
        }
        _ => {
            let why = "the first message must be a hello".to_string();
            send(&mut w, &DaemonMsg::Refused { why }).await?;
            return w.flush().await;
        }
    };
    match want {
        Want::Status => {
            send(
                &mut w,
                &DaemonMsg::Status {
                    line: hub.status_line(),
                },
            )
            .await?;
            w.flush().await
        }
        Want::Stop { now } => {
            hub.stop(now);
            send(&mut w, &DaemonMsg::Stopping { now }).await?;
            w.flush().await
        }
        Want::Attach => attached(&mut w, &mut lines, hub).await,
        q @ (Want::Results { .. }
        | Want::Show { .. }
        | Want::Digest { .. }
        | Want::Group { .. }) => {
            send(&mut w, &hub.query(q).await).await?;
            w.flush().await
        }
    }
}

async fn attached(
    w: &mut (impl AsyncWriteExt + Unpin),
    lines: &mut tokio::io::Lines<BufReader<tokio::net::unix::OwnedReadHalf>>,
    hub: Arc<Hub>,
) -> std::io::Result<()> {
    let (state, mut rx) = {
        let st = hub.state();
        (st.clone(), hub.events.subscribe())
    };
    let _counted = Attached::new(&hub.clients);
    let welcome = DaemonMsg::Welcome {
        version: protocol::VERSION,
        meta: hub.meta(),
        plan_text: hub.plan_text.clone(),
        state,
        calibration: hub.calibration(),
    };
    send(w, &welcome).await?;
    w.flush().await?;
    loop {
        tokio::select! {
            ev = rx.recv() => match ev {
                Ok(env) => {
                    send(w, &DaemonMsg::Event { env: (*env).clone() }).await?;
                    // Batch what is already queued into one flush.
                    while let Ok(env) = rx.try_recv() {
                        send(w, &DaemonMsg::Event { env: (*env).clone() }).await?;
                    }
                    w.flush().await?;
                }
                Err(broadcast::error::RecvError::Lagged(dropped)) => {
                    let state = hub.state().clone();
                    send(w, &DaemonMsg::Resync { state, dropped }).await?;
                    w.flush().await?;
                }
                Err(broadcast::error::RecvError::Closed) => return w.flush().await,
            },
            line = lines.next_line() => match line? {
                Some(l) => {
                    match serde_json::from_str(&l) {
                        // "Stop the sweep" from a client is the daemon's to carry out.
                        Ok(ClientMsg::Command { command: Command::Shutdown }) => hub.stop(true),
                        Ok(ClientMsg::Command { command }) => {
                            let _ = hub.cmds.send(command);
                        }
                        _ => {}
                    }
                }
                None => return Ok(()),
            },
            _ = hub.shutdown.cancelled() => {
                // Let the last events out before the daemon goes.
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                while let Ok(env) = rx.try_recv() {
                    send(w, &DaemonMsg::Event { env: (*env).clone() }).await?;
                }
                return w.flush().await;
            }
        }
    }
}
