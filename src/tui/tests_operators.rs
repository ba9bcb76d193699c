//! Several operators on one night (#34): another's action is a toast on every client, a
//! second decision on a run another operator just decided asks first, refusals wrap to
//! their end, and the 3-way view acts on one cell it names. At 80×24 the queue and the
//! 3-way view drop whole columns, never cut a variant to a stub.

use super::app::{App, Confirm, Effect, Popup, View, OVERRIDE_ASK_MS};
use super::tests::{key, render, scene, Feed, T0};
use crate::event::{Command, Event};
use crate::model::RunId;
use ratatui::backend::TestBackend;
use ratatui::Terminal;

fn by_ana(app: &mut App, f: &mut Feed, at: u64, command: Command) {
    f.send(
        app,
        at,
        Event::Operator {
            command,
            by: Some("ana@tui:77 (uid 1000)".into()),
            outcome: Some("done".into()),
        },
    );
}

/// A queued run of the scene's (nobody decided it yet).
fn queued(app: &App) -> RunId {
    (0..app.night.plan.runs.len() as u32)
        .map(RunId)
        .find(|r| app.night.state.run(*r).state == crate::model::RunState::Queued)
        .expect("a queued run")
}

#[test]
fn another_operators_action_is_a_toast_and_mine_is_not() {
    let mut app = scene();
    app.me = Some("bo@tui:5".into());
    let mut f = Feed { seq: 1000 };
    let r = queued(&app);
    by_ana(&mut app, &mut f, 200_000, Command::Retry { run: r });
    let toast = app.ui.toast.clone().unwrap_or_default();
    let k = &app.night.plan.runs[r.0 as usize].key;
    assert!(toast.starts_with("⚑ ana@tui:77"), "{toast}");
    assert!(
        toast.contains(&format!("retry {k}")) && toast.ends_with("done"),
        "{toast}"
    );
    // My own action is in the log but no toast: I know what I did.
    app.ui.toast = None;
    f.send(
        &mut app,
        200_500,
        Event::Operator {
            command: Command::Retry { run: r },
            by: Some("bo@tui:5 (uid 1001)".into()),
            outcome: Some("done".into()),
        },
    );
    assert_eq!(app.ui.toast, None);
    // The policy's decisions are logged, not toasted.
    assert!(app
        .night
        .activity
        .iter()
        .any(|e| e.source == "bo@tui:5 (uid 1001)"));
}

#[test]
fn a_decision_on_a_run_another_operator_just_decided_asks_first() {
    let mut app = scene();
    app.me = Some("bo@tui:5".into());
    let mut f = Feed { seq: 1000 };
    let r = queued(&app);
    by_ana(&mut app, &mut f, 200_000, Command::Retry { run: r });
    app.select_run(r);
    app.night.now_ms = T0 + 200_000 + 7_000;
    let fx = key(&mut app, 's');
    assert!(
        fx.is_empty(),
        "nothing sent before the operator answers: {fx:?}"
    );
    let Some(Popup::Confirm(Confirm::Override { by, ago_s, .. })) = app.ui.popup.clone() else {
        panic!("asks first: {:?}", app.ui.popup);
    };
    assert!(by.starts_with("ana@tui:77") && ago_s == 7, "{by} {ago_s}");
    let screen = render(&app, 80, 24);
    assert!(screen.contains("override?"), "{screen}");
    assert!(screen.contains("ana@tui:77"), "{screen}");
    let fx = key(&mut app, 'y');
    assert_eq!(fx, vec![Effect::Send(Command::Skip { run: r })]);
    // "n" sends nothing.
    key(&mut app, 's');
    assert!(key(&mut app, 'n').is_empty());
    // Long after ana's decision, or a run nobody touched: sent at once.
    app.night.now_ms = T0 + 200_000 + OVERRIDE_ASK_MS + 1;
    assert_eq!(
        key(&mut app, 's'),
        vec![Effect::Send(Command::Skip { run: r })]
    );
}

#[test]
fn a_long_refusal_wraps_to_its_end_at_80_columns() {
    let mut app = scene();
    let who = "someone.with.a.long.name@tui:123456 (uid 4242)";
    app.ui.toast = Some(format!(
        "⚠ retry 0ec82edda59a/agent:claude_code: refused: it was just skipped by {who}"
    ));
    let screen = render(&app, 80, 24);
    let flat: String = screen
        .lines()
        .map(|l| l.trim_matches('"').trim_end())
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        flat.contains("(uid 4242)"),
        "the name is read to its end:\n{screen}"
    );
}

