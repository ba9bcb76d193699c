//! The digest as one self-contained HTML page: inline CSS and SVG, no script, no external
//! asset, so it opens from a mail attachment or a file share on a box with no network.

use super::{category_counts, value_text, verdict_columns, verdict_text, Digest};
use std::fmt::Write;

/// The store's HTML escaping, shared so the digest and `results --format html` agree.
pub use crate::report::html::esc;

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em;color:#1b1f24;background:#fff}\
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ccd}\
table{border-collapse:collapse;font-size:.9em}th,td{border:1px solid #b8c2d6;padding:.25em .6em;text-align:left}\
th{background:#eef1f6}td.num{text-align:right;font-variant-numeric:tabular-nums}\
.win{color:#0a6b2a;font-weight:600}.loss{color:#a11;font-weight:600}.flag{color:#8a5a00}\
code{background:#f3f4f6;padding:0 .2em}.counts span{margin-right:1.2em}";

fn class_of(verdict: &str) -> &'static str {
    if verdict.starts_with("better") {
        "win"
    } else if verdict.starts_with("worse") {
        "loss"
    } else if verdict.starts_with("not comparable") || verdict.starts_with("throughput") {
        "flag"
    } else {
        ""
    }
}

/// Outcome counts as a horizontal SVG bar chart.
fn counts_svg(d: &Digest) -> String {
    let max = d.counts.values().copied().max().unwrap_or(1).max(1) as f64;
    let row = 22.0;
    let h = row * d.counts.len() as f64 + 4.0;
    let mut o = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"420\" height=\"{h}\" role=\"img\" aria-label=\"runs by state\">"
    );
    for (i, (k, v)) in d.counts.iter().enumerate() {
        let y = i as f64 * row + 2.0;
        let w = (*v as f64 / max * 260.0).max(1.0);
        let fill = match k.as_str() {
            "success" => "#2f9e44",
            "failed" => "#d9480f",
            "held" => "#f59f00",
            "skipped" => "#868e96",
            _ => "#4dabf7",
        };
        let _ = write!(
            o,
            "<text x=\"0\" y=\"{}\" font-size=\"12\">{}</text><rect x=\"90\" y=\"{y}\" width=\"{w:.1}\" height=\"16\" fill=\"{fill}\"/><text x=\"{:.1}\" y=\"{}\" font-size=\"12\">{v}</text>",
            y + 12.0,
            esc(k),
            96.0 + w,
            y + 12.0
        );
    }
    o.push_str("</svg>");
    o
}

pub fn render(d: &Digest) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>nightshift digest: {}</title><style>{STYLE}</style></head><body>",
        esc(&d.sweep)
    );
    let _ = write!(o, "<h1>Morning digest: {}</h1>", esc(&d.sweep));
    let _ = write!(o, "<p class=\"counts\"><b>{} runs</b> ", d.total_runs());
    for (k, v) in &d.counts {
        let _ = write!(o, "<span>{v} {}</span>", esc(k));
    }
    o.push_str("</p>");
    let skipped = &d.report.summary.skipped_by_category;
    if !skipped.is_empty() {
        let each: Vec<String> = skipped
            .iter()
            .map(|(c, n)| format!("skipped after {}: {n}", esc(c)))
            .collect();
        let _ = write!(o, "<p>Of those skipped, {}.</p>", each.join("; "));
    }
    o.push_str(&counts_svg(d));

    let _ = write!(o, "<h2>Waiting for a decision ({})</h2>", d.waiting.len());
    if d.waiting.is_empty() {
        o.push_str("<p>Nothing is waiting.</p>");
    } else {
        o.push_str("<table id=\"waiting\"><tr><th>run</th><th>category</th><th>why</th></tr>");
        for w in &d.waiting {
            let _ = write!(
                o,
                "<tr><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
                esc(&w.key),
                esc(&w.category),
                esc(&w.reason)
            );
        }
        o.push_str("</table>");
    }

    let vs = &d.variants;
    let verdicts = verdict_columns(d);
    let _ = write!(
        o,
        "<h2>The 3-way table</h2><p>Primary metric per variant (median of its repeats); verdicts: {}.</p><table id=\"threeway\"><tr><th>commit</th>",
        esc(&crate::report::render::method_note(&d.report.summary))
    );
    for v in vs.iter().chain(&verdicts) {
        let _ = write!(o, "<th>{}</th>", esc(v));
    }
    o.push_str("</tr>");
    for row in &d.report.rows {
        let _ = write!(
            o,
            "<tr><td><code>{}</code> {}</td>",
            esc(&row.commit[..row.commit.len().min(8)]),
            esc(&row.title)
        );
        for v in vs {
            let _ = write!(o, "<td class=\"num\">{}</td>", esc(&value_text(row, v)));
        }
        for label in &verdicts {
            let verdict = verdict_text(&d.report, row, label);
            let _ = write!(
                o,
                "<td class=\"{}\">{}</td>",
                class_of(&verdict),
                esc(&verdict)
            );
        }
        o.push_str("</tr>");
    }
    o.push_str("</table>");
    let s = &d.report.summary;
    let outcomes = |w: &crate::report::Outcomes| crate::report::render::outcomes(w);
    let _ = write!(
        o,
        "<p>{} of {} commits have a usable 3-way comparison (named before the night: {}; failed during the night: {}); human vs baseline: {}.</p>",
        s.usable_3way,
        s.commits,
        s.named_before_night,
        s.failed_during_night,
        outcomes(&s.human_vs_baseline)
    );
    for (agent, w) in &s.agent_vs_baseline {
        let _ = write!(
            o,
            "<p>agent {} vs baseline: {}.</p>",
            esc(agent),
            outcomes(w)
        );
    }
    let _ = write!(
        o,
        "<p class=\"method\">Verdicts: {}.</p>",
        esc(&crate::report::render::method_note(s))
    );
    o.push_str("<h2>Outcomes</h2>");
    o.push_str(&crate::report::chart::outcomes_svg(&d.report));
    o.push_str("<h2>Δ vs baseline (whiskers: interval)</h2>");
    o.push_str(&crate::report::chart::delta_svg(&d.report, |c| {
        c.label.ends_with("vs baseline")
    }));

    o.push_str("<h2>Failures by category</h2>");
    if d.failures.is_empty() {
        o.push_str("<p>No failures.</p>");
    } else {
        o.push_str(
            "<table id=\"failures\"><tr><th>category</th><th>runs</th><th>deciding line</th></tr>",
        );
        for (cat, lines) in &d.failures {
            // The summary's numbers (the same runs), skips after the diagnosis said apart.
            let (total, skipped) = category_counts(d, cat);
            let skipped = match skipped {
                0 => String::new(),
                n => format!("; {n} skipped after it"),
            };
            let _ = write!(
                o,
                "<tr><th colspan=\"3\">{} ({total}{})</th></tr>",
                esc(cat),
                esc(&skipped)
            );
            for l in lines {
                let mut runs: Vec<String> = l
                    .keys
                    .iter()
                    .take(3)
                    .map(|k| format!("<code>{}</code>", esc(k)))
                    .collect();
                if l.count > 3 {
                    runs.push(format!("and {} more", l.count - 3));
                }
                let group = if l.count > 1 {
                    format!(
                        "<b>{} runs</b> (group <code>{}</code>): ",
                        l.count,
                        esc(&l.kind)
                    )
                } else {
                    String::new()
                };
                let _ = write!(
                    o,
                    "<tr><td>{}</td><td>{group}{}</td><td><code>{}</code></td></tr>",
                    esc(cat),
                    runs.join(", "),
                    esc(&l.evidence)
                );
            }
        }
        o.push_str("</table>");
    }

    if !d.fixed_before.is_empty() {
        let _ = write!(
            o,
            "<h2>Fixed before the night ({})</h2><ul>",
            d.fixed_before.len()
        );
        for (c, note) in &d.fixed_before {
            let _ = write!(
                o,
                "<li><code>{}</code>: {}</li>",
                esc(&c[..c.len().min(12)]),
                esc(note)
            );
        }
        o.push_str("</ul>");
    }
    let _ = write!(o, "<h2>Fixes applied ({})</h2>", d.fixes.len());
    if !d.fixes.is_empty() {
        o.push_str("<ul>");
        for f in &d.fixes {
            let _ = write!(
                o,
                "<li><code>{}</code> attempt {}: {}</li>",
                esc(&f.key),
                f.attempt,
                esc(&f.fix)
            );
        }
        o.push_str("</ul>");
    }

    o.push_str("<h2>GPU-hours by outcome</h2><table id=\"gpuhours\"><tr><th>outcome</th><th>GPU-hours</th></tr>");
    for (k, h) in &d.gpu_hours {
        let _ = write!(
            o,
            "<tr><td>{}</td><td class=\"num\">{h:.2}</td></tr>",
            esc(k)
        );
    }
    o.push_str("</table>");
    if let Some(i) = &d.idle {
        let _ = write!(
            o,
            "<p id=\"idle\">Idle while runs waited: {:.1} GPU-minutes (of {:.1} GPU-minutes the sweep ran).</p>",
            i.waiting_minutes(),
            i.total_minutes()
        );
    }
    if !d.activity.is_empty() {
        let _ = write!(
            o,
            "<h2>Activity ({})</h2><table id=\"activity\"><tr><th>UTC</th><th>who</th><th>what</th><th>outcome</th></tr>",
            d.activity.len()
        );
        for e in &d.activity {
            let _ = write!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                crate::report::activity::clock(e.at_ms),
                esc(&e.source),
                esc(&e.what),
                esc(&e.outcome)
            );
        }
        o.push_str("</table>");
    }
    o.push_str("<p><small>Verdicts are worded by direction: better means lower latency or higher throughput. Generated by nightshift.</small></p></body></html>");
    o
}
