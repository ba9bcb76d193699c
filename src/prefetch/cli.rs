//! `nightshift prefetch PLAN`: fetch the plan's models and datasets ahead of the night,
//! so no run spends its server-start timeout on a download. What will be fetched goes to
//! stdout; progress goes to stderr.

use super::{
    check_fits, free_disk_bytes, hub_dataset, human_bytes, DatasetOutcome, Hub, HubDataset,
    ModelFiles, Progress, DISK_MARGIN_BYTES,
};
use crate::plan::Plan;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    pub models: bool,
    pub datasets: bool,
    /// Say what would be fetched; fetch nothing.
    pub dry_run: bool,
}

/// A model some runnable commit loads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WantedModel {
    pub id: String,
    /// `--revision` from the command, when it pins one.
    pub revision: Option<String>,
    /// GPUs the weights are spread over (TP × PP), the largest among the commits.
    pub gpus: u32,
    pub commits: usize,
}

/// A dataset from the plan's `[datasets]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WantedDataset {
    pub name: String,
    pub path: PathBuf,
    pub source: Option<&'static HubDataset>,
}

/// The distinct models of the plan's runnable commits (the model the command names, else
/// the commit's `model`; vLLM's own default when neither does), plus `--tokenizer` and
/// `--speculative-model` repos.
pub(crate) fn wanted_models(plan: &Plan) -> Vec<WantedModel> {
    let runnable: BTreeSet<usize> = plan
        .runs
        .iter()
        .filter(|r| r.skip_reason.is_none())
        .map(|r| r.commit)
        .collect();
    let mut out: BTreeMap<(String, Option<String>), WantedModel> = BTreeMap::new();
    let mut add = |id: String, revision: Option<String>, gpus: u32| {
        let w = out
            .entry((id.clone(), revision.clone()))
            .or_insert(WantedModel {
                id,
                revision,
                gpus: 0,
                commits: 0,
            });
        w.gpus = w.gpus.max(gpus);
        w.commits += 1;
    };
    for c in runnable.iter().filter_map(|&i| plan.commits.get(i)) {
        let view = c.view.as_ref();
        let flag = |names: &[&str]| {
            view.and_then(|v| {
                v.flags
                    .iter()
                    .rev()
                    .find(|f| names.contains(&f.name.as_str()))
                    .and_then(|f| f.value.clone())
            })
        };
        let model = view
            .and_then(|v| v.model.clone())
            .or_else(|| c.model.clone())
            .unwrap_or_else(|| "facebook/opt-125m".to_string());
        let gpus = view.map_or(1, |v| v.tp.max(1) * v.pp.max(1));
        if super::is_hub_id(&model) {
            add(model, flag(&["--revision"]), gpus);
        }
        for extra in [flag(&["--tokenizer"]), flag(&["--speculative-model"])]
            .into_iter()
            .flatten()
        {
            if super::is_hub_id(&extra) {
                add(extra, None, 0);
            }
        }
    }
    out.into_values().collect()
}

pub(crate) fn wanted_datasets(table: &BTreeMap<String, PathBuf>) -> Vec<WantedDataset> {
    table
        .iter()
        .map(|(name, path)| WantedDataset {
            name: name.clone(),
            path: path.clone(),
            source: hub_dataset(name),
        })
        .collect()
}

/// The command. Exit 0 when everything is in place, 1 when something could not be
/// fetched (or will not fit), 2 on bad input.
pub fn main(plan: &Plan, opts: Options) -> i32 {
    let base = plan.path.parent().unwrap_or(std::path::Path::new("."));
    let hf_cache = plan
        .defaults
        .hf_cache
        .as_deref()
        .map(|h| crate::plan::expand_path(h, base));
    let hub = match Hub::from_env(hf_cache.as_deref()) {
        Ok(h) => h,
        Err(e) => {
            tracing::error!("{e}");
            return 2;
        }
    };
    let models = if opts.models {
        wanted_models(plan)
    } else {
        Vec::new()
    };
    let datasets = if opts.datasets {
        wanted_datasets(&plan.datasets)
    } else {
        Vec::new()
    };
    let gpu_mem = if models.iter().any(|m| m.gpus > 0) {
        gpu_memory_per_gpu()
    } else {
        None
    };
    use std::io::IsTerminal;
    let live = std::io::stderr().is_terminal();
    crate::rt::block_on(run(
        &hub,
        &models,
        &datasets,
        gpu_mem,
        opts.dry_run,
        live,
        &mut std::io::stdout(),
        &mut std::io::stderr(),
    ))
}

/// The smallest GPU's memory as NVML sees it; `None` without NVML (not checked).
fn gpu_memory_per_gpu() -> Option<u64> {
    let nvml = nvml_wrapper::Nvml::init().ok()?;
    let n = nvml.device_count().ok()?;
    (0..n)
        .filter_map(|i| nvml.device_by_index(i).ok()?.memory_info().ok())
        .map(|m| m.total)
        .min()
}

