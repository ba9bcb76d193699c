//! The verdicts on a real vLLM's noise, beside the sim's model ([`super::power`]).
//!
//! `real_vllm_aa.json` holds what `scripts/real-vllm.py --aa N --aa-out FILE` measured here:
//! one vLLM release's server benchmarked N times unchanged (A/A) on this machine, each run's
//! headline metrics as nightshift's keys. Our own measurement, with its workload and box
//! written beside it; a CPU's noise, not an H100's, so it says what the statistics do on
//! noise that was really seen, not what a GPU box will show.
//!
//! False positives and power come from resampling it: a run is the metric's median times
//! exp(e), e drawn with replacement from the runs' own log deviations from their mean (so
//! the noise has the measured shape, outliers included, and no assumed distribution); the
//! band is learned from the N runs as `calibrate` would from one A/A group.

use super::{band, compare, Band, Config, Verdict};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt::Write;

const FIXTURE: &str = include_str!("real_vllm_aa.json");

/// One A/A measurement of a real vLLM.
#[derive(Debug, Clone, Deserialize)]
pub struct RealNoise {
    pub release: String,
    pub runs: usize,
    pub workload: String,
    #[serde(rename = "box")]
    pub machine: String,
    pub measured: String,
    pub metrics: BTreeMap<String, Vec<f64>>,
}

impl RealNoise {
    /// The fixture kept in the repository.
    pub fn kept() -> Result<RealNoise, serde_json::Error> {
        serde_json::from_str(FIXTURE)
    }

    /// Coefficient of variation of a metric's runs (sample standard deviation over mean).
    pub(crate) fn cv(&self, key: &str) -> Option<f64> {
        let v = self.metrics.get(key)?;
        if v.len() < 2 {
            return None;
        }
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (v.len() - 1) as f64;
        (mean > 0.0).then(|| var.sqrt() / mean)
    }

    /// The runs' log deviations from their mean log, and their median: what runs are
    /// resampled from.
    fn shape(&self, key: &str) -> Option<(f64, Vec<f64>)> {
        let v: Vec<f64> = self
            .metrics
            .get(key)?
            .iter()
            .copied()
            .filter(|x| *x > 0.0)
            .collect();
        if v.len() < 2 {
            return None;
        }
        let logs: Vec<f64> = v.iter().map(|x| x.ln()).collect();
        let mean = logs.iter().sum::<f64>() / logs.len() as f64;
        let median = super::median::median_of_sorted(&super::median::sorted(&v))?;
        Some((median, logs.iter().map(|l| l - mean).collect()))
    }

    /// The band `calibrate` would learn from these runs.
    pub fn band(&self, key: &str) -> Option<Band> {
        band::learn(&[self.metrics.get(key)?.clone()], "real vLLM A/A")
    }
}

/// `m` comparisons of `n` resampled runs a side on `key`, the candidate changed by a true
/// `effect_pct` in the metric's better direction: (share different, share better).
pub(crate) fn simulate(
    noise: &RealNoise,
    key: &str,
    cfg: &Config,
    n: usize,
    effect_pct: f64,
    m: usize,
) -> Option<(f64, f64)> {
    let (median, devs) = noise.shape(key)?;
    let band = noise.band(key);
    let better_up = crate::metric::improvement_pct(key, 2.0, 1.0)? > 0.0;
    let factor = if better_up {
        1.0 + effect_pct / 100.0
    } else {
        1.0 / (1.0 + effect_pct / 100.0)
    };
    let mut rng = ChaCha8Rng::seed_from_u64(super::noise::seed_of(&[key, &n.to_string()]));
    let mut draw = |f: f64| -> Vec<f64> {
        (0..n)
            .map(|_| median * f * devs[rng.random_range(0..devs.len())].exp())
            .collect()
    };
    let (mut changed, mut better) = (0usize, 0usize);
    for _ in 0..m {
        let reference = draw(1.0);
        let candidate = draw(factor);
        let c = compare(key, &candidate, &reference, band.as_ref(), cfg)?;
        changed += usize::from(matches!(c.verdict, Verdict::Better | Verdict::Worse));
        better += usize::from(c.verdict == Verdict::Better);
    }
    let pct = |k: usize| k as f64 * 100.0 / m.max(1) as f64;
    Some((pct(changed), pct(better)))
}

/// The section `bench stats` prints, ending with the line the issue asks for.
pub fn report(m: usize, cfg: &Config) -> String {
    let mut o = String::new();
    let noise = match RealNoise::kept() {
        Ok(n) => n,
        Err(e) => {
            let _ = writeln!(o, "real vLLM noise: the kept fixture does not read: {e}");
            return o;
        }
    };
    let _ = writeln!(
        o,
        "\nreal vLLM A/A ({} runs of {} on {}, {}; {}):",
        noise.runs, noise.release, noise.machine, noise.measured, noise.workload
    );
    for key in ["output_throughput_tok_s", "ttft_mean_ms", "tpot_mean_ms"] {
        let (Some(cv), Some((fp, _)), Some((_, p5)), Some((_, p10))) = (
            noise.cv(key),
            simulate(&noise, key, cfg, 3, 0.0, m),
            simulate(&noise, key, cfg, 3, 5.0, m),
            simulate(&noise, key, cfg, 3, 10.0, m),
        ) else {
            continue;
        };
        let _ = writeln!(
            o,
            "  {key}: CV {:.1}%; N=3, resampled, {m} comparisons: A/A false positives {fp:.1}%, power at 5% {p5:.0}%, at 10% {p10:.0}%",
            cv * 100.0
        );
    }
    let cv = |k: &str| {
        noise
            .cv(k)
            .map_or("-".to_string(), |c| format!("{:.1}%", c * 100.0))
    };
    let _ = writeln!(
        o,
        "real vLLM noise: CV ttft {} tpot {} throughput {} ({} runs of {} on this machine)",
        cv("ttft_mean_ms"),
        cv("tpot_mean_ms"),
        cv("output_throughput_tok_s"),
        noise.runs,
        noise.release
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kept_fixture_reads_and_has_the_headlines() {
        let n = RealNoise::kept().unwrap();
        assert!(n.runs >= 5, "{n:?}");
        for k in ["output_throughput_tok_s", "ttft_mean_ms", "tpot_mean_ms"] {
            assert_eq!(n.metrics[k].len(), n.runs, "{k}");
            let cv = n.cv(k).unwrap();
            assert!(cv > 0.0 && cv < 1.0, "{k}: {cv}");
        }
    }

    #[test]
    fn on_real_noise_aa_stays_within_alpha_and_power_grows_with_the_effect() {
        let n = RealNoise::kept().unwrap();
        let cfg = Config::default();
        let m = 1500;
        let tol = 3.0 * (cfg.alpha * (1.0 - cfg.alpha) / m as f64).sqrt() * 100.0;
        let (fp, _) = simulate(&n, "output_throughput_tok_s", &cfg, 3, 0.0, m).unwrap();
        assert!(fp <= cfg.alpha * 100.0 + tol, "{fp}");
        let (_, p5) = simulate(&n, "output_throughput_tok_s", &cfg, 5, 5.0, 400).unwrap();
        let (_, p30) = simulate(&n, "output_throughput_tok_s", &cfg, 5, 30.0, 400).unwrap();
        assert!(p30 > p5, "{p30} vs {p5}");
    }

    #[test]
    fn the_report_ends_with_the_line() {
        let out = report(50, &Config::default());
        let last = out.lines().last().unwrap();
        assert!(
            last.starts_with("real vLLM noise: CV ttft ") && last.contains(" on this machine)"),
            "{last}"
        );
    }
}
