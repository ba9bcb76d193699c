//! TestBackend + insta snapshots of every view and popup at several sizes, and the key
//! handling that drives them. Time is fixed, so the pictures are stable.

use super::app::{App, Effect, LogTab, Popup, View, RING_LINES};
use super::gpu::GpuMsg;
use super::keymap::{Key, KeyMap};
use super::theme::Theme;
use crate::category::{Action as PolicyAction, Category};
use crate::event::{Command, Envelope, Event, Finding};
use crate::model::{Outcome, Pipe, RunId, RunState, Stage, Stream};
use crossterm::event::KeyCode;
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::sync::Arc;

pub(super) const T0: u64 = 1_700_000_000_000;

pub(super) struct Feed {
    pub(super) seq: u64,
}

impl Feed {
    pub(super) fn send(&mut self, app: &mut App, at: u64, event: Event) {
        self.seq += 1;
        app.on_envelope(&Envelope {
            seq: self.seq,
            at_ms: T0 + at,
            event,
        });
    }
    pub(super) fn state(&mut self, app: &mut App, at: u64, run: u32, to: RunState) {
        let from = app.night.state.run(RunId(run)).state.clone();
        let gpus = if matches!(
            to,
            RunState::Active {
                stage: Stage::PreparingImage
            }
        ) {
            vec![run % 8]
        } else {
            vec![]
        };
        self.send(
            app,
            at,
            Event::State {
                run: RunId(run),
                attempt: 1,
                from,
                to,
                detail: None,
                gpus,
                interrupted: false,
            },
        );
    }
    pub(super) fn succeed(&mut self, app: &mut App, at: u64, run: u32) {
        let to = RunState::Finished {
            outcome: Outcome::Success,
        };
        self.state(app, at, run, to);
    }
    pub(super) fn stages(&mut self, app: &mut App, at: u64, run: u32, upto: Stage) {
        for (i, s) in Stage::ALL.iter().enumerate() {
            self.state(
                app,
                at + i as u64 * 7_000,
                run,
                RunState::Active { stage: *s },
            );
            if *s == upto {
                break;
            }
        }
    }
    pub(super) fn log(&mut self, app: &mut App, at: u64, run: u32, stream: Stream, line: &str) {
        self.send(
            app,
            at,
            Event::Log {
                run: RunId(run),
                attempt: 1,
                stream,
                pipe: Pipe::Stderr,
                line: line.into(),
            },
        );
    }
    pub(super) fn metric(&mut self, app: &mut App, at: u64, run: u32, key: &str, value: f64) {
        self.send(
            app,
            at,
            Event::Metric {
                run: RunId(run),
                attempt: 1,
                key: key.into(),
                value,
            },
        );
    }
}

