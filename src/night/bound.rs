//! A lower bound on the night's makespan that no schedule can beat, with its parts, so a
//! night is judged against what the box, the link and the CPU allow and not against a
//! number loosened to pass. Each part is a chain every schedule must go through:
//! - **work**: no GPU works before the first image is here (the image that arrives
//!   soonest with the whole link to itself), and from then on the GPUs have all the
//!   GPU-seconds of the night to do;
//! - **link**: every layer some image needs comes down the link once at least, and the
//!   last one still has a run to serve after it;
//! - **chain**: an image's pull (its source's, then its make), then its longest run;
//! - **builds**: every make needs a make slot, none before the first source is here, and
//!   the last one's runs still follow it.

use super::model::Mix;
use crate::images::layers::{Disk, Manifest};

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Bound {
    /// GPU-seconds over GPUs.
    pub work_s: f64,
    /// The first image's arrival.
    pub first_s: f64,
    pub link_s: f64,
    pub chain_s: f64,
    pub builds_s: f64,
}

impl Bound {
    pub fn total(&self) -> f64 {
        (self.work_s + self.first_s)
            .max(self.link_s)
            .max(self.chain_s)
            .max(self.builds_s)
    }
}

pub fn of(m: &Mix, gpus: u32, link_bps: f64, make_slots: usize) -> Bound {
    let bytes = |i: &str| m.layers.get(i).map_or(0, |l| l.values().sum::<u64>()) as f64;
    // Seconds from an empty box to `img` here, with the link and a slot to itself.
    let arrival = |i: &str| match m.made.get(i) {
        Some(made) => bytes(&made.source) / link_bps + made.secs as f64,
        None => bytes(i) / link_bps,
    };
    let shortest = m.runs.iter().map(|r| r.secs).fold(f64::INFINITY, f64::min);
    let work: f64 = m.runs.iter().map(|r| r.secs * r.gpus as f64).sum();
    let first_s = m
        .runs
        .iter()
        .map(|r| arrival(&r.image))
        .fold(f64::INFINITY, f64::min);
    // Layers pulled: every layer of a pulled image or of a make's source (a made image's
    // own layer is written on the box).
    let pulled: Vec<&Manifest> = m
        .runs
        .iter()
        .map(|r| match m.made.get(&r.image) {
            Some(made) => &made.source,
            None => &r.image,
        })
        .filter_map(|i| m.layers.get(i))
        .collect();
    let link_s = Disk::of(pulled).bytes() as f64 / link_bps + shortest;
    let chain_s = m
        .runs
        .iter()
        .map(|r| arrival(&r.image) + r.secs)
        .fold(0.0, f64::max);
    let make_s: f64 = m.made.values().map(|x| x.secs as f64).sum();
    let builds_s = if m.made.is_empty() {
        0.0
    } else {
        let first_source = m
            .made
            .values()
            .map(|x| bytes(&x.source) / link_bps)
            .fold(f64::INFINITY, f64::min);
        first_source + make_s / make_slots.max(1) as f64 + shortest
    };
    Bound {
        work_s: work / gpus.max(1) as f64,
        first_s,
        link_s,
        chain_s,
        builds_s,
    }
}
