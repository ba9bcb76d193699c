//! The Hugging Face cache layout, as Python's huggingface_hub writes it and vLLM reads it
//! offline: `models--org--name/refs/<revision>` holds a commit, `snapshots/<commit>/<path>`
//! are relative links into `blobs/<etag>` (the LFS sha256, else the git blob id).

use super::files::{FileState, ModelFiles, RepoFile};
use super::select::select_files;
use super::Hub;
use std::path::Path;

pub(crate) const INDEX: &str = "model.safetensors.index.json";

impl Hub {
    /// The model as the cache has it, without the Hub: `refs/<revision>` → snapshot.
    /// `None` unless the snapshot has weights (and every shard its index names).
    pub fn cached_model(&self, model: &str, revision: Option<&str>) -> Option<ModelFiles> {
        let rev = revision.unwrap_or("main");
        let repo_dir = self.repo_dir(model);
        let commit = if is_commit_hash(rev) {
            rev.to_string()
        } else {
            std::fs::read_to_string(repo_dir.join("refs").join(rev))
                .ok()?
                .trim()
                .to_string()
        };
        let snap = repo_dir.join("snapshots").join(&commit);
        let mut present = Vec::new();
        for entry in std::fs::read_dir(&snap).ok()?.flatten() {
            // metadata() follows the link: a dangling one is not a cached file.
            if let (Ok(m), Some(name)) =
                (std::fs::metadata(entry.path()), entry.file_name().to_str())
            {
                if m.is_file() {
                    present.push((name.to_string(), m.len()));
                }
            }
        }
        let names: Vec<&str> = present.iter().map(|(n, _)| n.as_str()).collect();
        let index = std::fs::read(snap.join(INDEX))
            .ok()
            .and_then(|b| parse_index(&b));
        if let Some(ix) = &index {
            if ix.iter().any(|f| !names.contains(&f.as_str())) {
                return None;
            }
        }
        let files: Vec<RepoFile> = select_files(&names, index.as_deref())
            .into_iter()
            .map(|s| RepoFile {
                size: present
                    .iter()
                    .find(|(n, _)| *n == s.path)
                    .map_or(0, |p| p.1),
                // The link's target names the blob.
                blob: std::fs::read_link(snap.join(&s.path))
                    .ok()
                    .and_then(|t| t.file_name().map(|n| n.to_string_lossy().into_owned()))
                    .unwrap_or_default(),
                path: s.path,
                weights: s.weights,
                state: FileState::Cached,
            })
            .collect();
        files.iter().any(|f| f.weights).then(|| ModelFiles {
            model: model.to_string(),
            revision: rev.to_string(),
            commit,
            files,
            offline: true,
        })
    }
}

pub(crate) fn is_commit_hash(rev: &str) -> bool {
    rev.len() == 40 && rev.bytes().all(|b| b.is_ascii_hexdigit())
}

pub(crate) fn parse_index(bytes: &[u8]) -> Option<Vec<String>> {
    let v: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let map = v.get("weight_map")?.as_object()?;
    let mut files: Vec<String> = map
        .values()
        .filter_map(|f| f.as_str().map(str::to_string))
        .collect();
    files.sort();
    files.dedup();
    (!files.is_empty()).then_some(files)
}

pub(crate) fn file_state(
    repo_dir: &Path,
    commit: &str,
    path: &str,
    size: u64,
    blob: &str,
) -> FileState {
    let fits = |m: std::fs::Metadata| m.is_file() && (size == 0 || m.len() == size);
    let snap = repo_dir.join("snapshots").join(commit).join(path);
    if std::fs::metadata(&snap).is_ok_and(fits) {
        return FileState::Cached;
    }
    if !blob.is_empty() && std::fs::metadata(repo_dir.join("blobs").join(blob)).is_ok_and(fits) {
        FileState::InBlobs
    } else {
        FileState::Missing
    }
}

/// `snapshots/<commit>/<path>` → `../../blobs/<blob>`, relative as huggingface_hub makes
/// it, so the cache still works when mounted elsewhere (the container's
/// /root/.cache/huggingface).
pub(crate) fn link_blob(snapshot: &Path, path: &str, blob: &str) -> std::io::Result<()> {
    let dst = snapshot.join(path);
    if let Some(dir) = dst.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let up = "../".repeat(2 + path.matches('/').count());
    let target = format!("{up}blobs/{blob}");
    // A dangling or wrong link in the way is replaced.
    if std::fs::symlink_metadata(&dst).is_ok() {
        std::fs::remove_file(&dst)?;
    }
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(target, &dst)
    }
    #[cfg(not(unix))]
    {
        let blob_path = snapshot.join(target);
        std::fs::copy(blob_path, &dst).map(|_| ())
    }
}

pub(crate) fn write_ref(repo_dir: &Path, revision: &str, commit: &str) -> std::io::Result<()> {
    let path = repo_dir.join("refs").join(revision);
    if std::fs::read_to_string(&path).is_ok_and(|c| c.trim() == commit) {
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, commit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blob_link_is_relative_and_resolves() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("models--org--m");
        std::fs::create_dir_all(repo.join("blobs")).unwrap();
        std::fs::write(repo.join("blobs/abc"), b"hello").unwrap();
        let snap = repo.join("snapshots/c1");
        link_blob(&snap, "config.json", "abc").unwrap();
        link_blob(&snap, "sub/x.json", "abc").unwrap();
        assert_eq!(
            std::fs::read_link(snap.join("config.json")).unwrap(),
            Path::new("../../blobs/abc")
        );
        assert_eq!(std::fs::read(snap.join("sub/x.json")).unwrap(), b"hello");
        assert_eq!(
            file_state(&repo, "c1", "config.json", 5, ""),
            FileState::Cached
        );
        assert_eq!(
            file_state(&repo, "c2", "config.json", 5, "abc"),
            FileState::InBlobs
        );
        assert_eq!(
            file_state(&repo, "c2", "config.json", 6, "abc"),
            FileState::Missing
        );
    }

    #[test]
    fn index_lists_unique_shards() {
        let ix = br#"{"metadata":{},"weight_map":{"a":"m-1.safetensors","b":"m-2.safetensors","c":"m-1.safetensors"}}"#;
        assert_eq!(
            parse_index(ix).unwrap(),
            ["m-1.safetensors", "m-2.safetensors"]
        );
        assert_eq!(parse_index(b"{}"), None);
    }
}
