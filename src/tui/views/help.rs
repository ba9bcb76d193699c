//! The `?` screen, generated from the key map.

use crate::tui::app::App;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};
use ratatui::Frame;

pub fn draw(f: &mut Frame, app: &App, area: Rect, scroll: usize) {
    let t = &app.ui.theme;
    let mut lines = Vec::new();
    let mut section = "";
    for (sec, keys, help) in app.keymap.help_rows() {
        if sec != section {
            if !section.is_empty() {
                lines.push(Line::from(""));
            }
            lines.push(Line::from(Span::styled(
                sec.to_uppercase(),
                t.text().add_modifier(Modifier::BOLD),
            )));
            section = sec;
        }
        lines.push(Line::from(vec![
            Span::styled(
                format!("  {keys:<14}"),
                ratatui::style::Style::default().fg(t.accent),
            ),
            Span::styled(help.to_string(), t.text()),
        ]));
    }
    lines.push(Line::from(""));
    lines.push(Line::from(Span::styled(
        "COMMANDS (:)",
        t.text().add_modifier(Modifier::BOLD),
    )));
    for c in [
        ":pause  :resume  :export [PATH]  :theme NAME  :q  :q!",
        ":sweep  :logs  :results  :sort COLUMN  :skip-category CATEGORY",
        ":filter status=S | category=C | model=M | group=ID | TEXT | clear",
        ":group [ID]  :skip-group [ID]  :retry-group [ID]  :fix-group RECIPE [ID]",
        ":fix-category [CATEGORY [RECIPE]] (a rule for the night)",
        ":recipes (the fix recipes)  :3way  :verdict better|worse|same|weak · tab completes",
    ] {
        lines.push(Line::from(Span::styled(format!("  {c}"), t.text())));
    }
    lines.push(Line::from(""));
    lines.push(Line::from(Span::styled(
        "mouse: click selects, wheel scrolls · esc closes",
        t.dim(),
    )));
    let b = super::block(app, " help · keys ", true);
    let inner = b.inner(area);
    f.render_widget(Clear, area);
    let max_scroll = lines.len().saturating_sub(inner.height as usize);
    app.hits.help_max.set(max_scroll);
    f.render_widget(
        Paragraph::new(lines)
            .style(t.text())
            .scroll((scroll.min(max_scroll) as u16, 0))
            .block(b),
        area,
    );
}
