//! A model repo: what vLLM needs from it, what the cache already has, and the download of
//! the rest into the cache layout Python's huggingface_hub uses.

use super::cache::{file_state, link_blob, parse_index, write_ref, INDEX};
use super::download::error_code;
use super::error::{Ctx, FetchError, PrefetchError};
pub use super::files::{FileState, ModelFiles, RepoFile};
use super::fit::{check_fits, free_disk_bytes, Budget};
use super::progress::{rate, Progress};
use super::select::select_files;
use super::Hub;
use hf_hub::{Repo, RepoType};
use serde::Deserialize;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What a fetch did.
#[derive(Debug, Clone, PartialEq)]
pub struct FetchSummary {
    pub downloaded_files: usize,
    pub downloaded_bytes: u64,
    /// Files whose blob was cached already: linked into the snapshot, not downloaded.
    pub linked_files: usize,
    pub cached_files: usize,
    /// `…/models--org--name/snapshots/<commit>`: what vLLM loads.
    pub snapshot: PathBuf,
    pub elapsed: Duration,
}

/// A model ready for an offline server start.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    pub files: ModelFiles,
    pub summary: FetchSummary,
}

#[derive(Deserialize)]
struct Info {
    sha: Option<String>,
    #[serde(default)]
    siblings: Vec<Sibling>,
}

#[derive(Deserialize)]
struct Sibling {
    rfilename: String,
    size: Option<u64>,
    #[serde(rename = "blobId")]
    blob_id: Option<String>,
    lfs: Option<Lfs>,
}

#[derive(Deserialize)]
struct Lfs {
    sha256: String,
    size: Option<u64>,
}

impl Hub {
    /// List what vLLM needs from `model` at `revision` (default `main`) with sizes, and
    /// what the cache already holds. One call to the Hub's model-info API (`?blobs=true`
    /// gives sizes and blob ids), plus the safetensors index when there is one.
    pub async fn plan_model(
        &self,
        model: &str,
        revision: Option<&str>,
    ) -> Result<ModelFiles, FetchError> {
        let ctx = self.ctx(model);
        let rev = revision.unwrap_or("main");
        let api = self.api.repo(model_repo(model, rev));
        let resp = api
            .info_request()
            .query(&[("blobs", "true")])
            .send()
            .await
            .map_err(|e| ctx.reqwest(&e))?;
        if !resp.status().is_success() {
            let code = error_code(resp.headers());
            return Err(ctx.status(resp.status().as_u16(), code, resp.url().as_str()));
        }
        let info: Info = resp.json().await.map_err(|e| ctx.reqwest(&e))?;
        let commit = info
            .sha
            .filter(|s| !s.is_empty())
            .ok_or_else(|| ctx.invalid(format!("the Hub sent no commit sha for {model}")))?;
        let names: Vec<&str> = info.siblings.iter().map(|s| s.rfilename.as_str()).collect();
        let index = match info.siblings.iter().find(|s| s.rfilename == INDEX) {
            Some(s) => {
                self.index_weights(model, &commit, s.blob_id.as_deref())
                    .await?
            }
            None => None,
        };
        let at_commit = self.api.repo(model_repo(model, &commit));
        let repo_dir = self.repo_dir(model);
        let mut files = Vec::new();
        for sel in select_files(&names, index.as_deref()) {
            let s = info
                .siblings
                .iter()
                .find(|s| s.rfilename == sel.path)
                .expect("selected from the siblings");
            let size = s.size.or_else(|| s.lfs.as_ref().and_then(|l| l.size));
            let blob = s
                .lfs
                .as_ref()
                .map(|l| l.sha256.clone())
                .or_else(|| s.blob_id.clone());
            let (size, blob) = match (size, blob) {
                (Some(n), Some(b)) => (n, b),
                // An endpoint whose listing lacks them: ask per file.
                _ => self.probe(&ctx, &at_commit.url(&sel.path)).await?,
            };
            let state = file_state(&repo_dir, &commit, &sel.path, size, &blob);
            files.push(RepoFile {
                path: sel.path,
                size,
                blob,
                weights: sel.weights,
                state,
            });
        }
        if !files.iter().any(|f| f.weights) {
            return Err(ctx.invalid(format!(
                "{model} at {rev} has no weight files vLLM can load (*.safetensors, *.bin or *.pt at the top level)"
            )));
        }
        Ok(ModelFiles {
            model: model.to_string(),
            revision: rev.to_string(),
            commit,
            files,
            offline: false,
        })
    }

