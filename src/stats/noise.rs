//! Run-to-run noise as a real box shows it, so that the statistics have something honest
//! to work on: per box a few percent coefficient of variation on throughput, more on the
//! means of latencies and more again on p99; a slow drift over the night; now and then an
//! outlier (a neighbour's job, a thermal throttle); and generated-token totals that vary
//! from run to run as vLLM's serving client's do. Everything is a pure function of seeds,
//! so a night replays exactly. `nightshift bench stats` draws from the same functions.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sha2::{Digest, Sha256};

/// How one box behaves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoxNoise {
    /// Coefficient of variation of throughput (fraction).
    pub cv_throughput: f64,
    /// Of mean latencies (TTFT/TPOT/ITL mean, latency runs).
    pub cv_latency: f64,
    /// Of p99 latencies.
    pub cv_tail: f64,
    /// Of generated-token totals.
    pub cv_tokens: f64,
    /// Amplitude of the slow drift over the night (fraction) and its period in runs.
    pub drift: f64,
    pub drift_period: f64,
    pub drift_phase: f64,
    /// Probability of an outlier run and how much it costs (fraction of throughput).
    pub outlier_p: f64,
    pub outlier_cost: f64,
}

/// A stable seed from text (commit, variant): the same on every machine and every night.
pub(crate) fn seed_of(parts: &[&str]) -> u64 {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    let d = h.finalize();
    u64::from_le_bytes(d[..8].try_into().unwrap_or([0; 8]))
}

impl BoxNoise {
    /// The box with this seed: its noise levels are drawn once, within what public
    /// reports of vLLM serving show (2–4% CV on throughput, 6.9% spread over six runs).
    pub fn of(box_seed: u64) -> BoxNoise {
        let mut r = ChaCha8Rng::seed_from_u64(box_seed ^ 0x006e_6f69_7365);
        BoxNoise {
            cv_throughput: r.random_range(0.02..0.04),
            cv_latency: r.random_range(0.03..0.05),
            cv_tail: r.random_range(0.06..0.10),
            cv_tokens: r.random_range(0.005..0.015),
            drift: r.random_range(0.005..0.015),
            drift_period: r.random_range(300.0..900.0),
            drift_phase: r.random_range(0.0..std::f64::consts::TAU),
            outlier_p: 0.02,
            outlier_cost: r.random_range(0.10..0.20),
        }
    }
}

/// How often a run has failed requests (the comparability check flags them).
const FAILED_P: f64 = 0.03;

/// Multipliers for one run: each near 1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Draw {
    /// Throughput (higher is faster).
    pub throughput: f64,
    /// Mean latencies (lower is faster).
    pub latency: f64,
    /// p99 latencies.
    pub tail: f64,
    /// Generated-token total.
    pub tokens: f64,
    pub outlier: bool,
    /// Requests of the benchmark's 100 that failed (a timeout, a dropped connection):
    /// usually none.
    pub failed: u32,
}

