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
pub(crate) fn verdict_cell(c: &Comparison, w: usize) -> (String, Option<Verdict>) {
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
        Verdict::Inconclusive => "unknown",
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

/// A comparison's label in `w` columns, both sides kept: `claude_code/base` and
/// `claude_code/human` must not both read `claude_code…` at 80 columns, so the longer side
/// gives way first.
pub(crate) fn pair_label(label: &str, w: usize) -> String {
    let l = label.replace("baseline", "base").replace("agent:", "");
    let Some((a, b)) = l.split_once(" vs ") else {
        return fit(&l, w);
    };
    let (mut a, mut b) = (a.to_string(), b.to_string());
    while a.chars().count() + b.chars().count() + 1 > w {
        let (la, lb) = (a.chars().count(), b.chars().count());
        let side = if la >= lb { &mut a } else { &mut b };
        let keep = side.chars().count().saturating_sub(2);
        if keep < 2 {
            return fit(&l, w);
        }
        *side = format!("{}…", side.chars().take(keep).collect::<String>());
    }
    format!("{a}/{b}")
}

/// What the row is judged on, said once in the title: the metric, its unit, its direction.
fn metric_words(key: &str) -> String {
    let m = crate::metric::lookup(key);
    let name = if m.label.is_empty() { key } else { m.label };
    let dir = match m.better {
        crate::metric::Better::Higher => "higher is better",
        crate::metric::Better::Lower => "lower is better",
        crate::metric::Better::Neither => "not judged",
    };
    if m.unit.is_empty() || name.contains(m.unit) {
        format!("{name}, {dir}")
    } else {
        format!("{name} ({}), {dir}", m.unit)
    }
}

/// Which columns a width holds, by priority (k9s's way: whole columns go, none is cut to a
/// stub): the commit, every variant's value, the comparisons against the baseline, the
/// others, then the title. Returns (comparisons kept, verdict width, title width).
fn layout(
    width: u16,
    n_variants: usize,
    labels: &[String],
    value_w: u16,
) -> (Vec<usize>, u16, u16) {
    const MIN_VERDICT: u16 = 11;
    let fixed = 9 + (value_w + 1) * n_variants as u16;
    let room = width.saturating_sub(fixed);
    let fits = ((room + 1) / (MIN_VERDICT + 1)) as usize;
    let mut order: Vec<usize> = (0..labels.len()).collect();
    // Against the baseline first, in the report's order otherwise.
    order.sort_by_key(|&i| !labels[i].ends_with("vs baseline"));
    let mut keep: Vec<usize> = order.into_iter().take(fits.max(1)).collect();
    keep.sort_unstable();
    let n = keep.len().max(1) as u16;
    let verdict_w = (room / n).saturating_sub(1).clamp(MIN_VERDICT, 21);
    let used = fixed + (verdict_w + 1) * keep.len() as u16;
    let title_w = width.saturating_sub(used).min(30);
    (keep, verdict_w, title_w)
}

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let t = &app.ui.theme;
    let report = app.seen().report();
    let shown: Vec<&CommitRow> = report
        .rows
        .iter()
        .filter(|r| app.ui.verdict_filter.as_ref().is_none_or(|w| row_has(r, w)))
        .collect();
    let variants: Vec<String> = app.night.variants.iter().map(|v| v.to_string()).collect();
    // The comparisons' labels, in the order the report makes them.
    let mut all_labels: Vec<String> = Vec::new();
    for r in &shown {
        for c in &r.comparisons {
            if !all_labels.contains(&c.label) {
                all_labels.push(c.label.clone());
            }
        }
    }
    let sel_commit = app
        .night
        .plan
        .commits
        .get(app.ui.sel_commit)
        .map(|c| c.commit.clone());
    let at = shown
        .iter()
        .position(|r| Some(&r.commit) == sel_commit.as_ref())
        .unwrap_or(0);
    let inner_w = area.width.saturating_sub(2);
    // Wider value columns (whole variant names, `2350.5×3`) only once every verdict has
    // its full width and the title its room.
    let full = 9 + 15 * variants.len() + 22 * all_labels.len() + 30;
    let value_w = if inner_w as usize >= full { 14u16 } else { 9 };
    let (keep, verdict_w, title_w) = layout(inner_w, variants.len(), &all_labels, value_w);
    let labels: Vec<&String> = keep.iter().map(|&i| &all_labels[i]).collect();
    let hidden = all_labels.len() - labels.len();
    // The metric the selected row is judged on, with its unit and direction: a cell's
    // number never changes meaning unannounced.
    let metric = shown
        .get(at)
        .and_then(|r| primary(r))
        .or_else(|| shown.iter().find_map(|r| primary(r)));
    let mut title = vec![Span::styled(
        format!(" 3-way · {} commits ", shown.len()),
        t.text(),
    )];
    if let Some(k) = &metric {
        title.push(Span::styled(
            format!(" {} ", metric_words(k)),
            Style::default().fg(t.accent),
        ));
    }
    if hidden > 0 {
        title.push(Span::styled(
            format!(" +{hidden} comparisons need a wider terminal "),
            Style::default().fg(t.warn),
        ));
    }
    title.push(Span::styled(
        match &app.ui.verdict_filter {
            Some(v) => format!(" verdict={v} "),
            None => " :verdict better|worse|same|weak ".into(),
        },
        Style::default().fg(t.warn),
    ));
    title.push(Span::styled(
        " median (×n repeats) · n=1: single run · uncal.: threshold uncalibrated ",
        t.dim(),
    ));
    let b = block(app, Line::from(title), true);
    let inner = b.inner(area);
    f.render_widget(b, area);
    if inner.height < 3 {
        return;
    }
    // The last line names what the keys act on: the selected cell, never the whole row.
    let target = app
        .selected_run()
        .map(|r| &app.night.plan.runs[r.0 as usize]);
    let foot = match target {
        Some(spec) => {
            let mut spans = vec![
                Span::styled(" ▸ ", Style::default().fg(t.accent)),
                Span::styled(spec.key.clone(), t.selected()),
            ];
            // Its P99 TTFT with the interval its requests give (before the keys' hint,
            // which a narrow terminal cuts first).
            let requests = app.night.state.run(spec.id).requests.as_deref();
            if let Some(q) = requests.and_then(|r| r.quantile("ttft", 0.99)) {
                spans.push(Span::styled(
                    format!("  {}", q.label()),
                    Style::default().fg(t.accent),
                ));
            }
            spans.push(Span::styled(
                "  s skip · r retry · f fix · enter details · h/l another variant",
                t.dim(),
            ));
            Line::from(spans)
        }
        None => Line::from(Span::styled(
            " ▸ no run in this cell (h/l another variant)",
            t.dim(),
        )),
    };
    let foot_area = Rect {
        y: inner.y + inner.height - 1,
        height: 1,
        ..inner
    };
    f.render_widget(ratatui::widgets::Paragraph::new(foot), foot_area);
    let table_area = Rect {
        height: inner.height - 1,
        ..inner
    };
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
    head.extend(
        labels
            .iter()
            .map(|l| Cell::from(pair_label(l, verdict_w as usize))),
    );
    if title_w >= 8 {
        head.push(Cell::from("title"));
    }
    let body_h = table_area.height.saturating_sub(1) as usize;
    let offset = at.saturating_sub(body_h.saturating_sub(1));
    let rows = shown
        .iter()
        .enumerate()
        .skip(offset)
        .take(body_h)
        .map(|(i, r)| {
            let key = primary(r);
            let sel_row = i == at;
            let commit = r.commit.chars().take(8).collect::<String>();
            let mut cells = vec![if sel_row {
                Cell::from(commit).style(t.text().add_modifier(Modifier::BOLD))
            } else {
                Cell::from(commit)
            }];
            for (vi, v) in variants.iter().enumerate() {
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
                // The one cell the keys act on, marked without colour too.
                let selected = sel_row && vi == app.ui.sel_variant;
                let text = if selected { format!("▸{text}") } else { text };
                let cell = Cell::from(fit(&text, value_w as usize));
                cells.push(if selected {
                    cell.style(t.selected())
                } else {
                    cell
                });
            }
            for l in &labels {
                let (text, v) = r
                    .comparisons
                    .iter()
                    .find(|c| &&c.label == l)
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
                    .night
                    .plan
                    .commits
                    .iter()
                    .find(|c| c.commit == r.commit)
                    .map_or_else(|| r.title.clone(), super::title_of);
                cells.push(Cell::from(fit(&title, title_w as usize)).style(t.dim()));
            }
            Row::new(cells)
        });
    let table = Table::new(rows, widths)
        .header(Row::new(head).style(t.dim().add_modifier(Modifier::BOLD)))
        .column_spacing(1);
    f.render_widget(table, table_area);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pair_labels_keep_both_sides_apart() {
        let a = pair_label("agent:claude_code vs baseline", 12);
        let b = pair_label("agent:claude_code vs human", 12);
        assert_ne!(a, b);
        assert!(
            a.chars().count() <= 12 && b.chars().count() <= 12,
            "{a} {b}"
        );
        assert!(a.ends_with("/base") && b.ends_with("/human"), "{a} {b}");
        assert_eq!(pair_label("human vs baseline", 21), "human/base");
    }

    #[test]
    fn narrow_widths_drop_whole_comparisons_against_the_baseline_last() {
        let labels: Vec<String> = [
            "human vs baseline",
            "agent:a vs baseline",
            "agent:a vs human",
            "agent:b vs baseline",
            "agent:b vs human",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let (keep, w, _) = layout(78, 4, &labels, 9);
        assert!(w >= 11);
        assert!(keep.len() < labels.len());
        assert!(
            keep.iter().all(|&i| labels[i].ends_with("vs baseline")),
            "{keep:?}"
        );
        let (keep, _, _) = layout(200, 4, &labels, 9);
        assert_eq!(keep.len(), 5);
    }
}
