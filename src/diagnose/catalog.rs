//! The signature catalog: data (catalog.toml, embedded), extended or overridden by the
//! operator's own TOML without recompiling.

use super::DataError;
use crate::category::Category;
use crate::model::Stream;
use regex::{Regex, RegexSet};

/// Room for the signature set's lazy DFA (see `rebuild_set`).
const DFA_CACHE_BYTES: usize = 8 << 20;
/// Patterns one signature may list: the built-ins use at most a dozen; thousands are a
/// generated file gone wrong, and each costs every log line of the night.
const MAX_REGEX_PER_SIGNATURE: usize = 256;
/// Patterns of all signatures together (the built-ins list about 225): each one is run on
/// every log line of the night, and compiling tens of thousands takes minutes.
const MAX_REGEX_TOTAL: usize = 1024;
use serde::Deserialize;
use toml::Spanned;

const BUILTIN: &str = include_str!("catalog.toml");

/// Which of a signature's matching lines becomes the evidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum EvidencePick {
    /// The uncaught (bare) exception line of a process if one matched, else the first
    /// exception line (`XxxError: …` behind a logger prefix), else the first match.
    #[default]
    Root,
    First,
    Last,
}

/// One compiled signature.
#[derive(Debug, Clone)]
pub struct Signature {
    pub name: String,
    pub category: Category,
    pub priority: i32,
    pub streams: Vec<Stream>,
    pub regex: Vec<Regex>,
    pub exclude: Vec<Regex>,
    pub after: Option<Regex>,
    pub evidence: EvidencePick,
    pub symptom: bool,
    /// How sure a match of this signature is, when it is not the usual for its kind (a
    /// wording that more than one failure prints): below `confidence::LOW`
    /// the policy treats the diagnosis like `other`.
    pub confidence: Option<f32>,
    pub recipe: Option<String>,
    pub description: String,
}

impl Signature {
    pub(crate) fn trusts(&self, stream: Stream) -> bool {
        self.streams.is_empty() || self.streams.contains(&stream)
    }
}

/// The compiled catalog. Cheap to share (`Arc<Catalog>`) between scanners.
#[derive(Debug, Clone)]
pub struct Catalog {
    pub(crate) signatures: Vec<Signature>,
    pub(crate) noise: Vec<Regex>,
    pub(crate) startup_complete: Vec<Regex>,
    pub(crate) graph_progress: Vec<Regex>,
    pub(crate) graph_done: Vec<Regex>,
    /// All positive regexes of all signatures, for a one-pass prefilter per line.
    pub(crate) set: RegexSet,
    /// `set` index → signature index.
    pub(crate) set_owner: Vec<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCatalog {
    noise: Option<Vec<Spanned<String>>>,
    startup_complete: Option<Vec<Spanned<String>>>,
    graph_capture_progress: Option<Vec<Spanned<String>>>,
    graph_capture_done: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    signature: Vec<Spanned<RawSignature>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSignature {
    name: String,
    category: Option<Category>,
    priority: Option<i32>,
    streams: Option<Vec<Stream>>,
    regex: Option<Vec<Spanned<String>>>,
    exclude: Option<Vec<Spanned<String>>>,
    after: Option<Spanned<String>>,
    evidence: Option<EvidencePick>,
    symptom: Option<bool>,
    confidence: Option<Spanned<f32>>,
    recipe: Option<String>,
    description: Option<String>,
    #[serde(default)]
    disabled: bool,
}

struct Ctx<'a> {
    text: &'a str,
    origin: &'a str,
}

impl Ctx<'_> {
    fn err(&self, offset: usize, message: impl Into<String>) -> DataError {
        DataError::at(self.origin, self.text, offset, message)
    }
    fn regex(&self, s: &Spanned<String>) -> Result<Regex, DataError> {
        Regex::new(s.get_ref()).map_err(|e| {
            // Regex errors span several lines; keep the operator's view compact.
            let msg = e
                .to_string()
                .lines()
                .last()
                .unwrap_or("")
                .trim()
                .to_string();
            self.err(
                s.span().start,
                format!("invalid regex `{}`: {msg}", s.get_ref()),
            )
        })
    }
    fn regexes(&self, v: &[Spanned<String>]) -> Result<Vec<Regex>, DataError> {
        v.iter().map(|s| self.regex(s)).collect()
    }
}

impl Catalog {
    /// The catalog shipped inside the binary.
    pub fn builtin() -> Self {
        // Compiled once per process: the signature set takes ~100 ms to build, and a sweep's
        // start asks for the built-ins several times (overrides, engine, predictions).
        // Clones share the compiled regexes.
        static BUILTIN_CATALOG: std::sync::OnceLock<Catalog> = std::sync::OnceLock::new();
        BUILTIN_CATALOG
            .get_or_init(|| {
                Self::empty()
                    .with_overrides(BUILTIN, "builtin:catalog.toml")
                    .expect("built-in catalog is valid")
            })
            .clone()
    }

    fn empty() -> Self {
        Catalog {
            signatures: Vec::new(),
            noise: Vec::new(),
            startup_complete: Vec::new(),
            graph_progress: Vec::new(),
            graph_done: Vec::new(),
            set: RegexSet::empty(),
            set_owner: Vec::new(),
        }
    }