/// A standard normal deviate (Box–Muller: sampling, not a special function).
fn gauss(r: &mut ChaCha8Rng) -> f64 {
    let u1: f64 = r.random_range(f64::EPSILON..1.0);
    let u2: f64 = r.random_range(0.0..1.0);
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// The noise of the run at position `slot` of the night (drift depends on it), from the
/// run's own seed.
pub fn draw(b: &BoxNoise, run_seed: u64, slot: u64) -> Draw {
    let mut r = ChaCha8Rng::seed_from_u64(run_seed);
    let drift = 1.0
        + b.drift * (std::f64::consts::TAU * slot as f64 / b.drift_period + b.drift_phase).sin();
    // Latency and throughput move together (a slow run is slow on both), plus their own.
    let common = gauss(&mut r);
    let own_l = gauss(&mut r);
    let own_t = gauss(&mut r);
    let outlier = r.random_range(0.0..1.0) < b.outlier_p;
    let hit = if outlier { 1.0 - b.outlier_cost } else { 1.0 };
    let lognormal = |cv: f64, z: f64| (cv * z - cv * cv / 2.0).exp();
    let throughput = drift * hit * lognormal(b.cv_throughput, common);
    let mix = |cv: f64, own: f64| lognormal(cv, 0.7 * common + 0.71 * own);
    Draw {
        throughput,
        latency: mix(b.cv_latency, own_l) / (drift * hit),
        tail: mix(b.cv_tail, own_t) / (drift * hit * hit),
        tokens: lognormal(b.cv_tokens, gauss(&mut r)),
        outlier,
        // Drawn last, so the draws before it are what they were.
        failed: if r.random_range(0.0..1.0) < FAILED_P {
            r.random_range(1..=5)
        } else {
            0
        },
    }
}

/// The true effect of a variant of a commit on speed (1.0 = as fast as the baseline): the
/// same on every night and every repeat, as a real patch's effect is.
pub(crate) fn true_effect(commit: &str, variant: &crate::model::Variant) -> f64 {
    use crate::model::Variant;
    let mut r = ChaCha8Rng::seed_from_u64(seed_of(&[commit, &variant.to_string()]));
    match variant {
        Variant::Baseline => 1.0,
        Variant::Human => 1.0 + r.random_range(-0.04..0.12),
        Variant::Agent(_) => 1.0 + r.random_range(-0.08..0.10),
    }
}

/// What a serving benchmark prints, before formatting: the one computation the sim's output
/// and `bench stats` share.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Serving {
    pub duration_s: f64,
    pub output_tokens: f64,
    pub output_throughput: f64,
    pub ttft_mean_ms: f64,
    pub ttft_p99_ms: f64,
    /// Of [`REQUESTS`].
    pub successful: u32,
    pub failed: u32,
}

/// Requests a simulated serving benchmark sends.
pub const REQUESTS: u32 = 100;

pub fn serving(effect: f64, d: &Draw) -> Serving {
    let failed = d.failed.min(REQUESTS);
    // A failed request generates nothing.
    let share = f64::from(REQUESTS - failed) / f64::from(REQUESTS);
    let output_tokens = (19_835.0 * d.tokens * share).round();
    // Work scales with the tokens generated; speed with the effect and the noise.
    let duration_s = 30.0 * (output_tokens / 19_835.0) / (effect * d.throughput);
    let ttft_mean_ms = 180.0 / effect * d.latency;
    Serving {
        duration_s,
        output_tokens,
        output_throughput: output_tokens / duration_s,
        ttft_mean_ms,
        ttft_p99_ms: ttft_mean_ms * 2.7 * d.tail / d.latency,
        successful: REQUESTS - failed,
        failed,
    }
}

/// A serving run's per-request arrays as vLLM's client writes them with `--save-detailed`
/// (`ttfts` and `itls` in seconds, `output_lens`, `errors`), consistent with
/// [`serving`]'s summary: TTFTs log-normal around its mean, a failed request with no first
/// token and its error. Only the arrays (the sim's summary is its printed block).
pub(crate) fn per_request_json(effect: f64, d: &Draw, seed: u64) -> String {
    per_request_json_of(REQUESTS, effect, d, seed)
}

