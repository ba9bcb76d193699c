//! sglang's `bench_serving` block. It copies vLLM's layout (same header, same 40-column
//! labels) and adds a few lines of its own; operators run it against vLLM servers too.
//! Its `Mean E2E Latency (ms)` wording is handled with the other metric names.

use super::Scope;

/// sglang-only labels (lower-case, unit parenthesis removed).
const TABLE: &[(&str, &str, Scope)] = &[
    // sglang's long-lived typo, and its spelled-out form.
    (
        "max reqeuest concurrency",
        "max_concurrency",
        Scope::Context,
    ),
    (
        "total generated tokens (retokenized)",
        "total_output_tokens_retokenized",
        Scope::Block,
    ),
    // Mean number of requests in flight over the run.
    ("concurrency", "concurrency", Scope::Block),
    // Speculative decoding: same quantity as vLLM's `Acceptance length:`.
    (
        "accept length",
        "spec_decode_acceptance_length",
        Scope::Block,
    ),
    (
        "last generation throughput",
        "last_generation_throughput_tok_s",
        Scope::Block,
    ),
];

pub(crate) fn lookup(label: &str) -> Option<(&'static str, Scope)> {
    TABLE
        .iter()
        .find(|(l, _, _)| *l == label)
        .map(|(_, k, s)| (*k, *s))
}
