//! The report as text: the terminal table, Markdown, CSV, one JSON document, and JSON
//! Lines (one results record per attempt). Every Δ is worded with its direction and every
//! verdict says how it was reached. Plan text (titles, variant names, commands in flags)
//! is shown with its control characters escaped ([`crate::sanitize`]): as `\x1b` in the
//! table, the Markdown and CSV, as JSON's own `\u001b` in JSON (the same values).

use super::{Cell, CommitRow, Comparison, Outcomes, Report, Summary};
use crate::metric;
use crate::record::{ResultRecord, RunDoc};
use crate::sanitize::{md_cell, terminal};
use crate::stats::{Method, Verdict};
use std::fmt::Write;

/// A metric value as every rendering shows it: three significant digits or so.
pub(super) fn num(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn short(c: &str) -> &str {
    &c[..c.len().min(8)]
}

pub(super) fn status_text(c: &Cell) -> String {
    let mut s = match &c.category {
        Some(cat) => format!("{}({cat})", c.status),
        None => c.status.clone(),
    };
    if c.n == 0 && c.keys.len() > 1 {
        let _ = write!(s, " ×{}", c.keys.len());
    } else if c.keys.len() > 1 || c.warmups > 0 {
        let _ = write!(s, " n={}", c.n);
        if c.added > 0 {
            let _ = write!(s, " ({} added: the comparison was unknown)", c.added);
        }
        if c.warmups > 0 {
            let _ = write!(s, " +{} warm-up", c.warmups);
        }
        if c.failed > 0 {
            let _ = write!(s, ", {} failed", c.failed);
        }
    } else {
        let _ = write!(s, " (attempt {})", c.attempt);
    }
    s
}

/// "p=0.008" with as many digits as it needs.
fn p_text(p: f64) -> String {
    if p < 0.001 {
        "p<0.001".into()
    } else {
        format!("p={p:.3}")
    }
}

/// A comparison's verdict in words: "better (more tok/s 10.0%, p=0.008)", "no change
/// (faster 0.4%, p=0.41)", "better (more tok/s 3.1%; threshold uncalibrated ±2%)",
/// "inconclusive (3 vs 3 repeats cannot reach α=0.05; calibrate)".
pub(crate) fn verdict_text(c: &Comparison, s: &Summary) -> String {
    if let Some(f) = &c.flag {
        return f.clone();
    }
    let (Some(v), Some(st)) = (c.verdict, c.primary_stats()) else {
        return "n/a".into();
    };
    let delta = st.delta_label();
    match st.method {
        Method::Uncalibrated => format!(
            "{} ({delta}; threshold uncalibrated ±{}%)",
            v.words(),
            s.threshold_pct
        ),
        Method::TooFewRepeats => format!(
            "{} ({delta}; {} vs {} repeats cannot reach α={}; calibrate or add repeats)",
            v.words(),
            st.candidate.n,
            st.reference.n,
            s.alpha
        ),
        m => {
            let how = if m == Method::NoiseBand {
                ", noise band"
            } else {
                ""
            };
            let p = st.p_value.map(p_text).unwrap_or_default();
            format!("{} ({delta}, {p}{how})", v.words())
        }
    }
}

/// The flags a reader should see under a comparison: those that did not already replace
/// its verdict.
fn extra_flags(c: &Comparison) -> Vec<&str> {
    c.flags
        .iter()
        .filter(|f| !c.flag.as_deref().is_some_and(|t| t.contains(&f.text)))
        .map(|f| f.text.as_str())
        .collect()
}

/// Which headline metrics a row has, without the throughput-benchmark duplicates.
fn row_metrics(row: &CommitRow) -> Vec<(&'static str, &'static str)> {
    metric::HEADLINE
        .iter()
        .filter(|m| row.cells.iter().any(|c| c.metrics.contains_key(m.key)))
        .map(|m| (m.key, m.label))
        .collect()
}

fn delta_cell(cmp: &Comparison, key: &str) -> Option<String> {
    cmp.deltas.get(key).map(|d| metric::delta_label(key, *d))
}

pub fn render_table(r: &Report) -> String {
    use rayon::prelude::*;
    // Rows are independent: drawn on every core (10,000 runs make ~30,000 lines).
    let rows: Vec<String> = r
        .rows
        .par_iter()
        .map(|row| table_row(row, &r.summary))
        .collect();
    let mut o = String::with_capacity(rows.iter().map(String::len).sum::<usize>() + 4096);
    for row in &rows {
        o.push_str(row);
    }
    o.push_str(&render_summary(&r.summary, false));
    o
}

/// One commit's lines of the table; of the summary only the judge (threshold, α) is read.
pub(super) fn table_row(row: &CommitRow, summary: &Summary) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "{} {}", short(&row.commit), terminal(&row.title));
    if let Some(f) = &row.fixed {
        let _ = writeln!(o, "  fixed before the night: {}", terminal(f));
    }
    let ms = row_metrics(row);
    let _ = write!(o, "  {:<34}", "variant");
    for (_, l) in &ms {
        let _ = write!(o, " {l:>16}");
    }
    let _ = writeln!(o, "  status");
    for c in &row.cells {
        let _ = write!(o, "  {:<34}", terminal(&c.variant));
        for (k, _) in &ms {
            let v = c.metrics.get(*k).map(|v| num(*v));
            let _ = write!(o, " {:>16}", v.as_deref().unwrap_or("-"));
        }
        let _ = writeln!(o, "  {}", status_text(c));
    }
    for cmp in &row.comparisons {
        let _ = write!(o, "  {:<34}", terminal(&cmp.label));
        for (k, _) in &ms {
            let _ = write!(o, " {:>16}", delta_cell(cmp, k).as_deref().unwrap_or("-"));
        }
        let _ = writeln!(o, "  {}", terminal(&verdict_text(cmp, summary)));
        for f in extra_flags(cmp) {
            let _ = writeln!(o, "    ⚑ {}", terminal(f));
        }
    }
    let _ = writeln!(o);
    o
}

