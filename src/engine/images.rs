//! Images ahead of the GPUs: one task that brings the next runs' images onto the box and
//! removes the ones nobody needs, within the disk budget ([`crate::images`] decides; this
//! task only does what it says). The engine tells it what the remaining runs need; it
//! tells the engine which images are ready, so that no run waits on a pull holding GPUs.

use crate::event::ImageStatus;
use crate::images::{self, Budget, Step, Stock};
use crate::runtime::{RunJob, RunSink, Runtime, RuntimeMsg};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

/// What the remaining runs need, as the engine sees it now.
#[derive(Debug, Clone, Default)]
pub struct Demand {
    /// Images of the queued runs, in the order they will run.
    pub upcoming: Vec<String>,
    /// Images of every run not yet finished.
    pub needed: BTreeSet<String>,
    /// Images of runs in flight.
    pub in_use: BTreeSet<String>,
    /// Every image the plan names (what may be on the box from this sweep).
    pub all: Vec<String>,
    /// A job per image to fetch it with (the first queued run that needs it).
    pub jobs: HashMap<String, RunJob>,
}

/// What the task reports to the engine.
#[derive(Debug, Clone)]
pub struct Report {
    pub image: String,
    pub status: ImageStatus,
    pub detail: String,
    /// The run the fetch was made for (its panel shows the pull's progress).
    pub pull: Option<(crate::model::RunId, String, u64, u64)>,
}

fn report(image: &str, status: ImageStatus, detail: impl Into<String>) -> Report {
    Report {
        image: image.to_string(),
        status,
        detail: detail.into(),
        pull: None,
    }
}

fn gb(b: u64) -> String {
    format!("{:.1} GB", b as f64 / 1e9)
}

