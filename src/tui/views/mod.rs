//! Drawing. Pure functions of `&App` (time comes in through `app.night.now_ms`), so TestBackend
//! snapshots are deterministic.

mod active;
pub(crate) mod compare;
mod gpu;
mod header;
mod help;
mod logs;
mod popups;
mod queue;
mod results;
mod slurm;
pub mod threeway;

use super::app::{App, InputKind, Pane, View};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use ratatui::Frame;

pub const MIN_W: u16 = 60;
pub const MIN_H: u16 = 15;

pub fn draw(f: &mut Frame, app: &App) {
    app.hits.shown.set(app.action_run());
    let area = f.area();
    if area.width < MIN_W || area.height < MIN_H {
        too_small(f, app, area);
        return;
    }
    let [head, body, hint] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Min(5),
        Constraint::Length(1),
    ])
    .areas(area);
    header::draw(f, app, head);
    match app.ui.view {
        View::Sweep => sweep(f, app, body),
        View::Logs => logs::draw(f, app, body, true),
        View::Results => results::draw(f, app, body),
        View::ThreeWay => threeway::draw(f, app, body),
    }
    hint_bar(f, app, hint);
    popups::draw(f, app, area);
}

fn too_small(f: &mut Frame, app: &App, area: Rect) {
    let (c, p) = (app.night.state.counts(), app.night.progress());
    let text = vec![
        Line::from(Span::styled(
            "nightshift",
            app.ui.theme.text().add_modifier(Modifier::BOLD),
        )),
        Line::from(format!(
            "terminal {}×{} is too small; need {}×{}",
            area.width, area.height, MIN_W, MIN_H
        )),
        Line::from(format!(
            "{}/{} runs done, {} active",
            p.done, p.total, c.active
        )),
        Line::from("q quits"),
    ];
    f.render_widget(
        Paragraph::new(text)
            .style(app.ui.theme.text())
            .wrap(Wrap { trim: true }),
        area,
    );
}

fn sweep(f: &mut Frame, app: &App, area: Rect) {
    let logs_h = if area.height >= 30 {
        area.height * 2 / 5
    } else {
        area.height / 3
    };
    let [top, bottom] =
        Layout::vertical([Constraint::Min(6), Constraint::Length(logs_h.max(4))]).areas(area);
    let wide = top.width >= 120;
    let (qa, right) = if wide {
        let [a, b] =
            Layout::horizontal([Constraint::Percentage(55), Constraint::Percentage(45)]).areas(top);
        (a, b)
    } else {
        let [a, b] =
            Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(top);
        (a, b)
    };
    queue::draw(f, app, qa, app.ui.focus == Pane::Queue);
    let gpu_h = (app.night.gpus_total as u16 + 2)
        .min(right.height / 2)
        .max(3);
    let [act, gpus] =
        Layout::vertical([Constraint::Min(5), Constraint::Length(gpu_h)]).areas(right);
    active::draw(f, app, act);
    gpu::draw(f, app, gpus);
    logs::draw(f, app, bottom, app.ui.focus == Pane::Logs);
}

fn hint_bar(f: &mut Frame, app: &App, area: Rect) {
    let t = &app.ui.theme;
    if let Some(input) = &app.ui.input {
        let prompt = match input.kind {
            InputKind::Search => "/",
            InputKind::Command => ":",
        };
        let line = Line::from(vec![
            Span::styled(prompt, t.text().add_modifier(Modifier::BOLD)),
            Span::styled(input.text.clone(), t.text()),
            Span::styled("█", t.dim()),
        ]);
        f.render_widget(Paragraph::new(line), area);
        return;
    }
    if let Some(msg) = &app.ui.toast {
        // A toast longer than the line wraps upwards over the screen's bottom rows: a
        // refusal is read to its end (who acted is named last), never cut before the name.
        let w = area.width.max(1) as usize;
        let rows = msg.chars().count().div_ceil(w).clamp(1, 4) as u16;
        let rows = rows.min(area.y + 1);
        let r = Rect {
            y: area.y + 1 - rows,
            height: rows,
            ..area
        };
        f.render_widget(ratatui::widgets::Clear, r);
        f.render_widget(
            Paragraph::new(Span::styled(msg.clone(), Style::default().fg(t.warn)))
                .wrap(Wrap { trim: false }),
            r,
        );
        return;
    }
    use crate::tui::keymap::Action;
    // Detaching means something only with a daemon on the other side.
    let mut hints: Vec<(String, String, Option<Action>)> = app
        .keymap
        .hints()
        .into_iter()
        .filter(|(_, _, a)| app.attached || *a != Action::Detach)
        .map(|(key, word, a)| (format!(" {key} "), format!(" {word}  "), Some(a)))
        .collect();
    let width: usize = hints
        .iter()
        .map(|(k, w, _)| k.chars().count() + w.chars().count())
        .sum();
    // The jump to the next held or failed run is the first to give up its place: the keys
    // that act, `?` and `q` matter more on a narrow terminal.
    if width > area.width as usize {
        hints.retain(|(_, _, a)| *a != Some(Action::NextProblem));
    }
    hints.push((
        String::new(),
        format!(" 1 sweep 2 logs 3 results · {} ", app.ui.theme.name),
        None,
    ));
    // Whole hints only: half a word is not a hint.
    let mut spans = Vec::new();
    let mut used = 0;
    for (k, w, _) in hints {
        let n = k.chars().count() + w.chars().count();
        if used + n > area.width as usize {
            break;
        }
        used += n;
        if !k.is_empty() {
            spans.push(Span::styled(k, t.header()));
        }
        spans.push(Span::styled(w, t.dim()));
    }
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}

pub(crate) fn block<'a>(app: &App, title: impl Into<Line<'a>>, focus: bool) -> Block<'a> {
    Block::default()
        .borders(Borders::ALL)
        .border_style(app.ui.theme.border(focus))
        .title(title)
}

pub(crate) fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if a >= 10_000.0 {
        format!("{:.0}", v)
    } else if a >= 100.0 {
        format!("{:.1}", v)
    } else if a >= 1.0 {
        format!("{:.2}", v)
    } else {
        format!("{:.3}", v)
    }
}

pub(crate) fn fmt_dur(ms: u64) -> String {
    let s = ms / 1000;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s / 60) % 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{}.{}s", s, (ms % 1000) / 100)
    }
}

/// The commit's title, or what the plan knows about it when the title is empty.
pub(crate) fn title_of(c: &crate::plan::CommitSpec) -> String {
    if !c.title.trim().is_empty() {
        return c.title.clone();
    }
    let kind = c.kind().map(|k| k.as_str()).unwrap_or("");
    match (&c.notes, kind) {
        (Some(n), "") => n.clone(),
        (Some(n), k) => format!("{k} · {n}"),
        (None, k) => k.to_string(),
    }
}

/// Truncate to `w` columns with an ellipsis.
pub(crate) fn fit(s: &str, w: usize) -> String {
    if s.chars().count() <= w {
        s.to_string()
    } else if w == 0 {
        String::new()
    } else {
        let mut o: String = s.chars().take(w - 1).collect();
        o.push('…');
        o
    }
}
