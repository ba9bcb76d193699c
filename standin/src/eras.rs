//! vLLM versions and the serving client's flags, era by era.
//!
//! Source: shared/spec/real-images.md §5 (the table of flags `benchmarks/benchmark_serving.py`
//! defines per era, the defaults line under it, and "What happens with no dataset").
//! Defaults and help texts are the stand-in's own wording. Engine, server and offline-script
//! flags live in `flags.rs`.

use crate::argparse::{Arg, Kind, Ty, Val};

/// A vLLM version as numbers: `0.6.3.post1` → 0.6.3.0, `0.10.1.1` → 0.10.1.1,
/// `0.10.2rc1` → 0.10.2.0 (suffixes do not move a version across an era boundary).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub struct Ver(pub [u32; 4]);

impl Ver {
    pub const fn new(a: u32, b: u32, c: u32) -> Ver {
        Ver([a, b, c, 0])
    }
    pub const fn new4(a: u32, b: u32, c: u32, d: u32) -> Ver {
        Ver([a, b, c, d])
    }
    pub fn parse(s: &str) -> Ver {
        let mut out = [0u32; 4];
        let s = s.trim().trim_start_matches('v');
        for (i, seg) in s.split('.').take(4).enumerate() {
            let digits: String = seg.chars().take_while(|c| c.is_ascii_digit()).collect();
            if digits.is_empty() {
                break;
            }
            out[i] = digits.parse().unwrap_or(0);
            if digits.len() != seg.len() {
                break;
            }
        }
        Ver(out)
    }
    /// `lo <= self <= hi` (inclusive both ends).
    pub fn within(self, lo: Ver, hi: Ver) -> bool {
        lo <= self && self <= hi
    }
}

/// The serving client's eras (spec §5 rows).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum Era {
    /// v0.1.x–v0.2.7: the original client, `--dataset` and `--tokenizer` required.
    Y2023,
    /// v0.3.0: OpenAI-API support, `--protocol`.
    V030,
    /// v0.3.1–v0.3.3: backend_request_func.py.
    V031,
    /// v0.4.0–v0.5.1: `--dataset-name sharegpt|sonnet` + `--dataset-path`.
    V040,
    /// v0.5.2–v0.5.4: + random.
    V052,
    /// v0.5.5–v0.6.3.post1: + hf, percentiles, ignore-eos, profile, logprobs.
    V055,
    /// v0.6.4–v0.7.3: + max-concurrency, goodput, burstiness, burstgpt.
    V064,
    /// v0.8.0–v0.9.0.1: datasets in benchmark_dataset.py; `--dataset`, `--best-of` gone.
    V080,
    /// v0.9.1–v0.10.1.1: + custom dataset, ramp-up, `--no-stream`.
    V091,
    /// v0.10.2+: the script is a deprecation shim.
    Shim,
}

pub fn serving_era(v: Ver) -> Era {
    if v < Ver::new(0, 3, 0) {
        Era::Y2023
    } else if v < Ver::new(0, 3, 1) {
        Era::V030
    } else if v < Ver::new(0, 4, 0) {
        Era::V031
    } else if v < Ver::new(0, 5, 2) {
        Era::V040
    } else if v < Ver::new(0, 5, 5) {
        Era::V052
    } else if v < Ver::new(0, 6, 4) {
        Era::V055
    } else if v < Ver::new(0, 8, 0) {
        Era::V064
    } else if v < Ver::new(0, 9, 1) {
        Era::V080
    } else if v < Ver::new(0, 10, 2) {
        Era::V091
    } else {
        Era::Shim
    }
}

/// `--backend` choices by era (approximate beyond "vllm" being the default everywhere).
fn backends(e: Era) -> Vec<&'static str> {
    match e {
        Era::Y2023 => vec!["vllm", "tgi"],
        Era::V030 => vec!["vllm", "tgi", "openai"],
        Era::V031 => vec!["tgi", "vllm", "deepspeed-mii", "openai", "tensorrt-llm"],
        Era::V040 | Era::V052 => vec![
            "tgi",
            "vllm",
            "lmdeploy",
            "deepspeed-mii",
            "openai",
            "openai-chat",
            "tensorrt-llm",
            "scalellm",
        ],
        Era::V055 | Era::V064 => vec![
            "tgi",
            "vllm",
            "lmdeploy",
            "deepspeed-mii",
            "openai",
            "openai-chat",
            "tensorrt-llm",
            "scalellm",
            "sglang",
        ],
        _ => vec![
            "tgi",
            "vllm",
            "lmdeploy",
            "deepspeed-mii",
            "openai",
            "openai-chat",
            "openai-audio",
            "tensorrt-llm",
            "scalellm",
            "sglang",
            "llama.cpp",
        ],
    }
}

