//! What keys do: the keymap's actions, selection and scrolling, log search.

use super::*;

impl App {
    pub(crate) fn on_key(&mut self, key: Key) -> Vec<Effect> {
        self.toast = None;
        if let Some(input) = self.input.as_mut() {
            use crossterm::event::KeyCode;
            match key.code {
                KeyCode::Esc => self.input = None,
                KeyCode::Enter => {
                    let Input { kind, text } = self.input.take().expect("input");
                    return match kind {
                        InputKind::Search => {
                            self.set_search(text);
                            vec![]
                        }
                        InputKind::Command => self.run_command_line(&text),
                    };
                }
                KeyCode::Tab if input.kind == InputKind::Command => {
                    let (text, options) = complete(&input.text, &self.recipes);
                    input.text = text;
                    if options.len() > 1 {
                        self.toast = Some(options.join("  "));
                    }
                }
                KeyCode::Backspace if input.text.pop().is_none() => self.input = None,
                KeyCode::Backspace => {}
                KeyCode::Char(c) if !key.ctrl => input.text.push(c),
                _ => {}
            }
            return vec![];
        }
        if let Some(Popup::Group(id)) = &self.popup {
            use crossterm::event::KeyCode;
            let id = id.clone();
            return match key.code {
                KeyCode::Char('s') => {
                    self.popup = None;
                    vec![Effect::Send(Command::SkipGroup { kind: id })]
                }
                KeyCode::Char('r') => {
                    self.popup = None;
                    vec![Effect::Send(Command::RetryGroup { kind: id })]
                }
                KeyCode::Char('f') => {
                    self.popup = None;
                    match self.group_recipe(&id) {
                        Some(recipe) => vec![Effect::Send(Command::FixGroup { kind: id, recipe })],
                        None => {
                            self.toast = Some(format!(
                                "no fix is known for group {id}: `:fix-group RECIPE {id}` names one"
                            ));
                            vec![]
                        }
                    }
                }
                KeyCode::Char('l') => {
                    self.popup = None;
                    self.view = View::Results;
                    self.results.group = Some(id);
                    vec![]
                }
                KeyCode::Esc | KeyCode::Char('q') | KeyCode::Char('n') => {
                    self.popup = None;
                    vec![]
                }
                _ => vec![],
            };
        }
        if let Some(Popup::Confirm(what)) = &self.popup {
            use crossterm::event::KeyCode;
            let what = what.clone();
            if what == Confirm::Detach {
                self.popup = None;
                return match key.code {
                    KeyCode::Char('d') | KeyCode::Char('q') | KeyCode::Enter => {
                        vec![Effect::Detach]
                    }
                    KeyCode::Char('s') => vec![Effect::StopSweep],
                    _ => vec![],
                };
            }
            return match key.code {
                KeyCode::Char('y') | KeyCode::Char('Y') | KeyCode::Enter => {
                    self.popup = None;
                    match what {
                        Confirm::Quit => vec![Effect::Quit],
                        Confirm::Detach => vec![Effect::Detach],
                        Confirm::Cancel(run) => vec![Effect::Send(Command::Cancel { run })],
                        Confirm::SkipCategory(category) => {
                            vec![Effect::Send(Command::SkipCategory { category })]
                        }
                        Confirm::Override { command, .. } => vec![Effect::Send(command)],
                        Confirm::FixCategory(category, recipe) => {
                            vec![Effect::Send(Command::FixCategory { category, recipe })]
                        }
                    }
                }
                KeyCode::Char('n') | KeyCode::Esc | KeyCode::Char('q') => {
                    self.popup = None;
                    vec![]
                }
                _ => vec![],
            };
        }
        let Some(action) = self.keymap.action(key) else {
            return vec![];
        };
        self.on_action(action)
    }

