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
