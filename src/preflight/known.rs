//! Known incompatibilities of models × vLLM releases, architectures by first release, and
//! GPU memory by type: data (`known.toml`), checked when built, read by the judge.

use crate::diagnose::predict::PyVersion;
use serde::Deserialize;
use std::sync::OnceLock;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Incompatibility {
    pub name: String,
    pub category: String,
    /// A dotted path into config.json (`rope_scaling.rope_type`).
    pub config_key: String,
    pub equals: String,
    /// The first release that works.
    pub before: String,
    pub text: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Architecture {
    pub name: String,
    pub first: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gpu {
    pub name: String,
    pub gib: f64,
}

/// Options that fail together (or one without another) on some releases.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlagRule {
    pub name: String,
    pub category: String,
    /// Options the command gives, every one: `--name`, or `--name=value` for one value.
    pub all: Vec<String>,
    /// Options whose absence the failure needs.
    #[serde(default)]
    pub none: Vec<String>,
    /// Where a clone tells: the file at the variant's revision whose code fails, and texts
    /// of that code (any present: the rule holds; none: it does not).
    pub tree_file: String,
    pub tree_text: Vec<String>,
    /// Without a tree: the releases it holds for, `[from, before)`.
    #[serde(default)]
    pub from: Option<String>,
    pub before: String,
    /// The commit that removed the failure, where known: it and its descendants are fine,
    /// whatever release they report.
    #[serde(default)]
    pub fixed_by: Option<String>,
    /// Where the fact was read (files, releases).
    pub source: String,
    pub text: String,
}

/// A value an option's `choices` gained in a release (argparse refuses it before).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OptionValue {
    pub option: String,
    pub value: String,
    pub first: String,
    /// The commit that added it, where known: it and its descendants accept it.
    #[serde(default)]
    pub added_by: Option<String>,
    /// The choices before it came (for argparse's wording).
    pub before_choices: Vec<String>,
    pub source: String,
}

impl OptionValue {
    /// The key its evidence is kept under with the rules'.
    pub fn key(&self) -> String {
        format!("{}={}", self.option, self.value)
    }
}

impl FlagRule {
    pub(crate) fn holds_for(&self, v: &PyVersion) -> bool {
        let parse = |s: &str| PyVersion::parse(s).expect("known.toml versions are checked");
        *v < parse(&self.before) && self.from.as_deref().is_none_or(|f| *v >= parse(f))
    }
}

/// A model measured in place of one a commit cannot run, as a report did before
/// (`preflight --suggest`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Substitute {
    /// The model the commit names (its command's `--model`, else the plan's).
    pub model: String,
    pub with: String,
    /// The blocking categories it fixes.
    pub categories: Vec<String>,
    /// Only these commits (prefixes); all when empty.
    #[serde(default)]
    pub commits: Vec<String>,
    pub source: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Known {
    #[serde(default)]
    pub substitute: Vec<Substitute>,
    #[serde(default)]
    pub flag_rule: Vec<FlagRule>,
    #[serde(default)]
    pub option_value: Vec<OptionValue>,
    #[serde(default)]
    pub incompatibility: Vec<Incompatibility>,
    #[serde(default)]
    pub architecture: Vec<Architecture>,
    #[serde(default)]
    pub gpu: Vec<Gpu>,
}

const TEXT: &str = include_str!("known.toml");

/// The built-in table (its versions are checked by a test).
pub fn known() -> &'static Known {
    static K: OnceLock<Known> = OnceLock::new();
    K.get_or_init(|| toml::from_str(TEXT).expect("known.toml is checked by its tests"))
}

/// The value at a dotted path of a JSON document, as text.
pub(crate) fn config_value<'a>(config: &'a serde_json::Value, path: &str) -> Option<&'a str> {
    path.split('.')
        .try_fold(config, |v, k| v.get(k))
        .and_then(|v| v.as_str())
}

