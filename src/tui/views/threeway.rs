//! The 3-way view: one row per commit — each variant's median of the primary metric (with
//! its repeats), then each comparison's verdict with its delta, and what a verdict rests
//! on when it is weak ("n=1": a single run each side, no test possible; "uncal.": judged
//! by the uncalibrated threshold). The same report `results` prints (`report::build`).

use super::{block, fit, fmt_num};
use crate::report::{CommitRow, Comparison};
use crate::stats::{Method, Verdict};
use crate::tui::app::App;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Row, Table};
use ratatui::Frame;

/// A comparison's cell in `w` columns: verdict, delta and what the verdict rests on when it
/// is weak; where that does not fit, the verdict as an arrow — the number and the caveat
/// are never the part cut.
pub fn verdict_cell(c: &Comparison, w: usize) -> (String, Option<Verdict>) {
    let (full, v) = verdict_text(c, false);
    if full.chars().count() <= w {
        return (full, v);
    }
    (verdict_text(c, true).0, v)
}

fn verdict_text(c: &Comparison, compact: bool) -> (String, Option<Verdict>) {
    let Some(v) = c.verdict else {
        return (
            c.flag
                .as_deref()
                .map_or("—".to_string(), |f| format!("— {f}")),
            None,
        );
    };
    let delta = c
        .primary_stats()
        .map(|s| format!("{:+.1}%", s.improvement_pct))
        .unwrap_or_default();
    let word = if compact { arrow(v) } else { short(v) };
    let sep = if compact { "" } else { " " };
    let text = match c.method {
        Some(Method::TooFewRepeats) => format!("n=1 {delta}"),
        Some(Method::Uncalibrated) if compact => format!("{word}{delta} unc."),
        Some(Method::Uncalibrated) => format!("{word}{sep}{delta} uncal."),
        _ => format!("{word}{sep}{delta}"),
    };
    (text, Some(v))
}

fn short(v: Verdict) -> &'static str {
    match v {
        Verdict::Better => "better",
        Verdict::Worse => "worse",
        Verdict::NoChange => "same",
        Verdict::Inconclusive => "?",
    }
}

fn arrow(v: Verdict) -> &'static str {
    match v {
        Verdict::Better => "▲",
        Verdict::Worse => "▼",
        Verdict::NoChange => "=",
        Verdict::Inconclusive => "?",
    }
}

/// The metric a row is judged on: its first comparison's primary, else any it has.
fn primary(row: &CommitRow) -> Option<String> {
    row.comparisons
        .iter()
        .find_map(|c| c.primary.clone())
        .or_else(|| {
            row.cells
                .iter()
                .find_map(|c| c.metrics.keys().next().cloned())
        })
}

