//! Per-request latencies: what vLLM's serving client writes with `--save-detailed` (and
//! v0.4.0–v0.7.3 always): `ttfts` (seconds), `itls` (a list per request, seconds),
//! `output_lens`, `errors`, and from 0.33.0 `latencies`. A run's P99 TTFT is one number
//! on the summary; from its requests it gets an interval (bootstrap), so the morning
//! reader can tell a P99 that moved from one that wobbled.
//!
//! Kept bounded and compressed: each latency kind sorted, thinned evenly to at most
//! [`KEEP`] values (which keeps its quantiles), as microseconds, delta-coded and deflated
//! (flate2). A 1,000-request run's four kinds take a few KB. Pure.

use crate::stats::bootstrap::{self, Interval};
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::io::{Read, Write};

/// Values kept per latency kind: enough for a P99 and its interval (the top 1% is still
/// 40 values), small enough for the store.
pub const KEEP: usize = 4096;

/// A decompressed sample larger than this is refused (a corrupt or hostile record).
const MAX_SAMPLE_BYTES: u64 = 8 << 20;

/// The latency kinds, as the summary's keys name them.
pub const KINDS: [&str; 4] = ["ttft", "tpot", "itl", "e2el"];

/// One run's per-request latencies, in milliseconds, successful requests only.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PerRequest {
    pub requests: u32,
    pub failed: u32,
    /// Indexed as [`KINDS`].
    pub values: [Vec<f64>; 4],
}

/// What the store and the screen keep of a run's requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Requests {
    pub requests: u32,
    pub failed: u32,
    /// Median and P99 of each per-request kind present (TTFT, TPOT, E2EL), with 95%
    /// bootstrap intervals.
    pub quantiles: Vec<Quantile>,
    /// The kept values: base64 of deflated, delta-coded sorted microseconds per kind.
    pub sample: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Quantile {
    /// `ttft`, `tpot`, `itl` or `e2el`.
    pub kind: String,
    /// 0.5 or 0.99.
    pub q: f64,
    /// The values it rests on (the run's own count, whatever was kept of them).
    pub n: u32,
    pub interval: Interval,
}

impl Quantile {
    /// "P99 TTFT 812.4 ms [790.1–845.0]".
    pub fn label(&self) -> String {
        let name = if self.q == 0.5 {
            "median".to_string()
        } else {
            format!("P{}", (self.q * 100.0).round())
        };
        let i = &self.interval;
        format!(
            "{name} {} {:.1} ms [{:.1}–{:.1}]",
            self.kind.to_uppercase(),
            i.estimate,
            i.low,
            i.high
        )
    }
}

/// The per-request arrays of a result file (one JSON object or JSON Lines: the last
/// object that has them). None when the file carries none (a client without
/// `--save-detailed`, or not a serving result).
pub fn from_result_json(bytes: &[u8]) -> Option<PerRequest> {
    let text = std::str::from_utf8(bytes).ok()?;
    let docs: Vec<Value> = match serde_json::from_str::<Value>(text) {
        Ok(v) => vec![v],
        Err(_) => text
            .lines()
            .filter_map(|l| serde_json::from_str(l.trim()).ok())
            .collect(),
    };
    docs.iter().rev().find_map(of_object)
}

fn of_object(v: &Value) -> Option<PerRequest> {
    let o = v.as_object()?;
    let ttfts = o.get("ttfts")?.as_array()?;
    let list = |k: &str| o.get(k).and_then(Value::as_array);
    let itls = list("itls");
    let out_lens = list("output_lens");
    let errors = list("errors");
    let latencies = list("latencies");
    let mut p = PerRequest::default();
    for (i, t) in ttfts.iter().enumerate() {
        p.requests += 1;
        // A failed request: its error text, or no first token and nothing generated.
        let error = errors
            .and_then(|e| e.get(i))
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty());
        let out = out_lens.and_then(|l| l.get(i)).and_then(Value::as_f64);
        let ttft = t.as_f64().filter(|x| x.is_finite() && *x > 0.0);
        let Some(ttft) = ttft.filter(|_| !error && out != Some(0.0)) else {
            p.failed += 1;
            continue;
        };
        p.values[0].push(ttft * 1000.0);
        let gaps: Vec<f64> = itls
            .and_then(|l| l.get(i))
            .and_then(Value::as_array)
            .map(|g| g.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default();
        // TPOT as the client computes it: the time after the first token over the tokens
        // after it; from the latency where the file has one, else the gaps' sum.
        let latency = latencies.and_then(|l| l.get(i)).and_then(Value::as_f64);
        let after_first = latency.map(|l| l - ttft).unwrap_or(gaps.iter().sum());
        let tokens_after = out.map(|n| n - 1.0).unwrap_or(gaps.len() as f64);
        if tokens_after >= 1.0 && after_first.is_finite() && after_first >= 0.0 {
            p.values[1].push(after_first / tokens_after * 1000.0);
        }
        p.values[2].extend(gaps.iter().filter(|g| g.is_finite()).map(|g| g * 1000.0));
        if let Some(l) = latency.filter(|l| l.is_finite()) {
            p.values[3].push(l * 1000.0);
        }
    }
    Some(p)
}

