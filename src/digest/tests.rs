use super::*;
use crate::category::{Action, Category};
use crate::event::Finding;
use crate::model::{Outcome, RunState, Variant};
use crate::record::{AttemptDoc, RunInfo};

fn doc(commit: &str, variant: Variant, end: RunState, tput: Option<f64>) -> RunDoc {
    let info = RunInfo {
        key: format!("{commit}/{variant}"),
        commit: commit.into(),
        parent: None,
        title: "speed <up> & \"more\"".into(),
        variant,
        repeat: 0,
        warmup: false,
        extra: false,
        reference: false,
        model: Some("m".into()),
        gpu: "H100:1".into(),
        gpus: 1,
        command: Some("vllm bench serve".into()),
        kind: None,
        image: None,
        patch: None,
        skip_reason: None,
        fixed: None,
    };
    let mut d = RunDoc::new(info.clone());
    d.record.state = end.clone();
    let category = match &end {
        RunState::Finished { outcome } => outcome.category(),
        RunState::Held { category } => Some(*category),
        _ => None,
    };
    d.attempts.push(AttemptDoc {
        attempt: 1,
        started_ms: Some(0),
        // Two hours on one GPU.
        finished_ms: Some(7_200_000),
        gpus: vec![0],
        end: Some(end),
        metrics: tput
            .map(|t| [("output_throughput_tok_s".to_string(), t)].into())
            .unwrap_or_default(),
        findings: category
            .map(|c| {
                vec![Finding {
                    category: c,
                    evidence: "torch.OutOfMemoryError: CUDA out of memory <GPU 0>".into(),
                    action: Action::Operator,
                    recipe: None,
                    reason: format!("{c}: needs a decision"),
                    predicted: false,
                    confidence: Some(0.9),
                    telling: vec![],
                    kind: None,
                }]
            })
            .unwrap_or_default(),
        fixes: if tput.is_some() {
            vec!["numpy<2 (environment workaround)".into()]
        } else {
            Vec::new()
        },
        info: Some(info),
        ..Default::default()
    });
    d
}

fn night() -> Vec<RunDoc> {
    let ok = || RunState::Finished {
        outcome: Outcome::Success,
    };
    vec![
        doc("aaaa1111", Variant::Baseline, ok(), Some(100.0)),
        doc("aaaa1111", Variant::Human, ok(), Some(110.0)),
        doc(
            "aaaa1111",
            Variant::Agent("claude".into()),
            ok(),
            Some(95.0),
        ),
        doc(
            "bbbb2222",
            Variant::Baseline,
            RunState::Finished {
                outcome: Outcome::Failed {
                    category: Category::CudaOom,
                },
            },
            None,
        ),
        doc(
            "bbbb2222",
            Variant::Human,
            RunState::Held {
                category: Category::NumpyAbi,
            },
            None,
        ),
    ]
}

#[test]
fn digest_counts_failures_waiting_fixes_and_gpu_hours() {
    let docs = night();
    let refs: Vec<&RunDoc> = docs.iter().collect();
    let d = build(
        "iso",
        &refs,
        &crate::report::Options::with_threshold(2.0),
        0,
    );
    assert_eq!(d.total_runs(), 5);
    assert_eq!(d.counts["success"], 3);
    assert_eq!(d.counts["failed"], 1);
    assert_eq!(d.counts["held"], 1);
    let oom = &d.failures["cuda_oom"];
    assert_eq!(oom.len(), 1);
    assert!(oom[0].evidence.contains("CUDA out of memory"));
    assert_eq!(d.waiting.len(), 1);
    assert_eq!(d.waiting[0].category, "numpy_abi");
    assert_eq!(d.fixes.len(), 3);
    assert!((d.gpu_hours["success"] - 6.0).abs() < 1e-9);
    assert!((d.gpu_hours["failed"] - 2.0).abs() < 1e-9);
}

