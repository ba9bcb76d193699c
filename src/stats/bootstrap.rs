//! Percentile-bootstrap intervals for a quantile of per-request latencies: resample the
//! requests with replacement, take the quantile each time, and read the interval off the
//! resamples' spread (Efron) — each resample's quantile drawn directly as an order
//! statistic ([`quantile_interval_sorted`]). No assumption about the latencies' shape, which is skewed
//! and often bimodal (prefill queueing). Deterministic: the resampling is seeded, so the
//! same requests give the same interval on every read. Pure.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// A quantile with its interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub estimate: f64,
    pub low: f64,
    pub high: f64,
    /// The interval's level, e.g. 0.95.
    pub level: f64,
}

/// The `q` quantile (0..=1) of sorted values, linearly interpolated (numpy's default,
/// which vLLM's client uses for its P99 line). None when empty.
pub(crate) fn quantile_sorted(v: &[f64], q: f64) -> Option<f64> {
    let n = v.len();
    if n == 0 {
        return None;
    }
    let pos = q.clamp(0.0, 1.0) * (n - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    Some(v[lo] + (v[hi] - v[lo]) * (pos - lo as f64))
}

/// Resamples drawn: enough for the 2.5% and 97.5% points to move by under a tenth of the
/// interval between reads of different seeds.
pub const RESAMPLES: usize = 1000;

#[cfg(test)]
/// The `q` quantile of `values` with its `level` percentile-bootstrap interval. None with
/// fewer than two finite values (a single request has no spread to resample).
pub(crate) fn quantile_interval(values: &[f64], q: f64, level: f64, seed: u64) -> Option<Interval> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    quantile_interval_sorted(&v, n, q, level, seed)
}

/// As [`quantile_interval`] for `n` values of which `sorted` is the distribution, kept
/// whole or thinned evenly (`requests::bound`): the resamples are of size `n`, so a run of
/// 10,000 requests kept as 4,096 values gets the interval of 10,000.
///
/// Without drawing a resample: the q quantile of n draws from the empirical distribution
/// is its k-th order statistic, and the k-th of n uniforms is Beta(k, n + 1 − k); so each
/// resample's quantile is the empirical quantile at a Beta variate (drawn by inverting its
/// CDF). The percentile bootstrap exactly, at a cost that does not grow with n.
pub(crate) fn quantile_interval_sorted(
    sorted: &[f64],
    n: usize,
    q: f64,
    level: f64,
    seed: u64,
) -> Option<Interval> {
    use statrs::distribution::{Beta, ContinuousCDF};
    if sorted.len() < 2 || n < 2 {
        return None;
    }
    let q = q.clamp(0.0, 1.0);
    let estimate = quantile_sorted(sorted, q)?;
    let k = ((q * (n - 1) as f64).round() as usize + 1).clamp(1, n);
    let order = Beta::new(k as f64, (n + 1 - k) as f64).ok()?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut stats: Vec<f64> = (0..RESAMPLES)
        .filter_map(|_| {
            let u: f64 = rng.random_range(1e-12..1.0 - 1e-12);
            quantile_sorted(sorted, order.inverse_cdf(u))
        })
        .collect();
    stats.sort_by(f64::total_cmp);
    let tail = (1.0 - level.clamp(0.0, 1.0)) / 2.0;
    Some(Interval {
        estimate,
        low: quantile_sorted(&stats, tail)?.min(estimate),
        high: quantile_sorted(&stats, 1.0 - tail)?.max(estimate),
        level,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_as_numpy_does() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile_sorted(&v, 0.5), Some(2.5));
        assert_eq!(quantile_sorted(&v, 0.99), Some(3.0 + 0.97));
        assert_eq!(quantile_sorted(&[], 0.5), None);
    }

    #[test]
    fn the_interval_covers_the_truth_about_as_often_as_it_says() {
        // Exponential latencies (median ln2 ≈ 0.693), 400 requests a run, 200 runs: the
        // 95% interval on the median should cover it in roughly 95% of runs.
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let truth = std::f64::consts::LN_2;
        let mut covered = 0;
        for run in 0..200u64 {
            let v: Vec<f64> = (0..400)
                .map(|_| -(1.0 - rng.random::<f64>()).ln())
                .collect();
            let i = quantile_interval(&v, 0.5, 0.95, run).unwrap();
            assert!(i.low <= i.estimate && i.estimate <= i.high, "{i:?}");
            if i.low <= truth && truth <= i.high {
                covered += 1;
            }
        }
        assert!((180..=199).contains(&covered), "covered {covered}/200");
    }

    /// The order-statistic draw is the bootstrap: against resampling by hand (2,000
    /// resamples of 300 skewed values) the interval's ends agree within a few percent, and
    /// 300 values thinned to 100 keep the interval of 300.
    #[test]
    fn the_direct_draw_agrees_with_resampling_by_hand() {
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let mut v: Vec<f64> = (0..300)
            .map(|_| -(1.0 - rng.random::<f64>()).ln())
            .collect();
        v.sort_by(f64::total_cmp);
        for q in [0.5, 0.9] {
            let mut by_hand: Vec<f64> = (0..2000)
                .map(|_| {
                    let mut r: Vec<f64> = (0..v.len())
                        .map(|_| v[rng.random_range(0..v.len())])
                        .collect();
                    r.sort_by(f64::total_cmp);
                    quantile_sorted(&r, q).unwrap()
                })
                .collect();
            by_hand.sort_by(f64::total_cmp);
            let (lo, hi) = (
                quantile_sorted(&by_hand, 0.025).unwrap(),
                quantile_sorted(&by_hand, 0.975).unwrap(),
            );
            let i = quantile_interval(&v, q, 0.95, 1).unwrap();
            let width = hi - lo;
            assert!(
                (i.low - lo).abs() < 0.15 * width && (i.high - hi).abs() < 0.15 * width,
                "q {q}: {i:?} vs [{lo}, {hi}]"
            );
            let thinned: Vec<f64> = (0..100).map(|j| v[j * 299 / 99]).collect();
            let t = quantile_interval_sorted(&thinned, v.len(), q, 0.95, 1).unwrap();
            assert!(
                (t.high - t.low - (i.high - i.low)).abs() < 0.25 * width,
                "{t:?} vs {i:?}"
            );
        }
    }

    #[test]
    fn p99_is_wider_than_the_median_and_reads_are_stable() {
        let v: Vec<f64> = (1..=500).map(|i| (i as f64).sqrt()).collect();
        let med = quantile_interval(&v, 0.5, 0.95, 1).unwrap();
        let p99 = quantile_interval(&v, 0.99, 0.95, 1).unwrap();
        assert!(p99.high - p99.low > 0.0);
        assert!(p99.estimate > med.estimate);
        assert_eq!(quantile_interval(&v, 0.99, 0.95, 1), Some(p99));
        assert_eq!(quantile_interval(&[1.0], 0.5, 0.95, 1), None);
    }
}
