//! Numbers you can defend: per variant and metric the median of its repeats with a
//! confidence interval, and a verdict on each comparison by asv's rule — a change counts
//! only if it is larger than a minimum effect **and** a statistical test says it is not
//! noise at α.
//!
//! The test, in order of preference:
//! 1. **Mann–Whitney U** (exact, [`rank`]) when both sides have repeats enough for it to
//!    ever reach α (3 vs 3 cannot: its smallest two-sided p is 0.1).
//! 2. The box's **calibrated noise band** ([`band`]) for one repeat a side, or too few for
//!    the rank test: a normal test on ln(ratio of medians) against the spread measured on
//!    identical runs of the same metric and model size.
//! 3. Neither: with repeats, `inconclusive`; with a single run, the old ±2% rule, labelled
//!    "threshold uncalibrated" wherever it is shown.
//!
//! Maths comes from `statrs` (Binomial for the median's interval, Normal for the band and
//! the large-sample U approximation): a maintained crate with tested special functions,
//! built here without its default features so it brings no linear-algebra stack. The exact
//! U distribution is counting, done in [`rank`]. Pure: numbers in, numbers out.

pub mod band;
pub mod median;
pub mod noise;
pub mod power;
pub mod rank;

pub use band::{Band, Calibration};
pub use median::{summarize, Summary};

use crate::metric;
use serde::{Deserialize, Serialize};

/// What decides a verdict; from the CLI or defaults.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Config {
    /// Significance level of the test.
    pub alpha: f64,
    /// The smallest improvement, in percent, that counts at all (asv's factor).
    pub min_effect_pct: f64,
    /// The old rule's threshold, used only without repeats or calibration, and labelled.
    pub uncalibrated_pct: f64,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            alpha: 0.05,
            min_effect_pct: 2.0,
            uncalibrated_pct: 2.0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Better,
    Worse,
    NoChange,
    /// Too few repeats for any test to reach α, and no calibrated band to fall back on.
    Inconclusive,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Better => "better",
            Verdict::Worse => "worse",
            Verdict::NoChange => "no_change",
            Verdict::Inconclusive => "inconclusive",
        }
    }
    /// For people: "no change" rather than the identifier.
    pub fn words(self) -> &'static str {
        match self {
            Verdict::NoChange => "no change",
            v => v.as_str(),
        }
    }
}

/// How the verdict was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Exact Mann–Whitney U on the repeats.
    RankTest,
    /// The box's calibrated noise band.
    NoiseBand,
    /// Neither was possible: the ±threshold rule of old, labelled "threshold uncalibrated".
    Uncalibrated,
    /// Repeats too few for the rank test and no band: no verdict either way.
    TooFewRepeats,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::RankTest => "rank_test",
            Method::NoiseBand => "noise_band",
            Method::Uncalibrated => "threshold uncalibrated",
            Method::TooFewRepeats => "too_few_repeats",
        }
    }
}

/// One metric compared between a candidate and a reference.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Compared {
    pub metric: String,
    /// Improvement of the candidate's median over the reference's, percent, positive =
    /// better (see [`metric::improvement_pct`]).
    pub improvement_pct: f64,
    /// Interval on the improvement (percent), when there is one.
    pub ci_low_pct: Option<f64>,
    pub ci_high_pct: Option<f64>,
    pub p_value: Option<f64>,
    pub verdict: Verdict,
    pub method: Method,
    pub candidate: Summary,
    pub reference: Summary,
}

impl Compared {
    /// "faster 4.3%" and the like.
    pub fn delta_label(&self) -> String {
        metric::delta_label(&self.metric, self.improvement_pct)
    }
}

/// The improvement a ratio candidate/reference stands for, for this metric.
fn improvement_of_ratio(key: &str, ratio: f64) -> Option<f64> {
    metric::improvement_pct(key, ratio, 1.0)
}

