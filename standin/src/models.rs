//! The model as a real vLLM would meet it, when the mounted HF cache carries a stand-in
//! catalog (`<hub>/.standin-catalog.json`, written by the rehearsal): a model absent from
//! the cache fails as an offline vLLM does; an architecture this era's registry lacks, a
//! Llama 3.1 `rope_scaling` on vLLM before 0.5.3.post1, and weights larger than the GPU
//! memory the server was given fail with vLLM's own words. Without a catalog nothing is
//! checked (the Docker tests use no cache).
//!
//! Catalog: `{"gpu_gib": 79.19, "architectures": {"Qwen3ForCausalLM": "0.8.5", ...}}`:
//! the memory of one GPU, and the first release whose registry has each architecture
//! (architectures not listed are known to every era).

use crate::eras::Ver;
use crate::json::{self, Json};
use crate::pyenv::Env;
use std::path::{Path, PathBuf};

fn hub_dir() -> PathBuf {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("HF_HUB_CACHE")
        .or_else(|| var("HF_HOME").map(|h| h.join("hub")))
        .unwrap_or_else(|| PathBuf::from("/root/.cache/huggingface/hub"))
}

fn read_json(p: &Path) -> Option<Json> {
    json::parse(&std::fs::read_to_string(p).ok()?).ok()
}

fn snapshot(hub: &Path, model: &str) -> Option<PathBuf> {
    let repo = hub.join(format!("models--{}", model.replace('/', "--")));
    let rev = std::fs::read_to_string(repo.join("refs/main")).ok()?;
    Some(repo.join("snapshots").join(rev.trim())).filter(|p| p.is_dir())
}

/// What the engine is given: the model, its parallelism and memory share.
pub struct Ask<'a> {
    pub model: &'a str,
    pub tp: u32,
    pub gpu_util: f64,
    /// `--quantization` when the command quantises at load.
    pub quantization: Option<String>,
}

/// `Err(lines)`: the traceback a real vLLM prints, last line the exception.
pub fn check(e: &Env, a: &Ask) -> Result<(), Vec<String>> {
    let hub = hub_dir();
    let Some(catalog) = read_json(&hub.join(".standin-catalog.json")) else {
        return Ok(());
    };
    let pkg = e.pkg_str();
    let Some(snap) = snapshot(&hub, a.model) else {
        return Err(vec![
            format!("  File \"{pkg}/transformers_utils/config.py\", line 245, in get_config"),
            "    config_dict, _ = PretrainedConfig.get_config_dict(".into(),
            format!("OSError: We couldn't connect to 'https://huggingface.co' to load this file, couldn't find it in the cached files and it looks like {} is not the path to a directory containing a file named config.json.", a.model),
        ]);
    };
    let cfg = read_json(&snap.join("config.json")).unwrap_or(Json::Null);
    let arch = cfg
        .get("architectures")
        .and_then(|x| x.idx(0))
        .and_then(Json::as_str)
        .unwrap_or("")
        .to_string();
    let first = catalog
        .get("architectures")
        .and_then(|m| m.get(&arch))
        .and_then(Json::as_str);
    if let Some(first) = first {
        if e.ver < Ver::parse(first) {
            return Err(vec![
                format!("  File \"{pkg}/model_executor/model_loader/utils.py\", line 36, in get_model_architecture"),
                "    model_cls = ModelRegistry.load_model_cls(arch)".into(),
                format!("ValueError: Model architectures ['{arch}'] are not supported for now. Supported architectures: ['LlamaForCausalLM', 'MistralForCausalLM', 'Qwen2ForCausalLM', 'OPTForCausalLM', 'GemmaForCausalLM']"),
            ]);
        }
    }
    let rope = cfg.get("rope_scaling");
    let llama3 = rope
        .and_then(|r| r.get("rope_type").or_else(|| r.get("type")))
        .and_then(Json::as_str)
        == Some("llama3");
    // 0.5.3.post1 is the first release that reads `rope_type: llama3`.
    let before_post1 =
        e.ver < Ver::new(0, 5, 3) || (e.ver == Ver::new(0, 5, 3) && !e.era.contains("post"));
    if llama3 && before_post1 {
        return Err(vec![
            format!(
                "  File \"{pkg}/model_executor/layers/rotary_embedding.py\", line 754, in get_rope"
            ),
            "    scaling_type = rope_scaling[\"type\"]".into(),
            "KeyError: 'type'".into(),
        ]);
    }
    let mut weights = read_json(&snap.join("model.safetensors.index.json"))
        .and_then(|i| i.get("metadata")?.get("total_size")?.as_f64())
        .unwrap_or(0.0);
    // A 16-bit checkpoint quantised to 8 bits at load takes half.
    let eight_bit = matches!(
        a.quantization.as_deref(),
        Some("fp8" | "fbgemm_fp8" | "int8" | "bitsandbytes")
    );
    if eight_bit && cfg.get("quantization_config").is_none() {
        weights /= 2.0;
    }
    let gib = catalog
        .get("gpu_gib")
        .and_then(Json::as_f64)
        .unwrap_or(79.19);
    let per_gpu = weights / f64::from(a.tp.max(1)) / (1u64 << 30) as f64;
    if per_gpu > gib * a.gpu_util {
        return Err(vec![
            format!("  File \"{pkg}/model_executor/model_loader/loader.py\", line 398, in load_model"),
            "    model = _initialize_model(vllm_config=vllm_config)".into(),
            format!("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB. GPU 0 has a total capacity of {gib:.2} GiB of which 0.31 GiB is free. Process 1 has {:.2} GiB memory in use. Of the allocated memory {:.2} GiB is allocated by PyTorch.", gib - 0.31, gib - 0.9),
        ]);
    }
    Ok(())
}
