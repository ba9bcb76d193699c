//! Model weights and datasets fetched before the server-start clock.
//!
//! A vLLM server that downloads its own weights spends the server-start timeout on the
//! network, and one that meets a gated repo fails minutes in with a Python traceback. So
//! the host fetches first: list the repo's files ([`Hub::plan_model`]), check the weights
//! fit the GPUs and the cache disk ([`check_fits`]), download what the cache lacks into the
//! Hugging Face cache layout ([`Hub::fetch_model`]), then start the server offline
//! ([`OFFLINE_ENV`]). [`Hub::ensure_model`] does all of it in one call, for the runtime.
//!
//! The cache is the one Python's `huggingface_hub` reads and writes
//! (`models--org--name/{blobs,refs,snapshots}`, `.locks/`, `*.incomplete` partial blobs),
//! so a vLLM container that mounts it finds the files with `HF_HUB_OFFLINE=1`. `hf-hub`
//! builds the client (endpoint, token, user agent), the URLs and the cache names; the
//! bytes are streamed here so the token never goes to the CDN a download is redirected to
//! (see `download`). The endpoint is configurable (`HF_ENDPOINT`), which is how the tests
//! stand a local server in for the Hub.

mod cache;
mod dataset;
mod download;
mod error;
mod files;
mod fit;
mod model;
mod progress;
mod select;

pub mod cli;

pub use dataset::{DatasetOutcome, HubDataset, SHAREGPT};

pub(crate) use dataset::hub_dataset;
pub use error::{FetchError, PrefetchError};
pub use files::{FileState, ModelFiles, RepoFile};
pub(crate) use fit::{check_fits, free_disk_bytes};
pub use fit::{Budget, FitProblem, DISK_MARGIN_BYTES};
pub use model::{FetchSummary, Prepared};
pub(crate) use progress::human_bytes;
pub use progress::Progress;
pub use select::Selected;
pub(crate) use select::{is_hub_id, select_files};

use hf_hub::api::tokio::{Api, ApiBuilder};
use hf_hub::Cache;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Environment variables that may hold the token, in the order they are looked up (the
/// same order the Docker runtime hands to containers).
pub const TOKEN_VARS: [&str; 2] = ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"];

/// What the server container needs once the weights are in the mounted cache: no Hub
/// calls at start-up, so a flaky network or a rate limit cannot fail the run.
pub const OFFLINE_ENV: [(&str, &str); 2] = [("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1")];

/// The operator said the night has no Hub (`HF_HUB_OFFLINE`, as huggingface_hub reads it):
/// nothing is fetched, on the host or in a container, so what is not in the cache by the
/// night is not there during it.
pub(crate) fn hub_offline() -> bool {
    std::env::var("HF_HUB_OFFLINE").is_ok_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "1" | "true" | "yes" | "on"
        )
    })
}

pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// A download that moves no byte for this long is abandoned (and retried): a stalled
/// connection must not hold a GPU slot all night.
pub const DEFAULT_STALL_TIMEOUT: Duration = Duration::from_secs(300);

/// The Hugging Face Hub as seen from the host: endpoint, token and cache directory.
/// Cheap to clone; clones share the per-model locks, so concurrent runs that need the same
/// model download it once (the second waits, then finds it cached).
#[derive(Clone)]
pub struct Hub {
    endpoint: String,
    token: Option<String>,
    cache_dir: PathBuf,
    api: Api,
    /// Follows no redirect: the size probe's token stays on the Hub.
    probe_client: reqwest::Client,
    /// No token: asks a CDN URL the Hub redirected to.
    anon_client: reqwest::Client,
    stall_timeout: Duration,
    retries: u32,
    locks: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub")
            .field("endpoint", &self.endpoint)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("cache_dir", &self.cache_dir)
            .finish()
    }
}

