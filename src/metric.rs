//! One definition per metric: its label, unit, which direction is better, and which metric
//! is the headline of each benchmark kind. The TUI, `results`, exports and the digest all
//! read it from here, so a latency Δ can never be "+4.3%" in one place and "−4.3% WIN" in
//! another: every Δ is an *improvement* (positive = better) worded with its direction.

use crate::kind::BenchKind as Kind;
use std::collections::BTreeMap;

/// Which way a metric gets better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    Lower,
    Higher,
    /// Counts that describe the run rather than judge it (tokens generated, requests).
    Neither,
}

/// A known metric key (`parse --json` keys, see `spec/vllm-output-formats.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metric {
    pub key: &'static str,
    /// Column label, short enough for a table header.
    pub label: &'static str,
    pub unit: &'static str,
    pub better: Better,
}

impl Metric {
    #[cfg(test)]
    pub(crate) fn lower_is_better(&self) -> bool {
        self.better == Better::Lower
    }
}

const fn m(key: &'static str, label: &'static str, unit: &'static str, better: Better) -> Metric {
    Metric {
        key,
        label,
        unit,
        better,
    }
}

use Better::{Higher, Lower, Neither};

/// The metrics reports show, in display order (the headline metrics of every kind first).
pub const HEADLINE: &[Metric] = &[
    m("ttft_mean_ms", "TTFT mean ms", "ms", Lower),
    m("ttft_p99_ms", "TTFT p99 ms", "ms", Lower),
    m("tpot_mean_ms", "TPOT mean ms", "ms", Lower),
    m("tpot_p99_ms", "TPOT p99 ms", "ms", Lower),
    m("itl_mean_ms", "ITL mean ms", "ms", Lower),
    m("itl_p99_ms", "ITL p99 ms", "ms", Lower),
    m("output_throughput_tok_s", "out tok/s", "tok/s", Higher),
    m("total_throughput_tok_s", "total tok/s", "tok/s", Higher),
    m("throughput_output_tok_s", "out tok/s", "tok/s", Higher),
    m("throughput_total_tok_s", "total tok/s", "tok/s", Higher),
    m("latency_avg_s", "latency s", "s", Lower),
];

/// Metrics not in [`HEADLINE`] that still have a fixed meaning.
const OTHER: &[Metric] = &[
    m("request_throughput_req_s", "req/s", "req/s", Higher),
    m("throughput_req_s", "req/s", "req/s", Higher),
    m("input_throughput_tok_s", "in tok/s", "tok/s", Higher),
    m(
        "peak_output_throughput_tok_s",
        "peak out tok/s",
        "tok/s",
        Higher,
    ),
    m("e2el_mean_ms", "E2E mean ms", "ms", Lower),
    m("latency_p50_s", "latency p50 s", "s", Lower),
    m("elapsed_s", "elapsed s", "s", Lower),
    m("duration_s", "duration s", "s", Lower),
    m("successful_requests", "requests ok", "", Neither),
    m("failed_requests", "requests failed", "", Lower),
    m("total_input_tokens", "input tokens", "tokens", Neither),
    m("total_output_tokens", "output tokens", "tokens", Neither),
    m("max_concurrency", "max concurrency", "", Neither),
    m("request_rate", "request rate", "req/s", Neither),
];

/// The definition of `key`; unknown keys get one from their suffix (`_ms`/`_s` latencies are
/// lower-better, `_tok_s`/`_req_s` throughputs higher-better), so new percentiles need no
/// entry here.
pub fn lookup(key: &str) -> Metric {
    if let Some(d) = HEADLINE.iter().chain(OTHER).find(|d| d.key == key) {
        return *d;
    }
    let (unit, better) = if key.ends_with("_tok_s") {
        ("tok/s", Higher)
    } else if key.ends_with("_req_s") {
        ("req/s", Higher)
    } else if key.ends_with("_ms") {
        ("ms", Lower)
    } else if key.ends_with("_s") || key.starts_with("latency_") {
        ("s", Lower)
    } else {
        ("", Neither)
    };
    Metric {
        key: "",
        label: "",
        unit,
        better,
    }
}

