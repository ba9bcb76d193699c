//! The selection is a run, not a row (#25): whatever moves the rows (another client's
//! skip, a resync from the daemon, a new sort) the highlight and the keys stay on the run
//! the operator picked. And the keys around it: `<` back, `S` counts, the help stops at
//! its end, `]`/`[` jump to what needs a look, an empty list says so.

use super::app::{App, Confirm, Effect, Popup, View};
use super::link::{take, Incoming};
use super::tests::{key, render, scene, Feed};
use crate::category::Category;
use crate::event::Command;
use crate::model::{Outcome, RunId, RunState, Stage};
use ratatui::backend::TestBackend;
use ratatui::Terminal;

fn ids(v: &[u32]) -> Vec<RunId> {
    v.iter().map(|i| RunId(*i)).collect()
}

fn held(app: &mut App, f: &mut Feed, runs: &[u32]) {
    for run in runs {
        f.stages(app, 150_000, *run, Stage::LoadingServer);
        let to = RunState::Held {
            category: Category::CudaOom,
        };
        f.state(app, 160_000, *run, to);
    }
}

fn skipped() -> RunState {
    RunState::Finished {
        outcome: Outcome::skipped(crate::model::SkipBy::Operator, "skipped by the operator"),
    }
}

/// The results row drawn highlighted (by its colour, as the operator sees it).
fn highlighted(app: &App, w: u16, h: u16) -> Option<String> {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| super::views::draw(f, app)).unwrap();
    let r = app.hits.results_rows.get();
    let buf = t.backend().buffer();
    (r.y..r.y + r.height)
        .find(|&y| buf[(r.x, y)].bg == app.ui.theme.selected_bg)
        .map(|y| (r.x..r.x + r.width).map(|x| buf[(x, y)].symbol()).collect())
}

fn variant_of(app: &App, run: u32) -> String {
    let spec = &app.night.plan.runs[run as usize];
    format!(
        "{} {}",
        app.night.plan.commit_of(spec).short(),
        spec.variant
    )
}

/// Run `run`'s row is the highlighted one: its commit and variant, in that order.
fn assert_highlighted(app: &App, run: u32) {
    let line = highlighted(app, 160, 48).expect("a highlighted row");
    let want = variant_of(app, run);
    let words: Vec<&str> = line.split_whitespace().take(2).collect();
    assert_eq!(words.join(" "), want, "{line}");
}

#[test]
fn a_row_leaving_above_the_selection_leaves_it_on_its_run() {
    let mut app = scene();
    let mut f = Feed { seq: 10_000 };
    held(&mut app, &mut f, &[10, 11, 12]);
    app.run_command_line("filter status=held");
    assert_eq!(app.result_rows(), ids(&[2, 10, 11, 12]));
    key(&mut app, 'j');
    key(&mut app, 'j');
    assert_eq!(app.action_run(), Some(RunId(11)));
    assert_highlighted(&app, 11);
    // Another client skips run 10: the row above the selection goes.
    f.state(&mut app, 170_000, 10, skipped());
    assert_eq!(app.result_rows(), ids(&[2, 11, 12]));
    assert_highlighted(&app, 11);
    assert_eq!(
        key(&mut app, 's'),
        vec![Effect::Send(Command::Skip { run: RunId(11) })]
    );
    // The selected run itself leaves (skipped): the nearest row is highlighted and is
    // what the keys act on.
    f.state(&mut app, 171_000, 11, skipped());
    assert_eq!(app.result_rows(), ids(&[2, 12]));
    assert_highlighted(&app, 12);
    assert_eq!(
        key(&mut app, 'r'),
        vec![Effect::Send(Command::Retry { run: RunId(12) })]
    );
}

#[test]
fn a_resync_from_the_daemon_keeps_the_selected_run() {
    let mut app = scene();
    let mut f = Feed { seq: 10_000 };
    held(&mut app, &mut f, &[11, 12]);
    app.run_command_line("filter status=held");
    assert_eq!(app.result_rows(), ids(&[2, 11, 12]));
    key(&mut app, 'j');
    assert_highlighted(&app, 11);
    // Events were dropped; the daemon sends its whole state, in which run 10 was retried
    // and came back held: a row appears above the selection.
    let mut st = app.night.state.clone();
    st.runs[10].state = RunState::Held {
        category: Category::CudaOom,
    };
    take(&mut app, Incoming::State(st));
    assert_eq!(app.result_rows(), ids(&[2, 10, 11, 12]));
    assert_highlighted(&app, 11);
    assert_eq!(
        key(&mut app, 's'),
        vec![Effect::Send(Command::Skip { run: RunId(11) })]
    );
}

