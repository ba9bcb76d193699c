//! The night's inputs on paper: which runs, how long, which images, of which layers, and
//! how a missing baseline is made. Deterministic: sizes and durations come from hashes of
//! names, so the same plan gives the same night on every machine.

use crate::images::layers::Manifest;
use crate::images::Made;
use crate::model::Variant;
use crate::plan::{CommitSpec, Plan};
use std::collections::{BTreeMap, BTreeSet};

pub const GB: u64 = 1_000_000_000;

/// Base layers of every image of one era: (layer, bytes). An era is a vLLM minor release:
/// each pins its own CUDA, Python and torch, and images built in it share these layers.
pub const BASE: [(&str, u64); 3] = [
    ("cuda", 6_500_000_000),
    ("python", 1_500_000_000),
    ("torch", 4_000_000_000),
];
/// A commit's own vLLM layer: 5–8 GB (the wheel, its kernels and dependencies).
pub const VLLM: (u64, u64) = (5 * GB, 8 * GB);
/// A baseline's own layer on the human image (the parent's tree installed): 0.5–2 GB.
pub const TREE: (u64, u64) = (GB / 2, 2 * GB);
/// Making a missing baseline: overlaying the parent's Python files, or building it.
pub const OVERLAY_S: u64 = 4 * 60;
pub const BUILD_S: u64 = 45 * 60;

/// FNV-1a: stable across builds and platforms, which a night on paper must be.
pub fn hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

fn between(key: &str, (lo, hi): (u64, u64)) -> u64 {
    lo + hash(key) % (hi - lo + 1)
}

/// How a missing image is made, if it is: 30 of 78 seed baselines were never built; of
/// those, about one in three changes compiled code and needs a build.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Make {
    Pull,
    Overlay,
    Build,
}

pub(crate) fn how_made(img: &str, baseline: bool) -> Make {
    let h = hash(img);
    if !baseline || h % 78 >= 30 {
        Make::Pull
    } else if h % 3 == 0 {
        Make::Build
    } else {
        Make::Overlay
    }
}

/// The era of a commit: its vLLM minor release from the plan's `vllm_version`; a commit
/// without one is put in one of the plan's eras by a hash of its name, as the sim runtime
/// does (its history would tell, on a box with the clone).
pub fn era(c: &CommitSpec, eras: &[String]) -> String {
    c.vllm_version
        .as_deref()
        .and_then(minor)
        .or_else(|| {
            (!eras.is_empty()).then(|| eras[(hash(&c.commit) % eras.len() as u64) as usize].clone())
        })
        .unwrap_or_else(|| "unknown".into())
}

fn minor(v: &str) -> Option<String> {
    let mut it = v.split('.');
    let (a, b) = (it.next()?, it.next()?);
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit());
    (digits(a) && digits(b)).then(|| format!("{a}.{b}"))
}

#[derive(Debug, Clone)]
pub struct Run {
    pub image: String,
    pub commit: usize,
    pub variant_order: u8,
    pub gpus: u32,
    pub secs: f64,
}

/// The runs, and what their images are made of.
#[derive(Debug, Clone, Default)]
pub struct Mix {
    pub runs: Vec<Run>,
    /// Every image a run or a make needs → its layers (with `share` off, one layer each).
    pub layers: BTreeMap<String, Manifest>,
    /// Images made on the box from the commit's human image.
    pub made: BTreeMap<String, Made>,
    /// Eras seen, in order.
    pub eras: Vec<String>,
}

/// The plan's runnable runs on a box of `gpus`; `share`: images share their base layers
/// per era, and a baseline its human image's layers; else every image counts whole.
pub fn mix(plan: &Plan, gpus: u32, share: bool) -> Mix {
    let mut eras: Vec<String> = plan
        .commits
        .iter()
        .filter_map(|c| c.vllm_version.as_deref().and_then(minor))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    eras.sort_by_key(|e| {
        e.split('.')
            .map(|p| p.parse::<u32>().unwrap_or(0))
            .collect::<Vec<_>>()
    });
    let mut m = Mix {
        eras: eras.clone(),
        ..Default::default()
    };
    // Layers as if shared; flattened into one layer per image at the end without sharing.
    let mut layers: BTreeMap<String, Manifest> = BTreeMap::new();
    for r in plan.runs.iter().filter(|r| r.skip_reason.is_none()) {
        let Some(image) = r.image.clone().filter(|i| !i.is_empty()) else {
            continue;
        };
        let commit = plan.commit_of(r);
        let human = plan
            .runs
            .iter()
            .find(|o| o.commit == r.commit && o.variant == Variant::Human)
            .and_then(|o| o.image.clone())
            .filter(|i| !i.is_empty());
        let era = era(commit, &eras);
        let human_layers = |h: &str| -> Manifest {
            let mut l: Manifest = BASE
                .iter()
                .map(|(n, b)| (format!("{era}/{n}"), *b))
                .collect();
            l.insert(format!("vllm@{h}"), between(h, VLLM));
            l
        };
        let baseline = r.variant != Variant::Human;
        match (&human, baseline) {
            (Some(h), true) if *h != image => {
                let mut l = human_layers(h);
                layers.entry(h.clone()).or_insert_with(|| l.clone());
                l.insert(format!("tree@{image}"), between(&image, TREE));
                layers.entry(image.clone()).or_insert(l);
                let secs = match how_made(&image, true) {
                    Make::Pull => None,
                    Make::Overlay => Some(OVERLAY_S),
                    Make::Build => Some(BUILD_S),
                };
                if let Some(secs) = secs {
                    m.made.entry(image.clone()).or_insert(Made {
                        source: h.clone(),
                        secs,
                    });
                }
            }
            _ => {
                layers
                    .entry(image.clone())
                    .or_insert_with(|| human_layers(&image));
            }
        }
        let h = hash(&r.key);
        // Server start + benchmark: serving 12–25 min, offline 6–15 min.
        let secs = if commit.needs_server() {
            720.0 + (h % 780) as f64
        } else {
            360.0 + (h % 540) as f64
        };
        m.runs.push(Run {
            image,
            commit: r.commit,
            variant_order: r.order,
            gpus: r.gpus.clamp(1, gpus),
            secs,
        });
    }
    m.layers = if share {
        layers
    } else {
        layers
            .into_iter()
            .map(|(i, l)| {
                let whole = l.values().sum();
                (i.clone(), Manifest::from([(i, whole)]))
            })
            .collect()
    };
    m
}
