//! The results view's list: its filters, its sort, and a selection that is a run, not a
//! row, so whatever moves the rows (an event, a resync, a new sort or filter) leaves the
//! highlight, and the keys, on the run the operator picked.

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusFilter {
    Success,
    Failed,
    Held,
    Skipped,
    Active,
    Queued,
}

impl StatusFilter {
    pub const ALL: [StatusFilter; 6] = [
        StatusFilter::Success,
        StatusFilter::Failed,
        StatusFilter::Held,
        StatusFilter::Skipped,
        StatusFilter::Active,
        StatusFilter::Queued,
    ];
    pub fn label(self) -> &'static str {
        match self {
            StatusFilter::Success => "success",
            StatusFilter::Failed => "failed",
            StatusFilter::Held => "held",
            StatusFilter::Skipped => "skipped",
            StatusFilter::Active => "active",
            StatusFilter::Queued => "queued",
        }
    }
    pub fn matches(self, s: &RunState) -> bool {
        matches!(
            (self, s),
            (StatusFilter::Queued, RunState::Queued)
                | (StatusFilter::Active, RunState::Active { .. })
                | (StatusFilter::Held, RunState::Held { .. })
                | (
                    StatusFilter::Success,
                    RunState::Finished {
                        outcome: Outcome::Success
                    }
                )
                | (
                    StatusFilter::Failed,
                    RunState::Finished {
                        outcome: Outcome::Failed { .. }
                    }
                )
                | (
                    StatusFilter::Skipped,
                    RunState::Finished {
                        outcome: Outcome::Skipped { .. } | Outcome::Cancelled
                    }
                )
        )
    }
}

pub const RESULT_COLUMNS: [&str; 9] = [
    "commit", "variant", "model", "status", "category", "headline", "Δ base", "attempt", "title",
];

#[derive(Debug, Clone, Default)]
pub struct ResultsState {
    pub sort_col: usize,
    pub reverse: bool,
    pub status: Option<StatusFilter>,
    pub category: Option<Category>,
    pub model: Option<String>,
    pub text: Option<String>,
    /// Only the runs of this failure group (its id or a prefix).
    pub group: Option<String>,
    pub selected: RowSelection,
}

/// A selected run and the row it was last seen on. The row is found again from the run
/// each time the list is drawn or a key reads it; a run that left the list (filtered out)
/// hands the selection to the row now nearest where it was, so the highlight and the keys
/// never part.
#[derive(Debug, Clone, Default)]
pub struct RowSelection {
    // Cells: drawing (`&App`) is where a run that left the list is first noticed, and
    // what it draws highlighted must be what the next key acts on.
    run: Cell<Option<RunId>>,
    row: Cell<usize>,
}

impl RowSelection {
    pub fn run(&self) -> Option<RunId> {
        self.run.get()
    }

    /// Select row `i` of `rows` (clamped to the list); nothing when the list is empty.
    pub(crate) fn select_row(&self, rows: &[RunId], i: usize) {
        if let Some(last) = rows.len().checked_sub(1) {
            let i = i.min(last);
            self.run.set(Some(rows[i]));
            self.row.set(i);
        }
    }

    /// The selected run's row in `rows`. A run no longer there is replaced by the one
    /// nearest its old row; an empty list keeps it (it may come back).
    pub fn resolve(&self, rows: &[RunId]) -> Option<usize> {
        let last = rows.len().checked_sub(1)?;
        let i = self
            .run
            .get()
            .and_then(|r| rows.iter().position(|x| *x == r))
            .unwrap_or_else(|| self.row.get().min(last));
        self.run.set(Some(rows[i]));
        self.row.set(i);
        Some(i)
    }
}

impl Ui {
    /// The results rows and the selected one's index in them.
    pub(crate) fn results_selection(&self, at: &Seen<'_>) -> (Vec<RunId>, Option<usize>) {
        let rows = self.result_rows(at);
        let i = self.results.selected.resolve(&rows);
        (rows, i)
    }

    /// The run highlighted in the results view.
    pub(crate) fn results_run(&self, at: &Seen<'_>) -> Option<RunId> {
        let (rows, i) = self.results_selection(at);
        rows.get(i?).copied()
    }

