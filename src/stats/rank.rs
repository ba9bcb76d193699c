//! The Mann–Whitney U (Wilcoxon rank-sum) test, two-sided.
//!
//! Small samples — every comparison a night produces — get the *exact* permutation
//! distribution of the rank sum, counted by dynamic programming over the pooled sample's
//! mid-ranks (ties included, so no correction is needed). That is combinatorics, not a
//! special function; only large samples fall back to the normal approximation with the tie
//! correction, whose CDF comes from statrs.

use statrs::distribution::{ContinuousCDF, Normal};

/// Above this many values in all the exact count gets slow (sums grow as n²) and the normal
/// approximation is already good.
const EXACT_MAX: usize = 60;

/// Pooled mid-ranks, doubled so that ties (which share a half rank) stay integers.
fn doubled_midranks(a: &[f64], b: &[f64]) -> (Vec<u64>, u64) {
    let mut all: Vec<(f64, bool)> = a
        .iter()
        .map(|x| (*x, true))
        .chain(b.iter().map(|x| (*x, false)))
        .collect();
    all.sort_by(|x, y| x.0.total_cmp(&y.0));
    let mut ranks = Vec::with_capacity(all.len());
    let mut w_a = 0;
    let mut i = 0;
    while i < all.len() {
        let mut j = i;
        while j + 1 < all.len() && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        // Ranks i+1 ..= j+1 share their mean; doubled: (i+1) + (j+1).
        let r2 = (i + j + 2) as u64;
        for item in &all[i..=j] {
            ranks.push(r2);
            if item.1 {
                w_a += r2;
            }
        }
        i = j + 1;
    }
    (ranks, w_a)
}

/// How many ways to pick `k` of `ranks` give each doubled rank sum (index = sum).
fn sum_counts(ranks: &[u64], k: usize) -> Vec<Vec<f64>> {
    let total: u64 = ranks.iter().sum();
    let width = total as usize + 1;
    // dp[j][s]: subsets of size j with sum s, over the ranks seen so far.
    let mut dp = vec![vec![0.0f64; width]; k + 1];
    dp[0][0] = 1.0;
    for &r in ranks {
        let r = r as usize;
        for j in (1..=k).rev() {
            let (lo, hi) = dp.split_at_mut(j);
            let (prev, cur) = (&lo[j - 1], &mut hi[0]);
            for s in (r..width).rev() {
                if prev[s - r] != 0.0 {
                    cur[s] += prev[s - r];
                }
            }
        }
    }
    dp
}

/// The two-sided p-value that `a` and `b` come from the same distribution. None when a
/// sample is empty.
pub(crate) fn mann_whitney_p(a: &[f64], b: &[f64]) -> Option<f64> {
    let (n1, n2) = (a.len(), b.len());
    if n1 == 0 || n2 == 0 {
        return None;
    }
    let (ranks, w_obs) = doubled_midranks(a, b);
    let n = n1 + n2;
    // E[2W] = n1 (n + 1).
    let mean2 = (n1 * (n + 1)) as f64;
    let dev_obs = (w_obs as f64 - mean2).abs();
    if n <= EXACT_MAX {
        let dp = sum_counts(&ranks, n1);
        let row = &dp[n1];
        let all: f64 = row.iter().sum();
        // Tiny tolerance: sums are integers, deviations are exact halves.
        let extreme: f64 = row
            .iter()
            .enumerate()
            .filter(|(s, _)| (*s as f64 - mean2).abs() >= dev_obs - 1e-9)
            .map(|(_, c)| c)
            .sum();
        return Some((extreme / all).min(1.0));
    }
    normal_p(&ranks, dev_obs, n1, n2)
}

/// The normal approximation on U with the tie correction; `dev2` is |2W − E[2W]|.
fn normal_p(ranks: &[u64], dev2: f64, n1: usize, n2: usize) -> Option<f64> {
    let n = n1 + n2;
    let (n1f, n2f, nf) = (n1 as f64, n2 as f64, n as f64);
    let mut ties = 0.0;
    let mut sorted = ranks.to_vec();
    sorted.sort_unstable();
    let mut i = 0;
    while i < sorted.len() {
        let j = sorted[i..].iter().take_while(|r| **r == sorted[i]).count();
        let t = j as f64;
        ties += t * t * t - t;
        i += j;
    }
    let var = n1f * n2f / 12.0 * ((nf + 1.0) - ties / (nf * (nf - 1.0)));
    if var <= 0.0 {
        return Some(1.0);
    }
    let z = (dev2 / 2.0) / var.sqrt();
    let norm = Normal::new(0.0, 1.0).ok()?;
    Some((2.0 * norm.sf(z)).min(1.0))
}

/// The smallest two-sided p-value samples of these sizes can reach (all of one below all
/// of the other): 2 / C(n1+n2, n1). When it exceeds α the test can never pass, and a
/// verdict from it would be `inconclusive` by construction.
pub(crate) fn min_p(n1: usize, n2: usize) -> f64 {
    if n1 == 0 || n2 == 0 {
        return 1.0;
    }
    // C(n, k) as a running product stays exact enough in f64 for any n a night has.
    let (n, k) = (n1 + n2, n1.min(n2));
    let mut c = 1.0f64;
    for i in 0..k {
        c = c * (n - i) as f64 / (i + 1) as f64;
    }
    (2.0 / c).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_p_values_match_the_tables() {
        // Complete separation of 3 vs 3: 2 of C(6,3) = 20 splits are as extreme.
        let p = mann_whitney_p(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]).unwrap();
        assert!((p - 0.1).abs() < 1e-12, "{p}");
        assert!((min_p(3, 3) - 0.1).abs() < 1e-12);
        // 5 vs 5 separated: 2/252.
        let p = mann_whitney_p(&[1.0, 2.0, 3.0, 4.0, 5.0], &[6.0, 7.0, 8.0, 9.0, 10.0]).unwrap();
        assert!((p - 2.0 / 252.0).abs() < 1e-12, "{p}");
        // Identical samples: nothing is more central.
        let p = mann_whitney_p(&[1.0, 1.0, 1.0], &[1.0, 1.0, 1.0]).unwrap();
        assert!((p - 1.0).abs() < 1e-12);
        // Interleaved: far from significant.
        let p = mann_whitney_p(&[1.0, 3.0, 5.0, 7.0], &[2.0, 4.0, 6.0, 8.0]).unwrap();
        assert!(p > 0.5, "{p}");
        assert_eq!(mann_whitney_p(&[], &[1.0]), None);
    }

    #[test]
    fn approximation_agrees_with_the_exact_count() {
        // Same data both ways, with ties: the normal approximation is close at n = 40.
        let a: Vec<f64> = (0..20).map(|i| f64::from(i / 2)).collect();
        let b: Vec<f64> = (0..20).map(|i| f64::from(i / 2) + 3.0).collect();
        let exact = mann_whitney_p(&a, &b).unwrap();
        let (ranks, w) = doubled_midranks(&a, &b);
        let approx = normal_p(&ranks, (w as f64 - (20 * 41) as f64).abs(), 20, 20).unwrap();
        assert!(exact > 0.001 && exact < 0.2, "{exact}");
        assert!((exact - approx).abs() < 0.01, "{exact} vs {approx}");
        // Beyond the exact limit the approximation answers.
        let big: Vec<f64> = (0..40).map(f64::from).collect();
        let p = mann_whitney_p(&big, &big).unwrap();
        assert!(p > 0.9, "{p}");
    }
}
