//! Readiness: `GET /health` → 200 on the published port, then `/v1/models` → 200 — the only
//! version-independent test (spec §5.4: log lines lie, e.g. with the 0.6.x port bug).
//! A minimal HTTP/1.0 client over a TcpStream: no connection pooling to go stale.

use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The status code of `GET path`, or None when nothing answers properly.
pub async fn get_status(port: u16, path: &str) -> Option<u16> {
    let fut = async {
        let mut s = TcpStream::connect(("127.0.0.1", port)).await.ok()?;
        let req = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n");
        s.write_all(req.as_bytes()).await.ok()?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await.ok()?;
        let text = String::from_utf8_lossy(&buf);
        text.split_whitespace().nth(1)?.parse().ok()
    };
    tokio::time::timeout(Duration::from_secs(5), fut)
        .await
        .ok()
        .flatten()
}

/// True once the server answers both endpoints.
pub async fn ready(port: u16) -> bool {
    get_status(port, "/health").await == Some(200)
        && get_status(port, "/v1/models").await == Some(200)
}

/// The same two requests from inside the container `name` (curl, else wget, else the
/// image's python): for engines on other machines, whose published ports are theirs.
pub async fn ready_in(docker: &bollard::Docker, name: &str, port: u16) -> bool {
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
