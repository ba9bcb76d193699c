//! Will the model fit? Checked before a byte is downloaded: weights larger than the GPUs
//! can hold fail the server minutes later with an OOM, and a cache disk that fills up
//! half-way through a 60 GB download fails every run after it.

use super::progress::human_bytes;
use std::path::Path;

/// Free space kept on the cache disk beyond what the download needs: logs, Docker and the
/// other runs share that disk.
pub const DISK_MARGIN_BYTES: u64 = 2 << 30;

/// What the run has to hold the model: GPU memory per GPU (`None`: unknown, e.g. no NVML
/// on this machine, not checked), tensor-parallel size, and free space on the cache disk
/// (`None`: measure it with [`free_disk_bytes`] on the Hub's cache directory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub gpu_mem_per_gpu: Option<u64>,
    pub tp: u32,
    pub free_disk: Option<u64>,
}

impl Budget {
    /// No GPU check, disk measured at fetch time.
    pub fn disk_only() -> Budget {
        Budget {
            gpu_mem_per_gpu: None,
            tp: 1,
            free_disk: None,
        }
    }
}

/// Why a model cannot be prepared. Messages say what was compared and what to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FitProblem {
    /// The weights alone exceed GPU memory × TP.
    GpuMemory { weights: u64, per_gpu: u64, tp: u32 },
    /// Not enough free space on the HF cache disk for what is left to download.
    Disk { need: u64, margin: u64, free: u64 },
}

impl std::fmt::Display for FitProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            FitProblem::GpuMemory {
                weights,
                per_gpu,
                tp,
            } => write!(
                f,
                "model weights ({}) are larger than GPU memory × TP ({} × {tp} = {}): \
                 raise --tensor-parallel-size or use GPUs with more memory",
                human_bytes(weights),
                human_bytes(per_gpu),
                human_bytes(per_gpu.saturating_mul(u64::from(tp))),
            ),
            // "There is not enough space on the disk" is a phrase the diagnoser files under
            // disk_full.
            FitProblem::Disk { need, margin, free } => write!(
                f,
                "There is not enough space on the disk of the HF cache: {} left to download \
                 + {} margin, {} free; free some space or point hf_cache at a bigger disk",
                human_bytes(need),
                human_bytes(margin),
                human_bytes(free),
            ),
        }
    }
}

impl std::error::Error for FitProblem {}

/// Pure check. `weights_bytes` is the size of the selected files (weights dominate; the
/// configs and tokenizer are megabytes); `already_cached_bytes` of them are in the cache
/// and need no space. `None` for GPU memory or free disk means unknown: not checked.
pub(crate) fn check_fits(
    weights_bytes: u64,
    gpu_mem_bytes_per_gpu: Option<u64>,
    tp: u32,
    free_disk_bytes: Option<u64>,
    already_cached_bytes: u64,
) -> Result<(), FitProblem> {
    if let Some(per_gpu) = gpu_mem_bytes_per_gpu.filter(|m| *m > 0) {
        let tp = tp.max(1);
        if weights_bytes > per_gpu.saturating_mul(u64::from(tp)) {
            return Err(FitProblem::GpuMemory {
                weights: weights_bytes,
                per_gpu,
                tp,
            });
        }
    }
    let need = weights_bytes.saturating_sub(already_cached_bytes);
    if let Some(free) = free_disk_bytes {
        if need > 0 && need.saturating_add(DISK_MARGIN_BYTES) > free {
            return Err(FitProblem::Disk {
                need,
                margin: DISK_MARGIN_BYTES,
                free,
            });
        }
    }
    Ok(())
}

/// Bytes available to an unprivileged writer on the filesystem that holds `path` (or its
/// nearest existing ancestor: the cache directory may not exist yet). `None` when it
/// cannot be measured.
pub(crate) fn free_disk_bytes(path: &Path) -> Option<u64> {
    crate::disk::free_bytes(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn fits_when_gpus_and_disk_have_room() {
        assert_eq!(
            check_fits(16 * GIB, Some(80 * GIB), 1, Some(100 * GIB), 0),
            Ok(())
        );
        // Unknowns are not checked.
        assert_eq!(check_fits(500 * GIB, None, 1, None, 0), Ok(()));
    }

    #[test]
    fn weights_over_gpu_memory_times_tp() {
        let err = check_fits(140 * GIB, Some(80 * GIB), 1, Some(1000 * GIB), 0).unwrap_err();
        assert_eq!(
            err,
            FitProblem::GpuMemory {
                weights: 140 * GIB,
                per_gpu: 80 * GIB,
                tp: 1
            }
        );
        let msg = err.to_string();
        assert!(msg.contains("140.0 GiB"), "{msg}");
        assert!(msg.contains("80.0 GiB × 1 = 80.0 GiB"), "{msg}");
        assert!(msg.contains("--tensor-parallel-size"), "{msg}");
        // TP 2 holds it.
        assert_eq!(
            check_fits(140 * GIB, Some(80 * GIB), 2, Some(1000 * GIB), 0),
            Ok(())
        );
        // TP 0 is read as 1, not as "no GPUs".
        assert!(check_fits(90 * GIB, Some(80 * GIB), 0, None, 0).is_err());
    }

    #[test]
    fn disk_needs_what_is_left_plus_margin() {
        // 30 GiB left to download, 31 GiB free: the 2 GiB margin is not there.
        let err = check_fits(40 * GIB, None, 1, Some(31 * GIB), 10 * GIB).unwrap_err();
        assert_eq!(
            err,
            FitProblem::Disk {
                need: 30 * GIB,
                margin: DISK_MARGIN_BYTES,
                free: 31 * GIB
            }
        );
        let msg = err.to_string();
        assert!(
            msg.starts_with("There is not enough space on the disk"),
            "{msg}"
        );
        assert!(msg.contains("30.0 GiB left to download"), "{msg}");
        assert_eq!(
            check_fits(40 * GIB, None, 1, Some(32 * GIB), 10 * GIB),
            Ok(())
        );
    }

    #[test]
    fn fully_cached_model_needs_no_disk() {
        assert_eq!(check_fits(40 * GIB, None, 1, Some(0), 40 * GIB), Ok(()));
    }

    #[test]
    fn gpu_problem_is_reported_before_disk_problem() {
        let err = check_fits(200 * GIB, Some(80 * GIB), 1, Some(GIB), 0).unwrap_err();
        assert!(matches!(err, FitProblem::GpuMemory { .. }));
    }

    #[test]
    fn free_disk_of_a_path_that_does_not_exist_yet() {
        let dir = std::env::temp_dir().join("nightshift-no-such-dir/a/b");
        assert!(free_disk_bytes(&dir).is_some_and(|b| b > 0));
    }
}
