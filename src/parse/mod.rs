//! TEMPORARY minimal parser (replaced by the parser issue's module; same API).
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Serving,
    Throughput,
    Latency,
    PrefixCaching,
    Unknown,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MetricUpdate {
    pub key: String,
    pub value: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ParseResult {
    pub kind: Kind,
    pub vllm_version: Option<String>,
    pub metrics: BTreeMap<String, f64>,
    pub truncated: bool,
    pub history: Vec<BTreeMap<String, f64>>,
}

impl ParseResult {
    pub fn has_result(&self) -> bool {
        !self.metrics.is_empty()
    }
    pub fn successful_requests(&self) -> Option<f64> {
        self.metrics.get("successful_requests").copied()
    }
    pub fn headline(&self) -> Option<(&'static str, f64)> {
        for k in [
            "output_throughput_tok_s",
            "throughput_total_tok_s",
            "latency_avg_s",
            "elapsed_s",
        ] {
            if let Some(v) = self.metrics.get(k) {
                return Some((k, *v));
            }
        }
        None
    }
}

#[derive(Default)]
pub struct StreamParser {
    metrics: BTreeMap<String, f64>,
    kind: Option<Kind>,
    version: Option<String>,
}

impl StreamParser {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn feed_line(&mut self, line: &[u8]) -> Vec<MetricUpdate> {
        let line = String::from_utf8_lossy(line);
        let line = line.trim();
        let mut out = Vec::new();
        if let Some((label, value)) = line.split_once(':') {
            let key = match label.trim() {
                "Successful requests" => Some("successful_requests"),
                "Output token throughput (tok/s)" => Some("output_throughput_tok_s"),
                "Mean TTFT (ms)" => Some("ttft_mean_ms"),
                _ => None,
            };
            if let (Some(k), Ok(v)) = (key, value.trim().parse::<f64>()) {
                self.kind = Some(Kind::Serving);
                self.metrics.insert(k.into(), v);
                out.push(MetricUpdate {
                    key: k.into(),
                    value: v,
                });
            }
        }
        out
    }
    pub fn current(&self) -> &BTreeMap<String, f64> {
        &self.metrics
    }
    pub fn vllm_version(&self) -> Option<&str> {
        self.version.as_deref()
    }
    pub fn finish(self) -> ParseResult {
        ParseResult {
            kind: self.kind.unwrap_or(Kind::Unknown),
            vllm_version: self.version,
            metrics: self.metrics,
            truncated: false,
            history: vec![],
        }
    }
}

pub fn detect_version(line: &str) -> Option<String> {
    let i = line.find("vLLM API server version ")?;
    Some(line[i + 24..].trim().to_string())
}

pub fn parse_bytes(input: &[u8]) -> ParseResult {
    let mut p = StreamParser::new();
    for line in input.split(|b| *b == b'\n') {
        p.feed_line(line);
    }
    p.finish()
}

pub mod cli {
    pub fn main(
        files: &[std::path::PathBuf],
        _json: bool,
        _out: &mut dyn std::io::Write,
        err: &mut dyn std::io::Write,
    ) -> i32 {
        let _ = writeln!(
            err,
            "parse: {} files: not built yet (issue #3)",
            files.len()
        );
        2
    }
}
