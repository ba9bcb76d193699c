//! The operator's overrides of the built-in diagnosis: `policy.toml`, `catalog.toml` and
//! `recipes.toml` in the config folder (`$XDG_CONFIG_HOME/nightshift/`), each optional.
//! Loaded once per sweep into one policy, one catalog and one recipe book that the engine
//! and the runtime share, so a recipe the operator changed is the one both offer and run.
//!
//! A plan may carry the same overrides for its own sweep (`[policy]`, `[[recipe]]`,
//! `[[signature]]`), over the config folder's. Their sections are cut out of the plan's
//! text in place (everything else blanked, lines kept), so the config files' parsers report
//! errors at the plan's own line and column.

use crate::diagnose::{Catalog, RecipeBook};
use crate::policy::PolicyConfig;
use std::path::Path;
use std::sync::Arc;

#[derive(Clone)]
pub struct Overrides {
    pub policy: PolicyConfig,
    pub catalog: Arc<Catalog>,
    pub recipes: Arc<RecipeBook>,
    /// The files that were read, for the sweep's first lines.
    pub loaded: Vec<String>,
}

impl Default for Overrides {
    fn default() -> Self {
        Overrides {
            policy: PolicyConfig::default(),
            catalog: Arc::new(Catalog::builtin()),
            recipes: Arc::new(RecipeBook::builtin()),
            loaded: Vec::new(),
        }
    }
}

fn read(dir: &Path, name: &str) -> Result<Option<(String, String)>, String> {
    let p = dir.join(name);
    match crate::plan::read::read_text(&p, "an operator file") {
        Ok(t) => Ok(t.map(|t| (t, p.display().to_string()))),
        Err(e) => Err(e.to_string()),
    }
}

impl Overrides {
    /// The built-ins with `dir`'s files over them. Errors name `file:line:col`.
    pub fn load(dir: Option<&Path>) -> Result<Overrides, String> {
        let mut o = Overrides::default();
        let Some(dir) = dir else {
            return Ok(o);
        };
        if let Some((t, origin)) = read(dir, "policy.toml")? {
            o.policy = PolicyConfig::from_toml(&t, &origin).map_err(|e| e.to_string())?;
            o.loaded.push(origin);
        }
        if let Some((t, origin)) = read(dir, "catalog.toml")? {
            o.catalog = Arc::new(
                Catalog::builtin()
                    .with_overrides(&t, &origin)
                    .map_err(|e| e.to_string())?,
            );
            o.loaded.push(origin);
        }
        if let Some((t, origin)) = read(dir, "recipes.toml")? {
            o.recipes = Arc::new(
                RecipeBook::builtin()
                    .with_overrides(&t, &origin)
                    .map_err(|e| e.to_string())?,
            );
            o.loaded.push(origin);
        }
        Ok(o)
    }

    /// These overrides with the plan's own sections (`[policy]`, `[[recipe]]`,
    /// `[[signature]]`) over them. Errors name `plan:line:col`.
    pub(crate) fn with_plan(mut self, text: &str, origin: &str) -> Result<Overrides, String> {
        for name in ["policy", "recipe", "signature"] {
            if let Some((line, col)) = other_form(text, name) {
                return Err(format!(
                    "{origin}:{line}:{col}: `{name}` as a dotted key or inline value is not read: write it as {} (as in the config file)",
                    if name == "policy" { "a [policy] table".to_string() } else { format!("[[{name}]] tables") }
                ));
            }
        }
        let mut any = false;
        if let Some(t) = section_text(text, "policy", false) {
            self.policy = PolicyConfig::from_toml(&t, origin).map_err(|e| e.to_string())?;
            any = true;
        }
        if let Some(t) = section_text(text, "recipe", true) {
            self.recipes = Arc::new(
                (*self.recipes)
                    .clone()
                    .with_overrides(&t, origin)
                    .map_err(|e| e.to_string())?,
            );
            any = true;
        }
        if let Some(t) = section_text(text, "signature", true) {
            self.catalog = Arc::new(
                (*self.catalog)
                    .clone()
                    .with_overrides(&t, origin)
                    .map_err(|e| e.to_string())?,
            );
            any = true;
        }
        if any {
            self.loaded
                .push(format!("{origin} ([policy], [[recipe]], [[signature]])"));
        }
        Ok(self)
    }
}

/// The table name a header line opens (`[a.b]` → `a.b`, `[[ a ]]` → `a`) and whether it
/// is an array of tables, if the line is a header.
fn header_name(line: &str) -> Option<(&str, bool)> {
    let t = line.trim();
    let t = t.split_once(" #").map_or(t, |(h, _)| h).trim_end();
    let (inner, array) = match t.strip_prefix("[[").and_then(|r| r.strip_suffix("]]")) {
        Some(i) => (i, true),
        None => (t.strip_prefix('[')?.strip_suffix(']')?, false),
    };
    let inner = inner.trim();
    let ok = !inner.is_empty()
        && inner
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ' ' | '"'));
    ok.then_some((inner, array))
}

