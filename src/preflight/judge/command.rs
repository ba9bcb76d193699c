//! The command against what each variant accepts: the era tables, the argparse definitions
//! in the variant's own tree, what its image said on an earlier night, and the known
//! combinations of options that fail on a release (`known.toml`'s `flag_rule`s).

use super::{Findings, ALL};
use crate::diagnose::predict::PyVersion;
use crate::plan::{static_invocation, CommandView, CommitSpec, Plan};
use crate::preflight::facts::{Era, Known, SourceFlags};
use crate::preflight::known::{known, FlagRule};
use std::collections::BTreeMap;

pub(super) fn flag<'a>(view: &'a CommandView, names: &[&str]) -> Option<&'a str> {
    view.flags
        .iter()
        .find(|fl| {
            let n = fl.name.replace('_', "-");
            names.contains(&n.as_str())
        })
        .and_then(|fl| fl.value.as_deref())
}

/// The command against each era's client and server (what `plan check` does with the
/// plan's version, here with the version each variant really runs). A variant whose own
/// tree told its options is judged by [`source_command`] instead.
pub(super) fn command(
    plan: &Plan,
    c: &CommitSpec,
    view: &CommandView,
    eras: &BTreeMap<String, Era>,
    source: &BTreeMap<String, SourceFlags>,
    f: &mut Findings,
) {
    let mut by_version: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (v, e) in eras {
        if !source.contains_key(v) {
            by_version.entry(e.version.as_str()).or_default().push(v);
        }
    }
    if by_version.is_empty() {
        if let (true, Some(p)) = (source.is_empty(), &c.invocation_problem) {
            f.risk(ALL, "dataset_missing", p.clone());
        }
        return;
    }
    for (version, vs) in by_version {
        match static_invocation(
            view,
            c.mode,
            Some(version),
            c.model.as_deref(),
            &plan.datasets,
        ) {
            Ok(_) => {}
            Err(r) if r.dataset => f.risk(ALL, "dataset_missing", r.reason),
            Err(r) => {
                for v in vs {
                    f.block(
                        v,
                        "bench_command_invalid",
                        format!("vLLM {version}: {}", r.reason),
                    );
                }
            }
        }
    }
}

/// The command against the options the variant's own tree defines (its benchmark script,
/// the engine's and the server's argparse), the era tables filling in what the tree did
/// not tell. An option the commit under test adds or changes is seen this way.
pub(super) fn source_command(
    plan: &Plan,
    c: &CommitSpec,
    view: &CommandView,
    eras: &BTreeMap<String, Era>,
    source: &BTreeMap<String, SourceFlags>,
    f: &mut Findings,
) {
    for (v, s) in source {
        match with_sets(
            plan,
            c,
            view,
            eras.get(v),
            s.client.clone(),
            s.server.clone(),
        ) {
            Ok(_) => {}
            Err(r) if r.dataset => f.risk(ALL, "dataset_missing", r.reason),
            Err(r) => f.block(
                v,
                "bench_command_invalid",
                format!(
                    "{} at {} ({}): {}",
                    "vLLM's source",
                    short(&s.rev),
                    s.files.join(", "),
                    r.reason
                ),
            ),
        }
    }
}

/// The command planned against what a variant is known to accept (`None`: the era table).
fn with_sets(
    plan: &Plan,
    c: &CommitSpec,
    view: &CommandView,
    era: Option<&Era>,
    client: Option<crate::rewrite::flags::FlagSet>,
    server: Option<crate::rewrite::flags::FlagSet>,
) -> Result<crate::rewrite::Invocation, crate::rewrite::Refusal> {
    let version = era.and_then(|e| PyVersion::parse(&e.version));
    let kind = view.kind.or(c.mode).unwrap_or_default();
    let tables = crate::rewrite::tables(kind, version.as_ref());
    let sets = (client.unwrap_or(tables.0), server.unwrap_or(tables.1));
    let facts = crate::rewrite::Facts::from_tables(
        view.kind.or(c.mode),
        version.as_ref(),
        &sets,
        c.model.as_deref(),
        &plan.datasets,
    );
    crate::rewrite::plan(view, &facts)
}

