//! Why a fetch failed, in words the diagnoser and the operator know. Auth failures read
//! like huggingface_hub's own ("401 Client Error", "Cannot access gated repo", "Access to
//! model X is restricted"), so the same signatures classify a prefetch failure and a
//! server that hit the gate itself. No message ever carries the token.

use super::fit::FitProblem;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchError {
    /// 401/403 on a repo that exists: gated, or the token is missing, expired or lacks
    /// access.
    Auth {
        status: u16,
        repo_type: &'static str,
        repo: String,
        url: String,
        token_set: bool,
    },
    /// The repo, revision or file is not on the Hub (or is private and the token cannot
    /// see it: the Hub answers 401 "RepoNotFound" then).
    NotFound {
        status: u16,
        /// The Hub's `X-Error-Code` (`RepoNotFound`, `RevisionNotFound`, `EntryNotFound`)
        /// when it sent one.
        code: Option<String>,
        repo_type: &'static str,
        repo: String,
        url: String,
    },
    /// Connection refused or reset, DNS, TLS, timeout, a stalled download.
    Network {
        endpoint: String,
        repo: String,
        detail: String,
    },
    /// Any other HTTP status (5xx, 429 rate limiting, ...).
    Http {
        status: u16,
        url: String,
        detail: String,
    },
    /// Another process holds the download lock of this file.
    Busy { repo: String, detail: String },
    /// Writing to the cache or the dataset path failed (a full disk reads "No space left
    /// on device").
    Io { detail: String },
    /// A response nightshift cannot use, or a client that cannot be set up.
    Invalid { detail: String },
}

impl FetchError {
    /// Worth another attempt: the network, a stall, the Hub's 5xx or rate limiting.
    pub(crate) fn is_retryable(&self) -> bool {
        match self {
            FetchError::Network { .. } => true,
            FetchError::Http { status, .. } => *status >= 500 || *status == 429,
            _ => false,
        }
    }

    /// The Hub could not be reached at all (the cache may still serve).
    pub(crate) fn is_network(&self) -> bool {
        matches!(self, FetchError::Network { .. })
    }
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FetchError::Auth {
                status: 403,
                repo_type,
                repo,
                url,
                token_set,
            } => write!(
                f,
                "403 Client Error: Forbidden for url: {url}. Cannot access gated repo: Access \
                 to {repo_type} {repo} is restricted and you are not in the authorized list. {}",
                if *token_set {
                    "Accept the license on the repo's Hub page with the account that owns HF_TOKEN, or use a token with read access."
                } else {
                    "Set HF_TOKEN to a token whose account has been granted access."
                }
            ),
            FetchError::Auth {
                status,
                repo_type,
                repo,
                url,
                token_set,
            } => write!(
                f,
                "{status} Client Error: Unauthorized for url: {url}. Cannot access gated repo: \
                 Access to {repo_type} {repo} is restricted. You must be authenticated to \
                 access it: {}",
                if *token_set {
                    "the Hub refused the token in HF_TOKEN (expired, revoked, or without read access)."
                } else {
                    "set HF_TOKEN (or HUGGING_FACE_HUB_TOKEN) to a token with access."
                }
            ),
            FetchError::NotFound {
                status,
                code,
                repo_type,
                repo,
                url,
            } => {
                let what = match code.as_deref() {
                    Some("RevisionNotFound") => "Revision Not Found",
                    Some("EntryNotFound") => "Entry Not Found",
                    Some("RepoNotFound") => "Repository Not Found",
                    _ => "Not Found",
                };
                write!(
                    f,
                    "{status} Client Error: {what} for url: {url}. Check that {repo} is a \
                     {repo_type} on the Hub; if it is private or gated, set HF_TOKEN to a token \
                     that can read it."
                )
            }
            FetchError::Network {
                endpoint,
                repo,
                detail,
            } => write!(f, "network error fetching {repo} from {endpoint}: {detail}"),
            FetchError::Http {
                status,
                url,
                detail,
            } => write!(f, "HTTP {status} from the Hub for url: {url}: {detail}"),
            FetchError::Busy { repo, detail } => write!(
                f,
                "another process is downloading {repo} into the same cache ({detail}); try again when it is done"
            ),
            FetchError::Io { detail } => write!(f, "{detail}"),
            FetchError::Invalid { detail } => write!(f, "{detail}"),
        }
    }
}

impl std::error::Error for FetchError {}

/// Why a model could not be made ready before the server starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrefetchError {
    /// Refused before any download.
    Fit {
        model: String,
        problem: FitProblem,
    },
    Fetch(FetchError),
}

