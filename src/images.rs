//! Which images to bring onto the box next and which to remove, within a disk budget.
//!
//! Pure: the engine (real runs) and `bench night` (a simulated night) feed it the same
//! facts — the images the remaining runs need, in the order they will run, what is on the
//! disk and what is coming down — and act on the steps it returns. One rule for both, so
//! the bench measures the policy the product really follows.
//!
//! The rules, in order:
//! - the look-ahead is the first `lookahead` distinct images of the runs to come; pulls go
//!   down it in the order the GPUs will need them, as far as the disk allows;
//! - an image within the look-ahead is never removed, nor one in use, nor one the operator
//!   keeps, nor one that is needed but not queued (a held run's), nor the source of a make;
//! - bytes are counted by layers where they are known ([`layers`]): a pull costs the layers
//!   not already here, a removal frees the layers no other image uses;
//! - a fetch starts only if, counting every fetch already in flight at its expected size,
//!   the disk keeps `min_free` bytes free and the sweep's images stay within `max_bytes`;
//! - when a fetch does not fit, images nobody needs any more are removed (those freeing the
//!   most first, so the fewest removals make room), then images needed only past the
//!   look-ahead (the one needed last first), until it fits;
//! - images made on the box (overlays, builds; [`Stock::made`]) use CPU slots, not the
//!   link: the longest makes start first, anywhere in the look-ahead, because a 45-minute
//!   build started when its runs come up leaves them waiting; they leave one slot to the
//!   short makes near the GPUs. A make needs its source here, so the source is pulled first;
//! - when nothing can be removed and nothing is in flight or in use, the box is full:
//!   [`Step::Full`] (the engine pauses the sweep and alerts rather than thrash) — if the
//!   image's size is known; short of free disk only by the guess for an image of unknown
//!   size, it is fetched anyway (only evidence blocks: the pull's own failure is the
//!   evidence). The operator's cap (`max_bytes`) holds either way.

pub mod layers;

use layers::{Disk, Manifest};
use std::collections::{BTreeMap, BTreeSet};

/// The operator's limits.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    /// Free bytes to keep on the disk holding the images.
    pub min_free: u64,
    /// At most this many bytes of the sweep's own images on disk (None: no cap).
    pub max_bytes: Option<u64>,
    /// Pulls at once (a link shared by several pulls gains nothing past a few).
    pub max_fetches: usize,
    /// How many distinct upcoming images to prepare ahead of the GPUs (the disk is the
    /// real limit; this bounds the work per decision and what eviction protects).
    pub lookahead: usize,
    /// Expected size of an image not yet on the box (vLLM images: 17–22 GB).
    pub default_size: u64,
    /// Images never removed (exact references).
    pub keep: BTreeSet<String>,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            min_free: 25_000_000_000,
            max_bytes: None,
            max_fetches: 2,
            lookahead: 64,
            default_size: 20_000_000_000,
            keep: BTreeSet::new(),
        }
    }
}

/// How an image is made on the box rather than pulled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Made {
    /// The image it is made from (which must be here first).
    pub source: String,
    /// Expected seconds of making (an overlay minutes, a build from source most of an hour).
    pub secs: u64,
}

/// A make this long is a build: builds start first and leave a slot to the short makes.
pub const LONG_MAKE_S: u64 = 600;

/// What is on the box now.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stock {
    /// Free bytes on the images' disk (None: unknown; only `max_bytes` applies).
    pub free: Option<u64>,
    /// The sweep's images on disk → bytes (an image and those made from it together).
    pub present: BTreeMap<String, u64>,
    /// Fetches in flight → expected bytes.
    pub fetching: BTreeMap<String, u64>,
    /// Images a running container uses.
    pub in_use: BTreeSet<String>,
    /// Expected sizes of images not yet here (from a registry, or learned earlier).
    pub sizes: BTreeMap<String, u64>,
    /// Layers of images, where known. An image not listed is one layer of its own.
    pub layers: BTreeMap<String, Manifest>,
    /// Images known to be made on the box, and from what (empty: every image is pulled).
    pub made: BTreeMap<String, Made>,
    /// Makes at once: the CPU the box gives to builds (0: makes count as pulls).
    pub make_slots: usize,
}

