//! The cheap test every line passes before any regex runs. Almost every line of a night's
//! logs is server noise (access lines, request logs, stats); only lines containing one of
//! these words can start or carry a result outside a block, or name the vLLM version.

use aho_corasick::AhoCorasick;
use std::sync::OnceLock;

/// Lower-case needles, matched ASCII-case-insensitively anywhere in the raw line.
pub(crate) const NEEDLES: &[&str] = &[
    "benchmark result",
    "throughput",
    "latency",
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
    "version",
    "llm engine (v",
    "name: vllm",
    "vllm==",
    "vllm-0",
    "vllm  ",
];

fn automaton() -> &'static AhoCorasick {
    static A: OnceLock<AhoCorasick> = OnceLock::new();
    A.get_or_init(|| {
        AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(NEEDLES)
            .expect("prefilter automaton")
    })
}

/// True when the raw line may matter outside a result block.
#[inline]
pub(crate) fn interesting(raw: &[u8]) -> bool {
    automaton().is_match(raw)
}

/// True for a short line starting with a digit: a bare `print(vllm.__version__)` output.
#[inline]
pub(crate) fn bare_version_candidate(raw: &[u8]) -> bool {
    raw.len() <= 80 && {
        let t = raw.trim_ascii();
        t.len() >= 5 && t.len() <= 64 && t[0].is_ascii_digit() && t.contains(&b'.')
    }
}
