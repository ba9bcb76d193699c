//! Preflight: everything about a plan's runs that can be known before a GPU is spent, each
//! finding with its evidence, and one verdict per commit (`ready`, `at_risk`, `blocked`).
//!
//! The judge ([`judge`]) is pure: it reads the validated plan and the [`facts::Facts`] that
//! the edges gathered (the vLLM clone, the HF cache and the Hub, the registry, the disk).
//! What could not be checked (no clone, no network, no token) is listed as `unchecked`,
//! never silently passed: a `ready` verdict with a long unchecked list says so.

pub mod cache;
pub mod cli;
pub mod facts;
pub mod gather;
pub mod hub;
mod judge;
pub mod known;
pub mod registry;
mod render;
pub mod source;
pub mod suggest;

pub use judge::judge;
pub(crate) use render::summary_line;
pub use render::table;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A commit's verdict, worst first when sorted descending.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Nothing found that blocks or risks a result.
    Ready,
    /// A known risk, named: the run may still give a result.
    AtRisk,
    /// A variant cannot give a result.
    Blocked,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Ready => "ready",
            Verdict::AtRisk => "at_risk",
            Verdict::Blocked => "blocked",
        }
    }
}

/// How much a finding weighs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Risk,
    Blocks,
}

/// One finding: which variant (`baseline`, `human`, `agent:<id>`), a stable category and
/// the evidence in words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reason {
    pub variant: String,
    pub category: String,
    pub text: String,
    pub severity: Severity,
}

/// One commit's preflight.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CommitReport {
    /// The full hash (as the plan or the clone gave it).
    pub commit: String,
    pub verdict: Verdict,
    pub reasons: Vec<Reason>,
    /// What could not be checked, and why.
    pub unchecked: Vec<String>,
    /// The vLLM release each variant really runs, with where that came from.
    pub eras: BTreeMap<String, String>,
    /// The commit's variants (`all` in a reason means every one of these).
    pub variants: Vec<String>,
    /// The model and its weight size as found (`None` when unknown).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weights_bytes: Option<u64>,
}

impl CommitReport {
    /// The variants that cannot give a result (every variant when a reason names `all`).
    pub(crate) fn blocked_variants(&self) -> Vec<&str> {
        self.variants
            .iter()
            .map(String::as_str)
            .filter(|v| self.blocking(v).is_some())
            .collect()
    }

    /// The first blocking reason for `variant` (`baseline`, `human`, `agent:<id>`), a
    /// commit-wide one included.
    pub(crate) fn blocking(&self, variant: &str) -> Option<&Reason> {
        self.reasons.iter().find(|r| {
            r.severity == Severity::Blocks && (r.variant == variant || r.variant == judge::ALL)
        })
    }
}

/// Counts over the whole plan.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Summary {
    pub commits: usize,
    pub ready: usize,
    pub at_risk: usize,
    pub blocked: usize,
    /// Runs (commit × variant) that cannot give a result.
    pub runs_blocked: usize,
    /// Blocking reasons by category (one per commit and category).
    pub by_category: BTreeMap<String, usize>,
    /// Commits with at least one unchecked item.
    pub with_unchecked: usize,
    /// What the gathering could not reach at all (no clone, offline, no Docker).
    pub not_reached: Vec<String>,
    pub wall_ms: u64,
}

/// The whole preflight: what `--json` prints and what a sweep stores.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Report {
    pub commits: Vec<CommitReport>,
    pub summary: Summary,
}

impl Report {
    pub fn new(commits: Vec<CommitReport>, not_reached: Vec<String>, wall_ms: u64) -> Report {
        let mut s = Summary {
            commits: commits.len(),
            not_reached,
            wall_ms,
            ..Summary::default()
        };
        for c in &commits {
            match c.verdict {
                Verdict::Ready => s.ready += 1,
                Verdict::AtRisk => s.at_risk += 1,
                Verdict::Blocked => s.blocked += 1,
            }
            s.runs_blocked += c.blocked_variants().len();
            let mut cats: Vec<&str> = c
                .reasons
                .iter()
                .filter(|r| r.severity == Severity::Blocks)
                .map(|r| r.category.as_str())
                .collect();
            cats.sort_unstable();
            cats.dedup();
            for cat in cats {
                *s.by_category.entry(cat.to_string()).or_default() += 1;
            }
            if !c.unchecked.is_empty() {
                s.with_unchecked += 1;
            }
        }
        Report {
            commits,
            summary: s,
        }
    }

    /// The report of a commit by full hash or prefix.
    pub fn commit(&self, commit: &str) -> Option<&CommitReport> {
        self.commits
            .iter()
            .find(|c| c.commit == commit || c.commit.starts_with(commit))
    }

    /// Exit status for `preflight`: 0 when no commit is blocked, 1 when some are.
    pub fn exit_code(&self) -> i32 {
        i32::from(self.summary.blocked > 0)
    }
}

/// The prefix of a run's skip reason when preflight blocked it, so results and the digest
/// can count "named before the night" apart from what failed during it.
pub const SKIP_PREFIX: &str = "preflight: ";

#[cfg(test)]
mod tests;
