//! Python's argparse, as far as vLLM's entry points exercise it (Python 3.12 behaviour):
//! long options with `=` or a following value, unique-prefix abbreviations
//! (`allow_abbrev=True`) and the ambiguity error, short options with a glued value
//! (`-O3`), `store_true`, `nargs='?'`/`'+'`/`'*'`, `BooleanOptionalAction`, one
//! positional, `choices`, int/float conversion, required options, `-h/--help` in argparse's
//! layout (78 columns, help at column 24), and the error protocol: usage on stderr, then
//! `PROG: error: MSG`, exit 2. vLLM's `FlexibleArgumentParser` (v0.5.1+) is `flexible`:
//! `--foo_bar` is read as `--foo-bar`.

mod help;
mod types;

pub use types::*;

pub struct Parser {
    pub prog: String,
    pub description: String,
    pub args: Vec<Arg>,
    pub flexible: bool,
}

/// A recognised option token: (argument index, `--no-` form, value glued with `=`/short).
type Hit = (usize, bool, Option<String>);

/// Why parsing stopped: `Exit(code)` after printing help (0) or an error (2).
pub type Res<T> = Result<T, i32>;

impl Parser {
    pub fn new(prog: &str, description: &str, args: Vec<Arg>, flexible: bool) -> Parser {
        Parser {
            prog: prog.into(),
            description: description.into(),
            args,
            flexible,
        }
    }

    /// Prints usage and `PROG: error: MSG` to stderr; returns exit status 2.
    pub fn error(&self, msg: &str) -> i32 {
        eprintln!("{}", self.usage());
        eprintln!("{}: error: {msg}", self.prog);
        2
    }

    pub fn parse(&self, argv: &[String]) -> Res<Ns> {
        let (ns, extra) = self.parse_known(argv)?;
        if !extra.is_empty() {
            return Err(self.error(&format!("unrecognized arguments: {}", extra.join(" "))));
        }
        Ok(ns)
    }

    fn lookup(&self, s: &str) -> Option<(usize, bool)> {
        for (i, a) in self.args.iter().enumerate() {
            if a.kind == Kind::Pos {
                continue;
            }
            for n in a.strings() {
                if n == s {
                    return Some((i, !a.names.contains(&n)));
                }
            }
        }
        None
    }

    /// Classifies an option token: Ok(Some((arg, negated, explicit value))) or Ok(None) for
    /// an unknown option; Err on ambiguity.
    fn classify(&self, tok: &str) -> Res<Option<Hit>> {
        if let Some(hit) = self.lookup(tok) {
            return Ok(Some((hit.0, hit.1, None)));
        }
        if let Some((k, v)) = tok.split_once('=') {
            if let Some(hit) = self.lookup(k) {
                return Ok(Some((hit.0, hit.1, Some(v.to_string()))));
            }
        }
        let mut hits: Vec<(usize, bool, Option<String>, String)> = Vec::new();
        if tok.starts_with("--") {
            let (prefix, explicit) = match tok.split_once('=') {
                Some((k, v)) => (k, Some(v.to_string())),
                None => (tok, None),
            };
            for (i, a) in self.args.iter().enumerate() {
                for n in a.strings() {
                    if a.kind != Kind::Pos && n.starts_with(prefix) {
                        hits.push((i, !a.names.contains(&n), explicit.clone(), n));
                    }
                }
            }
        } else if tok.len() > 2 {
            let (short, glued) = tok.split_at(2);
            for (i, a) in self.args.iter().enumerate() {
                for n in a.strings() {
                    if a.kind == Kind::Pos {
                        continue;
                    }
                    if n == short {
                        hits.push((i, false, Some(glued.to_string()), n));
                    } else if n.starts_with(tok) {
                        hits.push((i, false, None, n));
                    }
                }
            }
        }
        match hits.len() {
            0 => Ok(None),
            1 => {
                let (i, neg, v, _) = hits.remove(0);
                Ok(Some((i, neg, v)))
            }
            _ => {
                let names: Vec<String> = hits.into_iter().map(|h| h.3).collect();
                Err(self.error(&format!(
                    "ambiguous option: {tok} could match {}",
                    names.join(", ")
                )))
            }
        }
    }

