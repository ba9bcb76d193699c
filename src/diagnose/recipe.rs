//! Fix recipes as data (recipes.toml, embedded; the operator's file adds or replaces
//! recipes by name). The runtime executes the steps; this module only describes them.

use super::DataError;
use crate::category::Category;
use regex::Regex;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::OnceLock;
use toml::Spanned;

const BUILTIN: &str = include_str!("recipes.toml");

/// Placeholder in `CopyFromSource::dest` for the installed vllm package directory.
pub const VLLM_DIR_VAR: &str = "{vllm_dir}";
/// Shell command printing the installed vllm package directory without importing vllm
/// (importing it is often exactly what fails).
pub const FIND_VLLM_DIR: &str = "python3 -c 'import importlib.util, os; print(os.path.dirname(importlib.util.find_spec(\"vllm\").origin))'";

/// Whether a fix applies to one run's image or to every variant of the commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum RecipeScope {
    #[default]
    Run,
    Commit,
}

/// One step, run inside the container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Step {
    /// `sh -c run`; must exit 0.
    Shell { run: String },
    /// A file taken from the operator's vLLM clone at the image's commit, copied to
    /// `dest` (which may contain `{vllm_dir}`).
    CopyFromSource { path: String, dest: String },
}

impl Step {
    #[cfg(test)]
    /// `dest` with `{vllm_dir}` replaced (CopyFromSource only).
    pub(crate) fn dest_in(&self, vllm_dir: &str) -> Option<String> {
        match self {
            Step::CopyFromSource { dest, .. } => {
                Some(dest.replace(VLLM_DIR_VAR, vllm_dir.trim_end_matches('/')))
            }
            Step::Shell { .. } => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recipe {
    pub name: String,
    pub fixes: Vec<Category>,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub steps: Vec<Step>,
    #[serde(default)]
    pub commit_image: bool,
    /// Can it change what is measured? Such recipes are never applied automatically by
    /// default.
    pub changes_measurement: bool,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub scope: RecipeScope,
    /// An environment workaround (a pinned library, an env var), not a change to vLLM:
    /// with `scope = "commit"` it is applied automatically to every variant of the commit,
    /// so the comparison stays fair even though it may change what is measured.
    #[serde(default)]
    pub environment_workaround: bool,
}

impl Recipe {
    /// Applied without asking: it cannot change what is measured, or it is an environment
    /// workaround that every variant of the commit gets alike.
    pub(crate) fn automatic(&self, allow_measurement_changing: bool) -> bool {
        !self.changes_measurement
            || allow_measurement_changing
            || (self.environment_workaround && self.scope == RecipeScope::Commit)
    }
}

impl Recipe {
    #[cfg(test)]
    /// The tag a fixed container is committed as: `<image>-nsfix-<recipe>`
    /// (`org/vllm:abc` → `org/vllm:abc-nsfix-aimv2-exist-ok`).
    pub(crate) fn fixed_image(&self, image: &str) -> Option<String> {
        if !self.commit_image {
            return None;
        }
        let slash = image.rfind('/').map_or(0, |i| i + 1);
        let (repo, tag) = match image[slash..].rfind(':') {
            Some(i) => (&image[..slash + i], &image[slash + i + 1..]),
            None => (image, "latest"),
        };
        Some(format!("{repo}:{tag}-nsfix-{}", self.name))
    }

    /// One line for provenance and the TUI.
    pub fn summary(&self) -> String {
        let mut parts: Vec<String> = self
            .steps
            .iter()
            .map(|s| match s {
                Step::Shell { run } => {
                    let one = run.split_whitespace().collect::<Vec<_>>().join(" ");
                    format!("sh: {}", truncate(&one, 80))
                }
                Step::CopyFromSource { path, dest } => format!("copy {path} -> {dest}"),
            })
            .collect();
        for (k, v) in &self.env {
            parts.push(format!("env {k}={v}"));
        }
        format!("{}: {}", self.name, parts.join("; "))
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n).collect::<String>())
    }
}

/// A shell step that would install the PyPI `pyairports` (an empty placeholder package).
pub(crate) fn installs_pyairports(step: &Step) -> bool {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r"(?i)\b(?:pip3?|uv\s+pip|python3?\s+-m\s+pip|conda|mamba|poetry|uv)\s+(?:install|add)\b[^\n;&|]*\bpyairports\b")
            .expect("regex")
    });
    match step {
        Step::Shell { run } => re.is_match(run),
        Step::CopyFromSource { .. } => false,
    }
}