fn short(rev: &str) -> &str {
    rev.get(..12).unwrap_or(rev)
}

/// Whether the command gives `spec` (`--name`, or `--name=value`): a boolean option
/// switched off by its value (`False`, `0`) or its `--no-` spelling is not given.
pub fn gives(view: &CommandView, spec: &str) -> bool {
    let (name, want) = match spec.split_once('=') {
        Some((n, v)) => (n, Some(v)),
        None => (spec, None),
    };
    view.flags.iter().any(|fl| {
        let n = fl.name.replace('_', "-");
        if n != name {
            return false;
        }
        let value = fl.value.as_deref().map(|v| v.trim_matches(['\'', '"']));
        match (want, value) {
            (Some(w), Some(v)) => v == w,
            (Some(_), None) => false,
            (None, Some(v)) => !matches!(v.to_ascii_lowercase().as_str(), "false" | "0" | "no"),
            (None, None) => true,
        }
    })
}

/// Whether `rule`'s options are in the command (all of `all`, none of `none`).
pub(crate) fn rule_matches(rule: &FlagRule, view: &CommandView) -> bool {
    rule.all.iter().all(|s| gives(view, s)) && !rule.none.iter().any(|s| gives(view, s))
}

/// The revision a variant's tree is at: the commit for human, the parent otherwise.
fn revision<'a>(c: &'a CommitSpec, variant: &str) -> Option<&'a str> {
    if variant == "human" {
        Some(c.commit.as_str())
    } else {
        c.parent.as_deref()
    }
}

/// Whether `rev` is `commit` (full or abbreviated either way).
fn same_commit(rev: &str, commit: &str) -> bool {
    let n = rev.len().min(commit.len());
    n >= 7 && rev[..n].eq_ignore_ascii_case(&commit[..n])
}