impl Incompatibility {
    /// Whether a model with `config` breaks on `version`.
    pub fn applies(&self, config: &serde_json::Value, version: &PyVersion) -> bool {
        config_value(config, &self.config_key) == Some(self.equals.as_str())
            && PyVersion::parse(&self.before).is_some_and(|b| *version < b)
    }
}

/// The first release known to run `arch`, when the table has it.
pub(crate) fn arch_first(arch: &str) -> Option<&'static str> {
    known()
        .architecture
        .iter()
        .find(|a| a.name == arch)
        .map(|a| a.first.as_str())
}

/// Bytes of one GPU of `gpu_type` (`H100`, `H100-SXM`, `h200`), when the table has it.
pub(crate) fn gpu_bytes(gpu_type: &str) -> Option<u64> {
    let t = gpu_type.to_ascii_uppercase();
    known()
        .gpu
        .iter()
        .find(|g| t.starts_with(&g.name.to_ascii_uppercase()))
        .map(|g| (g.gib * (1u64 << 30) as f64) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_parses_and_its_versions_are_versions() {
        let k = known();
        assert!(!k.incompatibility.is_empty());
        for i in &k.incompatibility {
            assert!(PyVersion::parse(&i.before).is_some(), "{}", i.name);
        }
        for a in &k.architecture {
            assert!(PyVersion::parse(&a.first).is_some(), "{}", a.name);
        }
        assert!(k.flag_rule.len() >= 2 && !k.option_value.is_empty());
        for sub in &k.substitute {
            assert!(sub.model != sub.with && !sub.source.is_empty());
            for c in &sub.categories {
                assert!(c.parse::<crate::category::Category>().is_ok(), "{c}");
            }
        }
        for o in &k.option_value {
            assert!(PyVersion::parse(&o.first).is_some(), "{}", o.key());
            assert!(!o.before_choices.contains(&o.value));
        }
        for r in &k.flag_rule {
            assert!(PyVersion::parse(&r.before).is_some(), "{}", r.name);
            assert!(r
                .from
                .as_deref()
                .is_none_or(|f| PyVersion::parse(f).is_some()));
            assert!(!r.all.is_empty() && !r.tree_text.is_empty() && !r.source.is_empty());
            assert!(
                r.category.parse::<crate::category::Category>().is_ok(),
                "{}",
                r.name
            );
        }
    }

    #[test]
    fn flag_rules_hold_for_their_releases_only() {
        let rule = |n: &str| known().flag_rule.iter().find(|r| r.name == n).unwrap();
        let v = |s: &str| PyVersion::parse(s).unwrap();
        let chunked = rule("chunked_prefill_with_prefix_caching");
        assert!(chunked.holds_for(&v("0.5.5")) && chunked.holds_for(&v("0.4.2")));
        assert!(!chunked.holds_for(&v("0.6.0")));
        let ngram = rule("ngram_without_lookup_window");
        assert!(ngram.holds_for(&v("0.6.4.dev22+g5b8a1fde")) && !ngram.holds_for(&v("0.8.3")));
    }

    #[test]
    fn llama31_rope_breaks_before_0_5_3_post1_only() {
        let cfg = serde_json::json!({"rope_scaling": {"rope_type": "llama3", "factor": 8.0}});
        let rope = &known().incompatibility[0];
        let v = |s| PyVersion::parse(s).unwrap();
        assert!(rope.applies(&cfg, &v("0.4.2")));
        assert!(rope.applies(&cfg, &v("0.5.3")));
        assert!(!rope.applies(&cfg, &v("0.5.3.post1")));
        assert!(!rope.applies(&cfg, &v("0.6.0")));
        let plain = serde_json::json!({"rope_scaling": null});
        assert!(!rope.applies(&plain, &v("0.4.2")));
    }

    #[test]
    fn gpu_memory_by_type() {
        assert_eq!(gpu_bytes("H100"), Some((79.6 * (1u64 << 30) as f64) as u64));
        assert!(gpu_bytes("h200-sxm").unwrap() > gpu_bytes("H100").unwrap());
        assert_eq!(gpu_bytes("TPU"), None);
    }
}
