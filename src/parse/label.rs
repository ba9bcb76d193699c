//! `Label: value unit` lines: splitting, label normalisation, numbers and units.
//!
//! Every benchmark era prints results as a label, a colon and a number — padded to fixed
//! columns (v0.4+), with the unit after the number (v0.3.3 `8.46 requests/s`), glued to it
//! (`118.27s`), in a markdown table, or behind an unknown prefix. The label decides the key;
//! the unit (from the label's `(ms)` or after the number) decides the scale.

use regex::Regex;
use std::sync::OnceLock;

/// One parsed `label: value` line.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LabelValue {
    /// Lower-case, single-spaced, without the trailing colon and without a trailing unit
    /// parenthesis (`mean ttft`, `total generated tokens (retokenized)`).
    pub label: String,
    pub value: f64,
    /// Lower-case unit from the label's parenthesis or after the number, if any.
    pub unit: Option<String>,
    /// The unit sat in the label (`Mean TTFT (ms):`), the v0.4+ layout.
    pub unit_in_label: bool,
}

/// Longest line worth matching as `label: value`.
pub(crate) const MAX_TEXT: usize = 1024;

const NUM: &str =
    r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?(?:[eE][-+]?\d+)?|[-+]?\.\d+(?:[eE][-+]?\d+)?";
const UNIT: &str = r"[A-Za-zµ%]+(?:/[A-Za-z]+)?";

fn colon_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(&format!(
            r"^(?P<label>.*\S)\s*:\s*(?P<num>{NUM})\s*(?P<unit>{UNIT})?\s*(?:\([^()]*\))?\s*[.,;]?$"
        ))
        .expect("colon regex")
    })
}

fn cell_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(&format!(r"^(?P<num>{NUM})\s*(?P<unit>{UNIT})?$")).expect("cell regex")
    })
}

/// Parses a printed number: thousands separators allowed, non-finite values rejected
/// (`inf`, `nan` never match the pattern anyway).
pub(crate) fn parse_num(s: &str) -> Option<f64> {
    let v: f64 = if s.contains(',') {
        s.replace(',', "").parse().ok()?
    } else {
        s.parse().ok()?
    };
    v.is_finite().then_some(v)
}

/// Units that may appear in a label's trailing parenthesis.
fn is_unit(u: &str) -> bool {
    matches!(
        u,
        "ms" | "s"
            | "sec"
            | "secs"
            | "seconds"
            | "us"
            | "µs"
            | "min"
            | "req/s"
            | "requests/s"
            | "rps"
            | "tok/s"
            | "tokens/s"
            | "toks/s"
            | "inputs/s"
            | "%"
            | "x"
            | "tokens"
            | "gb"
            | "gib"
            | "mb"
            | "mib"
    )
}

/// Lower-cases, collapses whitespace, drops a trailing colon, and splits off a trailing
/// unit parenthesis. Returns `(label, unit)`.
pub(crate) fn normalize_label(raw: &str) -> (String, Option<String>) {
    let mut label = String::with_capacity(raw.len());
    for w in raw.split_whitespace() {
        if !label.is_empty() {
            label.push(' ');
        }
        label.extend(w.chars().flat_map(char::to_lowercase));
    }
    while label.ends_with(':') {
        label.pop();
        label.truncate(label.trim_end().len());
    }
    if label.ends_with(')') {
        if let Some(open) = label.rfind('(') {
            let inner = label[open + 1..label.len() - 1].trim();
            if is_unit(inner) {
                let unit = inner.to_string();
                label.truncate(open);
                label.truncate(label.trim_end().len());
                return (label, Some(unit));
            }
        }
    }
    (label, None)
}

/// Markers people put after a value they paste into an issue or a note (`<-- here`,
/// `# after the fix`, `// p99 went up`): what follows is commentary on the value.
const TRAILER_MARKERS: &[&str] = &["<--", "<-", "<==", "\u{2190}", "#", "//"];

