//! Fixes accepted before the night: `nightshift preflight PLAN --suggest` writes the ones it
//! knows for the commits it blocks into a file beside the plan (`PLAN.fixes.toml`), the
//! operator reviews it, and `run PLAN --fixes FILE` (or `preflight --fixes FILE`) applies
//! it. A fix replaces a commit's model, command or GPU count for every variant alike, so
//! the commit's comparisons stay fair; what it changed is kept with the commit (`fixed`),
//! shown by `show` and the digest, and marked in `results`.

use serde::{Deserialize, Serialize};

/// What a fix changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FixKind {
    /// Another model measured in place of one this vLLM cannot load (what is measured
    /// changes: the digest says "measured with a substitute model").
    SubstituteModel,
    /// More GPUs (tensor parallel) for weights one GPU cannot hold.
    TensorParallel,
}

impl FixKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FixKind::SubstituteModel => "substitute_model",
            FixKind::TensorParallel => "tensor_parallel",
        }
    }
}

/// One commit's fix, as the file holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fix {
    /// The commit (its full hash, or a prefix of 7 or more).
    pub commit: String,
    pub kind: FixKind,
    /// The model measured instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The command run instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub perf_command: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_config: Option<String>,
    /// What preflight named that this fixes.
    pub reason: String,
    /// Where the fix comes from (a fact, a report that did the same).
    pub source: String,
}

impl Fix {
    pub fn matches(&self, commit: &str) -> bool {
        let (a, b) = (
            self.commit.to_ascii_lowercase(),
            commit.to_ascii_lowercase(),
        );
        a.len().min(b.len()) >= 7 && (a.starts_with(&b) || b.starts_with(&a))
    }

    /// The commit's record of it (`show`, the digest, `results`' mark).
    pub(crate) fn note(&self) -> String {
        let what = match (self.kind, &self.model, &self.gpu_config) {
            (FixKind::SubstituteModel, Some(m), _) => {
                format!("measured with a substitute model, {m}")
            }
            (FixKind::TensorParallel, _, Some(g)) => format!("measured on {g}"),
            (k, _, _) => k.as_str().to_string(),
        };
        format!("{what} ({}; {})", self.reason, self.source)
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    fix: Vec<Fix>,
}

/// The fixes in `path`, bounded and checked; errors name `path:line:col`.
pub fn load(path: &std::path::Path) -> Result<Vec<Fix>, String> {
    let bytes =
        crate::bounded::read_file(path, 4 << 20).map_err(|e| format!("{}: {e}", path.display()))?;
    let text = String::from_utf8(bytes).map_err(|_| format!("{}: not UTF-8", path.display()))?;
    parse(&text, &path.display().to_string())
}

pub fn parse(text: &str, origin: &str) -> Result<Vec<Fix>, String> {
    let f: File = toml::from_str(text).map_err(|e| {
        let at = e.span().map_or(0, |s| s.start);
        let line = text[..at.min(text.len())].matches('\n').count() + 1;
        let col = at - text[..at.min(text.len())].rfind('\n').map_or(0, |i| i + 1) + 1;
        format!("{origin}:{line}:{col}: {}", e.message())
    })?;
    for (i, fx) in f.fix.iter().enumerate() {
        if fx.commit.len() < 7 || !fx.commit.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(format!(
                "{origin}: fix {} names commit `{}`: a hash (7 or more hex digits) is expected",
                i + 1,
                fx.commit
            ));
        }
        if fx.model.is_none() && fx.perf_command.is_none() && fx.gpu_config.is_none() {
            return Err(format!(
                "{origin}: fix {} for {} changes nothing (no model, perf_command or gpu_config)",
                i + 1,
                fx.commit
            ));
        }
    }
    Ok(f.fix)
}

/// The file `preflight --suggest` writes: a header for the reviewer, then the fixes.
pub fn render(fixes: &[Fix], plan: &str) -> String {
    let body = toml::to_string_pretty(&File {
        fix: fixes.to_vec(),
    })
    .unwrap_or_default();
    format!(
        "# Fixes nightshift preflight suggests for {plan}: review each, delete what you do not\n\
         # want, then: nightshift run {plan} --fixes <this file>\n\
         # Every variant of a commit gets its fix alike; the digest and `show` say what changed.\n\n{body}"
    )
}

/// The fix for `commit`, if any.
pub(crate) fn for_commit<'a>(fixes: &'a [Fix], commit: &str) -> Option<&'a Fix> {
    fixes.iter().find(|f| f.matches(commit))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fix() -> Fix {
        Fix {
            commit: "a".repeat(40),
            kind: FixKind::SubstituteModel,
            model: Some("meta-llama/Meta-Llama-3-8B-Instruct".into()),
            perf_command: Some("python benchmarks/benchmark_serving.py --model meta-llama/Meta-Llama-3-8B-Instruct".into()),
            gpu_config: None,
            reason: "rope_scaling_incompatible".into(),
            source: "ISO-Bench".into(),
        }
    }

    #[test]
    fn a_written_file_reads_back_and_matches_by_prefix() {
        let text = render(&[fix()], "plan.toml");
        assert!(text.starts_with("# Fixes nightshift preflight suggests"));
        let back = parse(&text, "f.toml").unwrap();
        assert_eq!(back, vec![fix()]);
        assert!(back[0].matches("aaaaaaa"));
        assert!(!back[0].matches("aaaaaa"));
        assert!(!back[0].matches("bbbbbbbbbb"));
        assert!(back[0]
            .note()
            .contains("substitute model, meta-llama/Meta-Llama-3-8B-Instruct"));
    }

    #[test]
    fn bad_files_name_the_place() {
        let e = parse(
            "[[fix]]\ncommit = \"aaaaaaaa\"\nkind = \"teleport\"\n",
            "f.toml",
        )
        .unwrap_err();
        assert!(e.starts_with("f.toml:3:"), "{e}");
        let e = parse("[[fix]]\ncommit = \"xyz\"\nkind = \"tensor_parallel\"\ngpu_config = \"H100:2\"\nreason = \"r\"\nsource = \"s\"\n", "f.toml").unwrap_err();
        assert!(e.contains("hash"), "{e}");
        let e = parse("[[fix]]\ncommit = \"aaaaaaaa\"\nkind = \"tensor_parallel\"\nreason = \"r\"\nsource = \"s\"\n", "f.toml").unwrap_err();
        assert!(e.contains("changes nothing"), "{e}");
    }
}
