//! Drift reference runs (`[defaults] reference = "COMMIT/VARIANT"`): the same benchmark at
//! the start of the night, every `reference_every_min` minutes and once more at the end,
//! so that a box that drifts over the night is told from a change in the code. The plan
//! makes `reference_runs` of them; all but the first wait held back (like adaptive
//! repeats) until they are due. Each reference that ends is judged against the night's
//! first ([`crate::stats::drift`]); a drift beyond the noise band is an event (an alert,
//! the activity log) and `results` marks the comparisons made across it.
//!
//! Due by time on a real box (scaled like every engine delay on the sim); on the sim at
//! full speed, where no time passes, by runs: the interval over the runtime's typical
//! run length.

use super::Engine;
use crate::event::Event;
use crate::model::{Outcome, RunId, RunState};
use crate::stats::drift;
use std::time::Duration;
use tokio::time::Instant;

/// The reason a reference run carries while it waits to be due.
pub use crate::state::REFERENCE_WAITS;

/// The engine's view of the references.
#[derive(Debug, Default)]
pub struct Drift {
    /// When the last reference was released (the first: the night's start).
    pub released_at: Option<Instant>,
    /// Runs ended when it was (the sim's clock at full speed).
    pub ended_at_release: usize,
    /// Shifts already told.
    pub told: usize,
    /// The metric the references are judged on (the first's headline).
    pub metric: Option<String>,
    /// The box's calibration, for the noise band (none: the uncalibrated threshold).
    pub calibration: crate::stats::Calibration,
}

impl Engine {
    fn references(&self) -> Vec<RunId> {
        self.plan
            .runs
            .iter()
            .filter(|s| s.reference)
            .map(|s| s.id)
            .collect()
    }

    fn waiting(&self, id: RunId) -> bool {
        self.plan.runs[id.0 as usize].reference && self.state.run(id).state.in_reserve()
    }

    /// The reference interval in this engine's time.
    fn reference_every(&self) -> Duration {
        Duration::from_secs(u64::from(self.plan.defaults.reference_every_min) * 60)
            .mul_f64(self.time_scale)
    }

    /// When the next reference falls due by time (None on the sim at full speed, or
    /// before the first): the loop wakes for it.
    pub(super) fn next_reference_due(&self) -> Option<Instant> {
        // Asked at every turn of the loop (log lines too): a plan without a reference pays
        // nothing.
        self.plan.defaults.reference.as_ref()?;
        let every = self.reference_every();
        let at = self.drift.released_at?;
        (!every.is_zero() && self.references().iter().any(|id| self.waiting(*id)))
            .then(|| at + every)
    }

    /// Release the next reference when it is due: at the interval while the night goes
    /// on, and once at the end (nothing else queued or running, and some run ended since
    /// the last reference started).
    pub(super) fn release_references(&mut self) -> anyhow::Result<()> {
        if self.plan.defaults.reference.is_none() {
            return Ok(());
        }
        let refs = self.references();
        let Some(next) = refs.iter().copied().find(|id| self.waiting(*id)) else {
            return Ok(());
        };
        let busy = |st: &RunState| matches!(st, RunState::Queued | RunState::Active { .. });
        let reference_busy = refs.iter().any(|id| busy(&self.state.run(*id).state));
        if reference_busy {
            return Ok(());
        }
        let others_busy = self
            .plan
            .runs
            .iter()
            .any(|s| !s.reference && busy(&self.state.run(s.id).state));
        let ended = self.ended_runs();
        let every = self.reference_every();
        let released = *self.drift.released_at.get_or_insert_with(Instant::now);
        let due = if others_busy {
            if every.is_zero() {
                let typical = self.runtime.typical_run().as_secs().max(1);
                let runs = (u64::from(self.plan.defaults.reference_every_min) * 60)
                    .div_ceil(typical)
                    .max(1) as usize;
                ended >= self.drift.ended_at_release + runs
            } else {
                Instant::now() >= released + every
            }
        } else {
            // The end: once, after the last reference, when some run has ended since.
            let last_ref_start = refs
                .iter()
                .filter_map(|id| self.state.run(*id).started_ms)
                .max();
            let last_other_end = self
                .plan
                .runs
                .iter()
                .filter(|s| !s.reference)
                .filter_map(|s| self.state.run(s.id).finished_ms)
                .max();
            matches!((last_ref_start, last_other_end), (Some(r), Some(o)) if o > r)
        };
        if !due {
            return Ok(());
        }
        self.drift.released_at = Some(Instant::now());
        self.drift.ended_at_release = ended;
        let why = if others_busy {
            format!(
                "drift reference: due ({} min since the last)",
                self.plan.defaults.reference_every_min
            )
        } else {
            "drift reference: the night's end".to_string()
        };
        self.set_state(next, RunState::Queued, Some(why))
    }

    /// After a reference run ends: judge the night's references so far and tell each new
    /// drift once.
    pub(super) fn judge_drift(&mut self, run: RunId) -> anyhow::Result<()> {
        if !self.plan.runs[run.0 as usize].reference {
            return Ok(());
        }
        let points: Vec<drift::Point> = {
            let mut p: Vec<(u64, drift::Point, Option<&'static str>)> = Vec::new();
            for id in self.references() {
                let r = self.state.run(id);
                let ok = matches!(
                    r.state,
                    RunState::Finished {
                        outcome: Outcome::Success
                    }
                );
                let (Some(at), true) = (r.started_ms, ok) else {
                    continue;
                };
                let Some((k, v)) = crate::metric::headline(&r.metrics) else {
                    continue;
                };
                p.push((
                    at,
                    drift::Point {
                        key: self.plan.runs[id.0 as usize].key.clone(),
                        started_ms: at,
                        value: v,
                    },
                    Some(k),
                ));
            }
            p.sort_by_key(|x| x.0);
            let key = p.first().and_then(|x| x.2);
            self.drift.metric = key.map(str::to_string);
            p.into_iter().map(|x| x.1).collect()
        };
        let Some(metric) = self.drift.metric.clone() else {
            return Ok(());
        };
        let spec = &self.plan.runs[run.0 as usize];
        let class = crate::stats::band::size_class(self.plan.commit_of(spec).model.as_deref());
        let sigma = self.drift.calibration.band(&metric, class).map(|b| b.sigma);
        let shifts = drift::shifts(&metric, &points, sigma, 0.05);
        for s in shifts.into_iter().skip(self.drift.told) {
            self.drift.told += 1;
            self.emit(Event::Drift { shift: Box::new(s) })?;
        }
        Ok(())
    }
}
