//! The preflight for people: a line per commit and its reasons, then the summary.

use super::{Report, Severity, Verdict};
use crate::sanitize::terminal;
use std::collections::BTreeMap;
use std::fmt::Write;

/// One line: `preflight: N commits: R ready, A at risk, B blocked (K runs); …`.
pub(crate) fn summary_line(r: &Report) -> String {
    let s = &r.summary;
    let mut line = format!(
        "preflight: {} commits: {} ready, {} at risk, {} blocked ({} runs blocked)",
        s.commits, s.ready, s.at_risk, s.blocked, s.runs_blocked
    );
    if !s.by_category.is_empty() {
        let cats: Vec<String> = s
            .by_category
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let _ = write!(line, "; blocked by {}", cats.join(", "));
    }
    if s.with_unchecked > 0 {
        let _ = write!(line, "; {} with unchecked items", s.with_unchecked);
    }
    line
}

/// The width the table is written for: the terminal's, else 80 (a pipe, a file, CI).
pub fn width() -> usize {
    crossterm::terminal::size()
        .ok()
        .filter(|_| std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .map_or(80, |(w, _)| (w as usize).clamp(60, 200))
}

/// A reason in one line: `✗ agent:x: category — evidence`.
fn line_of(x: &super::Reason) -> String {
    let mark = if x.severity == Severity::Blocks {
        "✗"
    } else {
        "!"
    };
    terminal(&format!(
        "{mark} {}: {} — {}",
        x.variant, x.category, x.text
    ))
    .into_owned()
}

/// A reason with the commit's own hash put back as `<commit>`, so that the same finding on
/// many commits is one finding ("the patch runs/<commit>/… is missing").
fn said(x: &super::Reason, commit: &str) -> String {
    let mut text = line_of(x).replace(commit, "<commit>");
    for n in [12, 8] {
        if let Some(p) = commit.get(..n) {
            text = text.replace(p, "<commit>");
        }
    }
    text
}

/// The table for `width` columns: a line per commit that is not ready (ready ones too with
/// `--all`), its reasons below it wrapped to the width; a finding many commits share is
/// said once at the end with its count, and each of its commits names it by a letter.
/// Then what was not checked and the summary.
pub fn table(r: &Report, all: bool) -> String {
    table_for(r, all, width())
}

/// Commits sharing one finding beyond which it is said once, by reference.
const SHARED_FROM: usize = 3;

pub(crate) fn table_for(r: &Report, all: bool, width: usize) -> String {
    let mut out = String::new();
    let shown: Vec<_> = r
        .commits
        .iter()
        .filter(|c| all || c.verdict != Verdict::Ready)
        .collect();
    // How many shown commits say each finding.
    let mut count: BTreeMap<String, usize> = BTreeMap::new();
    for c in &shown {
        let mut mine: Vec<String> = c.reasons.iter().map(|x| said(x, &c.commit)).collect();
        mine.sort_unstable();
        mine.dedup();
        for m in mine {
            *count.entry(m).or_default() += 1;
        }
    }
    let mut shared: Vec<(&String, &usize)> =
        count.iter().filter(|(_, n)| **n >= SHARED_FROM).collect();
    shared.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let letter = |text: &str| {
        shared
            .iter()
            .position(|(t, _)| t.as_str() == text)
            .map(label)
    };
    let indent = "          ";
    let wrap = |text: &str, first: &str, rest: &str| {
        let opts = textwrap::Options::new(width.max(40))
            .initial_indent(first)
            .subsequent_indent(rest)
            .break_words(true);
        textwrap::wrap(text, opts).join("\n")
    };
    let _ = writeln!(out, "{:<9} {:<8} model", "commit", "verdict");
    for c in &shown {
        // Plan text (the model, titles, paths, git's words): controls shown escaped.
        let model = terminal(c.model.as_deref().unwrap_or("-")).into_owned();
        let short: String = c.commit.chars().take(8).collect();
        let _ = writeln!(
            out,
            "{}",
            wrap(
                &format!("{short:<9} {:<8} {model}", c.verdict.as_str()),
                "",
                indent
            )
        );
        let mut reasons: Vec<_> = c.reasons.iter().collect();
        reasons.sort_by_key(|x| std::cmp::Reverse(x.severity));
        let mut seen = Vec::new();
        for x in reasons {
            let text = said(x, &c.commit);
            if seen.contains(&text) {
                continue;
            }
            seen.push(text.clone());
            let line = match letter(&text) {
                // The finding's head and its letter; its words are said once below.
                Some(l) => {
                    let head = text.split(" — ").next().unwrap_or(&text);
                    format!("{head} [{l}]")
                }
                None => line_of(x),
            };
            let _ = writeln!(out, "{}", wrap(&line, indent, "            "));
        }
    }
    if !shared.is_empty() {
        let _ = writeln!(out, "\nsaid once for the commits that share it:");
        for (i, (text, n)) in shared.iter().enumerate() {
            let _ = writeln!(
                out,
                "{}",
                wrap(
                    &format!("[{}] {text} ({n} commits)", label(i)),
                    "  ",
                    "      "
                )
            );
        }
    }
    let mut unchecked: BTreeMap<String, usize> = BTreeMap::new();
    for c in &r.commits {
        for u in &c.unchecked {
            // Group by what was not checked, not by which model: "model X: …" → "model: …".
            let key = match u.split_once(": ") {
                Some((what, why)) if what.starts_with("model ") || what.starts_with("patch ") => {
                    format!("{}: {why}", what.split(' ').next().unwrap_or(what))
                }
                _ => u.clone(),
            };
            *unchecked.entry(key).or_default() += 1;
        }
    }
    if !unchecked.is_empty() {
        let _ = writeln!(out, "\nnot checked (commits):");
        for (k, n) in &unchecked {
            let line = format!("  {n:>4}  {}", terminal(k));
            let _ = writeln!(out, "{}", wrap(&line, "", "          "));
        }
    }
    if !r.summary.not_reached.is_empty() {
        let _ = writeln!(out, "\nnot reached:");
        for n in &r.summary.not_reached {
            let _ = writeln!(out, "{}", wrap(&terminal(n), "  ", "    "));
        }
    }
    // One line, however long: scripts grep for it (`preflight: …`).
    let _ = writeln!(out, "\n{}", summary_line(r));
    let _ = writeln!(out, "took {:.1} s", r.summary.wall_ms as f64 / 1000.0);
    out
}

/// `A`…`Z`, then `AA`…: a shared finding's name in the table.
fn label(i: usize) -> String {
    let mut n = i;
    let mut s = String::new();
    loop {
        s.insert(0, (b'A' + (n % 26) as u8) as char);
        if n < 26 {
            return s;
        }
        n = n / 26 - 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_run_a_to_z_then_two_letters() {
        assert_eq!(label(0), "A");
        assert_eq!(label(25), "Z");
        assert_eq!(label(26), "AA");
        assert_eq!(label(27), "AB");
    }
}
