//! Which images to bring onto the box next and which to remove, within a disk budget.
//!
//! Pure: the engine (real runs) and `bench night` (a simulated night) feed it the same
//! facts — the images the remaining runs need, in the order they will run, what is on the
//! disk and what is coming down — and act on the steps it returns. One rule for both, so
//! the bench measures the policy the product really follows.
//!
//! The rules, in order:
//! - an image the remaining runs need is never removed, nor one in use, nor one the
//!   operator keeps;
//! - a fetch starts only if, counting every fetch already in flight at its expected size,
//!   the disk keeps `min_free` bytes free and the sweep's images stay within `max_bytes`;
//! - when a fetch does not fit, images nobody needs any more are removed (largest first,
//!   so the fewest removals make room) until it fits;
//! - when nothing can be removed and nothing is in flight or in use, the box is full:
//!   [`Step::Full`] (the engine pauses the sweep and alerts rather than thrash).

use std::collections::{BTreeMap, BTreeSet};

/// The operator's limits.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    /// Free bytes to keep on the disk holding the images.
    pub min_free: u64,
    /// At most this many bytes of the sweep's own images on disk (None: no cap).
    pub max_bytes: Option<u64>,
    /// Fetches at once (a link shared by several pulls gains nothing past a few).
    pub max_fetches: usize,
    /// How many distinct upcoming images to prepare ahead of the GPUs.
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
            lookahead: 4,
            default_size: 20_000_000_000,
            keep: BTreeSet::new(),
        }
    }
}

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
}

impl Stock {
    fn bytes_on_disk(&self) -> u64 {
        self.present.values().sum::<u64>() + self.fetching.values().sum::<u64>()
    }
}

/// One thing to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Remove this image (and the images made from it) to make room.
    Evict(String),
    /// Start bringing this image onto the box.
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
    let mut steps = Vec::new();
    let mut s = stock.clone();
    // What is about to run is needed, whatever the caller's `needed` says.
    let needed: BTreeSet<String> = needed.iter().chain(upcoming).cloned().collect();
    let needed = &needed;
    let mut wanted: Vec<&String> = Vec::new();
    for img in upcoming {
        if wanted.len() >= b.lookahead {
            break;
        }
        if !wanted.contains(&img) {
            wanted.push(img);
        }
    }
    for img in wanted {
        if s.present.contains_key(img) || s.fetching.contains_key(img) {
            continue;
        }
        if s.fetching.len() >= b.max_fetches.max(1) {
            break;
        }
        let size = s.sizes.get(img).copied().unwrap_or(b.default_size);
        loop {
            let short = short_by(&s, size, b);
            if short == 0 {
                s.fetching.insert(img.clone(), size);
                steps.push(Step::Fetch(img.clone()));
                break;
            }
            match evictable(&s, needed, b) {
                Some(victim) => {
                    let freed = s.present.remove(&victim).unwrap_or(0);
                    if let Some(f) = s.free.as_mut() {
                        *f += freed;
                    }
                    steps.push(Step::Evict(victim));
                }
                None => {
                    let busy = !s.fetching.is_empty() || !s.in_use.is_empty();
                    steps.push(if busy {
                        Step::Wait {
                            image: img.clone(),
                            short_by: short,
                        }
                    } else {
                        Step::Full {
                            image: img.clone(),
                            short_by: short,
                        }
                    });
                    return steps;
                }
            }
        }
    }
    steps
}

/// How many bytes a fetch of `size` lacks under the budget (0: it fits).
fn short_by(s: &Stock, size: u64, b: &Budget) -> u64 {
    let inflight: u64 = s.fetching.values().sum();
    let by_free = s.free.map_or(0, |free| {
        (b.min_free + inflight + size).saturating_sub(free)
    });
    let by_cap = b
        .max_bytes
        .map_or(0, |cap| (s.bytes_on_disk() + size).saturating_sub(cap));
    by_free.max(by_cap)
}

/// The image to remove next: not needed, not in use, not kept; the largest first.
fn evictable(s: &Stock, needed: &BTreeSet<String>, b: &Budget) -> Option<String> {
    s.present
        .iter()
        .filter(|(img, _)| {
            !needed.contains(*img) && !s.in_use.contains(*img) && !b.keep.contains(*img)
        })
        .max_by_key(|(img, bytes)| (**bytes, std::cmp::Reverse((*img).clone())))
        .map(|(img, _)| img.clone())
}