    /// Download what `files` lacks into the cache (files already in the snapshot are not
    /// fetched again; a cached blob is only linked), point `refs/<revision>` at the commit,
    /// and check the snapshot is complete. `progress` gets throttled updates.
    pub async fn fetch_model(
        &self,
        files: &ModelFiles,
        progress: impl FnMut(Progress),
    ) -> Result<FetchSummary, FetchError> {
        let lock = self.repo_lock(&lock_key("model", &files.model));
        let _held = lock.lock().await;
        self.fetch_locked(files, progress).await
    }

    /// All a runtime needs before starting a server for `model`: list it, check it fits
    /// (`budget`; free disk measured now unless given), fetch what is missing. When the Hub
    /// cannot be reached and the cache has the model, the cached snapshot is used. Calls
    /// for the same model are serialised, so concurrent runs download it once.
    pub async fn ensure_model(
        &self,
        model: &str,
        revision: Option<&str>,
        budget: &Budget,
        progress: impl FnMut(Progress),
    ) -> Result<Prepared, PrefetchError> {
        self.ensure_model_with(model, revision, budget, true, progress)
            .await
    }

    /// As [`Hub::ensure_model`]; with `weights = false` (a server started with
    /// `--load-format dummy`, which makes up its weights) only the metadata comes: config,
    /// tokenizer, the index, and no weight-size check on the cache disk.
    pub async fn ensure_model_with(
        &self,
        model: &str,
        revision: Option<&str>,
        budget: &Budget,
        weights: bool,
        progress: impl FnMut(Progress),
    ) -> Result<Prepared, PrefetchError> {
        let lock = self.repo_lock(&lock_key("model", model));
        let _held = lock.lock().await;
        let files = match self.plan_model(model, revision).await {
            Ok(f) => f,
            Err(e) if e.is_network() => match self.cached_model(model, revision) {
                Some(f) => f,
                None => return Err(e.into()),
            },
            Err(e) => return Err(e.into()),
        };
        let mut files = files;
        if !weights {
            files.files.retain(|f| !f.weights);
            let summary = self.fetch_locked(&files, progress).await?;
            return Ok(Prepared { files, summary });
        }
        let free = budget
            .free_disk
            .or_else(|| free_disk_bytes(&self.cache_dir));
        check_fits(
            files.total_bytes(),
            budget.gpu_mem_per_gpu,
            budget.tp,
            free,
            files.cached_bytes(),
        )
        .map_err(|problem| PrefetchError::Fit {
            model: model.to_string(),
            problem,
        })?;
        let summary = self.fetch_locked(&files, progress).await?;
        Ok(Prepared { files, summary })
    }

