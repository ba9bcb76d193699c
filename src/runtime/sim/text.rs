//! vLLM's real output formats, per era (shared/spec/vllm-output-formats.md), written by the
//! sim. Values are invented; layouts, labels and padding are exact.

use crate::category::Category;
use crate::plan::BenchKind;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Output eras that change what the server and the benchmarks print.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Era {
    /// v0.4.0–v0.5.5: header, fixed P99, input token throughput line.
    V04,
    /// v0.6.0–v0.7.x: V0 logger `file.py:N]`, `Total Token throughput`.
    V06,
    /// v0.8.0–v0.10.0: bracketed file field, V1 engine.
    V08,
    /// v0.10.1+: process tags on every line, CLI-era block.
    V011,
}

impl Era {
    pub(crate) fn from_version(version: Option<&str>, commit: &str) -> Era {
        let parse = |v: &str| -> Option<(u32, u32, u32)> {
            let mut it = v
                .split(|c: char| !c.is_ascii_digit())
                .filter(|s| !s.is_empty());
            Some((
                it.next()?.parse().ok()?,
                it.next()?.parse().ok()?,
                it.next().and_then(|s| s.parse().ok()).unwrap_or(0),
            ))
        };
        match version.and_then(parse) {
            Some((0, m, _)) if m < 6 => Era::V04,
            Some((0, m, _)) if m < 8 => Era::V06,
            Some((0, 10, p)) if p >= 1 => Era::V011,
            Some((0, m, _)) if m <= 10 => Era::V08,
            Some(_) => Era::V011,
            // Unknown version: spread commits over the eras deterministically.
            None => match commit.bytes().map(u32::from).sum::<u32>() % 3 {
                0 => Era::V06,
                1 => Era::V08,
                _ => Era::V011,
            },
        }
    }

    pub(crate) fn version_string(self, known: Option<&str>) -> String {
        if let Some(v) = known {
            return v.to_string();
        }
        match self {
            Era::V04 => "0.5.1",
            Era::V06 => "0.6.3.post1",
            Era::V08 => "0.8.5",
            Era::V011 => "0.11.0",
        }
        .to_string()
    }
}

fn stamp(rng: &mut ChaCha8Rng) -> String {
    format!(
        "{:02}-{:02} {:02}:{:02}:{:02}",
        rng.random_range(1..13),
        rng.random_range(1..29),
        rng.random_range(0..24),
        rng.random_range(0..60),
        rng.random_range(0..60)
    )
}

fn line(era: Era, level: &str, ts: &str, file: &str, msg: &str, tag: &str) -> String {
    match era {
        Era::V04 | Era::V06 => format!("{level} {ts} {file}] {msg}"),
        Era::V08 => format!("{level} {ts} [{file}] {msg}"),
        Era::V011 => format!("({tag}) {level} {ts} [{file}] {msg}"),
    }
}

