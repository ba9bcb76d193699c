//! What keys do: the keymap's actions, selection and scrolling, log search.

use super::*;

impl Ui {
    pub(crate) fn on_key(&mut self, at: &Seen<'_>, key: Key) -> Vec<Effect> {
        self.toast = None;
        if self.input.is_some() {
            return self.on_input_key(at, key);
        }
        if let Some(Popup::Group(id)) = &self.popup {
            let id = id.clone();
            return self.on_group_key(at, key, id);
        }
        if let Some(Popup::Confirm(what)) = &self.popup {
            let what = what.clone();
            return self.on_confirm_key(key, what);
        }
        let Some(action) = at.keymap.action(key) else {
            return vec![];
        };
        self.on_action(at, action)
    }

    /// A key while a line is typed (a search, a `:command`): Enter runs it, Tab completes.
    fn on_input_key(&mut self, at: &Seen<'_>, key: Key) -> Vec<Effect> {
        use crossterm::event::KeyCode;
        let Some(input) = self.input.as_mut() else {
            return vec![];
        };
        match key.code {
            KeyCode::Esc => self.input = None,
            KeyCode::Enter => {
                let Input { kind, text } = self.input.take().expect("input");
                return match kind {
                    InputKind::Search => {
                        self.set_search(at, text);
                        vec![]
                    }
                    InputKind::Command => self.run_command_line(at, &text),
                };
            }
            KeyCode::Tab if input.kind == InputKind::Command => {
                let (text, options) = complete(&input.text, &at.night.recipes);
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
        vec![]
    }

    /// A key in a failure group's popup: skip, retry, fix or list its runs.
    fn on_group_key(&mut self, at: &Seen<'_>, key: Key, id: String) -> Vec<Effect> {
        use crossterm::event::KeyCode;
        match key.code {
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
                match self.group_recipe(at, &id) {
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
        }
    }

    /// A key in a confirmation: yes sends what was asked, anything else lets it go.
    fn on_confirm_key(&mut self, key: Key, what: Confirm) -> Vec<Effect> {
        use crossterm::event::KeyCode;
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
        match key.code {
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
        }
    }

    pub(crate) fn on_action(&mut self, at: &Seen<'_>, action: Action) -> Vec<Effect> {
        if self.popup.is_some() {
            if let Some(done) = self.on_popup_action(at, action) {
                return done;
            }
        }
        // What the last frame showed selected; taken, so a second key without a redraw in
        // between (a test, a paste) sees the selection as it is now.
        let run = at.hits.shown.take().or_else(|| self.action_run(at));
        match action {
            Action::Up
            | Action::Down
            | Action::PageUp
            | Action::PageDown
            | Action::Top
            | Action::Bottom
            | Action::Left
            | Action::Right => self.on_move(at, action),
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
            | Action::OpenPager => self.on_run_action(at, action, run),
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
            | Action::FilterStatus => self.on_show_action(at, action),
            _ => self.on_session_action(at, action),
        }
    }

    /// The fix a group's runs were offered, if any was.
    fn group_recipe(&self, at: &Seen<'_>, id: &str) -> Option<String> {
        let groups = at.failure_groups();
        let g = groups.iter().find(|g| g.id == id)?;
        at.night
            .plan
            .runs
            .iter()
            .filter(|s| g.runs.contains(&s.key))
            .find_map(|s| at.night.state.run(s.id).finding.as_ref()?.recipe.clone())
    }

    /// The run an action applies to: the results row in the results view, else the queue
    /// selection.
    pub(crate) fn action_run(&self, at: &Seen<'_>) -> Option<RunId> {
        if self.view == View::Results {
            self.results_run(at)
        } else {
            self.selected_run(at)
        }
    }

    pub(super) fn list_focus(&self) -> Focus {
        match (self.view, self.focus) {
            (View::Results, _) => Focus::Results,
            (View::Logs, _) | (View::Sweep, Pane::Logs) => Focus::Logs,
            _ => Focus::Queue,
        }
    }

    pub(crate) fn move_selection(&mut self, at: &Seen<'_>, n: isize) {
        match self.list_focus() {
            Focus::Queue => {
                self.auto_select = false;
                let max = at.night.cells.len().saturating_sub(1) as isize;
                self.sel_commit = (self.sel_commit as isize + n).clamp(0, max) as usize;
                self.log_scroll = 0;
                self.search_at = None;
            }
            Focus::Results => {
                let (rows, at) = self.results_selection(at);
                let to = (at.unwrap_or(0) as isize + n).max(0) as usize;
                self.results.selected.select_row(&rows, to);
            }
            Focus::Logs => self.scroll_logs(at, -n),
        }
    }

    /// Select the next (or previous) held or failed run after the selection, wrapping:
    /// the results rows in the results view, else the queue's cells in plan order.
    pub(super) fn jump_to_problem(&mut self, at: &Seen<'_>, forward: bool) {
        let found = if self.view == View::Results {
            let (rows, from) = self.results_selection(at);
            let hit = next_after(rows.len(), from, forward, |i| {
                needs_a_look(&at.night.state.run(rows[i]).state)
            });
            hit.map(|i| self.results.selected.select_row(&rows, i))
        } else {
            let w = at.night.variants.len().max(1);
            let cells: Vec<Option<RunId>> = at.night.cells.iter().flatten().copied().collect();
            let from = self.sel_commit * w + self.sel_variant;
            let hit = next_after(cells.len(), Some(from), forward, |i| {
                cells[i].is_some_and(|r| needs_a_look(&at.night.state.run(r).state))
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
    pub(crate) fn scroll_logs(&mut self, at: &Seen<'_>, n: isize) {
        let len = self.shown_log(at).map_or(0, |l| l.len()) as isize;
        let s = (self.log_scroll as isize + n).clamp(0, len);
        self.log_scroll = s as usize;
        self.follow = s == 0;
    }

    pub(super) fn set_search(&mut self, at: &Seen<'_>, text: String) {
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
        self.jump_match(at, false);
    }

    /// Move to the next (older with `false`... newer with `true`) matching line and
    /// scroll so it is in view.
    pub(super) fn jump_match(&mut self, at: &Seen<'_>, forward: bool) {
        let Some(q) = self.search.clone() else {
            return;
        };
        let Some(lines) = self.shown_log(at) else {
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

impl Ui {
    /// `command` on `run`, unless another operator decided that run moments ago: then ask
    /// before overriding them (their decision named, with how long ago).
    pub(crate) fn decide(&mut self, at: &Seen<'_>, run: RunId, command: Command) -> Vec<Effect> {
        let recent = at.night.activity.iter().rev().find(|e| {
            e.run == Some(run)
                && e.by_operator()
                && !e.refused()
                && !at
                    .me
                    .is_some_and(|me| crate::event::signed_by(&e.source, me))
                && at.night.now_ms.saturating_sub(e.at_ms) <= OVERRIDE_ASK_MS
        });
        match recent {
            Some(e) => {
                self.popup = Some(Popup::Confirm(Confirm::Override {
                    by: e.source.clone(),
                    what: e.what.clone(),
                    ago_s: at.night.now_ms.saturating_sub(e.at_ms) / 1000,
                    command,
                }));
                vec![]
            }
            None => vec![Effect::Send(command)],
        }
    }
}
