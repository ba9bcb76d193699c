//! `nightshift show COMMIT_OR_RUN`: everything about one commit or run.

use super::groups::{FailureGroup, Member};
use crate::record::RunDoc;
use crate::sanitize::log_line;
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

/// One line of `show`: every field in it is plan or log text (a title, a command, a
/// diagnosis's line), so the whole line is shown with its controls escaped and a line break
/// in a field cannot start a line of its own.
fn line(o: &mut String, l: std::fmt::Arguments<'_>) {
    let l = l.to_string();
    o.push_str(&crate::sanitize::terminal(&l));
    o.push('\n');
}

/// [`render`], each run that failed with an unknown error naming its failure group (its
/// kind, and how many runs of the night share it).
pub(crate) fn render_in(docs: &[&RunDoc], groups: &[FailureGroup]) -> String {
    let mut o = String::new();
    for d in docs {
        let i = &d.info;
        let removed = if d.removed {
            " (removed from the plan)"
        } else {
            ""
        };
        line(&mut o, format_args!("run {}{removed}", d.key));
        line(&mut o, format_args!("  commit   {} {}", i.commit, i.title));
        if let Some(p) = &i.parent {
            line(&mut o, format_args!("  parent   {p}"));
        }
        line(&mut o, format_args!("  variant  {}", i.variant));
        let model = i.model.as_deref().unwrap_or("-");
        line(&mut o, format_args!("  model    {model}"));
        line(&mut o, format_args!("  gpu      {}", i.gpu));
        let command = i.command.as_deref().unwrap_or("-");
        line(&mut o, format_args!("  command  {command}"));
        if let Some(img) = &i.image {
            line(&mut o, format_args!("  image    {img}"));
        }
        if let Some(p) = &i.patch {
            line(&mut o, format_args!("  patch    {p}"));
        }
        let (state, attempt) = (&d.record.state, d.record.attempt);
        line(
            &mut o,
            format_args!("  state    {state} (attempt {attempt})"),
        );
        if let Some(g) = group_of(d, groups) {
            let g = super::groups::show_line(g);
            line(&mut o, format_args!("  group    {g}"));
        }
        if let Some(f) = &d.predicted {
            line(
                &mut o,
                format_args!("  predicted {}: {}", f.category, f.reason),
            );
        }
        for a in &d.attempts {
            let mut head = format!("  attempt {}: {}", a.attempt, a.status());
            // A skip after a diagnosis keeps its cause, as every output names it.
            if let Some(c) = super::cause::of_attempt(d, a) {
                let _ = write!(head, " ({c})");
            }
            // Its working time: a held run's wait for the operator is not part of it.
            let worked = super::cause::worked_until(d, a);
            if let (Some(s), Some(f)) = (a.started_ms, worked) {
                let _ = write!(head, " in {:.1}s", f.saturating_sub(s) as f64 / 1000.0);
            }
            if a.started_ms.is_none() && a.finished_ms.is_some() {
                head.push_str(", not started");
            }
            if !a.gpus.is_empty() {
                let _ = write!(head, " on GPUs {:?}", a.gpus);
            }
            line(&mut o, format_args!("{head}"));
            if let Some(det) = &a.detail {
                line(&mut o, format_args!("    detail    {}", log_line(det)));
            }
            // Times are from the attempt's start; an attempt that never started (skipped
            // or cancelled while queued) has none to print.
            if let Some(base) = a.started_ms {
                for (s, at) in &a.stages {
                    let at = t(*at, base);
                    line(
                        &mut o,
                        format_args!("    stage     {:<20} {at}", s.as_str()),
                    );
                }
                if let Some(w) = worked.filter(|w| Some(*w) != a.finished_ms) {
                    let at = t(w, base);
                    line(&mut o, format_args!("    stopped   {:<20} {at}", "held"));
                }
                if let Some(f) = a.finished_ms {
                    let at = t(f, base);
                    line(
                        &mut o,
                        format_args!("    ended     {:<20} {at}", a.status()),
                    );
                }
            }
            for f in &a.findings {
                let (cat, action) = (&f.category, &f.action);
                line(
                    &mut o,
                    format_args!("    diagnosis {cat} → {action:?}: {}", f.reason),
                );
                let ev = f.evidence.replace('\n', " ");
                line(&mut o, format_args!("      evidence: {}", log_line(&ev)));
                if let Some(c) = f.confidence {
                    line(&mut o, format_args!("      confidence: {:.0}%", c * 100.0));
                }
                for l in &f.telling {
                    let l = l.replace('\n', " ");
                    line(&mut o, format_args!("      also: {}", log_line(&l)));
                }
                if let Some(k) = crate::failure_kind::unknown_kind(f) {
                    let text = log_line(&k.text);
                    line(&mut o, format_args!("      kind: {} {text}", k.id));
                }
            }
            for f in &a.fixes {
                line(&mut o, format_args!("    fix       {f}"));
            }
            if let Some(v) = &a.vllm_version {
                line(&mut o, format_args!("    vllm      {v}"));
            }
            for (k, v) in &a.provenance {
                line(&mut o, format_args!("    prov      {k} = {v}"));
            }
            if let Some(info) = &a.info {
                if info.command != i.command {
                    let ran = info.command.as_deref().unwrap_or("-");
                    line(&mut o, format_args!("    ran as    {ran}"));
                }
            }
            for (k, v) in &a.metrics {
                line(&mut o, format_args!("    metric    {k} = {v}"));
            }
            if let Some(r) = &a.requests {
                let (n, failed) = (r.requests, r.failed);
                line(
                    &mut o,
                    format_args!("    requests  {n} ({failed} failed); 95% bootstrap intervals:"),
                );
                for q in &r.quantiles {
                    let (label, kept) = (q.label(), q.n);
                    line(&mut o, format_args!("    requests  {label}  (n={kept})"));
                }
            }
            for l in &a.logs {
                let (path, bytes) = (&l.path, l.bytes);
                line(&mut o, format_args!("    log       {path} ({bytes} bytes)"));
            }
        }
        o.push('\n');
    }
    o
}