/// One thing to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Remove this image (and the images made from it) to make room.
    Evict(String),
    /// Start bringing this image onto the box (pull it, or make it: its source is here).
    Fetch(String),
    /// The next image does not fit and nothing can be removed yet: wait for runs to end.
    Wait { image: String, short_by: u64 },
    /// The next image cannot fit even with every removable image gone and nothing running:
    /// the sweep cannot go on without the operator.
    Full { image: String, short_by: u64 },
}

/// The steps to take now. `upcoming`: the images of the runs that will run next, in
/// order (repeats allowed); `needed`: every image some remaining run still needs.
pub fn plan(
    upcoming: &[String],
    needed: &BTreeSet<String>,
    stock: &Stock,
    b: &Budget,
) -> Vec<Step> {
    let mut p = Planner::new(upcoming, needed, stock, b);
    p.builds_first();
    p.in_order();
    p.steps
}

struct Planner<'a> {
    s: Stock,
    b: &'a Budget,
    /// Everything some remaining run needs, the upcoming images included.
    needed: BTreeSet<String>,
    /// The look-ahead, in order: never removed.
    horizon: Vec<String>,
    /// Image → where its first queued run stands (past the look-ahead too).
    position: BTreeMap<String, usize>,
    /// Layers of the images here, and of those coming.
    on: Disk,
    coming: Disk,
    steps: Vec<Step>,
}

impl<'a> Planner<'a> {
    fn new(upcoming: &[String], needed: &BTreeSet<String>, stock: &Stock, b: &'a Budget) -> Self {
        let mut position = BTreeMap::new();
        for img in upcoming {
            let n = position.len();
            position.entry(img.clone()).or_insert(n);
        }
        let mut horizon: Vec<(usize, String)> = position
            .iter()
            .filter(|(_, &at)| at < b.lookahead)
            .map(|(i, &at)| (at, i.clone()))
            .collect();
        horizon.sort();
        let mut p = Planner {
            s: stock.clone(),
            b,
            // What is about to run is needed, whatever the caller's `needed` says.
            needed: needed.iter().chain(upcoming).cloned().collect(),
            horizon: horizon.into_iter().map(|(_, i)| i).collect(),
            position,
            on: Disk::default(),
            coming: Disk::default(),
            steps: Vec::new(),
        };
        p.on = Disk::of(
            &p.s.present
                .keys()
                .map(|i| p.manifest(i))
                .collect::<Vec<_>>(),
        );
        p.coming = Disk::of(
            &p.s.fetching
                .keys()
                .map(|i| p.manifest(i))
                .collect::<Vec<_>>(),
        );
        p
    }

    fn manifest(&self, img: &str) -> Manifest {
        if let Some(m) = self.s.layers.get(img) {
            return m.clone();
        }
        let size = [&self.s.present, &self.s.fetching, &self.s.sizes]
            .iter()
            .find_map(|m| m.get(img).copied())
            .unwrap_or(self.b.default_size);
        Manifest::from([(img.to_string(), size)])
    }

    /// Start fetching `img`: counted as coming at its expected size.
    fn fetch(&mut self, img: &str) {
        let m = self.manifest(img);
        self.coming.add(&m);
        self.s.fetching.insert(img.to_string(), m.values().sum());
        self.steps.push(Step::Fetch(img.to_string()));
    }

    /// Whether `img`'s size is known (layers, here, coming, or a registry's answer) rather
    /// than the default guess.
    fn sized(&self, img: &str) -> bool {
        self.s.layers.contains_key(img)
            || [&self.s.present, &self.s.fetching, &self.s.sizes]
                .iter()
                .any(|m| m.contains_key(img))
    }

    fn here_or_coming(&self, img: &str) -> bool {
        self.s.present.contains_key(img) || self.s.fetching.contains_key(img)
    }

    /// How `img` is made, when the box makes images itself.
    fn make(&self, img: &str) -> Option<&Made> {
        (self.s.make_slots > 0)
            .then(|| self.s.made.get(img))
            .flatten()
    }

