//! Clients of a sweep's daemon: `status` (one line), `stop`, one-shot commands and
//! queries. (`attach`, the TUI over the socket, is the face's: `cli::attach`.)

use super::protocol::{self, ClientMsg, DaemonMsg, Want};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

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

/// A daemon holds the store's lock (`daemon.lock`): it is running, or starting and about
/// to bind its socket.
pub(crate) fn daemon_holds(store: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    let Ok(f) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(store.join("daemon.lock"))
    else {
        return false;
    };
    rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockShared).is_err()
}

/// How long a client waits for a starting daemon's socket.
const STARTING_WAIT: Duration = Duration::from_secs(10);

pub(crate) fn not_running(store: &Path) -> String {
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
    // A daemon in its first moments holds the store's lock before its socket answers:
    // wait for it (bounded) rather than say no sweep is running.
    let t0 = Instant::now();
    while !alive(store) && daemon_holds(store) && t0.elapsed() < STARTING_WAIT {
        std::thread::sleep(Duration::from_millis(50));
    }
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

/// After the end: how the store's last night ended, and where its digest is (from a
/// snapshot: the store is never locked by asking).
fn last_night(store: &Path) -> Option<String> {
    let s = crate::daemon::commands::snapshot(store)?;
    let mut counts: std::collections::BTreeMap<&str, usize> = Default::default();
    for r in s.runs().values().filter(|r| !r.removed) {
        let word = match &r.record.state {
            crate::model::RunState::Queued => "queued",
            crate::model::RunState::Active { .. } => "interrupted",
            crate::model::RunState::Held { .. } => "held",
            crate::model::RunState::Finished { outcome } => outcome.status(),
        };
        *counts.entry(word).or_default() += 1;
    }
    if counts.is_empty() {
        return None;
    }
    let each: Vec<String> = counts.iter().map(|(k, v)| format!("{v} {k}")).collect();
    let digest = store.join("digest.md");
    Some(format!(
        "nightshift: the last night on this store: {} runs: {}{}",
        counts.values().sum::<usize>(),
        each.join(", "),
        if digest.is_file() {
            format!("; digest: {}", digest.display())
        } else {
            String::new()
        }
    ))
}

/// `nightshift wait`: attached without a screen, until a run is held (3), the sweep ends
/// (0) or `limit` passes (4); 1 when no sweep runs. A held run already waiting at attach
/// counts: the operator is needed now.
pub fn wait(store: &Path, limit: Duration) -> i32 {
    let path = protocol::socket_path(store);
    let Ok(mut s) = std::os::unix::net::UnixStream::connect(&path) else {
        println!("{}", not_running(store));
        return 1;
    };
    let t0 = Instant::now();
    // Reads wake at least every few seconds, so the limit is kept without an event.
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    let first = match hello(&mut s, Want::Attach) {
        Ok(l) => l,
        Err(e) => {
            println!("{e}");
            return 1;
        }
    };
    let held_now = |st: &crate::state::SweepState| st.counts().held;
    match serde_json::from_str::<DaemonMsg>(&first) {
        Ok(DaemonMsg::Welcome { state, .. }) if held_now(&state) > 0 => {
            println!("nightshift: {} runs wait for a decision", held_now(&state));
            return 3;
        }
        Ok(DaemonMsg::Welcome { .. }) => {}
        Ok(DaemonMsg::Refused { why }) => {
            tracing::error!("{why}");
            return 2;
        }
        _ => {
            tracing::error!("unexpected first answer from the daemon");
            return 2;
        }
    }
    let mut r = BufReader::new(s);
    let mut line = String::new();
    while t0.elapsed() < limit {
        // A read cut by the timeout keeps what it had: the rest of the line follows.
        match r.read_line(&mut line) {
            Ok(0) => {
                println!("nightshift: the sweep ended");
                return 0;
            }
            Ok(_) => match serde_json::from_str::<DaemonMsg>(&std::mem::take(&mut line)) {
                Ok(DaemonMsg::Event { env }) => match env.event {
                    crate::event::Event::State {
                        run,
                        to: crate::model::RunState::Held { category },
                        ..
                    } => {
                        println!("nightshift: {run} is held ({category}): it waits for a decision");
                        return 3;
                    }
                    crate::event::Event::SweepFinished { .. } => {
                        println!("nightshift: the sweep ended");
                        return 0;
                    }
                    _ => {}
                },
                Ok(DaemonMsg::Resync { state, .. }) if held_now(&state) > 0 => {
                    println!("nightshift: {} runs wait for a decision", held_now(&state));
                    return 3;
                }
                _ => {}
            },
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => {
                println!("nightshift: the daemon's connection: {e}");
                return 1;
            }
        }
    }
    println!("nightshift: still running after {} s", limit.as_secs());
    4
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
            if let Some(last) = last_night(store) {
                println!("{last}");
            }
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
    let gone = || !alive(store) && !store_held(store) && !daemon_holds(store);
    while !gone() && t0.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(100));
    }
    if !gone() {
        tracing::warn!(
            "the daemon is still stopping after 60 s (runs in flight being torn down); `nightshift status` tells when it has gone"
        );
        return 1;
    }
    println!("nightshift: stopped; runs in flight were re-queued (`nightshift run PLAN` resumes)");
    0
}

/// The daemon this client started, reaped by a thread of its own (never left a zombie); its
/// exit status tells a crash from an end.
#[derive(Clone)]
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

    /// Whether it has exited by now.
    pub(crate) fn has_exited(&self) -> bool {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).is_some()
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
pub(crate) fn why_ended(
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

/// Send one operator command to the live daemon on `store`, as an attached client would
/// (attach, the command, leave). Err says why not (no daemon, refused).
pub(crate) fn send_command(store: &Path, command: crate::event::Command) -> Result<(), String> {
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
    let command = crate::event::Command::Signed {
        by: crate::event::signer("cli"),
        saw: None,
        command: Box::new(command),
    };
    s.write_all(protocol::line(&ClientMsg::Command { command }).as_bytes())
        .map_err(|e| format!("nightshift: writing to the daemon: {e}"))?;
    // Closing our side: the daemon reads the command, then the end.
    let _ = s.shutdown(std::net::Shutdown::Write);
    Ok(())
}

/// A query (`results`, `show`, `digest`) answered by the live daemon: None when no daemon
/// runs on `store` (the caller reads the store itself); else the text, or the error and its
/// exit status.
pub(crate) fn query_text(store: &Path, want: Want) -> Option<Result<String, (i32, String)>> {
    if !alive(store) {
        return None;
    }
    Some(match ask(store, want) {
        // The daemon ended between the check and the question: read the store instead.
        Err(_) if !alive(store) => return None,
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