/// [`per_request_json`] for a benchmark of `requests` requests (`bench requests`).
pub(crate) fn per_request_json_of(requests: u32, effect: f64, d: &Draw, seed: u64) -> String {
    let s = serving(effect, d);
    // The summary's failures, at the summary's rate.
    let successful = (u64::from(s.successful) * u64::from(requests) / u64::from(REQUESTS)) as u32;
    let mut r = ChaCha8Rng::seed_from_u64(seed ^ 0x7265_7173);
    let mut gauss = || {
        // Box–Muller: one standard normal.
        let (u, v): (f64, f64) = (r.random_range(1e-12..1.0), r.random_range(0.0..1.0));
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    };
    // The printed block's TPOT base (sim/text.rs): 12 ms at effect 1.
    let tpot_s = 0.012 / effect * d.latency;
    let (mut ttfts, mut itls, mut lens, mut errors) = (vec![], vec![], vec![], vec![]);
    for i in 0..requests {
        if i >= successful {
            ttfts.push("0.0".to_string());
            itls.push("[]".to_string());
            lens.push("0".to_string());
            errors.push("\"Server disconnected\"".to_string());
            continue;
        }
        // σ 0.4: a P99 about 2.5× the median, as the summary's P99/mean.
        let ttft = s.ttft_mean_ms / 1000.0 * (0.4 * gauss() - 0.08).exp();
        let n = (198.0 + 12.0 * gauss()).round().max(2.0) as usize;
        let gaps: Vec<String> = (1..n)
            .map(|_| format!("{:.6}", tpot_s * (0.15 * gauss()).exp()))
            .collect();
        ttfts.push(format!("{ttft:.6}"));
        itls.push(format!("[{}]", gaps.join(", ")));
        lens.push(n.to_string());
        errors.push("\"\"".to_string());
    }
    format!(
        "{{\"ttfts\": [{}], \"itls\": [{}], \"output_lens\": [{}], \"errors\": [{}]}}",
        ttfts.join(", "),
        itls.join(", "),
        lens.join(", "),
        errors.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cv(xs: &[f64]) -> f64 {
        let m = xs.iter().sum::<f64>() / xs.len() as f64;
        (xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() - 1) as f64).sqrt() / m
    }

    #[test]
    fn noise_is_deterministic_and_of_the_size_boxes_show() {
        let b = BoxNoise::of(7);
        assert_eq!(b, BoxNoise::of(7));
        assert_ne!(b, BoxNoise::of(8));
        assert_eq!(draw(&b, 1, 5), draw(&b, 1, 5));
        let draws: Vec<Draw> = (0..4000).map(|i| draw(&b, i, i)).collect();
        let t: Vec<f64> = draws.iter().map(|d| d.throughput).collect();
        let p99: Vec<f64> = draws.iter().map(|d| d.tail).collect();
        let tok: Vec<f64> = draws.iter().map(|d| d.tokens).collect();
        // A few percent on throughput (outliers and drift add to the box's CV), more on p99.
        assert!(cv(&t) > 0.02 && cv(&t) < 0.07, "{}", cv(&t));
        assert!(cv(&p99) > cv(&t), "{} vs {}", cv(&p99), cv(&t));
        assert!(cv(&tok) > 0.003 && cv(&tok) < 0.02);
        let outliers = draws.iter().filter(|d| d.outlier).count();
        assert!((40..130).contains(&outliers), "{outliers}");
    }

    #[test]
    fn drift_moves_the_night_slowly() {
        let mut b = BoxNoise::of(3);
        b.cv_throughput = 0.0;
        b.outlier_p = 0.0;
        let at = |s| draw(&b, 1, s).throughput;
        // Neighbouring runs see nearly the same drift; half a period apart, not.
        assert!((at(100) - at(101)).abs() < 0.001);
        let half = (b.drift_period / 2.0) as u64;
        let spread = (0..half)
            .map(at)
            .fold(0.0f64, |m, x| m.max((x - 1.0).abs()));
        assert!(spread > b.drift * 0.8, "{spread}");
    }

    #[test]
    fn effects_are_per_commit_and_variant_not_per_repeat() {
        use crate::model::Variant;
        assert_eq!(true_effect("c", &Variant::Baseline), 1.0);
        let h = true_effect("c", &Variant::Human);
        assert_eq!(h, true_effect("c", &Variant::Human));
        assert!((0.96..1.12).contains(&h));
        let s = serving(1.1, &draw(&BoxNoise::of(1), 1, 0));
        assert!((s.output_throughput - s.output_tokens / s.duration_s).abs() < 1e-9);
    }

    /// Now and then a run loses a few requests, and with them their tokens: what the
    /// comparability check's failed-requests flag exists for.
    #[test]
    fn some_runs_have_failed_requests() {
        let b = BoxNoise::of(3);
        let runs: Vec<Serving> = (0..4000u64)
            .map(|i| serving(1.0, &draw(&b, seed_of(&["f", &i.to_string()]), i)))
            .collect();
        let hit: Vec<&Serving> = runs.iter().filter(|s| s.failed > 0).collect();
        let share = hit.len() as f64 / runs.len() as f64;
        assert!((0.015..0.05).contains(&share), "{share}");
        assert!(runs.iter().all(|s| s.successful + s.failed == REQUESTS));
        assert!(hit.iter().all(|s| (1..=5).contains(&s.failed)));
        let tokens =
            |v: &[&Serving]| v.iter().map(|s| s.output_tokens).sum::<f64>() / v.len() as f64;
        let clean: Vec<&Serving> = runs.iter().filter(|s| s.failed == 0).collect();
        assert!(
            tokens(&hit) < tokens(&clean),
            "failed requests generate nothing"
        );
    }
}
