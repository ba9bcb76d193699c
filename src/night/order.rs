//! The order runs take GPUs in: one schedule for the images and the GPUs.
//!
//! The engine's scheduler ([`crate::scheduler::Queue`]) orders queued runs by (a started
//! commit first, commit, variant order, run index); among those whose image is here the
//! first takes GPUs, others passing it only by backfilling. The night keeps that rule and
//! changes only what "commit" sorts by: a rank per commit from [`ranks`] instead of its
//! place in the plan.
//! The images' look-ahead walks the queue in the same order, so pulls come in the order
//! the GPUs will need them.
//!
//! Why this rank:
//! - commits needing many GPUs go first: the box is empty at dusk, so a TP-8 run costs no
//!   drain there, and variants of one big commit hand all their GPUs to each other;
//!   placed later, an 8-GPU run waits for the last 1-GPU run of a batch to end while up
//!   to 7 GPUs idle (what backfilling cannot fill);
//! - among big commits, one whose baseline is built from source goes first: its human
//!   image is pulled first and is the build's source, so the build starts at dusk;
//! - 1-GPU commits longest first, so the night ends on short runs (a short tail);
//! - a 1-GPU commit whose baseline must be built is placed where its build is expected
//!   done (builds run a few at a time on the CPU), so its three variants run together
//!   instead of the human run early and the other two an hour later.

use crate::model::CommitIx;
use std::collections::BTreeMap;

/// A commit's place in the night's order: 0 runs first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Rank(pub usize);

/// Each commit's rank. A commit the order does not know (skipped, added since) keeps its
/// plan place, behind none of the ranked ones it was before: one rule for the scheduler,
/// the ETA's replay and the planner.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ranks(BTreeMap<CommitIx, Rank>);

impl Ranks {
    pub fn of(&self, c: CommitIx) -> Rank {
        self.0.get(&c).copied().unwrap_or(Rank(c.0))
    }

    /// The rank of a commit the order knows.
    pub fn get(&self, c: CommitIx) -> Option<Rank> {
        self.0.get(&c).copied()
    }

    pub fn iter(&self) -> impl Iterator<Item = (CommitIx, Rank)> + '_ {
        self.0.iter().map(|(c, r)| (*c, *r))
    }
}

impl FromIterator<(CommitIx, Rank)> for Ranks {
    fn from_iter<I: IntoIterator<Item = (CommitIx, Rank)>>(it: I) -> Ranks {
        Ranks(it.into_iter().collect())
    }
}

/// What the order needs to know of one commit's runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Load {
    pub commit: CommitIx,
    /// GPUs its runs need (the largest, if they differ).
    pub gpus: u32,
    /// GPU-seconds of all its runs (estimates: durations seen before, or timeouts).
    pub gpu_secs: f64,
    /// Seconds of building one of its images from source before its runs can all go
    /// (0: nothing to build).
    pub build_secs: f64,
}