#[cfg(test)]
pub(crate) fn lower_is_better(key: &str) -> bool {
    lookup(key).lower_is_better()
}

/// The headline metrics of a benchmark kind, most telling first: what decides a verdict
/// and what a queue cell shows.
pub(crate) fn headline_keys(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Serving => &[
            "output_throughput_tok_s",
            "total_throughput_tok_s",
            "request_throughput_req_s",
            "e2el_mean_ms",
            "ttft_mean_ms",
        ],
        Kind::Throughput => &[
            "throughput_output_tok_s",
            "throughput_total_tok_s",
            "throughput_req_s",
        ],
        Kind::Latency => &["latency_avg_s", "latency_p50_s"],
        Kind::PrefixCaching => &["elapsed_s"],
        Kind::Unknown => &[],
    }
}

/// The benchmark kind a set of metrics came from, for callers that only have the metrics
/// (a stored attempt). Each kind prints keys no other kind prints.
pub(crate) fn infer_kind(metrics: &BTreeMap<String, f64>) -> Kind {
    let has = |k: &str| metrics.contains_key(k);
    if has("throughput_req_s") || has("throughput_output_tok_s") || has("throughput_total_tok_s") {
        Kind::Throughput
    } else if has("latency_avg_s") || has("latency_p50_s") {
        Kind::Latency
    } else if has("elapsed_s") {
        Kind::PrefixCaching
    } else if has("output_throughput_tok_s") || has("ttft_mean_ms") || has("successful_requests") {
        Kind::Serving
    } else {
        Kind::Unknown
    }
}

/// Whether a report reads this metric: the headline table's, each kind's headline (and the
/// keys that tell the kind), and the counts comparability checks use. Reports skip the
/// rest (dozens of percentiles per serving run) to stay fast at 10,000 runs.
pub fn reported(key: &str) -> bool {
    HEADLINE.iter().any(|m| m.key == key)
        || [
            Kind::Serving,
            Kind::Throughput,
            Kind::Latency,
            Kind::PrefixCaching,
        ]
        .iter()
        .any(|k| headline_keys(*k).contains(&key))
        || matches!(
            key,
            "total_output_tokens" | "failed_requests" | "successful_requests" | "throughput_req_s"
        )
}

/// The headline metric and its value.
pub fn headline(metrics: &BTreeMap<String, f64>) -> Option<(&'static str, f64)> {
    headline_keys(infer_kind(metrics))
        .iter()
        .find_map(|k| metrics.get(*k).map(|v| (*k, *v)))
}

/// The headline key two sets of metrics share (what a comparison is decided on).
pub(crate) fn shared_headline(
    a: &BTreeMap<String, f64>,
    b: &BTreeMap<String, f64>,
) -> Option<&'static str> {
    headline_keys(infer_kind(a))
        .iter()
        .find(|k| a.contains_key(**k) && b.contains_key(**k))
        .copied()
}

/// How much better `candidate` is than `reference`, in percent: positive is better whatever
/// the metric's direction. None for metrics with no better direction or a zero reference.
pub(crate) fn improvement_pct(key: &str, candidate: f64, reference: f64) -> Option<f64> {
    if reference == 0.0 || !reference.is_finite() || !candidate.is_finite() {
        return None;
    }
    let change = (candidate - reference) / reference.abs() * 100.0;
    match lookup(key).better {
        Lower => Some(-change),
        Higher => Some(change),
        Neither => None,
    }
}

/// An improvement worded with its direction: "faster 4.3%", "slower 2.1%", "more tok/s
/// 3.0%", "less tok/s 1.0%" — never a bare signed number whose sign a reader must decode.
pub(crate) fn delta_label(key: &str, improvement_pct: f64) -> String {
    let d = lookup(key);
    let better = improvement_pct >= 0.0;
    let word = match (d.better, d.unit, better) {
        (Lower, "ms" | "s", true) => "faster".to_string(),
        (Lower, "ms" | "s", false) => "slower".to_string(),
        (Higher, u, true) if !u.is_empty() => format!("more {u}"),
        (Higher, u, false) if !u.is_empty() => format!("less {u}"),
        (_, _, true) => "better".to_string(),
        (_, _, false) => "worse".to_string(),
    };
    format!("{word} {:.1}%", improvement_pct.abs())
}

