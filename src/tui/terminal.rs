//! Raw mode and the alternate screen, restored on every way out: normal return (drop),
//! panic (hook), SIGTERM/SIGHUP (the loop quits and drops this).

use crossterm::event::{DisableMouseCapture, EnableMouseCapture};
use crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use crossterm::{cursor, execute};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;
use std::io::{stdout, Stdout};
use std::sync::Once;

pub type Term = Terminal<CrosstermBackend<Stdout>>;

pub struct Guard {
    pub term: Term,
}

/// Put the terminal back; safe to call more than once.
pub fn restore() {
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
    pub fn enter() -> anyhow::Result<Guard> {
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
        Ok(Guard { term })
    }

    /// Leave the screen for a child process (the pager) and come back.
    pub fn suspend<T>(&mut self, f: impl FnOnce() -> T) -> T {
        restore();
        let out = f();
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
