//! The daemon's side of the socket: a hub the engine feeds (a mirror of the sweep state and
//! a bounded broadcast of events) and one task per client. A slow client never slows the
//! engine: it lags, loses events from the broadcast, and gets the current state instead.

use super::protocol::{self, ClientMsg, DaemonMsg, Meta, Want};
use crate::engine::CommandSender;
use crate::event::{Command, Envelope, Event};
use crate::observer::Observer;
use crate::state::SweepState;
use futures_util::StreamExt;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::broadcast;
use tokio_util::codec::{FramedRead, LinesCodec};
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
    /// The activity log (last [`protocol::ACTIVITY_SENT`]), kept under the state's lock so
    /// a welcome's log and its snapshot agree; runs named by their plan keys.
    activity: Mutex<std::collections::VecDeque<crate::report::activity::Entry>>,
    keys: std::sync::OnceLock<Vec<String>>,
    /// Which runs the plan marks unrunnable: `status` counts progress as the TUI does.
    unrunnable: std::sync::OnceLock<Vec<bool>>,
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
            activity: Mutex::new(Default::default()),
            keys: Default::default(),
            unrunnable: Default::default(),
        })
    }

    /// What the hub needs of the plan: its run keys (to name runs in the activity log) and
    /// which runs it marks unrunnable; and the activity log so far (a night resumed from
    /// its store).
    pub(crate) fn know_plan(
        &self,
        plan: &crate::plan::Plan,
        past: Vec<crate::report::activity::Entry>,
    ) {
        let _ = self
            .keys
            .set(plan.runs.iter().map(|r| r.key.clone()).collect());
        let _ = self
            .unrunnable
            .set(plan.runs.iter().map(|r| r.skip_reason.is_some()).collect());
        let mut a = self.activity_log();
        for e in past {
            push_kept(&mut a, e);
        }
    }

    fn activity_log(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::VecDeque<crate::report::activity::Entry>> {
        self.activity.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Where clients' commands go (the engine); the daemon's own watches send there too.
    pub fn commands(&self) -> CommandSender {
        self.cmds.clone()
    }

    /// An event the engine can no longer send (it stopped on a failure): attached clients
    /// and the alerts still hear why.
    pub(crate) fn tell(self: &Arc<Self>, event: Event) {
        let env = Envelope {
            seq: u64::MAX,
            at_ms: crate::event::now_ms(),
            event,
        };
        let _ = HubObserver(Arc::clone(self)).on_event(&env);
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
        let r = tokio::task::spawn_blocking(move || answer_query(&store, want))
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
    pub(crate) fn subscribe(&self) -> (SweepState, broadcast::Receiver<Arc<Envelope>>) {
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
    pub(crate) fn status_line(&self) -> String {
        let st = self.state();
        let m = self.meta();
        let c = st.counts();
        let unrunnable = self.unrunnable.get();
        let p = st.progress(|i| unrunnable.and_then(|v| v.get(i)).copied().unwrap_or(false));
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
        // The header's words and numbers: done of the runnable runs, the store's counts.
        let not_runnable = if p.not_runnable > 0 {
            format!(" ({} not runnable)", p.not_runnable)
        } else {
            String::new()
        };
        format!(
            "nightshift: {} {phase}: {}/{} done ({} ok, {} failed, {} held, {} skipped{not_runnable}), {} active; pid {}, store {}",
            m.sweep,
            p.done,
            p.total,
            c.success,
            c.failed,
            c.held,
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

/// A query (`results`, `show`, `digest`, `group`) on the live store, as the daemon answers
/// it (off the async workers). The live store's lock is held only for the copy
/// ([`crate::store::Store::reader`]): the engine's next state barrier waits on that lock, never on the
/// query's computation.
pub fn answer_query(
    store: &std::sync::Mutex<crate::store::Store>,
    want: Want,
) -> Result<String, (i32, String)> {
    let s = store.lock().unwrap_or_else(|e| e.into_inner()).reader();
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
}

/// The engine's observer that feeds the hub.
fn push_kept(
    log: &mut std::collections::VecDeque<crate::report::activity::Entry>,
    e: crate::report::activity::Entry,
) {
    if log.len() >= protocol::ACTIVITY_SENT {
        log.pop_front();
    }
    log.push_back(e);
}

pub struct HubObserver(pub Arc<Hub>);

impl Observer for HubObserver {
    fn on_event(&mut self, env: &Envelope) -> anyhow::Result<()> {
        // State and broadcast under one lock: a client subscribing under the same lock sees
        // every event after its snapshot exactly once.
        let mut st = self.0.state();
        let _ = st.apply(env);
        let keys = self.0.keys.get();
        let key = |r: crate::model::RunId| {
            keys.and_then(|k| k.get(r.0 as usize).cloned())
                .unwrap_or_else(|| r.to_string())
        };
        if let Some(e) = crate::report::activity::entry(env, &key) {
            push_kept(&mut self.0.activity_log(), e);
        }
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

/// The daemon's hold on its store: a lifetime `flock` on `daemon.lock`, taken before the
/// socket is touched, and the identity of the socket it bound, so it removes that socket
/// and never another daemon's.
pub struct Bound {
    _lock: std::fs::File,
    socket: PathBuf,
    identity: Option<(u64, u64)>,
}

impl Bound {
    /// Remove the socket if it is still the one this daemon bound.
    pub(crate) fn remove_socket(&self) {
        if self.identity.is_some() && identity(&self.socket) == self.identity {
            let _ = std::fs::remove_file(&self.socket);
        }
    }
}

fn identity(p: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(p)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// The store's daemon lock, taken without waiting: `None` when another process holds it.
fn lock_store(store: &Path) -> std::io::Result<Option<std::fs::File>> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(store.join("daemon.lock"))?;
    match rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(Some(f)),
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Listen on the store's socket, owner-only. One daemon per store: the store's lock is
/// taken first and held for the daemon's life, so of two racing daemons one binds and the
/// other is told a sweep is running. A socket file nobody answers on is stale (a daemon
/// killed with -9): the lock's holder takes it over, and the `bool` says so.
pub fn bind(store: &Path) -> Result<(UnixListener, bool, Bound), BindError> {
    let path = protocol::socket_path(store);
    let io = |e: std::io::Error| BindError::Io {
        path: path.clone(),
        why: e.to_string(),
    };
    let lock = match lock_store(store).map_err(io)? {
        Some(l) => l,
        None => return Err(BindError::Live(path)),
    };
    let stale = path.exists();
    if stale {
        match std::os::unix::net::UnixStream::connect(&path) {
            Ok(_) => return Err(BindError::Live(path)),
            // Not ours to connect to is not dead: another user's daemon may be serving.
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(BindError::Io {
                    why: "it is not yours to connect to (permission denied): another user's sweep may be running there; it is left alone".into(),
                    path,
                })
            }
            Err(_) => {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    // Created owner-only from the start: no window in which others could connect.
    let old = rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o177));
    let bound = UnixListener::bind(&path);
    rustix::process::umask(old);
    let listener = bound.map_err(io)?;
    let guard = Bound {
        _lock: lock,
        identity: identity(&path),
        socket: path,
    };
    Ok((listener, stale, guard))
}

/// A connection has this long to say hello; one that never speaks costs a file descriptor
/// for no more than that.
const HELLO_WITHIN: Duration = Duration::from_secs(10);
/// Connections accepted but not yet past their hello. Beyond it the oldest is dropped to
/// admit the newest: a flood of silent connections cannot lock `status` out.
const MAX_PENDING: usize = 128;
/// Clients past their hello at once (attached TUIs, queries); beyond it a clear refusal.
const MAX_CLIENTS: usize = 128;
/// The longest line a client may send (its messages are a few hundred bytes); a longer one
/// ends the connection before it costs memory.
const MAX_LINE: usize = 1 << 20;
/// A client that does not take what it is sent within this is dropped (it reattaches and
/// resyncs); its backlog is never buffered without bound.
const WRITE_WITHIN: Duration = Duration::from_secs(30);

/// Who waits to say hello, oldest first, each with the token that drops it.
#[derive(Default)]
struct Gate {
    pending: Mutex<(u64, VecDeque<(u64, CancellationToken)>)>,
    clients: AtomicUsize,
}

/// A connection's place in the gate while it has not said hello.
struct Ticket {
    id: u64,
    drop_me: CancellationToken,
    gate: Arc<Gate>,
}

impl Gate {
    /// Admit a new connection, dropping the oldest silent one when the gate is full.
    fn admit(self: &Arc<Self>) -> Ticket {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        while p.1.len() >= MAX_PENDING {
            if let Some((_, t)) = p.1.pop_front() {
                t.cancel();
            }
        }
        p.0 += 1;
        let id = p.0;
        let drop_me = CancellationToken::new();
        p.1.push_back((id, drop_me.clone()));
        Ticket {
            id,
            drop_me,
            gate: Arc::clone(self),
        }
    }

    /// Out of descriptors: free one by dropping the oldest silent connection.
    fn evict_oldest(&self) {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, t)) = p.1.pop_front() {
            t.cancel();
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut p = self.gate.pending.lock().unwrap_or_else(|e| e.into_inner());
        p.1.retain(|(id, _)| *id != self.id);
    }
}

/// Serve clients until the shutdown token fires. No client can end the daemon: each has
/// its own task, bounded in time, lines and buffers.
pub async fn serve(listener: UnixListener, hub: Arc<Hub>) {
    let gate = Arc::new(Gate::default());
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let ticket = gate.admit();
                    let hub = Arc::clone(&hub);
                    let gate = Arc::clone(&gate);
                    tokio::spawn(async move {
                        let _ = client(stream, hub, ticket, gate).await;
                    });
                }
                Err(e) => {
                    if e.raw_os_error() == Some(libc::EMFILE) || e.raw_os_error() == Some(libc::ENFILE) {
                        gate.evict_oldest();
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            _ = hub.shutdown.cancelled() => break,
        }
    }
}

type Lines = FramedRead<tokio::net::unix::OwnedReadHalf, LinesCodec>;

async fn send(w: &mut (impl AsyncWriteExt + Unpin), msg: &DaemonMsg) -> std::io::Result<()> {
    within(w.write_all(protocol::line(msg).as_bytes())).await
}

async fn flush(w: &mut (impl AsyncWriteExt + Unpin)) -> std::io::Result<()> {
    within(w.flush()).await
}

/// A write the client must take within [`WRITE_WITHIN`].
async fn within(f: impl std::future::Future<Output = std::io::Result<()>>) -> std::io::Result<()> {
    tokio::time::timeout(WRITE_WITHIN, f)
        .await
        .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()))
}

/// Say why, briefly (a client that does not read does not hold us), and close.
async fn refuse(w: &mut (impl AsyncWriteExt + Unpin), why: String) -> std::io::Result<()> {
    let line = protocol::line(&DaemonMsg::Refused { why });
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        w.write_all(line.as_bytes()).await?;
        w.flush().await
    })
    .await;
    Ok(())
}

async fn client(
    stream: UnixStream,
    hub: Arc<Hub>,
    ticket: Ticket,
    gate: Arc<Gate>,
) -> std::io::Result<()> {
    // Who is at the other end, as the kernel says (SO_PEERCRED): a command's signer is
    // this uid, the name the client sends only a label beside it.
    let peer = stream.peer_cred().ok().map(|c| c.uid());
    let (r, w) = stream.into_split();
    let mut w = tokio::io::BufWriter::new(w);
    let mut lines: Lines = FramedRead::new(r, LinesCodec::new_with_max_length(MAX_LINE));
    let first = tokio::select! {
        l = tokio::time::timeout(HELLO_WITHIN, lines.next()) => l,
        _ = ticket.drop_me.cancelled() => {
            let why = format!("too many connections waiting to say hello ({MAX_PENDING}); this was the oldest");
            return refuse(&mut w, why).await;
        }
    };
    drop(ticket);
    let first = match first {
        Err(_) => {
            let why = format!("no hello within {} s", HELLO_WITHIN.as_secs());
            return refuse(&mut w, why).await;
        }
        Ok(None) => return Ok(()),
        Ok(Some(Err(e))) => return refuse(&mut w, format!("unreadable first line: {e}")).await,
        Ok(Some(Ok(l))) => l,
    };
    let want = match serde_json::from_str::<ClientMsg>(&first) {
        Ok(ClientMsg::Hello { version, want }) if version == protocol::VERSION => want,
        Ok(ClientMsg::Hello { version, .. }) => {
            let why = format!(
                "protocol version {version} is not this daemon's ({}); use the same nightshift binary",
                protocol::VERSION
            );
            return refuse(&mut w, why).await;
        }
        _ => return refuse(&mut w, "the first message must be a hello".into()).await,
    };
    if gate.clients.fetch_add(1, Ordering::SeqCst) >= MAX_CLIENTS {
        gate.clients.fetch_sub(1, Ordering::SeqCst);
        let why = format!("{MAX_CLIENTS} clients are connected already; try again when one leaves");
        return refuse(&mut w, why).await;
    }
    let _counted = Counted(&gate.clients);
    match want {
        Want::Status => {
            send(
                &mut w,
                &DaemonMsg::Status {
                    line: hub.status_line(),
                },
            )
            .await?;
            flush(&mut w).await
        }
        Want::Stop { now } => {
            hub.stop(now);
            send(&mut w, &DaemonMsg::Stopping { now }).await?;
            flush(&mut w).await
        }
        Want::Attach => attached(&mut w, &mut lines, hub, peer).await,
        q @ (Want::Results { .. }
        | Want::Show { .. }
        | Want::Digest { .. }
        | Want::Group { .. }) => {
            send(&mut w, &hub.query(q).await).await?;
            flush(&mut w).await
        }
    }
}

/// One connection counted in the gate while it lives.
struct Counted<'a>(&'a AtomicUsize);

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The command signed by the connection's uid; the name the client gave kept as a label
/// (`alice (uid 1000)`), so no client can act in another user's name.
fn signed_by_peer(command: Command, peer: Option<u32>) -> Command {
    let Some(uid) = peer else { return command };
    match command {
        Command::Signed { by, saw, command } => {
            // A name that already carries a uid (a client echoing one) keeps only its name.
            let name = by.split(" (uid ").next().unwrap_or("").trim().to_string();
            Command::Signed {
                by: if name.is_empty() {
                    format!("uid {uid}")
                } else {
                    format!("{name} (uid {uid})")
                },
                saw,
                command,
            }
        }
        c => Command::Signed {
            by: format!("uid {uid}"),
            saw: None,
            command: Box::new(c),
        },
    }
}

async fn attached(
    w: &mut (impl AsyncWriteExt + Unpin),
    lines: &mut Lines,
    hub: Arc<Hub>,
    peer: Option<u32>,
) -> std::io::Result<()> {
    let (state, activity, mut rx) = {
        let st = hub.state();
        let activity = hub.activity_log().iter().cloned().collect();
        (st.clone(), activity, hub.events.subscribe())
    };
    let _counted = Attached::new(&hub.clients);
    let welcome = DaemonMsg::Welcome {
        version: protocol::VERSION,
        meta: hub.meta(),
        plan_text: hub.plan_text.clone(),
        state,
        calibration: hub.calibration(),
        activity,
    };
    send(w, &welcome).await?;
    flush(w).await?;
    loop {
        tokio::select! {
            ev = rx.recv() => match ev {
                Ok(env) => {
                    send(w, &DaemonMsg::Event { env: (*env).clone() }).await?;
                    // Batch what is already queued into one flush.
                    while let Ok(env) = rx.try_recv() {
                        send(w, &DaemonMsg::Event { env: (*env).clone() }).await?;
                    }
                    flush(w).await?;
                }
                Err(broadcast::error::RecvError::Lagged(dropped)) => {
                    let state = hub.state().clone();
                    send(w, &DaemonMsg::Resync { state, dropped }).await?;
                    flush(w).await?;
                }
                Err(broadcast::error::RecvError::Closed) => return flush(w).await,
            },
            line = lines.next() => match line {
                Some(Ok(l)) => {
                    match serde_json::from_str(&l) {
                        Ok(ClientMsg::Command { command }) => {
                            let inner = match &command {
                                Command::Signed { command, .. } => command.as_ref(),
                                c => c,
                            };
                            match inner {
                                // "Stop the sweep" from a client is the daemon's to carry out.
                                Command::Shutdown => hub.stop(true),
                                // The engine's own commands are not a client's to send.
                                Command::DiskSpace { .. } => {
                                    let why = "the disk watch's command is the daemon's own, not a client's".to_string();
                                    send(w, &DaemonMsg::Refused { why }).await?;
                                    flush(w).await?;
                                }
                                _ => {
                                    let _ = hub.cmds.send(signed_by_peer(command, peer));
                                }
                            }
                        }
                        // Answered, not skipped: the client learns its message went nowhere.
                        Ok(ClientMsg::Hello { .. }) | Err(_) => {
                            let head: String = l.chars().take(60).collect();
                            let why = format!("not a command this daemon knows (protocol {}): {head}", protocol::VERSION);
                            send(w, &DaemonMsg::Refused { why }).await?;
                            flush(w).await?;
                        }
                    }
                }
                // A line past the limit, or a read error: this client is done.
                Some(Err(_)) | None => return Ok(()),
            },
            _ = hub.shutdown.cancelled() => {
                // Let the last events out before the daemon goes.
                tokio::time::sleep(Duration::from_millis(200)).await;
                while let Ok(env) = rx.try_recv() {
                    send(w, &DaemonMsg::Event { env: (*env).clone() }).await?;
                }
                return flush(w).await;
            }
        }
    }
}
