//! `results --format html`: the report as one self-contained page — how verdicts were
//! reached, the outcome counts and every comparison's Δ with its interval as SVG charts,
//! then per commit each variant's median and interval and each comparison's verdict and
//! flags.

use super::chart;
use super::render::{method_note, num, verdict_text};
use super::Report;
use crate::metric;
use std::fmt::Write;

/// Escape text for HTML element content and attribute values: `&<>"'` as entities, and
/// control characters (plan titles, log lines) shown escaped as [`crate::sanitize::text`]
/// shows them (a page read in a terminal or pasted into one must not act on them; line
/// breaks stay, in HTML they are white space).
pub fn esc(s: &str) -> String {
    let s = crate::sanitize::text(s);
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em;color:#1b1f24;background:#fff}\
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ccd}h3{font-size:1em}\
table{border-collapse:collapse;font-size:.9em}th,td{border:1px solid #b8c2d6;padding:.2em .5em;text-align:left}\
th{background:#eef1f6}td.num{text-align:right;font-variant-numeric:tabular-nums}\
.better{color:#1c7c54;font-weight:600}.worse{color:#c92a2a;font-weight:600}.flag{color:#8a5a00}\
.method{color:#444}code{background:#f3f4f6;padding:0 .2em}";

pub fn render(r: &Report, sweep: &str) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>nightshift results: {}</title><style>{STYLE}</style></head><body>",
        esc(sweep)
    );
    let s = &r.summary;
    let _ = write!(
        o,
        "<h1>Results: {}</h1><p>{} commits, {} runs ({} successful); {} usable 3-way comparisons.</p><p class=\"method\">Verdicts: {}.</p>",
        esc(sweep),
        s.commits,
        s.runs,
        s.successful_runs,
        s.usable_3way,
        esc(&method_note(s))
    );
    o.push_str("<h2>Outcomes</h2>");
    o.push_str(&chart::outcomes_svg(r));
    o.push_str("<h2>Δ vs reference (whiskers: interval)</h2>");
    o.push_str(&chart::delta_svg(r, |_| true));
    o.push_str("<h2>Per commit</h2>");
    for row in &r.rows {
        let _ = write!(
            o,
            "<h3><code>{}</code> {}</h3><table><tr><th>variant</th>",
            esc(&row.commit[..row.commit.len().min(8)]),
            esc(&row.title)
        );
        let ms: Vec<_> = metric::HEADLINE
            .iter()
            .filter(|m| row.cells.iter().any(|c| c.metrics.contains_key(m.key)))
            .collect();
        for m in &ms {
            let _ = write!(o, "<th>{}</th>", esc(m.label));
        }
        o.push_str("<th>status / verdict</th></tr>");
        for c in &row.cells {
            let _ = write!(o, "<tr><td>{}</td>", esc(&c.variant));
            for m in &ms {
                let v = c.stats.get(m.key).map(|s| {
                    if s.n > 1 {
                        format!(
                            "{} [{}, {}] n={}",
                            num(s.median),
                            num(s.ci_low),
                            num(s.ci_high),
                            s.n
                        )
                    } else {
                        num(s.median)
                    }
                });
                let _ = write!(
                    o,
                    "<td class=\"num\">{}</td>",
                    esc(v.as_deref().unwrap_or("–"))
                );
            }
            let status = match &c.category {
                Some(cat) => format!("{} ({cat})", c.status),
                None => c.status.clone(),
            };
            let _ = write!(o, "<td>{}</td></tr>", esc(&status));
        }
        for cmp in &row.comparisons {
            let _ = write!(o, "<tr><td><em>{}</em></td>", esc(&cmp.label));
            for m in &ms {
                let d = cmp
                    .deltas
                    .get(m.key)
                    .map(|d| metric::delta_label(m.key, *d));
                let _ = write!(
                    o,
                    "<td class=\"num\">{}</td>",
                    esc(d.as_deref().unwrap_or("–"))
                );
            }
            let v = verdict_text(cmp, s);
            let class = match cmp.verdict {
                Some(crate::stats::Verdict::Better) => "better",
                Some(crate::stats::Verdict::Worse) => "worse",
                None if cmp.flag.is_some() => "flag",
                _ => "",
            };
            let _ = write!(o, "<td class=\"{class}\">{}", esc(&v));
            for f in cmp.flags.iter().filter(|f| !v.contains(&f.text)) {
                let _ = write!(o, "<br><span class=\"flag\">⚑ {}</span>", esc(&f.text));
            }
            o.push_str("</td></tr>");
        }
        o.push_str("</table>");
    }
    o.push_str("<p><small>Δ is the improvement of the median (positive = better: faster, or more tokens per second). Generated by nightshift.</small></p></body></html>");
    o
}
