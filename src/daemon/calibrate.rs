//! `nightshift calibrate PLAN`: measure this box's noise. The baselines of a few of the
//! plan's commits are run several times each, unchanged (an A/A experiment), into their
//! own store beside the sweep's (`<store>-calibration`); the spread of each metric across those identical runs,
//! per model-size class, is the noise band that single-run comparisons are then judged by.
//! The band is kept in the sweep's store, so `results` and the digest use it.

use crate::engine::{Engine, EngineOptions};
use crate::model::{RunId, Variant};
use crate::plan::Plan;
use crate::report;
use crate::runtime::Runtime;
use crate::stats::Calibration;
use crate::store::resume::{self, ResumeOptions};
use crate::store::Store;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The A/A plan: the baseline of the first `commits` runnable commits, `repeats` times
/// each, back to back (the drift between groups is not noise within one).
pub(crate) fn aa_plan(plan: &Plan, commits: usize, repeats: u32) -> Plan {
    let mut p = plan.clone();
    p.name = format!("{}-calibrate", plan.name);
    p.hash = format!("{}-calibrate-{commits}x{repeats}", plan.hash);
    let bases: Vec<_> = plan
        .runs
        .iter()
        .filter(|r| r.variant == Variant::Baseline && r.repeat == 0 && r.skip_reason.is_none())
        .take(commits)
        .cloned()
        .collect();
    p.runs = bases
        .iter()
        .flat_map(|b| {
            (0..repeats).map(move |r| {
                let mut s = b.clone();
                let c = &plan.commits[b.commit].commit;
                s.key = format!("{}/baseline/aa{}", &c[..c.len().min(12)], r + 1);
                s.repeat = r;
                s.warmup = false;
                s.order = u8::try_from(r).unwrap_or(u8::MAX);
                s
            })
        })
        .enumerate()
        .map(|(i, mut s)| {
            s.id = RunId(i as u32);
            s
        })
        .collect();
    p
}

/// The bands the A/A store shows: every group of identical runs it holds.
pub(crate) fn bands_of(store: &Store) -> anyhow::Result<Calibration> {
    let all = store.docs()?;
    let docs = store.in_order(&all);
    let mut c = report::learn_bands(&docs);
    for b in c.bands.values_mut() {
        b.source = "calibrate".into();
    }
    c.saved_ms = crate::event::now_ms();
    Ok(c)
}

/// Where the A/A runs are kept: beside the sweep's store (`<store>-calibration`), never
/// mixed with the sweep's runs nor inside its directory (snapshots copy that whole).
pub(crate) fn aa_dir(store: &Path) -> PathBuf {
    let mut name = store.file_name().unwrap_or_default().to_os_string();
    name.push("-calibration");
    store.with_file_name(name)
}

/// Run the A/A plan on `runtime` into [`aa_dir`], then save the bands into the
/// sweep's store and print them. Exit status as the CLI's.
pub fn main(
    plan: &Plan,
    runtime: Arc<dyn Runtime>,
    store: &Path,
    gpus: u32,
    (commits, repeats): (usize, u32),
    (seed, time_scale): (u64, f64),
) -> i32 {
    let aa = Arc::new(aa_plan(plan, commits, repeats));
    if aa.runs.is_empty() {
        tracing::error!("the plan has no runnable baseline to calibrate with");
        return 2;
    }
    let dir = aa_dir(store);
    let s = match Store::open(&dir, true) {
        Ok(s) => s,
        Err(e) => return super::commands::store_error(&e),
    };
    let (obs, state, _) = match resume::prepare(s, &aa, &ResumeOptions::default()) {
        Ok(x) => x,
        Err(e) => {
            tracing::error!("{e:#}");
            return 1;
        }
    };
    tracing::info!(
        "calibrate: {} A/A runs ({} commits × {repeats}) into {}",
        aa.runs.len(),
        aa.runs.len() / repeats.max(1) as usize,
        dir.display()
    );
    let res = crate::rt::block_on(async {
        let (engine, _c) = Engine::new(
            aa.clone(),
            runtime,
            EngineOptions {
                gpus,
                seed,
                wait_for_operator: false,
            },
        );
        let mut engine = engine.with_state(state).with_time_scale(time_scale);
        engine.observe(Box::new(obs));
        engine.run(CancellationToken::new()).await
    });
    if let Err(e) = res {
        tracing::error!("{e:#}");
        return 1;
    }
    let bands = match Store::open(&dir, false)
        .map_err(anyhow::Error::from)
        .and_then(|s| bands_of(&s))
    {
        Ok(b) => b,
        Err(e) => {
            tracing::error!("{e:#}");
            return 1;
        }
    };
    if bands.is_empty() {
        tracing::error!("no metric had two successful identical runs; nothing calibrated");
        return 1;
    }
    let saved = Store::open(store, true)
        .map_err(anyhow::Error::from)
        .and_then(|mut s| s.put_calibration(&bands));
    if let Err(e) = saved {
        tracing::error!("cannot save the calibration: {e:#}");
        return 1;
    }
    for (k, b) in &bands.bands {
        println!(
            "{k}: ±{:.2}% per run ({} runs in {} groups)",
            b.cv_pct(),
            b.runs,
            b.groups
        );
    }
    println!(
        "calibrate: {} bands saved in {}",
        bands.bands.len(),
        store.display()
    );
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_aa_plan_repeats_baselines_only() {
        let plan = crate::plan::example::example_plan();
        let aa = aa_plan(&plan, 2, 4);
        assert_eq!(aa.runs.len(), 8);
        assert!(aa.runs.iter().all(|r| r.variant == Variant::Baseline));
        assert!(aa
            .runs
            .iter()
            .enumerate()
            .all(|(i, r)| r.id.0 as usize == i));
        let keys: std::collections::BTreeSet<_> = aa.runs.iter().map(|r| &r.key).collect();
        assert_eq!(keys.len(), 8);
        assert_ne!(aa.hash, plan.hash);
    }
}