impl Hub {
    /// Endpoint from `HF_ENDPOINT` (default https://huggingface.co); token from `HF_TOKEN`,
    /// then `HUGGING_FACE_HUB_TOKEN`, trimmed. The cache is `hf_cache/hub` when the plan
    /// mounts a host HF cache (`hf_cache` is what the container sees as
    /// `/root/.cache/huggingface`), else where Python's huggingface_hub would put it:
    /// `$HF_HUB_CACHE`, `$HF_HOME/hub`, `$XDG_CACHE_HOME/huggingface/hub`,
    /// `~/.cache/huggingface/hub`.
    pub(crate) fn from_env(hf_cache: Option<&Path>) -> Result<Hub, FetchError> {
        let endpoint = std::env::var("HF_ENDPOINT")
            .ok()
            .map(|e| e.trim().to_string())
            .filter(|e| !e.is_empty())
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string());
        let token = TOKEN_VARS.iter().find_map(|v| std::env::var(v).ok());
        let cache_dir = match hf_cache {
            Some(h) => h.join("hub"),
            None => default_cache_dir(),
        };
        Hub::new(endpoint, token, cache_dir)
    }

    /// A Hub at `endpoint` (trailing `/` ignored) with this token and hub cache directory
    /// (the folder that holds `models--org--name`).
    pub fn new(
        endpoint: impl Into<String>,
        token: Option<String>,
        cache_dir: PathBuf,
    ) -> Result<Hub, FetchError> {
        let endpoint = endpoint.into().trim_end_matches('/').to_string();
        let token = token
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty());
        let api = ApiBuilder::from_cache(Cache::new(cache_dir.clone()))
            .with_endpoint(endpoint.clone())
            // Explicit, also when None: hf-hub would otherwise read `$HF_HOME/token`, a
            // token the runtime does not know and so could not redact.
            .with_token(token.clone())
            .with_progress(false)
            .with_user_agent("nightshift", env!("CARGO_PKG_VERSION"))
            .build()
            .map_err(|e| FetchError::Invalid {
                detail: format!(
                    "cannot set up the Hub client (is the token a plain HF token?): {}",
                    redact_with(token.as_deref(), &e.to_string())
                ),
            })?;
        let (probe_client, anon_client) = probe_clients(token.as_deref())?;
        Ok(Hub {
            endpoint,
            token,
            cache_dir,
            api,
            probe_client,
            anon_client,
            stall_timeout: DEFAULT_STALL_TIMEOUT,
            retries: 3,
            locks: Arc::default(),
        })
    }

    /// Attempts per file on network errors (at least 1); a retry resumes the partial file.
    pub fn with_retries(mut self, attempts: u32) -> Self {
        self.retries = attempts.max(1);
        self
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The hub cache directory (holds `models--org--name/`).
    pub(crate) fn cache_dir(&self) -> &Path {
        &self.cache_dir
    }

    pub(crate) fn has_token(&self) -> bool {
        self.token.is_some()
    }

    /// The text with the token masked (errors from HTTP libraries are passed through this).
    pub(crate) fn redact(&self, text: &str) -> String {
        redact_with(self.token.as_deref(), text)
    }

    /// One async lock per repo, shared by clones of this Hub.
    fn repo_lock(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut map = self.locks.lock().unwrap_or_else(|p| p.into_inner());
        map.entry(key.to_string()).or_default().clone()
    }
}

fn probe_clients(token: Option<&str>) -> Result<(reqwest::Client, reqwest::Client), FetchError> {
    use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION, USER_AGENT};
    let invalid = |e: &dyn std::fmt::Display| FetchError::Invalid {
        detail: format!(
            "cannot set up the Hub client: {}",
            redact_with(token, &e.to_string())
        ),
    };
    let ua = HeaderValue::from_static(concat!("nightshift/", env!("CARGO_PKG_VERSION")));
    let mut headers = HeaderMap::new();
    headers.insert(USER_AGENT, ua.clone());
    if let Some(t) = token {
        let mut v = HeaderValue::from_str(&format!("Bearer {t}"))
            .map_err(|_| invalid(&"the token has characters a header cannot carry"))?;
        v.set_sensitive(true);
        headers.insert(AUTHORIZATION, v);
    }
    let probe = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .default_headers(headers)
        .build()
        .map_err(|e| invalid(&e))?;
    let mut anon_headers = HeaderMap::new();
    anon_headers.insert(USER_AGENT, ua);
    let anon = reqwest::Client::builder()
        .default_headers(anon_headers)
        .build()
        .map_err(|e| invalid(&e))?;
    Ok((probe, anon))
}

fn redact_with(token: Option<&str>, text: &str) -> String {
    match token {
        // Very short "tokens" would mask ordinary text; real HF tokens are 37+ chars.
        Some(t) if t.len() >= 4 && text.contains(t) => text.replace(t, "[REDACTED]"),
        _ => text.to_string(),
    }
}

/// Python huggingface_hub's lookup order for the hub cache.
fn default_cache_dir() -> PathBuf {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(p) = var("HF_HUB_CACHE").or_else(|| var("HUGGINGFACE_HUB_CACHE")) {
        return p;
    }
    if let Some(p) = var("HF_HOME") {
        return p.join("hub");
    }
    if let Some(p) = var("XDG_CACHE_HOME") {
        return p.join("huggingface").join("hub");
    }
    var("HOME")
        .unwrap_or_else(|| PathBuf::from("/root"))
        .join(".cache")
        .join("huggingface")
        .join("hub")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_redact_hide_the_token() {
        let hub = Hub::new(
            "http://127.0.0.1:1/",
            Some(" hf_secretsecret\n".into()),
            "/tmp/x".into(),
        )
        .unwrap();
        assert_eq!(hub.endpoint(), "http://127.0.0.1:1");
        assert!(!format!("{hub:?}").contains("hf_secret"));
        assert_eq!(hub.redact("a hf_secretsecret b"), "a [REDACTED] b");
    }

    #[test]
    fn plan_cache_dir_is_the_mounts_hub_folder() {
        let hub = Hub::from_env(Some(Path::new("/data/hf"))).unwrap();
        assert_eq!(hub.cache_dir(), Path::new("/data/hf/hub"));
    }
}
