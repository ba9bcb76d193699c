//! `plan check` and `plan show` output.

use super::{Diag, Plan};
use std::collections::BTreeMap;
use std::io::{self, Write};

pub fn check_summary(plan: &Plan, out: &mut dyn Write) -> io::Result<()> {
    let runnable = plan.runs.iter().filter(|r| r.skip_reason.is_none());
    let (n_runnable, gpu_runs) = runnable.fold((0, 0u64), |(n, g), r| (n + 1, g + r.gpus as u64));
    let variants: Vec<String> = {
        let mut v: Vec<String> = plan.runs.iter().map(|r| r.variant.to_string()).collect();
        v.sort();
        v.dedup();
        v
    };
    writeln!(out, "plan {} ({})", plan.name, plan.path.display())?;
    writeln!(
        out,
        "  commits    {} ({} invalid)",
        plan.commits.len(),
        plan.invalid_commits().count()
    )?;
    writeln!(out, "  variants   {}", variants.join(", "))?;
    writeln!(
        out,
        "  runs       {} ({} runnable, {} skipped)",
        plan.runs.len(),
        n_runnable,
        plan.runs.len() - n_runnable
    )?;
    writeln!(
        out,
        "  GPUs       {} needed by the largest run; {} GPU-runs in all",
        plan.max_gpus(),
        gpu_runs
    )?;
    let invalid: Vec<_> = plan.invalid_commits().collect();
    if !invalid.is_empty() {
        writeln!(
            out,
            "\ninvalid commits (not run; on_invalid = {:?}):",
            plan.defaults.on_invalid
        )?;
        for c in invalid {
            let i = c.invalid.as_ref().expect("filtered");
            let loc = i.loc.as_ref().map(|l| format!("{l}: ")).unwrap_or_default();
            writeln!(out, "  {loc}{} {}: {}", c.short(), i.rule, i.detail)?;
        }
    }
    if !plan.warnings.is_empty() {
        writeln!(out, "\nwarnings ({}):", plan.warnings.len())?;
        let mut by_kind: BTreeMap<&str, Vec<&Diag>> = BTreeMap::new();
        for w in &plan.warnings {
            by_kind.entry(w.kind).or_default().push(w);
        }
        for (kind, ws) in by_kind {
            writeln!(out, "  {kind} ({}):", ws.len())?;
            for w in ws.iter().take(5) {
                writeln!(out, "    {w}")?;
            }
            if ws.len() > 5 {
                writeln!(
                    out,
                    "    … and {} more (`plan show` lists every run)",
                    ws.len() - 5
                )?;
            }
        }
    }
    writeln!(out, "\nrunnable: yes")?;
    Ok(())
}

pub fn show(plan: &Plan, json: bool, out: &mut dyn Write) -> io::Result<()> {
    if json {
        for r in &plan.runs {
            let c = plan.commit_of(r);
            let v = serde_json::json!({
                "id": r.id.0,
                "key": r.key,
                "commit": c.commit,
                "parent": c.parent,
                "variant": r.variant.to_string(),
                "repeat": r.repeat,
                "image": r.image,
                "patch": r.patch,
                "gpus": r.gpus,
                "gpu_type": c.gpu.gpu_type,
                "model": c.model,
                "kind": c.kind().map(|k| k.as_str()),
                "perf_command": c.perf_command,
                "command_view": c.view,
                "server_start_timeout_s": r.server_start_timeout_s,
                "run_timeout_s": r.run_timeout_s,
                "skip_reason": r.skip_reason,
            });
            writeln!(out, "{v}")?;
        }
        return Ok(());
    }
    for c_idx in 0..plan.commits.len() {
        let c = &plan.commits[c_idx];
        writeln!(
            out,
            "{} {} [{}] {}",
            c.short(),
            c.model.as_deref().unwrap_or("-"),
            c.gpu,
            c.title
        )?;
        if let Some(v) = &c.view {
            let env: Vec<String> = v.env.iter().map(|(k, x)| format!("{k}={x}")).collect();
            writeln!(
                out,
                "    kind={} model={} tp={} pp={} env=[{}] flags={}",
                v.kind.map(|k| k.as_str()).unwrap_or("?"),
                v.model.as_deref().unwrap_or("-"),
                v.tp,
                v.pp,
                env.join(" "),
                v.flags.len()
            )?;
        }
        for r in plan.runs.iter().filter(|r| r.commit == c_idx) {
            let what = match &r.skip_reason {
                Some(s) => format!("SKIP {s}"),
                None => r.image.clone().unwrap_or_default(),
            };
            writeln!(
                out,
                "    {:<6} {:<18} {}gpu {what}",
                r.id.to_string(),
                r.variant.to_string(),
                r.gpus
            )?;
        }
    }
    Ok(())
}
