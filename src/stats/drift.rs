//! Drift of the box over a night: one commit and variant benchmarked again at the start, at
//! intervals and at the end (Chromium's dashboard keeps such a reference build beside the
//! tested ones). Every reference run is judged against the night's first: a move beyond the
//! noise band of two single runs means the box changed between the last reference that
//! agreed and this one, and a comparison whose runs lie on both sides of that stretch
//! compares two different boxes. Pure.

use crate::metric;
use serde::{Deserialize, Serialize};

/// One reference run's result.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub key: String,
    pub started_ms: u64,
    pub value: f64,
}

/// A drift found: between the reference run at `from_ms` (the last that agreed with the
/// first) and the one at `to_ms` (the first that did not).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shift {
    pub metric: String,
    /// The reference run that moved.
    pub key: String,
    pub from_ms: u64,
    pub to_ms: u64,
    /// Its improvement over the night's first, percent (negative: slower).
    pub delta_pct: f64,
    /// The move allowed as noise, percent (± this).
    pub band_pct: f64,
    /// False when no band was known and the fixed threshold judged.
    pub calibrated: bool,
}

impl Shift {
    /// "reference …/ref3 slower 6.1% than the night's first (band ±4.3%)".
    pub fn describe(&self) -> String {
        format!(
            "reference {} {} than the night's first (noise band ±{:.1}%{})",
            self.key,
            metric::delta_label(&self.metric, self.delta_pct),
            self.band_pct,
            if self.calibrated {
                ""
            } else {
                ", uncalibrated"
            }
        )
    }

    /// Whether runs started between `first` and `last` (ms) lie on both sides of it.
    pub(crate) fn spans(&self, first: u64, last: u64) -> bool {
        first < self.to_ms && last > self.from_ms
    }
}

/// The threshold used without a band (two single runs of a 2–4% CV box differ by up to
/// about this by chance).
pub const UNCALIBRATED_PCT: f64 = 5.0;

/// The drifts in `points` (in the order they ran) on `metric`, judged with the per-run
/// noise `sigma` (ln units) where known. The first point is the night's yardstick; each
/// later one is tested at a level split over the night's references (Bonferroni), so a
/// night of many references does not cry drift by chance. A point that moved starts a
/// shift once: the next points are judged against it, so one step is one alert.
pub(crate) fn shifts(metric: &str, points: &[Point], sigma: Option<f64>, alpha: f64) -> Vec<Shift> {
    let mut out = Vec::new();
    let Some(first) = points.first() else {
        return out;
    };
    let tests = points.len().saturating_sub(1).max(1) as f64;
    let (band_pct, calibrated) = match sigma.filter(|s| *s > 0.0) {
        Some(s) => {
            let q = super::band::z_of(1.0 - alpha / tests);
            (
                ((q * s * std::f64::consts::SQRT_2).exp() - 1.0) * 100.0,
                true,
            )
        }
        None => (UNCALIBRATED_PCT, false),
    };
    let mut yardstick = first;
    let mut last_agreeing = first;
    for p in &points[1..] {
        let Some(delta) = metric::improvement_pct(metric, p.value, yardstick.value) else {
            continue;
        };
        if delta.abs() > band_pct {
            let total = metric::improvement_pct(metric, p.value, first.value).unwrap_or(delta);
            out.push(Shift {
                metric: metric.to_string(),
                key: p.key.clone(),
                from_ms: last_agreeing.started_ms,
                to_ms: p.started_ms,
                delta_pct: total,
                band_pct,
                calibrated,
            });
            yardstick = p;
        }
        last_agreeing = p;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: &str = "output_throughput_tok_s";

    fn pts(values: &[f64]) -> Vec<Point> {
        values
            .iter()
            .enumerate()
            .map(|(i, v)| Point {
                key: format!("c/baseline/ref{}", i + 1),
                started_ms: i as u64 * 7_200_000,
                value: *v,
            })
            .collect()
    }

    #[test]
    fn a_steady_box_has_no_drift_and_a_step_is_one_shift() {
        let sigma = Some(0.02);
        assert!(shifts(K, &pts(&[1000.0, 1010.0, 985.0, 1003.0]), sigma, 0.05).is_empty());
        let s = shifts(K, &pts(&[1000.0, 1004.0, 900.0, 905.0, 898.0]), sigma, 0.05);
        assert_eq!(s.len(), 1, "{s:?}");
        assert_eq!(s[0].key, "c/baseline/ref3");
        assert_eq!((s[0].from_ms, s[0].to_ms), (7_200_000, 14_400_000));
        assert!((s[0].delta_pct + 10.0).abs() < 0.01, "{}", s[0].delta_pct);
        assert!(
            s[0].describe().contains("than the night's first"),
            "{}",
            s[0].describe()
        );
        // Runs from before ref2 to after ref3 were measured across it; runs after it not.
        assert!(s[0].spans(0, 15_000_000));
        assert!(!s[0].spans(15_000_000, 20_000_000));
    }

    #[test]
    fn the_band_widens_with_noise_and_without_one_the_threshold_is_said() {
        let wobbly = shifts(K, &pts(&[1000.0, 930.0]), Some(0.04), 0.05);
        assert!(
            wobbly.is_empty(),
            "7% is within two runs' noise at 4% CV: {wobbly:?}"
        );
        let s = shifts(K, &pts(&[1000.0, 930.0]), None, 0.05);
        assert_eq!(s.len(), 1);
        assert!(!s[0].calibrated && s[0].describe().contains("uncalibrated"));
        // Latency: lower is better, so a rise is "slower".
        let l = shifts("ttft_mean_ms", &pts(&[100.0, 120.0]), None, 0.05);
        assert!(l[0].delta_pct < 0.0, "{l:?}");
    }
}