fn dataset_names(e: Era) -> Vec<&'static str> {
    match e {
        Era::V040 => vec!["sharegpt", "sonnet"],
        Era::V052 => vec!["sharegpt", "sonnet", "random"],
        Era::V055 => vec!["sharegpt", "sonnet", "random", "hf"],
        Era::V064 => vec!["sharegpt", "burstgpt", "sonnet", "random", "hf"],
        Era::V080 => vec!["sharegpt", "burstgpt", "sonnet", "random", "hf"],
        _ => vec!["sharegpt", "burstgpt", "sonnet", "random", "hf", "custom"],
    }
}

/// The serving client's arguments in `era` (spec §5). `cli` adds what `vllm bench serve`
/// has on top of the script of the same version.
pub fn serving_args(e: Era, v: Ver, cli: bool) -> Vec<Arg> {
    use Era::*;
    let s = |n: &str| Val::Str(n.into());
    let o = |names: &[&str], ty: Ty, d: Val, h: &str| Arg::new(names, Kind::Store, ty, d, h);
    let t = |names: &[&str], h: &str| Arg::new(names, Kind::True, Ty::Str, Val::Bool(false), h);
    let from = |lo: Era| e >= lo;
    let upto = |hi: Era| e <= hi;
    let mut a: Vec<Arg> = Vec::new();
    a.push(o(&["--backend"], Ty::Str, s("vllm"), "").choices(&backends(e)));
    if e == V030 {
        a.push(o(&["--protocol"], Ty::Str, s("http"), "").choices(&["http", "https"]));
    }
    if e == V031 {
        a.push(o(
            &["--version"],
            Ty::Str,
            s("N/A"),
            "Version of the serving backend, stored in the result.",
        ));
    }
    if from(V031) {
        a.push(o(
            &["--base-url"],
            Ty::Str,
            Val::None,
            "Server or API base url if not using http host and port.",
        ));
    }
    let host = if v <= Ver::new4(0, 6, 3, 9) {
        "localhost"
    } else {
        "127.0.0.1"
    };
    a.push(o(&["--host"], Ty::Str, s(host), ""));
    a.push(o(&["--port"], Ty::Int, Val::Int(8000), ""));
    if from(V030) {
        let ep = if e < V040 {
            "/generate"
        } else {
            "/v1/completions"
        };
        a.push(o(&["--endpoint"], Ty::Str, s(ep), "API endpoint."));
    }
    if upto(V064) {
        let h = if e < V040 {
            "Path to the ShareGPT dataset."
        } else {
            "Path to the ShareGPT dataset, will be deprecated in the next release."
        };
        let d = o(&["--dataset"], Ty::Str, Val::None, h);
        a.push(if e < V040 { d.required() } else { d });
    }
    if from(V040) {
        a.push(
            o(
                &["--dataset-name"],
                Ty::Str,
                s("sharegpt"),
                "Name of the dataset to benchmark on.",
            )
            .choices(&dataset_names(e)),
        );
        a.push(o(
            &["--dataset-path"],
            Ty::Str,
            Val::None,
            "Path to the dataset file (ShareGPT/sonnet) or the huggingface dataset ID.",
        ));
    }
    if from(V091) {
        a.push(t(
            &["--no-stream"],
            "Do not load the dataset in streaming mode.",
        ));
    }
    if from(V064) {
        a.push(o(&["--max-concurrency"], Ty::Int, Val::None, "Maximum number of concurrent requests. Requests beyond it wait, whatever the request rate."));
    }
    if from(V030) {
        let m = o(&["--model"], Ty::Str, Val::None, "Name of the model.");
        // `vllm bench serve` 0.14+ asks the server when --model is omitted.
        a.push(if cli && v >= Ver::new(0, 14, 0) {
            m
        } else {
            m.required()
        });
    }
    let tok = o(
        &["--tokenizer"],
        Ty::Str,
        Val::None,
        "Name or path of the tokenizer, if not using the default tokenizer.",
    );
    a.push(if e == Y2023 { tok.required() } else { tok });
    if upto(V064) {
        a.push(o(
            &["--best-of"],
            Ty::Int,
            Val::Int(1),
            "Generates `best_of` sequences per prompt and returns the best one.",
        ));
    }
    a.push(t(&["--use-beam-search"], ""));
    a.push(o(
        &["--num-prompts"],
        Ty::Int,
        Val::Int(1000),
        "Number of prompts to process.",
    ));
    if from(V055) {
        a.push(o(
            &["--logprobs"],
            Ty::Int,
            Val::None,
            "Number of logprobs-per-token to compute and return as part of the request.",
        ));
    }
    a.push(o(&["--request-rate"], Ty::Float, Val::Float(f64::INFINITY), "Number of requests per second. If this is inf, then all the requests are sent at time 0. Otherwise, we use a Poisson process (or gamma distribution with --burstiness) to synthesize the request arrival times."));
    if from(V064) {
        a.push(o(&["--burstiness"], Ty::Float, Val::Float(1.0), "Burstiness factor of the request generation. 1 is a Poisson process; lower is burstier, higher more uniform."));
    }
    a.push(o(&["--seed"], Ty::Int, Val::Int(0), ""));
    a.push(t(
        &["--trust-remote-code"],
        "Trust remote code from huggingface",
    ));
    if from(V031) {
        a.push(t(
            &["--disable-tqdm"],
            "Specify to disable tqdm progress bar.",
        ));
    }
    if from(V055) {
        a.push(t(&["--profile"], "Use Torch Profiler. The endpoint must be launched with VLLM_TORCH_PROFILER_DIR to enable profiler."));
    }
    if from(V031) {
        a.push(t(
            &["--save-result"],
            "Specify to save benchmark results to a json file",
        ));
    }
    if from(V080) {
        a.push(t(&["--save-detailed"], "When saving the results, whether to include per request information such as response, error, ttfs, tpots, etc."));
        a.push(t(
            &["--append-result"],
            "Append the benchmark result to the existing json file.",
        ));
    }
    if from(V040) {
        a.push(Arg::new(&["--metadata"], Kind::Star, Ty::Str, Val::None, "Key-value pairs (e.g, --metadata version=0.3.3 tp=1) for metadata of this run to be saved in the result JSON file for record keeping purposes."));
        a.push(o(&["--result-dir"], Ty::Str, Val::None, "Specify directory to save benchmark json results. If not specified, results are saved in the current directory."));
        a.push(o(&["--result-filename"], Ty::Str, Val::None, "Specify the filename to save benchmark json results. If not specified, results will be saved in {backend}-{args.request_rate}qps-{base_model_id}-{current_dt}.json format."));
    }
    if from(V055) {
        a.push(t(&["--ignore-eos"], "Set ignore_eos flag when sending the benchmark request. Warning: ignore_eos is not supported in deepspeed_mii and tgi."));
        a.push(o(&["--percentile-metrics"], Ty::Str, s("ttft,tpot,itl"), "Comma-separated list of selected metrics to report percentils. Allowed metric names are \"ttft\", \"tpot\", \"itl\", \"e2el\". Default value is \"ttft,tpot,itl\"."));
        a.push(o(&["--metric-percentiles"], Ty::Str, s("99"), "Comma-separated list of percentiles for selected metrics. To report 25-th, 50-th, and 75-th percentiles, use \"25,50,75\". Default value is \"99\". Use \"--percentile-metrics\" to select metrics."));
    }
    if from(V064) {
        a.push(Arg::new(&["--goodput"], Kind::Plus, Ty::Str, Val::None, "Specify service level objectives for goodput as \"KEY:VALUE\" pairs, where the key is a metric name, and the value is in milliseconds."));
    }
    if from(V091) {
        a.push(o(
            &["--custom-output-len"],
            Ty::Int,
            Val::Int(256),
            "Number of output tokens per request, used only for custom dataset.",
        ));
        a.push(t(
            &["--custom-skip-chat-template"],
            "Skip applying chat template to prompt, used only for custom dataset.",
        ));
    }
    if from(V040) {
        a.push(o(
            &["--sonnet-input-len"],
            Ty::Int,
            Val::Int(550),
            "Number of input tokens per request, used only for sonnet dataset.",
        ));
        a.push(o(
            &["--sonnet-output-len"],
            Ty::Int,
            Val::Int(150),
            "Number of output tokens per request, used only for sonnet dataset.",
        ));
        a.push(o(
            &["--sonnet-prefix-len"],
            Ty::Int,
            Val::Int(200),
            "Number of prefix tokens per request, used only for sonnet dataset.",
        ));
        a.push(o(&["--sharegpt-output-len"], Ty::Int, Val::None, "Output length for each request. Overrides the output length from the ShareGPT dataset."));
    }
    if from(V052) {
        a.push(o(
            &["--random-input-len"],
            Ty::Int,
            Val::Int(1024),
            "Number of input tokens per request, used only for random sampling.",
        ));
        a.push(o(
            &["--random-output-len"],
            Ty::Int,
            Val::Int(128),
            "Number of output tokens per request, used only for random sampling.",
        ));
        let r = if e >= V080 { 0.0 } else { 1.0 };
        a.push(o(
            &["--random-range-ratio"],
            Ty::Float,
            Val::Float(r),
            "Range of sampled ratio of input/output length, used only for random sampling.",
        ));
    }
    if from(V055) {
        a.push(o(
            &["--random-prefix-len"],
            Ty::Int,
            Val::Int(0),
            "Number of fixed prefix tokens before random context.",
        ));
        a.push(o(
            &["--hf-subset"],
            Ty::Str,
            Val::None,
            "Subset of the HF dataset.",
        ));
        a.push(o(
            &["--hf-split"],
            Ty::Str,
            Val::None,
            "Split of the HF dataset.",
        ));
        a.push(o(&["--hf-output-len"], Ty::Int, Val::None, "Output length for each request. Overrides the output lengths from the sampled HF dataset."));
    }
    if from(V080) {
        a.push(o(
            &["--top-p"],
            Ty::Float,
            Val::None,
            "Top-p sampling parameter. Only has effect on openai-compatible backends.",
        ));
        a.push(o(
            &["--top-k"],
            Ty::Int,
            Val::None,
            "Top-k sampling parameter. Only has effect on openai-compatible backends.",
        ));
        a.push(o(
            &["--min-p"],
            Ty::Float,
            Val::None,
            "Min-p sampling parameter. Only has effect on openai-compatible backends.",
        ));
        a.push(o(
            &["--temperature"],
            Ty::Float,
            Val::None,
            "Temperature sampling parameter. Only has effect on openai-compatible backends.",
        ));
    }
    if from(V064) {
        a.push(
            o(
                &["--tokenizer-mode"],
                Ty::Str,
                s("auto"),
                "The tokenizer mode.",
            )
            .choices(&["auto", "slow", "mistral", "custom"]),
        );
        a.push(o(&["--served-model-name"], Ty::Str, Val::None, "The model name used in the API. If not specified, the model name will be the same as the --model argument."));
        a.push(Arg::new(
            &["--lora-modules"],
            Kind::Plus,
            Ty::Str,
            Val::None,
            "A subset of LoRA module names passed in when launching the server.",
        ));
    }
    if from(V091) {
        a.push(o(&["--ramp-up-strategy"], Ty::Str, Val::None, "The ramp-up strategy; the request rate ramps from --ramp-up-start-rps to --ramp-up-end-rps.").choices(&["linear", "exponential"]));
        a.push(o(
            &["--ramp-up-start-rps"],
            Ty::Int,
            Val::None,
            "The starting request rate for ramp-up (RPS).",
        ));
        a.push(o(
            &["--ramp-up-end-rps"],
            Ty::Int,
            Val::None,
            "The ending request rate for ramp-up (RPS).",
        ));
    }
    if cli {
        // `vllm bench serve` extras. The CLI named the backend `--endpoint-type` in
        // 0.8.0–0.10.x and `--backend` later; both are accepted here (approximation).
        a.push(o(
            &["--endpoint-type"],
            Ty::Str,
            Val::None,
            "The endpoint type (alias of --backend).",
        ));
        a.push(o(&["--label"], Ty::Str, Val::None, "The label (prefix) of the benchmark results. If not specified, the endpoint type will be used as the label."));
        if v >= Ver::new(0, 11, 0) {
            a.push(o(&["--ready-check-timeout-sec"], Ty::Int, Val::Int(if v >= Ver::new(0, 14, 0) { 0 } else { 600 }), "Maximum time to wait for the endpoint to become ready in seconds. Ready check will be skipped by default."));
        }
        if v >= Ver::new(0, 11, 1) {
            a.push(o(
                &["--num-warmups"],
                Ty::Int,
                Val::Int(0),
                "Number of warmup requests.",
            ));
        }
    }
    a
}

pub const SERVING_DESCRIPTION: &str = "Benchmark the online serving throughput.";
