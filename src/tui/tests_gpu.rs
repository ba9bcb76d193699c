//! The GPU panel at the widths a laptop's terminal has (#25): the numbers and a foreign
//! process's warning are never cut while a sparkline or a word could give way, and GPUs
//! beyond the panel's lines are counted on its last one.

use super::app::App;
use super::gpu::GpuMsg;
use super::tests::{render, scene};
use crate::event::GpuSample;

/// Ten H200s (the sweep schedules on eight): GPU 0 runs a process no run of the sweep
/// started, as on the box in the issue; so does GPU 9, below the panel's last line.
fn h200s() -> App {
    let mut app = scene();
    app.night.gpus.clear();
    let sample =
        |index: u32, util_pct: u32, mem_used_mib: u64, temp_c: u32, power_w: u32| GpuSample {
            index,
            name: "NVIDIA H200".into(),
            util_pct,
            mem_used_mib,
            mem_total_mib: 143_771,
            temp_c,
            power_w,
            run: None,
        };
    let samples = (0..10u32)
        .map(|i| match i {
            0 => (sample(0, 100, 1024, 59, 693), vec![4242]),
            9 => (sample(9, 35, 20_480, 41, 180), vec![777]),
            i => (sample(i, 10 * i, 50_000, 40 + i, 100 + 50 * i), vec![]),
        })
        .collect();
    // Twice, so each GPU has a history for its sparklines.
    app.night.on_gpu(GpuMsg::Samples(samples));
    let again = (0..10u32)
        .map(|i| match i {
            0 => (sample(0, 100, 1024, 59, 693), vec![4242]),
            9 => (sample(9, 35, 20_480, 41, 180), vec![777]),
            i => (sample(i, 10 * i, 50_000, 40 + i, 100 + 50 * i), vec![]),
        })
        .collect();
    app.night.on_gpu(GpuMsg::Samples(again));
    app
}

/// The panel's lines: the text right of the queue, inside the GPU box.
fn panel(screen: &str) -> Vec<String> {
    let lines: Vec<&str> = screen.lines().collect();
    let top = lines
        .iter()
        .position(|l| l.contains("GPUs · NVML"))
        .unwrap_or_else(|| panic!("no GPU panel:\n{screen}"));
    let col = lines[top].chars().position(|c| c == '┌').unwrap_or(0);
    lines[top + 1..]
        .iter()
        .map(|l| l.chars().skip(col).collect::<String>())
        .take_while(|l| !l.starts_with('└'))
        .map(|l| {
            let inside: String = l.chars().skip(1).collect();
            inside.trim_end_matches(['│', '"']).trim_end().to_string()
        })
        .collect()
}

fn check(w: u16, h: u16, hidden: usize) -> String {
    let app = h200s();
    let s = render(&app, w, h);
    let rows = panel(&s);
    let gpu0 = rows
        .iter()
        .find(|l| l.starts_with("0 "))
        .unwrap_or_else(|| panic!("no GPU 0 at {w}x{h}:\n{s}"));
    for whole in ["100%", "1.0/140G", "59°C", "693W", "⚠ 1 foreign"] {
        assert!(
            gpu0.contains(whole),
            "{whole} cut at {w}x{h}: {gpu0:?}\n{s}"
        );
    }
    assert!(
        !gpu0.contains('…'),
        "nothing cut on GPU 0 at {w}x{h}: {gpu0:?}"
    );
    // Every GPU shown keeps its numbers whole.
    for l in rows.iter().filter(|l| !l.starts_with('+')) {
        assert!(l.contains("°C") && l.contains("W"), "{l:?} at {w}x{h}");
    }
    let last = rows.last().expect("a last line");
    let first_hidden = 10 - hidden;
    assert_eq!(
        last,
        &format!("+{hidden} more ({first_hidden}–9) · ⚠ 1 foreign on 9"),
        "at {w}x{h}:\n{s}"
    );
    assert_eq!(rows.len(), 10 - hidden + 1, "{rows:#?}");
    s
}

#[test]
fn the_foreign_process_warning_and_the_numbers_are_never_cut_at_120x30() {
    let s = check(120, 30, 4);
    insta::assert_snapshot!("gpu_foreign_120x30", s);
}

#[test]
fn the_foreign_process_warning_and_the_numbers_are_never_cut_at_80x24() {
    let s = check(80, 24, 6);
    insta::assert_snapshot!("gpu_foreign_80x24", s);
}

#[test]
fn sparklines_come_back_when_there_is_room() {
    let app = h200s();
    let s = render(&app, 200, 60);
    let rows = panel(&s);
    let gpu0 = rows.iter().find(|l| l.starts_with("0 ")).expect("GPU 0");
    assert!(gpu0.contains("⚠ 1 foreign proc"), "{gpu0:?}");
    assert!(gpu0.chars().any(|c| ('▁'..='█').contains(&c)), "{gpu0:?}");
}

#[test]
fn idle_gpus_say_which_waiting_run_they_are_kept_for() {
    use crate::model::{Outcome, RunId, RunState};
    let mut app = h200s();
    let runs = app.night.plan.runs.len();
    let big = (0..runs)
        .find(|&i| {
            app.night.plan.runs[i].gpus == 8
                && app.night.plan.runs[i].skip_reason.is_none()
                && app.night.state.runs[i].state == RunState::Queued
        })
        .expect("a queued TP-8 run");
    // A variant of its commit has run: the scheduler takes it first, and the free GPUs
    // are kept for it.
    let commit = app.night.plan.runs[big].commit;
    let sib = (0..runs)
        .find(|&j| j != big && app.night.plan.runs[j].commit == commit)
        .unwrap();
    app.night.state.runs[sib].started_ms = Some(1);
    app.night.state.runs[sib].state = RunState::Finished {
        outcome: Outcome::Success,
    };
    // While a started commit's 1-GPU run waits, it goes first and fits: no reason given.
    assert_eq!(app.night.idle_reason(), None);
    for j in 0..runs {
        if j != big && app.night.state.runs[j].state == RunState::Queued {
            app.night.state.runs[j].state = RunState::Finished {
                outcome: Outcome::skipped(crate::model::SkipBy::Plan, "test"),
            };
        }
    }
    assert_eq!(app.night.idle_reason(), Some(Some((RunId(big as u32), 8))));
    let s = render(&app, 200, 60);
    assert!(s.contains(&format!("kept for #{big} (8 GPUs)")), "{s}");
    app.night.state.paused = Some("paused by the operator".into());
    assert_eq!(app.night.idle_reason(), Some(None));
}