#[test]
fn a_new_sort_keeps_the_selected_run() {
    let mut app = scene();
    key(&mut app, '3');
    for _ in 0..20 {
        key(&mut app, 'j');
    }
    let x = app.action_run().expect("a selected run");
    assert_eq!(app.night.state.run(x).state, RunState::Queued);
    let before = app.result_rows().iter().position(|r| *r == x);
    assert_highlighted(&app, x.0);
    // By variant: every baseline first, so the run moves up the list.
    key(&mut app, '>');
    assert_eq!(app.ui.results.sort_col, 1);
    assert_ne!(app.result_rows().iter().position(|r| *r == x), before);
    assert_highlighted(&app, x.0);
    key(&mut app, 'i');
    assert_highlighted(&app, x.0);
    assert_eq!(
        key(&mut app, 's'),
        vec![Effect::Send(Command::Skip { run: x })]
    );
    // And through a filter that keeps it, and one that clears.
    app.run_command_line("filter status=queued");
    assert_highlighted(&app, x.0);
    app.run_command_line("filter clear");
    assert_highlighted(&app, x.0);
}

#[test]
fn less_than_sorts_back_and_greater_than_forward() {
    let mut app = scene();
    key(&mut app, '3');
    key(&mut app, '>');
    key(&mut app, '>');
    assert_eq!(app.ui.results.sort_col, 2);
    key(&mut app, '<');
    assert_eq!(app.ui.results.sort_col, 1);
    key(&mut app, '<');
    key(&mut app, '<');
    assert_eq!(
        app.ui.results.sort_col,
        super::app::RESULT_COLUMNS.len() - 1
    );
}

#[test]
fn skipping_a_category_says_how_many_runs_it_skips() {
    let mut app = scene();
    let mut f = Feed { seq: 10_000 };
    held(&mut app, &mut f, &[10, 11]);
    app.select_run(RunId(10));
    render(&app, 80, 24);
    assert!(key(&mut app, 'S').is_empty());
    assert_eq!(
        app.ui.popup,
        Some(Popup::Confirm(Confirm::SkipCategory(Category::CudaOom)))
    );
    let s = render(&app, 100, 30);
    assert!(
        s.contains("Skip 2 runs whose failure is cuda_oom, and each later one"),
        "{s}"
    );
    app.ui.popup = None;
    app.select_run(RunId(2));
    render(&app, 80, 24);
    key(&mut app, 'S');
    let s = render(&app, 100, 30);
    assert!(s.contains("Skip 1 run whose failure is"), "{s}");
}

#[test]
fn help_scrolling_stops_at_its_end() {
    let mut app = scene();
    key(&mut app, '?');
    let top = render(&app, 100, 30);
    for _ in 0..500 {
        key(&mut app, 'j');
    }
    let bottom = render(&app, 100, 30);
    let Some(Popup::Help { scroll }) = app.ui.popup else {
        panic!("help is open")
    };
    assert!(scroll > 0 && scroll < 100, "{scroll}");
    assert_ne!(top, bottom);
    // One key up moves the screen at once: nothing was scrolled past the end.
    key(&mut app, 'k');
    assert_ne!(render(&app, 100, 30), bottom);
    key(&mut app, 'G');
    assert_eq!(render(&app, 100, 30), bottom);
    key(&mut app, 'g');
    assert_eq!(render(&app, 100, 30), top);
}

