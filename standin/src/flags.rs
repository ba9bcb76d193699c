//! Engine, server and offline-script flags by version.
//!
//! Source: shared/spec/real-images.md §2 (the engine flags the seeds use and the lifetimes in
//! §5 "Engine-flag lifetimes": `--speculative-model` ≤ v0.8.2 then `--speculative-config`,
//! `--num-scheduler-steps` ≤ v0.10.0, `--use-v2-block-manager` in older eras) and §5 for the
//! throughput/latency/prefix-caching scripts (own flags + common engine flags up to v0.6.3,
//! own + every engine flag from v0.6.4). Other first/last versions below are approximate
//! (marked `~`); help texts are the stand-in's own wording.

use crate::argparse::{Arg, Kind, Ty, Val};
use crate::eras::Ver;

const V_MAX: Ver = Ver::new(99, 0, 0);

struct F {
    names: &'static [&'static str],
    kind: Kind,
    ty: Ty,
    default: fn() -> Val,
    lo: Ver,
    hi: Ver,
    help: &'static str,
}

fn none() -> Val {
    Val::None
}
fn no() -> Val {
    Val::Bool(false)
}
fn auto() -> Val {
    Val::Str("auto".into())
}
fn one() -> Val {
    Val::Int(1)
}
fn zero() -> Val {
    Val::Int(0)
}

macro_rules! f {
    ($names:expr, $kind:ident, $ty:ident, $def:expr, $lo:expr, $hi:expr, $help:expr) => {
        F {
            names: $names,
            kind: Kind::$kind,
            ty: Ty::$ty,
            default: $def,
            lo: $lo,
            hi: $hi,
            help: $help,
        }
    };
}

const fn v(a: u32, b: u32, c: u32) -> Ver {
    Ver::new(a, b, c)
}