/// Known combinations of options that fail on some releases, and option values a release
/// lacks. Per variant the clone is the evidence (the failing code is in its tree or not;
/// the commit that changed it is in its history or not); without it, the release.
pub(super) fn rules(
    c: &CommitSpec,
    view: &CommandView,
    variants: &[String],
    eras: &BTreeMap<String, Era>,
    cf: &crate::preflight::facts::CommitFacts,
    f: &mut Findings,
) {
    let evidence = |v: &str, key: &str| cf.rule_evidence.get(v).and_then(|e| e.get(key));
    for rule in known().flag_rule.iter().filter(|r| rule_matches(r, view)) {
        for v in variants {
            let version = eras.get(v).and_then(|e| PyVersion::parse(&e.version));
            let fixed = rule
                .fixed_by
                .as_deref()
                .zip(revision(c, v))
                .is_some_and(|(fix, rev)| same_commit(rev, fix));
            match evidence(v, &rule.name) {
                Some(Known::Yes(true)) => f.block(
                    v,
                    &rule.category,
                    format!("{} ({} in the clone's tree)", rule.text, rule.tree_file),
                ),
                Some(Known::Yes(false)) => {}
                _ if fixed => {}
                other => match version {
                    Some(ver) if rule.holds_for(&ver) => f.block(
                        v,
                        &rule.category,
                        format!("{} (vLLM {}; {})", rule.text, eras[v].version, rule.source),
                    ),
                    Some(_) => {}
                    None => {
                        let why = match other {
                            Some(Known::Unknown(w)) => w.clone(),
                            _ => "no clone and no era".into(),
                        };
                        f.unchecked(format!("{} for {v}: {why}", rule.name));
                    }
                },
            }
        }
    }
    for o in known()
        .option_value
        .iter()
        .filter(|o| gives(view, &o.key()))
    {
        for v in variants {
            // The variant's own argparse source, where read, has already decided.
            let told = cf.source_flags.get(v).is_some_and(|s| {
                [&s.client, &s.server]
                    .into_iter()
                    .flatten()
                    .any(|set| set.choices(&o.option).is_some())
            });
            if told {
                continue;
            }
            let added = o
                .added_by
                .as_deref()
                .zip(revision(c, v))
                .is_some_and(|(a, rev)| same_commit(rev, a));
            let lacks = match evidence(v, &o.key()) {
                Some(Known::Yes(b)) => *b,
                _ if added => false,
                _ => eras
                    .get(v)
                    .and_then(|e| PyVersion::parse(&e.version))
                    .zip(PyVersion::parse(&o.first))
                    .is_some_and(|(ver, first)| ver < first),
            };
            if lacks {
                let era = eras.get(v).map_or("its tree", |e| e.version.as_str());
                f.block(
                    v,
                    "bench_command_invalid",
                    format!(
                        "argument {}: invalid choice: '{}' (choose from {}) (vLLM {era}; {})",
                        o.option,
                        o.value,
                        o.before_choices
                            .iter()
                            .map(|c| format!("'{c}'"))
                            .collect::<Vec<_>>()
                            .join(", "),
                        o.source
                    ),
                );
            }
        }
    }
}
/// `--max-model-len` beyond the context the model's config.json gives, where nothing in
/// the config stretches it: vLLM refuses to start ("User-specified max_model_len (N) is
/// greater than the derived max_model_len") unless `VLLM_ALLOW_LONG_MAX_MODEL_LEN` is set.
/// Only the plain case is judged: one context key, no rope scaling, no sliding window.
pub(crate) fn context_beyond_model(view: &CommandView, cfg: &serde_json::Value) -> Option<String> {
    if view
        .env
        .iter()
        .any(|(k, _)| k == "VLLM_ALLOW_LONG_MAX_MODEL_LEN")
    {
        return None;
    }
    let asked: u64 = view
        .flags
        .iter()
        .find(|f| f.name.replace('_', "-") == "--max-model-len")
        .and_then(|f| f.value.as_deref())?
        .parse()
        .ok()?;
    const KEYS: &[&str] = &[
        "max_position_embeddings",
        "n_positions",
        "max_seq_len",
        "seq_length",
        "model_max_length",
        "max_sequence_length",
        "max_seq_length",
        "seq_len",
    ];
    let present: Vec<u64> = KEYS
        .iter()
        .filter_map(|k| cfg.get(*k).and_then(|v| v.as_u64()))
        .collect();
    let stretched = ["rope_scaling", "sliding_window", "text_config"]
        .iter()
        .any(|k| cfg.get(*k).is_some_and(|v| !v.is_null()));
    let [model] = present[..] else {
        return None;
    };
    (!stretched && asked > model).then(|| {
        format!(
            "--max-model-len {asked} is beyond the model's {model} (config.json): vLLM refuses to start (User-specified max_model_len is greater than the derived max_model_len) unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"
        )
    })
}

/// The command against what each variant's image said of its flags on an earlier night:
/// an option its own client and server refuse is evidence, whatever the era tables say.
pub(super) fn learned_command(
    plan: &Plan,
    c: &CommitSpec,
    view: &CommandView,
    eras: &BTreeMap<String, Era>,
    learned: &BTreeMap<String, crate::runtime::docker::memo::Learned>,
    f: &mut Findings,
) {
    for (v, l) in learned {
        if let Err(r) = with_sets(
            plan,
            c,
            view,
            eras.get(v),
            l.client.clone(),
            l.server.clone(),
        ) {
            if !r.dataset {
                f.block(
                    v,
                    "bench_command_invalid",
                    format!(
                        "its image's own --help (asked on an earlier night): {}",
                        r.reason
                    ),
                );
            }
        }
    }
}
