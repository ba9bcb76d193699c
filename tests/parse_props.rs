//! Property tests. The case count comes from `NIGHTSHIFT_PROPTEST_CASES` (default 256), so
//! a long run is one command, e.g. ten minutes on one core:
//!
//! ```sh
//! NIGHTSHIFT_PROPTEST_CASES=400000 nice -n 19 cargo test --release --test parse_props -- --test-threads 1
//! ```

mod support;

use nightshift::parse::{detect_version, parse_bytes, Kind, StreamParser};
use proptest::prelude::*;

const BLOCK: &[(&str, &str)] = &[
    ("============ Serving Benchmark Result ============", ""),
    ("Successful requests:", "998"),
    ("Failed requests:", "2"),
    ("Maximum request concurrency:", "64"),
    ("Benchmark duration (s):", "52.31"),
    ("Total input tokens:", "1021952"),
    ("Total generated tokens:", "127744"),
    ("Request throughput (req/s):", "19.08"),
    ("Output token throughput (tok/s):", "2442.07"),
    ("Total Token throughput (tok/s):", "21978.71"),
    ("---------------Time to First Token----------------", ""),
    ("Mean TTFT (ms):", "187.33"),
    ("Median TTFT (ms):", "171.90"),
    ("P99.9 TTFT (ms):", "603.18"),
    ("-----Time per Output Token (excl. 1st token)------", ""),
    ("Mean TPOT (ms):", "12.01"),
    ("P50 TPOT (ms):", "11.50"),
    ("==================================================", ""),
];

const EXPECT: &[(&str, f64)] = &[
    ("successful_requests", 998.0),
    ("failed_requests", 2.0),
    ("max_concurrency", 64.0),
    ("duration_s", 52.31),
    ("total_input_tokens", 1021952.0),
    ("total_output_tokens", 127744.0),
    ("request_throughput_req_s", 19.08),
    ("output_throughput_tok_s", 2442.07),
    ("total_throughput_tok_s", 21978.71),
    ("ttft_mean_ms", 187.33),
    ("ttft_median_ms", 171.90),
    ("ttft_p99_9_ms", 603.18),
    ("tpot_mean_ms", 12.01),
    ("tpot_median_ms", 11.50),
];

/// Realistic line prefixes with random content: compose columns, timestamps, vLLM logger
/// headers of both layouts, process tags, ANSI colour, markdown quotes.
fn prefix() -> impl Strategy<Value = String> {
    let compose = "[a-z][a-z0-9_.-]{0,14}".prop_flat_map(|name| {
        (Just(name), 1usize..6).prop_map(|(n, pad)| format!("{n}{}| ", " ".repeat(pad)))
    });
    let iso = (
        2000u32..2100,
        1u32..13,
        1u32..29,
        0u32..24,
        0u32..60,
        0u32..1_000_000_000,
    )
        .prop_map(|(y, mo, d, h, mi, ns)| {
            format!("{y}-{mo:02}-{d:02}T{h:02}:{mi:02}:{mi:02}.{ns:09}Z ")
        });
    let logger = (
        prop::sample::select(vec!["INFO", "WARNING", "DEBUG", "ERROR"]),
        1u32..13,
        0u32..60,
        "[a-z_]{1,12}",
        1u32..5000,
        any::<bool>(),
    )
        .prop_map(|(lvl, mo, s, file, line, bracket)| {
            if bracket {
                format!("{lvl} {mo:02}-{mo:02} 10:{s:02}:{s:02} [{file}.py:{line}] ")
            } else {
                format!("{lvl} {mo:02}-{mo:02} 10:{s:02}:{s:02} {file}.py:{line}] ")
            }
        });
    let tag = (
        prop::sample::select(vec![
            "APIServer",
            "EngineCore_DP0",
            "VllmWorker TP0",
            "bench",
        ]),
        1u32..99999,
        any::<bool>(),
    )
        .prop_map(|(name, pid, ansi)| {
            if ansi {
                format!("\x1b[1;36m({name} pid={pid})\x1b[0;0m ")
            } else {
                format!("({name} pid={pid}) ")
            }
        });
    let misc = prop::sample::select(vec!["", "# ", "> ", "  ", "\t", "\x1b[0m", "[21:59:25] "])
        .prop_map(String::from);
    (
        prop::option::of(compose),
        prop::option::of(iso),
        prop::option::of(tag),
        prop::option::of(logger),
        misc,
    )
        .prop_map(|(c, i, t, l, m)| {
            [c, i, t, l, Some(m)]
                .into_iter()
                .flatten()
                .collect::<String>()
        })
}

