//! The edges of the preflight: the vLLM clone (eras, architectures, `git apply --check`),
//! the HF cache and the Hub, the Docker engine and the registries, the datasets on disk.
//! Lookups over the network run concurrently and are cached between preflights; the first
//! failure to reach the Hub marks the rest unchecked instead of waiting on each.

use super::cache::{LookupCache, KEEP_FOUND_S, KEEP_MISSING_S};
use super::facts::{
    BoxFacts, CommitFacts, DatasetFacts, Era, Facts, ImageState, Known, ModelFacts, PatchState,
};
use super::hub::{self, HubClient};
use super::registry;
use crate::plan::clone::{patch_needs_build, Clone};
use crate::plan::{expand_path, Plan};
use crate::runtime::docker::auth::DockerAuth;
use futures_util::stream::{self, StreamExt};
use rayon::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Lookups in flight at once (Hub and registry).
const CONCURRENCY: usize = 16;

#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Only what the box and the clone can tell: no Hub, no registry.
    pub offline: bool,
    /// GPUs on the box (default: NVML's count; unknown without a driver).
    pub gpus: Option<u32>,
    /// Memory of one GPU in GiB (default: NVML, else the plan's gpu_type).
    pub gpu_mem_gib: Option<f64>,
    /// Ask the local Docker engine which images it has.
    pub docker: bool,
    /// Where Hub and registry answers are kept (`None`: this process only).
    pub cache: Option<PathBuf>,
}

fn plan_dir(plan: &Plan) -> &Path {
    plan.path.parent().unwrap_or(Path::new("."))
}

/// The HF hub cache the night's containers will read.
pub(crate) fn hub_cache(plan: &Plan) -> PathBuf {
    match &plan.defaults.hf_cache {
        Some(h) => expand_path(h, plan_dir(plan)).join("hub"),
        None => crate::prefetch::Hub::from_env(None)
            .map(|h| h.cache_dir().to_path_buf())
            .unwrap_or_else(|_| PathBuf::from("hub")),
    }
}

fn era_of(clone: &Clone, rev: &str) -> Known<Era> {
    match clone.describe(rev) {
        Some((tag, after)) => {
            let version = tag.trim_start_matches('v').to_string();
            let first = clone.first_release_containing(rev);
            let mut source = format!("git describe: {tag}+{after}");
            if let Some(f) = first {
                source.push_str(&format!(", first released in {f}"));
            }
            Known::Yes(Era { version, source })
        }
        None => Known::Unknown(format!(
            "no release tag is an ancestor of {rev} in the clone"
        )),
    }
}

