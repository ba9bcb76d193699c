//! `results` and `calibrate` end to end on sim sweeps: the calibrated band in the verdicts,
//! the report from run summaries equal to the report from the event log, checked options.
//! Apart from `store.rs`, whose crash loop counts kills against a timing budget that other
//! sweeps running beside it would eat.

use nightshift::store::Store;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_nightshift");

fn plan_text(commits: &[(&str, &str)]) -> String {
    let mut t = String::from(
        "schema_version = 1\nname = \"crash\"\n[defaults]\nvariants = [\"baseline\", \"human\", \"agent\"]\n[images]\norg = \"o\"\nhuman = \"{org}/h:{commit}\"\nbaseline = \"{org}/b:{commit}\"\nagent = \"{baseline_image}\"\n[[agents]]\nid = \"a\"\n",
    );
    for (c, extra) in commits {
        t.push_str(&format!(
            "[[commits]]\ncommit = \"{c}\"\nparent = \"{c}0000\"\nmodel = \"m/x\"\ngpu_config = \"H100:1\"\nperf_command = '''python benchmarks/benchmark_throughput.py --model m/x --input-len 256 --output-len 256{extra}'''\n"
        ));
    }
    t
}

fn write_plan(dir: &Path, text: &str) -> PathBuf {
    let p = dir.join("plan.toml");
    std::fs::write(&p, text).unwrap();
    p
}

fn run_ok(plan: &Path, store: &Path, extra: &[&str]) -> (i32, String, String) {
    let o = Command::new(BIN)
        .args([
            "run",
            plan.to_str().unwrap(),
            "--runtime",
            "sim",
            "--headless",
            "--gpus",
            "2",
        ])
        .args(["--speed", "max", "--store", store.to_str().unwrap()])
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into(),
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

#[test]
fn calibrate_saves_a_band_that_results_use() {
    let tmp = tempfile::tempdir().unwrap();
    let commits: Vec<(String, &str)> = (0..3).map(|i| (format!("d{i:07x}"), "")).collect();
    let refs: Vec<(&str, &str)> = commits.iter().map(|(c, e)| (c.as_str(), *e)).collect();
    let plan = write_plan(tmp.path(), &plan_text(&refs));
    let store = tmp.path().join("store");
    let o = Command::new(BIN)
        .args(["calibrate", plan.to_str().unwrap(), "--runtime", "sim"])
        .args(["--commits", "3", "--repeats", "4", "--gpus", "2", "--store"])
        .arg(&store)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("throughput_output_tok_s@unknown: ±"), "{out}");
    assert!(tmp.path().join("store-calibration").is_dir());
    assert_eq!(run_ok(&plan, &store, &[]).0, 0);
    let o = Command::new(BIN)
        .args(["results", "--store"])
        .arg(&store)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    // Single runs are judged by the calibrated band, and nothing says "uncalibrated".
    assert!(text.contains("(calibrate)"), "{text}");
    assert!(text.contains("noise band"), "{text}");
    assert!(!text.contains("threshold uncalibrated"), "{text}");
    // Bad usage is exit 2 with a message.
    let o = Command::new(BIN)
        .args(["calibrate", plan.to_str().unwrap(), "--repeats", "1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--repeats 2 or more"));
}

#[test]
fn results_from_run_summaries_match_results_from_the_event_log() {
    use nightshift::report;
    let tmp = tempfile::tempdir().unwrap();
    let commits: Vec<(String, &str)> = (0..4).map(|i| (format!("e{i:07x}"), "")).collect();
    let refs: Vec<(&str, &str)> = commits.iter().map(|(c, e)| (c.as_str(), *e)).collect();
    let plan = write_plan(
        tmp.path(),
        &plan_text(&refs).replace("[defaults]\n", "[defaults]\nrepeats = 3\n"),
    );
    let store = tmp.path().join("store");
    assert_eq!(run_ok(&plan, &store, &[]).0, 0);
    let s = Store::open(&store, false).unwrap();
    let full = s.docs().unwrap();
    let fast = s.summary_docs();
    let opts = report::Options::with_threshold(2.0);
    let a = report::render_table(&report::build(&s.in_order(&full), &opts));
    let b = report::render_table(&report::build(&s.in_order(&fast), &opts));
    assert_eq!(a, b);
    assert!(a.contains("n=3"), "{a}");
}

#[test]
fn results_options_are_checked_and_html_is_one_page() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = write_plan(tmp.path(), &plan_text(&[("f1111111", "")]));
    let store = tmp.path().join("store");
    assert_eq!(run_ok(&plan, &store, &[]).0, 0);
    for bad in [
        &["--alpha", "2"][..],
        &["--token-share", "-1"],
        &["--format", "pdf"],
    ] {
        let o = Command::new(BIN)
            .args(["results", "--store"])
            .arg(&store)
            .args(bad)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{bad:?}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("expected"),
            "{bad:?}"
        );
    }
    let o = Command::new(BIN)
        .args(["results", "--format", "html", "--alpha", "0.01", "--store"])
        .arg(&store)
        .output()
        .unwrap();
    let page = String::from_utf8_lossy(&o.stdout);
    assert!(page.starts_with("<!doctype html>") && page.ends_with("</html>"));
    assert!(page.contains("α=0.01"), "{page}");
    let o = Command::new(BIN)
        .args(["results", "--format", "json", "--store"])
        .arg(&store)
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(doc["summary"]["alpha"].as_f64().is_some());
    assert!(!doc["records"].as_array().unwrap().is_empty());
}
