use super::fmt_dur;
use crate::tui::app::App;
use crate::tui::gpu::GpuSource;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let t = &app.ui.theme;
    let c = app.night.state.counts();
    let status = if app.night.finished {
        Span::styled(
            " ■ FINISHED ",
            Style::default().fg(t.ok).add_modifier(Modifier::BOLD),
        )
    } else if let Some(why) = &app.night.state.paused {
        Span::styled(
            format!(" ❚❚ PAUSED ({why}) "),
            Style::default().fg(t.warn).add_modifier(Modifier::BOLD),
        )
    } else if !app.night.state.paused_models.is_empty() {
        let models: Vec<&str> = app
            .night
            .state
            .paused_models
            .keys()
            .map(String::as_str)
            .collect();
        Span::styled(
            format!(
                " ▶ RUNNING · ❚❚ breaker: {} paused (space resumes) ",
                models.join(", ")
            ),
            Style::default().fg(t.warn).add_modifier(Modifier::BOLD),
        )
    } else if c.held > 0 && c.active == 0 {
        // Nothing runs until someone decides: that is what the operator must see first.
        Span::styled(
            format!(" ⚑ WAITING FOR YOU ({} held) ", c.held),
            Style::default().fg(t.warn).add_modifier(Modifier::BOLD),
        )
    } else if c.held > 0 {
        Span::styled(
            format!(" ▶ RUNNING · ⚑ {} waiting for you ", c.held),
            Style::default().fg(t.warn).add_modifier(Modifier::BOLD),
        )
    } else {
        Span::styled(
            " ▶ RUNNING ",
            Style::default().fg(t.active).add_modifier(Modifier::BOLD),
        )
    };
    let busy = app.night.gpus_busy();
    let eta = match (app.seen().eta(), c.queued + c.active) {
        (_, 0) => "—".to_string(),
        // Ended with runs left (stopped, or the daemon gone): nothing more will run.
        _ if app.night.finished || app.night.state.finished => "—".into(),
        // Nothing starts while paused: an estimate would stand still and lie.
        _ if app.night.state.paused.is_some() => "paused".into(),
        (Some(e), _) => {
            // The clock time it ends, and half the interval: "05:40 ±25m".
            // From the app's clock (tests set it).
            let at = clock(app.night.now_ms.saturating_add(e.left_ms));
            let half = e.high_ms.saturating_sub(e.low_ms) / 2;
            let est = if half >= 60_000 {
                format!(
                    "{at} ±{}",
                    crate::window::hm(std::time::Duration::from_millis(half))
                )
            } else {
                at
            };
            if e.from_priors {
                format!("{est}, no run ended yet")
            } else {
                est
            }
        }
        (None, _) => "measuring…".into(),
    };
    let elapsed = app.night.elapsed_ms().map(fmt_dur).unwrap_or_default();
    // Each piece with its priority: on a narrow terminal the lowest go first, so the
    // state, the ETA and the GPUs stay while the brand and the plan's name give way.
    let top = fit(
        vec![
            (
                3,
                Span::styled(" nightshift ", t.header().add_modifier(Modifier::BOLD)),
            ),
            (
                4,
                Span::styled(
                    format!(" {} ", app.night.plan.name),
                    t.text().add_modifier(Modifier::BOLD),
                ),
            ),
            (
                2,
                Span::styled(
                    format!(
                        "[{}] ",
                        if app.night.runtime.is_empty() {
                            "starting"
                        } else {
                            &app.night.runtime
                        }
                    ),
                    t.dim(),
                ),
            ),
            (10, status),
            (5, Span::styled(format!(" elapsed {elapsed} "), t.text())),
            (9, Span::styled(format!(" ETA {eta}  "), t.text())),
            (6, window_span(app)),
            (
                8,
                Span::styled(
                    format!(
                        "GPUs {busy} busy / {} free",
                        app.night.gpus_total.saturating_sub(busy)
                    ),
                    t.text(),
                ),
            ),
            (
                1,
                Span::styled(
                    match &app.night.gpu_source {
                        GpuSource::Simulated => " (simulated)",
                        GpuSource::Unavailable(_) => " (no NVML)",
                        _ => "",
                    },
                    t.dim(),
                ),
            ),
        ],
        area.width,
    );
    // Over the runs the plan can run; the ones it cannot are said apart.
    let p = app.night.progress();
    let pct = p.pct();
    // Narrow: the glyphs touch their counts and the bar takes what the counts leave, so
    // every count is said in full at 80 columns.
    let narrow = area.width < 100;
    let g = if narrow { "" } else { " " };
    let mut second = vec![
        (
            10,
            Span::styled(
                format!(" {}/{} done ", p.done, p.total),
                t.text().add_modifier(Modifier::BOLD),
            ),
        ),
        (
            9,
            Span::styled(
                if narrow {
                    format!(" {pct}% ")
                } else {
                    format!(" {pct:>3}%  ")
                },
                t.text(),
            ),
        ),
        (
            8,
            Span::styled(format!("✓{g}{} ", c.success), Style::default().fg(t.ok)),
        ),
        (
            8,
            Span::styled(format!("✗{g}{} ", c.failed), Style::default().fg(t.fail)),
        ),
        (
            8,
            Span::styled(format!("!{g}{} held ", c.held), Style::default().fg(t.warn)),
        ),
        (
            8,
            Span::styled(format!("▶{g}{} ", c.active), Style::default().fg(t.active)),
        ),
        (
            7,
            Span::styled(
                format!("·{g}{} queued ", p.queued),
                Style::default().fg(t.queued),
            ),
        ),
        // The store's count (as `status`, `results` and the digest say it): the runs the
        // plan marks unrunnable are skipped too, and said apart.
        (
            7,
            Span::styled(
                format!("⊘{g}{} skipped ", c.skipped),
                Style::default().fg(t.skipped),
            ),
        ),
    ];
    if p.not_runnable > 0 {
        second.push((
            6,
            Span::styled(format!("({} not runnable) ", p.not_runnable), t.dim()),
        ));
    }
    if p.in_reserve > 0 {
        second.push((
            5,
            Span::styled(format!("+{} in reserve ", p.in_reserve), t.dim()),
        ));
    }
    if c.cancelled > 0 {
        second.push((
            6,
            Span::styled(
                format!("⊗{g}{} cancelled ", c.cancelled),
                Style::default().fg(t.skipped),
            ),
        ));
    }
    let counts_w: usize = second.iter().map(|(_, s)| s.width()).sum();
    let bar_w = (area.width as usize)
        .saturating_sub(counts_w)
        .min(if narrow { 10 } else { 20 });
    if bar_w >= 4 {
        let filled = (p.done * bar_w).checked_div(p.total).unwrap_or(0);
        let bar = format!("{}{}", "█".repeat(filled), "░".repeat(bar_w - filled));
        second.insert(1, (2, Span::styled(bar, Style::default().fg(t.accent))));
    }
    let second = fit(second, area.width);
    f.render_widget(Paragraph::new(vec![top, second]), area);
}

