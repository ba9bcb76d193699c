//! Benchmark-output parser: one key schema with units in the key names, for every vLLM
//! era, fed line by line while a container prints.
//!
//! The [`StreamParser`] keeps a small state machine: outside a result block only lines
//! passing a byte-level prefilter are examined; a `Serving Benchmark Result` header (or a
//! headerless era-A/pre-2024 label) opens a block whose lines are mapped label by label;
//! the closing `=====` line completes it; offline results (throughput, latency, prefix
//! caching) are single lines. The last complete block is the result, earlier ones are
//! history, and a block cut off before its end is reported as truncated.
//!
//! [`parse_bytes`] also reads result files (`--save-result` JSON or JSON Lines,
//! `--output-json`); the streaming parser reads printed text only.
//!
//! Measuring: `cargo run --release --example parse_bench -- 1024` (or `nightshift bench
//! parse`) prints MB/s and lines/s beside a naive every-regex-on-every-line parser. A long
//! property run: `NIGHTSHIFT_PROPTEST_CASES=250000 nice -n 19 cargo test --test
//! parse_props -- --test-threads 1`.

mod json;
mod label;
mod line;
mod offline;
mod prefilter;
mod prefix;
mod serving;
mod sglang;
mod version;

pub use version::detect_version;

use offline::Offline;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::BTreeMap;
use version::Strength;

/// Where a key may be accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Anywhere: this label opens a headerless block (v0.3.3, pre-2024, cut-off logs).
    Starter,
    /// Printed before the block as run configuration (`Maximum request concurrency: 64`).
    Context,
    /// Only inside a block: the label is too generic to trust elsewhere (`Drafts:`).
    Block,
}

/// Which benchmark printed the result (one definition with the plan's, [`BenchKind`]).
pub use crate::kind::BenchKind as Kind;

/// A value as soon as it is known (the TUI shows it live).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricUpdate {
    pub key: String,
    pub value: f64,
}

/// What a whole output amounted to.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ParseResult {
    pub kind: Kind,
    pub vllm_version: Option<String>,
    /// The result: the last complete block, or the truncated one if none completed.
    pub metrics: BTreeMap<String, f64>,
    /// The result block was cut off before its end.
    pub truncated: bool,
    /// Every other block, in print order.
    pub history: Vec<BTreeMap<String, f64>>,
}

impl ParseResult {
    pub fn has_result(&self) -> bool {
        self.kind != Kind::Unknown && !self.metrics.is_empty()
    }

    pub fn successful_requests(&self) -> Option<f64> {
        self.metrics.get("successful_requests").copied()
    }

    /// The one number a queue cell shows (the kind's headline, `crate::metric`).
    pub fn headline(&self) -> Option<(&'static str, f64)> {
        crate::metric::headline_keys(self.kind)
            .iter()
            .find_map(|k| self.metrics.get(*k).map(|v| (*k, *v)))
    }
}

/// How a block is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frame {
    /// Opened by a `===== … Benchmark Result =====` header; complete at the closing line.
    Header,
    /// Serving labels without a header (v0.3.3, pre-2024, or a log cut above the header).
    Implicit,
    /// A single-line offline result and the lines that extend it.
    Line,
}

#[derive(Debug, Clone)]
struct Block {
    kind: Kind,
    frame: Frame,
    metrics: BTreeMap<String, f64>,
    complete: bool,
    /// Consecutive lines inside a header block that were not block content.
    noise: u32,
    /// Some line had its unit in the label (v0.4+ layout).
    padded: bool,
    /// The prefix the header line carried (empty for other frames).
    learned: prefix::Learned,
}

/// A header block that sees this many foreign lines in a row was cut off.
const NOISE_LIMIT: u32 = 64;
/// Outside a block, lines longer than this (without `\r`) are only checked for a version.
const LONG_LINE: usize = 2048;
/// Lines longer than this are never results; their tail is skipped, not buffered.
const MAX_LINE: usize = 4 << 20;

/// Incremental parser; feed it lines or chunks as they are printed.
#[derive(Debug, Default)]
pub struct StreamParser {
    partial: Vec<u8>,
    skipping_long_line: bool,
    block: Option<Block>,
    done: Vec<Block>,
    /// Serving run configuration printed before the block.
    ctx: BTreeMap<&'static str, f64>,
    /// The latest `Processed prompts` bar speeds (input, output), for prefix caching.
    speeds: Option<(f64, f64)>,
    version: Option<(String, Strength)>,
    pip_name_vllm: bool,
    empty: BTreeMap<String, f64>,
}

