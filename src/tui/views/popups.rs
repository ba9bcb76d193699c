//! Popups over any view: help, run detail (with provenance), confirmations.

use super::{fit, fmt_dur, fmt_num};
use crate::tui::app::{App, Confirm, Popup};
use crate::tui::keymap::Action;
use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Wrap};
use ratatui::Frame;

fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let [v] = Layout::vertical([Constraint::Length(h.min(area.height))])
        .flex(Flex::Center)
        .areas(area);
    let [r] = Layout::horizontal([Constraint::Length(w.min(area.width))])
        .flex(Flex::Center)
        .areas(v);
    r
}

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    match &app.ui.popup {
        None => {}
        Some(Popup::Help { scroll }) => {
            let r = centered(area, 84, area.height.saturating_sub(2));
            super::help::draw(f, app, r, *scroll);
        }
        Some(Popup::Detail(run)) => detail(f, app, area, *run),
        Some(Popup::Confirm(c)) => confirm(f, app, area, c),
        Some(Popup::Group(id)) => group(f, app, area, id),
        Some(Popup::Activity { scroll }) => activity(f, app, area, *scroll),
    }
}

/// The activity log, newest first: time, who (a client, the policy), what, what came of it.
fn activity(f: &mut Frame, app: &App, area: Rect, scroll: usize) {
    let t = &app.ui.theme;
    let r = centered(
        area,
        area.width.saturating_sub(4).min(120),
        area.height.saturating_sub(2),
    );
    let rows = r.height.saturating_sub(2) as usize;
    let mut lines: Vec<Line> = app
        .night
        .activity
        .iter()
        .rev()
        .skip(scroll)
        .take(rows)
        .map(|e| {
            let mine = app
                .me
                .as_deref()
                .is_some_and(|me| crate::event::signed_by(&e.source, me));
            Line::from(vec![
                Span::styled(
                    format!("{} ", crate::report::activity::clock(e.at_ms)),
                    t.dim(),
                ),
                Span::styled(
                    format!("{:<18} ", if mine { "you" } else { e.source.as_str() }),
                    if e.source == "policy" {
                        t.dim()
                    } else {
                        t.text()
                    },
                ),
                Span::styled(e.what.clone(), t.text()),
                Span::styled(
                    format!(" — {}", e.outcome),
                    if e.refused() {
                        ratatui::style::Style::default().fg(t.warn)
                    } else {
                        t.dim()
                    },
                ),
            ])
        })
        .collect();
    if lines.is_empty() {
        lines.push(Line::from(Span::styled(
            "nothing yet: operator actions and the policy's decisions appear here",
            t.dim(),
        )));
    }
    let title = format!(
        " activity ({}; newest first, times UTC) · j/k scroll · A/Esc close ",
        app.night.activity.len()
    );
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines).block(super::block(app, title, true)),
        r,
    );
}

/// One decision for a failure group: what it is (count, first line, models, vLLM
/// versions) and the keys that decide for every run of it.
fn group(f: &mut Frame, app: &App, area: Rect, id: &str) {
    let t = &app.ui.theme;
    let groups = app.seen().failure_groups();
    let kv = |k: &str, v: String| {
        Line::from(vec![
            Span::styled(format!("{k:<12}"), t.dim()),
            Span::styled(v, t.text()),
        ])
    };
    let join = |s: &std::collections::BTreeSet<String>| {
        if s.is_empty() {
            "-".to_string()
        } else {
            s.iter().cloned().collect::<Vec<_>>().join(", ")
        }
    };
    let mut lines = match groups.iter().find(|g| g.id == id) {
        Some(g) => vec![
            kv(
                "runs",
                format!(
                    "{} failed alike{}",
                    g.count,
                    if g.held > 0 {
                        format!(" ({} held)", g.held)
                    } else {
                        String::new()
                    }
                ),
            ),
            kv("first line", g.first_line.clone()),
            kv("kind", g.text.clone()),
            kv("models", join(&g.models)),
            kv("vLLM", join(&g.versions)),
            kv("category", join(&g.categories)),
        ],
        None => vec![kv("runs", "none left to decide".into())],
    };
    lines.push(Line::from(""));
    lines.push(Line::from(
        [
            ("s", " skip all   "),
            ("r", " retry all   "),
            ("f", " fix all   "),
            ("l", " list   "),
            ("esc", " close"),
        ]
        .into_iter()
        .flat_map(|(k, w)| {
            [
                Span::styled(format!(" {k} "), t.header()),
                Span::styled(w, t.text()),
            ]
        })
        .collect::<Vec<_>>(),
    ));
    lines.push(Line::from(Span::styled(
        format!("name it: nightshift diagnose --learn {id} --category NAME"),
        t.dim(),
    )));
    let r = centered(area, 96, (lines.len() as u16 + 6).min(area.height));
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(super::block(app, format!(" failure group {id} "), true)),
        r,
    );
}