    fn pulls_in_flight(&self) -> usize {
        self.s
            .fetching
            .keys()
            .filter(|i| self.make(i).is_none())
            .count()
    }

    /// Makes in flight: (all, long ones).
    fn makes_in_flight(&self) -> (usize, usize) {
        let secs: Vec<u64> = self
            .s
            .fetching
            .keys()
            .filter_map(|i| self.make(i))
            .map(|m| m.secs)
            .collect();
        (
            secs.len(),
            secs.iter().filter(|s| **s >= LONG_MAKE_S).count(),
        )
    }

    /// Builds at once: all the slots but one, kept for the short makes near the GPUs.
    fn long_cap(&self) -> usize {
        self.s.make_slots.saturating_sub(1).max(1)
    }

    /// Bytes in flight not yet here (each layer once).
    fn inflight(&self) -> u64 {
        let m: Manifest = self
            .s
            .fetching
            .keys()
            .flat_map(|i| self.manifest(i))
            .filter(|(l, _)| !self.on.has(l))
            .collect();
        m.values().sum()
    }

    /// Bytes of `img` neither here nor coming.
    fn cost(&self, img: &str) -> u64 {
        self.manifest(img)
            .iter()
            .filter(|(l, _)| !self.on.has(l) && !self.coming.has(l))
            .map(|(_, b)| b)
            .sum()
    }

    /// How many bytes bringing `img` lacks under the budget (0: it fits).
    fn short_by(&self, img: &str) -> u64 {
        let cost = self.cost(img);
        let inflight = self.inflight();
        let by_free = self.s.free.map_or(0, |free| {
            (self.b.min_free + inflight + cost).saturating_sub(free)
        });
        by_free.max(self.short_of_cap(img))
    }

    /// How far `img` would take the sweep's images past the operator's cap.
    fn short_of_cap(&self, img: &str) -> u64 {
        self.b.max_bytes.map_or(0, |cap| {
            (self.on.bytes() + self.inflight() + self.cost(img)).saturating_sub(cap)
        })
    }

    /// May `img` go? Not in the look-ahead, in use, kept, needed but not queued (a held
    /// run's), nor the source of a make in flight or of one in the look-ahead.
    fn removable(&self, img: &str, far_too: bool) -> bool {
        if self.s.in_use.contains(img)
            || self.b.keep.contains(img)
            || self.horizon.iter().any(|i| i == img)
            || self.sources().contains(img)
        {
            return false;
        }
        match (self.needed.contains(img), self.position.get(img)) {
            (false, _) => true,
            (true, Some(_)) => far_too,
            (true, None) => false,
        }
    }

    /// Images a make in flight or one in the look-ahead is made from, the sources of
    /// those sources included.
    fn sources(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        let wanted = self.s.fetching.keys().chain(
            self.horizon
                .iter()
                .filter(|i| !self.s.present.contains_key(*i)),
        );
        for img in wanted {
            let mut at = img.as_str();
            while let Some(m) = self.make(at) {
                if !out.insert(m.source.clone()) {
                    break;
                }
                at = &m.source;
            }
        }
        out
    }

    /// The image to remove next: one nobody needs (freeing the most first), else, when
    /// `far_too`, one needed only past the look-ahead (needed last first).
    fn victim(&self, far_too: bool) -> Option<String> {
        let unneeded = self
            .s
            .present
            .keys()
            .filter(|i| !self.needed.contains(*i) && self.removable(i, false))
            .max_by_key(|i| {
                (
                    self.on.would_free(&self.manifest(i)),
                    std::cmp::Reverse((*i).clone()),
                )
            });
        if let Some(i) = unneeded {
            return Some(i.clone());
        }
        self.s
            .present
            .keys()
            .filter(|i| self.removable(i, far_too))
            .max_by_key(|i| self.position.get(*i))
            .cloned()
    }

