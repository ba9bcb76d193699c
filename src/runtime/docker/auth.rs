//! Registry credentials from the operator's Docker CLI config, so that `docker login` counts
//! for nightshift's pulls as it does for `docker pull`: `$DOCKER_CONFIG/config.json`, else
//! `~/.docker/config.json`; `auths` entries, `credHelpers` and `credsStore` (a
//! `docker-credential-<name> get` per lookup, as the CLI does).
//!
//! The file is read at each pull, not once: an operator who answers a `registry_auth` hold
//! with `docker login` and presses `r` is heard without a restart.
//!
//! Secrets never leave this module except inside the `DockerCredentials` handed to the
//! pull: `Debug` redacts them and no error message quotes a value read from the file or
//! printed by a helper on success.

use bollard::auth::DockerCredentials;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The key Docker Hub's credentials are stored under (what `docker login` writes).
pub const DOCKER_HUB_SERVER: &str = "https://index.docker.io/v1/";
/// Host names that all mean Docker Hub.
const DOCKER_HUB_HOSTS: [&str; 3] = ["docker.io", "index.docker.io", "registry-1.docker.io"];
/// A credential helper that has not answered by then is stuck (a pinentry nobody sees).
const HELPER_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// The config file exists but cannot be read or is not a Docker config.
    #[error("Docker config {}: {message}", path.display())]
    Config { path: PathBuf, message: String },
    /// A credential helper is missing, failed or answered nonsense.
    #[error("credential helper docker-credential-{helper} ({origin}): {message}")]
    Helper {
        helper: String,
        origin: String,
        message: String,
    },
}

/// Where to read the Docker config from (and where helpers are looked up). Cheap to clone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DockerAuth {
    /// The config file; `None`: `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`,
    /// decided at each read.
    file: Option<PathBuf>,
    /// Directories searched for `docker-credential-*`; `None`: `$PATH`.
    helper_path: Option<OsString>,
}

impl DockerAuth {
    /// The operator's config, where the Docker CLI finds it.
    pub(crate) fn from_env() -> Self {
        DockerAuth::default()
    }

    /// An explicit config file (tests, or an operator's setting).
    pub fn from_file(path: impl Into<PathBuf>) -> Self {
        DockerAuth {
            file: Some(path.into()),
            helper_path: None,
        }
    }

    #[cfg(test)]
    /// Look credential helpers up in these directories instead of `$PATH`.
    pub(crate) fn with_helper_path(mut self, dirs: impl Into<OsString>) -> Self {
        self.helper_path = Some(dirs.into());
        self
    }

    /// The file that is read (`None` when neither `DOCKER_CONFIG` nor `HOME` is set).
    pub(crate) fn config_path(&self) -> Option<PathBuf> {
        if let Some(f) = &self.file {
            return Some(f.clone());
        }
        if let Some(d) = std::env::var_os("DOCKER_CONFIG").filter(|d| !d.is_empty()) {
            return Some(PathBuf::from(d).join("config.json"));
        }
        std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(|h| PathBuf::from(h).join(".docker").join("config.json"))
    }

    /// The config as it is now; a missing file is an empty config (anonymous pulls).
    pub fn load(&self) -> Result<ConfigFile, AuthError> {
        let Some(path) = self.config_path() else {
            return Ok(ConfigFile::default());
        };
        match std::fs::read_to_string(&path) {
            Ok(text) => ConfigFile::parse(&text, &path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ConfigFile::default()),
            Err(e) => Err(AuthError::Config {
                path,
                message: e.to_string(),
            }),
        }
    }

    /// Credentials for the registry `image` is pulled from; `None`: pull anonymously.
    /// Blocking (it may run a helper): call it off the async executor.
    pub(crate) fn credentials_for(&self, image: &str) -> Result<Option<Credentials>, AuthError> {
        self.load()?
            .credentials(&Registry::of(image), self.helper_path.as_deref())
    }
}

/// The registry an image reference is pulled from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registry {
    /// `docker.io` for Docker Hub (whichever alias the reference used), else the host
    /// with its port, as written (`localhost:5000`).
    pub host: String,
}

impl Registry {
    /// `org/vllm:tag` → `docker.io`; `localhost:5000/x:y` → `localhost:5000`. The first
    /// path component is a registry when it has a `.` or a `:` or is `localhost`, as
    /// Docker decides.
    pub fn of(image: &str) -> Registry {
        let host = match image.split_once('/') {
            Some((first, _))
                if first.contains('.') || first.contains(':') || first == "localhost" =>
            {
                first.to_ascii_lowercase()
            }
            _ => "docker.io".to_string(),
        };
        let host = if DOCKER_HUB_HOSTS.contains(&host.as_str()) {
            "docker.io".to_string()
        } else {
            host
        };
        Registry { host }
    }