fn confirm(f: &mut Frame, app: &App, area: Rect, c: &Confirm) {
    let t = &app.ui.theme;
    let c_ = app.night.state.counts();
    let (title, body) = match c {
        Confirm::Quit => (
            " quit? ",
            format!(
                "{} runs are active. Quitting stops them; they are re-queued and the sweep resumes where it left off with the same command.",
                c_.active
            ),
        ),
        Confirm::Detach => (
            " leave the sweep? ",
            format!(
                "A daemon runs this sweep ({} active, {} of {} done). d detaches and it goes on (`nightshift attach` rejoins); s stops the sweep (runs in flight are re-queued); esc stays.",
                c_.active,
                app.night.progress().done,
                app.night.progress().total
            ),
        ),
        Confirm::Cancel(run) => (
            " cancel run? ",
            format!("Cancel {run} {}?", app.night.plan.runs[run.0 as usize].key),
        ),
        Confirm::Override {
            by,
            what,
            ago_s,
            command,
        } => (
            " override? ",
            format!(
                "{by} did `{what}` {ago_s} s ago. {} over it?",
                crate::report::activity::describe_for(command, &|r| app.night.plan.runs
                    [r.0 as usize]
                    .key
                    .clone())
            ),
        ),
        Confirm::FixCategory(cat, recipe) => (
            " fix category? ",
            format!(
                "Retry {} held run(s) whose failure is {cat} with fix {recipe}, and each later one tonight (once per run)?",
                app.night.state
                    .runs
                    .iter()
                    .filter(|r| matches!(r.state, crate::model::RunState::Held { category } if category == *cat))
                    .count()
            ),
        ),
        Confirm::SkipCategory(cat) => (
            " skip category? ",
            match app.skippable(*cat) {
                0 => format!("No run has failure {cat} now: skip each later one tonight?"),
                1 => format!("Skip 1 run whose failure is {cat}, and each later one tonight?"),
                n => format!("Skip {n} runs whose failure is {cat}, and each later one tonight?"),
            },
        ),
    };
    let r = centered(area, 60, 7);
    f.render_widget(Clear, r);
    let lines = vec![
        Line::from(Span::styled(body, t.text())),
        Line::from(""),
        Line::from(match c {
            Confirm::Detach => vec![
                Span::styled(" d ", t.header()),
                Span::styled(" detach   ", t.text()),
                Span::styled(" s ", t.header()),
                Span::styled(" stop the sweep   ", t.text()),
                Span::styled(" esc ", t.header()),
                Span::styled(" stay", t.text()),
            ],
            _ => vec![
                Span::styled(" y ", t.header()),
                Span::styled(" yes   ", t.text()),
                Span::styled(" n ", t.header()),
                Span::styled(" no", t.text()),
            ],
        }),
    ];
    f.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: true })
            .block(super::block(app, title, true)),
        r,
    );
}