pub fn startup(era: Era, version: &str, model: &str, rng: &mut ChaCha8Rng) -> Vec<String> {
    let ts = stamp(rng);
    let api = "APIServer pid=1";
    let core = "EngineCore_DP0 pid=97";
    let blocks = rng.random_range(4000..40000);
    let mut v = Vec::new();
    if era >= Era::V08 {
        v.push(format!(
            "INFO {ts} [__init__.py:239] Automatically detected platform cuda."
        ));
    }
    v.push(line(
        era,
        "INFO",
        &ts,
        "api_server.py:1043",
        &format!("vLLM API server version {version}"),
        api,
    ));
    let engine = match era {
        Era::V04 | Era::V06 => format!("Initializing an LLM engine (v{version}) with config: model='{model}', tokenizer='{model}', dtype=torch.bfloat16, max_seq_len=8192"),
        _ => format!("Initializing a V1 LLM engine (v{version}) with config: model='{model}', speculative_config=None, tokenizer='{model}', dtype=torch.bfloat16"),
    };
    v.push(line(era, "INFO", &ts, "llm_engine.py:237", &engine, core));
    let gib = rng.random_range(1.0..60.0);
    match era {
        Era::V04 | Era::V06 => {
            v.push(line(
                era,
                "INFO",
                &ts,
                "model_runner.py:1072",
                &format!("Loading model weights took {gib:.4} GB"),
                core,
            ));
            v.push(line(
                era,
                "INFO",
                &ts,
                "gpu_executor.py:122",
                &format!("# GPU blocks: {blocks}, # CPU blocks: 2048"),
                core,
            ));
            v.push(line(era, "INFO", &ts, "model_runner.py:1402", "Capturing the model for CUDA graphs. This may lead to unexpected consequences if the model is not static. To run the model in eager mode, set 'enforce_eager=True' or use '--enforce-eager' in the CLI.", core));
            v.push(line(
                era,
                "INFO",
                &ts,
                "model_runner.py:1530",
                &format!(
                    "Graph capturing finished in {} secs.",
                    rng.random_range(5..40)
                ),
                core,
            ));
        }
        Era::V08 | Era::V011 => {
            v.push(line(
                era,
                "INFO",
                &ts,
                "gpu_model_runner.py:1329",
                &format!(
                    "Model loading took {gib:.4} GiB and {:.6} seconds",
                    rng.random_range(3.0..90.0)
                ),
                core,
            ));
            v.push(line(
                era,
                "INFO",
                &ts,
                "kv_cache_utils.py:634",
                &format!(
                    "GPU KV cache size: {},{:03} tokens",
                    blocks / 10,
                    blocks % 1000
                ),
                core,
            ));
            v.push(line(
                era,
                "INFO",
                &ts,
                "kv_cache_utils.py:637",
                "Maximum concurrency for 32,768 tokens per request: 12.98x",
                core,
            ));
            v.push(
                "Capturing CUDA graph shapes: 100%|██████████| 35/35 [00:09<00:00,  3.81it/s]"
                    .to_string(),
            );
            v.push(line(
                era,
                "INFO",
                &ts,
                "gpu_model_runner.py:1686",
                &format!(
                    "Graph capturing finished in {} secs, took 0.52 GiB",
                    rng.random_range(5..40)
                ),
                core,
            ));
            v.push(line(
                era,
                "INFO",
                &ts,
                "core.py:159",
                &format!(
                    "init engine (profile, create kv cache, warmup model) took {:.2} seconds",
                    rng.random_range(20.0..90.0)
                ),
                core,
            ));
        }
    }
    v
}

pub fn ready(era: Era) -> Vec<String> {
    let tag = |s: &str| {
        if era == Era::V011 {
            format!("(APIServer pid=1) {s}")
        } else {
            s.to_string()
        }
    };
    let mut v = Vec::new();
    if era >= Era::V08 {
        v.push(tag("INFO 04-25 07:46:44 [api_server.py:1090] Starting vLLM API server on http://0.0.0.0:8000"));
    }
    v.push(tag("INFO:     Started server process [1]"));
    v.push(tag("INFO:     Waiting for application startup."));
    v.push(tag("INFO:     Application startup complete."));
    if era < Era::V08 {
        v.push(
            "INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)".to_string(),
        );
    }
    v
}

pub(crate) fn server_stats(era: Era, rng: &mut ChaCha8Rng) -> String {
    let ts = stamp(rng);
    line(era, "INFO", &ts, "metrics.py:351", &format!("Avg prompt throughput: {:.1} tokens/s, Avg generation throughput: {:.1} tokens/s, Running: {} reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: {:.1}%, CPU KV cache usage: 0.0%.", rng.random_range(100.0..5000.0), rng.random_range(100.0..3000.0), rng.random_range(1..128), rng.random_range(1.0..90.0)), "APIServer pid=1")
}

pub(crate) fn import_failure(cat: Category, rng: &mut ChaCha8Rng) -> Vec<String> {
    let _ = rng;
    let tb = "Traceback (most recent call last):".to_string();
    match cat {
        Category::Aimv2Conflict => vec![
            tb,
            "  File \"/usr/local/lib/python3.12/dist-packages/vllm/transformers_utils/configs/ovis.py\", line 75, in <module>".into(),
            "    AutoConfig.register(\"aimv2\", AIMv2Config)".into(),
            "ValueError: 'aimv2' is already used by a Transformers config, pick another name.".into(),
        ],
        Category::NumpyAbi => vec![
            "A module that was compiled using NumPy 1.x cannot be run in".into(),
            "NumPy 2.2.6 as it may crash. To support both 1.x and 2.x".into(),
            "versions of NumPy, modules must be compiled with NumPy 2.0.".into(),
            tb,
            "ImportError: numpy.core.multiarray failed to import".into(),
        ],
        Category::FaUtilsMissing => vec![
            tb,
            "  File \"/usr/local/lib/python3.12/dist-packages/vllm/attention/backends/flash_attn.py\", line 25, in <module>".into(),
            "    from vllm.vllm_flash_attn.fa_utils import flash_attn_supports_fp8".into(),
            "ModuleNotFoundError: No module named 'vllm.vllm_flash_attn.fa_utils'".into(),
        ],
        Category::LogitsWarperImport => vec![
            tb,
            "ImportError: cannot import name 'LogitsWarper' from 'transformers' (/usr/local/lib/python3.10/dist-packages/transformers/__init__.py)".into(),
        ],
        _ => vec![tb, "ModuleNotFoundError: No module named 'pyairports'".into()],
    }
}

