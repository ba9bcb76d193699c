//! The report: repeats compared as a whole, verdicts by the statistics, flags that withhold
//! them, and one direction for every Δ.

use super::*;
use crate::model::{Outcome, RunState};
use crate::record::{AttemptDoc, RunInfo};

pub(crate) fn doc_with(
    commit: &str,
    variant: Variant,
    repeat: u32,
    cmd: &str,
    metrics: &[(&str, f64)],
) -> RunDoc {
    let info = RunInfo {
        key: format!("{commit}/{variant}/r{}", repeat + 1),
        commit: commit.into(),
        parent: None,
        title: "t".into(),
        variant,
        repeat,
        warmup: false,
        extra: false,
        reference: false,
        model: Some("org/m-8B".into()),
        gpu: "H100:1".into(),
        gpus: 1,
        command: Some(cmd.into()),
        kind: None,
        image: None,
        patch: None,
        skip_reason: None,
        fixed: None,
    };
    let mut d = RunDoc::new(info.clone());
    d.attempts.push(AttemptDoc {
        attempt: 1,
        started_ms: Some(0),
        finished_ms: Some(1000),
        end: Some(RunState::Finished {
            outcome: Outcome::Success,
        }),
        metrics: metrics.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        info: Some(info),
        ..Default::default()
    });
    d
}

pub(crate) fn doc(commit: &str, variant: Variant, cmd: &str, tput: f64) -> RunDoc {
    let mut d = doc_with(
        commit,
        variant,
        0,
        cmd,
        &[("output_throughput_tok_s", tput)],
    );
    d.key = format!("{commit}/{}", d.info.variant);
    d.info.key = d.key.clone();
    d
}

fn opts() -> Options {
    Options::with_threshold(2.0)
}

#[test]
fn three_way_summary_and_flags() {
    let docs = [
        doc("c1", Variant::Baseline, "x", 100.0),
        doc("c1", Variant::Human, "x", 110.0),
        doc("c1", Variant::Agent("a".into()), "x", 101.0),
        doc("c2", Variant::Baseline, "x", 100.0),
        doc("c2", Variant::Human, "x --num-prompts 5", 120.0),
    ];
    let refs: Vec<&RunDoc> = docs.iter().collect();
    let r = build(&refs, &opts());
    assert_eq!(r.summary.commits, 2);
    assert_eq!(r.summary.usable_3way, 1);
    // Single runs, no calibration: the old rule, and the report says so.
    assert_eq!(r.summary.human_vs_baseline.better, 1);
    assert_eq!(r.summary.agent_vs_baseline["a"].no_change, 1);
    assert_eq!(r.summary.agent_vs_human["a"].worse, 1);
    assert_eq!(r.summary.uncalibrated, 3);
    assert_eq!(r.summary.flagged, 1);
    let c2 = &r.rows[1].comparisons[0];
    assert!(
        c2.flag.as_deref().unwrap().contains("number of prompts"),
        "{c2:?}"
    );
    assert_eq!(c2.verdict, None);
    let md = render_md(&r);
    assert!(md.contains("| human |"), "{md}");
    assert!(
        md.contains("**better (more tok/s 10.0%; threshold uncalibrated ±2%)**"),
        "{md}"
    );
    assert!(
        md.contains("threshold uncalibrated for 3 comparison(s)"),
        "{md}"
    );
    assert_eq!(render_jsonl(&refs).lines().count(), 5);
    let json: serde_json::Value = serde_json::from_str(&render_json(&r, &refs)).unwrap();
    assert_eq!(json["records"].as_array().unwrap().len(), 5);
    assert_eq!(json["commits"][0]["comparisons"][0]["verdict"], "better");
    let csv = render_csv(&r, &refs);
    assert_eq!(csv.lines().count(), 6);
    let head: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    for col in [
        "n", "median", "ci_low", "ci_high", "p_value", "verdict", "flags",
    ] {
        assert!(head.contains(&col), "{col} in {head:?}");
    }
}

#[test]
fn a_latency_gain_reads_the_same_everywhere() {
    // The bug of old: a 4.3% quicker latency run showed as +4.3% in the TUI and −4.3% WIN
    // in `results`. Now every place shows the improvement and words it.
    let docs = [
        doc_with("c", Variant::Baseline, 0, "x", &[("latency_avg_s", 1.0)]),
        doc_with("c", Variant::Human, 0, "x", &[("latency_avg_s", 0.957)]),
    ];
    let refs: Vec<&RunDoc> = docs.iter().collect();
    let r = build(&refs, &opts());
    let c = &r.rows[0].comparisons[0];
    assert_eq!(c.primary.as_deref(), Some("latency_avg_s"));
    assert!((c.deltas["latency_avg_s"] - 4.3).abs() < 1e-9);
    assert_eq!(c.verdict, Some(Verdict::Better));
    let table = render_table(&r);
    assert!(table.contains("faster 4.3%"), "{table}");
    assert!(!table.contains("-4.3%"), "{table}");
}

