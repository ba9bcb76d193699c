//! What each action does, by what it acts on: a popup, the selection, one run, the
//! screen's display, the session. `keys.rs` maps keys to actions and dispatches here.

use super::*;

impl Ui {
    /// A key while a popup is open: `Some` when the popup took it, `None` when it goes on
    /// to the screen beneath (a run's key from its detail closes the detail first).
    pub(super) fn on_popup_action(&mut self, at: &Seen<'_>, action: Action) -> Option<Vec<Effect>> {
        if let Some(Popup::Help { scroll }) = &mut self.popup {
            // Clamped to the last drawn size: lines scrolled past the end would have to be
            // scrolled back, unseen, before the screen moves again.
            let max = at.hits.help_max.get();
            match action {
                Action::Down => *scroll = (*scroll + 1).min(max),
                Action::PageDown => *scroll = (*scroll + 10).min(max),
                Action::Bottom => *scroll = max,
                Action::Up => *scroll = scroll.saturating_sub(1).min(max),
                Action::PageUp => *scroll = scroll.saturating_sub(10).min(max),
                Action::Top => *scroll = 0,
                Action::Quit | Action::Back | Action::Help | Action::Enter => self.popup = None,
                _ => {}
            }
            return Some(vec![]);
        }
        if let Some(Popup::Activity { scroll }) = &mut self.popup {
            let max = at.night.activity.len().saturating_sub(1);
            match action {
                Action::Down => *scroll = (*scroll + 1).min(max),
                Action::PageDown => *scroll = (*scroll + 10).min(max),
                Action::Bottom => *scroll = max,
                Action::Up => *scroll = scroll.saturating_sub(1),
                Action::PageUp => *scroll = scroll.saturating_sub(10),
                Action::Top => *scroll = 0,
                Action::Quit | Action::Back | Action::Activity | Action::Enter => self.popup = None,
                _ => {}
            }
            return Some(vec![]);
        }
        if matches!(self.popup, Some(Popup::Detail(_))) {
            let max = at.hits.detail_max.get();
            match action {
                Action::Down => self.detail_scroll = (self.detail_scroll + 1).min(max),
                Action::PageDown => self.detail_scroll = (self.detail_scroll + 10).min(max),
                Action::Up => self.detail_scroll = self.detail_scroll.saturating_sub(1),
                Action::PageUp => self.detail_scroll = self.detail_scroll.saturating_sub(10),
                Action::Top => self.detail_scroll = 0,
                Action::Bottom => self.detail_scroll = max,
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
                    self.popup = None;
                    return Some(vec![]);
                }
                Action::OpenPager
                | Action::ApplyFix
                | Action::Retry
                | Action::Skip
                | Action::FailureGroup => {
                    self.popup = None;
                }
                _ => return Some(vec![]),
            }
        }
        None
    }

    /// Moving the selection, the log pane or the sort column.
    pub(super) fn on_move(&mut self, at: &Seen<'_>, action: Action) -> Vec<Effect> {
        match action {
            Action::Up | Action::Down | Action::PageUp | Action::PageDown => {
                let n: isize = match action {
                    Action::Up => -1,
                    Action::Down => 1,
                    Action::PageUp => -20,
                    _ => 20,
                };
                self.move_selection(at, n);
            }
            Action::Top => match self.list_focus() {
                Focus::Queue => {
                    self.auto_select = false;
                    self.sel_commit = 0;
                }
                Focus::Results => self.results.selected.select_row(&self.result_rows(at), 0),
                Focus::Logs => {
                    self.follow = false;
                    self.log_scroll = self.shown_log(at).map_or(0, |l| l.len());
                }
            },
            Action::Bottom => match self.list_focus() {
                Focus::Queue => {
                    self.auto_select = false;
                    self.sel_commit = at.night.cells.len().saturating_sub(1);
                }
                Focus::Results => self
                    .results
                    .selected
                    .select_row(&self.result_rows(at), usize::MAX),
                Focus::Logs => {
                    self.follow = true;
                    self.log_scroll = 0;
                }
            },
            Action::Left | Action::Right => {
                let right = action == Action::Right;
                if self.view == View::Results {
                    let n = RESULT_COLUMNS.len();
                    self.results.sort_col = if right {
                        (self.results.sort_col + 1) % n
                    } else {
                        (self.results.sort_col + n - 1) % n
                    };
                } else {
                    self.auto_select = false;
                    let n = at.night.variants.len().max(1);
                    self.sel_variant = if right {
                        (self.sel_variant + 1) % n
                    } else {
                        (self.sel_variant + n - 1) % n
                    };
                    self.log_scroll = 0;
                }
            }
            _ => {}
        }
        vec![]
    }

    /// An action on one run (the selected one, or the one the detail shows): the engine's commands go signed, through `decide`.
    pub(super) fn on_run_action(
        &mut self,
        at: &Seen<'_>,
        action: Action,
        run: Option<RunId>,
    ) -> Vec<Effect> {
        match action {
            Action::Enter => {
                if let Some(r) = run {
                    self.popup = Some(Popup::Detail(r));
                    self.detail_scroll = 0;
                }
            }
            Action::ApplyFix => {
                if let Some(r) = run {
                    let rec = at.night.state.run(r);
                    match rec.finding.as_ref().and_then(|f| f.recipe.clone()) {
                        Some(recipe) => {
                            return self.decide(
                                at,
                                r,
                                Command::ApplyFix {
                                    run: r,
                                    recipe: Some(recipe),
                                },
                            )
                        }
                        None => self.toast = Some(format!("no fix is known for {r}")),
                    }
                }
            }
            Action::Retry => {
                if let Some(r) = run {
                    return self.decide(at, r, Command::Retry { run: r });
                }
            }
            Action::Skip => {
                if let Some(r) = run {
                    return self.decide(at, r, Command::Skip { run: r });
                }
            }
            Action::Shell => {
                if let Some(r) = run {
                    if at.night.state.run(r).state.is_active() {
                        return vec![Effect::Shell(r)];
                    }
                    self.toast = Some(format!("{r} is not running: no container to open"));
                }
            }
            Action::Copy => {
                if let Some(r) = run {
                    return self.copy_command(at, r);
                }
            }
            Action::Undo => {
                if let Some(r) = run {
                    return self.undo_skip(at, r);
                }
            }
            Action::SkipCategory => {
                let cat = run.and_then(|r| {
                    let rec = at.night.state.run(r);
                    run_category(&rec.state, rec.finding.as_ref())
                });
                match cat {
                    Some(c) => self.popup = Some(Popup::Confirm(Confirm::SkipCategory(c))),
                    None => self.toast = Some("the selected run has no failure category".into()),
                }
            }
            Action::FailureGroup => {
                match run.and_then(|r| at.group_of(r)) {
                    Some(g) => self.popup = Some(Popup::Group(g.id)),
                    None => self.toast = Some(
                        "the selected run has no failure group (only unknown failures are grouped)"
                            .into(),
                    ),
                }
            }
            Action::Cancel => {
                if let Some(r) = run {
                    let st = &at.night.state.run(r).state;
                    if st.is_active() || *st == RunState::Queued {
                        self.popup = Some(Popup::Confirm(Confirm::Cancel(r)));
                    } else {
                        self.toast = Some(format!("{r} is not running or queued"));
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
    pub(super) fn on_show_action(&mut self, at: &Seen<'_>, action: Action) -> Vec<Effect> {
        match action {
            Action::CycleTheme => {
                self.theme = self.theme.next_builtin();
                self.toast = Some(format!("theme: {}", self.theme.name));
            }
            Action::Search => {
                self.input = Some(Input {
                    kind: InputKind::Search,
                    text: String::new(),
                })
            }
            Action::SearchNext => self.jump_match(at, true),
            Action::SearchPrev => self.jump_match(at, false),
            Action::CommandLine => {
                self.input = Some(Input {
                    kind: InputKind::Command,
                    text: String::new(),
                })
            }
            Action::Wrap => {
                self.wrap = !self.wrap;
                self.toast = Some(if self.wrap {
                    "long log lines wrap".into()
                } else {
                    "long log lines are cut at the edge (w wraps)".into()
                });
            }
            Action::Follow => {
                self.follow = !self.follow;
                if self.follow {
                    self.log_scroll = 0;
                }
            }
            Action::LogTab => {
                self.log_tab = match self.log_tab {
                    LogTab::Server => LogTab::Bench,
                    LogTab::Bench => LogTab::Server,
                };
                self.log_scroll = 0;
                self.search_at = None;
            }
            Action::SortNext | Action::SortPrev => {
                let n = RESULT_COLUMNS.len();
                let step = if action == Action::SortNext { 1 } else { n - 1 };
                self.results.sort_col = (self.results.sort_col + step) % n;
            }
            Action::NextProblem => self.jump_to_problem(at, true),
            Action::PrevProblem => self.jump_to_problem(at, false),
            Action::SortReverse => self.results.reverse = !self.results.reverse,
            Action::FilterStatus => {
                self.results.status = match self.results.status {
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
    pub(super) fn on_session_action(&mut self, at: &Seen<'_>, action: Action) -> Vec<Effect> {
        match action {
            Action::Help => self.popup = Some(Popup::Help { scroll: 0 }),
            Action::Detach if at.attached => return vec![Effect::Detach],
            Action::Detach => {
                self.toast = Some("nothing to detach from: this sweep runs in this process".into())
            }
            Action::Quit if at.attached && !at.night.finished => {
                self.popup = Some(Popup::Confirm(Confirm::Detach));
            }
            Action::Quit => {
                if at.night.state.counts().active > 0 && !at.night.finished {
                    self.popup = Some(Popup::Confirm(Confirm::Quit));
                } else {
                    return vec![Effect::Quit];
                }
            }
            Action::Back => {
                if self.search.is_some() {
                    self.search = None;
                    self.search_at = None;
                } else if self.view != View::Sweep {
                    self.view = View::Sweep;
                } else {
                    self.auto_select = true;
                    self.follow = true;
                    self.log_scroll = 0;
                    if let Some(r) = at.night.newest_active() {
                        self.select_run(at, r);
                    }
                }
            }
            Action::NextPane => {
                self.focus = match self.focus {
                    Pane::Queue => Pane::Logs,
                    Pane::Logs => Pane::Queue,
                }
            }
            Action::View(n) => {
                self.view = match n {
                    2 => View::Logs,
                    3 => View::Results,
                    4 => View::ThreeWay,
                    _ => View::Sweep,
                }
            }
            Action::Activity => self.popup = Some(Popup::Activity { scroll: 0 }),
            Action::PauseResume => {
                let cmd = if at.night.state.paused.is_some()
                    || !at.night.state.paused_models.is_empty()
                {
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
    fn copy_command(&mut self, at: &Seen<'_>, r: RunId) -> Vec<Effect> {
        let spec = &at.night.plan.runs[r.0 as usize];
        match &at.night.plan.commit_of(spec).perf_command {
            Some(cmd) => {
                self.toast = Some(format!("copied the command of {} (OSC 52)", spec.key));
                return vec![Effect::Copy(crate::sanitize::one_line(cmd))];
            }
            None => self.toast = Some(format!("{} has no command", spec.key)),
        }
        vec![]
    }

    /// `u`: undo the operator's skip of a run (and only that: a skip by policy or plan is
    /// not the operator's to undo).
    fn undo_skip(&mut self, at: &Seen<'_>, r: RunId) -> Vec<Effect> {
        let skipped = matches!(
            &at.night.state.run(r).state,
            RunState::Finished { outcome }
                if outcome.skipped_by() == Some(crate::model::SkipBy::Operator)
        );
        if skipped {
            return vec![Effect::Send(Command::Unskip { run: r })];
        }
        self.toast = Some(format!("{r} is not a run the operator skipped"));
        vec![]
    }
}