/// Runs until `stop` fires or the engine goes away.
pub async fn run(
    runtime: Arc<dyn Runtime>,
    budget: Budget,
    mut demand: watch::Receiver<Demand>,
    out: mpsc::Sender<Report>,
    stop: CancellationToken,
) {
    let (done_tx, mut done_rx) = mpsc::channel::<(String, Result<(), String>)>(64);
    let mut fetching: BTreeMap<String, u64> = BTreeMap::new();
    let mut failed: BTreeSet<String> = BTreeSet::new();
    let mut told_ready: BTreeSet<String> = BTreeSet::new();
    let mut told_short: Option<String> = None;
    loop {
        let d = demand.borrow_and_update().clone();
        let (free, present) = runtime.image_stock(&d.all).await;
        for img in d.needed.iter().filter(|i| present.contains_key(*i)) {
            if told_ready.insert(img.clone()) {
                let msg = format!("on the box ({})", gb(present[img]));
                if out
                    .send(report(img, ImageStatus::Ready, msg))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        }
        told_ready.retain(|i| present.contains_key(i));
        let stock = Stock {
            free,
            present: present.clone(),
            fetching: fetching.clone(),
            in_use: d.in_use.clone(),
            sizes: BTreeMap::new(),
            // The runtime reports neither layers nor, before it tries, whether an image
            // will be pulled or made: images count whole, and a make as a pull.
            layers: BTreeMap::new(),
            made: BTreeMap::new(),
            make_slots: 0,
        };
        // A failed fetch is not tried again here: the run's own attempt pulls, so the
        // failure is diagnosed and decided like any other.
        let upcoming: Vec<String> = d
            .upcoming
            .iter()
            .filter(|i| !failed.contains(*i))
            .cloned()
            .collect();
        for step in images::plan(&upcoming, &d.needed, &stock, &budget) {
            let r = match step {
                Step::Evict(img) => match runtime.evict_image(&img).await {
                    Ok(bytes) => report(
                        &img,
                        ImageStatus::Evicted,
                        format!(
                            "removed for room: no remaining run needs it ({} freed)",
                            gb(bytes)
                        ),
                    ),
                    Err(e) => report(&img, ImageStatus::Log, format!("could not remove it: {e}")),
                },
                Step::Fetch(img) => {
                    let Some(job) = d.jobs.get(&img).cloned() else {
                        continue;
                    };
                    fetching.insert(img.clone(), budget.default_size);
                    told_short = None;
                    spawn_fetch(
                        runtime.clone(),
                        job,
                        img.clone(),
                        out.clone(),
                        done_tx.clone(),
                        stop.clone(),
                    );
                    report(
                        &img,
                        ImageStatus::Fetching,
                        format!(
                            "fetching ahead of its runs ({} free on disk)",
                            free.map_or("unknown".into(), gb)
                        ),
                    )
                }
                Step::Wait { image, short_by } | Step::Full { image, short_by }
                    if told_short.as_deref() == Some(&image) && short_by > 0 =>
                {
                    continue;
                }
                Step::Wait { image, short_by } => {
                    told_short = Some(image.clone());
                    report(
                        &image,
                        ImageStatus::Waiting,
                        format!(
                            "{} short of the disk budget; waiting for runs in flight to make room",
                            gb(short_by)
                        ),
                    )
                }
                Step::Full { image, short_by } => {
                    told_short = Some(image.clone());
                    report(&image, ImageStatus::Full, format!("{} short of the disk budget and no image can be removed (every one is needed or kept): free disk space, then resume", gb(short_by)))
                }
            };
            if out.send(r).await.is_err() {
                return;
            }
        }
        tokio::select! {
            changed = demand.changed() => if changed.is_err() { return },
            Some((img, result)) = done_rx.recv() => {
                fetching.remove(&img);
                let r = match result {
                    Ok(()) => {
                        told_ready.insert(img.clone());
                        report(&img, ImageStatus::Ready, "fetched")
                    }
                    Err(e) => {
                        failed.insert(img.clone());
                        report(&img, ImageStatus::Failed, e)
                    }
                };
                if out.send(r).await.is_err() {
                    return;
                }
            }
            _ = stop.cancelled() => return,
        }
    }
}

/// One fetch in its own task; its log and progress go to the engine as they come.
fn spawn_fetch(
    runtime: Arc<dyn Runtime>,
    job: RunJob,
    img: String,
    out: mpsc::Sender<Report>,
    done: mpsc::Sender<(String, Result<(), String>)>,
    stop: CancellationToken,
) {
    let run = job.run;
    let (tx, mut rx) = mpsc::channel(256);
    let sink = RunSink::new(run, 0, tx);
    let forward_img = img.clone();
    let forward = tokio::spawn(async move {
        while let Some((_, _, msg)) = rx.recv().await {
            let r = match msg {
                RuntimeMsg::Log { line, .. } => report(&forward_img, ImageStatus::Log, line),
                RuntimeMsg::Pull { layer, done, total } => Report {
                    pull: Some((run, layer, done, total)),
                    ..report(&forward_img, ImageStatus::Log, String::new())
                },
                _ => continue,
            };
            if out.send(r).await.is_err() {
                return;
            }
        }
    });
    tokio::spawn(async move {
        let result = runtime
            .fetch_image(job, sink, stop)
            .await
            .map_err(|end| format!("{end:?}"));
        // Every line of the fetch reaches the engine before its result does.
        let _ = forward.await;
        let _ = done.send((img, result)).await;
    });
}

/// The engine's end of the image task: the disk budget it is given, the demand it is told
/// (sent again only when something it depends on changed) and the reports it hears back.
pub(super) struct Prefetch {
    pub(super) image_budget: Budget,
    pub(super) demand_tx: Option<tokio::sync::watch::Sender<Demand>>,
    pub(super) image_rx: Option<mpsc::Receiver<Report>>,
    pub(super) demand_dirty: bool,
}

impl Default for Prefetch {
    fn default() -> Prefetch {
        Prefetch {
            image_budget: Budget::default(),
            demand_tx: None,
            image_rx: None,
            // The first demand is always sent.
            demand_dirty: true,
        }
    }
}
