//! Which queued run starts next, and on which GPUs. Pure: given the runs, their needs and
//! the free GPUs, it answers; the engine acts. It never hands out a GPU that is in use.
//!
//! Order: runs of a commit that has already started come first (its variants are measured
//! back to back on the same GPUs, baseline first), then commits in plan order. A run that
//! does not fit waits; smaller runs behind it may start (first fit).

use std::collections::{BTreeSet, HashMap};

mod schedule;
pub use schedule::Schedule;

/// Where a queued run's commit sorts: its round, then the commit's rank tonight (not its
/// index in the plan: the night reorders commits). `Place(0)` is ahead of every commit (a
/// drift reference is due now).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Place(pub usize);

/// What the reference [`pick`] needs to know about one queued run (the queue's tests).
#[cfg(test)]
#[derive(Debug, Clone)]
pub struct Candidate {
    pub index: usize,
    pub commit: usize,
    pub variant_order: u8,
    pub gpus: u32,
    /// GPUs the commit's earlier variants used, preferred for affinity.
    pub preferred: Vec<u32>,
    /// Some variant of this commit has started already.
    pub commit_started: bool,
}

/// The machine's GPUs and which are taken.
#[derive(Debug, Clone)]
pub struct GpuPool {
    total: u32,
    busy: BTreeSet<u32>,
}

impl GpuPool {
    pub fn new(total: u32) -> Self {
        GpuPool {
            total,
            busy: BTreeSet::new(),
        }
    }
    pub fn total(&self) -> u32 {
        self.total
    }
    pub fn free(&self) -> u32 {
        self.total - self.busy.len() as u32
    }
    pub fn busy(&self) -> &BTreeSet<u32> {
        &self.busy
    }

    /// Take `n` GPUs, preferring `preferred` when all of those are free.
    pub fn take(&mut self, n: u32, preferred: &[u32]) -> Option<Vec<u32>> {
        if n > self.free() {
            return None;
        }
        let ids: Vec<u32> = if preferred.len() as u32 == n
            && preferred
                .iter()
                .all(|g| *g < self.total && !self.busy.contains(g))
        {
            preferred.to_vec()
        } else {
            (0..self.total)
                .filter(|g| !self.busy.contains(g))
                .take(n as usize)
                .collect()
        };
        for g in &ids {
            self.busy.insert(*g);
        }
        Some(ids)
    }

    pub fn release(&mut self, ids: &[u32]) {
        for g in ids {
            self.busy.remove(g);
        }
    }
}

/// Pick the next run to start among `candidates` (queued and eligible now), or none.
/// A run needing 0 GPUs (tests) always fits. The reference the incremental [`Queue`] is
/// tested against.
#[cfg(test)]
pub(crate) fn pick(candidates: &[Candidate], pool: &GpuPool) -> Option<usize> {
    let mut order: Vec<&Candidate> = candidates.iter().collect();
    order.sort_by_key(|c| (!c.commit_started, c.commit, c.variant_order, c.index));
    order
        .into_iter()
        .find(|c| c.gpus <= pool.free())
        .map(|c| c.index)
}

/// The queued runs in scheduling order, kept incrementally so that picking the next run
/// costs O(log n) instead of a scan of every run (a 10,000-run sweep stays linear).
/// Same order and first-fit rule as [`pick`], which stays the reference.
#[derive(Debug, Default, Clone)]
pub struct Queue {
    /// (commit not started yet, the commit's place, variant order, run index)
    set: BTreeSet<(bool, Place, u8, usize)>,
    entries: HashMap<usize, (Place, u8, u32)>,
    by_commit: HashMap<Place, BTreeSet<usize>>,
    /// Commits with a variant started, and the GPUs it first ran on (affinity).
    started: HashMap<Place, Vec<u32>>,
    zero_gpu: usize,
}

impl Queue {
    pub fn len(&self) -> usize {
        self.set.len()
    }

    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    pub fn contains(&self, index: usize) -> bool {
        self.entries.contains_key(&index)
    }

    pub fn push(&mut self, index: usize, commit: Place, order: u8, gpus: u32) {
        if self.entries.contains_key(&index) {
            return;
        }
        let fresh = !self.started.contains_key(&commit);
        self.set.insert((fresh, commit, order, index));
        self.entries.insert(index, (commit, order, gpus));
        self.by_commit.entry(commit).or_default().insert(index);
        if gpus == 0 {
            self.zero_gpu += 1;
        }
    }

