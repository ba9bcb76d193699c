//! The GPU panel on the Slurm runtime: the GPUs are on the cluster's nodes, not here, so
//! the panel lists each run's job instead — its allocation, node and Slurm state — from the
//! provenance the runtime reports (`slurm_job_id`, `slurm_node`, `slurm_gres`,
//! `slurm_state`), which reaches attached clients like every other event.

use super::{block, fit};
use crate::model::{RunId, RunState};
use crate::tui::app::App;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

/// One job row: (run, job id, node, allocation, state).
pub fn rows(app: &App) -> Vec<(RunId, String, String, String, String)> {
    app.night
        .state
        .runs
        .iter()
        .enumerate()
        .filter(|(_, r)| matches!(r.state, RunState::Active { .. }))
        .filter_map(|(i, r)| {
            let p = |k: &str| r.provenance.get(k).cloned().unwrap_or_default();
            let id = r.provenance.get("slurm_job_id")?.clone();
            let node = p("slurm_node");
            let node = node.split_whitespace().next().unwrap_or("").to_string();
            Some((RunId(i as u32), id, node, p("slurm_gres"), p("slurm_state")))
        })
        .collect()
}

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let t = &app.ui.theme;
    let jobs = rows(app);
    let b = block(app, format!(" GPUs · Slurm jobs ({}) ", jobs.len()), false);
    let inner = b.inner(area);
    f.render_widget(b, area);
    if jobs.is_empty() {
        f.render_widget(Paragraph::new("no job in flight").style(t.dim()), inner);
        return;
    }
    let w = inner.width as usize;
    let lines: Vec<Line> = jobs
        .iter()
        .take(inner.height as usize)
        .map(|(run, id, node, gres, state)| {
            let style = match state.split_whitespace().next().unwrap_or("") {
                "RUNNING" | "COMPLETING" => Style::default().fg(t.active),
                "PENDING" | "CONFIGURING" => Style::default().fg(t.warn),
                _ => t.dim(),
            };
            let gres = gres
                .trim_start_matches("gres:")
                .trim_start_matches("gres/")
                .to_string();
            let head = format!(
                "{:<8} {:<10} {:<8} ",
                fit(id, 8),
                fit(if node.is_empty() { "-" } else { node }, 10),
                fit(if gres.is_empty() { "-" } else { &gres }, 8)
            );
            let state = format!(
                "{:<10}",
                fit(if state.is_empty() { "-" } else { state }, 10)
            );
            let rest = format!(" {run} {}", app.night.plan.runs[run.0 as usize].key);
            let used = head.chars().count() + state.chars().count();
            Line::from(vec![
                Span::styled(head, t.text()),
                Span::styled(state, style),
                Span::styled(fit(&rest, w.saturating_sub(used)), t.dim()),
            ])
        })
        .collect();
    f.render_widget(Paragraph::new(lines), inner);
}

#[cfg(test)]
mod tests {
    use crate::event::{Envelope, Event};
    use crate::model::{RunId, RunState, Stage};
    use crate::tui::app::App;
    use crate::tui::keymap::KeyMap;
    use crate::tui::theme::Theme;
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;
    use std::sync::Arc;

    #[test]
    fn the_panel_lists_each_jobs_allocation_node_and_state() {
        let plan = Arc::new(crate::plan::example::example_plan());
        let mut app = App::new(plan, 8, Theme::builtin("dark").unwrap(), KeyMap::default());
        let mut seq = 0;
        let mut send = |app: &mut App, event: Event| {
            seq += 1;
            app.on_envelope(&Envelope {
                seq,
                at_ms: 1_700_000_000_000,
                event,
            });
        };
        let runs = app.night.plan.runs.len();
        send(
            &mut app,
            Event::SweepStarted {
                name: "s".into(),
                runs,
                gpus: 16,
                runtime: "slurm".into(),
            },
        );
        for (run, id, node, gres, state) in [
            (0, "4711", "gpu-a01 gpus=0,1", "gres:gpu:2", "RUNNING"),
            (1, "4712", "", "gres:gpu:1", "PENDING (Resources)"),
        ] {
            send(
                &mut app,
                Event::State {
                    run: RunId(run),
                    attempt: 1,
                    from: RunState::Queued,
                    to: RunState::Active {
                        stage: Stage::PreparingImage,
                    },
                    detail: None,
                    gpus: vec![run],
                    interrupted: false,
                },
            );
            for (k, v) in [
                ("slurm_job_id", id),
                ("slurm_node", node),
                ("slurm_gres", gres),
                ("slurm_state", state),
            ] {
                if !v.is_empty() {
                    send(
                        &mut app,
                        Event::Provenance {
                            run: RunId(run),
                            attempt: 1,
                            key: k.into(),
                            value: v.into(),
                        },
                    );
                }
            }
        }
        let mut term = Terminal::new(TestBackend::new(80, 6)).unwrap();
        term.draw(|f| super::draw(f, &app, f.area())).unwrap();
        let text: String = term
            .backend()
            .buffer()
            .content()
            .chunks(80)
            .map(|row| row.iter().map(|c| c.symbol()).collect::<String>() + "\n")
            .collect();
        assert!(text.contains("Slurm jobs (2)"), "{text}");
        let row = |id: &str| {
            text.lines()
                .find(|l| l.contains(id))
                .unwrap_or("")
                .to_string()
        };
        let a = row("4711");
        assert!(
            a.contains("gpu-a01") && a.contains("gpu:2") && a.contains("RUNNING"),
            "{text}"
        );
        assert!(a.contains(&app.night.plan.runs[0].key[..8]), "{text}");
        let b = row("4712");
        assert!(
            b.contains(" - ") && b.contains("gpu:1") && b.contains("PENDING"),
            "{text}"
        );
    }
}
