//! Adaptive repeats (the plan's `max_repeats`): repeats past the plan's `repeats` are held
//! back from the start, and released a step at a time — one more run of every variant of a
//! commit — while the commit's comparison is still unknown, once its own runs have ended
//! and nothing else is waiting: spare time goes to the verdicts that need it, closest to
//! deciding first, never ahead of a commit not yet run. Each look is judged at the α the
//! steps allow (Pocock), so all looks together keep the plan's α.

use super::Engine;
use crate::model::{Outcome, RunId, RunState, Variant};
use crate::stats::{self, adaptive::Steps, Method};
use std::collections::BTreeMap;

pub use crate::state::HELD_BACK;

/// A commit's comparisons as the night stands: `Some(p)` when one against the baseline is
/// still unknown and more repeats can tell (the smallest such p), else `None`. `sides` are
/// each variant's counted values of the metric `key`, the baseline among them; `band` the
/// noise the night's own repeats show (as the morning's `results` will judge it).
pub fn open(
    key: &str,
    sides: &[(Variant, Vec<f64>)],
    band: Option<&stats::Band>,
    cfg: &stats::Config,
) -> Option<f64> {
    let base = &sides.iter().find(|(v, _)| *v == Variant::Baseline)?.1;
    if base.is_empty() {
        return None;
    }
    sides
        .iter()
        .filter(|(v, vals)| *v != Variant::Baseline && !vals.is_empty())
        .filter_map(|(_, vals)| {
            let c = stats::compare(key, vals, base, band, cfg)?;
            // A verdict by the uncalibrated rule or on too few runs is not a test's.
            let weak = matches!(c.method, Method::Uncalibrated | Method::TooFewRepeats);
            (weak || !c.verdict.decided()).then(|| c.p_value.unwrap_or(1.0))
        })
        .min_by(|a, b| a.total_cmp(b))
}

impl Engine {
    /// Does the window (`--until`) leave time for one more step of a commit's repeats: its
    /// variants' runs of `repeat`, after the `gpus_so_far` GPU-runs this look already
    /// released, in waves of the box's GPUs (one more while runs in flight hold them),
    /// each as long as tonight's runs of its model take? No window: always. A step that
    /// fits adds its GPUs to `gpus_so_far`.
    fn step_fits_window(&self, ids: &[RunId], repeat: u32, gpus_so_far: &mut u32) -> bool {
        let step: Vec<&crate::plan::RunSpec> = ids
            .iter()
            .map(|id| &self.plan.runs[id.0 as usize])
            .filter(|s| s.repeat == repeat)
            .collect();
        let Some(first) = step.first() else {
            return true;
        };
        let model = self.plan.commit_of(first).model.as_deref();
        let gpus: u32 = step.iter().map(|s| s.gpus).sum();
        let all = *gpus_so_far + gpus;
        let now = tokio::time::Instant::now().into_std();
        let fits = self.schedule.window_has_time(model, all, now);
        if fits {
            *gpus_so_far = all;
        }
        fits
    }
}

/// A commit whose runs have ended with held-back repeats left: (metric, size class,
/// commit, the repeat to release, each variant's values).
type Candidate<'a> = (&'a str, &'a str, usize, u32, Vec<(Variant, Vec<f64>)>);

/// A commit whose comparison is still open: (p, rank, commit, the repeat to release, runs
/// so far a side).
type Open = (f64, crate::night::order::Rank, usize, u32, usize);

/// The plan's runs by commit.
fn by_commit(plan: &crate::plan::Plan) -> BTreeMap<usize, Vec<RunId>> {
    let mut m: BTreeMap<usize, Vec<RunId>> = BTreeMap::new();
    for spec in &plan.runs {
        m.entry(spec.commit).or_default().push(spec.id);
    }
    m
}

/// The night's noise, learned from its own repeats (every commit × variant with two or
/// more is a group of identical runs), per metric and model size: the band the morning's
/// `results` will judge with, so the night asks for a repeat only where that verdict is
/// still unknown.
fn learned_bands<'a>(candidates: &[Candidate<'a>]) -> BTreeMap<(&'a str, &'a str), stats::Band> {
    let mut groups: BTreeMap<(&str, &str), Vec<Vec<f64>>> = BTreeMap::new();
    for (k, class, _, _, sides) in candidates {
        for (_, v) in sides.iter().filter(|(_, v)| v.len() > 1) {
            groups.entry((k, class)).or_default().push(v.clone());
        }
    }
    groups
        .into_iter()
        .filter_map(|(key, g)| Some((key, stats::band::learn(&g, "learned")?)))
        .collect()
}

impl Engine {
    /// Whether a look is due: the loop turns for every event (log lines too), so look
    /// again only once a run has ended since (ended runs with the attempts started: a
    /// released repeat leaves the ended count and comes back to it, its attempt does not).
    /// Runs that have ended (finished in any way).
    pub(super) fn ended_runs(&self) -> usize {
        self.state
            .runs
            .iter()
            .filter(|r| matches!(r.state, RunState::Finished { .. }))
            .count()
    }

    fn repeats_look_due(&mut self) -> bool {
        let ended = self.ended_runs();
        let attempts: u64 = self.state.runs.iter().map(|r| r.attempt as u64).sum();
        let due = self.repeats_looked_at != Some((ended, attempts));
        self.repeats_looked_at = Some((ended, attempts));
        due
    }

