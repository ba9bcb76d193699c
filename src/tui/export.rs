//! `e` / `:export`: the results table as CSV and JSON, one row per run.

use super::app::{headline, run_category, App};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

pub fn csv(app: &App) -> String {
    let mut out = String::from(
        "key,commit,variant,model,status,category,attempt,headline_key,headline,delta_vs_baseline_pct,title\n",
    );
    for spec in &app.plan.runs {
        let c = app.plan.commit_of(spec);
        let r = app.state.run(spec.id);
        let (hk, hv) = headline(&r.metrics)
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{}",
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
            csv_field(&c.title),
        );
    }
    out
}

pub fn json(app: &App) -> serde_json::Value {
    let runs: Vec<_> = app
        .plan
        .runs
        .iter()
        .map(|spec| {
            let c = app.plan.commit_of(spec);
            let r = app.state.run(spec.id);
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
            })
        })
        .collect();
    serde_json::json!({ "sweep": app.plan.name, "runs": runs })
}

/// Write `<base>.csv` and `<base>.json`; `base` defaults to `nightshift-<sweep>-results`.
pub fn write(app: &App, base: Option<&str>) -> anyhow::Result<(PathBuf, PathBuf)> {
    let base = base
        .map(|b| {
            b.trim_end_matches(".csv")
                .trim_end_matches(".json")
                .to_string()
        })
        .unwrap_or_else(|| format!("nightshift-{}-results", app.plan.name));
    let csv_p = Path::new(&format!("{base}.csv")).to_path_buf();
    let json_p = Path::new(&format!("{base}.json")).to_path_buf();
    std::fs::write(&csv_p, csv(app))?;
    std::fs::write(&json_p, serde_json::to_string_pretty(&json(app))?)?;
    Ok((csv_p, json_p))
}
