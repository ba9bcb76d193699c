//! GPU configuration `TYPE[:COUNT]` (e.g. `H100:4`).

use serde::Serialize;
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuConfig {
    pub gpu_type: String,
    pub count: u32,
}

impl fmt::Display for GpuConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.gpu_type, self.count)
    }
}

impl GpuConfig {
    pub fn parse(text: &str) -> Result<GpuConfig, String> {
        let text = text.trim();
        let (ty, count) = match text.split_once(':') {
            Some((ty, n)) => {
                let count: u32 = n.trim().parse().map_err(|_| {
                    format!("GPU count `{n}` is not a whole number (expected TYPE[:COUNT], e.g. H100:4)")
                })?;
                (ty.trim(), count)
            }
            None => (text, 1),
        };
        if ty.is_empty()
            || !ty
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(format!(
                "GPU type `{ty}` is not a GPU name (expected TYPE[:COUNT], e.g. H100 or H100:4)"
            ));
        }
        if count == 0 || count > super::limits::MAX_GPUS {
            return Err(format!(
                "GPU count {count} is out of range (expected 1..={})",
                super::limits::MAX_GPUS
            ));
        }
        Ok(GpuConfig {
            gpu_type: ty.to_string(),
            count,
        })
    }

    /// The GPU count implied by parallelism when a commit has no gpu_config: TP × PP
    /// rounded up to 1, 2, 4 or 8 (the shapes these boxes come in).
    pub(crate) fn count_for_parallelism(tp: u32, pp: u32) -> u32 {
        let need = tp.max(1).saturating_mul(pp.max(1));
        [1, 2, 4, 8]
            .into_iter()
            .find(|n| *n >= need)
            .unwrap_or(need)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_type_and_count() {
        assert_eq!(GpuConfig::parse("H100:4").unwrap().count, 4);
        assert_eq!(GpuConfig::parse("H100").unwrap().count, 1);
        assert_eq!(
            GpuConfig::parse("A100-80GB:2").unwrap().gpu_type,
            "A100-80GB"
        );
        assert!(GpuConfig::parse("H100:x").is_err());
        assert!(GpuConfig::parse("H100:0").is_err());
        assert!(GpuConfig::parse(":2").is_err());
        assert!(GpuConfig::parse("unknown gpu").is_err());
    }

    #[test]
    fn derived_counts_round_up_to_box_shapes() {
        assert_eq!(GpuConfig::count_for_parallelism(1, 1), 1);
        assert_eq!(GpuConfig::count_for_parallelism(3, 1), 4);
        assert_eq!(GpuConfig::count_for_parallelism(2, 3), 8);
        assert_eq!(GpuConfig::count_for_parallelism(16, 1), 16);
    }
}
