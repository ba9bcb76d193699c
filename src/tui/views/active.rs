//! The selected run: stage timeline with time per stage, image pull progress, live metrics
//! with deltas against the commit's baseline, and the diagnosis banner.

use super::{block, fit, fmt_dur, fmt_num};
use crate::model::{Outcome, RunId, RunState, Stage};
use crate::tui::app::App;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};
use ratatui::Frame;

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let t = &app.ui.theme;
    let Some(run) = app.selected_run() else {
        let b = block(app, " run ", false);
        f.render_widget(
            Paragraph::new("no run selected").style(t.dim()).block(b),
            area,
        );
        return;
    };
    let spec = &app.night.plan.runs[run.0 as usize];
    let r = app.night.state.run(run);
    let title = format!(" {run} {} · attempt {} ", spec.key, r.attempt);
    let b = block(app, title, false);
    let inner = b.inner(area);
    f.render_widget(b, area);
    let w = inner.width as usize;
    let mut lines = Vec::new();
    let gpus = if r.gpus.is_empty() {
        String::new()
    } else {
        format!(
            "  GPU {}",
            r.gpus
                .iter()
                .map(|g| g.to_string())
                .collect::<Vec<_>>()
                .join(",")
        )
    };
    lines.push(Line::from(vec![
        Span::styled(
            format!("{} {}", super::queue::glyph(&r.state), r.state.label()),
            super::queue::state_style(t, &r.state).add_modifier(Modifier::BOLD),
        ),
        Span::styled(gpus, t.dim()),
        Span::styled(since(app, run, &r.state), t.dim()),
        Span::styled(
            r.vllm_version
                .as_ref()
                .map(|v| format!("  vLLM {v}"))
                .unwrap_or_default(),
            t.dim(),
        ),
    ]));
    // Stage timeline.
    let mut spans = Vec::new();
    let current = match r.state {
        RunState::Active { stage } => Some(stage),
        _ => None,
    };
    // The stage an attempt stopped in did not complete unless the run succeeded: it says
    // how it stopped, never ✓.
    let last = r.stages.last().map(|(s, _)| *s);
    let stopped = match &r.state {
        RunState::Active { .. }
        | RunState::Finished {
            outcome: Outcome::Success,
        } => None,
        RunState::Finished {
            outcome: Outcome::Cancelled,
        } => Some(("⊘", Style::default().fg(t.skipped))),
        RunState::Queued => Some(("↺", Style::default().fg(t.queued))),
        _ => Some(("✗", Style::default().fg(t.fail))),
    };
    for (i, stage) in Stage::ALL.iter().enumerate() {
        let pos = r.stages.iter().position(|(s, _)| s == stage);
        let (mark, style, dur) = match pos {
            Some(p) => {
                let start = r.stages[p].1;
                let end = r
                    .stages
                    .get(p + 1)
                    .map(|s| s.1)
                    .or(if current == Some(*stage) {
                        Some(app.night.now_ms)
                    } else {
                        r.finished_ms
                    })
                    .unwrap_or(app.night.now_ms);
                let d = fmt_dur(end.saturating_sub(start));
                match stopped {
                    _ if current == Some(*stage) => (
                        "▶",
                        Style::default().fg(t.active).add_modifier(Modifier::BOLD),
                        d,
                    ),
                    Some((mark, style)) if last == Some(*stage) => (mark, style, d),
                    _ => ("✓", Style::default().fg(t.ok), d),
                }
            }
            None => ("·", t.dim(), String::new()),
        };
        if i > 0 {
            spans.push(Span::styled(" → ", t.dim()));
        }
        spans.push(Span::styled(format!("{mark} {}", stage.short()), style));
        if !dur.is_empty() {
            spans.push(Span::styled(format!(" {dur}"), t.dim()));
        }
    }
    lines.push(Line::from(spans));
    // Pull progress.
    if let Some(layers) = app.night.pull_layers.get(&run) {
        // A build from source reports files compiled of total under the name `build`;
        // image layers and weights report bytes.
        if let Some(&(done, total)) = layers.get("build") {
            if total > 0 && current == Some(Stage::PreparingImage) {
                let bar_w = w.saturating_sub(30).clamp(5, 40);
                let filled = (done.min(total) as u128 * bar_w as u128 / total as u128) as usize;
                lines.push(Line::from(vec![
                    Span::styled("build ", t.dim()),
                    Span::styled("█".repeat(filled), Style::default().fg(t.accent)),
                    Span::styled("░".repeat(bar_w - filled), t.dim()),
                    Span::styled(format!(" {done}/{total} files compiled"), t.text()),
                ]));
            }
        }
        let (done, total) = layers
            .iter()
            .filter(|(name, _)| name.as_str() != "build")
            .fold((0u64, 0u64), |(d, t), (_, (a, b))| (d + a, t + b));
        if total > 0 && (done < total || current == Some(Stage::PreparingImage)) {
            let bar_w = w.saturating_sub(30).clamp(5, 40);
            let filled = (done as u128 * bar_w as u128 / total as u128) as usize;
            lines.push(Line::from(vec![
                Span::styled("pull ", t.dim()),
                Span::styled("█".repeat(filled), Style::default().fg(t.accent)),
                Span::styled("░".repeat(bar_w - filled), t.dim()),
                Span::styled(
                    format!(
                        " {:.1}/{:.1} GB {} layers",
                        done as f64 / 1e9,
                        total as f64 / 1e9,
                        layers.keys().filter(|k| k.as_str() != "build").count()
                    ),
                    t.text(),
                ),
            ]));
        }
    }
    // Diagnosis banner: only while the run waits on it (held, or failed with it). A run
    // fixed, retried or skipped since has its detail instead; a queued run its prediction.
    if let Some(fd) = app.night.current_finding(run) {
        lines.push(Line::from(Span::styled(
            fit(&banner_text(app, run), w),
            t.banner(),
        )));
        lines.push(Line::from(Span::styled(
            fit(&format!("evidence: {}", fd.evidence.replace('\n', " ")), w),
            t.error(),
        )));
        // Nothing explained it: the lines an operator would look for first.
        for l in &fd.telling {
            lines.push(Line::from(Span::styled(
                fit(&format!("  also: {}", l.replace('\n', " ")), w),
                t.dim(),
            )));
        }
    } else if let Some(fd) = r
        .finding
        .as_ref()
        .filter(|f| f.predicted && r.state == RunState::Queued)
    {
        let text = format!("⚠ predicted {}: {}", fd.category, fd.reason);
        lines.push(Line::from(Span::styled(fit(&text, w), t.dim())));
    } else if let Some(d) = &r.detail {
        lines.push(Line::from(Span::styled(fit(d, w), t.dim())));
    }
    // Metrics with deltas, each named by its label with its unit ("out tok/s"). On a
    // narrow panel they come right under the state line, before the stage chain: the
    // numbers are what the panel is for.
    let base = app.night.baseline_of.get(run.0 as usize).copied().flatten();
    // Δ is worded ("more tok/s 12.3%") where there is room, else an arrow (▲ better,
    // ▼ worse): never a bare sign whose meaning depends on the metric.
    let wide = w >= 64;
    let dw = if wide { 17 } else { 8 };
    let vw = if w >= 50 { 12 } else { 9 };
    let kw = w.saturating_sub(2 * vw + dw).clamp(8, 28);
    let mut metric_lines = Vec::new();
    if !r.metrics.is_empty() {
        metric_lines.push(Line::from(Span::styled(
            format!(
                "{:<kw$}{:>vw$}{:>vw$}{:>dw$}",
                "metric", "value", "baseline", "Δ"
            ),
            t.dim(),
        )));
    }
    for (k, v) in &r.metrics {
        let b = base.and_then(|b| app.night.state.run(b).metrics.get(k).copied());
        let (bs, ds, dstyle) = match b {
            Some(b) => match crate::metric::improvement_pct(k, *v, b) {
                // An improvement, worded with its direction by the one metric table.
                Some(d) => {
                    let st = if d.abs() < 1.0 {
                        t.dim()
                    } else if d > 0.0 {
                        Style::default().fg(t.ok)
                    } else {
                        Style::default().fg(t.fail)
                    };
                    let text = if wide {
                        crate::metric::delta_label(k, d)
                    } else {
                        crate::metric::delta_short(d)
                    };
                    (fmt_num(b), text, st)
                }
                None => (fmt_num(b), String::new(), t.dim()),
            },
            _ => ("-".into(), String::new(), t.dim()),
        };
        let m = crate::metric::lookup(k);
        let name = if m.label.is_empty() {
            k.as_str()
        } else {
            m.label
        };
        metric_lines.push(Line::from(vec![
            Span::styled(
                format!("{:<kw$}{:>vw$}", fit(name, kw - 1), fmt_num(*v)),
                t.text(),
            ),
            Span::styled(format!("{bs:>vw$}"), t.dim()),
            Span::styled(format!("{ds:>dw$}"), dstyle),
        ]));
    }
    // The per-request quantiles with their 95% bootstrap intervals (`--save-detailed`).
    if let Some(req) = r.requests.as_deref() {
        metric_lines.push(Line::from(Span::styled(
            format!(
                "requests {} ({} failed), 95% intervals:",
                req.requests, req.failed
            ),
            t.dim(),
        )));
        for q in &req.quantiles {
            metric_lines.push(Line::from(Span::styled(q.label(), t.text())));
        }
    }
    if w < 50 && !lines.is_empty() {
        let at = 1.min(lines.len());
        lines.splice(at..at, metric_lines);
    } else {
        lines.extend(metric_lines);
    }
    f.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), inner);
}

