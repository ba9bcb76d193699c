//! Line normalisation: one raw output line → the text a person would read.
//!
//! Benchmark output reaches us through docker logs, compose, `tee`, GitHub comments and
//! terminals, so the same result line can arrive wrapped in ANSI colour, behind a
//! timestamp, a `vllm-1  | ` compose column, a vLLM logger header, a process tag, a
//! markdown quote, or overwritten by `\r` progress updates. Everything here undoes that
//! wrapping so the label matchers only ever see `Label: value`.

use regex::Regex;
use std::sync::OnceLock;

/// A cleaned segment of a line.
#[derive(Debug, Default, Clone)]
pub(crate) struct Clean {
    /// Text without ANSI codes, control characters, markdown emphasis and known prefixes,
    /// trimmed at both ends.
    pub text: String,
    /// A logger header (`INFO 01-07 21:59:25 [x.py:1] `, `INFO:     `) was removed: the
    /// line is a log record, never a benchmark `print()`.
    pub log_record: bool,
}

/// Splits a raw line on `\r` (CRLF endings, tqdm overwrites, multi-line log records) and
/// yields the segments that hold something other than whitespace. Each segment was
/// printed, so each is treated as a line of its own.
pub(crate) fn segments(line: &[u8]) -> impl Iterator<Item = &[u8]> {
    line.split(|&b| b == b'\r')
        .filter(|s| s.iter().any(|b| !b.is_ascii_whitespace()))
}

/// Removes ANSI escape sequences and control characters; tabs become spaces.
fn strip_controls(raw: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let mut i = 0;
    while i < raw.len() {
        let b = raw[i];
        if b == 0x1b {
            i += 1;
            match raw.get(i) {
                Some(b'[') => {
                    // CSI: parameters then one final byte in 0x40..=0x7e.
                    i += 1;
                    while i < raw.len() && !(0x40..=0x7e).contains(&raw[i]) {
                        i += 1;
                    }
                    i += 1;
                }
                Some(b']') => {
                    // OSC: up to BEL or ESC '\'.
                    while i < raw.len() && raw[i] != 0x07 && raw[i] != 0x1b {
                        i += 1;
                    }
                    i += 1;
                }
                Some(_) => i += 1,
                None => {}
            }
            continue;
        }
        if b == b'\t' {
            out.push(b' ');
        } else if b >= 0x20 && b != 0x7f {
            out.push(b);
        }
        i += 1;
    }
}

struct Prefix {
    re: Regex,
    log_record: bool,
}

fn prefixes() -> &'static [Prefix] {
    static P: OnceLock<Vec<Prefix>> = OnceLock::new();
    P.get_or_init(|| {
        let mk = |re: &str, log_record: bool| Prefix {
            re: Regex::new(re).expect("prefix regex"),
            log_record,
        };
        vec![
            // vLLM logger header: `INFO 07-08 20:49:31 api_server.py:206] ` (≤v0.7.3) and
            // `INFO 04-25 07:45:43 [api_server.py:1043] ` (v0.8+, DEBUG paths with slashes).
            mk(
                r"^(?i:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+\d{1,4}-\d{2}(?:-\d{2})?\s+\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\s+\[?[^\s\]]*:\d+\]\s?",
                true,
            ),
            // uvicorn / python logging level column: `INFO:     `.
            mk(r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+", true),
            // Process tags: `(APIServer pid=1) `, `(VllmWorker TP0 pid=3) `, Ray `, ip=…`.
            mk(r"^\([^()]*pid=\d+[^()]*\)\s*", false),
            // docker logs --timestamps / ISO timestamps, optionally bracketed.
            mk(
                r"^\[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]?:?\s*",
                false,
            ),
            // Bare clock times: `21:59:25 `, `[21:59:25.123] `.
            mk(r"^\[?\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\]?\s+", false),
            // docker compose column: `vllm  | `, `bench-1  | `.
            mk(r"^[A-Za-z0-9_.\-]+\s*\|\s", false),
            // markdown quotes/headings, shell comments, list bullets.
            mk(r"^(?:[#>]+\s*|[-+]\s+)", false),
        ]
    })
}

/// Cleans one `\r`-free segment.
pub(crate) fn clean(seg: &[u8]) -> Clean {
    let mut bytes = Vec::with_capacity(seg.len());
    strip_controls(seg, &mut bytes);
    // Markdown emphasis and code spans carry no meaning in benchmark output.
    if bytes.iter().any(|&b| b == b'*' || b == b'`') {
        bytes.retain(|&b| b != b'*' && b != b'`');
    }
    let mut text = String::from_utf8_lossy(&bytes);
    // Text pasted from web pages and editors: byte-order marks and zero-width spaces.
    if text.contains(['\u{feff}', '\u{200b}']) {
        text = text.replace(['\u{feff}', '\u{200b}'], "").into();
    }
    let mut s: &str = text.trim();
    let mut log_record = false;
    // Prefixes stack (`vllm | 2024-… (APIServer pid=1) INFO …] `), so peel until none fits.
    'outer: for _ in 0..8 {
        for p in prefixes() {
            if let Some(m) = p.re.find(s) {
                if m.end() > 0 {
                    log_record |= p.log_record;
                    s = s[m.end()..].trim_start();
                    continue 'outer;
                }
            }
        }
        break;
    }
    Clean {
        text: s.trim_end().to_string(),
        log_record,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_stacked_prefixes_and_ansi() {
        let raw = b"vllm-1  | 2024-07-08T20:49:31.123Z \x1b[1;36m(APIServer pid=1)\x1b[0;0m INFO 07-08 20:49:31 [api_server.py:206] Hello: 1";
        let c = clean(raw);
        assert_eq!(c.text, "Hello: 1");
        assert!(c.log_record);
    }

    #[test]
    fn keeps_plain_lines_and_strips_markdown() {
        let c = clean(b"> # Total generated tokens:   **38614**   ");
        assert_eq!(c.text, "Total generated tokens:   38614");
        assert!(!c.log_record);
    }

    #[test]
    fn drops_bom_and_zero_width_spaces() {
        let c = clean("\u{feff}Successful requests:\u{200b}  10\u{a0}".as_bytes());
        assert_eq!(c.text, "Successful requests:  10");
    }

    #[test]
    fn segments_skip_blank_and_split_cr() {
        let v: Vec<_> = segments(b" 10%|#\r 50%|##\r\rDone: 1\r").collect();
        assert_eq!(v, vec![&b" 10%|#"[..], &b" 50%|##"[..], &b"Done: 1"[..]]);
    }
}
