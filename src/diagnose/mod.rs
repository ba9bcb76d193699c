//! Failure diagnosis: which category a failed attempt belongs to, the line that proves it,
//! and the recipe that may fix it. Pure: fed log lines and facts, no Docker, no disk.
//!
//! * [`Catalog`]: signatures as data (catalog.toml, embedded; operator overrides).
//! * [`Scanner`]: streaming, bounded state per attempt; [`Scanner::conclude`] combines what
//!   it saw with the [`FailureContext`] (stage, exit code, timeouts, pull/patch facts).
//! * [`predict_port_bug`]: plan-load-time prediction of vLLM's port-binding bug (#8791).
//! * [`RecipeBook`]: fix recipes as data (recipes.toml, embedded; operator overrides).

mod capture;
pub mod catalog;
mod patch_blame;

pub mod context;
pub mod predict;
pub mod recipe;
mod scanner;
mod telling;
pub mod text;

pub use catalog::{Catalog, EvidencePick, Signature};
pub use context::FailureContext;
pub(crate) use predict::predict_port_bug;
pub use predict::PyVersion;
pub use recipe::{Recipe, RecipeBook, RecipeScope, Step};
pub use scanner::Scanner;

use crate::category::Category;
use crate::model::Stream;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Why an attempt failed, and the line that proves it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Diagnosis {
    pub category: Category,
    /// The deciding log line as written (ANSI and prefixes kept), or for facts that are
    /// not in any log (a timeout, a prediction) a sentence stating the fact.
    pub evidence: String,
    pub stream: Option<Stream>,
    /// 1-based, counted over every line fed to the scanner (in file mode: the file line).
    pub line_no: Option<u64>,
    /// The fix recipe this diagnosis offers, if any.
    pub recipe: Option<String>,
    /// True for a plan-load-time prediction that no run has confirmed yet.
    pub predicted: bool,
    /// How sure the diagnosis is, 0..=1: a fact the runtime established or a root-cause
    /// signature is near 1, a generic symptom lower, `other` with only an error-like
    /// line near 0 (see `confidence` below for the scale).
    #[serde(default)]
    pub confidence: f32,
    /// For a failure no signature explains: the final line of the last traceback and the
    /// first ERROR line, when they are not the evidence itself.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub telling: Vec<String>,
}

/// The confidence scale, one value per way of deciding.
pub mod confidence {
    /// A fact the runtime established (the patch did not apply, the image is missing).
    pub const FACT: f32 = 1.0;
    /// A root-cause signature matched a line.
    pub const SIGNATURE: f32 = 0.9;
    /// A named fault with no category of its own (`other` by signature).
    pub const NAMED_FAULT: f32 = 0.7;
    /// Judged from timing: a stage timed out, capture stalled.
    pub const TIMING: f32 = 0.8;
    /// A generic symptom (broken pipe, engine core failed) with nothing earlier.
    pub const SYMPTOM: f32 = 0.6;
    /// Predicted from the plan; no run has shown it yet.
    pub const PREDICTED: f32 = 0.5;
    /// A wording more than one failure prints (a signature's own `confidence`, e.g.
    /// vLLM's "Invalid repository ID" for a missing model and for an offline cache miss):
    /// below [`LOW`], so the policy treats it like `other`.
    pub const WEAK: f32 = 0.4;
    /// `other`, with an exception line as evidence.
    pub const EXCEPTION: f32 = 0.3;
    /// `other`, with only an error-like line, an exit status or the last line.
    pub const GUESS: f32 = 0.1;
    /// Below this a diagnosis is a guess: its category is not trusted to decide anything
    /// on its own (exception 0.3, guess 0.1; a plan-time prediction is 0.5 and stays above).
    pub const LOW: f32 = 0.5;
}

/// An error in a catalog, recipe or policy file, located as `origin:line:col`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}:{line}:{col}: {message}")]
pub struct DataError {
    pub origin: String,
    pub line: usize,
    pub col: usize,
    pub message: String,
}

