//! `nightshift results`: per commit, each variant's repeats summarised (median and interval
//! per headline metric), each comparison decided by [`crate::stats`] and checked for
//! comparability ([`comparable`]), and a summary like the seed reports'. Pure: docs
//! in, report out; [`render`] turns it into text.

pub mod activity;
pub mod cause;
pub mod chart;
pub mod comparable;
pub mod drift;
mod filter;
pub mod groups;
pub mod html;
pub mod idle;
pub mod narrow;
pub mod render;
pub mod share;
pub mod show;
pub mod view;

use self::comparable::{Facts, Flag, Scope};
use crate::metric;
use crate::model::Variant;
use crate::record::{AttemptDoc, RunDoc};
use crate::stats::{self, band, Calibration, Compared, Method, Summary as Stat, Verdict};
use serde::Serialize;
use std::collections::BTreeMap;

pub use self::filter::matches;

pub(crate) use self::filter::parse_filter;
pub(crate) use self::render::{render_csv, render_json, render_jsonl, render_summary};
pub use self::render::{render_md, render_table};

/// The knobs of a verdict a user sets (`results --threshold --alpha --token-share`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct Judge {
    /// Minimum effect in percent (and the uncalibrated ±rule).
    pub threshold: f64,
    #[serde(default = "default_alpha")]
    pub alpha: f64,
    /// Generated-token totals may differ by this fraction before throughput is incomparable.
    #[serde(default = "default_token_share")]
    pub token_share: f64,
}

fn default_alpha() -> f64 {
    0.05
}
fn default_token_share() -> f64 {
    0.05
}

impl Default for Judge {
    fn default() -> Judge {
        Judge {
            threshold: 2.0,
            alpha: default_alpha(),
            token_share: default_token_share(),
        }
    }
}

impl Judge {
    /// Bad values are bad usage (exit 2), said plainly.
    pub fn check(&self) -> Result<(), String> {
        if !(self.threshold.is_finite() && self.threshold >= 0.0) {
            return Err(format!(
                "--threshold {} (expected a percentage ≥ 0)",
                self.threshold
            ));
        }
        if !(self.alpha > 0.0 && self.alpha < 1.0) {
            return Err(format!(
                "--alpha {} (expected a level between 0 and 1, e.g. 0.05)",
                self.alpha
            ));
        }
        if !(0.0..=1.0).contains(&self.token_share) {
            return Err(format!(
                "--token-share {} (expected a fraction between 0 and 1)",
                self.token_share
            ));
        }
        Ok(())
    }
}

/// What decides the verdicts.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub stats: stats::Config,
    /// The box's noise bands (`nightshift calibrate`); bands learned from the report's own
    /// repeats fill the gaps.
    pub calibration: Calibration,
    /// Generated-token totals may differ by this fraction before throughput is incomparable.
    pub token_share: f64,
    /// The night's drifts (reference runs), for flagging comparisons made across one:
    /// [`build`] finds them in its docs; a read of kept rows is given them.
    pub drifts: Vec<crate::stats::drift::Shift>,
}

impl Options {
    pub fn of(j: Judge) -> Options {
        let mut o = Options::with_threshold(j.threshold);
        o.stats.alpha = j.alpha;
        o.token_share = j.token_share;
        o
    }

    /// The defaults with `threshold_pct` as the minimum effect and the uncalibrated rule.
    pub fn with_threshold(threshold_pct: f64) -> Options {
        Options {
            stats: stats::Config {
                min_effect_pct: threshold_pct,
                uncalibrated_pct: threshold_pct,
                ..stats::Config::default()
            },
            calibration: Calibration::default(),
            drifts: Vec::new(),
            token_share: 0.05,
        }
    }
}

