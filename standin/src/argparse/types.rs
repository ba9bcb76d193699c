//! argparse's data: actions (`Arg`), values (`Val`, with Python's repr) and the
//! resulting `Namespace` (`Ns`).

#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Kind {
    /// One value.
    Store,
    /// `action="store_true"`.
    True,
    /// `nargs="?"`, const True: `--flag`, `--flag False`.
    OptBool,
    /// `argparse.BooleanOptionalAction`: `--flag` / `--no-flag`.
    BoolOpt,
    /// `nargs="+"`.
    Plus,
    /// `nargs="*"`.
    Star,
    /// A positional argument (exactly one value).
    Pos,
}

#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Ty {
    Str,
    Int,
    Float,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Val {
    None,
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    List(Vec<String>),
}

impl Val {
    /// Python's `repr`, as `Namespace(...)` prints it.
    pub fn repr(&self) -> String {
        match self {
            Val::None => "None".into(),
            Val::Str(s) => py_str(s),
            Val::Int(i) => i.to_string(),
            Val::Float(f) => py_float(*f),
            Val::Bool(b) => if *b { "True" } else { "False" }.into(),
            Val::List(v) => format!(
                "[{}]",
                v.iter().map(|s| py_str(s)).collect::<Vec<_>>().join(", ")
            ),
        }
    }
}

pub fn py_str(s: &str) -> String {
    let q = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut o = String::new();
    o.push(q);
    for c in s.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\t' => o.push_str("\\t"),
            c if c == q => {
                o.push('\\');
                o.push(c)
            }
            c => o.push(c),
        }
    }
    o.push(q);
    o
}

/// Python's float repr: `inf`, `1.0`, `0.9`, `1e-05`.
pub fn py_float(f: f64) -> String {
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.into();
    }
    if f.is_nan() {
        return "nan".into();
    }
    let s = format!("{f:?}");
    if s.contains('e') {
        // Rust: 1e-5 → Python: 1e-05
        let (m, e) = s.split_once('e').unwrap();
        let (sign, digits) = e.strip_prefix('-').map_or(("+", e), |d| ("-", d));
        return format!("{m}e{sign}{digits:0>2}");
    }
    s
}

#[derive(Clone, Debug)]
pub struct Arg {
    /// Option strings in declaration order (`--tensor-parallel-size`, `-tp`); for a
    /// positional, its name.
    pub names: Vec<String>,
    pub dest: String,
    pub kind: Kind,
    pub ty: Ty,
    pub default: Val,
    pub help: String,
    pub required: bool,
    pub choices: Option<Vec<String>>,
}

