//! Per GPU: utilization and memory history as sparklines, memory used/total, temperature,
//! power, and the run that holds it.

use super::{block, fit};
use crate::event::GpuSample;
use crate::tui::app::{App, GpuView};
use crate::tui::gpu::GpuSource;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Sparkline};
use ratatui::Frame;

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    // The GPUs are on the cluster's nodes: the panel shows the jobs that hold them.
    if app.night.runtime == "slurm" {
        return super::slurm::draw(f, app, area);
    }
    let t = &app.ui.theme;
    let title = match &app.night.gpu_source {
        GpuSource::Simulated => " GPUs · simulated (sim runtime) ".to_string(),
        GpuSource::Nvml => " GPUs · NVML ".to_string(),
        GpuSource::Waiting => " GPUs ".to_string(),
        GpuSource::Unavailable(_) => " GPUs ".to_string(),
    };
    let b = block(app, title, false);
    let inner = b.inner(area);
    f.render_widget(b, area);
    if let GpuSource::Unavailable(why) = &app.night.gpu_source {
        let msg = if why.starts_with("no NVIDIA driver") {
            why.clone()
        } else {
            format!("no NVIDIA driver (NVML): {why}")
        };
        f.render_widget(
            Paragraph::new(fit(&msg, inner.width as usize)).style(Style::default().fg(t.warn)),
            inner,
        );
        return;
    }
    if app.night.gpus.is_empty() {
        f.render_widget(
            Paragraph::new("waiting for the first sample…").style(t.dim()),
            inner,
        );
        return;
    }
    let w = inner.width as usize;
    let rows_h = inner.height as usize;
    if rows_h == 0 || w == 0 {
        return;
    }
    // More GPUs than lines: the last line says how many are not shown.
    let shown = if app.night.gpus.len() > rows_h {
        rows_h.saturating_sub(1)
    } else {
        app.night.gpus.len()
    };
    let gpus = &app.night.gpus[..shown];
    let cols = Columns::fit(app, gpus, w);
    for (i, g) in gpus.iter().enumerate() {
        let y = inner.y + i as u16;
        let line = |x: u16, width: usize| Rect {
            x,
            y,
            width: (width as u16).min(inner.x + inner.width - x),
            height: 1,
        };
        let s = &g.sample;
        if s.mem_total_mib == 0 && g.util.len() <= 1 {
            let iw = if cols.compact { cols.index_w } else { 3 };
            let text = fit(&format!("{:<iw$} no sample", s.index), w);
            f.render_widget(
                Paragraph::new(Span::styled(text, t.dim())),
                line(inner.x, w),
            );
            continue;
        }
        let label = cols.label(s);
        let mut x = inner.x;
        f.render_widget(
            Paragraph::new(Span::styled(fit(&label, w), t.text())),
            line(x, w),
        );
        x += label.chars().count().min(w) as u16;
        for (data, colour) in [(&g.util, t.active), (&g.mem_pct, t.accent)] {
            if cols.spark == 0 {
                break;
            }
            let d = tail(data, cols.spark);
            f.render_widget(
                Sparkline::default()
                    .data(&d)
                    .max(100)
                    .style(Style::default().fg(colour)),
                line(x, cols.spark),
            );
            x += cols.spark as u16 + 1;
        }
        let warn = is_foreign(g);
        let rest = format!("{}{}", cols.numbers(s), cols.tail(app, g));
        let remaining = (inner.x + inner.width).saturating_sub(x) as usize;
        let style = if warn {
            Style::default().fg(t.warn)
        } else {
            t.text()
        };
        f.render_widget(
            Paragraph::new(Line::from(Span::styled(fit(&rest, remaining), style))),
            line(x, remaining),
        );
    }
    let hidden = &app.night.gpus[shown..];
    if !hidden.is_empty() {
        let mut more = match hidden {
            [one] => format!("+1 more ({})", one.sample.index),
            [first, .., last] => format!(
                "+{} more ({}–{})",
                hidden.len(),
                first.sample.index,
                last.sample.index
            ),
            [] => String::new(),
        };
        // A process nobody in this sweep started is the one thing not to hide.
        let foreign: Vec<&GpuView> = hidden.iter().filter(|g| is_foreign(g)).collect();
        let style = if foreign.is_empty() {
            t.dim()
        } else {
            let procs: usize = foreign.iter().map(|g| g.foreign).sum();
            let on: Vec<String> = foreign.iter().map(|g| g.sample.index.to_string()).collect();
            more.push_str(&format!(" · ⚠ {procs} foreign on {}", on.join(",")));
            Style::default().fg(t.warn)
        };
        f.render_widget(
            Paragraph::new(Span::styled(fit(&more, w), style)),
            Rect {
                x: inner.x,
                y: inner.y + shown as u16,
                width: inner.width,
                height: 1,
            },
        );
    }
}

