//! What each action does, by what it acts on: a popup, the selection, one run, the
//! screen's display, the session. `keys.rs` maps keys to actions and dispatches here.

use super::*;

impl App {
    /// A key while a popup is open: `Some` when the popup took it, `None` when it goes on
    /// to the screen beneath (a run's key from its detail closes the detail first).
    pub(super) fn on_popup_action(&mut self, action: Action) -> Option<Vec<Effect>> {
        if let Some(Popup::Help { scroll }) = &mut self.ui.popup {
            // Clamped to the last drawn size: lines scrolled past the end would have to be
            // scrolled back, unseen, before the screen moves again.
            let max = self.hits.help_max.get();
            match action {
                Action::Down => *scroll = (*scroll + 1).min(max),
                Action::PageDown => *scroll = (*scroll + 10).min(max),
                Action::Bottom => *scroll = max,
                Action::Up => *scroll = scroll.saturating_sub(1).min(max),
                Action::PageUp => *scroll = scroll.saturating_sub(10).min(max),
                Action::Top => *scroll = 0,
                Action::Quit | Action::Back | Action::Help | Action::Enter => self.ui.popup = None,
                _ => {}
            }
            return Some(vec![]);
        }
        if let Some(Popup::Activity { scroll }) = &mut self.ui.popup {
            let max = self.activity.len().saturating_sub(1);
            match action {
                Action::Down => *scroll = (*scroll + 1).min(max),
                Action::PageDown => *scroll = (*scroll + 10).min(max),
                Action::Bottom => *scroll = max,
                Action::Up => *scroll = scroll.saturating_sub(1),
                Action::PageUp => *scroll = scroll.saturating_sub(10),
                Action::Top => *scroll = 0,
                Action::Quit | Action::Back | Action::Activity | Action::Enter => {
                    self.ui.popup = None
                }
                _ => {}
            }
            return Some(vec![]);
        }
        if matches!(self.ui.popup, Some(Popup::Detail(_))) {
            let max = self.hits.detail_max.get();
            match action {
                Action::Down => self.ui.detail_scroll = (self.ui.detail_scroll + 1).min(max),
                Action::PageDown => self.ui.detail_scroll = (self.ui.detail_scroll + 10).min(max),
                Action::Up => self.ui.detail_scroll = self.ui.detail_scroll.saturating_sub(1),
                Action::PageUp => self.ui.detail_scroll = self.ui.detail_scroll.saturating_sub(10),
                Action::Top => self.ui.detail_scroll = 0,
                Action::Bottom => self.ui.detail_scroll = max,
                _ => {}
            }
            if matches!(
                action,
                Action::Down
                    | Action::PageDown
                    | Action::Up
                    | Action::PageUp
                    | Action::Top
                    | Action::Bottom
            ) {
                return Some(vec![]);
            }
            match action {
                Action::Quit | Action::Back | Action::Enter => {
                    self.ui.popup = None;
                    return Some(vec![]);
                }
                Action::OpenPager
                | Action::ApplyFix
                | Action::Retry
                | Action::Skip
                | Action::FailureGroup => {
                    self.ui.popup = None;
                }
                _ => return Some(vec![]),
            }
        }
        None
    }

    /// Moving the selection, the log pane or the sort column.
    pub(super) fn on_move(&mut self, action: Action) -> Vec<Effect> {
        match action {
            Action::Up | Action::Down | Action::PageUp | Action::PageDown => {
                let n: isize = match action {
                    Action::Up => -1,
                    Action::Down => 1,
                    Action::PageUp => -20,
                    _ => 20,
                };
                self.move_selection(n);
            }
            Action::Top => match self.list_focus() {
                Focus::Queue => {
                    self.ui.auto_select = false;
                    self.ui.sel_commit = 0;
                }
                Focus::Results => self.ui.results.selected.select_row(&self.result_rows(), 0),
                Focus::Logs => {
                    self.ui.follow = false;
                    self.ui.log_scroll = self.shown_log().map_or(0, |l| l.len());
                }
            },
            Action::Bottom => match self.list_focus() {
                Focus::Queue => {
                    self.ui.auto_select = false;
                    self.ui.sel_commit = self.cells.len().saturating_sub(1);
                }
                Focus::Results => self
                    .ui
                    .results
                    .selected
                    .select_row(&self.result_rows(), usize::MAX),
                Focus::Logs => {
                    self.ui.follow = true;
                    self.ui.log_scroll = 0;
                }
            },
            Action::Left | Action::Right => {
                let right = action == Action::Right;
                if self.ui.view == View::Results {
                    let n = RESULT_COLUMNS.len();
                    self.ui.results.sort_col = if right {
                        (self.ui.results.sort_col + 1) % n
                    } else {
                        (self.ui.results.sort_col + n - 1) % n
                    };
                } else {
                    self.ui.auto_select = false;
                    let n = self.variants.len().max(1);
                    self.ui.sel_variant = if right {
                        (self.ui.sel_variant + 1) % n
                    } else {
                        (self.ui.sel_variant + n - 1) % n
                    };
                    self.ui.log_scroll = 0;
                }
            }
            _ => {}
        }
        vec![]
    }

