//! Images: inspect, check free disk on Docker's root directory, pull with per-layer progress
//! and the operator's registry credentials, and name the images nightshift makes (fixed by
//! a recipe; patched for one agent run).

use super::auth::{Credentials, DockerAuth, Registry};
use crate::model::{Pipe, Stream};
use crate::runtime::RunSink;
use bollard::query_parameters::CreateImageOptions;
use bollard::Docker;
use futures_util::StreamExt;
use std::collections::BTreeMap;
use std::path::Path;

pub enum ImageError {
    /// 404, manifest unknown, "pull access denied … repository does not exist or may
    /// require 'docker login'" (Docker's words for a missing repository and for one the
    /// account may not read alike): the reference does not exist for us.
    Missing(String),
    DiskFull(String),
    /// Anything else, registry refusals included (bad or missing credentials, rate
    /// limits): the image may well exist. The pull logged the registry's line on the pull
    /// stream, where the catalog names it `registry_auth` or `registry_rate_limited`.
    Other(String),
}

/// How a registry turned a pull away, when it did (see [`registry_refusal`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Credentials missing or refused (`unauthorized`, `no basic auth credentials`).
    Auth,
    /// `toomanyrequests` / HTTP 429: pull later.
    RateLimited,
}

/// The registry's refusal in a pull error, if that is what it is. "pull access denied …
/// repository does not exist" is not one: Docker says it of missing repositories too.
pub(crate) fn registry_refusal(msg: &str) -> Option<Refusal> {
    let m = msg.to_ascii_lowercase();
    if m.contains("toomanyrequests")
        || m.contains("too many requests")
        || m.contains("pull rate limit")
        || m.contains("http 429")
    {
        return Some(Refusal::RateLimited);
    }
    if m.contains("pull access denied") || m.contains("repository does not exist") {
        return None;
    }
    (m.contains("unauthorized")
        || m.contains("no basic auth credentials")
        || m.contains("denied: requested access to the resource is denied")
        || m.contains("incorrect username or password"))
    .then_some(Refusal::Auth)
}

/// What nightshift knows about an image once it is present.
pub struct ImageInfo {
    pub id: String,
    pub digest: Option<String>,
    pub workdir: Option<String>,
    pub entrypoint: Option<Vec<String>>,
    pub cmd: Option<Vec<String>>,
}

pub async fn inspect(docker: &Docker, image: &str) -> Option<ImageInfo> {
    let i = docker.inspect_image(image).await.ok()?;
    let config = i.config.unwrap_or_default();
    Some(ImageInfo {
        id: i.id.unwrap_or_default(),
        digest: i.repo_digests.and_then(|d| d.into_iter().next()),
        workdir: config.working_dir.filter(|w| !w.is_empty()),
        entrypoint: config.entrypoint,
        cmd: config.cmd,
    })
}

/// Free bytes on the filesystem holding `path` (Docker's root dir), when it is local.
pub(crate) fn free_bytes(path: &Path) -> Option<u64> {
    crate::disk::free_bytes(path)
}

pub(crate) fn classify_pull_error(msg: &str) -> ImageError {
    let m = msg.to_ascii_lowercase();
    if m.contains("no space left on device") {
        ImageError::DiskFull(msg.to_string())
    } else if registry_refusal(msg).is_some() {
        ImageError::Other(msg.to_string())
    } else if m.contains("not found")
        // The registry cannot be reached at all (DNS, routing, TLS): the image cannot come
        // from there tonight either, so it is made where it can be, as a missing one is.
        || m.contains("dial tcp")
        || m.contains("no such host")
        || m.contains("i/o timeout")
        || m.contains("tls handshake timeout")
        || m.contains("network is unreachable")
        || m.contains("manifest unknown")
        || m.contains("pull access denied")
        || m.contains("repository does not exist")
        || m.contains("404")
    {
        ImageError::Missing(msg.to_string())
    } else {
        ImageError::Other(msg.to_string())
    }
}

/// The credentials `auth` holds for `image`'s registry, read off the executor (a
/// credential helper may take a while). A config or helper that fails is reported on the
/// pull stream and the pull goes on anonymously, as `docker pull` does: a public image
/// still comes, a private one ends `registry_auth` with the registry's own line.
pub async fn credentials(auth: &DockerAuth, image: &str, sink: &RunSink) -> Option<Credentials> {
    let (a, i) = (auth.clone(), image.to_string());
    let found = match tokio::task::spawn_blocking(move || a.credentials_for(&i)).await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(e) => Err(format!("the lookup failed: {e}")),
    };
    match found {
        Ok(c) => c,
        Err(e) => {
            sink.log(
                Stream::Pull,
                Pipe::Stderr,
                format!("registry credentials: {e}; pulling without credentials"),
            )
            .await;
            None
        }
    }
}