/// The three kinds: "3 different (2 better, 1 worse) / 4 same / 9 unknown".
pub fn outcomes(w: &Outcomes) -> String {
    format!(
        "{} different ({} better, {} worse) / {} same / {} unknown",
        w.better + w.worse,
        w.better,
        w.worse,
        w.no_change,
        w.inconclusive
    )
}

/// How verdicts were reached, in one sentence a reader can check.
pub(crate) fn method_note(s: &Summary) -> String {
    let mut o = format!(
        "different when the change exceeds {}% and a test passes at α={}; same when the interval on the change lies within ±{}%; else unknown",
        s.threshold_pct, s.alpha, s.same_within_pct
    );
    let bands: Vec<String> = s
        .bands
        .iter()
        .map(|(k, b)| {
            format!(
                "{} ±{:.1}% ({})",
                terminal(k),
                b.cv_pct(),
                terminal(&b.source)
            )
        })
        .collect();
    if !bands.is_empty() {
        let _ = write!(o, "; noise bands: {}", bands.join(", "));
    }
    if s.uncalibrated > 0 {
        let _ = write!(
            o,
            "; threshold uncalibrated for {} comparison(s): ±{}% on single runs (run `nightshift calibrate PLAN`)",
            s.uncalibrated, s.threshold_pct
        );
    }
    o
}

pub(crate) fn render_summary(s: &Summary, md: bool) -> String {
    let mut o = String::new();
    let b = if md { "- " } else { "  " };
    let _ = writeln!(
        o,
        "{}Summary (different / same / unknown; {})",
        if md { "## " } else { "" },
        method_note(s)
    );
    if md {
        o.push('\n');
    }
    let _ = writeln!(
        o,
        "{b}commits: {}, runs: {} ({} successful)",
        s.commits, s.runs, s.successful_runs
    );
    let _ = writeln!(
        o,
        "{b}usable 3-way comparisons: {} of {}",
        s.usable_3way, s.commits
    );
    let _ = writeln!(
        o,
        "{b}named before the night: {}; failed during the night: {}",
        s.named_before_night, s.failed_during_night
    );
    let _ = writeln!(
        o,
        "{b}human vs baseline: {}",
        outcomes(&s.human_vs_baseline)
    );
    for (a, w) in &s.agent_vs_baseline {
        let _ = writeln!(o, "{b}agent {} vs baseline: {}", terminal(a), outcomes(w));
    }
    for (a, w) in &s.agent_vs_human {
        let _ = writeln!(o, "{b}agent {} vs human: {}", terminal(a), outcomes(w));
    }
    if s.flagged > 0 {
        let _ = writeln!(o, "{b}comparisons flagged as not comparable: {}", s.flagged);
    }
    if !s.failures_by_category.is_empty() {
        let _ = writeln!(o, "{b}failures by category:");
        let mut f: Vec<_> = s.failures_by_category.iter().collect();
        f.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        for (c, n) in f {
            let skipped = match s.skipped_by_category.get(c) {
                Some(k) => format!(" ({k} skipped after it)"),
                None => String::new(),
            };
            let _ = writeln!(
                o,
                "{}  {}: {n}{skipped}",
                if md { "" } else { "  " },
                terminal(c)
            );
        }
    }
    o
}