    /// An action on one run (the selected one, or the one the detail shows): the engine's commands go signed, through `decide`.
    pub(super) fn on_run_action(&mut self, action: Action, run: Option<RunId>) -> Vec<Effect> {
        match action {
            Action::Enter => {
                if let Some(r) = run {
                    self.ui.popup = Some(Popup::Detail(r));
                    self.ui.detail_scroll = 0;
                }
            }
            Action::ApplyFix => {
                if let Some(r) = run {
                    let rec = self.state.run(r);
                    match rec.finding.as_ref().and_then(|f| f.recipe.clone()) {
                        Some(recipe) => {
                            return self.decide(
                                r,
                                Command::ApplyFix {
                                    run: r,
                                    recipe: Some(recipe),
                                },
                            )
                        }
                        None => self.ui.toast = Some(format!("no fix is known for {r}")),
                    }
                }
            }
            Action::Retry => {
                if let Some(r) = run {
                    return self.decide(r, Command::Retry { run: r });
                }
            }
            Action::Skip => {
                if let Some(r) = run {
                    return self.decide(r, Command::Skip { run: r });
                }
            }
            Action::Shell => {
                if let Some(r) = run {
                    if self.state.run(r).state.is_active() {
                        return vec![Effect::Shell(r)];
                    }
                    self.ui.toast = Some(format!("{r} is not running: no container to open"));
                }
            }
            Action::Copy => {
                if let Some(r) = run {
                    return self.copy_command(r);
                }
            }
            Action::Undo => {
                if let Some(r) = run {
                    return self.undo_skip(r);
                }
            }
            Action::SkipCategory => {
                let cat = run.and_then(|r| {
                    let rec = self.state.run(r);
                    run_category(&rec.state, rec.finding.as_ref())
                });
                match cat {
                    Some(c) => self.ui.popup = Some(Popup::Confirm(Confirm::SkipCategory(c))),
                    None => self.ui.toast = Some("the selected run has no failure category".into()),
                }
            }
            Action::FailureGroup => {
                match run.and_then(|r| self.group_of(r)) {
                    Some(g) => self.ui.popup = Some(Popup::Group(g.id)),
                    None => self.ui.toast = Some(
                        "the selected run has no failure group (only unknown failures are grouped)"
                            .into(),
                    ),
                }
            }
            Action::Cancel => {
                if let Some(r) = run {
                    let st = &self.state.run(r).state;
                    if st.is_active() || *st == RunState::Queued {
                        self.ui.popup = Some(Popup::Confirm(Confirm::Cancel(r)));
                    } else {
                        self.ui.toast = Some(format!("{r} is not running or queued"));
                    }
                }
            }
            Action::OpenPager => {
                if let Some(r) = run {
                    return vec![Effect::Pager(r)];
                }
            }
            _ => {}
        }
        vec![]
    }

