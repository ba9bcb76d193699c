//! The table for a narrow terminal (`results` at 80 columns): per commit the metrics that
//! fit, its primary first, whole; each cell's status and each comparison's verdict on a
//! line of its own below its numbers, wrapped. Nothing is cut: what does not fit is
//! named ("+5 metrics at --width 200").

use super::render::{num, status_text, verdict_text};
use super::{CommitRow, Report, Summary};
use crate::metric;
use crate::sanitize::terminal;
use std::fmt::Write;

const LABEL_W: usize = 24;
const METRIC_W: usize = 16;

/// The metrics a row shows in `width` columns: its primary first, then the headline ones
/// in their order; and how many were left out.
fn metrics_for(row: &CommitRow, width: usize) -> (Vec<(&'static str, &'static str)>, usize) {
    let mut all: Vec<(&'static str, &'static str)> = metric::HEADLINE
        .iter()
        .filter(|m| row.cells.iter().any(|c| c.metrics.contains_key(m.key)))
        .map(|m| (m.key, m.label))
        .collect();
    if let Some(p) = row.comparisons.iter().find_map(|c| c.primary.as_deref()) {
        if let Some(i) = all.iter().position(|(k, _)| *k == p) {
            let m = all.remove(i);
            all.insert(0, m);
        }
    }
    let fits = width.saturating_sub(2 + LABEL_W) / (METRIC_W + 1);
    let left = all.len().saturating_sub(fits);
    all.truncate(fits);
    (all, left)
}

fn wrap(text: &str, width: usize, indent: &str) -> String {
    let opts = textwrap::Options::new(width.max(40))
        .initial_indent(indent)
        .subsequent_indent(indent)
        .break_words(true);
    textwrap::wrap(text, opts).join("\n")
}

/// A label in its column, then its numbers, then `tail` on the same line where it fits
/// (else on a line of its own, wrapped); a label longer than its column has its own line.
fn line(o: &mut String, text: &str, cells: &[String], tail: &str, width: usize) {
    let text = terminal(text);
    let mut l = if text.chars().count() > LABEL_W {
        let _ = writeln!(o, "  {text}");
        format!("  {:<LABEL_W$}", "")
    } else {
        format!("  {text:<LABEL_W$}")
    };
    for c in cells {
        let _ = write!(l, " {c:>METRIC_W$}");
    }
    if cells.is_empty() && l.trim().is_empty() {
        l.clear();
    }
    if !l.is_empty() && l.chars().count() + 2 + tail.chars().count() <= width {
        let _ = writeln!(o, "{l}  {tail}");
    } else {
        if !l.trim().is_empty() {
            let _ = writeln!(o, "{}", l.trim_end());
        }
        let _ = writeln!(o, "{}", wrap(tail, width, "    "));
    }
}

pub fn row(row: &CommitRow, summary: &Summary, width: usize) -> String {
    let mut o = String::new();
    let head = format!("{} {}", &row.commit[..row.commit.len().min(8)], row.title);
    let _ = writeln!(o, "{}", wrap(&terminal(&head), width, ""));
    if let Some(f) = &row.fixed {
        let text = format!("fixed before the night: {}", terminal(f));
        let _ = writeln!(o, "{}", wrap(&text, width, "  "));
    }
    let (ms, left) = metrics_for(row, width);
    if ms.is_empty() {
        for c in &row.cells {
            line(&mut o, &c.variant, &[], &status_text(c), width);
        }
        let _ = writeln!(o);
        return o;
    }
    let _ = write!(o, "  {:<LABEL_W$}", "variant");
    for (_, l) in &ms {
        let _ = write!(o, " {l:>METRIC_W$}");
    }
    let _ = writeln!(o);
    for c in &row.cells {
        let cells: Vec<String> = ms
            .iter()
            .map(|(k, _)| c.metrics.get(*k).map_or("-".into(), |v| num(*v)))
            .collect();
        line(&mut o, &c.variant, &cells, &status_text(c), width);
    }
    for cmp in &row.comparisons {
        let cells: Vec<String> = ms
            .iter()
            .map(|(k, _)| {
                cmp.deltas
                    .get(*k)
                    .map_or("-".into(), |d| metric::delta_label(k, *d))
            })
            .collect();
        let verdict = format!("→ {}", terminal(&verdict_text(cmp, summary)));
        line(&mut o, &cmp.label, &cells, &verdict, width);
        for f in cmp.flags.iter().map(|f| f.text.as_str()) {
            if !cmp.flag.as_deref().is_some_and(|t| t.contains(f)) {
                let _ = writeln!(o, "{}", wrap(&format!("⚑ {}", terminal(f)), width, "    "));
            }
        }
    }
    if left > 0 {
        let wide = 2 + LABEL_W + (ms.len() + left) * (METRIC_W + 1);
        let _ = writeln!(
            o,
            "{}",
            wrap(
                &format!("(+{left} metrics at --width {wide}, or `nightshift show`)"),
                width,
                "  "
            )
        );
    }
    let _ = writeln!(o);
    o
}

