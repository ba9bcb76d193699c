//! The serving benchmark's metrics, computed from what the requests received, and printed
//! in the era's exact layout (spec vllm-output-formats.md §1.2–§1.6); the `--save-result`
//! JSON (§1.7).

use crate::argparse::py_float;
use crate::eras::Ver;
use std::time::Instant;

#[derive(Clone, Debug, Default)]
pub struct Out {
    pub success: bool,
    pub prompt_len: u64,
    pub output_len: u64,
    /// Seconds.
    pub ttft: f64,
    pub itl: Vec<f64>,
    pub latency: f64,
    pub text: String,
    pub error: String,
    /// Arrival instants of the tokens (peak throughput buckets).
    pub token_times: Vec<Instant>,
    pub start: Option<Instant>,
    pub end: Option<Instant>,
}

/// numpy.percentile with linear interpolation; 0 for an empty list (`np.x(v or 0)`).
pub fn percentile(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let rank = p / 100.0 * (s.len() - 1) as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    s[lo] + (s[hi] - s[lo]) * (rank - lo as f64)
}

pub fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

pub fn std(v: &[f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let m = mean(v);
    (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / v.len() as f64).sqrt()
}

pub struct Summary {
    pub completed: usize,
    pub failed: usize,
    pub duration: f64,
    pub total_input: u64,
    pub total_output: u64,
    /// ms lists per metric.
    pub ttfts: Vec<f64>,
    pub tpots: Vec<f64>,
    pub itls: Vec<f64>,
    pub e2els: Vec<f64>,
    pub good: Option<usize>,
    pub peak_tok_s: f64,
    pub peak_conc: f64,
}

pub fn summarize(outs: &[Out], duration: f64, goodput: &[(String, f64)], t0: Instant) -> Summary {
    let ok: Vec<&Out> = outs.iter().filter(|o| o.success).collect();
    let ttfts: Vec<f64> = ok.iter().map(|o| o.ttft * 1000.0).collect();
    let tpots: Vec<f64> = ok
        .iter()
        .filter(|o| o.output_len > 1)
        .map(|o| (o.latency - o.ttft) / (o.output_len - 1) as f64 * 1000.0)
        .collect();
    let itls: Vec<f64> = ok
        .iter()
        .flat_map(|o| o.itl.iter().map(|x| x * 1000.0))
        .collect();
    let e2els: Vec<f64> = ok.iter().map(|o| o.latency * 1000.0).collect();
    let good = (!goodput.is_empty()).then(|| {
        ok.iter()
            .filter(|o| {
                let tpot = if o.output_len > 1 {
                    (o.latency - o.ttft) / (o.output_len - 1) as f64 * 1000.0
                } else {
                    0.0
                };
                goodput.iter().all(|(k, slo)| match k.as_str() {
                    "ttft" => o.ttft * 1000.0 <= *slo,
                    "tpot" => tpot <= *slo,
                    _ => o.latency * 1000.0 <= *slo,
                })
            })
            .count()
    });
    // 1-second buckets since the start: output tokens and requests in flight.
    let secs = duration.ceil().max(1.0) as usize;
    let mut tok = vec![0u64; secs + 1];
    let mut conc = vec![0u64; secs + 1];
    for o in &ok {
        for t in &o.token_times {
            let b = (t.duration_since(t0).as_secs_f64() as usize).min(secs);
            tok[b] += 1;
        }
        if let (Some(s), Some(e)) = (o.start, o.end) {
            let (a, b) = (
                s.duration_since(t0).as_secs_f64() as usize,
                e.duration_since(t0).as_secs_f64() as usize,
            );
            for c in conc.iter_mut().take(b.min(secs) + 1).skip(a.min(secs)) {
                *c += 1;
            }
        }
    }
    Summary {
        completed: ok.len(),
        failed: outs.len() - ok.len(),
        duration,
        total_input: ok.iter().map(|o| o.prompt_len).sum(),
        total_output: ok.iter().map(|o| o.output_len).sum(),
        ttfts,
        tpots,
        itls,
        e2els,
        good,
        peak_tok_s: tok.iter().copied().max().unwrap_or(0) as f64,
        peak_conc: conc.iter().copied().max().unwrap_or(0) as f64,
    }
}

fn row(label: &str, value: String) {
    println!("{label:<40} {value:<10}");
}

/// `P99`, `P99.9`, `P50`.
pub fn p_label(p: f64) -> String {
    if p.fract() == 0.0 {
        format!("{}", p as i64)
    } else {
        py_float(p)
    }
}

pub struct View {
    pub ver: Ver,
    pub cli: bool,
    pub max_concurrency: Option<i64>,
    pub request_rate: f64,
    /// Selected metrics (ttft, tpot, itl, e2el) and percentiles.
    pub metrics: Vec<String>,
    pub percentiles: Vec<f64>,
}

fn section(title: &str, short: &str, v: &[f64], pcts: &[f64]) {
    println!("{:-^50}", title);
    row(&format!("Mean {short} (ms):"), format!("{:.2}", mean(v)));
    row(
        &format!("Median {short} (ms):"),
        format!("{:.2}", percentile(v, 50.0)),
    );
    for p in pcts {
        row(
            &format!("P{} {short} (ms):", p_label(*p)),
            format!("{:.2}", percentile(v, *p)),
        );
    }
}

pub fn print_block(s: &Summary, w: &View) {
    let v = w.ver;
    let d = s.duration.max(1e-9);
    if v < Ver::new(0, 3, 0) {
        let lat: Vec<f64> = s.e2els.iter().map(|x| x / 1000.0).collect();
        println!("Total time: {:.2} s", s.duration);
        println!("Throughput: {:.2} requests/s", s.completed as f64 / d);
        println!("Average latency: {:.2} s", mean(&lat));
        let per_tok = if s.total_input + s.total_output > 0 {
            mean(&lat) * s.completed as f64 / (s.total_input + s.total_output) as f64
        } else {
            0.0
        };
        let per_out = if s.total_output > 0 {
            mean(&lat) * s.completed as f64 / s.total_output as f64
        } else {
            0.0
        };
        println!("Average latency per token: {per_tok:.2} s");
        println!("Average latency per output token: {per_out:.2} s");
        return;
    }
    if v < Ver::new(0, 4, 0) {
        println!("Successful requests: {}", s.completed);
        println!("Benchmark duration: {:.6} s", s.duration);
        println!("Total input tokens: {}", s.total_input);
        println!("Total generated tokens: {}", s.total_output);
        println!(
            "Request throughput: {:.2} requests/s",
            s.completed as f64 / d
        );
        println!(
            "Input token throughput: {:.2} tokens/s",
            s.total_input as f64 / d
        );
        println!(
            "Output token throughput: {:.2} tokens/s",
            s.total_output as f64 / d
        );
        for (short, l) in [("TTFT", &s.ttfts), ("TPOT", &s.tpots)] {
            println!("Mean {short}: {:.2} ms", mean(l));
            println!("Median {short}: {:.2} ms", percentile(l, 50.0));
            println!("P99 {short}: {:.2} ms", percentile(l, 99.0));
        }
        return;
    }
    println!("{:=^50}", " Serving Benchmark Result ");
    row("Successful requests:", s.completed.to_string());
    if w.cli && v >= Ver::new(0, 11, 1) {
        row("Failed requests:", s.failed.to_string());
    }
    if v >= Ver::new(0, 10, 1) {
        if let Some(c) = w.max_concurrency {
            row("Maximum request concurrency:", c.to_string());
        }
        if w.request_rate.is_finite() {
            row(
                "Request rate configured (RPS):",
                format!("{:.2}", w.request_rate),
            );
        }
    }
    row("Benchmark duration (s):", format!("{:.2}", s.duration));
    row("Total input tokens:", s.total_input.to_string());
    row("Total generated tokens:", s.total_output.to_string());
    row(
        "Request throughput (req/s):",
        format!("{:.2}", s.completed as f64 / d),
    );
    if let Some(g) = s.good {
        if v >= Ver::new(0, 6, 4) {
            row("Request goodput (req/s):", format!("{:.2}", g as f64 / d));
        }
    }
    if v < Ver::new(0, 6, 0) {
        row(
            "Input token throughput (tok/s):",
            format!("{:.2}", s.total_input as f64 / d),
        );
    }
    row(
        "Output token throughput (tok/s):",
        format!("{:.2}", s.total_output as f64 / d),
    );
    if w.cli && v >= Ver::new(0, 11, 0) {
        row(
            "Peak output token throughput (tok/s):",
            format!("{:.2}", s.peak_tok_s),
        );
        row("Peak concurrent requests:", format!("{:.2}", s.peak_conc));
    }
    if v >= Ver::new(0, 6, 0) {
        let label = if w.cli && v >= Ver::new(0, 13, 0) {
            "Total token throughput (tok/s):"
        } else {
            "Total Token throughput (tok/s):"
        };
        row(
            label,
            format!("{:.2}", (s.total_input + s.total_output) as f64 / d),
        );
    }
    let (metrics, pcts): (Vec<String>, Vec<f64>) = if v < Ver::new(0, 6, 0) {
        let mut m = vec!["ttft".to_string(), "tpot".into()];
        if v >= Ver::new(0, 5, 0) {
            m.push("itl".into());
        }
        (m, vec![99.0])
    } else {
        (w.metrics.clone(), w.percentiles.clone())
    };
    let has = |m: &str| metrics.iter().any(|x| x == m);
    if has("ttft") {
        section("Time to First Token", "TTFT", &s.ttfts, &pcts);
    }
    if has("tpot") {
        section(
            "Time per Output Token (excl. 1st token)",
            "TPOT",
            &s.tpots,
            &pcts,
        );
    }
    if has("itl") {
        section("Inter-token Latency", "ITL", &s.itls, &pcts);
    }
    if has("e2el") {
        section("End-to-end Latency", "E2EL", &s.e2els, &pcts);
    }
    println!("{}", "=".repeat(50));
}
