//! The judge: plan + facts → one report per commit. Pure; every rule names its evidence.

mod command;

use super::facts::{Era, Facts, ImageState, Known, ModelFacts, PatchState};
use super::known::{arch_first, known};
use super::{CommitReport, Reason, Severity, Verdict};
use crate::diagnose::predict::PyVersion;
use crate::plan::{CommandView, CommitSpec, Plan};
use crate::prefetch::human_bytes;
use command::{command, flag, learned_command, source_command};
pub(super) use command::{context_beyond_model, gives, rule_matches};
use std::collections::BTreeMap;

/// vLLM's default share of GPU memory it may use (`--gpu-memory-utilization`).
const DEFAULT_GPU_UTIL: f64 = 0.9;
/// Weights above this share of what vLLM may use leave too little for the KV cache to
/// serve long prompts: a named risk.
const TIGHT_SHARE: f64 = 0.85;

/// A commit-wide finding: every variant is affected.
pub const ALL: &str = "all";

struct Findings {
    reasons: Vec<Reason>,
    unchecked: Vec<String>,
}

impl Findings {
    fn add(&mut self, variant: &str, category: &str, severity: Severity, text: String) {
        let r = Reason {
            variant: variant.to_string(),
            category: category.to_string(),
            text,
            severity,
        };
        if !self.reasons.contains(&r) {
            self.reasons.push(r);
        }
    }
    fn block(&mut self, variant: &str, category: &str, text: String) {
        self.add(variant, category, Severity::Blocks, text);
    }
    fn risk(&mut self, variant: &str, category: &str, text: String) {
        self.add(variant, category, Severity::Risk, text);
    }
    fn unchecked(&mut self, what: String) {
        if !self.unchecked.contains(&what) {
            self.unchecked.push(what);
        }
    }
}

/// One report per commit of `plan`, in plan order.
pub fn judge(plan: &Plan, facts: &Facts) -> Vec<CommitReport> {
    let mut reports: Vec<CommitReport> = plan
        .commits
        .iter()
        .enumerate()
        .map(|(ci, c)| judge_commit(plan, facts, ci, c))
        .collect();
    downloads_fit(facts, &mut reports);
    reports
}

/// Share of the HF cache's free space the night's downloads may fill: the rest is for the
/// logs, the store and what the box does besides.
const DOWNLOAD_SHARE: f64 = 0.9;

/// The weights the night downloads (models not in the HF cache), counted once each in plan
/// order, against the cache's free space: a commit whose model would be fetched past it is
/// at risk of `disk_full`, named with both figures.
fn downloads_fit(facts: &Facts, reports: &mut [CommitReport]) {
    let Some(free) = facts.host.cache_free else {
        return;
    };
    let room = (free as f64 * DOWNLOAD_SHARE) as u64;
    let mut seen = std::collections::BTreeSet::new();
    let mut total = 0u64;
    for r in reports.iter_mut() {
        if r.verdict == Verdict::Blocked {
            continue;
        }
        let Some(m) = r.model.clone() else { continue };
        let Some(mf) = facts.models.get(&m) else {
            continue;
        };
        let (Some(bytes), false) = (mf.weights_bytes, mf.source == "hf cache") else {
            continue;
        };
        if seen.insert(m.clone()) {
            total = total.saturating_add(bytes);
        }
        if total > room {
            r.reasons.push(Reason {
                variant: ALL.into(),
                category: "disk_full".into(),
                text: format!(
                    "{m} ({}) is downloaded tonight: with the models before it the night fetches {} into the HF cache, which has {} free; free space or `nightshift prefetch` on a larger disk first",
                    human_bytes(bytes),
                    human_bytes(total),
                    human_bytes(free)
                ),
                severity: Severity::Risk,
            });
            r.verdict = r.verdict.max(Verdict::AtRisk);
        }
    }
}

fn variants_of(plan: &Plan, ci: usize) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for r in plan.runs.iter().filter(|r| r.commit == ci) {
        let name = r.variant.to_string();
        if !v.contains(&name) {
            v.push(name);
        }
    }
    v
}

