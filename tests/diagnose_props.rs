//! Fuzzing the diagnoser with proptest: any bytes in file mode, and any interleaving of
//! streams, arrival times and attempt facts in streaming mode, never panic, always give
//! evidence that is a line of the input (or a sentence stating a fact) and a confidence
//! in 0..=1. A long run (one core):
//!
//! ```sh
//! NIGHTSHIFT_PROPTEST_CASES=200000 nice -n 19 cargo test --release --test diagnose_props -- --test-threads 1
//! ```

mod support;

use nightshift::diagnose::{diagnose_text, Catalog, FailureContext, Scanner};
use nightshift::model::{Stage, Stream};
use proptest::prelude::*;
use std::sync::{Arc, OnceLock};

fn catalog() -> Arc<Catalog> {
    static C: OnceLock<Arc<Catalog>> = OnceLock::new();
    C.get_or_init(|| Arc::new(Catalog::builtin())).clone()
}

/// Pieces of real failure wordings, prefixes and separators, glued at random.
fn fragment() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "Traceback (most recent call last):",
        "  File \"/x.py\", line 3, in f",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB",
        "RuntimeError: CUDA error: out of memory",
        "Capturing CUDA graph shapes:  40%|####  | 14/35 [00:06<00:09]",
        "Graph capturing finished in 14 secs",
        "INFO 01-14 01:49:37 [x.py:1] ",
        "2025-03-07T05:56:27.269Z ",
        "(APIServer pid=1) ",
        "[rank0]: ",
        "\x1b[1;36m",
        "\x1b[0m",
        "\r",
        "\u{a0}",
        "Application startup complete.",
        "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use",
        "RuntimeError: Server failed to start in time.",
        "403 Client Error: Forbidden for url: https://huggingface.co/m/x",
        "No space left on device",
        "Hunk #2 FAILED at 311.",
        "aiohttp.client_exceptions.ClientOSError: [Errno 104] Connection reset by peer",
        "outlines 0.0.46 depends on pyairports",
        "Numba needs NumPy 2.0 or less. Got NumPy 2.1.",
        "toomanyrequests: rate limit",
        "unauthorized: authentication required",
        "building is off (--no-build)",
        "error: unrecognized arguments: --x",
        "Successful requests:                     0",
        "ERROR 01-01 00:00:00 a.py:1] boom",
        "KeyboardInterrupt",
        "é",
        "\u{130}",
        "\u{0}",
        "(?i)",
        "    raise ValueError(\"No available memory for the cache blocks\"",
        "",
        " ",
    ])
}

fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::collection::vec(fragment(), 0..6).prop_map(|v| v.concat()),
        "\\PC{0,200}",
    ]
}

fn stream() -> impl Strategy<Value = Stream> {
    prop::sample::select(vec![
        Stream::Server,
        Stream::Bench,
        Stream::Docker,
        Stream::Pull,
    ])
}

fn context() -> impl Strategy<Value = FailureContext> {
    (
        (
            prop::option::of(prop::sample::select(Stage::ALL.to_vec())),
            prop::option::of(any::<i64>()),
            prop::option::of(prop::sample::select(vec!["SIGKILL", "SIGSEGV", "9", ""])),
            any::<bool>(),
            any::<bool>(),
            prop::option::of(prop::sample::select(vec!["0.6.3", "0.4.0", "x", ""])),
        ),
        (
            any::<bool>(),
            any::<bool>(),
            prop::option::of(any::<f64>()),
            any::<bool>(),
            prop::option::of(line()),
            any::<bool>(),
            any::<bool>(),
            prop::option::of(line()),
            prop::option::of(line()),
        ),
    )
        .prop_map(
            |(
                (stage, exit_code, signal, timed_out, serving, vllm_version),
                (
                    bench_finished,
                    has_result,
                    successful_requests,
                    patch_failed,
                    pull_error,
                    image_missing,
                    disk_full,
                    bench_invalid,
                    needs_build,
                ),
            )| FailureContext {
                stage,
                exit_code,
                signal: signal.map(String::from),
                timed_out,
                serving,
                vllm_version: vllm_version.map(String::from),
                bench_finished,
                has_result,
                successful_requests,
                patch_failed,
                pull_error,
                image_missing,
                disk_full,
                bench_invalid,
                needs_build,
                // Any patch: a failure in the code it touched may be blamed on it.
                patched_files: if serving {
                    vec!["vllm/sampling_params.py".into()]
                } else {
                    Vec::new()
                },
                invalid_result: None,
            },
        )
}

proptest! {
    #![proptest_config(support::config())]

    #[test]
    fn any_bytes_in_file_mode(bytes in prop::collection::vec(any::<u8>(), 0..4096)) {
        let d = diagnose_text(&catalog(), &bytes);
        prop_assert!((0.0..=1.0).contains(&d.confidence));
    }

    #[test]
    fn glued_wordings_in_file_mode(lines in prop::collection::vec(line(), 0..60)) {
        let text = lines.join("\n");
        let d = diagnose_text(&catalog(), text.as_bytes());
        prop_assert!((0.0..=1.0).contains(&d.confidence));
        if let Some(n) = d.line_no {
            // The deciding line is the line it names, as written (no newline; long lines
            // are cut at a char boundary).
            let at = text.split('\n').nth(n as usize - 1);
            prop_assert!(at.is_some(), "line {} of {}", n, lines.len());
            let want = at.unwrap_or_default().trim_end_matches(['\n', '\r']);
            prop_assert!(want.starts_with(d.evidence.trim_end_matches('…')));
        }
    }

    #[test]
    fn streaming_with_facts_and_times(
        lines in prop::collection::vec((stream(), line(), prop::option::of(-1e12f64..1e12)), 0..60),
        ctx in context(),
    ) {
        let mut sc = Scanner::new(catalog());
        for (s, l, at) in &lines {
            sc.feed_at(*s, l, *at);
        }
        prop_assert_eq!(sc.lines_seen(), lines.len() as u64);
        if let Some(d) = sc.conclude(&ctx) {
            prop_assert!((0.0..=1.0).contains(&d.confidence));
            prop_assert!(!d.evidence.is_empty() || d.line_no.is_some());
        }
    }
}