/// EngineArgs (+ AsyncEngineArgs) flags: the list in spec §2 plus the other commonly used ones.
fn engine_table() -> Vec<F> {
    vec![
        f!(&["--model"], Store, Str, || Val::Str("facebook/opt-125m".into()), v(0, 1, 0), V_MAX, "Name or path of the huggingface model to use."),
        f!(&["--tokenizer"], Store, Str, none, v(0, 1, 0), V_MAX, "Name or path of the huggingface tokenizer to use. If unspecified, model name or path will be used."),
        f!(&["--revision"], Store, Str, none, v(0, 1, 0), V_MAX, "The specific model version to use (branch name, tag name or commit id)."),
        f!(&["--tokenizer-revision"], Store, Str, none, v(0, 2, 0), V_MAX, "Revision of the huggingface tokenizer to use."),
        f!(&["--tokenizer-mode"], Store, Str, auto, v(0, 1, 0), V_MAX, "The tokenizer mode: auto uses the fast tokenizer if available, slow always uses the slow tokenizer."),
        f!(&["--trust-remote-code"], True, Str, no, v(0, 1, 0), V_MAX, "Trust remote code from huggingface."),
        f!(&["--download-dir"], Store, Str, none, v(0, 1, 0), V_MAX, "Directory to download and load the weights, default to the default cache dir of huggingface."),
        f!(&["--load-format"], Store, Str, auto, v(0, 1, 0), V_MAX, "The format of the model weights to load."),
        f!(&["--dtype"], Store, Str, auto, v(0, 1, 0), V_MAX, "Data type for model weights and activations: auto, half, float16, bfloat16, float, float32."),
        f!(&["--kv-cache-dtype"], Store, Str, auto, v(0, 3, 0), V_MAX, "Data type for kv cache storage. If \"auto\", will use model data type."),
        f!(&["--max-model-len"], Store, Int, none, v(0, 2, 0), V_MAX, "Model context length. If unspecified, will be automatically derived from the model config."),
        f!(&["--guided-decoding-backend"], Store, Str, none, v(0, 4, 2), v(0, 10, 2), "Which engine will be used for guided decoding (JSON schema / regex etc) by default."), // ~
        f!(&["--distributed-executor-backend"], Store, Str, none, v(0, 4, 3), V_MAX, "Backend to use for distributed model workers, either \"ray\" or \"mp\"."), // ~
        f!(&["--worker-use-ray"], True, Str, no, v(0, 1, 0), v(0, 6, 6), "Deprecated, use --distributed-executor-backend=ray."), // ~
        f!(&["--pipeline-parallel-size", "-pp"], Store, Int, one, v(0, 1, 0), V_MAX, "Number of pipeline stages."),
        f!(&["--tensor-parallel-size", "-tp"], Store, Int, one, v(0, 1, 0), V_MAX, "Number of tensor parallel replicas."),
        f!(&["--data-parallel-size", "-dp"], Store, Int, one, v(0, 8, 0), V_MAX, "Number of data parallel replicas."), // ~
        f!(&["--enable-expert-parallel"], True, Str, no, v(0, 8, 2), V_MAX, "Use expert parallelism instead of tensor parallelism for MoE layers."), // ~
        f!(&["--max-parallel-loading-workers"], Store, Int, none, v(0, 2, 0), V_MAX, "Load model sequentially in multiple batches, to avoid RAM OOM when using tensor parallel and large models."),
        f!(&["--block-size"], Store, Int, none, v(0, 1, 0), V_MAX, "Token block size for contiguous chunks of tokens."),
        f!(&["--enable-prefix-caching"], True, Str, no, v(0, 3, 0), v(0, 7, 3), "Enables automatic prefix caching."), // ~ first
        f!(&["--enable-prefix-caching"], BoolOpt, Str, none, v(0, 8, 0), V_MAX, "Whether to enable prefix caching (on by default with V1)."), // ~
        f!(&["--disable-sliding-window"], True, Str, no, v(0, 4, 0), V_MAX, "Disables sliding window, capping to sliding window size."),
        f!(&["--use-v2-block-manager"], True, Str, no, v(0, 4, 0), v(0, 6, 6), "Use BlockSpaceMangerV2 (deprecated: it is the default)."), // ~
        f!(&["--num-lookahead-slots"], Store, Int, zero, v(0, 4, 0), v(0, 10, 1), "Experimental scheduling config necessary for speculative decoding."), // ~
        f!(&["--seed"], Store, Int, zero, v(0, 1, 0), V_MAX, "Random seed for operations."),
        f!(&["--swap-space"], Store, Float, || Val::Float(4.0), v(0, 1, 0), V_MAX, "CPU swap space size (GiB) per GPU."),
        f!(&["--cpu-offload-gb"], Store, Float, || Val::Float(0.0), v(0, 5, 3), V_MAX, "The space in GiB to offload to CPU, per GPU."), // ~
        f!(&["--gpu-memory-utilization"], Store, Float, || Val::Float(0.9), v(0, 1, 0), V_MAX, "The fraction of GPU memory to be used for the model executor, which can range from 0 to 1."),
        f!(&["--num-gpu-blocks-override"], Store, Int, none, v(0, 3, 3), V_MAX, "If specified, ignore GPU profiling result and use this number of GPU blocks."), // ~
        f!(&["--max-num-batched-tokens"], Store, Int, none, v(0, 1, 0), V_MAX, "Maximum number of batched tokens per iteration."),
        f!(&["--max-num-partial-prefills"], Store, Int, one, v(0, 7, 3), V_MAX, "For chunked prefill, the max number of concurrent partial prefills."), // ~
        f!(&["--max-num-seqs"], Store, Int, none, v(0, 1, 0), V_MAX, "Maximum number of sequences per iteration."),
        f!(&["--max-logprobs"], Store, Int, || Val::Int(20), v(0, 4, 0), V_MAX, "Max number of log probs to return when logprobs is specified in SamplingParams."),
        f!(&["--disable-log-stats"], True, Str, no, v(0, 1, 0), V_MAX, "Disable logging statistics."),
        f!(&["--quantization", "-q"], Store, Str, none, v(0, 1, 0), V_MAX, "Method used to quantize the weights. If None, we first check the `quantization_config` attribute in the model config file."),
        f!(&["--rope-scaling"], Store, Str, none, v(0, 3, 0), V_MAX, "RoPE scaling configuration in JSON format."), // ~
        f!(&["--enforce-eager"], True, Str, no, v(0, 2, 4), V_MAX, "Always use eager-mode PyTorch. If False, will use eager mode and CUDA graph in hybrid for maximal performance and flexibility."), // ~
        f!(&["--max-context-len-to-capture"], Store, Int, none, v(0, 2, 5), v(0, 6, 6), "Maximum context length covered by CUDA graphs (deprecated)."), // ~
        f!(&["--max-seq-len-to-capture"], Store, Int, || Val::Int(8192), v(0, 4, 3), v(0, 10, 2), "Maximum sequence length covered by CUDA graphs."), // ~
        f!(&["--disable-custom-all-reduce"], True, Str, no, v(0, 2, 6), V_MAX, "See ParallelConfig."), // ~
        f!(&["--tokenizer-pool-size"], Store, Int, zero, v(0, 3, 3), v(0, 7, 3), "Size of tokenizer pool to use for asynchronous tokenization."), // ~
        f!(&["--enable-lora"], True, Str, no, v(0, 3, 0), V_MAX, "If True, enable handling of LoRA adapters."),
        f!(&["--max-loras"], Store, Int, one, v(0, 3, 0), V_MAX, "Max number of LoRAs in a single batch."),
        f!(&["--max-lora-rank"], Store, Int, || Val::Int(16), v(0, 3, 0), V_MAX, "Max LoRA rank."),
        f!(&["--device"], Store, Str, auto, v(0, 4, 0), v(0, 10, 2), "Device type for vLLM execution."), // ~
        f!(&["--num-scheduler-steps"], Store, Int, one, v(0, 5, 4), v(0, 10, 0), "Maximum number of forward steps per scheduler call."), // last: spec
        f!(&["--multi-step-stream-outputs"], OptBool, Str, || Val::Bool(true), v(0, 6, 2), v(0, 10, 0), "If False, then multi-step will stream outputs at the end of all steps."), // ~
        f!(&["--scheduler-delay-factor"], Store, Float, || Val::Float(0.0), v(0, 4, 0), V_MAX, "Apply a delay (of delay factor multiplied by previous prompt latency) before scheduling next prompt."),
        f!(&["--enable-chunked-prefill"], OptBool, Str, none, v(0, 4, 0), V_MAX, "If set, the prefill requests can be chunked based on the max_num_batched_tokens."),
        f!(&["--speculative-model"], Store, Str, none, v(0, 4, 1), v(0, 8, 2), "The name of the draft model to be used in speculative decoding."), // last: spec
        f!(&["--num-speculative-tokens"], Store, Int, none, v(0, 4, 1), v(0, 8, 2), "The number of speculative tokens to sample from the draft model."), // ~ last
        f!(&["--speculative-config"], Store, Str, none, v(0, 8, 3), V_MAX, "The configurations for speculative decoding, as a JSON string."),
        f!(&["--served-model-name"], Plus, Str, none, v(0, 2, 0), V_MAX, "The model name(s) used in the API. If not specified, the model name will be the same as the `--model` argument."),
        f!(&["--disable-async-output-proc"], True, Str, no, v(0, 6, 0), v(0, 10, 2), "Disable async output processing."), // ~
        f!(&["--compilation-config", "-O"], Store, Str, none, v(0, 6, 4), V_MAX, "torch.compile configuration for the model: an optimization level (0-3) or a JSON string."), // ~
        f!(&["--async-scheduling"], True, Str, no, v(0, 10, 1), V_MAX, "Use the asynchronous scheduler."), // ~
        f!(&["--disable-log-requests"], True, Str, no, v(0, 1, 0), V_MAX, "Disable logging requests."),
    ]
}

