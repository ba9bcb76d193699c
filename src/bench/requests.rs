//! `nightshift bench requests`: the per-request path a serving run's end takes — read the
//! `--save-detailed` arrays out of the result file, bound and pack them, bootstrap the
//! quantiles — on the sim's result files of 100, 1,000 and 10,000 requests (about 200 tokens each, so
//! about 20,000 to 2,000,000 inter-token gaps), and the size that lands in the store.

use crate::requests::{self, Requests};
use crate::stats::noise;
use std::fmt::Write as _;
use std::time::Instant;

/// A result file as vLLM's client writes it with `--save-detailed` (the arrays only):
/// the sim's, at `n` requests.
fn result_file(n: usize, seed: u64) -> String {
    let b = noise::BoxNoise::of(seed);
    let d = noise::draw(&b, seed, 0);
    noise::per_request_json_of(n as u32, 1.0, &d, seed)
}

fn median_ms(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub fn run() -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "bench requests: result file → arrays → bounded, packed, bootstrapped (median of 5)"
    );
    let _ = writeln!(
        o,
        "{:>9} {:>10} {:>10} {:>10} {:>12} {:>10}",
        "requests", "file MB", "read ms", "keep ms", "stored bytes", "unpack ms"
    );
    for n in [100usize, 1_000, 10_000] {
        let file = result_file(n, n as u64);
        let (mut read, mut keep, mut unpack) = (vec![], vec![], vec![]);
        let mut stored = 0;
        for _ in 0..5 {
            let t = Instant::now();
            let p = requests::from_result_json(file.as_bytes()).unwrap_or_default();
            read.push(t.elapsed().as_secs_f64() * 1e3);
            let t = Instant::now();
            let r = Requests::of(&p, 7);
            keep.push(t.elapsed().as_secs_f64() * 1e3);
            stored = serde_json::to_vec(&r).map(|v| v.len()).unwrap_or(0);
            let t = Instant::now();
            let back = r.values().map(|v| v.len()).unwrap_or(0);
            unpack.push(t.elapsed().as_secs_f64() * 1e3);
            assert!(back > 0);
        }
        let _ = writeln!(
            o,
            "{n:>9} {:>10.1} {:>10.1} {:>10.1} {:>12} {:>10.2}",
            file.len() as f64 / 1e6,
            median_ms(read),
            median_ms(keep),
            stored,
            median_ms(unpack)
        );
    }
    o
}