pub fn oom(rng: &mut ChaCha8Rng) -> Vec<String> {
    let want = rng.random_range(1.0..20.0);
    vec![
        "Traceback (most recent call last):".into(),
        "  File \"/usr/local/lib/python3.12/dist-packages/vllm/worker/worker.py\", line 229, in determine_num_available_blocks".into(),
        format!("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {want:.2} GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.02 GiB is free. Process 1 has 78.16 GiB memory in use."),
    ]
}

/// A crash no signature names: a worker's own traceback, then the engine's consequence
/// line. What varies from run to run of one such failure (a pid, a shard number, a cache
/// file's hash and path, a peer's address and port) varies here too, so grouping by
/// failure kind is exercised as a real night would.
pub(crate) fn other_crash(rng: &mut ChaCha8Rng) -> Vec<String> {
    let pid = rng.random_range(100..4000u32);
    let shard = rng.random_range(0..64u32);
    let hash: u64 = rng.random();
    let (host, port) = (
        rng.random_range(2..250u32),
        rng.random_range(20_000..30_000u32),
    );
    let w = format!("(VllmWorkerProcess pid={pid})");
    vec![
        format!("{w} ERROR 07-21 03:20:18 multiproc_worker_utils.py:233] Exception in worker VllmWorkerProcess while processing method load_model."),
        format!("{w} ERROR 07-21 03:20:18 multiproc_worker_utils.py:233] Traceback (most recent call last):"),
        format!("{w} ERROR 07-21 03:20:18 multiproc_worker_utils.py:233]   File \"/usr/local/lib/python3.12/dist-packages/vllm/model_executor/model_loader/loader.py\", line {}, in load_model", 300 + shard),
        format!("{w} ERROR 07-21 03:20:18 multiproc_worker_utils.py:233] TypeError: unsupported operand type(s) for +: 'NoneType' and 'int' (shard {shard}, cache /root/.cache/vllm/torch_compile_cache/{hash:016x}/rank_0_0, peer 10.0.0.{host}:{port})"),
        "Traceback (most recent call last):".into(),
        "RuntimeError: Worker failed with error 'unsupported operand type(s) for +: 'NoneType' and 'int'', please check the stack trace above for the root cause".into(),
    ]
}

pub(crate) fn broken_pipe() -> Vec<String> {
    vec![
        "Traceback (most recent call last):".into(),
        "  File \"/usr/lib/python3.10/asyncio/streams.py\", line 359, in drain".into(),
        "BrokenPipeError: [Errno 32] Broken pipe".into(),
    ]
}

fn row(label: &str, value: String) -> String {
    format!("{label:<40} {value:<10}")
}

