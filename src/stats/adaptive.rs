//! Adaptive repeats: spend runs where a verdict is still unknown.
//!
//! Chromium's Pinpoint adds repeats only to comparisons that came out "unknown", in steps up
//! to a cap. Looking at a comparison after every step and stopping once it decides is a
//! sequential test: judged at α each time, an A/A comparison gets several chances to come
//! out "different" and the false-positive rate grows with the looks (about 14% after five
//! looks at 5%). So each look is judged at a smaller α: Pocock's constant boundary, the
//! nominal level that keeps the overall rate at α for K equally spaced looks (Pocock 1977,
//! Table 1; two-sided 0.05), and Bonferroni (α/K) beyond the table, which is conservative.
//! `nightshift bench stats` measures the A/A rate this gives (a test holds it within α).
//! Pure.

use serde::{Deserialize, Serialize};

/// Where repeats start, how many each step adds, and where they stop (per side).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Steps {
    /// Runs a side before the first look: the plan's `repeats`.
    pub min: usize,
    /// Runs a side each step adds.
    pub step: usize,
    /// Runs a side at most: the plan's `max_repeats`.
    pub cap: usize,
}

/// Pocock's nominal two-sided level per look for an overall 0.05, K = 1..=5 looks.
const POCOCK_05: [f64; 5] = [0.05, 0.0294, 0.0221, 0.0182, 0.0158];

impl Steps {
    /// Fixed repeats: one look.
    pub fn fixed(n: usize) -> Steps {
        Steps {
            min: n.max(1),
            step: 1,
            cap: n.max(1),
        }
    }

    /// How many times a comparison may be judged: after the minimum and after each step.
    pub fn looks(&self) -> usize {
        if self.cap <= self.min || self.step == 0 {
            1
        } else {
            1 + (self.cap - self.min) / self.step
        }
    }

    /// The α each look is judged at so that all looks together stay within `alpha`.
    pub fn alpha_per_look(&self, alpha: f64) -> f64 {
        let k = self.looks();
        if k == 1 {
            return alpha;
        }
        match POCOCK_05.get(k - 1) {
            // The table is for 0.05; other levels scale with it (close for α ≤ 0.1).
            Some(p) => alpha * p / 0.05,
            None => alpha / k as f64,
        }
    }

    /// Runs a side after the next step, or None when a comparison at `n` may not grow.
    pub fn next(&self, n: usize) -> Option<usize> {
        let n = n.max(self.min);
        (self.step > 0 && n + self.step <= self.cap).then_some(n + self.step)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn looks_and_levels() {
        assert_eq!(Steps::fixed(3).looks(), 1);
        assert_eq!(Steps::fixed(3).alpha_per_look(0.05), 0.05);
        let s = Steps {
            min: 2,
            step: 2,
            cap: 8,
        };
        assert_eq!(s.looks(), 4);
        assert!((s.alpha_per_look(0.05) - 0.0182).abs() < 1e-12);
        assert_eq!((s.next(2), s.next(6), s.next(8)), (Some(4), Some(8), None));
        let long = Steps {
            min: 1,
            step: 1,
            cap: 10,
        };
        assert!((long.alpha_per_look(0.05) - 0.005).abs() < 1e-12);
    }
}
