//! The two-sample Kolmogorov–Smirnov test, two-sided.
//!
//! Mann–Whitney sees a shift of location; KS sees any difference of the two distributions,
//! a change of spread included (a commit that makes one run in three slow leaves the median
//! where it was). Pinpoint judges with the smaller p of the two; so does [`super::compare`].
//!
//! Small samples get the exact null distribution: under H0 every interleaving of the two
//! samples is equally likely, i.e. every monotone lattice path from (0,0) to (m,n), and D is
//! the path's largest distance from the diagonal. The share of paths that stay strictly
//! inside the observed distance is counted by dynamic programming over the path's step
//! probabilities (no binomial coefficients, so no overflow at any size that is counted).
//! Large samples use the Kolmogorov distribution with Stephens' small-sample correction.
//! Ties are taken together (the empirical CDFs jump at once), which makes the exact p
//! conservative, never liberal.

/// Above this many values in all the exact count (m·n cells) gives way to the asymptotic
/// distribution, which is already within a fraction of a percent there.
const EXACT_MAX: usize = 400;

/// The statistic scaled to an integer: `max |i·n − j·m|` over the merged sample, where
/// `i`, `j` count the values of `a`, `b` at or below each point (D = that / (m·n)).
fn scaled_d(a: &[f64], b: &[f64]) -> u64 {
    let mut a: Vec<f64> = a.to_vec();
    let mut b: Vec<f64> = b.to_vec();
    a.sort_by(f64::total_cmp);
    b.sort_by(f64::total_cmp);
    let (m, n) = (a.len() as i64, b.len() as i64);
    let (mut i, mut j) = (0usize, 0usize);
    let mut d: i64 = 0;
    while i < a.len() || j < b.len() {
        // The next distinct value, and every value equal to it on both sides at once.
        let x = match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) => x.min(*y),
            (Some(x), None) => *x,
            (None, Some(y)) => *y,
            (None, None) => break,
        };
        while a.get(i) == Some(&x) {
            i += 1;
        }
        while b.get(j) == Some(&x) {
            j += 1;
        }
        d = d.max((i as i64 * n - j as i64 * m).abs());
    }
    d as u64
}

/// P(D ≥ observed) under H0, exactly: one minus the chance that a random path keeps
/// `|i·n − j·m| < k` at every point.
fn exact_p(m: usize, n: usize, k: u64) -> f64 {
    let inside =
        |i: usize, j: usize| (i as i64 * n as i64 - j as i64 * m as i64).unsigned_abs() < k;
    // q[j]: probability of reaching (i, j) along a path that stayed inside so far.
    let mut q = vec![0.0f64; n + 1];
    q[0] = 1.0;
    for j in 1..=n {
        let left = m + n - (j - 1);
        q[j] = if inside(0, j) {
            q[j - 1] * (n - (j - 1)) as f64 / left as f64
        } else {
            0.0
        };
    }
    for i in 1..=m {
        // From (i-1, j): an `a` step with probability (m-(i-1)) / (m+n-(i-1)-j).
        let mut row = vec![0.0f64; n + 1];
        for j in 0..=n {
            if !inside(i, j) {
                continue;
            }
            let from_below = q[j] * (m - (i - 1)) as f64 / (m + n - (i - 1) - j) as f64;
            let from_left = if j > 0 {
                row[j - 1] * (n - (j - 1)) as f64 / (m + n - i - (j - 1)) as f64
            } else {
                0.0
            };
            row[j] = from_below + from_left;
        }
        q = row;
    }
    (1.0 - q[n]).clamp(0.0, 1.0)
}

/// Q_KS(λ) = 2 Σ (−1)^{k−1} e^{−2k²λ²}, the Kolmogorov distribution's tail.
fn kolmogorov_tail(lambda: f64) -> f64 {
    if lambda < 0.2 {
        return 1.0;
    }
    let mut sum = 0.0;
    for k in 1..=100 {
        let k = k as f64;
        let term = (-2.0 * k * k * lambda * lambda).exp();
        sum += if k as u64 % 2 == 1 { term } else { -term };
        if term < 1e-12 {
            break;
        }
    }
    (2.0 * sum).clamp(0.0, 1.0)
}

