//! What the edges found out, as plain data: the judge reads only this and the plan.
//! Every fact is either known (with where it came from) or unknown with the reason it could
//! not be learned, so the judge can list it as unchecked instead of passing it.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A fact that may not have been learnable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Known<T> {
    Yes(T),
    /// Why it is not known (e.g. "no vLLM clone", "--offline").
    Unknown(String),
}

impl<T> Known<T> {
    pub fn get(&self) -> Option<&T> {
        match self {
            Known::Yes(t) => Some(t),
            Known::Unknown(_) => None,
        }
    }
}

/// The vLLM release a tree is at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Era {
    /// A version the era tables and the known incompatibilities compare with (`0.4.2`).
    pub version: String,
    /// Where it came from, for the evidence (`git describe: v0.4.2-35-g…`).
    pub source: String,
}

/// What the Hub and the HF cache tell about a model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelFacts {
    /// `Some(false)`: the Hub answered 404 / RepoNotFound. `None`: not asked.
    pub exists: Option<bool>,
    /// The repo is gated, and whether the token can read it (`None`: not asked).
    pub gated: Option<bool>,
    pub access: Option<bool>,
    /// `config.json`, when the cache or the Hub had it.
    pub config: Option<serde_json::Value>,
    /// Bytes of the checkpoint's weights (safetensors index `metadata.total_size`, else the
    /// weight files' sizes).
    pub weights_bytes: Option<u64>,
    /// Where the facts came from (`hf cache`, `hub`).
    pub source: String,
    /// Why something could not be learned (`--offline and not in the HF cache`).
    pub unchecked: Vec<String>,
    /// Set when the repo's file list shows nothing vLLM can load: no `config.json` and no
    /// weight file at the top level (a NeMo checkpoint, a dataset-like repo). The evidence.
    #[serde(default)]
    pub unloadable: Option<String>,
}

impl ModelFacts {
    /// `config.json`'s `architectures`.
    pub fn architectures(&self) -> Vec<String> {
        self.config
            .as_ref()
            .and_then(|c| c.get("architectures"))
            .and_then(|a| a.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Where an image is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ImageState {
    /// In the local Docker engine (its id: what an earlier night learned of it is kept by id).
    Local {
        size: Option<u64>,
        #[serde(default)]
        id: Option<String>,
    },
    /// In its registry (manifest answered).
    Registry { digest: String, size: u64 },
    /// The registry says it is not there.
    Missing { detail: String },
    /// The registry refused the credentials (or wants some).
    Denied { detail: String },
    /// Neither the engine nor the registry could be asked.
    Unknown(String),
}

/// An agent's patch on this box.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum PatchState {
    Missing {
        path: String,
    },
    /// `git apply --check` against the parent failed.
    DoesNotApply {
        path: String,
        error: String,
    },
    /// Applies (or could not be checked: `checked = false`, with why).
    Present {
        path: String,
        checked: Known<()>,
        /// Files it touches that need a build (csrc/, setup.py, …).
        needs_build: Vec<String>,
        /// Files outside `vllm/` it touches: applied where the image has vLLM's source
        /// tree, dropped (and recorded) where it has only the installed package.
        #[serde(default)]
        outside_package: Vec<String>,
    },
}

/// What a variant's own tree defines as options (read from its argparse source at its
/// revision): `None` where the tree did not tell (a file missing, a shim, no literal
/// definitions).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceFlags {
    pub client: Option<crate::rewrite::flags::FlagSet>,
    pub server: Option<crate::rewrite::flags::FlagSet>,
    /// The revision read and the files that told.
    pub rev: String,
    pub files: Vec<String>,
}

/// A dataset a command reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DatasetFacts {
    /// The name in the plan's `[datasets]` or the Hub id.
    pub name: String,
    pub present: bool,
    /// How to get it ahead (`nightshift prefetch`), when it can be.
    pub fetchable: bool,
    pub detail: String,
}

/// One commit's facts. Keys of the maps are variant names.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CommitFacts {
    pub eras: BTreeMap<String, Known<Era>>,
    /// Whether the variant's tree defines the model's architecture (`None`: not asked).
    pub arch_in_tree: BTreeMap<String, Known<bool>>,
    pub images: BTreeMap<String, ImageState>,
    pub patches: BTreeMap<String, PatchState>,
    pub datasets: Vec<DatasetFacts>,
    /// Per variant: what its image's client and server said of their flags on an earlier
    /// night (nightshift asks each image at its first run and keeps the answer by id).
    #[serde(default)]
    pub learned: BTreeMap<String, crate::runtime::docker::memo::Learned>,
    /// Per variant: the options its tree defines at its revision.
    #[serde(default)]
    pub source_flags: BTreeMap<String, SourceFlags>,
    /// Per variant, per `flag_rule` the command meets: whether its tree has the failing code.
    #[serde(default)]
    pub rule_evidence: BTreeMap<String, BTreeMap<String, Known<bool>>>,
}

/// The box the night runs on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BoxFacts {
    /// GPUs available (NVML, `--gpus`), or why unknown.
    pub gpus: Known<u32>,
    /// Memory of one GPU in bytes, and where that came from (NVML or the plan's gpu_type).
    pub gpu_mem: Known<(u64, String)>,
    /// Free bytes where the HF cache lives.
    pub cache_free: Option<u64>,
}

/// Everything gathered for a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Facts {
    /// Per commit, in plan order.
    pub commits: Vec<CommitFacts>,
    /// Per model id.
    pub models: BTreeMap<String, ModelFacts>,
    pub host: BoxFacts,
    /// What could not be reached at all (shown once in the summary).
    pub not_reached: Vec<String>,
}
