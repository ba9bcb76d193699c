//! Is an image in its registry? A `HEAD` of its manifest (Docker Registry HTTP API v2), with
//! the credentials `docker login` left in the operator's Docker config: exists (digest and
//! the compressed size of its layers), missing, or refused. Nothing is pulled.
//!
//! Docker Hub counts every `GET` of a manifest as a pull against the account's quota (a
//! `HEAD` is free), so on Docker Hub the size comes from Hub's own tags API; other
//! registries are asked for the manifest by digest. A repository Docker Hub does not know
//! answers `401` like one the credentials may not read: Hub's repositories API tells them
//! apart, so "missing" is not reported as "docker login".
//!
//! The registry's own auth dance is followed: a `401` with `WWW-Authenticate: Basic` is
//! answered with the user and password; `Bearer realm=…,service=…` sends them to the token
//! endpoint first. No credential ever reaches a message.

use super::facts::ImageState;
use crate::runtime::docker::auth::{DockerAuth, Registry};
use crate::runtime::docker::image::split_ref;
use reqwest::header::{ACCEPT, WWW_AUTHENTICATE};
use reqwest::{Method, StatusCode};
use std::time::Duration;

const ACCEPTS: &str = "application/vnd.docker.distribution.manifest.list.v2+json, \
application/vnd.oci.image.index.v1+json, \
application/vnd.docker.distribution.manifest.v2+json, \
application/vnd.oci.image.manifest.v1+json";

/// A client for manifest requests: short timeouts, a box without a route to the registry
/// must not hold the preflight for minutes.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(20))
        .user_agent(concat!("nightshift/", env!("CARGO_PKG_VERSION")))
        .build()
        .unwrap_or_default()
}

/// Where the registry API of `image` is: base URL and repository path.
pub fn endpoint(image: &str) -> (String, String, String) {
    let (repo, tag) = split_ref(image);
    let reg = Registry::of(image);
    let path = match repo.split_once('/') {
        Some((first, rest))
            if first.contains('.') || first.contains(':') || first == "localhost" =>
        {
            rest.to_string()
        }
        _ => repo.to_string(),
    };
    let (base, path) = if reg.is_docker_hub() {
        let path = if path.contains('/') {
            path
        } else {
            format!("library/{path}")
        };
        ("https://registry-1.docker.io".to_string(), path)
    } else {
        // Docker talks plain HTTP to registries on the loopback only.
        let host = reg.host.split(':').next().unwrap_or("");
        let scheme = if host == "localhost" || host.starts_with("127.") {
            "http"
        } else {
            "https"
        };
        (format!("{scheme}://{}", reg.host), path)
    };
    (base, path, tag.to_string())
}

struct Creds {
    user: String,
    pass: String,
}

fn creds_for(auth: &DockerAuth, image: &str) -> Result<Option<Creds>, String> {
    let c = auth.credentials_for(image).map_err(|e| e.to_string())?;
    Ok(c.and_then(|c| {
        let d = c.docker();
        Some(Creds {
            user: d.username?,
            pass: d.password?,
        })
    }))
}

/// `key="value"` pairs of a `WWW-Authenticate` challenge.
fn challenge_param(header: &str, key: &str) -> Option<String> {
    let start = header.find(&format!("{key}=\""))? + key.len() + 2;
    let end = header[start..].find('"')? + start;
    Some(header[start..end].to_string())
}