    pub(crate) fn is_docker_hub(&self) -> bool {
        self.host == "docker.io"
    }

    /// What `docker login` names the registry: the config key, the helper's server URL and
    /// the credentials' `serveraddress`.
    pub(crate) fn server_address(&self) -> &str {
        if self.is_docker_hub() {
            DOCKER_HUB_SERVER
        } else {
            &self.host
        }
    }

    /// Whether a config key (`https://index.docker.io/v1/`, `reg.example.com`,
    /// `https://reg.example.com/v2/`) names this registry.
    fn matches_key(&self, key: &str) -> bool {
        let h = key_host(key);
        if self.is_docker_hub() {
            DOCKER_HUB_HOSTS.contains(&h.as_str())
        } else {
            h == self.host
        }
    }

    /// The entry of `map` for this registry: the exact key `docker login` writes first,
    /// then any key naming the same host (as the CLI does).
    fn pick<'a, T>(&self, map: &'a BTreeMap<String, T>) -> Option<(&'a str, &'a T)> {
        map.get_key_value(self.server_address())
            .or_else(|| map.iter().find(|(k, _)| self.matches_key(k)))
            .map(|(k, v)| (k.as_str(), v))
    }
}

/// The host of a config key: the scheme and any path removed, lower-cased.
fn key_host(key: &str) -> String {
    let k = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    k.split('/').next().unwrap_or(k).to_ascii_lowercase()
}

/// The parts of `config.json` that hold credentials (the rest is the CLI's business).
#[derive(Clone, Default, Deserialize)]
pub struct ConfigFile {
    #[serde(skip)]
    path: Option<PathBuf>,
    #[serde(default)]
    auths: BTreeMap<String, AuthEntry>,
    #[serde(default, rename = "credsStore")]
    creds_store: Option<String>,
    #[serde(default, rename = "credHelpers")]
    cred_helpers: BTreeMap<String, String>,
}

impl std::fmt::Debug for ConfigFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigFile")
            .field("path", &self.path)
            .field("auths", &self.auths.keys().collect::<Vec<_>>())
            .field("creds_store", &self.creds_store)
            .field("cred_helpers", &self.cred_helpers)
            .finish()
    }
}

#[derive(Clone, Default, Deserialize)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    identitytoken: Option<String>,
    #[serde(default)]
    registrytoken: Option<String>,
}

/// Where credentials came from, for the operator (never the credentials themselves).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// An `auths` entry of this config file.
    ConfigFile(PathBuf),
    /// `docker-credential-<name>`, named by `credHelpers` or `credsStore`.
    Helper(String),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::ConfigFile(p) => write!(f, "auths in {}", p.display()),
            Source::Helper(h) => write!(f, "docker-credential-{h}"),
        }
    }
}

/// Credentials for one registry. `Debug` shows where they came from, never what they are.
#[derive(Clone, PartialEq)]
pub struct Credentials {
    pub registry: Registry,
    pub source: Source,
    inner: DockerCredentials,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let set = |o: &Option<String>| if o.is_some() { "<set>" } else { "<unset>" };
        f.debug_struct("Credentials")
            .field("registry", &self.registry.host)
            .field("source", &self.source)
            .field("username", &set(&self.inner.username))
            .field("password", &set(&self.inner.password))
            .field("identitytoken", &set(&self.inner.identitytoken))
            .field("registrytoken", &set(&self.inner.registrytoken))
            .finish()
    }
}

impl Credentials {
    /// What bollard sends as `X-Registry-Auth`.
    pub fn docker(&self) -> DockerCredentials {
        self.inner.clone()
    }

    /// The user name, when there is one (not a secret; for messages and tests).
    pub fn username(&self) -> Option<&str> {
        self.inner.username.as_deref()
    }
}

impl ConfigFile {
    /// Parses `config.json`; errors name the file and the position, never the content.
    pub fn parse(text: &str, path: &Path) -> Result<ConfigFile, AuthError> {
        let mut c: ConfigFile = serde_json::from_str(text).map_err(|e| AuthError::Config {
            path: path.to_path_buf(),
            message: format!(
                "not a Docker config ({} at line {} column {})",
                match e.classify() {
                    serde_json::error::Category::Syntax | serde_json::error::Category::Eof =>
                        "invalid JSON",
                    _ => "unexpected value",
                },
                e.line(),
                e.column()
            ),
        })?;
        c.path = Some(path.to_path_buf());
        Ok(c)
    }