/// Whether a row has a comparison of the verdict `want` (see `App::verdict_filter`).
fn row_has(row: &CommitRow, want: &str) -> bool {
    row.comparisons.iter().any(|c| match want {
        "weak" => matches!(
            c.method,
            Some(Method::TooFewRepeats) | Some(Method::Uncalibrated)
        ),
        w => c.verdict.is_some_and(|v| short(v) == w),
    })
}

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let t = &app.theme;
    let report = app.report();
    let shown: Vec<&CommitRow> = report
        .rows
        .iter()
        .filter(|r| app.verdict_filter.as_ref().is_none_or(|w| row_has(r, w)))
        .collect();
    let variants: Vec<String> = app.variants.iter().map(|v| v.to_string()).collect();
    // The comparisons' labels, in the order the report makes them.
    let mut labels: Vec<String> = Vec::new();
    for r in &shown {
        for c in &r.comparisons {
            if !labels.contains(&c.label) {
                labels.push(c.label.clone());
            }
        }
    }
    let sel_commit = app
        .plan
        .commits
        .get(app.sel_commit)
        .map(|c| c.commit.clone());
    let title = Line::from(vec![
        Span::styled(
            format!(" 3-way · {} commits ", shown.len()),
            t.text(),
        ),
        Span::styled(
            match &app.verdict_filter {
                Some(v) => format!(" verdict={v} "),
                None => " :verdict better|worse|same|weak ".into(),
            },
            Style::default().fg(t.warn),
        ),
        Span::styled(
            " median of the primary metric (×n repeats) · n=1: single run · uncal.: threshold uncalibrated ",
            t.dim(),
        ),
    ]);
    let b = block(app, title, true);
    let inner = b.inner(area);
    f.render_widget(b, area);
    // Numbers before words: the commit, the values, the verdicts; the title only with room.
    // Column widths from the room there is (the table would squeeze them otherwise, and
    // cut what a cell says at its end).
    let value_w = 9u16;
    let n_verdicts = labels.len().max(1) as u16;
    let room = inner
        .width
        .saturating_sub(9 + (value_w + 1) * variants.len() as u16);
    let verdict_w = (room / n_verdicts).saturating_sub(1).clamp(8, 21);
    let fixed = 9 + (value_w + 1) * variants.len() as u16 + (verdict_w + 1) * labels.len() as u16;
    let title_w = inner.width.saturating_sub(fixed).min(30);
    let mut widths = vec![Constraint::Length(8)];
    widths.extend(variants.iter().map(|_| Constraint::Length(value_w)));
    widths.extend(labels.iter().map(|_| Constraint::Length(verdict_w)));
    if title_w >= 8 {
        widths.push(Constraint::Length(title_w));
    }
    let mut head: Vec<Cell> = vec![Cell::from("commit")];
    head.extend(
        variants
            .iter()
            .map(|v| Cell::from(fit(v, value_w as usize))),
    );
    head.extend(labels.iter().map(|l| {
        let l = l
            .replace(" vs ", "/")
            .replace("baseline", "base")
            .replace("agent:", "");
        Cell::from(fit(&l, verdict_w as usize))
    }));
    if title_w >= 8 {
        head.push(Cell::from("title"));
    }
    let body_h = inner.height.saturating_sub(1) as usize;
    let at = shown
        .iter()
        .position(|r| Some(&r.commit) == sel_commit.as_ref())
        .unwrap_or(0);
    let offset = at.saturating_sub(body_h.saturating_sub(1));
    let rows = shown
        .iter()
        .enumerate()
        .skip(offset)
        .take(body_h)
        .map(|(i, r)| {
            let key = primary(r);
            let mut cells = vec![Cell::from(r.commit.chars().take(8).collect::<String>())];
            for v in &variants {
                let text = r
                    .cells
                    .iter()
                    .find(|c| &c.variant == v)
                    .map(|c| match key.as_ref().and_then(|k| c.metrics.get(k)) {
                        Some(x) if c.n > 1 => format!("{}×{}", fmt_num(*x), c.n),
                        Some(x) => fmt_num(*x),
                        // The status word alone (`skipped`, not its reason).
                        None => c.status.split('(').next().unwrap_or("").to_string(),
                    })
                    .unwrap_or_else(|| "·".into());
                cells.push(Cell::from(fit(&text, value_w as usize)));
            }
            for l in &labels {
                let (text, v) = r
                    .comparisons
                    .iter()
                    .find(|c| &c.label == l)
                    .map(|c| verdict_cell(c, verdict_w as usize))
                    .unwrap_or(("·".into(), None));
                let style = match v {
                    Some(Verdict::Better) => Style::default().fg(t.ok),
                    Some(Verdict::Worse) => Style::default().fg(t.fail),
                    _ => t.dim(),
                };
                cells.push(Cell::from(fit(&text, verdict_w as usize)).style(style));
            }
            if title_w >= 8 {
                // As the queue names it (a commit without a title by its kind and notes).
                let title = app
                    .plan
                    .commits
                    .iter()
                    .find(|c| c.commit == r.commit)
                    .map_or_else(|| r.title.clone(), super::title_of);
                cells.push(Cell::from(fit(&title, title_w as usize)).style(t.dim()));
            }
            let row = Row::new(cells);
            if i == at {
                row.style(t.selected())
            } else {
                row
            }
        });
    let table = Table::new(rows, widths)
        .header(Row::new(head).style(t.dim().add_modifier(Modifier::BOLD)))
        .column_spacing(1);
    f.render_widget(table, inner);
}