#[test]
fn markdown_has_every_section_and_worded_verdicts() {
    let docs = night();
    let refs: Vec<&RunDoc> = docs.iter().collect();
    let md = markdown(&build(
        "iso",
        &refs,
        &crate::report::Options::with_threshold(2.0),
        0,
    ));
    for h in [
        "# Morning digest: iso",
        "## Waiting for a decision (1)",
        "## The 3-way table",
        "## Failures by category",
        "### cuda_oom (1)",
        "## Fixes applied (3)",
        "## GPU-hours by outcome",
    ] {
        assert!(md.contains(h), "missing {h}:\n{md}");
    }
    // Human 110 vs baseline 100 throughput: a win, worded with its direction.
    assert!(
        md.contains("better (more tok/s 10.0%; threshold uncalibrated ±2%)"),
        "{md}"
    );
    assert!(
        md.contains("| 100.0 tok/s | 110.0 tok/s | 95.0 tok/s |"),
        "{md}"
    );
    assert!(md.contains("failed (cuda_oom)"), "{md}");
}

#[test]
fn html_is_self_contained_and_escaped() {
    let docs = night();
    let refs: Vec<&RunDoc> = docs.iter().collect();
    let page = html::render(&build(
        "iso <night>",
        &refs,
        &crate::report::Options::with_threshold(2.0),
        0,
    ));
    assert!(page.starts_with("<!doctype html>"));
    assert!(page.contains("<table id=\"threeway\">"));
    assert!(page.contains("<svg"));
    // No external asset: nothing is fetched from anywhere.
    for bad in ["src=", "href=", "<script", "@import", "url("] {
        assert!(!page.contains(bad), "{bad} in the page");
    }
    assert!(page.contains("iso &lt;night&gt;"));
    assert!(page.contains("speed &lt;up&gt; &amp; &quot;more&quot;"));
    assert!(!page.contains("<GPU 0>"));
    assert!(page.contains("class=\"win\">better (more tok/s 10.0%; threshold uncalibrated ±2%)"));
}

#[test]
fn empty_night_renders() {
    let d = build(
        "empty",
        &[],
        &crate::report::Options::with_threshold(2.0),
        0,
    );
    assert_eq!(d.total_runs(), 0);
    assert!(markdown(&d).contains("Nothing is waiting."));
    assert!(html::render(&d).contains("No failures."));
}

/// Runs that failed alike (one failure kind: the lines differ only in numbers, hashes and
/// paths) are one line with their count, not one line per run.
#[test]
fn failures_alike_are_one_line_with_their_count() {
    let failed = || RunState::Finished {
        outcome: Outcome::Failed {
            category: Category::Other,
        },
    };
    let mut docs = Vec::new();
    for (i, c) in ["c1", "c2", "c3", "c4"].iter().enumerate() {
        let mut d = doc(c, Variant::Human, failed(), None);
        let f = &mut d.attempts[0].findings[0];
        f.evidence =
            format!("TypeError: bad shard {i} in /cache/{i}ab{i}f00d/x at 10.0.0.{i}:2950{i}");
        f.confidence = Some(0.3);
        docs.push(d);
    }
    docs.push(doc(
        "c5",
        Variant::Human,
        RunState::Finished {
            outcome: Outcome::Failed {
                category: Category::CudaOom,
            },
        },
        None,
    ));
    let refs: Vec<&RunDoc> = docs.iter().collect();
    let d = build(
        "iso",
        &refs,
        &crate::report::Options::with_threshold(2.0),
        0,
    );
    let other = &d.failures["other"];
    assert_eq!(other.len(), 1, "{other:?}");
    assert_eq!(other[0].count, 4);
    assert_eq!(other[0].keys.len(), 4);
    assert!(other[0].evidence.starts_with("TypeError: bad shard 0"));
    let md = markdown(&d);
    assert!(md.contains("### other (4)"), "{md}");
    assert!(md.contains("- **4 runs**: `TypeError: bad shard 0"), "{md}");
    assert!(
        md.contains(&format!("(group `{}`; models m;", other[0].kind)),
        "{md}"
    );
    assert!(md.contains("and 1 more)"), "{md}");
    // A single run keeps its own line.
    assert!(md.contains("### cuda_oom (1)\n\n- `c5/human`:"), "{md}");
    let page = html::render(&d);
    assert!(page.contains("<b>4 runs</b>"), "{page}");
}

