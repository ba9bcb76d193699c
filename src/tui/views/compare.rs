//! Under the results table: the selected commit's comparisons as a chart of Δ against the
//! reference with each interval as a whisker (ratatui's `Chart`), and each variant's
//! repeats of the headline metric as a `Sparkline`. The numbers are the report's own
//! ([`crate::report`]), computed for this one commit.

use super::{block, fit};
use crate::record::{RunDoc, RunInfo};
use crate::report::{self, CommitRow, Report};
use crate::tui::app::App;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Chart, Dataset, GraphType, Paragraph, Sparkline};
use ratatui::Frame;

/// The report for one commit of the plan, from the live state.
pub(crate) fn commit_report(app: &App, commit: usize) -> Report {
    let docs: Vec<RunDoc> = app
        .night
        .plan
        .runs
        .iter()
        .filter(|s| s.commit == commit)
        .map(|s| {
            RunDoc::of_record(
                RunInfo::from_spec(&app.night.plan, s),
                app.night.state.run(s.id),
            )
        })
        .collect();
    let refs: Vec<&RunDoc> = docs.iter().collect();
    report::build(&refs, &app.seen().report_options())
}

pub fn draw(f: &mut Frame, app: &App, area: Rect, commit: usize) {
    let t = &app.ui.theme;
    let r = commit_report(app, commit);
    let short = app.night.plan.commits.get(commit).map_or("", |c| c.short());
    let title = Line::from(Span::styled(
        format!(" {short} · Δ vs reference, whiskers = interval · repeats "),
        t.text(),
    ));
    let b = block(app, title, false);
    let inner = b.inner(area);
    f.render_widget(b, area);
    let Some(row) = r.rows.first() else {
        return;
    };
    let [chart_a, spark_a] =
        Layout::horizontal([Constraint::Percentage(62), Constraint::Percentage(38)]).areas(inner);
    draw_chart(f, app, chart_a, row);
    draw_sparks(f, app, spark_a, row);
}

