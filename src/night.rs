//! A night on paper: the plan's runs on G GPUs behind one link, one disk and a few CPU
//! slots for making images, with image layers, pull bandwidth, derivations and builds of
//! missing baselines — to see what prefetching, eviction and the run order buy before a
//! real night spends the hours. Pure and deterministic ([`model`]), driven by the same
//! [`crate::images::plan`] the engine follows. `nightshift bench night` prints it.
//!
//! Two ways to run a night:
//! - **inline** (before): a run takes its GPUs, then pulls its image while holding them;
//!   room is made by evicting what no remaining run needs;
//! - **prefetch** (now): one schedule for images and GPUs. Runs queue in the order of
//!   [`order`]; the images policy walks that queue (builds first, then pulls in order, as
//!   far as the disk allows) and a run takes GPUs only once its image is here: the first
//!   such run in queue order, others passing it only by backfilling, as the engine's
//!   scheduler does.
//!
//! Not modelled: registry latency and rate limits, failures and retries, pulls that go
//! faster together than alone, disk bandwidth.

pub mod bound;
pub mod model;
pub mod order;
#[cfg(test)]
mod tests;

use crate::images::layers::{Disk, Manifest};
use crate::images::{self, Budget, Step, Stock};
use crate::model::CommitIx;
use crate::plan::Plan;
use model::{Mix, GB};
use std::collections::{BTreeMap, BTreeSet};

/// The box.
#[derive(Debug, Clone)]
pub struct Box_ {
    pub gpus: u32,
    /// Link bandwidth, bytes per second (shared equally by pulls in flight).
    pub link_bps: f64,
    /// Free disk for images at dusk.
    pub disk_free: u64,
    pub budget: Budget,
    /// Images made at once on the CPU (builds take all but one).
    pub make_slots: usize,
}

impl Box_ {
    /// The seed box: 8 GPUs, 1 Gb/s, `disk_gb` free, 3 make slots.
    pub fn seed(disk_gb: u64) -> Box_ {
        Box_ {
            gpus: 8,
            link_bps: 1e9 / 8.0,
            disk_free: disk_gb * GB,
            budget: Budget::default(),
            make_slots: 3,
        }
    }
}

/// What a night came to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Night {
    pub runs: usize,
    pub gpus: u32,
    pub makespan_s: f64,
    pub lower_bound_s: f64,
    pub bound: bound::Bound,
    /// GPU-seconds held by runs waiting for their image (inline), plus GPUs left idle
    /// while a run that would fit them waited for its image.
    pub gpu_wait_s: f64,
    pub bytes_pulled: u64,
    pub peak_disk: u64,
    pub derived: usize,
    pub built: usize,
    /// Runs that took GPUs while their image was not on the box (inline: all that had to
    /// wait; prefetch: must be none).
    pub held_without_image: usize,
    /// Per commit, from its first run's start to its last run's end, on average: a 3-way
    /// triple measured close together (and done early) rather than spread over the night.
    pub commit_span_s: f64,
}

impl Night {
    /// GPU time idle on images, as a share of the GPU time the bound allows.
    pub(crate) fn idle_share(&self) -> f64 {
        self.gpu_wait_s / (self.gpus as f64 * self.lower_bound_s).max(1.0)
    }
    pub(crate) fn ratio(&self) -> f64 {
        self.makespan_s / self.lower_bound_s.max(1.0)
    }
}

/// A fetch in flight: bytes still to come down, then seconds of making; done once the
/// layers other fetches were bringing for it are here too.
struct Fetch {
    pull_left: f64,
    make_left: f64,
    waits_on: Vec<String>,
    /// Layers already here that it uses: held until it is done, even if the image they
    /// came with is removed meanwhile.
    pinned: Manifest,
    /// A make's source it pulled first (the policy did not know the image is made).
    source: Option<String>,
}