/// The 3-way view at 80×24: the keys act on the highlighted cell, which the last line
/// names; `l` moves it along the commit's variants, `enter` opens it.
#[test]
fn the_three_way_view_acts_on_one_cell_it_names() {
    let mut app = scene();
    key(&mut app, '4');
    assert_eq!(app.ui.view, View::ThreeWay);
    app.ui.sel_commit = 0;
    app.ui.sel_variant = 0;
    app.ui.auto_select = false;
    let key0 = app.night.plan.runs[app.selected_run().unwrap().0 as usize]
        .key
        .clone();
    assert!(render(&app, 80, 24).contains(&format!("▸ {key0}")));
    key(&mut app, 'l');
    let r = app.selected_run().unwrap();
    let key1 = app.night.plan.runs[r.0 as usize].key.clone();
    assert_ne!(key0, key1);
    let screen = render(&app, 80, 24);
    assert!(screen.contains(&format!("▸ {key1}")), "{screen}");
    // Only that cell is highlighted: one run of selected cells on its row.
    let mut t = Terminal::new(TestBackend::new(80, 24)).unwrap();
    t.draw(|f| super::views::draw(f, &app)).unwrap();
    let buf = t.backend().buffer();
    let sel_bg = app.ui.theme.selected_bg;
    let rows: Vec<u16> = (0..24u16)
        .filter(|&y| (0..80u16).any(|x| buf[(x, y)].bg == sel_bg))
        .collect();
    let body: Vec<u16> = rows.iter().copied().filter(|&y| y < 23 && y > 3).collect();
    assert_eq!(
        body.len(),
        2,
        "the cell and the target line: rows {rows:?}\n{screen}"
    );
    let cell_row = body[0];
    let width = (0..80u16)
        .filter(|&x| buf[(x, cell_row)].bg == sel_bg)
        .count();
    assert!(
        width <= 10,
        "one cell, not the row: {width} columns highlighted\n{screen}"
    );
    // enter opens that cell; s skips it.
    assert_eq!(
        key(&mut app, 's'),
        vec![Effect::Send(Command::Skip { run: r })]
    );
    app.on_key(super::keymap::Key::code(crossterm::event::KeyCode::Enter));
    assert_eq!(app.ui.popup, Some(Popup::Detail(r)));
}

/// At 80×24 every variant keeps a whole column in the queue (no `! a` stub, no
/// zero-width title), and the 3-way view's comparison headers are told apart and the
/// metric is named with its unit.
#[test]
fn eighty_columns_drop_whole_columns() {
    let app = scene();
    let screen = render(&app, 80, 24);
    let head = screen
        .lines()
        .find(|l| l.contains("│ commit"))
        .expect("the queue's header");
    for v in &app.night.variants {
        let v = v.to_string();
        let shown: String = v.chars().take(6).collect();
        assert!(head.contains(&shown), "{v} has a column: {head}");
    }
    assert!(
        !head.contains("title"),
        "no title column without room: {head}"
    );
    let mut app = app;
    key(&mut app, '4');
    let screen = render(&app, 80, 24);
    let head = screen
        .lines()
        .find(|l| l.contains("│commit"))
        .expect("the 3-way header");
    let cols: Vec<&str> = head
        .trim_matches(|c| c == '"' || c == '│')
        .split_whitespace()
        .collect();
    let mut seen = std::collections::HashSet::new();
    assert!(
        cols.iter().all(|c| seen.insert(*c)),
        "no two columns alike: {head}"
    );
    assert!(
        screen.contains("tok/s") && screen.contains("higher is better"),
        "{screen}"
    );
}

/// The sizes the closing note shows: sweep, results, 3-way and a run's detail at 80×24,
/// 120×40 and 200×60. At 80 columns the results keep the number with its unit and the Δ.
#[test]
fn every_view_at_three_sizes() {
    let mut app = scene();
    for (w, h) in [(80u16, 24u16), (120, 40), (200, 60)] {
        for (name, k) in [("sweep", '1'), ("results", '3'), ("threeway", '4')] {
            key(&mut app, k);
            insta::assert_snapshot!(format!("{name}_{w}x{h}_sizes"), render(&app, w, h));
        }
        key(&mut app, '1');
        app.select_run(RunId(1));
        app.on_key(super::keymap::Key::code(crossterm::event::KeyCode::Enter));
        insta::assert_snapshot!(format!("detail_{w}x{h}_sizes"), render(&app, w, h));
        app.ui.popup = None;
    }
    key(&mut app, '3');
    let s = render(&app, 80, 24);
    let row = s
        .lines()
        .find(|l| l.contains("015069b0") && l.contains("human"))
        .unwrap_or_else(|| panic!("the human run's row:\n{s}"));
    assert!(row.contains("2350.5") && row.contains("tok/s"), "{row}");
    assert!(row.contains("11.9%"), "the Δ is kept: {row}");
}

/// A recipe is checked where it is typed: an unknown one is refused on the spot with the
/// list, tab completes the name, `:recipes` lists them (#34: `:fix-group bogus` used to be
/// sent and logged `— done`).
#[test]
fn a_recipe_name_is_checked_and_completed_where_it_is_typed() {
    use crossterm::event::KeyCode;
    let mut app = scene();
    assert!(
        app.night.recipes.iter().any(|r| r == "aimv2-exist-ok"),
        "{:?}",
        app.night.recipes
    );
    let fx = app.run_command_line("fix-group bogus");
    assert!(fx.is_empty(), "nothing sent: {fx:?}");
    let toast = app.ui.toast.clone().unwrap_or_default();
    assert!(
        toast.contains("no fix recipe `bogus`") && toast.contains("aimv2-exist-ok"),
        "{toast}"
    );
    app.run_command_line("recipes");
    assert!(app
        .ui
        .toast
        .clone()
        .unwrap_or_default()
        .contains("aimv2-exist-ok"));
    // Tab: the command, then the recipe.
    key(&mut app, ':');
    for c in "fix-g".chars() {
        key(&mut app, c);
    }
    app.on_key(super::keymap::Key::code(KeyCode::Tab));
    assert_eq!(app.ui.input.as_ref().unwrap().text, "fix-group ");
    for c in "aimv".chars() {
        key(&mut app, c);
    }
    app.on_key(super::keymap::Key::code(KeyCode::Tab));
    assert_eq!(
        app.ui.input.as_ref().unwrap().text,
        "fix-group aimv2-exist-ok "
    );
    let (_, many) = super::app::complete("s", &app.night.recipes);
    assert!(
        many.len() > 2 && many.iter().all(|c| c.starts_with('s')),
        "{many:?}"
    );
}