#[test]
fn brackets_jump_between_held_and_failed_runs() {
    let mut app = scene();
    // The scene watches run 6; run 2 (commit 0) is held, run 3 (commit 1) failed.
    assert_eq!(app.selected_run(), Some(RunId(6)));
    key(&mut app, ']');
    assert_eq!(app.selected_run(), Some(RunId(2)), "wraps round");
    key(&mut app, ']');
    assert_eq!(app.selected_run(), Some(RunId(3)));
    key(&mut app, '[');
    assert_eq!(app.selected_run(), Some(RunId(2)));
    render(&app, 160, 48);
    assert_eq!(
        key(&mut app, 's'),
        vec![Effect::Send(Command::Skip { run: RunId(2) })]
    );
    // In the results view, over its rows.
    key(&mut app, '3');
    assert_eq!(app.ui.view, View::Results);
    key(&mut app, ']');
    let first = app.action_run();
    assert!(
        matches!(first, Some(RunId(2)) | Some(RunId(3))),
        "{first:?}"
    );
    key(&mut app, ']');
    assert_ne!(app.action_run(), first);
    // Documented where the operator looks.
    let help = {
        key(&mut app, '?');
        render(&app, 100, 60)
    };
    assert!(help.contains("next held or failed run"), "{help}");
    app.ui.popup = None;
    assert!(render(&app, 160, 48).contains("]  held/failed"));
}

#[test]
fn an_empty_filtered_list_says_no_runs_match() {
    let mut app = scene();
    app.run_command_line("filter nothing-is-called-this");
    assert!(app.result_rows().is_empty());
    assert_eq!(app.action_run(), None);
    let s = render(&app, 120, 30);
    assert!(
        s.contains("no runs match text=nothing-is-called-this"),
        "{s}"
    );
    assert!(
        key(&mut app, 's').is_empty(),
        "nothing selected, nothing skipped"
    );
}

/// The activity log (#25): an operator action signed by another client shows with its
/// signer and outcome; this client's own refused action comes back as a prompt to look
/// again; `A` opens the pane, `u` offers to undo an operator's skip and nothing else.
#[test]
fn the_activity_pane_names_who_did_what_and_asks_again_on_a_conflict() {
    let mut app = scene();
    app.me = Some("me@tui:1".into());
    let mut f = Feed { seq: 10_000 };
    let q = (0..app.night.state.runs.len() as u32)
        .find(|i| app.night.state.run(RunId(*i)).state == RunState::Queued)
        .expect("a queued run in the scene");
    let done = (0..app.night.state.runs.len() as u32)
        .find(|i| {
            app.night.state.run(RunId(*i)).state
                == RunState::Finished {
                    outcome: Outcome::Success,
                }
        })
        .expect("a finished run in the scene");
    f.send(
        &mut app,
        200_000,
        crate::event::Event::Operator {
            command: Command::Skip { run: RunId(q) },
            by: Some("ana@tui:77".into()),
            outcome: Some("done".into()),
        },
    );
    f.state(&mut app, 200_001, q, skipped());
    f.send(
        &mut app,
        200_100,
        crate::event::Event::Operator {
            command: Command::Retry { run: RunId(q) },
            by: Some("me@tui:1".into()),
            outcome: Some("refused: #1 was just skipped by ana@tui:77".into()),
        },
    );
    let toast = app.ui.toast.clone().unwrap_or_default();
    assert!(toast.contains("was just skipped by ana@tui:77"), "{toast}");
    assert!(app.night.activity.len() >= 2, "{:?}", app.night.activity);
    assert!(key(&mut app, 'A').is_empty());
    assert!(matches!(app.ui.popup, Some(Popup::Activity { .. })));
    let screen = render(&app, 120, 36);
    assert!(screen.contains("ana@tui:77"), "{screen}");
    assert!(
        screen.contains("you"),
        "this client's own line says so:\n{screen}"
    );
    assert!(screen.contains("refused"), "{screen}");
    key(&mut app, 'A');
    assert!(app.ui.popup.is_none());

    // `u` on the skipped run: the undo; on a run nobody skipped: a word, no command.
    assert_eq!(app.night.state.run(RunId(q)).state, skipped());
    app.hits.shown.set(Some(RunId(q)));
    assert_eq!(
        key(&mut app, 'u'),
        vec![Effect::Send(Command::Unskip { run: RunId(q) })]
    );
    app.hits.shown.set(Some(RunId(done)));
    assert!(key(&mut app, 'u').is_empty());
    assert!(app
        .ui
        .toast
        .clone()
        .unwrap_or_default()
        .contains("not a run the operator skipped"));
}

