//! What keys do: the keymap's actions, selection and scrolling, log search.

use super::*;

impl App {
    pub(crate) fn on_key(&mut self, key: Key) -> Vec<Effect> {
        self.ui.toast = None;
        if self.ui.input.is_some() {
            return self.on_input_key(key);
        }
        if let Some(Popup::Group(id)) = &self.ui.popup {
            let id = id.clone();
            return self.on_group_key(key, id);
        }
        if let Some(Popup::Confirm(what)) = &self.ui.popup {
            let what = what.clone();
            return self.on_confirm_key(key, what);
        }
        let Some(action) = self.keymap.action(key) else {
            return vec![];
        };
        self.on_action(action)
    }

    /// A key while a line is typed (a search, a `:command`): Enter runs it, Tab completes.
    fn on_input_key(&mut self, key: Key) -> Vec<Effect> {
        use crossterm::event::KeyCode;
        let Some(input) = self.ui.input.as_mut() else {
            return vec![];
        };
        match key.code {
            KeyCode::Esc => self.ui.input = None,
            KeyCode::Enter => {
                let Input { kind, text } = self.ui.input.take().expect("input");
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
                    self.ui.toast = Some(options.join("  "));
                }
            }
            KeyCode::Backspace if input.text.pop().is_none() => self.ui.input = None,
            KeyCode::Backspace => {}
            KeyCode::Char(c) if !key.ctrl => input.text.push(c),
            _ => {}
        }
        vec![]
    }

    /// A key in a failure group's popup: skip, retry, fix or list its runs.
    fn on_group_key(&mut self, key: Key, id: String) -> Vec<Effect> {
        use crossterm::event::KeyCode;
        match key.code {
            KeyCode::Char('s') => {
                self.ui.popup = None;
                vec![Effect::Send(Command::SkipGroup { kind: id })]
            }
            KeyCode::Char('r') => {
                self.ui.popup = None;
                vec![Effect::Send(Command::RetryGroup { kind: id })]
            }
            KeyCode::Char('f') => {
                self.ui.popup = None;
                match self.group_recipe(&id) {
                    Some(recipe) => vec![Effect::Send(Command::FixGroup { kind: id, recipe })],
                    None => {
                        self.ui.toast = Some(format!(
                            "no fix is known for group {id}: `:fix-group RECIPE {id}` names one"
                        ));
                        vec![]
                    }
                }
            }
            KeyCode::Char('l') => {
                self.ui.popup = None;
                self.ui.view = View::Results;
                self.ui.results.group = Some(id);
                vec![]
            }
            KeyCode::Esc | KeyCode::Char('q') | KeyCode::Char('n') => {
                self.ui.popup = None;
                vec![]
            }
            _ => vec![],
        }
    }

    /// A key in a confirmation: yes sends what was asked, anything else lets it go.
    fn on_confirm_key(&mut self, key: Key, what: Confirm) -> Vec<Effect> {
        use crossterm::event::KeyCode;
        if what == Confirm::Detach {
            self.ui.popup = None;
            return match key.code {
                KeyCode::Char('d') | KeyCode::Char('q') | KeyCode::Enter => {
                    vec![Effect::Detach]
                }
                KeyCode::Char('s') => vec![Effect::StopSweep],
                _ => vec![],
            };
        }
        match key.code {
            KeyCode::Char('y') | KeyCode::Char('Y') | KeyCode::Enter => {
                self.ui.popup = None;
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
                self.ui.popup = None;
                vec![]
            }
            _ => vec![],
        }
    }

    pub(crate) fn on_action(&mut self, action: Action) -> Vec<Effect> {
        if self.ui.popup.is_some() {
            if let Some(done) = self.on_popup_action(action) {
                return done;
            }
        }
        // What the last frame showed selected; taken, so a second key without a redraw in
        // between (a test, a paste) sees the selection as it is now.
        let run = self.hits.shown.take().or_else(|| self.action_run());
        match action {
            Action::Up
            | Action::Down
            | Action::PageUp
            | Action::PageDown
            | Action::Top
            | Action::Bottom
            | Action::Left
            | Action::Right => self.on_move(action),
            Action::Enter
            | Action::ApplyFix
            | Action::Retry
            | Action::Skip
            | Action::Shell
            | Action::Copy
            | Action::Undo
            | Action::SkipCategory
            | Action::FailureGroup
            | Action::Cancel
            | Action::OpenPager => self.on_run_action(action, run),
            Action::CycleTheme
            | Action::Search
            | Action::SearchNext
            | Action::SearchPrev
            | Action::CommandLine
            | Action::Wrap
            | Action::Follow
            | Action::LogTab
            | Action::SortNext
            | Action::SortPrev
            | Action::NextProblem
            | Action::PrevProblem
            | Action::SortReverse
            | Action::FilterStatus => self.on_show_action(action),
            _ => self.on_session_action(action),
        }
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
        if self.ui.view == View::Results {
            self.results_run()
        } else {
            self.selected_run()
        }
    }

    pub(super) fn list_focus(&self) -> Focus {
        match (self.ui.view, self.ui.focus) {
            (View::Results, _) => Focus::Results,
            (View::Logs, _) | (View::Sweep, Pane::Logs) => Focus::Logs,
            _ => Focus::Queue,
        }
    }

    pub(crate) fn move_selection(&mut self, n: isize) {
        match self.list_focus() {
            Focus::Queue => {
                self.ui.auto_select = false;
                let max = self.cells.len().saturating_sub(1) as isize;
                self.ui.sel_commit = (self.ui.sel_commit as isize + n).clamp(0, max) as usize;
                self.ui.log_scroll = 0;
                self.ui.search_at = None;
            }
            Focus::Results => {
                let (rows, at) = self.results_selection();
                let to = (at.unwrap_or(0) as isize + n).max(0) as usize;
                self.ui.results.selected.select_row(&rows, to);
            }
            Focus::Logs => self.scroll_logs(-n),
        }
    }

    /// Select the next (or previous) held or failed run after the selection, wrapping:
    /// the results rows in the results view, else the queue's cells in plan order.
    pub(super) fn jump_to_problem(&mut self, forward: bool) {
        let found = if self.ui.view == View::Results {
            let (rows, at) = self.results_selection();
            let hit = next_after(rows.len(), at, forward, |i| {
                needs_a_look(&self.state.run(rows[i]).state)
            });
            hit.map(|i| self.ui.results.selected.select_row(&rows, i))
        } else {
            let w = self.variants.len().max(1);
            let cells: Vec<Option<RunId>> = self.cells.iter().flatten().copied().collect();
            let at = self.ui.sel_commit * w + self.ui.sel_variant;
            let hit = next_after(cells.len(), Some(at), forward, |i| {
                cells[i].is_some_and(|r| needs_a_look(&self.state.run(r).state))
            });
            hit.map(|i| {
                self.ui.auto_select = false;
                self.ui.sel_commit = i / w;
                self.ui.sel_variant = i % w;
                self.ui.log_scroll = 0;
                self.ui.search_at = None;
            })
        };
        if found.is_none() {
            self.ui.toast = Some("no held or failed run".into());
        }
    }

    /// Positive scrolls back in time.
    pub(crate) fn scroll_logs(&mut self, n: isize) {
        let len = self.shown_log().map_or(0, |l| l.len()) as isize;
        let s = (self.ui.log_scroll as isize + n).clamp(0, len);
        self.ui.log_scroll = s as usize;
        self.ui.follow = s == 0;
    }

    pub(super) fn set_search(&mut self, text: String) {
        if text.is_empty() {
            self.ui.search = None;
            self.ui.search_at = None;
            return;
        }
        if self.ui.view == View::Results {
            self.ui.results.text = Some(text);
            return;
        }
        self.ui.search = Some(text);
        self.ui.search_at = None;
        self.jump_match(false);
    }

    /// Move to the next (older with `false`... newer with `true`) matching line and
    /// scroll so it is in view.
    pub(super) fn jump_match(&mut self, forward: bool) {
        let Some(q) = self.ui.search.clone() else {
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
            .ui
            .search_at
            .unwrap_or(len.saturating_sub(1 + self.ui.log_scroll));
        let hit = if forward {
            (start + 1..len)
                .chain(0..=start.min(len - 1))
                .find(|&i| find_all(&lines[i].text, &q).next().is_some())
        } else {
            let from = if self.ui.search_at.is_some() {
                start
            } else {
                len
            };
            (0..from)
                .rev()
                .chain((from..len).rev())
                .find(|&i| find_all(&lines[i].text, &q).next().is_some())
        };
        match hit {
            Some(i) => {
                self.ui.search_at = Some(i);
                // Put the match a few lines above the bottom edge.
                self.ui.log_scroll = (len - 1 - i).saturating_sub(3);
                self.ui.follow = self.ui.log_scroll == 0 && i + 1 == len;
                if !self.ui.follow && self.ui.log_scroll == 0 {
                    self.ui.follow = false;
                }
            }
            None => self.ui.toast = Some(format!("no match for `{q}`")),
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
                self.ui.popup = Some(Popup::Confirm(Confirm::Override {
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
