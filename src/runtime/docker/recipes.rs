//! The boundary to fix recipes: "which steps do I exec for recipe X". The Docker runtime
//! reads the diagnosis module's [`RecipeBook`] through this trait (tests may supply their
//! own). Environment-only recipes (e.g. `port-bug-spawn`) reach the run through
//! `RunJob::env`, set by the engine; here they have no steps.

use crate::diagnose::recipe::{RecipeBook, Step};

/// One step of a fix recipe, executed inside a prep container before the fixed image is
/// committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FixStep {
    /// A shell command (`sh -c`); must exit 0.
    Shell { run: String },
    /// `path` from the operator's vLLM clone at the image's commit, copied to `dest`
    /// (`{vllm_dir}` is the installed vllm package directory).
    CopyFromSource { path: String, dest: String },
}

pub trait RecipeSteps: Send + Sync {
    /// The steps of `recipe`; `None` for recipes this source does not know.
    fn steps(&self, recipe: &str) -> Option<Vec<FixStep>>;
    /// Whether the fixed container is committed as an image later runs reuse
    /// (`commit_image`); otherwise every attempt runs the steps again.
    fn commits(&self, _recipe: &str) -> bool {
        true
    }
}

impl RecipeSteps for RecipeBook {
    fn commits(&self, recipe: &str) -> bool {
        self.get(recipe).is_none_or(|r| r.commit_image)
    }
    fn steps(&self, recipe: &str) -> Option<Vec<FixStep>> {
        let r = self.get(recipe)?;
        Some(
            r.steps
                .iter()
                .map(|s| match s {
                    Step::Shell { run } => FixStep::Shell { run: run.clone() },
                    Step::CopyFromSource { path, dest } => FixStep::CopyFromSource {
                        path: path.clone(),
                        dest: dest.clone(),
                    },
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_recipe_book() {
        let book = RecipeBook::builtin();
        let aimv2 = book.steps("aimv2-exist-ok").unwrap();
        assert!(matches!(&aimv2[0], FixStep::Shell { run } if run.contains("exist_ok=True")));
        assert_eq!(book.steps("port-bug-spawn").map(|s| s.len()), Some(0));
        assert_eq!(book.steps("nope"), None);
    }
}