#[derive(Debug, Clone, Default)]
pub struct RecipeBook {
    recipes: Vec<Recipe>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBook {
    #[serde(default)]
    recipe: Vec<Spanned<Recipe>>,
}

impl RecipeBook {
    pub fn builtin() -> Self {
        RecipeBook::default()
            .with_overrides(BUILTIN, "builtin:recipes.toml")
            .expect("built-in recipes are valid")
    }

    /// Adds recipes, or replaces those with the same name. Errors name `origin:line:col`.
    pub fn with_overrides(mut self, toml_text: &str, origin: &str) -> Result<Self, DataError> {
        let raw: RawBook = toml::from_str(toml_text).map_err(|e| {
            DataError::at(
                origin,
                toml_text,
                e.span().map_or(0, |s| s.start),
                e.message(),
            )
        })?;
        static NAME: OnceLock<Regex> = OnceLock::new();
        let name_re =
            NAME.get_or_init(|| Regex::new(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$").expect("regex"));
        for sp in raw.recipe {
            let at = sp.span().start;
            let r = sp.into_inner();
            let err = |m: String| DataError::at(origin, toml_text, at, m);
            if !name_re.is_match(&r.name) {
                return Err(err(format!(
                    "recipe name `{}` must be 1-64 of [A-Za-z0-9_.-] (it becomes part of an image tag)",
                    r.name
                )));
            }
            if r.steps.iter().any(installs_pyairports) {
                return Err(err(format!(
                    "recipe `{}` installs pyairports: the PyPI package of that name is an empty placeholder; \
                     downgrade or patch outlines instead",
                    r.name
                )));
            }
            for s in &r.steps {
                if let Step::CopyFromSource { path, .. } = s {
                    if path.starts_with('/') || path.split('/').any(|c| c == "..") {
                        return Err(err(format!(
                            "recipe `{}`: copy_from_source path `{path}` must be relative to the vLLM source tree",
                            r.name
                        )));
                    }
                }
            }
            match self.recipes.iter().position(|x| x.name == r.name) {
                Some(i) => self.recipes[i] = r,
                None => self.recipes.push(r),
            }
        }
        Ok(self)
    }

    pub fn get(&self, name: &str) -> Option<&Recipe> {
        self.recipes.iter().find(|r| r.name == name)
    }

    /// The recipe offered for a category: the first that lists it.
    pub(crate) fn for_category(&self, c: Category) -> Option<&Recipe> {
        self.recipes.iter().find(|r| r.fixes.contains(&c))
    }

    pub fn all(&self) -> &[Recipe] {
        &self.recipes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_recipes_cover_the_seed_fixes() {
        let b = RecipeBook::builtin();
        for (c, name, auto) in [
            (Category::Aimv2Conflict, "aimv2-exist-ok", true),
            (Category::FaUtilsMissing, "fa-utils-from-source", true),
            (Category::NumpyAbi, "numpy-lt-2", false),
            (Category::LogitsWarperImport, "transformers-lt-4.46", false),
            (Category::PyairportsMissing, "outlines-downgrade", false),
            (Category::VersionPortBug, "port-bug-spawn", false),
        ] {
            let r = b.for_category(c).unwrap_or_else(|| panic!("{c}"));
            assert_eq!(r.name, name);
            assert_eq!(!r.changes_measurement, auto, "{name}");
        }
        let aim = b.get("aimv2-exist-ok").unwrap();
        let Step::Shell { run } = &aim.steps[0] else {
            panic!()
        };
        assert!(
            run.contains("exist_ok=True") && run.contains("transformers_utils/configs/ovis*.py")
        );
        let fa = b.get("fa-utils-from-source").unwrap();
        assert_eq!(
            fa.steps[0]
                .dest_in("/usr/lib/python3/dist-packages/vllm/")
                .unwrap(),
            "/usr/lib/python3/dist-packages/vllm/vllm_flash_attn/fa_utils.py"
        );
        assert!(
            matches!(&fa.steps[0], Step::CopyFromSource { path, .. } if path == "vllm/vllm_flash_attn/fa_utils.py")
        );
        let port = b.get("port-bug-spawn").unwrap();
        assert_eq!(port.scope, RecipeScope::Commit);
        assert_eq!(
            port.env
                .get("VLLM_WORKER_MULTIPROC_METHOD")
                .map(String::as_str),
            Some("spawn")
        );
        assert!(b
            .get("numpy-lt-2")
            .unwrap()
            .steps
            .iter()
            .any(|s| matches!(s, Step::Shell { run } if run.contains("'numpy<2'"))));
        assert!(b
            .get("transformers-lt-4.46")
            .unwrap()
            .steps
            .iter()
            .any(|s| matches!(s, Step::Shell { run } if run.contains("'transformers<4.46'"))));
    }

    #[test]
    fn no_builtin_recipe_installs_pyairports() {
        let b = RecipeBook::builtin();
        for r in b.all() {
            for s in &r.steps {
                assert!(!installs_pyairports(s), "{} installs pyairports", r.name);
                if let Step::Shell { run } = s {
                    for line in run.lines() {
                        let l = line.to_lowercase();
                        assert!(
                            !(l.contains("install") && l.contains("pyairports")),
                            "{}: {line}",
                            r.name
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn pyairports_installs_are_rejected_from_operator_files() {
        for cmd in [
            "pip install pyairports",
            "pip3 install --no-cache-dir pyairports==0.0.1",
            "python3 -m pip install -U outlines pyairports",
            "uv pip install pyairports",
        ] {
            assert!(
                installs_pyairports(&Step::Shell { run: cmd.into() }),
                "{cmd}"
            );
        }
        assert!(!installs_pyairports(&Step::Shell {
            run: "pip install 'outlines<0.0.42'".into()
        }));
        let text = "[[recipe]]\nname = \"bad\"\nfixes = [\"pyairports_missing\"]\nchanges_measurement = false\nsteps = [{ kind = \"shell\", run = \"pip install pyairports\" }]\n";
        let e = RecipeBook::builtin()
            .with_overrides(text, "ops.toml")
            .unwrap_err();
        assert!(e.to_string().starts_with("ops.toml:1:"), "{e}");
        assert!(e.to_string().contains("placeholder"), "{e}");
    }

    #[test]
    fn overrides_replace_by_name_and_errors_are_located() {
        let b = RecipeBook::builtin()
            .with_overrides(
                "[[recipe]]\nname = \"numpy-lt-2\"\nfixes = [\"numpy_abi\"]\nchanges_measurement = false\nsteps = [{ kind = \"shell\", run = \"pip install 'numpy==1.26.4'\" }]\n",
                "ops.toml",
            )
            .unwrap();
        let r = b.get("numpy-lt-2").unwrap();
        assert!(!r.changes_measurement);
        assert_eq!(b.all().iter().filter(|r| r.name == "numpy-lt-2").count(), 1);

        let e = RecipeBook::builtin()
            .with_overrides(
                "[[recipe]]\nname = \"x\"\nfixes = [\"bogus\"]\nchanges_measurement = true\n",
                "ops.toml",
            )
            .unwrap_err();
        assert!(e.to_string().starts_with("ops.toml:3:"), "{e}");
        let e = RecipeBook::builtin()
            .with_overrides(
                "[[recipe]]\nname = \"bad name\"\nfixes = []\nchanges_measurement = true\n",
                "o",
            )
            .unwrap_err();
        assert!(e.to_string().contains("image tag"), "{e}");
    }

    #[test]
    fn fixed_image_tags() {
        let b = RecipeBook::builtin();
        let r = b.get("aimv2-exist-ok").unwrap();
        assert_eq!(
            r.fixed_image("org/vllm-bench:0123abcd").unwrap(),
            "org/vllm-bench:0123abcd-nsfix-aimv2-exist-ok"
        );
        assert_eq!(
            r.fixed_image("localhost:5000/vllm").unwrap(),
            "localhost:5000/vllm:latest-nsfix-aimv2-exist-ok"
        );
        assert!(b
            .get("port-bug-spawn")
            .unwrap()
            .fixed_image("x:y")
            .is_none());
        assert!(r.summary().starts_with("aimv2-exist-ok: sh: "));
    }
}