/// The short form for narrow cells: "▲4.3%" better, "▼2.1%" worse.
pub(crate) fn delta_short(improvement_pct: f64) -> String {
    if improvement_pct >= 0.0 {
        format!("▲{:.1}%", improvement_pct)
    } else {
        format!("▼{:.1}%", -improvement_pct)
    }
}

/// The unit-bearing short name a queue or results cell puts after a value.
pub(crate) fn short_name(key: &str) -> &'static str {
    match key {
        "output_throughput_tok_s" | "throughput_output_tok_s" => "out tok/s",
        "total_throughput_tok_s" | "throughput_total_tok_s" => "tok/s",
        "request_throughput_req_s" | "throughput_req_s" => "req/s",
        "latency_avg_s" => "s avg",
        "latency_p50_s" => "s p50",
        "elapsed_s" => "s",
        "input_throughput_tok_s" => "in tok/s",
        "ttft_mean_ms" => "ms ttft",
        "e2el_mean_ms" => "ms e2e",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn direction_per_metric() {
        // Lower TTFT is better: 90 vs 100 is a 10% improvement.
        assert!((improvement_pct("ttft_mean_ms", 90.0, 100.0).unwrap() - 10.0).abs() < 1e-9);
        assert!(
            (improvement_pct("output_throughput_tok_s", 90.0, 100.0).unwrap() + 10.0).abs() < 1e-9
        );
        assert!((improvement_pct("latency_avg_s", 1.1, 1.0).unwrap() + 10.0).abs() < 1e-9);
        assert_eq!(improvement_pct("x", 1.0, 0.0), None);
        assert_eq!(improvement_pct("total_output_tokens", 1.0, 2.0), None);
        // A percentile no table names still has a direction.
        assert!(lower_is_better("ttft_p99_9_ms"));
        assert!(!lower_is_better("peak_output_throughput_tok_s"));
    }

    #[test]
    fn every_delta_is_worded_with_its_direction() {
        // A latency run 4.3% quicker than baseline: the sign of the raw change is negative,
        // the improvement and its wording are not.
        let imp = improvement_pct("latency_avg_s", 0.957, 1.0).unwrap();
        assert_eq!(delta_label("latency_avg_s", imp), "faster 4.3%");
        let imp = improvement_pct("ttft_mean_ms", 102.1, 100.0).unwrap();
        assert_eq!(delta_label("ttft_mean_ms", imp), "slower 2.1%");
        let imp = improvement_pct("output_throughput_tok_s", 103.0, 100.0).unwrap();
        assert_eq!(
            delta_label("output_throughput_tok_s", imp),
            "more tok/s 3.0%"
        );
        assert_eq!(delta_label("throughput_req_s", -1.0), "less req/s 1.0%");
        assert_eq!(delta_short(-2.0), "▼2.0%");
    }

    #[test]
    fn headline_per_kind() {
        let serving = ms(&[("output_throughput_tok_s", 1.0), ("ttft_mean_ms", 2.0)]);
        assert_eq!(headline(&serving), Some(("output_throughput_tok_s", 1.0)));
        // prefix caching prints throughputs too, but its headline is the elapsed time.
        let prefix = ms(&[("elapsed_s", 3.0), ("output_throughput_tok_s", 1.0)]);
        assert_eq!(headline(&prefix), Some(("elapsed_s", 3.0)));
        let latency = ms(&[("latency_avg_s", 1.5), ("latency_p99_s", 2.0)]);
        assert_eq!(headline(&latency), Some(("latency_avg_s", 1.5)));
        let tput = ms(&[("throughput_req_s", 9.0), ("throughput_total_tok_s", 5.0)]);
        assert_eq!(headline(&tput), Some(("throughput_total_tok_s", 5.0)));
        assert_eq!(headline(&BTreeMap::new()), None);
        assert_eq!(
            shared_headline(&serving, &ms(&[("ttft_mean_ms", 1.0)])),
            Some("ttft_mean_ms")
        );
    }
}
