//! Image and patch templates: `{org}/vllm-bench:{commit}` and friends.

use std::collections::BTreeMap;

pub const FIELDS: &[&str] = &[
    "org",
    "commit",
    "commit8",
    "commit12",
    "parent",
    "parent8",
    "parent12",
    "agent",
    "baseline_image",
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateError {
    /// A `{name}` that is not a template field.
    UnknownField(String),
    /// A field the template needs but this commit does not have (e.g. no parent).
    Missing(String),
    Unbalanced,
}

impl std::fmt::Display for TemplateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TemplateError::UnknownField(n) => write!(
                f,
                "unknown template field `{{{n}}}` (expected one of: {})",
                FIELDS
                    .iter()
                    .map(|f| format!("{{{f}}}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
            TemplateError::Missing(n) => write!(f, "`{{{n}}}` is not known for this commit"),
            TemplateError::Unbalanced => f.write_str("unbalanced `{` or `}` in template"),
        }
    }
}

/// Names used in a template, checked against the known fields.
pub fn check(template: &str) -> Result<Vec<String>, TemplateError> {
    let mut names = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        if rest[..open].contains('}') {
            return Err(TemplateError::Unbalanced);
        }
        let after = &rest[open + 1..];
        let close = after.find('}').ok_or(TemplateError::Unbalanced)?;
        let name = &after[..close];
        if !FIELDS.contains(&name) {
            return Err(TemplateError::UnknownField(name.to_string()));
        }
        names.push(name.to_string());
        rest = &after[close + 1..];
    }
    if rest.contains('}') {
        return Err(TemplateError::Unbalanced);
    }
    Ok(names)
}

pub fn expand(template: &str, vars: &BTreeMap<&str, String>) -> Result<String, TemplateError> {
    check(template)?;
    let mut out = String::with_capacity(template.len() + 32);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let close = after.find('}').ok_or(TemplateError::Unbalanced)?;
        let name = &after[..close];
        let value = vars
            .get(name)
            .ok_or_else(|| TemplateError::Missing(name.to_string()))?;
        out.push_str(value);
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The variables of one commit (and optionally an agent and the baseline image).
pub(crate) fn vars(
    org: &str,
    commit: &str,
    parent: Option<&str>,
    agent: Option<&str>,
    baseline_image: Option<&str>,
) -> BTreeMap<&'static str, String> {
    let cut = |s: &str, n: usize| s.chars().take(n).collect::<String>();
    let mut v = BTreeMap::new();
    v.insert("org", org.to_string());
    v.insert("commit", commit.to_string());
    v.insert("commit8", cut(commit, 8));
    v.insert("commit12", cut(commit, 12));
    if let Some(p) = parent {
        v.insert("parent", p.to_string());
        v.insert("parent8", cut(p, 8));
        v.insert("parent12", cut(p, 12));
    }
    if let Some(a) = agent {
        v.insert("agent", a.to_string());
    }
    if let Some(b) = baseline_image {
        v.insert("baseline_image", b.to_string());
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_known_fields() {
        let v = vars(
            "anon",
            "3a243095e5e7b655b63ab08fbd5936cb40850415",
            Some("64172a976c8d975b3aec946f1675716d2532d94f"),
            None,
            None,
        );
        assert_eq!(
            expand("{org}/vllm-bench:{commit}", &v).unwrap(),
            "anon/vllm-bench:3a243095e5e7b655b63ab08fbd5936cb40850415"
        );
        assert_eq!(
            expand("{org}/vllm-baseline:baseline-{parent12}", &v).unwrap(),
            "anon/vllm-baseline:baseline-64172a976c8d"
        );
        assert_eq!(
            expand("runs/x/{commit8}/p.diff", &v).unwrap(),
            "runs/x/3a243095/p.diff"
        );
    }

    #[test]
    fn rejects_unknown_missing_and_unbalanced() {
        let v = vars("anon", "abc", None, None, None);
        assert!(
            matches!(expand("{org}:{sha}", &v), Err(TemplateError::UnknownField(f)) if f == "sha")
        );
        assert!(matches!(
            expand("{parent12}", &v),
            Err(TemplateError::Missing(_))
        ));
        assert_eq!(check("{org"), Err(TemplateError::Unbalanced));
        assert_eq!(check("org}"), Err(TemplateError::Unbalanced));
    }
}