    /// Credentials for `registry`: a `credHelpers` entry, else `credsStore`, else `auths`
    /// (the Docker CLI's order). A helper that knows nothing of the registry means none.
    pub fn credentials(
        &self,
        registry: &Registry,
        helper_path: Option<&std::ffi::OsStr>,
    ) -> Result<Option<Credentials>, AuthError> {
        let helper = match registry.pick(&self.cred_helpers) {
            Some((_, h)) if !h.is_empty() => Some((h.as_str(), "credHelpers")),
            _ => self
                .creds_store
                .as_deref()
                .filter(|s| !s.is_empty())
                .map(|s| (s, "credsStore")),
        };
        if let Some((name, origin)) = helper {
            return run_helper(name, origin, registry, helper_path);
        }
        let Some((_, e)) = registry.pick(&self.auths) else {
            return Ok(None);
        };
        let path = self.path.clone().unwrap_or_default();
        let bad = |message: String| AuthError::Config {
            path: path.clone(),
            message,
        };
        let (mut username, mut password) = (e.username.clone(), e.password.clone());
        if let Some(a) = e.auth.as_deref().map(str::trim).filter(|a| !a.is_empty()) {
            let raw = base64_decode(a).ok_or_else(|| {
                bad(format!(
                    "the `auth` of {} is not base64",
                    registry.server_address()
                ))
            })?;
            let text = String::from_utf8(raw).map_err(|_| {
                bad(format!(
                    "the `auth` of {} is not UTF-8",
                    registry.server_address()
                ))
            })?;
            let (u, p) = text.split_once(':').ok_or_else(|| {
                bad(format!(
                    "the `auth` of {} is not user:password",
                    registry.server_address()
                ))
            })?;
            username = Some(u.to_string());
            password = Some(p.to_string());
        }
        let nonempty = |o: Option<String>| o.filter(|s| !s.is_empty());
        let creds = DockerCredentials {
            username: nonempty(username),
            password: nonempty(password),
            identitytoken: nonempty(e.identitytoken.clone()),
            registrytoken: nonempty(e.registrytoken.clone()),
            serveraddress: Some(registry.server_address().to_string()),
            ..Default::default()
        };
        Ok(usable(creds).map(|inner| Credentials {
            registry: registry.clone(),
            source: Source::ConfigFile(path),
            inner,
        }))
    }
}

/// Credentials that can authenticate anything (an `auths` entry may be an empty `{}`
/// placeholder left by a credential store).
fn usable(c: DockerCredentials) -> Option<DockerCredentials> {
    let has = |o: &Option<String>| o.as_deref().is_some_and(|s| !s.is_empty());
    (has(&c.username) || has(&c.identitytoken) || has(&c.registrytoken)).then_some(c)
}

#[derive(Deserialize)]
struct HelperAnswer {
    #[serde(rename = "Username", default)]
    username: String,
    #[serde(rename = "Secret", default)]
    secret: String,
}

/// `docker-credential-<name> get`, the server URL on stdin, JSON on stdout.
fn run_helper(
    name: &str,
    origin: &str,
    registry: &Registry,
    helper_path: Option<&std::ffi::OsStr>,
) -> Result<Option<Credentials>, AuthError> {
    let fail = |message: String| AuthError::Helper {
        helper: name.to_string(),
        origin: origin.to_string(),
        message,
    };
    if name.contains('/') || name.contains(char::is_whitespace) {
        return Err(fail("not a helper name".into()));
    }
    let program = format!("docker-credential-{name}");
    let search = match helper_path {
        Some(p) => Some(p.to_os_string()),
        None => std::env::var_os("PATH"),
    };
    let exe = search
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(&program))
        .find(|p| p.is_file())
        .ok_or_else(|| fail(format!("{program} not found on PATH")))?;
    let mut child = Command::new(&exe)
        .arg("get")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| fail(format!("cannot run {}: {e}", exe.display())))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A helper that exits without reading its stdin is judged by its exit status.
        let _ = stdin.write_all(registry.server_address().as_bytes());
    }
    let deadline = Instant::now() + HELPER_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(fail(format!(
                    "no answer within {}s",
                    HELPER_TIMEOUT.as_secs()
                )));
            }
            Err(e) => return Err(fail(e.to_string())),
        }
    }
    let out = child.wait_with_output().map_err(|e| fail(e.to_string()))?;
    if !out.status.success() {
        // Helpers report errors on stdout (`credentials not found in native keychain`);
        // on failure that holds no secret.
        let said = format!(
            "{} {}",
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
        let said = said.trim();
        if said.to_ascii_lowercase().contains("credentials not found") {
            return Ok(None);
        }
        let said: String = said.chars().take(200).collect();
        return Err(fail(format!("`get` failed ({}): {said}", out.status)));
    }
    // On success stdout holds the secret: never quote it.
    let ans: HelperAnswer = serde_json::from_slice(&out.stdout)
        .map_err(|_| fail("`get` printed something other than the credentials JSON".into()))?;
    let mut c = DockerCredentials {
        serveraddress: Some(registry.server_address().to_string()),
        ..Default::default()
    };
    if ans.username == "<token>" {
        c.identitytoken = Some(ans.secret).filter(|s| !s.is_empty());
    } else {
        c.username = Some(ans.username).filter(|s| !s.is_empty());
        c.password = Some(ans.secret).filter(|s| !s.is_empty());
    }
    Ok(usable(c).map(|inner| Credentials {
        registry: registry.clone(),
        source: Source::Helper(name.to_string()),
        inner,
    }))
}

