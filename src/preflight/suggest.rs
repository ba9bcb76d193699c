//! From "named" to "fixed": the fixes preflight knows for the commits it blocks. Pure: the
//! plan, the facts and the reports in; the fixes out, each with what it fixes and where the
//! fix comes from. Nothing is applied here: the operator reviews the file
//! (`preflight --suggest`) and accepts it (`run --fixes`).

use super::facts::Facts;
use super::known::known;
use super::{CommitReport, Severity, Verdict};
use crate::plan::fixes::{Fix, FixKind};
use crate::plan::{CommitSpec, Plan};

/// vLLM's default share of a GPU it uses, and the share of that weights may take and leave
/// the KV cache room (as the judge counts them).
const USABLE: f64 = 0.9 * 0.85;

/// The fixes for `reports` (one per commit at most), in plan order.
pub fn suggest(plan: &Plan, facts: &Facts, reports: &[CommitReport]) -> Vec<Fix> {
    plan.commits
        .iter()
        .filter_map(|c| {
            let r = reports.iter().find(|r| r.commit == c.commit)?;
            (r.verdict == Verdict::Blocked && c.fixed.is_none())
                .then(|| substitute(c, r).or_else(|| tensor_parallel(plan, c, r, facts)))
                .flatten()
        })
        .collect()
}

/// The blocking reasons' categories and texts.
fn blocking(r: &CommitReport) -> impl Iterator<Item = (&str, &str)> {
    r.reasons
        .iter()
        .filter(|x| x.severity == Severity::Blocks)
        .map(|x| (x.category.as_str(), x.text.as_str()))
}

fn substitute(c: &CommitSpec, r: &CommitReport) -> Option<Fix> {
    let model = super::gather::model_of(c)?;
    let short = c.short();
    known().substitute.iter().find_map(|s| {
        if s.model != model
            || !(s.commits.is_empty() || s.commits.iter().any(|p| short.starts_with(p.as_str())))
        {
            return None;
        }
        let (cat, text) = blocking(r).find(|(cat, _)| s.categories.iter().any(|k| k == cat))?;
        let command = c
            .perf_command
            .as_ref()
            .map(|cmd| cmd.replace(&s.model, &s.with));
        Some(Fix {
            commit: c.commit.clone(),
            kind: FixKind::SubstituteModel,
            model: Some(s.with.clone()),
            perf_command: command,
            gpu_config: None,
            reason: format!("{cat}: {text}"),
            source: s.source.clone(),
        })
    })
}

/// Weights one GPU cannot hold, on a box with enough GPUs: the smallest power of two that
/// holds them, as `--tensor-parallel-size` and the GPU count.
fn tensor_parallel(plan: &Plan, c: &CommitSpec, r: &CommitReport, facts: &Facts) -> Option<Fix> {
    let (_, text) = blocking(r).find(|(cat, _)| *cat == "model_too_large")?;
    let weights = r.weights_bytes? as f64;
    let (per_gpu, _) = facts.host.gpu_mem.get()?;
    let box_gpus = *facts.host.gpus.get()?;
    let asked = c.view.as_ref().map_or(1, |v| v.tp.max(1));
    let tp = (0..4).map(|i| 1u32 << i).find(|n| {
        *n > asked && *n <= box_gpus && weights <= *per_gpu as f64 * f64::from(*n) * USABLE
    })?;
    let cmd = c.perf_command.as_ref()?;
    let command = with_tp(cmd, tp);
    Some(Fix {
        commit: c.commit.clone(),
        kind: FixKind::TensorParallel,
        model: None,
        perf_command: Some(command),
        gpu_config: Some(format!("{}:{tp}", plan.defaults.gpu_type)),
        reason: format!("model_too_large: {text}"),
        source: format!(
            "the weights' size against {tp} × the GPU's memory (vLLM shards weights across tensor-parallel ranks)"
        ),
    })
}

/// The command with its tensor-parallel size set to `tp` (replaced where it gives one).
fn with_tp(cmd: &str, tp: u32) -> String {
    let words = shell_words::split(cmd)
        .unwrap_or_else(|_| cmd.split_whitespace().map(String::from).collect());
    let mut out: Vec<String> = Vec::with_capacity(words.len() + 2);
    let mut replaced = false;
    let mut it = words.into_iter().peekable();
    while let Some(w) = it.next() {
        let name = w.split('=').next().unwrap_or("").replace('_', "-");
        if matches!(name.as_str(), "-tp" | "--tensor-parallel-size") {
            replaced = true;
            if !w.contains('=') {
                it.next();
            }
            out.push("--tensor-parallel-size".into());
            out.push(tp.to_string());
        } else {
            out.push(w);
        }
    }
    if !replaced {
        out.push("--tensor-parallel-size".into());
        out.push(tp.to_string());
    }
    shell_words::join(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensor_parallel_is_set_or_replaced() {
        assert_eq!(
            with_tp("python benchmarks/benchmark_latency.py --model m", 4),
            "python benchmarks/benchmark_latency.py --model m --tensor-parallel-size 4"
        );
        assert_eq!(
            with_tp("vllm bench serve --model m -tp 1 --seed 0", 2),
            "vllm bench serve --model m --tensor-parallel-size 2 --seed 0"
        );
        assert_eq!(
            with_tp("vllm bench serve --tensor_parallel_size=1 --model 'a b'", 8),
            "vllm bench serve --tensor-parallel-size 8 --model 'a b'"
        );
    }
}