/// Images nobody needs any more, to remove once the sweep is over with them (the engine
/// removes them eagerly only when asked; by default they stay until room is needed, so
/// an operator's retry does not pull 20 GB again).
pub fn unneeded(needed: &BTreeSet<String>, stock: &Stock, b: &Budget) -> Vec<String> {
    stock
        .present
        .keys()
        .filter(|i| !needed.contains(*i) && !stock.in_use.contains(*i) && !b.keep.contains(*i))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const G: u64 = 1_000_000_000;

    fn v(xs: &[&str]) -> Vec<String> {
        xs.iter().map(|s| s.to_string()).collect()
    }
    fn set(xs: &[&str]) -> BTreeSet<String> {
        xs.iter().map(|s| s.to_string()).collect()
    }
    fn budget() -> Budget {
        Budget {
            min_free: 25 * G,
            default_size: 20 * G,
            ..Default::default()
        }
    }

    #[test]
    fn fetches_ahead_up_to_the_limit_of_concurrent_pulls() {
        let s = Stock {
            free: Some(500 * G),
            ..Default::default()
        };
        let steps = plan(
            &v(&["a", "a", "b", "c"]),
            &set(&["a", "b", "c"]),
            &s,
            &budget(),
        );
        assert_eq!(
            steps,
            vec![Step::Fetch("a".into()), Step::Fetch("b".into())]
        );
    }

    #[test]
    fn in_flight_pulls_count_against_free_space() {
        let mut s = Stock {
            free: Some(70 * G),
            ..Default::default()
        };
        s.fetching.insert("a".into(), 20 * G);
        // 70 free − 20 coming − 20 next = 30 ≥ 25: fits. A third would leave 10.
        let b = Budget {
            max_fetches: 4,
            ..budget()
        };
        let steps = plan(&v(&["a", "b", "c"]), &set(&["a", "b", "c"]), &s, &b);
        assert_eq!(steps[0], Step::Fetch("b".into()));
        assert!(
            matches!(&steps[1], Step::Wait { image, short_by } if image == "c" && *short_by == 15 * G)
        );
    }

    #[test]
    fn evicts_what_no_run_needs_largest_first_never_in_use_or_kept() {
        let mut s = Stock {
            free: Some(20 * G),
            ..Default::default()
        };
        for (i, gb) in [
            ("old1", 18),
            ("old2", 22),
            ("kept", 30),
            ("busy", 40),
            ("next", 20),
        ] {
            s.present.insert(i.into(), gb * G);
        }
        s.in_use.insert("busy".into());
        let b = Budget {
            keep: set(&["kept"]),
            ..budget()
        };
        let steps = plan(&v(&["next", "new"]), &set(&["next", "new"]), &s, &b);
        assert_eq!(
            steps,
            vec![
                Step::Evict("old2".into()),
                Step::Evict("old1".into()),
                Step::Fetch("new".into())
            ]
        );
    }

    #[test]
    fn full_only_when_nothing_can_go_and_nothing_runs() {
        let mut s = Stock {
            free: Some(30 * G),
            ..Default::default()
        };
        s.present.insert("next".into(), 20 * G);
        let steps = plan(&v(&["new"]), &set(&["next", "new"]), &s, &budget());
        assert_eq!(
            steps,
            vec![Step::Full {
                image: "new".into(),
                short_by: 15 * G
            }]
        );
        s.in_use.insert("next".into());
        assert!(matches!(
            plan(&v(&["new"]), &set(&["next", "new"]), &s, &budget())[..],
            [Step::Wait { .. }]
        ));
    }

    #[test]
    fn a_cap_on_the_sweeps_images_applies_without_knowing_the_disk() {
        let mut s = Stock::default();
        s.present.insert("done".into(), 8 * G);
        s.sizes.insert("new".into(), 5 * G);
        let b = Budget {
            max_bytes: Some(10 * G),
            ..budget()
        };
        let steps = plan(&v(&["new"]), &set(&["new"]), &s, &b);
        assert_eq!(
            steps,
            vec![Step::Evict("done".into()), Step::Fetch("new".into())]
        );
    }

    proptest! {
        /// Whatever the stock, following the steps never goes past the budget, never
        /// removes a needed, busy or kept image, and never fetches what is already here.
        #[test]
        fn steps_keep_the_budget(
            present in proptest::collection::btree_map("[a-f]", 1u64..30, 0..6),
            upcoming in proptest::collection::vec("[a-h]", 0..10),
            needed in proptest::collection::btree_set("[a-h]", 0..8),
            busy in proptest::collection::btree_set("[a-f]", 0..3),
            free in 0u64..200,
            cap in proptest::option::of(20u64..120),
        ) {
            let present: BTreeMap<String, u64> = present.into_iter().map(|(k, v)| (k, v * G)).collect();
            let s = Stock { free: Some(free * G), present: present.clone(), in_use: busy.clone(), ..Default::default() };
            let b = Budget { max_bytes: cap.map(|c| c * G), max_fetches: 3, ..budget() };
            let steps = plan(&upcoming, &needed, &s, &b);
            let mut free_now = free * G;
            let mut on_disk: u64 = present.values().sum();
            let mut inflight = 0;
            for st in &steps {
                match st {
                    Step::Evict(i) => {
                        prop_assert!(!needed.contains(i) && !busy.contains(i) && !upcoming.contains(i));
                        let bytes = present[i];
                        free_now += bytes;
                        on_disk -= bytes;
                    }
                    Step::Fetch(i) => {
                        prop_assert!(!present.contains_key(i));
                        inflight += b.default_size;
                        prop_assert!(free_now >= b.min_free + inflight);
                        prop_assert!(cap.is_none_or(|c| on_disk + inflight <= c * G));
                    }
                    Step::Wait { .. } | Step::Full { .. } => {}
                }
            }
        }
    }
}
