//! The hosts file (`run --hosts FILE`): one `[[hosts]]` entry per Docker engine that runs
//! sweep containers, with its address and GPU count.
//!
//! ```toml
//! [[hosts]]
//! name = "box1"
//! docker_host = "unix:///var/run/docker.sock"
//! gpus = 8
//! [[hosts]]
//! name = "box2"
//! docker_host = "tcp://10.0.0.2:2376"
//! tls_dir = "~/.docker/box2"            # ca.pem, cert.pem, key.pem (--tlsverify engines)
//! gpus = 4
//! [[hosts]]
//! name = "box3"
//! docker_host = "ssh://ops@box3"        # through `ssh -L` to the remote socket
//! gpus = 8
//! ```

use bollard::Docker;
use serde::Deserialize;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    pub name: String,
    pub docker_host: String,
    pub gpus: u32,
    /// The engine's socket on an `ssh://` host (default /var/run/docker.sock).
    #[serde(default)]
    pub remote_socket: Option<String>,
    /// Ask this engine for the runs' GPUs (default true; false on a box without the
    /// NVIDIA toolkit, e.g. rehearsals).
    #[serde(default)]
    pub gpu_requests: Option<bool>,
    /// For `tcp://` engines with `--tlsverify`: a directory with Docker's `ca.pem`,
    /// `cert.pem` and `key.pem` (as `DOCKER_CERT_PATH`). Without it, plain TCP.
    #[serde(default)]
    pub tls_dir: Option<PathBuf>,
}

/// `run --hosts FILE`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct HostsArgs {
    /// Docker engines to run on (a TOML file of `[[hosts]]`: name, docker_host, gpus);
    /// with `--runtime docker`.
    #[arg(long, value_name = "FILE", env = "NIGHTSHIFT_HOSTS")]
    pub hosts: Option<std::path::PathBuf>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HostsFile {
    #[serde(default)]
    hosts: Vec<HostSpec>,
}

/// Read and check a hosts file; errors name `file:line:col` where the TOML parser knows.
pub fn load(path: &Path) -> Result<Vec<HostSpec>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse(&text).map_err(|e| format!("{}:{e}", path.display()))
}

pub fn parse(text: &str) -> Result<Vec<HostSpec>, String> {
    let file: HostsFile = toml::from_str(text).map_err(|e| {
        let at = e
            .span()
            .map(|s| {
                let before = &text[..s.start.min(text.len())];
                let line = before.matches('\n').count() + 1;
                let col = before.len() - before.rfind('\n').map(|i| i + 1).unwrap_or(0) + 1;
                format!("{line}:{col}: ")
            })
            .unwrap_or_else(|| " ".into());
        format!("{at}{}", e.message())
    })?;
    if file.hosts.is_empty() {
        return Err(" no [[hosts]] entry".into());
    }
    let mut seen = std::collections::BTreeSet::new();
    for h in &file.hosts {
        if !seen.insert(h.name.clone()) {
            return Err(format!(" host `{}` is listed twice", h.name));
        }
        if h.name.is_empty() || h.name.chars().any(|c| c.is_whitespace()) {
            return Err(format!(" host name `{}`: no spaces, not empty", h.name));
        }
        let scheme = h.docker_host.split("://").next().unwrap_or("");
        if !matches!(scheme, "unix" | "tcp" | "http" | "ssh") || !h.docker_host.contains("://") {
            return Err(format!(
                " host `{}`: docker_host `{}` must be unix://PATH, tcp://HOST:PORT (tls_dir for TLS) or ssh://[USER@]HOST",
                h.name, h.docker_host
            ));
        }
        if h.tls_dir.is_some() && scheme != "tcp" {
            return Err(format!(
                " host `{}`: tls_dir goes with a tcp:// docker_host",
                h.name
            ));
        }
    }
    Ok(file.hosts)
}

/// Seconds bollard waits on one request to a host (a pull's stream is long-lived but
/// reads arrive); a host that stops answering is noticed by the health check long before.
const REQUEST_TIMEOUT_S: u64 = 600;

