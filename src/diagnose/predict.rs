//! Version-based prediction of vLLM's API-port binding bug (#8791), at plan-load time.
//!
//! Spec §6: the port-reservation code changed at v0.6.2 (temporary socket inherited by
//! forked processes), v0.6.3 (fd handed to uvicorn), v0.6.4 (SO_REUSEADDR re-bind) and
//! v0.7.3 (pre-created socket passed to uvicorn). The failure is reported on 0.6.2,
//! 0.6.3.dev and 0.6.4.post2.dev builds; the 0.6.4–0.7.2 mechanism is the one those
//! failed with, so every version in [0.6.2, 0.7.3) is predicted. Dev builds are ordered as
//! PEP 440 orders them (`0.7.3.dev12` is before 0.7.3, `0.6.4.post2.dev218` after 0.6.4).
//! Only serving benchmarks can hit it: throughput/latency run the engine in-process.

use super::Diagnosis;
use crate::category::Category;
use regex::Regex;
use std::cmp::Ordering;
use std::sync::OnceLock;

/// First release with the bug, and the first with the fixed reservation.
pub const PORT_BUG_FIRST: &str = "0.6.2";
pub const PORT_BUG_FIXED: &str = "0.7.3";
/// The recipe offered for the bug (the workaround from the issue thread).
pub const PORT_BUG_RECIPE: &str = "port-bug-spawn";

/// A PEP 440 version (release, pre, post, dev; the local part is ignored). Equality and
/// order are PEP 440's (`0.7` == `0.7.0`).
#[derive(Debug, Clone)]
pub struct PyVersion {
    pub release: Vec<u64>,
    /// (0 = a, 1 = b, 2 = rc, number)
    pub pre: Option<(u8, u64)>,
    pub post: Option<u64>,
    pub dev: Option<u64>,
}

impl PyVersion {
    pub fn parse(s: &str) -> Option<Self> {
        static RE: OnceLock<Regex> = OnceLock::new();
        let re = RE.get_or_init(|| {
            Regex::new(
                r"(?i)^v?(\d+(?:\.\d+)*)(?:[-_.]?(a|alpha|b|beta|rc|c|pre|preview)[-_.]?(\d*))?(?:[-_.]?(?:post|rev|r)[-_.]?(\d*)|-(\d+))?(?:[-_.]?dev[-_.]?(\d*))?(?:\+[a-z0-9.]+)?$",
            )
            .expect("version regex")
        });
        let c = re.captures(s.trim())?;
        let release = c[1]
            .split('.')
            .map(|p| p.parse().ok())
            .collect::<Option<Vec<u64>>>()?;
        let num = |i: usize| c.get(i).map(|m| m.as_str().parse().unwrap_or(0));
        let pre = c.get(2).map(|k| {
            let kind = match k.as_str().to_ascii_lowercase().as_str() {
                "a" | "alpha" => 0,
                "b" | "beta" => 1,
                _ => 2,
            };
            (kind, num(3).unwrap_or(0))
        });
        let post = num(4).or(num(5));
        let dev = c.get(6).map(|m| m.as_str().parse().unwrap_or(0));
        Some(PyVersion {
            release,
            pre,
            post,
            dev,
        })
    }

    fn key(&self) -> (Vec<u64>, (u8, u64), u64, u64) {
        let mut rel = self.release.clone();
        while rel.len() > 1 && rel.last() == Some(&0) {
            rel.pop();
        }
        let pre = match (self.pre, self.post, self.dev) {
            (None, None, Some(_)) => (0, 0), // X.Y.devN sorts before X.Y's pre-releases
            (Some((k, n)), _, _) => (1 + k, n),
            _ => (4, 0),
        };
        let post = self.post.map_or(0, |n| n + 1);
        let dev = self.dev.unwrap_or(u64::MAX);
        (rel, pre, post, dev)
    }
}