    fn held_back(&self, id: RunId) -> bool {
        self.plan.runs[id.0 as usize].extra && self.state.run(id).state.in_reserve()
    }

    /// The commits whose own runs have all ended and that have a held-back repeat left,
    /// with each variant's counted values of their headline metric.
    fn repeat_candidates<'a>(
        &self,
        plan: &'a crate::plan::Plan,
        by_commit: &BTreeMap<usize, Vec<RunId>>,
    ) -> Vec<Candidate<'a>> {
        let mut out = Vec::new();
        for (commit, ids) in by_commit {
            let busy = ids.iter().any(|id| {
                matches!(
                    self.state.run(*id).state,
                    RunState::Active { .. } | RunState::Held { .. } | RunState::Queued
                )
            });
            let next = ids
                .iter()
                .filter(|id| self.held_back(**id))
                .map(|id| plan.runs[id.0 as usize].repeat)
                .min();
            let (false, Some(next)) = (busy, next) else {
                continue;
            };
            let mut sides: Vec<(Variant, Vec<f64>)> = Vec::new();
            let mut key = None;
            for id in ids {
                let spec = &plan.runs[id.0 as usize];
                let rec = self.state.run(*id);
                let ok = rec.state
                    == RunState::Finished {
                        outcome: Outcome::Success,
                    };
                if !ok || spec.warmup || spec.reference {
                    continue;
                }
                let k = *key
                    .get_or_insert_with(|| crate::metric::headline(&rec.metrics).map(|(k, _)| k));
                let Some(v) = k.and_then(|k| rec.metrics.get(k)) else {
                    continue;
                };
                match sides.iter_mut().find(|(var, _)| *var == spec.variant) {
                    Some((_, vals)) => vals.push(*v),
                    None => sides.push((spec.variant.clone(), vec![*v])),
                }
            }
            let Some(Some(k)) = key else { continue };
            let class = stats::band::size_class(plan.commits[*commit].model.as_deref());
            out.push((k, class, *commit, next, sides));
        }
        out
    }

    /// Release the next step of held-back repeats for the commits whose comparison is still
    /// unknown, when nothing else is queued. Called at each turn of the loop.
    pub(super) fn release_repeats(&mut self) -> anyhow::Result<()> {
        let plan = self.plan.clone();
        if plan.defaults.max_repeats <= plan.defaults.repeats
            || self.state.runs.iter().any(|r| r.state == RunState::Queued)
            || !self.repeats_look_due()
        {
            return Ok(());
        }
        let steps = Steps {
            min: plan.defaults.repeats as usize,
            step: 1,
            cap: plan.defaults.max_repeats as usize,
        };
        let cfg = stats::Config {
            alpha: steps.alpha_per_look(0.05),
            ..Default::default()
        };
        let by_commit = by_commit(&plan);
        let candidates = self.repeat_candidates(&plan, &by_commit);
        let bands = learned_bands(&candidates);
        let mut open_commits: Vec<Open> = candidates
            .iter()
            .filter_map(|(k, class, commit, next, sides)| {
                let p = open(k, sides, bands.get(&(*k, *class)), &cfg)?;
                let rank = self.schedule.rank(crate::model::CommitIx(*commit));
                let n = sides.iter().map(|(_, v)| v.len()).min().unwrap_or(0);
                Some((p, rank, *commit, *next, n))
            })
            .collect();
        // Closest to deciding first, then the plan's priority; as many commits as the box
        // has GPUs, so the most valuable run first and the next look sees their results.
        open_commits.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        // Only what the window still has time for, the steps of this look together: a
        // step the window would refuse to start is spare time the night does not have (it
        // stays in reserve).
        let mut gpus_so_far = 0;
        open_commits.retain(|(_, _, commit, repeat, _)| {
            self.step_fits_window(&by_commit[commit], *repeat, &mut gpus_so_far)
        });
        for (p, _, commit, repeat, n) in open_commits
            .into_iter()
            .take(self.opts.gpus.max(1) as usize)
        {
            for id in &by_commit[&commit] {
                if plan.runs[id.0 as usize].repeat == repeat && self.held_back(*id) {
                    self.set_state(
                        *id,
                        RunState::Queued,
                        Some(format!(
                            "extra repeat {}: the comparison is unknown after {n} run(s) a side (p={p:.2}, judged at α={:.3} a look)",
                            repeat + 1,
                            cfg.alpha
                        )),
                    )?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sides(base: &[f64], human: &[f64]) -> Vec<(Variant, Vec<f64>)> {
        vec![
            (Variant::Baseline, base.to_vec()),
            (Variant::Human, human.to_vec()),
        ]
    }

    #[test]
    fn single_runs_are_open_and_a_clear_change_closes() {
        let cfg = stats::Config::default();
        let k = "output_throughput_tok_s";
        // One run a side: only the uncalibrated rule could judge it: open.
        assert!(open(k, &sides(&[100.0], &[110.0]), None, &cfg).is_some());
        // Five a side, 20% apart with little spread: decided.
        let base = [100.0, 101.0, 99.5, 100.5, 100.2];
        let human = [120.0, 121.0, 119.5, 120.4, 120.1];
        assert_eq!(open(k, &sides(&base, &human), None, &cfg), None);
        // No baseline result: repeats cannot help.
        assert_eq!(open(k, &sides(&[], &[1.0, 2.0]), None, &cfg), None);
    }
}