#[test]
fn all_repeats_count_and_warmups_do_not() {
    // Five repeats a side, throughput 10% up on every one; the first repeat of each is a
    // warm-up that would otherwise reverse the result.
    let mut docs = Vec::new();
    for r in 0..6u32 {
        let wobble = f64::from(r % 3) - 1.0;
        let mut b = doc_with(
            "c",
            Variant::Baseline,
            r,
            "x",
            &[("output_throughput_tok_s", 100.0 + wobble)],
        );
        let mut h = doc_with(
            "c",
            Variant::Human,
            r,
            "x",
            &[("output_throughput_tok_s", 110.0 + wobble)],
        );
        if r == 0 {
            b.info.warmup = true;
            h.info.warmup = true;
            b.attempts[0]
                .metrics
                .insert("output_throughput_tok_s".into(), 200.0);
        }
        docs.push(b);
        docs.push(h);
    }
    let refs: Vec<&RunDoc> = docs.iter().collect();
    let r = build(&refs, &opts());
    let row = &r.rows[0];
    assert_eq!(row.cells.len(), 2);
    assert_eq!((row.cells[0].n, row.cells[0].warmups), (5, 1));
    assert_eq!(row.cells[0].samples["output_throughput_tok_s"].len(), 5);
    let c = &row.comparisons[0];
    let st = c.primary_stats().unwrap();
    // The repeats teach a band (learned from the store), and with a band its t-test judges
    // the shift, KS beside it for the shape.
    assert_eq!(st.method, Method::NoiseBand);
    assert!(st.p_value.unwrap() < 0.05, "{st:?}");
    assert_eq!(c.verdict, Some(Verdict::Better));
    assert!(render_table(&r).contains("n=5 +1 warm-up"));
}

#[test]
fn token_totals_and_failed_requests_are_flagged() {
    let m = |tput: f64, tokens: f64, failed: f64| {
        [
            ("output_throughput_tok_s", tput),
            ("ttft_mean_ms", 50.0),
            ("total_output_tokens", tokens),
            ("failed_requests", failed),
        ]
    };
    let docs = [
        doc_with("c", Variant::Baseline, 0, "x", &m(100.0, 20_000.0, 0.0)),
        doc_with("c", Variant::Human, 0, "x", &m(120.0, 24_000.0, 3.0)),
    ];
    let refs: Vec<&RunDoc> = docs.iter().collect();
    let r = build(&refs, &opts());
    let c = &r.rows[0].comparisons[0];
    let codes: Vec<_> = c.flags.iter().map(|f| f.code).collect();
    assert_eq!(codes, ["output_tokens", "failed_requests"]);
    // The headline is a throughput: no verdict on it. TTFT is still compared.
    assert_eq!(c.verdict, None);
    assert!(c
        .flag
        .as_deref()
        .unwrap()
        .starts_with("throughput incomparable"));
    assert!(c.metrics.contains_key("ttft_mean_ms"));
    let table = render_table(&r);
    assert!(table.contains("⚑ failed requests: 3 vs 0"), "{table}");
}

#[test]
fn a_calibrated_band_replaces_the_uncalibrated_rule() {
    let docs = [
        doc("c", Variant::Baseline, "x", 100.0),
        doc("c", Variant::Human, "x", 103.0),
    ];
    let refs: Vec<&RunDoc> = docs.iter().collect();
    let mut o = opts();
    o.calibration.bands.insert(
        Calibration::key("output_throughput_tok_s", "small"),
        stats::Band {
            sigma: 0.03,
            groups: 10,
            runs: 50,
            source: "calibrate".into(),
        },
    );
    let r = build(&refs, &o);
    let c = &r.rows[0].comparisons[0];
    assert_eq!(c.method, Some(Method::NoiseBand));
    // 3% on a box that wobbles 3% a run: no change is shown, and none is proven either
    // (the interval reaches past ±5%): unknown, where the old rule said "better".
    assert_eq!(c.verdict, Some(Verdict::Inconclusive));
    assert_eq!(r.summary.uncalibrated, 0);
    assert!(render_summary(&r.summary, false).contains("±3.0% (calibrate)"));
}

#[test]
fn bands_are_learned_from_repeats_in_the_store() {
    let mut docs = Vec::new();
    for c in 0..3 {
        for r in 0..3u32 {
            let v = 100.0 * (1.0 + 0.01 * (f64::from(r) - 1.0));
            docs.push(doc_with(
                &format!("c{c}"),
                Variant::Baseline,
                r,
                "x",
                &[("output_throughput_tok_s", v)],
            ));
        }
    }
    let refs: Vec<&RunDoc> = docs.iter().collect();
    let cal = learn_bands(&refs);
    let b = cal.band("output_throughput_tok_s", "small").unwrap();
    assert_eq!((b.groups, b.runs, b.source.as_str()), (3, 9, "learned"));
    assert!((b.sigma - 0.01).abs() < 0.001, "{b:?}");
}