    /// Applies an operator's TOML on top: a `[[signature]]` with a known `name` replaces
    /// the fields it sets (`disabled = true` removes it), a new name adds a signature;
    /// top-level lists (`noise`, `startup_complete`, …) replace the built-in lists.
    /// Errors name `origin:line:col`.
    pub fn with_overrides(mut self, toml_text: &str, origin: &str) -> Result<Self, DataError> {
        let cx = Ctx {
            text: toml_text,
            origin,
        };
        let raw: RawCatalog = toml::from_str(toml_text).map_err(|e| {
            let off = e.span().map(|s| s.start).unwrap_or(0);
            cx.err(off, e.message().to_string())
        })?;
        if let Some(v) = raw.noise {
            self.noise = cx.regexes(&v)?;
        }
        if let Some(v) = raw.startup_complete {
            self.startup_complete = cx.regexes(&v)?;
        }
        if let Some(v) = raw.graph_capture_progress {
            self.graph_progress = cx.regexes(&v)?;
        }
        if let Some(v) = raw.graph_capture_done {
            self.graph_done = cx.regexes(&v)?;
        }
        for spanned in raw.signature {
            let at = spanned.span().start;
            let r = spanned.into_inner();
            let pos = self.signatures.iter().position(|s| s.name == r.name);
            if r.disabled {
                match pos {
                    Some(i) => {
                        self.signatures.remove(i);
                        continue;
                    }
                    None => {
                        return Err(
                            cx.err(at, format!("cannot disable unknown signature `{}`", r.name))
                        )
                    }
                }
            }
            let mut sig = match pos {
                Some(i) => self.signatures[i].clone(),
                None => {
                    let category = r.category.ok_or_else(|| {
                        cx.err(at, format!("new signature `{}` needs a `category`", r.name))
                    })?;
                    if r.regex.as_ref().is_none_or(|v| v.is_empty()) {
                        return Err(cx.err(
                            at,
                            format!("new signature `{}` needs at least one `regex`", r.name),
                        ));
                    }
                    Signature {
                        name: r.name.clone(),
                        category,
                        priority: 50,
                        streams: Vec::new(),
                        regex: Vec::new(),
                        exclude: Vec::new(),
                        after: None,
                        evidence: EvidencePick::Root,
                        symptom: false,
                        confidence: None,
                        recipe: None,
                        description: String::new(),
                    }
                }
            };
            if let Some(c) = r.category {
                sig.category = c;
            }
            if let Some(p) = r.priority {
                sig.priority = p;
            }
            if let Some(s) = r.streams {
                sig.streams = s;
            }
            if let Some(v) = r.regex {
                if v.len() > MAX_REGEX_PER_SIGNATURE {
                    return Err(cx.err(
                        at,
                        format!(
                            "signature `{}` lists {} regexes; at most {MAX_REGEX_PER_SIGNATURE} (each is run on every log line)",
                            r.name,
                            v.len()
                        ),
                    ));
                }
                if v.is_empty() {
                    return Err(cx.err(
                        at,
                        format!("signature `{}` needs at least one `regex`", r.name),
                    ));
                }
                // Counted before anything compiles, so a generated file gone wrong is
                // refused at once.
                let others: usize = self
                    .signatures
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| Some(*i) != pos)
                    .map(|(_, s)| s.regex.len())
                    .sum();
                if others + v.len() > MAX_REGEX_TOTAL {
                    return Err(cx.err(
                        at,
                        format!(
                            "signature `{}` brings the catalog to {} regexes; at most {MAX_REGEX_TOTAL} in all (each is run on every log line)",
                            r.name,
                            others + v.len()
                        ),
                    ));
                }
                sig.regex = cx.regexes(&v)?;
            }
            if let Some(v) = r.exclude {
                sig.exclude = cx.regexes(&v)?;
            }
            if let Some(a) = r.after {
                sig.after = if a.get_ref().is_empty() {
                    None
                } else {
                    Some(cx.regex(&a)?)
                };
            }
            if let Some(e) = r.evidence {
                sig.evidence = e;
            }
            if let Some(s) = r.symptom {
                sig.symptom = s;
            }
            if let Some(c) = r.confidence {
                let v = *c.get_ref();
                if !(0.0..=1.0).contains(&v) {
                    return Err(cx.err(
                        c.span().start,
                        format!("`confidence` of `{}` must be within 0..=1, not {v}", r.name),
                    ));
                }
                sig.confidence = Some(v);
            }
            if let Some(rc) = r.recipe {
                sig.recipe = if rc.is_empty() { None } else { Some(rc) };
            }
            if let Some(d) = r.description {
                sig.description = d;
            }
            match pos {
                Some(i) => self.signatures[i] = sig,
                None => self.signatures.push(sig),
            }
        }
        self.rebuild_set().map_err(|e| {
            cx.err(
                0,
                format!("the signatures together do not compile into one set: {e}"),
            )
        })?;
        Ok(self)
    }

    fn rebuild_set(&mut self) -> Result<(), regex::Error> {
        let mut pats = Vec::new();
        let mut owner = Vec::new();
        for (i, s) in self.signatures.iter().enumerate() {
            for r in &s.regex {
                // Unicode word boundaries keep the regex crate off its DFAs (it falls back
                // to the PikeVM, 10× slower on every log line); log text is ASCII where
                // boundaries matter, so the set uses ASCII ones.
                pats.push(r.as_str().replace(r"\b", r"(?-u:\b)"));
                owner.push(i);
            }
        }
        // The lazy DFA's default 2 MiB cache thrashes on this many patterns with bounded
        // repeats (`.{0,200}`) and case folding: it gives up and the PikeVM runs instead,
        // 0.6 MB/s against 215 MB/s with 3 MiB or more (measured on request-log lines); 8 MiB
        // leaves room for more varied text. The cache only grows to the states visited.
        // Each pattern compiled on its own; together they may still pass the set's size
        // limit (an operator's catalog of thousands): an error, never a panic.
        self.set = regex::RegexSetBuilder::new(&pats)
            .dfa_size_limit(DFA_CACHE_BYTES)
            .build()?;
        self.set_owner = owner;
        Ok(())
    }

    pub fn signatures(&self) -> &[Signature] {
        &self.signatures
    }

    pub fn signature(&self, name: &str) -> Option<&Signature> {
        self.signatures.iter().find(|s| s.name == name)
    }

    pub(crate) fn is_noise(&self, clean: &str) -> bool {
        self.noise.iter().any(|r| r.is_match(clean))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_parses_and_names_are_unique() {
        let c = Catalog::builtin();
        assert!(c.signatures.len() > 20);
        let mut names: Vec<_> = c.signatures.iter().map(|s| &s.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), c.signatures.len());
        assert!(!c.startup_complete.is_empty() && !c.graph_progress.is_empty());
    }

    #[test]
    fn overrides_replace_add_and_disable() {
        let c = Catalog::builtin()
            .with_overrides(
                r#"
[[signature]]
name = "cuda_oom"
priority = 5

[[signature]]
name = "my_thing"
category = "other"
regex = ['frobnicator exploded']

[[signature]]
name = "broken_pipe"
disabled = true
"#,
                "ops.toml",
            )
            .unwrap();
        assert_eq!(c.signature("cuda_oom").unwrap().priority, 5);
        assert!(!c.signature("cuda_oom").unwrap().regex.is_empty());
        assert_eq!(c.signature("my_thing").unwrap().category, Category::Other);
        assert!(c.signature("broken_pipe").is_none());
    }

    #[test]
    fn the_catalog_as_a_whole_is_bounded_before_anything_compiles() {
        let sig = |j: usize, n: usize| {
            let list: Vec<String> = (0..n).map(|i| format!("'z{j}_{i}'")).collect();
            format!(
                "[[signature]]\nname = \"s{j}\"\ncategory = \"other\"\nregex = [{}]\n",
                list.join(",")
            )
        };
        // Three of 200 fit beside the built-ins; a fifth brings the whole past 1,024.
        let ok: String = (0..3).map(|j| sig(j, 200)).collect();
        assert!(Catalog::builtin().with_overrides(&ok, "ops.toml").is_ok());
        let many: String = (0..5).map(|j| sig(j, 200)).collect();
        let e = Catalog::builtin()
            .with_overrides(&many, "ops.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("at most 1024 in all"), "{e}");
        assert!(e.starts_with("ops.toml:"), "{e}");
    }

    #[test]
    fn errors_name_origin_line_and_column() {
        let e = Catalog::builtin()
            .with_overrides(
                "\n[[signature]]\nname = \"x\"\ncategory = \"nope\"\nregex = ['a']\n",
                "ops.toml",
            )
            .unwrap_err();
        let s = e.to_string();
        assert!(s.starts_with("ops.toml:4:"), "{s}");
        assert!(s.contains("nope"), "{s}");

        let e = Catalog::builtin()
            .with_overrides(
                "[[signature]]\nname = \"x\"\ncategory = \"other\"\nregex = ['(unclosed']\n",
                "ops.toml",
            )
            .unwrap_err();
        assert!(e.to_string().starts_with("ops.toml:4:"), "{e}");
        assert!(e.to_string().contains("invalid regex"), "{e}");

        let e = Catalog::builtin()
            .with_overrides("[[signature]]\nname = \"x\"\nregex = ['a']\n", "ops.toml")
            .unwrap_err();
        assert!(e.to_string().contains("needs a `category`"), "{e}");

        let e = Catalog::builtin()
            .with_overrides(
                "[[signature]]\nname = \"cuda_oom\"\nbogus = 1\n",
                "ops.toml",
            )
            .unwrap_err();
        assert!(e.to_string().starts_with("ops.toml:3:"), "{e}");

        let e = Catalog::builtin()
            .with_overrides(
                "[[signature]]\nname = \"cuda_oom\"\nconfidence = 1.5\n",
                "ops.toml",
            )
            .unwrap_err();
        assert!(e.to_string().starts_with("ops.toml:3:"), "{e}");
        assert!(e.to_string().contains("0..=1"), "{e}");
    }
}