pub type CatalogError = DataError;
pub type RecipeError = DataError;

impl DataError {
    /// Locates byte `offset` of `text` (1-based line and column, columns in characters).
    pub fn at(origin: &str, text: &str, offset: usize, message: impl Into<String>) -> Self {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &text[..offset];
        let line = before.matches('\n').count() + 1;
        let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        DataError {
            origin: origin.to_string(),
            line,
            col,
            message: message.into(),
        }
    }
}

/// File mode: classify a whole log with no context. Streams are guessed per line; when no
/// signature matches, the result is `other` with the most error-like line as evidence.
pub fn diagnose_text(catalog: &Catalog, text: &[u8]) -> Diagnosis {
    let text = String::from_utf8_lossy(text);
    let mut sc = Scanner::file_mode(Arc::new(catalog.clone()));
    for line in text.split('\n') {
        sc.feed_guessed(line);
    }
    sc.conclude_file()
}

/// A line longer than this is cut here when a log is read as a stream: no signature needs
/// more of a line, and a log of one endless line must not be held whole.
const LONG_LINE: usize = 4 << 20;

/// [`diagnose_text`] over a reader, a line at a time, so memory stays bounded whatever the
/// log's size: the same lines (and line numbers) as splitting the whole text at `\n`.
pub(crate) fn diagnose_reader(
    catalog: &Catalog,
    r: &mut dyn std::io::BufRead,
) -> std::io::Result<Diagnosis> {
    use std::io::{BufRead, Read};
    let mut sc = Scanner::file_mode(Arc::new(catalog.clone()));
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = (&mut *r)
            .take(LONG_LINE as u64)
            .read_until(b'\n', &mut line)?;
        let mut more = line.last() == Some(&b'\n');
        if more {
            line.pop();
        } else if n == LONG_LINE {
            // Cut: the rest of the line is skipped up to its newline, if it has one.
            loop {
                let buf = r.fill_buf()?;
                if buf.is_empty() {
                    break;
                }
                match buf.iter().position(|b| *b == b'\n') {
                    Some(i) => {
                        r.consume(i + 1);
                        more = true;
                        break;
                    }
                    None => {
                        let len = buf.len();
                        r.consume(len);
                    }
                }
            }
        }
        sc.feed_guessed(&String::from_utf8_lossy(&line));
        if !more {
            return Ok(sc.conclude_file());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Streamed, a log is diagnosed as when held whole.
    #[test]
    fn a_streamed_log_is_diagnosed_as_the_whole_text() {
        let c = Catalog::builtin();
        for log in [
            "",
            "\n",
            "x\nTraceback (most recent call last):\nValueError: 'aimv2' is already used by a Transformers config, pick another name.\n",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        ] {
            let streamed = diagnose_reader(&c, &mut std::io::BufReader::with_capacity(3, log.as_bytes())).unwrap();
            assert_eq!(streamed, diagnose_text(&c, log.as_bytes()), "{log:?}");
        }
    }

    #[test]
    fn data_error_positions() {
        let e = DataError::at("f.toml", "ab\ncdé\nx", 7, "m");
        assert_eq!((e.line, e.col), (2, 4));
        assert_eq!(e.to_string(), "f.toml:2:4: m");
        let e = DataError::at("f", "abc", 0, "m");
        assert_eq!((e.line, e.col), (1, 1));
    }

    #[test]
    fn diagnosis_serde_round_trip() {
        let d = Diagnosis {
            category: Category::CudaOom,
            evidence: "x".into(),
            stream: Some(Stream::Server),
            line_no: Some(3),
            recipe: None,
            predicted: false,
            confidence: confidence::SIGNATURE,
            telling: vec![],
        };
        let j = serde_json::to_string(&d).unwrap();
        assert!(j.contains("\"cuda_oom\""));
        assert_eq!(serde_json::from_str::<Diagnosis>(&j).unwrap(), d);
    }
}
