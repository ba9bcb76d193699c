//! The circuit breaker: stops what keeps failing the same way, and nothing else. Runs are
//! counted per commit (the variants of one broken commit failing alike say nothing about
//! the box), and only runs that end failing count (not retries, fixes or skips).
//!
//! - **The host** (disk full, no NVIDIA runtime, NCCL): the same host category on
//!   consecutive commits pauses the sweep; every later run would fail the same way.
//! - **A model**: the same failure (one category, or for an unknown failure one
//!   [`crate::failure_kind`]) on consecutive commits of one model holds that model's runs
//!   only; the rest of the night goes on.
//! - **Pervasive failure**: every run of several consecutive commits, across several
//!   models, failed, with no success anywhere in between: the sweep pauses, whatever the
//!   categories (something is wrong that no signature names).
//!
//! Anything else — unknown failures mixed with successes, one broken commit after another
//! of different models — never pauses the night.

use crate::category::Category;
use std::collections::{BTreeMap, BTreeSet};

/// What a tripped breaker stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerScope {
    /// The host: every later run would fail the same way (disk, NVIDIA runtime, NCCL).
    Host,
    /// The model: too big for the box as configured, too slow to start, its outputs, an
    /// error of its own. Other models' runs go on.
    Model,
}

/// The one place that says which failures are the host's: only these pause the sweep by
/// themselves. Everything else is counted against the run's model (and towards the
/// pervasive-failure rule).
pub(crate) fn breaker_scope(c: Category) -> BreakerScope {
    match c {
        Category::DiskFull | Category::NvidiaRuntimeMissing | Category::NcclError => {
            BreakerScope::Host
        }
        _ => BreakerScope::Model,
    }
}

/// One failure as the breaker counts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Failure {
    pub category: Category,
    /// What makes two failures alike: the category, or an unknown failure's kind.
    pub alike: String,
    /// How it is named in the breaker's reason (`cuda_oom`, `other [kind 3f2a…]`).
    pub label: String,
}

impl Failure {
    pub(super) fn of(category: Category) -> Failure {
        Failure {
            category,
            alike: category.to_string(),
            label: category.to_string(),
        }
    }
}

/// What tripped, and why (one line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Trip {
    Sweep(String),
    /// The model, and why.
    Model(String, String),
}

/// Consecutive commits failing alike.
#[derive(Debug, Clone)]
struct Streak {
    alike: String,
    n: u32,
    last_commit: Option<String>,
}

impl Streak {
    /// Counts one failure; another commit adds one, a different failure starts over.
    fn bump(slot: Option<&Streak>, alike: &str, commit: Option<&str>) -> Streak {
        let n = match slot {
            Some(s) if s.alike == alike => {
                if commit.is_some() && s.last_commit.as_deref() == commit {
                    s.n
                } else {
                    s.n + 1
                }
            }
            _ => 1,
        };
        Streak {
            alike: alike.to_string(),
            n,
            last_commit: commit.map(str::to_string),
        }
    }
}

/// Failing commits since the last success anywhere.
#[derive(Debug, Default)]
struct Pervasive {
    commits: BTreeSet<String>,
    /// Runs counted without a commit (each one a commit of its own).
    anonymous: usize,
    models: BTreeSet<Option<String>>,
    categories: BTreeMap<Category, u32>,
}

impl Pervasive {
    fn commits(&self) -> usize {
        self.commits.len() + self.anonymous
    }

    /// Several models, or none known at all (then no model's breaker can act).
    fn across_models(&self) -> bool {
        self.models.len() >= 2 || self.models.iter().all(Option::is_none)
    }

    fn why(&self) -> String {
        let known = self.models.iter().flatten().count();
        let models = if known >= 2 {
            format!(", across {known} models")
        } else {
            String::new()
        };
        let mut cats: Vec<(&Category, &u32)> = self.categories.iter().collect();
        cats.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let cats: Vec<String> = cats.iter().map(|(c, n)| format!("{c} ×{n}")).collect();
        format!(
            "breaker tripped: every run of {} commits in a row failed{models}, no success in between ({})",
            self.commits(),
            cats.join(", ")
        )
    }
}

#[derive(Debug, Default)]
pub(super) struct Breaker {
    host: Option<Streak>,
    models: BTreeMap<String, Streak>,
    pervasive: Pervasive,
}

impl Breaker {
    /// A run of `commit` and `model` ended failing; trips at `threshold` commits (0: off).
    pub(super) fn count(
        &mut self,
        threshold: u32,
        f: &Failure,
        commit: Option<&str>,
        model: Option<&str>,
    ) -> Option<Trip> {
        if threshold == 0 {
            return None;
        }
        let mut trip = None;
        match (breaker_scope(f.category), model) {
            (BreakerScope::Host, _) => {
                let s = Streak::bump(self.host.as_ref(), &f.alike, commit);
                if s.n >= threshold {
                    self.host = None;
                    trip = Some(Trip::Sweep(format!(
                        "breaker tripped: {} × {} in a row",
                        s.n, f.label
                    )));
                } else {
                    self.host = Some(s);
                }
            }
            (BreakerScope::Model, Some(m)) => {
                let s = Streak::bump(self.models.get(m), &f.alike, commit);
                if s.n >= threshold {
                    self.models.remove(m);
                    let why = format!("breaker tripped: {} × {} in a row on {m}", s.n, f.label);
                    trip = Some(Trip::Model(m.to_string(), why));
                } else {
                    self.models.insert(m.to_string(), s);
                }
            }
            // A model's failure with no model named: only the pervasive rule can see it.
            (BreakerScope::Model, None) => {}
        }
        let p = &mut self.pervasive;
        match commit {
            Some(c) => {
                p.commits.insert(c.to_string());
            }
            None => p.anonymous += 1,
        }
        p.models.insert(model.map(str::to_string));
        *p.categories.entry(f.category).or_default() += 1;
        if p.commits() >= threshold as usize && p.across_models() {
            let why = p.why();
            self.pervasive = Pervasive::default();
            // Everything fails: the sweep, not one model, is what must stop.
            trip = Some(Trip::Sweep(why));
        }
        trip
    }