/// Start bringing `img`: pull its layers not here, or make it from its source. A make
/// whose source is not here pulls the source first, as the engine's fetch does when the
/// policy is not told which images are made ([`Stock::made`] empty, no make slots).
fn start(
    m: &Mix,
    img: &str,
    present: &BTreeSet<String>,
    on: &mut Disk,
    claimed: &mut BTreeMap<String, (String, u64)>,
    n: &mut Night,
) -> Fetch {
    let mut f = Fetch {
        pull_left: 0.0,
        make_left: 0.0,
        waits_on: Vec::new(),
        pinned: Manifest::new(),
        source: None,
    };
    // Layers that come down the link, then layers written here by the make.
    let (pull, write) = match m.made.get(img) {
        Some(made) => {
            f.make_left = made.secs as f64;
            if made.secs >= images::LONG_MAKE_S {
                n.built += 1;
            } else {
                n.derived += 1;
            }
            let source = (!present.contains(&made.source)).then(|| made.source.clone());
            let pull = source.as_ref().map(|s| &m.layers[s]);
            f.source = source;
            (pull, Some(&m.layers[img]))
        }
        None => (Some(&m.layers[img]), None),
    };
    for (layers, pulled) in [(pull, true), (write, false)] {
        for (layer, bytes) in layers.into_iter().flatten() {
            if on.has(layer) {
                f.pinned.insert(layer.clone(), *bytes);
                continue;
            }
            match claimed.get(layer) {
                Some((by, _)) if by == img => {}
                Some((by, _)) => f.waits_on.push(by.clone()),
                None => {
                    if pulled {
                        f.pull_left += *bytes as f64;
                        n.bytes_pulled += bytes;
                    }
                    claimed.insert(layer.clone(), (img.to_string(), *bytes));
                }
            }
        }
    }
    on.add(&f.pinned);
    f
}

/// The night of `plan`'s runnable runs; `share`: images share layers ([`model::mix`]).
pub(crate) fn simulate(plan: &Plan, bx: &Box_, prefetch: bool, share: bool) -> Night {
    let m = model::mix(plan, bx.gpus, share);
    // Before: commits in plan order. Now: the night's order.
    let rank = if prefetch {
        ranks(&m, bx)
    } else {
        m.runs
            .iter()
            .map(|r| (CommitIx(r.commit), order::Rank(r.commit)))
            .collect()
    };
    run(&m, bx, prefetch, &rank)
}

/// The commits' ranks for this mix ([`order::ranks`]).
pub fn ranks(m: &Mix, bx: &Box_) -> order::Ranks {
    let mut loads: BTreeMap<usize, order::Load> = BTreeMap::new();
    for r in &m.runs {
        let l = loads.entry(r.commit).or_insert(order::Load {
            commit: CommitIx(r.commit),
            gpus: 0,
            gpu_secs: 0.0,
            build_secs: 0.0,
        });
        l.gpus = l.gpus.max(r.gpus);
        l.gpu_secs += r.secs * r.gpus as f64;
        if let Some(made) = m
            .made
            .get(&r.image)
            .filter(|x| x.secs >= images::LONG_MAKE_S)
        {
            l.build_secs = made.secs as f64;
        }
    }
    let b = bound::of(m, bx.gpus, bx.link_bps, bx.make_slots);
    let build_slots = bx.make_slots.saturating_sub(1).max(1);
    order::ranks(
        &loads.into_values().collect::<Vec<_>>(),
        bx.gpus,
        build_slots,
        b.first_s,
    )
}

