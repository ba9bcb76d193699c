//! Text that came from outside (plan titles, log lines, git's and Docker's words) made safe
//! for a terminal: control characters are shown escaped (`\x1b`, `\u{85}`) rather than
//! acted on, so a commit title cannot move the cursor, clear the screen or set a title.
//! This is for every text output; HTML adds its entities on top (`html`, below),
//! JSON its own escapes ([`json`]).

use std::borrow::Cow;
use std::fmt::Write;

/// `s` with every control character but tab (newlines too: one field stays one line)
/// shown as an escape. Borrowed when clean (the
/// common case costs one scan).
pub fn terminal(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if needs_escape(c) {
            let n = c as u32;
            if n < 0x100 {
                let _ = write!(out, "\\x{n:02x}");
            } else {
                let _ = write!(out, "\\u{{{n:x}}}");
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

fn needs_escape(c: char) -> bool {
    // Controls (C0, DEL, C1) and the bidirectional overrides that reorder what is shown.
    (c.is_control() && c != '\t') || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// A command to paste into a shell: one line (its line breaks and tabs, a TOML multi-line
/// string's, become spaces; a backslash-newline continuation joins), every other control
/// character shown escaped, so pasting it runs nothing by itself (no newline) and cannot
/// end a bracketed paste (`ESC[201~`).
pub(crate) fn one_line(cmd: &str) -> String {
    let joined = cmd.replace("\\\r\n", " ").replace("\\\n", " ");
    let spaced: String = joined
        .chars()
        .map(|c| {
            if matches!(c, '\n' | '\r' | '\t') {
                ' '
            } else {
                c
            }
        })
        .collect();
    let words: Vec<&str> = spaced.split(' ').filter(|w| !w.is_empty()).collect();
    terminal(&words.join(" ")).into_owned()
}

/// Escape controls in a whole text but keep its line breaks (a report of many lines).
pub fn text(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| c != '\n' && needs_escape(c)) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(
        s.split('\n')
            .map(|l| terminal(l).into_owned())
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

/// A log line (a diagnosis's evidence, a telling line) for a text output: the colour and
/// title sequences a log legitimately carries are dropped as the diagnosis reads them
/// ([`clean`]), then whatever control is left is escaped as
/// [`terminal`] shows it. A line stays one line.
pub(crate) fn log_line(s: &str) -> Cow<'_, str> {
    match clean(s) {
        Cow::Borrowed(b) => terminal(b),
        Cow::Owned(o) => Cow::Owned(terminal(&o).into_owned()),
    }
}

/// One Markdown table cell: controls escaped as [`terminal`] shows them (a line break too,
/// so a row stays one row) and `|` escaped, so a cell stays one cell.
pub(crate) fn md_cell(s: &str) -> String {
    terminal(s).replace('|', "\\|")
}

/// Serialized JSON with the controls a JSON writer leaves raw (C1, DEL, the bidirectional
/// overrides: only C0 must be escaped) written as `\uXXXX` escapes: the same document,
/// value for value, and inert on a terminal. Outside strings JSON has none of them.
pub fn json(s: &str) -> Cow<'_, str> {
    // C0 inside a string is escaped by every JSON writer; outside one it is white space.
    let raw = |c: char| c >= '\u{7f}' && needs_escape(c);
    if !s.chars().any(raw) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if raw(c) {
            // Every character needs_escape names is in the Basic Multilingual Plane.
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Removes ANSI escape sequences, carriage returns and NO-BREAK SPACEs (web log viewers).
/// The diagnoser reads lines through it too, so what is matched is what is shown.
pub fn clean(line: &str) -> std::borrow::Cow<'_, str> {
    use std::borrow::Cow;
    static ANSI: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let needs = line.bytes().any(|b| b == 0x1b || b == b'\r' || b == 0xc2);
    if !needs {
        return Cow::Borrowed(line);
    }
    let ansi = ANSI.get_or_init(|| {
        regex::Regex::new(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r").expect("built-in regex")
    });
    let s = ansi.replace_all(line, "");
    Cow::Owned(s.replace('\u{a0}', " "))
}

/// Escape text for HTML element content and attribute values: `&<>"'` as entities, and
/// control characters (plan titles, log lines) shown escaped as [`text`]
/// shows them (a page read in a terminal or pasted into one must not act on them; line
/// breaks stay, in HTML they are white space).
pub fn html(s: &str) -> String {
    let s = text(s);
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// What a hostile plan (a commit title, an agent id) or log puts in a field: a screen
/// clear, a bell, a carriage return and line feed, a C1 CSI. For every output's tests.
#[cfg(test)]
pub(crate) const HOSTILE: &str = "\x1b[2J\x07evil\r\n\u{9b}31m";

/// Asserts `out` has none of [`HOSTILE`]'s controls raw and shows `escaped`.
#[cfg(test)]
pub(crate) fn assert_inert(out: &str, escaped: &str) {
    for c in ['\x1b', '\x07', '\r', '\u{9b}'] {
        assert!(!out.contains(c), "raw {c:?} in:\n{out}");
    }
    assert!(out.contains(escaped), "{escaped} not in:\n{out}");
}

/// [`HOSTILE`] as [`terminal`] shows it.
#[cfg(test)]
pub(crate) const HOSTILE_SHOWN: &str = "\\x1b[2J\\x07evil\\x0d\\x0a\\x9b31m";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_to_paste_is_one_inert_line() {
        let cmd = "VLLM_USE_V1=1 python3 bench.py \\\n  --model m\n--seed 0\x1b[201~; rm -rf /\n";
        let l = one_line(cmd);
        assert_eq!(
            l,
            "VLLM_USE_V1=1 python3 bench.py --model m --seed 0\\x1b[201~; rm -rf /"
        );
        assert!(!l.contains('\n') && !l.contains('\x1b'));
    }

    #[test]
    fn clean_text_is_borrowed() {
        assert!(matches!(terminal("Fix TTFT · ✓ 685.6"), Cow::Borrowed(_)));
    }

    #[test]
    fn escapes_and_line_breaks_are_shown_not_acted_on() {
        assert_eq!(terminal("a\x1b[2Jb"), "a\\x1b[2Jb");
        assert_eq!(terminal("x\ny\rz"), "x\\x0ay\\x0dz");
        assert_eq!(terminal("\u{9b}31m"), "\\x9b31m");
        assert_eq!(terminal("ab\u{202e}cd"), "ab\\u{202e}cd");
        assert_eq!(terminal("tab\tok"), "tab\tok");
    }

    #[test]
    fn a_report_keeps_its_lines() {
        assert_eq!(text("one\x07\ntwo"), "one\\x07\ntwo");
    }

    #[test]
    fn the_hostile_text_is_shown_as_the_tests_expect() {
        assert_eq!(terminal(HOSTILE), HOSTILE_SHOWN);
        assert_inert(&terminal(HOSTILE), HOSTILE_SHOWN);
    }

    #[test]
    fn a_log_line_loses_its_colours_and_keeps_nothing_else_raw() {
        assert_eq!(
            log_line("\x1b[36m(Worker)\x1b[0m boom\x07"),
            "(Worker) boom\\x07"
        );
        assert_eq!(log_line("plain"), "plain");
    }

    #[test]
    fn json_escapes_what_its_writer_leaves_raw_and_means_the_same() {
        let doc = serde_json::json!({ "title": HOSTILE, "bidi": "a\u{202e}b" });
        let doc = serde_json::to_string_pretty(&doc).unwrap();
        let safe = json(&doc);
        assert_inert(&safe, "\\u009b31m");
        assert!(!safe.contains('\u{202e}'), "{safe}");
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back["title"], HOSTILE);
        assert_eq!(back["bidi"], "a\u{202e}b");
    }

    #[test]
    fn a_markdown_cell_stays_one_cell_of_one_row() {
        assert_eq!(md_cell("a|b\nc\x1b"), "a\\|b\\x0ac\\x1b");
    }
}