/// OpenAI API server flags (`api_server.py` / `vllm serve`), without the engine's.
fn server_table() -> Vec<F> {
    vec![
        f!(&["--host"], Store, Str, none, v(0, 1, 0), V_MAX, "Host name."),
        f!(&["--port"], Store, Int, || Val::Int(8000), v(0, 1, 0), V_MAX, "Port number."),
        f!(&["--uvicorn-log-level"], Store, Str, || Val::Str("info".into()), v(0, 2, 0), V_MAX, "Log level for uvicorn."),
        f!(&["--allow-credentials"], True, Str, no, v(0, 1, 0), V_MAX, "Allow credentials."),
        f!(&["--allowed-origins"], Store, Str, || Val::List(vec!["*".into()]), v(0, 1, 0), V_MAX, "Allowed origins."),
        f!(&["--allowed-methods"], Store, Str, || Val::List(vec!["*".into()]), v(0, 1, 0), V_MAX, "Allowed methods."),
        f!(&["--allowed-headers"], Store, Str, || Val::List(vec!["*".into()]), v(0, 1, 0), V_MAX, "Allowed headers."),
        f!(&["--api-key"], Store, Str, none, v(0, 3, 0), V_MAX, "If provided, the server will require this key to be presented in the header."),
        f!(&["--lora-modules"], Plus, Str, none, v(0, 3, 0), V_MAX, "LoRA module configurations in the format name=path."),
        f!(&["--chat-template"], Store, Str, none, v(0, 2, 0), V_MAX, "The file path to the chat template, or the template in single-line form for the specified model."),
        f!(&["--response-role"], Store, Str, || Val::Str("assistant".into()), v(0, 2, 0), V_MAX, "The role name to return if `request.add_generation_prompt=true`."),
        f!(&["--ssl-keyfile"], Store, Str, none, v(0, 2, 0), V_MAX, "The file path to the SSL key file."),
        f!(&["--ssl-certfile"], Store, Str, none, v(0, 2, 0), V_MAX, "The file path to the SSL cert file."),
        f!(&["--root-path"], Store, Str, none, v(0, 4, 0), V_MAX, "FastAPI root_path when app is behind a path based routing proxy."),
        f!(&["--middleware"], Plus, Str, none, v(0, 4, 0), V_MAX, "Additional ASGI middleware to apply to the app."),
        f!(&["--max-log-len"], Store, Int, none, v(0, 4, 1), V_MAX, "Max number of prompt characters or prompt ID numbers being printed in log."),
        f!(&["--return-tokens-as-token-ids"], True, Str, no, v(0, 5, 1), V_MAX, "Represent single tokens as strings of the form 'token_id:{token_id}'."),
        f!(&["--disable-frontend-multiprocessing"], True, Str, no, v(0, 5, 4), V_MAX, "Run the OpenAI frontend server in the same process as the model serving engine."), // ~
        f!(&["--enable-auto-tool-choice"], True, Str, no, v(0, 6, 0), V_MAX, "Enable auto tool choice for supported models."),
        f!(&["--tool-call-parser"], Store, Str, none, v(0, 6, 0), V_MAX, "Select the tool call parser depending on the model that you're using."),
        f!(&["--disable-fastapi-docs"], True, Str, no, v(0, 6, 4), V_MAX, "Disable FastAPI's OpenAPI schema, Swagger UI, and ReDoc endpoint."),
    ]
}