/// Commit → rank (0 runs first). `gpus`: the box's; `build_slots`: builds at once;
/// `head_s`: expected seconds before the first image is here.
pub fn ranks(loads: &[Load], gpus: u32, build_slots: usize, head_s: f64) -> Ranks {
    let g = gpus.max(1) as f64;
    let slots = build_slots.max(1);
    let mut big: Vec<&Load> = loads.iter().filter(|l| l.gpus > 1).collect();
    big.sort_by(|a, b| {
        (std::cmp::Reverse(a.gpus), a.build_secs == 0.0, a.commit).cmp(&(
            std::cmp::Reverse(b.gpus),
            b.build_secs == 0.0,
            b.commit,
        ))
    });
    let mut plain: Vec<&Load> = loads
        .iter()
        .filter(|l| l.gpus <= 1 && l.build_secs == 0.0)
        .collect();
    plain.sort_by(|a, b| {
        b.gpu_secs
            .total_cmp(&a.gpu_secs)
            .then(a.commit.cmp(&b.commit))
    });
    let mut built: Vec<&Load> = loads
        .iter()
        .filter(|l| l.gpus <= 1 && l.build_secs > 0.0)
        .collect();
    built.sort_by_key(|l| l.commit);

    let mut order: Vec<CommitIx> = Vec::with_capacity(loads.len());
    // Expected time the next commit starts, and when each build slot frees.
    let mut t = head_s;
    let mut slot_free = vec![head_s; slots];
    let mut build = |secs: f64| -> f64 {
        let s = slot_free
            .iter_mut()
            .min_by(|a, b| a.total_cmp(b))
            .expect("at least one slot");
        *s += secs;
        *s
    };
    for l in &big {
        if l.build_secs > 0.0 {
            build(l.build_secs);
        }
        order.push(l.commit);
        t += l.gpu_secs / g;
    }
    // Builds start in rank order: their expected ends, as the slots free.
    let ready: Vec<f64> = built.iter().map(|l| build(l.build_secs)).collect();
    let (mut p, mut b) = (0, 0);
    while p < plain.len() || b < built.len() {
        let next = if b < built.len() && (ready[b] <= t || p == plain.len()) {
            b += 1;
            built[b - 1]
        } else {
            p += 1;
            plain[p - 1]
        };
        order.push(next.commit);
        t += next.gpu_secs / g;
    }
    order
        .into_iter()
        .enumerate()
        .map(|(r, c)| (c, Rank(r)))
        .collect()
}

/// The key a queued run sorts by: the engine's, with the commit's rank for the commit.
pub fn key(started: bool, rank: Rank, variant_order: u8, index: usize) -> (bool, Rank, u8, usize) {
    (!started, rank, variant_order, index)
}

/// Each commit's load in `plan`, with its operator priority (no builds known yet; a run's
/// length is the same guess for all, so only GPUs and run counts weigh).
fn loads_of(plan: &crate::plan::Plan) -> Vec<(i32, Load)> {
    let mut loads: BTreeMap<usize, (i32, Load)> = BTreeMap::new();
    for spec in plan.runs.iter().filter(|r| r.skip_reason.is_none()) {
        let (_, l) = loads.entry(spec.commit).or_insert_with(|| {
            (
                plan.commits[spec.commit].priority,
                Load {
                    commit: CommitIx(spec.commit),
                    gpus: 0,
                    gpu_secs: 0.0,
                    build_secs: 0.0,
                },
            )
        });
        l.gpus = l.gpus.max(spec.gpus);
        l.gpu_secs += spec.gpus.max(1) as f64;
    }
    loads.into_values().collect()
}

/// The engine's rank of each commit of `plan` on a box of `gpus`: the operator's priority
/// first (higher earlier), then [`ranks`] within each priority. What the scheduler sorts
/// by, and what the ETA's replay sorts by too.
pub(crate) fn plan_ranks(plan: &crate::plan::Plan, gpus: u32) -> Ranks {
    let mut tiers: BTreeMap<std::cmp::Reverse<i32>, Vec<Load>> = BTreeMap::new();
    for (p, l) in loads_of(plan) {
        tiers.entry(std::cmp::Reverse(p)).or_default().push(l);
    }
    let mut out = BTreeMap::new();
    for loads in tiers.values() {
        let base = out.len();
        for (c, r) in ranks(loads, gpus.max(1), 2, 0.0).iter() {
            out.insert(c, Rank(base + r.0));
        }
    }
    Ranks(out)
}