    pub fn remove(&mut self, index: usize) {
        let Some((commit, order, gpus)) = self.entries.remove(&index) else {
            return;
        };
        let fresh = !self.started.contains_key(&commit);
        self.set.remove(&(fresh, commit, order, index));
        if let Some(s) = self.by_commit.get_mut(&commit) {
            s.remove(&index);
        }
        if gpus == 0 {
            self.zero_gpu -= 1;
        }
    }

    /// A variant of `commit` started (on `gpus`): its other variants now go first.
    pub(crate) fn commit_started(&mut self, commit: Place, gpus: &[u32]) {
        if self.started.contains_key(&commit) {
            return;
        }
        self.started.insert(commit, gpus.to_vec());
        for &index in self.by_commit.get(&commit).into_iter().flatten() {
            let (_, order, _) = self.entries[&index];
            self.set.remove(&(true, commit, order, index));
            self.set.insert((false, commit, order, index));
        }
    }

    /// Some variant of `commit` has started.
    pub(crate) fn is_started(&self, commit: Place) -> bool {
        self.started.contains_key(&commit)
    }

    /// GPUs the queued runs of `commit` need together.
    pub(crate) fn queued_gpus(&self, commit: Place) -> u32 {
        self.by_commit
            .get(&commit)
            .into_iter()
            .flatten()
            .map(|i| self.entries[i].2)
            .sum()
    }