/// The example plan mid-night: commit 0 measured (baseline, human), an aimv2 failure held
/// with a fix to offer, three runs in flight, one pulling its image, logs with errors.
pub(crate) fn scene() -> App {
    let plan = Arc::new(crate::plan::example::example_plan());
    let mut app = App::new(plan, 8, Theme::builtin("dark").unwrap(), KeyMap::default());
    let mut f = Feed { seq: 0 };
    let runs = app.night.plan.runs.len();
    f.send(
        &mut app,
        0,
        Event::SweepStarted {
            name: "iso-vllm-3way".into(),
            runs,
            gpus: 8,
            runtime: "sim".into(),
        },
    );
    // Commit 0: baseline and human succeed with metrics.
    for (run, tput, ttft) in [(0u32, 2100.0, 41.0), (1, 2350.5, 37.2)] {
        f.stages(&mut app, 1_000, run, Stage::Parsing);
        f.metric(&mut app, 30_000, run, "output_throughput_tok_s", tput);
        f.metric(&mut app, 30_000, run, "ttft_mean_ms", ttft);
        f.metric(&mut app, 30_000, run, "tpot_mean_ms", 11.5 - run as f64);
        f.succeed(&mut app, 40_000, run);
    }
    // The agent run of commit 0 is held on aimv2.
    f.stages(&mut app, 41_000, 2, Stage::LoadingServer);
    f.log(
        &mut app,
        50_000,
        2,
        Stream::Server,
        "INFO 11-23 01:02:03 api_server.py:1043] vLLM API server version 0.6.4.post1",
    );
    f.log(
        &mut app,
        50_100,
        2,
        Stream::Server,
        "Traceback (most recent call last):",
    );
    f.log(
        &mut app,
        50_200,
        2,
        Stream::Server,
        "ValueError: 'aimv2' is already used by a Transformers config, pick another name.",
    );
    f.send(
        &mut app,
        50_300,
        Event::Diagnosed {
            run: RunId(2),
            attempt: 1,
            finding: Finding {
                category: Category::Aimv2Conflict,
                evidence: "ValueError: 'aimv2' is already used by a Transformers config".into(),
                action: PolicyAction::Operator,
                recipe: Some("aimv2-exist-ok".into()),
                reason: "aimv2_conflict".into(),
                predicted: false,
                confidence: Some(0.9),
                telling: vec![],
                kind: None,
            },
        },
    );
    f.state(
        &mut app,
        50_400,
        2,
        RunState::Held {
            category: Category::Aimv2Conflict,
        },
    );
    // Commit 1: failed and skipped.
    f.stages(&mut app, 51_000, 3, Stage::StartingContainer);
    f.state(
        &mut app,
        60_000,
        3,
        RunState::Finished {
            outcome: Outcome::Failed {
                category: Category::CudaOom,
            },
        },
    );
    f.state(
        &mut app,
        60_000,
        4,
        RunState::Finished {
            outcome: Outcome::skipped(crate::model::SkipBy::Plan, "no image"),
        },
    );
    // In flight: a benchmark streaming, a server loading, an image pulling.
    f.stages(&mut app, 61_000, 6, Stage::Benchmarking);
    for i in 0..40u64 {
        f.log(&mut app, 90_000 + i, 6, Stream::Server, &format!("INFO 11-23 01:03:{:02} metrics.py:341] Avg prompt throughput: {}.0 tokens/s, Running: 8 reqs", i % 60, 1200 + i * 7));
        if i % 9 == 4 {
            f.log(&mut app, 90_000 + i, 6, Stream::Server, "ERROR 11-23 01:03:10 serving_chat.py:210] Error in chat completion stream generator: broken pipe");
        }
    }
    f.log(
        &mut app,
        95_000,
        6,
        Stream::Bench,
        "============ Serving Benchmark Result ============",
    );
    f.log(
        &mut app,
        95_001,
        6,
        Stream::Bench,
        "Successful requests:                     100",
    );
    f.metric(&mut app, 95_002, 6, "output_throughput_tok_s", 1984.2);
    f.stages(&mut app, 70_000, 7, Stage::LoadingServer);
    f.state(
        &mut app,
        80_000,
        9,
        RunState::Active {
            stage: Stage::PreparingImage,
        },
    );
    for (layer, done, total) in [
        ("a1b2c3d4e5f6", 4_500_000_000u64, 7_500_000_000u64),
        ("0f9e8d7c6b5a", 2_240_000_000, 11_200_000_000),
    ] {
        f.send(
            &mut app,
            81_000,
            Event::Pull {
                run: RunId(9),
                layer: layer.into(),
                done,
                total,
            },
        );
    }
    app.night.now_ms = T0 + 100_000;
    for k in 0..30 {
        app.night.now_ms = T0 + 70_000 + k * 1000;
        app.night.sim_gpu_tick();
    }
    app.night.now_ms = T0 + 100_000;
    // Watch the streaming benchmark.
    app.ui.auto_select = false;
    app.ui.sel_commit = app.night.plan.runs[6].commit;
    app.ui.sel_variant = 0;
    app
}

pub(super) fn render(app: &App, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| super::views::draw(f, app)).unwrap();
    format!("{}", t.backend())
}

pub(super) fn key(app: &mut App, c: char) -> Vec<Effect> {
    app.on_key(Key::ch(c))
}

#[test]
fn sweep_view_sizes() {
    let app = scene();
    insta::assert_snapshot!("sweep_160x48", render(&app, 160, 48));
    insta::assert_snapshot!("sweep_120x36", render(&app, 120, 36));
    insta::assert_snapshot!("sweep_80x24", render(&app, 80, 24));
    insta::assert_snapshot!("tiny_40x10", render(&app, 40, 10));
    insta::assert_snapshot!("sweep_100x30", render(&app, 100, 30));
    insta::assert_snapshot!("sweep_200x60", render(&app, 200, 60));
    insta::assert_snapshot!("sweep_120x40", render(&app, 120, 40));
}

#[test]
fn the_header_keeps_state_eta_and_gpus_at_every_size() {
    let app = scene();
    for (w, h) in [(80, 24), (100, 30), (120, 40), (200, 60)] {
        let s = render(&app, w, h);
        let top = s.lines().next().unwrap();
        for want in ["RUNNING", "ETA 22:43", "GPUs 3 busy / 5 free"] {
            assert!(top.contains(want), "{w}×{h}: {want} missing from {top}");
        }
        let second = s.lines().nth(1).unwrap();
        for want in ["4/258 done", "1%", "250 queued", "1 skipped"] {
            assert!(
                second.contains(want),
                "{w}×{h}: {want} missing from {second}"
            );
        }
    }
}

