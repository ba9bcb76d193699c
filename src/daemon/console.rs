//! The daemon's own lines (stdout), what happens to them when the terminal goes, and the
//! signals that stop the sweep.
//!
//! A foreground sweep (`run --headless` in tmux or over SSH) loses its terminal when the
//! session drops: the kernel sends SIGHUP, and every later write to the terminal fails with
//! EIO. `println!` panics on that, which ended the night. So: SIGHUP is handled from the
//! daemon's first moment, and its handler points stdout and stderr at `daemon.log` in the
//! store; and the daemon's lines are written with [`say`], which drops a line it cannot
//! write (the few between the hangup and the handler) instead of panicking.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// stdout that never fails the caller: a line the terminal can no longer take is lost from
/// the screen (it was shown nowhere else yet), never the sweep.
pub struct Console;

impl Write for Console {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let _ = std::io::stdout().lock().write_all(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let _ = std::io::stdout().lock().flush();
        Ok(())
    }
}

/// One line on the daemon's stdout (the terminal, `daemon.log`, or journald).
pub fn say(line: impl std::fmt::Display) {
    let _ = writeln!(Console, "{line}");
}

/// Open the daemon's log for appending: owner-only, and never through a symlink (a link
/// planted at `STORE/daemon.log` must not make the daemon append to the file it names).
pub(crate) fn open_log(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                std::io::Error::other(format!(
                    "{} is a symbolic link; the daemon's log must be a plain file",
                    path.display()
                ))
            } else {
                e
            }
        })
}

/// Handle SIGHUP for the rest of the process's life: the sweep goes on; a foreground
/// daemon's stdout and stderr move to `log` (the terminal is gone). Call it inside the
/// runtime, before anything slow.
pub(crate) fn on_hangup(log: PathBuf, foreground: bool) {
    use tokio::signal::unix::{signal, SignalKind};
    // Registered here, synchronously: from now on SIGHUP's default action (exit) is off.
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        return;
    };
    tokio::spawn(async move {
        let mut moved = false;
        while hup.recv().await.is_some() {
            if foreground && !moved {
                moved = true;
                match redirect(&log) {
                    Ok(()) => say(format_args!(
                        "nightshift: the terminal hung up (SIGHUP): the sweep goes on, its lines now go to {}",
                        log.display()
                    )),
                    Err(e) => tracing::warn!(
                        "SIGHUP: could not move the output to {}: {e}; lines are dropped",
                        log.display()
                    ),
                }
            } else {
                tracing::info!(
                    "SIGHUP ignored: the sweep goes on (`nightshift attach` rejoins it)"
                );
            }
        }
    });
}

/// SIGINT and SIGTERM stop the sweep cleanly: runs in flight are cancelled and re-queued.
pub(crate) fn stop_on_signals(shutdown: tokio_util::sync::CancellationToken) {
    tokio::spawn(async move {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let mut term = match signal(SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => return,
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {},
                _ = term.recv() => {},
            }
            tracing::warn!(
                "stopping: cancelling runs in flight (run the same command to resume; a second signal exits at once)"
            );
            shutdown.cancel();
            // Teardown can hang on a stuck Docker daemon: a second signal must still work.
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {},
                _ = term.recv() => {},
            }
            tracing::warn!("second signal: exiting now; leftovers are removed on the next run");
            std::process::exit(130);
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            shutdown.cancel();
        }
    });
}

/// Point stdout and stderr at `log`.
fn redirect(log: &Path) -> std::io::Result<()> {
    let f = open_log(log)?;
    rustix::stdio::dup2_stdout(&f)?;
    rustix::stdio::dup2_stderr(&f)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_is_never_opened_through_a_link() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("elsewhere");
        std::fs::write(&target, "keep\n").unwrap();
        let link = d.path().join("daemon.log");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = open_log(&link).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep\n");
    }

    #[test]
    fn the_log_is_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("daemon.log");
        open_log(&p).unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