/// Two-sided p-value that `a` and `b` come from one distribution. None when a side is
/// empty or a value is not finite.
pub(crate) fn ks_p(a: &[f64], b: &[f64]) -> Option<f64> {
    if a.is_empty() || b.is_empty() || a.iter().chain(b).any(|x| !x.is_finite()) {
        return None;
    }
    let (m, n) = (a.len(), b.len());
    let k = scaled_d(a, b);
    if k == 0 {
        return Some(1.0);
    }
    Some(if m + n <= EXACT_MAX {
        exact_p(m, n, k)
    } else {
        asymptotic_p(m, n, k)
    })
}

fn asymptotic_p(m: usize, n: usize, k: u64) -> f64 {
    let d = k as f64 / (m as f64 * n as f64);
    let en = (m as f64 * n as f64 / (m + n) as f64).sqrt();
    kolmogorov_tail((en + 0.12 + 0.11 / en) * d)
}

/// The smallest p the exact test can give for samples of these sizes (fully separated).
pub(crate) fn min_p(m: usize, n: usize) -> f64 {
    if m == 0 || n == 0 {
        return 1.0;
    }
    let a: Vec<f64> = (0..m).map(|x| x as f64).collect();
    let b: Vec<f64> = (0..n).map(|x| (m + x) as f64).collect();
    ks_p(&a, &b).unwrap_or(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separated_samples_have_the_path_count_p() {
        // Fully separated: only the two extreme paths reach D = 1, so p = 2 / C(m+n, m).
        assert!((min_p(3, 3) - 2.0 / 20.0).abs() < 1e-12);
        assert!((min_p(5, 5) - 2.0 / 252.0).abs() < 1e-12);
        assert!((min_p(4, 6) - 2.0 / 210.0).abs() < 1e-12);
    }

    #[test]
    fn identical_samples_are_one_and_tables_agree() {
        assert_eq!(ks_p(&[1.0, 2.0, 3.0], &[1.0, 2.0, 3.0]), Some(1.0));
        // Published exact value: m = n = 5, D = 0.6 → P(D ≥ 0.6) = 0.357 (Massey's table,
        // counted: 1 − 162/252).
        let p = ks_p(&[1.0, 2.0, 3.0, 7.0, 9.0], &[4.0, 5.0, 6.0, 8.0, 10.0]).unwrap();
        assert!((p - (1.0 - 162.0 / 252.0)).abs() < 1e-9, "{p}");
    }

    #[test]
    fn sees_spread_where_location_is_unchanged() {
        // Same median, one side four times as spread.
        let narrow: Vec<f64> = (0..20).map(|i| 100.0 + (i as f64 - 9.5) * 0.1).collect();
        let wide: Vec<f64> = (0..20).map(|i| 100.0 + (i as f64 - 9.5) * 2.0).collect();
        let ks = ks_p(&narrow, &wide).unwrap();
        let mw = super::super::rank::mann_whitney_p(&narrow, &wide).unwrap();
        assert!(ks < 0.05 && mw > 0.5, "ks {ks} mw {mw}");
    }

    #[test]
    fn exact_and_asymptotic_meet_at_the_switch() {
        let a: Vec<f64> = (0..200).map(|i| (i as f64 * 0.37).sin()).collect();
        let b: Vec<f64> = (0..200).map(|i| (i as f64 * 0.41).sin() + 0.15).collect();
        let k = scaled_d(&a, &b);
        let exact = exact_p(200, 200, k);
        let asym = asymptotic_p(200, 200, k);
        assert!((exact - asym).abs() < 0.01, "{exact} vs {asym}");
    }

    #[test]
    fn nothing_to_test() {
        assert_eq!(ks_p(&[], &[1.0]), None);
        assert_eq!(ks_p(&[f64::NAN], &[1.0]), None);
    }
}