/// Plan, print, fetch. `live`: stderr is a terminal, so progress redraws one line;
/// otherwise a progress line every 10 s.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    hub: &Hub,
    models: &[WantedModel],
    datasets: &[WantedDataset],
    gpu_mem_per_gpu: Option<u64>,
    dry_run: bool,
    live: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    let free = free_disk_bytes(hub.cache_dir());
    let _ = writeln!(
        out,
        "HF cache {} ({} free) · {} · token {}",
        hub.cache_dir().display(),
        free.map_or("? B".into(), human_bytes),
        hub.endpoint(),
        if hub.has_token() { "set" } else { "not set" },
    );
    if gpu_mem_per_gpu.is_none() && models.iter().any(|m| m.gpus > 0) {
        let _ = writeln!(
            out,
            "GPU memory unknown here (no NVML): weights not checked against it"
        );
    }
    let mut failed = false;
    let mut planned: Vec<(&WantedModel, ModelFiles)> = Vec::new();
    for w in models {
        let label = match &w.revision {
            Some(r) => format!("{}@{r}", w.id),
            None => w.id.clone(),
        };
        let files = match hub.plan_model(&w.id, w.revision.as_deref()).await {
            Ok(f) => f,
            Err(e) if e.is_network() => match hub.cached_model(&w.id, w.revision.as_deref()) {
                Some(f) => f,
                None => {
                    failed = true;
                    let _ = writeln!(out, "model   {label}  ✗ {e}");
                    continue;
                }
            },
            Err(e) => {
                failed = true;
                let _ = writeln!(out, "model   {label}  ✗ {e}");
                continue;
            }
        };
        let gpu = gpu_mem_per_gpu.filter(|_| w.gpus > 0);
        let status = if files.offline {
            "✓ cached (Hub unreachable: not checked for updates)".to_string()
        } else if files.to_download_bytes() == 0 {
            "✓ cached".to_string()
        } else {
            format!("to fetch {}", human_bytes(files.to_download_bytes()))
        };
        let _ = writeln!(
            out,
            "model   {label}  {} files {} (weights {}), cached {}  {status}{}",
            files.files.len(),
            human_bytes(files.total_bytes()),
            human_bytes(files.weights_bytes()),
            human_bytes(files.cached_bytes()),
            if w.gpus > 1 {
                format!("  on {} GPUs", w.gpus)
            } else {
                String::new()
            },
        );
        // Disk is checked against each model's own need here and again, with the space
        // left then, right before its download.
        if let Err(p) = check_fits(files.total_bytes(), gpu, w.gpus, free, files.cached_bytes()) {
            failed = true;
            let _ = writeln!(out, "        ✗ {p}");
            continue;
        }
        planned.push((w, files));
    }
    let mut fetch_sets: Vec<&WantedDataset> = Vec::new();
    let mut dataset_bytes = 0;
    for d in datasets {
        let path = d.path.display();
        if d.path.is_dir() {
            failed = true;
            let _ = writeln!(
                out,
                "dataset {}  {path}  ✗ is a folder; expected the file's path",
                d.name
            );
            continue;
        }
        let present = std::fs::metadata(&d.path).map(|m| m.len()).ok();
        match (d.source, present) {
            (Some(src), _) => {
                let size = hub.dataset_file_size(src.repo, src.file).await;
                let status = match (&size, present) {
                    (Ok(n), Some(p)) if *n == p => "✓ present".to_string(),
                    (Ok(n), _) => {
                        fetch_sets.push(d);
                        dataset_bytes += n;
                        format!("to fetch {} from {}", human_bytes(*n), src.repo)
                    }
                    (Err(e), Some(_)) if e.is_network() => {
                        "✓ present (Hub unreachable: size not checked)".to_string()
                    }
                    (Err(e), _) => {
                        failed = true;
                        format!("✗ {e}")
                    }
                };
                let _ = writeln!(out, "dataset {}  {path}  {status}", d.name);
            }
            (None, Some(n)) => {
                let _ = writeln!(
                    out,
                    "dataset {}  {path}  ✓ present ({})",
                    d.name,
                    human_bytes(n)
                );
            }
            (None, None) => {
                failed = true;
                let _ = writeln!(
                    out,
                    "dataset {}  {path}  ✗ missing, and nightshift knows no Hub source for `{}` (only sharegpt): put the file there",
                    d.name, d.name
                );
            }
        }
    }
    let to_fetch: u64 = planned
        .iter()
        .map(|(_, f)| f.to_download_bytes())
        .fold(0u64, u64::saturating_add);
    let _ = writeln!(
        out,
        "to fetch: {} of models, {} of datasets",
        human_bytes(to_fetch),
        human_bytes(dataset_bytes)
    );
    if let Some(free) = free {
        if to_fetch > 0 && to_fetch.saturating_add(DISK_MARGIN_BYTES) > free {
            let _ = writeln!(
                out,
                "warning: all models together need {} + {} margin, {} free: some will not fit",
                human_bytes(to_fetch),
                human_bytes(DISK_MARGIN_BYTES),
                human_bytes(free)
            );
        }
    }
    let _ = out.flush();
    if dry_run {
        return i32::from(failed);
    }
    let mut shown = Shown::new(live);
    for (w, files) in &planned {
        let free = free_disk_bytes(hub.cache_dir());
        if let Err(p) = check_fits(
            files.total_bytes(),
            None,
            w.gpus,
            free,
            files.cached_bytes(),
        ) {
            failed = true;
            let _ = writeln!(err, "prefetch: {}: {p}", w.id);
            continue;
        }
        let r = hub.fetch_model(files, |p| shown.show(err, &p)).await;
        shown.end(err);
        match r {
            Ok(s) => {
                let _ = writeln!(
                    err,
                    "prefetch: {} ready: {} downloaded ({} files), {} linked, {} cached, in {:.0?} → {}",
                    w.id,
                    human_bytes(s.downloaded_bytes),
                    s.downloaded_files,
                    s.linked_files,
                    s.cached_files,
                    s.elapsed,
                    s.snapshot.display()
                );
            }
            Err(e) => {
                failed = true;
                let _ = writeln!(err, "prefetch: {}: {e}", w.id);
            }
        }
    }
    for d in fetch_sets {
        let Some(src) = d.source else { continue };
        let r = hub
            .fetch_dataset_file(src.repo, src.file, &d.path, |p| shown.show(err, &p))
            .await;
        shown.end(err);
        match r {
            Ok(DatasetOutcome::Downloaded { bytes }) => {
                let _ = writeln!(
                    err,
                    "prefetch: dataset {} ready: {} → {}",
                    d.name,
                    human_bytes(bytes),
                    d.path.display()
                );
            }
            Ok(_) => {}
            Err(e) => {
                failed = true;
                let _ = writeln!(err, "prefetch: dataset {}: {e}", d.name);
            }
        }
    }
    i32::from(failed)
}

