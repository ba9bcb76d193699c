//! The commits expanded into runs: variants × repeats (in the blocks of `schedule`), each run's
//! image, patch and key.

use super::*;

impl Builder {
    pub(super) fn expand(
        &mut self,
        commits: &[CommitSpec],
        defaults: &Defaults,
        images: &Images,
        agents: &[Agent],
        raw: &[(RawCommit, Option<Loc>, FieldLocator)],
    ) -> Vec<RunSpec> {
        let mut runs = Vec::new();
        let mut short_commit_template = 0usize;
        // Keyed as CommitSpec keys them (lower case): an upper-case hash keeps its settings.
        let by_commit: BTreeMap<String, (&RawCommit, &FieldLocator)> = raw
            .iter()
            .filter_map(|(rc, _, fl)| {
                rc.commit
                    .as_deref()
                    .map(|c| (c.trim().to_ascii_lowercase(), (rc, fl)))
            })
            .collect();
        // The built-in default lists `agent`; only a list the operator wrote is wrong to
        // name it when there is no agent.
        if agents.is_empty()
            && defaults.variants_explicit
            && defaults.variants.iter().any(|v| v == "agent")
        {
            self.error(
                defaults.variants_loc.clone(),
                None,
                "variants",
                "variant `agent` but the plan has no [[agents]] to run it with".into(),
            );
        }
        let prefixes = key_prefixes(commits);
        for (ci, c) in commits.iter().enumerate() {
            let prefix = &c.commit[..prefixes[ci]];
            let (rc, fl) = match by_commit.get(&c.commit) {
                Some((rc, fl)) => (Some(*rc), Some(*fl)),
                None => (None, None),
            };
            let own = rc.and_then(|r| r.variants.clone());
            // A commit's own list naming `agent` without agents (the defaults' list is
            // checked once, above).
            let explicit = own.is_some();
            let variants_loc = fl.and_then(|fl| fl.loc("variants")).or(c.loc.clone());
            let selectors = own.unwrap_or_else(|| defaults.variants.clone());
            let mut variants: Vec<Variant> = Vec::new();
            for s in &selectors {
                match s.as_str() {
                    "baseline" => variants.push(Variant::Baseline),
                    "human" => variants.push(Variant::Human),
                    "agent" if agents.is_empty() && explicit => {
                        self.error(
                            variants_loc.clone(),
                            Some(&c.commit),
                            "variants",
                            "variant `agent` but the plan has no [[agents]] to run it with".into(),
                        );
                    }
                    "agent" => variants.extend(agents.iter().map(|a| Variant::Agent(a.id.clone()))),
                    other => {
                        if let Some(id) = other.strip_prefix("agent:") {
                            if agents.iter().any(|a| a.id == id) {
                                variants.push(Variant::Agent(id.to_string()));
                            } else {
                                self.error(
                                    c.loc.clone(),
                                    Some(&c.commit),
                                    "variants",
                                    format!("variant agent:{id} names no [[agents]] entry"),
                                );
                            }
                        }
                    }
                }
            }
            variants.sort_by_key(|v| v.order());
            variants.dedup();
            let overrides = rc.map(|r| r.images.clone()).unwrap_or_default();
            let patch_overrides = rc.map(|r| r.patches.clone()).unwrap_or_default();
            let base_vars = template::vars(&images.org, &c.commit, c.parent.as_deref(), None, None);
            let baseline_image = overrides
                .get("baseline")
                .cloned()
                .map(Ok)
                .unwrap_or_else(|| template::expand(&images.baseline, &base_vars));
            if c.commit.len() < 40
                && images.human.contains("{commit}")
                && !overrides.contains_key("human")
            {
                short_commit_template += 1;
            }
            let repeats = match rc.and_then(|r| r.repeats) {
                Some(0) => {
                    self.error(
                        fl.and_then(|f| f.loc("repeats")),
                        Some(&c.commit),
                        "repeats",
                        "repeats must be at least 1".into(),
                    );
                    1
                }
                Some(n) if n > limits::MAX_REPEATS => {
                    self.error(
                        fl.and_then(|f| f.loc("repeats")),
                        Some(&c.commit),
                        "repeats",
                        format!(
                            "repeats = {n} is too many (at most {} per commit)",
                            limits::MAX_REPEATS
                        ),
                    );
                    1
                }
                Some(n) => n,
                None => defaults.repeats,
            };
            // The total is checked before this commit's runs are made: the error points at
            // what to lower (the commit's repeats, the plan's, or this commit).
            // Adaptive repeats past `repeats`, up to the plan's `max_repeats`, in variant order.
            let top = defaults.max_repeats.max(repeats);
            let these = variants.len() * top as usize;
            if runs.len() + these > limits::MAX_RUNS {
                let own = rc.and_then(|r| r.repeats).is_some();
                let loc = if own {
                    fl.and_then(|f| f.loc("repeats"))
                } else if defaults.repeats > 1 && defaults.repeats_loc.is_some() {
                    defaults.repeats_loc.clone()
                } else {
                    c.loc.clone()
                };
                self.error(
                    loc,
                    Some(&c.commit),
                    "runs",
                    format!(
                        "the plan makes more than {} runs (commits × variants × repeats); this commit's {these} would bring it to {} (lower repeats or split the plan)",
                        limits::MAX_RUNS,
                        runs.len() + these
                    ),
                );
                break;
            }
            let extras = (repeats..top).flat_map(|r| variants.iter().map(move |v| (v.clone(), r)));
            for (order, (v, repeat)) in schedule(&c.commit, &variants, repeats)
                .into_iter()
                .chain(extras)
                .enumerate()
            {
                {
                    let key = if top > 1 {
                        format!("{prefix}/{v}/r{}", repeat + 1)
                    } else {
                        format!("{prefix}/{v}")
                    };
                    let mut skip_reason = None;
                    if let Some(inv) = &c.invalid {
                        if defaults.on_invalid != OnInvalid::Run {
                            skip_reason = Some(format!("invalid: {} ({})", inv.rule, inv.detail));
                        }
                    }
                    if c.skip && skip_reason.is_none() {
                        skip_reason = Some("skip = true in the plan".into());
                    }
                    let image = match &v {
                        Variant::Human => overrides
                            .get("human")
                            .cloned()
                            .map(Ok)
                            .unwrap_or_else(|| template::expand(&images.human, &base_vars)),
                        Variant::Baseline => baseline_image.clone(),
                        Variant::Agent(id) => {
                            let key = format!("agent:{id}");
                            match overrides.get(&key).or_else(|| overrides.get("agent")) {
                                Some(i) => Ok(i.clone()),
                                None => match &baseline_image {
                                    Ok(b) => {
                                        let vars = template::vars(
                                            &images.org,
                                            &c.commit,
                                            c.parent.as_deref(),
                                            Some(id),
                                            Some(b),
                                        );
                                        template::expand(&images.agent, &vars)
                                    }
                                    Err(e) => Err(e.clone()),
                                },
                            }
                        }
                    };
                    let image = match image {
                        Ok(i) => Some(i),
                        Err(e) => {
                            if skip_reason.is_none() {
                                skip_reason = Some(format!("no image for {v}: {e}"));
                            }
                            None
                        }
                    };
                    let patch = match &v {
                        Variant::Agent(id) => {
                            let agent = agents.iter().find(|a| &a.id == id);
                            let t = patch_overrides
                                .get(id)
                                .cloned()
                                .or_else(|| agent.and_then(|a| a.patch.clone()));
                            match t {
                                Some(t) => {
                                    let vars = template::vars(
                                        &images.org,
                                        &c.commit,
                                        c.parent.as_deref(),
                                        Some(id),
                                        None,
                                    );
                                    template::expand(&t, &vars).ok()
                                }
                                None => None,
                            }
                        }
                        _ => None,
                    };
                    let gpus = c.gpu.count;
                    runs.push(RunSpec {
                        id: RunId(runs.len() as u32),
                        commit: ci,
                        variant: v.clone(),
                        repeat,
                        warmup: repeat == 0
                            && repeats > 1
                            && defaults.warmup == Warmup::DiscardFirst,
                        order: if top > 1 {
                            u8::try_from(order).unwrap_or(u8::MAX)
                        } else {
                            v.order()
                        },
                        key,
                        image,
                        patch,
                        gpus,
                        server_start_timeout_s: defaults.server_start_timeout_s,
                        run_timeout_s: defaults
                            .timeout_s_by_gpus
                            .get(&gpus)
                            .copied()
                            .unwrap_or(defaults.run_timeout_s),
                        skip_reason,
                        extra: repeat >= repeats,
                        // A warm-up joins the round of the repeat it warms up for.
                        round: match defaults.interleave {
                            raw::Interleave::Rounds => repeat.saturating_sub(u32::from(
                                repeats > 1 && defaults.warmup == Warmup::DiscardFirst,
                            )),
                            raw::Interleave::Commits => 0,
                        },
                        reference: false,
                    });
                }
            }
        }
        self.add_reference_runs(&mut runs, commits, defaults);
        if short_commit_template > 0 {
            self.warn(None, None, "short_hash", format!("{short_commit_template} commits are abbreviated hashes; `{{commit}}` in the human image template expands to the prefix (give full hashes or per-commit images)"));
        }
        runs
    }
}