    /// A run of `model` succeeded: the host's streak, the model's and the pervasive count
    /// are over; other models' go on counting.
    pub(super) fn success_of(&mut self, model: Option<&str>) {
        self.host = None;
        self.pervasive = Pervasive::default();
        if let Some(m) = model {
            self.models.remove(m);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unknown(kind: &str) -> Failure {
        Failure {
            category: Category::Other,
            alike: format!("kind:{kind}"),
            label: format!("other [{kind}]"),
        }
    }

    #[test]
    fn only_host_categories_pause_the_sweep_by_themselves() {
        let mut b = Breaker::default();
        let disk = Failure::of(Category::NcclError);
        assert_eq!(b.count(3, &disk, Some("c1"), Some("A")), None);
        // The same commit's other variants do not count twice.
        assert_eq!(b.count(3, &disk, Some("c1"), Some("A")), None);
        assert_eq!(b.count(3, &disk, Some("c2"), Some("A")), None);
        let t = b.count(3, &disk, Some("c3"), Some("A"));
        assert_eq!(
            t,
            Some(Trip::Sweep(
                "breaker tripped: 3 × nccl_error in a row".into()
            ))
        );
        assert_eq!(breaker_scope(Category::DiskFull), BreakerScope::Host);
        assert_eq!(breaker_scope(Category::Other), BreakerScope::Model);
        assert_eq!(breaker_scope(Category::CudaOom), BreakerScope::Model);
    }

    #[test]
    fn unknown_failures_mixed_with_successes_never_trip() {
        let mut b = Breaker::default();
        // Each model fails and succeeds by turns, all with the same unknown error.
        for i in 0..50 {
            let m = ["A", "B", "C"][i % 3];
            if i % 2 == 0 {
                let t = b.count(3, &unknown("k1"), Some(&format!("c{i}")), Some(m));
                assert_eq!(t, None, "{i}");
            } else {
                b.success_of(Some(m));
            }
        }
        // Alternating kinds on one model never make a streak either.
        for i in 0..20 {
            let k = if i % 2 == 0 { "k1" } else { "k2" };
            let t = b.count(3, &unknown(k), Some(&format!("d{i}")), Some("A"));
            assert!(!matches!(t, Some(Trip::Model(..))), "{t:?}");
            b.success_of(Some("B"));
        }
    }

    #[test]
    fn one_model_failing_alike_holds_that_model_only() {
        let mut b = Breaker::default();
        for (i, c) in ["c1", "c2", "c3", "c4"].iter().enumerate() {
            assert_eq!(b.count(5, &unknown("k"), Some(c), Some("A")), None, "{i}");
            // B's runs succeed in between: the sweep has successes, A keeps failing.
            b.success_of(Some("B"));
        }
        let t = b.count(5, &unknown("k"), Some("c5"), Some("A"));
        assert_eq!(
            t,
            Some(Trip::Model(
                "A".into(),
                "breaker tripped: 5 × other [k] in a row on A".into()
            ))
        );
        // Its own success ends a model's streak.
        let mut b = Breaker::default();
        for c in ["c1", "c2", "c3", "c4"] {
            b.count(5, &unknown("k"), Some(c), Some("A"));
        }
        b.success_of(Some("A"));
        assert_eq!(b.count(5, &unknown("k"), Some("c5"), Some("A")), None);
    }

    #[test]
    fn pervasive_failure_across_models_pauses_the_sweep() {
        let mut b = Breaker::default();
        let kinds = ["k1", "k2", "k3", "k4", "k5"];
        for (i, k) in kinds.iter().enumerate() {
            let m = if i % 2 == 0 { "A" } else { "B" };
            let t = b.count(5, &unknown(k), Some(&format!("c{i}")), Some(m));
            if i < 4 {
                assert_eq!(t, None, "{i}");
            } else {
                let Some(Trip::Sweep(why)) = t else {
                    panic!("{t:?}")
                };
                assert!(
                    why.starts_with(
                        "breaker tripped: every run of 5 commits in a row failed, across 2 models"
                    ),
                    "{why}"
                );
                assert!(why.contains("other ×5"), "{why}");
            }
        }
        // One success anywhere starts the count over.
        for i in 0..4 {
            b.count(
                5,
                &unknown("x"),
                Some(&format!("d{i}")),
                Some(["A", "B"][i % 2]),
            );
        }
        b.success_of(Some("C"));
        assert_eq!(b.count(5, &unknown("y"), Some("d9"), Some("A")), None);
    }

    #[test]
    fn one_model_failing_in_many_ways_is_not_pervasive() {
        let mut b = Breaker::default();
        for i in 0..10 {
            let t = b.count(
                3,
                &unknown(&format!("k{i}")),
                Some(&format!("c{i}")),
                Some("A"),
            );
            assert_eq!(t, None, "{i}");
        }
    }

    #[test]
    fn off_at_zero() {
        let mut b = Breaker::default();
        for i in 0..10 {
            let f = Failure::of(Category::DiskFull);
            assert_eq!(b.count(0, &f, Some(&format!("c{i}")), None), None);
        }
    }
}
