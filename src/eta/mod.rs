//! When the night ends: the schedule itself, replayed forward. Runs still to come take
//! GPUs in the scheduler's order (commits already started first, then plan order, first
//! fit: a TP-8 run waits for eight free GPUs while smaller ones go past), each for the
//! length learned tonight for its group (model and benchmark kind), runs in flight for
//! what is left of theirs. Three replays, with the lower quartile, the median and the
//! upper quartile of the learned lengths, give the estimate and its interval. Pure.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

/// One run as the estimate sees it.
#[derive(Debug, Clone)]
pub struct Need {
    pub gpus: u32,
    /// Runs of one group take about as long (e.g. `model|kind`).
    pub group: String,
    /// Scheduling order (commit, variant order): smaller first.
    pub order: (usize, u8),
    /// Some variant of its commit has started (it goes before commits not started).
    pub commit_started: bool,
    /// How long a run of its kind typically takes on this runtime (ms; 0: no idea): what
    /// an unseen group's length leans towards while few groups have ended. Early in a
    /// night only the big commits have run, and one or two groups' lengths say little
    /// about the rest.
    pub prior_ms: u64,
}

/// How many groups' worth of evidence the prior counts for.
const PRIOR_WEIGHT: u64 = 4;

/// Where a run is now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Now {
    Queued,
    Active {
        elapsed_ms: u64,
    },
    /// Ended, with how long its last attempt took (when it ran).
    Done {
        took_ms: Option<u64>,
    },
}

/// Time left, with an interval (lower and upper quartile of the learned lengths).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Eta {
    pub left_ms: u64,
    pub low_ms: u64,
    pub high_ms: u64,
    /// No run has ended yet: the lengths are the kinds' typical ones, the interval wide.
    pub from_priors: bool,
}

/// Before any run ends, a run takes between half and twice its kind's typical length.
const PRIOR_SPREAD: [u64; 3] = [50, 100, 200];

/// The estimate for `runs` on `gpus` GPUs. Before any run has ended with a length, from the
/// kinds' typical lengths (every run has one) with a wide interval, so the first minutes of
/// a night already say roughly when it ends; `None` when some run has no prior (the sim).
pub fn estimate(runs: &[(Need, Now)], gpus: u32) -> Option<Eta> {
    let Some(lengths) = Lengths::learn(runs) else {
        if runs.iter().any(|(n, _)| n.prior_ms == 0) {
            return None;
        }
        let at = |q: usize| {
            replay(runs, gpus, &|n: &Need| {
                (n.prior_ms * PRIOR_SPREAD[q] / 100).max(1)
            })
        };
        return Some(Eta {
            left_ms: at(1),
            low_ms: at(0),
            high_ms: at(2),
            from_priors: true,
        });
    };
    let at = |q: usize| replay(runs, gpus, &|n: &Need| lengths.get(n, q));
    Some(Eta {
        left_ms: at(1),
        low_ms: at(0),
        high_ms: at(2),
        from_priors: false,
    })
}

/// Quartiles of the learned lengths, per group and over all.
struct Lengths {
    by_group: BTreeMap<String, [u64; 3]>,
    all: [u64; 3],
    /// The groups' medians, summed, and how many groups.
    medians_sum: u64,
    groups: u64,
}

fn quartiles(v: &mut [u64]) -> [u64; 3] {
    v.sort_unstable();
    let at = |p: usize| v[(v.len() - 1) * p / 4];
    [at(1), at(2), at(3)]
}

impl Lengths {
    fn learn(runs: &[(Need, Now)]) -> Option<Lengths> {
        let mut groups: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        let mut all = Vec::new();
        for (n, now) in runs {
            if let Now::Done { took_ms: Some(t) } = now {
                groups.entry(n.group.clone()).or_default().push(*t);
                all.push(*t);
            }
        }
        if all.is_empty() {
            return None;
        }
        let by_group: BTreeMap<String, [u64; 3]> = groups
            .into_iter()
            .map(|(g, mut v)| (g, quartiles(&mut v)))
            .collect();
        // A group not seen yet is one more group, not one more run: the night's short
        // groups end more runs early on, so a median over runs would make the unseen
        // (often the big, late) groups look short.
        let mut medians: Vec<u64> = by_group.values().map(|q| q[1]).collect();
        let spread = quartiles(&mut all);
        let mid = quartiles(&mut medians)[1];
        let all = [
            mid.saturating_sub(spread[1].saturating_sub(spread[0])),
            mid,
            mid + spread[2].saturating_sub(spread[1]),
        ];
        Some(Lengths {
            medians_sum: medians.iter().sum(),
            groups: medians.len() as u64,
            by_group,
            all,
        })
    }

