//! The line prefix a result block carries, learned from its header.
//!
//! Known prefixes are peeled in `line`, and known labels are found behind any prefix by
//! their vocabulary (`label::after_prefix`). What remains is a label nobody listed (a new
//! version's `Peak concurrent requests:`) behind a prefix nobody listed (`E       `,
//! `svc run-test: `). The header line `===== Serving Benchmark Result =====` shows that
//! prefix plainly: everything before its `==`. The lines of the block come from the same
//! print loop through the same logger, so they carry a prefix of the same *shape*: the
//! same number of words, each with the same run of character classes (a clock that moved
//! on, a pid, a line number of another width still match). Stripping that shape leaves
//! the label as printed.

/// A word's shape: upper-case letters → `A`, lower-case → `a`, digits → `9`, anything else
/// kept; runs collapsed. `21:59:25` and `07:01:09` share one, `INFO` and `ERROR` too.
fn shape(word: &str) -> String {
    let mut out = String::with_capacity(word.len());
    for c in word.chars() {
        let class = if c.is_uppercase() {
            'A'
        } else if c.is_lowercase() {
            'a'
        } else if c.is_ascii_digit() {
            '9'
        } else {
            c
        };
        if !out.ends_with(class) {
            out.push(class);
        }
    }
    out
}

/// The prefix of a block's header line, as shapes.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Learned {
    /// One shape per whitespace-separated word of the prefix.
    words: Vec<String>,
    /// The shape of a last word glued to the frame (`[rank0]:=====`, `INFO:root:=====`).
    glued: Option<String>,
    /// The header was a log record (its logger header was peeled).
    pub log_record: bool,
}

impl Learned {
    /// Learns from the text before a header's `==` (already cleaned and trimmed at start).
    pub(crate) fn from_prefix(prefix: &str, log_record: bool) -> Self {
        let mut words: Vec<String> = prefix.split_whitespace().map(shape).collect();
        let glued = if prefix.ends_with(char::is_whitespace) {
            None
        } else {
            words.pop()
        };
        Learned {
            words,
            glued,
            log_record,
        }
    }

    /// `text` without the learned prefix, when its first words have the learned shapes;
    /// `None` when this line carries another prefix (a different process, a server log).
    pub(crate) fn strip<'t>(&self, text: &'t str) -> Option<&'t str> {
        let mut rest = text.trim_start();
        for want in &self.words {
            let end = rest.find(char::is_whitespace)?;
            if shape(&rest[..end]) != *want {
                return None;
            }
            rest = rest[end..].trim_start();
        }
        if let Some(want) = &self.glued {
            // The glued word ends at a separator; find the one that gives the same shape.
            let word_end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            let cut = rest[..word_end]
                .char_indices()
                .filter(|(_, c)| !c.is_alphanumeric())
                .map(|(i, c)| i + c.len_utf8())
                .find(|&i| shape(&rest[..i]) == *want)?;
            rest = &rest[cut..];
        }
        Some(rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_ignore_what_varies_per_line() {
        assert_eq!(shape("21:59:25"), shape("07:01:09"));
        assert_eq!(shape("bench.py:812"), shape("x.py:9"));
        assert_eq!(shape("INFO"), shape("ERROR"));
        assert_ne!(shape("E"), shape("Successful"));
    }

    #[test]
    fn strips_same_shaped_prefixes_only() {
        let l = Learned::from_prefix("E       ", false);
        assert_eq!(
            l.strip("E       Peak concurrent requests: 3"),
            Some("Peak concurrent requests: 3")
        );
        assert_eq!(l.strip("Successful requests: 3"), None);

        let l = Learned::from_prefix("svc run-test: 12:00:01 ", false);
        assert_eq!(
            l.strip("svc run-test: 12:00:09 Accept length: 2.1"),
            Some("Accept length: 2.1")
        );

        let l = Learned::from_prefix("[rank0]:", false);
        assert_eq!(
            l.strip("[rank3]:Accept length: 2.1"),
            Some("Accept length: 2.1")
        );
        assert_eq!(l.strip("Accept length: 2.1"), None);

        let l = Learned::from_prefix("", false);
        assert_eq!(l.strip("  Accept length: 2.1"), Some("Accept length: 2.1"));
    }
}