/// Everything that can be learned about `plan` on this box.
pub(crate) async fn gather(plan: &Plan, opts: &Options) -> Facts {
    let mut not_reached = Vec::new();
    let clone = match &plan.defaults.vllm_src {
        Some(src) => {
            let dir = expand_path(src, plan_dir(plan));
            let c = Clone::open(&dir);
            if c.is_none() {
                not_reached.push(format!(
                    "vLLM clone: {} is not a git clone (eras from vllm_version only; patches not test-applied)",
                    dir.display()
                ));
            }
            c
        }
        None => {
            not_reached.push("vLLM clone: the plan names no vllm_src".into());
            None
        }
    };

    // Eras, architectures and patches from the clone: git processes, on every core.
    let commits: Vec<CommitFacts> = plan
        .commits
        .par_iter()
        .enumerate()
        .map(|(ci, c)| commit_facts(plan, ci, c, clone.as_ref()))
        .collect();

    let mut cache = match &opts.cache {
        Some(p) => LookupCache::open(p),
        None => LookupCache::memory(),
    };
    let hub_cache = hub_cache(plan);
    let models = models(plan, opts, &hub_cache, &mut cache, &mut not_reached).await;
    let mut commits = commits;
    let images = images(plan, opts, &mut cache, &mut not_reached).await;
    for (ci, cf) in commits.iter_mut().enumerate() {
        for r in plan.runs.iter().filter(|r| r.commit == ci && r.repeat == 0) {
            if let Some(img) = &r.image {
                if let Some(st) = images.get(img) {
                    cf.images.insert(r.variant.to_string(), st.clone());
                    if let (ImageState::Local { id: Some(id), .. }, Some(view)) =
                        (st, plan.commits[ci].view.as_ref())
                    {
                        let kind = view.kind.or(plan.commits[ci].mode).unwrap_or_default();
                        let l = crate::runtime::docker::memo::learned(id, kind);
                        if l.client.is_some() || l.server.is_some() {
                            cf.learned.insert(r.variant.to_string(), l);
                        }
                    }
                }
            }
        }
        // The architecture in each variant's tree, when the clone and the config tell.
        if let (Some(cl), Some(model)) = (clone.as_ref(), model_of(&plan.commits[ci])) {
            let arch = models
                .get(&model)
                .and_then(|m| m.architectures().into_iter().next());
            if let Some(arch) = arch {
                const MODELS: &str = "vllm/model_executor/models";
                for (v, rev) in revisions(plan, ci) {
                    // No registry folder in the tree is no evidence about the model: a
                    // shallow or partial clone, a moved folder. Only a registry that lacks
                    // the architecture is.
                    let k = if !cl.has_path(&rev, MODELS) {
                        Known::Unknown(format!(
                            "{MODELS} is not in the clone's tree at {rev}: {arch} not looked up"
                        ))
                    } else {
                        match cl.tree_mentions(&rev, MODELS, &format!("\"{arch}\"")) {
                            Some(b) => Known::Yes(b),
                            None => Known::Unknown(format!("git grep at {rev} failed")),
                        }
                    };
                    cf.arch_in_tree.insert(v, k);
                }
            }
        }
    }
    if let Err(e) = cache.save() {
        tracing::warn!("preflight cache not kept: {e}");
    }
    Facts {
        commits,
        models,
        host: host(plan, opts, &hub_cache),
        not_reached,
    }
}

/// The model the night loads: the command's `--model` (what vLLM is given), else the
/// plan's `model`.
pub(crate) fn model_of(c: &crate::plan::CommitSpec) -> Option<String> {
    c.view
        .as_ref()
        .and_then(|v| v.model.clone())
        .or_else(|| c.model.clone())
}

/// A model named by a path: the container sees only the HF cache mount, so a path on the
/// operator's disk is not there.
fn local_path_facts(model: &str) -> ModelFacts {
    ModelFacts {
        exists: Some(false),
        source: format!("{model} is a local path; the container sees only the HF cache mount"),
        ..ModelFacts::default()
    }
}

/// (variant, the revision its tree is at): the commit for human, the parent otherwise.
fn revisions(plan: &Plan, ci: usize) -> Vec<(String, String)> {
    let c = &plan.commits[ci];
    let mut out: Vec<(String, String)> = Vec::new();
    for r in plan.runs.iter().filter(|r| r.commit == ci && r.repeat == 0) {
        let v = r.variant.to_string();
        if out.iter().any(|(x, _)| *x == v) {
            continue;
        }
        let rev = if r.variant.order() == 1 {
            Some(c.commit.clone())
        } else {
            c.parent.clone()
        };
        if let Some(rev) = rev {
            out.push((v, rev));
        }
    }
    out
}

