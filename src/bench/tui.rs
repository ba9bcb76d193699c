//! `nightshift bench tui [--runs N]`: frame render time with N runs (default 1,000) and
//! 1,000,000 log lines folded in, on a 160×48 TestBackend; plus ingest rate and RSS.

use crate::event::{Envelope, Event};
use crate::model::{Outcome, Pipe, RunId, RunState, Stage, Stream};
use crate::tui::app::{App, View};
use crate::tui::keymap::{Action, KeyMap};
use crate::tui::theme::Theme;
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::sync::Arc;
use std::time::Instant;

pub const LOG_LINES: usize = 1_000_000;

fn env(seq: u64, at_ms: u64, event: Event) -> Envelope {
    Envelope { seq, at_ms, event }
}

/// A sweep in mid-night: a third finished, some held, 8 active, the rest queued; `lines`
/// log lines spread over the active and finished runs.
pub(crate) fn busy_app(runs: usize, lines: usize) -> App {
    let plan = Arc::new(crate::plan::synthetic::synthetic_plan(runs));
    let n = plan.runs.len();
    let mut app = App::new(
        plan,
        8,
        Theme::builtin("dark").expect("theme"),
        KeyMap::default(),
    );
    let mut seq = 0;
    let mut at = 1_000_000u64;
    let mut push = |app: &mut App, e: Event, at: u64| {
        seq += 1;
        app.on_envelope(&env(seq, at, e));
    };
    push(
        &mut app,
        Event::SweepStarted {
            name: "bench".into(),
            runs: n,
            gpus: 8,
            runtime: "sim".into(),
        },
        at,
    );
    let mut active = Vec::new();
    for i in 0..n {
        let run = RunId(i as u32);
        if i % 3 == 2 && i > n / 2 {
            continue; // queued
        }
        at += 1000;
        let gpus = vec![(i % 8) as u32];
        push(
            &mut app,
            Event::State {
                run,
                attempt: 1,
                from: RunState::Queued,
                to: RunState::Active {
                    stage: Stage::PreparingImage,
                },
                detail: None,
                gpus,
                interrupted: false,
            },
            at,
        );
        if active.len() < 8 && i > n / 2 {
            active.push(run);
            continue;
        }
        let to = match i % 7 {
            0 => RunState::Held {
                category: crate::category::Category::CudaOom,
            },
            1 => RunState::Finished {
                outcome: Outcome::Failed {
                    category: crate::category::Category::BrokenPipe,
                },
            },
            _ => RunState::Finished {
                outcome: Outcome::Success,
            },
        };
        push(
            &mut app,
            Event::Metric {
                run,
                attempt: 1,
                key: "output_throughput_tok_s".into(),
                value: 1000.0 + i as f64,
            },
            at,
        );
        push(
            &mut app,
            Event::State {
                run,
                attempt: 1,
                from: RunState::Active {
                    stage: Stage::PreparingImage,
                },
                to,
                detail: None,
                gpus: vec![],
                interrupted: false,
            },
            at + 500,
        );
    }
    let targets: Vec<RunId> = (0..n as u32).map(RunId).collect();
    for l in 0..lines {
        let run = if l % 2 == 0 {
            active[l / 2 % active.len().max(1)]
        } else {
            targets[l % targets.len()]
        };
        let stream = if l % 3 == 0 {
            Stream::Bench
        } else {
            Stream::Server
        };
        let text = if l % 997 == 0 {
            format!("ERROR 11-23 01:02:03 engine.py:{l}] CUDA error: out of memory (line {l})")
        } else {
            format!("INFO 11-23 01:02:03 metrics.py:{l}] Avg prompt throughput: {} tokens/s, Running: 8 reqs", l % 5000)
        };
        push(
            &mut app,
            Event::Log {
                run,
                attempt: 1,
                stream,
                pipe: Pipe::Stderr,
                line: text,
            },
            at,
        );
    }
    app.night.now_ms = at + 60_000;
    app.night.sim_gpu_tick();
    app
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn rss_kib(field: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
}

pub fn run(runs: usize) -> i32 {
    let t0 = Instant::now();
    let mut app = busy_app(runs, LOG_LINES);
    let ingest = t0.elapsed();
    println!(
        "tui bench: {} runs, {} log lines folded in {:.2}s ({:.0} lines/s); {} lines kept in memory",
        app.night.plan.runs.len(),
        app.night.lines_seen,
        ingest.as_secs_f64(),
        app.night.lines_seen as f64 / ingest.as_secs_f64(),
        app.night.lines_in_memory
    );
    let mut term = Terminal::new(TestBackend::new(160, 48)).expect("terminal");
    for (name, setup) in [
        (
            "sweep",
            Box::new(|a: &mut App| a.ui.view = View::Sweep) as Box<dyn Fn(&mut App)>,
        ),
        (
            "sweep+search",
            Box::new(|a: &mut App| {
                a.ui.view = View::Sweep;
                a.ui.search = Some("out of memory".into());
            }),
        ),
        ("logs", Box::new(|a: &mut App| a.ui.view = View::Logs)),
        (
            "results",
            Box::new(|a: &mut App| {
                a.ui.search = None;
                a.ui.view = View::Results;
            }),
        ),
        ("3-way", Box::new(|a: &mut App| a.ui.view = View::ThreeWay)),
    ] {
        setup(&mut app);
        let mut times = Vec::new();
        for i in 0..300 {
            if i % 10 == 0 {
                app.on_action(Action::Down);
            }
            let t = Instant::now();
            term.draw(|f| crate::tui::views::draw(f, &app))
                .expect("draw");
            times.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        let p50 = pct(&mut times, 0.5);
        let p99 = pct(&mut times, 0.99);
        println!("  {name:<13} frame p50 {p50:.3} ms  p99 {p99:.3} ms  (300 frames, 160×48)");
    }
    if let Some(k) = rss_kib("VmRSS:") {
        println!(
            "  RSS          {:.1} MiB (peak {:.1} MiB)",
            k as f64 / 1024.0,
            rss_kib("VmHWM:").unwrap_or(k) as f64 / 1024.0
        );
    }
    0
}
