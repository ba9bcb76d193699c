//! Line normalisation shared by the scanner: what a signature sees is the line without
//! terminal decoration; what the operator sees as evidence is the line as it was written.

use regex::Regex;
use std::sync::OnceLock;

/// Longest evidence line kept (bytes). vLLM prints lines listing every supported
/// architecture; anything longer than this is a paste accident.
pub const MAX_EVIDENCE: usize = 8 * 1024;

fn re(cell: &'static OnceLock<Regex>, pat: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pat).expect("built-in regex"))
}

pub use crate::sanitize::clean;

/// The raw line as evidence: no trailing newline, bounded length.
pub fn evidence(raw: &str) -> String {
    let s = raw.trim_end_matches(['\n', '\r']);
    if s.len() <= MAX_EVIDENCE {
        return s.to_string();
    }
    let mut end = MAX_EVIDENCE;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// Strips decoration that is not part of the process's own output: CI/viewer timestamps,
/// markdown quoting, wrapper loggers, `[rankN]:` prefixes.
pub(crate) fn strip_decoration(clean: &str) -> &str {
    static DECO: OnceLock<Regex> = OnceLock::new();
    let deco = re(
        &DECO,
        r"^(?:[\s>|,]+|\[?\d{4}-\d\d-\d\d[T ][\d:.,]+Z?\]?(?: - \w+ - [\w.]+:)?|\[rank\d+\]:|Error: )",
    );
    let mut s = clean;
    loop {
        match deco.find(s) {
            Some(m) if m.end() > 0 => s = &s[m.end()..],
            _ => return s,
        }
    }
}

/// Also strips process tags and the vLLM logger header (spec §5.2), leaving the message.
pub fn message(clean: &str) -> &str {
    static HDR: OnceLock<Regex> = OnceLock::new();
    let hdr = re(
        &HDR,
        r"^(?:\([^)]*pid=\d+[^)]*\)\s*|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL|WARN) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? (?:\[[^\]]+\]|\S+:\d+\])\s?|\[[\w./-]+\.py:\d+\]\s?|(?:INFO|ERROR|WARNING|DEBUG):\s+)",
    );
    let mut s = strip_decoration(clean);
    loop {
        match hdr.find(s) {
            Some(m) if m.end() > 0 => s = strip_decoration(&s[m.end()..]),
            _ => return s,
        }
    }
}

/// `XxxError: …` / `pkg.XxxException` at the start of a message: a Python exception line.
pub(crate) fn is_exception(msg: &str) -> bool {
    static EXC: OnceLock<Regex> = OnceLock::new();
    re(
        &EXC,
        r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit)\b(?::|$)",
    )
    .is_match(msg)
}

/// A bare exception line: the uncaught exception that ended a process (not re-logged by
/// a worker's logger). Preferred as evidence over the same message in a worker's log.
pub(crate) fn is_bare_exception(clean: &str) -> bool {
    is_exception(strip_decoration(clean))
}

/// Traceback echo of source code (`raise ValueError("…` / `File "…", line N`): the text
/// of an error message appears there too, but it is not the error.
pub(crate) fn is_source_echo(msg: &str) -> bool {
    static SRC: OnceLock<Regex> = OnceLock::new();
    re(
        &SRC,
        r#"^\s*(?:raise\s+[\w.]+\s*(?:\(|$)|File "[^"]*", line \d+|\^+\s*$)"#,
    )
    .is_match(msg)
}

/// An error-looking line that is not an exception (fallback evidence).
pub(crate) fn is_error_level(clean: &str) -> bool {
    static ERR: OnceLock<Regex> = OnceLock::new();
    re(
        &ERR,
        r"(?:^|[\s)\]])(?:ERROR|CRITICAL|FATAL|Fatal|error:|Error:|ERROR:)(?:\s|$)",
    )
    .is_match(strip_decoration(clean))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_removes_ansi_cr_and_nbsp() {
        let raw = "\u{a0} | \x1b[36m(_MapWorker pid=1)\x1b[0m ERROR x\r";
        assert_eq!(clean(raw), "  | (_MapWorker pid=1) ERROR x");
        assert!(matches!(clean("plain"), std::borrow::Cow::Borrowed(_)));
    }

    #[test]
    fn message_strips_every_prefix_layer() {
        let cases = [
            "[2025-05-20T10:47:04Z] (VllmWorker rank=0 pid=1) ERROR 05-20 03:47:04 [multiproc_executor.py:522] RuntimeError: boom",
            "(VllmWorkerProcess pid=67) ERROR 11-05 03:21:52 multiproc_worker_utils.py:233] RuntimeError: boom",
            "2024-07-13 15:07:34,941 - INFO - vLLM: ERROR 07-13 15:07:34 async_llm_engine.py:53] RuntimeError: boom",
            "[multiproc_executor.py:492] RuntimeError: boom",
            "Error: [rank0]: RuntimeError: boom",
            ">   | [2024-09-05T00:38:34Z] RuntimeError: boom",
            "(APIServer pid=1) ERROR:    RuntimeError: boom",
        ];
        for c in cases {
            assert_eq!(message(c), "RuntimeError: boom", "{c}");
            assert!(is_exception(message(c)));
        }
    }

    #[test]
    fn bare_exception_lines() {
        assert!(is_bare_exception(
            "torch.OutOfMemoryError: CUDA out of memory."
        ));
        assert!(is_bare_exception("[2025-05-20T10:47:04Z] RuntimeError: x"));
        assert!(!is_bare_exception(
            "(VllmWorkerProcess pid=1) ERROR 01-01 00:00:00 a.py:1] RuntimeError: x"
        ));
        assert!(!is_bare_exception(
            "ERROR 01-19 03:55:24 multiproc_worker_utils.py:233] RuntimeError: x"
        ));
        assert!(!is_bare_exception("INFO some message"));
    }

    #[test]
    fn source_echo() {
        assert!(is_source_echo(
            "    raise ValueError(\"No available memory\""
        ));
        assert!(is_source_echo(
            "raise RuntimeError(f\"NCCL error: {error_str}\")"
        ));
        assert!(is_source_echo("  File \"/x.py\", line 3, in f"));
        assert!(!is_source_echo("ValueError: raise the limit"));
    }

    #[test]
    fn evidence_is_bounded_and_keeps_trailing_spaces() {
        assert_eq!(evidence("abc \r\n"), "abc ");
        let long = "é".repeat(MAX_EVIDENCE);
        assert!(evidence(&long).len() <= MAX_EVIDENCE + 4);
    }
}
