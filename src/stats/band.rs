//! The box's noise band: how much one run of a metric varies when nothing changed, learned
//! from repeated identical runs (an A/A calibration, or repeats already in the store), per
//! metric and model-size class. With one run per variant this is the only honest yardstick.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal};
use std::collections::BTreeMap;

/// The spread of one run: the standard deviation of ln(value) across identical runs.
/// Logs, because noise on a GPU box is multiplicative (a 3% wobble at any throughput).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Band {
    pub sigma: f64,
    /// Groups of identical runs and runs in all it was learned from.
    pub groups: usize,
    pub runs: usize,
    /// `calibrate` (an A/A run) or `learned` (repeats found in the store).
    pub source: String,
}

impl Band {
    /// The coefficient of variation it stands for, in percent (for people).
    pub(crate) fn cv_pct(&self) -> f64 {
        self.sigma * 100.0
    }
    /// Degrees of freedom of its σ: a band from five runs knows its spread only roughly,
    /// and a test against it must say so (Student's t, not the normal).
    pub(crate) fn dof(&self) -> usize {
        self.runs.saturating_sub(self.groups).max(1)
    }
}

/// Two-sided p of an observed log ratio against a band whose σ has `dof` degrees of
/// freedom: Student's t. With the 160 of a calibration it is the normal test; with the 4
/// of five A/A runs it stops outlier-prone noise from passing as a change (on a real vLLM's
/// runs, resampled, the normal test gave 13% false positives at α 5% on TPOT).
pub(crate) fn t_p_value(log_ratio: f64, sd: f64, dof: usize) -> Option<f64> {
    use statrs::distribution::StudentsT;
    if sd.is_nan() || sd <= 0.0 || !log_ratio.is_finite() {
        return None;
    }
    let t = StudentsT::new(0.0, 1.0, dof.max(1) as f64).ok()?;
    Some((2.0 * t.sf(log_ratio.abs() / sd)).min(1.0))
}

/// The quantile q with P(|T| ≤ q) = level for Student's t with `dof` degrees of freedom.
pub(crate) fn t_of(level: f64, dof: usize) -> f64 {
    use statrs::distribution::StudentsT;
    StudentsT::new(0.0, 1.0, dof.max(1) as f64)
        .map(|t| t.inverse_cdf(0.5 + level.clamp(0.0, 0.999_999) / 2.0))
        .unwrap_or_else(|_| z_of(level))
}

/// Fewer degrees of freedom than this and the spread itself is too uncertain to lean on.
pub const MIN_DOF: usize = 4;

/// Pooled within-group spread of ln(value): each group is one commit × variant's repeats
/// (identical runs), so differences between groups — real effects — do not count.
pub fn learn(groups: &[Vec<f64>], source: &str) -> Option<Band> {
    let mut ss = 0.0;
    let mut dof = 0usize;
    let mut used = 0usize;
    let mut runs = 0usize;
    for g in groups {
        let logs: Vec<f64> = g
            .iter()
            .filter(|x| x.is_finite() && **x > 0.0)
            .map(|x| x.ln())
            .collect();
        if logs.len() < 2 {
            continue;
        }
        let mean = logs.iter().sum::<f64>() / logs.len() as f64;
        ss += logs.iter().map(|x| (x - mean).powi(2)).sum::<f64>();
        dof += logs.len() - 1;
        used += 1;
        runs += logs.len();
    }
    (dof >= MIN_DOF).then(|| Band {
        sigma: (ss / dof as f64).sqrt(),
        groups: used,
        runs,
        source: source.to_string(),
    })
}

/// The model-size class a band is kept for: a 70B model on 4 GPUs is not as noisy as an 8B
/// model on one. From the `…-8B-…` in the model's name; `unknown` without one.
pub(crate) fn size_class(model: Option<&str>) -> &'static str {
    let Some(m) = model else {
        return "unknown";
    };
    let name = m.rsplit('/').next().unwrap_or(m).to_ascii_lowercase();
    // The largest "<number>b" token: `Mixtral-8x7B` is 7B experts but 8×7 in all; the
    // class is coarse enough that the first reading does.
    let params = name
        .split(['-', '_', '.', ':'])
        .filter_map(|t| {
            let t = t.strip_suffix('b')?;
            let t = t.rsplit('x').next()?;
            t.parse::<f64>().ok()
        })
        .fold(None, |acc: Option<f64>, x| {
            Some(acc.map_or(x, |a| a.max(x)))
        });
    match params {
        Some(p) if p < 15.0 => "small",
        Some(p) if p < 80.0 => "medium",
        Some(_) => "large",
        None => "unknown",
    }
}

