//! The plan builder's diagnostics and the `[defaults]` and `[images]` tables.

use super::*;

impl Builder {
    pub(super) fn error(
        &mut self,
        loc: Option<Loc>,
        commit: Option<&str>,
        kind: &'static str,
        message: String,
    ) {
        self.errors.push(Diag {
            loc,
            commit: commit.map(str::to_string),
            kind,
            message,
        });
    }

    pub(super) fn warn(
        &mut self,
        loc: Option<Loc>,
        commit: Option<&str>,
        kind: &'static str,
        message: String,
    ) {
        self.warnings.push(Diag {
            loc,
            commit: commit.map(str::to_string),
            kind,
            message,
        });
    }

    pub(super) fn defaults(&mut self, raw: &RawPlan, src: &SourceFile) -> Defaults {
        let d = &raw.defaults;
        let whole = 0..src.text.len();
        let variants = d
            .variants
            .clone()
            .unwrap_or_else(|| vec!["baseline".into(), "human".into(), "agent".into()]);
        for v in &variants {
            if !is_variant_selector(v) {
                self.error(
                    src.field_loc(&whole, "variants"),
                    None,
                    "variants",
                    format!(
                        "unknown variant `{v}` (expected baseline, human, agent or agent:<id>)"
                    ),
                );
            }
        }
        let mut by_gpus = BTreeMap::new();
        for (k, v) in d.timeout_s_by_gpus.clone().unwrap_or_default() {
            match k.parse::<u32>() {
                Ok(n) if n > 0 => {
                    by_gpus.insert(n, v);
                }
                _ => self.error(
                    src.field_loc(&whole, "timeout_s_by_gpus"),
                    None,
                    "timeout",
                    format!(
                        "timeout_s_by_gpus key `{k}` is not a GPU count (expected \"1\", \"2\", …)"
                    ),
                ),
            }
        }
        if d.shm_size.is_some() && d.ipc.is_some() {
            self.warn(
                src.field_loc(&whole, "ipc"),
                None,
                "shm_ipc",
                "both shm_size and ipc are set; ipc = \"host\" makes shm_size irrelevant".into(),
            );
        }
        if let Some(ipc) = &d.ipc {
            if ipc != "host" && ipc != "private" && ipc != "shareable" {
                self.error(
                    src.field_loc(&whole, "ipc"),
                    None,
                    "ipc",
                    format!("ipc `{ipc}` is not an IPC mode (expected host, private or shareable)"),
                );
            }
        }
        if d.gpu_count == Some(0) {
            self.error(
                src.field_loc(&whole, "gpu_count"),
                None,
                "gpu_count",
                "gpu_count = 0 cannot run anything (expected 1 or more)".into(),
            );
        }
        if let Some(m) = d.max_repeats {
            if m < d.repeats.unwrap_or(1) || m > limits::MAX_REPEATS {
                self.error(
                    src.field_loc(&whole, "max_repeats"),
                    None,
                    "max_repeats",
                    format!(
                        "max_repeats = {m} must lie between repeats ({}) and {}",
                        d.repeats.unwrap_or(1),
                        limits::MAX_REPEATS
                    ),
                );
            }
        }
        if let Some(m) = d.reference_every_min {
            if !(10..=24 * 60).contains(&m) {
                self.error(
                    src.field_loc(&whole, "reference_every_min"),
                    None,
                    "reference_every_min",
                    format!("reference_every_min = {m} must lie between 10 and 1440 minutes"),
                );
            }
        }
        if let Some(n) = d.reference_runs {
            if !(2..=limits::MAX_REFERENCE_RUNS).contains(&n) {
                self.error(
                    src.field_loc(&whole, "reference_runs"),
                    None,
                    "reference_runs",
                    format!(
                        "reference_runs = {n} must lie between 2 (a start and an end) and {}",
                        limits::MAX_REFERENCE_RUNS
                    ),
                );
            }
        }
        if d.repeats == Some(0) {
            self.error(
                src.field_loc(&whole, "repeats"),
                None,
                "repeats",
                "repeats must be at least 1".into(),
            );
        }
        self.check_default_limits(d, src);
        Defaults {
            gpu_type: d.gpu_type.clone().unwrap_or_else(|| "H100".into()),
            // Clamped: the errors above refuse the plan, but the runs are still expanded
            // (for their own errors) and must not be sized by a refused value.
            gpu_count: d.gpu_count.unwrap_or(1).clamp(1, limits::MAX_GPUS),
            hf_cache: d.hf_cache.clone(),
            shm_size: d.shm_size.clone(),
            ipc: d.ipc.clone(),
            server_start_timeout_s: d.server_start_timeout_s.unwrap_or(900),
            run_timeout_s: d.run_timeout_s.unwrap_or(3600),
            timeout_s_by_gpus: by_gpus,
            repeats: d.repeats.unwrap_or(1).clamp(1, limits::MAX_REPEATS),
            max_repeats: d
                .max_repeats
                .unwrap_or(0)
                .max(d.repeats.unwrap_or(1))
                .clamp(1, limits::MAX_REPEATS),
            interleave: d.interleave.unwrap_or_default(),
            reference: d.reference.clone(),
            reference_loc: d
                .reference
                .as_ref()
                .and_then(|_| src.field_loc(&whole, "reference")),
            reference_every_min: d.reference_every_min.unwrap_or(120).clamp(10, 24 * 60),
            reference_runs: d
                .reference_runs
                .unwrap_or(6)
                .clamp(2, limits::MAX_REFERENCE_RUNS),
            repeats_loc: d
                .repeats
                .as_ref()
                .and_then(|_| src.field_loc(&whole, "repeats")),
            warmup: d.warmup.unwrap_or_default(),
            warmup_requests: d.warmup_requests.unwrap_or(0),
            variants_explicit: d.variants.is_some(),
            variants_loc: d
                .variants
                .as_ref()
                .and_then(|_| src.field_loc(&whole, "variants")),
            variants,
            on_invalid: d.on_invalid.unwrap_or_default(),
            vllm_src: d.vllm_src.clone(),
            fetch_weights: d.fetch_weights.unwrap_or(true),
            gpu_requests: d.gpu_requests.unwrap_or(true),
        }
    }