/// Plan text (a title, an agent id) and log text (a failure's line, a held run's reason,
/// a fix) with control characters: the digest's Markdown and page show them escaped.
#[test]
fn plan_and_log_text_is_inert_in_the_digest() {
    use crate::sanitize::{assert_inert, HOSTILE, HOSTILE_SHOWN};
    let mut docs = night();
    docs.push(doc(
        "aaaa1111",
        Variant::Agent(HOSTILE.into()),
        RunState::Finished {
            outcome: Outcome::Success,
        },
        Some(99.0),
    ));
    for d in &mut docs {
        d.info.title = HOSTILE.into();
        for a in &mut d.attempts {
            if let Some(i) = a.info.as_mut() {
                i.title = HOSTILE.into();
            }
            for f in &mut a.findings {
                f.evidence = format!("boom {HOSTILE}");
                f.reason = format!("why {HOSTILE}");
            }
            for f in &mut a.fixes {
                *f = format!("fix {HOSTILE}");
            }
        }
    }
    let refs: Vec<&RunDoc> = docs.iter().collect();
    let d = build(
        HOSTILE,
        &refs,
        &crate::report::Options::with_threshold(2.0),
        0,
    );
    let md = markdown(&d);
    assert_inert(&md, HOSTILE_SHOWN);
    // The failure's line, as a log line: its colour and screen sequences dropped, the rest
    // shown escaped.
    assert!(md.contains("boom \\x07evil"), "{md}");
    // The 3-way table keeps one row per commit, each with the header's cells.
    let cells = |l: &str| l.replace("\\|", "").matches('|').count();
    let rows: Vec<&str> = md.lines().filter(|l| l.starts_with('|')).collect();
    assert_eq!(rows.len(), 4, "{md}");
    assert!(rows.iter().all(|l| cells(l) == cells(rows[0])), "{md}");
    let page = html::render(&d);
    assert_inert(&page, "\\x1b[2J\\x07evil\\x0d");
}

/// A run held on image_not_found and then skipped with `S`, as the store reads it.
fn skipped_after(commit: &str, variant: Variant, category: Category) -> RunDoc {
    let skipped = RunState::Finished {
        outcome: Outcome::skipped(
            crate::model::SkipBy::Operator,
            format!("skipped by the operator: all {category}"),
        ),
    };
    let mut d = doc(commit, variant, RunState::Held { category }, None);
    d.record.state = skipped.clone();
    d.record.attempt = 1;
    d.attempts[0].end = Some(skipped);
    d
}

/// `S` on 34 held image_not_found runs: the digest still says what they failed of, in its
/// counts, its summary and its failure section, with the same numbers in each.
#[test]
fn runs_skipped_after_a_diagnosis_keep_their_cause_in_the_digest() {
    let mut docs = night();
    for i in 0..34 {
        let c = format!("cc{i:06}");
        docs.push(skipped_after(&c, Variant::Human, Category::ImageNotFound));
    }
    let refs: Vec<&RunDoc> = docs.iter().collect();
    let d = build(
        "iso",
        &refs,
        &crate::report::Options::with_threshold(2.0),
        0,
    );
    assert_eq!(d.counts["skipped"], 34);
    let lines = &d.failures["image_not_found"];
    assert_eq!(lines.iter().map(|l| l.count).sum::<usize>(), 34);
    assert_eq!(lines.iter().map(|l| l.skipped).sum::<usize>(), 34);
    let md = markdown(&d);
    assert!(
        md.contains("Of those skipped, skipped after image_not_found: 34."),
        "{md}"
    );
    assert!(
        md.contains("### image_not_found (34; 34 skipped after it)"),
        "{md}"
    );
    assert!(
        md.contains("  image_not_found: 34 (34 skipped after it)"),
        "{md}"
    );
    assert!(md.contains("skipped (image_not_found)"), "{md}");
    assert!(!md.contains("No failures."), "{md}");
    let page = html::render(&d);
    assert!(
        page.contains("image_not_found (34; 34 skipped after it)"),
        "{page}"
    );
    // `results --filter category=image_not_found` finds them too.
    let f = crate::report::parse_filter("category=image_not_found").unwrap();
    assert_eq!(
        refs.iter()
            .filter(|d| crate::report::matches(d, &f))
            .count(),
        34
    );
}