/// The variance inflation of the Hodges–Lehmann shift over the difference of means: none
/// with one run a side (it is the difference), π/3 otherwise (its large-sample efficiency
/// of 3/π under Gaussian noise; slightly pessimistic for a few runs, where it is closer to
/// the mean). The medians' difference would cost π/2.
fn estimator_factor(n_a: usize, n_b: usize) -> f64 {
    if n_a <= 1 && n_b <= 1 {
        1.0
    } else {
        std::f64::consts::FRAC_PI_3
    }
}

/// The standard deviation of the Hodges–Lehmann shift of ln(value) between two sides
/// ([`super::median::hodges_lehmann`]) when nothing changed.
pub(crate) fn sd_of_log_ratio(sigma: f64, n_a: usize, n_b: usize) -> f64 {
    let (a, b) = (n_a.max(1) as f64, n_b.max(1) as f64);
    sigma * (estimator_factor(n_a, n_b) * (1.0 / a + 1.0 / b)).sqrt()
}

/// The quantile z with P(|Z| ≤ z) = level.
pub(crate) fn z_of(level: f64) -> f64 {
    Normal::new(0.0, 1.0)
        .map(|n| n.inverse_cdf(0.5 + level.clamp(0.0, 0.999_999) / 2.0))
        .unwrap_or(1.96)
}

/// The bands of one box, per `metric@size-class`: what the store keeps.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub bands: BTreeMap<String, Band>,
    pub saved_ms: u64,
}

impl Calibration {
    pub fn key(metric: &str, class: &str) -> String {
        format!("{metric}@{class}")
    }
    pub fn band(&self, metric: &str, class: &str) -> Option<&Band> {
        // Asked for every metric of every comparison (240,000 times at 10,000 runs): no key
        // is built when there is nothing to find.
        if self.bands.is_empty() {
            return None;
        }
        self.bands.get(&Self::key(metric, class))
    }
    pub fn is_empty(&self) -> bool {
        self.bands.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooled_spread_ignores_differences_between_groups() {
        // Two groups at very different levels, each with the same ±1% wobble.
        let g1 = vec![100.0, 101.0, 99.0];
        let g2 = vec![1000.0, 1010.0, 990.0];
        let b = learn(&[g1.clone(), g2], "learned").unwrap();
        assert!(b.sigma > 0.005 && b.sigma < 0.015, "{b:?}");
        assert_eq!((b.groups, b.runs), (2, 6));
        // Too little to learn from.
        assert_eq!(learn(&[g1], "learned"), None);
        assert_eq!(learn(&[vec![1.0], vec![]], "learned"), None);
    }

    #[test]
    fn size_classes() {
        assert_eq!(
            size_class(Some("meta-llama/Llama-3.1-8B-Instruct")),
            "small"
        );
        assert_eq!(size_class(Some("Qwen/Qwen2.5-72B")), "medium");
        assert_eq!(size_class(Some("meta-llama/Llama-3.1-405B")), "large");
        assert_eq!(size_class(Some("mistralai/Mixtral-8x7B-v0.1")), "small");
        assert_eq!(size_class(Some("facebook/opt-125m")), "unknown");
        assert_eq!(size_class(None), "unknown");
    }

    #[test]
    fn band_arithmetic() {
        assert!((z_of(0.95) - 1.959_964).abs() < 1e-4);
        let sd = sd_of_log_ratio(0.03, 1, 1);
        assert!((sd - 0.03 * 2f64.sqrt()).abs() < 1e-12);
        assert!(sd_of_log_ratio(0.03, 5, 5) < sd);
        // With a calibration's many degrees of freedom an observation at 1.96 sd is at
        // p ≈ 0.05; with five runs' four, t(4) puts 0.05 at 2.776 sd.
        let p = t_p_value(1.959_964 * sd, sd, 100_000).unwrap();
        assert!((p - 0.05).abs() < 1e-4, "{p}");
        let p = t_p_value(2.776_445 * sd, sd, 4).unwrap();
        assert!((p - 0.05).abs() < 1e-4, "{p}");
        assert!((t_of(0.95, 4) - 2.776_445).abs() < 1e-4);
        assert_eq!(t_p_value(0.1, 0.0, 4), None);
    }
}