/// Progress on stderr: one redrawn line on a terminal, a line every 10 s otherwise.
struct Shown {
    live: bool,
    last: Option<Instant>,
    drawn: bool,
    /// (file, bytes) of the last line written: a file's end is reported once.
    last_line: Option<(String, u64)>,
}

impl Shown {
    fn new(live: bool) -> Shown {
        Shown {
            live,
            last: None,
            drawn: false,
            last_line: None,
        }
    }

    fn show(&mut self, err: &mut dyn Write, p: &Progress) {
        let key = (p.file.clone(), p.done);
        if self.last_line.as_ref() == Some(&key) {
            return;
        }
        if self.live {
            self.last_line = Some(key);
            let _ = write!(err, "\r\x1b[2K{p}");
            self.drawn = true;
        } else if self
            .last
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(10))
            || p.done == p.total
        {
            self.last = Some(Instant::now());
            self.last_line = Some(key);
            let _ = writeln!(err, "{p}");
        }
        let _ = err.flush();
    }

    fn end(&mut self, err: &mut dyn Write) {
        if self.drawn {
            let _ = writeln!(err);
            self.drawn = false;
        }
        self.last = None;
        self.last_line = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn models_of_runnable_commits_with_their_widest_parallelism() {
        let text = r#"schema_version = 1
[defaults]
variants = ["human"]
[images]
human = "acme/x:{commit}"
[[commits]]
commit = "1111111111111111111111111111111111111111"
perf_command = "python benchmarks/benchmark_latency.py --model org/a --tokenizer org/tok"
[[commits]]
commit = "2222222222222222222222222222222222222222"
perf_command = "python benchmarks/benchmark_latency.py --model org/a -tp 2 --pipeline-parallel-size 2"
gpu_config = "H100:4"
[[commits]]
commit = "3333333333333333333333333333333333333333"
perf_command = "python benchmarks/benchmark_latency.py --model org/skipped"
skip = true
[[commits]]
commit = "4444444444444444444444444444444444444444"
perf_command = "python benchmarks/benchmark_latency.py --model /models/local --revision v2"
"#;
        let plan =
            Plan::from_str_at("t.toml", text.into(), Path::new("."), Path::new("t.toml")).unwrap();
        let got: Vec<(String, u32, usize)> = wanted_models(&plan)
            .into_iter()
            .map(|w| (w.id, w.gpus, w.commits))
            .collect();
        assert_eq!(
            got,
            [("org/a".to_string(), 4, 2), ("org/tok".to_string(), 0, 1)]
        );
    }

    #[test]
    fn sharegpt_has_a_source_other_names_do_not() {
        let mut t = BTreeMap::new();
        t.insert("sharegpt".to_string(), PathBuf::from("/d/sg.json"));
        t.insert("sonnet".to_string(), PathBuf::from("/d/sonnet.txt"));
        let w = wanted_datasets(&t);
        assert!(w[0].source.is_some() && w[1].source.is_none());
    }
}
