//! `e` / `:export`: the results table as CSV and JSON, one row per run, with the same
//! statistics `nightshift results` reports (n, median and interval, Δ vs baseline with its
//! interval, p-value, verdict, flags). `improvement_vs_baseline_pct` is positive when the
//! run is better than its baseline, whichever way its headline metric points.

use super::app::{headline, run_category, App};
use crate::record::RunDoc;
use crate::report::{self, Report};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The report over the live state, judged as `results` judges (see
/// [`App::report_options`]): the store's calibration and the sweep's own repeats, else
/// single runs say "threshold uncalibrated".
pub fn report(app: &App) -> (Vec<RunDoc>, Report) {
    let docs = app.night.docs();
    let refs: Vec<&RunDoc> = docs.iter().collect();
    let r = report::build(&refs, &app.seen().report_options());
    (docs, r)
}

/// Per run key: its variant's statistics and its comparison with the baseline.
fn stats_by_key(r: &Report) -> HashMap<String, (String, String)> {
    let mut m = HashMap::new();
    for row in &r.rows {
        for c in &row.cells {
            let cmp = row
                .comparisons
                .iter()
                .find(|k| k.label == format!("{} vs baseline", c.variant));
            let primary = cmp
                .and_then(|k| k.primary.clone())
                .or_else(|| headline(&c.metrics).map(|h| h.0.to_string()));
            let st = primary.as_ref().and_then(|p| c.stats.get(p));
            let cs = cmp.and_then(|k| k.primary_stats());
            let f = |v: Option<f64>| v.map(|v| format!("{v:.6}")).unwrap_or_default();
            let csv = format!(
                "{},{},{},{},{},{},{},{},{},{}",
                st.map(|s| s.n.to_string()).unwrap_or_default(),
                f(st.map(|s| s.median)),
                f(st.map(|s| s.ci_low)),
                f(st.map(|s| s.ci_high)),
                f(cs.and_then(|c| c.ci_low_pct)),
                f(cs.and_then(|c| c.ci_high_pct)),
                f(cs.and_then(|c| c.p_value)),
                cmp.and_then(|k| k.verdict)
                    .map(|v| v.as_str())
                    .unwrap_or_default(),
                cs.map(|c| c.method.as_str()).unwrap_or_default(),
                csv_field(
                    &cmp.map(|k| k.flags.iter().map(|f| f.code).collect::<Vec<_>>().join(" "))
                        .unwrap_or_default()
                ),
            );
            let json = serde_json::json!({
                "n": st.map(|s| s.n),
                "median": st.map(|s| s.median),
                "ci_low": st.map(|s| s.ci_low),
                "ci_high": st.map(|s| s.ci_high),
                "vs_baseline": cs,
                "verdict": cmp.and_then(|k| k.verdict),
                "flags": cmp.map(|k| &k.flags),
            })
            .to_string();
            for k in &c.keys {
                m.insert(k.clone(), (csv.clone(), json.clone()));
            }
        }
    }
    m
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

pub fn csv(app: &App) -> String {
    let mut out = String::from(
        "key,commit,variant,model,status,category,attempt,headline_key,headline,improvement_vs_baseline_pct,n,median,ci_low,ci_high,ci_low_pct,ci_high_pct,p_value,verdict,method,flags,title\n",
    );
    let (_, r) = report(app);
    let stats = stats_by_key(&r);
    for spec in &app.night.plan.runs {
        let c = app.night.plan.commit_of(spec);
        let r = app.night.state.run(spec.id);
        let (hk, hv) = headline(&r.metrics)
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{}",
            csv_field(&spec.key),
            c.commit,
            csv_field(&spec.variant.to_string()),
            csv_field(c.model.as_deref().unwrap_or("")),
            csv_field(&r.state.label()),
            run_category(&r.state, r.finding.as_ref())
                .map(|c| c.to_string())
                .unwrap_or_default(),
            r.attempt,
            hk,
            hv,
            app.delta_pct(spec.id)
                .map(|d| format!("{d:.2}"))
                .unwrap_or_default(),
            stats.get(&spec.key).map_or(",,,,,,,,,", |s| s.0.as_str()),
            csv_field(&c.title),
        );
    }
    out
}

pub fn json(app: &App) -> serde_json::Value {
    let (_, r) = report(app);
    let stats = stats_by_key(&r);
    let runs: Vec<_> = app
        .night
        .plan
        .runs
        .iter()
        .map(|spec| {
            let c = app.night.plan.commit_of(spec);
            let r = app.night.state.run(spec.id);
            serde_json::json!({
                "key": spec.key,
                "commit": c.commit,
                "variant": spec.variant.to_string(),
                "model": c.model,
                "state": r.state,
                "attempt": r.attempt,
                "metrics": r.metrics,
                "finding": r.finding,
                "fixes": r.fixes,
                "vllm_version": r.vllm_version,
                "provenance": r.provenance,
                "stats": stats
                    .get(&spec.key)
                    .and_then(|s| serde_json::from_str::<serde_json::Value>(&s.1).ok()),
            })
        })
        .collect();
    serde_json::json!({ "sweep": app.night.plan.name, "runs": runs, "commits": r.rows, "summary": r.summary })
}

/// Write `<base>.csv` and `<base>.json`; `base` defaults to `nightshift-<sweep>-results`.
pub fn write(app: &App, base: Option<&str>) -> anyhow::Result<(PathBuf, PathBuf)> {
    let base = base
        .map(|b| {
            b.trim_end_matches(".csv")
                .trim_end_matches(".json")
                .to_string()
        })
        .unwrap_or_else(|| format!("nightshift-{}-results", app.night.plan.name));
    let csv_p = Path::new(&format!("{base}.csv")).to_path_buf();
    let json_p = Path::new(&format!("{base}.json")).to_path_buf();
    std::fs::write(&csv_p, csv(app))?;
    std::fs::write(&json_p, serde_json::to_string_pretty(&json(app))?)?;
    Ok((csv_p, json_p))
}
