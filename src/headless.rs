//! The headless printer: one line per state change, then a summary.

use crate::engine::observer::Observer;
use crate::engine::Summary;
use crate::event::{Envelope, Event};
use crate::model::RunState;
use crate::plan::Plan;
use std::io::Write;
use std::sync::Arc;

pub struct Printer<W: Write + Send> {
    plan: Arc<Plan>,
    out: W,
    start_ms: Option<u64>,
}

impl<W: Write + Send> Printer<W> {
    pub fn new(plan: Arc<Plan>, out: W) -> Self {
        Printer {
            plan,
            out,
            start_ms: None,
        }
    }
}

fn clock(ms: u64) -> String {
    let s = ms / 1000;
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        s / 3600,
        (s / 60) % 60,
        s % 60,
        ms % 1000
    )
}

impl<W: Write + Send> Observer for Printer<W> {
    fn on_event(&mut self, env: &Envelope) -> anyhow::Result<()> {
        let start = *self.start_ms.get_or_insert(env.at_ms);
        let t = clock(env.at_ms.saturating_sub(start));
        match &env.event {
            Event::SweepStarted {
                name,
                runs,
                gpus,
                runtime,
            } => {
                writeln!(
                    self.out,
                    "{t} sweep {name}: {runs} runs on {gpus} GPUs ({runtime} runtime)"
                )?;
            }
            Event::State {
                run,
                attempt,
                to,
                detail,
                gpus,
                ..
            } => {
                let key = &self.plan.runs[run.0 as usize].key;
                let mut line = format!(
                    "{t} {:<6} {key:<32} a{attempt} {:<24}",
                    run.to_string(),
                    to.label()
                );
                if matches!(
                    to,
                    RunState::Active {
                        stage: crate::model::Stage::PreparingImage
                    }
                ) && !gpus.is_empty()
                {
                    line.push_str(&format!(" gpus={gpus:?}"));
                }
                if let Some(d) = detail {
                    line.push(' ');
                    line.push_str(d);
                }
                writeln!(self.out, "{}", line.trim_end())?;
            }
            Event::Diagnosed { run, finding, .. } => {
                let key = &self.plan.runs[run.0 as usize].key;
                let what = if finding.predicted {
                    "predicted"
                } else {
                    "diagnosed"
                };
                writeln!(
                    self.out,
                    "{t} {:<6} {key:<32}    {what} {}: {}",
                    run.to_string(),
                    finding.category,
                    one_line(&finding.evidence, 160)
                )?;
            }
            Event::Paused { reason } => writeln!(self.out, "{t} sweep paused: {reason}")?,
            Event::ModelPaused { model, reason } => writeln!(
                self.out,
                "{t} runs of {model} paused: {reason}; other runs go on"
            )?,
            Event::Resumed => writeln!(self.out, "{t} sweep resumed")?,
            Event::Image {
                image,
                status,
                detail,
            } if *status != crate::event::ImageStatus::Log => writeln!(
                self.out,
                "{t} image  {image} {}: {}",
                status.as_str(),
                one_line(detail, 160)
            )?,
            Event::Operator { command } => {
                writeln!(self.out, "{t} operator: {}", command.describe())?
            }
            _ => {}
        }
        Ok(())
    }
}

fn one_line(s: &str, max: usize) -> String {
    let s = s.replace(['\n', '\r'], " ");
    if s.chars().count() > max {
        format!("{}…", s.chars().take(max).collect::<String>())
    } else {
        s
    }
}

pub fn print_summary(out: &mut dyn Write, plan: &Plan, s: &Summary) -> std::io::Result<()> {
    let c = &s.counts;
    writeln!(out)?;
    writeln!(
        out,
        "sweep {}: {} of {} runs finished in {:.1}s wall, {:.1} GPU-hours used",
        plan.name,
        c.done(),
        c.total,
        s.wall.as_secs_f64(),
        s.gpu_seconds / 3600.0
    )?;
    writeln!(
        out,
        "  success {}  failed {}  skipped {}  cancelled {}  held {}  queued {}",
        c.success, c.failed, c.skipped, c.cancelled, c.held, c.queued
    )?;
    if !s.failures.is_empty() {
        writeln!(out, "  failures by category:")?;
        let mut f: Vec<_> = s.failures.iter().collect();
        f.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        for (cat, n) in f {
            writeln!(out, "    {:<28} {n}", cat.as_str())?;
        }
    }
    for l in &s.leftovers_removed {
        writeln!(out, "  removed leftover: {l}")?;
    }
    if s.needs_more_gpus.0 > 0 {
        writeln!(
            out,
            "  {} runs need up to {} GPUs and this sweep has fewer: they stay queued (run again with the GPUs, e.g. --gpus {})",
            s.needs_more_gpus.0, s.needs_more_gpus.1, s.needs_more_gpus.1
        )?;
    }
    if let Some(p) = &s.paused {
        writeln!(
            out,
            "  sweep paused: {p} (resume with `nightshift run` again)"
        )?;
    }
    if s.interrupted {
        writeln!(
            out,
            "  interrupted: runs in flight were stopped; run the same command to resume"
        )?;
    }
    Ok(())
}