#[test]
fn held_run_shows_the_diagnosis_banner_with_keys() {
    let mut app = scene();
    app.ui.sel_commit = 0;
    app.ui.sel_variant = 2;
    let s = render(&app, 160, 48);
    assert!(
        s.contains("aimv2_conflict — press f to apply fix aimv2-exist-ok, r to retry, s to skip"),
        "{s}"
    );
    // The header says someone is waiting for the operator, not just "running".
    assert!(s.contains("RUNNING · ⚑ 1 waiting for you"), "{s}");
    insta::assert_snapshot!("held_banner_160x48", s);
    assert_eq!(
        key(&mut app, 'f'),
        vec![Effect::Send(Command::ApplyFix {
            run: RunId(2),
            recipe: Some("aimv2-exist-ok".into())
        })]
    );
}

/// The logs view with `text` typed into its search line (not yet entered).
fn typing_search(app: &mut App, text: &str) {
    key(app, '2');
    key(app, '/');
    for c in text.chars() {
        key(app, c);
    }
}

#[test]
fn logs_view_with_search_highlight() {
    let mut app = scene();
    typing_search(&mut app, "broken pipe");
    insta::assert_snapshot!("search_typing_100x30", render(&app, 100, 30));
    app.on_key(Key::code(KeyCode::Enter));
    let first = app.ui.search_at.expect("a match");
    key(&mut app, 'N');
    let prev = app.ui.search_at.unwrap();
    assert!(prev < first, "N goes back: {prev} < {first}");
    key(&mut app, 'n');
    assert_eq!(app.ui.search_at, Some(first));
    insta::assert_snapshot!("logs_search_100x30", render(&app, 100, 30));
    key(&mut app, 'b');
    assert_eq!(app.ui.log_tab, LogTab::Bench);
    insta::assert_snapshot!("logs_bench_tab_100x30", render(&app, 100, 30));
}

/// The 3-way view (`4`): a row per commit, numbers before words at 80×24, the weak
/// verdicts said as such.
#[test]
fn three_way_view_at_each_size() {
    let mut app = scene();
    key(&mut app, '4');
    for (w, h) in [(80, 24), (120, 40), (200, 60)] {
        let s = render(&app, w, h);
        assert!(s.contains("3-way"), "{w}×{h}:\n{s}");
        insta::assert_snapshot!(format!("threeway_{w}x{h}"), s);
    }
}

#[test]
fn results_view_sort_and_filter() {
    let mut app = scene();
    key(&mut app, '3');
    insta::assert_snapshot!("results_160x48", render(&app, 160, 48));
    // Sort by the headline, highest first.
    for _ in 0..5 {
        key(&mut app, '>');
    }
    key(&mut app, 'i');
    let rows = app.result_rows();
    assert_eq!(rows[0], RunId(1), "the best throughput first");
    key(&mut app, 'x'); // status=success
    assert_eq!(app.result_rows().len(), 2);
    insta::assert_snapshot!("results_sorted_filtered_120x30", render(&app, 120, 30));
    app.run_command_line("filter clear");
    app.run_command_line("filter category=cuda_oom");
    assert_eq!(app.result_rows(), vec![RunId(3)]);
    app.run_command_line("filter clear");
    app.run_command_line("filter model=qwen3-7b");
    assert!(app.result_rows().len() >= 3);
}

#[test]
fn popups() {
    let mut app = scene();
    key(&mut app, '?');
    insta::assert_snapshot!("help_100x40", render(&app, 100, 40));
    insta::assert_snapshot!("help_80x24", render(&app, 80, 24));
    app.on_key(Key::code(KeyCode::Esc));
    assert_eq!(app.ui.popup, None);
    app.ui.sel_commit = 0;
    app.ui.sel_variant = 2;
    // The operator sees the new selection before pressing a key.
    render(&app, 120, 40);
    app.on_key(Key::code(KeyCode::Enter));
    assert_eq!(app.ui.popup, Some(Popup::Detail(RunId(2))));
    insta::assert_snapshot!("detail_120x40", render(&app, 120, 40));
    app.on_key(Key::code(KeyCode::Esc));
    // q with runs active asks first; n keeps going; y quits.
    assert!(key(&mut app, 'q').is_empty());
    insta::assert_snapshot!("confirm_quit_80x24", render(&app, 80, 24));
    assert!(key(&mut app, 'n').is_empty());
    assert_eq!(key(&mut app, 'q'), vec![]);
    assert_eq!(key(&mut app, 'y'), vec![Effect::Quit]);
    // Cancel asks too.
    app.ui.sel_commit = app.night.plan.runs[6].commit;
    app.ui.sel_variant = 0;
    key(&mut app, 'c');
    insta::assert_snapshot!("confirm_cancel_80x24", render(&app, 80, 24));
    assert_eq!(
        key(&mut app, 'y'),
        vec![Effect::Send(Command::Cancel { run: RunId(6) })]
    );
    key(&mut app, ':');
    for c in "filter status=held".chars() {
        key(&mut app, c);
    }
    insta::assert_snapshot!("command_line_80x24", render(&app, 80, 24));
    app.on_key(Key::code(KeyCode::Enter));
    assert_eq!(app.ui.view, View::Results);
    assert_eq!(app.result_rows(), vec![RunId(2)]);
}