    fn convert(&self, a: &Arg, name: &str, raw: &str) -> Res<Val> {
        let v = match a.ty {
            Ty::Str => Val::Str(raw.to_string()),
            Ty::Int => match raw.trim().parse::<i64>() {
                Ok(i) => Val::Int(i),
                Err(_) => {
                    return Err(self.error(&format!(
                        "argument {}: invalid int value: {}",
                        arg_label(a, name),
                        py_str(raw)
                    )))
                }
            },
            Ty::Float => match parse_py_float(raw) {
                Some(f) => Val::Float(f),
                None => {
                    return Err(self.error(&format!(
                        "argument {}: invalid float value: {}",
                        arg_label(a, name),
                        py_str(raw)
                    )))
                }
            },
        };
        if let Some(c) = &a.choices {
            if !c.iter().any(|c| c == raw) {
                let list: Vec<String> = c.iter().map(|c| py_str(c)).collect();
                return Err(self.error(&format!(
                    "argument {}: invalid choice: {} (choose from {})",
                    arg_label(a, name),
                    py_str(raw),
                    list.join(", ")
                )));
            }
        }
        Ok(v)
    }

    /// argparse's `parse_known_args`: the namespace and the tokens nobody claimed.
    pub fn parse_known(&self, argv: &[String]) -> Res<(Ns, Vec<String>)> {
        let argv: Vec<String> = argv
            .iter()
            .map(|a| if self.flexible { flex(a) } else { a.clone() })
            .collect();
        if argv.iter().take_while(|a| *a != "--").any(|a| {
            a == "-h"
                || a == "--help"
                || (a.len() > 2 && "--help".starts_with(a.as_str()) && self.lookup_prefix_free(a))
        }) {
            print!("{}", self.help());
            return Err(0);
        }
        // Classify every token first, as argparse does ('O' option, 'A' argument).
        let has_neg_like = self
            .args
            .iter()
            .any(|a| a.names.iter().any(|n| is_negative_number(n)));
        let mut classes: Vec<Option<Option<Hit>>> = Vec::new();
        let mut after_dd = false;
        for a in &argv {
            if after_dd {
                classes.push(None);
            } else if a == "--" {
                after_dd = true;
                classes.push(None);
            } else if a.starts_with('-')
                && a.len() > 1
                && (!is_negative_number(a) || has_neg_like)
                && !a.contains(' ')
            {
                classes.push(Some(self.classify(a)?));
            } else {
                classes.push(None);
            }
        }
        let mut ns = Ns::default();
        for a in &self.args {
            ns.items.push((a.dest.clone(), a.default.clone()));
        }
        let mut extras = Vec::new();
        let mut positionals = self.args.iter().filter(|a| a.kind == Kind::Pos);
        let mut i = 0;
        while i < argv.len() {
            let tok = &argv[i];
            match &classes[i] {
                None => {
                    if tok == "--" && !after_dd_before(&argv, i) {
                        i += 1;
                        continue;
                    }
                    match positionals.next() {
                        Some(p) => {
                            let v = self.convert(p, &p.dest, tok)?;
                            ns.set(&p.dest, v);
                            ns.given.push(p.dest.clone());
                        }
                        None => extras.push(tok.clone()),
                    }
                    i += 1;
                }
                Some(None) => {
                    extras.push(tok.clone());
                    i += 1;
                }
                Some(Some((ai, neg, explicit))) => {
                    let a = &self.args[*ai];
                    let name = tok.split('=').next().unwrap_or(tok).to_string();
                    i += 1;
                    // Following plain arguments this option may take.
                    let mut avail = Vec::new();
                    let mut j = i;
                    while j < argv.len() && classes[j].is_none() && argv[j] != "--" {
                        avail.push(argv[j].clone());
                        j += 1;
                    }
                    let val = match a.kind {
                        Kind::True | Kind::BoolOpt => {
                            if let Some(x) = explicit {
                                return Err(self.error(&format!(
                                    "argument {}: ignored explicit argument {}",
                                    arg_label(a, &name),
                                    py_str(x)
                                )));
                            }
                            Val::Bool(!neg)
                        }
                        Kind::OptBool => {
                            match explicit.clone().or_else(|| avail.first().cloned()) {
                                Some(x) => {
                                    if explicit.is_none() {
                                        i += 1;
                                    }
                                    Val::Bool(x.to_lowercase() == "true")
                                }
                                None => Val::Bool(true),
                            }
                        }
                        Kind::Store | Kind::Pos => {
                            let raw = match explicit {
                                Some(x) => x.clone(),
                                None => match avail.first() {
                                    Some(x) => {
                                        i += 1;
                                        x.clone()
                                    }
                                    None => {
                                        return Err(self.error(&format!(
                                            "argument {}: expected one argument",
                                            arg_label(a, &name)
                                        )))
                                    }
                                },
                            };
                            self.convert(a, &name, &raw)?
                        }
                        Kind::Plus | Kind::Star => {
                            let mut vals = Vec::new();
                            if let Some(x) = explicit {
                                vals.push(x.clone());
                            } else {
                                vals.extend(avail.iter().cloned());
                                i += avail.len();
                            }
                            if vals.is_empty() && a.kind == Kind::Plus {
                                return Err(self.error(&format!(
                                    "argument {}: expected at least one argument",
                                    arg_label(a, &name)
                                )));
                            }
                            for v in &vals {
                                self.convert(a, &name, v)?;
                            }
                            Val::List(vals)
                        }
                    };
                    ns.set(&a.dest, val);
                    ns.given.push(a.dest.clone());
                }
            }
        }
        let missing: Vec<String> = self
            .args
            .iter()
            .filter(|a| a.required && !ns.given(&a.dest))
            .map(|a| {
                if a.kind == Kind::Pos {
                    a.dest.clone()
                } else {
                    a.names.join("/")
                }
            })
            .collect();
        if !missing.is_empty() {
            return Err(self.error(&format!(
                "the following arguments are required: {}",
                missing.join(", ")
            )));
        }
        Ok((ns, extras))
    }

