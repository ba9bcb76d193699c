//! Which files of a model repo vLLM reads: weights in one format, configs, tokenizer files
//! and remote code. Everything else (GGUF quantizations, `original/` checkpoints, images,
//! READMEs) stays on the Hub.

/// A repo file vLLM needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selected {
    pub path: String,
    /// Part of the checkpoint (counted against GPU memory).
    pub weights: bool,
}

/// Files vLLM's loader skips even when they match the weight pattern.
const NOT_FOR_INFERENCE: &[&str] = &[
    "training_args.bin",
    "optimizer.bin",
    "optimizer.pt",
    "scheduler.pt",
    "scaler.pt",
];

/// Weight formats in vLLM's order of preference (`--load-format auto`).
const WEIGHT_EXTS: &[&str] = &[".safetensors", ".bin", ".pt"];

/// The files to fetch from a repo listing. Only top-level files: subfolders hold other
/// checkpoints (`original/`, `onnx/`, `gguf/`) that vLLM does not read. Weights come in
/// one format: safetensors when there are any, else `.bin`, else `.pt`.
/// `index_weights`, when given (the `weight_map` of `model.safetensors.index.json`),
/// keeps only the safetensors files the index names, as vLLM does: repos that ship both a
/// consolidated and a sharded checkpoint would otherwise be fetched twice.
pub(crate) fn select_files(paths: &[&str], index_weights: Option<&[String]>) -> Vec<Selected> {
    let top: Vec<&str> = paths.iter().copied().filter(|p| !p.contains('/')).collect();
    let format = WEIGHT_EXTS
        .iter()
        .find(|ext| top.iter().any(|p| is_weight(p, ext)))
        .copied();
    let mut out = Vec::new();
    for p in top {
        let weights = format.is_some_and(|ext| is_weight(p, ext));
        if weights {
            if let Some(keep) = index_weights.filter(|k| !k.is_empty()) {
                if p.ends_with(".safetensors") && !keep.iter().any(|k| k == p) {
                    continue;
                }
            }
            out.push(Selected {
                path: p.to_string(),
                weights: true,
            });
        } else if is_support_file(p) {
            out.push(Selected {
                path: p.to_string(),
                weights: false,
            });
        }
    }
    out
}

fn is_weight(path: &str, ext: &str) -> bool {
    path.ends_with(ext) && !NOT_FOR_INFERENCE.contains(&path)
}

/// Configs, tokenizers, chat templates and remote code (`--trust-remote-code` models
/// import their `*.py` from the snapshot, which must be there when the server is offline).
fn is_support_file(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    if lower.starts_with("readme") || lower.starts_with('.') {
        return false;
    }
    [".json", ".model", ".tiktoken", ".txt", ".py", ".jinja"]
        .iter()
        .any(|ext| lower.ends_with(ext))
}

/// True when `--model` names a Hub repo (`gpt2`, `org/name`) rather than a local path.
pub(crate) fn is_hub_id(model: &str) -> bool {
    let m = model.trim();
    if m.is_empty() || m.starts_with(['/', '.', '~']) || m.contains('\\') {
        return false;
    }
    let parts: Vec<&str> = m.split('/').collect();
    parts.len() <= 2
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        })
        && !m.contains("..")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(sel: &[Selected]) -> Vec<&str> {
        sel.iter().map(|s| s.path.as_str()).collect()
    }

    #[test]
    fn safetensors_repo_keeps_weights_configs_and_tokenizer() {
        let repo = [
            ".gitattributes",
            "README.md",
            "LICENSE",
            "config.json",
            "generation_config.json",
            "model-00001-of-00002.safetensors",
            "model-00002-of-00002.safetensors",
            "model.safetensors.index.json",
            "pytorch_model.bin",
            "tokenizer.json",
            "tokenizer_config.json",
            "tokenizer.model",
            "special_tokens_map.json",
            "original/consolidated.00.pth",
            "original/params.json",
            "model-Q4_K_M.gguf",
            "assets/banner.png",
            "chat_template.jinja",
        ];
        let sel = select_files(&repo, None);
        assert_eq!(
            names(&sel),
            [
                "config.json",
                "generation_config.json",
                "model-00001-of-00002.safetensors",
                "model-00002-of-00002.safetensors",
                "model.safetensors.index.json",
                "tokenizer.json",
                "tokenizer_config.json",
                "tokenizer.model",
                "special_tokens_map.json",
                "chat_template.jinja",
            ]
        );
        assert_eq!(sel.iter().filter(|s| s.weights).count(), 2);
    }

    #[test]
    fn bin_only_repo_takes_bin_and_skips_training_state() {
        let repo = [
            "config.json",
            "pytorch_model.bin",
            "training_args.bin",
            "merges.txt",
            "vocab.json",
            "configuration_x.py",
            "flax_model.msgpack",
        ];
        let sel = select_files(&repo, None);
        assert_eq!(
            names(&sel),
            [
                "config.json",
                "pytorch_model.bin",
                "merges.txt",
                "vocab.json",
                "configuration_x.py"
            ]
        );
    }

    #[test]
    fn index_drops_the_duplicate_consolidated_checkpoint() {
        let repo = [
            "consolidated.safetensors",
            "model-00001-of-00002.safetensors",
            "model-00002-of-00002.safetensors",
            "model.safetensors.index.json",
        ];
        let index = vec![
            "model-00001-of-00002.safetensors".to_string(),
            "model-00002-of-00002.safetensors".to_string(),
        ];
        let sel = select_files(&repo, Some(&index));
        assert_eq!(
            names(&sel),
            [
                "model-00001-of-00002.safetensors",
                "model-00002-of-00002.safetensors",
                "model.safetensors.index.json",
            ]
        );
    }

    #[test]
    fn hub_ids_and_local_paths() {
        for id in ["gpt2", "facebook/opt-125m", "Qwen/Qwen2.5-7B-Instruct"] {
            assert!(is_hub_id(id), "{id}");
        }
        for p in [
            "/models/llama",
            "./m",
            "~/m",
            "a/b/c",
            "",
            "[ngram]",
            "x/../y",
        ] {
            assert!(!is_hub_id(p), "{p}");
        }
    }
}
