//! What one client shows and where its operator is in it: the view, the selection, the
//! log pane's place, the popup, the line being typed and the theme. The night itself is
//! [`super::Night`], read through [`super::Seen`]: what two clients on one sweep share,
//! where this is what they do not. The key handlers (`keys.rs`, `actions.rs`,
//! `command.rs`) are `Ui`'s methods for that reason: a key moves the operator, and only
//! an effect the loop carries out can change the sweep.

use super::{Input, LogLine, LogTab, Pane, Popup, ResultsState, Seen, View};
use crate::model::RunId;
use crate::tui::theme::Theme;
use std::collections::VecDeque;

pub struct Ui {
    pub view: View,
    pub focus: Pane,
    /// The queue's selection, by identity: the commit's index in the plan (the queue lists
    /// the plan's commits in plan order, whatever happens to their runs) and the variant's
    /// column. The results view keeps its own, by run ([`RowSelection`]).
    pub sel_commit: usize,
    pub sel_variant: usize,
    /// Until the operator moves, the selection follows the newest active run.
    pub auto_select: bool,
    pub log_tab: LogTab,
    pub follow: bool,
    /// The 3-way view shows only commits with a comparison of this verdict (`better`,
    /// `worse`, `same`, or `weak`: n=1 or uncalibrated).
    pub verdict_filter: Option<String>,
    /// How far the run detail popup is scrolled (reset when it opens).
    pub detail_scroll: usize,
    /// Long log lines wrapped onto the next rows instead of cut at the pane's edge.
    pub wrap: bool,
    /// Lines between the bottom of the log pane and the end of the ring.
    pub log_scroll: usize,
    pub search: Option<String>,
    /// Index (into the shown ring) of the current match.
    pub search_at: Option<usize>,
    pub results: ResultsState,
    pub popup: Option<Popup>,
    pub input: Option<Input>,
    pub toast: Option<String>,
    /// This client's colours (`t` cycles the built-in themes).
    pub theme: Theme,
}

impl Ui {
    pub fn new(theme: Theme) -> Ui {
        Ui {
            view: View::Sweep,
            focus: Pane::Queue,
            sel_commit: 0,
            sel_variant: 0,
            auto_select: true,
            log_tab: LogTab::Server,
            follow: true,
            verdict_filter: None,
            detail_scroll: 0,
            wrap: false,
            log_scroll: 0,
            search: None,
            search_at: None,
            results: ResultsState::default(),
            popup: None,
            input: None,
            toast: None,
            theme,
        }
    }
}

impl Ui {
    pub(crate) fn selected_run(&self, at: &Seen<'_>) -> Option<RunId> {
        at.night
            .cells
            .get(self.sel_commit)
            .and_then(|row| row.get(self.sel_variant))
            .copied()
            .flatten()
    }

    pub(crate) fn select_run(&mut self, at: &Seen<'_>, run: RunId) {
        let spec = &at.night.plan.runs[run.0 as usize];
        self.sel_commit = spec.commit;
        if let Some(c) = at.night.variants.iter().position(|v| *v == spec.variant) {
            self.sel_variant = c;
        }
        self.log_scroll = 0;
        self.search_at = None;
    }

    pub(crate) fn shown_log<'a>(&self, at: &Seen<'a>) -> Option<&'a VecDeque<LogLine>> {
        let run = self.selected_run(at)?;
        Some(
            at.night
                .logs
                .get(run.0 as usize)?
                .as_ref()?
                .tab(self.log_tab),
        )
    }
}
