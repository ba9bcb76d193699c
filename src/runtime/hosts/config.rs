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
use std::time::{Duration, Instant};

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
    // Capped as a plan is: `--hosts /dev/zero` must not grow memory.
    let bytes = crate::plan::read::read_capped(path, crate::plan::read::PLAN_CAP, "a hosts file")
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8(bytes).map_err(|e| format!("{}: {e}", path.display()))?;
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
        // Each GPU is a slot the engine keeps: a typo must not size them.
        let max = crate::plan::limits::MAX_GPUS;
        if h.gpus == 0 || h.gpus > max {
            return Err(format!(
                " host `{}`: gpus = {} is out of range (expected 1..={max})",
                h.name, h.gpus
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

/// How long an `ssh://` host's tunnel may take to open (connect, authenticate, forward).
const TUNNEL_WAIT: Duration = Duration::from_secs(15);

/// An `ssh -L` process forwarding a local socket to the host's engine. A plain process,
/// not tokio's: it is started before any runtime exists (`run --hosts` sets the hosts up
/// first), and tokio's process handles need one. Dropping it closes the tunnel.
pub struct Tunnel {
    child: std::process::Child,
    sock: PathBuf,
}

impl Drop for Tunnel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.sock);
    }
}

/// A client for the host's engine. `ssh://` goes through a forwarded socket under
/// `tunnels`, held open by the returned tunnel. A tunnel that does not open is an error
/// naming the host with ssh's own words: there is no engine to ask without it, and it
/// would not reopen by itself later in the night.
pub fn connect(h: &HostSpec, tunnels: &Path) -> Result<(Docker, Option<Tunnel>), String> {
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
                file_safe(&h.name),
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
        Some(("ssh", _)) => {
            let sock = tunnel_socket(tunnels, &h.name);
            // The socket must exist before a client can be made on it.
            let tunnel = open_tunnel(h, &sock)?;
            let url = format!("unix://{}", sock.display());
            Ok((
                Docker::connect_with_unix(&url, REQUEST_TIMEOUT_S, v).map_err(fail)?,
                Some(tunnel),
            ))
        }
        _ => Err(format!(
            "host `{}`: unsupported docker_host {}",
            h.name, h.docker_host
        )),
    }
}

/// Start `ssh -L` for an `ssh://` host and wait until its socket is there; Err: why not
/// (ssh missing, ssh gave up with its last line of stderr, or no socket in time).
fn open_tunnel(h: &HostSpec, sock: &Path) -> Result<Tunnel, String> {
    use std::io::{Read, Seek};
    let _ = std::fs::remove_file(sock);
    let remote = h
        .remote_socket
        .clone()
        .unwrap_or_else(|| "/var/run/docker.sock".into());
    let who = format!("host `{}` ({})", h.name, h.docker_host);
    // ssh's complaints go to an unnamed file (no path to hijack, nothing left behind):
    // read when it gives up, never a pipe left to fill.
    let mut log =
        tempfile::tempfile().map_err(|e| format!("{who}: a file for ssh's errors: {e}"))?;
    let for_ssh = log
        .try_clone()
        .map_err(|e| format!("{who}: a file for ssh's errors: {e}"))?;
    // BatchMode: a night has nobody to type a password; keys or an agent only. The URL
    // form (OpenSSH 7.7+) carries a port: ssh://user@host:2222.
    let child = std::process::Command::new("ssh")
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
        .arg(h.docker_host.trim_end_matches('/'))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(for_ssh)
        .spawn()
        .map_err(|e| format!("{who}: cannot start ssh: {e}"))?;
    let mut tunnel = Tunnel {
        child,
        sock: sock.to_path_buf(),
    };
    let start = Instant::now();
    loop {
        if sock.exists() {
            return Ok(tunnel);
        }
        if let Ok(Some(status)) = tunnel.child.try_wait() {
            let mut said = String::new();
            let _ = log.seek(std::io::SeekFrom::Start(0));
            let _ = (&mut log).take(64 << 10).read_to_string(&mut said);
            let last = said.lines().rev().find(|l| !l.trim().is_empty());
            return Err(format!(
                "{who}: the ssh tunnel failed ({status}){}",
                last.map(|l| format!(": {}", l.trim())).unwrap_or_default()
            ));
        }
        if start.elapsed() > TUNNEL_WAIT {
            return Err(format!(
                "{who}: the ssh tunnel did not open within {} s",
                TUNNEL_WAIT.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A host name as part of a file name (names are free text apart from spaces).
fn file_safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn tunnel_socket(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("nightshift-ssh-{}.sock", file_safe(name)))
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
        let huge = "[[hosts]]\nname = \"a\"\ndocker_host = \"unix:///x\"\ngpus = 4294967295\n";
        assert!(parse(huge).unwrap_err().contains("expected 1..=64"));
        assert!(load(Path::new("/dev/zero"))
            .unwrap_err()
            .contains("/dev/zero: a character device"));
    }

    /// A tunnel that cannot open (nothing listens on port 1; or no ssh at all) is an
    /// error naming the host and why, with no tokio runtime needed (it once panicked with
    /// "there is no reactor running").
    #[test]
    fn a_failing_ssh_tunnel_is_a_named_reason_not_a_panic() {
        let d = tempfile::tempdir().unwrap();
        let h = HostSpec {
            name: "far/box".into(),
            docker_host: "ssh://nobody@127.0.0.1:1".into(),
            gpus: 1,
            remote_socket: None,
            gpu_requests: None,
            tls_dir: None,
        };
        let why = connect(&h, d.path()).err().unwrap();
        assert!(
            why.starts_with("host `far/box` (ssh://nobody@127.0.0.1:1): "),
            "{why}"
        );
        assert!(
            why.contains("tunnel failed") || why.contains("cannot start ssh"),
            "{why}"
        );
    }
}