fn commit_facts(
    plan: &Plan,
    ci: usize,
    c: &crate::plan::CommitSpec,
    clone: Option<&Clone>,
) -> CommitFacts {
    let mut cf = CommitFacts::default();
    let mut by_rev: BTreeMap<String, Known<Era>> = BTreeMap::new();
    type Tree = (
        Option<super::facts::SourceFlags>,
        BTreeMap<String, Known<bool>>,
    );
    let mut by_tree: BTreeMap<String, Tree> = BTreeMap::new();
    for (v, rev) in revisions(plan, ci) {
        let era = match clone {
            Some(cl) => by_rev
                .entry(rev.clone())
                .or_insert_with(|| era_of(cl, &rev))
                .clone(),
            None => Known::Unknown("no vLLM clone".into()),
        };
        cf.eras.insert(v.clone(), era);
        // What the variant's own tree defines and holds, where the clone can tell.
        // Read once per revision: the baseline and every agent share the parent's tree.
        if let (Some(cl), Some(view)) = (clone, c.view.as_ref()) {
            let kind = view.kind.or(c.mode).unwrap_or_default();
            let (sf, ev) = by_tree
                .entry(rev.clone())
                .or_insert_with(|| {
                    (
                        super::source::flags_at(cl, &rev, view, kind),
                        super::source::rule_evidence(cl, &rev, view),
                    )
                })
                .clone();
            if let Some(sf) = sf {
                cf.source_flags.insert(v.clone(), sf);
            }
            if !ev.is_empty() {
                cf.rule_evidence.insert(v, ev);
            }
        }
    }
    for r in plan.runs.iter().filter(|r| r.commit == ci && r.repeat == 0) {
        let (Some(_), Some(p)) = (r.variant.agent_id(), &r.patch) else {
            continue;
        };
        let path = expand_path(p, plan_dir(plan));
        let shown = path.display().to_string();
        let state = match crate::bounded::read_file(&path, crate::plan::limits::MAX_PATCH_BYTES) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                PatchState::Missing { path: shown }
            }
            Err(e) => PatchState::DoesNotApply {
                path: shown,
                error: e.to_string(),
            },
            Ok(bytes) => {
                let text = String::from_utf8_lossy(&bytes);
                let checked = match (clone, &c.parent) {
                    (Some(cl), Some(parent)) => match cl.apply_check(parent, &path) {
                        Ok(()) => Known::Yes(()),
                        Err(error) => {
                            cf.patches.insert(
                                r.variant.to_string(),
                                PatchState::DoesNotApply { path: shown, error },
                            );
                            continue;
                        }
                    },
                    (None, _) => Known::Unknown("no vLLM clone".into()),
                    (_, None) => Known::Unknown("no parent commit".into()),
                };
                PatchState::Present {
                    path: shown,
                    checked,
                    needs_build: patch_needs_build(&text),
                    outside_package: crate::patchfile::only_under(&text, "vllm/").1,
                }
            }
        };
        cf.patches.insert(r.variant.to_string(), state);
    }
    if let Some(inv) = &c.invocation {
        let mut seen = BTreeSet::new();
        for m in &inv.mounts {
            if !seen.insert(m.host.clone()) || m.host.exists() {
                continue;
            }
            cf.datasets.push(DatasetFacts {
                name: m.name.clone(),
                present: false,
                fetchable: crate::prefetch::hub_dataset(&m.name).is_some(),
                detail: format!(
                    "{} is not on this box (`nightshift prefetch` fetches known datasets)",
                    m.host.display()
                ),
            });
        }
        for d in &inv.hub_datasets {
            let dir = hub_cache(plan).join(format!("datasets--{}", d.replace('/', "--")));
            if !dir.is_dir() {
                cf.datasets.push(DatasetFacts {
                    name: d.clone(),
                    present: false,
                    // The container starts offline: what is not in the cache by then
                    // cannot be loaded, whatever the Hub has.
                    fetchable: false,
                    detail: format!(
                        "Hub dataset not in the HF cache ({}); the container starts offline and cannot load it: fetch it into the cache before the night",
                        dir.display()
                    ),
                });
            }
        }
    }
    cf
}