#[test]
fn skip_keys_and_pause() {
    let mut app = scene();
    app.ui.sel_commit = 0;
    app.ui.sel_variant = 2;
    assert_eq!(
        key(&mut app, 's'),
        vec![Effect::Send(Command::Skip { run: RunId(2) })]
    );
    assert_eq!(
        key(&mut app, 'r'),
        vec![Effect::Send(Command::Retry { run: RunId(2) })]
    );
    assert!(key(&mut app, 'S').is_empty());
    assert_eq!(
        key(&mut app, 'y'),
        vec![Effect::Send(Command::SkipCategory {
            category: Category::Aimv2Conflict
        })]
    );
    assert_eq!(key(&mut app, 'p'), vec![Effect::Send(Command::Pause)]);
    app.on_envelope(&Envelope {
        seq: 999,
        at_ms: T0 + 100_000,
        event: Event::Paused {
            reason: "paused by the operator".into(),
            by: crate::model::PauseBy::Operator,
        },
    });
    assert_eq!(key(&mut app, 'p'), vec![Effect::Send(Command::Resume)]);
    insta::assert_snapshot!("paused_120x36", render(&app, 120, 36));
}

#[test]
fn no_nvml_and_themes() {
    let mut app = scene();
    app.night.gpus.clear();
    app.night.on_gpu(GpuMsg::Unavailable(
        "no NVIDIA driver (NVML): libnvidia-ml.so not found".into(),
    ));
    let s = render(&app, 120, 36);
    assert!(s.contains("no NVIDIA driver (NVML)"), "{s}");
    insta::assert_snapshot!("no_nvml_120x36", s);
    let before = app.ui.theme.name.clone();
    key(&mut app, 't');
    assert_ne!(app.ui.theme.name, before);
    app.ui.theme = app.ui.theme.clone().monochrome();
    app.ui.toast = None;
    // Same text in every theme: colour is never the only signal.
    assert_eq!(render(&app, 120, 36), insta_text(&scene_no_nvml()));
}

fn scene_no_nvml() -> App {
    let mut app = scene();
    app.night.gpus.clear();
    app.night.on_gpu(GpuMsg::Unavailable(
        "no NVIDIA driver (NVML): libnvidia-ml.so not found".into(),
    ));
    app
}

fn insta_text(app: &App) -> String {
    render(app, 120, 36)
}

#[test]
fn log_rings_stay_bounded() {
    let mut app = scene();
    let mut f = Feed { seq: 10_000 };
    for i in 0..(RING_LINES + 500) {
        f.log(&mut app, 99_000, 6, Stream::Server, &format!("line {i}"));
    }
    let ring = app.night.logs[6].as_ref().unwrap();
    assert_eq!(ring.server.len(), RING_LINES);
    assert!(ring.dropped >= 500);
    assert_eq!(
        &*ring.server.back().unwrap().text,
        format!("line {}", RING_LINES + 499)
    );
}

/// Another run's full ring drops its oldest lines: the match the operator is on in the
/// shown ring stays on its line (only the shown ring's own drops move it).
#[test]
fn another_runs_ring_moving_leaves_the_search_match_where_it_was() {
    let mut app = scene();
    typing_search(&mut app, "broken pipe");
    app.on_key(Key::code(KeyCode::Enter));
    let shown = app.selected_run().expect("a selected run");
    let at = app.ui.search_at.expect("a match");
    let other = (0..app.night.plan.runs.len() as u32)
        .find(|r| RunId(*r) != shown)
        .unwrap();
    let mut f = Feed { seq: 10_000 };
    for i in 0..(RING_LINES + 50) {
        f.log(
            &mut app,
            99_000,
            other,
            Stream::Server,
            &format!("line {i}"),
        );
    }
    assert!(app.night.logs[other as usize].as_ref().unwrap().dropped >= 50);
    assert_eq!(app.ui.search_at, Some(at));
}

