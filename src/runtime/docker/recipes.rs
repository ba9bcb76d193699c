//! The boundary to fix recipes: "which steps do I exec for recipe X". A small built-in
//! table until the diagnosis issue's `RecipeBook` (src/diagnose/recipes.toml) merges; the
//! lead swaps it in by implementing [`RecipeSteps`] for it.

/// One step of a fix recipe, executed inside a prep container before the fixed image is
/// committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FixStep {
    /// A shell command (`sh -c`).
    Shell { run: String },
}

pub trait RecipeSteps: Send + Sync {
    /// The steps of `recipe`; `None` for recipes this runtime does not know. An empty list
    /// means the recipe works through the environment only (e.g. `port-bug-spawn`).
    fn steps(&self, recipe: &str) -> Option<Vec<FixStep>>;
}

/// The recipes the Docker runtime knows until the RecipeBook merges.
pub struct BuiltinRecipes;

impl RecipeSteps for BuiltinRecipes {
    fn steps(&self, recipe: &str) -> Option<Vec<FixStep>> {
        let shell = |s: &str| FixStep::Shell { run: s.to_string() };
        match recipe {
            // transformers ≥ 4.5x registers "aimv2" itself; vLLM's ovis config must not fail.
            "aimv2-exist-ok" => Some(vec![shell(
                r#"set -e; d=$(python3 -c 'import os, vllm; print(os.path.dirname(vllm.__file__))' 2>/dev/null || true); for f in ${d:-/nonexistent}/transformers_utils/configs/ovis*.py /usr/local/lib/python3*/*-packages/vllm/transformers_utils/configs/ovis*.py /usr/lib/python3*/*-packages/vllm/transformers_utils/configs/ovis*.py; do [ -f "$f" ] || continue; sed -i -E 's/AutoConfig\.register\("aimv2", *AIMv2Config\)/AutoConfig.register("aimv2", AIMv2Config, exist_ok=True)/' "$f"; grep -q 'exist_ok=True' "$f" && echo "patched $f" && found=1; done; [ -n "$found" ]"#,
            )]),
            "numpy-lt-2" => Some(vec![shell(r#"pip install --no-cache-dir "numpy<2""#)]),
            "port-bug-spawn" => Some(Vec::new()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_and_unknown_recipes() {
        assert_eq!(
            BuiltinRecipes.steps("aimv2-exist-ok").map(|s| s.len()),
            Some(1)
        );
        assert_eq!(BuiltinRecipes.steps("port-bug-spawn"), Some(vec![]));
        assert_eq!(BuiltinRecipes.steps("nope"), None);
    }
}
