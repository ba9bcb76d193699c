//! What a client's screen does about what arrives: the night folds it ([`Night::fold`],
//! `fold.rs`), and the screen says another operator's action, keeps the log pane where
//! the operator left it, and follows the newest active run until the operator moves.

use super::*;

impl App {
    pub(crate) fn on_envelope(&mut self, env: &Envelope) {
        let watched = self.selected_run();
        let f = self.night.fold(env, watched);
        if f.ended {
            self.caches.learned.take();
        }
        if let Some(e) = &f.activity {
            let mine = self
                .me
                .as_deref()
                .is_some_and(|me| crate::event::signed_by(&e.source, me));
            if e.refused() && mine {
                // Ours, refused: the run moved since this screen showed it; say so, and
                // the operator acts again on it as it is now.
                self.ui.toast = Some(format!("⚠ {}: {}", e.what, e.outcome));
            } else if e.by_operator() && !mine {
                // Another operator's action: every client sees it as it happens.
                self.ui.toast = Some(format!("⚑ {}: {} — {}", e.source, e.what, e.outcome));
            }
        }
        // The shown ring moved under the operator: the match and the place they scrolled
        // to stay on the same lines.
        let (added, gone) = f.watched_lines[self.ui.log_tab as usize];
        if let Some(a) = self.ui.search_at.as_mut() {
            *a = a.saturating_sub(gone as usize);
        }
        if !self.ui.follow {
            self.ui.log_scroll += added as usize;
        }
        if let (Some((run, to)), true) = (f.moved, self.ui.auto_select) {
            let cur_active = watched.is_some_and(|r| self.night.state.run(r).state.is_active());
            if to.is_active() && !cur_active {
                self.select_run(run);
            } else if Some(run) == watched && !to.is_active() {
                // The one we watched ended: move to the newest still running.
                if let Some(next) = self.night.newest_active() {
                    self.select_run(next);
                }
            }
        }
    }
}