async fn models(
    plan: &Plan,
    opts: &Options,
    hub_cache: &Path,
    cache: &mut LookupCache,
    not_reached: &mut Vec<String>,
) -> BTreeMap<String, ModelFacts> {
    let names: BTreeSet<String> = plan.commits.iter().filter_map(model_of).collect();
    let mut out = BTreeMap::new();
    let mut ask = Vec::new();
    for m in names {
        if m.starts_with('/') || m.starts_with("./") || m.starts_with("~/") {
            out.insert(m.clone(), local_path_facts(&m));
            continue;
        }
        // The cache the containers mount first; else the one this shell's HF_HOME names
        // (the facts hold, though the night will want them in the mounted one).
        let local = hub::from_cache(hub_cache, &m).or_else(|| {
            crate::prefetch::Hub::from_env(None)
                .ok()
                .filter(|h| h.cache_dir() != hub_cache)
                .and_then(|h| hub::from_cache(h.cache_dir(), &m))
        });
        let complete = local
            .as_ref()
            .is_some_and(|l| l.config.is_some() && l.weights_bytes.is_some());
        // A night with no Hub cannot fetch what is not here: its absence is evidence.
        if crate::prefetch::hub_offline() && local.is_none() {
            let source = format!(
                "{m} is not in the HF cache the containers mount ({}), and HF_HUB_OFFLINE=1: nothing fetches it tonight",
                hub_cache.display()
            );
            out.insert(
                m,
                ModelFacts {
                    exists: Some(false),
                    source,
                    ..ModelFacts::default()
                },
            );
            continue;
        }
        if opts.offline || crate::prefetch::hub_offline() {
            let mut f = local.unwrap_or_else(|| ModelFacts {
                unchecked: vec![format!(
                    "--offline and not in the HF cache ({})",
                    hub_cache.display()
                )],
                ..ModelFacts::default()
            });
            if complete {
                f.unchecked.push("--offline: gated access not asked".into());
            }
            out.insert(m, f);
            continue;
        }
        if let Some(hit) = cache.get::<ModelFacts>(&format!("hub:{m}")) {
            out.insert(m, merge(local, hit));
            continue;
        }
        ask.push((m, local));
    }
    if ask.is_empty() {
        return out;
    }
    let client = HubClient::from_env();
    let answers: Vec<_> = stream::iter(ask)
        .map(|(m, local)| {
            let client = client.clone();
            async move {
                let r = client.lookup(&m, None).await;
                (m, local, r)
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let mut unreachable = None;
    for (m, local, r) in answers {
        match r {
            Ok(hubf) => {
                let keep = if hubf.exists == Some(false) {
                    KEEP_MISSING_S
                } else {
                    KEEP_FOUND_S
                };
                cache.put(&format!("hub:{m}"), &hubf, keep);
                out.insert(m, merge(local, hubf));
            }
            Err(hub::Unreachable(why)) => {
                let mut f = local.unwrap_or_default();
                f.unchecked.push(why.clone());
                unreachable = Some(why);
                out.insert(m, f);
            }
        }
    }
    if let Some(why) = unreachable {
        not_reached.push(why);
    }
    out
}

/// The cache's facts first (what the night will load), the Hub's for the rest.
fn merge(local: Option<ModelFacts>, hubf: ModelFacts) -> ModelFacts {
    let Some(mut l) = local else { return hubf };
    l.exists = hubf.exists.or(l.exists);
    l.gated = hubf.gated;
    l.access = hubf.access;
    l.config = l.config.or(hubf.config);
    l.weights_bytes = l.weights_bytes.or(hubf.weights_bytes);
    l.unchecked.extend(hubf.unchecked);
    l
}

async fn images(
    plan: &Plan,
    opts: &Options,
    cache: &mut LookupCache,
    not_reached: &mut Vec<String>,
) -> BTreeMap<String, ImageState> {
    let refs: BTreeSet<String> = plan.runs.iter().filter_map(|r| r.image.clone()).collect();
    let mut out = BTreeMap::new();
    let docker = if opts.docker {
        match bollard::Docker::connect_with_local_defaults() {
            Ok(d) => {
                match tokio::time::timeout(std::time::Duration::from_secs(5), d.ping()).await {
                    Ok(Ok(_)) => Some(d),
                    _ => None,
                }
            }
            Err(_) => None,
        }
    } else {
        None
    };
    if opts.docker && docker.is_none() {
        not_reached.push("the Docker engine (local images not listed)".into());
    }
    let mut ask = Vec::new();
    for r in refs {
        if let Some(d) = &docker {
            if let Ok(i) = d.inspect_image(&r).await {
                out.insert(
                    r,
                    ImageState::Local {
                        size: i.size.map(|s| s.max(0) as u64),
                        id: i.id.clone(),
                    },
                );
                continue;
            }
        }
        if opts.offline {
            out.insert(
                r,
                ImageState::Unknown("--offline: the registry was not asked".into()),
            );
            continue;
        }
        if let Some(hit) = cache.get::<ImageState>(&format!("registry:{r}")) {
            out.insert(r, hit);
            continue;
        }
        ask.push(r);
    }
    let client = registry::client();
    let auth = DockerAuth::from_env();
    // One request per registry first: a registry that cannot be reached is said once, not
    // waited on for every image it holds.
    let mut down: BTreeMap<String, String> = BTreeMap::new();
    let mut hosts_seen = BTreeSet::new();
    let mut rest = Vec::new();
    for r in ask {
        let host = crate::runtime::docker::auth::Registry::of(&r).host;
        if hosts_seen.insert(host.clone()) {
            let st = registry::lookup(&client, &auth, &r).await;
            if let ImageState::Unknown(why) = &st {
                if why.contains("unreachable") {
                    down.insert(host, why.clone());
                }
            }
            remember(cache, &r, &st);
            out.insert(r, st);
        } else {
            rest.push((host, r));
        }
    }
    let mut ask = Vec::new();
    for (host, r) in rest {
        match down.get(&host) {
            Some(why) => {
                out.insert(r, ImageState::Unknown(why.clone()));
            }
            None => ask.push(r),
        }
    }
    not_reached.extend(down.into_values());
    let answers: Vec<(String, ImageState)> = stream::iter(ask)
        .map(|r| {
            let client = client.clone();
            let auth = auth.clone();
            async move {
                let st = registry::lookup(&client, &auth, &r).await;
                (r, st)
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let mut unreachable = BTreeSet::new();
    for (r, st) in answers {
        if let ImageState::Unknown(why) = &st {
            if why.contains("unreachable") {
                unreachable.insert(why.clone());
            }
        }
        remember(cache, &r, &st);
        out.insert(r, st);
    }
    not_reached.extend(unreachable);
    out
}

/// Registry answers worth keeping: found (a day) and missing (an hour).
fn remember(cache: &mut LookupCache, image: &str, st: &ImageState) {
    match st {
        ImageState::Registry { .. } => cache.put(&format!("registry:{image}"), st, KEEP_FOUND_S),
        ImageState::Missing { .. } => cache.put(&format!("registry:{image}"), st, KEEP_MISSING_S),
        _ => {}
    }
}

fn host(plan: &Plan, opts: &Options, hub_cache: &Path) -> BoxFacts {
    let nvml = nvml_facts();
    let gpus = match (opts.gpus, nvml) {
        (Some(n), _) => Known::Yes(n),
        (None, Some((n, _))) => Known::Yes(n),
        (None, None) => Known::Unknown("no NVIDIA driver (NVML); pass --gpus N".into()),
    };
    let gpu_mem = match (opts.gpu_mem_gib, nvml) {
        (Some(g), _) => Known::Yes(((g * (1u64 << 30) as f64) as u64, "--gpu-mem-gib".into())),
        (None, Some((_, mem))) => Known::Yes((mem, "NVML".into())),
        (None, None) => match super::known::gpu_bytes(&plan.defaults.gpu_type) {
            Some(b) => Known::Yes((
                b,
                format!("{} as the plan's gpu_type", plan.defaults.gpu_type),
            )),
            None => Known::Unknown(format!(
                "no NVML and gpu_type {} is not in the table; pass --gpu-mem-gib",
                plan.defaults.gpu_type
            )),
        },
    };
    let probe = hub_cache
        .ancestors()
        .find(|p| p.exists())
        .unwrap_or(Path::new("."));
    BoxFacts {
        gpus,
        gpu_mem,
        cache_free: crate::prefetch::free_disk_bytes(probe),
    }
}

/// (GPU count, memory of GPU 0) from NVML, when a driver is there.
fn nvml_facts() -> Option<(u32, u64)> {
    let nvml = nvml_wrapper::Nvml::init().ok()?;
    let n = nvml.device_count().ok()?;
    let mem = nvml.device_by_index(0).ok()?.memory_info().ok()?.total;
    Some((n, mem))
}
