//! The operator's Hugging Face token: read once from the environment, handed to containers,
//! and scrubbed from every line nightshift reports (logs, errors, provenance). It is never
//! logged, stored or shown.

/// Environment variables that may hold the token, in the order they are looked up.
pub const TOKEN_VARS: [&str; 2] = ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"];

pub const MASK: &str = "[REDACTED]";

#[derive(Clone, Default)]
pub struct Secrets {
    token: Option<String>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.token.is_some() {
            "Secrets { hf_token: <set> }"
        } else {
            "Secrets { hf_token: <unset> }"
        })
    }
}

impl Secrets {
    pub(crate) fn from_env() -> Self {
        let token = TOKEN_VARS
            .iter()
            // Trimmed: a token read from an env file with a trailing newline would
            // otherwise be split across lines and escape redaction.
            .find_map(|v| {
                std::env::var(v)
                    .ok()
                    .map(|t| t.trim().to_string())
                    .filter(|t| !t.is_empty())
            });
        Secrets { token }
    }

    pub fn with_token(token: Option<String>) -> Self {
        Secrets {
            token: token
                .map(|t| t.trim().to_string())
                .filter(|t| !t.is_empty()),
        }
    }

    pub(crate) fn has_token(&self) -> bool {
        self.token.is_some()
    }

    /// `NAME=value` entries for a container's environment (both names vLLM/HF read).
    pub(crate) fn container_env(&self) -> Vec<String> {
        match &self.token {
            Some(t) => TOKEN_VARS.iter().map(|v| format!("{v}={t}")).collect(),
            None => Vec::new(),
        }
    }

    /// The line with every occurrence of the token masked.
    pub(crate) fn redact(&self, line: &str) -> String {
        match &self.token {
            // Very short "tokens" would mask ordinary text; real HF tokens are 37+ chars.
            Some(t) if t.len() >= 4 && line.contains(t.as_str()) => line.replace(t.as_str(), MASK),
            _ => line.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_every_occurrence_and_hides_in_debug() {
        let s = Secrets::with_token(Some("hf_abcdefSECRET".into()));
        assert_eq!(
            s.redact("a hf_abcdefSECRET b hf_abcdefSECRET"),
            "a [REDACTED] b [REDACTED]"
        );
        assert!(!format!("{s:?}").contains("SECRET"));
        assert_eq!(s.container_env().len(), 2);
        assert_eq!(Secrets::with_token(None).redact("x"), "x");
    }
}