/// "window 07:00" when the night has one, in the warning colour once the estimate ends
/// after it.
fn window_span(app: &App) -> Span<'static> {
    let t = &app.ui.theme;
    let Some(closes) = app.night.window_closes_ms else {
        return Span::raw("");
    };
    let at = clock(closes);
    let late = app
        .seen()
        .eta()
        .is_some_and(|e| app.night.now_ms.saturating_add(e.left_ms) > closes);
    if late {
        Span::styled(
            format!("window {at} (ends after)  "),
            Style::default().fg(t.warn),
        )
    } else {
        Span::styled(format!("window {at}  "), t.text())
    }
}

/// An epoch-ms time as HH:MM in the box's time zone (UTC in tests).
fn clock(ms: u64) -> String {
    #[cfg(not(test))]
    let tz = jiff::tz::TimeZone::system();
    #[cfg(test)]
    let tz = jiff::tz::TimeZone::UTC;
    jiff::Timestamp::from_millisecond(ms as i64)
        .map(|t| t.to_zoned(tz).strftime("%H:%M").to_string())
        .unwrap_or_default()
}

/// The pieces that fit, in their order: the highest priorities first, then whatever lower
/// ones still fit in what is left.
fn fit(pieces: Vec<(u8, Span<'static>)>, width: u16) -> Line<'static> {
    let mut by_priority: Vec<usize> = (0..pieces.len()).collect();
    by_priority.sort_by_key(|i| std::cmp::Reverse(pieces[*i].0));
    let mut keep = vec![false; pieces.len()];
    let mut used = 0usize;
    for i in by_priority {
        let w = pieces[i].1.width();
        if used + w <= width as usize {
            keep[i] = true;
            used += w;
        }
    }
    Line::from(
        pieces
            .into_iter()
            .zip(keep)
            .filter(|(_, k)| *k)
            .map(|((_, s), _)| s)
            .collect::<Vec<_>>(),
    )
}
