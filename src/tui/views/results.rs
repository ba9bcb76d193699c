//! All commits × variants: sortable by any column, filtered by status, category, model or
//! text.

use super::{block, fit, fmt_num};
use crate::tui::app::{headline, run_category, App, RESULT_COLUMNS};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table};
use ratatui::Frame;

const CATEGORY: usize = 4;

/// The columns a width holds, as (index into `RESULT_COLUMNS`, width), k9s's way: whole
/// columns leave by priority (title, attempt, model, then the category, which the status
/// cell takes over), the variant narrows, and what stays is never cut to a stub. The
/// commit, the variant, the status, the number with its unit and its Δ stay at 80
/// columns.
pub(crate) fn columns(width: u16) -> Vec<(usize, u16)> {
    let mut cols: Vec<(usize, u16)> = vec![
        (0, 9),
        (1, 18),
        (2, 22),
        (3, 12),
        (CATEGORY, 22),
        (5, 16),
        (6, 16),
        (7, 7),
        (8, 10),
    ];
    let total = |c: &[(usize, u16)]| c.iter().map(|(_, w)| w + 1).sum::<u16>();
    // Dropped first to last.
    for gone in [8usize, 7, 2, CATEGORY] {
        if total(&cols) <= width {
            return cols;
        }
        cols.retain(|(i, _)| *i != gone);
        if gone == CATEGORY {
            // The status cell says the category now: `✗ server_start_ti…`.
            if let Some(c) = cols.iter_mut().find(|c| c.0 == 3) {
                c.1 = 16;
            }
        }
    }
    if total(&cols) > width {
        if let Some(c) = cols.iter_mut().find(|c| c.0 == 1) {
            c.1 = 14;
        }
    }
    if total(&cols) > width {
        cols.retain(|(i, _)| *i != 6);
    }
    cols
}

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let t = &app.ui.theme;
    let (rows, sel) = app.results_selection();
    let r = &app.ui.results;
    // The selected run's commit, charted under the table when there is room.
    let picked = sel
        .and_then(|i| rows.get(i))
        .map(|run| app.night.plan.runs[run.0 as usize].commit);
    let (area, panel) = match picked {
        Some(c) if area.height >= 22 => {
            let [a, p] = Layout::vertical([Constraint::Min(8), Constraint::Length(8)]).areas(area);
            (a, Some((p, c)))
        }
        _ => (area, None),
    };
    if let Some((p, c)) = panel {
        super::compare::draw(f, app, p, c);
    }
    // The night's failure groups above the table: one row per kind of unknown failure.
    let groups = app.seen().failure_groups();
    let area = if !groups.is_empty() && area.height >= 14 {
        let shown = groups.len().min(3) as u16;
        let [g, rest] =
            Layout::vertical([Constraint::Length(shown + 2), Constraint::Min(6)]).areas(area);
        draw_groups(f, app, g, &groups);
        rest
    } else {
        area
    };
    let mut filters = Vec::new();
    if let Some(s) = r.status {
        filters.push(format!("status={}", s.label()));
    }
    if let Some(c) = r.category {
        filters.push(format!("category={c}"));
    }
    if let Some(m) = &r.model {
        filters.push(format!("model={m}"));
    }
    if let Some(x) = &r.text {
        filters.push(format!("text={x}"));
    }
    if let Some(g) = &r.group {
        filters.push(format!("group={g}"));
    }
    let title = Line::from(vec![
        Span::styled(
            format!(
                " results · {} of {} runs ",
                rows.len(),
                app.night.plan.runs.len()
            ),
            t.text(),
        ),
        Span::styled(
            format!(
                " sort {} {} ",
                RESULT_COLUMNS[r.sort_col],
                if r.reverse { "↓" } else { "↑" }
            ),
            t.dim(),
        ),
        Span::styled(
            if filters.is_empty() {
                " no filter (x status, / text, :filter) ".to_string()
            } else {
                format!(" filter {} ", filters.join(" "))
            },
            Style::default().fg(t.warn),
        ),
    ]);
    let b = block(app, title, true);
    let inner = b.inner(area);
    f.render_widget(b, area);
    let body_h = inner.height.saturating_sub(1) as usize;
    let sel = sel.unwrap_or(0);
    let mut offset = app.hits.results_offset.get();
    if sel < offset {
        offset = sel;
    } else if sel >= offset + body_h {
        offset = sel + 1 - body_h;
    }
    app.hits.results_offset.set(offset);
    app.hits.results_rows.set(Rect {
        y: inner.y + 1,
        height: inner.height.saturating_sub(1),
        ..inner
    });
    let cols = columns(inner.width);
    let shown = |i: usize| cols.iter().any(|(c, _)| *c == i);
    // Without its own column the category takes the status word's place: `✗ cuda_oom`.
    let merged = !shown(CATEGORY);
    let header = Row::new(cols.iter().map(|&(i, _)| {
        let s = if i == r.sort_col {
            t.text().add_modifier(Modifier::BOLD | Modifier::UNDERLINED)
        } else {
            t.dim()
        };
        Cell::from(RESULT_COLUMNS[i]).style(s)
    }));
    let body = rows
        .iter()
        .enumerate()
        .skip(offset)
        .take(body_h)
        .map(|(i, run)| {
            let spec = &app.night.plan.runs[run.0 as usize];
            let c = app.night.plan.commit_of(spec);
            let rec = app.night.state.run(*run);
            let st = super::queue::state_style(t, &rec.state);
            let cat = run_category(&rec.state, rec.finding.as_ref())
                .map(|c| c.to_string())
                .unwrap_or_default();
            let head = headline(&rec.metrics);
            let delta = head
                .zip(app.delta_pct(*run))
                .map(|((k, _), d)| crate::metric::delta_label(k, d))
                .unwrap_or_default();
            let head = head
                .map(|(k, v)| format!("{} {}", fmt_num(v), crate::metric::short_name(k)))
                .unwrap_or_default();
            let model = c.model.as_deref().unwrap_or("-");
            let word = if merged && !cat.is_empty() {
                cat.clone()
            } else {
                status_word(&rec.state).to_string()
            };
            let mut cells = vec![
                Cell::from(c.short().to_string()),
                Cell::from(spec.variant.to_string()),
                Cell::from(fit(model.rsplit('/').next().unwrap_or(model), 22)),
                Cell::from(format!("{} {word}", super::queue::glyph(&rec.state)))
                    // On the selection bar the state's colour gives way to the bar's: a held
                    // run's yellow on high-contrast's yellow bar would vanish.
                    .style(if i == sel { t.selected() } else { st }),
                Cell::from(cat),
                Cell::from(head),
                Cell::from(delta),
                Cell::from(rec.attempt.to_string()),
                Cell::from(super::title_of(c)),
            ];
            // Whole columns, by priority: never each cut to a stub.
            let mut k = 0;
            cells.retain(|_| {
                k += 1;
                shown(k - 1)
            });
            let row = Row::new(cells);
            if i == sel {
                row.style(t.selected())
            } else {
                row.style(t.text())
            }
        });
    let widths: Vec<Constraint> = cols
        .iter()
        .map(|&(i, w)| {
            if i == RESULT_COLUMNS.len() - 1 {
                Constraint::Min(w)
            } else {
                Constraint::Length(w)
            }
        })
        .collect();
    f.render_widget(
        Table::new(body, widths).header(header).column_spacing(1),
        inner,
    );
    if rows.is_empty() && inner.height >= 2 {
        // A blank table reads as a broken screen, or as a night with nothing in it.
        let why = if filters.is_empty() {
            "no runs in this plan".to_string()
        } else {
            format!(
                "no runs match {} · {} cycles the status, :filter clear shows all",
                filters.join(" "),
                app.keymap
                    .label_of(crate::tui::keymap::Action::FilterStatus)
            )
        };
        let at = Rect {
            y: inner.y + 1,
            height: 1,
            ..inner
        };
        f.render_widget(
            Paragraph::new(fit(&why, inner.width as usize)).style(Style::default().fg(t.warn)),
            at,
        );
    }
}