    /// A run's quartile `q` (0, 1, 2): its group's; for a group not seen yet, the night's
    /// (the groups' mean, leaning on the run's prior while few groups have ended).
    fn get(&self, n: &Need, q: usize) -> u64 {
        if let Some(g) = self.by_group.get(&n.group) {
            return g[q].max(1);
        }
        if n.prior_ms == 0 {
            return self.all[q].max(1);
        }
        let mid = (self.medians_sum + PRIOR_WEIGHT * n.prior_ms) / (self.groups + PRIOR_WEIGHT);
        let half = |a: u64, b: u64| b.saturating_sub(a);
        match q {
            0 => mid.saturating_sub(half(self.all[0], self.all[1])),
            1 => mid,
            _ => mid + half(self.all[1], self.all[2]),
        }
        .max(1)
    }
}

/// A queued run's place in the scheduler's order: (its commit not started, commit, variant).
type Order = (bool, usize, u8);

/// The replay: when the last run ends, from now, with `len` per group.
fn replay(runs: &[(Need, Now)], gpus: u32, len: &dyn Fn(&Need) -> u64) -> u64 {
    let mut free = gpus;
    // Runs in flight end at (time, gpus).
    let mut ends: BinaryHeap<Reverse<(u64, u32)>> = BinaryHeap::new();
    // Queued runs by the GPUs they need, each in scheduling order.
    let mut waiting: BTreeMap<u32, VecDeque<(Order, u64)>> = BTreeMap::new();
    let mut queued: Vec<(Order, u32, u64)> = Vec::new();
    for (n, now) in runs {
        match now {
            Now::Active { elapsed_ms } => {
                let l = len(n);
                // Past its expected length it still needs a little: it has not ended.
                let left = l.saturating_sub(*elapsed_ms).max(l / 5).max(1);
                free = free.saturating_sub(n.gpus);
                ends.push(Reverse((left, n.gpus)));
            }
            Now::Queued if n.gpus <= gpus => {
                let key = (!n.commit_started, n.order.0, n.order.1);
                queued.push((key, n.gpus, len(n)));
            }
            _ => {}
        }
    }
    queued.sort_by_key(|q| q.0);
    for (key, g, l) in queued {
        waiting.entry(g).or_default().push_back((key, l));
    }
    let mut t = 0u64;
    let mut last = 0u64;
    loop {
        // Start what fits, earliest in order first; past a waiting run that does not fit,
        // only what backfills (the engine's rule, `scheduler::may_backfill`).
        while let Some((_, head)) = waiting
            .iter()
            .filter_map(|(g, q)| q.front().map(|(k, _)| (*k, *g)))
            .min()
        {
            let ends_now: Vec<(std::time::Duration, u32)> = ends
                .iter()
                .map(|Reverse((e, g))| (std::time::Duration::from_millis(e - t), *g))
                .collect();
            let pick = waiting
                .range(..=free)
                .filter_map(|(g, q)| q.front().map(|(k, l)| (*k, *g, *l)))
                .filter(|(_, g, l)| {
                    head <= free
                        || *g == head
                        || crate::scheduler::may_backfill(
                            free,
                            head,
                            &ends_now,
                            *g,
                            std::time::Duration::from_millis(*l),
                        )
                })
                .map(|(k, g, _)| (k, g))
                .min();
            let Some((_, g)) = pick else { break };
            let (_, l) = waiting
                .get_mut(&g)
                .and_then(VecDeque::pop_front)
                .expect("front");
            if waiting.get(&g).is_some_and(VecDeque::is_empty) {
                waiting.remove(&g);
            }
            free -= g;
            ends.push(Reverse((t + l, g)));
        }
        let Some(Reverse((end, g))) = ends.pop() else {
            return last;
        };
        t = end;
        last = last.max(end);
        free += g;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn need(gpus: u32, group: &str, commit: usize) -> Need {
        Need {
            gpus,
            group: group.into(),
            order: (commit, 0),
            commit_started: false,
            prior_ms: 0,
        }
    }

    #[test]
    fn nothing_learned_and_no_prior_is_no_estimate() {
        assert_eq!(estimate(&[(need(1, "a", 0), Now::Queued)], 8), None);
    }

    /// The first minutes of a night with 8-GPU runs: no run has ended, yet the kinds'
    /// typical lengths give an end with a wide interval.
    #[test]
    fn before_any_run_ends_the_priors_give_a_wide_estimate() {
        let with_prior = |gpus, commit, prior_ms| Need {
            prior_ms,
            ..need(gpus, "big", commit)
        };
        let runs = vec![
            (
                with_prior(8, 0, 1_000_000),
                Now::Active {
                    elapsed_ms: 100_000,
                },
            ),
            (with_prior(8, 1, 1_000_000), Now::Queued),
            (with_prior(1, 2, 600_000), Now::Queued),
        ];
        let e = estimate(&runs, 8).unwrap();
        assert!(e.from_priors);
        // 900 s left of the running one, then 1000 s, then 600 s: 2500 s at the median.
        assert_eq!(e.left_ms, 2_500_000);
        assert!(
            e.low_ms < e.left_ms && e.high_ms > e.left_ms * 3 / 2,
            "{e:?}"
        );
        // One run ended: the night's own lengths take over.
        let mut learned = runs.clone();
        learned.push((
            with_prior(1, 3, 600_000),
            Now::Done {
                took_ms: Some(500_000),
            },
        ));
        assert!(!estimate(&learned, 8).unwrap().from_priors);
    }

    #[test]
    fn an_eight_gpu_run_waits_for_all_eight() {
        // Seven 1-GPU runs of 10 units in flight, just started; one TP-8 run of 10 units
        // queued: it starts when the last of them ends, so 20 in all, not 10 + 10/8.
        let mut runs: Vec<(Need, Now)> = (0..7)
            .map(|i| (need(1, "small", i), Now::Active { elapsed_ms: 0 }))
            .collect();
        runs.push((need(1, "small", 99), Now::Done { took_ms: Some(10) }));
        runs.push((need(8, "small", 100), Now::Queued));
        let e = estimate(&runs, 8).unwrap();
        assert_eq!(e.left_ms, 20);
    }

    #[test]
    fn groups_keep_their_own_lengths_and_the_interval_holds_the_estimate() {
        let mut runs = Vec::new();
        for (t, g) in [
            (100, "fast"),
            (120, "fast"),
            (80, "fast"),
            (1000, "slow"),
            (900, "slow"),
        ] {
            runs.push((need(1, g, 0), Now::Done { took_ms: Some(t) }));
        }
        for i in 0..4 {
            runs.push((need(1, "slow", i + 1), Now::Queued));
        }
        let e = estimate(&runs, 2).unwrap();
        // Four slow runs on two GPUs: two rounds of a slow run.
        assert!((1800..=2000).contains(&e.left_ms), "{e:?}");
        assert!(e.low_ms <= e.left_ms && e.left_ms <= e.high_ms, "{e:?}");
        // An unseen group takes the night's median.
        let unseen = estimate(
            &[
                (need(1, "fast", 0), Now::Done { took_ms: Some(50) }),
                (need(1, "new", 1), Now::Queued),
            ],
            1,
        )
        .unwrap();
        assert_eq!(unseen.left_ms, 50);
    }

    #[test]
    fn an_unseen_group_leans_on_its_kinds_typical_length_while_few_groups_have_ended() {
        let mut unseen = need(1, "new", 1);
        unseen.prior_ms = 1000;
        let runs = [
            (need(1, "fast", 0), Now::Done { took_ms: Some(50) }),
            (unseen.clone(), Now::Queued),
        ];
        // One group seen (50) against the prior (1000) counted as four groups.
        assert_eq!(estimate(&runs, 1).unwrap().left_ms, (50 + 4 * 1000) / 5);
        // Many groups seen: their lengths outweigh it.
        let mut many: Vec<(Need, Now)> = (0..40)
            .map(|i| {
                (
                    need(1, &format!("g{i}"), i),
                    Now::Done { took_ms: Some(100) },
                )
            })
            .collect();
        many.push((unseen, Now::Queued));
        let left = estimate(&many, 1).unwrap().left_ms;
        assert!((100..=200).contains(&left), "{left}");
    }
}