pub fn render_md(r: &Report) -> String {
    let mut o = String::from(MD_HEAD);
    for row in &r.rows {
        o.push_str(&md_row(row, &r.summary));
    }
    o.push_str(&render_summary(&r.summary, true));
    o
}

pub(super) const MD_HEAD: &str = "# Results\n\n";

/// One commit's section of the Markdown; of the summary only the judge is read.
pub(super) fn md_row(row: &CommitRow, summary: &Summary) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "### `{}` {}\n", short(&row.commit), md_cell(&row.title));
    if let Some(f) = &row.fixed {
        let _ = writeln!(o, "Fixed before the night: {}\n", md_cell(f));
    }
    let ms = row_metrics(row);
    o.push_str("| variant |");
    for (_, l) in &ms {
        let _ = write!(o, " {l} |");
    }
    o.push_str(" status |\n|---|");
    for _ in &ms {
        o.push_str("---:|");
    }
    o.push_str("---|\n");
    for c in &row.cells {
        let _ = write!(o, "| {} |", md_cell(&c.variant));
        for (k, _) in &ms {
            let v = c.stats.get(*k).map(|s| {
                if s.n > 1 {
                    format!("{} [{}, {}]", num(s.median), num(s.ci_low), num(s.ci_high))
                } else {
                    num(s.median)
                }
            });
            let _ = write!(o, " {} |", v.as_deref().unwrap_or("–"));
        }
        let _ = writeln!(o, " {} |", md_cell(&status_text(c)));
    }
    for cmp in &row.comparisons {
        let _ = write!(o, "| *{}* |", md_cell(&cmp.label));
        for (k, _) in &ms {
            let _ = write!(o, " {} |", delta_cell(cmp, k).as_deref().unwrap_or("–"));
        }
        let mut v = verdict_text(cmp, summary);
        for f in extra_flags(cmp) {
            let _ = write!(v, "; ⚑ {f}");
        }
        let _ = writeln!(o, " **{}** |", md_cell(&v));
    }
    o.push('\n');
    o
}

/// One record per commit × variant × attempt.
pub fn records(docs: &[&RunDoc]) -> Vec<ResultRecord> {
    docs.iter()
        .flat_map(|d| d.attempts.iter().map(move |a| ResultRecord::of(d, a)))
        .collect()
}

/// JSON Lines: one results record per attempt (`spec/plan-format.md`).
pub(crate) fn render_jsonl(docs: &[&RunDoc]) -> String {
    let mut o = String::new();
    for r in records(docs) {
        o.push_str(&crate::sanitize::json(
            &serde_json::to_string(&r).unwrap_or_default(),
        ));
        o.push('\n');
    }
    o
}

/// One JSON document: the report (per commit: cells with n, median and interval per
/// metric; comparisons with Δ, interval, p-value, verdict, method and flags; the summary)
/// and every attempt's results record.
pub(crate) fn render_json(r: &Report, docs: &[&RunDoc]) -> String {
    let doc = serde_json::json!({
        "commits": r.rows,
        "summary": r.summary,
        "records": records(docs),
        "failure_groups": super::groups::group(docs.iter().map(|d| {
            super::groups::Member::of_record(&d.key, d.info.model.as_deref(), &d.record)
        })),
    });
    let mut s =
        crate::sanitize::json(&serde_json::to_string_pretty(&doc).unwrap_or_default()).into_owned();
    s.push('\n');
    s
}