/// `y` copies the selected run's command as written (OSC 52 in the loop); `!` opens a
/// shell only in a running run's container.
#[test]
fn y_copies_the_command_and_the_shell_needs_a_running_container() {
    let mut app = scene();
    let active = (0..app.night.state.runs.len() as u32)
        .find(|i| app.night.state.run(RunId(*i)).state.is_active())
        .expect("a running run in the scene");
    let queued = (0..app.night.state.runs.len() as u32)
        .find(|i| app.night.state.run(RunId(*i)).state == RunState::Queued)
        .unwrap();
    app.hits.shown.set(Some(RunId(active)));
    let spec = &app.night.plan.runs[active as usize];
    let cmd = app.night.plan.commit_of(spec).perf_command.clone().unwrap();
    assert_eq!(key(&mut app, 'y'), vec![Effect::Copy(cmd)]);
    app.hits.shown.set(Some(RunId(active)));
    assert_eq!(key(&mut app, '!'), vec![Effect::Shell(RunId(active))]);
    app.hits.shown.set(Some(RunId(queued)));
    assert!(key(&mut app, '!').is_empty());
    assert!(app
        .ui
        .toast
        .clone()
        .unwrap_or_default()
        .contains("not running"));
}

/// `w` wraps long log lines: their ends, cut at the pane's edge before, are on screen.
#[test]
fn w_wraps_long_log_lines() {
    let mut app = scene();
    let run = app.selected_run().expect("a selected run").0;
    let mut f = Feed { seq: 10_000 };
    let long = format!("INFO start {} THE-END-OF-THE-LINE", "x".repeat(150));
    f.log(&mut app, 200_000, run, crate::model::Stream::Server, &long);
    key(&mut app, '2');
    assert!(!render(&app, 100, 30).contains("THE-END-OF-THE-LINE"));
    key(&mut app, 'w');
    let s = render(&app, 100, 30);
    assert!(s.contains("THE-END-OF-THE-LINE"), "{s}");
    assert!(s.contains(" wrap "), "{s}");
}

/// The detail popup at 80×24: the run's numbers come before its provenance, and what does
/// not fit scrolls (j) instead of being lost.
#[test]
fn the_detail_popup_shows_the_numbers_first_and_scrolls() {
    let mut app = scene();
    let done = (0..app.night.state.runs.len() as u32)
        .find(|i| !app.night.state.run(RunId(*i)).metrics.is_empty())
        .expect("a run with metrics in the scene");
    let first_metric = app
        .night
        .state
        .run(RunId(done))
        .metrics
        .keys()
        .next()
        .unwrap()
        .clone();
    app.hits.shown.set(Some(RunId(done)));
    app.on_action(crate::tui::keymap::Action::Enter);
    assert!(
        matches!(app.ui.popup, Some(Popup::Detail(_))),
        "{:?}",
        app.ui.popup
    );
    let s = render(&app, 80, 24);
    assert!(
        s.contains(&first_metric[..first_metric.len().min(10)]),
        "{s}"
    );
    if app.hits.detail_max.get() > 0 {
        key(&mut app, 'j');
        assert_eq!(app.ui.detail_scroll, 1);
        let scrolled = render(&app, 80, 24);
        assert_ne!(s, scrolled);
    }
}

/// `:sort delta` sorts by the `Δ base` column (a name the keyboard can type); a name that
/// is none lists the typable ones.
#[test]
fn sort_by_a_typable_column_name() {
    let mut app = scene();
    app.run_command_line("sort delta");
    assert_eq!(
        super::app::RESULT_COLUMNS[app.ui.results.sort_col],
        "Δ base"
    );
    assert_eq!(app.ui.view, View::Results);
    app.run_command_line("sort nope");
    let t = app.ui.toast.clone().unwrap_or_default();
    assert!(t.contains("delta") && !t.contains('Δ'), "{t}");
}