/// Standard base64 (with or without padding), as `docker login` writes `auth`.
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    use base64::engine::{general_purpose, DecodePaddingMode, GeneralPurpose};
    use base64::Engine;
    const EITHER: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        general_purpose::PAD.with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    EITHER.decode(s.trim()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(s: &str) -> String {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    fn write(dir: &Path, text: &str) -> DockerAuth {
        let p = dir.join("config.json");
        std::fs::write(&p, text).unwrap();
        DockerAuth::from_file(p).with_helper_path(dir.as_os_str())
    }

    #[test]
    fn registry_of_a_reference() {
        for (image, host) in [
            ("ubuntu", "docker.io"),
            ("org/vllm:abc", "docker.io"),
            ("docker.io/org/vllm:abc", "docker.io"),
            ("index.docker.io/org/vllm", "docker.io"),
            ("registry-1.docker.io/library/ubuntu:22.04", "docker.io"),
            ("localhost:5000/x:y", "localhost:5000"),
            ("localhost/x", "localhost"),
            ("127.0.0.1:5000/ns/x@sha256:00", "127.0.0.1:5000"),
            ("ghcr.io/org/x:1", "ghcr.io"),
            ("Reg.Example.com/org/x", "reg.example.com"),
        ] {
            assert_eq!(Registry::of(image).host, host, "{image}");
        }
        assert_eq!(Registry::of("org/x").server_address(), DOCKER_HUB_SERVER);
        assert_eq!(
            Registry::of("localhost:5000/x").server_address(),
            "localhost:5000"
        );
    }

    #[test]
    fn base64_round_trips() {
        for s in ["", "a", "ab", "abc", "alice:s3cret", "user:pa:ss wörd"] {
            assert_eq!(base64_decode(&b64(s)).unwrap(), s.as_bytes(), "{s}");
            let unpadded = b64(s).trim_end_matches('=').to_string();
            assert_eq!(base64_decode(&unpadded).unwrap(), s.as_bytes());
        }
        assert_eq!(base64_decode("not base64!"), None);
    }

    #[test]
    fn auths_with_base64_auth_and_with_username_password() {
        let dir = tempfile::tempdir().unwrap();
        let auth = write(
            dir.path(),
            &format!(
                r#"{{"auths": {{
                    "https://index.docker.io/v1/": {{"auth": "{}"}},
                    "127.0.0.1:5000": {{"username": "bob", "password": "pw2"}},
                    "https://reg.example.com/v2/": {{"identitytoken": "tok3"}},
                    "quay.io": {{}}
                }}, "psFormat": "table"}}"#,
                b64("alice:s3cret:x")
            ),
        );
        let hub = auth.credentials_for("org/vllm:abc").unwrap().unwrap();
        let d = hub.docker();
        assert_eq!(d.username.as_deref(), Some("alice"));
        assert_eq!(d.password.as_deref(), Some("s3cret:x"));
        assert_eq!(d.serveraddress.as_deref(), Some(DOCKER_HUB_SERVER));
        assert_eq!(
            hub.source,
            Source::ConfigFile(dir.path().join("config.json"))
        );
        // Every alias of Docker Hub finds the same entry.
        for alias in ["docker.io/org/x", "index.docker.io/org/x", "ubuntu"] {
            assert_eq!(
                auth.credentials_for(alias).unwrap().unwrap().username(),
                Some("alice")
            );
        }
        let local = auth
            .credentials_for("127.0.0.1:5000/ns/x:1")
            .unwrap()
            .unwrap();
        assert_eq!(local.docker().password.as_deref(), Some("pw2"));
        assert_eq!(
            local.docker().serveraddress.as_deref(),
            Some("127.0.0.1:5000")
        );
        // A key with a scheme and a path names its host.
        let tok = auth
            .credentials_for("reg.example.com/a/b")
            .unwrap()
            .unwrap();
        assert_eq!(tok.docker().identitytoken.as_deref(), Some("tok3"));
        // Another port is another registry; an empty entry is no credentials.
        assert!(auth.credentials_for("127.0.0.1:5001/x").unwrap().is_none());
        assert!(auth.credentials_for("quay.io/x/y").unwrap().is_none());
        // Debug never shows a secret.
        let shown = format!("{hub:?} {local:?} {tok:?} {:?}", auth.load().unwrap());
        for secret in ["s3cret", "pw2", "tok3", "alice"] {
            assert!(!shown.contains(secret), "{shown}");
        }
    }

    #[test]
    fn missing_file_is_anonymous_and_a_broken_one_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let none = DockerAuth::from_file(dir.path().join("nope.json"));
        assert!(none.credentials_for("org/x").unwrap().is_none());
        let broken = write(dir.path(), "{\"auths\": {\"x\": {\"auth\": \"c2VjcmV0\"}");
        let e = broken.credentials_for("org/x").unwrap_err().to_string();
        assert!(
            e.contains(&dir.path().join("config.json").display().to_string()),
            "{e}"
        );
        assert!(e.contains("invalid JSON"), "{e}");
        let wrong = write(dir.path(), "{\"auths\": [1, 2]}");
        let e = wrong.credentials_for("org/x").unwrap_err().to_string();
        assert!(e.contains("not a Docker config"), "{e}");
        let bad = write(
            dir.path(),
            r#"{"auths": {"https://index.docker.io/v1/": {"auth": "c2VjcmV0"}}}"#,
        );
        let e = bad.credentials_for("org/x").unwrap_err().to_string();
        assert!(
            e.contains("not user:password") && !e.contains("secret"),
            "{e}"
        );
    }

    fn helper(dir: &Path, name: &str, body: &str) {
        use std::os::unix::fs::PermissionsExt;
        let p = dir.join(format!("docker-credential-{name}"));
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn cred_helpers_and_creds_store() {
        let dir = tempfile::tempdir().unwrap();
        // Answers per server URL read from stdin, as real helpers do.
        helper(
            dir.path(),
            "test",
            r#"read url
case "$url" in
  127.0.0.1:5000) echo '{"ServerURL":"127.0.0.1:5000","Username":"carol","Secret":"pw4"}' ;;
  https://index.docker.io/v1/) echo '{"ServerURL":"x","Username":"<token>","Secret":"idtok5"}' ;;
  *) echo "credentials not found in native keychain"; exit 1 ;;
esac"#,
        );
        helper(dir.path(), "broken", "echo oops >&2; exit 3");
        let auth = write(
            dir.path(),
            r#"{"auths": {"127.0.0.1:5000": {"auth": "aWdub3JlZDppZ25vcmVk"}},
                "credHelpers": {"127.0.0.1:5000": "test", "ghcr.io": "broken",
                                "quay.io": "absent"},
                "credsStore": "test"}"#,
        );
        let c = auth.credentials_for("127.0.0.1:5000/x:1").unwrap().unwrap();
        assert_eq!(c.source, Source::Helper("test".into()));
        assert_eq!(c.username(), Some("carol"));
        assert_eq!(c.docker().password.as_deref(), Some("pw4"));
        // credsStore for everything else; `<token>` means an identity token.
        let hub = auth.credentials_for("org/x").unwrap().unwrap();
        assert_eq!(hub.docker().identitytoken.as_deref(), Some("idtok5"));
        assert_eq!(hub.docker().username, None);
        // Not in the store: anonymous.
        assert!(auth.credentials_for("reg.example.com/x").unwrap().is_none());
        // A failing or missing helper is an error naming it.
        let e = auth.credentials_for("ghcr.io/o/x").unwrap_err().to_string();
        assert!(
            e.contains("docker-credential-broken (credHelpers)") && e.contains("oops"),
            "{e}"
        );
        let e = auth.credentials_for("quay.io/o/x").unwrap_err().to_string();
        assert!(e.contains("docker-credential-absent not found"), "{e}");
        assert!(!format!("{c:?}{hub:?}").contains("pw4"));
        assert!(!format!("{hub:?}").contains("idtok5"));
    }
}
