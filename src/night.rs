//! A night on paper: the plan's runs on G GPUs behind one link and one disk, with image
//! sizes, pull bandwidth, derivations and builds of missing baselines — to see what
//! prefetching and eviction buy before a real night spends the hours. Pure and
//! deterministic (sizes and durations come from hashes of names), driven by the same
//! [`crate::images::plan`] the engine follows. `nightshift bench night` prints it.
//!
//! Two ways to run a night:
//! - **inline** (before): a run takes its GPUs, then pulls its image while holding them;
//!   room is made by evicting what no remaining run needs;
//! - **prefetch** (now): the next runs' images come down (and missing ones are made) while
//!   the GPUs work; a run takes GPUs only once its image is there.
//!
//! Not modelled: layer sharing between images (every image counts whole), registry
//! latency and rate limits, failures and retries, CPU contention between builds.

use crate::images::{self, Budget, Step, Stock};
use crate::plan::Plan;
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
}

/// What a night came to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Night {
    pub runs: usize,
    pub makespan_s: f64,
    pub lower_bound_s: f64,
    /// GPU-seconds held by runs waiting for their image (inline), or GPUs left idle while
    /// the next runnable run's image was still coming (prefetch).
    pub gpu_wait_s: f64,
    pub bytes_pulled: u64,
    pub peak_disk: u64,
    pub derived: usize,
    pub built: usize,
}

fn hash(s: &str) -> u64 {
    // FNV-1a: stable across builds and platforms, which a night on paper must be.
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

const GB: u64 = 1_000_000_000;

/// vLLM images are 17–22 GB.
fn image_size(img: &str) -> u64 {
    17 * GB + hash(img) % (5 * GB)
}

/// How a missing image is made, if it is: 30 of 78 seed baselines were never built; of
/// those, about one in three changes compiled code and needs a build.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Make {
    Pull,
    Overlay,
    Build,
}

fn how_made(img: &str, baseline: bool) -> Make {
    let h = hash(img);
    if !baseline || h % 78 >= 30 {
        Make::Pull
    } else if h % 3 == 0 {
        Make::Build
    } else {
        Make::Overlay
    }
}

const OVERLAY_S: f64 = 4.0 * 60.0;
const BUILD_S: f64 = 45.0 * 60.0;

struct Run {
    image: String,
    /// The human image a missing baseline is made from.
    source: Option<String>,
    gpus: u32,
    secs: f64,
}

/// A fetch in flight: bytes still to come down, then seconds of making.
struct Fetch {
    pull_left: f64,
    make_left: f64,
    size: u64,
}

