//! TLS to a remote Docker engine (`tcp://HOST:2376` with `--tlsverify`): the engine checks
//! our client certificate, we check its certificate against the host's CA. bollard's own
//! TLS would need another TLS stack; instead a local Unix socket is proxied, byte for
//! byte, over rustls (the provider reqwest already uses), so hijacked exec streams work
//! unchanged. The proxy runs on its own thread: it outlives whichever tokio runtime built
//! the hosts (the CLI's probe runtime is not the engine's).

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_rustls::rustls;

/// Docker's file names in a client certificate directory (`DOCKER_CERT_PATH`).
pub fn files(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    (
        dir.join("ca.pem"),
        dir.join("cert.pem"),
        dir.join("key.pem"),
    )
}

fn client_config(dir: &Path) -> Result<rustls::ClientConfig, String> {
    let (ca, cert, key) = files(dir);
    let read = |p: &Path| -> Result<Vec<CertificateDer<'static>>, String> {
        CertificateDer::pem_file_iter(p)
            .map_err(|e| format!("{}: {e}", p.display()))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("{}: {e}", p.display()))
    };
    let mut roots = rustls::RootCertStore::empty();
    for c in read(&ca)? {
        roots.add(c).map_err(|e| format!("{}: {e}", ca.display()))?;
    }
    let chain = read(&cert)?;
    let key = PrivateKeyDer::from_pem_file(&key).map_err(|e| format!("{}: {e}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .map_err(|e| format!("client certificate in {}: {e}", dir.display()))
}

/// Listen on `sock` and carry each connection to `addr` (`host:port`) over TLS with the
/// certificates in `dir`. Errors in the files or the socket are reported here, at start;
/// a connection that fails later fails that request (the host's health check sees it).
pub fn proxy(addr: &str, dir: &Path, sock: &Path) -> Result<(), String> {
    let config = Arc::new(client_config(dir)?);
    let host = addr
        .rsplit_once(':')
        .map(|(h, _)| h)
        .unwrap_or(addr)
        .trim_matches(['[', ']'])
        .to_string();
    let name = ServerName::try_from(host.clone())
        .map_err(|e| format!("{host}: not a name a certificate can hold: {e}"))?;
    let _ = std::fs::remove_file(sock);
    let listener = std::os::unix::net::UnixListener::bind(sock)
        .map_err(|e| format!("{}: {e}", sock.display()))?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let addr = addr.to_string();
    // On the process's runtime: a proxy per host, no thread or runtime of its own.
    crate::rt::spawn(async move {
        {
            {
                let Ok(listener) = tokio::net::UnixListener::from_std(listener) else {
                    return;
                };
                let connector = tokio_rustls::TlsConnector::from(config);
                loop {
                    let Ok((mut local, _)) = listener.accept().await else {
                        continue;
                    };
                    let (connector, name, addr) = (connector.clone(), name.clone(), addr.clone());
                    tokio::spawn(async move {
                        let Ok(tcp) = tokio::net::TcpStream::connect(&addr).await else {
                            return;
                        };
                        let Ok(mut tls) = connector.connect(name, tcp).await else {
                            return;
                        };
                        let _ = tokio::io::copy_bidirectional(&mut local, &mut tls).await;
                    });
                }
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_certificates_are_named() {
        let d = tempfile::tempdir().unwrap();
        let e = client_config(d.path()).unwrap_err();
        assert!(e.contains("ca.pem"), "{e}");
    }
}