/// A client for the host's engine. `ssh://` goes through a forwarded socket under
/// `tunnels` (the returned child keeps it open; dropping it closes the tunnel).
pub fn connect(
    h: &HostSpec,
    tunnels: &Path,
) -> Result<(Docker, Option<tokio::process::Child>), String> {
    let fail = |e: bollard::errors::Error| format!("host `{}` ({}): {e}", h.name, h.docker_host);
    let v = bollard::API_DEFAULT_VERSION;
    match h.docker_host.split_once("://") {
        Some(("unix", _)) => Ok((
            Docker::connect_with_unix(&h.docker_host, REQUEST_TIMEOUT_S, v).map_err(fail)?,
            None,
        )),
        Some(("tcp", addr)) if h.tls_dir.is_some() => {
            let dir = h.tls_dir.clone().unwrap_or_default();
            let dir = crate::plan::expand_path(&dir.display().to_string(), Path::new("."));
            let sock = tunnels.join(format!(
                "nightshift-tls-{}-{}.sock",
                h.name,
                std::process::id()
            ));
            super::tls::proxy(addr.trim_end_matches('/'), &dir, &sock)
                .map_err(|e| format!("host `{}` TLS: {e}", h.name))?;
            let url = format!("unix://{}", sock.display());
            Ok((
                Docker::connect_with_unix(&url, REQUEST_TIMEOUT_S, v).map_err(fail)?,
                None,
            ))
        }
        Some(("tcp" | "http", _)) => Ok((
            Docker::connect_with_http(&h.docker_host, REQUEST_TIMEOUT_S, v).map_err(fail)?,
            None,
        )),
        Some(("ssh", dest)) => {
            let sock = tunnel_socket(tunnels, &h.name);
            let _ = std::fs::remove_file(&sock);
            let remote = h
                .remote_socket
                .clone()
                .unwrap_or_else(|| "/var/run/docker.sock".into());
            // BatchMode: a night has nobody to type a password; keys or an agent only.
            let child = tokio::process::Command::new("ssh")
                .args([
                    "-nNT",
                    "-o",
                    "BatchMode=yes",
                    "-o",
                    "ExitOnForwardFailure=yes",
                ])
                .args(["-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"])
                .arg("-L")
                .arg(format!("{}:{remote}", sock.display()))
                .arg(dest)
                .stdin(std::process::Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| format!("host `{}`: cannot start ssh: {e}", h.name))?;
            let url = format!("unix://{}", sock.display());
            Ok((
                Docker::connect_with_unix(&url, REQUEST_TIMEOUT_S, v).map_err(fail)?,
                Some(child),
            ))
        }
        _ => Err(format!(
            "host `{}`: unsupported docker_host {}",
            h.name, h.docker_host
        )),
    }
}

fn tunnel_socket(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("nightshift-ssh-{name}.sock"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_hosts() {
        let h = parse("[[hosts]]\nname = \"a\"\ndocker_host = \"unix:///var/run/docker.sock\"\ngpus = 2\n[[hosts]]\nname = \"b\"\ndocker_host = \"ssh://ops@b\"\ngpus = 8\n").unwrap();
        assert_eq!(h.len(), 2);
        assert_eq!(h[1].gpus, 8);
    }

    #[test]
    fn bad_files_say_where() {
        let e =
            parse("[[hosts]]\nname = \"a\"\ndocker_host = \"unix:///x\"\ngpu = 2\n").unwrap_err();
        assert!(e.starts_with("4:1: "), "{e}");
        let e =
            parse("[[hosts]]\nname = \"a\"\ndocker_host = \"ftp://x\"\ngpus = 2\n").unwrap_err();
        assert!(e.contains("must be unix://"), "{e}");
        let twice = "[[hosts]]\nname = \"a\"\ndocker_host = \"unix:///x\"\ngpus = 1\n";
        assert!(parse(&format!("{twice}{twice}"))
            .unwrap_err()
            .contains("twice"));
        assert!(parse("").unwrap_err().contains("no [[hosts]]"));
    }
}
