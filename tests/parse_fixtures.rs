//! Fixtures written from `shared/spec/vllm-output-formats.md` (values invented, layout
//! exact): one per era and per quirk. Binary quirks (CRLF, `\r` bars, ANSI, invalid
//! UTF-8, 1 MB lines) are derived from the text fixtures in code.
#![allow(clippy::excessive_precision)] // values as benchmarks print them

use nightshift::cli::parse as cli;
use nightshift::parse::{detect_version, parse_bytes, Kind, ParseResult, StreamParser};
use std::collections::BTreeMap;
use std::path::PathBuf;

fn path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/parse")
        .join(name)
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(path(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn map(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

/// Parses whole and in 5-byte chunks; both must agree.
fn parse(bytes: &[u8]) -> ParseResult {
    let whole = parse_bytes(bytes);
    if !bytes.trim_ascii_start().starts_with(b"{") {
        let mut p = StreamParser::new();
        for c in bytes.chunks(5) {
            p.feed(c);
        }
        assert_eq!(p.finish(), whole, "chunked parse differs");
    }
    whole
}

const ERA_B: &[(&str, f64)] = &[
    ("successful_requests", 1000.0),
    ("duration_s", 61.23),
    ("total_input_tokens", 215196.0),
    ("total_output_tokens", 198343.0),
    ("request_throughput_req_s", 16.33),
    ("input_throughput_tok_s", 3514.55),
    ("output_throughput_tok_s", 3239.27),
    ("ttft_mean_ms", 2311.40),
    ("ttft_median_ms", 2190.07),
    ("ttft_p99_ms", 5120.90),
    ("tpot_mean_ms", 81.25),
    ("tpot_median_ms", 77.10),
    ("tpot_p99_ms", 201.66),
    ("itl_mean_ms", 79.83),
    ("itl_median_ms", 63.20),
    ("itl_p99_ms", 390.04),
];

#[test]
fn era_a_v0_3_3_has_no_header() {
    let r = parse(&fixture("era_a_v0_3_3_serving.txt"));
    assert_eq!(r.kind, Kind::Serving);
    assert!(!r.truncated);
    assert_eq!(
        r.metrics,
        map(&[
            ("successful_requests", 1000.0),
            ("duration_s", 118.270391),
            ("total_input_tokens", 248339.0),
            ("total_output_tokens", 190154.0),
            ("request_throughput_req_s", 8.46),
            ("input_throughput_tok_s", 2099.75),
            ("output_throughput_tok_s", 1607.79),
            ("ttft_mean_ms", 41237.18),
            ("ttft_median_ms", 39102.44),
            ("ttft_p99_ms", 99210.07),
            ("tpot_mean_ms", 301.55),
            ("tpot_median_ms", 254.10),
            ("tpot_p99_ms", 1120.64),
        ])
    );
}

#[test]
fn pre_2024_serving_script() {
    let r = parse(&fixture("pre2024_serving.txt"));
    assert_eq!(r.kind, Kind::Serving);
    assert_eq!(
        r.metrics,
        map(&[
            ("duration_s", 251.33),
            ("request_throughput_req_s", 1.99),
            ("avg_latency_s", 12.74),
            ("avg_latency_per_token_s", 0.04),
            ("avg_latency_per_output_token_s", 0.09),
        ])
    );
}

#[test]
fn era_b_v0_4() {
    let r = parse(&fixture("era_b_v0_4_serving.txt"));
    assert_eq!(r.kind, Kind::Serving);
    assert!(!r.truncated && r.history.is_empty());
    assert_eq!(r.metrics, map(ERA_B));
    assert_eq!(r.headline(), Some(("output_throughput_tok_s", 3239.27)));
    assert_eq!(r.successful_requests(), Some(1000.0));
}

#[test]
fn era_c_goodput_and_dynamic_percentiles() {
    let r = parse(&fixture("era_c_v0_6_goodput_percentiles.txt"));
    assert_eq!(r.kind, Kind::Serving);
    assert_eq!(
        r.metrics,
        map(&[
            ("burstiness", 1.0),
            ("successful_requests", 500.0),
            ("duration_s", 48.07),
            ("total_input_tokens", 102400.0),
            ("total_output_tokens", 63810.0),
            ("request_throughput_req_s", 10.40),
            ("request_goodput_req_s", 9.86),
            ("output_throughput_tok_s", 1327.44),
            ("total_throughput_tok_s", 3457.66),
            ("ttft_mean_ms", 143.92),
            ("ttft_median_ms", 120.50),
            ("ttft_p99_9_ms", 812.37),
            ("e2el_mean_ms", 3192.55),
            ("e2el_median_ms", 3015.00),
            ("e2el_p99_9_ms", 9011.80),
        ])
    );
}

#[test]
fn era_d_cli_with_spec_decode_and_failure_dump() {
    let r = parse(&fixture("era_d_cli_0_14_spec_decode.txt"));
    assert_eq!(r.kind, Kind::Serving);
    assert!(!r.truncated);
    assert_eq!(
        r.metrics,
        map(&[
            ("request_rate", 20.0),
            ("burstiness", 1.0),
            ("successful_requests", 998.0),
            ("failed_requests", 2.0),
            ("max_concurrency", 64.0),
            ("duration_s", 52.31),
            ("total_input_tokens", 1021952.0),
            ("total_output_tokens", 127744.0),
            ("request_throughput_req_s", 19.08),
            ("output_throughput_tok_s", 2442.07),
            ("peak_output_throughput_tok_s", 3968.00),
            ("peak_concurrent_requests", 64.0),
            ("total_throughput_tok_s", 21978.71),
            ("ttft_mean_ms", 187.33),
            ("ttft_median_ms", 171.90),
            ("ttft_p99_ms", 603.18),
            ("spec_decode_acceptance_rate_pct", 71.25),
            ("spec_decode_acceptance_length", 2.43),
            ("spec_decode_drafts", 52110.0),
            ("spec_decode_draft_tokens", 104220.0),
            ("spec_decode_accepted_tokens", 74257.0),
            ("spec_decode_position_0_acceptance_pct", 82.50),
            ("spec_decode_position_1_acceptance_pct", 60.00),
        ])
    );
}

#[test]
fn pooling_run_has_no_generation_keys() {
    let r = parse(&fixture("pooling_0_33.txt"));
    assert_eq!(r.kind, Kind::Serving);
    assert_eq!(
        r.metrics,
        map(&[
            ("burstiness", 1.0),
            ("successful_requests", 200.0),
            ("failed_requests", 0.0),
            ("duration_s", 3.91),
            ("total_input_tokens", 51200.0),
            ("request_throughput_req_s", 51.15),
            ("input_throughput_inputs_s", 51.15),
            ("total_throughput_tok_s", 13094.63),
            ("e2el_mean_ms", 1210.40),
            ("e2el_median_ms", 1190.00),
            ("e2el_p99_ms", 2011.73),
        ])
    );
    assert_eq!(r.headline(), Some(("total_throughput_tok_s", 13094.63)));
}

#[test]
fn sglang_bench_serving_block() {
    let r = parse(&fixture("sglang_bench_serving.txt"));
    assert_eq!(r.kind, Kind::Serving);
    assert_eq!(
        r.metrics,
        map(&[
            ("request_rate", 4.0),
            ("max_concurrency", 8.0),
            ("successful_requests", 10.0),
            ("duration_s", 21.42),
            ("total_input_tokens", 10240.0),
            ("total_output_tokens", 5120.0),
            ("total_output_tokens_retokenized", 5113.0),
            ("request_throughput_req_s", 0.47),
            ("input_throughput_tok_s", 478.06),
            ("output_throughput_tok_s", 239.03),
            ("total_throughput_tok_s", 717.09),
            ("concurrency", 6.20),
            ("spec_decode_acceptance_length", 3.10),
            ("e2el_mean_ms", 13278.55),
            ("e2el_median_ms", 13301.12),
            ("ttft_mean_ms", 402.18),
            ("ttft_median_ms", 398.70),
            ("ttft_p99_ms", 611.09),
            ("tpot_mean_ms", 25.20),
            ("tpot_median_ms", 25.11),
            ("tpot_p99_ms", 27.93),
            ("itl_mean_ms", 25.20),
            ("itl_median_ms", 24.80),
            ("itl_p95_ms", 30.02),
            ("itl_p99_ms", 41.77),
            ("itl_max_ms", 88.12),
        ])
    );
}

#[test]
fn throughput_every_shape() {
    let r = parse(&fixture("throughput_v0_3.txt"));
    assert_eq!(r.kind, Kind::Throughput);
    assert_eq!(
        r.metrics,
        map(&[
            ("throughput_req_s", 24.61),
            ("throughput_total_tok_s", 10758.87)
        ])
    );
    assert_eq!(r.vllm_version, None, "v0.3.3 logs name no version");

    let r = parse(&fixture("throughput_v0_6_4.txt"));
    assert_eq!(r.kind, Kind::Throughput);
    assert_eq!(r.vllm_version.as_deref(), Some("0.6.4.post1"));
    assert_eq!(
        r.metrics,
        map(&[
            ("throughput_req_s", 24.61),
            ("throughput_total_tok_s", 28351.65),
            ("throughput_output_tok_s", 3150.18),
        ])
    );

    let r = parse(&fixture("throughput_v0_8_cli.txt"));
    assert_eq!(r.kind, Kind::Throughput);
    assert_eq!(r.vllm_version.as_deref(), Some("0.8.5"));
    assert_eq!(
        r.metrics,
        map(&[
            ("throughput_req_s", 33.08),
            ("throughput_total_tok_s", 38109.17),
            ("throughput_output_tok_s", 4234.30),
            ("total_input_tokens", 1024000.0),
            ("total_output_tokens", 128000.0),
        ])
    );
    assert_eq!(r.headline(), Some(("throughput_output_tok_s", 4234.30)));
}

#[test]
fn latency_unformatted_floats() {
    let r = parse(&fixture("latency_v0_5_1.txt"));
    assert_eq!(r.kind, Kind::Latency);
    assert_eq!(r.vllm_version.as_deref(), Some("0.5.1"));
    assert_eq!(
        r.metrics,
        map(&[
            ("latency_avg_s", 1.7304185613989832),
            ("latency_p10_s", 1.7121290371008217),
            ("latency_p25_s", 1.7190041949995793),
            ("latency_p50_s", 1.7287651304993779),
            ("latency_p75_s", 1.7398130744998407),
            ("latency_p90_s", 1.7497731961000128),
            ("latency_p99_s", 1.7822170848585666),
        ])
    );
}

#[test]
fn prefix_caching_takes_the_last_cost_time() {
    let r = parse(&fixture("prefix_caching_v0_5.txt"));
    assert_eq!(r.kind, Kind::PrefixCaching);
    assert_eq!(r.metrics, map(&[("elapsed_s", 0.24016284942626953)]));
    assert_eq!(r.history, vec![map(&[("elapsed_s", 1.0203857421875)])]);

    let r = parse(&fixture("prefix_caching_v0_6_5.txt"));
    assert_eq!(r.kind, Kind::PrefixCaching);
    assert_eq!(
        r.metrics,
        map(&[
            ("elapsed_s", 12.946571588516235),
            ("input_throughput_tok_s", 23747.88),
            ("output_throughput_tok_s", 1544.21),
        ])
    );
}

#[test]
fn server_logs_name_the_version_and_hold_no_result() {
    for (file, want) in [
        ("server_v0_5_1.log", "0.5.1"),
        ("server_v0_8_5.log", "0.8.5"),
        ("server_v0_11_0.log", "0.11.0"),
        ("server_v0_20_0.log", "0.20.0"),
        ("pip_show_vllm.txt", "0.6.3.post1"),
        ("version_print.txt", "0.6.4.post2.dev355+g9d5b4e4d"),
    ] {
        let r = parse(&fixture(file));
        assert_eq!(r.vllm_version.as_deref(), Some(want), "{file}");
        assert_eq!(r.kind, Kind::Unknown, "{file}");
        assert!(!r.has_result(), "{file}: {:?}", r.metrics);
        assert!(
            r.metrics.is_empty(),
            "{file}: the stats line is never a result"
        );
    }
    assert_eq!(
        detect_version("Initializing a V0 LLM engine (v0.7.3) with config: model='m'").as_deref(),
        Some("0.7.3")
    );
}

#[test]
fn json_result_files() {
    let r = parse(&fixture("serving_result_v0_6_4.json"));
    assert_eq!(r.kind, Kind::Serving);
    assert_eq!(r.metrics["duration_s"], 48.07012345678901);
    assert_eq!(r.metrics["request_throughput_req_s"], 10.401469123456789);
    assert_eq!(r.metrics["ttft_std_ms"], 77.1);
    assert_eq!(r.metrics["burstiness"], 1.0);
    for absent in ["request_rate", "max_concurrency", "request_goodput_req_s"] {
        assert!(!r.metrics.contains_key(absent), "{absent}");
    }

    let r = parse(&fixture("serving_append.jsonl"));
    assert_eq!(r.kind, Kind::Serving);
    assert_eq!(r.history.len(), 1);
    assert_eq!(r.metrics["request_rate"], 4.0);
    assert_eq!(r.metrics["failed_requests"], 1.0);
    assert_eq!(r.metrics["ttft_p99_9_ms"], 201.25);
    assert_eq!(r.metrics["peak_output_throughput_tok_s"], 512.0);
    assert_eq!(r.metrics["peak_concurrent_requests"], 8.0);

    let r = parse(&fixture("throughput_output.json"));
    assert_eq!(r.kind, Kind::Throughput);
    assert_eq!(r.metrics["throughput_req_s"], 24.610198417399706);
    assert_eq!(r.metrics["throughput_total_tok_s"], 10758.062591037016);
    assert_eq!(r.metrics["elapsed_s"], 40.63315725326538);

    let r = parse(&fixture("latency_output.json"));
    assert_eq!(r.kind, Kind::Latency);
    assert_eq!(r.metrics["latency_avg_s"], 1.7304185613989832);
    assert_eq!(r.metrics["latency_p99_s"], 1.7822170848585666);
    assert_eq!(r.metrics.len(), 7);
}

#[test]
fn quirk_compose_prefixes_and_interleaved_server_lines() {
    let r = parse(&fixture("quirk_compose_prefixes.log"));
    assert_eq!(r.kind, Kind::Serving);
    assert_eq!(r.vllm_version.as_deref(), Some("0.8.5"));
    assert_eq!(
        r.metrics,
        map(&[
            ("request_rate", 8.0),
            ("burstiness", 1.0),
            ("successful_requests", 400.0),
            ("duration_s", 50.12),
            ("total_input_tokens", 409600.0),
            ("total_output_tokens", 51200.0),
            ("request_throughput_req_s", 7.98),
            ("output_throughput_tok_s", 1021.55),
            ("total_throughput_tok_s", 9193.94),
            ("ttft_mean_ms", 61.02),
            ("ttft_median_ms", 58.40),
            ("ttft_p99_ms", 140.77),
        ])
    );
}

#[test]
fn quirk_markdown_quote_fence_bold_and_table() {
    let r = parse(&fixture("quirk_markdown.md"));
    assert_eq!(r.kind, Kind::Serving);
    assert!(!r.truncated);
    assert_eq!(
        r.metrics,
        map(&[
            ("successful_requests", 100.0),
            ("duration_s", 22.18),
            ("total_input_tokens", 26322.0),
            ("total_output_tokens", 11308.0),
            ("request_throughput_req_s", 4.51),
            ("output_throughput_tok_s", 509.82),
            ("ttft_mean_ms", 60.67),
            ("ttft_median_ms", 40.54),
            ("ttft_p99_ms", 307.82),
        ])
    );
    // The table that repeats the numbers is its own (headerless) block.
    assert_eq!(
        r.history,
        vec![map(&[
            ("successful_requests", 100.0),
            ("duration_s", 22.18),
            ("request_throughput_req_s", 4.51),
            ("ttft_mean_ms", 60.67),
        ])]
    );
}

#[test]
fn quirk_numbers_glued_to_units_and_no_padding() {
    let r = parse(&fixture("quirk_glued_units.txt"));
    assert_eq!(r.kind, Kind::Serving);
    assert_eq!(
        r.metrics,
        map(&[
            ("request_rate", 4.0),
            ("successful_requests", 1000.0),
            ("duration_s", 118.27),
            ("total_input_tokens", 248339.0),
            ("total_output_tokens", 190154.0),
            ("request_throughput_req_s", 8.46),
            ("input_throughput_tok_s", 2099.75),
            ("output_throughput_tok_s", 1607.79),
            ("ttft_mean_ms", 41500.0),
            ("ttft_median_ms", 39102.44),
            ("ttft_p99_ms", 99210.07),
        ])
    );
}

#[test]
fn quirk_truncated_block_keeps_what_is_there() {
    let r = parse(&fixture("quirk_truncated.txt"));
    assert_eq!(r.kind, Kind::Serving);
    assert!(r.truncated);
    assert!(r.has_result());
    assert_eq!(r.metrics["ttft_mean_ms"], 2311.40);
    assert_eq!(r.metrics.len(), 7);
    assert!(!r.metrics.contains_key("ttft_median_ms"));

    let r = parse(&fixture("quirk_cut_above_header.txt"));
    assert_eq!(r.kind, Kind::Serving);
    assert!(r.truncated);
    assert_eq!(
        r.metrics,
        map(&[
            ("tpot_median_ms", 77.10),
            ("tpot_p99_ms", 201.66),
            ("itl_mean_ms", 79.83),
            ("itl_median_ms", 63.20),
            ("itl_p99_ms", 390.04),
        ])
    );
}

#[test]
fn quirk_several_blocks_last_complete_wins() {
    let r = parse(&fixture("quirk_multiple_blocks.txt"));
    assert_eq!(r.kind, Kind::Serving);
    assert!(!r.truncated);
    assert_eq!(r.metrics["successful_requests"], 400.0);
    assert_eq!(r.metrics["max_concurrency"], 8.0);
    assert_eq!(r.history.len(), 2);
    assert_eq!(r.history[0]["max_concurrency"], 1.0);
    assert_eq!(r.history[1]["successful_requests"], 3200.0);
    assert!(!r.history[1].contains_key("duration_s"));
}

#[test]
fn quirk_zero_successful_requests_is_parsed_faithfully() {
    let r = parse(&fixture("quirk_zero_success.txt"));
    assert_eq!(r.kind, Kind::Serving);
    assert!(r.has_result());
    assert_eq!(r.successful_requests(), Some(0.0));
    assert_eq!(r.metrics["failed_requests"], 100.0);
    assert!(!r.metrics.contains_key("output_throughput_tok_s"));
}

#[test]
fn quirk_crlf_ansi_and_progress_bars() {
    let base = fixture("era_b_v0_4_serving.txt");
    let text = String::from_utf8(base).unwrap();
    // CRLF endings, every line coloured, and a tqdm bar overwritten in place whose last
    // segment is glued to the header (stderr merged without a newline).
    let mut out = Vec::new();
    for l in text.lines() {
        if l.starts_with("=====") && l.contains("Result") {
            out.extend_from_slice(b" 10%|#         | 100/1000 [00:05<00:45, 20.0it/s]\r 100%|##########| 1000/1000 [00:48<00:00, 20.6it/s]\r");
        }
        out.extend_from_slice(b"\x1b[0;32m");
        out.extend_from_slice(l.as_bytes());
        out.extend_from_slice(b"\x1b[0m\r\n");
    }
    let r = parse(&out);
    assert_eq!(r.metrics, map(ERA_B));
    assert!(!r.truncated);
}

#[test]
fn quirk_non_utf8_huge_lines_and_empty_input() {
    let mut log = Vec::new();
    log.extend_from_slice(b"INFO 01-07 21:59:25 [file.py:1] caf\xe9 \xff\xfe noise\n");
    log.extend(std::iter::repeat_n(b'a', 1 << 20));
    log.extend_from_slice(b" throughput latency version\n");
    log.extend(std::iter::repeat_n(b'\xff', 1 << 20));
    log.push(b'\n');
    log.extend_from_slice(&fixture("era_b_v0_4_serving.txt"));
    log.extend_from_slice(b"\xc3\x28 trailing garbage without newline");
    let r = parse(&log);
    assert_eq!(r.metrics, map(ERA_B));

    let r = parse(b"");
    assert_eq!(r.kind, Kind::Unknown);
    assert!(!r.has_result() && !r.truncated && r.metrics.is_empty());
    assert_eq!(r.headline(), None);
}

#[test]
fn quirk_log_prefixes_on_every_line() {
    let base = String::from_utf8(fixture("era_b_v0_4_serving.txt")).unwrap();
    let prefixes = [
        "vllm  | ",
        "bench-1  | 2025-01-07T21:59:25.123456789Z ",
        "2025-01-07 21:59:25,123 ",
        "[21:59:25] ",
        "INFO 01-07 21:59:25 [benchmark_serving.py:600] ",
        "(APIServer pid=12) ",
        "\x1b[1;36m(APIServer pid=12)\x1b[0;0m ",
        "# ",
        "> ",
        "   ",
    ];
    for p in prefixes {
        let text: String = base.lines().map(|l| format!("{p}{l}\n")).collect();
        let r = parse(text.as_bytes());
        assert_eq!(r.metrics, map(ERA_B), "prefix {p:?}");
        assert_eq!(r.kind, Kind::Serving, "prefix {p:?}");
    }
}

#[test]
fn quirk_unknown_timestamp_prefix() {
    // A date layout no prefix rule knows: labels are still found after it.
    let text = fixture("quirk_timestamp_prefix.log");
    let r = parse(&text);
    assert_eq!(r.kind, Kind::Latency);
    assert_eq!(
        r.metrics,
        map(&[("latency_avg_s", 1.5), ("latency_p99_s", 1.9)])
    );
    assert_eq!(
        r.history,
        vec![map(&[
            ("successful_requests", 10.0),
            ("duration_s", 8.98),
            ("request_throughput_req_s", 1.11),
            ("ttft_mean_ms", 811.39),
            ("ttft_p99_ms", 1099.04),
        ])]
    );
    // Without the latency lines, the serving block is complete (its frame was seen).
    let serving: Vec<u8> = text
        .split(|&b| b == b'\n')
        .take(8)
        .flat_map(|l| [l, b"\n"].concat())
        .collect();
    let r = parse(&serving);
    assert_eq!(r.kind, Kind::Serving);
    assert!(!r.truncated);
}

#[test]
fn streaming_emits_values_as_soon_as_printed() {
    let text = fixture("era_b_v0_4_serving.txt");
    let mut p = StreamParser::new();
    let mut seen = Vec::new();
    for line in text.split(|&b| b == b'\n') {
        let updates = p.feed_line(line);
        if line.starts_with(b"Successful requests:") {
            assert_eq!(updates.len(), 1);
            assert_eq!(updates[0].key, "successful_requests");
            assert_eq!(updates[0].value, 1000.0);
            assert_eq!(p.current()["successful_requests"], 1000.0);
        }
        if line.starts_with(b"Mean TTFT") {
            assert_eq!(p.current()["ttft_mean_ms"], 2311.40);
        }
        seen.extend(updates);
    }
    assert_eq!(seen.len(), ERA_B.len());
    assert!(p.current().is_empty(), "the closing line ends the block");
    let r = p.finish();
    assert_eq!(r.metrics, map(ERA_B));
}

#[test]
fn cli_json_contract_over_fixtures() {
    let files = [
        path("era_d_cli_0_14_spec_decode.txt"),
        path("throughput_v0_8_cli.txt"),
        path("server_v0_8_5.log"),
    ];
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = cli::main(&files, true, &mut out, &mut err);
    assert_eq!(code, 1, "the server log holds no result");
    let lines: Vec<serde_json::Value> = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["kind"], "serving");
    assert_eq!(lines[0]["metrics"]["successful_requests"], 998);
    assert_eq!(lines[0]["metrics"]["ttft_p99_ms"], 603.18);
    assert!(lines[0]["vllm_version"].is_null());
    assert_eq!(lines[1]["kind"], "throughput");
    assert_eq!(lines[1]["vllm_version"], "0.8.5");
    assert_eq!(lines[2]["kind"], "unknown");
    assert_eq!(lines[2]["metrics"], serde_json::json!({}));
    for l in &lines {
        let keys: Vec<&str> = l.as_object().unwrap().keys().map(String::as_str).collect();
        for k in ["file", "kind", "vllm_version", "metrics", "truncated"] {
            assert!(keys.contains(&k), "{k} missing");
        }
    }

    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = cli::main(&files[..2], false, &mut out, &mut err);
    assert_eq!(code, 0);
    let table = String::from_utf8(out).unwrap();
    assert!(table.contains("kind: serving"));
    assert!(table.contains("spec_decode_acceptance_rate_pct"));
}
