//! Text a real vLLM printed on our machines (tests/fixtures/real-vllm, README there): the
//! parser reads its result blocks, the diagnoser names its failures from its own lines, and
//! a block of zeros from a dead engine is never a result.

use nightshift::diagnose::{diagnose_text, Catalog, FailureContext, Scanner};
use nightshift::model::{Stage, Stream};
use nightshift::parse::parse_bytes;
use std::path::PathBuf;
use std::sync::Arc;

fn fixture(name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/real-vllm")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Feeds one attempt's streams as the engine does, then concludes with its facts.
fn attempt(files: &[(Stream, &str)], ctx: &FailureContext) -> nightshift::diagnose::Diagnosis {
    let mut sc = Scanner::new(Arc::new(Catalog::builtin()));
    for (stream, name) in files {
        for line in String::from_utf8_lossy(&fixture(name)).lines() {
            sc.feed(*stream, line);
        }
    }
    sc.conclude(ctx).expect("a failed attempt is diagnosed")
}

#[test]
fn a_real_serving_block_reads_whole() {
    let r = parse_bytes(&fixture("serve-0.32.0.bench.stdout.log"));
    let m = &r.metrics;
    for (k, v) in [
        ("successful_requests", 50.0),
        ("failed_requests", 0.0),
        ("duration_s", 0.43),
        ("total_input_tokens", 3232.0),
        ("total_output_tokens", 1600.0),
        ("request_throughput_req_s", 117.26),
        ("output_throughput_tok_s", 3752.28),
        ("peak_output_throughput_tok_s", 1596.0),
        ("total_throughput_tok_s", 11331.88),
        ("ttft_mean_ms", 162.83),
        ("ttft_median_ms", 157.17),
        ("ttft_p99_ms", 201.83),
        ("tpot_mean_ms", 7.39),
        ("tpot_median_ms", 7.53),
        ("tpot_p99_ms", 8.26),
        ("itl_mean_ms", 7.41),
        ("itl_median_ms", 5.61),
        ("itl_p99_ms", 32.72),
    ] {
        assert_eq!(m.get(k), Some(&v), "{k} in {m:?}");
    }
    // `Traffic request rate: inf` is no number.
    assert!(m.get("request_rate").is_none_or(|v| v.is_finite()), "{m:?}");
}

#[test]
fn a_dead_engine_with_a_result_block_of_zeros_is_a_failure_with_vllms_line() {
    // The block is read faithfully...
    let r = parse_bytes(&fixture("hd16-0.31.0.bench.stdout.log"));
    assert_eq!(r.metrics.get("successful_requests"), Some(&0.0));
    assert_eq!(r.metrics.get("failed_requests"), Some(&20.0));
    let why = nightshift::validity::invalid_reason(&r.metrics).expect("zeros are no result");
    assert!(why.contains("no request succeeded"), "{why}");
    // ...and the attempt is a failure named by the worker's own words, not by the zeros.
    let ctx = FailureContext {
        stage: Some(Stage::Parsing),
        exit_code: Some(0),
        serving: true,
        bench_finished: true,
        has_result: true,
        successful_requests: Some(0.0),
        ..Default::default()
    };
    assert!(!ctx.succeeded());
    let d = attempt(
        &[
            (Stream::Server, "hd16-0.31.0.server.stdout.log"),
            (Stream::Server, "hd16-0.31.0.server.stderr.log"),
            (Stream::Bench, "hd16-0.31.0.bench.stdout.log"),
            (Stream::Bench, "hd16-0.31.0.bench.stderr.log"),
        ],
        &ctx,
    );
    assert_eq!(d.category.as_str(), "model_arch_unsupported", "{d:?}");
    assert!(
        d.evidence
            .contains("RuntimeError: Unsupported CPU attention configuration: head_dim=16"),
        "{}",
        d.evidence
    );
}

#[test]
fn a_vllm_cli_without_its_distribution_is_named() {
    let d = diagnose_text(&Catalog::builtin(), &fixture("cli-0.32.0.bench.stderr.log"));
    assert_eq!(d.category.as_str(), "bench_command_invalid", "{d:?}");
    assert!(
        d.evidence
            .contains("PackageNotFoundError: No package metadata was found for vllm"),
        "{}",
        d.evidence
    );
}

#[test]
fn real_refusals_are_named_from_vllms_own_words() {
    let cat = Catalog::builtin();
    // The 0.31 server given a flag only 0.32 has: argparse's own line.
    let d = diagnose_text(&cat, &fixture("flag-0.31.0.server.stderr.log"));
    assert_eq!(d.category.as_str(), "bench_command_invalid", "{d:?}");
    assert!(
        d.evidence
            .contains("error: unrecognized arguments: --custom-histogram-buckets"),
        "{}",
        d.evidence
    );
    // `vllm bench latency`'s made-up token ids beyond a small vocabulary.
    let d = diagnose_text(&cat, &fixture("latency-vocab-0.32.0.bench.stderr.log"));
    assert_eq!(d.category.as_str(), "bench_command_invalid", "{d:?}");
    assert!(
        d.evidence.contains("Token id 9669 is out of vocabulary"),
        "{}",
        d.evidence
    );
    // `vllm bench throughput`'s lengths beyond --max-model-len: its own assertion.
    let d = diagnose_text(&cat, &fixture("throughput-len-0.32.0.bench.stderr.log"));
    assert_eq!(d.category.as_str(), "bench_command_invalid", "{d:?}");
    assert!(
        d.evidence.contains("max_model_len is greater than"),
        "{}",
        d.evidence
    );
}

#[test]
fn an_import_broken_in_a_file_the_patch_changed_is_the_patchs_failure() {
    let ctx = FailureContext {
        stage: Some(Stage::LoadingServer),
        serving: true,
        patched_files: vec!["vllm/sampling_params.py".into()],
        ..Default::default()
    };
    let d = attempt(
        &[(Stream::Server, "broken-import-0.31.0.server.stderr.log")],
        &ctx,
    );
    assert_eq!(d.category.as_str(), "agent_patch_failed", "{d:?}");
    assert!(
        d.evidence
            .contains("ImportError: cannot import name 'VLLMValidationErrors'"),
        "{}",
        d.evidence
    );
    // The same text from a run without that patch names nothing.
    let plain = FailureContext {
        patched_files: vec![],
        ..ctx
    };
    let d = attempt(
        &[(Stream::Server, "broken-import-0.31.0.server.stderr.log")],
        &plain,
    );
    assert_eq!(d.category.as_str(), "other", "{d:?}");
}

/// A block where a few requests failed is no measurement either: the run fails as
/// `no_metrics` with the count, not a number compared as if whole.
#[test]
fn a_result_with_lost_requests_is_a_failure_that_says_how_many() {
    let text = String::from_utf8(fixture("serve-0.32.0.bench.stdout.log"))
        .unwrap()
        .replace(
            "Successful requests:                     50",
            "Successful requests:                     47",
        )
        .replace(
            "Failed requests:                         0 ",
            "Failed requests:                         3 ",
        );
    let r = parse_bytes(text.as_bytes());
    assert_eq!(r.metrics.get("failed_requests"), Some(&3.0));
    let why = nightshift::validity::invalid_reason(&r.metrics).expect("3 of 50 lost");
    let ctx = FailureContext {
        stage: Some(Stage::Parsing),
        exit_code: Some(0),
        serving: true,
        bench_finished: true,
        has_result: true,
        successful_requests: Some(47.0),
        invalid_result: Some(why),
        ..Default::default()
    };
    let mut sc = Scanner::new(Arc::new(Catalog::builtin()));
    for line in text.lines() {
        sc.feed(Stream::Bench, line);
    }
    let d = sc.conclude(&ctx).expect("a failure");
    assert_eq!(d.category.as_str(), "no_metrics", "{d:?}");
    assert!(
        d.evidence.contains("3 of 50 requests failed"),
        "{}",
        d.evidence
    );
}