fn judge_commit(plan: &Plan, facts: &Facts, ci: usize, c: &CommitSpec) -> CommitReport {
    let variants = variants_of(plan, ci);
    let mut f = Findings {
        reasons: Vec::new(),
        unchecked: Vec::new(),
    };
    let cf = facts.commits.get(ci).cloned().unwrap_or_default();
    let model = super::gather::model_of(c);
    let eras = eras(c, &variants, &cf.eras, &mut f);
    let mut report_eras = BTreeMap::new();
    for (v, e) in &eras {
        report_eras.insert(v.clone(), format!("{} ({})", e.version, e.source));
    }

    if c.skip {
        f.block(ALL, "skipped_in_plan", "`skip = true` in the plan".into());
    } else if let Some(inv) = &c.invalid {
        let cat = if inv.rule == "missing" {
            "no_command"
        } else {
            "bench_command_invalid"
        };
        let text = if inv.rule == cat {
            inv.detail.clone()
        } else {
            format!("{} ({})", inv.detail, inv.rule)
        };
        f.block(ALL, cat, text);
    } else {
        for r in plan.runs.iter().filter(|r| r.commit == ci && r.repeat == 0) {
            if let Some(why) = &r.skip_reason {
                let cat = if c.parent.is_none() && r.variant.order() != 1 {
                    "no_parent"
                } else {
                    "image_not_found"
                };
                f.block(&r.variant.to_string(), cat, why.clone());
            }
        }
        if let Some(view) = &c.view {
            command(plan, c, view, &eras, &cf.source_flags, &mut f);
            source_command(plan, c, view, &eras, &cf.source_flags, &mut f);
            learned_command(plan, c, view, &eras, &cf.learned, &mut f);
            command::rules(c, view, &variants, &eras, &cf, &mut f);
        }
        if let Some(m) = &model {
            match facts.models.get(m) {
                Some(mf) => {
                    model_checks(c, m, mf, &variants, &eras, &cf.arch_in_tree, facts, &mut f)
                }
                None => f.unchecked(format!("model {m}: not looked up")),
            }
        } else {
            f.unchecked("model: the commit names none".into());
        }
        images(&variants, &cf.images, c, &mut f);
        for (v, p) in &cf.patches {
            patch(v, p, &mut f);
        }
        for d in &cf.datasets {
            if d.present {
                continue;
            }
            if d.fetchable {
                f.risk(ALL, "dataset_missing", format!("{}: {}", d.name, d.detail));
            } else {
                f.block(ALL, "dataset_missing", format!("{}: {}", d.name, d.detail));
            }
        }
        match &facts.host.gpus {
            Known::Yes(n) if c.gpu.count > *n => f.block(
                ALL,
                "gpus_insufficient",
                format!("needs {} GPUs; this box has {n}", c.gpu.count),
            ),
            Known::Yes(_) => {}
            Known::Unknown(why) => f.unchecked(format!("GPU count: {why}")),
        }
    }

    let verdict = if f.reasons.iter().any(|r| r.severity == Severity::Blocks) {
        Verdict::Blocked
    } else if f.reasons.is_empty() {
        Verdict::Ready
    } else {
        Verdict::AtRisk
    };
    let weights = model
        .as_ref()
        .and_then(|m| facts.models.get(m))
        .and_then(|m| m.weights_bytes);
    CommitReport {
        commit: c.commit.clone(),
        verdict,
        reasons: f.reasons,
        unchecked: f.unchecked,
        eras: report_eras,
        variants,
        model,
        weights_bytes: weights,
    }
}

