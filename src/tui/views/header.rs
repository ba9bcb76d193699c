use super::fmt_dur;
use crate::tui::app::App;
use crate::tui::gpu::GpuSource;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let t = &app.theme;
    let c = app.state.counts();
    let status = if app.finished {
        Span::styled(
            " ■ FINISHED ",
            Style::default().fg(t.ok).add_modifier(Modifier::BOLD),
        )
    } else if let Some(why) = &app.state.paused {
        Span::styled(
            format!(" ❚❚ PAUSED ({why}) "),
            Style::default().fg(t.warn).add_modifier(Modifier::BOLD),
        )
    } else if !app.state.paused_models.is_empty() {
        let models: Vec<&str> = app.state.paused_models.keys().map(String::as_str).collect();
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
    let busy = app.gpus_busy();
    let eta = match (app.eta(), c.queued + c.active) {
        (_, 0) => "—".to_string(),
        // Ended with runs left (stopped, or the daemon gone): nothing more will run.
        _ if app.finished || app.state.finished => "—".into(),
        // Nothing starts while paused: an estimate would stand still and lie.
        _ if app.state.paused.is_some() => "paused".into(),
        (Some(e), _) => {
            // The clock time it ends, and half the interval: "05:40 ±25m".
            // From the app's clock (tests set it), in the box's time zone (UTC in tests).
            #[cfg(not(test))]
            let tz = jiff::tz::TimeZone::system();
            #[cfg(test)]
            let tz = jiff::tz::TimeZone::UTC;
            let at = jiff::Timestamp::from_millisecond(app.now_ms.saturating_add(e.left_ms) as i64)
                .map(|t| t.to_zoned(tz).strftime("%H:%M").to_string())
                .unwrap_or_else(|_| fmt_dur(e.left_ms));
            let half = e.high_ms.saturating_sub(e.low_ms) / 2;
            if half >= 60_000 {
                format!(
                    "{at} ±{}",
                    crate::window::hm(std::time::Duration::from_millis(half))
                )
            } else {
                at
            }
        }
        (None, _) => "measuring…".into(),
    };
    let elapsed = app.elapsed_ms().map(fmt_dur).unwrap_or_default();
    let top = Line::from(vec![
        Span::styled(" nightshift ", t.header().add_modifier(Modifier::BOLD)),
        Span::styled(
            format!(" {} ", app.plan.name),
            t.text().add_modifier(Modifier::BOLD),
        ),
        Span::styled(
            format!(
                "[{}] ",
                if app.runtime.is_empty() {
                    "starting"
                } else {
                    &app.runtime
                }
            ),
            t.dim(),
        ),
        status,
        Span::styled(format!(" elapsed {elapsed}  ETA {eta}  "), t.text()),
        Span::styled(
            format!(
                "GPUs {busy} busy / {} free",
                app.gpus_total.saturating_sub(busy)
            ),
            t.text(),
        ),
        Span::styled(
            match &app.gpu_source {
                GpuSource::Simulated => " (simulated)",
                GpuSource::Unavailable(_) => " (no NVML)",
                _ => "",
            },
            t.dim(),
        ),
    ]);
    // Over the runs the plan can run; the ones it cannot are said apart.
    let p = app.progress();
    let pct = p.pct();
    let bar_w = 20usize;
    let filled = (p.done * bar_w).checked_div(p.total).unwrap_or(0);
    let bar = format!("{}{}", "█".repeat(filled), "░".repeat(bar_w - filled));
    let mut second = vec![
        Span::styled(
            format!(" {}/{} done ", p.done, p.total),
            t.text().add_modifier(Modifier::BOLD),
        ),
        Span::styled(bar, Style::default().fg(t.accent)),
        Span::styled(format!(" {pct:>3}%  "), t.text()),
        Span::styled(format!("✓ {} ", c.success), Style::default().fg(t.ok)),
        Span::styled(format!("✗ {} ", c.failed), Style::default().fg(t.fail)),
        Span::styled(format!("! {} held ", c.held), Style::default().fg(t.warn)),
        Span::styled(format!("▶ {} ", c.active), Style::default().fg(t.active)),
        Span::styled(
            format!("· {} queued ", p.queued),
            Style::default().fg(t.queued),
        ),
        Span::styled(
            format!("⊘ {} skipped ", p.skipped),
            Style::default().fg(t.skipped),
        ),
    ];
    if p.not_runnable > 0 {
        second.push(Span::styled(
            format!("· {} not runnable ", p.not_runnable),
            t.dim(),
        ));
    }
    f.render_widget(Paragraph::new(vec![top, Line::from(second)]), area);
}
