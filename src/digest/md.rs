//! The digest as Markdown: counts, the runs waiting, the 3-way table (a value and a
//! verdict column per variant, values with their units), the summary, failures by
//! category (skips after a diagnosis included), fixes and GPU-hours.

use super::{
    category_counts, flags_text, value_text, verdict_columns, verdict_text, Digest, FailedRuns,
};
use crate::report;
use crate::sanitize::{log_line, md_cell, terminal};
use std::fmt::Write;

/// One line for runs that failed alike: the run and its line, or for several the count,
/// the line once, the group and a few of the runs.
fn failed_runs_text(l: &FailedRuns) -> String {
    let line = log_line(&l.evidence).replace('`', "'");
    if l.count == 1 {
        return format!("`{}`: `{line}`", terminal(&l.keys[0]));
    }
    let shown: Vec<String> = l
        .keys
        .iter()
        .take(3)
        .map(|k| format!("`{}`", terminal(k)))
        .collect();
    let more = if l.count > 3 {
        format!(" and {} more", l.count - 3)
    } else {
        String::new()
    };
    let models = if l.models.is_empty() {
        String::new()
    } else {
        format!("; models {}", terminal(&l.models.join(", ")))
    };
    format!(
        "**{} runs**: `{line}` (group `{}`{models}; {}{more})",
        l.count,
        l.kind,
        shown.join(", ")
    )
}

pub fn markdown(d: &Digest) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# Morning digest: {}\n", terminal(&d.sweep));
    let _ = writeln!(
        o,
        "{} runs: {}\n",
        d.total_runs(),
        d.counts
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let skipped = &d.report.summary.skipped_by_category;
    if !skipped.is_empty() {
        let each: Vec<String> = skipped
            .iter()
            .map(|(c, n)| format!("skipped after {}: {n}", terminal(c)))
            .collect();
        let _ = writeln!(o, "Of those skipped, {}.\n", each.join("; "));
    }
    let _ = writeln!(
        o,
        "Named before the night: {} commits; failed during the night: {}.\n",
        d.report.summary.named_before_night, d.report.summary.failed_during_night
    );
    let _ = writeln!(o, "## Waiting for a decision ({})\n", d.waiting.len());
    if d.waiting.is_empty() {
        let _ = writeln!(o, "Nothing is waiting.\n");
    }
    for w in &d.waiting {
        let _ = writeln!(
            o,
            "- `{}` {}: {}",
            terminal(&w.key),
            w.category,
            md_cell(&w.reason)
        );
    }
    if !d.waiting.is_empty() {
        o.push('\n');
    }
    let _ = writeln!(
        o,
        "## The 3-way table (primary metric, median of repeats; {})\n",
        crate::report::render::method_note(&d.report.summary)
    );
    let verdicts = verdict_columns(d);
    let heads: Vec<String> = d
        .variants
        .iter()
        .chain(&verdicts)
        .map(|v| md_cell(v))
        .collect();
    let _ = writeln!(o, "| commit | {} |", heads.join(" | "));
    let _ = writeln!(o, "|---|{}", "---|".repeat(heads.len()));
    for row in &d.report.rows {
        let vals = d.variants.iter().map(|v| md_cell(&value_text(row, v)));
        let verdict = |label: &String| {
            let flags = flags_text(row, label).into_iter().map(|f| format!("⚑ {f}"));
            let all: Vec<String> = std::iter::once(verdict_text(&d.report, row, label))
                .chain(flags)
                .collect();
            md_cell(&all.join("; "))
        };
        let cells: Vec<String> = vals.chain(verdicts.iter().map(verdict)).collect();
        let _ = writeln!(
            o,
            "| `{}` {} | {} |",
            &row.commit[..row.commit.len().min(8)],
            md_cell(&row.title),
            cells.join(" | "),
        );
    }
    o.push('\n');
    o.push_str(&report::render_summary(&d.report.summary, true));
    let _ = writeln!(o, "\n## Failures by category\n");
    if d.failures.is_empty() {
        let _ = writeln!(o, "No failures.");
    }
    for (cat, lines) in &d.failures {
        // The summary's numbers, so the heading and the summary block never disagree.
        let (total, skipped) = category_counts(d, cat);
        let skipped = match skipped {
            0 => String::new(),
            n => format!("; {n} skipped after it"),
        };
        let _ = writeln!(o, "### {cat} ({total}{skipped})\n");
        for l in lines {
            let _ = writeln!(o, "- {}", failed_runs_text(l));
        }
        o.push('\n');
    }
    if !d.fixed_before.is_empty() {
        let _ = writeln!(
            o,
            "\n## Fixed before the night ({})\n",
            d.fixed_before.len()
        );
        for (c, note) in &d.fixed_before {
            let _ = writeln!(
                o,
                "- `{}`: {}",
                terminal(&c[..c.len().min(12)]),
                terminal(note)
            );
        }
    }
    let _ = writeln!(o, "\n## Fixes applied ({})\n", d.fixes.len());
    for f in &d.fixes {
        let _ = writeln!(
            o,
            "- `{}` attempt {}: {}",
            terminal(&f.key),
            f.attempt,
            terminal(&f.fix)
        );
    }
    let _ = writeln!(o, "\n## GPU-hours by outcome\n");
    for (k, h) in &d.gpu_hours {
        let _ = writeln!(o, "- {k}: {h:.2}");
    }
    if let Some(i) = &d.idle {
        let _ = writeln!(
            o,
            "- idle while runs waited: {:.1} GPU-minutes (of {:.1} GPU-minutes the sweep ran)",
            i.waiting_minutes(),
            i.total_minutes()
        );
    }
    if !d.activity.is_empty() {
        let _ = writeln!(o, "\n## Activity ({}; times UTC)\n", d.activity.len());
        for e in &d.activity {
            let _ = writeln!(
                o,
                "- {} `{}` {} — {}",
                crate::report::activity::clock(e.at_ms),
                terminal(&e.source),
                terminal(&e.what),
                terminal(&e.outcome)
            );
        }
    }
    o
}