/// One row per failure group (largest first): id, runs, first line, models, vLLM.
fn draw_groups(
    f: &mut Frame,
    app: &App,
    area: Rect,
    groups: &[crate::report::groups::FailureGroup],
) {
    let t = &app.ui.theme;
    let runs: usize = groups.iter().map(|g| g.count).sum();
    let title = Line::from(vec![
        Span::styled(
            format!(
                " failure groups · {runs} unknown failures in {} group{} ",
                groups.len(),
                if groups.len() == 1 { "" } else { "s" }
            ),
            t.text(),
        ),
        Span::styled(
            format!(
                " {} on a run of one: skip, retry or fix all · :filter group=ID ",
                app.keymap
                    .label_of(crate::tui::keymap::Action::FailureGroup)
            ),
            t.dim(),
        ),
    ]);
    let b = block(app, title, false);
    let inner = b.inner(area);
    f.render_widget(b, area);
    let join = |s: &std::collections::BTreeSet<String>| {
        if s.is_empty() {
            "-".to_string()
        } else {
            s.iter()
                .map(|m| m.rsplit('/').next().unwrap_or(m).to_string())
                .collect::<Vec<_>>()
                .join(",")
        }
    };
    let rows = groups.iter().take(inner.height as usize).map(|g| {
        let count = if g.held > 0 {
            format!("{} ({} held)", g.count, g.held)
        } else {
            g.count.to_string()
        };
        Row::new(vec![
            Cell::from(g.id.clone()).style(Style::default().fg(t.warn)),
            Cell::from(count),
            Cell::from(crate::report::groups::short_line(&g.first_line).to_string()),
            Cell::from(fit(&join(&g.models), 22)),
            Cell::from(fit(&join(&g.versions), 16)),
        ])
        .style(t.text())
    });
    let widths = [
        Constraint::Length(12),
        Constraint::Length(12),
        Constraint::Min(20),
        Constraint::Length(22),
        Constraint::Length(16),
    ];
    f.render_widget(Table::new(rows, widths).column_spacing(1), inner);
}

fn status_word(s: &crate::model::RunState) -> String {
    use crate::model::RunState;
    match s {
        RunState::Queued => "queued".into(),
        RunState::Active { stage } => stage.short().into(),
        RunState::Held { .. } => "held".into(),
        RunState::Finished { outcome } => outcome.status().into(),
    }
}
