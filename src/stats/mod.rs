//! Numbers you can defend: per variant and metric the median of its repeats with a
//! confidence interval, and a verdict of three kinds on each comparison, Pinpoint's way:
//! **different** (better or worse), **same**, or **unknown**.
//!
//! - *Different*: a test says the change is not noise at α **and** it is larger than the
//!   minimum effect (asv's rule).
//! - *Same*: the interval on the change lies inside ±`same_within_pct`: the comparison had
//!   the power to see a change that large and saw none. A p-value above α alone is never
//!   "same" (three noisy runs a side see nothing and prove nothing).
//! - *Unknown*: neither; more repeats may decide it (what adaptive repeats spend on).
//!
//! The test, in order of preference:
//! 1. **Rank tests** when both sides have repeats enough to ever reach α: the smaller p of
//!    exact Mann–Whitney U ([`rank`], a shift of location) and exact two-sample
//!    Kolmogorov–Smirnov ([`ks`], any change of the distribution, spread included),
//!    doubled (Bonferroni for taking the smaller of two) so that A/A stays within α.
//! 2. The box's **calibrated noise band** ([`band`]) for one repeat a side, or too few for
//!    the rank tests: a normal test on ln(ratio of medians) against the spread measured on
//!    identical runs of the same metric and model size (or the runs' own spread, if wider).
//! 3. Neither: with repeats, `unknown`; with a single run a side, the old ±threshold rule,
//!    labelled "threshold uncalibrated" wherever it is shown (no test stands behind it).
//!
//! Maths comes from `statrs` (Binomial for the median's interval, Normal for the band and
//! the large-sample U approximation): a maintained crate with tested special functions,
//! built here without its default features so it brings no linear-algebra stack. The exact
//! null distributions are counting, done in [`rank`] and [`ks`]. Pure: numbers in, numbers
//! out.

pub mod adaptive;
pub mod band;
pub mod bootstrap;
pub mod drift;
pub mod ks;
pub mod median;
pub mod noise;
pub mod power;
pub mod rank;
pub mod real;

pub use band::{Band, Calibration};
pub(crate) use median::summarize;
pub use median::Summary;

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
    /// "Same" only when the interval on the change lies inside ± this, percent.
    #[serde(default = "default_same_within")]
    pub same_within_pct: f64,
}

fn default_same_within() -> f64 {
    5.0
}

impl Default for Config {
    fn default() -> Config {
        Config {
            alpha: 0.05,
            min_effect_pct: 2.0,
            uncalibrated_pct: 2.0,
            same_within_pct: default_same_within(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Different, and better.
    Better,
    /// Different, and worse.
    Worse,
    /// Same: the interval on the change lies inside ±`same_within_pct`.
    NoChange,
    /// Unknown: neither different nor shown the same; more repeats may decide it.
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
    /// For people, Pinpoint's three kinds with a difference's direction: "better" or
    /// "worse" (different), "same", "unknown".
    pub fn words(self) -> &'static str {
        match self {
            Verdict::Better => "better",
            Verdict::Worse => "worse",
            Verdict::NoChange => "same",
            Verdict::Inconclusive => "unknown",
        }
    }
    /// The verdict's kind, Pinpoint's three: different / same / unknown.
    pub fn kind(self) -> &'static str {
        match self {
            Verdict::Better | Verdict::Worse => "different",
            Verdict::NoChange => "same",
            Verdict::Inconclusive => "unknown",
        }
    }
    /// Different or same: nothing more to learn from repeats.
    pub fn decided(self) -> bool {
        self != Verdict::Inconclusive
    }
}

/// How the verdict was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// The smaller p of exact Mann–Whitney U and exact Kolmogorov–Smirnov on the repeats,
    /// doubled.
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
    pub(crate) fn delta_label(&self) -> String {
        metric::delta_label(&self.metric, self.improvement_pct)
    }
}

/// The improvement a ratio candidate/reference stands for, for this metric.
fn improvement_of_ratio(key: &str, ratio: f64) -> Option<f64> {
    metric::improvement_pct(key, ratio, 1.0)
}

/// The two rank tests' combined p: the smaller, doubled (capped at 1).
fn rank_p(a: &[f64], b: &[f64]) -> Option<f64> {
    let mw = rank::mann_whitney_p(a, b)?;
    let ks = ks::ks_p(a, b)?;
    Some((2.0 * mw.min(ks)).min(1.0))
}

/// The smallest combined p samples of these sizes can reach.
fn rank_min_p(n_a: usize, n_b: usize) -> f64 {
    (2.0 * rank::min_p(n_a, n_b).min(ks::min_p(n_a, n_b))).min(1.0)
}

