//! What a variant's own tree says, read from the vLLM clone at the variant's revision: the
//! options its benchmark script, engine and server define (argparse source), and whether
//! the code behind a known failing combination of options is there.

use super::facts::{Known, SourceFlags};
use super::judge::{gives, rule_matches};
use super::known::known;
use crate::command::Launcher;
use crate::kind::BenchKind;
use crate::plan::clone::Clone;
use crate::plan::CommandView;
use crate::rewrite::argparse_src::{read, SourceOptions};

/// vLLM's argparse sources are tens to a few hundred KB; anything past this is not one.
const MAX_SOURCE: u64 = 4 << 20;

const ENGINE: &str = "vllm/engine/arg_utils.py";
const SERVER: &str = "vllm/entrypoints/openai/cli_args.py";

fn script(kind: BenchKind) -> Option<&'static str> {
    Some(match kind {
        BenchKind::Serving => "benchmarks/benchmark_serving.py",
        BenchKind::Throughput => "benchmarks/benchmark_throughput.py",
        BenchKind::Latency => "benchmarks/benchmark_latency.py",
        BenchKind::PrefixCaching => "benchmarks/benchmark_prefix_caching.py",
        BenchKind::Unknown => return None,
    })
}

fn options(clone: &Clone, rev: &str, path: &str) -> Option<SourceOptions> {
    clone.show(rev, path, MAX_SOURCE).and_then(|t| read(&t))
}

/// The options the variant at `rev` accepts, as far as its tree tells; `None` when it tells
/// nothing (no argparse source found: a partial clone, a fixture, a moved file).
pub(crate) fn flags_at(
    clone: &Clone,
    rev: &str,
    view: &CommandView,
    kind: BenchKind,
) -> Option<SourceFlags> {
    let mut files = Vec::new();
    let engine = options(clone, rev, ENGINE);
    if engine.is_some() {
        files.push(ENGINE.to_string());
    }
    let server = if kind.needs_server() {
        let own = options(clone, rev, SERVER);
        if own.is_some() {
            files.push(SERVER.to_string());
        }
        match (&engine, own) {
            (Some(e), Some(o)) => {
                let mut s = o.set;
                s.extend(&e.set);
                Some(s)
            }
            // One half alone cannot say an option is refused.
            (Some(e), None) => Some(incomplete(e.set.clone())),
            (None, Some(o)) => Some(incomplete(o.set)),
            (None, None) => None,
        }
    } else {
        None
    };
    // The client is the benchmark script the command names (a `vllm bench` command's
    // parser is assembled in code across modules: its image's `--help` tells instead).
    let client = match (&view.launcher, script(kind)) {
        (Launcher::Script { .. }, Some(path)) => options(clone, rev, path).map(|o| {
            files.push(path.to_string());
            let mut s = o.set;
            if o.engine_args {
                match &engine {
                    Some(e) => s.extend(&e.set),
                    None => s.complete = false,
                }
            }
            s
        }),
        _ => None,
    };
    (client.is_some() || server.is_some()).then(|| SourceFlags {
        client,
        server,
        rev: rev.to_string(),
        files,
    })
}

fn incomplete(mut s: crate::rewrite::flags::FlagSet) -> crate::rewrite::flags::FlagSet {
    s.complete = false;
    s
}

/// For each `flag_rule` and `option_value` the command meets: whether it holds at `rev`
/// (the tree has the failing code; the value's commit is not in its history). Absent
/// evidence is unknown, never "no".
pub(crate) fn rule_evidence(
    clone: &Clone,
    rev: &str,
    view: &CommandView,
) -> std::collections::BTreeMap<String, Known<bool>> {
    let descends =
        |commit: &Option<String>| commit.as_deref().and_then(|c| clone.is_ancestor(c, rev));
    let mut out = std::collections::BTreeMap::new();
    for r in known().flag_rule.iter().filter(|r| rule_matches(r, view)) {
        let k = match clone.show(rev, &r.tree_file, MAX_SOURCE) {
            Some(text) => Known::Yes(r.tree_text.iter().any(|t| text.contains(t.as_str()))),
            None => match descends(&r.fixed_by) {
                Some(d) => Known::Yes(!d),
                None => Known::Unknown(format!(
                    "{} is not in the clone's tree at {rev}",
                    r.tree_file
                )),
            },
        };
        out.insert(r.name.clone(), k);
    }
    for o in known()
        .option_value
        .iter()
        .filter(|o| gives(view, &o.key()))
    {
        if let Some(d) = descends(&o.added_by) {
            out.insert(o.key(), Known::Yes(!d));
        }
    }
    out
}