/// The whole report for `width` columns, then its summary (wrapped the same way).
pub fn render(r: &Report, width: usize) -> String {
    let mut o = String::new();
    for rw in &r.rows {
        o.push_str(&row(rw, &r.summary, width));
    }
    for line in super::render::render_summary(&r.summary, false).lines() {
        if line.is_empty() {
            o.push('\n');
            continue;
        }
        let indent: String = line.chars().take_while(|c| *c == ' ').collect();
        let _ = writeln!(
            o,
            "{}",
            textwrap::wrap(
                line.trim_start(),
                textwrap::Options::new(width.max(40))
                    .initial_indent(&indent)
                    .subsequent_indent(&format!("{indent}  "))
            )
            .join("\n")
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Variant;
    use crate::report::tests::doc_with;
    use crate::report::{build, Options};

    fn serving(tput: f64, ttft: f64) -> Vec<(&'static str, f64)> {
        vec![
            ("output_throughput_tok_s", tput),
            ("total_throughput_tok_s", tput * 2.0),
            ("ttft_mean_ms", ttft),
            ("ttft_p99_ms", ttft * 2.0),
            ("tpot_mean_ms", 11.0),
            ("tpot_p99_ms", 25.0),
            ("itl_mean_ms", 10.0),
            ("itl_p99_ms", 24.0),
        ]
    }

    #[test]
    fn eighty_columns_keep_the_primary_the_verdict_and_every_word() {
        let docs = [
            doc_with("c1", Variant::Baseline, 0, "x", &serving(100.0, 180.0)),
            doc_with("c1", Variant::Human, 0, "x", &serving(118.0, 166.0)),
            doc_with(
                "c1",
                Variant::Agent("claude_code".into()),
                0,
                "x",
                &serving(102.0, 176.0),
            ),
        ];
        let refs: Vec<&crate::record::RunDoc> = docs.iter().collect();
        let r = build(&refs, &Options::with_threshold(2.0));
        let text = render(&r, 80);
        for l in text.lines() {
            assert!(l.chars().count() <= 80, "wider than 80: {l}");
        }
        // The primary metric is the first column, whole, with its Δ and the verdict.
        let head = text.lines().find(|l| l.contains("variant")).unwrap();
        let words: Vec<&str> = head.split_whitespace().take(3).collect();
        assert_eq!(words, ["variant", "out", "tok/s"], "{head}");
        assert!(text.contains("more tok/s 18.0%"), "{text}");
        assert!(text.contains("→ better (more tok/s 18.0%"), "{text}");
        // The long label has a line of its own, not cut.
        assert!(text.contains("  agent:claude_code vs baseline\n"), "{text}");
        // What did not fit is named, with the width that shows it.
        assert!(text.contains("metrics at --width"), "{text}");
        // Wide enough, every metric and no note.
        let wide = render(&r, 200);
        assert!(!wide.contains("metrics at --width"), "{wide}");
        assert!(wide.contains("ITL p99 ms"), "{wide}");
    }
}
