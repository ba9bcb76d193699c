//! `nightshift preflight PLAN` and the preflight `run` does before the night.

use super::gather::{gather, Options};
use super::{judge, table, Report, SKIP_PREFIX};
use crate::plan::Plan;
use std::time::Instant;

/// Gathers and judges, on the process's runtime (the CLI's entry points are sync).
pub fn preflight(plan: &Plan, opts: &Options) -> Result<Report, String> {
    let t0 = Instant::now();
    let facts = crate::rt::block_on(gather(plan, opts));
    let commits = judge(plan, &facts);
    Ok(Report::new(
        commits,
        facts.not_reached,
        t0.elapsed().as_millis() as u64,
    ))
}

/// `nightshift preflight`: the table (or `--json`), exit 0 when nothing is blocked, 1 when
/// something is.
pub fn main(plan: &Plan, opts: &Options, json: bool, all: bool) -> i32 {
    let report = match preflight(plan, opts) {
        Ok(r) => r,
        Err(e) => {
            tracing::error!("{e}");
            return 2;
        }
    };
    if json {
        match serde_json::to_string_pretty(&report) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                tracing::error!("{e}");
                return 2;
            }
        }
    } else {
        print!("{}", table(&report, all));
    }
    report.exit_code()
}

/// `nightshift preflight PLAN --suggest`: the fixes preflight knows for the commits it
/// blocks, written beside the plan as `PLAN.fixes.toml` for review (an earlier file is kept
/// as `.bak`). Exit 0 when written or when none is known, 2 when it cannot be written.
pub fn suggest(plan: &Plan, plan_path: &std::path::Path, opts: &Options) -> i32 {
    let facts = crate::rt::block_on(gather(plan, opts));
    let commits = judge(plan, &facts);
    let blocked = commits
        .iter()
        .filter(|c| c.verdict == super::Verdict::Blocked)
        .count();
    let fixes = super::suggest::suggest(plan, &facts, &commits);
    if fixes.is_empty() {
        println!("preflight: no fix known for the {blocked} blocked commits; nothing written");
        return 0;
    }
    let out = fixes_path(plan_path);
    if out.exists() {
        let bak = out.with_extension("toml.bak");
        if let Err(e) = std::fs::rename(&out, &bak) {
            tracing::error!(
                "{}: cannot keep the earlier file as {}: {e}",
                out.display(),
                bak.display()
            );
            return 2;
        }
        println!(
            "preflight: the earlier {} is kept as {}",
            out.display(),
            bak.display()
        );
    }
    let text = crate::plan::fixes::render(&fixes, &plan_path.display().to_string());
    if let Err(e) = std::fs::write(&out, text) {
        tracing::error!("{}: {e}", out.display());
        return 2;
    }
    for f in &fixes {
        let short = &f.commit[..f.commit.len().min(8)];
        println!("  {short}  {}: {}", f.kind.as_str(), f.note());
    }
    println!(
        "preflight: {} of {blocked} blocked commits have a fix, written to {} (review it, then: nightshift run {} --fixes {})",
        fixes.len(),
        out.display(),
        plan_path.display(),
        out.display()
    );
    0
}

/// `plan.toml` → `plan.fixes.toml`, beside it.
pub(crate) fn fixes_path(plan: &std::path::Path) -> std::path::PathBuf {
    let stem = plan
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "plan".into());
    plan.with_file_name(format!("{stem}.fixes.toml"))
}

/// The night's use of a report: each run of a blocked variant gets its skip reason before
/// any GPU is given (unless the plan already skips it). Returns how many runs it named.
pub(crate) fn skip_blocked(plan: &mut Plan, report: &Report) -> usize {
    let mut n = 0;
    for r in plan.runs.iter_mut() {
        if r.skip_reason.is_some() {
            continue;
        }
        let Some(c) = plan.commits.get(r.commit) else {
            continue;
        };
        let Some(cr) = report.commit(&c.commit) else {
            continue;
        };
        if let Some(reason) = cr.blocking(&r.variant.to_string()) {
            r.skip_reason = Some(format!("{SKIP_PREFIX}{}: {}", reason.category, reason.text));
            n += 1;
        }
    }
    n
}

/// Whether a stored skip reason was preflight's.
pub fn named_before_night(skip_reason: &str) -> bool {
    skip_reason.starts_with(SKIP_PREFIX)
}
