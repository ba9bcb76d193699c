//! The key map: one table from keys to actions with their help text. The `?` screen and
//! the hint bar are generated from it, and config overrides edit it, so what the operator
//! reads is always what the keys do.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    Help,
    Quit,
    Back,
    Up,
    Down,
    Left,
    Right,
    Top,
    Bottom,
    PageUp,
    PageDown,
    Enter,
    NextPane,
    View(u8),
    ApplyFix,
    Retry,
    Skip,
    SkipCategory,
    FailureGroup,
    PauseResume,
    Cancel,
    OpenPager,
    Export,
    CycleTheme,
    Search,
    SearchNext,
    SearchPrev,
    CommandLine,
    Follow,
    LogTab,
    SortNext,
    SortPrev,
    SortReverse,
    FilterStatus,
    Detach,
    NextProblem,
    PrevProblem,
    Activity,
    Undo,
    Shell,
    Copy,
    Wrap,
}

impl Action {
    /// The name used in the config file's `[keys]` table.
    pub fn name(self) -> String {
        match self {
            Action::View(n) => format!("view_{n}"),
            a => {
                let dbg = format!("{a:?}");
                let mut out = String::new();
                for (i, ch) in dbg.chars().enumerate() {
                    if ch.is_uppercase() && i > 0 {
                        out.push('_');
                    }
                    out.push(ch.to_ascii_lowercase());
                }
                out
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key {
    pub code: KeyCode,
    pub ctrl: bool,
}

impl Key {
    pub const fn ch(c: char) -> Key {
        Key {
            code: KeyCode::Char(c),
            ctrl: false,
        }
    }
    pub const fn code(code: KeyCode) -> Key {
        Key { code, ctrl: false }
    }
    pub(crate) fn from_event(k: &KeyEvent) -> Key {
        Key {
            code: k.code,
            ctrl: k.modifiers.contains(KeyModifiers::CONTROL),
        }
    }

    /// `x`, `X`, `ctrl-c`, `esc`, `enter`, `tab`, `up`, `down`, `left`, `right`,
    /// `pgup`, `pgdn`, `home`, `end`, `space`.
    pub fn parse(s: &str) -> Option<Key> {
        let (ctrl, rest) = match s.strip_prefix("ctrl-") {
            Some(r) => (true, r),
            None => (false, s),
        };
        let code = match rest {
            "esc" => KeyCode::Esc,
            "enter" => KeyCode::Enter,
            "tab" => KeyCode::Tab,
            "up" => KeyCode::Up,
            "down" => KeyCode::Down,
            "left" => KeyCode::Left,
            "right" => KeyCode::Right,
            "pgup" => KeyCode::PageUp,
            "pgdn" => KeyCode::PageDown,
            "home" => KeyCode::Home,
            "end" => KeyCode::End,
            "space" => KeyCode::Char(' '),
            r if r.chars().count() == 1 => KeyCode::Char(r.chars().next()?),
            _ => return None,
        };
        Some(Key { code, ctrl })
    }

    pub fn label(&self) -> String {
        let base = match self.code {
            KeyCode::Esc => "esc".to_string(),
            KeyCode::Enter => "enter".into(),
            KeyCode::Tab => "tab".into(),
            KeyCode::Up => "↑".into(),
            KeyCode::Down => "↓".into(),
            KeyCode::Left => "←".into(),
            KeyCode::Right => "→".into(),
            KeyCode::PageUp => "pgup".into(),
            KeyCode::PageDown => "pgdn".into(),
            KeyCode::Home => "home".into(),
            KeyCode::End => "end".into(),
            KeyCode::Char(' ') => "space".into(),
            KeyCode::Char(c) => c.to_string(),
            _ => "?".into(),
        };
        if self.ctrl {
            format!("ctrl-{base}")
        } else {
            base
        }
    }
}

#[derive(Debug, Clone)]
pub struct Binding {
    pub keys: Vec<Key>,
    pub action: Action,
    pub section: &'static str,
    pub help: &'static str,
    /// Short word for the hint bar; bindings without one stay out of it.
    pub hint: Option<&'static str>,
}

#[derive(Debug, Clone)]
pub struct KeyMap {
    pub bindings: Vec<Binding>,
}

fn b(
    keys: &[Key],
    action: Action,
    section: &'static str,
    help: &'static str,
    hint: Option<&'static str>,
) -> Binding {
    Binding {
        keys: keys.to_vec(),
        action,
        section,
        help,
        hint,
    }
}

impl Default for KeyMap {
    fn default() -> Self {
        use Action::*;
        use KeyCode as K;
        let c = Key::ch;
        let k = Key::code;
        let (run, nav, logs, res, gen) = ("run", "navigate", "logs", "results", "general");
        KeyMap {
            bindings: vec![
                b(
                    &[c('f')],
                    ApplyFix,
                    run,
                    "apply the suggested fix and retry",
                    Some("fix"),
                ),
                b(
                    &[c('r')],
                    Retry,
                    run,
                    "retry the selected run",
                    Some("retry"),
                ),
                b(&[c('s')], Skip, run, "skip the selected run", Some("skip")),
                b(
                    &[c('u')],
                    Undo,
                    run,
                    "undo the skip of the selected run (until it is re-run)",
                    None,
                ),
                b(
                    &[c('S')],
                    SkipCategory,
                    run,
                    "skip this failure category, now and all night (asks)",
                    None,
                ),
                b(
                    &[c('a')],
                    FailureGroup,
                    run,
                    "skip, retry or fix every run failing alike (unknown failures)",
                    None,
                ),
                b(
                    &[c('p'), c(' ')],
                    PauseResume,
                    run,
                    "pause / resume the queue",
                    Some("pause"),
                ),
                b(
                    &[c('c')],
                    Cancel,
                    run,
                    "cancel the selected run (asks first)",
                    None,
                ),
                b(
                    &[c('o')],
                    OpenPager,
                    run,
                    "open the full log in $PAGER",
                    None,
                ),
                b(
                    &[c('!')],
                    Shell,
                    run,
                    "a shell in the run's container (docker exec -it)",
                    None,
                ),
                b(
                    &[c('y')],
                    Copy,
                    run,
                    "copy the run's command to the clipboard (OSC 52)",
                    None,
                ),
                b(&[c('j'), k(K::Down)], Down, nav, "down", None),
                b(&[c('k'), k(K::Up)], Up, nav, "up", None),
                b(
                    &[c('h'), k(K::Left)],
                    Left,
                    nav,
                    "previous variant / sort column",
                    None,
                ),
                b(
                    &[c('l'), k(K::Right)],
                    Right,
                    nav,
                    "next variant / sort column",
                    None,
                ),
                b(&[c('g'), k(K::Home)], Top, nav, "first", None),
                b(
                    &[c('G'), k(K::End)],
                    Bottom,
                    nav,
                    "last (logs: follow)",
                    None,
                ),
                b(&[k(K::PageUp)], PageUp, nav, "page up", None),
                b(&[k(K::PageDown)], PageDown, nav, "page down", None),
                b(
                    &[k(K::Enter)],
                    Enter,
                    nav,
                    "details of the selected run",
                    Some("details"),
                ),
                b(
                    &[k(K::Tab)],
                    NextPane,
                    nav,
                    "next pane (queue / logs)",
                    None,
                ),
                b(
                    &[c('1')],
                    View(1),
                    nav,
                    "view: sweep (queue, active run, GPUs, logs)",
                    None,
                ),
                b(&[c('2')], View(2), nav, "view: logs", None),
                b(&[c('3')], View(3), nav, "view: results", None),
                b(
                    &[c('4')],
                    View(4),
                    nav,
                    "view: 3-way (one row per commit, verdicts)",
                    None,
                ),
                b(
                    &[k(K::Esc)],
                    Back,
                    nav,
                    "back / close / follow the newest run again",
                    None,
                ),
                b(
                    &[c(']')],
                    NextProblem,
                    nav,
                    "next held or failed run",
                    Some("held/failed"),
                ),
                b(
                    &[c('[')],
                    PrevProblem,
                    nav,
                    "previous held or failed run",
                    None,
                ),
                b(
                    &[c('/')],
                    Search,
                    logs,
                    "search the log (results: filter)",
                    Some("search"),
                ),
                b(&[c('n')], SearchNext, logs, "next match", None),
                b(&[c('N')], SearchPrev, logs, "previous match", None),
                b(&[c('F')], Follow, logs, "follow mode on/off", None),
                b(&[c('w')], Wrap, logs, "wrap long log lines on/off", None),
                b(&[c('b')], LogTab, logs, "server / benchmark log tab", None),
                b(&[c('>')], SortNext, res, "sort by the next column", None),
                b(
                    &[c('<')],
                    SortPrev,
                    res,
                    "sort by the previous column",
                    None,
                ),
                b(&[c('i')], SortReverse, res, "reverse the sort order", None),
                b(
                    &[c('x')],
                    FilterStatus,
                    res,
                    "filter by status (cycle)",
                    None,
                ),
                b(&[c('?')], Help, gen, "this help", Some("help")),
                b(
                    &[c(':')],
                    CommandLine,
                    gen,
                    "command line (:help lists commands)",
                    Some("cmd"),
                ),
                b(&[c('e')], Export, gen, "export results (CSV + JSON)", None),
                b(
                    &[c('A')],
                    Activity,
                    gen,
                    "activity log: who did what, and what the policy decided",
                    None,
                ),
                b(
                    &[c('d')],
                    Detach,
                    gen,
                    "detach from the sweep's daemon (the sweep goes on)",
                    Some("detach"),
                ),
                b(&[c('t')], CycleTheme, gen, "cycle theme", None),
                b(
                    &[
                        c('q'),
                        Key {
                            code: K::Char('c'),
                            ctrl: true,
                        },
                    ],
                    Quit,
                    gen,
                    "quit (attached: asks to detach or stop the sweep)",
                    Some("quit"),
                ),
            ],
        }
    }
}

impl KeyMap {
    pub fn action(&self, key: Key) -> Option<Action> {
        self.bindings
            .iter()
            .find(|b| b.keys.contains(&key))
            .map(|b| b.action)
    }

    pub(crate) fn keys_of(&self, action: Action) -> Option<&[Key]> {
        self.bindings
            .iter()
            .find(|b| b.action == action)
            .map(|b| b.keys.as_slice())
    }

    pub(crate) fn label_of(&self, action: Action) -> String {
        self.keys_of(action)
            .and_then(|k| k.first())
            .map(|k| k.label())
            .unwrap_or_else(|| "?".into())
    }

    /// Apply `[keys]` overrides (`action_name = "key"` or `["k1", "k2"]`). A key that
    /// would then mean two things is an error naming both actions: silently taking it from
    /// the other action would leave the operator a view where a key does something else.
    pub fn with_overrides(mut self, o: &BTreeMap<String, Vec<String>>) -> Result<Self, String> {
        for (name, keys) in o {
            let Some(i) = self.bindings.iter().position(|b| b.action.name() == *name) else {
                return Err(format!("unknown action `{name}` in [keys]"));
            };
            let mut parsed = Vec::new();
            for k in keys {
                parsed
                    .push(Key::parse(k).ok_or_else(|| format!("unknown key `{k}` for `{name}`"))?);
            }
            self.bindings[i].keys = parsed;
        }
        let mut seen: BTreeMap<String, &Binding> = BTreeMap::new();
        for b in &self.bindings {
            for k in &b.keys {
                if let Some(first) = seen.insert(k.label(), b) {
                    let (moved, other) = if o.contains_key(&b.action.name()) {
                        (b, first)
                    } else {
                        (first, b)
                    };
                    return Err(format!(
                        "[keys]: `{}` for `{}` is already `{}` ({}); bind `{}` to another key too",
                        k.label(),
                        moved.action.name(),
                        other.action.name(),
                        other.section,
                        other.action.name()
                    ));
                }
            }
        }
        Ok(self)
    }

    /// (keys, help) grouped by section, in table order.
    pub(crate) fn help_rows(&self) -> Vec<(&'static str, String, &'static str)> {
        self.bindings
            .iter()
            .filter(|b| !b.keys.is_empty())
            .map(|b| {
                let keys: Vec<String> = b.keys.iter().map(|k| k.label()).collect();
                (b.section, keys.join(" "), b.help)
            })
            .collect()
    }

    pub(crate) fn hints(&self) -> Vec<(String, &'static str, Action)> {
        self.bindings
            .iter()
            .filter_map(|b| Some((b.keys.first()?.label(), b.hint?, b.action)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_key_means_two_things_and_overrides_move_keys() {
        let m = KeyMap::default();
        let mut seen = std::collections::HashSet::new();
        for b in &m.bindings {
            for k in &b.keys {
                assert!(seen.insert(*k), "{} bound twice", k.label());
            }
        }
        assert_eq!(m.action(Key::ch('s')), Some(Action::Skip));
        let mut o = BTreeMap::new();
        o.insert("skip".to_string(), vec!["x".to_string()]);
        // `x` filters the results view: taking it silently would break that view.
        let e = m.clone().with_overrides(&o).unwrap_err();
        assert!(
            e.contains("`x` for `skip` is already `filter_status`"),
            "{e}"
        );
        o.insert("filter_status".to_string(), vec!["X".to_string()]);
        let m = m.with_overrides(&o).unwrap();
        assert_eq!(m.action(Key::ch('X')), Some(Action::FilterStatus));
        assert_eq!(m.action(Key::ch('x')), Some(Action::Skip));
        assert_eq!(m.action(Key::ch('s')), None);
        assert_eq!(Action::SkipCategory.name(), "skip_category");
        assert_eq!(Action::FailureGroup.name(), "failure_group");
        assert_eq!(m.action(Key::ch('a')), Some(Action::FailureGroup));
        assert_eq!(Action::View(2).name(), "view_2");
    }
}