/// The line without a commentary trailer after its value: a marker (`<-- here`, `# note`)
/// after the last colon, or a closing parenthetical in words (`(chunked prefill on)`)
/// after a value and unit. A trailer that changes what the value means (`6.35 -> 5.10`,
/// `6.35 vs 7.2`, `± 0.3`) is left in place, so the line does not read as a value.
pub(crate) fn without_trailer(text: &str) -> &str {
    let after = text.rfind(':').map_or(0, |i| i + 1);
    let mut end = text.len();
    for m in TRAILER_MARKERS {
        let mut from = after;
        while let Some(i) = text[from..end].find(m).map(|i| i + from) {
            // A marker stands apart: whitespace before it, after a value.
            if i > after && text[..i].ends_with(char::is_whitespace) {
                end = i;
                break;
            }
            from = i + m.len();
        }
    }
    let mut t = text[..end].trim_end();
    if t.ends_with(')') {
        if let Some(open) = t.rfind('(') {
            let inner = &t[open + 1..t.len() - 1];
            let before = t[..open].trim_end();
            // Words, not a unit, after something that ends like a value or a unit.
            if open > after
                && inner.split_whitespace().count() >= 2
                && inner.chars().any(char::is_alphabetic)
                && !inner.contains(['(', ':'])
                && before.ends_with(|c: char| c.is_ascii_alphanumeric() || c == '/' || c == '%')
            {
                t = before;
            }
        }
    }
    t
}

/// Splits `Label: value [unit]` or a markdown table row `| Label | value |`.
pub(crate) fn split(text: &str) -> Option<LabelValue> {
    // No result line is this long; the bound keeps label matching linear.
    if text.len() > MAX_TEXT {
        return None;
    }
    let text = without_trailer(text);
    // A markdown table row, maybe behind a line prefix: its cells start at the first pipe.
    // Otherwise a pipe is a prefix's column separator (`svc  | `, a quoted CI log's `| `).
    if text.ends_with('|') && text.bytes().filter(|&b| b == b'|').count() >= 3 {
        if let Some(at) = text.find('|') {
            if let Some(row) = split_row(&text[at..]) {
                return Some(row);
            }
        }
    }
    let c = colon_re().captures(text)?;
    let value = parse_num(&c["num"])?;
    let (label, label_unit) = normalize_label(&c["label"]);
    if label.is_empty() {
        return None;
    }
    let unit_in_label = label_unit.is_some();
    let unit = label_unit.or_else(|| c.name("unit").map(|m| m.as_str().to_lowercase()));
    Some(LabelValue {
        label,
        value,
        unit,
        unit_in_label,
    })
}

fn split_row(text: &str) -> Option<LabelValue> {
    let mut cells = text.split('|').map(str::trim).filter(|c| !c.is_empty());
    let label = cells.next()?;
    let cell = cells.next()?;
    let c = cell_re().captures(cell)?;
    let value = parse_num(&c["num"])?;
    let (label, label_unit) = normalize_label(label);
    if label.is_empty() || !label.starts_with(|c: char| c.is_alphabetic()) {
        return None;
    }
    // A table row has no print layout to judge by.
    let unit_in_label = false;
    let unit = label_unit.or_else(|| c.name("unit").map(|m| m.as_str().to_lowercase()));
    Some(LabelValue {
        label,
        value,
        unit,
        unit_in_label,
    })
}

/// True for a word that belongs to a line prefix rather than to a label: anything with a
/// digit or punctuation in it (`a.py:12`, `[rank0]:`, `07-08`, `|`), a logging level
/// (`INFO`, `warning`), or a one-letter marker (pytest's `E`, glog's level letter). Label
/// words are plain words (`Mean`, `Successful`); a few carry a digit (`P99.9`, `E2EL`),
/// which is harmless because the whole label is always tried before its suffixes.
pub(crate) fn is_prefix_word(word: &str) -> bool {
    const LEVELS: &[&str] = &[
        "trace", "debug", "info", "notice", "warn", "warning", "error", "critical", "fatal",
    ];
    word.chars().count() == 1
        || word.bytes().any(|b| !b.is_ascii_alphabetic())
        || LEVELS.iter().any(|l| word.eq_ignore_ascii_case(l))
}

/// Start offsets of the label's possible suffixes, leftmost first: the whole label, then
/// every word where [`after_prefix`] holds. A word after a plain word never starts a
/// suffix, so `avg prompt throughput` never becomes `prompt throughput`.
pub(crate) fn suffix_starts(label: &str) -> impl Iterator<Item = usize> + '_ {
    let b = label.as_bytes();
    (0..b.len()).filter(move |&i| b[i].is_ascii_alphanumeric() && after_prefix(b, i))
}