fn draw_chart(f: &mut Frame, app: &App, area: Rect, row: &CommitRow) {
    let t = &app.ui.theme;
    let shown: Vec<_> = row
        .comparisons
        .iter()
        .filter_map(|c| c.primary_stats().map(|s| (c, s)))
        .collect();
    if shown.is_empty() {
        let why = if row.comparisons.is_empty() {
            "no comparison yet"
        } else {
            "no comparable results yet"
        };
        f.render_widget(Paragraph::new(Span::styled(why, t.dim())), area);
        return;
    }
    // Labels and verdicts take the left columns; the chart the rest.
    let lw = 34u16.min(area.width / 2);
    let [labels_a, plot_a] =
        Layout::horizontal([Constraint::Length(lw), Constraint::Min(10)]).areas(area);
    let n = shown.len();
    let mut lines = Vec::new();
    for (c, s) in &shown {
        let style = match c.verdict {
            Some(crate::stats::Verdict::Better) => Style::default().fg(t.ok),
            Some(crate::stats::Verdict::Worse) => Style::default().fg(t.fail),
            _ => t.dim(),
        };
        let verdict = c.verdict.map_or("flagged", |v| v.words());
        // A verdict that rests on little says so, as `results` does.
        let caveat = match c.method {
            Some(crate::stats::Method::Uncalibrated) => " unc.",
            Some(crate::stats::Method::TooFewRepeats) => " n=1",
            _ => "",
        };
        lines.push(Line::from(vec![Span::styled(
            fit(&c.label, lw.saturating_sub(1) as usize),
            t.text(),
        )]));
        lines.push(Line::from(Span::styled(
            fit(
                &format!(" {verdict}: {}{caveat}", s.delta_label()),
                lw.saturating_sub(1) as usize,
            ),
            style,
        )));
    }
    f.render_widget(Paragraph::new(lines), labels_a);
    // One whisker per comparison, top to bottom, and the Δ as a point on it.
    let ys = |i: usize| (n - i) as f64;
    let mut lo = 0.0f64;
    let mut hi = 0.0f64;
    let whiskers: Vec<Vec<(f64, f64)>> = shown
        .iter()
        .enumerate()
        .map(|(i, (_, s))| {
            let a = s.ci_low_pct.unwrap_or(s.improvement_pct);
            let b = s.ci_high_pct.unwrap_or(s.improvement_pct);
            lo = lo.min(a).min(s.improvement_pct);
            hi = hi.max(b).max(s.improvement_pct);
            vec![(a, ys(i)), (b, ys(i))]
        })
        .collect();
    let points: Vec<Vec<(f64, f64)>> = shown
        .iter()
        .enumerate()
        .map(|(i, (_, s))| vec![(s.improvement_pct, ys(i))])
        .collect();
    // Symmetric about 0, so the middle label is the zero line and left reads worse.
    let m = lo.abs().max(hi.abs()) * 1.1 + 1.0;
    let (lo, hi) = (-m, m);
    let zero = vec![(0.0, 0.5), (0.0, n as f64 + 0.5)];
    let mut sets = vec![Dataset::default()
        .graph_type(GraphType::Line)
        .marker(Marker::Braille)
        .style(t.dim())
        .data(&zero)];
    for (i, w) in whiskers.iter().enumerate() {
        let st = match shown[i].0.verdict {
            Some(crate::stats::Verdict::Better) => Style::default().fg(t.ok),
            Some(crate::stats::Verdict::Worse) => Style::default().fg(t.fail),
            _ => Style::default().fg(t.accent),
        };
        sets.push(
            Dataset::default()
                .graph_type(GraphType::Line)
                .marker(Marker::Braille)
                .style(st)
                .data(w),
        );
        sets.push(
            Dataset::default()
                .graph_type(GraphType::Scatter)
                .marker(Marker::Block)
                .style(st)
                .data(&points[i]),
        );
    }
    let chart = Chart::new(sets)
        .x_axis(Axis::default().bounds([lo, hi]).style(t.dim()).labels([
            Span::raw(format!("worse {m:.0}%")),
            Span::raw("0"),
            Span::raw(format!("better {m:.0}%")),
        ]))
        .y_axis(Axis::default().bounds([0.5, n as f64 + 0.5]));
    f.render_widget(chart, plot_a);
}

fn draw_sparks(f: &mut Frame, app: &App, area: Rect, row: &CommitRow) {
    let t = &app.ui.theme;
    let key = row
        .comparisons
        .iter()
        .find_map(|c| c.primary.clone())
        .or_else(|| {
            row.cells
                .iter()
                .find_map(|c| crate::metric::headline(&c.metrics).map(|h| h.0.to_string()))
        });
    let Some(key) = key else {
        f.render_widget(
            Paragraph::new(Span::styled("no results yet", t.dim())),
            area,
        );
        return;
    };
    let all: Vec<f64> = row
        .cells
        .iter()
        .filter_map(|c| c.samples.get(&key))
        .flatten()
        .copied()
        .collect();
    let (min, max) = all
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(*x), b.max(*x)));
    let span = (max - min).max(f64::EPSILON);
    let rows = Layout::vertical(vec![Constraint::Length(1); area.height as usize]).split(area);
    let lw = 22usize.min(area.width as usize / 2);
    for (i, c) in row.cells.iter().enumerate() {
        let Some(a) = rows.get(i) else { break };
        let [la, sa] =
            Layout::horizontal([Constraint::Length(lw as u16), Constraint::Min(1)]).areas(*a);
        let v = c.samples.get(&key).cloned().unwrap_or_default();
        let label = format!("{} n={}", c.variant, c.n);
        f.render_widget(
            Paragraph::new(Span::styled(fit(&label, lw.saturating_sub(1)), t.dim())),
            la,
        );
        // Bars from the night's lowest to its highest value of this metric, so variants
        // compare at a glance; one bar per counted repeat, in repeat order.
        let data: Vec<u64> = v
            .iter()
            .map(|x| 1 + ((x - min) / span * 7.0).round() as u64)
            .collect();
        f.render_widget(
            Sparkline::default()
                .data(&data)
                .max(8)
                .style(Style::default().fg(t.accent)),
            sa,
        );
    }
}
