//! `nightshift bench night`: the seed mix on 8 GPUs, 1 Gb/s, 500 GB free; inline against
//! prefetch, with images counted whole and with layers shared; the assumptions first, the
//! lower bound's parts after, so a reader can check the numbers against the box.

use crate::night::model::{self, BASE, BUILD_S, GB, OVERLAY_S, TREE, VLLM};
use crate::night::{simulate, Box_, Night};
use crate::plan::Plan;
use std::io::Write;

fn gb(b: u64) -> String {
    let g = b as f64 / GB as f64;
    if g.fract() == 0.0 {
        format!("{g:.0}")
    } else {
        format!("{g:.1}")
    }
}

fn h(s: f64) -> String {
    format!("{:.2}h", s / 3600.0)
}

pub fn bench(plan: &Plan, out: &mut dyn Write) -> std::io::Result<()> {
    let bx = Box_::seed(500);
    let eras = model::mix(plan, bx.gpus, true).eras;
    let base: u64 = BASE.iter().map(|(_, b)| b).sum();
    writeln!(
        out,
        "night: {} on {} GPUs, 1 Gb/s link, {} GB free (keep {} GB), {} images made at once (builds: {} of them)",
        plan.name,
        bx.gpus,
        bx.disk_free / GB,
        bx.budget.min_free / GB,
        bx.make_slots,
        bx.make_slots.saturating_sub(1).max(1),
    )?;
    writeln!(out, "assumptions:")?;
    writeln!(
        out,
        "  layers: an era is a vLLM minor release ({}); its images share {} GB of base layers ({}); \
         a commit without vllm_version is put in an era by a hash of its name",
        eras.join(", "),
        gb(base),
        BASE.iter()
            .map(|(n, b)| format!("{n} {}", gb(*b)))
            .collect::<Vec<_>>()
            .join(", "),
    )?;
    writeln!(
        out,
        "  a human image adds its commit's vLLM layer ({}–{} GB); a baseline is the human image plus \
         the parent's tree ({}–{} GB), pulled or made; so images are {}–{} GB whole",
        gb(VLLM.0),
        gb(VLLM.1),
        gb(TREE.0),
        gb(TREE.1),
        gb(base + VLLM.0),
        gb(base + VLLM.1 + TREE.1),
    )?;
    writeln!(
        out,
        "  made: 30 of 78 baselines missing as in the seeds; an overlay takes {} min, a build {} min",
        OVERLAY_S / 60,
        BUILD_S / 60
    )?;
    writeln!(
        out,
        "  order: big-GPU commits first, then 1-GPU commits longest first, a built one where its build \
         should be done; a started commit's runs first; the first run in order whose image is here takes GPUs, others pass it only by backfilling"
    )?;
    let mut parts = Vec::new();
    for (title, share) in [
        ("no layer sharing (every image counts whole)", false),
        (
            "layers shared (base per era, a baseline on its human image)",
            true,
        ),
    ] {
        writeln!(out, "\n{title}")?;
        writeln!(
            out,
            "{:<10} {:>5} {:>10} {:>11} {:>9} {:>16} {:>12} {:>10} {:>8} {:>7}",
            "strategy",
            "runs",
            "makespan",
            "lower bound",
            "× bound",
            "GPU-min waiting",
            "pulled",
            "peak disk",
            "made",
            "idle"
        )?;
        for (name, prefetch) in [("inline", false), ("prefetch", true)] {
            let n = simulate(plan, &bx, prefetch, share);
            row(out, name, &n)?;
            if prefetch {
                parts.push((share, n));
            }
        }
    }
    writeln!(
        out,
        "\nmade: baselines derived by overlay + built from source; idle: GPU time waiting on images \
         over GPUs × lower bound"
    )?;
    writeln!(
        out,
        "lower bound = max(work + first image, link, chain, builds):"
    )?;
    let spans: Vec<f64> = parts.iter().map(|(_, n)| n.commit_span_s).collect();
    for (share, n) in parts {
        let b = n.bound;
        writeln!(
            out,
            "  {:<7} work {} (GPU work / {} GPUs) + first image {} | link {} | chain {} | builds {} → {}",
            if share { "layers" } else { "whole" },
            h(b.work_s),
            n.gpus,
            h(b.first_s),
            h(b.link_s),
            h(b.chain_s),
            h(b.builds_s),
            h(b.total()),
        )?;
    }
    writeln!(
        out,
        "prefetch: a commit's runs, first start to last end, {:.0} min on average (whole) / {:.0} (layers)",
        spans[0] / 60.0,
        spans[1] / 60.0
    )
}

fn row(out: &mut dyn Write, name: &str, n: &Night) -> std::io::Result<()> {
    writeln!(
        out,
        "{name:<10} {:>5} {:>9.1}h {:>10.1}h {:>9.2} {:>16.0} {:>9.0} GB {:>7.0} GB {:>3}+{:<3} {:>6.1}%",
        n.runs,
        n.makespan_s / 3600.0,
        n.lower_bound_s / 3600.0,
        n.ratio(),
        n.gpu_wait_s / 60.0,
        n.bytes_pulled as f64 / GB as f64,
        n.peak_disk as f64 / GB as f64,
        n.derived,
        n.built,
        n.idle_share() * 100.0,
    )
}
