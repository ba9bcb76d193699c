//! `nightshift bench parse`: the streaming parser over a large synthetic vLLM server log,
//! fed line by line as the engine feeds it and in chunks as `parse FILE` does, beside a
//! naive parser that tries every regex on every line, on the same bytes.
//!
//! The log is synthesised once as a 64 MiB slab of realistic lines (access lines, request
//! logs with long prompts, periodic stats lines that mention throughput, warnings, tqdm
//! `\r` bars, ANSI process tags) with result blocks sprinkled in, and streamed repeatedly
//! in 64 KiB chunks until the requested size is reached, so memory stays flat.

use crate::parse::StreamParser;
use regex::Regex;
use std::io::Write;
use std::time::Instant;

const SLAB: usize = 64 << 20;
const CHUNK: usize = 64 << 10;

/// Small deterministic PRNG (xorshift64*), so the input is the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const WORDS: &[&str] = &[
    "the",
    "model",
    "of",
    "a",
    "request",
    "token",
    "write",
    "story",
    "about",
    "cache",
    "GPU",
    "summarise",
    "following",
    "text",
    "and",
    "explain",
    "why",
    "latency",
    "matters",
    "in",
];

fn serving_block(rng: &mut Rng, out: &mut Vec<u8>) {
    let n = 100 + rng.below(900);
    let dur = 20.0 + rng.below(10_000) as f64 / 100.0;
    out.extend_from_slice(b"Traffic request rate: inf\nBurstiness factor: 1.0 (Poisson process)\nMaximum request concurrency: 64\n");
    out.extend_from_slice(
        b"100%|\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88| 1000/1000 [00:48<00:00, 20.4it/s]\n",
    );
    out.extend_from_slice(b"============ Serving Benchmark Result ============\n");
    let lines = [
        ("Successful requests:", format!("{n}")),
        ("Failed requests:", "0".into()),
        ("Benchmark duration (s):", format!("{dur:.2}")),
        ("Total input tokens:", format!("{}", n * 1024)),
        ("Total generated tokens:", format!("{}", n * 128)),
        (
            "Request throughput (req/s):",
            format!("{:.2}", n as f64 / dur),
        ),
        (
            "Output token throughput (tok/s):",
            format!("{:.2}", n as f64 * 128.0 / dur),
        ),
        (
            "Total token throughput (tok/s):",
            format!("{:.2}", n as f64 * 1152.0 / dur),
        ),
    ];
    for (l, v) in lines {
        out.extend_from_slice(format!("{l:<40} {v:<10}\n").as_bytes());
    }
    for (title, m) in [
        ("Time to First Token", "TTFT"),
        ("Time per Output Token (excl. 1st token)", "TPOT"),
        ("Inter-token Latency", "ITL"),
    ] {
        out.extend_from_slice(format!("{title:-^50}\n").as_bytes());
        for s in ["Mean", "Median", "P99"] {
            let l = format!("{s} {m} (ms):");
            let v = format!("{:.2}", rng.below(100_000) as f64 / 100.0);
            out.extend_from_slice(format!("{l:<40} {v:<10}\n").as_bytes());
        }
    }
    out.extend_from_slice(format!("{}\n", "=".repeat(50)).as_bytes());
}

#[cfg(test)]
/// Synthesises about `size` bytes of server log; returns the bytes and the number of
/// serving result blocks in them. Without `request_logs` the server ran with
/// `--disable-log-requests` (short lines only: access, stats, engine lines).
pub(crate) fn synth(size: usize, seed: u64) -> (Vec<u8>, usize) {
    synth_with(size, seed, true)
}

