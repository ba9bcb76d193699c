//! The benchmark kind: one definition for the plan (what a command runs), the parser (what
//! an output turned out to be), the metrics (which numbers it prints) and the views.

use serde::{Deserialize, Serialize};
use std::fmt;

/// What kind of benchmark a command runs (from its script name or `vllm bench` subcommand),
/// or what a parsed output turned out to be. `Unknown` is only ever the parser's: a plan's
/// command whose kind cannot be told is refused when the plan is read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BenchKind {
    Serving,
    Throughput,
    Latency,
    PrefixCaching,
    #[default]
    Unknown,
}

impl BenchKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BenchKind::Serving => "serving",
            BenchKind::Throughput => "throughput",
            BenchKind::Latency => "latency",
            BenchKind::PrefixCaching => "prefix_caching",
            BenchKind::Unknown => "unknown",
        }
    }
    /// Only the serving benchmark talks to an HTTP server; the others run vLLM in-process.
    pub(crate) fn needs_server(self) -> bool {
        self == BenchKind::Serving
    }
    /// The `vllm bench` subcommand that runs this kind, where one exists.
    pub(crate) fn cli_sub(self) -> Option<&'static str> {
        match self {
            BenchKind::Serving => Some("serve"),
            BenchKind::Throughput => Some("throughput"),
            BenchKind::Latency => Some("latency"),
            BenchKind::PrefixCaching | BenchKind::Unknown => None,
        }
    }
    /// How long one attempt of this kind typically takes on a real box, from container to
    /// result: a served benchmark 12–25 minutes, an offline one 6–15 (the middle of each).
    /// What the ETA leans on for a model nothing of which has run yet.
    pub(crate) fn typical_secs(self) -> u64 {
        match self {
            BenchKind::Serving => 1110,
            BenchKind::Throughput | BenchKind::Latency | BenchKind::PrefixCaching => 630,
            BenchKind::Unknown => 900,
        }
    }
    /// A kind named in a plan or a command; `unknown` is not one.
    pub fn parse(s: &str) -> Option<BenchKind> {
        match s {
            "serving" | "serve" => Some(BenchKind::Serving),
            "throughput" => Some(BenchKind::Throughput),
            "latency" => Some(BenchKind::Latency),
            "prefix_caching" => Some(BenchKind::PrefixCaching),
            _ => None,
        }
    }
}

impl fmt::Display for BenchKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
