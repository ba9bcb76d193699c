//! vLLM's logger lines and "loading the engine" (weights, KV cache, CUDA graphs), shared by
//! the server and the in-process benchmarks; where the OOM and hang rot strike.
//! Layouts: shared/spec/vllm-output-formats.md §5.2–§5.3.

use crate::eras::Ver;
use crate::pyenv::{env, fail_mode, Env};
use std::io::Write;
use std::time::{Duration, Instant};

/// `MM-DD HH:MM:SS` (UTC).
pub fn timestamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (_, m, d) = civil(secs / 86400);
    let (h, mi, s) = ((secs / 3600) % 24, (secs / 60) % 60, secs % 60);
    format!("{m:02}-{d:02} {h:02}:{mi:02}:{s:02}")
}

/// `YYYYmmdd-HHMMSS` (the result file names' date).
pub fn date_stamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (y, m, d) = civil(secs / 86400);
    let (h, mi, s) = ((secs / 3600) % 24, (secs / 60) % 60, secs % 60);
    format!("{y:04}{m:02}{d:02}-{h:02}{mi:02}{s:02}")
}

/// Days since 1970-01-01 → (year, month, day).
fn civil(days: u64) -> (i64, u32, u32) {
    let z = days as i64 + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    (y, m, d)
}

/// Process tag in front of every line from v0.10.1 (`(APIServer pid=N) `).
pub fn tag(ver: Ver, name: &str) -> String {
    if ver >= Ver::new(0, 10, 1) && !name.is_empty() {
        // The engine core is its own process in real vLLM: a pid of its own here too.
        let pid = std::process::id()
            + if name.starts_with("EngineCore") {
                137
            } else {
                0
            };
        format!("({name} pid={pid}) ")
    } else {
        String::new()
    }
}

/// One vLLM logger line on stdout: `INFO 04-25 07:45:43 [api_server.py:1043] msg` from
/// v0.8.0, `INFO 06-12 10:21:03 api_server.py:177] msg` before.
pub fn log_as(ver: Ver, who: &str, level: &str, file: &str, msg: &str) {
    let file = if ver >= Ver::new(0, 8, 0) {
        format!("[{file}]")
    } else {
        format!("{file}]")
    };
    let prefix = env("VLLM_LOGGING_PREFIX").unwrap_or_default();
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "{}{prefix}{level} {} {file} {msg}",
        tag(ver, who),
        timestamp()
    );
    let _ = out.flush();
}

pub fn log(ver: Ver, level: &str, file: &str, msg: &str) {
    log_as(ver, "APIServer", level, file, msg)
}

fn elog(ver: Ver, file: &str, msg: &str) {
    let who = if ver >= Ver::new(0, 10, 2) {
        "EngineCore_DP0"
    } else {
        "EngineCore_0"
    };
    log_as(ver, who, "INFO", file, msg)
}

/// `STANDIN_LOAD_MS` (default 300) × frac%.
pub fn pause(frac: u64) {
    let total: u64 = env("STANDIN_LOAD_MS")
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    std::thread::sleep(Duration::from_millis(total * frac / 100));
}