fn synth_with(size: usize, seed: u64, request_logs: bool) -> (Vec<u8>, usize) {
    let mut rng = Rng(seed | 1);
    let mut out = Vec::with_capacity(size + 4096);
    let mut blocks = 0;
    let mut i = 0u64;
    out.extend_from_slice(b"(APIServer pid=188747) INFO 10-21 09:11:24 [api_server.py:1839] vLLM API server version 0.11.0\n");
    while out.len() < size {
        i += 1;
        let ts = format!(
            "{:02}-{:02} {:02}:{:02}:{:02}",
            1 + i % 12,
            1 + i % 28,
            i % 24,
            i % 60,
            (i * 7) % 60
        );
        let tag: &[u8] = if i % 3 == 0 {
            b"\x1b[1;36m(APIServer pid=188747)\x1b[0;0m "
        } else {
            b"(APIServer pid=188747) "
        };
        let mut r = rng.below(1000);
        if !request_logs && (450..600).contains(&r) {
            r = rng.below(450);
        }
        if r < 450 {
            out.extend_from_slice(tag);
            out.extend_from_slice(
                format!(
                    "INFO:     127.0.0.1:{} - \"POST /v1/completions HTTP/1.1\" 200 OK\n",
                    40000 + rng.below(20000)
                )
                .as_bytes(),
            );
        } else if r < 600 {
            out.extend_from_slice(tag);
            out.extend_from_slice(
                format!(
                    "INFO {ts} [logger.py:43] Received request cmpl-{:016x}-0: prompt: '",
                    rng.next()
                )
                .as_bytes(),
            );
            let words = 20 + rng.below(if r < 452 { 20_000 } else { 400 });
            for _ in 0..words {
                out.extend_from_slice(WORDS[rng.below(WORDS.len() as u64) as usize].as_bytes());
                out.push(b' ');
            }
            out.extend_from_slice(b"', params: SamplingParams(n=1, presence_penalty=0.0, temperature=0.0, top_p=1.0, max_tokens=128), prompt_token_ids: None, lora_request: None.\n");
        } else if r < 800 {
            out.extend_from_slice(tag);
            out.extend_from_slice(
                format!(
                    "INFO {ts} [async_llm.py:270] Added request cmpl-{:016x}-0.\n",
                    rng.next()
                )
                .as_bytes(),
            );
        } else if r < 960 {
            out.extend_from_slice(tag);
            out.extend_from_slice(
                format!(
                    "INFO {ts} [async_llm.py:431] Finished request cmpl-{:016x}-0.\n",
                    rng.next()
                )
                .as_bytes(),
            );
        } else if r < 985 {
            out.extend_from_slice(tag);
            out.extend_from_slice(format!(
                "INFO {ts} [loggers.py:123] Engine 000: Avg prompt throughput: {:.1} tokens/s, Avg generation throughput: {:.1} tokens/s, Running: {} reqs, Waiting: 0 reqs, GPU KV cache usage: {:.1}%, Prefix cache hit rate: {:.1}%\n",
                rng.below(100_000) as f64 / 10.0, rng.below(50_000) as f64 / 10.0, rng.below(256), rng.below(1000) as f64 / 10.0, rng.below(1000) as f64 / 10.0
            ).as_bytes());
        } else if r < 995 {
            out.extend_from_slice(tag);
            out.extend_from_slice(format!("WARNING {ts} [protocol.py:88] The following fields were present in the request but ignored: {{'ignore_eos'}}\n").as_bytes());
        } else if r < 999 {
            for p in [10, 40, 70, 100] {
                out.extend_from_slice(
                    format!("Processed prompts: {p:>3}%|####| {p}/100 [00:01<00:00, 50.0it/s]\r")
                        .as_bytes(),
                );
            }
            out.push(b'\n');
        } else {
            serving_block(&mut rng, &mut out);
            blocks += 1;
        }
    }
    (out, blocks)
}

/// The comparison: every pattern a careless parser would keep, tried on every line.
struct Naive {
    res: Vec<Regex>,
    header: usize,
}

