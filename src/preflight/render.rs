//! The preflight for people: a line per commit and its reasons, then the summary.

use super::{Report, Severity, Verdict};
use crate::sanitize::terminal;
use std::collections::BTreeMap;
use std::fmt::Write;

/// One line: `preflight: N commits: R ready, A at risk, B blocked (K runs); …`.
pub fn summary_line(r: &Report) -> String {
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

/// The table: one block per commit that is not ready (ready ones in one line each with
/// `--all`), then what was not checked and the summary.
pub fn table(r: &Report, all: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<10} {:<8} {:<36} reasons",
        "commit", "verdict", "model"
    );
    for c in &r.commits {
        if c.verdict == Verdict::Ready && !all {
            continue;
        }
        // Plan text (the model, titles, paths, git's words): controls shown escaped.
        let model = terminal(c.model.as_deref().unwrap_or("-"));
        let model = if model.chars().count() > 36 {
            format!("{}…", model.chars().take(35).collect::<String>())
        } else {
            model.to_string()
        };
        let short: String = c.commit.chars().take(8).collect();
        let mut first = true;
        let mut reasons: Vec<_> = c.reasons.iter().collect();
        reasons.sort_by_key(|x| std::cmp::Reverse(x.severity));
        if reasons.is_empty() {
            let _ = writeln!(out, "{short:<10} {:<8} {model:<36}", c.verdict.as_str());
        }
        for x in reasons {
            let mark = if x.severity == Severity::Blocks {
                "✗"
            } else {
                "!"
            };
            let text = terminal(&format!(
                "{mark} {}: {} — {}",
                x.variant, x.category, x.text
            ))
            .into_owned();
            if first {
                let _ = writeln!(
                    out,
                    "{short:<10} {:<8} {model:<36} {text}",
                    c.verdict.as_str()
                );
                first = false;
            } else {
                let _ = writeln!(out, "{:<56} {text}", "");
            }
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
            let _ = writeln!(out, "  {n:>4}  {}", terminal(k));
        }
    }
    if !r.summary.not_reached.is_empty() {
        let _ = writeln!(out, "\nnot reached:");
        for n in &r.summary.not_reached {
            let _ = writeln!(out, "  {}", terminal(n));
        }
    }
    let _ = writeln!(out, "\n{}", summary_line(r));
    let _ = writeln!(out, "took {:.1} s", r.summary.wall_ms as f64 / 1000.0);
    out
}
