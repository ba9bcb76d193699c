//! The log pane: server and benchmark tabs of the selected run, follow mode, search with
//! highlighted matches, error lines highlighted, the diagnosis banner on top.

use super::{block, fit};
use crate::tui::app::{find_all, App, LogTab};
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

pub fn draw(f: &mut Frame, app: &App, area: Rect, focus: bool) {
    let t = &app.ui.theme;
    let run = app.selected_run();
    let tab = |tab: LogTab| {
        let s = if app.ui.log_tab == tab {
            t.text().add_modifier(Modifier::BOLD | Modifier::UNDERLINED)
        } else {
            t.dim()
        };
        Span::styled(format!(" {} ", tab.label()), s)
    };
    let mut title = vec![
        Span::styled(" logs ", t.text()),
        tab(LogTab::Server),
        tab(LogTab::Bench),
    ];
    if let Some(r) = run {
        title.push(Span::styled(
            format!(" {} ", app.night.plan.runs[r.0 as usize].key),
            t.dim(),
        ));
    }
    if app.ui.wrap {
        title.push(Span::styled(" wrap ", t.dim()));
    }
    title.push(Span::styled(
        if app.ui.follow {
            " follow "
        } else {
            " paused scroll "
        },
        Style::default().fg(if app.ui.follow { t.ok } else { t.warn }),
    ));
    if let Some(q) = &app.ui.search {
        // Which match of how many (lines with a match, in this run's kept lines).
        let (n, at) = app.shown_log().map_or((0, None), |lines| {
            let hits: Vec<usize> = lines
                .iter()
                .enumerate()
                .filter(|(_, l)| find_all(&l.text, q).next().is_some())
                .map(|(i, _)| i)
                .collect();
            let at = app
                .ui
                .search_at
                .and_then(|s| hits.iter().position(|h| *h == s));
            (hits.len(), at)
        });
        let count = match at {
            Some(i) => format!("{}/{n}", i + 1),
            None => format!("{n} matches"),
        };
        title.push(Span::styled(format!(" /{q} {count} "), t.matched()));
    }
    let b = block(app, Line::from(title), focus);
    let mut inner = b.inner(area);
    f.render_widget(b, area);
    app.hits.logs.set(inner);
    // Banner for a run that failed and waits for a key.
    if let Some(r) = run {
        if app.night.current_finding(r).is_some() && inner.height > 2 {
            let text = super::active::banner_text(app, r);
            f.render_widget(
                Paragraph::new(Span::styled(fit(&text, inner.width as usize), t.banner())),
                Rect { height: 1, ..inner },
            );
            inner.y += 1;
            inner.height -= 1;
        }
    }
    let Some(lines) = app.shown_log() else {
        let msg = match run {
            Some(_) => "no log lines yet (full logs are on disk)",
            None => "select a run",
        };
        f.render_widget(Paragraph::new(msg).style(t.dim()), inner);
        return;
    };
    let h = inner.height as usize;
    let w = inner.width as usize;
    // Scrolled back while the ring dropped its oldest lines: the view stops at the oldest
    // full screen rather than scrolling off into nothing.
    let end = lines
        .len()
        .saturating_sub(app.ui.log_scroll)
        .max(h.min(lines.len()));
    if app.ui.wrap && w > 0 {
        // Wrapped at the pane's width, character by character (a log line's "words" are
        // paths and hashes): from the newest line back until the pane is full, so the
        // newest line is still the last one shown, whole.
        let mut rows: Vec<Line> = Vec::new();
        for l in lines.iter().take(end).rev() {
            let base = if l.error { t.error() } else { t.text() };
            let mut text = l.tag.map(|tag| format!("[{tag}] ")).unwrap_or_default();
            text.push_str(&l.text);
            let chars: Vec<char> = text.chars().collect();
            for c in chars.chunks(w).rev() {
                rows.push(Line::from(Span::styled(c.iter().collect::<String>(), base)));
            }
            if rows.len() >= h {
                break;
            }
        }
        rows.truncate(h);
        rows.reverse();
        f.render_widget(Paragraph::new(rows), inner);
        return;
    }
    let start = end.saturating_sub(h);
    let q = app.ui.search.as_deref();
    let mut out = Vec::with_capacity(h);
    for (i, l) in lines.iter().enumerate().take(end).skip(start) {
        let base = if l.error { t.error() } else { t.text() };
        let current = app.ui.search_at == Some(i);
        let mut spans = Vec::new();
        if let Some(tag) = l.tag {
            spans.push(Span::styled(format!("[{tag}] "), t.dim()));
        }
        let text = fit(&l.text, w);
        match q {
            Some(q) => {
                let mut at = 0;
                for (a, b) in find_all(&text, q) {
                    if a < at {
                        continue;
                    }
                    spans.push(Span::styled(text[at..a].to_string(), base));
                    let ms = if current {
                        t.matched()
                            .add_modifier(Modifier::BOLD | Modifier::UNDERLINED)
                    } else {
                        t.matched()
                    };
                    spans.push(Span::styled(text[a..b].to_string(), ms));
                    at = b;
                }
                spans.push(Span::styled(text[at..].to_string(), base));
            }
            None => spans.push(Span::styled(text, base)),
        }
        let mut line = Line::from(spans);
        if current {
            line = line.style(Style::default().add_modifier(Modifier::BOLD));
        }
        out.push(line);
    }
    f.render_widget(Paragraph::new(out), inner);
}
