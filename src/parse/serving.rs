//! The serving result block (`benchmark_serving.py`, `vllm bench serve`, and sglang's
//! `bench_serving`, which shares the layout): header, sections, closing line, and the
//! label → key vocabulary of every era.

use super::label::{scale_for, slug, suffix_starts, LabelValue};
use super::sglang;
use super::Kind;
use std::borrow::Cow;

pub(crate) use super::Scope;

/// The fixed vocabulary, lower-case labels as printed minus the unit parenthesis.
const TABLE: &[(&str, &str, Scope)] = &[
    ("successful requests", "successful_requests", Scope::Starter),
    ("failed requests", "failed_requests", Scope::Block),
    (
        "maximum request concurrency",
        "max_concurrency",
        Scope::Context,
    ),
    ("max request concurrency", "max_concurrency", Scope::Context),
    ("request rate configured", "request_rate", Scope::Block),
    ("traffic request rate", "request_rate", Scope::Context),
    ("request rate", "request_rate", Scope::Context),
    ("burstiness factor", "burstiness", Scope::Context),
    ("benchmark duration", "duration_s", Scope::Starter),
    ("total input tokens", "total_input_tokens", Scope::Block),
    (
        "total generated tokens",
        "total_output_tokens",
        Scope::Block,
    ),
    ("total output tokens", "total_output_tokens", Scope::Block),
    (
        "request throughput",
        "request_throughput_req_s",
        Scope::Starter,
    ),
    ("request goodput", "request_goodput_req_s", Scope::Block),
    (
        "input token throughput",
        "input_throughput_tok_s",
        Scope::Block,
    ),
    (
        "output token throughput",
        "output_throughput_tok_s",
        Scope::Block,
    ),
    (
        "peak output token throughput",
        "peak_output_throughput_tok_s",
        Scope::Block,
    ),
    (
        "peak concurrent requests",
        "peak_concurrent_requests",
        Scope::Block,
    ),
    (
        "total token throughput",
        "total_throughput_tok_s",
        Scope::Block,
    ),
    (
        "input throughput",
        "input_throughput_inputs_s",
        Scope::Block,
    ),
    ("rtfx (inverse real-time factor)", "rtfx", Scope::Block),
    ("rtfx", "rtfx", Scope::Block),
    (
        "acceptance rate",
        "spec_decode_acceptance_rate_pct",
        Scope::Block,
    ),
    (
        "acceptance length",
        "spec_decode_acceptance_length",
        Scope::Block,
    ),
    ("drafts", "spec_decode_drafts", Scope::Block),
    ("draft tokens", "spec_decode_draft_tokens", Scope::Block),
    (
        "accepted tokens",
        "spec_decode_accepted_tokens",
        Scope::Block,
    ),
    (
        "probe requests completed",
        "probe_completed_requests",
        Scope::Block,
    ),
    (
        "probe requests failed",
        "probe_failed_requests",
        Scope::Block,
    ),
    // Pre-2024 `benchmark_serving.py` (no header): `Total time: 216.81 s`, `Throughput:
    // 4.61 requests/s` (handled by the throughput matcher), `Average latency: 7.96 s`.
    ("total time", "duration_s", Scope::Starter),
    ("average latency", "avg_latency_s", Scope::Starter),
    (
        "average latency per token",
        "avg_latency_per_token_s",
        Scope::Block,
    ),
    (
        "average latency per output token",
        "avg_latency_per_output_token_s",
        Scope::Block,
    ),
];

/// A mapped label.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Mapped {
    pub key: Cow<'static, str>,
    pub value: f64,
    pub scope: Scope,
}

/// Metric names of the per-metric sections → key stem.
fn metric_stem(name: &str) -> Option<&'static str> {
    Some(match name {
        "ttft" | "time to first token" => "ttft",
        "tpot" | "time per output token" => "tpot",
        "itl" | "inter-token latency" | "inter token latency" => "itl",
        "e2el" | "e2e latency" | "e2e" | "end-to-end latency" | "end to end latency" => "e2el",
        "client queue time" => "client_queue_time",
        "e2el incl. client queue" | "e2el incl client queue" => "e2el_incl_client_queue",
        "probe e2el" => "probe_e2el",
        _ => return None,
    })
}

