//! The files of a model repo that vLLM needs, and where each stands in the local cache.

/// Where a file stands in the local cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileState {
    /// In the snapshot of the commit: nothing to do.
    Cached,
    /// Its blob is cached (another revision has the same file): only a link to make.
    InBlobs,
    /// To download.
    Missing,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoFile {
    pub path: String,
    pub size: u64,
    /// The blob's name in the cache (the file's etag): the LFS sha256, else the git blob
    /// id. Empty for a file listed from the cache alone.
    pub blob: String,
    pub weights: bool,
    pub state: FileState,
}

/// The files of one model that vLLM needs, at one commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelFiles {
    pub model: String,
    /// As asked (`main` unless the command pins one).
    pub revision: String,
    /// The commit the revision resolved to.
    pub commit: String,
    pub files: Vec<RepoFile>,
    /// Listed from the local cache because the Hub could not be reached.
    pub offline: bool,
}

impl ModelFiles {
    pub fn total_bytes(&self) -> u64 {
        // Sizes come from the Hub: absurd ones saturate, never wrap to "fits".
        self.files
            .iter()
            .map(|f| f.size)
            .fold(0u64, u64::saturating_add)
    }
    pub fn weights_bytes(&self) -> u64 {
        self.files
            .iter()
            .filter(|f| f.weights)
            .map(|f| f.size)
            .fold(0u64, u64::saturating_add)
    }
    /// Bytes that need no download (in the snapshot, or their blob is cached).
    pub fn cached_bytes(&self) -> u64 {
        self.files
            .iter()
            .filter(|f| f.state != FileState::Missing)
            .map(|f| f.size)
            .fold(0u64, u64::saturating_add)
    }
    pub fn to_download_bytes(&self) -> u64 {
        self.total_bytes() - self.cached_bytes()
    }
    pub fn to_download(&self) -> impl Iterator<Item = &RepoFile> {
        self.files.iter().filter(|f| f.state == FileState::Missing)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listing's sizes are the Hub's word: absurd ones saturate (and so never fit)
    /// instead of wrapping around to a small total or panicking.
    #[test]
    fn absurd_sizes_saturate() {
        let file = |size| RepoFile {
            path: "model.safetensors".into(),
            size,
            blob: "b".into(),
            weights: true,
            state: FileState::Missing,
        };
        let m = ModelFiles {
            model: "org/m".into(),
            revision: "main".into(),
            commit: "c".into(),
            files: vec![file(u64::MAX - 1), file(10)],
            offline: false,
        };
        assert_eq!(m.total_bytes(), u64::MAX);
        assert_eq!(m.weights_bytes(), u64::MAX);
    }
}