    /// Rows of the results view after filtering and sorting.
    pub(crate) fn result_rows(&self, at: &Seen<'_>) -> Vec<RunId> {
        let f = &self.results;
        let text = f.text.as_ref().map(|t| t.to_lowercase());
        let model = f.model.as_ref().map(|t| t.to_lowercase());
        let in_group: Option<std::collections::HashSet<String>> = f.group.as_ref().map(|id| {
            let id = id.to_ascii_lowercase();
            at.failure_groups()
                .iter()
                .filter(|g| g.id.starts_with(&id))
                .flat_map(|g| g.runs.iter().cloned())
                .collect()
        });
        let rows: Vec<RunId> = at
            .night
            .plan
            .runs
            .iter()
            .filter(|spec| {
                let r = at.night.state.run(spec.id);
                let c = at.night.plan.commit_of(spec);
                f.status.is_none_or(|s| s.matches(&r.state))
                    && in_group.as_ref().is_none_or(|g| g.contains(&spec.key))
                    && f.category
                        .is_none_or(|cat| run_category(&r.state, r.finding.as_ref()) == Some(cat))
                    && model
                        .as_ref()
                        .is_none_or(|m| c.model.as_deref().unwrap_or("").to_lowercase().contains(m))
                    && text.as_ref().is_none_or(|t| {
                        spec.key.to_lowercase().contains(t)
                            || c.title.to_lowercase().contains(t)
                            || c.model.as_deref().unwrap_or("").to_lowercase().contains(t)
                            || r.state.label().to_lowercase().contains(t)
                    })
            })
            .map(|s| s.id)
            .collect();
        let col = f.sort_col;
        let mut keyed: Vec<(SortKey, RunId)> = rows
            .into_iter()
            .map(|r| (self.sort_key(at, r, col), r))
            .collect();
        keyed.sort_by(|(ka, a), (kb, b)| ka.cmp_to(kb, f.reverse).then(a.cmp(b)));
        keyed.into_iter().map(|(_, r)| r).collect()
    }

    fn sort_key(&self, at: &Seen<'_>, run: RunId, col: usize) -> SortKey {
        let spec = &at.night.plan.runs[run.0 as usize];
        let c = at.night.plan.commit_of(spec);
        let r = at.night.state.run(run);
        match col {
            0 => SortKey::Text(c.commit.clone()),
            1 => SortKey::Num(spec.variant.order() as f64),
            2 => SortKey::Text(c.model.clone().unwrap_or_default()),
            3 => SortKey::Text(r.state.label()),
            4 => SortKey::Text(
                run_category(&r.state, r.finding.as_ref())
                    .map(|c| c.to_string())
                    .unwrap_or_default(),
            ),
            5 => SortKey::Opt(headline(&r.metrics).map(|h| h.1)),
            6 => SortKey::Opt(self.delta_pct(at, run)),
            7 => SortKey::Num(r.attempt as f64),
            _ => SortKey::Text(c.title.clone()),
        }
    }

    /// The headline metric's improvement over this commit's baseline, in percent (positive
    /// is better whichever way the metric points; `crate::metric::delta_label` words it).
    pub(crate) fn delta_pct(&self, at: &Seen<'_>, run: RunId) -> Option<f64> {
        let base = at
            .night
            .baseline_of
            .get(run.0 as usize)
            .copied()
            .flatten()?;
        let (k, v) = headline(&at.night.state.run(run).metrics)?;
        let b = *at.night.state.run(base).metrics.get(k)?;
        crate::metric::improvement_pct(k, v, b)
    }

    /// Held or queued runs that `SkipCategory` for `cat` would skip, counted as the engine
    /// picks them (a queued run by its predicted or earlier finding).
    pub(crate) fn skippable(&self, at: &Seen<'_>, cat: Category) -> usize {
        at.night
            .state
            .runs
            .iter()
            .filter(|r| match &r.state {
                RunState::Held { category } => *category == cat,
                RunState::Queued => r.finding.as_ref().is_some_and(|f| f.category == cat),
                _ => false,
            })
            .count()
    }
}

/// Runs waiting for a decision or finished badly: what `]` and `[` jump between.
pub(crate) fn needs_a_look(s: &RunState) -> bool {
    matches!(
        s,
        RunState::Held { .. }
            | RunState::Finished {
                outcome: Outcome::Failed { .. }
            }
    )
}

enum SortKey {
    Text(String),
    Num(f64),
    Opt(Option<f64>),
}

impl SortKey {
    /// Missing values sort last in either direction.
    fn cmp_to(&self, o: &SortKey, reverse: bool) -> std::cmp::Ordering {
        use std::cmp::Ordering::*;
        let dir = |x: std::cmp::Ordering| if reverse { x.reverse() } else { x };
        match (self, o) {
            (SortKey::Text(a), SortKey::Text(b)) => dir(a.cmp(b)),
            (SortKey::Num(a), SortKey::Num(b)) => dir(a.total_cmp(b)),
            (SortKey::Opt(a), SortKey::Opt(b)) => match (a, b) {
                (Some(a), Some(b)) => dir(a.total_cmp(b)),
                (Some(_), None) => Less,
                (None, Some(_)) => Greater,
                (None, None) => Equal,
            },
            _ => Equal,
        }
    }
}