fn build(table: Vec<F>, ver: Ver) -> Vec<Arg> {
    table
        .into_iter()
        .filter(|f| ver.within(f.lo, f.hi))
        .map(|f| Arg::new(f.names, f.kind, f.ty, (f.default)(), f.help))
        .collect()
}

pub fn engine_args(ver: Ver, server: bool) -> Vec<Arg> {
    let mut e = build(engine_table(), ver);
    if !server {
        e.retain(|a| a.dest != "disable_log_requests");
    }
    e
}

/// `api_server.py` (server flags first, then the engine's, as vLLM's parser adds them).
pub fn server_args(ver: Ver) -> Vec<Arg> {
    let mut a = build(server_table(), ver);
    let eng = engine_args(ver, true);
    // `--served-model-name` is a server flag in old eras and an engine flag later: keep one.
    a.retain(|s| !eng.iter().any(|e| e.dest == s.dest));
    a.extend(eng);
    a
}

/// The common engine flags the offline scripts defined themselves up to v0.6.3 (spec §5).
const COMMON: &[&str] = &[
    "tensor_parallel_size",
    "quantization",
    "max_model_len",
    "dtype",
    "gpu_memory_utilization",
    "enforce_eager",
    "kv_cache_dtype",
    "enable_prefix_caching",
    "enable_chunked_prefill",
    "max_num_batched_tokens",
    "download_dir",
    "device",
    "distributed_executor_backend",
    "load_format",
    "num_scheduler_steps",
    "use_v2_block_manager",
    "block_size",
    "swap_space",
    "speculative_model",
    "num_speculative_tokens",
    "max_num_seqs",
    "pipeline_parallel_size",
];

