//! The morning digest: what the night did, on one page. Written when the sweep ends and on
//! demand (`nightshift digest`), as Markdown and as one self-contained HTML page. Pure: run
//! documents in, a [`Digest`] out, rendered by [`markdown`] and [`html::render`].

pub mod html;

use crate::model::RunState;
use crate::report::{self, Report};
use crate::sanitize::{log_line, md_cell, terminal};
use crate::store::record::RunDoc;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Failed runs of one category that failed alike (one [`crate::failure_kind`]): the line
/// that decided them, once, with how many runs it stands for.
#[derive(Debug, Clone, Serialize)]
pub struct FailedRuns {
    /// The failure kind's id (what `results --group` and `diagnose --learn` take).
    pub kind: String,
    /// The first run's deciding line.
    pub evidence: String,
    /// Runs that failed this way.
    pub count: usize,
    /// Their keys, in plan order.
    pub keys: Vec<String>,
    /// Their models.
    pub models: Vec<String>,
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
    /// Failed runs per category, grouped by how they failed (most runs first), each group
    /// with its deciding line.
    pub failures: BTreeMap<String, Vec<FailedRuns>>,
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

/// The deciding finding of a run's last attempt.
fn deciding_finding(d: &RunDoc) -> Option<&crate::event::Finding> {
    let a = d.attempts.last();
    let cat = a.and_then(|a| a.category());
    a.and_then(|a| {
        a.findings
            .iter()
            .rev()
            .find(|f| Some(f.category) == cat)
            .or(a.findings.last())
    })
}

/// How a failed run failed, as one kind: its deciding finding's telling line, normalised.
fn kind_of(d: &RunDoc, line: &str) -> String {
    match deciding_finding(d) {
        Some(f) => crate::failure_kind::kind_id_of(f),
        None => crate::failure_kind::FailureKind::of_line(line).id,
    }
}

/// The line that decided a failed run's category: the deciding finding of its last attempt.
fn deciding_line(d: &RunDoc) -> String {
    let a = d.attempts.last();
    deciding_finding(d)
        .map(|f| {
            // A failure no signature names is shown by its most telling line (the last
            // traceback's final line), the one its failure group is made from.
            if crate::failure_kind::finding_is_unknown(f) {
                crate::failure_kind::telling_line(&f.evidence, &f.telling)
                    .trim()
                    .to_string()
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
    let mut failures: BTreeMap<String, Vec<FailedRuns>> = BTreeMap::new();
    let mut fixes = Vec::new();
    let mut gpu_hours = BTreeMap::new();
    let mut waiting = Vec::new();
    for d in docs {
        *counts.entry(state_word(&d.record.state)).or_insert(0) += 1;
        match &d.record.state {
            RunState::Finished { outcome } => {
                if let Some(c) = outcome.category() {
                    let evidence = deciding_line(d);
                    let kind = kind_of(d, &evidence);
                    let lines = failures.entry(c.as_str().to_string()).or_default();
                    let i = match lines.iter().position(|l| l.kind == kind) {
                        Some(i) => i,
                        None => {
                            lines.push(FailedRuns {
                                kind,
                                evidence,
                                count: 0,
                                keys: Vec::new(),
                                models: Vec::new(),
                            });
                            lines.len() - 1
                        }
                    };
                    let l = &mut lines[i];
                    l.count += 1;
                    l.keys.push(d.key.clone());
                    if let Some(m) = &d.info.model {
                        if !l.models.contains(m) {
                            l.models.push(m.clone());
                        }
                    }
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
    for lines in failures.values_mut() {
        // Most runs first; ties in the order they first failed.
        lines.sort_by_key(|l| std::cmp::Reverse(l.count));
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
    let vs = variants(&d.report);
    let _ = writeln!(
        o,
        "## The 3-way table (primary metric, median of repeats; {})\n",
        crate::report::render::method_note(&d.report.summary)
    );
    let heads: Vec<String> = vs.iter().map(|v| md_cell(v)).collect();
    let _ = writeln!(o, "| commit | {} | human vs baseline |", heads.join(" | "));
    let _ = writeln!(o, "|---|{}---|", "---|".repeat(vs.len()));
    for row in &d.report.rows {
        let vals: Vec<String> = vs.iter().map(|v| md_cell(&value_text(row, v))).collect();
        let _ = writeln!(
            o,
            "| `{}` {} | {} | {} |",
            &row.commit[..row.commit.len().min(8)],
            md_cell(&row.title),
            vals.join(" | "),
            md_cell(
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
    for (cat, lines) in &d.failures {
        let total: usize = lines.iter().map(|l| l.count).sum();
        let _ = writeln!(o, "### {cat} ({total})\n");
        for l in lines {
            let _ = writeln!(o, "- {}", failed_runs_text(l));
        }
        o.push('\n');
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
    o
}

#[cfg(test)]
mod tests;
