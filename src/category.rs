//! Failure categories and policy actions: the stable names of the `diagnose` contract
//! (design.md §3). Everything that stores, prints or matches on a failure uses these.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

macro_rules! named_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { f.write_str(self.as_str()) }
        }

        impl FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($text => Ok($name::$variant),)+
                    _ => Err(format!(
                        "unknown {} `{}` (expected one of: {})",
                        stringify!($name).to_lowercase(),
                        s,
                        [$($text),+].join(", ")
                    )),
                }
            }
        }
    };
}

named_enum!(
    /// Why a run failed. Specific root causes are preferred over generic symptoms.
    Category {
        VersionPortBug => "version_port_bug",
        Aimv2Conflict => "aimv2_conflict",
        NumpyAbi => "numpy_abi",
        LogitsWarperImport => "logits_warper_import",
        PyairportsMissing => "pyairports_missing",
        FaUtilsMissing => "fa_utils_missing",
        CudaOom => "cuda_oom",
        CudaGraphCaptureTimeout => "cuda_graph_capture_timeout",
        ServerStartTimeout => "server_start_timeout",
        BrokenPipe => "broken_pipe",
        DiskFull => "disk_full",
        NvidiaRuntimeMissing => "nvidia_runtime_missing",
        ModelArchUnsupported => "model_arch_unsupported",
        RopeScalingIncompatible => "rope_scaling_incompatible",
        KvCacheTooSmall => "kv_cache_too_small",
        NcclError => "nccl_error",
        EngineCoreInitFailed => "engine_core_init_failed",
        GatedModelAuth => "gated_model_auth",
        ImageNotFound => "image_not_found",
        AgentPatchFailed => "agent_patch_failed",
        NoMetrics => "no_metrics",
        BenchTimeout => "bench_timeout",
        BenchCommandInvalid => "bench_command_invalid",
        RegistryAuth => "registry_auth",
        RegistryRateLimited => "registry_rate_limited",
        NeedsBuild => "needs_build",
        ModelNotFound => "model_not_found",
        ModelTooLarge => "model_too_large",
        HubOffline => "hub_offline",
        ServerConfigInvalid => "server_config_invalid",
        Other => "other",
    }
);

named_enum!(
    /// What happens after a failure (the policy's answer for a category).
    Action {
        AutoFix => "auto_fix",
        Operator => "operator",
        Retry => "retry",
        Skip => "skip",
        PauseSweep => "pause_sweep",
    }
);

/// How the reason of a run skipped because its model is gated begins.
pub const NOT_RUN_GATED: &str = "not run (gated_model_auth): ";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_text_and_serde() {
        for c in Category::ALL {
            assert_eq!(c.as_str().parse::<Category>().unwrap(), *c);
            let json = serde_json::to_string(c).unwrap();
            assert_eq!(json, format!("\"{}\"", c.as_str()));
        }
        assert_eq!(Category::ALL.len(), 31);
        assert!("nope"
            .parse::<Category>()
            .unwrap_err()
            .contains("version_port_bug"));
    }
}
