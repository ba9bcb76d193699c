//! What keys do: the keymap's actions, selection and scrolling, log search, and the `:`
//! command line.

use super::*;

impl App {
    pub fn on_key(&mut self, key: Key) -> Vec<Effect> {
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
                    self.results.selected = 0;
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

    pub fn on_action(&mut self, action: Action) -> Vec<Effect> {
        if let Some(Popup::Help { scroll }) = &mut self.popup {
            match action {
                Action::Down => *scroll += 1,
                Action::Up => *scroll = scroll.saturating_sub(1),
                Action::Quit | Action::Back | Action::Help | Action::Enter => self.popup = None,
                _ => {}
            }
            return vec![];
        }
        if matches!(self.popup, Some(Popup::Detail(_))) {
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
                Focus::Results => self.results.selected = 0,
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
                Focus::Results => {
                    self.results.selected = self.result_rows().len().saturating_sub(1)
                }
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
                    _ => View::Sweep,
                }
            }
            Action::ApplyFix => {
                if let Some(r) = run {
                    let rec = self.state.run(r);
                    match rec.finding.as_ref().and_then(|f| f.recipe.clone()) {
                        Some(recipe) => {
                            return vec![Effect::Send(Command::ApplyFix {
                                run: r,
                                recipe: Some(recipe),
                            })]
                        }
                        None => self.toast = Some(format!("no fix is known for {r}")),
                    }
                }
            }
            Action::Retry => {
                if let Some(r) = run {
                    return vec![Effect::Send(Command::Retry { run: r })];
                }
            }
            Action::Skip => {
                if let Some(r) = run {
                    return vec![Effect::Send(Command::Skip { run: r })];
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
            Action::SortNext => {
                self.results.sort_col = (self.results.sort_col + 1) % RESULT_COLUMNS.len()
            }
            Action::SortReverse => self.results.reverse = !self.results.reverse,
            Action::FilterStatus => {
                self.results.status = match self.results.status {
                    None => Some(StatusFilter::ALL[0]),
                    Some(s) => {
                        let i = StatusFilter::ALL.iter().position(|x| *x == s).unwrap_or(0);
                        StatusFilter::ALL.get(i + 1).copied()
                    }
                };
                self.results.selected = 0;
            }
        }
        vec![]
    }

    /// The group a `:…-group` command means: the id given (one group's, or a prefix of
    /// one), else the selected run's group.
    fn group_arg(&self, arg: &str) -> Result<String, String> {
        if arg.trim().is_empty() {
            return self
                .action_run()
                .and_then(|r| self.group_of(r))
                .map(|g| g.id)
                .ok_or_else(|| {
                    "the selected run has no failure group; name one (results view lists them)"
                        .into()
                });
        }
        crate::report::groups::find(&self.failure_groups(), arg).map(|g| g.id.clone())
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
    pub fn action_run(&self) -> Option<RunId> {
        if self.view == View::Results {
            self.result_rows().get(self.results.selected).copied()
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

    pub fn move_selection(&mut self, n: isize) {
        match self.list_focus() {
            Focus::Queue => {
                self.auto_select = false;
                let max = self.cells.len().saturating_sub(1) as isize;
                self.sel_commit = (self.sel_commit as isize + n).clamp(0, max) as usize;
                self.log_scroll = 0;
                self.search_at = None;
            }
            Focus::Results => {
                let max = self.result_rows().len().saturating_sub(1) as isize;
                self.results.selected =
                    (self.results.selected as isize + n).clamp(0, max.max(0)) as usize;
            }
            Focus::Logs => self.scroll_logs(-n),
        }
    }

    /// Positive scrolls back in time.
    pub fn scroll_logs(&mut self, n: isize) {
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
            self.results.selected = 0;
            return;
        }
        self.search = Some(text);
        self.search_at = None;
        self.jump_match(false);
    }

    pub fn line_matches(&self, line: &str) -> bool {
        match &self.search {
            Some(q) => find_all(line, q).next().is_some(),
            None => false,
        }
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

    /// `:` commands, k9s-style.
    pub fn run_command_line(&mut self, line: &str) -> Vec<Effect> {
        let mut parts = line.split_whitespace();
        let cmd = parts.next().unwrap_or("");
        let rest: Vec<&str> = parts.collect();
        let arg = rest.join(" ");
        match cmd {
            "" => {}
            "q" | "quit" => return self.on_action(Action::Quit),
            "q!" | "quit!" => return vec![Effect::Quit],
            "help" | "h" => self.popup = Some(Popup::Help { scroll: 0 }),
            "pause" => return vec![Effect::Send(Command::Pause)],
            "resume" => return vec![Effect::Send(Command::Resume)],
            "export" => return vec![Effect::Export((!arg.is_empty()).then_some(arg))],
            "sweep" | "1" => self.view = View::Sweep,
            "logs" | "2" => self.view = View::Logs,
            "results" | "3" => self.view = View::Results,
            "theme" => match Theme::load(
                &arg,
                crate::tui::config::config_dir()
                    .map(|d| d.join("themes"))
                    .as_deref(),
            ) {
                Ok(t) => {
                    self.theme = if self.theme.mono { t.monochrome() } else { t };
                }
                Err(e) => self.toast = Some(e.to_string()),
            },
            "skip-category" => match arg.parse::<Category>() {
                Ok(c) => self.popup = Some(Popup::Confirm(Confirm::SkipCategory(c))),
                Err(e) => self.toast = Some(e),
            },
            "skip-group" | "retry-group" => match self.group_arg(&arg) {
                Ok(kind) => {
                    return vec![Effect::Send(if cmd == "skip-group" {
                        Command::SkipGroup { kind }
                    } else {
                        Command::RetryGroup { kind }
                    })]
                }
                Err(e) => self.toast = Some(e),
            },
            "fix-group" => {
                let (recipe, id) = (rest.first().copied(), rest.get(1).copied().unwrap_or(""));
                match (recipe, self.group_arg(id)) {
                    (Some(recipe), Ok(kind)) => {
                        return vec![Effect::Send(Command::FixGroup {
                            kind,
                            recipe: recipe.to_string(),
                        })]
                    }
                    (None, _) => self.toast = Some(":fix-group RECIPE [GROUP]".into()),
                    (_, Err(e)) => self.toast = Some(e),
                }
            }
            "group" => match self.group_arg(&arg) {
                Ok(id) => self.popup = Some(Popup::Group(id)),
                Err(e) => self.toast = Some(e),
            },
            "sort" => match RESULT_COLUMNS.iter().position(|c| *c == arg) {
                Some(i) => {
                    self.results.sort_col = i;
                    self.view = View::Results;
                }
                None => self.toast = Some(format!("columns: {}", RESULT_COLUMNS.join(", "))),
            },
            "filter" => {
                self.view = View::Results;
                self.results.selected = 0;
                if arg.is_empty() || arg == "clear" {
                    self.results = ResultsState {
                        sort_col: self.results.sort_col,
                        reverse: self.results.reverse,
                        ..Default::default()
                    };
                } else if let Some(v) = arg.strip_prefix("status=") {
                    match StatusFilter::ALL.iter().find(|s| s.label() == v) {
                        Some(s) => self.results.status = Some(*s),
                        None => self.toast = Some(format!("unknown status `{v}`")),
                    }
                } else if let Some(v) = arg.strip_prefix("category=") {
                    match v.parse::<Category>() {
                        Ok(c) => self.results.category = Some(c),
                        Err(e) => self.toast = Some(e),
                    }
                } else if let Some(v) = arg.strip_prefix("model=") {
                    self.results.model = Some(v.to_string());
                } else if let Some(v) = arg.strip_prefix("group=") {
                    self.results.group = Some(v.to_string());
                } else {
                    self.results.text = Some(arg);
                }
            }
            other => self.toast = Some(format!("unknown command `:{other}` (try :help)")),
        }
        vec![]
    }
}