    pub(crate) fn on_action(&mut self, action: Action) -> Vec<Effect> {
        if let Some(Popup::Help { scroll }) = &mut self.popup {
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
                Action::Quit | Action::Back | Action::Help | Action::Enter => self.popup = None,
                _ => {}
            }
            return vec![];
        }
        if let Some(Popup::Activity { scroll }) = &mut self.popup {
            let max = self.activity.len().saturating_sub(1);
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
            return vec![];
        }
        if matches!(self.popup, Some(Popup::Detail(_))) {
            let max = self.hits.detail_max.get();
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
                return vec![];
            }
            match action {
                Action::Quit | Action::Back | Action::Enter => {
                    self.popup = None;
                    return vec![];
                }
                Action::OpenPager
                | Action::ApplyFix
                | Action::Retry
                | Action::Skip
                | Action::FailureGroup => {
                    self.popup = None;
                }
                _ => return vec![],
            }
        }
        // What the last frame showed selected; taken, so a second key without a redraw in
        // between (a test, a paste) sees the selection as it is now.
        let run = self.hits.shown.take().or_else(|| self.action_run());
        match action {
            Action::Help => self.popup = Some(Popup::Help { scroll: 0 }),
            Action::Detach if self.attached => return vec![Effect::Detach],
            Action::Detach => {
                self.toast = Some("nothing to detach from: this sweep runs in this process".into())
            }
            Action::Quit if self.attached && !self.finished => {
                self.popup = Some(Popup::Confirm(Confirm::Detach));
            }
            Action::Quit => {
                if self.state.counts().active > 0 && !self.finished {
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
                    if let Some(r) = self.newest_active() {
                        self.select_run(r);
                    }
                }
            }
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
                    self.auto_select = false;
                    self.sel_commit = 0;
                }
                Focus::Results => self.results.selected.select_row(&self.result_rows(), 0),
                Focus::Logs => {
                    self.follow = false;
                    self.log_scroll = self.shown_log().map_or(0, |l| l.len());
                }
            },
            Action::Bottom => match self.list_focus() {
                Focus::Queue => {
                    self.auto_select = false;
                    self.sel_commit = self.cells.len().saturating_sub(1);
                }
                Focus::Results => self
                    .results
                    .selected
                    .select_row(&self.result_rows(), usize::MAX),
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
                    let n = self.variants.len().max(1);
                    self.sel_variant = if right {
                        (self.sel_variant + 1) % n
                    } else {
                        (self.sel_variant + n - 1) % n
                    };
                    self.log_scroll = 0;
                }
            }
            Action::Enter => {
                if let Some(r) = run {
                    self.popup = Some(Popup::Detail(r));
                    self.detail_scroll = 0;
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
                        None => self.toast = Some(format!("no fix is known for {r}")),
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
            Action::Activity => self.popup = Some(Popup::Activity { scroll: 0 }),
            Action::Shell => {
                if let Some(r) = run {
                    if self.state.run(r).state.is_active() {
                        return vec![Effect::Shell(r)];
                    }
                    self.toast = Some(format!("{r} is not running: no container to open"));
                }
            }
            Action::Copy => {
                if let Some(r) = run {
                    let spec = &self.plan.runs[r.0 as usize];
                    match &self.plan.commit_of(spec).perf_command {
                        Some(cmd) => {
                            self.toast =
                                Some(format!("copied the command of {} (OSC 52)", spec.key));
                            return vec![Effect::Copy(crate::sanitize::one_line(cmd))];
                        }
                        None => self.toast = Some(format!("{} has no command", spec.key)),
                    }
                }
            }
            Action::Undo => {
                if let Some(r) = run {
                    let skipped = matches!(
                        &self.state.run(r).state,
                        RunState::Finished { outcome }
                            if outcome.skipped_by() == Some(crate::model::SkipBy::Operator)
                    );
                    if skipped {
                        return vec![Effect::Send(Command::Unskip { run: r })];
                    }
                    self.toast = Some(format!("{r} is not a run the operator skipped"));
                }
            }
            Action::SkipCategory => {
                let cat = run.and_then(|r| {
                    let rec = self.state.run(r);
                    run_category(&rec.state, rec.finding.as_ref())
                });
                match cat {
                    Some(c) => self.popup = Some(Popup::Confirm(Confirm::SkipCategory(c))),
                    None => self.toast = Some("the selected run has no failure category".into()),
                }
            }
            Action::FailureGroup => {
                match run.and_then(|r| self.group_of(r)) {
                    Some(g) => self.popup = Some(Popup::Group(g.id)),
                    None => self.toast = Some(
                        "the selected run has no failure group (only unknown failures are grouped)"
                            .into(),
                    ),
                }
            }
            Action::PauseResume => {
                let cmd = if self.state.paused.is_some() || !self.state.paused_models.is_empty() {
                    Command::Resume
                } else {
                    Command::Pause
                };
                return vec![Effect::Send(cmd)];
            }
            Action::Cancel => {
                if let Some(r) = run {
                    let st = &self.state.run(r).state;
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
            Action::Export => return vec![Effect::Export(None)],
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
            Action::SearchNext => self.jump_match(true),
            Action::SearchPrev => self.jump_match(false),
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
            Action::NextProblem => self.jump_to_problem(true),
            Action::PrevProblem => self.jump_to_problem(false),
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
        }
        vec![]
    }

    /// The fix a group's runs were offered, if any was.
    fn group_recipe(&self, id: &str) -> Option<String> {
        let groups = self.failure_groups();
        let g = groups.iter().find(|g| g.id == id)?;
        self.plan
            .runs
            .iter()
            .filter(|s| g.runs.contains(&s.key))
            .find_map(|s| self.state.run(s.id).finding.as_ref()?.recipe.clone())
    }

    /// The run an action applies to: the results row in the results view, else the queue
    /// selection.
    pub(crate) fn action_run(&self) -> Option<RunId> {
        if self.view == View::Results {
            self.results_run()
        } else {
            self.selected_run()
        }
    }

    pub(super) fn list_focus(&self) -> Focus {
        match (self.view, self.focus) {
            (View::Results, _) => Focus::Results,
            (View::Logs, _) | (View::Sweep, Pane::Logs) => Focus::Logs,
            _ => Focus::Queue,
        }
    }

    pub(crate) fn move_selection(&mut self, n: isize) {
        match self.list_focus() {
            Focus::Queue => {
                self.auto_select = false;
                let max = self.cells.len().saturating_sub(1) as isize;
                self.sel_commit = (self.sel_commit as isize + n).clamp(0, max) as usize;
                self.log_scroll = 0;
                self.search_at = None;
            }
            Focus::Results => {
                let (rows, at) = self.results_selection();
                let to = (at.unwrap_or(0) as isize + n).max(0) as usize;
                self.results.selected.select_row(&rows, to);
            }
            Focus::Logs => self.scroll_logs(-n),
        }
    }

    /// Select the next (or previous) held or failed run after the selection, wrapping:
    /// the results rows in the results view, else the queue's cells in plan order.
    pub(super) fn jump_to_problem(&mut self, forward: bool) {
        let found = if self.view == View::Results {
            let (rows, at) = self.results_selection();
            let hit = next_after(rows.len(), at, forward, |i| {
                needs_a_look(&self.state.run(rows[i]).state)
            });
            hit.map(|i| self.results.selected.select_row(&rows, i))
        } else {
            let w = self.variants.len().max(1);
            let cells: Vec<Option<RunId>> = self.cells.iter().flatten().copied().collect();
            let at = self.sel_commit * w + self.sel_variant;
            let hit = next_after(cells.len(), Some(at), forward, |i| {
                cells[i].is_some_and(|r| needs_a_look(&self.state.run(r).state))
            });
            hit.map(|i| {
                self.auto_select = false;
                self.sel_commit = i / w;
                self.sel_variant = i % w;
                self.log_scroll = 0;
                self.search_at = None;
            })
        };
        if found.is_none() {
            self.toast = Some("no held or failed run".into());
        }
    }

    /// Positive scrolls back in time.
    pub(crate) fn scroll_logs(&mut self, n: isize) {
        let len = self.shown_log().map_or(0, |l| l.len()) as isize;
        let s = (self.log_scroll as isize + n).clamp(0, len);
        self.log_scroll = s as usize;
        self.follow = s == 0;
    }

    pub(super) fn set_search(&mut self, text: String) {
        if text.is_empty() {
            self.search = None;
            self.search_at = None;
            return;
        }
        if self.view == View::Results {
            self.results.text = Some(text);
            return;
        }
        self.search = Some(text);
        self.search_at = None;
        self.jump_match(false);
    }

    /// Move to the next (older with `false`... newer with `true`) matching line and
    /// scroll so it is in view.
    pub(super) fn jump_match(&mut self, forward: bool) {
        let Some(q) = self.search.clone() else {
            return;
        };
        let Some(lines) = self.shown_log() else {
            return;
        };
        let len = lines.len();
        if len == 0 {
            return;
        }
        let start = self
            .search_at
            .unwrap_or(len.saturating_sub(1 + self.log_scroll));
        let hit = if forward {
            (start + 1..len)
                .chain(0..=start.min(len - 1))
                .find(|&i| find_all(&lines[i].text, &q).next().is_some())
        } else {
            let from = if self.search_at.is_some() { start } else { len };
            (0..from)
                .rev()
                .chain((from..len).rev())
                .find(|&i| find_all(&lines[i].text, &q).next().is_some())
        };
        match hit {
            Some(i) => {
                self.search_at = Some(i);
                // Put the match a few lines above the bottom edge.
                self.log_scroll = (len - 1 - i).saturating_sub(3);
                self.follow = self.log_scroll == 0 && i + 1 == len;
                if !self.follow && self.log_scroll == 0 {
                    self.follow = false;
                }
            }
            None => self.toast = Some(format!("no match for `{q}`")),
        }
    }
}

/// The first index after `at` (before it, going back) in `0..len` where `hit` holds,
/// wrapping round; `at` itself comes last.
fn next_after(
    len: usize,
    at: Option<usize>,
    forward: bool,
    hit: impl Fn(usize) -> bool,
) -> Option<usize> {
    let at = at.unwrap_or(if forward { len.saturating_sub(1) } else { 0 });
    (1..=len)
        .map(|k| {
            if forward {
                (at + k) % len
            } else {
                (at + len - k % len) % len
            }
        })
        .find(|&i| hit(i))
}

impl App {
    /// `command` on `run`, unless another operator decided that run moments ago: then ask
    /// before overriding them (their decision named, with how long ago).
    pub(crate) fn decide(&mut self, run: RunId, command: Command) -> Vec<Effect> {
        let me = self.me.clone();
        let recent = self.activity.iter().rev().find(|e| {
            e.run == Some(run)
                && e.by_operator()
                && !e.refused()
                && !me
                    .as_deref()
                    .is_some_and(|me| crate::event::signed_by(&e.source, me))
                && self.now_ms.saturating_sub(e.at_ms) <= OVERRIDE_ASK_MS
        });
        match recent {
            Some(e) => {
                self.popup = Some(Popup::Confirm(Confirm::Override {
                    by: e.source.clone(),
                    what: e.what.clone(),
                    ago_s: self.now_ms.saturating_sub(e.at_ms) / 1000,
                    command,
                }));
                vec![]
            }
            None => vec![Effect::Send(command)],
        }
    }
}
