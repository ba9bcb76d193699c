//! The lines that tell most about a failure no signature explains: the final line of the
//! last traceback (what the process died of) and the first ERROR line (where things first
//! went wrong). An operator reads these two before opening the whole log.

/// Bounded state: two lines and whether a traceback is open.
#[derive(Debug, Clone, Default)]
pub(crate) struct Telling {
    in_traceback: bool,
    last_final: Option<String>,
}

impl Telling {
    /// One line: `traceback_start` for `Traceback (most recent call last):`, `exception`
    /// for an `XxxError: …` line, `noise` for lines that are consequences, not causes.
    pub(crate) fn observe(
        &mut self,
        traceback_start: bool,
        exception: bool,
        noise: bool,
        raw: impl FnOnce() -> String,
    ) {
        if traceback_start {
            self.in_traceback = true;
        } else if exception && self.in_traceback {
            // The exception that ends the traceback; a chained one opens another.
            self.in_traceback = false;
            if !noise {
                self.last_final = Some(raw());
            }
        }
    }

    /// The telling lines, most telling first, without repeats and without `evidence`
    /// (already shown).
    pub(crate) fn lines(&self, first_error: Option<&str>, evidence: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::with_capacity(2);
        for l in [self.last_final.as_deref(), first_error]
            .into_iter()
            .flatten()
        {
            if l != evidence && !out.iter().any(|o| o == l) {
                out.push(l.to_string());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn final_line_of_the_last_traceback_and_first_error() {
        let mut t = Telling::default();
        t.observe(true, false, false, || unreachable!());
        t.observe(false, true, false, || "ValueError: first".into());
        t.observe(false, true, false, || "KeyError: not in a traceback".into());
        t.observe(true, false, false, || unreachable!());
        t.observe(false, true, true, || "KeyboardInterrupt: noise".into());
        t.observe(true, false, false, || unreachable!());
        t.observe(false, true, false, || "RuntimeError: last".into());
        assert_eq!(
            t.lines(Some("ERROR 01-01 boom"), "ValueError: first"),
            vec![
                "RuntimeError: last".to_string(),
                "ERROR 01-01 boom".to_string()
            ]
        );
        assert_eq!(
            t.lines(Some("RuntimeError: last"), "x"),
            vec!["RuntimeError: last"]
        );
        assert!(Telling::default().lines(None, "x").is_empty());
    }
}
