//! The night's drift as `results` reads it from the store: the reference runs' results
//! (`[defaults] reference`) judged by [`crate::stats::drift`] with the box's calibrated
//! band, the same rule the engine alerts by. Comparisons whose runs lie on both sides of
//! a drift are flagged (a warning: the verdict stands, the reader is told).

use super::comparable::{Flag, Scope};
use crate::record::RunDoc;
use crate::stats::drift::{self, Shift};
use crate::stats::{band, Calibration};

/// The drifts the reference runs among `docs` show.
pub(crate) fn shifts_of<'a>(
    docs: impl IntoIterator<Item = &'a RunDoc>,
    calibration: &Calibration,
    alpha: f64,
) -> Vec<Shift> {
    let mut refs: Vec<(u64, &str, &'a RunDoc, f64)> = Vec::new();
    for d in docs.into_iter().filter(|d| d.info.reference) {
        let Some(a) = d.representative().filter(|a| a.status() == "success") else {
            continue;
        };
        let (Some(at), Some((k, v))) = (a.started_ms, crate::metric::headline(&a.metrics)) else {
            continue;
        };
        refs.push((at, k, d, v));
    }
    refs.sort_by_key(|r| r.0);
    let Some(&(_, metric, first, _)) = refs.first() else {
        return Vec::new();
    };
    let class = band::size_class(first.info.model.as_deref());
    let sigma = calibration.band(metric, class).map(|b| b.sigma);
    let points: Vec<drift::Point> = refs
        .iter()
        .filter(|r| r.1 == metric)
        .map(|r| drift::Point {
            key: r.2.key.clone(),
            started_ms: r.0,
            value: r.3,
        })
        .collect();
    drift::shifts(metric, &points, sigma, alpha)
}

/// The flag of a comparison whose runs started between `first` and `last` (ms), if a
/// drift lies inside that stretch.
pub fn flag(shifts: &[Shift], first: u64, last: u64) -> Option<Flag> {
    let s = shifts.iter().find(|s| s.spans(first, last))?;
    Some(Flag {
        code: "drift",
        scope: Scope::Warning,
        text: format!("measured across a drift of the box: {}", s.describe()),
    })
}
