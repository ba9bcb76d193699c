//! Is an image in its registry? One manifest request (Docker Registry HTTP API v2), with the
//! credentials `docker login` left in the operator's Docker config: exists (digest and the
//! compressed size of its layers), missing, or refused. Nothing is pulled.
//!
//! The registry's own auth dance is followed: a `401` with `WWW-Authenticate: Basic` is
//! answered with the user and password; `Bearer realm=…,service=…` sends them to the token
//! endpoint first. No credential ever reaches a message.

use super::facts::ImageState;
use crate::runtime::docker::auth::{DockerAuth, Registry};
use crate::runtime::docker::image::split_ref;
use reqwest::header::{ACCEPT, WWW_AUTHENTICATE};
use reqwest::StatusCode;
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
    let first = match get(client, &url, None).await {
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
        let r = get(client, &url, Some(&header)).await;
        used = Some(header);
        match r {
            Ok(r) => r,
            Err(e) => return ImageState::Unknown(e),
        }
    } else {
        first
    };
    let status = resp.status();
    match status {
        s if s.is_success() => {}
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
            return ImageState::Denied {
                detail: format!(
                    "{} refused the credentials ({status}): docker login {}",
                    Registry::of(image).host,
                    Registry::of(image).server_address()
                ),
            }
        }
        StatusCode::NOT_FOUND => {
            return ImageState::Missing {
                detail: format!(
                    "{image} is not in {} (manifest unknown)",
                    Registry::of(image).host
                ),
            }
        }
        s => return ImageState::Unknown(format!("{}: HTTP {s}", Registry::of(image).host)),
    }
    let digest = resp
        .headers()
        .get("docker-content-digest")
        .and_then(|d| d.to_str().ok())
        .unwrap_or("")
        .to_string();
    let body: serde_json::Value = match resp.json().await {
        Ok(b) => b,
        Err(e) => return ImageState::Unknown(format!("manifest of {image}: {e}")),
    };
    let size = match body.get("manifests").and_then(|m| m.as_array()) {
        // An index: the linux/amd64 image's own manifest has the layers.
        Some(list) => {
            let pick = list
                .iter()
                .find(|m| {
                    m.pointer("/platform/architecture").and_then(|a| a.as_str()) == Some("amd64")
                })
                .or_else(|| list.first());
            let Some(d) = pick.and_then(|m| m.get("digest")).and_then(|d| d.as_str()) else {
                return ImageState::Unknown(format!("manifest list of {image} names no image"));
            };
            let url = format!("{base}/v2/{path}/manifests/{d}");
            match get(client, &url, used.as_deref()).await {
                Ok(r) if r.status().is_success() => match r.json::<serde_json::Value>().await {
                    Ok(m) => layers_size(&m),
                    Err(e) => return ImageState::Unknown(format!("manifest of {image}: {e}")),
                },
                Ok(r) => {
                    return ImageState::Unknown(format!("manifest of {image}: HTTP {}", r.status()))
                }
                Err(e) => return ImageState::Unknown(e),
            }
        }
        None => layers_size(&body),
    };
    ImageState::Registry { digest, size }
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

async fn get(
    client: &reqwest::Client,
    url: &str,
    authorization: Option<&str>,
) -> Result<reqwest::Response, String> {
    let mut req = client.get(url).header(ACCEPT, ACCEPTS);
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
