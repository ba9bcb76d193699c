//! `nightshift parse FILE... [--json]`.
//!
//! Exit status: 0 when every file held a result, 1 when some did not, 2 when some file
//! could not be read (2 wins over 1).

use crate::parse::{from_json, ParseResult, StreamParser};
use std::io::{Read, Write};
use std::path::PathBuf;

/// A JSON result file is held whole to be parsed as JSON up to this size; beyond it, it
/// is read as printed text only (result files are kilobytes; a log that starts with `{`
/// must not be held whole).
const JSON_CAP: usize = 256 << 20;

/// [`crate::parse::parse_bytes`] over a reader, chunk by chunk: printed text goes through the
/// streaming parser as it is read (it skips over-long lines rather than holding them), so
/// memory stays bounded at any size; only what may be a JSON result file is kept whole.
pub(crate) fn parse_reader(r: &mut dyn Read) -> std::io::Result<ParseResult> {
    let mut text = StreamParser::new();
    // None: only whitespace so far; Some(json): the input from its first other byte, while
    // it may still be JSON.
    let mut json: Option<Vec<u8>> = None;
    let mut decided_text = false;
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        let n = match r.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let piece = &chunk[..n];
        text.feed(piece);
        if decided_text {
            continue;
        }
        match &mut json {
            Some(j) if j.len() + n > JSON_CAP => {
                json = None;
                decided_text = true;
            }
            Some(j) => j.extend_from_slice(piece),
            None => {
                if let Some(at) = piece.iter().position(|b| !b.is_ascii_whitespace()) {
                    // `{`, `[`, or a byte-order mark before them.
                    if matches!(piece[at], b'{' | b'[' | 0xef) {
                        json = Some(piece[at..].to_vec());
                    } else {
                        decided_text = true;
                    }
                }
            }
        }
    }
    if let Some(r) = json.as_deref().and_then(from_json) {
        return Ok(r);
    }
    Ok(text.finish())
}

/// Formats a metric value: integral values as integers, others in shortest float form.
fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 9.0e15 {
        format!("{}", v as i64)
    } else {
        serde_json::to_string(&v).unwrap_or_else(|_| "null".into())
    }
}

/// One `--json` line: `{"file","kind","vllm_version","metrics","truncated"}`.
pub(crate) fn json_line(file: &str, r: &ParseResult) -> String {
    let mut s = String::with_capacity(256);
    s.push_str("{\"file\":");
    s.push_str(&serde_json::to_string(file).unwrap_or_else(|_| "\"\"".into()));
    s.push_str(",\"kind\":\"");
    s.push_str(r.kind.as_str());
    s.push_str("\",\"vllm_version\":");
    match &r.vllm_version {
        Some(v) => s.push_str(&serde_json::to_string(v).unwrap_or_else(|_| "null".into())),
        None => s.push_str("null"),
    }
    s.push_str(",\"metrics\":{");
    for (i, (k, v)) in r.metrics.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&serde_json::to_string(k).unwrap_or_default());
        s.push(':');
        s.push_str(&number(*v));
    }
    s.push_str("},\"truncated\":");
    s.push_str(if r.truncated { "true" } else { "false" });
    s.push('}');
    s
}

fn table(file: &str, r: &ParseResult, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out, "{file}")?;
    writeln!(
        out,
        "  kind: {}   vllm: {}{}",
        r.kind,
        r.vllm_version.as_deref().unwrap_or("-"),
        if r.truncated { "   TRUNCATED" } else { "" }
    )?;
    if r.metrics.is_empty() {
        writeln!(out, "  no result found")?;
    }
    let width = r.metrics.keys().map(String::len).max().unwrap_or(0);
    for (k, v) in &r.metrics {
        writeln!(out, "  {k:<width$}  {:>14}", number(*v))?;
    }
    if !r.history.is_empty() {
        writeln!(out, "  ({} earlier block(s) in history)", r.history.len())?;
    }
    Ok(())
}

pub fn main(files: &[PathBuf], json: bool, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let mut code = 0;
    for (i, path) in files.iter().enumerate() {
        let name = path.display().to_string();
        let read = crate::cli::input::open_log(path)
            .map_err(|e| e.reason())
            .and_then(|mut f| parse_reader(&mut f).map_err(|e| e.to_string()));
        let r = match read {
            Ok(r) => r,
            Err(e) => {
                let _ = writeln!(err, "nightshift parse: {name}: {e}");
                code = 2;
                continue;
            }
        };
        if !r.has_result() && code == 0 {
            code = 1;
        }
        let written = if json {
            writeln!(out, "{}", json_line(&name, &r))
        } else {
            if i > 0 {
                let _ = writeln!(out);
            }
            table(&name, &r, out)
        };
        if let Err(e) = written {
            let _ = writeln!(err, "nightshift parse: writing output: {e}");
            return 2;
        }
    }
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Read in chunks, the result is the whole input's, JSON or text, whatever the chunk
    /// boundaries.
    #[test]
    fn reading_in_chunks_gives_the_whole_inputs_result() {
        struct Trickle<'a>(&'a [u8], usize);
        impl Read for Trickle<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = self.1.min(self.0.len()).min(buf.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let text = b"\n  Avg latency: 1.5 seconds\n99% percentile latency: 2 seconds\n".to_vec();
        let json = br#"  {"avg_latency": 1.5, "percentiles": {"99": 2.0}}"#.to_vec();
        for input in [text, json, b"".to_vec(), b"   \n".to_vec()] {
            for step in [1, 3, 7, 1 << 20] {
                let r = parse_reader(&mut Trickle(&input, step)).unwrap();
                assert_eq!(r, crate::parse::parse_bytes(&input), "step {step}");
            }
        }
    }

    #[test]
    fn exit_codes_and_json() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good.txt");
        std::fs::write(
            &good,
            "Avg latency: 1.5 seconds\n99% percentile latency: 2 seconds\n",
        )
        .unwrap();
        let empty = dir.path().join("empty.txt");
        std::fs::write(&empty, "").unwrap();
        let missing = dir.path().join("missing.txt");

        let (mut out, mut err) = (Vec::new(), Vec::new());
        assert_eq!(
            main(std::slice::from_ref(&good), true, &mut out, &mut err),
            0
        );
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["kind"], "latency");
        assert_eq!(v["metrics"]["latency_avg_s"], 1.5);
        assert_eq!(v["metrics"]["latency_p99_s"], 2);
        assert!(v["vllm_version"].is_null());

        let (mut out, mut err) = (Vec::new(), Vec::new());
        assert_eq!(main(&[good.clone(), empty], true, &mut out, &mut err), 1);
        assert_eq!(String::from_utf8(out).unwrap().lines().count(), 2);

        let (mut out, mut err) = (Vec::new(), Vec::new());
        assert_eq!(main(&[good, missing], false, &mut out, &mut err), 2);
        assert!(String::from_utf8(err).unwrap().contains("missing.txt"));
        assert!(String::from_utf8(out).unwrap().contains("latency_avg_s"));
    }
}