    /// Start bringing `img`, removing what may go to make room; else the bytes it lacks.
    fn start(&mut self, img: &str, far_too: bool) -> Result<(), u64> {
        loop {
            let short = self.short_by(img);
            if short == 0 {
                self.fetch(img);
                return Ok(());
            }
            let Some(victim) = self.victim(far_too) else {
                return Err(short);
            };
            let m = self.manifest(&victim);
            let freed = self.on.remove(&m);
            self.s.present.remove(&victim);
            if let Some(f) = self.s.free.as_mut() {
                *f += freed;
            }
            self.steps.push(Step::Evict(victim));
        }
    }

    /// What bringing `img` takes now: itself, its source first (or the source's source),
    /// or nothing yet (a source is coming; a loop of makes never starts).
    fn next_for(&self, img: &str) -> Option<String> {
        let mut target = img.to_string();
        for _ in 0..8 {
            match self.make(&target) {
                Some(m) if self.s.present.contains_key(&m.source) => return Some(target),
                Some(m) if self.s.fetching.contains_key(&m.source) => return None,
                Some(m) => target = m.source.clone(),
                None => return Some(target),
            }
        }
        None
    }

    /// Whether a slot is free for starting `target` (an image to pull or to make).
    fn slot_for(&self, target: &str) -> bool {
        match self.make(target) {
            Some(m) => {
                let (all, long) = self.makes_in_flight();
                all < self.s.make_slots && (m.secs < LONG_MAKE_S || long < self.long_cap())
            }
            None => self.pulls_in_flight() < self.b.max_fetches.max(1),
        }
    }

    /// The builds in the look-ahead, longest first: a build (or its source's pull) starts
    /// now if a build slot is free and it fits without removing anything anyone needs.
    fn builds_first(&mut self) {
        if self.s.make_slots == 0 {
            return;
        }
        let mut builds: Vec<(std::cmp::Reverse<u64>, usize, String)> = self
            .horizon
            .iter()
            .enumerate()
            .filter_map(|(at, i)| {
                let m = self.make(i)?;
                (m.secs >= LONG_MAKE_S && !self.here_or_coming(i))
                    .then(|| (std::cmp::Reverse(m.secs), at, i.clone()))
            })
            .collect();
        builds.sort();
        // Builds whose source is still coming hold their slot already. One source comes
        // down for builds at a time: the link's other pulls serve the GPUs' next images,
        // or a far commit's human run, ready early, would take GPUs ahead of near ones.
        let mut taken = self.makes_in_flight().1;
        let mut source_coming = false;
        for (_, _, img) in builds {
            if taken >= self.long_cap() {
                break;
            }
            let Some(target) = self.next_for(&img) else {
                taken += 1;
                source_coming = true;
                continue;
            };
            let pull = target != img;
            if !self.slot_for(&target) || (pull && source_coming) {
                continue;
            }
            source_coming |= pull;
            match self.start(&target, false) {
                Ok(()) => taken += 1,
                // A build that does not fit waits for its turn in order.
                Err(_) => break,
            }
        }
    }

    /// Down the look-ahead in order: each image (or its source) starts when a slot of its
    /// kind is free and it fits; the first that does not fit stops the rest.
    fn in_order(&mut self) {
        for img in self.horizon.clone() {
            if self.here_or_coming(&img) {
                continue;
            }
            let Some(target) = self.next_for(&img) else {
                continue;
            };
            if !self.slot_for(&target) {
                continue;
            }
            let Err(short_by) = self.start(&target, true) else {
                continue;
            };
            let busy = !self.s.fetching.is_empty() || !self.s.in_use.is_empty();
            if !busy && !self.sized(&target) && self.short_of_cap(&target) == 0 {
                // Only evidence blocks: short of free disk by a guess (an image of unknown
                // size counted at `default_size`; a baseline derived from a 4 MB overlay
                // counts 20 GB) is no reason to pause the night. It is fetched; a pull that
                // really finds no room fails and its run is diagnosed `disk_full`, and the
                // disk floor watch pauses on real free space. The operator's cap on the
                // sweep's images is a rule, not a guess about the disk: it still holds.
                self.fetch(&target);
                return;
            }
            let image = target;
            self.steps.push(if busy {
                Step::Wait { image, short_by }
            } else {
                Step::Full { image, short_by }
            });
            return;
        }
    }
}

#[cfg(test)]
mod tests;