impl std::fmt::Display for PrefetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PrefetchError::Fit { model, problem } => write!(f, "{model}: {problem}"),
            PrefetchError::Fetch(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for PrefetchError {}

impl From<FetchError> for PrefetchError {
    fn from(e: FetchError) -> Self {
        PrefetchError::Fetch(e)
    }
}

/// What an error is about, for building messages.
pub(crate) struct Ctx<'a> {
    pub repo_type: &'static str,
    pub repo: &'a str,
    pub hub: &'a super::Hub,
}

impl Ctx<'_> {
    /// From an HTTP status the Hub answered.
    pub(crate) fn status(&self, status: u16, code: Option<&str>, url: &str) -> FetchError {
        let url = self.hub.redact(url);
        let not_found = matches!(
            code,
            Some("RepoNotFound" | "RevisionNotFound" | "EntryNotFound")
        );
        match status {
            401 | 403 if !not_found => FetchError::Auth {
                status,
                repo_type: self.repo_type,
                repo: self.repo.to_string(),
                url,
                token_set: self.hub.has_token(),
            },
            401 | 403 | 404 => FetchError::NotFound {
                status,
                code: code.map(str::to_string),
                repo_type: self.repo_type,
                repo: self.repo.to_string(),
                url,
            },
            _ => FetchError::Http {
                status,
                url,
                detail: code.unwrap_or("unexpected status").to_string(),
            },
        }
    }

    pub(crate) fn reqwest(&self, e: &reqwest::Error) -> FetchError {
        let url = e.url().map(|u| u.to_string()).unwrap_or_default();
        match e.status() {
            Some(s) => self.status(s.as_u16(), None, &url),
            None if e.is_decode() => self.invalid(format!(
                "the Hub's answer for {} could not be read: {}",
                self.repo,
                chain(e)
            )),
            None => self.network(chain(e)),
        }
    }

    pub(crate) fn network(&self, detail: String) -> FetchError {
        FetchError::Network {
            endpoint: self.hub.endpoint().to_string(),
            repo: self.repo.to_string(),
            detail: self.hub.redact(&detail),
        }
    }

    pub(crate) fn io(&self, e: &std::io::Error) -> FetchError {
        FetchError::Io {
            detail: self
                .hub
                .redact(&format!("writing {} to disk: {e}", self.repo)),
        }
    }

    pub(crate) fn invalid(&self, detail: String) -> FetchError {
        FetchError::Invalid {
            detail: self.hub.redact(&detail),
        }
    }
}

/// An error and its sources on one line: reqwest's own message ("error sending request")
/// says nothing of the cause.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        src = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prefetch::Hub;

    fn hub(token: Option<&str>) -> Hub {
        Hub::new(
            "http://127.0.0.1:9",
            token.map(str::to_string),
            "/tmp/x".into(),
        )
        .unwrap()
    }

    #[test]
    fn gated_401_speaks_the_diagnosers_words() {
        let h = hub(None);
        let ctx = Ctx {
            repo_type: "model",
            repo: "meta-llama/Llama-3.1-8B",
            hub: &h,
        };
        let e = ctx.status(
            401,
            Some("GatedRepo"),
            "http://127.0.0.1:9/meta-llama/Llama-3.1-8B/resolve/main/config.json",
        );
        let msg = e.to_string();
        assert!(msg.starts_with("401 Client Error"), "{msg}");
        assert!(
            msg.contains("Access to model meta-llama/Llama-3.1-8B is restricted"),
            "{msg}"
        );
        assert!(msg.contains("set HF_TOKEN"), "{msg}");
        assert!(!e.is_retryable());
    }

    #[test]
    fn forbidden_and_not_found() {
        let h = hub(Some("hf_abcdefghijkl"));
        let ctx = Ctx {
            repo_type: "model",
            repo: "org/m",
            hub: &h,
        };
        let e = ctx.status(403, None, "u");
        assert!(e.to_string().contains("Cannot access gated repo"), "{e}");
        assert!(e.to_string().contains("Accept the license"), "{e}");
        // The Hub hides private repos behind 401 RepoNotFound.
        let e = ctx.status(401, Some("RepoNotFound"), "u");
        assert!(
            matches!(e, FetchError::NotFound { status: 401, .. }),
            "{e:?}"
        );
        assert!(e.to_string().contains("Repository Not Found"), "{e}");
        let e = ctx.status(503, None, "u");
        assert!(e.is_retryable());
    }

    #[test]
    fn urls_are_redacted() {
        let h = hub(Some("hf_abcdefghijkl"));
        let ctx = Ctx {
            repo_type: "model",
            repo: "org/m",
            hub: &h,
        };
        let e = ctx.status(401, None, "http://x/?t=hf_abcdefghijkl");
        assert!(!e.to_string().contains("hf_abcdefghijkl"));
    }
}