    pub(super) fn images(&mut self, raw: &RawPlan, src: &SourceFile) -> Images {
        let (img, span) = match &raw.images {
            Some(s) => (Some(s.get_ref()), table_extent(&src.text, s.span())),
            None => (None, 0..0),
        };
        let pick = |f: fn(&raw::RawImages) -> &Option<String>, dflt: &str| {
            img.and_then(|i| f(i).clone())
                .unwrap_or_else(|| dflt.to_string())
        };
        let images = Images {
            org: pick(|i| &i.org, "anonymous"),
            human: pick(|i| &i.human, "{org}/vllm-bench:{commit}"),
            baseline: pick(|i| &i.baseline, "{org}/vllm-baseline:baseline-{parent12}"),
            agent: pick(|i| &i.agent, "{baseline_image}"),
            patch_dir: img.and_then(|i| i.patch_dir.clone()),
        };
        for (key, t) in [
            ("human", &images.human),
            ("baseline", &images.baseline),
            ("agent", &images.agent),
        ] {
            if let Err(e) = template::check(t) {
                self.error(
                    src.field_loc(&span, key),
                    None,
                    "template",
                    format!("[images].{key}: {e}"),
                );
            }
        }
        images
    }

    /// Duplicate commits, and prefixes that match more than one commit, are errors.
    pub(super) fn check_hash_uniqueness(&mut self, commits: &[CommitSpec]) {
        let mut sorted: Vec<&CommitSpec> = commits.iter().collect();
        sorted.sort_by(|a, b| a.commit.cmp(&b.commit));
        for w in sorted.windows(2) {
            let (a, b) = (w[0], w[1]);
            if a.commit == b.commit {
                self.error(
                    b.loc.clone(),
                    Some(&b.commit),
                    "hash",
                    format!(
                        "commit listed twice (first at {})",
                        a.loc.as_ref().map(|l| l.to_string()).unwrap_or_default()
                    ),
                );
            } else if b.commit.starts_with(&a.commit) {
                self.error(
                    a.loc.clone(),
                    Some(&a.commit),
                    "hash",
                    format!(
                        "`{}` is an ambiguous prefix: it also matches {}",
                        a.commit, b.commit
                    ),
                );
            }
        }
        // A parent may match commits that extend it (a contiguous run of the sorted list
        // from where it would sort) and commits it extends (its own prefixes, looked up
        // one length at a time): logarithmic per commit, where a scan of every commit
        // made large plans quadratic.
        let hashes: Vec<&str> = sorted.iter().map(|c| c.commit.as_str()).collect();
        for c in commits {
            if let Some(p) = &c.parent {
                let from = hashes.partition_point(|h| *h < p.as_str());
                let longer = hashes[from..]
                    .iter()
                    .take_while(|h| h.starts_with(p.as_str()))
                    .count();
                let shorter = (1..p.len())
                    .filter(|&n| p.is_char_boundary(n))
                    .filter(|&n| hashes.binary_search(&&p[..n]).is_ok())
                    .count();
                let matches = longer + shorter;
                if matches > 1 {
                    self.error(
                        c.loc.clone(),
                        Some(&c.commit),
                        "hash",
                        format!(
                            "parent `{p}` is ambiguous: it matches {matches} commits of the plan"
                        ),
                    );
                }
            }
        }
    }
}