/// The plan text with only table `name`'s sections kept (its sub-tables too) and every other
/// byte a space (newlines kept, so positions stay the plan's). `array`: `[[name]]` sections,
/// kept with their headers (the parser reads a list); else the `[name]` header is blanked so
/// its keys are top-level, as in the config file, and `[name.sub]` becomes `[     sub]`.
fn section_text(text: &str, name: &str, array: bool) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut keep = false;
    let mut found = false;
    // A header-like line inside a multi-line string is text, not a header.
    let mut in_multiline: Option<&str> = None;
    for line in text.split_inclusive('\n') {
        let header = match in_multiline {
            None => header_name(line),
            Some(_) => None,
        };
        let mut kept_line = None;
        if let Some((h, is_array)) = header {
            let sub = h
                .strip_prefix(name)
                .and_then(|r| r.trim_start().strip_prefix('.'));
            if h == name && is_array == array {
                keep = true;
                found = true;
                if !array {
                    kept_line = Some(blank(line));
                }
            } else if sub.is_some() && (keep || !array) {
                // `[policy.actions]` opens `policy` too, with or without a `[policy]` header
                // before it (TOML's meaning): its keys are the policy's, never dropped.
                keep = true;
                found = true;
                if !array {
                    // `[policy.retry_limits]` → `[       retry_limits]`: same width.
                    let at = line.find(name).unwrap_or(0);
                    let mut l = line.to_string();
                    l.replace_range(at..at + name.len() + 1, &" ".repeat(name.len() + 1));
                    kept_line = Some(l);
                }
            } else {
                keep = false;
            }
        }
        match kept_line {
            Some(l) => out.push_str(&l),
            None if keep => out.push_str(line),
            None => out.push_str(&blank(line)),
        }
        for delim in ["\"\"\"", "'''"] {
            if line.matches(delim).count() % 2 == 1 {
                in_multiline = match in_multiline {
                    Some(d) if d == delim => None,
                    None => Some(delim),
                    other => other,
                };
            }
        }
    }
    found.then_some(out)
}

/// Where the plan gives `name` at its top level as a dotted key (`policy.actions.x = …`)
/// or an inline value (`policy = {…}`): forms the section reader does not see, refused
/// rather than dropped. Only the lines before the first header are the top level.
fn other_form(text: &str, name: &str) -> Option<(usize, usize)> {
    for (i, line) in text.lines().enumerate() {
        if header_name(line).is_some() {
            return None;
        }
        let t = line.trim_start();
        let key = t
            .strip_prefix(name)
            .or_else(|| t.strip_prefix(&format!("\"{name}\"")));
        if let Some(rest) = key {
            let rest = rest.trim_start();
            if rest.starts_with('.') || rest.starts_with('=') {
                return Some((i + 1, line.len() - t.len() + 1));
            }
        }
    }
    None
}

/// The line as spaces, its line ending kept.
fn blank(line: &str) -> String {
    line.chars()
        .map(|c| if c == '\n' || c == '\r' { c } else { ' ' })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::category::{Action, Category};

    #[test]
    fn operator_files_replace_the_builtins_and_errors_say_where() {
        let d = tempfile::tempdir().unwrap();
        assert!(Overrides::load(Some(d.path())).unwrap().loaded.is_empty());
        std::fs::write(
            d.path().join("recipes.toml"),
            "[[recipe]]\nname = \"numpy-lt-2\"\nfixes = [\"numpy_abi\"]\nchanges_measurement = true\nscope = \"run\"\n",
        )
        .unwrap();
        let o = Overrides::load(Some(d.path())).unwrap();
        assert_eq!(o.loaded.len(), 1);
        // Made run-scope by the operator, numpy<2 is offered, not applied.
        let p = crate::policy::Policy::new(o.policy.clone(), o.recipes.clone());
        assert_eq!(p.default_action(Category::NumpyAbi), Action::Operator);
        std::fs::write(d.path().join("policy.toml"), "max_retries = 3\nbogus = 1\n").unwrap();
        let e = Overrides::load(Some(d.path())).err().unwrap();
        assert!(e.contains("policy.toml:2:"), "{e}");
    }

    const PLAN: &str = r#"schema_version = 1
name = "x"

[policy]
max_retries = 4
[policy.retry_limits]
cuda_oom = 0

[[commits]]
commit = "abc"

[[recipe]]
name = "numpy-lt-2"
fixes = ["numpy_abi"]
changes_measurement = true
scope = "run"
steps = [{ kind = "shell", run = '''
[not a header]
echo hi
''' }]
[recipe.env]
A = "1"

[defaults]
gpu_count = 1
"#;

    #[test]
    fn a_plans_own_sections_apply_and_errors_point_into_the_plan() {
        let o = Overrides::default().with_plan(PLAN, "plan.toml").unwrap();
        assert_eq!(o.policy.max_retries, 4);
        let r = o.recipes.get("numpy-lt-2").unwrap();
        assert_eq!(r.env.get("A").map(String::as_str), Some("1"));
        assert!(
            matches!(&r.steps[0], crate::diagnose::recipe::Step::Shell { run } if run.contains("[not a header]"))
        );
        let p = crate::policy::Policy::new(o.policy.clone(), o.recipes.clone());
        assert_eq!(p.default_action(Category::NumpyAbi), Action::Operator);
        assert_eq!(o.loaded.len(), 1);

        // A typo in the plan's [policy] is reported at the plan's line and column.
        let bad = PLAN.replace("max_retries = 4", "max_retires = 4");
        let e = Overrides::default()
            .with_plan(&bad, "plan.toml")
            .err()
            .unwrap();
        assert!(e.contains("plan.toml:5:1"), "{e}");
        let bad = PLAN.replace("name = \"numpy-lt-2\"", "name = \"bad name!\"");
        let e = Overrides::default()
            .with_plan(&bad, "plan.toml")
            .err()
            .unwrap();
        assert!(e.contains("plan.toml:12:"), "{e}");
        // A plan without them changes nothing.
        let none = Overrides::default()
            .with_plan("schema_version = 1\n", "p")
            .unwrap();
        assert!(none.loaded.is_empty());
    }
}