fn s(x: &str) -> Val {
    Val::Str(x.into())
}
fn st(names: &[&str], ty: Ty, d: Val, h: &str) -> Arg {
    Arg::new(names, Kind::Store, ty, d, h)
}
fn tr(names: &[&str], h: &str) -> Arg {
    Arg::new(names, Kind::True, Ty::Str, Val::Bool(false), h)
}

/// Offline scripts: `kind` is throughput, latency or prefix_caching. `cli` = `vllm bench`.
pub fn offline_args(kind: &str, ver: Ver, cli: bool) -> Vec<Arg> {
    let all_engine = ver >= v(0, 6, 4) || cli;
    let mut own: Vec<Arg> = Vec::new();
    match kind {
        "throughput" => {
            own.push(
                st(&["--backend"], Ty::Str, s("vllm"), "").choices(if ver >= v(0, 8, 0) {
                    &["vllm", "hf", "mii", "vllm-chat"]
                } else {
                    &["vllm", "hf", "mii"]
                }),
            );
            if ver >= v(0, 8, 0) {
                own.push(
                    st(
                        &["--dataset-name"],
                        Ty::Str,
                        s("sharegpt"),
                        "Name of the dataset to benchmark on.",
                    )
                    .choices(&["sharegpt", "random", "sonnet", "burstgpt", "hf"]),
                );
                own.push(st(
                    &["--dataset-path"],
                    Ty::Str,
                    Val::None,
                    "Path to the dataset file or the huggingface dataset ID.",
                ));
            }
            own.push(st(&["--dataset"], Ty::Str, Val::None, "Path to the dataset. The dataset is expected to be a json in form of list[dict[..., conversations: list[dict[..., value: <prompt_or_response>]]]]"));
            own.push(st(
                &["--input-len"],
                Ty::Int,
                Val::None,
                "Input prompt length for each request",
            ));
            own.push(st(
                &["--output-len"],
                Ty::Int,
                Val::None,
                "Output length for each request. Overrides the output length from the dataset.",
            ));
            own.push(st(
                &["--n"],
                Ty::Int,
                Val::Int(1),
                "Number of generated sequences per prompt.",
            ));
            if ver < v(0, 6, 4) {
                own.push(tr(&["--use-beam-search"], ""));
            }
            own.push(st(
                &["--num-prompts"],
                Ty::Int,
                Val::Int(1000),
                "Number of prompts to process.",
            ));
            own.push(st(
                &["--hf-max-batch-size"],
                Ty::Int,
                Val::None,
                "Maximum batch size for HF backend.",
            ));
            if ver >= v(0, 4, 3) || cli {
                own.push(st(
                    &["--output-json"],
                    Ty::Str,
                    Val::None,
                    "Path to save the throughput results in JSON format.",
                ));
            }
            if ver >= v(0, 6, 0) {
                own.push(tr(
                    &["--async-engine"],
                    "Use vLLM async engine rather than LLM class.",
                ));
                own.push(tr(
                    &["--disable-frontend-multiprocessing"],
                    "Disable decoupled async engine frontend.",
                ));
            }
            if ver >= v(0, 8, 0) {
                own.push(st(
                    &["--random-range-ratio"],
                    Ty::Float,
                    Val::Float(0.0),
                    "Range ratio for sampling input/output length, used only for random dataset.",
                ));
                own.push(st(
                    &["--prefix-len"],
                    Ty::Int,
                    Val::None,
                    "Number of prefix tokens per request, used only for sonnet/random dataset.",
                ));
                own.push(st(
                    &["--hf-subset"],
                    Ty::Str,
                    Val::None,
                    "Subset of the HF dataset.",
                ));
                own.push(st(
                    &["--hf-split"],
                    Ty::Str,
                    Val::None,
                    "Split of the HF dataset.",
                ));
                own.push(st(
                    &["--lora-path"],
                    Ty::Str,
                    Val::None,
                    "Path to the LoRA adapters to use.",
                ));
            }
        }
        "latency" => {
            own.push(st(&["--input-len"], Ty::Int, Val::Int(32), ""));
            own.push(st(&["--output-len"], Ty::Int, Val::Int(128), ""));
            own.push(st(&["--batch-size"], Ty::Int, Val::Int(8), ""));
            own.push(st(
                &["--n"],
                Ty::Int,
                Val::Int(1),
                "Number of generated sequences per prompt.",
            ));
            own.push(tr(&["--use-beam-search"], ""));
            own.push(st(
                &["--num-iters-warmup"],
                Ty::Int,
                Val::Int(10),
                "Number of iterations to run for warmup.",
            ));
            own.push(st(
                &["--num-iters"],
                Ty::Int,
                Val::Int(30),
                "Number of iterations to run.",
            ));
            own.push(tr(
                &["--profile"],
                "profile the generation process of a single batch",
            ));
            own.push(st(&["--profile-result-dir"], Ty::Str, Val::None, "path to save the pytorch profiler output. Can be visualized with ui.perfetto.dev or Tensorboard."));
            if ver >= v(0, 4, 3) || cli {
                own.push(st(
                    &["--output-json"],
                    Ty::Str,
                    Val::None,
                    "Path to save the latency results in JSON format.",
                ));
            }
        }
        _ => {
            if ver >= v(0, 6, 0) {
                own.push(st(
                    &["--dataset-path"],
                    Ty::Str,
                    Val::None,
                    "Path to the dataset.",
                ));
                own.push(st(&["--output-len"], Ty::Int, Val::Int(10), ""));
                own.push(st(
                    &["--num-prompts"],
                    Ty::Int,
                    Val::Int(1),
                    "Number of the prompts sampled from dataset",
                ));
                own.push(st(
                    &["--repeat-count"],
                    Ty::Int,
                    Val::Int(100),
                    "Number of times to repeat each prompt",
                ));
                own.push(st(&["--input-length-range"], Ty::Str, s("128:256"), "Range of input lengths for sampling prompts, specified as \"min:max\" (e.g., \"128:256\")."));
                own.push(st(
                    &["--prefix-len"],
                    Ty::Int,
                    Val::Int(0),
                    "Specifies the length of a common prefix to be added to the input prompt.",
                ));
                own.push(tr(&["--sort"], "Sort prompts by input length"));
            }
            if ver < v(0, 6, 4) {
                own.push(tr(&["--enable-prefix-caching"], "enable prefix caching"));
                own.push(tr(&["--use-v2-block-manager"], "Use BlockSpaceMangerV2"));
            }
        }
    }
    let engine = engine_args(ver, false);
    if all_engine {
        // Own flags win over same-named engine flags (the script adds its own first).
        let mut a = own;
        for e in engine {
            if !a.iter().any(|o| o.dest == e.dest) {
                a.push(e);
            }
        }
        return a;
    }
    if kind == "prefix_caching" {
        let mut a = vec![st(
            &["--model"],
            Ty::Str,
            s("baichuan-inc/Baichuan2-13B-Chat"),
            "",
        )];
        a.extend(own);
        return a;
    }
    let mut a = vec![
        st(&["--model"], Ty::Str, s("facebook/opt-125m"), ""),
        st(&["--tokenizer"], Ty::Str, Val::None, ""),
        tr(
            &["--trust-remote-code"],
            "trust remote code from huggingface",
        ),
        st(&["--seed"], Ty::Int, Val::Int(0), ""),
    ];
    a.extend(own);
    for e in engine {
        if COMMON.contains(&e.dest.as_str()) && !a.iter().any(|o| o.dest == e.dest) {
            a.push(e);
        }
    }
    a
}
