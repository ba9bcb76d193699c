//! What a key and a frame read and may not change: the night, this client's settings, and
//! what frames keep because making it again is too slow (the failure groups, the comparison
//! report, the learned bands, the ETA). A key's handler is `Ui`'s, given a `Seen`: it
//! changes where the operator is, never the night.

use super::{Hits, Night};
use crate::model::RunId;
use crate::report::groups::{FailureGroup, Member};
use crate::tui::keymap::KeyMap;
use std::sync::Arc;

/// The night as one client sees it, borrowed beside its `Ui`.
pub(crate) struct Seen<'a> {
    pub night: &'a Night,
    pub keymap: &'a KeyMap,
    pub hits: &'a Hits,
    /// This client's signature on the commands it sends (`ops@tui:4321`).
    pub me: Option<&'a str>,
    /// A daemon owns the sweep: quitting detaches (or stops it, if asked).
    pub attached: bool,
    pub(super) caches: &'a Caches,
}

/// What the frames keep because making it again is too slow; each cleared when what it was
/// made from changes.
#[derive(Default)]
pub(super) struct Caches {
    /// The bands the night's own repeats teach, learned over every run as `results` learns
    /// them (the compare view builds one commit's report, which alone would learn from that
    /// commit only). Forgotten when a run ends; learned again when next asked.
    pub(super) learned: std::cell::RefCell<Option<crate::stats::Calibration>>,
    /// The last ETA and what it was made from (the second and the runs ended): a replay of
    /// the schedule is milliseconds at 10,000 runs, too much for every frame.
    pub(super) eta_cache: std::cell::RefCell<Option<EtaMemo>>,
    /// The failure groups, with the fingerprint of the states they were made from.
    pub(super) groups: std::cell::RefCell<Option<(GroupsKey, Arc<Vec<FailureGroup>>)>>,
    /// The comparison report (the 3-way view), with the fingerprint of the states it was
    /// made from: building it is milliseconds at 1,000 runs, too much for every frame.
    pub(super) report: std::cell::RefCell<Option<(ReportKey, Arc<crate::report::Report>)>>,
}

impl Seen<'_> {
    /// How the results view and its exports judge: `results`' defaults, the bands learned
    /// from the whole night's repeats and the box's calibration over them (one definition
    /// with the CLI's report, whichever commits a view builds).
    pub(crate) fn report_options(&self) -> crate::report::Options {
        let mut o = crate::report::Options::of(crate::report::Judge::default());
        let mut bands = self.learned_bands();
        for (k, b) in &self.night.calibration.bands {
            bands.bands.insert(k.clone(), b.clone());
        }
        o.calibration = bands;
        o
    }

    fn learned_bands(&self) -> crate::stats::Calibration {
        // Without repeats there is nothing to learn: no pass over the runs per frame.
        if !self.night.plan.runs.iter().any(|r| r.repeat > 0) {
            return Default::default();
        }
        if let Some(c) = self.caches.learned.borrow().as_ref() {
            return c.clone();
        }
        let docs = self.night.docs();
        let refs: Vec<&crate::record::RunDoc> = docs.iter().collect();
        let c = crate::report::learn_bands(&refs);
        *self.caches.learned.borrow_mut() = Some(c.clone());
        c
    }

    /// The night's failure groups (unknown failures of one kind each), largest first.
    /// Made again only when a run's state or attempt changed since (a frame per refresh
    /// would otherwise normalise every failed run's line).
    pub(crate) fn failure_groups(&self) -> Arc<Vec<FailureGroup>> {
        let key = self.groups_key();
        if let Some((k, g)) = self.caches.groups.borrow().as_ref() {
            if *k == key {
                return g.clone();
            }
        }
        let g = Arc::new(crate::report::groups::group(
            self.night.plan.runs.iter().map(|spec| {
                let model = self.night.plan.commit_of(spec).model.as_deref();
                Member::of_record(&spec.key, model, self.night.state.run(spec.id))
            }),
        ));
        *self.caches.groups.borrow_mut() = Some((key, g.clone()));
        g
    }

    /// The comparison report over the live state, as `results` judges it, made again only
    /// when a run's state or attempt has changed since.
    pub fn report(&self) -> Arc<crate::report::Report> {
        let key = (
            self.night.state.counts(),
            self.night
                .state
                .runs
                .iter()
                .map(|r| u64::from(r.attempt))
                .sum(),
        );
        if let Some((k, r)) = self.caches.report.borrow().as_ref() {
            if *k == key {
                return r.clone();
            }
        }
        let docs = self.night.docs();
        let refs: Vec<&crate::record::RunDoc> = docs.iter().collect();
        let r = Arc::new(crate::report::build(&refs, &self.report_options()));
        *self.caches.report.borrow_mut() = Some((key, r.clone()));
        r
    }

    fn groups_key(&self) -> GroupsKey {
        let c = self.night.state.counts();
        let attempts = self
            .night
            .state
            .runs
            .iter()
            .map(|r| u64::from(r.attempt))
            .sum();
        (c.failed, c.held, c.skipped, attempts)
    }

    /// The failure group of a run's unknown failure, if it has one.
    pub(crate) fn group_of(&self, run: RunId) -> Option<FailureGroup> {
        let spec = self.night.plan.runs.get(run.0 as usize)?;
        let model = self.night.plan.commit_of(spec).model.as_deref();
        let id = Member::of_record(&spec.key, model, self.night.state.run(run)).unknown_kind()?;
        self.failure_groups().iter().find(|g| g.id == id).cloned()
    }

    /// Time left, from the schedule replayed forward ([`crate::eta`]): the queue in the
    /// scheduler's order on the sweep's GPUs, each run as long as tonight's runs of its
    /// model and kind took, runs in flight for what is left of theirs.
    pub(crate) fn eta(&self) -> Option<crate::eta::Eta> {
        let ended = self.night.state.counts().done();
        let key = (self.night.now_ms / 1000, ended);
        if let Some((k, e)) = *self.caches.eta_cache.borrow() {
            if k == key {
                return e;
            }
        }
        let e = crate::eta::estimate(&self.night.eta_input(), self.night.gpus_total.max(1));
        *self.caches.eta_cache.borrow_mut() = Some((key, e));
        e
    }
}

/// An ETA and what it was made from: (the second, runs ended).
type EtaMemo = ((u64, usize), Option<crate::eta::Eta>);
/// What the cached failure groups were made from: failed, held, skipped, attempts.
type GroupsKey = (usize, usize, usize, u64);
/// Runs per state and attempts over all: the report changes only when some run's does.
type ReportKey = (crate::state::Counts, u64);