impl StreamParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// One line without its `\n`; `\r` progress segments are handled here.
    pub fn feed_line(&mut self, line: &[u8]) -> Vec<MetricUpdate> {
        let mut out = Vec::new();
        self.line(line, &mut out);
        out
    }

    /// Arbitrary chunks; a partial last line is kept until its newline arrives.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<MetricUpdate> {
        let mut out = Vec::new();
        let mut rest = chunk;
        while let Some(nl) = memchr::memchr(b'\n', rest) {
            let (piece, tail) = (&rest[..nl], &rest[nl + 1..]);
            rest = tail;
            if self.skipping_long_line {
                self.skipping_long_line = false;
                continue;
            }
            if self.partial.is_empty() {
                self.line(piece, &mut out);
            } else {
                let mut whole = std::mem::take(&mut self.partial);
                whole.extend_from_slice(piece);
                self.line(&whole, &mut out);
                whole.clear();
                self.partial = whole;
            }
        }
        if !self.skipping_long_line {
            self.partial.extend_from_slice(rest);
            if self.partial.len() > MAX_LINE {
                self.partial.clear();
                self.skipping_long_line = true;
            }
        }
        out
    }

    /// The block being read (empty between blocks).
    pub fn current(&self) -> &BTreeMap<String, f64> {
        self.block.as_ref().map_or(&self.empty, |b| &b.metrics)
    }

    pub fn vllm_version(&self) -> Option<&str> {
        self.version.as_ref().map(|(v, _)| v.as_str())
    }

    pub fn finish(mut self) -> ParseResult {
        if !self.partial.is_empty() && !self.skipping_long_line {
            let last = std::mem::take(&mut self.partial);
            let mut sink = Vec::new();
            self.line(&last, &mut sink);
        }
        self.close();
        let blocks: Vec<Block> = self
            .done
            .into_iter()
            .filter(|b| !b.metrics.is_empty())
            .collect();
        // A framed block (header, or an offline result line) is stronger evidence than a
        // run of headerless labels, e.g. a markdown table repeating the numbers.
        let chosen = blocks
            .iter()
            .rposition(|b| b.complete && b.frame != Frame::Implicit)
            .or_else(|| blocks.iter().rposition(|b| b.complete))
            .or_else(|| blocks.len().checked_sub(1));
        let mut result = ParseResult {
            vllm_version: self.version.map(|(v, _)| v),
            ..ParseResult::default()
        };
        for (i, b) in blocks.into_iter().enumerate() {
            if Some(i) == chosen {
                result.kind = b.kind;
                result.truncated = !b.complete;
                result.metrics = b.metrics;
            } else {
                result.history.push(b.metrics);
            }
        }
        result
    }

    fn in_text_block(&self) -> bool {
        matches!(
            self.block,
            Some(Block {
                frame: Frame::Header | Frame::Implicit,
                ..
            })
        )
    }

    fn version_known(&self) -> bool {
        self.version
            .as_ref()
            .is_some_and(|(_, s)| *s == Strength::Strong)
    }

    /// Whether a raw line (or `\r` segment) outside a text block deserves a closer look.
    fn worth_a_look(&self, raw: &[u8]) -> bool {
        let want_version = !self.version_known();
        (prefilter::interesting(raw, want_version) && !prefilter::server_stats(raw))
            || (self.version.is_none() && prefilter::bare_version_candidate(raw))
    }

    fn line(&mut self, raw: &[u8], out: &mut Vec<MetricUpdate>) {
        if !self.in_text_block() {
            // Request logs with whole prompts are the bulk of a server log's bytes; no
            // result line is that long unless `\r` segments were glued onto it.
            if raw.len() > LONG_LINE && memchr::memchr(b'\r', raw).is_none() {
                if !self.version_known() && prefilter::version_hint(raw) {
                    let c = line::clean(raw);
                    self.note_version(&c.text);
                }
                return;
            }
            if !self.worth_a_look(raw) {
                return;
            }
        }
        for seg in line::segments(raw) {
            if !self.in_text_block() && !self.worth_a_look(seg) {
                continue;
            }
            let c = line::clean(seg);
            if !c.text.is_empty() {
                self.text(&c, out);
            }
        }
    }

    fn note_version(&mut self, text: &str) {
        if self
            .version
            .as_ref()
            .is_some_and(|(_, s)| *s == Strength::Strong)
        {
            return;
        }
        let lower_has = |needle: &str| {
            text.as_bytes()
                .windows(needle.len())
                .any(|w| w.eq_ignore_ascii_case(needle.as_bytes()))
        };
        if let Some(name) = text.strip_prefix("Name:") {
            self.pip_name_vllm = name.trim().eq_ignore_ascii_case("vllm");
            return;
        }
        if !(lower_has("version")
            || lower_has("vllm")
            || lower_has("llm engine (v")
            || text.starts_with(|c: char| c.is_ascii_digit()))
        {
            return;
        }
        let Some((v, strength)) = version::detect_clean(text) else {
            return;
        };
        let strength = match strength {
            Strength::PipField if self.pip_name_vllm => {
                self.pip_name_vllm = false;
                Strength::Strong
            }
            Strength::PipField => return,
            s => s,
        };
        if self.version.as_ref().is_none_or(|(_, s)| strength > *s) {
            self.version = Some((v, strength));
        }
    }

    fn text(&mut self, c: &line::Clean, out: &mut Vec<MetricUpdate>) {
        let text = c.text.as_str();
        self.note_version(text);
        if let Some(kind) = serving::header_kind(text) {
            self.close();
            self.open(kind, Frame::Header, out);
            let before = serving::split_frame(text, '=').0;
            if let Some(b) = self.block.as_mut() {
                b.learned = prefix::Learned::from_prefix(before, c.log_record);
            }
            return;
        }
        if let Some(frame) = self.block.as_ref().map(|b| b.frame) {
            if frame != Frame::Line && self.in_block(c, frame, out) {
                return;
            }
        }
        if let Some(off) = offline::match_line(text) {
            self.offline(off, out);
            return;
        }
        let Some(lv) = label::split(text) else { return };
        let Some(m) = serving::map(&lv, false) else {
            return;
        };
        match m.scope {
            Scope::Starter => {
                self.close();
                self.open(Kind::Serving, Frame::Implicit, out);
                self.set_mapped(m.key, m.value, lv.unit_in_label, out);
            }
            Scope::Context => {
                if let Some(k) = context_key(&m.key) {
                    self.ctx.insert(k, m.value);
                }
            }
            Scope::Block => {}
        }
    }

    /// Handles a line inside a header or implicit block. False when the line is not block
    /// content and the caller should treat it as outside text.
    fn in_block(&mut self, c: &line::Clean, frame: Frame, out: &mut Vec<MetricUpdate>) -> bool {
        let text = c.text.as_str();
        if serving::is_closing(text) {
            if let Some(b) = self.block.as_mut() {
                // A closing line without a header: the top of the block was cut off.
                b.complete = frame == Frame::Header;
            }
            self.close_as_is();
            return true;
        }
        if serving::is_section(text) {
            if let Some(b) = self.block.as_mut() {
                b.noise = 0;
            }
            return true;
        }
        if let Some(off) = offline::match_line(text) {
            if let (Offline::ServingThroughput(v), Frame::Implicit) = (&off, frame) {
                self.set_mapped(Cow::Borrowed("request_throughput_req_s"), *v, false, out);
                return true;
            }
            self.close();
            self.offline(off, out);
            return true;
        }
        // Behind the header's own prefix shape, the line is the label as printed; another
        // prefix (a server log interleaved) only gets known labels.
        let (body, generic) = match self.block.as_ref() {
            Some(b) if frame == Frame::Header => match b.learned.strip(text) {
                Some(body) => (body, c.log_record == b.learned.log_record),
                None => (text, false),
            },
            _ => (text, false),
        };
        if let Some(lv) = label::split(body) {
            if let Some(m) = serving::map(&lv, generic) {
                self.set_mapped(m.key, m.value, lv.unit_in_label, out);
                if let Some(b) = self.block.as_mut() {
                    b.noise = 0;
                }
                return true;
            }
        }
        match frame {
            Frame::Implicit => {
                self.close();
                false
            }
            _ => {
                let cut = self.block.as_mut().is_some_and(|b| {
                    b.noise += 1;
                    b.noise > NOISE_LIMIT
                });
                if cut {
                    self.close();
                }
                true
            }
        }
    }

    fn offline(&mut self, off: Offline, out: &mut Vec<MetricUpdate>) {
        let current = self.block.as_ref().map(|b| (b.kind, b.frame));
        match off {
            Offline::Throughput(items) => {
                self.close();
                self.open(Kind::Throughput, Frame::Line, out);
                for (k, v) in items {
                    self.set(k, v, out);
                }
                self.mark_complete();
            }
            Offline::ServingThroughput(v) => {
                self.close();
                self.open(Kind::Serving, Frame::Implicit, out);
                self.set("request_throughput_req_s", v, out);
            }
            Offline::TotalNum(k, v) => {
                if current == Some((Kind::Throughput, Frame::Line)) {
                    self.set(k, v, out);
                }
            }
            Offline::AvgLatency(v) => {
                self.close();
                self.open(Kind::Latency, Frame::Line, out);
                self.set("latency_avg_s", v, out);
                self.mark_complete();
            }
            Offline::Percentile(k, v) => {
                if current != Some((Kind::Latency, Frame::Line)) {
                    self.close();
                    self.open(Kind::Latency, Frame::Line, out);
                    self.mark_complete();
                }
                self.set(&k, v, out);
            }
            Offline::CostTime(v) => {
                self.close();
                self.open(Kind::PrefixCaching, Frame::Line, out);
                self.set("elapsed_s", v, out);
                if let Some((i, o)) = self.speeds.take() {
                    self.set("input_throughput_tok_s", i, out);
                    self.set("output_throughput_tok_s", o, out);
                }
                self.mark_complete();
            }
            Offline::Speeds(i, o) => self.speeds = Some((i, o)),
        }
    }

    fn open(&mut self, kind: Kind, frame: Frame, out: &mut Vec<MetricUpdate>) {
        self.block = Some(Block {
            kind,
            frame,
            metrics: BTreeMap::new(),
            complete: false,
            noise: 0,
            padded: false,
            learned: prefix::Learned::default(),
        });
        if kind == Kind::Serving {
            for (k, v) in std::mem::take(&mut self.ctx) {
                self.set(k, v, out);
            }
        }
    }

    fn mark_complete(&mut self) {
        if let Some(b) = self.block.as_mut() {
            b.complete = true;
        }
    }

    fn set_mapped(
        &mut self,
        key: Cow<'static, str>,
        value: f64,
        padded: bool,
        out: &mut Vec<MetricUpdate>,
    ) {
        let Some(b) = self.block.as_mut() else { return };
        b.padded |= padded;
        let key = match (b.kind, serving::as_throughput_key(&key)) {
            (Kind::Throughput, Some(k)) => Cow::Borrowed(k),
            _ => key,
        };
        self.set(&key, value, out);
    }

    fn set(&mut self, key: &str, value: f64, out: &mut Vec<MetricUpdate>) {
        let Some(b) = self.block.as_mut() else { return };
        b.metrics.insert(key.to_string(), value);
        out.push(MetricUpdate {
            key: key.to_string(),
            value,
        });
    }

    /// Ends the current block, judging whether it completed.
    fn close(&mut self) {
        if let Some(b) = self.block.as_mut() {
            if b.frame == Frame::Implicit {
                // Era A / pre-2024 blocks have no closing line: a run of ≥2 labels is the
                // whole block. With v0.4+ labels, the header above was lost: truncated.
                b.complete = !b.padded && b.metrics.len() >= 2;
            }
        }
        self.close_as_is();
    }

    fn close_as_is(&mut self) {
        let Some(b) = self.block.take() else { return };
        if b.kind == Kind::Serving {
            self.ctx.clear();
        }
        let stray = b.frame == Frame::Implicit && b.metrics.len() < 2;
        if !stray {
            self.done.push(b);
        }
    }
}

fn context_key(key: &str) -> Option<&'static str> {
    Some(match key {
        "max_concurrency" => "max_concurrency",
        "request_rate" => "request_rate",
        "burstiness" => "burstiness",
        _ => return None,
    })
}

/// Parses a whole output: a JSON result file (single object, JSON Lines, or PyTorch
/// benchmark records) or any text a benchmark or server printed.
pub fn parse_bytes(input: &[u8]) -> ParseResult {
    if let Some(r) = from_json(input) {
        return r;
    }
    let mut p = StreamParser::new();
    p.feed(input);
    p.finish()
}

/// The result of a JSON result file, if `input` is one.
pub(crate) fn from_json(input: &[u8]) -> Option<ParseResult> {
    let mut blocks = json::parse(input)?;
    let last = blocks.pop()?;
    Some(ParseResult {
        kind: last.kind,
        vllm_version: None,
        metrics: last.metrics,
        truncated: false,
        history: blocks.into_iter().map(|b| b.metrics).collect(),
    })
}