impl PartialEq for PyVersion {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for PyVersion {}

impl PartialOrd for PyVersion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for PyVersion {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

/// A version string that names no release: a local build's `0.0.0+local` (ISO-Bench's
/// human images), or anything unparsable. Such a version says nothing about an era and must
/// never sort before every era.
pub(crate) fn names_no_release(v: &str) -> bool {
    PyVersion::parse(v).is_none_or(|p| p.release.iter().all(|n| *n == 0))
}

/// Whether this vLLM version has the port-binding code of #8791. `None` when the version
/// string cannot be read.
pub(crate) fn port_bug_affected(vllm_version: &str) -> Option<bool> {
    let v = PyVersion::parse(vllm_version)?;
    let first = PyVersion::parse(PORT_BUG_FIRST).expect("const");
    let fixed = PyVersion::parse(PORT_BUG_FIXED).expect("const");
    Some(v >= first && v < fixed)
}

/// Plan-load-time prediction: a serving benchmark on an affected version.
pub(crate) fn predict_port_bug(vllm_version: &str, serving: bool) -> Option<Diagnosis> {
    if !serving || port_bug_affected(vllm_version) != Some(true) {
        return None;
    }
    Some(Diagnosis {
        category: Category::VersionPortBug,
        evidence: format!(
            "predicted: vLLM {} serves with the port-reservation code of v{PORT_BUG_FIRST}..v{PORT_BUG_FIXED} \
             (bug #8791: uvicorn fails to bind after 'Application startup complete.')",
            vllm_version.trim()
        ),
        stream: None,
        line_no: None,
        recipe: Some(PORT_BUG_RECIPE.to_string()),
        predicted: true,
        confidence: super::confidence::PREDICTED,
        telling: vec![],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> PyVersion {
        PyVersion::parse(s).unwrap_or_else(|| panic!("parse {s}"))
    }

    #[test]
    fn pep440_ordering() {
        let ordered = [
            "0.6.1",
            "0.6.1.post1",
            "0.6.2.dev5",
            "0.6.2rc1",
            "0.6.2",
            "0.6.2.post1.dev3",
            "0.6.2.post1",
            "0.6.3.dev172",
            "0.6.3",
            "0.6.3.post2.dev398+g9d5b4e4d",
            "0.6.4",
            "0.6.4.post2.dev218",
            "0.7.2",
            "0.7.3.dev12",
            "0.7.3",
            "v0.8.5",
            "0.10.1",
        ];
        for w in ordered.windows(2) {
            assert!(v(w[0]) < v(w[1]), "{} < {}", w[0], w[1]);
        }
        assert_eq!(v("0.7"), v("0.7.0"));
        assert!(PyVersion::parse("nightly").is_none());
    }

    #[test]
    fn affected_range() {
        for s in [
            "0.6.2",
            "0.6.3",
            "0.6.3.dev172",
            "0.6.3.post1",
            "0.6.3.post2.dev398",
            "0.6.4",
            "0.6.4.post1",
            "0.6.4.post2.dev375",
            "0.7.0",
            "0.7.2",
            "0.7.3.dev5",
        ] {
            assert_eq!(port_bug_affected(s), Some(true), "{s}");
        }
        for s in [
            "0.5.5",
            "0.6.1",
            "0.6.1.post2",
            "0.6.2.dev5",
            "0.7.3",
            "0.8.5",
            "0.10.1",
        ] {
            assert_eq!(port_bug_affected(s), Some(false), "{s}");
        }
        assert_eq!(port_bug_affected("unknown"), None);
    }

    #[test]
    fn prediction_only_for_serving() {
        let d = predict_port_bug("0.6.4.post2.dev218", true).unwrap();
        assert!(d.predicted);
        assert_eq!(d.category, Category::VersionPortBug);
        assert_eq!(d.recipe.as_deref(), Some(PORT_BUG_RECIPE));
        assert!(d.evidence.contains("0.6.4.post2.dev218"));
        assert!(predict_port_bug("0.6.4.post2.dev218", false).is_none());
        assert!(predict_port_bug("0.6.1", true).is_none());
        assert!(predict_port_bug("0.7.3", true).is_none());
    }
}