/// One CSV field: controls shown escaped as in every text output (a CSV is read on a
/// terminal as often as in a sheet), quoted when it holds a separator or a quote.
fn csv_field(s: &str) -> String {
    let s = terminal(s);
    if s.contains([',', '"']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.into_owned()
    }
}

fn opt(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.6}")).unwrap_or_default()
}

/// One row per commit × variant × attempt, headline metrics as columns, then the variant's
/// statistics on its primary metric and its comparison with the baseline (or, for the
/// baseline, nothing to compare).
pub(crate) fn render_csv(r: &Report, docs: &[&RunDoc]) -> String {
    let mut o = String::from("commit,variant,agent,attempt,status,category,duration_s,warmup");
    let keys: Vec<&str> = metric::HEADLINE.iter().map(|m| m.key).collect();
    for k in &keys {
        let _ = write!(o, ",{k}");
    }
    o.push_str(",primary,n,median,ci_low,ci_high,vs,improvement_pct,delta,ci_low_pct,ci_high_pct,p_value,verdict,method,flags");
    o.push_str(",vllm_version,gpu,model,perf_command\n");
    let rows: std::collections::HashMap<&str, &CommitRow> =
        r.rows.iter().map(|x| (x.commit.as_str(), x)).collect();
    for d in docs {
        let row = rows.get(d.info.commit.as_str()).copied();
        let cell = row.and_then(|x| x.cells.iter().find(|c| c.keys.contains(&d.key)));
        let cmp = row.and_then(|x| {
            cell.and_then(|c| {
                x.comparisons
                    .iter()
                    .find(|k| k.label == format!("{} vs baseline", c.variant))
            })
        });
        for a in &d.attempts {
            let rec = ResultRecord::of(d, a);
            let _ = write!(
                o,
                "{},{},{},{},{},{},{},{}",
                csv_field(&rec.commit),
                csv_field(&rec.variant),
                csv_field(&rec.agent.clone().unwrap_or_default()),
                rec.attempt,
                rec.status,
                rec.category.clone().unwrap_or_default(),
                rec.duration_s
                    .map(|d| format!("{d:.3}"))
                    .unwrap_or_default(),
                d.info.warmup
            );
            for k in &keys {
                let _ = write!(o, ",{}", opt(rec.metrics.get(*k).copied()));
            }
            let primary = cmp
                .and_then(|c| c.primary.clone())
                .or_else(|| cell.and_then(|c| metric::headline(&c.metrics).map(|h| h.0.into())));
            let st = cell.zip(primary.as_ref()).and_then(|(c, p)| c.stats.get(p));
            let cs = cmp.and_then(|c| c.primary_stats());
            let _ = write!(
                o,
                ",{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                csv_field(&primary.clone().unwrap_or_default()),
                st.map(|s| s.n.to_string()).unwrap_or_default(),
                opt(st.map(|s| s.median)),
                opt(st.map(|s| s.ci_low)),
                opt(st.map(|s| s.ci_high)),
                csv_field(&cmp.map(|c| c.against.clone()).unwrap_or_default()),
                opt(cs.map(|c| c.improvement_pct)),
                csv_field(&cs.map(|c| c.delta_label()).unwrap_or_default()),
                opt(cs.and_then(|c| c.ci_low_pct)),
                opt(cs.and_then(|c| c.ci_high_pct)),
                opt(cs.and_then(|c| c.p_value)),
                cmp.and_then(|c| c.verdict)
                    .map(Verdict::as_str)
                    .unwrap_or_default(),
                cs.map(|c| c.method.as_str()).unwrap_or_default(),
                csv_field(
                    &cmp.map(|c| { c.flags.iter().map(|f| f.code).collect::<Vec<_>>().join(" ") })
                        .unwrap_or_default()
                ),
            );
            let _ = writeln!(
                o,
                ",{},{},{},{}",
                csv_field(&rec.provenance.vllm_version.clone().unwrap_or_default()),
                csv_field(&rec.provenance.gpu),
                csv_field(&rec.provenance.model.clone().unwrap_or_default()),
                csv_field(&rec.provenance.perf_command.clone().unwrap_or_default())
            );
        }
    }
    o
}
