//! What one commit adds to a report's summary: its runs, failures and verdicts, counted
//! once when the commit's row is built. A report's summary is the sum of its commits'
//! shares, whether the rows were built just now or kept from an earlier read ([`super::view`]).

use super::{CommitRow, Summary};
use crate::record::RunDoc;
use crate::stats::{band, Calibration, Method, Verdict};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Share {
    pub runs: usize,
    pub successful_runs: usize,
    /// The failure category of each run that has one, in run order ([`super::cause`]).
    pub failures: Vec<String>,
    /// Those of runs skipped after their diagnosis.
    #[serde(default)]
    pub skipped: Vec<String>,
    pub comparisons: Vec<Counted>,
    /// Baseline, human and at least one agent succeeded and are comparable.
    pub usable_3way: bool,
    /// A variant was set aside before the night with its reason (preflight, the plan's
    /// own checks, `skip = true`).
    #[serde(default)]
    pub named_before_night: bool,
    /// Nothing was set aside before the night, and a variant failed during it: what
    /// preflight did not (or could not) see.
    #[serde(default)]
    pub failed_during_night: bool,
}

/// One comparison as the summary counts it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Counted {
    pub agent: Option<String>,
    pub against: String,
    pub verdict: Option<Verdict>,
    pub flagged: bool,
    pub method: Option<Method>,
    /// The noise band (`metric@class`) the verdict leaned on: the summary lists it.
    pub band: Option<String>,
}

impl Share {
    /// The share of a commit whose runs are `groups` (one per variant) and row is `row`.
    pub fn of(groups: &[Vec<&RunDoc>], row: &CommitRow) -> Share {
        let mut s = Share::default();
        for d in groups.iter().flatten() {
            s.runs += 1;
            if let Some(a) = d.representative() {
                if a.status() == "success" {
                    s.successful_runs += 1;
                }
            }
            if let Some(cat) = super::cause::category(d) {
                s.failures.push(cat.as_str().to_string());
                if super::cause::is_skipped(d) {
                    s.skipped.push(cat.as_str().to_string());
                }
            }
        }
        let class = band::size_class(row.cells.first().and_then(|c| c.model.as_deref()));
        s.comparisons = row
            .comparisons
            .iter()
            .map(|c| Counted {
                agent: c.agent.clone(),
                against: c.against.clone(),
                verdict: c.verdict,
                flagged: c.flag.is_some(),
                method: c.method,
                band: match (&c.primary, c.method) {
                    (Some(p), Some(Method::NoiseBand)) => Some(Calibration::key(p, class)),
                    _ => None,
                },
            })
            .collect();
        let agent_ok = s
            .comparisons
            .iter()
            .any(|c| c.agent.is_some() && c.verdict.is_some());
        let hb_ok = s
            .comparisons
            .first()
            .is_some_and(|c| c.agent.is_none() && c.verdict.is_some());
        s.usable_3way = hb_ok && agent_ok;
        s.named_before_night = groups
            .iter()
            .flatten()
            .any(|d| d.info.skip_reason.is_some());
        s.failed_during_night = !s.named_before_night
            && groups
                .iter()
                .flatten()
                .any(|d| d.representative().is_some_and(|a| a.status() == "failed"));
        s
    }

    /// Count this share into `summary`; `bands` are the ones the verdicts were made with.
    pub(crate) fn add_to(&self, summary: &mut Summary, bands: &Calibration) {
        summary.runs += self.runs;
        summary.successful_runs += self.successful_runs;
        summary.named_before_night += usize::from(self.named_before_night);
        summary.failed_during_night += usize::from(self.failed_during_night);
        for cat in &self.failures {
            *summary.failures_by_category.entry(cat.clone()).or_default() += 1;
        }
        for cat in &self.skipped {
            *summary.skipped_by_category.entry(cat.clone()).or_default() += 1;
        }
        for c in &self.comparisons {
            if let Some(v) = c.verdict {
                match (&c.agent, c.against.as_str()) {
                    (None, _) => summary.human_vs_baseline.add(v),
                    (Some(id), "baseline") => summary
                        .agent_vs_baseline
                        .entry(id.clone())
                        .or_default()
                        .add(v),
                    (Some(id), _) => summary.agent_vs_human.entry(id.clone()).or_default().add(v),
                }
            }
            if c.flagged {
                summary.flagged += 1;
            }
            if let Some(m) = c.method {
                *summary.by_method.entry(m.as_str().to_string()).or_default() += 1;
                if m == Method::Uncalibrated {
                    summary.uncalibrated += 1;
                }
            }
            if let Some((k, b)) = c.band.as_ref().and_then(|k| Some((k, bands.bands.get(k)?))) {
                summary.bands.insert(k.clone(), b.clone());
            }
        }
        if self.usable_3way {
            summary.usable_3way += 1;
        }
    }
}
