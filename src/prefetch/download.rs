//! One file from the Hub to disk, and the size/etag probe for endpoints whose listing
//! lacks them. The Hub answers `resolve` of large files with a redirect to a signed CDN
//! URL; like huggingface_hub, the token goes to the Hub only, never to the CDN host.
//! (hf-hub 0.5's own downloader sends it to the CDN in its size probe: that is why the
//! bytes are moved here and hf-hub builds the client, URLs and cache names.)

use super::error::{Ctx, FetchError};
use super::Hub;
use reqwest::header::{HeaderMap, CONTENT_RANGE, ETAG, LOCATION, RANGE};
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;

/// Buffer between the socket and the file: tokio writes each buffer on a blocking thread.
const WRITE_BUF: usize = 1 << 20;

impl Hub {
    /// Stream `url` into `part` until it holds `size` bytes. A `part` left by an earlier
    /// try is resumed with a range request (a server that ignores the range starts it
    /// over). `on_bytes` gets the file's byte count at most every 250 ms. The client
    /// carries the token; reqwest drops it on a redirect to another host.
    pub(crate) async fn stream_to(
        &self,
        ctx: &Ctx<'_>,
        url: &str,
        part: &Path,
        size: u64,
        on_bytes: &mut impl FnMut(u64),
    ) -> Result<(), FetchError> {
        let have = std::fs::metadata(part).map_or(0, |m| m.len());
        if have == size && size > 0 {
            return Ok(());
        }
        let have = if have < size { have } else { 0 };
        let mut req = self.api.client().get(url);
        if have > 0 {
            req = req.header(RANGE, format!("bytes={have}-"));
        }
        let stalled = |what: &str| {
            ctx.network(format!(
                "{what} stalled: no data for {} s",
                self.stall_timeout.as_secs()
            ))
        };
        let mut resp = tokio::time::timeout(self.stall_timeout, req.send())
            .await
            .map_err(|_| stalled("request"))?
            .map_err(|e| ctx.reqwest(&e))?;
        if !resp.status().is_success() {
            return Err(ctx.status(resp.status().as_u16(), error_code(resp.headers()), url));
        }
        let start = if resp.status().as_u16() == 206 {
            have
        } else {
            0
        };
        let file = tokio::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(start > 0)
            .truncate(start == 0)
            .open(part)
            .await
            .map_err(|e| ctx.io(&e))?;
        let mut out = tokio::io::BufWriter::with_capacity(WRITE_BUF, file);
        let mut done = start;
        let mut shown = Instant::now();
        loop {
            let chunk = tokio::time::timeout(self.stall_timeout, resp.chunk())
                .await
                .map_err(|_| stalled("download"))?
                .map_err(|e| ctx.reqwest(&e))?;
            let Some(chunk) = chunk else { break };
            out.write_all(&chunk).await.map_err(|e| ctx.io(&e))?;
            done += chunk.len() as u64;
            if shown.elapsed() >= Duration::from_millis(250) {
                shown = Instant::now();
                on_bytes(done.min(size));
            }
        }
        out.flush().await.map_err(|e| ctx.io(&e))?;
        if done != size {
            return Err(ctx.network(format!(
                "download ended at {done} of {size} bytes (it resumes on the next try)"
            )));
        }
        on_bytes(done);
        Ok(())
    }

