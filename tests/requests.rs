//! Per-request latencies (#35) through the product's path: a sim night's serving runs leave
//! `--save-detailed` arrays, the engine keeps them bounded in the store, and `show` gives
//! P99 and the median an interval (text and JSON). The Docker path (the stand-in client
//! asked for `--save-detailed` and its file copied out) is in tests/docker_realism.rs.

use std::process::Command;

fn ns(args: &[&str], dir: &std::path::Path) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nightshift"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run nightshift");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[test]
fn a_nights_runs_carry_their_requests_with_intervals() {
    let tmp = tempfile::tempdir().unwrap();
    let plan =
        "schema_version = 1\nname = \"q\"\n[defaults]\nvariants = [\"baseline\", \"human\"]\n\
        [[commits]]\ncommit = \"0000000000000000000000000000000000abc001\"\n\
        parent = \"0000000000000000000000000000000000def001\"\ngpu_config = \"H100:1\"\n\
        perf_command = '''python benchmarks/benchmark_serving.py --model m/x1'''\n";
    std::fs::write(tmp.path().join("p.toml"), plan).unwrap();
    let (code, out) = ns(
        &[
            "run",
            "p.toml",
            "--headless",
            "--runtime",
            "sim",
            "--speed",
            "max",
            "--store",
            "st",
        ],
        tmp.path(),
    );
    assert_eq!(code, 0, "{out}");
    let (code, text) = ns(
        &[
            "show",
            "0000000000000000000000000000000000abc001",
            "--store",
            "st",
        ],
        tmp.path(),
    );
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("requests  100 (0 failed); 95% bootstrap intervals:"),
        "{text}"
    );
    let p99 = text
        .lines()
        .find(|l| l.contains("requests  P99 TTFT "))
        .unwrap_or_else(|| panic!("{text}"));
    // "P99 TTFT 386.2 ms [355.5–419.6]": the estimate inside its interval.
    let nums: Vec<f64> = p99
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .filter_map(|s| s.parse().ok())
        .collect();
    assert!(nums.len() >= 4, "{p99}");
    let (est, lo, hi) = (nums[1], nums[2], nums[3]);
    assert!(lo <= est && est <= hi && lo < hi, "{p99}");

    let (code, json) = ns(
        &[
            "show",
            "0000000000000000000000000000000000abc001",
            "--store",
            "st",
            "--json",
        ],
        tmp.path(),
    );
    assert_eq!(code, 0, "{json}");
    for line in json.lines().filter(|l| l.starts_with('{')) {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let q = &v["attempts"][0]["request_quantiles"];
        let kinds: Vec<&str> = q
            .as_array()
            .unwrap_or_else(|| panic!("{line}"))
            .iter()
            .filter_map(|x| x["kind"].as_str())
            .collect();
        assert!(
            kinds.contains(&"ttft") && kinds.contains(&"tpot"),
            "{kinds:?}"
        );
        // The compressed sample stays in the store, not in the export.
        assert!(!line.contains("\"sample\""), "{line}");
    }
}
