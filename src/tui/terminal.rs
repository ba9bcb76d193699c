//! Raw mode and the alternate screen, restored on every way out: normal return (drop),
//! panic (hook), SIGTERM/SIGHUP (the loop quits and drops this).
//!
//! While the screen is ours, stderr goes to a file: a warning printed by any part of the
//! program would otherwise land in the middle of the picture and stay there (ratatui only
//! redraws cells it changed). It is put back before a panic message is printed.

use crossterm::event::{DisableMouseCapture, EnableMouseCapture};
use crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use crossterm::{cursor, execute};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;
use std::io::{stdout, Stdout};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Once;

/// The terminal's stderr while ours points at a file; -1 when not redirected.
static SAVED_STDERR: AtomicI32 = AtomicI32::new(-1);

#[cfg(unix)]
fn redirect_stderr(to: &Path) -> bool {
    use std::os::fd::AsRawFd;
    let Ok(file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(to)
    else {
        return false;
    };
    // SAFETY: plain fd duplication; the saved fd stays open until restore_stderr.
    unsafe {
        let saved = libc::dup(2);
        if saved < 0 {
            return false;
        }
        if libc::dup2(file.as_raw_fd(), 2) < 0 {
            libc::close(saved);
            return false;
        }
        SAVED_STDERR.store(saved, Ordering::SeqCst);
    }
    true
}

#[cfg(not(unix))]
fn redirect_stderr(_to: &Path) -> bool {
    false
}

fn restore_stderr() {
    let saved = SAVED_STDERR.swap(-1, Ordering::SeqCst);
    #[cfg(unix)]
    if saved >= 0 {
        // SAFETY: `saved` came from dup() above and is closed exactly once (swap).
        unsafe {
            libc::dup2(saved, 2);
            libc::close(saved);
        }
    }
    #[cfg(not(unix))]
    let _ = saved;
}

pub type Term = Terminal<CrosstermBackend<Stdout>>;

pub struct Guard {
    pub term: Term,
    /// Where stderr went while the screen was ours (None: not redirected).
    pub stderr_log: Option<PathBuf>,
}

/// Put the terminal back; safe to call more than once.
pub(crate) fn restore() {
    restore_stderr();
    let _ = disable_raw_mode();
    let _ = execute!(
        stdout(),
        DisableMouseCapture,
        LeaveAlternateScreen,
        cursor::Show
    );
}

static HOOK: Once = Once::new();

impl Guard {
    /// `stderr_log`: where to send stderr meanwhile (None leaves it alone).
    pub(crate) fn enter(stderr_log: Option<PathBuf>) -> anyhow::Result<Guard> {
        HOOK.call_once(|| {
            let prev = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                restore();
                prev(info);
            }));
        });
        enable_raw_mode()?;
        execute!(
            stdout(),
            EnterAlternateScreen,
            EnableMouseCapture,
            cursor::Hide
        )?;
        let term = Terminal::new(CrosstermBackend::new(stdout()))?;
        let stderr_log = stderr_log.filter(|p| {
            p.parent()
                .is_none_or(|d| std::fs::create_dir_all(d).is_ok())
                && redirect_stderr(p)
        });
        Ok(Guard { term, stderr_log })
    }

    /// Leave the screen for a child process (the pager) and come back.
    pub(crate) fn suspend<T>(&mut self, f: impl FnOnce() -> T) -> T {
        restore();
        let out = f();
        if let Some(p) = &self.stderr_log {
            redirect_stderr(p);
        }
        let _ = enable_raw_mode();
        let _ = execute!(
            stdout(),
            EnterAlternateScreen,
            EnableMouseCapture,
            cursor::Hide
        );
        let _ = self.term.clear();
        out
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        restore();
    }
}
