//! `nightshift results`: per commit, the variants side by side with the headline metrics,
//! comparisons in percent with the right direction per metric, win/tie/loss at a threshold,
//! and a summary like the seed reports'. Pure: docs in, text out.

use super::record::{ResultRecord, RunDoc};
use crate::model::Variant;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

/// The headline metrics, in display order: (key, label).
pub const HEADLINE: &[(&str, &str)] = &[
    ("ttft_mean_ms", "TTFT mean ms"),
    ("ttft_p99_ms", "TTFT p99 ms"),
    ("tpot_mean_ms", "TPOT mean ms"),
    ("tpot_p99_ms", "TPOT p99 ms"),
    ("itl_mean_ms", "ITL mean ms"),
    ("itl_p99_ms", "ITL p99 ms"),
    ("output_throughput_tok_s", "out tok/s"),
    ("total_throughput_tok_s", "total tok/s"),
    ("throughput_output_tok_s", "out tok/s"),
    ("throughput_total_tok_s", "total tok/s"),
    ("latency_avg_s", "latency s"),
];

/// The metric that decides win/tie/loss, first present wins.
pub const PRIMARY: &[&str] = &[
    "output_throughput_tok_s",
    "throughput_output_tok_s",
    "throughput_total_tok_s",
    "latency_avg_s",
    "ttft_mean_ms",
    "elapsed_s",
];

/// Latencies and durations: lower is better. Throughputs: higher is better.
pub fn lower_is_better(key: &str) -> bool {
    key.ends_with("_ms") || key.starts_with("latency_") || key == "elapsed_s" || key == "duration_s"
}

