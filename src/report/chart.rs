//! Inline SVG charts for the HTML report and the morning digest: each comparison's Δ with
//! its interval as a whisker, coloured by verdict, and the outcome counts per pairing. No
//! script and no external asset: the page opens from a mail attachment.

use super::{Comparison, Outcomes, Report};
use crate::sanitize::html as esc;
use crate::stats::Verdict;
use std::fmt::Write;

/// Verdict colours (distinct from the digest's run-state colours, so a screenshot test can
/// tell the chart's marks from the state bars).
pub fn colour(v: Option<Verdict>) -> &'static str {
    match v {
        Some(Verdict::Better) => "#1c7c54",
        Some(Verdict::Worse) => "#c92a2a",
        Some(Verdict::NoChange) => "#5c7cfa",
        Some(Verdict::Inconclusive) => "#f08c00",
        None => "#868e96",
    }
}

/// The zero line's colour.
pub const ZERO: &str = "#7048e8";

const ROW: f64 = 18.0;
const LABEL_W: f64 = 300.0;
const PLOT_W: f64 = 520.0;

/// Δ per commit and comparison, with whiskers: one row each for the comparisons `keep`
/// selects that have a primary metric to show.
pub(crate) fn delta_svg(r: &Report, keep: impl Fn(&Comparison) -> bool) -> String {
    let rows: Vec<(&str, &Comparison)> = r
        .rows
        .iter()
        .flat_map(|row| {
            row.comparisons
                .iter()
                .map(move |c| (row.commit.as_str(), c))
        })
        .filter(|(_, c)| keep(c) && c.primary_stats().is_some())
        .collect();
    if rows.is_empty() {
        return "<p>No comparison has results on both sides yet.</p>".into();
    }
    // Symmetric about 0: left of the line is worse, right is better.
    let m = rows
        .iter()
        .filter_map(|(_, c)| c.primary_stats())
        .flat_map(|s| {
            [
                s.improvement_pct,
                s.ci_low_pct.unwrap_or(0.0),
                s.ci_high_pct.unwrap_or(0.0),
            ]
        })
        .fold(1.0f64, |a, x| a.max(x.abs()))
        .min(100.0)
        * 1.1;
    let x = |v: f64| LABEL_W + PLOT_W / 2.0 + v.clamp(-m, m) / m * PLOT_W / 2.0;
    let h = ROW * rows.len() as f64 + 34.0;
    let w = LABEL_W + PLOT_W + 260.0;
    let mut o = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"delta\" width=\"{w}\" height=\"{h}\" role=\"img\" aria-label=\"improvement per comparison with intervals\" font-size=\"12\" shape-rendering=\"crispEdges\">"
    );
    let bottom = ROW * rows.len() as f64 + 4.0;
    let _ = write!(
        o,
        "<line x1=\"{z:.0}\" y1=\"0\" x2=\"{z:.0}\" y2=\"{bottom}\" stroke=\"{ZERO}\" stroke-width=\"2\"/>\
<text x=\"{:.0}\" y=\"{:.0}\">worse {m:.0}%</text><text x=\"{z:.0}\" y=\"{:.0}\" text-anchor=\"middle\">0</text>\
<text x=\"{:.0}\" y=\"{:.0}\" text-anchor=\"end\">better {m:.0}%</text>",
        LABEL_W,
        bottom + 16.0,
        bottom + 16.0,
        LABEL_W + PLOT_W,
        bottom + 16.0,
        z = x(0.0),
    );
    for (i, (commit, c)) in rows.iter().enumerate() {
        let Some(s) = c.primary_stats() else { continue };
        let y = i as f64 * ROW + ROW / 2.0 + 2.0;
        let col = colour(c.verdict);
        let _ = write!(
            o,
            "<text x=\"0\" y=\"{:.0}\">{} {}</text>",
            y + 4.0,
            esc(&commit[..commit.len().min(8)]),
            esc(&c.label)
        );
        if let (Some(lo), Some(hi)) = (s.ci_low_pct, s.ci_high_pct) {
            let (a, b) = (x(lo), x(hi));
            let _ = write!(
                o,
                "<line x1=\"{a:.0}\" y1=\"{y:.0}\" x2=\"{b:.0}\" y2=\"{y:.0}\" stroke=\"{col}\" stroke-width=\"2\"/>\
<line x1=\"{a:.0}\" y1=\"{:.0}\" x2=\"{a:.0}\" y2=\"{:.0}\" stroke=\"{col}\" stroke-width=\"2\"/>\
<line x1=\"{b:.0}\" y1=\"{:.0}\" x2=\"{b:.0}\" y2=\"{:.0}\" stroke=\"{col}\" stroke-width=\"2\"/>",
                y - 5.0,
                y + 5.0,
                y - 5.0,
                y + 5.0
            );
        }
        let _ = write!(
            o,
            "<rect x=\"{:.0}\" y=\"{:.0}\" width=\"8\" height=\"8\" fill=\"{col}\"><title>{}</title></rect>",
            x(s.improvement_pct) - 4.0,
            y - 4.0,
            esc(&s.delta_label())
        );
        let verdict = c.verdict.map_or("flagged", |v| v.words());
        let _ = write!(
            o,
            "<text x=\"{:.0}\" y=\"{:.0}\" fill=\"{col}\">{} ({})</text>",
            LABEL_W + PLOT_W + 10.0,
            y + 4.0,
            verdict,
            esc(&s.delta_label())
        );
    }
    o.push_str("</svg>");
    o
}

