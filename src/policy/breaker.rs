//! The circuit breaker: stops what keeps failing the same way. Runs of one category in a
//! row (counted per commit: the variants of one broken commit failing alike say nothing
//! about the box) trip it; a host's failures pause the sweep, a model's only that model's
//! runs, so the rest of the night goes on.

use crate::category::Category;
use std::collections::BTreeMap;

/// What a tripped breaker stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerScope {
    /// The host: every later run would fail the same way (disk, driver, NCCL, unknown).
    Host,
    /// The model: too big for the box as configured, too slow to start, its outputs.
    /// Other models' runs go on.
    Model,
}

/// The one place that says which failures are a model's rather than the host's.
pub fn breaker_scope(c: Category) -> BreakerScope {
    match c {
        Category::CudaOom
        | Category::KvCacheTooSmall
        | Category::ServerStartTimeout
        | Category::CudaGraphCaptureTimeout
        | Category::EngineCoreInitFailed
        | Category::NoMetrics
        | Category::BenchTimeout => BreakerScope::Model,
        _ => BreakerScope::Host,
    }
}

/// What tripped, and why (one line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Trip {
    Sweep(String),
    /// The model, and why.
    Model(String, String),
}

#[derive(Debug, Default)]
pub(super) struct Breaker {
    /// Per scope (None: the host; Some(model)): (category, runs in a row, the commit that
    /// last counted).
    streaks: BTreeMap<Option<String>, (Category, u32, Option<String>)>,
}

impl Breaker {
    /// A run of `commit` and `model` ended failing with `cat`; trips at `threshold` (0: off).
    pub(super) fn count(
        &mut self,
        threshold: u32,
        cat: Category,
        commit: Option<&str>,
        model: Option<&str>,
    ) -> Option<Trip> {
        let scope = match (breaker_scope(cat), model) {
            (BreakerScope::Model, Some(m)) => Some(m.to_string()),
            _ => None,
        };
        let n = match self.streaks.get(&scope) {
            Some((c, n, last)) if *c == cat => {
                let same_commit = commit.is_some() && last.as_deref() == commit;
                if same_commit {
                    *n
                } else {
                    n + 1
                }
            }
            _ => 1,
        };
        self.streaks
            .insert(scope.clone(), (cat, n, commit.map(str::to_string)));
        if threshold == 0 || n < threshold {
            return None;
        }
        self.streaks.remove(&scope);
        Some(match scope {
            None => Trip::Sweep(format!("breaker tripped: {n} × {cat} in a row")),
            Some(m) => {
                let why = format!("breaker tripped: {n} × {cat} in a row on {m}");
                Trip::Model(m, why)
            }
        })
    }

    /// Every streak is over.
    pub(super) fn reset(&mut self) {
        self.streaks.clear();
    }

    /// A run of `model` succeeded: the host's streak and the model's are over; other
    /// models' go on counting.
    pub(super) fn success_of(&mut self, model: Option<&str>) {
        self.streaks
            .retain(|scope, _| scope.is_some() && scope.as_deref() != model);
    }
}
