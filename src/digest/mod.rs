//! The morning digest: what the night did, on one page. Written when the sweep ends and on
//! demand (`nightshift digest`), as Markdown and as one self-contained HTML page. Pure: run
//! documents in, a [`Digest`] out, rendered by [`markdown`] and [`html::render`].

pub mod html;
mod md;

pub use md::markdown;

use crate::model::{RunState, Variant};
use crate::record::RunDoc;
use crate::report::{self, Report};
use serde::Serialize;
use std::collections::BTreeMap;

/// Runs of one category that failed alike (one [`crate::failure_kind`]): the line that
/// decided them, once, with how many runs it stands for. Held runs and runs skipped after
/// the diagnosis count too: a skip is a decision about the failure, not its cause.
#[derive(Debug, Clone, Serialize)]
pub struct FailedRuns {
    /// The failure kind's id (what `results --group` and `diagnose --learn` take).
    pub kind: String,
    /// The first run's deciding line.
    pub evidence: String,
    /// Runs that failed this way.
    pub count: usize,
    /// Of those, the runs skipped after it.
    pub skipped: usize,
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
    /// The 3-way table's columns: baseline, human, then one per agent variant of the plan.
    pub variants: Vec<String>,
    /// Runs per current state (`success`, `failed`, `held`, `queued`, …).
    pub counts: BTreeMap<String, usize>,
    pub report: Report,
    /// Runs per failure category (failed, held, skipped after it; the same runs the
    /// report's summary counts, by [`report::cause`]), grouped by how they failed (most
    /// runs first), each group with its deciding line.
    pub failures: BTreeMap<String, Vec<FailedRuns>>,
    pub fixes: Vec<AppliedFix>,
    /// Commits measured with a fix accepted before the night (`run --fixes`): (commit, what
    /// it changed and why), once each, in run order.
    pub fixed_before: Vec<(String, String)>,
    /// GPU-hours spent per attempt outcome (an interrupted attempt is `interrupted`).
    pub gpu_hours: BTreeMap<String, f64>,
    pub waiting: Vec<Waiting>,
    /// Who did what in the night, and what the policy decided on its own (oldest first;
    /// filled from the store's event log, empty when built from documents alone).
    pub activity: Vec<crate::report::activity::Entry>,
    /// GPU time free while runs waited (from the event log; none when built from documents).
    pub idle: Option<crate::report::idle::Idle>,
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

/// The finding that decided a run's category: the latest of that category (a run skipped
/// before its retry started has it on the attempt before), else its last attempt's last.
fn deciding_finding(d: &RunDoc) -> Option<&crate::event::Finding> {
    let cat = report::cause::category(d);
    d.attempts
        .iter()
        .rev()
        .flat_map(|a| a.findings.iter().rev())
        .chain(&d.predicted)
        .find(|f| Some(f.category) == cat)
        .or_else(|| d.attempts.last().and_then(|a| a.findings.last()))
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
    let mut fixed_before: Vec<(String, String)> = Vec::new();
    let mut gpu_hours = BTreeMap::new();
    let mut waiting = Vec::new();
    // Baseline and human always; then each agent variant the plan has.
    let mut variants = vec![&Variant::Baseline, &Variant::Human];
    for d in docs {
        if !variants.contains(&&d.info.variant) {
            variants.push(&d.info.variant);
        }
        *counts.entry(state_word(&d.record.state)).or_insert(0) += 1;
        if let Some(note) = &d.info.fixed {
            if !fixed_before.iter().any(|(c, _)| *c == d.info.commit) {
                fixed_before.push((d.info.commit.clone(), note.clone()));
            }
        }
        // The category as the report's summary counts it: one source for both.
        if let Some(c) = report::cause::category(d) {
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
                        skipped: 0,
                        keys: Vec::new(),
                        models: Vec::new(),
                    });
                    lines.len() - 1
                }
            };
            let l = &mut lines[i];
            l.count += 1;
            l.skipped += usize::from(report::cause::is_skipped(d));
            l.keys.push(d.key.clone());
            if let Some(m) = &d.info.model {
                if !l.models.contains(m) {
                    l.models.push(m.clone());
                }
            }
        }
        if let RunState::Held { category } = &d.record.state {
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
        for a in &d.attempts {
            for f in &a.fixes {
                fixes.push(AppliedFix {
                    key: d.key.clone(),
                    attempt: a.attempt,
                    fix: f.clone(),
                });
            }
            // GPU time is working time: a held run's wait for the operator holds no GPU.
            if let (Some(s), Some(e)) = (a.started_ms, report::cause::worked_until(d, a)) {
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
    variants.sort_by_key(|v| report::variant_order(v));
    Digest {
        sweep: sweep.to_string(),
        generated_ms: now_ms,
        variants: variants.iter().map(|v| v.to_string()).collect(),
        counts,
        report: report::build(docs, opts),
        failures,
        fixes,
        fixed_before,
        gpu_hours,
        waiting,
        activity: Vec::new(),
        idle: None,
    }
}

impl Digest {
    pub(crate) fn total_runs(&self) -> usize {
        self.counts.values().sum()
    }
}

/// The primary metric's value of a variant in a commit row, for the 3-way table.
pub(crate) fn primary_value(row: &report::CommitRow, variant: &str) -> Option<(String, f64)> {
    let c = row.cells.iter().find(|c| c.variant == variant)?;
    if c.status != "success" {
        return None;
    }
    crate::metric::headline(&c.metrics).map(|(k, v)| (k.to_string(), v))
}

/// The 3-way table's verdict columns: human vs baseline, then each agent vs baseline.
pub(crate) fn verdict_columns(d: &Digest) -> Vec<String> {
    let agents = d.variants.iter().filter(|v| v.starts_with("agent:"));
    std::iter::once("human vs baseline".to_string())
        .chain(agents.map(|a| format!("{a} vs baseline")))
        .collect()
}

/// A value with its metric's unit (`647.9 tok/s`, `12.40 ms`, `1.63 s`): a table mixing
/// serving, throughput and latency commits is read column by column.
pub(crate) fn with_unit(key: &str, v: f64) -> String {
    let n = if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    };
    match crate::metric::lookup(key).unit {
        "" => n,
        unit => format!("{n} {unit}"),
    }
}

/// How many runs a failure category stands for and how many of them were skipped after
/// it, from the report's summary (what its summary block prints too).
pub(crate) fn category_counts(d: &Digest, cat: &str) -> (usize, usize) {
    let s = &d.report.summary;
    let n = |m: &BTreeMap<String, usize>| m.get(cat).copied().unwrap_or(0);
    (n(&s.failures_by_category), n(&s.skipped_by_category))
}

/// One table cell: the primary value, or the status (and category) when it did not succeed.
pub(crate) fn value_text(row: &report::CommitRow, variant: &str) -> String {
    match primary_value(row, variant) {
        Some((k, v)) => with_unit(&k, v),
        None => match row.cells.iter().find(|c| c.variant == variant) {
            Some(c) => match &c.category {
                Some(cat) => format!("{} ({cat})", c.status),
                None => c.status.clone(),
            },
            None => "-".into(),
        },
    }
}

/// A row's verdict for the comparison `label`, worded with its direction and how it was
/// reached (the same words as `results`).
pub(crate) fn verdict_text(r: &Report, row: &report::CommitRow, label: &str) -> String {
    match row.comparisons.iter().find(|c| c.label == label) {
        Some(c) => crate::report::render::verdict_text(c, &r.summary),
        None => "-".into(),
    }
}

/// Flags under a row's comparison that did not replace its verdict (failed requests...).
pub(crate) fn flags_text(row: &report::CommitRow, label: &str) -> Vec<String> {
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

#[cfg(test)]
mod tests;
