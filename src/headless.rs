//! The headless printer: one line per state change, then a summary. Each line carries
//! plan text (run keys, the sweep's name) and log text (details, a diagnosis's line): it is
//! written with its control characters escaped ([`crate::sanitize`]), so one event stays
//! one line and nothing in it acts on the terminal or the log it goes to.

use crate::engine::Summary;
use crate::event::{Envelope, Event};
use crate::model::RunState;
use crate::observer::Observer;
use crate::plan::Plan;
use crate::sanitize::{log_line, terminal};
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

impl<W: Write + Send> Printer<W> {
    /// The event's line, if it has one.
    fn line_of(&mut self, env: &Envelope) -> Option<String> {
        let start = *self.start_ms.get_or_insert(env.at_ms);
        let t = clock(env.at_ms.saturating_sub(start));
        Some(match &env.event {
            Event::SweepStarted {
                name,
                runs,
                gpus,
                runtime,
            } => format!("{t} sweep {name}: {runs} runs on {gpus} GPUs ({runtime} runtime)"),
            Event::State {
                run,
                attempt,
                to,
                detail,
                gpus,
                ..
            } => {
                let key = terminal(&self.plan.runs[run.0 as usize].key);
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
                    line.push_str(&log_line(d));
                }
                line.trim_end().to_string()
            }
            Event::Diagnosed { run, finding, .. } => {
                let key = terminal(&self.plan.runs[run.0 as usize].key);
                let what = if finding.predicted {
                    "predicted"
                } else {
                    "diagnosed"
                };
                format!(
                    "{t} {:<6} {key:<32}    {what} {}: {}",
                    run.to_string(),
                    finding.category,
                    one_line(&finding.evidence, 160)
                )
            }
            Event::Paused { reason, .. } => format!("{t} sweep paused: {reason}"),
            Event::ModelPaused { model, reason } => {
                format!("{t} runs of {model} paused: {reason}; other runs go on")
            }
            Event::Resumed => format!("{t} sweep resumed"),
            Event::Image {
                image,
                status,
                detail,
            } if *status != crate::event::ImageStatus::Log => format!(
                "{t} image  {image} {}: {}",
                status.as_str(),
                one_line(detail, 160)
            ),
            Event::Operator {
                command,
                by,
                outcome,
            } => format!(
                "{t} operator{}: {}{}",
                by.as_ref().map(|b| format!(" {b}")).unwrap_or_default(),
                command.describe(),
                match outcome.as_deref() {
                    Some(o) if o != "done" => format!(" — {o}"),
                    _ => String::new(),
                }
            ),
            _ => return None,
        })
    }
}

impl<W: Write + Send> Observer for Printer<W> {
    fn on_event(&mut self, env: &Envelope) -> anyhow::Result<()> {
        if let Some(line) = self.line_of(env) {
            // Whatever field it came from, the line is written escaped: one event, one line.
            writeln!(self.out, "{}", terminal(&line))?;
        }
        Ok(())
    }
}

/// A log line cut to `max` characters for one line: colours dropped, controls escaped.
fn one_line(s: &str, max: usize) -> String {
    let s = s.replace(['\n', '\r'], " ");
    let s = if s.chars().count() > max {
        format!("{}…", s.chars().take(max).collect::<String>())
    } else {
        s
    };
    log_line(&s).into_owned()
}