/// [`render_json`] with each run's failure group (`failure_group`: id, kind, size).
pub(crate) fn render_json_in(docs: &[&RunDoc], groups: &[FailureGroup]) -> String {
    let mut o = String::new();
    for d in docs {
        let attempts: Vec<_> = d
            .attempts
            .iter()
            .map(|a| crate::record::ResultRecord::of(d, a))
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
        o.push_str(&crate::sanitize::json(&v.to_string()));
        o.push('\n');
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::category::{Action, Category};
    use crate::event::Finding;
    use crate::model::{Outcome, RunState, Variant};
    use crate::sanitize::{assert_inert, HOSTILE, HOSTILE_SHOWN};

    /// An attempt skipped while queued never started: no `+1795636128.6s` (its end measured
    /// from an unset start), just that it did not start. A run held on image_not_found and
    /// then skipped says what it was skipped after, and its time stops when it was held.
    #[test]
    fn an_attempt_skipped_before_it_started_prints_no_times() {
        use crate::record::StateChange;
        let skipped = RunState::Finished {
            outcome: Outcome::skipped(
                crate::model::SkipBy::Operator,
                "skipped by the operator: all image_not_found",
            ),
        };
        let held = RunState::Held {
            category: Category::ImageNotFound,
        };
        let mut d = crate::report::tests::doc("c1", Variant::Human, "x", 1.0);
        let a = &mut d.attempts[0];
        a.metrics.clear();
        a.started_ms = Some(1_795_636_000_000);
        a.stages = vec![(crate::model::Stage::PreparingImage, 1_795_636_000_000)];
        a.end = Some(skipped.clone());
        a.finished_ms = Some(1_795_639_600_000);
        a.findings = vec![Finding {
            category: Category::ImageNotFound,
            evidence: "manifest unknown".into(),
            action: Action::Operator,
            recipe: None,
            reason: "no image".into(),
            predicted: false,
            confidence: None,
            telling: vec![],
            kind: None,
        }];
        d.history = vec![
            StateChange {
                at_ms: 1_795_636_002_000,
                attempt: 1,
                from: RunState::Active {
                    stage: crate::model::Stage::PreparingImage,
                },
                to: held.clone(),
                detail: None,
            },
            StateChange {
                at_ms: 1_795_639_600_000,
                attempt: 1,
                from: held,
                to: skipped.clone(),
                detail: None,
            },
        ];
        // Attempt 2: re-queued, then skipped before it started.
        d.attempts.push(crate::record::AttemptDoc {
            attempt: 2,
            end: Some(skipped),
            finished_ms: Some(1_795_636_128_600),
            ..Default::default()
        });
        let out = render(&[&d]);
        assert!(
            out.contains("  attempt 1: skipped (image_not_found) in 2.0s\n"),
            "{out}"
        );
        assert!(
            out.contains("    stopped   held                 +2.0s\n"),
            "{out}"
        );
        assert!(
            out.contains("  attempt 2: skipped (image_not_found), not started\n"),
            "{out}"
        );
        assert!(!out.contains("+1795636"), "{out}");
    }

    /// Every field `show` prints from the plan or a log, hostile: each shown escaped, and
    /// every line of the output still one of show's lines.
    #[test]
    fn plan_and_log_text_is_inert() {
        let mut d = crate::report::tests::doc_with(
            "c1",
            Variant::Agent(HOSTILE.into()),
            0,
            HOSTILE,
            &[(HOSTILE, 1.0)],
        );
        d.info.title = HOSTILE.into();
        d.info.model = Some(HOSTILE.into());
        d.info.image = Some(HOSTILE.into());
        d.info.patch = Some(HOSTILE.into());
        let a = &mut d.attempts[0];
        a.end = Some(RunState::Finished {
            outcome: Outcome::Failed {
                category: Category::Other,
            },
        });
        a.detail = Some(HOSTILE.into());
        a.fixes = vec![HOSTILE.into()];
        a.vllm_version = Some(HOSTILE.into());
        a.provenance = [(HOSTILE.to_string(), HOSTILE.to_string())].into();
        a.findings = vec![Finding {
            category: Category::Other,
            evidence: HOSTILE.into(),
            action: Action::Skip,
            recipe: None,
            reason: HOSTILE.into(),
            predicted: false,
            confidence: Some(0.3),
            telling: vec![HOSTILE.into()],
            kind: None,
        }];
        a.logs = vec![crate::record::LogFile {
            path: HOSTILE.into(),
            bytes: 1,
        }];
        let out = render(&[&d]);
        assert_inert(&out, HOSTILE_SHOWN);
        assert!(
            out.contains(&format!("  commit   c1 {HOSTILE_SHOWN}\n")),
            "{out}"
        );
        for l in out.lines().filter(|l| !l.is_empty()) {
            assert!(
                l.starts_with("run ") || l.starts_with("  "),
                "{l:?} in\n{out}"
            );
        }
    }
}