/// The result block of a run whose variant has `effect` (1.0 = baseline speed) and whose
/// noise is `d` ([`crate::stats::noise`]).
pub(crate) fn result_block(
    kind: BenchKind,
    era: Era,
    effect: f64,
    d: &crate::stats::noise::Draw,
) -> Vec<String> {
    let lat = |x: f64| x / effect * d.latency;
    match kind {
        BenchKind::Serving => {
            let s = crate::stats::noise::serving(effect, d);
            let n = s.successful;
            let dur = s.duration_s;
            let inp = 21_523;
            let outp = s.output_tokens as u64;
            let mut v = vec!["============ Serving Benchmark Result ============".to_string()];
            v.push(row("Successful requests:", n.to_string()));
            if era == Era::V011 {
                v.push(row("Failed requests:", s.failed.to_string()));
            }
            v.push(row("Benchmark duration (s):", format!("{dur:.2}")));
            v.push(row("Total input tokens:", inp.to_string()));
            v.push(row("Total generated tokens:", outp.to_string()));
            v.push(row(
                "Request throughput (req/s):",
                format!("{:.2}", n as f64 / dur),
            ));
            if era == Era::V04 {
                v.push(row(
                    "Input token throughput (tok/s):",
                    format!("{:.2}", inp as f64 / dur),
                ));
            }
            v.push(row(
                "Output token throughput (tok/s):",
                format!("{:.2}", outp as f64 / dur),
            ));
            if era == Era::V011 {
                v.push(row(
                    "Peak output token throughput (tok/s):",
                    format!("{:.2}", outp as f64 / dur * 1.6),
                ));
                v.push(row("Peak concurrent requests:", "100.00".into()));
            }
            if era != Era::V04 {
                let label = if era == Era::V011 {
                    "Total token throughput (tok/s):"
                } else {
                    "Total Token throughput (tok/s):"
                };
                v.push(row(label, format!("{:.2}", (inp + outp) as f64 / dur)));
            }
            for (title, short, base) in [
                ("Time to First Token", "TTFT", 180.0),
                ("Time per Output Token (excl. 1st token)", "TPOT", 12.0),
                ("Inter-token Latency", "ITL", 11.5),
            ] {
                v.push(format!("{:-^50}", title));
                let mean = lat(base);
                v.push(row(&format!("Mean {short} (ms):"), format!("{mean:.2}")));
                v.push(row(
                    &format!("Median {short} (ms):"),
                    format!("{:.2}", mean * 0.92),
                ));
                // Tails are noisier than means.
                v.push(row(
                    &format!("P99 {short} (ms):"),
                    format!("{:.2}", mean * 2.7 * d.tail / d.latency),
                ));
            }
            v.push("=".repeat(50));
            v
        }
        BenchKind::Throughput => {
            let req = 24.6 * effect * d.throughput;
            let tot = req * 437.2;
            if era < Era::V06 {
                vec![format!(
                    "Throughput: {req:.2} requests/s, {tot:.2} tokens/s"
                )]
            } else {
                let mut v = vec![format!("Throughput: {req:.2} requests/s, {tot:.2} total tokens/s, {:.2} output tokens/s", tot * 0.49)];
                if era >= Era::V08 {
                    v.push("Total num prompt tokens:  221443".into());
                    v.push(format!(
                        "Total num output tokens:  {:.0}",
                        215_690.0 * d.tokens
                    ));
                }
                v
            }
        }
        BenchKind::Latency => {
            let avg = lat(1.73);
            let mut v = vec![
                "Warming up...".to_string(),
                format!("Avg latency: {avg} seconds"),
            ];
            for (p, f) in [
                (10, 0.98),
                (25, 0.99),
                (50, 1.0),
                (75, 1.01),
                (90, 1.02),
                (99, 1.05),
            ] {
                v.push(format!("{p}% percentile latency: {} seconds", avg * f));
            }
            v
        }
        BenchKind::PrefixCaching => vec![
            "Testing filtered requests".to_string(),
            "------start generating------".to_string(),
            format!("cost time {}", lat(12.9)),
        ],
        // A plan's command always has a kind; nothing recognisable is printed otherwise.
        BenchKind::Unknown => Vec::new(),
    }
}

/// One request-log line as vLLM prints it with request logging on (about 1 KB: the prompt
/// and its token ids), for sims of a chatty server.
pub(crate) fn request_log(n: u64, model: &str) -> String {
    let ids: Vec<String> = (0..120)
        .map(|i| ((n * 31 + i * 7) % 32000).to_string())
        .collect();
    format!(
        "INFO 11-25 01:02:03 logger.py:37] Received request cmpl-{n:032x}-0: prompt: 'Summarise the following conversation for {model} in three sentences.', params: SamplingParams(n=1, temperature=1.0, top_p=1.0, max_tokens=256, ignore_eos=True), prompt_token_ids: [{}], lora_request: None",
        ids.join(", ")
    )
}

/// The Hub refusing a gated model's weights to a token without access, as the server's
/// loader reports it.
pub fn gated(model: &str) -> Vec<String> {
    vec![
        "Traceback (most recent call last):".into(),
        format!("huggingface_hub.errors.GatedRepoError: 403 Client Error. Cannot access gated repo for url https://huggingface.co/{model}/resolve/main/config.json."),
        format!("OSError: You are trying to access a gated repo. Make sure to have access to it at https://huggingface.co/{model}."),
    ]
}