/// One variant of a commit: all its repeats.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// The first repeat's run key (`keys` has them all).
    pub key: String,
    pub keys: Vec<String>,
    pub variant: String,
    /// The first repeat's representative attempt, and attempts over all repeats.
    pub attempt: u32,
    pub attempts: usize,
    /// `success` when some counted repeat succeeded, else the first repeat's status.
    pub status: String,
    pub category: Option<String>,
    /// Repeats whose result counts (successful, not warm-up).
    pub n: usize,
    /// Warm-up repeats run and left out.
    pub warmups: usize,
    /// Of the counted repeats, those added because the comparison was still unknown
    /// (adaptive repeats, the plan's `max_repeats`).
    pub added: usize,
    /// Repeats that failed (not skipped or cancelled).
    pub failed: usize,
    /// Per metric, the median over counted repeats (what tables show).
    pub metrics: BTreeMap<String, f64>,
    /// Per metric, the counted repeats' values in repeat order (sparklines, tests).
    pub samples: BTreeMap<String, Vec<f64>>,
    /// Per headline metric, median and interval.
    pub stats: BTreeMap<String, Stat>,
    pub facts: Facts,
    pub command: Option<String>,
    pub model: Option<String>,
    pub gpu_type: String,
    /// When its counted repeats started, first and last (ms): whether a drift of the box
    /// lies between its runs and another cell's.
    #[serde(skip)]
    pub span: Option<(u64, u64)>,
}