/// True when a word starting at byte `i` of `b` may start a label, with whatever is before
/// it being a line prefix: the start of the text, a separator inside a token
/// (`info:root:successful`, `[rank0]:mean`), or a preceding word that [`is_prefix_word`]
/// (`12:00:00 | successful requests`, `info bench:x.py:12 mean ttft`).
pub(crate) fn after_prefix(b: &[u8], i: usize) -> bool {
    if i == 0 {
        return true;
    }
    let Some(&prev) = b.get(i - 1) else {
        return false;
    };
    if prev >= 0x80 {
        // A glued non-ASCII character: a separator (`│`, `▶`) unless it is a letter.
        let before = std::str::from_utf8(&b[..i]).ok();
        return before
            .and_then(|s| s.chars().next_back())
            .is_some_and(|c| !c.is_alphanumeric());
    }
    if prev.is_ascii_alphanumeric() || prev == b'.' || prev == b'-' {
        return false;
    }
    if !prev.is_ascii_whitespace() {
        // Glued to a separator, but not inside a unit parenthesis (`(excl. 1st token)`).
        return prev != b'(';
    }
    // The previous word: skip spaces back, then take the run of visible bytes.
    let end = b[..i]
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(0, |p| p + 1);
    if end == 0 {
        return true;
    }
    let start = b[..end]
        .iter()
        .rposition(|c| c.is_ascii_whitespace())
        .map_or(0, |p| p + 1);
    // Words inside a parenthesis that closes later belong to the label: `(excl. 1st token)`.
    let opens = b[..end].iter().filter(|&&c| c == b'(').count();
    let closes = b[..end].iter().filter(|&&c| c == b')').count();
    let inside = opens > closes && b[i..].contains(&b')');
    !inside && std::str::from_utf8(&b[start..end]).is_ok_and(is_prefix_word)
}

/// What a value must be multiplied by to be in the unit its key names.
pub(crate) fn scale_for(key: &str, unit: Option<&str>) -> f64 {
    let Some(unit) = unit else { return 1.0 };
    let secs = |u: &str| matches!(u, "s" | "sec" | "secs" | "second" | "seconds");
    if key.ends_with("_ms") {
        if secs(unit) {
            return 1000.0;
        }
        if unit == "us" || unit == "µs" {
            return 0.001;
        }
    } else if key.ends_with("_s")
        && !key.ends_with("_req_s")
        && !key.ends_with("_tok_s")
        && !key.ends_with("_inputs_s")
    {
        if unit == "ms" {
            return 0.001;
        }
        if unit == "min" {
            return 60.0;
        }
    }
    1.0
}