/// The runs' own spread when it is significantly wider than the band's `sigma` (a box
/// busier tonight than when it was calibrated): the pooled standard deviation of ln(value)
/// within each side, if a χ² test on it rejects "no wider than the band" at 5%. Otherwise
/// None and the band stands (a few runs' sample spread alone is too noisy to overrule it:
/// taking the larger of the two would make every verdict needlessly timid).
fn wider_than_band(a: &[f64], b: &[f64], sigma: f64) -> Option<f64> {
    use statrs::distribution::{ChiSquared, ContinuousCDF};
    let logs = |v: &[f64]| -> Option<Vec<f64>> {
        let l: Vec<f64> = v.iter().filter(|x| **x > 0.0).map(|x| x.ln()).collect();
        (!l.is_empty()).then_some(l)
    };
    let (la, lb) = (logs(a)?, logs(b)?);
    let df = (la.len() + lb.len()).checked_sub(2).filter(|d| *d > 0)? as f64;
    let ss = |l: &[f64]| {
        let m = l.iter().sum::<f64>() / l.len() as f64;
        l.iter().map(|x| (x - m).powi(2)).sum::<f64>()
    };
    let ss = ss(&la) + ss(&lb);
    let critical = ChiSquared::new(df).ok()?.inverse_cdf(0.95);
    (ss / (sigma * sigma) > critical).then(|| (ss / df).sqrt())
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
    // The shift the band judges: Hodges–Lehmann on ln(value), robust to an outlier run and
    // far more efficient than the medians' ratio (see `band::sd_of_log_ratio`).
    let logs = |v: &[f64]| -> Vec<f64> {
        v.iter()
            .filter(|x| x.is_finite() && **x > 0.0)
            .map(|x| x.ln())
            .collect()
    };
    let positive = c.median > 0.0 && r.median > 0.0;
    let log_ratio = positive
        .then(|| median::hodges_lehmann(&logs(candidate), &logs(reference)))
        .flatten();
    // The noise of one run: the band's, or the runs' own when they wobble more than the
    // band says (a box busier tonight than when it was calibrated).
    let sigma = band
        .filter(|b| b.sigma > 0.0)
        .map(|b| wider_than_band(candidate, reference, b.sigma).unwrap_or(b.sigma));
    let band_sd = sigma.map(|s| band::sd_of_log_ratio(s, c.n, r.n));
    let dof = band.map_or(1, Band::dof);
    // The interval on Δ: from the band where there is one (it knows the box's noise,
    // which three repeats cannot), else from the repeats' own median intervals (the
    // pessimistic pairing of bounds).
    let (ci_low_pct, ci_high_pct) = if let (Some(sd), Some(lr)) = (band_sd, log_ratio) {
        let q = band::t_of(level, dof);
        ratio_ci((lr - q * sd).exp(), (lr + q * sd).exp())
    } else if c.n >= 2 && r.n >= 2 && r.ci_low > 0.0 && r.ci_high > 0.0 {
        ratio_ci(c.ci_low / r.ci_high, c.ci_high / r.ci_low)
    } else {
        (None, None)
    };
    let rank_can_pass = c.n >= 2 && r.n >= 2 && rank_min_p(c.n, r.n) <= cfg.alpha;
    let ks_can_pass = c.n >= 2 && r.n >= 2 && 2.0 * ks::min_p(c.n, r.n) <= cfg.alpha;
    let (p_value, method) = if let (Some(sd), Some(lr)) = (band_sd, log_ratio) {
        // With a band, its t-test judges the shift: it knows the box's noise, which a few
        // repeats' ranks cannot (at 5 a side the rank tests decided 20% of true 5% changes,
        // the band 44%). Where the repeats are enough for Kolmogorov–Smirnov, it watches
        // the shape too (a change of spread alone), the two p's Bonferroni-combined.
        let shift = band::t_p_value(lr, sd, dof);
        let p = match (
            shift,
            ks_can_pass
                .then(|| ks::ks_p(candidate, reference))
                .flatten(),
        ) {
            (Some(s), Some(k)) => Some((2.0 * s.min(k)).min(1.0)),
            (s, _) => s,
        };
        (p, Method::NoiseBand)
    } else if rank_can_pass {
        (rank_p(candidate, reference), Method::RankTest)
    } else if c.n >= 2 && r.n >= 2 {
        (rank_p(candidate, reference), Method::TooFewRepeats)
    } else {
        (None, Method::Uncalibrated)
    };
    let direction = if improvement > 0.0 {
        Verdict::Better
    } else {
        Verdict::Worse
    };
    // "Same" needs an interval, and one whose coverage is what it claims: a band's, or
    // repeats enough for the order-statistic interval to reach the level.
    let interval_holds = band_sd.is_some() || (c.ci_level >= level && r.ci_level >= level);
    let same = interval_holds
        && matches!((ci_low_pct, ci_high_pct), (Some(lo), Some(hi))
            if lo > -cfg.same_within_pct && hi < cfg.same_within_pct);
    let verdict = match method {
        Method::RankTest | Method::NoiseBand => {
            let significant = p_value.is_some_and(|p| p <= cfg.alpha);
            if significant && improvement.abs() >= cfg.min_effect_pct {
                direction
            } else if same {
                Verdict::NoChange
            } else {
                Verdict::Inconclusive
            }
        }
        Method::TooFewRepeats => Verdict::Inconclusive,
        // The operator's old ±threshold rule, shown as "threshold uncalibrated" wherever
        // it is: a single run a side with no band has no test to give.
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
        assert!(c.p_value.unwrap() < 0.02);
        assert!(c.ci_low_pct.unwrap() > 0.0 && c.ci_high_pct.unwrap() > c.ci_low_pct.unwrap());
        // A latency that rose by the same factor is worse, not better.
        let c = compare("latency_avg_s", &up, &base, None, &Config::default()).unwrap();
        assert_eq!(c.verdict, Verdict::Worse);
        assert_eq!(c.delta_label(), "slower 10.0%");
    }

    #[test]
    fn significant_but_tiny_is_no_change_once_the_interval_holds() {
        // Perfectly separated, but only 0.5% apart: below the minimum effect. Five a side
        // give no 95% interval on a median (order statistics reach 93.8%): unknown.
        let base = [100.0, 100.1, 100.2, 100.3, 100.4];
        let up = [100.6, 100.7, 100.8, 100.9, 101.0];
        let c = compare(K, &up, &base, None, &Config::default()).unwrap();
        assert!(c.p_value.unwrap() <= 0.05);
        assert_eq!(c.verdict, Verdict::Inconclusive);
        // Eight a side do: the same.
        let base = [100.0, 100.1, 100.2, 100.3, 100.4, 100.05, 100.15, 100.25];
        let up: Vec<f64> = base.iter().map(|x| x + 0.6).collect();
        let c = compare(K, &up, &base, None, &Config::default()).unwrap();
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
        // No band, one run a side: the old rule, labelled.
        let c = compare(K, &[103.0], &[100.0], None, &cfg).unwrap();
        assert_eq!(
            (c.verdict, c.method),
            (Verdict::Better, Method::Uncalibrated)
        );
        assert_eq!(c.p_value, None);
        // 3% on a box whose runs wobble 3% is neither a change nor shown to be none.
        let c = compare(K, &[103.0], &[100.0], Some(&band(0.03)), &cfg).unwrap();
        assert_eq!(
            (c.verdict, c.method),
            (Verdict::Inconclusive, Method::NoiseBand)
        );
        // ... on a box that wobbles 0.5% it is a change ...
        let c = compare(K, &[103.0], &[100.0], Some(&band(0.005)), &cfg).unwrap();
        assert_eq!(c.verdict, Verdict::Better);
        assert!(c.ci_low_pct.unwrap() > 0.0);
        // ... and 0.5% there is the same: the interval lies inside ±5%.
        let c = compare(K, &[100.5], &[100.0], Some(&band(0.005)), &cfg).unwrap();
        assert_eq!((c.verdict, c.verdict.kind()), (Verdict::NoChange, "same"));
    }

    #[test]
    fn same_is_said_only_with_the_power_to_say_it() {
        let cfg = Config::default();
        // Five noisy repeats a side, medians 1% apart: nothing significant, but the runs
        // swing ±15%, so a 5% change could hide there: unknown, never "same".
        let base = [85.0, 100.0, 115.0, 92.0, 108.0];
        let cand = [86.0, 101.0, 116.0, 93.0, 109.0];
        let c = compare(K, &cand, &base, None, &cfg).unwrap();
        assert_eq!(c.method, Method::RankTest);
        assert!(c.p_value.unwrap() > cfg.alpha);
        assert_eq!(c.verdict, Verdict::Inconclusive);
        // The same medians from tight runs (eight a side: an interval at 95%) are the same.
        let base = [99.8, 100.0, 100.2, 99.9, 100.1, 100.0, 99.95, 100.05];
        let cand: Vec<f64> = base.iter().map(|x| x * 1.01).rev().collect();
        let c = compare(K, &cand, &base, None, &cfg).unwrap();
        assert_eq!(c.verdict, Verdict::NoChange, "{c:?}");
        // A band narrower than tonight's runs (0.2% against ±20%) is overruled by their own
        // spread.
        let wide = [80.0, 120.0, 95.0, 105.0];
        let c = compare(
            K,
            &[100.0, 100.0, 100.0, 100.0],
            &wide,
            Some(&band(0.002)),
            &cfg,
        );
        assert_eq!(c.unwrap().verdict, Verdict::Inconclusive);
    }

    #[test]
    fn a_change_of_spread_alone_is_different() {
        // Same median; the candidate's runs swing ±10% where the reference's hold ±0.2%
        // (a new stall hitting half the runs one way or the other).
        let base: Vec<f64> = (0..20).map(|i| 99.8 + (i % 5) as f64 * 0.1).collect();
        let cand: Vec<f64> = (0..20)
            .map(|i| {
                if i % 2 == 0 {
                    90.0 - (i % 7) as f64
                } else {
                    110.0 + (i % 7) as f64
                }
            })
            .collect();
        let mw = rank::mann_whitney_p(&cand, &base).unwrap();
        let c = compare(K, &cand, &base, None, &Config::default()).unwrap();
        assert!(mw > 0.5, "MW sees no shift: {mw}");
        assert!(c.p_value.unwrap() <= 0.05, "{}", c.p_value.unwrap());
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