#[test]
fn mouse_click_selects_and_wheel_scrolls() {
    use crossterm::event::{MouseButton, MouseEventKind};
    let mut app = scene();
    render(&app, 160, 48);
    let q = app.hits.queue_rows.get();
    super::on_mouse(
        &mut app,
        MouseEventKind::Down(MouseButton::Left),
        q.x + 2,
        q.y + 3,
    );
    assert_eq!(app.ui.sel_commit, app.hits.queue_offset.get() + 3);
    let l = app.hits.logs.get();
    app.ui.sel_commit = app.night.plan.runs[6].commit;
    app.ui.sel_variant = 0;
    super::on_mouse(&mut app, MouseEventKind::ScrollUp, l.x + 1, l.y + 1);
    assert_eq!(app.ui.log_scroll, 3);
    assert!(!app.ui.follow);
}

#[test]
fn eta_counts_remaining_gpu_demand() {
    let app = scene();
    assert!(app
        .seen()
        .eta()
        .is_some_and(|e| e.low_ms <= e.left_ms && e.left_ms <= e.high_ms));
    assert!(app.delta_pct(RunId(1)).unwrap() > 11.0);
}

#[test]
fn a_new_attempt_is_marked_in_the_log() {
    let mut app = scene();
    let mut f = Feed { seq: 20_000 };
    for (from, to) in [
        (
            RunState::Held {
                category: Category::Aimv2Conflict,
            },
            RunState::Queued,
        ),
        (
            RunState::Queued,
            RunState::Active {
                stage: Stage::PreparingImage,
            },
        ),
    ] {
        f.send(
            &mut app,
            99_000,
            Event::State {
                run: RunId(2),
                attempt: 2,
                from,
                to,
                detail: None,
                gpus: vec![2],
                interrupted: false,
            },
        );
    }
    let logs = app.night.logs[2].as_ref().unwrap();
    assert_eq!(&*logs.server.back().unwrap().text, "──── attempt 2 ────");
    assert_eq!(app.night.state.run(RunId(2)).attempt, 2);
}

#[test]
fn nvml_samples_name_the_holder_and_flag_foreign_processes() {
    let mut app = scene();
    app.night.gpus.clear();
    let sample = |index: u32| crate::event::GpuSample {
        index,
        name: "NVIDIA H100 80GB HBM3".into(),
        util_pct: 50,
        mem_used_mib: 40_000,
        mem_total_mib: 81_559,
        temp_c: 60,
        power_w: 400,
        run: None,
    };
    // GPU 6 is held by run 6; GPU 5 is held by nobody but has a process on it.
    app.night.on_gpu(GpuMsg::Samples(vec![
        (sample(5), vec![4242]),
        (sample(6), vec![777]),
    ]));
    assert_eq!(app.night.gpus[6].sample.run, Some(RunId(6)));
    assert_eq!(app.night.gpus[5].foreign, 1);
    assert_eq!(app.night.gpus[6].foreign, 0);
    let s = render(&app, 160, 48);
    assert!(s.contains("⚠ 1 foreign proc"), "{s}");
    assert!(s.contains("0   no sample"), "{s}");
    assert!(s.contains("GPUs · NVML"), "{s}");
}

#[test]
fn a_prefetch_build_log_shows_in_the_waiting_runs_pane() {
    let mut app = scene();
    let run = (0..app.night.plan.runs.len())
        .map(|i| RunId(i as u32))
        .find(|r| {
            app.night.state.run(*r).state == RunState::Queued
                && app.night.plan.runs[r.0 as usize].image.is_some()
        })
        .expect("a queued run with an image");
    let image = app.night.plan.runs[run.0 as usize].image.clone().unwrap();
    let mut feed = Feed { seq: 10_000 };
    for (status, detail) in [
        (
            crate::event::ImageStatus::Fetching,
            "baseline missing: building from source",
        ),
        (
            crate::event::ImageStatus::Log,
            "build │ Step 5/7 : RUN pip install -e .",
        ),
        (crate::event::ImageStatus::Log, ""),
        (
            crate::event::ImageStatus::Failed,
            "the build failed: ERROR: Could not build wheels",
        ),
    ] {
        feed.send(
            &mut app,
            200_000,
            Event::Image {
                image: image.clone(),
                status,
                detail: detail.into(),
            },
        );
    }
    app.select_run(run);
    app.ui.log_tab = LogTab::Server;
    let lines: Vec<String> = app
        .shown_log()
        .expect("the run has lines")
        .iter()
        .map(|l| l.text.to_string())
        .collect();
    assert!(
        lines.iter().any(|l| l.contains("build │ Step 5/7")),
        "{lines:?}"
    );
    assert!(
        lines.iter().any(|l| l.contains("failed: the build failed")),
        "{lines:?}"
    );
    assert_eq!(lines.iter().filter(|l| l.is_empty()).count(), 0);
    let shown = render(&app, 120, 36);
    assert!(shown.contains("Step 5/7"), "{shown}");
}