/// The night of mix `m` with commits in `rank` order.
pub fn run(m: &Mix, bx: &Box_, prefetch: bool, rank: &order::Ranks) -> Night {
    let runs = &m.runs;
    let bound = bound::of(m, bx.gpus, bx.link_bps, bx.make_slots);
    let mut n = Night {
        runs: runs.len(),
        gpus: bx.gpus,
        lower_bound_s: bound.total(),
        bound,
        ..Default::default()
    };
    let key = |i: usize, started: &BTreeSet<usize>| {
        let r = &runs[i];
        order::key(
            started.contains(&r.commit),
            rank.of(CommitIx(r.commit)),
            r.variant_order,
            i,
        )
    };
    let manifest = |i: &str| -> &Manifest { &m.layers[i] };
    let mut t = 0.0f64;
    let mut queue: Vec<usize> = (0..runs.len()).collect();
    let mut started: BTreeSet<usize> = BTreeSet::new();
    let mut running: Vec<(f64, usize)> = Vec::new();
    // Runs holding GPUs while their image comes (inline only).
    let mut holding: Vec<usize> = Vec::new();
    let mut free = bx.gpus;
    let mut present: BTreeSet<String> = BTreeSet::new();
    let mut on = Disk::default();
    let mut fetching: BTreeMap<String, Fetch> = BTreeMap::new();
    // Layers being brought, and by which fetch.
    let mut claimed: BTreeMap<String, (String, u64)> = BTreeMap::new();
    // Per commit: first start, last end.
    let mut span: BTreeMap<usize, (f64, f64)> = BTreeMap::new();
    let budget = if prefetch {
        bx.budget.clone()
    } else {
        Budget {
            max_fetches: usize::MAX,
            lookahead: usize::MAX,
            ..bx.budget.clone()
        }
    };
    loop {
        queue.sort_by_key(|&i| key(i, &started));
        // Images: what the policy says, given what the queue and the runs need.
        let needed: BTreeSet<String> = queue
            .iter()
            .chain(running.iter().map(|(_, i)| i))
            .chain(&holding)
            .map(|&i| runs[i].image.clone())
            .collect();
        let in_use: BTreeSet<String> = running
            .iter()
            .map(|(_, i)| runs[*i].image.clone())
            .chain(holding.iter().map(|&i| runs[i].image.clone()))
            .collect();
        let wanted: Vec<String> = if prefetch {
            queue.iter().map(|&i| runs[i].image.clone()).collect()
        } else {
            holding.iter().map(|&i| runs[i].image.clone()).collect()
        };
        let total = |i: &String| manifest(i).values().sum::<u64>();
        let stock = Stock {
            free: Some(bx.disk_free.saturating_sub(on.bytes())),
            present: present.iter().map(|i| (i.clone(), total(i))).collect(),
            fetching: fetching.keys().map(|i| (i.clone(), total(i))).collect(),
            in_use,
            sizes: BTreeMap::new(),
            layers: m.layers.clone(),
            made: m.made.clone(),
            make_slots: bx.make_slots,
        };
        for step in images::plan(&wanted, &needed, &stock, &budget) {
            match step {
                Step::Evict(i) => {
                    present.remove(&i);
                    on.remove(manifest(&i));
                }
                Step::Fetch(i) => {
                    let f = start(m, &i, &present, &mut on, &mut claimed, &mut n);
                    fetching.insert(i, f);
                }
                Step::Wait { .. } | Step::Full { .. } => {}
            }
        }
        // A fetch with every layer here already is done at once.
        arrive(m, &mut fetching, &mut claimed, &mut on, &mut present);
        let claimed_bytes: u64 = claimed.values().map(|(_, b)| b).sum();
        n.peak_disk = n.peak_disk.max(on.bytes() + claimed_bytes);
        // Runs take GPUs as `pick` says (a run that starts moves its commit's other runs
        // ahead); inline runs take GPUs first and wait for their image.
        holding.retain(|&i| {
            if present.contains(&runs[i].image) {
                running.push((t + runs[i].secs, i));
                false
            } else {
                true
            }
        });
        let mut moved = false;
        loop {
            let ends: Vec<(f64, u32)> = running
                .iter()
                .map(|&(e, i)| (e - t, runs[i].gpus))
                .collect();
            let Some(k) = pick(runs, &queue, free, prefetch, &present, &ends) else {
                break;
            };
            let i = queue.remove(k);
            free -= runs[i].gpus;
            moved = true;
            if started.insert(runs[i].commit) {
                queue.sort_by_key(|&i| key(i, &started));
            }
            let first = span.entry(runs[i].commit).or_insert((t, 0.0));
            first.0 = first.0.min(t);
            if present.contains(&runs[i].image) {
                running.push((t + runs[i].secs, i));
            } else {
                n.held_without_image += 1;
                holding.push(i);
            }
        }
        if queue.is_empty() && running.is_empty() && holding.is_empty() {
            break;
        }
        if moved {
            // Runs that just took GPUs may need images: ask the policy again first.
            continue;
        }
        // The next thing to happen.
        let pulling = fetching
            .values()
            .filter(|f| f.pull_left > 0.0)
            .count()
            .max(1) as f64;
        let rate = bx.link_bps / pulling;
        let mut dt = f64::INFINITY;
        for (end, _) in &running {
            dt = dt.min(end - t);
        }
        for f in fetching.values() {
            if f.pull_left > 0.0 {
                dt = dt.min(f.pull_left / rate);
            } else if f.make_left > 0.0 {
                dt = dt.min(f.make_left);
            }
        }
        if !dt.is_finite() {
            // Nothing running, nothing coming: the disk cannot hold the next image.
            break;
        }
        let dt = dt.max(0.0);
        // GPUs waiting on images over this interval.
        let held: u32 = holding.iter().map(|&i| runs[i].gpus).sum();
        let blocked = prefetch
            && queue
                .iter()
                .any(|&i| runs[i].gpus <= free && !present.contains(&runs[i].image));
        n.gpu_wait_s += dt * (held as f64 + if blocked { free as f64 } else { 0.0 });

        t += dt;
        for f in fetching.values_mut() {
            if f.pull_left > 0.0 {
                f.pull_left -= rate * dt;
                if f.pull_left < 1.0 {
                    f.pull_left = 0.0;
                }
            } else if f.make_left > 0.0 {
                f.make_left = (f.make_left - dt).max(0.0);
                if f.make_left < 1e-6 {
                    f.make_left = 0.0;
                }
            }
        }
        arrive(m, &mut fetching, &mut claimed, &mut on, &mut present);
        running.retain(|&(end, i)| {
            if end <= t + 1e-9 {
                free += runs[i].gpus;
                let e = span.entry(runs[i].commit).or_insert((t, 0.0));
                e.1 = e.1.max(end);
                false
            } else {
                true
            }
        });
    }
    n.makespan_s = t;
    n.commit_span_s = span.values().map(|(a, b)| b - a).sum::<f64>() / span.len().max(1) as f64;
    n
}