/// A commit title, an agent id and a command from a hostile plan: every text output shows
/// their control characters escaped, and a title stays one line (one cell in Markdown).
#[test]
fn plan_text_is_inert_in_the_table_the_markdown_and_the_page() {
    use crate::sanitize::{assert_inert, HOSTILE, HOSTILE_SHOWN};
    let mut docs = vec![
        doc("c1", Variant::Baseline, "x", 100.0),
        doc("c1", Variant::Human, "x", 110.0),
        // Another command: its flag quotes the command.
        doc("c1", Variant::Agent(HOSTILE.into()), HOSTILE, 101.0),
    ];
    for d in &mut docs {
        d.info.title = HOSTILE.into();
        for a in &mut d.attempts {
            if let Some(i) = a.info.as_mut() {
                i.title = HOSTILE.into();
            }
        }
    }
    let refs: Vec<&RunDoc> = docs.iter().collect();
    let r = build(&refs, &opts());
    let table = render_table(&r);
    assert_inert(&table, HOSTILE_SHOWN);
    assert!(
        table.starts_with(&format!("c1 {HOSTILE_SHOWN}\n")),
        "{table}"
    );
    assert!(table.contains(&format!("agent:{HOSTILE_SHOWN}")), "{table}");

    let md = render_md(&r);
    assert_inert(&md, HOSTILE_SHOWN);
    assert!(md.contains(&format!("### `c1` {HOSTILE_SHOWN}\n")), "{md}");
    // Every row of the table has as many cells as its header.
    let cells = |l: &str| l.replace("\\|", "").matches('|').count();
    let rows: Vec<&str> = md.lines().filter(|l| l.starts_with('|')).collect();
    assert!(rows.len() > 3, "{md}");
    assert!(rows.iter().all(|l| cells(l) == cells(rows[0])), "{md}");

    let page = html::render(&r, HOSTILE);
    assert_inert(&page, "\\x1b[2J\\x07evil\\x0d");
    assert!(
        !page.contains("\\x0a"),
        "a line break in a page is white space"
    );
}

/// A verdict says how many repeats it rests on and how many were added because the
/// comparison was unknown (adaptive repeats).
#[test]
fn added_repeats_are_said_with_their_reason() {
    let mut docs = Vec::new();
    for r in 0..3u32 {
        for (v, t) in [(Variant::Baseline, 100.0), (Variant::Human, 103.0)] {
            let mut d = doc_with(
                "c1",
                v,
                r,
                "x",
                &[("output_throughput_tok_s", t + r as f64)],
            );
            d.info.extra = r >= 1;
            docs.push(d);
        }
    }
    let refs: Vec<&RunDoc> = docs.iter().collect();
    let r = build(&refs, &opts());
    assert_eq!(r.rows[0].cells[0].added, 2);
    let table = render_table(&r);
    assert!(
        table.contains("n=3 (2 added: the comparison was unknown)"),
        "{table}"
    );
}

/// A drift between the baseline's run and the human's: the reference runs (the first at
/// 0, the second at 2 h agreeing, the third at 4 h 10% slower) say the box changed between
/// 2 h and 4 h; a comparison whose runs straddle that is flagged (the verdict stands), one
/// whose runs are all before it is not, and a reference is never a repeat.
#[test]
fn comparisons_across_a_drift_are_flagged() {
    let h = 3_600_000u64;
    let at = |mut d: RunDoc, ms: u64| {
        d.attempts[0].started_ms = Some(ms);
        d
    };
    let reference = |k: u32, ms: u64, v: f64| {
        let mut d = doc_with(
            "c0",
            Variant::Baseline,
            0,
            "x",
            &[("output_throughput_tok_s", v)],
        );
        d.key = format!("c0/baseline/ref{k}");
        d.info.key = d.key.clone();
        d.info.reference = true;
        at(d, ms)
    };
    let docs = [
        at(doc("c0", Variant::Baseline, "x", 1000.0), 0),
        reference(1, 0, 1000.0),
        reference(2, 2 * h, 1004.0),
        reference(3, 4 * h, 900.0),
        at(doc("c1", Variant::Baseline, "x", 100.0), h),
        at(doc("c1", Variant::Human, "x", 110.0), 5 * h),
        at(doc("c2", Variant::Baseline, "x", 100.0), h / 2),
        at(doc("c2", Variant::Human, "x", 110.0), h),
    ];
    let refs: Vec<&RunDoc> = docs.iter().collect();
    let r = build(&refs, &opts());
    let shifts = drift::shifts_of(refs.iter().copied(), &Calibration::default(), 0.05);
    assert_eq!(shifts.len(), 1, "{shifts:?}");
    assert_eq!((shifts[0].from_ms, shifts[0].to_ms), (2 * h, 4 * h));
    let row = |c: &str| r.rows.iter().find(|x| x.commit == c).unwrap();
    let codes =
        |c: &str| -> Vec<&str> { row(c).comparisons[0].flags.iter().map(|f| f.code).collect() };
    assert_eq!(codes("c1"), vec!["drift"]);
    assert!(codes("c2").is_empty());
    // A warning: the verdict stands, the table says why it may not.
    assert!(row("c1").comparisons[0].verdict.is_some());
    let t = render_table(&r);
    assert!(
        t.contains("measured across a drift of the box: reference c0/baseline/ref3 "),
        "{t}"
    );
    // The reference runs are not the baseline's repeats.
    assert_eq!(row("c0").cells[0].n, 1);
}