/// How much better `candidate` is than `reference`, in percent (positive = better).
pub fn improvement_pct(key: &str, candidate: f64, reference: f64) -> Option<f64> {
    if reference == 0.0 || !reference.is_finite() || !candidate.is_finite() {
        return None;
    }
    let change = (candidate - reference) / reference.abs() * 100.0;
    Some(if lower_is_better(key) {
        -change
    } else {
        change
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Win,
    Tie,
    Loss,
}

pub fn verdict(improvement: f64, threshold_pct: f64) -> Verdict {
    if improvement > threshold_pct {
        Verdict::Win
    } else if improvement < -threshold_pct {
        Verdict::Loss
    } else {
        Verdict::Tie
    }
}

/// One variant of a commit: its representative attempt.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub key: String,
    pub variant: String,
    pub attempt: u32,
    pub attempts: usize,
    pub status: String,
    pub category: Option<String>,
    pub metrics: BTreeMap<String, f64>,
    pub command: Option<String>,
    pub model: Option<String>,
    pub gpu_type: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// e.g. `human vs baseline`.
    pub label: String,
    pub agent: Option<String>,
    /// Against the baseline or the human.
    pub against: String,
    /// Improvement in percent per headline metric (positive = better).
    pub deltas: BTreeMap<String, f64>,
    pub primary: Option<String>,
    pub verdict: Option<Verdict>,
    /// Why the two are not comparable (different command, model, GPU type).
    pub flag: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CommitRow {
    pub commit: String,
    pub title: String,
    pub cells: Vec<Cell>,
    pub comparisons: Vec<Comparison>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct WinTieLoss {
    pub win: usize,
    pub tie: usize,
    pub loss: usize,
}

impl WinTieLoss {
    fn add(&mut self, v: Verdict) {
        match v {
            Verdict::Win => self.win += 1,
            Verdict::Tie => self.tie += 1,
            Verdict::Loss => self.loss += 1,
        }
    }
    pub fn total(&self) -> usize {
        self.win + self.tie + self.loss
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    pub commits: usize,
    pub runs: usize,
    pub successful_runs: usize,
    /// Commits where baseline, human and at least one agent succeeded and are comparable.
    pub usable_3way: usize,
    pub failures_by_category: BTreeMap<String, usize>,
    pub human_vs_baseline: WinTieLoss,
    /// Per agent: vs baseline and vs human.
    pub agent_vs_baseline: BTreeMap<String, WinTieLoss>,
    pub agent_vs_human: BTreeMap<String, WinTieLoss>,
    pub flagged: usize,
    pub threshold_pct: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub rows: Vec<CommitRow>,
    pub summary: Summary,
}

fn cell(doc: &RunDoc) -> Option<Cell> {
    let a = doc.representative();
    let info = a.and_then(|a| a.info.as_ref()).unwrap_or(&doc.info);
    Some(Cell {
        key: doc.key.clone(),
        variant: info.variant.to_string(),
        attempt: a.map_or(0, |a| a.attempt),
        attempts: doc
            .attempts
            .iter()
            .filter(|a| a.started_ms.is_some())
            .count(),
        status: match a {
            Some(a) => a.status().to_string(),
            None => doc.record.state.label(),
        },
        category: a.and_then(|a| a.category()).map(|c| c.as_str().to_string()),
        metrics: a.map(|a| a.metrics.clone()).unwrap_or_default(),
        command: info.command.clone(),
        model: info.model.clone(),
        gpu_type: info.gpu_type().to_string(),
    })
}

fn compare(label: String, agent: Option<String>, a: &Cell, b: &Cell, threshold: f64) -> Comparison {
    let mut why = Vec::new();
    if a.command != b.command {
        why.push("command");
    }
    if a.model != b.model {
        why.push("model");
    }
    if a.gpu_type != b.gpu_type {
        why.push("GPU type");
    }
    let flag = (!why.is_empty()).then(|| format!("not comparable: different {}", why.join(", ")));
    let ok = a.status == "success" && b.status == "success";
    let mut deltas = BTreeMap::new();
    if ok {
        for (k, _) in HEADLINE {
            if let (Some(x), Some(y)) = (a.metrics.get(*k), b.metrics.get(*k)) {
                if let Some(p) = improvement_pct(k, *x, *y) {
                    deltas.insert(k.to_string(), p);
                }
            }
        }
    }
    let primary = PRIMARY
        .iter()
        .find(|k| a.metrics.contains_key(**k) && b.metrics.contains_key(**k))
        .map(|k| k.to_string());
    let verdict = match (&primary, ok, &flag) {
        (Some(p), true, None) => a
            .metrics
            .get(p)
            .zip(b.metrics.get(p))
            .and_then(|(x, y)| improvement_pct(p, *x, *y))
            .map(|i| verdict(i, threshold)),
        _ => None,
    };
    Comparison {
        against: b.variant.clone(),
        label,
        agent,
        deltas,
        primary,
        verdict,
        flag,
    }
}

/// Build the report from the runs (in plan order).
pub fn build(docs: &[&RunDoc], threshold_pct: f64) -> Report {
    let mut by_commit: Vec<(String, String, Vec<&RunDoc>)> = Vec::new();
    for d in docs {
        let c = &d.info.commit;
        match by_commit.iter_mut().find(|(k, _, _)| k == c) {
            Some((_, _, v)) => v.push(d),
            None => by_commit.push((c.clone(), d.info.title.clone(), vec![d])),
        }
    }
    let mut summary = Summary {
        threshold_pct,
        commits: by_commit.len(),
        ..Default::default()
    };
    let mut rows = Vec::new();
    for (commit, title, mut ds) in by_commit {
        ds.sort_by(|a, b| {
            (a.info.variant.order(), &a.info.variant, a.info.repeat).cmp(&(
                b.info.variant.order(),
                &b.info.variant,
                b.info.repeat,
            ))
        });
        let cells: Vec<Cell> = ds.iter().filter_map(|d| cell(d)).collect();
        for c in &cells {
            summary.runs += 1;
            if c.status == "success" {
                summary.successful_runs += 1;
            }
            if let Some(cat) = &c.category {
                *summary.failures_by_category.entry(cat.clone()).or_default() += 1;
            }
        }
        let base = cells.iter().find(|c| c.variant == "baseline");
        let human = cells.iter().find(|c| c.variant == "human");
        let mut comparisons = Vec::new();
        if let (Some(h), Some(b)) = (human, base) {
            let c = compare("human vs baseline".into(), None, h, b, threshold_pct);
            if let Some(v) = c.verdict {
                summary.human_vs_baseline.add(v);
            }
            comparisons.push(c);
        }
        let mut agent_ok = false;
        for a in cells.iter().filter(|c| c.variant.starts_with("agent:")) {
            let id = a.variant.trim_start_matches("agent:").to_string();
            for (other, map) in [(base, "baseline"), (human, "human")] {
                if let Some(o) = other {
                    let c = compare(
                        format!("{} vs {map}", a.variant),
                        Some(id.clone()),
                        a,
                        o,
                        threshold_pct,
                    );
                    if let Some(v) = c.verdict {
                        let m = if map == "baseline" {
                            &mut summary.agent_vs_baseline
                        } else {
                            &mut summary.agent_vs_human
                        };
                        m.entry(id.clone()).or_default().add(v);
                        agent_ok = true;
                    }
                    comparisons.push(c);
                }
            }
        }
        summary.flagged += comparisons.iter().filter(|c| c.flag.is_some()).count();
        let hb_ok = comparisons
            .first()
            .is_some_and(|c| c.agent.is_none() && c.verdict.is_some());
        if hb_ok && agent_ok {
            summary.usable_3way += 1;
        }
        rows.push(CommitRow {
            commit,
            title,
            cells,
            comparisons,
        });
    }
    Report { rows, summary }
}

/// `--filter EXPR`: space- or comma-separated `field=value` / `field!=value` terms, all of
/// which must hold. Fields: commit (prefix), key, variant, agent, status, category, model
/// (substring), gpu.
pub fn parse_filter(expr: &str) -> Result<Vec<(String, bool, String)>, String> {
    let mut v = Vec::new();
    for term in expr.split([',', ' ']).filter(|t| !t.is_empty()) {
        let (field, neg, value) = if let Some((f, x)) = term.split_once("!=") {
            (f, true, x)
        } else if let Some((f, x)) = term.split_once('=') {
            (f, false, x)
        } else {
            return Err(format!(
                "filter term `{term}` is not FIELD=VALUE or FIELD!=VALUE"
            ));
        };
        let known = [
            "commit", "key", "variant", "agent", "status", "category", "model", "gpu",
        ];
        if !known.contains(&field) {
            return Err(format!(
                "unknown filter field `{field}` (expected one of: {})",
                known.join(", ")
            ));
        }
        check_value(field, value)?;
        v.push((field.to_string(), neg, value.to_string()));
    }
    Ok(v)
}

/// The statuses a run can be filtered by (an attempt's status or a run's state).
const STATUSES: &[&str] = &[
    "success",
    "failed",
    "skipped",
    "cancelled",
    "held",
    "running",
    "queued",
    "interrupted",
];

/// A value no run can have is a typo: say so instead of printing an empty report.
fn check_value(field: &str, value: &str) -> Result<(), String> {
    match field {
        "status" if !STATUSES.contains(&value) => Err(format!(
            "unknown status `{value}` (expected one of: {})",
            STATUSES.join(", ")
        )),
        "category" => value.parse::<crate::category::Category>().map(|_| ()),
        "variant"
            if !matches!(value, "baseline" | "human" | "agent") && !value.starts_with("agent:") =>
        {
            Err(format!(
                "unknown variant `{value}` (expected baseline, human, agent or agent:ID)"
            ))
        }
        _ => Ok(()),
    }
}

pub fn matches(doc: &RunDoc, filter: &[(String, bool, String)]) -> bool {
    let a = doc.representative();
    filter.iter().all(|(f, neg, val)| {
        let hit = match f.as_str() {
            "commit" => doc.info.commit.starts_with(val.as_str()),
            "key" => doc.key == *val,
            "variant" => {
                let v = doc.info.variant.to_string();
                v == *val || (val == "agent" && v.starts_with("agent:"))
            }
            "agent" => doc.info.variant.agent_id() == Some(val.as_str()),
            "status" => {
                a.map(|a| a.status()).unwrap_or("queued") == val || doc.record.state.label() == *val
            }
            "category" => a
                .and_then(|a| a.category())
                .is_some_and(|c| c.as_str() == val),
            "model" => doc
                .info
                .model
                .as_deref()
                .is_some_and(|m| m.contains(val.as_str())),
            "gpu" => doc.info.gpu.starts_with(val.as_str()),
            _ => false,
        };
        hit != *neg
    })
}

fn num(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn pct(v: f64) -> String {
    format!("{v:+.1}%")
}

fn verdict_text(c: &Comparison) -> String {
    match (&c.flag, c.verdict) {
        (Some(f), _) => f.clone(),
        (None, Some(Verdict::Win)) => "WIN".into(),
        (None, Some(Verdict::Tie)) => "TIE".into(),
        (None, Some(Verdict::Loss)) => "LOSS".into(),
        (None, None) => "n/a".into(),
    }
}

/// Which headline metrics a row has, without the throughput-benchmark duplicates.
fn row_metrics(row: &CommitRow) -> Vec<(&'static str, &'static str)> {
    HEADLINE
        .iter()
        .filter(|(k, _)| row.cells.iter().any(|c| c.metrics.contains_key(*k)))
        .copied()
        .collect()
}

fn short(c: &str) -> &str {
    &c[..c.len().min(8)]
}

fn status_text(c: &Cell) -> String {
    match &c.category {
        Some(cat) => format!("{}({cat})", c.status),
        None => c.status.clone(),
    }
}

pub fn render_table(r: &Report) -> String {
    let mut o = String::new();
    for row in &r.rows {
        let _ = writeln!(o, "{} {}", short(&row.commit), row.title);
        let ms = row_metrics(row);
        let _ = write!(o, "  {:<34}", "variant");
        for (_, l) in &ms {
            let _ = write!(o, " {l:>13}");
        }
        let _ = writeln!(o, "  status");
        for c in &row.cells {
            let _ = write!(o, "  {:<34}", c.variant);
            for (k, _) in &ms {
                let v = c
                    .metrics
                    .get(*k)
                    .map(|v| num(*v))
                    .unwrap_or_else(|| "-".into());
                let _ = write!(o, " {v:>13}");
            }
            let _ = writeln!(o, "  {} (attempt {})", status_text(c), c.attempt);
        }
        for cmp in &row.comparisons {
            let _ = write!(o, "  {:<34}", cmp.label);
            for (k, _) in &ms {
                let v = cmp
                    .deltas
                    .get(*k)
                    .map(|v| pct(*v))
                    .unwrap_or_else(|| "-".into());
                let _ = write!(o, " {v:>13}");
            }
            let _ = writeln!(o, "  {}", verdict_text(cmp));
        }
        let _ = writeln!(o);
    }
    o.push_str(&render_summary(&r.summary, false));
    o
}

fn wtl(w: &WinTieLoss) -> String {
    format!("{} win / {} tie / {} loss", w.win, w.tie, w.loss)
}

pub fn render_summary(s: &Summary, md: bool) -> String {
    let mut o = String::new();
    let b = if md { "- " } else { "  " };
    let _ = writeln!(
        o,
        "{}Summary (win/tie/loss at ±{}%; lower is better for latencies)",
        if md { "## " } else { "" },
        s.threshold_pct
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
    let _ = writeln!(o, "{b}human vs baseline: {}", wtl(&s.human_vs_baseline));
    for (a, w) in &s.agent_vs_baseline {
        let _ = writeln!(o, "{b}agent {a} vs baseline: {}", wtl(w));
    }
    for (a, w) in &s.agent_vs_human {
        let _ = writeln!(o, "{b}agent {a} vs human: {}", wtl(w));
    }
    if s.flagged > 0 {
        let _ = writeln!(o, "{b}comparisons flagged as not comparable: {}", s.flagged);
    }
    if !s.failures_by_category.is_empty() {
        let _ = writeln!(o, "{b}failures by category:");
        let mut f: Vec<_> = s.failures_by_category.iter().collect();
        f.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        for (c, n) in f {
            let _ = writeln!(o, "{}  {c}: {n}", if md { "" } else { "  " });
        }
    }
    o
}

pub fn render_md(r: &Report) -> String {
    let mut o = String::from("# Results\n\n");
    for row in &r.rows {
        let _ = writeln!(
            o,
            "### `{}` {}\n",
            short(&row.commit),
            row.title.replace('|', "\\|")
        );
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
            let _ = write!(o, "| {} |", c.variant);
            for (k, _) in &ms {
                let v = c
                    .metrics
                    .get(*k)
                    .map(|v| num(*v))
                    .unwrap_or_else(|| "–".into());
                let _ = write!(o, " {v} |");
            }
            let _ = writeln!(o, " {} |", status_text(c));
        }
        for cmp in &row.comparisons {
            let _ = write!(o, "| *{}* |", cmp.label);
            for (k, _) in &ms {
                let v = cmp
                    .deltas
                    .get(*k)
                    .map(|v| pct(*v))
                    .unwrap_or_else(|| "–".into());
                let _ = write!(o, " {v} |");
            }
            let _ = writeln!(o, " **{}** |", verdict_text(cmp));
        }
        o.push('\n');
    }
    o.push_str(&render_summary(&r.summary, true));
    o
}

/// One record per commit × variant × attempt.
pub fn records(docs: &[&RunDoc]) -> Vec<ResultRecord> {
    docs.iter()
        .flat_map(|d| d.attempts.iter().map(move |a| ResultRecord::of(d, a)))
        .collect()
}

pub fn render_json(docs: &[&RunDoc]) -> String {
    let mut o = String::new();
    for r in records(docs) {
        o.push_str(&serde_json::to_string(&r).unwrap_or_default());
        o.push('\n');
    }
    o
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// One row per commit × variant × attempt, headline metrics as columns.
pub fn render_csv(docs: &[&RunDoc]) -> String {
    let mut o = String::from("commit,variant,agent,attempt,status,category,duration_s");
    let mut keys: Vec<&str> = Vec::new();
    for (k, _) in HEADLINE {
        keys.push(k);
    }
    for k in &keys {
        let _ = write!(o, ",{k}");
    }
    o.push_str(",vllm_version,gpu,model,perf_command\n");
    for r in records(docs) {
        let _ = write!(
            o,
            "{},{},{},{},{},{},{}",
            r.commit,
            r.variant,
            r.agent.clone().unwrap_or_default(),
            r.attempt,
            r.status,
            r.category.clone().unwrap_or_default(),
            r.duration_s.map(|d| format!("{d:.3}")).unwrap_or_default()
        );
        for k in &keys {
            let _ = write!(
                o,
                ",{}",
                r.metrics.get(*k).map(|v| v.to_string()).unwrap_or_default()
            );
        }
        let _ = writeln!(
            o,
            ",{},{},{},{}",
            csv_field(&r.provenance.vllm_version.clone().unwrap_or_default()),
            csv_field(&r.provenance.gpu),
            csv_field(&r.provenance.model.clone().unwrap_or_default()),
            csv_field(&r.provenance.perf_command.clone().unwrap_or_default())
        );
    }
    o
}

/// Sort key helper so callers can keep variants in a stable order.
pub fn variant_order(v: &Variant) -> (u8, Variant) {
    (v.order(), v.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Outcome, RunState};
    use crate::store::record::{AttemptDoc, RunInfo};

    #[test]
    fn direction_per_metric() {
        // Lower TTFT is better: 90 vs 100 is a 10% improvement.
        assert!((improvement_pct("ttft_mean_ms", 90.0, 100.0).unwrap() - 10.0).abs() < 1e-9);
        // Higher throughput is better.
        assert!(
            (improvement_pct("output_throughput_tok_s", 90.0, 100.0).unwrap() + 10.0).abs() < 1e-9
        );
        assert!((improvement_pct("latency_avg_s", 1.1, 1.0).unwrap() + 10.0).abs() < 1e-9);
        assert_eq!(improvement_pct("x", 1.0, 0.0), None);
        assert_eq!(verdict(2.0, 2.0), Verdict::Tie);
        assert_eq!(verdict(2.1, 2.0), Verdict::Win);
        assert_eq!(verdict(-2.1, 2.0), Verdict::Loss);
    }

    fn doc(commit: &str, variant: Variant, cmd: &str, tput: f64) -> RunDoc {
        let info = RunInfo {
            key: format!("{commit}/{variant}"),
            commit: commit.into(),
            parent: None,
            title: "t".into(),
            variant,
            repeat: 0,
            model: Some("m".into()),
            gpu: "H100:1".into(),
            gpus: 1,
            command: Some(cmd.into()),
            kind: None,
            image: None,
            patch: None,
            skip_reason: None,
        };
        let mut d = RunDoc::new(info.clone());
        d.attempts.push(AttemptDoc {
            attempt: 1,
            started_ms: Some(0),
            finished_ms: Some(1000),
            end: Some(RunState::Finished {
                outcome: Outcome::Success,
            }),
            metrics: [("output_throughput_tok_s".to_string(), tput)].into(),
            info: Some(info),
            ..Default::default()
        });
        d
    }

    #[test]
    fn three_way_summary_and_flags() {
        let docs = [
            doc("c1", Variant::Baseline, "x", 100.0),
            doc("c1", Variant::Human, "x", 110.0),
            doc("c1", Variant::Agent("a".into()), "x", 101.0),
            doc("c2", Variant::Baseline, "x", 100.0),
            doc("c2", Variant::Human, "y", 120.0),
        ];
        let refs: Vec<&RunDoc> = docs.iter().collect();
        let r = build(&refs, 2.0);
        assert_eq!(r.summary.commits, 2);
        assert_eq!(r.summary.usable_3way, 1);
        assert_eq!(r.summary.human_vs_baseline.win, 1);
        assert_eq!(r.summary.agent_vs_baseline["a"].tie, 1);
        assert_eq!(r.summary.agent_vs_human["a"].loss, 1);
        assert_eq!(r.summary.flagged, 1);
        let c2 = &r.rows[1].comparisons[0];
        assert!(c2.flag.as_deref().unwrap().contains("command"));
        assert_eq!(c2.verdict, None);
        let md = render_md(&r);
        assert!(md.contains("| human |"), "{md}");
        assert!(md.contains("**WIN**"));
        assert_eq!(render_json(&refs).lines().count(), 5);
        assert_eq!(render_csv(&refs).lines().count(), 6);
    }

    #[test]
    fn filters() {
        let d = doc("abc", Variant::Human, "x", 1.0);
        let f = parse_filter("commit=ab,variant=human status=success").unwrap();
        assert!(matches(&d, &f));
        assert!(!matches(&d, &parse_filter("variant!=human").unwrap()));
        assert!(parse_filter("bogus=1").is_err());
        assert!(parse_filter("nonsense").is_err());
        assert!(parse_filter("status=bogus")
            .unwrap_err()
            .contains("unknown status"));
        assert!(parse_filter("category=nope").is_err());
        assert!(parse_filter("variant=agent:x category=cuda_oom status=held").is_ok());
    }
}