/// Pull `image` with the credentials `auth` has for its registry, reporting per-layer
/// progress; the disk check is the caller's.
pub async fn pull(
    docker: &Docker,
    image: &str,
    auth: &DockerAuth,
    sink: &RunSink,
) -> Result<(), ImageError> {
    // A digest-pinned reference is pulled by digest, never as `:latest`.
    let (from, tag) = match image.split_once('@') {
        Some(_) => (image.to_string(), None),
        None => {
            let (repo, tag) = split_ref(image);
            (repo.to_string(), Some(tag.to_string()))
        }
    };
    let creds = credentials(auth, image, sink).await;
    // Says whether credentials went with the pull, and whose, never what they are.
    let with = match &creds {
        Some(c) => format!(" with credentials for {} ({})", c.registry.host, c.source),
        None => String::new(),
    };
    sink.log(Stream::Pull, Pipe::Stdout, format!("Pulling {image}{with}"))
        .await;
    let mut s = docker.create_image(
        Some(CreateImageOptions {
            from_image: Some(from),
            tag,
            ..Default::default()
        }),
        None,
        creds.as_ref().map(Credentials::docker),
    );
    // Layer totals, so a layer's "Pull complete" can report done == total.
    let mut totals: BTreeMap<String, u64> = BTreeMap::new();
    while let Some(item) = s.next().await {
        match item {
            Ok(info) => {
                if let Some(e) = info.error_detail.and_then(|e| e.message) {
                    return Err(failed(image, &e, creds.as_ref(), sink).await);
                }
                let layer = info.id.unwrap_or_default();
                let status = info.status.unwrap_or_default();
                match info.progress_detail {
                    Some(p) if status == "Downloading" && p.total.unwrap_or(0) > 0 => {
                        let total = p.total.unwrap_or(0) as u64;
                        totals.insert(layer.clone(), total);
                        sink.pull(layer, p.current.unwrap_or(0).max(0) as u64, total)
                            .await;
                    }
                    _ => {
                        if status == "Download complete" || status == "Pull complete" {
                            if let Some(t) = totals.get(&layer) {
                                sink.pull(layer.clone(), *t, *t).await;
                            }
                        }
                        if !matches!(status.as_str(), "Downloading" | "Extracting" | "Waiting") {
                            let line = if layer.is_empty() {
                                status
                            } else {
                                format!("{layer}: {status}")
                            };
                            sink.log(Stream::Pull, Pipe::Stdout, line).await;
                        }
                    }
                }
            }
            Err(e) => return Err(failed(image, &e.to_string(), creds.as_ref(), sink).await),
        }
    }
    Ok(())
}

/// Logs the daemon's error line (the scanner's evidence) and classifies it. Docker's
/// "pull access denied … may require 'docker login'" stays a missing image, with a hint
/// saying whether credentials went with the pull.
async fn failed(image: &str, msg: &str, creds: Option<&Credentials>, sink: &RunSink) -> ImageError {
    sink.log(Stream::Pull, Pipe::Stderr, msg.to_string()).await;
    let e = classify_pull_error(msg);
    if matches!(e, ImageError::Missing(_)) && msg.contains("docker login") {
        let hint = match creds {
            Some(c) => format!(
                "hint: credentials for {} ({}) were sent: the repository does not exist, or that account may not read it",
                c.registry.host, c.source
            ),
            None => format!(
                "hint: no credentials for {} in the Docker config: if the repository is private, `docker login {}` as the user running nightshift",
                Registry::of(image).host,
                Registry::of(image).server_address()
            ),
        };
        sink.log(Stream::Pull, Pipe::Stderr, hint).await;
    }
    e
}

/// `repo[:tag]` (a `:` after the last `/` is a tag, before it a registry port).
pub(crate) fn split_ref(image: &str) -> (&str, &str) {
    let image = image.split('@').next().unwrap_or(image);
    match image.rfind(':') {
        Some(i) if !image[i..].contains('/') => (&image[..i], &image[i + 1..]),
        _ => (image, "latest"),
    }
}