impl Naive {
    fn new() -> Self {
        let pats = [
            r"=+ Serving Benchmark Result =+",
            r"Successful requests:\s+(\d+)",
            r"Failed requests:\s+(\d+)",
            r"Maximum request concurrency:\s+(\d+)",
            r"Request rate configured \(RPS\):\s+([\d.]+)",
            r"Benchmark duration \(s\):\s+([\d.]+)",
            r"Total input tokens:\s+(\d+)",
            r"Total generated tokens:\s+(\d+)",
            r"Request throughput \(req/s\):\s+([\d.]+)",
            r"Request goodput \(req/s\):\s+([\d.]+)",
            r"Input token throughput \(tok/s\):\s+([\d.]+)",
            r"Output token throughput \(tok/s\):\s+([\d.]+)",
            r"Peak output token throughput \(tok/s\):\s+([\d.]+)",
            r"Peak concurrent requests:\s+([\d.]+)",
            r"(?i)Total token throughput \(tok/s\):\s+([\d.]+)",
            r"(Mean|Median|P\d+(?:\.\d+)?) (TTFT|TPOT|ITL|E2EL) \(ms\):\s+([\d.]+)",
            r"Throughput: ([\d.]+) requests/s, ([\d.]+) (?:total )?tokens/s(?:, ([\d.]+) output tokens/s)?",
            r"Total num prompt tokens:\s+(\d+)",
            r"Total num output tokens:\s+(\d+)",
            r"Avg latency: ([\d.e-]+) seconds",
            r"(\d+)% percentile latency: ([\d.e-]+) seconds",
            r"cost time ([\d.e-]+)",
            r"est\. speed input: ([\d.]+) toks/s, output: ([\d.]+) toks/s",
            r"vLLM API server version (\S+)",
            r"LLM engine \(v(\S+)\)",
            r"version (\d+\.\d+\.\S+)",
            r"Benchmark duration: ([\d.]+) s",
            r"Request throughput: ([\d.]+) requests/s",
            r"Burstiness factor: ([\d.]+)",
            r"Traffic request rate: (\S+)",
            r"Acceptance rate \(%\):\s+([\d.]+)",
            r"Concurrency:\s+([\d.]+)",
        ];
        Naive {
            res: pats
                .iter()
                .map(|p| Regex::new(p).expect("naive regex"))
                .collect(),
            header: 0,
        }
    }

    /// Returns how many header lines it saw.
    fn run(&self, input: &[u8], partial: &mut Vec<u8>) -> usize {
        let mut headers = 0;
        let mut rest = input;
        while let Some(nl) = memchr::memchr(b'\n', rest) {
            let line: &[u8] = if partial.is_empty() {
                &rest[..nl]
            } else {
                partial.extend_from_slice(&rest[..nl]);
                partial
            };
            let text = String::from_utf8_lossy(line);
            let text = text.replace('\r', "\n");
            for (i, re) in self.res.iter().enumerate() {
                if let Some(c) = re.captures(&text) {
                    if i == self.header {
                        headers += 1;
                    }
                    std::hint::black_box(c.get(1));
                }
            }
            partial.clear();
            rest = &rest[nl + 1..];
        }
        partial.extend_from_slice(rest);
        headers
    }
}

/// Times both parsers over `size_mb` MiB of each of two synthetic logs (with and
/// without request logging) and prints MB/s and lines/s.
pub fn run(size_mb: usize, out: &mut dyn Write) -> anyhow::Result<()> {
    for request_logs in [true, false] {
        writeln!(
            out,
            "== server log {} request logging ==",
            if request_logs { "with" } else { "without" }
        )?;
        run_one(size_mb, request_logs, out)?;
    }
    Ok(())
}