impl Builder {
    /// The drift reference's runs (`[defaults] reference = "COMMIT/VARIANT"`): copies of
    /// that commit's variant run, keyed `<commit>/<variant>/ref<K>`, after every other run.
    /// The engine holds them back and releases them at the start, at the interval and at
    /// the end (`engine::reference`).
    fn add_reference_runs(
        &mut self,
        runs: &mut Vec<RunSpec>,
        commits: &[CommitSpec],
        d: &Defaults,
    ) {
        let Some(text) = d.reference.as_deref() else {
            return;
        };
        let (commit, variant) = text.split_once('/').unwrap_or((text, "baseline"));
        let commit = commit.trim().to_ascii_lowercase();
        let matching: Vec<usize> = commits
            .iter()
            .enumerate()
            .filter(|(_, c)| commit.len() >= 7 && c.commit.starts_with(&commit))
            .map(|(i, _)| i)
            .collect();
        let ci = match matching.as_slice() {
            [one] => *one,
            [] => {
                self.error(
                    d.reference_loc.clone(),
                    None,
                    "reference",
                    format!("reference `{text}`: no commit of the plan starts with `{commit}` (give 7 or more hex digits of one, then /VARIANT)"),
                );
                return;
            }
            more => {
                self.error(
                    d.reference_loc.clone(),
                    None,
                    "reference",
                    format!("reference `{text}`: `{commit}` names {} commits of the plan (give more of the hash)", more.len()),
                );
                return;
            }
        };
        let Some(model) = runs
            .iter()
            .find(|r| r.commit == ci && r.variant.to_string() == variant.trim() && !r.extra)
            .cloned()
        else {
            self.error(
                d.reference_loc.clone(),
                Some(&commits[ci].commit),
                "reference",
                format!("reference `{text}`: the commit has no `{}` run (its variants are the plan's `variants`)", variant.trim()),
            );
            return;
        };
        let base = model.key.split('/').take(2).collect::<Vec<_>>().join("/");
        for k in 1..=d.reference_runs {
            runs.push(RunSpec {
                id: RunId(runs.len() as u32),
                key: format!("{base}/ref{k}"),
                repeat: 0,
                warmup: false,
                extra: false,
                round: 0,
                reference: true,
                order: u8::MAX,
                ..model.clone()
            });
        }
    }
}

/// How much of each commit's hash its run keys carry: 12 hex digits (what stores have
/// always used), the whole hash where two commits of the plan share those 12, so no two
/// commits' runs ever share a key.
fn key_prefixes(commits: &[CommitSpec]) -> Vec<usize> {
    let mut by12: BTreeMap<&str, usize> = BTreeMap::new();
    for c in commits {
        *by12.entry(&c.commit[..c.commit.len().min(12)]).or_default() += 1;
    }
    commits
        .iter()
        .map(|c| {
            let short = c.commit.len().min(12);
            if by12[&c.commit[..short]] > 1 {
                c.commit.len()
            } else {
                short
            }
        })
        .collect()
}