/// The era of each variant: the clone's history first, then the plan's `vllm_version`
/// (never a `0.0.0` local build's version, which says nothing about the era).
fn eras(
    c: &CommitSpec,
    variants: &[String],
    found: &BTreeMap<String, Known<Era>>,
    f: &mut Findings,
) -> BTreeMap<String, Era> {
    let declared = c
        .vllm_version
        .as_deref()
        .filter(|v| !crate::diagnose::predict::names_no_release(v));
    let mut out = BTreeMap::new();
    for v in variants {
        match found.get(v) {
            Some(Known::Yes(e)) => {
                out.insert(v.clone(), e.clone());
            }
            other => match declared {
                Some(d) => {
                    out.insert(
                        v.clone(),
                        Era {
                            version: d.to_string(),
                            source: "the plan's vllm_version".into(),
                        },
                    );
                }
                None => {
                    let why = match other {
                        Some(Known::Unknown(w)) => {
                            format!("{w}, and the plan gives no vllm_version")
                        }
                        _ => "no vLLM clone and no vllm_version".into(),
                    };
                    f.unchecked(format!("era of {v}: {why}"));
                }
            },
        }
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn model_checks(
    c: &CommitSpec,
    model: &str,
    mf: &ModelFacts,
    variants: &[String],
    eras: &BTreeMap<String, Era>,
    arch_in_tree: &BTreeMap<String, Known<bool>>,
    facts: &Facts,
    f: &mut Findings,
) {
    for u in &mf.unchecked {
        f.unchecked(format!("model {model}: {u}"));
    }
    if mf.exists == Some(false) {
        let why = if mf.source.contains("local path") || mf.source.contains("HF_HUB_OFFLINE") {
            mf.source.clone()
        } else {
            format!("{model} is not on the Hub (404 Repository not found)")
        };
        f.block(ALL, "model_not_found", why);
        return;
    }
    if let Some(why) = &mf.unloadable {
        f.block(ALL, "model_not_found", format!("{model}: {why}"));
        return;
    }
    if mf.gated == Some(true) && mf.access == Some(false) {
        f.block(
            ALL,
            "gated_model_auth",
            format!("{model} is gated and the token (HF_TOKEN) cannot read it"),
        );
    }
    let view = c.view.as_ref();
    if let (Some(v), Some(cfg)) = (view, &mf.config) {
        if let Some(why) = context_beyond_model(v, cfg) {
            f.block(ALL, "server_config_invalid", why);
        }
    }
    match &mf.config {
        Some(cfg) => {
            let arch = mf.architectures().into_iter().next();
            for v in variants {
                let era = eras.get(v);
                let version = era.and_then(|e| PyVersion::parse(&e.version));
                if let Some(a) = &arch {
                    match arch_in_tree.get(v) {
                        Some(Known::Yes(false)) => f.block(
                            v,
                            "model_arch_unsupported",
                            format!(
                                "{a} is not in vllm/model_executor/models at this variant's commit"
                            ),
                        ),
                        Some(Known::Yes(true)) => {}
                        other => {
                            if let Some(Known::Unknown(why)) = other {
                                f.unchecked(format!("{v}: {why}"));
                            }
                            if let (Some(first), Some(ver)) = (arch_first(a), &version) {
                                if PyVersion::parse(first).is_some_and(|p| *ver < p) {
                                    f.block(
                                        v,
                                        "model_arch_unsupported",
                                        format!(
                                            "{a} first runs on vLLM {first}; this variant runs {}",
                                            era.map_or("", |e| e.version.as_str())
                                        ),
                                    );
                                }
                            }
                        }
                    }
                }
                if let Some(ver) = &version {
                    for inc in &known().incompatibility {
                        if inc.applies(cfg, ver) {
                            f.block(
                                v,
                                &inc.category,
                                format!(
                                    "{model} on vLLM {} ({}): {}",
                                    era.map_or("", |e| e.version.as_str()),
                                    era.map_or("", |e| e.source.as_str()),
                                    inc.text
                                ),
                            );
                        }
                    }
                }
            }
        }
        None => f.unchecked(format!(
            "model {model}: no config.json (architecture, rope_scaling not checked)"
        )),
    }
    let Some(weights) = mf.weights_bytes else {
        f.unchecked(format!("model {model}: weight size unknown"));
        return;
    };
    let Some((per_gpu, source)) = facts.host.gpu_mem.get() else {
        if let Known::Unknown(why) = &facts.host.gpu_mem {
            f.unchecked(format!("GPU memory: {why}"));
        }
        return;
    };
    let (tp, pp) = view.map_or((1, 1), |v| (v.tp.max(1), v.pp.max(1)));
    let util = view
        .and_then(|v| flag(v, &["--gpu-memory-utilization"]))
        .and_then(|u| u.parse::<f64>().ok())
        .filter(|u| *u > 0.0 && *u <= 1.0)
        .unwrap_or(DEFAULT_GPU_UTIL);
    let loaded = loaded_bytes(weights, mf, view);
    let gpus = u64::from(tp) * u64::from(pp);
    let cap = (*per_gpu as f64 * gpus as f64 * util) as u64;
    let what = format!(
        "weights {} vs {} usable on {gpus} × {} GPU ({source}, gpu_memory_utilization {util})",
        human_bytes(loaded),
        human_bytes(cap),
        human_bytes(*per_gpu),
    );
    if loaded > cap {
        f.block(
            ALL,
            "model_too_large",
            format!("{model} does not fit: {what}; raise TP or skip"),
        );
    } else if loaded as f64 > cap as f64 * TIGHT_SHARE {
        f.risk(
            ALL,
            "kv_cache_too_small",
            format!("{model} leaves little for the KV cache: {what}"),
        );
    }
}

/// Bytes the weights take on the GPUs: the checkpoint's, halved when the command quantises
/// a 16-bit checkpoint to 8 bits at load, doubled for float32.
fn loaded_bytes(weights: u64, mf: &ModelFacts, view: Option<&CommandView>) -> u64 {
    let Some(view) = view else { return weights };
    let cfg = mf.config.as_ref();
    let prequantised = cfg.is_some_and(|c| c.get("quantization_config").is_some());
    let ckpt_dtype = cfg
        .and_then(|c| c.get("torch_dtype"))
        .and_then(|d| d.as_str())
        .unwrap_or("bfloat16");
    let sixteen = matches!(ckpt_dtype, "bfloat16" | "float16");
    if !prequantised && sixteen {
        if let Some(q) = flag(view, &["--quantization", "-q"]) {
            if matches!(q, "fp8" | "fbgemm_fp8" | "int8" | "bitsandbytes") {
                return weights / 2;
            }
        }
        if flag(view, &["--dtype"]) == Some("float32") {
            return weights.saturating_mul(2);
        }
    }
    weights
}

fn images(
    variants: &[String],
    found: &BTreeMap<String, ImageState>,
    c: &CommitSpec,
    f: &mut Findings,
) {
    let human_ok = matches!(
        found.get("human"),
        Some(ImageState::Local { .. } | ImageState::Registry { .. })
    );
    let compiled: Vec<&str> = c
        .changes
        .as_ref()
        .map(|ch| {
            ch.iter()
                .filter(|x| crate::plan::clone::needs_build(&x.path))
                .map(|x| x.path.as_str())
                .collect()
        })
        .unwrap_or_default();
    for v in variants {
        let Some(state) = found.get(v) else { continue };
        match state {
            ImageState::Local { .. } | ImageState::Registry { .. } => {}
            ImageState::Missing { detail } if v != "human" && human_ok => {
                if compiled.is_empty() {
                    f.risk(
                        v,
                        "image_derived",
                        format!("{detail}; made at night by overlaying the parent's Python files on the human image"),
                    );
                } else {
                    f.risk(
                        v,
                        "needs_build",
                        format!(
                            "{detail}; compiled code changed ({}), so it is built from source (long)",
                            compiled.join(", ")
                        ),
                    );
                }
            }
            ImageState::Missing { detail } => f.block(v, "image_not_found", detail.clone()),
            ImageState::Denied { detail } => f.block(v, "registry_auth", detail.clone()),
            ImageState::Unknown(why) => f.unchecked(format!("image of {v}: {why}")),
        }
    }
}

fn patch(variant: &str, p: &PatchState, f: &mut Findings) {
    match p {
        PatchState::Missing { path } => f.block(
            variant,
            "agent_patch_failed",
            format!("the agent's patch {path} is not on this box"),
        ),
        PatchState::DoesNotApply { path, error } => f.block(
            variant,
            "agent_patch_failed",
            format!("{path} does not apply to the parent (git apply --check: {error})"),
        ),
        PatchState::Present {
            path,
            checked,
            needs_build,
            outside_package,
        } => {
            if let Known::Unknown(why) = checked {
                f.unchecked(format!("patch {path} applies: {why}"));
            }
            if !outside_package.is_empty() {
                // What the night does with them, said before it: the same rule both places.
                f.unchecked(format!(
                    "{variant}: {path}'s hunks for {} apply only where the image has vLLM's source tree; on an installed package (a derived baseline) they are dropped and recorded with the run",
                    outside_package.join(", ")
                ));
            }
            if !needs_build.is_empty() {
                f.risk(
                    variant,
                    "needs_build",
                    format!(
                        "{path} touches compiled code ({}): measured only after a build",
                        needs_build.join(", ")
                    ),
                );
            }
        }
    }
}