/// Under a window, the order that finishes the most wanted commits: the operator's
/// priority first, then the cheapest (fewest GPU-runs), then plan order — so what does not
/// fit is the least wanted and the most expensive, and every commit started can finish.
pub(crate) fn window_ranks(plan: &crate::plan::Plan) -> Ranks {
    let mut loads = loads_of(plan);
    loads.sort_by(|(pa, a), (pb, b)| {
        pb.cmp(pa)
            .then(a.gpu_secs.total_cmp(&b.gpu_secs))
            .then(a.commit.cmp(&b.commit))
    });
    loads
        .into_iter()
        .enumerate()
        .map(|(r, (_, l))| (l.commit, Rank(r)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rank of a commit the order knows.
    fn at(r: &Ranks, commit: usize) -> usize {
        r.get(CommitIx(commit)).expect("a ranked commit").0
    }

    fn load(commit: usize, gpus: u32, gpu_secs: f64, build_secs: f64) -> Load {
        Load {
            commit: CommitIx(commit),
            gpus,
            gpu_secs,
            build_secs,
        }
    }

    #[test]
    fn big_commits_first_a_built_one_leading_then_longest_first() {
        let r = ranks(
            &[
                load(0, 1, 1000.0, 0.0),
                load(1, 8, 24000.0, 0.0),
                load(2, 4, 12000.0, 0.0),
                load(3, 8, 24000.0, 2700.0),
                load(4, 1, 3000.0, 0.0),
            ],
            8,
            2,
            160.0,
        );
        let mut by_rank: Vec<(usize, usize)> = r.iter().map(|(c, r)| (r.0, c.0)).collect();
        by_rank.sort();
        let order: Vec<usize> = by_rank.into_iter().map(|(_, c)| c).collect();
        assert_eq!(order, vec![3, 1, 2, 4, 0]);
    }

    #[test]
    fn a_built_commit_waits_in_the_order_until_its_build_is_expected_done() {
        // Ten 1-GPU commits of 800 GPU-s (100 s of the box each) and one to build (2700 s).
        let mut loads: Vec<Load> = (0..40).map(|c| load(c, 1, 800.0, 0.0)).collect();
        loads.push(load(40, 1, 800.0, 2700.0));
        let r = ranks(&loads, 8, 2, 0.0);
        // 2700 s of builds = 27 commits of 100 s ahead of it.
        assert_eq!(at(&r, 40), 27);
    }
    fn plan_with(commits: &[(u32, i32)]) -> crate::plan::Plan {
        let mut t = String::from(
            "schema_version = 1\nname = \"p\"\n[defaults]\nvariants = [\"baseline\", \"human\"]\n",
        );
        for (i, (gpus, prio)) in commits.iter().enumerate() {
            t.push_str(&format!(
                "[[commits]]\ncommit = \"{i:040x}\"\nparent = \"{:040x}\"\ngpu_config = \"H100:{gpus}\"\npriority = {prio}\nperf_command = '''python benchmarks/benchmark_throughput.py --model m/x --input-len 256 --output-len 256 -tp {gpus}'''\n",
                i + 0x100
            ));
        }
        let p = std::path::Path::new("p.toml");
        crate::plan::Plan::from_str_at("p.toml", t, std::path::Path::new("."), p).unwrap()
    }

    #[test]
    fn the_operators_priority_comes_first_then_the_nights_order() {
        // Commit 2 is wanted most; among the rest the 8-GPU one goes first, as always.
        let plan = plan_with(&[(1, 0), (8, 0), (1, 5), (1, 0)]);
        assert_eq!(plan.commits[2].priority, 5);
        let r = plan_ranks(&plan, 8);
        assert_eq!(at(&r, 2), 0, "{r:?}");
        assert_eq!(at(&r, 1), 1, "{r:?}");
    }

    #[test]
    fn under_a_window_the_most_wanted_then_the_cheapest_go_first() {
        let plan = plan_with(&[(8, 0), (1, 0), (2, 0), (8, 3)]);
        let r = window_ranks(&plan);
        // Priority first (even the dearest), then the cheapest, so what is left out is
        // the least wanted and dearest.
        assert_eq!(at(&r, 3), 0, "{r:?}");
        assert_eq!(at(&r, 1), 1, "{r:?}");
        assert_eq!(at(&r, 2), 2, "{r:?}");
        assert_eq!(at(&r, 0), 3, "{r:?}");
    }

    #[test]
    fn a_commit_the_order_does_not_know_keeps_its_plan_place() {
        let r: Ranks = [(CommitIx(4), Rank(0)), (CommitIx(0), Rank(1))]
            .into_iter()
            .collect();
        assert_eq!(r.of(CommitIx(4)), Rank(0));
        assert_eq!(r.of(CommitIx(0)), Rank(1));
        // Commit 2 was added since the order was made: it sorts at its plan place.
        assert_eq!(r.of(CommitIx(2)), Rank(2));
        assert_eq!(r.get(CommitIx(2)), None);
    }
}