/// The summary block and the failure sections count the same runs: a held run is in both
/// (it failed and waits for a decision), and every heading is the summary's number.
#[test]
fn the_digests_summary_and_sections_agree() {
    let mut docs = night();
    docs.push(skipped_after(
        "dddd4444",
        Variant::Baseline,
        Category::CudaOom,
    ));
    let refs: Vec<&RunDoc> = docs.iter().collect();
    let d = build(
        "iso",
        &refs,
        &crate::report::Options::with_threshold(2.0),
        0,
    );
    let summary = &d.report.summary.failures_by_category;
    let sections: BTreeMap<String, usize> = d
        .failures
        .iter()
        .map(|(c, l)| (c.clone(), l.iter().map(|l| l.count).sum()))
        .collect();
    assert_eq!(&sections, summary);
    assert_eq!(summary["numpy_abi"], 1);
    assert_eq!(summary["cuda_oom"], 2);
    let md = markdown(&d);
    assert!(md.contains("### numpy_abi (1)"), "{md}");
    assert!(md.contains("### cuda_oom (2; 1 skipped after it)"), "{md}");
    assert!(md.contains("  cuda_oom: 2 (1 skipped after it)"), "{md}");
}

/// The 3-way table: a value column and a verdict column per agent of the plan, and every
/// value with its unit.
#[test]
fn the_three_way_table_has_agent_columns_and_units() {
    let mut docs = night();
    // A latency commit: seconds, not tok/s.
    for (v, lat) in [(Variant::Baseline, 1.8), (Variant::Human, 1.63)] {
        let mut d = doc(
            "eeee5555",
            v,
            RunState::Finished {
                outcome: Outcome::Success,
            },
            None,
        );
        d.attempts[0].metrics = [("latency_avg_s".to_string(), lat)].into();
        docs.push(d);
    }
    // An agent with no result anywhere still has its columns.
    docs.push(skipped_after(
        "eeee5555",
        Variant::Agent("codex".into()),
        Category::ImageNotFound,
    ));
    let refs: Vec<&RunDoc> = docs.iter().collect();
    let d = build(
        "iso",
        &refs,
        &crate::report::Options::with_threshold(2.0),
        0,
    );
    assert_eq!(
        d.variants,
        ["baseline", "human", "agent:claude", "agent:codex"]
    );
    let md = markdown(&d);
    assert!(
        md.contains("| commit | baseline | human | agent:claude | agent:codex | human vs baseline | agent:claude vs baseline | agent:codex vs baseline |"),
        "{md}"
    );
    // Agent 95 vs baseline 100 tok/s: worse, worded with its direction.
    assert!(
        md.contains("| 100.0 tok/s | 110.0 tok/s | 95.0 tok/s | - | better (more tok/s 10.0%; threshold uncalibrated ±2%) | worse (less tok/s 5.0%; threshold uncalibrated ±2%) | - |"),
        "{md}"
    );
    assert!(md.contains("| 1.80 s | 1.63 s |"), "{md}");
    let page = html::render(&d);
    assert!(page.contains("<th>agent:codex vs baseline</th>"), "{page}");
    assert!(page.contains("<td class=\"num\">95.0 tok/s</td>"), "{page}");
}

/// Held at 1 h, skipped at 3 h: an hour on the GPU, not three (the wait holds no GPU).
#[test]
fn gpu_hours_leave_out_the_wait_for_the_operator() {
    let mut d = skipped_after("ffff6666", Variant::Human, Category::CudaOom);
    let held = RunState::Held {
        category: Category::CudaOom,
    };
    let active = RunState::Active {
        stage: crate::model::Stage::LoadingServer,
    };
    d.attempts[0].finished_ms = Some(3 * 3_600_000);
    let skip = d.attempts[0].end.clone().unwrap();
    for (at, from, to) in [
        (3_600_000, active, held.clone()),
        (3 * 3_600_000, held, skip),
    ] {
        d.history.push(crate::record::StateChange {
            at_ms: at,
            attempt: 1,
            from,
            to,
            detail: None,
        });
    }
    let d = build(
        "iso",
        &[&d],
        &crate::report::Options::with_threshold(2.0),
        0,
    );
    assert!(
        (d.gpu_hours["skipped"] - 1.0).abs() < 1e-9,
        "{:?}",
        d.gpu_hours
    );
}
