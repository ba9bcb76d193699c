//! What one client shows and where its operator is in it: the view, the selection, the
//! log pane's place, the popup and the line being typed. The night itself (the state the
//! client folds) is `App`'s; this is what two clients on one sweep do not share.

use super::{Input, LogTab, Pane, Popup, ResultsState, View};

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
}

impl Default for Ui {
    fn default() -> Ui {
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
        }
    }
}