/// How a panel of GPU lines is laid out at one width. Numbers and the foreign-process
/// warning are what the operator acts on, so they keep their width: a compact spelling
/// first, then the sparklines shrink and go (the holder keeping its first columns), and
/// only then are the holder's words cut. One layout for all lines, so columns align.
struct Columns {
    compact: bool,
    index_w: usize,
    mem_w: usize,
    spark: usize,
}

/// Columns of the holder's words kept before the sparklines may have any: its run id and
/// the start of its commit.
const WORDS_MIN: usize = 12;

impl Columns {
    fn fit(app: &App, gpus: &[GpuView], w: usize) -> Columns {
        let index_w = gpus
            .iter()
            .map(|g| g.sample.index.to_string().len())
            .max()
            .unwrap_or(1);
        let mut c = Columns {
            compact: false,
            index_w,
            mem_w: 0,
            spark: 0,
        };
        let mut fixed = 0;
        for compact in [false, true] {
            c.compact = compact;
            c.mem_w = gpus
                .iter()
                .map(|g| c.mem(&g.sample).len())
                .max()
                .unwrap_or(0);
            let numbers_w = gpus
                .iter()
                .map(|g| c.numbers(&g.sample).chars().count())
                .max()
                .unwrap_or(0);
            // Warnings whole; the holder's words down to their first columns.
            let tail_w = gpus
                .iter()
                .map(|g| {
                    let n = c.tail(app, g).chars().count();
                    if is_foreign(g) {
                        n
                    } else {
                        n.min(WORDS_MIN)
                    }
                })
                .max()
                .unwrap_or(0);
            let label_w = if compact { index_w + 6 } else { 9 };
            fixed = label_w + numbers_w + tail_w;
            if fixed <= w {
                break;
            }
        }
        let cap = match w {
            90.. => 16,
            60..=89 => 10,
            48..=59 => 6,
            _ => 0,
        };
        // Two sparklines, each followed by a space; narrower than 4 they say nothing.
        c.spark = (w.saturating_sub(fixed) / 2).saturating_sub(1).min(cap);
        if c.spark < 4 {
            c.spark = 0;
        }
        c
    }

    fn label(&self, s: &GpuSample) -> String {
        if self.compact {
            format!("{:<w$} {:>3}% ", s.index, s.util_pct, w = self.index_w)
        } else {
            format!("{:<3}{:>4}% ", s.index, s.util_pct)
        }
    }

    fn mem(&self, s: &GpuSample) -> String {
        let used = s.mem_used_mib as f64 / 1024.0;
        let total = s.mem_total_mib as f64 / 1024.0;
        if self.compact && used >= 99.95 {
            format!("{used:.0}/{total:.0}G")
        } else {
            format!("{used:.1}/{total:.0}G")
        }
    }

    fn numbers(&self, s: &GpuSample) -> String {
        let mem = format!("{:>w$}", self.mem(s), w = self.mem_w);
        if self.compact {
            format!("{mem} {:>2}°C {:>3}W", s.temp_c, s.power_w)
        } else {
            format!("{mem} {:>3}°C {:>4}W", s.temp_c, s.power_w)
        }
    }

    /// The run holding the GPU, a warning about processes nobody in this sweep started,
    /// or idle.
    fn tail(&self, app: &App, g: &GpuView) -> String {
        match (g.sample.run, g.foreign) {
            (Some(r), _) => format!(" {r} {}", app.night.plan.runs[r.0 as usize].key),
            // Idle with runs waiting says why: paused, or kept free for a run that needs
            // more GPUs than are free (the scheduler's backfilling).
            (None, 0) => match app.night.idle_reason() {
                Some(None) => " paused".into(),
                Some(Some((r, n))) if self.compact => format!(" for {r} ({n})"),
                Some(Some((r, n))) => format!(" kept for {r} ({n} GPUs)"),
                None => " idle".into(),
            },
            (None, n) if self.compact => format!(" ⚠ {n} foreign"),
            (None, n) => format!(" ⚠ {n} foreign proc"),
        }
    }
}

/// Compute processes on a GPU no run of this sweep holds.
fn is_foreign(g: &GpuView) -> bool {
    g.foreign > 0 && g.sample.run.is_none()
}

fn tail(v: &std::collections::VecDeque<u64>, n: usize) -> Vec<u64> {
    let skip = v.len().saturating_sub(n);
    v.iter().skip(skip).copied().collect()
}