#[test]
fn status_cells_grow_with_the_terminal() {
    let app = scene();
    // At 80 columns the held run's category is cut to fit its cell; at 220 it is whole.
    let narrow = render(&app, 80, 24);
    assert!(!narrow.contains("aimv2_conflict"), "{narrow}");
    let wide = render(&app, 220, 40);
    assert!(wide.contains("! aimv2_conflict"), "{wide}");
}

#[test]
fn the_log_pane_never_goes_blank_with_follow_off() {
    let mut app = scene();
    key(&mut app, '2');
    assert_eq!(app.selected_run(), Some(RunId(6)));
    app.ui.follow = false;
    app.ui.log_tab = LogTab::Server;
    let mut f = Feed { seq: 10_000 };
    // Twice the ring: every line the operator was looking at has been dropped.
    for i in 0..(2 * RING_LINES) {
        f.log(&mut app, 99_000, 6, Stream::Server, &format!("line {i}"));
    }
    // The view stops at the oldest full screen still in memory.
    let s = render(&app, 100, 30);
    assert!(s.contains(&format!("line {} ", RING_LINES)), "{s}");
}

#[test]
fn an_action_key_acts_on_the_run_the_operator_saw() {
    let mut app = scene();
    app.ui.auto_select = true;
    let seen = app.selected_run().unwrap();
    render(&app, 160, 48);
    // Between that frame and the key, the watched run ends and the selection follows the
    // newest active run.
    let mut f = Feed { seq: 20_000 };
    let from = app.night.state.run(seen).state.clone();
    f.send(
        &mut app,
        200_000,
        Event::State {
            run: seen,
            attempt: 1,
            from,
            to: RunState::Held {
                category: Category::CudaOom,
            },
            detail: None,
            gpus: vec![],
            interrupted: false,
        },
    );
    assert_ne!(app.selected_run(), Some(seen), "the list moved");
    let effects = key(&mut app, 's');
    assert!(
        effects.contains(&Effect::Send(Command::Skip { run: seen })),
        "{effects:?}"
    );
}

#[test]
fn the_tui_exit_status_follows_the_contract() {
    use super::TuiExit;
    let e = |finished, detached, failed| TuiExit {
        done: 0,
        total: 0,
        finished,
        detached,
        failed,
    };
    assert_eq!(e(true, false, 0).code(), 0);
    assert_eq!(e(true, false, 3).code(), 1, "failed runs are failed work");
    assert_eq!(e(false, false, 0).code(), 1, "left undone");
    assert_eq!(e(false, true, 3).code(), 0, "detached: the sweep goes on");
}

#[test]
fn results_chart_and_export_carry_the_statistics() {
    let mut app = scene();
    key(&mut app, '3');
    let s = render(&app, 160, 48);
    // The selected commit's comparison, worded, with its whisker chart and sparklines.
    assert!(s.contains("human vs baseline"), "{s}");
    // A single run each side, judged by the uncalibrated threshold: said so.
    assert!(s.contains("better: more tok/s 11.9% unc."), "{s}");
    assert!(s.contains("baseline n=1"), "{s}");
    let csv = super::export::csv(&app);
    let head: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = |n: &str| head.iter().position(|h| *h == n).unwrap();
    let human = csv
        .lines()
        .find(|l| l.starts_with("015069b0") && l.contains(",human,"))
        .unwrap();
    let f: Vec<&str> = human.split(',').collect();
    assert_eq!(f[col("n")], "1");
    assert_eq!(f[col("verdict")], "better");
    assert_eq!(f[col("method")], "threshold uncalibrated");
    let json = super::export::json(&app);
    assert_eq!(json["summary"]["human_vs_baseline"]["better"], 1);
}