/// Where `image` is in its registry.
pub async fn lookup(client: &reqwest::Client, auth: &DockerAuth, image: &str) -> ImageState {
    let (base, path, tag) = endpoint(image);
    let url = format!("{base}/v2/{path}/manifests/{tag}");
    let creds = match creds_for(auth, image) {
        Ok(c) => c,
        Err(e) => return ImageState::Unknown(format!("credentials: {e}")),
    };
    let first = match request(client, Method::HEAD, &url, None).await {
        Ok(r) => r,
        Err(e) => return ImageState::Unknown(e),
    };
    let mut used: Option<String> = None;
    let resp = if first.status() == StatusCode::UNAUTHORIZED {
        let challenge = first
            .headers()
            .get(WWW_AUTHENTICATE)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("")
            .to_string();
        let header = if challenge.to_ascii_lowercase().starts_with("bearer") {
            match bearer(client, &challenge, &path, creds.as_ref()).await {
                Ok(t) => format!("Bearer {t}"),
                Err(state) => return state,
            }
        } else {
            match &creds {
                Some(c) => basic(c),
                None => {
                    return ImageState::Denied {
                        detail: format!(
                            "{} wants credentials and the Docker config has none (docker login {})",
                            Registry::of(image).host,
                            Registry::of(image).server_address()
                        ),
                    }
                }
            }
        };
        let r = request(client, Method::HEAD, &url, Some(&header)).await;
        used = Some(header);
        match r {
            Ok(r) => r,
            Err(e) => return ImageState::Unknown(e),
        }
    } else {
        first
    };
    let status = resp.status();
    let reg = Registry::of(image);
    match status {
        s if s.is_success() => {}
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
            if reg.is_docker_hub() && hub_repo_missing(client, &path).await {
                return ImageState::Missing {
                    detail: format!(
                        "{path} is not a repository on Docker Hub (Hub's API answers 404; a private repository of another account reads the same)"
                    ),
                };
            }
            return ImageState::Denied {
                detail: format!(
                    "{} refused the credentials ({status}): docker login {}",
                    reg.host,
                    reg.server_address()
                ),
            };
        }
        StatusCode::NOT_FOUND => {
            return ImageState::Missing {
                detail: format!("{image} is not in {} (manifest unknown)", reg.host),
            }
        }
        s => return ImageState::Unknown(format!("{}: HTTP {s}", reg.host)),
    }
    let digest = resp
        .headers()
        .get("docker-content-digest")
        .and_then(|d| d.to_str().ok())
        .unwrap_or("")
        .to_string();
    let size = if reg.is_docker_hub() {
        hub_tag_size(client, &path, &tag).await
    } else {
        let by = if digest.is_empty() {
            tag.as_str()
        } else {
            digest.as_str()
        };
        manifest_size(client, &base, &path, by, used.as_deref()).await
    };
    match size {
        Ok(size) => ImageState::Registry { digest, size },
        Err(why) => {
            ImageState::Unknown(format!("{image}: in its registry ({digest}); size: {why}"))
        }
    }
}

/// The compressed size of an image's layers from its manifest (by digest: no tag moves
/// between the two requests); an index is followed to its linux/amd64 image.
async fn manifest_size(
    client: &reqwest::Client,
    base: &str,
    path: &str,
    reference: &str,
    auth: Option<&str>,
) -> Result<u64, String> {
    let url = format!("{base}/v2/{path}/manifests/{reference}");
    let body = json(request(client, Method::GET, &url, auth).await?).await?;
    let Some(list) = body.get("manifests").and_then(|m| m.as_array()) else {
        return Ok(layers_size(&body));
    };
    let pick = list
        .iter()
        .find(|m| m.pointer("/platform/architecture").and_then(|a| a.as_str()) == Some("amd64"))
        .or_else(|| list.first());
    let d = pick
        .and_then(|m| m.get("digest"))
        .and_then(|d| d.as_str())
        .ok_or("the manifest list names no image")?;
    let url = format!("{base}/v2/{path}/manifests/{d}");
    Ok(layers_size(
        &json(request(client, Method::GET, &url, auth).await?).await?,
    ))
}

/// Bounded: a manifest is a few KB; an answer past this is not one.
const MAX_MANIFEST: usize = 4 << 20;

async fn json(resp: reqwest::Response) -> Result<serde_json::Value, String> {
    if !resp.status().is_success() {
        return Err(format!("HTTP {}", resp.status()));
    }
    let bytes = crate::preflight::hub::read_bounded(resp, MAX_MANIFEST)
        .await
        .map_err(|e| e.to_string())?;
    serde_json::from_slice(&bytes).map_err(|e| e.to_string())
}

/// Docker Hub's API (not the registry: no pull is counted).
const HUB_API: &str = "https://hub.docker.com/v2";

async fn hub_tag_size(client: &reqwest::Client, path: &str, tag: &str) -> Result<u64, String> {
    let url = format!("{HUB_API}/repositories/{path}/tags/{tag}");
    let v = json(request(client, Method::GET, &url, None).await?).await?;
    v.get("full_size")
        .and_then(|s| s.as_u64())
        .ok_or_else(|| "Docker Hub's tag answer has no full_size".to_string())
}

/// Whether Docker Hub's repositories API says `path` does not exist (404). Anything else
/// (200, a refusal, no answer) is no evidence of absence.
async fn hub_repo_missing(client: &reqwest::Client, path: &str) -> bool {
    let url = format!("{HUB_API}/repositories/{path}/");
    matches!(
        request(client, Method::GET, &url, None).await,
        Ok(r) if r.status() == StatusCode::NOT_FOUND
    )
}

