//! Where a run's log files live on disk: one path per key, attempt, stream and pipe, the
//! same for the writer (the engine), the readers (the TUI's backfill, `show`) and the store.

use crate::model::Pipe;
use std::path::{Path, PathBuf};

/// `<dir>/<key with / as __>/attempt-<n>/<stream>.<pipe>.log`
pub(crate) fn log_path(dir: &Path, key: &str, attempt: u32, stream: &str, pipe: Pipe) -> PathBuf {
    let pipe = match pipe {
        Pipe::Stdout => "stdout",
        Pipe::Stderr => "stderr",
    };
    dir.join(sanitize(key))
        .join(format!("attempt-{attempt}"))
        .join(format!("{stream}.{pipe}.log"))
}

fn sanitize(key: &str) -> String {
    key.chars()
        .map(|c| match c {
            '/' => '_',
            c if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' => c,
            _ => '-',
        })
        .collect()
}