/// Sorted and thinned evenly to at most `max` values (the i-th kept is the value at rank
/// i·(n−1)/(max−1)), so quantiles read the same.
pub(crate) fn bound(values: &[f64], max: usize) -> Vec<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_unstable_by(f64::total_cmp);
    if v.len() <= max || max < 2 {
        return v;
    }
    let n = v.len();
    (0..max)
        .map(|i| v[(i as f64 * (n - 1) as f64 / (max - 1) as f64).round() as usize])
        .collect()
}

impl Requests {
    /// Summarise and pack a run's requests; `seed` makes the bootstrap repeatable (the
    /// run's key).
    pub fn of(p: &PerRequest, seed: u64) -> Requests {
        let kept: Vec<Vec<f64>> = p.values.iter().map(|v| bound(v, KEEP)).collect();
        let mut quantiles = Vec::new();
        // Intervals for what is one value per request. ITL's gaps within a request move
        // together (one slow batch slows all its gaps), so resampling gaps as if
        // independent would claim an interval narrower than the truth: ITL is kept, not
        // given one.
        for (i, (kind, v)) in KINDS.iter().zip(&kept).enumerate() {
            if *kind == "itl" {
                continue;
            }
            // Resamples of the run's own size, whatever was kept of it.
            let n = p.values[i].iter().filter(|x| x.is_finite()).count();
            for q in [0.5, 0.99] {
                if let Some(interval) = bootstrap::quantile_interval_sorted(v, n, q, 0.95, seed) {
                    quantiles.push(Quantile {
                        kind: kind.to_string(),
                        q,
                        n: n as u32,
                        interval,
                    });
                }
            }
        }
        Requests {
            requests: p.requests,
            failed: p.failed,
            quantiles,
            sample: pack(&kept),
        }
    }

    /// The quantile of a kind, if the run had it.
    pub(crate) fn quantile(&self, kind: &str, q: f64) -> Option<&Quantile> {
        self.quantiles
            .iter()
            .find(|x| x.kind == kind && (x.q - q).abs() < 1e-9)
    }

    /// The kept values per kind (as [`KINDS`]), in milliseconds. None when the sample is
    /// damaged.
    pub fn values(&self) -> Option<Vec<Vec<f64>>> {
        unpack(&self.sample)
    }
}

fn pack(kinds: &[Vec<f64>]) -> String {
    let mut raw = Vec::new();
    for v in kinds {
        leb128(&mut raw, v.len() as u64);
        let mut prev = 0u64;
        for x in v {
            let us = (x * 1000.0).round().max(0.0) as u64;
            leb128(&mut raw, us.saturating_sub(prev));
            prev = us.max(prev);
        }
    }
    let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
    let _ = z.write_all(&raw);
    base64::engine::general_purpose::STANDARD.encode(z.finish().unwrap_or_default())
}

fn unpack(s: &str) -> Option<Vec<Vec<f64>>> {
    let z = base64::engine::general_purpose::STANDARD.decode(s).ok()?;
    let mut raw = Vec::new();
    flate2::read::DeflateDecoder::new(&z[..])
        .take(MAX_SAMPLE_BYTES)
        .read_to_end(&mut raw)
        .ok()?;
    let mut at = 0usize;
    let mut out = Vec::new();
    while at < raw.len() && out.len() < KINDS.len() {
        let n = read_leb128(&raw, &mut at)? as usize;
        if n > KEEP {
            return None;
        }
        let mut v = Vec::with_capacity(n);
        let mut acc = 0u64;
        for _ in 0..n {
            acc = acc.checked_add(read_leb128(&raw, &mut at)?)?;
            v.push(acc as f64 / 1000.0);
        }
        out.push(v);
    }
    (at == raw.len()).then_some(out)
}

