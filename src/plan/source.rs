//! Positions in plan files: byte spans become `file:line:col`, and a field inside a table's
//! span is located by its key so validation errors point at the value, not the table.

use std::fmt;
use std::ops::Range;

/// A position in a plan or commits file (1-based line and column).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Loc {
    pub file: String,
    pub line: usize,
    pub col: usize,
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.col)
    }
}

/// The text of one file, kept to turn byte offsets into lines and columns.
pub struct SourceFile {
    pub name: String,
    pub text: String,
    line_starts: Vec<usize>,
}

impl SourceFile {
    pub fn new(name: impl Into<String>, text: String) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        SourceFile {
            name: name.into(),
            text,
            line_starts,
        }
    }

    pub fn loc(&self, offset: usize) -> Loc {
        let offset = offset.min(self.text.len());
        let line = match self.line_starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i - 1,
        };
        let start = self.line_starts[line];
        // Columns count characters, not bytes, so they match what an editor shows.
        let col = self.text[start..offset].chars().count() + 1;
        Loc {
            file: self.name.clone(),
            line: line + 1,
            col,
        }
    }

    /// Start of line `line` (1-based), for files whose records are lines (JSONL).
    pub(crate) fn line_loc(&self, line: usize, col: usize) -> Loc {
        Loc {
            file: self.name.clone(),
            line,
            col: col.max(1),
        }
    }

    /// Where the value of `key` starts inside `span` (a table or a JSON object), if present.
    pub(crate) fn field_loc(&self, span: &Range<usize>, key: &str) -> Option<Loc> {
        let end = span.end.min(self.text.len());
        let start = span.start.min(end);
        let hay = &self.text[start..end];
        let mut from = 0;
        while let Some(pos) = hay[from..].find(key) {
            let at = from + pos;
            let before = hay[..at].chars().next_back();
            let after = &hay[at + key.len()..];
            let boundary_before =
                matches!(before, None | Some(' ' | '\t' | '\n' | '{' | ',' | '"'));
            let rest = after.trim_start_matches('"').trim_start();
            if boundary_before && (rest.starts_with('=') || rest.starts_with(':')) {
                let value = rest[1..].trim_start();
                let value_off = start + (hay.len() - value.len());
                return Some(self.loc(value_off));
            }
            from = at + key.len();
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_become_lines_and_columns() {
        let f = SourceFile::new("p.toml", "a = 1\nbb = \"é\"\n".into());
        assert_eq!(f.loc(0).to_string(), "p.toml:1:1");
        assert_eq!(f.loc(6).to_string(), "p.toml:2:1");
        assert_eq!(f.loc(11).to_string(), "p.toml:2:6");
    }

    #[test]
    fn fields_are_found_inside_a_span() {
        let text = "[[commits]]\ncommit = \"zz\"\nparent = \"abc\"\n".to_string();
        let f = SourceFile::new("p.toml", text.clone());
        let loc = f.field_loc(&(0..text.len()), "parent").unwrap();
        assert_eq!((loc.line, loc.col), (3, 10));
        assert!(f.field_loc(&(0..text.len()), "model").is_none());
        let json = SourceFile::new("c.jsonl", "{\"commit\": \"ab\", \"parent\": \"cd\"}".into());
        let loc = json.field_loc(&(0..33), "parent").unwrap();
        assert_eq!((loc.line, loc.col), (1, 28));
    }
}
