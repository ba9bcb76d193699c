//! The morning digest: what the night did, on one page. Written when the sweep ends and on
//! demand (`nightshift digest`), as Markdown and as one self-contained HTML page. Pure: run
//! documents in, a [`Digest`] out, rendered by [`markdown`] and [`html::render`].

pub mod html;

use crate::model::RunState;
use crate::report::{self, Report};
use crate::store::record::RunDoc;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

/// One failed run and the line that decided its category.
#[derive(Debug, Clone, Serialize)]
pub struct FailedRun {
    pub key: String,
    pub evidence: String,
}

/// One fix applied to a run (environment workarounds, recipes).
#[derive(Debug, Clone, Serialize)]
pub struct AppliedFix {
    pub key: String,
    pub attempt: u32,
    pub fix: String,
}

/// A run waiting for the operator's decision.
#[derive(Debug, Clone, Serialize)]
pub struct Waiting {
    pub key: String,
    pub category: String,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Digest {
    pub sweep: String,
    pub generated_ms: u64,
    /// Runs per current state (`success`, `failed`, `held`, `queued`, …).
    pub counts: BTreeMap<String, usize>,
    pub report: Report,
    /// Failed runs per category, each with its deciding line.
    pub failures: BTreeMap<String, Vec<FailedRun>>,
    pub fixes: Vec<AppliedFix>,
    /// GPU-hours spent per attempt outcome (an interrupted attempt is `interrupted`).
    pub gpu_hours: BTreeMap<String, f64>,
    pub waiting: Vec<Waiting>,
}

/// A run's state as one word for the counts.
fn state_word(s: &RunState) -> String {
    match s {
        RunState::Queued => "queued".into(),
        RunState::Active { .. } => "running".into(),
        RunState::Held { .. } => "held".into(),
        RunState::Finished { outcome } => outcome.status().into(),
    }
}

/// The line that decided a failed run's category: the deciding finding of its last attempt.
fn deciding_line(d: &RunDoc) -> String {
    let a = d.attempts.last();
    let cat = a.and_then(|a| a.category());
    a.and_then(|a| {
        a.findings
            .iter()
            .rev()
            .find(|f| Some(f.category) == cat)
            .or(a.findings.last())
    })
    .map(|f| {
        // A failure left as `other` is shown by its most telling lines instead.
        if f.category == crate::category::Category::Other && !f.telling.is_empty() {
            f.telling.join(" / ")
        } else {
            f.evidence.trim().to_string()
        }
    })
    .filter(|e| !e.is_empty())
    .or_else(|| a.and_then(|a| a.detail.clone()))
    .unwrap_or_else(|| "(no deciding line recorded)".into())
}

pub fn build(sweep: &str, docs: &[&RunDoc], opts: &report::Options, now_ms: u64) -> Digest {
    let mut counts = BTreeMap::new();
    let mut failures: BTreeMap<String, Vec<FailedRun>> = BTreeMap::new();
    let mut fixes = Vec::new();
    let mut gpu_hours = BTreeMap::new();
    let mut waiting = Vec::new();
    for d in docs {
        *counts.entry(state_word(&d.record.state)).or_insert(0) += 1;
        match &d.record.state {
            RunState::Finished { outcome } => {
                if let Some(c) = outcome.category() {
                    failures
                        .entry(c.as_str().to_string())
                        .or_default()
                        .push(FailedRun {
                            key: d.key.clone(),
                            evidence: deciding_line(d),
                        });
                }
            }
            RunState::Held { category } => {
                let reason = d
                    .attempts
                    .last()
                    .and_then(|a| a.findings.last())
                    .map(|f| f.reason.clone())
                    .unwrap_or_else(|| deciding_line(d));
                waiting.push(Waiting {
                    key: d.key.clone(),
                    category: category.as_str().to_string(),
                    reason,
                });
            }
            _ => {}
        }
        for a in &d.attempts {
            for f in &a.fixes {
                fixes.push(AppliedFix {
                    key: d.key.clone(),
                    attempt: a.attempt,
                    fix: f.clone(),
                });
            }
            if let (Some(s), Some(e)) = (a.started_ms, a.finished_ms) {
                let gpus = a.gpus.len().max(1) as f64;
                let h = e.saturating_sub(s) as f64 / 3_600_000.0 * gpus;
                *gpu_hours.entry(a.status().to_string()).or_insert(0.0) += h;
            }
        }
    }
    Digest {
        sweep: sweep.to_string(),
        generated_ms: now_ms,
        counts,
        report: report::build(docs, opts),
        failures,
        fixes,
        gpu_hours,
        waiting,
    }
}

impl Digest {
    pub fn total_runs(&self) -> usize {
        self.counts.values().sum()
    }
}

/// Markdown pipes and newlines would break a table row.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// The primary metric's value of a variant in a commit row, for the 3-way table.
pub fn primary_value(row: &report::CommitRow, variant: &str) -> Option<(String, f64)> {
    let c = row.cells.iter().find(|c| c.variant == variant)?;
    if c.status != "success" {
        return None;
    }
    crate::metric::headline(&c.metrics).map(|(k, v)| (k.to_string(), v))
}

/// The 3-way table's columns: baseline, human, then every agent seen, in order.
pub fn variants(r: &Report) -> Vec<String> {
    let mut v = vec!["baseline".to_string(), "human".to_string()];
    for row in &r.rows {
        for c in &row.cells {
            if !v.contains(&c.variant) {
                v.push(c.variant.clone());
            }
        }
    }
    v
}

/// One table cell: the primary value, or the status (and category) when it did not succeed.
pub fn value_text(row: &report::CommitRow, variant: &str) -> String {
    match primary_value(row, variant) {
        Some((_, v)) => format!("{v:.1}"),
        None => match row.cells.iter().find(|c| c.variant == variant) {
            Some(c) => match &c.category {
                Some(cat) => format!("{} ({cat})", c.status),
                None => c.status.clone(),
            },
            None => "-".into(),
        },
    }
}

/// The human-vs-baseline verdict of a row, worded with its direction and how it was
/// reached (the same words as `results`).
pub fn verdict_text(r: &Report, row: &report::CommitRow, label: &str) -> String {
    match row.comparisons.iter().find(|c| c.label == label) {
        Some(c) => crate::report::render::verdict_text(c, &r.summary),
        None => "-".into(),
    }
}

/// Flags under a row's comparison that did not replace its verdict (failed requests...).
pub fn flags_text(row: &report::CommitRow, label: &str) -> Vec<String> {
    row.comparisons
        .iter()
        .filter(|c| c.label == label)
        .flat_map(|c| {
            c.flags
                .iter()
                .filter(|f| !c.flag.as_deref().is_some_and(|t| t.contains(&f.text)))
                .map(|f| f.text.clone())
        })
        .collect()
}

pub fn markdown(d: &Digest) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# Morning digest: {}\n", d.sweep);
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
    let _ = writeln!(o, "## Waiting for a decision ({})\n", d.waiting.len());
    if d.waiting.is_empty() {
        let _ = writeln!(o, "Nothing is waiting.\n");
    }
    for w in &d.waiting {
        let _ = writeln!(o, "- `{}` {}: {}", w.key, w.category, cell(&w.reason));
    }
    if !d.waiting.is_empty() {
        o.push('\n');
    }
    let vs = variants(&d.report);
    let _ = writeln!(
        o,
        "## The 3-way table (primary metric, median of repeats; {})\n",
        crate::report::render::method_note(&d.report.summary)
    );
    let _ = writeln!(o, "| commit | {} | human vs baseline |", vs.join(" | "));
    let _ = writeln!(o, "|---|{}---|", "---|".repeat(vs.len()));
    for row in &d.report.rows {
        let vals: Vec<String> = vs.iter().map(|v| cell(&value_text(row, v))).collect();
        let _ = writeln!(
            o,
            "| `{}` {} | {} | {} |",
            &row.commit[..row.commit.len().min(8)],
            cell(&row.title),
            vals.join(" | "),
            cell(
                &[verdict_text(&d.report, row, "human vs baseline")]
                    .into_iter()
                    .chain(
                        flags_text(row, "human vs baseline")
                            .into_iter()
                            .map(|f| format!("⚑ {f}"))
                    )
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        );
    }
    o.push('\n');
    o.push_str(&report::render_summary(&d.report.summary, true));
    let _ = writeln!(o, "\n## Failures by category\n");
    if d.failures.is_empty() {
        let _ = writeln!(o, "No failures.");
    }
    for (cat, runs) in &d.failures {
        let _ = writeln!(o, "### {cat} ({})\n", runs.len());
        for r in runs {
            let _ = writeln!(o, "- `{}`: `{}`", r.key, r.evidence.replace('`', "'"));
        }
        o.push('\n');
    }
    let _ = writeln!(o, "\n## Fixes applied ({})\n", d.fixes.len());
    for f in &d.fixes {
        let _ = writeln!(o, "- `{}` attempt {}: {}", f.key, f.attempt, f.fix);
    }
    let _ = writeln!(o, "\n## GPU-hours by outcome\n");
    for (k, h) in &d.gpu_hours {
        let _ = writeln!(o, "- {k}: {h:.2}");
    }
    o
}

#[cfg(test)]
mod tests;