fn tag_safe(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

fn short_hash(s: &str) -> String {
    use sha2::Digest;
    let h = sha2::Sha256::digest(s.as_bytes());
    h.iter().take(6).map(|b| format!("{b:02x}")).collect()
}

/// Where `image` fixed by `recipes` is committed: same repository, tag suffixed (as
/// `Recipe::fixed_image` names it: `org/vllm:abc` → `org/vllm:abc-nsfix-aimv2-exist-ok`),
/// so an operator sees what it came from; reused by every later run of that image.
pub(crate) fn fixed_ref(image: &str, recipes: &[String]) -> (String, String) {
    let (repo, tag) = match image.split_once('@') {
        // `repo@sha256:…` has no tag to extend: name the fix after the digest.
        Some((repo, digest)) => (
            split_ref(repo).0,
            tag_safe(&digest.chars().take(19).collect::<String>()),
        ),
        None => {
            let (r, t) = split_ref(image);
            (r, t.to_string())
        }
    };
    let suffix: Vec<String> = recipes
        .iter()
        .map(|r| format!("-nsfix-{}", tag_safe(r)))
        .collect();
    let mut t = format!("{tag}{}", suffix.concat());
    if t.len() > 128 {
        t = format!(
            "ns-fix-{}",
            short_hash(&format!("{tag} {}", recipes.join(" ")))
        );
    }
    (repo.to_string(), t)
}

/// A per-attempt image holding an agent's patch (removed at teardown).
pub(crate) fn patched_ref(sweep: &str, key: &str, attempt: u32) -> (String, String) {
    (
        "nightshift-patched".to_string(),
        format!("{}-a{attempt}", short_hash(&format!("{sweep}/{key}"))),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs() {
        assert_eq!(split_ref("org/vllm:abc"), ("org/vllm", "abc"));
        assert_eq!(split_ref("reg:5000/vllm"), ("reg:5000/vllm", "latest"));
        let (repo, tag) = fixed_ref(
            "org/vllm@sha256:0123456789abcdef",
            &["aimv2-exist-ok".into()],
        );
        assert_eq!(repo, "org/vllm");
        assert_eq!(tag, "sha256-0123456789ab-nsfix-aimv2-exist-ok");
        let (r, t) = fixed_ref("org/vllm-bench:abc", &["aimv2-exist-ok".into()]);
        assert_eq!(
            (r.as_str(), t.as_str()),
            ("org/vllm-bench", "abc-nsfix-aimv2-exist-ok")
        );
        assert!(matches!(
            classify_pull_error("pull access denied for x, repository does not exist"),
            ImageError::Missing(_)
        ));
        assert!(matches!(
            classify_pull_error("write /var/lib/docker/x: no space left on device"),
            ImageError::DiskFull(_)
        ));
        assert!(free_bytes(Path::new("/")).is_some());
    }

    /// The daemon's own words (Docker 20.10 against a `registry:2` with htpasswd, and
    /// nginx answering 429), as `docker pull` printed them.
    #[test]
    fn registry_refusals_are_not_missing_images() {
        use Refusal::*;
        for (msg, want) in [
            ("unauthorized: authentication required", Some(Auth)),
            (
                "Head \"http://127.0.0.1:15000/v2/exp/standin/manifests/v1\": no basic auth credentials",
                Some(Auth),
            ),
            (
                "Get \"https://registry-1.docker.io/v2/\": unauthorized: incorrect username or password",
                Some(Auth),
            ),
            (
                "toomanyrequests: You have reached your pull rate limit. You may increase the limit by authenticating and upgrading: https://www.docker.com/increase-rate-limit",
                Some(RateLimited),
            ),
            (
                "error parsing HTTP 429 response body: invalid character '<' looking for beginning of value: \"<html>\\r\\n<head><title>429 Too Many Requests</title></head>\"",
                Some(RateLimited),
            ),
            (
                "pull access denied for org/private, repository does not exist or may require 'docker login': denied: requested access to the resource is denied",
                None,
            ),
            (
                "manifest for 127.0.0.1:15000/exp/standin:v9 not found: manifest unknown: manifest unknown",
                None,
            ),
        ] {
            assert_eq!(registry_refusal(msg), want, "{msg}");
            let class = classify_pull_error(msg);
            match want {
                Some(_) => assert!(matches!(class, ImageError::Other(_)), "{msg}"),
                None => assert!(matches!(class, ImageError::Missing(_)), "{msg}"),
            }
        }
    }
}
