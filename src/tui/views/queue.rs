//! The commit queue: a row per commit, a cell per variant with a state glyph and the
//! headline metric.

use super::{block, fit, fmt_num, title_of};
use crate::model::{Outcome, RunState};
use crate::tui::app::{headline, App};
use crate::tui::theme::Theme;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

pub const CELL_W: usize = 12;

pub fn glyph(s: &RunState) -> &'static str {
    match s {
        RunState::Queued => "·",
        RunState::Active { .. } => "▶",
        RunState::Held { .. } => "!",
        RunState::Finished { outcome } => match outcome {
            Outcome::Success => "✓",
            Outcome::Failed { .. } => "✗",
            Outcome::Skipped { .. } => "⊘",
            Outcome::Cancelled => "⊗",
        },
    }
}

pub(crate) fn state_style(t: &Theme, s: &RunState) -> Style {
    let c = match s {
        RunState::Queued => t.queued,
        RunState::Active { .. } => t.active,
        RunState::Held { .. } => t.warn,
        RunState::Finished { outcome } => match outcome {
            Outcome::Success => t.ok,
            Outcome::Failed { .. } => t.fail,
            _ => t.skipped,
        },
    };
    Style::default().fg(c)
}

pub fn draw(f: &mut Frame, app: &App, area: Rect, focus: bool) {
    let t = &app.ui.theme;
    let title = format!(
        " queue · {} commits × {} variants ",
        app.night.cells.len(),
        app.night.variants.len()
    );
    let b = block(app, title, focus);
    let inner = b.inner(area);
    f.render_widget(b, area);
    if inner.height < 2 {
        return;
    }
    // Status cells grow with the terminal (up to 32 columns), leaving half of what the
    // minimum layout does not use to the title and model.
    let n = app.night.variants.len().max(1);
    let spare = (inner.width as usize).saturating_sub(10 + CELL_W * n + 40);
    // Narrower than every variant's full cell: the cells share what there is (a glyph and
    // a number still fit in 8), and the title goes first — never a variant cut to a stub.
    let squeezed = (inner.width as usize).saturating_sub(10) / n;
    let cell_w = (CELL_W + spare / 2 / n).min(32).min(squeezed.max(8));
    let cells_w = cell_w * app.night.variants.len();
    let fixed = 10 + cells_w;
    let free = (inner.width as usize).saturating_sub(fixed);
    let model_w = if free > 40 { 18.min(free / 3) } else { 0 };
    let title_w = free.saturating_sub(model_w + if model_w > 0 { 1 } else { 0 });
    // A title column narrower than a word is not shown at all (nor its header).
    let title_w = if title_w < 6 { 0 } else { title_w };
    // Header row.
    let mut head = vec![Span::styled(format!(" {:<9}", "commit"), t.dim())];
    head.push(Span::styled(
        format!(
            "{:<w$}",
            if title_w > 0 { "title" } else { "" },
            w = title_w
        ),
        t.dim(),
    ));
    if model_w > 0 {
        head.push(Span::styled(
            format!(" {:<w$}", "model", w = model_w),
            t.dim(),
        ));
    }
    for v in &app.night.variants {
        head.push(Span::styled(
            format!("{:<w$}", fit(&format!(" {v}"), cell_w), w = cell_w),
            t.dim(),
        ));
    }
    let rows_h = inner.height as usize - 1;
    let n = app.night.cells.len();
    let mut offset = app.hits.queue_offset.get();
    if app.ui.sel_commit < offset {
        offset = app.ui.sel_commit;
    } else if app.ui.sel_commit >= offset + rows_h {
        offset = app.ui.sel_commit + 1 - rows_h;
    }
    offset = offset.min(n.saturating_sub(rows_h));
    app.hits.queue_offset.set(offset);
    app.hits.queue_rows.set(Rect {
        y: inner.y + 1,
        height: inner.height - 1,
        ..inner
    });
    let cells_x = inner.x + (inner.width as usize - cells_w.min(inner.width as usize)) as u16;
    app.hits.queue_cells_x.set((cells_x, cell_w as u16));
    let mut lines = vec![Line::from(head)];
    for ci in offset..(offset + rows_h).min(n) {
        let c = &app.night.plan.commits[ci];
        let sel_row = ci == app.ui.sel_commit;
        let row_style = if sel_row {
            t.text().add_modifier(Modifier::BOLD)
        } else {
            t.text()
        };
        let marker = if sel_row { "▌" } else { " " };
        let mut spans = vec![
            Span::styled(marker, Style::default().fg(t.accent)),
            Span::styled(format!("{:<9}", fit(c.short(), 8)), row_style),
            Span::styled(
                format!("{:<w$}", fit(&title_of(c), title_w), w = title_w),
                row_style,
            ),
        ];
        if model_w > 0 {
            let m = c.model.as_deref().unwrap_or("-");
            let m = m.rsplit('/').next().unwrap_or(m);
            spans.push(Span::styled(
                format!(" {:<w$}", fit(m, model_w), w = model_w),
                t.dim(),
            ));
        }
        for (vi, cell) in app.night.cells[ci].iter().enumerate() {
            let text = match cell {
                None => format!("{:<w$}", " -", w = cell_w),
                Some(run) => {
                    let r = app.night.state.run(*run);
                    let metric = match (&r.state, headline(&r.metrics)) {
                        (_, Some((_, v))) => fmt_num(v),
                        (RunState::Active { stage }, None) => stage.short().to_string(),
                        // Held, failed, or skipped after a diagnosis: the cause.
                        (_, None) => r.category().map(|c| c.to_string()).unwrap_or_default(),
                    };
                    // A marker besides the colour, so the selection reads without colour.
                    let mark = if sel_row && vi == app.ui.sel_variant {
                        "▸"
                    } else {
                        " "
                    };
                    format!(
                        "{:<w$}",
                        fit(&format!("{mark}{} {metric}", glyph(&r.state)), cell_w),
                        w = cell_w
                    )
                }
            };
            let mut style = cell
                .map(|r| state_style(t, &app.night.state.run(r).state))
                .unwrap_or(t.dim());
            if sel_row && vi == app.ui.sel_variant {
                style = t.selected();
            }
            spans.push(Span::styled(text, style));
        }
        lines.push(Line::from(spans));
    }
    f.render_widget(Paragraph::new(lines), inner);
}
