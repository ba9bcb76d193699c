//! Download progress: what a TUI line or a stderr line shows.

use std::time::Instant;

/// One progress update. Sent about 4× a second while bytes move, and once when a file is
/// complete (`file_done == file_total`).
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// `org/name` of the model or dataset repo.
    pub repo: String,
    /// Path of the file in the repo.
    pub file: String,
    pub file_done: u64,
    pub file_total: u64,
    /// Bytes of this fetch so far (all files), and all it will download.
    pub done: u64,
    pub total: u64,
    /// 1-based number of the file among those downloaded, and how many there are.
    pub file_no: usize,
    pub files: usize,
    /// Recent rate over the fetch so far.
    pub bytes_per_s: u64,
}

impl std::fmt::Display for Progress {
    /// `org/m model-00001-of-00004.safetensors 1.2 GiB/4.6 GiB · file 1/4 · 1.2 GiB/16.1 GiB (7%) · 410.0 MiB/s`
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pct = (self.done * 100).checked_div(self.total).unwrap_or(100);
        write!(
            f,
            "{} {} {}/{} · file {}/{} · {}/{} ({pct}%) · {}/s",
            self.repo,
            self.file,
            human_bytes(self.file_done),
            human_bytes(self.file_total),
            self.file_no,
            self.files,
            human_bytes(self.done),
            human_bytes(self.total),
            human_bytes(self.bytes_per_s),
        )
    }
}

pub(crate) use crate::disk::human_bytes;

/// Bytes per second since `start`.
pub(crate) fn rate(bytes: u64, start: Instant) -> u64 {
    let s = start.elapsed().as_secs_f64();
    if s <= 0.0 {
        0
    } else {
        (bytes as f64 / s) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_sizes() {
        assert_eq!(human_bytes(12), "12 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(16 << 30), "16.0 GiB");
    }

    #[test]
    fn line_for_a_tui() {
        let p = Progress {
            repo: "org/m".into(),
            file: "model-00001-of-00004.safetensors".into(),
            file_done: 1 << 30,
            file_total: 4 << 30,
            done: 1 << 30,
            total: 16 << 30,
            file_no: 1,
            files: 4,
            bytes_per_s: 400 << 20,
        };
        assert_eq!(
            p.to_string(),
            "org/m model-00001-of-00004.safetensors 1.0 GiB/4.0 GiB · file 1/4 · 1.0 GiB/16.0 GiB (6%) · 400.0 MiB/s"
        );
    }
}
