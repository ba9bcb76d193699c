//! The cheap test every line passes before any regex runs. Almost every line of a night's
//! logs is server noise (access lines, request logs, stats); only lines containing one of
//! these words can start or carry a result outside a block, or name the vLLM version.

use aho_corasick::{AhoCorasick, AhoCorasickKind};
use std::sync::OnceLock;

/// Lower-case needles of result lines, matched ASCII-case-insensitively anywhere in the
/// raw line: every label that can open a block or carries a result outside one.
pub(crate) const RESULT_NEEDLES: &[&str] = &[
    "benchmark result",
    "throughput:",
    "throughput (",
    "avg latency",
    "percentile latency",
    "average latency",
    "successful requests",
    "benchmark duration",
    "total time",
    "cost time",
    "est. speed",
    "ttft",
    "tpot",
    "itl",
    "e2e",
    "time to first",
    "time per output",
    "queue time",
    "total num",
    "concurrency",
    "request rate",
    "burstiness",
];

/// Needles of lines that may name the vLLM version.
pub(crate) const VERSION_NEEDLES: &[&str] = &[
    "version",
    "llm engine (v",
    "name: vllm",
    "vllm==",
    "vllm-0",
    "vllm  ",
];

fn automaton(with_version: bool) -> &'static AhoCorasick {
    static RESULTS: OnceLock<AhoCorasick> = OnceLock::new();
    static ALL: OnceLock<AhoCorasick> = OnceLock::new();
    let build = |needles: Vec<&str>| {
        // A full DFA: a few KiB of tables, one transition per byte.
        AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .kind(Some(AhoCorasickKind::DFA))
            .build(needles)
            .expect("prefilter automaton")
    };
    if with_version {
        ALL.get_or_init(|| {
            build(
                RESULT_NEEDLES
                    .iter()
                    .chain(VERSION_NEEDLES)
                    .copied()
                    .collect(),
            )
        })
    } else {
        RESULTS.get_or_init(|| build(RESULT_NEEDLES.to_vec()))
    }
}

/// True when the raw line may matter outside a result block. `version` adds the needles
/// of version lines (until a version is known for sure).
#[inline]
pub(crate) fn interesting(raw: &[u8], version: bool) -> bool {
    automaton(version).is_match(raw)
}

/// True when a line may name the version.
pub(crate) fn version_hint(raw: &[u8]) -> bool {
    static A: OnceLock<AhoCorasick> = OnceLock::new();
    A.get_or_init(|| {
        AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(VERSION_NEEDLES)
            .expect("version automaton")
    })
    .is_match(raw)
}

/// The server's periodic stats line (`Avg prompt throughput: 0.0 tokens/s, …`): frequent,
/// mentions throughput, and is never a result.
#[inline]
pub(crate) fn server_stats(raw: &[u8]) -> bool {
    static F: OnceLock<memchr::memmem::Finder<'static>> = OnceLock::new();
    F.get_or_init(|| memchr::memmem::Finder::new("Avg prompt throughput:"))
        .find(raw)
        .is_some()
}

/// True for a short line starting with a digit: a bare `print(vllm.__version__)` output.
#[inline]
pub(crate) fn bare_version_candidate(raw: &[u8]) -> bool {
    raw.len() <= 80 && {
        let t = raw.trim_ascii();
        t.len() >= 5 && t.len() <= 64 && t[0].is_ascii_digit() && t.contains(&b'.')
    }
}