/// The results view's chart judges as `results` does: with the store's calibration (sent
/// by the daemon on attach) a single-run comparison is decided by the noise band, without
/// one it says uncalibrated.
#[test]
fn the_results_chart_judges_with_the_stores_calibration() {
    use crate::stats::{band::Band, Calibration, Method};
    let mut app = scene();
    let before = super::views::compare::commit_report(&app, 0);
    let row = &before.rows[0];
    let hb = &row.comparisons[0];
    assert_eq!(hb.label, "human vs baseline");
    assert_eq!(hb.method, Some(Method::Uncalibrated));
    let primary = hb.primary.clone().expect("a headline metric");
    let class = crate::stats::band::size_class(row.cells[0].model.as_deref());
    app.night.calibration.bands.insert(
        Calibration::key(&primary, class),
        Band {
            sigma: 0.01,
            groups: 4,
            runs: 12,
            source: "calibrate".into(),
        },
    );
    let after = super::views::compare::commit_report(&app, 0);
    assert_eq!(after.rows[0].comparisons[0].method, Some(Method::NoiseBand));
}

/// One commit's chart judges with the bands the whole night's repeats teach, as `results`
/// and the exports do: a single-run commit beside commits with repeats is decided by the
/// learned noise band, the same verdict as the full report's.
#[test]
fn the_results_chart_learns_bands_from_the_whole_night() {
    use crate::stats::Method;
    let mut text = String::from(
        "schema_version = 1\nname = \"n\"\n[defaults]\nvariants = [\"baseline\", \"human\"]\n[images]\nhuman = \"h:{commit}\"\nbaseline = \"b:{commit}\"\n",
    );
    for (c, repeats) in [("a0000000", 1), ("a1111111", 3), ("a2222222", 3)] {
        text.push_str(&format!(
            "[[commits]]\ncommit = \"{c}\"\nparent = \"{c}0\"\nmodel = \"org/m-8B\"\ngpu_config = \"H100:1\"\nrepeats = {repeats}\nperf_command = '''python benchmarks/benchmark_serving.py --model org/m-8B'''\n"
        ));
    }
    let plan = crate::plan::Plan::from_str_at(
        "t.toml",
        text,
        std::path::Path::new("."),
        std::path::Path::new("t.toml"),
    )
    .unwrap();
    let mut app = App::new(
        Arc::new(plan),
        8,
        Theme::builtin("dark").unwrap(),
        KeyMap::default(),
    );
    let mut f = Feed { seq: 0 };
    let specs: Vec<(u32, bool, u32)> = app
        .night
        .plan
        .runs
        .iter()
        .map(|r| (r.id.0, r.variant == crate::model::Variant::Human, r.repeat))
        .collect();
    for (run, human, repeat) in specs {
        let tput = 1000.0 * if human { 1.06 } else { 1.0 } + f64::from(repeat) * 12.0;
        f.stages(&mut app, 1_000, run, Stage::Parsing);
        f.metric(&mut app, 30_000, run, "output_throughput_tok_s", tput);
        f.succeed(&mut app, 40_000, run);
    }
    let chart = super::views::compare::commit_report(&app, 0);
    let (_, full) = super::export::report(&app);
    let (one, all) = (&chart.rows[0].comparisons[0], &full.rows[0].comparisons[0]);
    assert_eq!(one.method, Some(Method::NoiseBand), "{one:?}");
    assert_eq!(
        (
            one.verdict,
            one.method,
            one.primary_stats().and_then(|s| s.p_value)
        ),
        (
            all.verdict,
            all.method,
            all.primary_stats().and_then(|s| s.p_value)
        )
    );
}