/// Outcome counts per pairing (human vs baseline, each agent vs baseline and vs human) as
/// stacked bars.
pub(crate) fn outcomes_svg(r: &Report) -> String {
    let s = &r.summary;
    let mut groups: Vec<(String, &Outcomes)> =
        vec![("human vs baseline".into(), &s.human_vs_baseline)];
    for (a, o) in &s.agent_vs_baseline {
        groups.push((format!("agent {a} vs baseline"), o));
    }
    for (a, o) in &s.agent_vs_human {
        groups.push((format!("agent {a} vs human"), o));
    }
    let max = groups
        .iter()
        .map(|(_, o)| o.total())
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let h = 24.0 * groups.len() as f64 + 24.0;
    let mut o = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"outcomes\" width=\"1000\" height=\"{h}\" role=\"img\" aria-label=\"outcome counts\" font-size=\"12\" shape-rendering=\"crispEdges\">"
    );
    for (i, (label, c)) in groups.iter().enumerate() {
        let y = i as f64 * 24.0 + 2.0;
        let _ = write!(
            o,
            "<text x=\"0\" y=\"{:.0}\">{}</text>",
            y + 13.0,
            esc(label)
        );
        let mut x0 = 240.0;
        for (n, v) in [
            (c.better, Verdict::Better),
            (c.no_change, Verdict::NoChange),
            (c.worse, Verdict::Worse),
            (c.inconclusive, Verdict::Inconclusive),
        ] {
            if n == 0 {
                continue;
            }
            let w = n as f64 / max * 420.0;
            let _ = write!(
                o,
                "<rect x=\"{x0:.1}\" y=\"{y:.0}\" width=\"{w:.1}\" height=\"18\" fill=\"{}\"><title>{n} {}</title></rect>",
                colour(Some(v)),
                v.words()
            );
            x0 += w;
        }
        let _ = write!(
            o,
            "<text x=\"{:.1}\" y=\"{:.0}\">{} better / {} same / {} worse / {} unknown</text>",
            x0 + 6.0,
            y + 13.0,
            c.better,
            c.no_change,
            c.worse,
            c.inconclusive
        );
    }
    let legend_y = 24.0 * groups.len() as f64 + 16.0;
    let mut lx = 240.0;
    for v in [
        Verdict::Better,
        Verdict::NoChange,
        Verdict::Worse,
        Verdict::Inconclusive,
    ] {
        let _ = write!(
            o,
            "<rect x=\"{lx}\" y=\"{:.0}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{}\" y=\"{legend_y:.0}\">{}</text>",
            legend_y - 9.0,
            colour(Some(v)),
            lx + 14.0,
            v.words()
        );
        lx += 110.0;
    }
    o.push_str("</svg>");
    o
}