fn detail(f: &mut Frame, app: &App, area: Rect, run: crate::model::RunId) {
    let t = &app.ui.theme;
    let spec = &app.night.plan.runs[run.0 as usize];
    let c = app.night.plan.commit_of(spec);
    let r = app.night.state.run(run);
    let kv = |k: &str, v: String| {
        Line::from(vec![
            Span::styled(format!("{k:<14}"), t.dim()),
            Span::styled(v, t.text()),
        ])
    };
    let mut lines = vec![
        Line::from(Span::styled(
            super::title_of(c),
            t.text().add_modifier(Modifier::BOLD),
        )),
        kv("run", format!("{run} {}", spec.key)),
        kv("commit", c.commit.clone()),
        kv("parent", c.parent.clone().unwrap_or_else(|| "-".into())),
        kv("model", c.model.clone().unwrap_or_else(|| "-".into())),
        kv("variant", spec.variant.to_string()),
        kv("image", spec.image.clone().unwrap_or_else(|| "-".into())),
        kv(
            "state",
            format!("{} (attempt {})", r.state.label(), r.attempt),
        ),
        kv(
            "GPUs",
            if r.gpus.is_empty() {
                format!("needs {}", spec.gpus)
            } else {
                format!("{:?}", r.gpus)
            },
        ),
        kv(
            "vLLM",
            r.vllm_version
                .clone()
                .or(c.vllm_version.clone())
                .unwrap_or_else(|| "-".into()),
        ),
    ];
    if let (Some(s), Some(e)) = (r.started_ms, r.finished_ms) {
        lines.push(kv("wall", fmt_dur(e.saturating_sub(s))));
    }
    // The numbers before the provenance: at 80×24 they are what the operator came for.
    for (k, v) in &r.metrics {
        lines.push(kv(&fit(k, 13), fmt_num(*v)));
    }
    if let Some(d) = &r.detail {
        lines.push(kv("detail", d.clone()));
    }
    if !r.fixes.is_empty() {
        lines.push(kv("fixes", r.fixes.join(", ")));
    }
    if let Some(fd) = &r.finding {
        lines.push(kv("diagnosis", format!("{} → {}", fd.category, fd.action)));
        lines.push(kv("evidence", fd.evidence.replace('\n', " ")));
        if let Some(c) = fd.confidence {
            lines.push(kv("confidence", format!("{:.0}%", c * 100.0)));
        }
        for l in &fd.telling {
            lines.push(kv("also", l.replace('\n', " ")));
        }
        if let Some(rc) = &fd.recipe {
            lines.push(kv("recipe", rc.clone()));
        }
        if let Some(g) = app.seen().group_of(run) {
            lines.push(kv(
                "group",
                format!(
                    "{} · {} runs alike ({} opens it)",
                    g.id,
                    g.count,
                    app.keymap.label_of(Action::FailureGroup)
                ),
            ));
        }
    }
    for (k, v) in &r.provenance {
        lines.push(kv(&fit(k, 13), v.clone()));
    }
    if let Some(cmd) = &c.perf_command {
        lines.push(kv("command", cmd.clone()));
    }
    if let Some(dir) = &app.log_dir {
        lines.push(kv("logs", dir.display().to_string()));
    }
    lines.push(Line::from(""));
    lines.push(Line::from(Span::styled(
        format!(
            "{} open log in $PAGER · {} fix · {} retry · {} skip · esc close",
            app.keymap.label_of(Action::OpenPager),
            app.keymap.label_of(Action::ApplyFix),
            app.keymap.label_of(Action::Retry),
            app.keymap.label_of(Action::Skip)
        ),
        t.dim(),
    )));
    let r = centered(
        area,
        100,
        (lines.len() as u16 + 4).min(area.height.saturating_sub(2)),
    );
    // Scrolls (j/k, pgup/pgdn) when it does not fit.
    let rows = r.height.saturating_sub(2) as usize;
    let max = lines.len().saturating_sub(rows);
    app.hits.detail_max.set(max);
    let scroll = app.ui.detail_scroll.min(max);
    let title = if max > 0 {
        format!(
            " run detail · provenance · {}/{} · j/k scroll ",
            scroll + 1,
            max + 1
        )
    } else {
        " run detail · provenance ".to_string()
    };
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .scroll((scroll as u16, 0))
            .block(super::block(app, title, true)),
        r,
    );
}