/// With thousands separators, as V1's KV lines print them.
pub fn commas(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub struct EngineOpts {
    pub model: String,
    pub max_model_len: u64,
    pub enforce_eager: bool,
    pub tp: u32,
    pub gpu_util: f64,
    pub quantization: Option<String>,
}

impl EngineOpts {
    /// The engine's arguments as the server and the offline scripts parse them alike.
    pub fn from_ns(model: String, ns: &crate::argparse::Ns) -> EngineOpts {
        EngineOpts {
            model,
            max_model_len: ns.int("max_model_len").map(|n| n as u64).unwrap_or(32768),
            enforce_eager: ns.flag("enforce_eager"),
            tp: ns
                .int("tensor_parallel_size")
                .map_or(1, |n| n.max(1) as u32),
            gpu_util: ns
                .str("gpu_memory_utilization")
                .and_then(|u| u.parse().ok())
                .unwrap_or(0.9),
            quantization: ns.str("quantization"),
        }
    }
}

/// The first line of an import of vLLM 0.7–0.11 (before the tag wrapper exists: untagged).
pub fn platform(v: Ver) {
    if v.within(Ver::new(0, 7, 0), Ver::new(0, 11, 99)) {
        log_as(
            v,
            "",
            "INFO",
            "__init__.py:239",
            "Automatically detected platform cuda.",
        );
    }
}

/// Engine construction. Err(exit status) when the image's rot strikes (OOM); never returns
/// when CUDA-graph capture hangs.
pub fn load_engine(e: &Env, o: &EngineOpts) -> Result<(), i32> {
    let v = e.ver;
    let t0 = Instant::now();
    let model = &o.model;
    if let (Some(tok), Some(_)) = (env("HF_TOKEN"), env("STANDIN_ECHO_TOKEN")) {
        log(v, "DEBUG", "envs.py:112", &format!("HF_TOKEN={tok}"));
    }
    let v1 = v >= Ver::new(0, 8, 0);
    let what = if v < Ver::new(0, 4, 0) {
        "an LLM engine".to_string()
    } else if v < Ver::new(0, 7, 3) {
        format!("an LLM engine (v{})", e.version)
    } else if v1 {
        format!("a V1 LLM engine (v{})", e.version)
    } else {
        format!("a V0 LLM engine (v{})", e.version)
    };
    let cfg = format!("model='{model}', speculative_config=None, tokenizer='{model}', skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, trust_remote_code=False, dtype=torch.bfloat16, max_seq_len={}, download_dir=None, load_format=auto, tensor_parallel_size=1, pipeline_parallel_size=1, quantization=None, enforce_eager={}, kv_cache_dtype=auto, seed=0", o.max_model_len, if o.enforce_eager { "True" } else { "False" });
    let init_file = if v1 {
        "core.py:58"
    } else {
        "llm_engine.py:169"
    };
    if v1 {
        elog(
            v,
            init_file,
            &format!("Initializing {what} with config: {cfg}"),
        );
    } else {
        log(
            v,
            "INFO",
            init_file,
            &format!("Initializing {what} with config: {cfg}"),
        );
    }
    let ask = crate::models::Ask {
        model,
        tp: o.tp,
        gpu_util: o.gpu_util,
        quantization: o.quantization.clone(),
    };
    if let Err(lines) = crate::models::check(e, &ask) {
        let who = if v1 { "EngineCore_DP0" } else { "" };
        eprintln!("{}Traceback (most recent call last):", tag(v, who));
        for l in lines {
            eprintln!("{l}");
        }
        return Err(1);
    }
    pause(30);
    let gb = if v >= Ver::new(0, 8, 3) { "GiB" } else { "GB" };
    if v1 {
        elog(
            v,
            "gpu_model_runner.py:1329",
            &format!("Model loading took 14.9889 {gb} and 3.210000 seconds"),
        );
    } else {
        log(
            v,
            "INFO",
            "model_runner.py:255",
            &format!("Loading model weights took 14.9889 {gb}"),
        );
    }
    if fail_mode() == "oom" {
        eprintln!(
            "{}Traceback (most recent call last):",
            tag(v, "EngineCore_DP0")
        );
        eprintln!(
            "  File \"{}/worker/worker.py\", line 229, in determine_num_available_blocks",
            e.pkg_str()
        );
        eprintln!("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 7.31 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.02 GiB is free. Process 1 has 78.16 GiB memory in use.");
        return Err(1);
    }
    pause(30);
    let kv_tokens: u64 = 425_424;
    let conc = kv_tokens as f64 / o.max_model_len.max(1) as f64;
    if v1 {
        elog(
            v,
            "kv_cache_utils.py:634",
            &format!("GPU KV cache size: {} tokens", commas(kv_tokens)),
        );
        elog(
            v,
            "kv_cache_utils.py:637",
            &format!(
                "Maximum concurrency for {} tokens per request: {conc:.2}x",
                commas(o.max_model_len)
            ),
        );
    } else {
        let dev = if v >= Ver::new(0, 7, 0) {
            "CUDA"
        } else {
            "GPU"
        };
        log(
            v,
            "INFO",
            "gpu_executor.py:84",
            &format!("# {dev} blocks: 26589, # CPU blocks: 2048"),
        );
        if v >= Ver::new(0, 6, 3) {
            log(
                v,
                "INFO",
                "gpu_executor.py:88",
                &format!(
                    "Maximum concurrency for {} tokens per request: {conc:.2}x",
                    o.max_model_len
                ),
            );
        }
    }
    if !o.enforce_eager {
        if !v1 {
            let msg = if v >= Ver::new(0, 6, 4) {
                "Capturing cudagraphs for decoding. This may lead to unexpected consequences if the model is not static. To run the model in eager mode, set 'enforce_eager=True' or use '--enforce-eager' in the CLI."
            } else {
                "Capturing the model for CUDA graphs. This may lead to unexpected consequences if the model is not static. To run the model in eager mode, set 'enforce_eager=True' or use '--enforce-eager' in the CLI."
            };
            log(v, "INFO", "model_runner.py:1404", msg);
        }
        if fail_mode() == "hang" {
            // CUDA-graph capture that never ends (--enforce-eager skips capture, and the hang).
            eprintln!(
                "Capturing CUDA graph shapes:  37%|███▋      | 13/35 [00:04<00:07,  2.95it/s]"
            );
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
        pause(30);
        let done = if v >= Ver::new(0, 6, 4) {
            "Graph capturing finished in 8 secs, took 0.52 GiB"
        } else {
            "Graph capturing finished in 8 secs."
        };
        if v1 {
            elog(v, "gpu_model_runner.py:1686", done);
        } else {
            log(v, "INFO", "model_runner.py:1530", done);
        }
    }
    if v >= Ver::new(0, 6, 6) {
        let took = t0.elapsed().as_secs_f64();
        let msg =
            format!("init engine (profile, create kv cache, warmup model) took {took:.2} seconds");
        if v1 {
            elog(v, "core.py:159", &msg);
        } else {
            log(v, "INFO", "llm_engine.py:431", &msg);
        }
    }
    Ok(())
}