fn run_one(size_mb: usize, request_logs: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    let total = size_mb.max(1) << 20;
    let t = Instant::now();
    let (slab, slab_blocks) = synth_with(SLAB.min(total), 0x5eed, request_logs);
    let slab_lines = memchr::memchr_iter(b'\n', &slab).count();
    writeln!(
        out,
        "synthesised a {:.1} MiB slab ({} lines, {} result blocks) in {:.2?}; streaming it to {} MiB",
        slab.len() as f64 / 1048576.0,
        slab_lines,
        slab_blocks,
        t.elapsed(),
        size_mb
    )?;
    let reps = total.div_ceil(slab.len());
    let bytes = (reps * slab.len()) as f64;
    let lines = (reps * slab_lines) as f64;

    // The engine's path: the runtime hands over one line at a time (without its `\n`)
    // and the engine calls `feed_line` on each. Splitting is the runtime's work, so it is
    // done before the clock starts.
    let line_list: Vec<&[u8]> = slab.split(|&b| b == b'\n').collect();
    let t = Instant::now();
    let mut p = StreamParser::new();
    let mut line_updates = 0usize;
    for _ in 0..reps {
        for l in &line_list {
            line_updates += p.feed_line(l).len();
        }
    }
    let lr = p.finish();
    let by_line = t.elapsed().as_secs_f64();
    let line_found = lr.history.len() + usize::from(lr.has_result());

    // Chunks as a pipe delivers them (the `parse FILE` path).
    let t = Instant::now();
    let mut p = StreamParser::new();
    let mut updates = 0usize;
    for _ in 0..reps {
        for chunk in slab.chunks(CHUNK) {
            updates += p.feed(chunk).len();
        }
    }
    let r = p.finish();
    let fast = t.elapsed().as_secs_f64();
    let found = r.history.len() + usize::from(r.has_result());
    if line_found != found || line_updates != updates {
        anyhow::bail!(
            "line by line found {line_found} blocks ({line_updates} updates), chunks {found} ({updates})"
        );
    }

    if std::env::var_os("NIGHTSHIFT_BENCH_SKIP_NAIVE").is_some() {
        writeln!(
            out,
            "line by line (engine): {:.2} s, {:.1} MB/s\nchunks: {:.2} s, {:.1} MB/s",
            by_line,
            bytes / 1e6 / by_line,
            fast,
            bytes / 1e6 / fast
        )?;
        return Ok(());
    }
    let t = Instant::now();
    let naive = Naive::new();
    let mut partial = Vec::new();
    let mut naive_found = 0;
    for _ in 0..reps {
        for chunk in slab.chunks(CHUNK) {
            naive_found += naive.run(chunk, &mut partial);
        }
    }
    let slow = t.elapsed().as_secs_f64();

    let mb = bytes / 1e6;
    writeln!(
        out,
        "input: {:.0} MB, {:.0} lines, {} result blocks",
        mb,
        lines,
        reps * slab_blocks
    )?;
    writeln!(
        out,
        "line by line (engine path): {:>8.2} s  {:>8.1} MB/s  {:>12.0} lines/s",
        by_line,
        mb / by_line,
        lines / by_line,
    )?;
    writeln!(
        out,
        "chunks (parse FILE path):   {:>8.2} s  {:>8.1} MB/s  {:>12.0} lines/s  ({} blocks, {} metric updates, last kind {})",
        fast,
        mb / fast,
        lines / fast,
        found,
        updates,
        r.kind
    )?;
    writeln!(
        out,
        "naive, every regex per line: {:>6.2} s  {:>8.1} MB/s  {:>12.0} lines/s  ({} headers seen)",
        slow,
        mb / slow,
        lines / slow,
        naive_found
    )?;
    writeln!(
        out,
        "speed-up over naive: {:.1}x (line by line), {:.1}x (chunks)",
        slow / by_line,
        slow / fast
    )?;
    if found != reps * slab_blocks {
        anyhow::bail!(
            "streaming parser found {found} blocks, expected {}",
            reps * slab_blocks
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_log_parses_every_block() {
        let (log, blocks) = synth(4 << 20, 7);
        assert!(blocks > 0);
        let r = crate::parse::parse_bytes(&log);
        assert_eq!(r.history.len() + 1, blocks);
        assert_eq!(r.kind, crate::parse::Kind::Serving);
        assert!(!r.truncated);
        let mut out = Vec::new();
        run(2, &mut out).unwrap();
    }
}
