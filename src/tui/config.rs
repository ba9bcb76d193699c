//! `$XDG_CONFIG_HOME/nightshift/config.toml` (default `~/.config/nightshift/config.toml`):
//!
//! ```toml
//! theme = "dark"          # or light, high-contrast, or themes/NAME.toml beside this file
//! refresh_ms = 200        # screen refresh while things change
//! gpu_sample_ms = 1000    # NVML sampling period
//! [keys]
//! skip = "x"              # any action name from `?`; a list binds several keys
//! vllm_src = "~/src/vllm" # this box's vLLM clone, when a plan names none
//! [datasets]
//! sharegpt = "~/datasets/ShareGPT_V3_unfiltered_cleaned_split.json"  # under every plan's
//! ```

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub theme: Option<String>,
    #[serde(default = "default_refresh")]
    pub refresh_ms: u64,
    #[serde(default = "default_gpu")]
    pub gpu_sample_ms: u64,
    #[serde(default)]
    pub keys: BTreeMap<String, OneOrMany>,
    /// Dataset files on this box (as a plan's `[datasets]`; a plan's own entries win).
    #[serde(default)]
    pub datasets: BTreeMap<String, String>,
    /// This box's vLLM clone (a plan's `vllm_src` wins).
    pub vllm_src: Option<String>,
    /// Ring the terminal's bell and name the held runs in its title when a run starts
    /// waiting for the operator (default on).
    #[serde(default = "default_bell")]
    pub bell: bool,
}

fn default_bell() -> bool {
    true
}

fn default_refresh() -> u64 {
    200
}
fn default_gpu() -> u64 {
    1000
}

impl Default for Config {
    fn default() -> Self {
        Config {
            theme: None,
            refresh_ms: default_refresh(),
            gpu_sample_ms: default_gpu(),
            keys: BTreeMap::new(),
            datasets: BTreeMap::new(),
            vllm_src: None,
            bell: true,
        }
    }
}

pub(crate) fn config_dir() -> Option<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(x).join("nightshift"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config").join("nightshift"))
}

impl Config {
    pub fn parse(text: &str) -> anyhow::Result<Config> {
        let mut c: Config = toml::from_str(text)?;
        c.refresh_ms = c.refresh_ms.clamp(16, 5000);
        c.gpu_sample_ms = c.gpu_sample_ms.clamp(100, 60_000);
        Ok(c)
    }

    /// The file if it exists; a missing file is the defaults, a broken one an error.
    pub fn load(path: Option<&Path>) -> anyhow::Result<Config> {
        let default_path = config_dir().map(|d| d.join("config.toml"));
        let Some(p) = path.map(Path::to_path_buf).or(default_path) else {
            return Ok(Config::default());
        };
        match crate::plan::read::read_text(&p, "a config file") {
            Ok(Some(t)) => Config::parse(&t).map_err(|e| anyhow::anyhow!("{}: {e}", p.display())),
            Ok(None) if path.is_none() => Ok(Config::default()),
            Ok(None) => Err(anyhow::anyhow!("{}: no such file", p.display())),
            Err(e) => Err(anyhow::anyhow!("{e}")),
        }
    }

    /// What a plan may leave to the box: `[datasets]` and `vllm_src`, with paths made
    /// absolute (relative to the config folder).
    pub(crate) fn box_defaults(&self) -> crate::plan::BoxDefaults {
        let base = config_dir().unwrap_or_default();
        crate::plan::BoxDefaults {
            datasets: self
                .datasets
                .iter()
                .map(|(k, v)| (k.clone(), crate::plan::expand_path(v, &base)))
                .collect(),
            vllm_src: self
                .vllm_src
                .as_deref()
                .map(|v| crate::plan::expand_path(v, &base)),
            fixes: Vec::new(),
        }
    }

    pub(crate) fn key_overrides(&self) -> BTreeMap<String, Vec<String>> {
        self.keys
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    OneOrMany::One(s) => vec![s.clone()],
                    OneOrMany::Many(v) => v.clone(),
                };
                (k.clone(), v)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The README's config example loads, keys included: a newcomer copies it first.
    #[test]
    fn the_readmes_example_config_loads() {
        let readme = include_str!("../../README.md");
        let start = readme
            .find("```toml\ntheme = ")
            .expect("the README's config example");
        let body = &readme[start + "```toml\n".len()..];
        let text = &body[..body.find("```").unwrap()];
        let c = Config::parse(text).unwrap();
        crate::tui::keymap::KeyMap::default()
            .with_overrides(&c.key_overrides())
            .unwrap();
    }

    #[test]
    fn parses_overrides_and_clamps() {
        let c = Config::parse(
            "theme = \"light\"\nrefresh_ms = 1\n[keys]\nskip = \"x\"\nquit = [\"q\", \"Q\"]\n",
        )
        .unwrap();
        assert_eq!(c.theme.as_deref(), Some("light"));
        assert_eq!(c.refresh_ms, 16);
        assert_eq!(c.key_overrides()["quit"], vec!["q", "Q"]);
        assert!(Config::parse("colour = 1").is_err());
    }
}
