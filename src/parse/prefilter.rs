//! The cheap test every line passes before any regex runs. Almost every line of a night's
//! logs is server noise (access lines, request logs, stats); only lines containing one of
//! these fragments can start or carry a result outside a block, or name the vLLM version.

use aho_corasick::{AhoCorasick, AhoCorasickKind};
use std::sync::OnceLock;

/// Fragments of result lines, matched case-sensitively by a SIMD (Teddy) searcher. Each
/// drops the first letter of its word so `Total`/`total`, `Latency`/`latency` both hit;
/// abbreviations are listed in both cases. Teddy checks every place where a fragment's
/// first three bytes occur, so no fragment starts with bytes every server line has
/// (`ver` of `APIServer`, `equ` of `request`, `ile` of `file`): those cost a check per line. Every label that can open a block or carry a
/// result outside one contains one of these (section titles such as `Time to First
/// Token` only occur inside a block, where every line is read). At most 32 fragments keep
/// the searcher on its fastest (slim) path.
pub(crate) const RESULT_NEEDLES: &[&str] = &[
    "enchmark",      // `Benchmark Result` header, `Benchmark duration`
    "hroughput",     // `Throughput:`, `Request throughput`, `… token throughput`
    "vg latency",    // latency benchmark `Avg latency`
    "ntile latency", // `N% percentile latency`
    "rage latency",  // pre-2024 serving `Average latency`
    "uccessful",     // `Successful requests`
    "otal time",     // pre-2024 `Total time`
    "otal Time",
    "cost time", // prefix caching `cost time`
    "Cost time",
    "st. speed", // `Processed prompts` bar speeds
    "TTFT",
    "ttft",
    "TPOT",
    "tpot",
    "ITL",
    "itl",
    "E2E",
    "e2e",
    "ueue time",
    "ueue Time",
    "otal num",   // `Total num prompt tokens`
    "oncurrency", // `Maximum request concurrency`
    " rate:",     // `Traffic request rate:`, `Request rate:`
    " Rate:",
    "urstiness",
];

/// Fragments of lines that may name the vLLM version.
pub(crate) const VERSION_NEEDLES: &[&str] = &[
    "ersion",       // `version 0.20.0`, `Version: 0.6.3`, `__version__`
    "LM engine (v", // `Initializing an LLM engine (v0.5.1)`
    "ame: vllm",
    "vllm==",
    "vllm-0",
    "vllm  ",
];

/// A SIMD literal searcher where the CPU has one, else a DFA.
enum Finder {
    Packed(aho_corasick::packed::Searcher),
    Dfa(AhoCorasick),
}

impl Finder {
    fn new(needles: &[&str]) -> Self {
        if let Some(s) = aho_corasick::packed::Config::new()
            .builder()
            .extend(needles)
            .build()
        {
            return Finder::Packed(s);
        }
        Finder::Dfa(
            AhoCorasick::builder()
                .kind(Some(AhoCorasickKind::DFA))
                .build(needles)
                .expect("prefilter automaton"),
        )
    }

    #[inline]
    fn is_match(&self, hay: &[u8]) -> bool {
        match self {
            Finder::Packed(s) => s.find(hay).is_some(),
            Finder::Dfa(a) => a.is_match(hay),
        }
    }
}

fn finder(with_version: bool) -> &'static Finder {
    static RESULTS: OnceLock<Finder> = OnceLock::new();
    static ALL: OnceLock<Finder> = OnceLock::new();
    if with_version {
        ALL.get_or_init(|| {
            let all: Vec<&str> = RESULT_NEEDLES
                .iter()
                .chain(VERSION_NEEDLES)
                .copied()
                .collect();
            Finder::new(&all)
        })
    } else {
        RESULTS.get_or_init(|| Finder::new(RESULT_NEEDLES))
    }
}

/// True when the raw line may matter outside a result block. `version` adds the needles
/// of version lines (until a version is known for sure).
#[inline]
pub(crate) fn interesting(raw: &[u8], version: bool) -> bool {
    finder(version).is_match(raw)
}

/// True when a line may name the version.
pub(crate) fn version_hint(raw: &[u8]) -> bool {
    static F: OnceLock<Finder> = OnceLock::new();
    F.get_or_init(|| Finder::new(VERSION_NEEDLES)).is_match(raw)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_starter_label_passes() {
        for line in [
            "============ Serving Benchmark Result ============",
            "Successful requests: 1000",
            "Total time: 216.81 s",
            "Throughput: 1.0 requests/s, 2.0 tokens/s",
            "Avg latency: 1.7 seconds",
            "99% percentile latency: 1.7 seconds",
            "Average latency: 7.96 s",
            "cost time 12.9",
            "Mean TTFT (ms): 1",
            "P99 TPOT (ms): 1",
            "Median ITL (ms): 1",
            "Mean E2EL (ms): 1",
            "Mean E2E Latency (ms): 1",
            "Mean Client Queue Time (ms): 1",
            "Total num prompt tokens:  1",
            "Maximum request concurrency: 64",
            "Traffic request rate: 20.0",
            "Burstiness factor: 1.0 (Poisson process)",
        ] {
            assert!(interesting(line.as_bytes(), false), "{line}");
        }
        assert!(!interesting(
            b"INFO:     127.0.0.1:50312 - \"POST /v1/completions HTTP/1.1\" 200 OK",
            true
        ));
        assert!(interesting(b"vLLM API server version 0.5.1", true));
        assert!(interesting(b"Initializing an LLM engine (v0.5.1)", true));
    }
}