    /// What the screen shows and how: themes, search, wrap, follow, sorting, filters.
    pub(super) fn on_show_action(&mut self, action: Action) -> Vec<Effect> {
        match action {
            Action::CycleTheme => {
                self.theme = self.theme.next_builtin();
                self.ui.toast = Some(format!("theme: {}", self.theme.name));
            }
            Action::Search => {
                self.ui.input = Some(Input {
                    kind: InputKind::Search,
                    text: String::new(),
                })
            }
            Action::SearchNext => self.jump_match(true),
            Action::SearchPrev => self.jump_match(false),
            Action::CommandLine => {
                self.ui.input = Some(Input {
                    kind: InputKind::Command,
                    text: String::new(),
                })
            }
            Action::Wrap => {
                self.ui.wrap = !self.ui.wrap;
                self.ui.toast = Some(if self.ui.wrap {
                    "long log lines wrap".into()
                } else {
                    "long log lines are cut at the edge (w wraps)".into()
                });
            }
            Action::Follow => {
                self.ui.follow = !self.ui.follow;
                if self.ui.follow {
                    self.ui.log_scroll = 0;
                }
            }
            Action::LogTab => {
                self.ui.log_tab = match self.ui.log_tab {
                    LogTab::Server => LogTab::Bench,
                    LogTab::Bench => LogTab::Server,
                };
                self.ui.log_scroll = 0;
                self.ui.search_at = None;
            }
            Action::SortNext | Action::SortPrev => {
                let n = RESULT_COLUMNS.len();
                let step = if action == Action::SortNext { 1 } else { n - 1 };
                self.ui.results.sort_col = (self.ui.results.sort_col + step) % n;
            }
            Action::NextProblem => self.jump_to_problem(true),
            Action::PrevProblem => self.jump_to_problem(false),
            Action::SortReverse => self.ui.results.reverse = !self.ui.results.reverse,
            Action::FilterStatus => {
                self.ui.results.status = match self.ui.results.status {
                    None => Some(StatusFilter::ALL[0]),
                    Some(s) => {
                        let i = StatusFilter::ALL.iter().position(|x| *x == s).unwrap_or(0);
                        StatusFilter::ALL.get(i + 1).copied()
                    }
                };
            }
            _ => {}
        }
        vec![]
    }

    /// The session: views, panes, help, pause, export, detach and quit.
    pub(super) fn on_session_action(&mut self, action: Action) -> Vec<Effect> {
        match action {
            Action::Help => self.ui.popup = Some(Popup::Help { scroll: 0 }),
            Action::Detach if self.attached => return vec![Effect::Detach],
            Action::Detach => {
                self.ui.toast =
                    Some("nothing to detach from: this sweep runs in this process".into())
            }
            Action::Quit if self.attached && !self.finished => {
                self.ui.popup = Some(Popup::Confirm(Confirm::Detach));
            }
            Action::Quit => {
                if self.state.counts().active > 0 && !self.finished {
                    self.ui.popup = Some(Popup::Confirm(Confirm::Quit));
                } else {
                    return vec![Effect::Quit];
                }
            }
            Action::Back => {
                if self.ui.search.is_some() {
                    self.ui.search = None;
                    self.ui.search_at = None;
                } else if self.ui.view != View::Sweep {
                    self.ui.view = View::Sweep;
                } else {
                    self.ui.auto_select = true;
                    self.ui.follow = true;
                    self.ui.log_scroll = 0;
                    if let Some(r) = self.newest_active() {
                        self.select_run(r);
                    }
                }
            }
            Action::NextPane => {
                self.ui.focus = match self.ui.focus {
                    Pane::Queue => Pane::Logs,
                    Pane::Logs => Pane::Queue,
                }
            }
            Action::View(n) => {
                self.ui.view = match n {
                    2 => View::Logs,
                    3 => View::Results,
                    4 => View::ThreeWay,
                    _ => View::Sweep,
                }
            }
            Action::Activity => self.ui.popup = Some(Popup::Activity { scroll: 0 }),
            Action::PauseResume => {
                let cmd = if self.state.paused.is_some() || !self.state.paused_models.is_empty() {
                    Command::Resume
                } else {
                    Command::Pause
                };
                return vec![Effect::Send(cmd)];
            }
            Action::Export => return vec![Effect::Export(None)],
            _ => {}
        }
        vec![]
    }

    /// `y`: the run's benchmark command to the terminal's clipboard (OSC 52), one line.
    fn copy_command(&mut self, r: RunId) -> Vec<Effect> {
        let spec = &self.plan.runs[r.0 as usize];
        match &self.plan.commit_of(spec).perf_command {
            Some(cmd) => {
                self.ui.toast = Some(format!("copied the command of {} (OSC 52)", spec.key));
                return vec![Effect::Copy(crate::sanitize::one_line(cmd))];
            }
            None => self.ui.toast = Some(format!("{} has no command", spec.key)),
        }
        vec![]
    }

    /// `u`: undo the operator's skip of a run (and only that: a skip by policy or plan is
    /// not the operator's to undo).
    fn undo_skip(&mut self, r: RunId) -> Vec<Effect> {
        let skipped = matches!(
            &self.state.run(r).state,
            RunState::Finished { outcome }
                if outcome.skipped_by() == Some(crate::model::SkipBy::Operator)
        );
        if skipped {
            return vec![Effect::Send(Command::Unskip { run: r })];
        }
        self.ui.toast = Some(format!("{r} is not a run the operator skipped"));
        vec![]
    }
}