/// `mean` / `median` / `std` / `min` / `max` / `p99` / `p99.9` → key part.
fn stat_part(word: &str) -> Option<Cow<'static, str>> {
    Some(match word {
        "mean" | "average" => Cow::Borrowed("mean"),
        "median" => Cow::Borrowed("median"),
        "std" | "stdev" | "std dev" => Cow::Borrowed("std"),
        "min" => Cow::Borrowed("min"),
        "max" => Cow::Borrowed("max"),
        w if w.len() > 1
            && w.starts_with('p')
            && w[1..].bytes().all(|b| b.is_ascii_digit() || b == b'.')
            && w.as_bytes()[1].is_ascii_digit() =>
        {
            let p = w.trim_end_matches('.');
            let p = match p.split_once('.') {
                Some((int, frac)) if frac.bytes().all(|b| b == b'0') => int,
                _ => p,
            };
            // The 50th percentile is the median, whichever way a version prints it.
            if p == "p50" {
                Cow::Borrowed("median")
            } else {
                Cow::Owned(slug(p))
            }
        }
        _ => return None,
    })
}

fn lookup(candidate: &str, generic: bool) -> Option<(Cow<'static, str>, Scope)> {
    if let Some((_, key, scope)) = TABLE.iter().find(|(l, _, _)| *l == candidate) {
        return Some((Cow::Borrowed(key), *scope));
    }
    if let Some((key, scope)) = sglang::lookup(candidate) {
        return Some((Cow::Borrowed(key), scope));
    }
    // `Mean TTFT`, `P99.9 E2EL`, `Median E2E Latency`, `Max ITL`, `Median probe E2EL`.
    if let Some((stat, name)) = candidate.split_once(' ') {
        if let Some(stat) = stat_part(stat) {
            let stem = match metric_stem(name) {
                Some(s) => Cow::Borrowed(s),
                None if generic && stat != "mean" && name.split(' ').count() <= 4 => {
                    Cow::Owned(slug(name))
                }
                None => return None,
            };
            // A known metric opens a headerless block: era A prints no header, and a log
            // cut above the header still shows its sections.
            let scope = if metric_stem(name).is_some() {
                Scope::Starter
            } else {
                Scope::Block
            };
            return Some((Cow::Owned(format!("{stem}_{stat}_ms")), scope));
        }
    }
    // Spec-decode per-position lines: `  Position 0:   82.50`.
    if let Some(n) = candidate.strip_prefix("position ") {
        if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) {
            return Some((
                Cow::Owned(format!("spec_decode_position_{n}_acceptance_pct")),
                Scope::Block,
            ));
        }
    }
    None
}

/// Maps a parsed line to a serving key. `generic` (inside a header-delimited block only)
/// lets unknown labels of future versions through as slugs with their unit.
pub(crate) fn map(lv: &LabelValue, generic: bool) -> Option<Mapped> {
    for start in suffix_starts(&lv.label) {
        let candidate = &lv.label[start..];
        if let Some((key, scope)) = lookup(candidate, generic) {
            let value = lv.value * scale_for(&key, lv.unit.as_deref());
            return Some(Mapped { key, value, scope });
        }
    }
    if generic {
        return fallback(lv);
    }
    None
}

/// Unknown label inside a result block: keep it under a slug that names its unit. Only
/// labels shaped like vLLM's own (letters first, a few words, unit in parentheses or none).
fn fallback(lv: &LabelValue) -> Option<Mapped> {
    let l = &lv.label;
    let words = l.split(' ').count();
    if words > 8
        || l.len() > 60
        || !l.starts_with(|c: char| c.is_ascii_alphabetic())
        || l.starts_with("avg ")
        || l.contains(['|', ':', '=', '[', ']', '/'])
    {
        return None;
    }
    let mut key = slug(l);
    if key.is_empty() {
        return None;
    }
    match lv.unit.as_deref() {
        None => {}
        Some("ms") => key.push_str("_ms"),
        Some("s" | "sec" | "secs" | "seconds") => key.push_str("_s"),
        Some("tok/s" | "tokens/s" | "toks/s") => key.push_str("_tok_s"),
        Some("req/s" | "requests/s" | "rps") => key.push_str("_req_s"),
        Some("%") => key.push_str("_pct"),
        Some(u) => {
            key.push('_');
            key.push_str(&slug(u));
        }
    }
    Some(Mapped {
        key: Cow::Owned(key),
        value: lv.value,
        scope: Scope::Block,
    })
}

