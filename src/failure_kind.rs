//! Failure kinds: what an unexplained failure *is*, so that 24 runs dying of the same
//! traceback are one thing to decide about, not 24. A kind is the failure's telling line
//! (the last traceback's final line, else the deciding line) with everything that differs
//! from run to run masked — numbers, hex hashes, paths, addresses and ports, timestamps —
//! plus a short stable id (xxh3 of that text). Pure.
//!
//! The masks are deliberately coarse: two lines that differ only in a number are the same
//! kind (`Tried to allocate 2.00 GiB` and `… 3.50 GiB`), which is what an operator deciding
//! once for many runs wants; a kind promoted to a named signature (`diagnose --learn`)
//! gets the same masks back as regex classes ([`to_regex`]).

use crate::category::Category;
use crate::event::Finding;
use regex::Regex;
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

pub use crate::diagnose::confidence::LOW as LOW_CONFIDENCE;

/// The longest normalised text kept (a kind is a line, not a log).
const MAX_TEXT: usize = 400;

/// A failure kind: its id and the normalised telling line.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct FailureKind {
    /// 12 hex digits of the xxh3 of `text`: short enough to type, stable across runs,
    /// nights and machines.
    pub id: String,
    /// The telling line with the parts that vary masked (`<N>`, `<HEX>`, `<PATH>`, …).
    pub text: String,
}

impl FailureKind {
    /// The kind of a raw line.
    pub fn of_line(line: &str) -> FailureKind {
        let text = normalise(line);
        FailureKind {
            id: id_of(&text),
            text,
        }
    }

    /// The kind of a finding: its telling line, normalised.
    pub(crate) fn of_finding(f: &Finding) -> FailureKind {
        FailureKind::of_line(telling_line(&f.evidence, &f.telling))
    }

    /// Whether `id` names this kind: the whole id or a prefix of 4 or more digits.
    pub fn matches(&self, id: &str) -> bool {
        id.len() >= 4 && self.id.starts_with(&id.to_ascii_lowercase())
    }
}

/// The short id of a normalised text.
pub(crate) fn id_of(text: &str) -> String {
    format!("{:012x}", xxhash_rust::xxh3::xxh3_64(text.as_bytes()) >> 16)
}

/// The line that tells most about a failure: the final line of the last traceback. The
/// diagnosis leaves a telling line out when it is the evidence itself, so an evidence
/// that is an exception line is that line; otherwise the first telling line (the last
/// traceback's final line, else the first ERROR line); else the deciding line.
pub fn telling_line<'a>(evidence: &'a str, telling: &'a [String]) -> &'a str {
    if is_exception_line(evidence) {
        return evidence;
    }
    telling
        .iter()
        .map(|s| s.as_str())
        .find(|s| !s.trim().is_empty())
        .unwrap_or(evidence)
}

/// `SomeError: …`, `torch.OutOfMemoryError: …`, `KeyboardInterrupt` (after any prefix).
fn is_exception_line(l: &str) -> bool {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"\b[A-Z][A-Za-z0-9_]*(Error|Exception|Exit|Interrupt)\b(:|\s*$)")
            .expect("exception line")
    })
    .is_match(l)
}

/// A failure no signature explains: `other`, or a category decided with low confidence.
/// Plan-time predictions are never unknown (they are about a known bug).
pub(crate) fn is_unknown(category: Category, confidence: Option<f32>, predicted: bool) -> bool {
    !predicted && (category == Category::Other || confidence.is_some_and(|c| c < LOW_CONFIDENCE))
}

/// [`is_unknown`] of a finding.
pub(crate) fn finding_is_unknown(f: &Finding) -> bool {
    is_unknown(f.category, f.confidence, f.predicted)
}

/// The unknown kind of a finding, if it is an unknown failure.
pub fn unknown_kind(f: &Finding) -> Option<FailureKind> {
    finding_is_unknown(f).then(|| FailureKind::of_finding(f))
}

