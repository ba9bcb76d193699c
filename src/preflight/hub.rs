//! A model's facts from the HF cache (offline) and the Hub: exists, gated and readable with
//! the token, `config.json` (architecture, rope_scaling, dtype) and the weights' size
//! (the safetensors index's `metadata.total_size`, else the weight files' sizes).
//! Only metadata is read: no weight byte moves.

use super::facts::ModelFacts;
use crate::prefetch::{is_hub_id, select_files, TOKEN_VARS};
use reqwest::StatusCode;
use std::path::{Path, PathBuf};
use std::time::Duration;

const INDEXES: [&str; 2] = [
    "model.safetensors.index.json",
    "pytorch_model.bin.index.json",
];

/// `models--org--name` as huggingface_hub names a model's cache folder.
pub(crate) fn repo_dir(hub_cache: &Path, model: &str) -> PathBuf {
    hub_cache.join(format!("models--{}", model.replace('/', "--")))
}

fn snapshot(hub_cache: &Path, model: &str) -> Option<PathBuf> {
    let dir = repo_dir(hub_cache, model);
    let rev = std::fs::read_to_string(dir.join("refs").join("main")).ok();
    match rev.map(|r| r.trim().to_string()).filter(|r| !r.is_empty()) {
        Some(r) => Some(dir.join("snapshots").join(r)).filter(|p| p.is_dir()),
        // A cache written by hand or by an old client: the only snapshot there is.
        None => {
            let mut snaps: Vec<PathBuf> = std::fs::read_dir(dir.join("snapshots"))
                .ok()?
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect();
            snaps.sort();
            (snaps.len() == 1).then(|| snaps.remove(0))
        }
    }
}

/// `metadata.total_size` of a safetensors (or bin) index.
pub(crate) fn index_total(bytes: &[u8]) -> Option<u64> {
    let v: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    v.pointer("/metadata/total_size")
        .and_then(|t| t.as_u64().or_else(|| t.as_f64().map(|f| f as u64)))
}

/// What the cache holds for `model` (config, weight size); `None` when nothing.
pub(crate) fn from_cache(hub_cache: &Path, model: &str) -> Option<ModelFacts> {
    // A local directory named as the model is what vLLM loads then.
    let snap = if Path::new(model).is_absolute() && Path::new(model).is_dir() {
        PathBuf::from(model)
    } else {
        snapshot(hub_cache, model)?
    };
    let config = std::fs::read(snap.join("config.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    let mut weights = INDEXES.iter().find_map(|i| {
        std::fs::read(snap.join(i))
            .ok()
            .and_then(|b| index_total(&b))
    });
    if weights.is_none() {
        let mut names = Vec::new();
        for e in std::fs::read_dir(&snap).ok()?.flatten() {
            if let (Ok(m), Some(n)) = (std::fs::metadata(e.path()), e.file_name().to_str()) {
                names.push((n.to_string(), m.len()));
            }
        }
        let refs: Vec<&str> = names.iter().map(|(n, _)| n.as_str()).collect();
        let sum: u64 = select_files(&refs, None)
            .iter()
            .filter(|s| s.weights)
            .filter_map(|s| names.iter().find(|(n, _)| *n == s.path).map(|x| x.1))
            .fold(0u64, u64::saturating_add);
        weights = (sum > 0).then_some(sum);
    }
    if config.is_none() && weights.is_none() {
        return None;
    }
    Some(ModelFacts {
        exists: Some(true),
        config,
        weights_bytes: weights,
        source: "hf cache".into(),
        ..ModelFacts::default()
    })
}

/// The Hub as preflight asks it: endpoint and token from the environment, as the runtime's.
#[derive(Clone)]
pub struct HubClient {
    endpoint: String,
    client: reqwest::Client,
    has_token: bool,
}

/// Why the Hub could not be asked (every lookup after the first failure is skipped).
#[derive(Debug, Clone)]
pub struct Unreachable(pub String);

