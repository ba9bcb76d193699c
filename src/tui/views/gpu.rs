//! Per GPU: utilization and memory history as sparklines, memory used/total, temperature,
//! power, and the run that holds it.

use super::{block, fit};
use crate::tui::app::App;
use crate::tui::gpu::GpuSource;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Sparkline};
use ratatui::Frame;

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    // The GPUs are on the cluster's nodes: the panel shows the jobs that hold them.
    if app.runtime == "slurm" {
        return super::slurm::draw(f, app, area);
    }
    let t = &app.theme;
    let title = match &app.gpu_source {
        GpuSource::Simulated => " GPUs · simulated (sim runtime) ".to_string(),
        GpuSource::Nvml => " GPUs · NVML ".to_string(),
        GpuSource::Waiting => " GPUs ".to_string(),
        GpuSource::Unavailable(_) => " GPUs ".to_string(),
    };
    let b = block(app, title, false);
    let inner = b.inner(area);
    f.render_widget(b, area);
    if let GpuSource::Unavailable(why) = &app.gpu_source {
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
    if app.gpus.is_empty() {
        f.render_widget(
            Paragraph::new("waiting for the first sample…").style(t.dim()),
            inner,
        );
        return;
    }
    // One line per GPU: label, util sparkline, mem sparkline, numbers, holder.
    let w = inner.width;
    let spark_w = match w {
        90.. => 16,
        60..=89 => 10,
        48..=59 => 6,
        _ => 0,
    };
    for (i, g) in app.gpus.iter().enumerate().take(inner.height as usize) {
        let y = inner.y + i as u16;
        let s = &g.sample;
        if s.mem_total_mib == 0 && g.util.len() <= 1 {
            f.render_widget(
                Paragraph::new(Span::styled(format!("{:<3} no sample", s.index), t.dim())),
                Rect {
                    x: inner.x,
                    y,
                    width: w,
                    height: 1,
                },
            );
            continue;
        }
        let label = format!("{:<3}{:>4}% ", s.index, s.util_pct);
        let mut x = inner.x;
        f.render_widget(
            Paragraph::new(Span::styled(label.clone(), t.text())),
            Rect {
                x,
                y,
                width: (label.len() as u16).min(w),
                height: 1,
            },
        );
        x += label.len() as u16;
        if spark_w > 0 {
            let util: Vec<u64> = tail(&g.util, spark_w as usize);
            f.render_widget(
                Sparkline::default()
                    .data(&util)
                    .max(100)
                    .style(Style::default().fg(t.active)),
                Rect {
                    x,
                    y,
                    width: spark_w,
                    height: 1,
                },
            );
            x += spark_w + 1;
            let mem: Vec<u64> = tail(&g.mem_pct, spark_w as usize);
            f.render_widget(
                Sparkline::default()
                    .data(&mem)
                    .max(100)
                    .style(Style::default().fg(t.accent)),
                Rect {
                    x,
                    y,
                    width: spark_w,
                    height: 1,
                },
            );
            x += spark_w + 1;
        }
        let holder = s
            .run
            .map(|r| format!(" {r} {}", app.plan.runs[r.0 as usize].key))
            .unwrap_or_else(|| match g.foreign {
                0 => " idle".into(),
                n => format!(" ⚠ {n} foreign proc"),
            });
        let rest = format!(
            "{:>5.1}/{:.0}G {:>3}°C {:>4}W{}",
            s.mem_used_mib as f64 / 1024.0,
            s.mem_total_mib as f64 / 1024.0,
            s.temp_c,
            s.power_w,
            holder
        );
        let remaining = (inner.x + w).saturating_sub(x);
        f.render_widget(
            Paragraph::new(Line::from(Span::styled(
                fit(&rest, remaining as usize),
                t.text(),
            ))),
            Rect {
                x,
                y,
                width: remaining,
                height: 1,
            },
        );
    }
}

fn tail(v: &std::collections::VecDeque<u64>, n: usize) -> Vec<u64> {
    let skip = v.len().saturating_sub(n);
    v.iter().skip(skip).copied().collect()
}