/// `p99.9` → `p99_9`; anything else non-alphanumeric → `_`, runs collapsed.
pub(crate) fn slug(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        if ch.is_ascii_alphanumeric() {
            out.push(ch.to_ascii_lowercase());
        } else if ch == '%' {
            if !out.is_empty() && !out.ends_with('_') {
                out.push('_');
            }
            out.push_str("pct");
        } else if !out.is_empty() && !out.ends_with('_') {
            out.push('_');
        }
    }
    while out.ends_with('_') {
        out.pop();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lv(label: &str, value: f64, unit: Option<&str>) -> Option<(String, f64, Option<String>)> {
        Some((label.into(), value, unit.map(Into::into)))
    }

    fn split(text: &str) -> Option<(String, f64, Option<String>)> {
        super::split(text).map(|l| (l.label, l.value, l.unit))
    }

    /// Result lines pasted into issues and notes carry commentary after the value; it is
    /// read past, unless it changes what the value means.
    #[test]
    fn commentary_after_a_value_is_read_past() {
        assert_eq!(
            split("Mean TPOT (ms):  6.35   <-- here"),
            lv("mean tpot", 6.35, Some("ms"))
        );
        assert_eq!(
            split("Mean TPOT (ms): 6.35 # after the fix"),
            lv("mean tpot", 6.35, Some("ms"))
        );
        assert_eq!(
            split("Output token throughput (tok/s): 4326.10 (chunked prefill on)"),
            lv("output token throughput", 4326.10, Some("tok/s"))
        );
        assert_eq!(
            split("Mean TTFT (ms): 12.5 \u{2190} regressed // see PR"),
            lv("mean ttft", 12.5, Some("ms"))
        );
        // A trailer that makes the value one of two, or uncertain, is not a value.
        for line in [
            "Mean TPOT (ms): 6.35 -> 5.10",
            "Mean TPOT (ms): 6.35 -> 5.10 <-- after",
            "Mean TPOT (ms): 6.35 vs 7.20",
            "Mean TPOT (ms): 6.35 \u{b1} 0.3",
            "Mean TPOT (ms): 6.35 / 7.20",
            "Mean TPOT (ms): 6.35 x2",
        ] {
            assert_eq!(split(line), None, "{line}");
        }
        // A marker glued to the value is not a marker; a label's own parenthesis stays.
        assert_eq!(split("Mean TPOT (ms): 6.35#2"), None);
        assert_eq!(without_trailer("P99 ITL (ms): 3.0"), "P99 ITL (ms): 3.0");
    }

    #[test]
    fn splits_padded_and_era_a_lines() {
        assert_eq!(
            split("Mean TTFT (ms):                          143.92    "),
            lv("mean ttft", 143.92, Some("ms"))
        );
        assert_eq!(
            split("Benchmark duration: 118.270391 s"),
            lv("benchmark duration", 118.270391, Some("s"))
        );
        assert_eq!(
            split("Request throughput: 8.46requests/s"),
            lv("request throughput", 8.46, Some("requests/s"))
        );
        assert_eq!(
            split("Burstiness factor: 1.0 (Poisson process)"),
            lv("burstiness factor", 1.0, None)
        );
        assert_eq!(
            split("12:00:01 | Successful requests: 1,000"),
            lv("12:00:01 | successful requests", 1000.0, None)
        );
        assert_eq!(split("Traffic request rate: inf"), None);
        assert_eq!(split("Max reqeuest concurrency:  not set"), None);
        assert_eq!(
            split("| P99 TTFT (ms) | 5120.90 |"),
            lv("p99 ttft", 5120.9, Some("ms"))
        );
        assert_eq!(split("|---|---|"), None);
        assert_eq!(split("| Metric | Value |"), None);
    }

    #[test]
    fn suffixes_need_a_separator() {
        let l = "engine 000: avg prompt throughput";
        let s: Vec<&str> = suffix_starts(l).map(|i| &l[i..]).collect();
        assert_eq!(s, vec![l, "avg prompt throughput"]);
        // The whole label always comes first, so a known label wins over its suffixes.
        let l = "p99.9 ttft";
        let s: Vec<&str> = suffix_starts(l).map(|i| &l[i..]).collect();
        assert_eq!(s.first(), Some(&l));
        let l = "time per output token (excl. 1st token)";
        let s: Vec<&str> = suffix_starts(l).map(|i| &l[i..]).collect();
        assert_eq!(s, vec![l]);
        for l in [
            "info bench:bench.py:812 mean ttft",
            "e mean ttft",
            "warning:root:mean ttft",
            "[rank0]:mean ttft",
            "2024-07-08 20:49:31,123 - bench - info - mean ttft",
        ] {
            let s: Vec<&str> = suffix_starts(l).map(|i| &l[i..]).collect();
            assert!(s.contains(&"mean ttft"), "{l}: {s:?}");
        }
        let l = "2024/07/08 21:59:25 successful requests";
        let s: Vec<&str> = suffix_starts(l).map(|i| &l[i..]).collect();
        assert!(s.contains(&"successful requests"));
    }

    #[test]
    fn slugs_and_scales() {
        assert_eq!(slug("p99.9"), "p99_9");
        assert_eq!(slug("Acceptance rate (%)"), "acceptance_rate_pct");
        assert_eq!(scale_for("ttft_mean_ms", Some("s")), 1000.0);
        assert_eq!(scale_for("duration_s", Some("ms")), 0.001);
        assert_eq!(scale_for("request_throughput_req_s", Some("ms")), 1.0);
    }
}