fn line_ending() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["\n", "\r\n", "\r\r\n", " \n", "   \r\n"])
}

/// A noise line as a server prints it.
fn noise() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "INFO:     127.0.0.1:50312 - \"POST /v1/completions HTTP/1.1\" 200 OK",
        "INFO 07-08 20:50:03 metrics.py:295] Avg prompt throughput: 1185.9 tokens/s, Avg generation throughput: 512.3 tokens/s, Running: 64 reqs",
        "Avg prompt throughput: 0.0 tokens/s",
        "(APIServer pid=1) INFO 05-06 21:00:52 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 238.7 tokens/s",
        " 50%|#####     | 500/1000 [00:24<00:24, 20.4it/s]",
        "Maximum concurrency for 32,768 tokens per request: 12.98x",
        "",
    ])
    .prop_map(String::from)
}

fn render(prefix: &str, eol: &str, padding: usize) -> String {
    let mut s = String::new();
    for (label, value) in BLOCK {
        s.push_str(prefix);
        s.push_str(label);
        if !value.is_empty() {
            s.push_str(&" ".repeat(padding));
            s.push_str(value);
            s.push_str("    ");
        }
        s.push_str(eol);
    }
    s
}

fn check_block(bytes: &[u8], chunk: usize) -> Result<(), TestCaseError> {
    let mut p = StreamParser::new();
    for c in bytes.chunks(chunk.max(1)) {
        p.feed(c);
    }
    let r = p.finish();
    prop_assert_eq!(r.kind, Kind::Serving);
    prop_assert!(!r.truncated);
    for (k, v) in EXPECT {
        prop_assert_eq!(r.metrics.get(*k), Some(v), "key {}", k);
    }
    prop_assert_eq!(r.metrics.len(), EXPECT.len());
    Ok(())
}

proptest! {
    #![proptest_config(support::config())]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..4096), chunk in 1usize..512) {
        let whole = parse_bytes(&bytes);
        let mut p = StreamParser::new();
        for c in bytes.chunks(chunk) {
            p.feed(c);
            let _ = p.current();
        }
        let _ = p.vllm_version();
        let r = p.finish();
        let _ = (r.headline(), r.has_result(), whole.headline());
        let _ = detect_version(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn structured_garbage_never_panics(
        parts in prop::collection::vec(prop::sample::select(vec![
            "Successful requests:", "Mean TTFT (ms):", "P99.9 ", "Throughput: ", " requests/s, ",
            " tokens/s", "Avg latency: ", "% percentile latency: ", "cost time ", "=====",
            "============ Serving Benchmark Result ============", "---Inter-token Latency---",
            "\n", "\r", "\r\n", "\x1b[1;36m", "\x1b[", "|", ":", "  ", "1000", "3.14", "1e308",
            "-0", ".5", "1,234,567", "inf", "nan", "(ms)", "(", ")", "**", "`", "# ", "> ",
            "vLLM API server version ", "0.6.3.post1", "Name: vllm\nVersion: ", "█ version ",
            "(APIServer pid=1) ", "INFO 01-07 21:59:25 [x.py:1] ", "é", "\u{130}", "\u{0}", "\t",
            "{", "}", "\"completed\":", "[", "]", "Position 0:", "est. speed input: ",
        ]), 0..200),
        chunk in 1usize..64,
    ) {
        let text: String = parts.concat();
        let _ = parse_bytes(text.as_bytes());
        let mut p = StreamParser::new();
        for c in text.as_bytes().chunks(chunk) {
            p.feed(c);
        }
        let _ = p.finish();
        for line in text.lines() {
            let _ = detect_version(line);
        }
    }

    #[test]
    fn block_survives_prefixes_and_line_endings(
        prefix in prefix(),
        eol in line_ending(),
        padding in 0usize..60,
        chunk in 1usize..300,
    ) {
        let text = render(&prefix, eol, padding.max(1));
        check_block(text.as_bytes(), chunk)?;
    }

    #[test]
    fn block_survives_noise_around_it(
        before in prop::collection::vec(noise(), 0..20),
        after in prop::collection::vec(noise(), 0..20),
        prefix in prefix(),
        chunk in 1usize..300,
    ) {
        let mut text = String::new();
        for n in &before {
            text.push_str(n);
            text.push('\n');
        }
        text.push_str(&render(&prefix, "\n", 10));
        for n in &after {
            text.push_str(n);
            text.push('\n');
        }
        check_block(text.as_bytes(), chunk)?;
    }
}
