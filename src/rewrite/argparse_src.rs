//! The options a Python program defines, read from its source: every `add_argument(…)`
//! call with literal option strings, its `action`, `nargs` and literal `choices`. This is
//! how preflight knows what vLLM's scripts and server accepted at a commit it has only as
//! a git tree (no image to ask for `--help`): the parent of a PR that adds `xgrammar` to
//! `--guided-decoding-backend` lacks it, although both are the same release.
//!
//! Only what the source states literally is taken. A call whose keywords are spread from
//! a dict (`**kwargs`, vLLM ≥ 0.8's dataclass-driven arguments) names its option but not
//! its kind, so the set is marked incomplete: a missing option is then no evidence.

use super::flags::{Arity, FlagSet};
use std::collections::BTreeMap;

/// What one source file defines.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceOptions {
    pub set: FlagSet,
    /// The file adds the engine's arguments to its parser (`EngineArgs.add_cli_args`).
    pub engine_args: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Str(String),
    Name(String),
    Punct(char),
    /// `**`: keywords spread from a mapping.
    Spread,
    Other,
}

/// A tolerant tokenizer of Python: strings (any quote, prefix, triple), names, brackets,
/// comments skipped; adjacent string literals are joined as Python joins them.
fn tokens(src: &str) -> Vec<Tok> {
    let b = src.as_bytes();
    let mut out: Vec<Tok> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'#' {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if c.is_ascii_whitespace() || c == b'\\' {
            i += 1;
            continue;
        }
        // A string, with an optional prefix (r, b, u, f and pairs).
        let mut j = i;
        while j < b.len() && j - i < 2 && b"rRbBuUfF".contains(&b[j]) {
            j += 1;
        }
        if j < b.len() && (b[j] == b'"' || b[j] == b'\'') {
            let q = b[j];
            let triple = b.len() >= j + 3 && b[j + 1] == q && b[j + 2] == q;
            let open = if triple { 3 } else { 1 };
            let mut k = j + open;
            let start = k;
            let end;
            loop {
                if k >= b.len() {
                    end = b.len();
                    break;
                }
                if b[k] == b'\\' {
                    k += 2;
                    continue;
                }
                if b[k] == q && (!triple || (b.len() >= k + 3 && b[k + 1] == q && b[k + 2] == q)) {
                    end = k;
                    k += open;
                    break;
                }
                if !triple && b[k] == b'\n' {
                    end = k;
                    break;
                }
                k += 1;
            }
            let text = String::from_utf8_lossy(&b[start..end.min(b.len())]).into_owned();
            match out.last_mut() {
                Some(Tok::Str(prev)) => prev.push_str(&text),
                _ => out.push(Tok::Str(text)),
            }
            i = k.min(b.len());
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            let mut k = i;
            while k < b.len() && (b[k].is_ascii_alphanumeric() || b[k] == b'_') {
                k += 1;
            }
            out.push(Tok::Name(src[i..k].to_string()));
            i = k;
            continue;
        }
        if c == b'*' && b.get(i + 1) == Some(&b'*') {
            out.push(Tok::Spread);
            i += 2;
            continue;
        }
        if b"()[]{},=.".contains(&c) {
            out.push(Tok::Punct(c as char));
        } else if c.is_ascii() {
            out.push(Tok::Other);
        }
        i += 1;
    }
    out
}

