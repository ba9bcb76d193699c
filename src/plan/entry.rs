//! One `[[commits]]` entry checked and resolved: hashes, model, GPUs, command, images,
//! patches, per-commit overrides; every problem reported at its file:line:col.

use super::*;

impl Builder {
    pub(super) fn commit(
        &mut self,
        rc: &RawCommit,
        loc: Option<Loc>,
        fl: &FieldLocator,
        defaults: &Defaults,
        agents: &[Agent],
        datasets: &BTreeMap<String, PathBuf>,
    ) -> Option<CommitSpec> {
        let Some(commit) = rc.commit.clone() else {
            self.error(
                loc,
                None,
                "hash",
                "commit has no `commit` hash (expected 40 hex digits)".into(),
            );
            return None;
        };
        let commit = commit.trim().to_ascii_lowercase();
        if !is_hex(&commit) || commit.len() < 7 || commit.len() > 40 {
            self.error(
                fl.loc("commit"),
                None,
                "hash",
                format!("`{commit}` is not a commit hash (expected 40 hex digits, or an unambiguous prefix of at least 7)"),
            );
            return None;
        }
        let parent = match rc.parent.as_deref().map(|p| p.trim().to_ascii_lowercase()) {
            Some(p) if p.is_empty() => None,
            Some(p) if !is_hex(&p) || p.len() < 7 || p.len() > 40 => {
                self.error(
                    fl.loc("parent"),
                    Some(&commit),
                    "hash",
                    format!("parent `{p}` is not a commit hash (expected 40 hex digits, or a prefix of at least 12)"),
                );
                return None;
            }
            other => other,
        };
        if parent.is_none() {
            self.warn(
                loc.clone(),
                Some(&commit),
                "unknown_parent",
                "parent unknown: baseline and agent variants need a per-commit image override"
                    .into(),
            );
        }
        let mode = match &rc.benchmark_mode {
            None => None,
            Some(m) => match BenchKind::parse(m) {
                Some(k) => Some(k),
                None => {
                    self.error(fl.loc("benchmark_mode"), Some(&commit), "mode", format!("benchmark_mode `{m}` is not one of serving, throughput, latency, prefix_caching"));
                    None
                }
            },
        };
        for key in rc.images.keys() {
            if !is_variant_selector(key) {
                self.error(fl.loc("images"), Some(&commit), "images", format!("images override for unknown variant `{key}` (expected baseline, human, agent or agent:<id>)"));
            }
        }
        for key in rc.patches.keys() {
            if !agents.iter().any(|a| &a.id == key) {
                self.error(
                    fl.loc("patches"),
                    Some(&commit),
                    "patches",
                    format!("patch override for unknown agent `{key}`"),
                );
            }
        }
        if let Some(vs) = &rc.variants {
            for v in vs {
                if !is_variant_selector(v) {
                    self.error(
                        fl.loc("variants"),
                        Some(&commit),
                        "variants",
                        format!(
                            "unknown variant `{v}` (expected baseline, human, agent or agent:<id>)"
                        ),
                    );
                }
            }
        }
        if let Some(sim) = &rc.sim {
            if sim.log_kb > limits::MAX_SIM_LOG_KB {
                self.error(
                    fl.loc("log_kb"),
                    Some(&commit),
                    "sim",
                    format!(
                        "sim.log_kb = {} is more than {} (16 GiB per run)",
                        sim.log_kb,
                        limits::MAX_SIM_LOG_KB
                    ),
                );
            }
            if let Some(f) = &sim.fail {
                if f.parse::<crate::category::Category>().is_err() {
                    self.error(
                        fl.loc("sim"),
                        Some(&commit),
                        "sim",
                        format!("sim.fail `{f}` is not a failure category"),
                    );
                }
            }
        }

        let command = rc
            .perf_command
            .as_deref()
            .map(str::trim)
            .filter(|c| !c.is_empty());
        let mut invalid = None;
        let view = match command {
            None => {
                invalid = Some(Invalid {
                    rule: "missing",
                    detail: "no perf_command".into(),
                    loc: fl.loc("perf_command").or(loc.clone()),
                });
                None
            }
            Some(cmd) => match CommandView::parse(cmd) {
                Ok(v) => Some(v),
                Err(e) => {
                    self.error(
                        fl.loc("perf_command"),
                        Some(&commit),
                        "command",
                        format!("perf_command: {e}"),
                    );
                    None
                }
            },
        };
        let gpu = match &rc.gpu_config {
            Some(g) => match GpuConfig::parse(g) {
                Ok(g) => Some(g),
                Err(e) => {
                    self.error(
                        fl.loc("gpu_config"),
                        Some(&commit),
                        "gpu_config",
                        format!("gpu_config `{g}`: {e}"),
                    );
                    None
                }
            },
            None => None,
        };
        let gpu_derived = gpu.is_none();
        let gpu = gpu.unwrap_or_else(|| {
            let (tp, pp) = view.as_ref().map(|v| (v.tp, v.pp)).unwrap_or((1, 1));
            let derived = GpuConfig::count_for_parallelism(tp, pp);
            GpuConfig {
                gpu_type: defaults.gpu_type.clone(),
                count: derived.max(if tp * pp > 1 { 1 } else { defaults.gpu_count }),
            }
        });
        if let Some(v) = &view {
            if invalid.is_none() {
                if let Some(p) = v.problems().into_iter().next() {
                    invalid = Some(Invalid {
                        rule: p.rule,
                        detail: p.detail,
                        loc: fl.loc("perf_command"),
                    });
                }
            }
            if invalid.is_none() && v.tp * v.pp > gpu.count {
                invalid = Some(Invalid {
                    rule: "tp_exceeds_gpus",
                    detail: format!(
                        "TP {} × PP {} needs {} GPUs but gpu_config gives {}",
                        v.tp,
                        v.pp,
                        v.tp * v.pp,
                        gpu
                    ),
                    loc: fl.loc("gpu_config"),
                });
            }
            if let Some(s) = v.script() {
                if !s.starts_with("benchmarks/") {
                    self.warn(fl.loc("perf_command"), Some(&commit), "script_path", format!("script `{s}` is not under benchmarks/; it is mapped to the image's benchmarks folder"));
                }
            }
            if let (Some(cm), Some(m)) = (&v.model, &rc.model) {
                if cm != m && m != "N/A" {
                    self.warn(
                        fl.loc("model"),
                        Some(&commit),
                        "model_mismatch",
                        format!("--model {cm} differs from model = {m}"),
                    );
                }
            }
            if let (Some(k), Some(m)) = (v.kind, mode) {
                if k != m {
                    self.warn(fl.loc("benchmark_mode"), Some(&commit), "mode_mismatch", format!("benchmark_mode {} disagrees with the command, which runs a {} benchmark", m.as_str(), k.as_str()));
                }
            }
            if v.kind.is_none() && mode.is_none() {
                self.warn(
                    fl.loc("perf_command"),
                    Some(&commit),
                    "unknown_kind",
                    "cannot tell the benchmark kind from the command; set benchmark_mode".into(),
                );
            }
        }
        let (invocation, invocation_problem) = match &view {
            Some(v) if invalid.is_none() => {
                let model = rc.model.as_deref().filter(|m| *m != "N/A");
                match static_invocation(v, mode, rc.vllm_version.as_deref(), model, datasets) {
                    Ok(inv) => {
                        for d in &inv.hub_datasets {
                            self.warn(fl.loc("perf_command"), Some(&commit), "hub_dataset", format!("the client loads the Hub dataset `{d}` at run time: the box needs the Hub, or the dataset in the HF cache (hf_cache) for offline runs"));
                        }
                        for m in &inv.mounts {
                            if !m.host.exists() {
                                self.warn(
                                    fl.loc("perf_command"),
                                    Some(&commit),
                                    "dataset_missing",
                                    format!(
                                        "dataset `{}` is not at {} ({})",
                                        m.name,
                                        m.host.display(),
                                        DATASET_HINT
                                    ),
                                );
                            }
                        }
                        (Some(inv), None)
                    }
                    Err(r) if r.dataset => {
                        self.warn(
                            fl.loc("perf_command"),
                            Some(&commit),
                            "dataset_missing",
                            r.reason.clone(),
                        );
                        (None, Some(r.reason))
                    }
                    Err(r) => {
                        invalid = Some(Invalid {
                            rule: "bench_command_invalid",
                            detail: r.reason,
                            loc: fl.loc("perf_command"),
                        });
                        (None, None)
                    }
                }
            }
            _ => (None, None),
        };
        if gpu.gpu_type != defaults.gpu_type {
            self.warn(
                fl.loc("gpu_config"),
                Some(&commit),
                "gpu_type",
                format!(
                    "gpu_config asks for {} but the machine has {}",
                    gpu.gpu_type, defaults.gpu_type
                ),
            );
        }
        Some(CommitSpec {
            commit,
            parent,
            title: rc.title.clone().unwrap_or_default(),
            pr_url: rc.pr_url.clone(),
            model: rc
                .model
                .clone()
                .filter(|m| m != "N/A")
                .or_else(|| view.as_ref().and_then(|v| v.model.clone())),
            gpu,
            gpu_derived,
            mode,
            perf_command: command.map(str::to_string),
            view,
            files_changed: rc.files_changed.clone(),
            notes: rc.notes.clone().filter(|n| !n.is_empty()),
            skip: rc.skip,
            invalid,
            vllm_version: rc.vllm_version.clone(),
            priority: rc.priority,
            invocation,
            invocation_problem,
            changes: None,
            fixed: None,
            sim: rc.sim.clone(),
            loc,
        })
    }
}