/// `:verdict weak` keeps the commits whose verdict rests on little; `:verdict worse` those
/// with a worse comparison; a bad word says which there are.
#[test]
fn the_three_way_view_filters_by_verdict() {
    let mut app = scene();
    app.run_command_line("verdict weak");
    assert_eq!(app.ui.view, View::ThreeWay);
    let s = render(&app, 120, 40);
    assert!(s.contains("verdict=weak"), "{s}");
    assert!(
        s.contains("015069b0"),
        "the one compared commit (single runs):\n{s}"
    );
    assert!(!s.contains("0d243f2a"), "a commit with no comparison:\n{s}");
    app.run_command_line("verdict worse");
    assert!(!render(&app, 120, 40).contains("015069b0"));
    app.run_command_line("verdict nope");
    assert!(app
        .ui
        .toast
        .clone()
        .unwrap_or_default()
        .contains("better, worse"));
}

/// Every theme readable where it matters most: no character drawn in its own background
/// colour — a selected held or failed row in high-contrast was yellow on yellow — in the
/// sweep, the results and the 3-way views, with a held run selected.
#[test]
fn no_theme_draws_text_in_its_background_colour() {
    for name in ["dark", "light", "high-contrast"] {
        let mut app = scene();
        app.ui.theme = crate::tui::theme::Theme::builtin(name).unwrap();
        let held = (0..app.night.state.runs.len() as u32)
            .find(|i| matches!(app.night.state.run(RunId(*i)).state, RunState::Held { .. }))
            .expect("a held run in the scene");
        for view in ['1', '3', '4'] {
            key(&mut app, view);
            app.hits.shown.set(Some(RunId(held)));
            if view == '3' {
                let rows = app.result_rows();
                let at = rows.iter().position(|r| r.0 == held).unwrap();
                app.ui.results.selected.select_row(&rows, at);
            } else {
                app.ui.sel_commit = app.night.plan.runs[held as usize].commit;
            }
            let mut t = Terminal::new(TestBackend::new(120, 40)).unwrap();
            t.draw(|f| super::views::draw(f, &app)).unwrap();
            let buf = t.backend().buffer();
            for y in 0..40 {
                for x in 0..120 {
                    let c = &buf[(x, y)];
                    // Blank cells, and bars and dots (drawn in their foreground alone).
                    let sym = c.symbol();
                    let bar = sym.chars().all(|ch| {
                        matches!(ch, '█' | '▀' | '▄' | '▌' | '▐' | '░' | '▒' | '▓')
                            || ('\u{2800}'..='\u{28ff}').contains(&ch)
                            || ('\u{2581}'..='\u{2588}').contains(&ch)
                    });
                    if sym.trim().is_empty() || bar {
                        continue;
                    }
                    assert!(
                        c.fg != c.bg || c.fg == ratatui::style::Color::Reset,
                        "{name}, view {view}: {:?} drawn {:?} on {:?} at {x},{y}",
                        c.symbol(),
                        c.fg,
                        c.bg
                    );
                }
            }
        }
    }
}

/// A key moves one operator through the night and changes nothing of it: two `Ui`s over
/// one night keep their own selections, filters and views, and each one's keys act on the
/// run that one sees.
#[test]
fn two_operators_over_one_night_each_move_their_own_way() {
    use super::app::Ui;
    use super::keymap::Key;
    let mut app = scene();
    let mut f = Feed { seq: 10_000 };
    held(&mut app, &mut f, &[10, 11, 12]);
    let mut other = Ui::new(app.ui.theme.clone());
    let before = serde_json::to_value(&app.night.state).unwrap();

    app.run_command_line("filter status=held");
    key(&mut app, 'j');
    assert_eq!(app.action_run(), Some(RunId(10)));

    // The other operator is still on the sweep view, with no filter: their `j` moves
    // their queue selection, and their `s` skips what they see, not run 10.
    assert_eq!(other.view, View::Sweep);
    other.on_key(&app.seen(), Key::ch('j'));
    let theirs = other.action_run(&app.seen());
    assert!(theirs.is_some_and(|r| r != RunId(10)), "{theirs:?}");
    assert_eq!(
        other.on_key(&app.seen(), Key::ch('s')),
        theirs
            .map(|run| vec![Effect::Send(Command::Skip { run })])
            .unwrap_or_default()
    );
    // Neither moved the other, and no key changed the night.
    assert_eq!(app.action_run(), Some(RunId(10)));
    assert_eq!(app.ui.view, View::Results);
    assert_eq!(serde_json::to_value(&app.night.state).unwrap(), before);
}