fn leb128(out: &mut Vec<u8>, mut x: u64) {
    loop {
        let b = (x & 0x7f) as u8;
        x >>= 7;
        if x == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

fn read_leb128(raw: &[u8], at: &mut usize) -> Option<u64> {
    let mut x = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *raw.get(*at)?;
        *at += 1;
        x |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(x);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `vllm bench serve --save-detailed` result as 0.8–0.32 writes it: 3 requests, the
    /// last failed (empty ttft, no tokens, an error).
    const DETAILED: &str = r#"{"date": "20261128-101010", "backend": "vllm", "completed": 2, "failed": 1,
      "request_rate": "inf", "input_lens": [64, 64, 64], "output_lens": [4, 3, 0],
      "ttfts": [0.120, 0.150, 0.0], "itls": [[0.02, 0.03, 0.025], [0.04, 0.05], []],
      "generated_texts": ["a b c d", "e f g", ""], "errors": ["", "", "Bad Request"]}"#;

    #[test]
    fn a_detailed_result_gives_every_latency_and_counts_the_failed() {
        let p = from_result_json(DETAILED.as_bytes()).unwrap();
        assert_eq!((p.requests, p.failed), (3, 1));
        assert_eq!(p.values[0], vec![120.0, 150.0]);
        // TPOT: gaps' sum over the tokens after the first: 75/3 and 90/2 ms.
        let tpot: Vec<f64> = p.values[1]
            .iter()
            .map(|x| (x * 1e6).round() / 1e6)
            .collect();
        assert_eq!(tpot, vec![25.0, 45.0]);
        assert_eq!(p.values[2].len(), 5);
        assert!(p.values[3].is_empty(), "no latencies before 0.33");
    }

    #[test]
    fn a_summary_without_the_arrays_has_no_requests() {
        let plain = r#"{"completed": 100, "mean_ttft_ms": 12.5, "request_rate": "inf"}"#;
        assert_eq!(from_result_json(plain.as_bytes()), None);
        assert_eq!(from_result_json(b"not json"), None);
        // JSON Lines (--append-result): the last object with the arrays.
        let lines = format!("{plain}\n{}\n", DETAILED.replace('\n', " "));
        assert_eq!(from_result_json(lines.as_bytes()).unwrap().requests, 3);
    }

    #[test]
    fn kept_values_round_trip_bounded_and_the_quantiles_have_intervals() {
        let mut p = PerRequest {
            requests: 20_000,
            ..Default::default()
        };
        p.values[0] = (0..20_000)
            .map(|i| 50.0 + (i % 997) as f64 * 0.37)
            .collect();
        p.values[2] = (0..50_000)
            .map(|i| 10.0 + (i % 101) as f64 * 0.011)
            .collect();
        let r = Requests::of(&p, 7);
        let back = r.values().unwrap();
        assert_eq!(back[0].len(), KEEP);
        assert_eq!(back[1].len(), 0);
        // Microsecond precision, sorted.
        let want = bound(&p.values[0], KEEP);
        assert!(back[0]
            .iter()
            .zip(&want)
            .all(|(a, b)| (a - b).abs() < 0.001));
        assert!(r.sample.len() < 16_000, "{} bytes", r.sample.len());
        let p99 = r.quantile("ttft", 0.99).unwrap();
        assert!(p99.interval.low <= p99.interval.estimate);
        assert!(p99.interval.estimate <= p99.interval.high);
        assert!(p99.label().starts_with("P99 TTFT "), "{}", p99.label());
        assert!(r.quantile("tpot", 0.5).is_none());
        // Damaged samples are refused, not a panic.
        let bad = Requests {
            sample: "AAAA".into(),
            ..r.clone()
        };
        assert_eq!(bad.values(), None);
    }

    #[test]
    fn thinning_keeps_the_quantiles() {
        let v: Vec<f64> = (0..100_000).map(|i| i as f64).collect();
        let b = bound(&v, 1000);
        assert_eq!((b.len(), b[0], b[999]), (1000, 0.0, 99_999.0));
        let q = bootstrap::quantile_sorted(&b, 0.99).unwrap();
        assert!((q - 98_999.0).abs() < 150.0, "{q}");
    }
}
