//! Readiness: `GET /health` → 200 on the published port, then `/v1/models` → 200 — the only
//! version-independent test (spec §5.4: log lines lie, e.g. with the 0.6.x port bug).
//! reqwest, with no idle connections kept: a server that restarts (or a port handed to the
//! next run) never meets a pooled connection gone stale.

use std::sync::OnceLock;
use std::time::Duration;

fn client() -> &'static reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT.get_or_init(|| {
        reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .timeout(Duration::from_secs(5))
            .no_proxy()
            .build()
            .expect("a plain HTTP client builds")
    })
}

/// The status code of `GET path`, or None when nothing answers properly.
pub(crate) async fn get_status(port: u16, path: &str) -> Option<u16> {
    let url = format!("http://127.0.0.1:{port}{path}");
    let resp = client().get(url).send().await.ok()?;
    Some(resp.status().as_u16())
}

/// True once the server answers both endpoints.
pub async fn ready(port: u16) -> bool {
    get_status(port, "/health").await == Some(200)
        && get_status(port, "/v1/models").await == Some(200)
}

/// The same two requests from inside the container `name` (curl, else wget, else the
/// image's python): for engines on other machines, whose published ports are theirs.
pub(crate) async fn ready_in(docker: &bollard::Docker, name: &str, port: u16) -> bool {
    let u = format!("http://127.0.0.1:{port}");
    let script = format!(
        "if command -v curl >/dev/null 2>&1; then curl -fs -o /dev/null {u}/health && curl -fs -o /dev/null {u}/v1/models; \
         elif command -v wget >/dev/null 2>&1; then wget -q -O /dev/null {u}/health && wget -q -O /dev/null {u}/v1/models; \
         else for py in /opt/venv/bin/python3 /usr/local/bin/python3 /usr/bin/python3 python3; do \
         command -v $py >/dev/null 2>&1 && exec $py -c \"import urllib.request as r; r.urlopen('{u}/health', timeout=2); r.urlopen('{u}/v1/models', timeout=2)\"; done; exit 1; fi"
    );
    let probe = super::exec::capture(
        docker,
        name,
        vec!["sh".into(), "-c".into(), script],
        Vec::new(),
    );
    matches!(
        tokio::time::timeout(Duration::from_secs(10), probe).await,
        Ok(Ok((0, _)))
    )
}

/// What a warm-up did.
#[derive(Debug, Clone, PartialEq)]
pub struct WarmUp {
    pub sent: u32,
    pub ok: u32,
    pub secs: f64,
}

impl std::fmt::Display for WarmUp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "warm-up: {} of {} requests to /v1/completions answered in {:.2} s",
            self.ok, self.sent, self.secs
        )
    }
}

/// Sent one after another by the image's own Python from inside the container, as the
/// client's requests go (the same path on a remote host); argv: port, model, count.
const WARM_UP: &str = r#"import json, sys, urllib.request as r
port, model, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
body = json.dumps({"model": model, "prompt": "Warm up.", "max_tokens": 16}).encode()
ok = 0
for _ in range(n):
    try:
        req = r.Request("http://127.0.0.1:%s/v1/completions" % port, data=body, headers={"Content-Type": "application/json"})
        r.urlopen(req, timeout=120).read()
        ok += 1
    except Exception as e:
        print("warm-up request failed: %r" % (e,), file=sys.stderr)
print("ok", ok)
"#;

/// Send the invocation's warm-up requests to the server in container `name`.
pub(crate) async fn warm_up_in(
    docker: &bollard::Docker,
    name: &str,
    setup: &super::invoke::Setup,
) -> Result<WarmUp, String> {
    let inv = &setup.invocation;
    // The name the server answers to: `--served-model-name` when it was given one.
    let served = inv
        .server_args
        .iter()
        .position(|a| a == "--served-model-name")
        .and_then(|i| inv.server_args.get(i + 1))
        .or(inv.model.as_ref())
        .ok_or("no model name to ask for")?;
    let python = setup
        .facts
        .interpreter
        .clone()
        .unwrap_or_else(|| "python3".into());
    let t = std::time::Instant::now();
    let cmd = vec![
        python,
        "-c".into(),
        WARM_UP.into(),
        inv.port.to_string(),
        served.clone(),
        inv.warmup_requests.to_string(),
    ];
    let (code, out) = super::exec::capture(docker, name, cmd, Vec::new()).await?;
    let ok = out
        .lines()
        .find_map(|l| l.strip_prefix("ok "))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| format!("exit {code}: {}", out.trim()))?;
    Ok(WarmUp {
        sent: inv.warmup_requests,
        ok,
        secs: t.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A server on 127.0.0.1 whose `/v1/models` answers `models` (as vLLM does while the
    /// engine still loads: /health up first).
    async fn server(models: u16) -> u16 {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                let mut buf = vec![0u8; 4096];
                let n = s.read(&mut buf).await.unwrap_or(0);
                let req = String::from_utf8_lossy(&buf[..n]);
                let code = if req.starts_with("GET /v1/models") {
                    models
                } else {
                    200
                };
                let resp = format!(
                    "HTTP/1.1 {code} X\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{{}}"
                );
                let _ = s.write_all(resp.as_bytes()).await;
            }
        });
        port
    }

    #[tokio::test]
    async fn ready_needs_both_endpoints() {
        let loading = server(503).await;
        assert_eq!(get_status(loading, "/health").await, Some(200));
        assert_eq!(get_status(loading, "/v1/models").await, Some(503));
        assert!(!ready(loading).await);
        assert!(ready(server(200).await).await);
        // Nothing listening: not ready, promptly.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        assert_eq!(get_status(port, "/health").await, None);
    }
}