    /// `--he` abbreviates `--help` only if no other option starts with it.
    fn lookup_prefix_free(&self, tok: &str) -> bool {
        tok.starts_with("--")
            && !self
                .args
                .iter()
                .any(|a| a.strings().iter().any(|n| n.starts_with(tok)))
    }
}

fn after_dd_before(argv: &[String], i: usize) -> bool {
    argv[..i].iter().any(|a| a == "--")
}

fn arg_label(a: &Arg, _used: &str) -> String {
    if a.kind == Kind::Pos {
        a.dest.clone()
    } else {
        a.names.join("/")
    }
}

fn is_negative_number(s: &str) -> bool {
    s.strip_prefix('-')
        .map(|r| {
            !r.is_empty()
                && r.parse::<f64>().is_ok()
                && r.chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_digit() || c == '.')
        })
        .unwrap_or(false)
}

fn parse_py_float(s: &str) -> Option<f64> {
    let t = s.trim().to_lowercase();
    match t.as_str() {
        "inf" | "+inf" | "infinity" => Some(f64::INFINITY),
        "-inf" | "-infinity" => Some(f64::NEG_INFINITY),
        "nan" => Some(f64::NAN),
        _ => t.parse().ok(),
    }
}

/// FlexibleArgumentParser: `--foo_bar[=v]` → `--foo-bar[=v]`.
fn flex(a: &str) -> String {
    match a.strip_prefix("--") {
        Some(rest) => match rest.split_once('=') {
            Some((k, v)) => format!("--{}={v}", k.replace('_', "-")),
            None => format!("--{}", rest.replace('_', "-")),
        },
        None => a.to_string(),
    }
}