fn layers_size(m: &serde_json::Value) -> u64 {
    let config = m
        .pointer("/config/size")
        .and_then(|s| s.as_u64())
        .unwrap_or(0);
    let layers: u64 = m
        .get("layers")
        .and_then(|l| l.as_array())
        .map(|l| {
            l.iter()
                .filter_map(|x| x.get("size").and_then(|s| s.as_u64()))
                .fold(0u64, u64::saturating_add)
        })
        .unwrap_or(0);
    config.saturating_add(layers)
}

fn basic(c: &Creds) -> String {
    use base64::Engine;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", c.user, c.pass))
    )
}

async fn request(
    client: &reqwest::Client,
    method: Method,
    url: &str,
    authorization: Option<&str>,
) -> Result<reqwest::Response, String> {
    let mut req = client.request(method, url).header(ACCEPT, ACCEPTS);
    if let Some(a) = authorization {
        let mut v = reqwest::header::HeaderValue::from_str(a)
            .map_err(|_| "credentials a header cannot carry".to_string())?;
        v.set_sensitive(true);
        req = req.header(reqwest::header::AUTHORIZATION, v);
    }
    req.send().await.map_err(|e| {
        let host = url.split('/').nth(2).unwrap_or(url);
        format!("registry {host} unreachable ({})", kind_of(&e))
    })
}

fn kind_of(e: &reqwest::Error) -> &'static str {
    if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "cannot connect"
    } else {
        "request failed"
    }
}

/// A token from the registry's token endpoint (`realm`), for pulling `path`.
async fn bearer(
    client: &reqwest::Client,
    challenge: &str,
    path: &str,
    creds: Option<&Creds>,
) -> Result<String, ImageState> {
    let realm = challenge_param(challenge, "realm").ok_or_else(|| {
        ImageState::Unknown("registry sent a Bearer challenge without realm".into())
    })?;
    let mut req = client
        .get(&realm)
        .query(&[("scope", format!("repository:{path}:pull"))]);
    if let Some(s) = challenge_param(challenge, "service") {
        req = req.query(&[("service", s)]);
    }
    if let Some(c) = creds {
        req = req.basic_auth(&c.user, Some(&c.pass));
    }
    let resp = req.send().await.map_err(|e| {
        ImageState::Unknown(format!("token endpoint unreachable ({})", kind_of(&e)))
    })?;
    let host = realm
        .split('/')
        .nth(2)
        .unwrap_or("the registry")
        .to_string();
    if resp.status() == StatusCode::UNAUTHORIZED || resp.status() == StatusCode::FORBIDDEN {
        return Err(ImageState::Denied {
            detail: format!(
                "token endpoint {host} refused the credentials ({})",
                resp.status()
            ),
        });
    }
    if !resp.status().is_success() {
        return Err(ImageState::Unknown(format!(
            "token endpoint {host}: HTTP {}",
            resp.status()
        )));
    }
    let v: serde_json::Value = resp
        .json()
        .await
        .map_err(|e| ImageState::Unknown(format!("token endpoint {host}: {e}")))?;
    v.get("token")
        .or_else(|| v.get("access_token"))
        .and_then(|t| t.as_str())
        .map(str::to_string)
        .ok_or_else(|| ImageState::Unknown(format!("token endpoint {host} sent no token")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_follow_dockers_naming() {
        assert_eq!(
            endpoint("anonymous/vllm-bench:abc"),
            (
                "https://registry-1.docker.io".into(),
                "anonymous/vllm-bench".into(),
                "abc".into()
            )
        );
        assert_eq!(
            endpoint("ubuntu"),
            (
                "https://registry-1.docker.io".into(),
                "library/ubuntu".into(),
                "latest".into()
            )
        );
        assert_eq!(
            endpoint("127.0.0.1:5000/org/img:t1"),
            (
                "http://127.0.0.1:5000".into(),
                "org/img".into(),
                "t1".into()
            )
        );
        assert_eq!(
            endpoint("reg.example.com/x/y:z").0,
            "https://reg.example.com".to_string()
        );
    }

    #[test]
    fn challenges_are_read() {
        let h = r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io""#;
        assert_eq!(
            challenge_param(h, "realm").unwrap(),
            "https://auth.docker.io/token"
        );
        assert_eq!(challenge_param(h, "service").unwrap(), "registry.docker.io");
        assert_eq!(challenge_param(h, "scope"), None);
    }
}