/// Fetches done: own bytes and making over, and the layers others brought for them here.
fn arrive(
    m: &Mix,
    fetching: &mut BTreeMap<String, Fetch>,
    claimed: &mut BTreeMap<String, (String, u64)>,
    on: &mut Disk,
    present: &mut BTreeSet<String>,
) {
    loop {
        let done: Vec<String> = fetching
            .iter()
            .filter(|(_, f)| {
                f.pull_left == 0.0
                    && f.make_left == 0.0
                    && f.waits_on.iter().all(|w| !fetching.contains_key(w))
            })
            .map(|(k, _)| k.clone())
            .collect();
        if done.is_empty() {
            return;
        }
        for img in done {
            let f = fetching.remove(&img).expect("listed");
            claimed.retain(|_, (by, _)| *by != img);
            if let Some(source) = f.source {
                on.add(&m.layers[&source]);
                present.insert(source);
            }
            on.add(&m.layers[&img]);
            on.remove(&f.pinned);
            present.insert(img);
        }
    }
}

/// The next run to take GPUs, as the engine's scheduler picks it. Inline (before): the
/// first in order that fits. Prefetch: the first run in order whose image is here is the
/// head; if it does not fit, a run behind it (image here too) passes it only by
/// backfilling ([`crate::scheduler::may_backfill`], the engine's rule, with the runs'
/// lengths known): a big run is not starved by small ones taking each GPU as it frees.
/// `ends`: per run in flight, seconds left and GPUs.
fn pick(
    runs: &[model::Run],
    queue: &[usize],
    free: u32,
    prefetch: bool,
    present: &BTreeSet<String>,
    ends: &[(f64, u32)],
) -> Option<usize> {
    if !prefetch {
        return queue.iter().position(|&i| runs[i].gpus <= free);
    }
    let ready = |i: usize| present.contains(&runs[i].image);
    let head = queue.iter().position(|&i| ready(i))?;
    let need = runs[queue[head]].gpus;
    if need <= free {
        return Some(head);
    }
    let secs = std::time::Duration::from_secs_f64;
    let ends: Vec<(std::time::Duration, u32)> = ends
        .iter()
        .map(|(left, g)| (secs(left.max(0.0)), *g))
        .collect();
    queue.iter().enumerate().skip(head + 1).find_map(|(k, &i)| {
        (ready(i)
            && runs[i].gpus <= free
            && crate::scheduler::may_backfill(free, need, &ends, runs[i].gpus, secs(runs[i].secs)))
        .then_some(k)
    })
}