impl Cell {
    fn output_tokens(&self) -> Option<f64> {
        self.metrics.get("total_output_tokens").copied()
    }
    fn failed_requests(&self) -> f64 {
        self.samples
            .get("failed_requests")
            .map_or(0.0, |v| v.iter().sum())
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// e.g. `human vs baseline`.
    pub label: String,
    pub agent: Option<String>,
    /// Against the baseline or the human.
    pub against: String,
    /// Improvement of medians in percent per headline metric (positive = better).
    pub deltas: BTreeMap<String, f64>,
    /// The statistics per headline metric.
    pub metrics: BTreeMap<String, Compared>,
    /// The metric the verdict is on (the kind's headline).
    pub primary: Option<String>,
    /// None when the two are not comparable or a side has no result.
    pub verdict: Option<Verdict>,
    pub method: Option<Method>,
    pub flags: Vec<Flag>,
    /// The flags that withhold the verdict, as one line (None when it stands).
    pub flag: Option<String>,
}

impl Comparison {
    pub(crate) fn primary_stats(&self) -> Option<&Compared> {
        self.primary.as_ref().and_then(|p| self.metrics.get(p))
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct CommitRow {
    pub commit: String,
    pub title: String,
    /// Measured with a fix accepted before the night (every variant alike): what changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fixed: Option<String>,
    pub cells: Vec<Cell>,
    pub comparisons: Vec<Comparison>,
}

/// How many comparisons ended each way.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Outcomes {
    pub better: usize,
    pub no_change: usize,
    pub worse: usize,
    pub inconclusive: usize,
}

impl Outcomes {
    pub(crate) fn add(&mut self, v: Verdict) {
        match v {
            Verdict::Better => self.better += 1,
            Verdict::NoChange => self.no_change += 1,
            Verdict::Worse => self.worse += 1,
            Verdict::Inconclusive => self.inconclusive += 1,
        }
    }
    pub fn total(&self) -> usize {
        self.better + self.no_change + self.worse + self.inconclusive
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    pub commits: usize,
    pub runs: usize,
    pub successful_runs: usize,
    /// Commits where baseline, human and at least one agent succeeded and are comparable.
    pub usable_3way: usize,
    /// Commits with a variant set aside before the night (preflight, plan checks).
    pub named_before_night: usize,
    /// Commits with nothing set aside before the night and a variant failed during it.
    pub failed_during_night: usize,
    /// Runs per failure category: failed, held, and skipped after the diagnosis.
    pub failures_by_category: BTreeMap<String, usize>,
    /// Of those, the runs skipped after it (`S` on 34 held image_not_found runs: 34).
    #[serde(default)]
    pub skipped_by_category: BTreeMap<String, usize>,
    pub human_vs_baseline: Outcomes,
    /// Per agent: vs baseline and vs human.
    pub agent_vs_baseline: BTreeMap<String, Outcomes>,
    pub agent_vs_human: BTreeMap<String, Outcomes>,
    /// Comparisons with a flag that withholds the verdict (or some of it).
    pub flagged: usize,
    pub threshold_pct: f64,
    pub alpha: f64,
    /// "Same" needs the interval on the change inside ± this, percent.
    #[serde(default)]
    pub same_within_pct: f64,
    /// Verdicts by method: how many came from the rank test, a noise band, the
    /// uncalibrated threshold; `uncalibrated > 0` means the report must say so.
    pub by_method: BTreeMap<String, usize>,
    pub uncalibrated: usize,
    /// The bands used, per `metric@size`, with where each came from.
    pub bands: BTreeMap<String, stats::Band>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub rows: Vec<CommitRow>,
    pub summary: Summary,
}

/// The repeats whose results count: successful and not warm-up.
fn counted(doc: &RunDoc) -> Option<&AttemptDoc> {
    let a = doc.representative()?;
    // Warm-ups and drift references are stored and shown, never a repeat in a comparison.
    (a.status() == "success" && !doc.info.warmup && !doc.info.reference).then_some(a)
}

fn cell(docs: &[&RunDoc], level: f64, cache: &mut comparable::CommandFacts) -> Option<Cell> {
    let first = docs.first()?;
    let rep = first.representative();
    let info = rep.and_then(|a| a.info.as_ref()).unwrap_or(&first.info);
    let mut samples: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut n = 0;
    let mut fact_src = None;
    for d in docs {
        if let Some(a) = counted(d) {
            n += 1;
            fact_src.get_or_insert((*d, a));
            for (k, v) in a.metrics.iter().filter(|(k, _)| metric::reported(k)) {
                samples.entry(k.clone()).or_default().push(*v);
            }
        }
    }
    let metrics = samples
        .iter()
        .filter_map(|(k, v)| {
            stats::median::median_of_sorted(&stats::median::sorted(v)).map(|m| (k.clone(), m))
        })
        .collect();
    let stat = metric::HEADLINE
        .iter()
        .filter_map(|m| {
            let s = stats::summarize(samples.get(m.key)?, level)?;
            Some((m.key.to_string(), s))
        })
        .collect();
    let facts = match fact_src {
        Some((d, a)) => comparable::facts_in(cache, d, Some(a)),
        None => comparable::facts_in(cache, first, rep),
    };
    Some(Cell {
        key: first.key.clone(),
        keys: docs.iter().map(|d| d.key.clone()).collect(),
        variant: info.variant.to_string(),
        attempt: rep.map_or(0, |a| a.attempt),
        attempts: docs
            .iter()
            .flat_map(|d| &d.attempts)
            .filter(|a| a.started_ms.is_some())
            .count(),
        status: if n > 0 {
            "success".into()
        } else {
            match rep {
                Some(a) => a.status().to_string(),
                None => first.record.state.label(),
            }
        },
        // The first repeat's cause that has one (a skip after a diagnosis keeps it).
        category: if n > 0 {
            None
        } else {
            docs.iter()
                .find_map(|d| cause::category(d))
                .map(|c| c.as_str().to_string())
        },
        n,
        warmups: docs.iter().filter(|d| d.info.warmup).count(),
        added: docs
            .iter()
            .filter(|d| d.info.extra && counted(d).is_some())
            .count(),
        failed: docs
            .iter()
            .filter(|d| d.representative().is_some_and(|a| a.status() == "failed"))
            .count(),
        metrics,
        samples,
        stats: stat,
        facts,
        command: info.command.clone(),
        model: info.model.clone(),
        gpu_type: info.gpu_type().to_string(),
        span: docs.iter().filter_map(|d| counted(d)?.started_ms).fold(
            None,
            |acc: Option<(u64, u64)>, t| {
                Some(acc.map_or((t, t), |(lo, hi)| (lo.min(t), hi.max(t))))
            },
        ),
    })
}

fn is_throughput(key: &str) -> bool {
    matches!(metric::lookup(key).unit, "tok/s" | "req/s")
}

fn compare(
    label: String,
    agent: Option<String>,
    a: &Cell,
    b: &Cell,
    opts: &Options,
    bands: &Calibration,
) -> Comparison {
    // A side with no result has nothing to compare: its setup is no reason to flag.
    let mut flags = if a.n > 0 && b.n > 0 {
        comparable::flags(
            &a.facts,
            &b.facts,
            (a.output_tokens(), b.output_tokens()),
            (a.failed_requests(), b.failed_requests()),
            opts.token_share,
        )
    } else {
        Vec::new()
    };
    if let (Some((a0, a1)), Some((b0, b1))) = (a.span, b.span) {
        flags.extend(drift::flag(&opts.drifts, a0.min(b0), a1.max(b1)));
    }
    let blocks_all = flags.iter().any(|f| f.scope == Scope::All);
    let blocks_tput = flags.iter().any(|f| f.scope == Scope::Throughput);
    let class = band::size_class(a.model.as_deref());
    let mut metrics = BTreeMap::new();
    let mut deltas = BTreeMap::new();
    if a.n > 0 && b.n > 0 {
        for m in metric::HEADLINE {
            let (Some(x), Some(y)) = (a.samples.get(m.key), b.samples.get(m.key)) else {
                continue;
            };
            let band = bands.band(m.key, class);
            if let Some(c) = stats::compare(m.key, x, y, band, &opts.stats) {
                deltas.insert(m.key.to_string(), c.improvement_pct);
                metrics.insert(m.key.to_string(), c);
            }
        }
    }
    let primary = metric::shared_headline(&a.metrics, &b.metrics).map(str::to_string);
    let withheld: Vec<&Flag> = flags
        .iter()
        .filter(|f| {
            f.scope == Scope::All
                || (f.scope == Scope::Throughput && primary.as_deref().is_some_and(is_throughput))
        })
        .collect();
    let decided = primary
        .as_ref()
        .and_then(|p| metrics.get(p))
        .filter(|_| withheld.is_empty());
    let flag = (!withheld.is_empty()).then(|| {
        let what = if blocks_all {
            "not comparable"
        } else if blocks_tput {
            "throughput incomparable"
        } else {
            "flagged"
        };
        format!(
            "{what}: {}",
            withheld
                .iter()
                .map(|f| f.text.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        )
    });
    Comparison {
        against: b.variant.clone(),
        label,
        agent,
        deltas,
        primary,
        verdict: decided.map(|c| c.verdict),
        method: decided.map(|c| c.method),
        metrics,
        flags,
        flag,
    }
}

/// Bands for what calibration lacks, learned from the docs' own repeats: every commit ×
/// variant with two or more counted repeats is a group of identical runs.
pub(crate) fn learn_bands(docs: &[&RunDoc]) -> Calibration {
    let commits = by_commit(docs);
    let groups: Vec<Group> = commits
        .iter()
        .flat_map(|(_, _, g)| repeat_groups(g))
        .collect();
    learn_from(groups.iter())
}

/// Repeats of one metric of one variant of one commit (identical runs): `(metric, size
/// class, values)`. What a commit lends to the learned bands.
pub type Group = (String, String, Vec<f64>);

/// A commit's groups of identical runs, from its runs grouped by variant.
pub(crate) fn repeat_groups(variants: &[Vec<&RunDoc>]) -> Vec<Group> {
    let mut out = Vec::new();
    for g in variants {
        let reps: Vec<&AttemptDoc> = g.iter().filter_map(|d| counted(d)).collect();
        if reps.len() < 2 {
            continue;
        }
        let first = g.iter().find(|d| counted(d).is_some());
        let class = band::size_class(first.and_then(|d| d.info.model.as_deref()));
        for m in metric::HEADLINE {
            let v: Vec<f64> = reps
                .iter()
                .filter_map(|a| a.metrics.get(m.key).copied())
                .collect();
            if v.len() > 1 {
                out.push((m.key.to_string(), class.to_string(), v));
            }
        }
    }
    out
}

/// Bands learned from groups of identical runs (in plan order, so a read gives the same
/// bands whichever rows it rebuilt).
pub(crate) fn learn_from<'a>(groups: impl Iterator<Item = &'a Group>) -> Calibration {
    let mut by_key: BTreeMap<(&str, &str), Vec<Vec<f64>>> = BTreeMap::new();
    for (m, class, v) in groups {
        by_key.entry((m, class)).or_default().push(v.clone());
    }
    let bands = by_key
        .into_iter()
        .filter_map(|((k, class), g)| {
            band::learn(&g, "learned").map(|b| (Calibration::key(k, class), b))
        })
        .collect();
    Calibration { bands, saved_ms: 0 }
}

/// The bands verdicts use: learned ones, where a calibration run has none (it beats what
/// the night's repeats happen to show).
fn with_calibration(mut learned: Calibration, opts: &Options) -> Calibration {
    for (k, b) in &opts.calibration.bands {
        learned.bands.insert(k.clone(), b.clone());
    }
    learned
}

/// Group docs by commit (plan order) and variant (variant order, then repeat).
fn by_commit<'a>(docs: &[&'a RunDoc]) -> Vec<(String, String, Vec<Vec<&'a RunDoc>>)> {
    let mut out: Vec<(String, String, Vec<&RunDoc>)> = Vec::new();
    let mut index: BTreeMap<&str, usize> = BTreeMap::new();
    for d in docs {
        let c = d.info.commit.as_str();
        match index.get(c) {
            Some(&i) => out[i].2.push(d),
            None => {
                index.insert(c, out.len());
                out.push((c.to_string(), d.info.title.clone(), vec![d]));
            }
        }
    }
    out.into_iter()
        .map(|(c, t, mut ds)| {
            ds.sort_by(|a, b| {
                (a.info.variant.order(), &a.info.variant, a.info.repeat).cmp(&(
                    b.info.variant.order(),
                    &b.info.variant,
                    b.info.repeat,
                ))
            });
            let mut groups: Vec<Vec<&RunDoc>> = Vec::new();
            for d in ds {
                match groups.last_mut() {
                    Some(g) if g[0].info.variant == d.info.variant => g.push(d),
                    _ => groups.push(vec![d]),
                }
            }
            (c, t, groups)
        })
        .collect()
}

/// Build the report from the runs (in plan order).
pub fn build(docs: &[&RunDoc], opts: &Options) -> Report {
    let mut with_drifts;
    let opts = if opts.drifts.is_empty() {
        with_drifts = opts.clone();
        with_drifts.drifts =
            drift::shifts_of(docs.iter().copied(), &opts.calibration, opts.stats.alpha);
        &with_drifts
    } else {
        opts
    };
    let commits = by_commit(docs);
    let groups: Vec<Group> = commits
        .iter()
        .flat_map(|(_, _, g)| repeat_groups(g))
        .collect();
    let bands = with_calibration(learn_from(groups.iter()), opts);
    let mut summary = Summary::of(opts, commits.len());
    let level = 1.0 - opts.stats.alpha;
    // Commits are independent once the bands are known: built on every core (10,000 runs),
    // then counted in plan order.
    let built: Vec<(CommitRow, share::Share)> = {
        use rayon::prelude::*;
        commits
            .into_par_iter()
            .map_init(
                comparable::CommandFacts::default,
                |cache, (commit, title, groups)| {
                    let row = commit_row(commit, title, &groups, level, opts, &bands, cache);
                    let share = share::Share::of(&groups, &row);
                    (row, share)
                },
            )
            .collect()
    };
    let mut rows = Vec::with_capacity(built.len());
    for (row, share) in built {
        share.add_to(&mut summary, &bands);
        rows.push(row);
    }
    Report { rows, summary }
}

impl Summary {
    /// An empty summary for `commits` commits judged by `opts`.
    fn of(opts: &Options, commits: usize) -> Summary {
        Summary {
            threshold_pct: opts.stats.min_effect_pct,
            alpha: opts.stats.alpha,
            same_within_pct: opts.stats.same_within_pct,
            commits,
            ..Default::default()
        }
    }
}

/// One commit's cells and comparisons.
fn commit_row(
    commit: String,
    title: String,
    groups: &[Vec<&RunDoc>],
    level: f64,
    opts: &Options,
    bands: &Calibration,
    cache: &mut comparable::CommandFacts,
) -> CommitRow {
    let cells: Vec<Cell> = groups
        .iter()
        .filter_map(|g| cell(g, level, cache))
        .collect();
    let base = cells.iter().find(|c| c.variant == "baseline");
    let human = cells.iter().find(|c| c.variant == "human");
    let mut comparisons = Vec::new();
    if let (Some(h), Some(b)) = (human, base) {
        comparisons.push(compare("human vs baseline".into(), None, h, b, opts, bands));
    }
    for a in cells.iter().filter(|c| c.variant.starts_with("agent:")) {
        let id = a.variant.trim_start_matches("agent:").to_string();
        for (other, against) in [(base, "baseline"), (human, "human")] {
            let Some(o) = other else { continue };
            let label = format!("{} vs {against}", a.variant);
            comparisons.push(compare(label, Some(id.clone()), a, o, opts, bands));
        }
    }
    let fixed = groups.iter().flatten().find_map(|d| d.info.fixed.clone());
    CommitRow {
        commit,
        title,
        fixed,
        cells,
        comparisons,
    }
}

/// Sort key helper so callers can keep variants in a stable order.
pub(crate) fn variant_order(v: &Variant) -> (u8, Variant) {
    (v.order(), v.clone())
}

#[cfg(test)]
pub(crate) mod tests;
