//! The operator's overrides of the built-in diagnosis: `policy.toml`, `catalog.toml` and
//! `recipes.toml` in the config folder (`$XDG_CONFIG_HOME/nightshift/`), each optional.
//! Loaded once per sweep into one policy, one catalog and one recipe book that the engine
//! and the runtime share, so a recipe the operator changed is the one both offer and run.

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
    match std::fs::read_to_string(&p) {
        Ok(t) => Ok(Some((t, p.display().to_string()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", p.display())),
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
}