/// How long the run has been as it is, when this client saw it change: "held 12m" for a
/// run waiting on the operator, "in stage 40s" for one working.
fn since(app: &App, run: RunId, state: &RunState) -> String {
    let Some(at) = app.night.entered_ms.get(&run) else {
        return String::new();
    };
    let d = super::fmt_dur(app.night.now_ms.saturating_sub(*at));
    match state {
        RunState::Held { .. } => format!("  held {d}"),
        RunState::Active { .. } => format!("  in stage {d}"),
        RunState::Queued => format!("  queued {d}"),
        RunState::Finished { .. } => String::new(),
    }
}

/// "aimv2_conflict — press f to apply fix aimv2-exist-ok, r to retry, s to skip"; empty
/// when the run waits on no finding ([`App::current_finding`]).
pub(crate) fn banner_text(app: &App, run: RunId) -> String {
    let Some(fd) = app.night.current_finding(run) else {
        return String::new();
    };
    let k = |a| app.keymap.label_of(a);
    use crate::tui::keymap::Action;
    let mut s = format!("⚠ {} — ", fd.category);
    if fd.predicted {
        s.push_str("predicted; ");
    }
    if let Some(recipe) = &fd.recipe {
        s.push_str(&format!(
            "press {} to apply fix {recipe}, ",
            k(Action::ApplyFix)
        ));
    } else {
        s.push_str("press ");
    }
    s.push_str(&format!(
        "{} to retry, {} to skip, {} to skip all {}",
        k(Action::Retry),
        k(Action::Skip),
        k(Action::SkipCategory),
        fd.category
    ));
    s
}