pub fn print_summary(out: &mut dyn Write, plan: &Plan, s: &Summary) -> std::io::Result<()> {
    let c = &s.counts;
    writeln!(out)?;
    writeln!(
        out,
        "sweep {}: {} of {} runs finished in {:.1}s wall, {:.1} GPU-hours used",
        terminal(&plan.name),
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
        writeln!(out, "  removed leftover: {}", terminal(l))?;
    }
    if s.needs_more_gpus.0 > 0 {
        writeln!(
            out,
            "  {} runs need up to {} GPUs and this sweep has fewer: they stay queued (run again with the GPUs, e.g. --gpus {})",
            s.needs_more_gpus.0, s.needs_more_gpus.1, s.needs_more_gpus.1
        )?;
    }
    if let Some(left) = &s.window_closed {
        if s.counts.held > 0 {
            writeln!(
                out,
                "  the window closed with {} runs held for the operator: they stay held (run again to decide them)",
                s.counts.held
            )?;
        }
        if left.is_empty() {
            writeln!(
                out,
                "  the window closed; every commit that started has its results"
            )?;
        } else {
            writeln!(
                out,
                "  the window closed: {} commits did not fit and were not started (they stay queued for the next night): {}",
                left.len(),
                left.join(" ")
            )?;
        }
    }
    if let Some(p) = &s.paused {
        writeln!(
            out,
            "  sweep paused: {} (resume with `nightshift run` again)",
            terminal(p)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::category::{Action, Category};
    use crate::event::Finding;
    use crate::model::{RunId, Stage};
    use crate::sanitize::{assert_inert, HOSTILE, HOSTILE_SHOWN};

    /// A plan whose sweep name and agent id carry control characters (an agent id cannot
    /// hold white space, so no line break there).
    fn plan() -> Plan {
        let text = format!(
            "schema_version = 1\nname = \"{}\"\n[defaults]\nvariants = [\"agent\"]\n[[agents]]\nid = \"a\\u001b[2J\\u0007\\u009b\"\n[[commits]]\ncommit = \"{}\"\nparent = \"{}\"\nmodel = \"org/m\"\nperf_command = '''vllm bench serve --model org/m'''\n",
            "n\\u001b[2J\\u0007evil\\r\\n\\u009b31m",
            "a".repeat(40),
            "b".repeat(40)
        );
        Plan::from_str_at("t.toml", text, std::path::Path::new("."), "t.toml".as_ref()).unwrap()
    }

    /// Every line the printer writes from plan or log text, hostile: one line per event,
    /// each control shown escaped.
    #[test]
    fn plan_and_log_text_is_inert() {
        let plan = Arc::new(plan());
        assert!(plan.runs[0].key.contains('\x1b'), "{:?}", plan.runs[0].key);
        let mut p = Printer::new(plan.clone(), Vec::new());
        let events = [
            Event::SweepStarted {
                name: HOSTILE.into(),
                runs: 1,
                gpus: 1,
                runtime: "sim".into(),
            },
            Event::State {
                run: RunId(0),
                attempt: 1,
                from: RunState::Queued,
                to: RunState::Active {
                    stage: Stage::PreparingImage,
                },
                detail: Some(HOSTILE.into()),
                gpus: vec![0],
                interrupted: false,
            },
            Event::Diagnosed {
                run: RunId(0),
                attempt: 1,
                finding: Finding {
                    category: Category::Other,
                    evidence: format!("boom {HOSTILE}"),
                    action: Action::Skip,
                    recipe: None,
                    reason: HOSTILE.into(),
                    predicted: false,
                    confidence: None,
                    telling: vec![],
                    kind: None,
                },
            },
            Event::Paused {
                reason: HOSTILE.into(),
                by: crate::model::PauseBy::Policy,
            },
            Event::ModelPaused {
                model: HOSTILE.into(),
                reason: HOSTILE.into(),
            },
            Event::Image {
                image: HOSTILE.into(),
                status: crate::event::ImageStatus::Failed,
                detail: HOSTILE.into(),
            },
        ];
        for (i, event) in events.into_iter().enumerate() {
            let env = Envelope {
                seq: i as u64,
                at_ms: 0,
                event,
            };
            p.on_event(&env).unwrap();
        }
        let mut out = String::from_utf8(p.out).unwrap();
        assert_eq!(out.lines().count(), 6, "one line per event:\n{out}");
        assert!(out.contains("a\\x1b[2J\\x07\\x9b"), "the agent id:\n{out}");
        assert!(out.contains("boom \\x07evil"), "the log line:\n{out}");
        let summary = crate::engine::Summary {
            paused: Some(HOSTILE.into()),
            leftovers_removed: vec![HOSTILE.into()],
            ..Default::default()
        };
        let mut s = Vec::new();
        print_summary(&mut s, &plan, &summary).unwrap();
        out.push_str(&String::from_utf8(s).unwrap());
        assert_inert(&out, HOSTILE_SHOWN);
    }
}