/// The id of a finding's kind: as recorded when it was diagnosed, else worked out now.
pub(crate) fn kind_id_of(f: &Finding) -> String {
    match &f.kind {
        Some(id) => id.clone(),
        None => FailureKind::of_finding(f).id,
    }
}

/// [`kind_id_of`] an unknown failure; None for a named one.
pub(crate) fn unknown_kind_id(f: &Finding) -> Option<String> {
    finding_is_unknown(f).then(|| kind_id_of(f))
}

/// The kind id a diagnosis gets recorded with: Some for an unknown failure.
pub(crate) fn kind_of_diagnosis(d: &crate::diagnose::Diagnosis) -> Option<String> {
    is_unknown(d.category, Some(d.confidence), d.predicted)
        .then(|| FailureKind::of_line(telling_line(&d.evidence, &d.telling)).id)
}

/// Whether `prefix` (4+ hex digits, any case) names kind `id`.
pub(crate) fn id_matches(id: &str, prefix: &str) -> bool {
    prefix.len() >= 4 && id.starts_with(&prefix.to_ascii_lowercase())
}

struct Masks {
    ansi: Regex,
    iso_ts: Regex,
    log_ts: Regex,
    clock: Regex,
    uuid: Regex,
    url: Regex,
    ipv4: Regex,
    ipv6: Regex,
    path: Regex,
    hex0x: Regex,
    hex: Regex,
    num: Regex,
    space: Regex,
}

