//! `nightshift bench eta`: how good the estimate is. Sim nights of the seed mix are played
//! to their end with true run lengths (per model and kind, with per-run noise) in the
//! scheduler's order; at 10, 25, 50, 75 and 90% of each night the estimate is made from
//! what was known then (the runs that had ended and their lengths, the runs in flight and
//! how long they had run) and compared with the time that was really left.

use crate::eta::{estimate, Need, Now};
use crate::plan::Plan;
use std::io::Write;

fn hash(s: &str) -> u64 {
    // FNV-1a: the same nights on every build.
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

struct Run {
    need: Need,
    commit: usize,
    /// The true length, ms.
    len: u64,
}

/// One night's runs: a length per group drawn from its kind's range (served 12–25 min,
/// offline 6–15, as real vLLM benchmarks take from container to result), ±15% per run
/// (seeded): the same model and benchmark on the same box vary with the commit's speed
/// and the server's start.
fn night(plan: &Plan, gpus: u32, seed: u64) -> Vec<Run> {
    // The engine's order of commits, as the TUI's estimate also sorts them.
    let ranks = crate::night::order::plan_ranks(plan, gpus);
    plan.runs
        .iter()
        .filter(|r| r.skip_reason.is_none() && r.gpus <= gpus)
        .map(|r| {
            let c = plan.commit_of(r);
            let group = format!("{}|{}", c.model.as_deref().unwrap_or("?"), c.needs_server());
            let (lo, hi) = if c.needs_server() {
                (12 * 60_000, 25 * 60_000)
            } else {
                (6 * 60_000, 15 * 60_000)
            };
            let base = lo + hash(&format!("{group}#{seed}")) % (hi - lo);
            let noise = hash(&format!("{}#{seed}", r.key)) % 1000;
            let len = base * (850 + noise * 3 / 10) / 1000;
            Run {
                need: Need {
                    gpus: r.gpus.max(1),
                    group,
                    order: (ranks.of(crate::model::CommitIx(r.commit)).0, r.order),
                    commit_started: false,
                    prior_ms: c.kind().unwrap_or_default().typical_secs() * 1000,
                },
                commit: r.commit,
                len,
            }
        })
        .collect()
}

/// A run's length before any of the night has ended: the runtime's typical run.
const GUESS_MS: u64 = 15 * 60_000;

/// The night played out as the engine plays it: each run's (start, end), in the
/// scheduler's order (commits already started first), passing a waiting run only by
/// backfilling with the lengths learned so far (true lengths stay unknown until a run ends).
fn play(runs: &[Run], gpus: u32) -> Vec<(u64, u64)> {
    let mut at = vec![(u64::MAX, u64::MAX); runs.len()];
    let mut started = std::collections::HashSet::new();
    let mut learned: std::collections::HashMap<&str, Vec<u64>> = Default::default();
    let mut all: Vec<u64> = Vec::new();
    let mut free = gpus;
    let mut ends: Vec<(u64, usize)> = Vec::new();
    let mut t = 0;
    let mut left: Vec<usize> = (0..runs.len()).collect();
    loop {
        let expect = |i: usize| -> u64 {
            let own = learned.get(runs[i].need.group.as_str());
            let v = own.filter(|v| !v.is_empty()).unwrap_or(&all);
            if v.is_empty() {
                return GUESS_MS;
            }
            let mut v = v.clone();
            v.sort_unstable();
            v[v.len() / 2]
        };
        loop {
            let key = |i: &usize| {
                let r = &runs[*i];
                (!started.contains(&r.commit), r.need.order)
            };
            let Some(head) = left.iter().min_by_key(|i| key(i)).copied() else {
                break;
            };
            let need = runs[head].need.gpus;
            let ends_now: Vec<(std::time::Duration, u32)> = ends
                .iter()
                .map(|(_, i)| {
                    let end = at[*i].0 + expect(*i);
                    (
                        std::time::Duration::from_millis(end.saturating_sub(t)),
                        runs[*i].need.gpus,
                    )
                })
                .collect();
            let pick = left
                .iter()
                .copied()
                .enumerate()
                .filter(|(_, i)| runs[*i].need.gpus <= free)
                .filter(|(_, i)| {
                    need <= free
                        || *i == head
                        || crate::scheduler::may_backfill(
                            free,
                            need,
                            &ends_now,
                            runs[*i].need.gpus,
                            std::time::Duration::from_millis(expect(*i)),
                        )
                })
                .min_by_key(|(_, i)| key(i));
            let Some((k, i)) = pick else { break };
            left.swap_remove(k);
            free -= runs[i].need.gpus;
            started.insert(runs[i].commit);
            at[i] = (t, t + runs[i].len);
            ends.push((t + runs[i].len, i));
        }
        ends.sort_unstable_by(|a, b| b.cmp(a));
        let Some((end, i)) = ends.pop() else { break };
        t = end;
        free += runs[i].need.gpus;
        learned
            .entry(runs[i].need.group.as_str())
            .or_default()
            .push(runs[i].len);
        all.push(runs[i].len);
    }
    at
}

/// What was known at `t`.
fn known_at(runs: &[Run], at: &[(u64, u64)], t: u64) -> Vec<(Need, Now)> {
    let started: std::collections::HashSet<usize> = runs
        .iter()
        .zip(at)
        .filter(|(_, (s, _))| *s <= t)
        .map(|(r, _)| r.commit)
        .collect();
    runs.iter()
        .zip(at)
        .map(|(r, &(s, e))| {
            let mut need = r.need.clone();
            need.commit_started = started.contains(&r.commit);
            let now = if e <= t {
                Now::Done {
                    took_ms: Some(e - s),
                }
            } else if s <= t {
                Now::Active { elapsed_ms: t - s }
            } else {
                Now::Queued
            };
            (need, now)
        })
        .collect()
}

pub const POINTS: [u64; 5] = [10, 25, 50, 75, 90];

/// Per point of the night: the relative errors over the nights, and whether the truth
/// fell inside the interval.
pub fn errors(plan: &Plan, gpus: u32, nights: u64) -> Vec<(u64, Vec<f64>, usize)> {
    let mut out: Vec<(u64, Vec<f64>, usize)> = POINTS.iter().map(|p| (*p, Vec::new(), 0)).collect();
    for seed in 1..=nights {
        let runs = night(plan, gpus, seed);
        let at = play(&runs, gpus);
        let end = at.iter().map(|(_, e)| *e).max().unwrap_or(0);
        for (p, errs, inside) in out.iter_mut() {
            let t = end * *p / 100;
            let truth = (end - t) as f64;
            let Some(eta) = estimate(&known_at(&runs, &at, t), gpus) else {
                continue;
            };
            errs.push((eta.left_ms as f64 - truth).abs() / truth);
            if (eta.low_ms as f64..=eta.high_ms as f64).contains(&truth) {
                *inside += 1;
            }
        }
    }
    out
}

fn quantile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

pub fn run(plan: &Plan, out: &mut dyn Write) -> std::io::Result<()> {
    let (gpus, nights) = (8, 20);
    let n = night(plan, gpus, 1).len();
    writeln!(
        out,
        "eta: {nights} sim nights of {} ({n} runs on {gpus} GPUs, in the engine's order; a length per model and kind drawn from its kind's range — served 12–25 min, offline 6–15 — ±15% per run)",
        plan.name
    )?;
    writeln!(
        out,
        "at night   median |error|   p90 |error|   truth inside the interval"
    )?;
    for (p, mut errs, inside) in errors(plan, gpus, nights) {
        let k = errs.len();
        writeln!(
            out,
            "{:>7}%   {:>13.1}%   {:>10.1}%   {inside}/{k}",
            p,
            quantile(&mut errs, 0.5) * 100.0,
            quantile(&mut errs, 0.9) * 100.0,
        )?;
    }
    writeln!(out, "error = |estimated − true time left| / true time left")
}

#[cfg(test)]
mod tests {
    #[test]
    fn from_a_quarter_of_the_night_the_median_error_is_within_ten_percent() {
        let plan = crate::plan::example::example_plan();
        for (p, mut errs, _) in super::errors(&plan, 8, 20) {
            let m = super::quantile(&mut errs, 0.5);
            // Before a quarter of the night only the big commits have run: one or two
            // groups' lengths, and the kinds' typical lengths, are all there is to go on.
            let bound = match p {
                25..=90 => 0.10,
                _ => f64::INFINITY,
            };
            assert!(
                m <= bound,
                "at {p}% of the night: median error {:.1}%",
                m * 100.0
            );
        }
    }
}