    pub(crate) fn preferred(&self, commit: Place) -> &[u32] {
        self.started.get(&commit).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The first `eligible` run in order, whether or not it fits now: the one a smaller
    /// run may pass only by [`may_backfill`].
    pub fn head(&self, eligible: impl Fn(usize) -> bool) -> Option<(usize, u32)> {
        self.set
            .iter()
            .find(|(_, _, _, i)| eligible(*i))
            .map(|(_, _, _, i)| (*i, self.entries[i].2))
    }

    /// The next run that fits the free GPUs and is `eligible` now (e.g. its backoff ended).
    pub(crate) fn pick(&self, pool: &GpuPool, eligible: impl Fn(usize) -> bool) -> Option<usize> {
        if pool.free() == 0 && self.zero_gpu == 0 {
            return None;
        }
        self.set
            .iter()
            .find(|(_, _, _, i)| self.entries[i].2 <= pool.free() && eligible(*i))
            .map(|(_, _, _, i)| *i)
    }
}

/// Backfilling (EASY): the first waiting run needs `head` GPUs and `free` are free now;
/// `ends` holds, per run in flight, when it is expected to end (from now) and its GPUs.
/// A run of `gpus` GPUs expected to take `expect` may start ahead of the waiting one only
/// if it ends before enough GPUs come free for it (its shadow time), or if it uses GPUs the
/// waiting run will not need then. So a TP-8 run is never starved by a stream of 1-GPU
/// runs, and the GPUs it waits for still work meanwhile.
pub(crate) fn may_backfill(
    free: u32,
    head: u32,
    ends: &[(std::time::Duration, u32)],
    gpus: u32,
    expect: std::time::Duration,
) -> bool {
    let mut ends = ends.to_vec();
    ends.sort();
    let (mut avail, mut shadow) = (free, std::time::Duration::ZERO);
    for (t, g) in ends {
        if avail >= head {
            break;
        }
        avail += g;
        shadow = t;
    }
    if avail < head {
        // It cannot start even when every run in flight has ended: nothing to keep for it.
        return true;
    }
    expect <= shadow || gpus <= (avail - head).min(free)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_waiting_tp8_run_is_not_starved_by_small_ones() {
        use std::time::Duration as D;
        let m = D::from_secs(60);
        // Seven GPUs busy (ending at 1..7 min), one free; a TP-8 run waits.
        let ends: Vec<(D, u32)> = (1..=7).map(|k| (m * k, 1)).collect();
        // A 10-minute 1-GPU run would hold the 8th GPU past the 7-minute shadow: no.
        assert!(!may_backfill(1, 8, &ends, 1, m * 10));
        // A 5-minute one ends before: yes.
        assert!(may_backfill(1, 8, &ends, 1, m * 5));
        // A TP-4 run waiting while 6 GPUs free up early: GPUs beyond its 4 are spare.
        let ends: Vec<(D, u32)> = vec![(m, 4), (m * 2, 4)];
        assert!(may_backfill(0, 4, &ends, 0, m * 10));
        assert!(!may_backfill(0, 4, &ends, 1, m * 10));
    }

    fn cand(index: usize, commit: usize, order: u8, gpus: u32, started: bool) -> Candidate {
        Candidate {
            index,
            commit,
            variant_order: order,
            gpus,
            preferred: vec![],
            commit_started: started,
        }
    }

    #[test]
    fn started_commits_first_then_plan_order_baseline_first() {
        let pool = GpuPool::new(1);
        let c = [
            cand(0, 0, 1, 1, false),
            cand(1, 0, 0, 1, false),
            cand(5, 3, 1, 1, true),
        ];
        assert_eq!(pick(&c, &pool), Some(5));
        assert_eq!(pick(&c[..2], &pool), Some(1));
    }

    #[test]
    fn big_runs_wait_and_small_ones_fit_around_them() {
        let mut pool = GpuPool::new(4);
        pool.take(2, &[]).unwrap();
        let c = [cand(0, 0, 0, 4, false), cand(1, 1, 0, 1, false)];
        assert_eq!(pick(&c, &pool), Some(1));
        assert_eq!(pick(&c[..1], &pool), None);
    }

    #[test]
    fn affinity_is_honoured_when_free() {
        let mut pool = GpuPool::new(4);
        assert_eq!(pool.take(2, &[2, 3]).unwrap(), vec![2, 3]);
        assert_eq!(pool.take(2, &[2, 3]).unwrap(), vec![0, 1]);
        assert!(pool.take(1, &[]).is_none());
    }

    proptest! {
        /// The incremental queue picks exactly what the reference `pick` picks.
        #[test]
        fn queue_agrees_with_pick(runs in proptest::collection::vec((0usize..6, 0u8..3, 0u32..4), 1..40), started in proptest::collection::vec(0usize..6, 0..4), busy in 0u32..4) {
            let mut pool = GpuPool::new(4);
            pool.take(busy, &[]);
            let mut q = Queue::default();
            for c in &started {
                q.commit_started(Place(*c), &[]);
            }
            let mut cands = Vec::new();
            for (i, (commit, order, gpus)) in runs.iter().enumerate() {
                q.push(i, Place(*commit), *order, *gpus);
                cands.push(Candidate { index: i, commit: *commit, variant_order: *order, gpus: *gpus, preferred: vec![], commit_started: started.contains(commit) });
            }
            prop_assert_eq!(q.pick(&pool, |_| true), pick(&cands, &pool));
            // Removing the pick gives the same next pick as the reference without it.
            if let Some(first) = q.pick(&pool, |_| true) {
                q.remove(first);
                cands.retain(|c| c.index != first);
                prop_assert_eq!(q.pick(&pool, |_| true), pick(&cands, &pool));
            }
        }

        /// Whatever the sequence of starts and finishes, no GPU is ever handed out twice
        /// and never more than the machine has.
        #[test]
        fn never_oversubscribes(total in 1u32..9, ops in proptest::collection::vec((0u32..9, any::<bool>(), 0usize..16), 1..200)) {
            let mut pool = GpuPool::new(total);
            let mut held: Vec<Vec<u32>> = Vec::new();
            for (need, finish, which) in ops {
                if finish && !held.is_empty() {
                    let ids = held.remove(which % held.len());
                    pool.release(&ids);
                } else {
                    let c = [cand(0, 0, 0, need, false)];
                    if pick(&c, &pool).is_some() {
                        let ids = pool.take(need, &[]).expect("pick said it fits");
                        held.push(ids);
                    } else {
                        prop_assert!(need > pool.free());
                    }
                }
                let mut all: Vec<u32> = held.iter().flatten().copied().collect();
                let n = all.len();
                all.sort();
                all.dedup();
                prop_assert_eq!(all.len(), n, "a GPU was handed out twice");
                prop_assert!(n as u32 <= total);
                prop_assert!(all.iter().all(|g| *g < total));
                prop_assert_eq!(pool.free(), total - n as u32);
            }
        }
    }
}