fn masks() -> &'static Masks {
    static M: OnceLock<Masks> = OnceLock::new();
    M.get_or_init(|| {
        let r = |s: &str| Regex::new(s).expect("failure-kind mask");
        Masks {
            ansi: r(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|[\r\x{a0}]"),
            iso_ts: r(
                r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2})?(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?",
            ),
            // vLLM's `INFO 07-21 03:20:18` and logging's `[03:20:18.123]`.
            log_ts: r(r"\b\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:[.,]\d+)?\b"),
            clock: r(r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b"),
            uuid: r(
                r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b",
            ),
            url: r(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'`<>]+"),
            ipv4: r(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?\b"),
            ipv6: r(r"\[[0-9a-fA-F]*:[0-9a-fA-F:.]*\](?::\d{1,5})?"),
            // A path starts at a line's start or after a space, quote, `=`, `(`, `[` or `,`
            // (so `tok/s` and `and/or` stay words); `:` ends it (`file.py:12`).
            path: r(r#"(^|[\s'"`=(\[,])(?:~|\.{1,2})?(?:/[^\s'"`,;:()\[\]{}<>/]+)+/?"#),
            hex0x: r(r"\b0[xX][0-9a-fA-F]+\b"),
            hex: r(r"\b[0-9a-fA-F]{7,}\b"),
            // A number standing on its own or after punctuation; digits that are part of a
            // word (`python3`, `sha256`, `fp8`, `rank0`) stay.
            num: r(r"(^|[^A-Za-z0-9_])\d+(?:\.\d+)*"),
            space: r(r"\s+"),
        }
    })
}

/// The telling line with what varies between runs masked: ANSI escapes and `\r` dropped;
/// timestamps `<TS>`, UUIDs `<ID>`, URLs `<URL>`, IP addresses with their port `<IP>`,
/// paths `<PATH>`, hex hashes and addresses `<HEX>`, numbers `<N>`; runs of whitespace one
/// space. Idempotent.
pub(crate) fn normalise(line: &str) -> String {
    let m = masks();
    let s = m.ansi.replace_all(line, "");
    let s = m.iso_ts.replace_all(&s, "<TS>");
    let s = m.log_ts.replace_all(&s, "<TS>");
    let s = m.clock.replace_all(&s, "<TS>");
    let s = m.uuid.replace_all(&s, "<ID>");
    let s = m.url.replace_all(&s, "<URL>");
    let s = m.ipv4.replace_all(&s, "<IP>");
    let s = m.ipv6.replace_all(&s, "<IP>");
    let s = m.path.replace_all(&s, "${1}<PATH>");
    let s = m.hex0x.replace_all(&s, "<HEX>");
    // A long run of hex digits is a hash when it mixes digits and letters; all digits is
    // a number (masked next), all letters a word (`deadbeef` aside, `accede`, `effaced`).
    let s = m.hex.replace_all(&s, |c: &regex::Captures| {
        let h = &c[0];
        let digit = h.bytes().any(|b| b.is_ascii_digit());
        let letter = h.bytes().any(|b| b.is_ascii_alphabetic());
        if digit && letter {
            "<HEX>".to_string()
        } else {
            h.to_string()
        }
    });
    let s = m.num.replace_all(&s, "${1}<N>");
    let s = m.space.replace_all(&s, " ");
    let s = s.trim();
    let mut end = s.len().min(MAX_TEXT);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// What each mask stands for as a regex, for a kind promoted to a catalog signature.
const PLACEHOLDERS: [(&str, &str); 8] = [
    ("<TS>", r"\d[\d:T.,+Z-]*(?: \d[\d:.,]*)?"),
    ("<ID>", r"[0-9a-fA-F-]+"),
    ("<URL>", r"\S+"),
    ("<IP>", r"\S+"),
    ("<PATH>", r"\S+?"),
    ("<HEX>", r"(?:0[xX])?[0-9a-fA-F]+"),
    ("<N>", r"\d+(?:\.\d+)*"),
    (" ", r"\s+"),
];

/// A regex that matches the lines a kind was made from (and lines differing only where
/// the masks are): literal text escaped, each mask its class, each space `\s+`.
pub(crate) fn to_regex(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while !rest.is_empty() {
        let next = PLACEHOLDERS
            .iter()
            .filter_map(|(p, re)| rest.find(p).map(|i| (i, *p, *re)))
            .min_by_key(|(i, p, _)| (*i, std::cmp::Reverse(p.len())));
        match next {
            Some((i, p, re)) => {
                out.push_str(&regex::escape(&rest[..i]));
                out.push_str(re);
                rest = &rest[i + p.len()..];
            }
            None => {
                out.push_str(&regex::escape(rest));
                break;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_what_varies_between_runs() {
        for (line, want) in [
            (
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB. GPU 0 has a total capacity of 79.19 GiB",
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate <N> GiB. GPU <N> has a total capacity of <N> GiB",
            ),
            (
                "(VllmWorker rank=3 pid=1234) ERROR 07-21 03:20:18 [multiproc.py:231] boom",
                "(VllmWorker rank=<N> pid=<N>) ERROR <TS> [multiproc.py:<N>] boom",
            ),
            (
                "  File \"/usr/local/lib/python3.12/dist-packages/vllm/worker.py\", line 229, in run",
                "File \"<PATH>\", line <N>, in run",
            ),
            (
                "OSError: [Errno 2] No such file or directory: '/tmp/tmpab12cd/model-00001-of-00004.safetensors'",
                "OSError: [Errno <N>] No such file or directory: '<PATH>'",
            ),
            (
                "failed to register layer: write /var/lib/docker/overlay2/9f86d081884c7d65/diff: no space left",
                "failed to register layer: write <PATH>: no space left",
            ),
            (
                "connect to 10.0.3.17:29500 refused at 2024-05-01T12:00:03.512Z",
                "connect to <IP> refused at <TS>",
            ),
            (
                "digest sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 mismatch, object 0x7f3a2c001e40",
                "digest sha256:<HEX> mismatch, object <HEX>",
            ),
            (
                "request 1b4e28ba-2fa1-11d2-883f-0016d3cca427 failed after 12:03:04.5",
                "request <ID> failed after <TS>",
            ),
            ("\x1b[31mRuntimeError:\x1b[0m   bad\r", "RuntimeError: bad"),
            // Words stay words: `tok/s`, `and/or`, hex-looking words without digits.
            (
                "throughput 12 tok/s and/or deadbeef accede",
                "throughput <N> tok/s and/or deadbeef accede",
            ),
            ("see https://github.com/vllm-project/vllm/issues/8791 now", "see <URL> now"),
        ] {
            assert_eq!(normalise(line), want, "{line}");
            assert_eq!(normalise(want), want, "idempotent: {want}");
        }
    }

    #[test]
    fn the_same_error_is_one_kind_and_another_is_not() {
        let a = FailureKind::of_line(
            "RuntimeError: shard 3 of /models/a/7f3a2c001e40 failed at 10.0.0.1:8000 (pid 17)",
        );
        let b = FailureKind::of_line(
            "RuntimeError: shard 11 of /models/b/0c9d2e11aa55 failed at 10.0.0.9:8123 (pid 4242)",
        );
        let c = FailureKind::of_line("RuntimeError: something else entirely");
        assert_eq!(a, b);
        assert_ne!(a.id, c.id);
        assert_eq!(a.id.len(), 12);
        assert!(a.id.bytes().all(|b| b.is_ascii_hexdigit()));
        assert!(a.matches(&a.id[..6]) && a.matches(&a.id.to_uppercase()));
        assert!(!a.matches(&a.id[..3]), "too short to name a kind");
        // Stable across builds and machines: the id is a function of the text alone.
        assert_eq!(id_of("x"), id_of("x"));
    }

    #[test]
    fn unknown_means_other_or_a_guess_never_a_prediction() {
        assert!(is_unknown(Category::Other, Some(0.9), false));
        assert!(is_unknown(Category::CudaOom, Some(0.1), false));
        assert!(!is_unknown(Category::CudaOom, Some(0.9), false));
        assert!(!is_unknown(Category::CudaOom, None, false));
        assert!(!is_unknown(Category::Other, Some(0.1), true));
        assert!(!is_unknown(Category::VersionPortBug, Some(0.5), false));
    }

    #[test]
    fn the_telling_line_is_the_last_tracebacks_final_line() {
        assert_eq!(telling_line("e", &["t".into(), "u".into()]), "t");
        assert_eq!(telling_line("e", &[" ".into()]), "e");
        assert_eq!(telling_line("e", &[]), "e");
        // The evidence is the traceback's final line: the diagnosis left it out of
        // `telling`, whose line is then only the first ERROR line.
        let ev = "(Worker pid=3) ERROR 07-21 x.py:2] TypeError: unsupported operand";
        assert_eq!(telling_line(ev, &["ERROR Exception in worker".into()]), ev);
        assert_eq!(
            telling_line("torch.OutOfMemoryError: CUDA out of memory", &["x".into()]),
            "torch.OutOfMemoryError: CUDA out of memory"
        );
        assert_eq!(
            telling_line("KeyboardInterrupt", &["x".into()]),
            "KeyboardInterrupt"
        );
        assert_eq!(
            telling_line("process exited with status 1", &["ValueError: v".into()]),
            "ValueError: v"
        );
    }

    #[test]
    fn a_kinds_regex_matches_every_line_it_was_made_from() {
        let lines = [
            "\x1b[31m(VllmWorker rank=0 pid=97) ERROR 07-21 03:20:18 [worker.py:229] RuntimeError: shard 3 of /models/x/7f3a2c001e40 at 10.0.0.1:8000",
            "(VllmWorker rank=1 pid=4242) ERROR 11-02 23:59:01 [worker.py:231] RuntimeError: shard 12 of /data/y/0c9d2e11aa55 at 10.0.0.9:29500",
        ];
        let k = FailureKind::of_line(lines[0]);
        assert_eq!(k, FailureKind::of_line(lines[1]));
        let re = Regex::new(&to_regex(&k.text)).unwrap();
        for l in lines {
            let clean = masks().ansi.replace_all(l, "");
            assert!(re.is_match(&clean), "{} !~ {l}", re.as_str());
        }
        assert!(!re.is_match("RuntimeError: something else"));
        assert_eq!(to_regex("a.b (c)"), r"a\.b\s+\(c\)");
    }
}