    async fn fetch_locked(
        &self,
        files: &ModelFiles,
        mut progress: impl FnMut(Progress),
    ) -> Result<FetchSummary, FetchError> {
        let ctx = self.ctx(&files.model);
        let started = Instant::now();
        let repo_dir = self.repo_dir(&files.model);
        let snapshot = repo_dir.join("snapshots").join(&files.commit);
        let mut summary = FetchSummary {
            downloaded_files: 0,
            downloaded_bytes: 0,
            linked_files: 0,
            cached_files: 0,
            snapshot: snapshot.clone(),
            elapsed: Duration::ZERO,
        };
        // Looked at again: another run may have fetched some since the plan was made.
        let mut todo = Vec::new();
        for f in &files.files {
            match file_state(&repo_dir, &files.commit, &f.path, f.size, &f.blob) {
                FileState::Cached => summary.cached_files += 1,
                FileState::InBlobs => {
                    link_blob(&snapshot, &f.path, &f.blob).map_err(|e| ctx.io(&e))?;
                    summary.linked_files += 1;
                }
                FileState::Missing if files.offline => {
                    return Err(ctx.invalid(format!(
                        "{} is not in the cache and the Hub cannot be reached",
                        f.path
                    )))
                }
                FileState::Missing => todo.push(f),
            }
        }
        let total: u64 = todo.iter().map(|f| f.size).fold(0u64, u64::saturating_add);
        // Pinned to the commit, so every file comes from the one the plan listed.
        let at_commit = self.api.repo(model_repo(&files.model, &files.commit));
        let blobs = repo_dir.join("blobs");
        if !todo.is_empty() {
            std::fs::create_dir_all(&blobs).map_err(|e| ctx.io(&e))?;
        }
        for (i, f) in todo.iter().enumerate() {
            let base = summary.downloaded_bytes;
            let line = |file_done: u64| Progress {
                repo: files.model.clone(),
                file: f.path.clone(),
                file_done,
                file_total: f.size,
                done: base + file_done,
                total,
                file_no: i + 1,
                files: todo.len(),
                bytes_per_s: rate(base + file_done, started),
            };
            let blob = blobs.join(&f.blob);
            // huggingface_hub's lock and partial-file names: a Python process fetching the
            // same blob into this cache waits for us, and we for it.
            let _lock = self.lock_blob(&ctx, &files.model, &f.blob).await?;
            if !std::fs::metadata(&blob).is_ok_and(|m| m.len() == f.size) {
                let part = blobs.join(format!("{}.incomplete", f.blob));
                let url = at_commit.url(&f.path);
                let mut attempt = 1;
                loop {
                    let mut show = |n: u64| progress(line(n));
                    match self.stream_to(&ctx, &url, &part, f.size, &mut show).await {
                        Ok(()) => break,
                        Err(e) if e.is_retryable() && attempt < self.retries => {
                            tokio::time::sleep(Duration::from_secs(2u64.pow(attempt))).await;
                            attempt += 1;
                        }
                        Err(e) => return Err(e),
                    }
                }
                std::fs::rename(&part, &blob).map_err(|e| ctx.io(&e))?;
            }
            link_blob(&snapshot, &f.path, &f.blob).map_err(|e| ctx.io(&e))?;
            progress(line(f.size));
            summary.downloaded_files += 1;
            summary.downloaded_bytes += f.size;
        }
        if files.revision != files.commit {
            write_ref(&repo_dir, &files.revision, &files.commit).map_err(|e| ctx.io(&e))?;
        }
        for f in &files.files {
            if !snapshot.join(&f.path).is_file() {
                return Err(ctx.invalid(format!(
                    "{} is missing from {} after the download",
                    f.path,
                    snapshot.display()
                )));
            }
        }
        summary.elapsed = started.elapsed();
        Ok(summary)
    }

    /// The safetensors files the index's `weight_map` names: read from the cache when it
    /// has the index (in the snapshot, or as a blob), else fetched (not stored: the fetch
    /// stores it with the rest).
    async fn index_weights(
        &self,
        model: &str,
        commit: &str,
        blob: Option<&str>,
    ) -> Result<Option<Vec<String>>, FetchError> {
        let repo_dir = self.repo_dir(model);
        let local = [
            Some(repo_dir.join("snapshots").join(commit).join(INDEX)),
            blob.map(|b| repo_dir.join("blobs").join(b)),
        ];
        for path in local.into_iter().flatten() {
            if let Some(ix) = std::fs::read(&path).ok().and_then(|b| parse_index(&b)) {
                return Ok(Some(ix));
            }
        }
        let ctx = self.ctx(model);
        let url = self.api.repo(model_repo(model, commit)).url(INDEX);
        let resp = self
            .api
            .client()
            .get(&url)
            .send()
            .await
            .map_err(|e| ctx.reqwest(&e))?;
        if !resp.status().is_success() {
            let code = error_code(resp.headers());
            return Err(ctx.status(resp.status().as_u16(), code, &url));
        }
        let bytes = resp.bytes().await.map_err(|e| ctx.reqwest(&e))?;
        Ok(parse_index(&bytes))
    }

    pub(crate) fn repo_dir(&self, model: &str) -> PathBuf {
        self.cache_dir
            .join(Repo::new(model.to_string(), RepoType::Model).folder_name())
    }

    pub(crate) fn ctx<'a>(&'a self, repo: &'a str) -> Ctx<'a> {
        Ctx {
            repo_type: "model",
            repo,
            hub: self,
        }
    }
}

pub(crate) fn lock_key(kind: &str, name: &str) -> String {
    format!("{kind}:{name}")
}

fn model_repo(model: &str, revision: &str) -> Repo {
    Repo::with_revision(model.to_string(), RepoType::Model, revision.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ensure_model_future_is_send() {
        fn send<T: Send>(_: &T) {}
        let hub = Hub::new("http://127.0.0.1:9", None, "/tmp/none".into()).unwrap();
        let budget = Budget::disk_only();
        let fut = hub.ensure_model("org/m", None, &budget, |_| {});
        send(&fut);
    }
}