/// Splits a frame line that starts with `rule` (`=` or `-`) into whatever came before it
/// (a prefix of any shape: `2024/07/08 21:59:25 `, `INFO bench:x.py:9 `, `E   `) and the
/// frame itself. The rule must start a token, so `a==b` is not a frame.
pub(crate) fn split_frame(text: &str, rule: char) -> (&str, &str) {
    let pat = if rule == '=' { "==" } else { "---" };
    let Some(at) = text.find(pat) else {
        return ("", text);
    };
    let glued = text[..at]
        .chars()
        .next_back()
        .is_some_and(|c| c.is_alphanumeric());
    if glued {
        ("", text)
    } else {
        text.split_at(at)
    }
}

fn frame_text(text: &str, rule: char) -> &str {
    split_frame(text, rule).1
}

/// `===== Serving Benchmark Result =====` (and sglang's offline variant) → the block kind.
pub(crate) fn header_kind(text: &str) -> Option<Kind> {
    let text = frame_text(text, '=');
    if !text.starts_with("==") {
        return None;
    }
    let title = text.trim_matches(|c: char| c == '=' || c.is_whitespace());
    let lower = title.to_ascii_lowercase();
    if !lower.contains("benchmark result") {
        return None;
    }
    Some(if lower.contains("serving") {
        Kind::Serving
    } else if lower.contains("throughput") {
        Kind::Throughput
    } else if lower.contains("latency") {
        Kind::Latency
    } else {
        Kind::Serving
    })
}

/// The closing `=====…` line.
pub(crate) fn is_closing(text: &str) -> bool {
    let text = frame_text(text, '=');
    text.len() >= 10 && text.bytes().all(|b| b == b'=')
}

/// A section header `-----Time to First Token-----`.
pub(crate) fn is_section(text: &str) -> bool {
    let text = frame_text(text, '-');
    text.starts_with("---")
        && text.ends_with("---")
        && text.bytes().any(|b| b.is_ascii_alphabetic())
}

/// In a block of the offline-throughput kind (sglang `bench_offline_throughput`), the
/// serving labels mean the throughput contract keys.
pub(crate) fn as_throughput_key(key: &str) -> Option<&'static str> {
    Some(match key {
        "request_throughput_req_s" => "throughput_req_s",
        "total_throughput_tok_s" => "throughput_total_tok_s",
        "output_throughput_tok_s" => "throughput_output_tok_s",
        "input_throughput_tok_s" => "throughput_input_tok_s",
        "duration_s" => "elapsed_s",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::label::split;
    use super::*;

    fn key(text: &str, generic: bool) -> Option<(String, f64)> {
        map(&split(text)?, generic).map(|m| (m.key.into_owned(), m.value))
    }

    #[test]
    fn maps_every_era() {
        assert_eq!(
            key("P99.9 TTFT (ms):   812.37", false),
            Some(("ttft_p99_9_ms".into(), 812.37))
        );
        assert_eq!(
            key("Mean TTFT: 41.5 s", false),
            Some(("ttft_mean_ms".into(), 41500.0))
        );
        assert_eq!(
            key("Median E2E Latency (ms):  11625.66", false),
            Some(("e2el_median_ms".into(), 11625.66))
        );
        assert_eq!(
            key("Total Token throughput (tok/s):   3457.66", false),
            Some(("total_throughput_tok_s".into(), 3457.66))
        );
        assert_eq!(
            key("P99.0 ITL (ms): 5", false),
            Some(("itl_p99_ms".into(), 5.0))
        );
        assert_eq!(key("Avg prompt throughput: 0.0 tokens/s", true), None);
        assert_eq!(
            key("Accuracy Rate (%):  91.5", true),
            Some(("accuracy_rate_pct".into(), 91.5))
        );
        assert_eq!(key("Accuracy Rate (%):  91.5", false), None);
    }

    #[test]
    fn headers() {
        assert_eq!(
            header_kind("============ Serving Benchmark Result ============"),
            Some(Kind::Serving)
        );
        assert!(is_closing(
            "=================================================="
        ));
        assert!(is_section(
            "---------------Time to First Token----------------"
        ));
    }
}