    /// Size and blob name (etag) of a file, for endpoints whose listing lacks them:
    /// huggingface_hub's probe. The Hub is asked without following redirects, so the
    /// token reaches only the Hub; a redirect's `X-Linked-Etag`/`X-Linked-Size` answer, or
    /// the target is asked (without the token) for the size.
    pub(crate) async fn probe(
        &self,
        ctx: &Ctx<'_>,
        url: &str,
    ) -> Result<(u64, String), FetchError> {
        let one_byte = |c: &reqwest::Client, u: &str| c.get(u).header(RANGE, "bytes=0-0").send();
        let mut resp = one_byte(&self.probe_client, url)
            .await
            .map_err(|e| ctx.reqwest(&e))?;
        // The Hub's own redirects (a small file's `/api/resolve-cache/…`, a renamed repo)
        // stay on the Hub: followed with the token, as huggingface_hub follows relative
        // ones. A redirect elsewhere is a CDN: handled below, without the token.
        for _ in 0..5 {
            if !resp.status().is_redirection() || header(resp.headers(), "x-linked-etag").is_some()
            {
                break;
            }
            let Some(next) = header(resp.headers(), LOCATION.as_str())
                .and_then(|l| resp.url().join(l).ok())
                .filter(|n| {
                    n.scheme() == resp.url().scheme()
                        && n.host_str() == resp.url().host_str()
                        && n.port_or_known_default() == resp.url().port_or_known_default()
                })
            else {
                break;
            };
            resp = one_byte(&self.probe_client, next.as_str())
                .await
                .map_err(|e| ctx.reqwest(&e))?;
        }
        let status = resp.status();
        if !(status.is_success() || status.is_redirection()) {
            return Err(ctx.status(status.as_u16(), error_code(resp.headers()), url));
        }
        let h = resp.headers();
        let etag = header(h, "x-linked-etag")
            .or_else(|| h.get(ETAG).and_then(|v| v.to_str().ok()))
            .map(normalize_etag)
            .ok_or_else(|| ctx.invalid(format!("the Hub sent no etag for {url}")))?;
        if let Some(n) = header(h, "x-linked-size").and_then(|s| s.parse().ok()) {
            return Ok((n, etag));
        }
        let sized = if status.is_redirection() {
            let to = header(h, LOCATION.as_str())
                .ok_or_else(|| ctx.invalid(format!("a redirect without a target for {url}")))?;
            let to = resp
                .url()
                .join(to)
                .map_err(|e| ctx.invalid(e.to_string()))?;
            one_byte(&self.anon_client, to.as_str())
                .await
                .map_err(|e| ctx.reqwest(&e))?
        } else {
            resp
        };
        let total = header(sized.headers(), CONTENT_RANGE.as_str())
            .and_then(|r| r.rsplit('/').next())
            .and_then(|n| n.parse().ok())
            .or_else(|| {
                sized
                    .content_length()
                    .filter(|_| sized.status().as_u16() == 200)
            })
            .ok_or_else(|| ctx.invalid(format!("no size for {url}")))?;
        Ok((total, etag))
    }
}

/// huggingface_hub's per-blob lock (`.locks/models--org--name/<blob>.lock`, flock):
/// released when dropped.
pub(crate) struct BlobLock(#[allow(dead_code)] std::fs::File);

impl Hub {
    /// Wait for the blob's lock: another process (a second nightshift, or Python) may be
    /// downloading it. Gives up as Busy after 12 stall timeouts (an hour by default).
    pub(crate) async fn lock_blob(
        &self,
        ctx: &Ctx<'_>,
        model: &str,
        blob: &str,
    ) -> Result<BlobLock, FetchError> {
        let folder = hf_hub::Repo::new(model.to_string(), hf_hub::RepoType::Model).folder_name();
        let dir = self.cache_dir.join(".locks").join(folder);
        std::fs::create_dir_all(&dir).map_err(|e| ctx.io(&e))?;
        let path = dir.join(format!("{blob}.lock"));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| ctx.io(&e))?;
        let deadline = Instant::now() + self.stall_timeout * 12;
        while !try_lock(&file) {
            if Instant::now() >= deadline {
                return Err(FetchError::Busy {
                    repo: model.to_string(),
                    detail: format!("lock {} is held", path.display()),
                });
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        Ok(BlobLock(file))
    }
}

#[cfg(unix)]
fn try_lock(file: &std::fs::File) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor this function's caller owns for the lock's lifetime.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

#[cfg(not(unix))]
fn try_lock(_file: &std::fs::File) -> bool {
    true
}

fn header<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

pub(crate) fn error_code(h: &HeaderMap) -> Option<&str> {
    header(h, "x-error-code")
}

/// `W/"abc"` → `abc`, as huggingface_hub names blobs.
fn normalize_etag(e: &str) -> String {
    e.trim()
        .trim_start_matches("W/")
        .trim_matches('"')
        .to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn etags_lose_weak_prefix_and_quotes() {
        assert_eq!(super::normalize_etag("W/\"abc\""), "abc");
        assert_eq!(super::normalize_etag("\"abc\""), "abc");
    }
}