/// The night of `plan`'s runnable runs.
pub fn simulate(plan: &Plan, bx: &Box_, prefetch: bool) -> Night {
    let mut runs = Vec::new();
    for r in plan.runs.iter().filter(|r| r.skip_reason.is_none()) {
        let Some(image) = r.image.clone().filter(|i| !i.is_empty()) else {
            continue;
        };
        let commit = plan.commit_of(r);
        let serving = commit.needs_server();
        let h = hash(&r.key);
        // Server start + benchmark: serving 12–25 min, offline 6–15 min.
        let secs = if serving {
            720.0 + (h % 780) as f64
        } else {
            360.0 + (h % 540) as f64
        };
        let baseline = r.variant != crate::model::Variant::Human;
        let source = (how_made(&image, baseline) != Make::Pull)
            .then(|| {
                plan.runs
                    .iter()
                    .find(|o| o.commit == r.commit && o.variant == crate::model::Variant::Human)
                    .and_then(|o| o.image.clone())
            })
            .flatten();
        runs.push(Run {
            image,
            source,
            gpus: r.gpus.clamp(1, bx.gpus),
            secs,
        });
    }
    let mut n = Night {
        runs: runs.len(),
        ..Default::default()
    };
    let sizes: BTreeMap<String, u64> = runs
        .iter()
        .map(|r| (r.image.clone(), image_size(&r.image)))
        .collect();
    let gpu_work: f64 = runs.iter().map(|r| r.secs * r.gpus as f64).sum();
    let unique: u64 = runs
        .iter()
        .filter(|r| r.source.is_none())
        .map(|r| &r.image)
        .collect::<BTreeSet<_>>()
        .iter()
        .map(|i| sizes[*i])
        .sum();
    let shortest = runs.iter().map(|r| r.secs).fold(f64::INFINITY, f64::min);
    n.lower_bound_s = (gpu_work / bx.gpus as f64).max(unique as f64 / bx.link_bps + shortest);

    let mut t = 0.0f64;
    let mut queue: Vec<usize> = (0..runs.len()).collect();
    let mut running: Vec<(f64, usize)> = Vec::new();
    // Runs holding GPUs while their image comes (inline only).
    let mut holding: Vec<usize> = Vec::new();
    let mut free = bx.gpus;
    let mut present: BTreeMap<String, u64> = BTreeMap::new();
    let mut fetching: BTreeMap<String, Fetch> = BTreeMap::new();
    loop {
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
        let stock = Stock {
            free: Some(bx.disk_free.saturating_sub(disk(&present, &fetching))),
            present: present.clone(),
            fetching: fetching.iter().map(|(k, f)| (k.clone(), f.size)).collect(),
            in_use,
            sizes: sizes.clone(),
        };
        let budget = if prefetch {
            bx.budget.clone()
        } else {
            Budget {
                max_fetches: usize::MAX,
                lookahead: usize::MAX,
                ..bx.budget.clone()
            }
        };
        for step in images::plan(&wanted, &needed, &stock, &budget) {
            match step {
                Step::Evict(i) => {
                    present.remove(&i);
                }
                Step::Fetch(i) => {
                    let run = runs.iter().find(|r| r.image == i).expect("a run needs it");
                    let size = sizes[&i];
                    let (pull, make) = match (&run.source, how_made(&i, true)) {
                        (Some(src), m) if !present.contains_key(src) => {
                            (sizes.get(src).copied().unwrap_or(size), make_s(m))
                        }
                        (Some(_), m) => (0, make_s(m)),
                        (None, _) => (size, 0.0),
                    };
                    if run.source.is_some() {
                        if make_s(how_made(&i, true)) >= BUILD_S {
                            n.built += 1;
                        } else {
                            n.derived += 1;
                        }
                    }
                    n.bytes_pulled += pull;
                    fetching.insert(
                        i,
                        Fetch {
                            pull_left: pull as f64,
                            make_left: make,
                            size,
                        },
                    );
                }
                Step::Wait { .. } | Step::Full { .. } => {}
            }
        }
        n.peak_disk = n.peak_disk.max(disk(&present, &fetching));
        // Runs whose image is here start; inline runs take GPUs first and wait.
        holding.retain(|&i| {
            if present.contains_key(&runs[i].image) {
                running.push((t + runs[i].secs, i));
                false
            } else {
                true
            }
        });
        let mut moved = false;
        let mut k = 0;
        while k < queue.len() {
            let i = queue[k];
            let r = &runs[i];
            let ready = present.contains_key(&r.image);
            if r.gpus <= free && (ready || !prefetch) {
                free -= r.gpus;
                queue.remove(k);
                moved = true;
                if ready {
                    running.push((t + r.secs, i));
                } else {
                    holding.push(i);
                }
            } else {
                k += 1;
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
            dt = dt.min(if f.pull_left > 0.0 {
                f.pull_left / rate
            } else {
                f.make_left
            });
        }
        if !dt.is_finite() {
            // Nothing running, nothing coming: the disk cannot hold the next image.
            break;
        }
        let dt = dt.max(0.0);
        // GPUs waiting on images over this interval.
        let held: u32 = holding.iter().map(|&i| runs[i].gpus).sum();
        let blocked = prefetch && queue.iter().any(|&i| runs[i].gpus <= free);
        n.gpu_wait_s += dt * (held as f64 + if blocked { free as f64 } else { 0.0 });
        t += dt;
        for f in fetching.values_mut() {
            if f.pull_left > 0.0 {
                f.pull_left = (f.pull_left - rate * dt).max(0.0);
                if f.pull_left < 1.0 {
                    f.pull_left = 0.0;
                }
            } else {
                f.make_left = (f.make_left - dt).max(0.0);
            }
        }
        let done: Vec<String> = fetching
            .iter()
            .filter(|(_, f)| f.pull_left == 0.0 && f.make_left <= 1e-9)
            .map(|(k, _)| k.clone())
            .collect();
        for img in done {
            let f = fetching.remove(&img).expect("listed");
            present.insert(img, f.size);
        }
        running.retain(|&(end, i)| {
            if end <= t + 1e-9 {
                free += runs[i].gpus;
                false
            } else {
                true
            }
        });
    }
    n.makespan_s = t;
    n
}

fn make_s(m: Make) -> f64 {
    match m {
        Make::Pull => 0.0,
        Make::Overlay => OVERLAY_S,
        Make::Build => BUILD_S,
    }
}

fn disk(present: &BTreeMap<String, u64>, fetching: &BTreeMap<String, Fetch>) -> u64 {
    present.values().sum::<u64>() + fetching.values().map(|f| f.size).sum::<u64>()
}

/// `nightshift bench night`: the seed mix on 8 GPUs, 1 Gb/s, 500 GB free; before and
/// after prefetch.
pub fn bench(plan: &Plan, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let bx = Box_ {
        gpus: 8,
        link_bps: 1e9 / 8.0,
        disk_free: 500 * GB,
        budget: Budget::default(),
    };
    writeln!(
        out,
        "night: {} on {} GPUs, 1 Gb/s link, {} GB free (keep {} GB), images 17–22 GB",
        plan.name,
        bx.gpus,
        bx.disk_free / GB,
        bx.budget.min_free / GB
    )?;
    writeln!(
        out,
        "{:<10} {:>5} {:>10} {:>11} {:>9} {:>16} {:>12} {:>10} {:>8}",
        "strategy",
        "runs",
        "makespan",
        "lower bound",
        "× bound",
        "GPU-min waiting",
        "pulled",
        "peak disk",
        "made"
    )?;
    for (name, prefetch) in [("inline", false), ("prefetch", true)] {
        let n = simulate(plan, &bx, prefetch);
        writeln!(
            out,
            "{name:<10} {:>5} {:>9.1}h {:>10.1}h {:>9.2} {:>16.0} {:>9.0} GB {:>7.0} GB {:>3}+{:<3}",
            n.runs,
            n.makespan_s / 3600.0,
            n.lower_bound_s / 3600.0,
            n.makespan_s / n.lower_bound_s.max(1.0),
            n.gpu_wait_s / 60.0,
            n.bytes_pulled as f64 / GB as f64,
            n.peak_disk as f64 / GB as f64,
            n.derived,
            n.built
        )?;
    }
    writeln!(out, "made: baselines derived by overlay + built from source (missing as in the seeds: 30 of 78)")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn night(prefetch: bool, disk_gb: u64) -> Night {
        let plan = crate::tui::example_plan();
        let bx = Box_ {
            gpus: 8,
            link_bps: 1e9 / 8.0,
            disk_free: disk_gb * GB,
            budget: Budget::default(),
        };
        simulate(&plan, &bx, prefetch)
    }

    #[test]
    fn prefetch_shortens_the_night_and_stays_in_the_disk_budget() {
        let before = night(false, 500);
        let after = night(true, 500);
        assert!(before.runs > 100, "{before:?}");
        assert_eq!(before.runs, after.runs);
        assert!(after.makespan_s < before.makespan_s, "{before:?} {after:?}");
        assert!(after.makespan_s >= after.lower_bound_s, "{after:?}");
        assert!(after.gpu_wait_s < before.gpu_wait_s, "{before:?} {after:?}");
        for n in [&before, &after] {
            assert!(
                n.peak_disk <= 500 * GB - Budget::default().min_free,
                "{n:?}"
            );
        }
    }

    #[test]
    fn a_small_disk_still_finishes_by_evicting() {
        let n = night(true, 100);
        assert!(n.makespan_s.is_finite() && n.makespan_s > 0.0);
        assert!(n.peak_disk <= 100 * GB, "{n:?}");
        // Every image is pulled once at least; with room for ~3 some come down again.
        assert!(n.bytes_pulled >= 17 * GB * 10, "{n:?}");
    }

    #[test]
    fn same_inputs_same_night() {
        assert_eq!(night(true, 300), night(true, 300));
    }
}