/// Compare the candidate's repeats with the reference's on metric `key`. `band` is the
/// calibrated noise of one run of this metric on this box and model size, if known. None
/// when a side has no value or the metric has no better direction.
pub fn compare(
    key: &str,
    candidate: &[f64],
    reference: &[f64],
    band: Option<&Band>,
    cfg: &Config,
) -> Option<Compared> {
    let level = 1.0 - cfg.alpha;
    let c = summarize(candidate, level)?;
    let r = summarize(reference, level)?;
    let improvement = metric::improvement_pct(key, c.median, r.median)?;
    let ratio_ci = |lo: f64, hi: f64| -> (Option<f64>, Option<f64>) {
        let a = improvement_of_ratio(key, lo);
        let b = improvement_of_ratio(key, hi);
        match (a, b) {
            (Some(a), Some(b)) => (Some(a.min(b)), Some(a.max(b))),
            _ => (None, None),
        }
    };
    let positive = c.median > 0.0 && r.median > 0.0;
    let log_ratio = positive.then(|| (c.median / r.median).ln());
    let band_sd = band
        .filter(|b| b.sigma > 0.0)
        .map(|b| band::sd_of_log_ratio(b.sigma, c.n, r.n));
    // The interval on Δ: from the repeats' own intervals when both sides have some (the
    // pessimistic pairing of bounds), else from the band.
    let (ci_low_pct, ci_high_pct) = if c.n >= 2 && r.n >= 2 && r.ci_low > 0.0 && r.ci_high > 0.0 {
        ratio_ci(c.ci_low / r.ci_high, c.ci_high / r.ci_low)
    } else if let (Some(sd), Some(lr)) = (band_sd, log_ratio) {
        let z = band::z_of(level);
        ratio_ci((lr - z * sd).exp(), (lr + z * sd).exp())
    } else {
        (None, None)
    };
    let rank_can_pass = c.n >= 2 && r.n >= 2 && rank::min_p(c.n, r.n) <= cfg.alpha;
    let (p_value, method) = if rank_can_pass {
        (rank::mann_whitney_p(candidate, reference), Method::RankTest)
    } else if let (Some(sd), Some(lr)) = (band_sd, log_ratio) {
        (band::p_value(lr, sd), Method::NoiseBand)
    } else if c.n >= 2 && r.n >= 2 {
        (
            rank::mann_whitney_p(candidate, reference),
            Method::TooFewRepeats,
        )
    } else {
        (None, Method::Uncalibrated)
    };
    let direction = if improvement > 0.0 {
        Verdict::Better
    } else {
        Verdict::Worse
    };
    let verdict = match method {
        Method::RankTest | Method::NoiseBand => {
            let significant = p_value.is_some_and(|p| p <= cfg.alpha);
            if significant && improvement.abs() >= cfg.min_effect_pct {
                direction
            } else {
                Verdict::NoChange
            }
        }
        Method::TooFewRepeats => Verdict::Inconclusive,
        Method::Uncalibrated => {
            if improvement.abs() > cfg.uncalibrated_pct {
                direction
            } else {
                Verdict::NoChange
            }
        }
    };
    Some(Compared {
        metric: key.to_string(),
        improvement_pct: improvement,
        ci_low_pct,
        ci_high_pct,
        p_value,
        verdict,
        method,
        candidate: c,
        reference: r,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: &str = "output_throughput_tok_s";

    fn band(sigma: f64) -> Band {
        Band {
            sigma,
            groups: 10,
            runs: 50,
            source: "calibrate".into(),
        }
    }

    #[test]
    fn clear_effect_with_repeats_is_significant_both_ways() {
        let base = [100.0, 101.0, 99.0, 100.5, 99.5];
        let up = [110.0, 111.0, 109.0, 110.5, 109.5];
        let c = compare(K, &up, &base, None, &Config::default()).unwrap();
        assert_eq!((c.verdict, c.method), (Verdict::Better, Method::RankTest));
        assert!(c.p_value.unwrap() < 0.01);
        assert!(c.ci_low_pct.unwrap() > 0.0 && c.ci_high_pct.unwrap() > c.ci_low_pct.unwrap());
        // A latency that rose by the same factor is worse, not better.
        let c = compare("latency_avg_s", &up, &base, None, &Config::default()).unwrap();
        assert_eq!(c.verdict, Verdict::Worse);
        assert_eq!(c.delta_label(), "slower 10.0%");
    }

    #[test]
    fn significant_but_tiny_is_no_change() {
        // Perfectly separated, but only 0.5% apart: below the minimum effect.
        let base = [100.0, 100.1, 100.2, 100.3, 100.4];
        let up = [100.6, 100.7, 100.8, 100.9, 101.0];
        let c = compare(K, &up, &base, None, &Config::default()).unwrap();
        assert!(c.p_value.unwrap() <= 0.05);
        assert_eq!(c.verdict, Verdict::NoChange);
    }

    #[test]
    fn three_repeats_without_a_band_are_inconclusive_and_with_one_decide() {
        let base = [100.0, 101.0, 99.0];
        let up = [110.0, 111.0, 109.0];
        let c = compare(K, &up, &base, None, &Config::default()).unwrap();
        assert_eq!(
            (c.verdict, c.method),
            (Verdict::Inconclusive, Method::TooFewRepeats)
        );
        let c = compare(K, &up, &base, Some(&band(0.02)), &Config::default()).unwrap();
        assert_eq!((c.verdict, c.method), (Verdict::Better, Method::NoiseBand));
    }

    #[test]
    fn single_runs_use_the_band_or_say_uncalibrated() {
        let cfg = Config::default();
        let c = compare(K, &[103.0], &[100.0], None, &cfg).unwrap();
        assert_eq!(
            (c.verdict, c.method),
            (Verdict::Better, Method::Uncalibrated)
        );
        assert_eq!(c.p_value, None);
        // 3% on a box whose runs wobble 3% is noise.
        let c = compare(K, &[103.0], &[100.0], Some(&band(0.03)), &cfg).unwrap();
        assert_eq!(
            (c.verdict, c.method),
            (Verdict::NoChange, Method::NoiseBand)
        );
        // ... and on a box that wobbles 0.5% it is not.
        let c = compare(K, &[103.0], &[100.0], Some(&band(0.005)), &cfg).unwrap();
        assert_eq!(c.verdict, Verdict::Better);
        assert!(c.ci_low_pct.unwrap() > 0.0);
    }

    #[test]
    fn nothing_to_compare() {
        let cfg = Config::default();
        assert!(compare(K, &[], &[1.0], None, &cfg).is_none());
        assert!(compare(K, &[1.0], &[0.0], None, &cfg).is_none());
        assert!(compare("total_output_tokens", &[1.0], &[2.0], None, &cfg).is_none());
        assert!(compare(K, &[f64::NAN], &[1.0], None, &cfg).is_none());
    }
}