/// Runs failing with one unknown error are one row in the results view; `a` on one of
/// them decides for the whole group.
#[test]
fn failure_groups_show_as_one_row_and_one_key_decides_for_all() {
    let mut app = scene();
    let mut f = Feed { seq: 10_000 };
    // Commit 5's three runs and commit 7's baseline die of the same unknown error (the
    // numbers, the hash, the path differ); commit 8's baseline of another.
    let lines = [
        (
            15u32,
            "TypeError: shard 3 of /cache/7f3a2c001e40/x failed at 10.0.0.1:29500",
        ),
        (
            16,
            "TypeError: shard 12 of /cache/0c9d2e11aa55/y failed at 10.0.0.7:29511",
        ),
        (
            17,
            "TypeError: shard 40 of /cache/99aa00bb11cc/z failed at 10.0.0.9:29400",
        ),
        (
            21,
            "TypeError: shard 1 of /cache/5e5e5e5e5e51/w failed at 10.0.0.2:29501",
        ),
        (24, "KeyError: 'lm_head.weight'"),
    ];
    for (i, (run, line)) in lines.iter().enumerate() {
        let at = 200_000 + i as u64 * 1_000;
        f.stages(&mut app, at, *run, Stage::LoadingServer);
        f.send(
            &mut app,
            at + 500,
            Event::Diagnosed {
                run: RunId(*run),
                attempt: 1,
                finding: Finding {
                    category: Category::Other,
                    evidence: line.to_string(),
                    action: PolicyAction::Skip,
                    recipe: None,
                    reason: "other — failed after 1 retry".into(),
                    predicted: false,
                    confidence: Some(0.3),
                    telling: vec![],
                    kind: None,
                },
            },
        );
        f.state(
            &mut app,
            at + 600,
            *run,
            RunState::Finished {
                outcome: Outcome::Failed {
                    category: Category::Other,
                },
            },
        );
    }
    let groups = app.seen().failure_groups();
    assert_eq!(groups.len(), 2, "{groups:#?}");
    assert_eq!(groups[0].count, 4);
    let id = groups[0].id.clone();
    // The results view: a row per group (count, first line, models).
    app.ui.view = View::Results;
    let screen = render(&app, 160, 48);
    assert!(
        screen.contains("failure groups · 5 unknown failures in 2 groups"),
        "{screen}"
    );
    let row = screen
        .lines()
        .find(|l| l.contains(&id))
        .unwrap_or_else(|| panic!("no row for {id}:\n{screen}"));
    assert!(row.contains(" 4 "), "{row}");
    assert!(
        row.contains("TypeError: shard 3 of /cache/7f3a2c001e40/x"),
        "{row}"
    );
    // One key on a run of the group, one decision for all of it.
    app.ui.view = View::Sweep;
    app.select_run(RunId(16));
    app.ui.auto_select = false;
    render(&app, 160, 48);
    assert!(key(&mut app, 'a').is_empty());
    assert_eq!(app.ui.popup, Some(Popup::Group(id.clone())));
    let popup = render(&app, 160, 48);
    assert!(popup.contains(&format!("failure group {id}")), "{popup}");
    assert!(popup.contains("4 failed alike"), "{popup}");
    assert_eq!(
        key(&mut app, 's'),
        vec![Effect::Send(Command::SkipGroup { kind: id.clone() })]
    );
    assert_eq!(app.ui.popup, None);
    key(&mut app, 'a');
    assert_eq!(
        key(&mut app, 'r'),
        vec![Effect::Send(Command::RetryGroup { kind: id.clone() })]
    );
    // No fix is known for it: said, nothing sent.
    key(&mut app, 'a');
    assert!(key(&mut app, 'f').is_empty());
    assert!(app.ui.toast.as_deref().unwrap_or("").contains(":fix-group"));
    // The command line: by the selected run's group, or by id (a prefix will do).
    assert_eq!(
        app.run_command_line("skip-group"),
        vec![Effect::Send(Command::SkipGroup { kind: id.clone() })]
    );
    assert_eq!(
        app.run_command_line(&format!("fix-group aimv2-exist-ok {}", &id[..6])),
        vec![Effect::Send(Command::FixGroup {
            kind: id.clone(),
            recipe: "aimv2-exist-ok".into()
        })]
    );
    assert!(app.run_command_line("retry-group ffff0000").is_empty());
    assert!(app
        .ui
        .toast
        .as_deref()
        .unwrap_or("")
        .contains("no failure group"));
    // Filtered to the group: its four runs.
    app.run_command_line(&format!("filter group={id}"));
    assert_eq!(app.ui.view, View::Results);
    assert_eq!(app.result_rows().len(), 4);
    // A run outside any group says so.
    app.ui.results = Default::default();
    app.ui.view = View::Sweep;
    app.select_run(RunId(0));
    render(&app, 160, 48);
    assert!(key(&mut app, 'a').is_empty());
    assert!(app.ui.popup.is_none());
    assert!(app
        .ui
        .toast
        .as_deref()
        .unwrap_or("")
        .contains("no failure group"));
}

#[test]
fn the_header_shows_the_window_and_says_when_the_estimate_ends_after_it() {
    let mut app = scene();
    let left = app.seen().eta().expect("an estimate").left_ms;
    app.night.window_closes_ms = Some(app.night.now_ms + left + 3_600_000);
    let top = render(&app, 160, 48).lines().next().unwrap().to_string();
    assert!(
        top.contains("window ") && !top.contains("ends after"),
        "{top}"
    );
    app.night.window_closes_ms = Some(app.night.now_ms + left / 2);
    let top = render(&app, 160, 48).lines().next().unwrap().to_string();
    assert!(top.contains("(ends after)"), "{top}");
}