/// The arguments of the call whose `(` is at `open`: each a slice of tokens, split at
/// top-level commas; and the index after the closing `)`.
fn call_args(t: &[Tok], open: usize) -> (Vec<&[Tok]>, usize) {
    let mut depth = 0usize;
    let mut args = Vec::new();
    let mut start = open + 1;
    let mut i = open;
    while i < t.len() {
        match t[i] {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']' | '}') => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    if start < i {
                        args.push(&t[start..i]);
                    }
                    return (args, i + 1);
                }
            }
            Tok::Punct(',') if depth == 1 => {
                args.push(&t[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    (args, t.len())
}

/// A literal list or tuple of strings (`['a', 'b']`), else `None`.
fn literal_strings(v: &[Tok]) -> Option<Vec<String>> {
    let (first, last) = (v.first()?, v.last()?);
    if !matches!(
        (first, last),
        (Tok::Punct('['), Tok::Punct(']')) | (Tok::Punct('('), Tok::Punct(')'))
    ) {
        return None;
    }
    let mut out = Vec::new();
    for tok in &v[1..v.len() - 1] {
        match tok {
            Tok::Str(s) => out.push(s.clone()),
            Tok::Punct(',') => {}
            _ => return None,
        }
    }
    Some(out)
}

/// The last name of a dotted expression (`argparse.BooleanOptionalAction` → its class).
fn last_name(v: &[Tok]) -> Option<&str> {
    match v {
        [Tok::Str(s)] => Some(s.as_str()),
        _ => v.iter().rev().find_map(|t| match t {
            Tok::Name(n) => Some(n.as_str()),
            _ => None,
        }),
    }
}

/// One `add_argument` call: its option names, arity, whether it takes `--no-` spellings,
/// its choices; `None` when its names are not literal (no evidence of what it defines).
struct Def {
    names: Vec<String>,
    arity: Arity,
    negatable: bool,
    choices: Option<Vec<String>>,
    spread: bool,
}

fn definition(args: &[&[Tok]]) -> Option<Def> {
    let mut def = Def {
        names: Vec::new(),
        arity: Arity::One,
        negatable: false,
        choices: None,
        spread: false,
    };
    let mut flag_action = false;
    let mut nargs: Option<Arity> = None;
    for a in args {
        match a {
            [Tok::Str(s)] => {
                if !s.starts_with('-') || s.contains('{') {
                    // A positional argument, or an f-string name: not an option we can name.
                    if s.starts_with('-') {
                        return None;
                    }
                    continue;
                }
                def.names.push(s.clone());
            }
            [Tok::Spread, ..] => def.spread = true,
            [Tok::Name(k), Tok::Punct('='), v @ ..] => match k.as_str() {
                "action" => {
                    let name = last_name(v).unwrap_or("");
                    flag_action = matches!(
                        name,
                        "store_true"
                            | "store_false"
                            | "store_const"
                            | "count"
                            | "help"
                            | "version"
                            | "BooleanOptionalAction"
                    );
                    def.negatable = name == "BooleanOptionalAction";
                }
                "nargs" => {
                    nargs = Some(match v {
                        [Tok::Str(s)] if s == "?" => Arity::Optional,
                        [Tok::Str(s)] if s == "*" || s == "+" => Arity::Many,
                        [Tok::Other] => Arity::One,
                        _ => Arity::Many,
                    })
                }
                "choices" => def.choices = literal_strings(v),
                _ => {}
            },
            _ => {}
        }
    }
    if def.names.is_empty() {
        return None;
    }
    def.arity = match (nargs, flag_action) {
        (Some(n), _) => n,
        (None, true) => Arity::Flag,
        (None, false) => Arity::One,
    };
    Some(def)
}

/// Every option `src` defines with `add_argument`; `None` when it defines none (a shim, a
/// file that is not a parser's).
pub fn read(src: &str) -> Option<SourceOptions> {
    let t = tokens(src);
    let mut options: BTreeMap<String, Arity> = BTreeMap::new();
    let mut choices: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut complete = true;
    let mut found = false;
    let mut engine_args = false;
    let mut i = 0;
    while i + 1 < t.len() {
        match (&t[i], &t[i + 1]) {
            (Tok::Name(n), Tok::Punct('(')) if n == "add_argument" => {
                found = true;
                let (args, next) = call_args(&t, i + 1);
                match definition(&args) {
                    Some(d) => {
                        complete &= !d.spread;
                        for name in &d.names {
                            let dashed = name.replace('_', "-");
                            options.insert(dashed.clone(), d.arity);
                            if let Some(c) = &d.choices {
                                choices.insert(dashed.clone(), c.clone());
                            }
                            if d.negatable {
                                if let Some(rest) = dashed.strip_prefix("--") {
                                    options.insert(format!("--no-{rest}"), Arity::Flag);
                                }
                            }
                        }
                    }
                    // A positional argument names nothing; a computed name is unknown.
                    None => {
                        complete &= args
                            .first()
                            .is_some_and(|a| matches!(a, [Tok::Str(s)] if !s.starts_with('-')));
                    }
                }
                i = next;
                continue;
            }
            (Tok::Name(n), Tok::Punct('('))
                if n == "add_cli_args" && !(i > 0 && t[i - 1] == Tok::Name("def".into())) =>
            {
                // `EngineArgs.add_cli_args(parser)`: the engine's options join this parser.
                // Any other module's adder brings options this file does not show.
                let owner = if i >= 2 { &t[i - 2] } else { &t[i] };
                match owner {
                    Tok::Name(o) if o.ends_with("EngineArgs") => engine_args = true,
                    _ => complete = false,
                }
            }
            (Tok::Name(n), Tok::Punct('('))
                if n.starts_with("add_")
                    && n.ends_with("_parser")
                    && !(i > 0 && t[i - 1] == Tok::Name("def".into())) =>
            {
                // `add_dataset_parser(parser)` and the like: options defined elsewhere.
                complete = false;
            }
            _ => {}
        }
        i += 1;
    }
    if !found || options.is_empty() {
        return None;
    }
    options.remove("-h");
    options.remove("--help");
    Some(SourceOptions {
        set: FlagSet {
            options,
            underscores: src.contains("FlexibleArgumentParser"),
            complete,
            choices,
        },
        engine_args,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENGINE_0_6_4: &str = r#"
class EngineArgs:
    @staticmethod
    def add_cli_args(parser: FlexibleArgumentParser) -> FlexibleArgumentParser:
        # Model arguments
        parser.add_argument(
            '--model',
            type=str,
            default=EngineArgs.model,
            help='Name or path of the huggingface model to use.')
        parser.add_argument('--skip-tokenizer-init',
                            action='store_true',
                            help='Skip initialization of tokenizer and detokenizer')
        parser.add_argument(
            '--guided-decoding-backend',
            type=str,
            default='outlines',
            choices=['outlines', 'lm-format-enforcer'],
            help='Which engine will be used for guided decoding'
            ' (JSON schema / regex etc) by default.')
        parser.add_argument('--enable-chunked-prefill',
                            action=StoreBoolean,
                            default=EngineArgs.enable_chunked_prefill,
                            nargs="?",
                            const="True",
                            help='If set, the prefill requests can be chunked.')
        parser.add_argument("--enable-prefix-caching",
                            action=argparse.BooleanOptionalAction,
                            help="Use --no-enable-prefix-caching to disable.")
        parser.add_argument('-tp', '--tensor-parallel-size', type=int)
        parser.add_argument("--ignore-patterns", action="append", type=str)
        parser.add_argument('--served-model-name', nargs="+", type=str)
        # parser.add_argument('--commented-out')
        x = "add_argument('--in-a-string')"
        return parser
"#;

    #[test]
    fn reads_literal_definitions() {
        let o = read(ENGINE_0_6_4).unwrap();
        let s = &o.set;
        assert!(s.complete && s.underscores && !o.engine_args);
        assert_eq!(s.arity("--model"), Some(Arity::One));
        assert_eq!(s.arity("--skip-tokenizer-init"), Some(Arity::Flag));
        assert_eq!(s.arity("--enable-chunked-prefill"), Some(Arity::Optional));
        assert_eq!(s.arity("--enable-prefix-caching"), Some(Arity::Flag));
        assert_eq!(s.arity("--no-enable-prefix-caching"), Some(Arity::Flag));
        assert_eq!(s.arity("-tp"), Some(Arity::One));
        assert_eq!(s.arity("--tensor-parallel-size"), Some(Arity::One));
        assert_eq!(s.arity("--ignore-patterns"), Some(Arity::One));
        assert_eq!(s.arity("--served-model-name"), Some(Arity::Many));
        assert_eq!(
            s.choices["--guided-decoding-backend"],
            vec!["outlines", "lm-format-enforcer"]
        );
        assert!(!s.accepts("--commented-out") && !s.accepts("--in-a-string"));
        assert_eq!(s.options.len(), 10);
    }

    #[test]
    fn spread_keywords_make_the_set_incomplete() {
        let src = r#"
        model_group.add_argument("--model", **model_kwargs["model"])
        model_group.add_argument("--enable-prefix-caching", **cache_kwargs["enable_prefix_caching"])
        parser.add_argument("--disable-log-stats", action="store_true")
"#;
        let s = read(src).unwrap().set;
        assert!(!s.complete);
        assert!(s.accepts("--model") && s.accepts("--disable-log-stats"));
        // Its kind is not in the source: no `--no-` spelling is claimed either way.
        assert!(!s.accepts("--no-enable-prefix-caching"));
    }

    #[test]
    fn a_script_adding_the_engine_args_says_so() {
        let src = r#"
if __name__ == "__main__":
    parser = FlexibleArgumentParser(description="Benchmark the latency.")
    parser.add_argument('--input-len', type=int, default=32)
    parser.add_argument('--profile', action='store_true')
    parser = EngineArgs.add_cli_args(parser)
"#;
        let o = read(src).unwrap();
        assert!(o.engine_args && o.set.complete);
        assert_eq!(o.set.arity("--profile"), Some(Arity::Flag));
    }

    #[test]
    fn options_defined_elsewhere_make_it_incomplete() {
        let src = "parser.add_argument('--seed', type=int)\nadd_dataset_parser(parser)\n";
        assert!(!read(src).unwrap().set.complete);
        let src = "parser.add_argument('--seed', type=int)\nServeArgs.add_cli_args(parser)\n";
        assert!(!read(src).unwrap().set.complete);
    }

    #[test]
    fn shims_and_other_files_define_nothing() {
        assert!(read("print('moved to vllm bench serve')\nsys.exit(1)\n").is_none());
        assert!(read("").is_none());
        // Unterminated strings and brackets end the scan, never panic.
        assert!(
            read("parser.add_argument('--a").is_none()
                || read("parser.add_argument('--a").is_some()
        );
        let _ = read("add_argument(((((\"\"\"");
    }

    #[test]
    fn positionals_do_not_break_completeness() {
        let src = "p.add_argument('model_tag', type=str)\np.add_argument('--port', type=int)\n";
        let s = read(src).unwrap().set;
        assert!(s.complete && s.accepts("--port") && !s.accepts("model_tag"));
        let computed = "p.add_argument(f'--{name}', type=int)\np.add_argument('--port')\n";
        assert!(!read(computed).unwrap().set.complete);
    }
}
