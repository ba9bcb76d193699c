//! Benchmark datasets that live in Hub dataset repos (ShareGPT), fetched to the host path
//! the plan names, so the benchmark finds them where its `--dataset-path` points.

use super::error::{Ctx, FetchError, PrefetchError};
use super::fit::{check_fits, free_disk_bytes};
use super::model::lock_key;
use super::progress::{rate, Progress};
use super::Hub;
use hf_hub::{Repo, RepoType};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A dataset file nightshift knows how to fetch from the Hub.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HubDataset {
    /// The name plans use in their `[datasets]` table.
    pub name: &'static str,
    pub repo: &'static str,
    pub file: &'static str,
}

/// vLLM's serving benchmarks' default dataset.
pub const SHAREGPT: HubDataset = HubDataset {
    name: "sharegpt",
    repo: "anon8231489123/ShareGPT_Vicuna_unfiltered",
    file: "ShareGPT_V3_unfiltered_cleaned_split.json",
};

const KNOWN: &[HubDataset] = &[SHAREGPT];

/// The Hub source of a plan dataset name (case-insensitive), if nightshift knows one.
pub(crate) fn hub_dataset(name: &str) -> Option<&'static HubDataset> {
    KNOWN
        .iter()
        .find(|d| d.name.eq_ignore_ascii_case(name.trim()))
}

/// What [`Hub::fetch_dataset_file`] found or did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatasetOutcome {
    /// The file was there with the Hub's size: not fetched.
    Present {
        bytes: u64,
    },
    Downloaded {
        bytes: u64,
    },
    /// The Hub could not be reached; the file on disk was kept as it is.
    KeptUnverified {
        bytes: u64,
        why: String,
    },
}

impl Hub {
    /// The size of `file` in dataset repo `repo` (branch `main`).
    pub(crate) async fn dataset_file_size(
        &self,
        repo: &str,
        file: &str,
    ) -> Result<u64, FetchError> {
        let url = dataset_url(self, repo, file);
        Ok(self.probe(&self.dataset_ctx(repo), &url).await?.0)
    }

    /// Fetch `file` of dataset repo `repo` (`{endpoint}/datasets/{repo}/resolve/main/{file}`)
    /// to `dest`, unless `dest` already has the Hub's size. Downloads into `dest.part`
    /// (resumed with a range request when a previous try left one) and renames at the end,
    /// so `dest` is never half-written.
    pub async fn fetch_dataset_file(
        &self,
        repo: &str,
        file: &str,
        dest: &Path,
        mut progress: impl FnMut(Progress),
    ) -> Result<DatasetOutcome, PrefetchError> {
        let lock = self.repo_lock(&lock_key("dataset", &dest.display().to_string()));
        let _held = lock.lock().await;
        let ctx = self.dataset_ctx(repo);
        let on_disk = std::fs::metadata(dest)
            .ok()
            .filter(|m| m.is_file())
            .map(|m| m.len());
        let size = match self.dataset_file_size(repo, file).await {
            Ok(n) => n,
            Err(e) if e.is_network() && on_disk.is_some_and(|n| n > 0) => {
                return Ok(DatasetOutcome::KeptUnverified {
                    bytes: on_disk.unwrap_or(0),
                    why: e.to_string(),
                })
            }
            Err(e) => return Err(e.into()),
        };
        if on_disk == Some(size) {
            return Ok(DatasetOutcome::Present { bytes: size });
        }
        let part = part_path(dest);
        let have = std::fs::metadata(&part).map_or(0, |m| m.len()).min(size);
        check_fits(size, None, 1, free_disk_bytes(dest), have).map_err(|problem| {
            PrefetchError::Fit {
                model: format!("dataset {repo}"),
                problem,
            }
        })?;
        if let Some(dir) = dest.parent() {
            std::fs::create_dir_all(dir).map_err(|e| ctx.io(&e))?;
        }
        let url = dataset_url(self, repo, file);
        let started = Instant::now();
        let mut show = |done: u64| {
            progress(Progress {
                repo: repo.to_string(),
                file: file.to_string(),
                file_done: done,
                file_total: size,
                done,
                total: size,
                file_no: 1,
                files: 1,
                bytes_per_s: rate(done.saturating_sub(have), started),
            })
        };
        let mut attempt = 1;
        loop {
            match self.stream_to(&ctx, &url, &part, size, &mut show).await {
                Ok(()) => break,
                Err(e) if e.is_retryable() && attempt < self.retries => {
                    tokio::time::sleep(Duration::from_secs(2u64.pow(attempt))).await;
                    attempt += 1;
                }
                Err(e) => return Err(e.into()),
            }
        }
        std::fs::rename(&part, dest).map_err(|e| ctx.io(&e))?;
        Ok(DatasetOutcome::Downloaded { bytes: size })
    }

    fn dataset_ctx<'a>(&'a self, repo: &'a str) -> Ctx<'a> {
        Ctx {
            repo_type: "dataset",
            repo,
            hub: self,
        }
    }
}

fn dataset_url(hub: &Hub, repo: &str, file: &str) -> String {
    let r = Repo::with_revision(repo.to_string(), RepoType::Dataset, "main".to_string());
    hub.api.repo(r).url(file)
}

fn part_path(dest: &Path) -> PathBuf {
    let mut name = dest.file_name().unwrap_or_default().to_os_string();
    name.push(".part");
    dest.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sharegpt_is_known_by_name() {
        assert_eq!(hub_dataset("ShareGPT"), Some(&SHAREGPT));
        assert_eq!(hub_dataset("sonnet"), None);
        assert_eq!(
            part_path(Path::new("/d/x.json")),
            Path::new("/d/x.json.part")
        );
    }
}
