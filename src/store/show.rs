//! `nightshift show COMMIT_OR_RUN`: everything about one commit or run.

use super::record::RunDoc;
use crate::report::groups::{FailureGroup, Member};
use std::fmt::Write;

/// Runs matching `what`: an exact run key, `#N` (the run's number in the plan, as every
/// screen names it: `#0` is the first), or a commit (prefix, at least 4 characters).
pub fn select<'a>(docs: &[&'a RunDoc], what: &str) -> Vec<&'a RunDoc> {
    if let Some(n) = what.strip_prefix('#').and_then(|n| n.parse::<usize>().ok()) {
        return docs.get(n).map(|d| vec![*d]).unwrap_or_default();
    }
    if let Some(d) = docs.iter().find(|d| d.key == what) {
        return vec![d];
    }
    let what = what.trim_end_matches('/');
    if what.len() < 4 {
        return Vec::new();
    }
    docs.iter()
        .filter(|d| d.info.commit.starts_with(what) || d.key.starts_with(what))
        .copied()
        .collect()
}

fn t(ms: u64, base: u64) -> String {
    format!("+{:.1}s", ms.saturating_sub(base) as f64 / 1000.0)
}

pub fn render(docs: &[&RunDoc]) -> String {
    render_in(docs, &[])
}

/// The failure group of a run's current failure, among `groups` (every run's groups).
fn group_of<'g>(d: &RunDoc, groups: &'g [FailureGroup]) -> Option<&'g FailureGroup> {
    let id = Member::of_record(&d.key, d.info.model.as_deref(), &d.record).unknown_kind()?;
    groups.iter().find(|g| g.id == id)
}

/// [`render`], each run that failed with an unknown error naming its failure group (its
/// kind, and how many runs of the night share it).
pub fn render_in(docs: &[&RunDoc], groups: &[FailureGroup]) -> String {
    let mut o = String::new();
    for d in docs {
        let i = &d.info;
        let _ = writeln!(
            o,
            "run {}{}",
            d.key,
            if d.removed {
                " (removed from the plan)"
            } else {
                ""
            }
        );
        let _ = writeln!(o, "  commit   {} {}", i.commit, i.title);
        if let Some(p) = &i.parent {
            let _ = writeln!(o, "  parent   {p}");
        }
        let _ = writeln!(o, "  variant  {}", i.variant);
        let _ = writeln!(o, "  model    {}", i.model.as_deref().unwrap_or("-"));
        let _ = writeln!(o, "  gpu      {}", i.gpu);
        let _ = writeln!(o, "  command  {}", i.command.as_deref().unwrap_or("-"));
        if let Some(img) = &i.image {
            let _ = writeln!(o, "  image    {img}");
        }
        if let Some(p) = &i.patch {
            let _ = writeln!(o, "  patch    {p}");
        }
        let _ = writeln!(
            o,
            "  state    {} (attempt {})",
            d.record.state, d.record.attempt
        );
        if let Some(g) = group_of(d, groups) {
            let _ = writeln!(o, "  group    {}", crate::report::groups::show_line(g));
        }
        if let Some(f) = &d.predicted {
            let _ = writeln!(o, "  predicted {}: {}", f.category, f.reason);
        }
        for a in &d.attempts {
            let base = a.started_ms.unwrap_or(0);
            let _ = write!(o, "  attempt {}: {}", a.attempt, a.status());
            if let Some(c) = a.category() {
                let _ = write!(o, " ({c})");
            }
            if let (Some(s), Some(f)) = (a.started_ms, a.finished_ms) {
                let _ = write!(o, " in {:.1}s", f.saturating_sub(s) as f64 / 1000.0);
            }
            if !a.gpus.is_empty() {
                let _ = write!(o, " on GPUs {:?}", a.gpus);
            }
            o.push('\n');
            if let Some(det) = &a.detail {
                let _ = writeln!(o, "    detail    {det}");
            }
            for (s, at) in &a.stages {
                let _ = writeln!(o, "    stage     {:<20} {}", s.as_str(), t(*at, base));
            }
            if let Some(f) = a.finished_ms {
                let _ = writeln!(o, "    ended     {:<20} {}", a.status(), t(f, base));
            }
            for f in &a.findings {
                let _ = writeln!(
                    o,
                    "    diagnosis {} → {:?}: {}",
                    f.category, f.action, f.reason
                );
                let _ = writeln!(o, "      evidence: {}", f.evidence.replace('\n', " "));
                if let Some(c) = f.confidence {
                    let _ = writeln!(o, "      confidence: {:.0}%", c * 100.0);
                }
                for l in &f.telling {
                    let _ = writeln!(o, "      also: {}", l.replace('\n', " "));
                }
                if let Some(k) = crate::failure_kind::unknown_kind(f) {
                    let _ = writeln!(o, "      kind: {} {}", k.id, k.text);
                }
            }
            for f in &a.fixes {
                let _ = writeln!(o, "    fix       {f}");
            }
            if let Some(v) = &a.vllm_version {
                let _ = writeln!(o, "    vllm      {v}");
            }
            for (k, v) in &a.provenance {
                let _ = writeln!(o, "    prov      {k} = {v}");
            }
            if let Some(info) = &a.info {
                if info.command != i.command {
                    let _ = writeln!(
                        o,
                        "    ran as    {}",
                        info.command.as_deref().unwrap_or("-")
                    );
                }
            }
            for (k, v) in &a.metrics {
                let _ = writeln!(o, "    metric    {k} = {v}");
            }
            for l in &a.logs {
                let _ = writeln!(o, "    log       {} ({} bytes)", l.path, l.bytes);
            }
        }
        o.push('\n');
    }
    o
}

/// One JSON object per line and run: its key, state, facts, and every attempt as a
/// results record (provenance parsed: argv lists, rewrites, mounts).
pub fn render_json(docs: &[&RunDoc]) -> String {
    render_json_in(docs, &[])
}

/// [`render_json`] with each run's failure group (`failure_group`: id, kind, size).
pub fn render_json_in(docs: &[&RunDoc], groups: &[FailureGroup]) -> String {
    let mut o = String::new();
    for d in docs {
        let attempts: Vec<_> = d
            .attempts
            .iter()
            .map(|a| super::record::ResultRecord::of(d, a))
            .collect();
        let v = serde_json::json!({
            "key": d.key,
            "commit": d.info.commit,
            "variant": d.info.variant.to_string(),
            "state": d.record.state.to_string(),
            "perf_command": d.info.command,
            "image": d.info.image,
            "attempts": attempts,
            "failure_group": group_of(d, groups).map(|g| serde_json::json!({
                "id": g.id,
                "kind": g.text,
                "runs": g.count,
            })),
        });
        o.push_str(&v.to_string());
        o.push('\n');
    }
    o
}
