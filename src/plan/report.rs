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
    if let Some((head, rest)) = plan.resolved.split_first() {
        // Every line: what the clone changed in the plan is worth reading in full.
        writeln!(out, "\nresolved from the vLLM clone: {head}")?;
        for l in rest {
            writeln!(out, "  {l}")?;
        }
    }
    let needs_build: Vec<String> = plan
        .commits
        .iter()
        .filter_map(|c| {
            let ch = c.changes.as_ref()?;
            let compiled: Vec<&str> = ch
                .iter()
                .filter(|f| super::clone::needs_build(&f.path))
                .map(|f| f.path.as_str())
                .collect();
            (!compiled.is_empty()).then(|| format!("{} ({})", c.short(), compiled.join(", ")))
        })
        .collect();
    if !needs_build.is_empty() {
        writeln!(
            out,
            "\ncommits whose parent → commit diff touches compiled code or the build ({}): a baseline cannot be derived by overlaying Python files",
            needs_build.len()
        )?;
        for l in &needs_build {
            writeln!(out, "  {l}")?;
        }
    }
    // Agent patches that change compiled sources: applied alone they would benchmark the
    // image's stale binaries, so the runtime builds them (or ends them as needs_build).
    let base = plan.path.parent().unwrap_or(std::path::Path::new("."));
    let compiled_patches: Vec<String> = plan
        .runs
        .iter()
        .filter_map(|r| {
            let p = r.patch.as_ref()?;
            // Capped, regular files only: `patch = "/dev/zero"` must not hang `plan check`.
            let bytes =
                super::read::read_capped(&base.join(p), super::read::PLAN_CAP, "a patch").ok()?;
            let text = String::from_utf8_lossy(&bytes);
            let files = super::clone::patch_needs_build(&text);
            (!files.is_empty()).then(|| format!("{} ({})", r.key, files.join(", ")))
        })
        .collect();
    if !compiled_patches.is_empty() {
        writeln!(
            out,
            "\nagent patches that change compiled sources ({}): their images are built from source, or the runs end as needs_build when building is off",
            compiled_patches.len()
        )?;
        for l in &compiled_patches {
            writeln!(out, "  {l}")?;
        }
    }
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
    if !plan.runnable() {
        // Every run is skipped (invalid commits, skip = true) or there is none.
        writeln!(
            out,
            "\nrunnable: no ({} runs, every one skipped; `plan show` says why)",
            plan.runs.len()
        )?;
    } else {
        writeln!(out, "\nrunnable: yes")?;
    }
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
                "vllm_version": c.vllm_version,
                // The eras whose clients take this command (a dataset aside).
                "fits_vllm": c.view.as_ref().map(|v| crate::rewrite::fitting(v, c.mode)),
                "sim": c.sim,
                // As planned from the era tables; the runtime re-plans with each image's
                // own client (`show --json` has what really ran).
                "invocation": c.invocation,
                "planned_bench_argv": c.invocation.as_ref().map(|i| i.resolve("python3", "benchmarks", crate::rewrite::CliRunner::Console("vllm")).bench_argv),
                "planned_server_argv": c.invocation.as_ref().and_then(|i| i.resolve("python3", "benchmarks", crate::rewrite::CliRunner::Console("vllm")).server_argv),
                "invocation_problem": c.invocation_problem,
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
        if let Some(inv) = &c.invocation {
            let r = inv.resolve(
                "python3",
                "benchmarks",
                crate::rewrite::CliRunner::Console("vllm"),
            );
            writeln!(out, "    bench  {}", shell_words::join(&r.bench_argv))?;
            if let Some(s) = &r.server_argv {
                writeln!(out, "    server {}", shell_words::join(s))?;
            }
            for rw in &inv.rewrites {
                writeln!(out, "    rewrite {rw}")?;
            }
        }
        if let Some(p) = &c.invocation_problem {
            writeln!(out, "    cannot run yet: {p}")?;
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