impl HubClient {
    pub(crate) fn from_env() -> HubClient {
        let endpoint = std::env::var("HF_ENDPOINT")
            .ok()
            .map(|e| e.trim().trim_end_matches('/').to_string())
            .filter(|e| !e.is_empty())
            .unwrap_or_else(|| crate::prefetch::DEFAULT_ENDPOINT.to_string());
        let token = TOKEN_VARS
            .iter()
            .find_map(|v| std::env::var(v).ok())
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty());
        let mut headers = reqwest::header::HeaderMap::new();
        if let Some(t) = &token {
            if let Ok(mut v) = reqwest::header::HeaderValue::from_str(&format!("Bearer {t}")) {
                v.set_sensitive(true);
                headers.insert(reqwest::header::AUTHORIZATION, v);
            }
        }
        let client = reqwest::Client::builder()
            .default_headers(headers)
            // The token stays on the Hub: a redirect to a CDN is not followed (sizes come
            // from headers and the API, never from the CDN).
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(20))
            .user_agent(concat!("nightshift/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default();
        HubClient {
            endpoint,
            client,
            has_token: token.is_some(),
        }
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    async fn get(&self, url: &str) -> Result<reqwest::Response, Unreachable> {
        self.client.get(url).send().await.map_err(|e| {
            Unreachable(format!(
                "the Hub ({}) cannot be reached: {}",
                self.endpoint,
                if e.is_timeout() {
                    "timed out"
                } else {
                    "cannot connect"
                }
            ))
        })
    }

    /// A small file of the repo at `main` (config.json, the index), or its status.
    ///
    /// The real Hub answers `resolve` of a small file with a 307 to a path of its own
    /// (`/api/resolve-cache/…`, or a renamed repo's new name): those are followed, as
    /// huggingface_hub does, with the token. A redirect to another host is a CDN serving
    /// LFS content: never followed (the token stays on the Hub), and not metadata.
    async fn file(&self, model: &str, name: &str) -> Result<Result<Vec<u8>, u16>, Unreachable> {
        let mut url = format!("{}/{model}/resolve/main/{name}", self.endpoint);
        for _ in 0..=MAX_REDIRECTS {
            let r = self.get(&url).await?;
            let status = r.status();
            if status.is_redirection() {
                let next = r
                    .headers()
                    .get(reqwest::header::LOCATION)
                    .and_then(|l| l.to_str().ok())
                    .and_then(|l| same_host(&url, l));
                match next {
                    Some(n) => {
                        url = n;
                        continue;
                    }
                    None => return Ok(Err(status.as_u16())),
                }
            }
            if !status.is_success() {
                return Ok(Err(status.as_u16()));
            }
            return Ok(read_bounded(r, MAX_SMALL_FILE)
                .await
                .map_err(|_| status.as_u16()));
        }
        // A redirect loop: nothing read.
        Ok(Err(310))
    }

    /// Everything the Hub says about `model`, filling what `cached` lacks.
    pub async fn lookup(
        &self,
        model: &str,
        cached: Option<ModelFacts>,
    ) -> Result<ModelFacts, Unreachable> {
        let mut m = cached.unwrap_or_default();
        if !is_hub_id(model) {
            m.unchecked.push("not a Hub id (a local path?)".into());
            return Ok(m);
        }
        let info_url = format!("{}/api/models/{model}?blobs=true", self.endpoint);
        let r = self.get(&info_url).await?;
        match r.status() {
            // The Hub answers 401 for repos that do not exist (or are private) too.
            StatusCode::NOT_FOUND | StatusCode::UNAUTHORIZED => {
                m.exists = Some(false);
                m.source = "hub".into();
                return Ok(m);
            }
            s if !s.is_success() => {
                m.unchecked
                    .push(format!("the Hub answered {s} for its model info"));
                return Ok(m);
            }
            _ => {}
        }
        let info: serde_json::Value = match read_bounded(r, MAX_MODEL_INFO).await {
            Ok(b) => serde_json::from_slice(&b).unwrap_or_default(),
            Err(e) => {
                m.unchecked.push(format!("its model info: {e}"));
                return Ok(m);
            }
        };
        m.exists = Some(true);
        if m.source.is_empty() {
            m.source = "hub".into();
        }
        let gated = info
            .get("gated")
            .is_some_and(|g| g.as_bool() != Some(false) && !g.is_null());
        m.gated = Some(gated);
        // Reading config.json tells both: the token's access and the architecture.
        match self.file(model, "config.json").await? {
            Ok(b) => {
                m.access = Some(true);
                if m.config.is_none() {
                    m.config = serde_json::from_slice(&b).ok();
                }
            }
            Err(401 | 403) => {
                // It exists (the model info answered) and refuses reads: gated or private.
                m.gated = Some(true);
                m.access = Some(false);
                if !self.has_token {
                    m.unchecked
                        .push("gated and no HF_TOKEN set: access not known".into());
                    m.access = None;
                    m.gated = Some(true);
                }
            }
            Err(s) => m.unchecked.push(format!("config.json: HTTP {s}")),
        }
        if m.weights_bytes.is_none() {
            m.weights_bytes = self.weights(model, &info).await?;
        }
        m.unloadable = unloadable(&info);
        Ok(m)
    }

    async fn weights(
        &self,
        model: &str,
        info: &serde_json::Value,
    ) -> Result<Option<u64>, Unreachable> {
        let siblings: Vec<(&str, Option<u64>)> = info
            .get("siblings")
            .and_then(|s| s.as_array())
            .map(|s| {
                s.iter()
                    .filter_map(|x| {
                        let name = x.get("rfilename")?.as_str()?;
                        let size = x
                            .get("size")
                            .and_then(|v| v.as_u64())
                            .or_else(|| x.pointer("/lfs/size").and_then(|v| v.as_u64()));
                        Some((name, size))
                    })
                    .collect()
            })
            .unwrap_or_default();
        for ix in INDEXES {
            if siblings.iter().any(|(n, _)| *n == ix) {
                if let Ok(b) = self.file(model, ix).await? {
                    if let Some(t) = index_total(&b) {
                        return Ok(Some(t));
                    }
                }
            }
        }
        let names: Vec<&str> = siblings.iter().map(|(n, _)| *n).collect();
        let sum: Option<u64> = select_files(&names, None)
            .iter()
            .filter(|s| s.weights)
            .map(|s| {
                siblings
                    .iter()
                    .find(|(n, _)| *n == s.path)
                    .and_then(|x| x.1)
            })
            // Sizes are the Hub's word: absurd ones saturate instead of wrapping to "fits".
            .try_fold(0u64, |acc, x| x.map(|v| acc.saturating_add(v)));
        // The safetensors parameter count, when the listing has no sizes.
        let by_params = info.pointer("/safetensors/parameters").and_then(|p| {
            let p = p.as_object()?;
            Some(
                p.iter()
                    .map(|(dtype, n)| n.as_u64().unwrap_or(0).saturating_mul(dtype_bytes(dtype)))
                    .fold(0u64, u64::saturating_add),
            )
        });
        Ok(sum.filter(|s| *s > 0).or(by_params))
    }
}

/// The evidence that vLLM cannot load a repo, from its listing: no `config.json` and no
/// weight file vLLM reads at the top level. None when the listing is absent or empty (no
/// evidence either way) or when either is there.
fn unloadable(info: &serde_json::Value) -> Option<String> {
    let names: Vec<&str> = info
        .get("siblings")?
        .as_array()?
        .iter()
        .filter_map(|s| s.get("rfilename")?.as_str())
        .collect();
    if names.is_empty() || names.contains(&"config.json") {
        return None;
    }
    let weights = select_files(&names, None).iter().any(|s| s.weights);
    (!weights).then(|| {
        let sample: Vec<&str> = names.iter().take(4).copied().collect();
        format!(
            "its {} files hold no config.json and no weights vLLM loads (*.safetensors, *.bin, *.pt at the top level; it has {}{})",
            names.len(),
            sample.join(", "),
            if names.len() > 4 { ", …" } else { "" }
        )
    })
}

/// Redirects followed for one small file (huggingface_hub follows a handful too).
const MAX_REDIRECTS: usize = 5;
/// config.json, a tokenizer config or a safetensors index: far below this.
const MAX_SMALL_FILE: usize = 16 << 20;
/// The model info with every file listed (`?blobs=true`): a repo with thousands of files
/// stays below this.
const MAX_MODEL_INFO: usize = 64 << 20;

/// `location` resolved against `from`, when it stays on the same scheme, host and port.
fn same_host(from: &str, location: &str) -> Option<String> {
    let base = reqwest::Url::parse(from).ok()?;
    let next = base.join(location).ok()?;
    (next.scheme() == base.scheme()
        && next.host_str() == base.host_str()
        && next.port_or_known_default() == base.port_or_known_default())
    .then(|| next.to_string())
}

/// The body, refused past `max` bytes (a Hub answer is never read whole on trust).
pub(crate) async fn read_bounded(mut r: reqwest::Response, max: usize) -> Result<Vec<u8>, String> {
    if r.content_length().is_some_and(|n| n > max as u64) {
        return Err(format!("the Hub's answer is over {} MiB", max >> 20));
    }
    let mut out = Vec::new();
    while let Some(chunk) = r.chunk().await.map_err(|e| e.to_string())? {
        if out.len() + chunk.len() > max {
            return Err(format!("the Hub's answer is over {} MiB", max >> 20));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

fn dtype_bytes(dtype: &str) -> u64 {
    match dtype.to_ascii_uppercase().as_str() {
        "F64" | "I64" => 8,
        "F32" | "I32" | "U32" => 4,
        "BF16" | "F16" | "I16" => 2,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repo_with_nothing_vllm_loads_is_evidence() {
        let nemo = serde_json::json!({"siblings": [
            {"rfilename": ".gitattributes"}, {"rfilename": "README.md"},
            {"rfilename": "model_config.yaml"}, {"rfilename": "model_weights/common.pt"}
        ]});
        assert!(unloadable(&nemo).unwrap().contains("no config.json"));
        let ok = serde_json::json!({"siblings": [
            {"rfilename": "config.json"}, {"rfilename": "model.safetensors"}
        ]});
        assert_eq!(unloadable(&ok), None);
        // No listing is no evidence.
        assert_eq!(unloadable(&serde_json::json!({})), None);
        assert_eq!(unloadable(&serde_json::json!({"siblings": []})), None);
    }

    #[test]
    fn redirects_stay_on_the_hub() {
        let from = "https://huggingface.co/org/m/resolve/main/config.json";
        assert_eq!(
            same_host(from, "/api/resolve-cache/models/org/m/abc/config.json").as_deref(),
            Some("https://huggingface.co/api/resolve-cache/models/org/m/abc/config.json")
        );
        assert_eq!(
            same_host(
                from,
                "https://huggingface.co/org/renamed/resolve/main/config.json"
            )
            .as_deref(),
            Some("https://huggingface.co/org/renamed/resolve/main/config.json")
        );
        for away in [
            "https://cdn-lfs.hf.co/repos/ab/cd/xyz",
            "http://huggingface.co/x",
            "https://huggingface.co:8443/x",
            "//evil.example/x",
        ] {
            assert_eq!(same_host(from, away), None, "{away}");
        }
    }

    #[test]
    fn the_cache_gives_config_and_index_size() {
        let dir = tempfile::tempdir().unwrap();
        let repo = repo_dir(dir.path(), "org/m");
        let snap = repo.join("snapshots").join("abc");
        std::fs::create_dir_all(&snap).unwrap();
        std::fs::create_dir_all(repo.join("refs")).unwrap();
        std::fs::write(repo.join("refs/main"), "abc").unwrap();
        std::fs::write(
            snap.join("config.json"),
            r#"{"architectures":["LlamaForCausalLM"]}"#,
        )
        .unwrap();
        std::fs::write(
            snap.join("model.safetensors.index.json"),
            r#"{"metadata":{"total_size":16060522496},"weight_map":{}}"#,
        )
        .unwrap();
        let m = from_cache(dir.path(), "org/m").unwrap();
        assert_eq!(m.weights_bytes, Some(16_060_522_496));
        assert_eq!(m.architectures(), ["LlamaForCausalLM"]);
        assert!(from_cache(dir.path(), "org/other").is_none());
    }
}