impl Arg {
    pub fn new(names: &[&str], kind: Kind, ty: Ty, default: Val, help: &str) -> Arg {
        let long = names
            .iter()
            .find(|n| n.starts_with("--"))
            .or(names.first())
            .unwrap();
        let dest = long.trim_start_matches('-').replace('-', "_");
        Arg {
            names: names.iter().map(|s| s.to_string()).collect(),
            dest,
            kind,
            ty,
            default,
            help: help.to_string(),
            required: kind == Kind::Pos,
            choices: None,
        }
    }
    pub fn required(mut self) -> Arg {
        self.required = true;
        self
    }
    /// A positional with `nargs="?"`.
    pub fn optional(mut self) -> Arg {
        self.required = false;
        self
    }
    pub fn choices(mut self, c: &[&str]) -> Arg {
        self.choices = Some(c.iter().map(|s| s.to_string()).collect());
        self
    }
    pub(super) fn metavar(&self) -> String {
        match &self.choices {
            Some(c) => format!("{{{}}}", c.join(",")),
            None if self.kind == Kind::Pos => self.dest.clone(),
            None => self.dest.to_uppercase(),
        }
    }
    /// The option strings, `--no-` forms included.
    pub(super) fn strings(&self) -> Vec<String> {
        let mut v = self.names.clone();
        if self.kind == Kind::BoolOpt {
            for n in &self.names {
                if let Some(rest) = n.strip_prefix("--") {
                    v.push(format!("--no-{rest}"));
                }
            }
        }
        v
    }
    pub(super) fn with_value(&self, name: &str) -> String {
        let m = self.metavar();
        match self.kind {
            Kind::True | Kind::BoolOpt => name.to_string(),
            Kind::OptBool => format!("{name} [{m}]"),
            Kind::Plus => format!("{name} {m} [{m} ...]"),
            Kind::Star => format!("{name} [{m} ...]"),
            Kind::Store | Kind::Pos => format!("{name} {m}"),
        }
    }
    pub(super) fn usage_part(&self) -> String {
        if self.kind == Kind::Pos {
            return if self.required {
                self.metavar()
            } else {
                format!("[{}]", self.metavar())
            };
        }
        let inner = if self.kind == Kind::BoolOpt {
            self.strings()
                .iter()
                .filter(|s| s.starts_with("--"))
                .cloned()
                .collect::<Vec<_>>()
                .join(" | ")
        } else {
            self.with_value(&self.names[0])
        };
        if self.required {
            inner
        } else {
            format!("[{inner}]")
        }
    }
    pub(super) fn invocation(&self) -> String {
        if self.kind == Kind::Pos {
            return self.metavar();
        }
        self.strings()
            .iter()
            .map(|n| self.with_value(n))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Parsed values, in declaration order (as Python 3.9+ prints a Namespace).
#[derive(Clone, Debug, Default)]
pub struct Ns {
    pub items: Vec<(String, Val)>,
    /// dests the command line set explicitly.
    pub given: Vec<String>,
}

impl Ns {
    pub fn get(&self, dest: &str) -> &Val {
        self.items
            .iter()
            .find(|(d, _)| d == dest)
            .map(|(_, v)| v)
            .unwrap_or(&Val::None)
    }
    pub fn has(&self, dest: &str) -> bool {
        self.items.iter().any(|(d, _)| d == dest)
    }
    pub fn given(&self, dest: &str) -> bool {
        self.given.iter().any(|d| d == dest)
    }
    pub fn str(&self, dest: &str) -> Option<String> {
        match self.get(dest) {
            Val::Str(s) => Some(s.clone()),
            Val::Int(i) => Some(i.to_string()),
            Val::Float(f) => Some(py_float(*f)),
            Val::List(v) => v.first().cloned(),
            _ => None,
        }
    }
    pub fn int(&self, dest: &str) -> Option<i64> {
        match self.get(dest) {
            Val::Int(i) => Some(*i),
            Val::Float(f) => Some(*f as i64),
            Val::Str(s) => s.parse().ok(),
            _ => None,
        }
    }
    pub fn float(&self, dest: &str) -> Option<f64> {
        match self.get(dest) {
            Val::Int(i) => Some(*i as f64),
            Val::Float(f) => Some(*f),
            Val::Str(s) => s.parse().ok(),
            _ => None,
        }
    }
    pub fn flag(&self, dest: &str) -> bool {
        matches!(self.get(dest), Val::Bool(true))
    }
    pub fn list(&self, dest: &str) -> Vec<String> {
        match self.get(dest) {
            Val::List(v) => v.clone(),
            Val::Str(s) => vec![s.clone()],
            _ => vec![],
        }
    }
    pub fn set(&mut self, dest: &str, v: Val) {
        match self.items.iter_mut().find(|(d, _)| d == dest) {
            Some(slot) => slot.1 = v,
            None => self.items.push((dest.to_string(), v)),
        }
    }
    /// `Namespace(a=1, b='x')`.
    pub fn repr(&self) -> String {
        let parts: Vec<String> = self
            .items
            .iter()
            .map(|(d, v)| format!("{d}={}", v.repr()))
            .collect();
        format!("Namespace({})", parts.join(", "))
    }
}
