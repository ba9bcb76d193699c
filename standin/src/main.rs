//! A stand-in for a vLLM image's entry points, for nightshift's Docker integration tests.
//! One static binary installed as `python`, `python3`, `vllm` and `pip`; it dispatches on
//! argv[0] so a plan's commands run unchanged. It prints vLLM's real line formats
//! (shared/spec/vllm-output-formats.md §1, §5), serves `/health`, `/v1/models`, `/version`,
//! and fails the ways the seed reports did when told to by the environment:
//!
//! * `STANDIN_VERSION` — the vLLM version to impersonate (log layout follows it).
//! * `STANDIN_FAIL` — `aimv2` (fails at import unless `configs/ovis.py` holds `exist_ok=True`),
//!   `numpy` (fails unless `numpy/version.py` says 1.x; `pip install "numpy<2"` fixes it),
//!   `oom` (CUDA OOM while loading), `hang` (CUDA-graph capture never ends), `crash:N`
//!   (server dies N seconds after it is ready), `portbug` (vLLM #8791 on 0.6.x: Errno 98
//!   after "Application startup complete." unless `VLLM_WORKER_MULTIPROC_METHOD=spawn`).
//! * `STANDIN_LOAD_MS` — how long "loading the model" takes (default 300).
//! * `STANDIN_ECHO_TOKEN=1` — print `HF_TOKEN` in a startup line (to test redaction).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

const SITE: &str = "/usr/local/lib/python3.12/dist-packages";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let prog = Path::new(&args[0])
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let rest = args[1..].to_vec();
    let code = match prog.as_str() {
        p if p.starts_with("python") => python(&rest),
        "vllm" => vllm(&rest),
        "pip" | "pip3" => pip(&rest),
        _ => {
            // Invoked by its own name: `vllm-standin python3 ...`.
            match rest.split_first() {
                Some((p, r)) if p.starts_with("python") => python(r),
                Some((p, r)) if p == "vllm" => vllm(r),
                _ => {
                    eprintln!("usage: python3|vllm|pip ARGS");
                    2
                }
            }
        }
    };
    let _ = std::io::stdout().flush();
    std::process::exit(code);
}

fn python(args: &[String]) -> i32 {
    match args.first().map(String::as_str) {
        Some("-m") => match args.get(1).map(String::as_str) {
            Some("vllm.entrypoints.openai.api_server") => server(&args[2..], None),
            Some("vllm.entrypoints.cli.main") => vllm(&args[2..]),
            Some(m) => {
                eprintln!("/usr/bin/python3: No module named {m}");
                1
            }
            None => {
                eprintln!("Argument expected for the -m option");
                2
            }
        },
        Some("-c") => {
            // Only what nightshift's helpers ask: where the vllm package is installed.
            let code = args.get(1).map(String::as_str).unwrap_or("");
            if code.contains("vllm") && (code.contains("find_spec") || code.contains("__file__")) {
                if code.contains("dirname(os.path.dirname(") {
                    println!("{SITE}");
                } else {
                    println!("{SITE}/vllm");
                }
            }
            0
        }
        Some(script) => {
            if !Path::new(script).is_file() {
                eprintln!(
                    "python3: can't open file '{script}': [Errno 2] No such file or directory"
                );
                return 2;
            }
            let base = script.rsplit('/').next().unwrap_or(script);
            match base {
                "benchmark_serving.py" => serving_client(&args[1..]),
                "benchmark_throughput.py" => offline("throughput", &args[1..]),
                "benchmark_latency.py" => offline("latency", &args[1..]),
                "benchmark_prefix_caching.py" => offline("prefix_caching", &args[1..]),
                _ => 0,
            }
        }
        None => 0,
    }
}

fn vllm(args: &[String]) -> i32 {
    match (
        args.first().map(String::as_str),
        args.get(1).map(String::as_str),
    ) {
        (Some("serve"), Some(model)) if !model.starts_with('-') => {
            server(&args[2..], Some(model.to_string()))
        }
        (Some("serve"), _) => server(&args[1..], None),
        (Some("bench"), Some("serve")) => serving_client(&args[2..]),
        (Some("bench"), Some(kind @ ("throughput" | "latency"))) => offline(kind, &args[2..]),
        (Some("--version"), _) => {
            println!("{}", version());
            0
        }
        _ => {
            eprintln!("usage: vllm serve MODEL | vllm bench serve|throughput|latency");
            2
        }
    }
}

/// Only what the `numpy-lt-2` recipe needs: `pip install "numpy<2"` pins NumPy 1.26.4.
fn pip(args: &[String]) -> i32 {
    if args.first().map(String::as_str) == Some("install")
        && args
            .iter()
            .any(|a| a.starts_with("numpy<2") || a == "numpy==1.26.4")
    {
        let dir = format!("{SITE}/numpy");
        let _ = std::fs::create_dir_all(&dir);
        if let Err(e) = std::fs::write(format!("{dir}/version.py"), "version = \"1.26.4\"\n") {
            eprintln!("ERROR: could not install packages: {e}");
            return 1;
        }
        println!("Successfully installed numpy-1.26.4");
        return 0;
    }
    println!("Requirement already satisfied");
    0
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn version() -> String {
    env("STANDIN_VERSION").unwrap_or_else(|| "0.8.5".into())
}

fn version_tuple() -> (u32, u32, u32) {
    let v = version();
    let mut it = v
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap_or(0));
    (
        it.next().unwrap_or(0),
        it.next().unwrap_or(0),
        it.next().unwrap_or(0),
    )
}

fn fail_mode() -> String {
    env("STANDIN_FAIL").unwrap_or_default()
}

fn flag(args: &[String], name: &str) -> Option<String> {
    let eq = format!("{name}=");
    let mut i = 0;
    while i < args.len() {
        if args[i] == name {
            return args.get(i + 1).cloned();
        }
        if let Some(v) = args[i].strip_prefix(&eq) {
            return Some(v.to_string());
        }
        i += 1;
    }
    None
}

/// `INFO 04-25 07:45:43 [api_server.py:1043] msg` from v0.8.0, unbracketed before.
fn log(level: &str, file: &str, msg: &str) {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (h, m, s) = ((secs / 3600) % 24, (secs / 60) % 60, secs % 60);
    let ts = format!("11-22 {h:02}:{m:02}:{s:02}");
    let line = if version_tuple() >= (0, 8, 0) {
        format!("{level} {ts} [{file}] {msg}")
    } else {
        format!("{level} {ts} {file}] {msg}")
    };
    println!("{line}");
    let _ = std::io::stdout().flush();
}

fn pause(frac: u64) {
    let total: u64 = env("STANDIN_LOAD_MS")
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    std::thread::sleep(Duration::from_millis(total * frac / 100));
}

/// What importing vLLM does in a rotten image.
fn import_vllm() -> Result<(), i32> {
    let mode = fail_mode();
    if mode == "aimv2" {
        let path = format!("{SITE}/vllm/transformers_utils/configs/ovis.py");
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        if !text.contains("exist_ok=True") {
            eprintln!("Traceback (most recent call last):");
            eprintln!("  File \"{path}\", line 75, in <module>");
            eprintln!("    AutoConfig.register(\"aimv2\", AIMv2Config)");
            eprintln!(
                "ValueError: 'aimv2' is already used by a Transformers config, pick another name."
            );
            return Err(1);
        }
    }
    if mode == "numpy" {
        let text = std::fs::read_to_string(format!("{SITE}/numpy/version.py")).unwrap_or_default();
        if !text.contains("\"1.") {
            eprintln!("A module that was compiled using NumPy 1.x cannot be run in");
            eprintln!("NumPy 2.2.6 as it may crash. To support both 1.x and 2.x");
            eprintln!("versions of NumPy, modules must be compiled with NumPy 2.0.");
            eprintln!("Traceback (most recent call last):");
            eprintln!("ImportError: numpy.core.multiarray failed to import");
            return Err(1);
        }
    }
    Ok(())
}

/// Engine construction, weights, KV cache, CUDA graphs: shared by the server and the
/// in-process benchmarks.
fn load_engine(model: &str) -> Result<(), i32> {
    let v = version();
    let v1 = version_tuple() >= (0, 8, 0);
    if version_tuple() >= (0, 7, 0) {
        log(
            "INFO",
            "__init__.py:239",
            "Automatically detected platform cuda.",
        );
    }
    if let (Some(tok), Some(_)) = (env("HF_TOKEN"), env("STANDIN_ECHO_TOKEN")) {
        log("DEBUG", "envs.py:112", &format!("HF_TOKEN={tok}"));
    }
    let engine = if v1 {
        "a V1 LLM engine"
    } else {
        "an LLM engine"
    };
    log(
        "INFO",
        if v1 { "core.py:58" } else { "llm_engine.py:169" },
        &format!("Initializing {engine} (v{v}) with config: model='{model}', tokenizer='{model}', seed=0"),
    );
    pause(30);
    let gb = if version_tuple() >= (0, 8, 3) {
        "GiB"
    } else {
        "GB"
    };
    if v1 {
        log(
            "INFO",
            "gpu_model_runner.py:1329",
            &format!("Model loading took 14.9889 {gb} and 3.210000 seconds"),
        );
    } else {
        log(
            "INFO",
            "model_runner.py:255",
            &format!("Loading model weights took 14.9889 {gb}"),
        );
    }
    if fail_mode() == "oom" {
        eprintln!("Traceback (most recent call last):");
        eprintln!(
            "  File \"{SITE}/vllm/worker/worker.py\", line 229, in determine_num_available_blocks"
        );
        eprintln!("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 7.31 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.02 GiB is free. Process 1 has 78.16 GiB memory in use.");
        return Err(1);
    }
    pause(30);
    if v1 {
        log(
            "INFO",
            "kv_cache_utils.py:634",
            "GPU KV cache size: 425,424 tokens",
        );
        log(
            "INFO",
            "kv_cache_utils.py:637",
            "Maximum concurrency for 32,768 tokens per request: 12.98x",
        );
    } else {
        log(
            "INFO",
            "gpu_executor.py:84",
            "# GPU blocks: 7281, # CPU blocks: 512",
        );
        log("INFO", "model_runner.py:1404", "Capturing cudagraphs for decoding. This may lead to unexpected consequences if the model is not static. To run the model in eager mode, set 'enforce_eager=True' or use '--enforce-eager' in the CLI.");
    }
    if fail_mode() == "hang" {
        eprintln!("Capturing CUDA graph shapes:  37%|███▋      | 13/35 [00:04<00:07,  2.95it/s]");
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    pause(30);
    log(
        "INFO",
        if v1 {
            "gpu_model_runner.py:1686"
        } else {
            "model_runner.py:1530"
        },
        "Graph capturing finished in 8 secs, took 0.52 GiB",
    );
    Ok(())
}

extern "C" {
    fn signal(sig: i32, handler: extern "C" fn(i32)) -> usize;
    fn write(fd: i32, buf: *const u8, n: usize) -> isize;
    fn _exit(code: i32) -> !;
}

/// SIGTERM/SIGINT: uvicorn's shutdown lines, then exit 0 (as PID 1 the default action
/// would be to ignore SIGTERM and wait for Docker's SIGKILL). Only async-signal-safe calls.
extern "C" fn on_term(_: i32) {
    let msg = b"INFO:     Shutting down\nINFO:     Finished server process\n";
    unsafe {
        write(2, msg.as_ptr(), msg.len());
        _exit(0)
    }
}

fn server(args: &[String], positional: Option<String>) -> i32 {
    // SAFETY: installs a handler that only calls async-signal-safe functions.
    unsafe {
        signal(15, on_term);
        signal(2, on_term);
    }
    if let Err(c) = import_vllm() {
        return c;
    }
    let model = positional
        .or_else(|| flag(args, "--model"))
        .unwrap_or_else(|| "facebook/opt-125m".into());
    let port: u16 = flag(args, "--port")
        .and_then(|p| p.parse().ok())
        .unwrap_or(8000);
    let v = version();
    let vt = version_tuple();
    log(
        "INFO",
        "api_server.py:1043",
        &format!("vLLM API server version {v}"),
    );
    if vt >= (0, 9, 0) {
        log(
            "INFO",
            "api_server.py:1044",
            &format!("non-default args: {{'model': '{model}', 'port': {port}}}"),
        );
    } else {
        log(
            "INFO",
            "api_server.py:1044",
            &format!("args: Namespace(host=None, port={port}, model='{model}')"),
        );
    }
    if let Err(c) = load_engine(&model) {
        return c;
    }
    let pid = std::process::id();
    let port_bug = fail_mode() == "portbug"
        && ((0, 6, 2)..(0, 7, 0)).contains(&vt)
        && env("VLLM_WORKER_MULTIPROC_METHOD").as_deref() != Some("spawn");
    if port_bug {
        eprintln!("INFO:     Started server process [{pid}]");
        eprintln!("INFO:     Waiting for application startup.");
        eprintln!("INFO:     Application startup complete.");
        eprintln!("ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', {port}): address already in use");
        eprintln!("INFO:     Waiting for application shutdown.");
        eprintln!("INFO:     Application shutdown complete.");
        return 1;
    }
    let listener = match TcpListener::bind(("0.0.0.0", port)) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', {port}): {e}");
            return 1;
        }
    };
    if vt >= (0, 7, 3) {
        log(
            "INFO",
            "api_server.py:1090",
            &format!("Starting vLLM API server on http://0.0.0.0:{port}"),
        );
    }
    eprintln!("INFO:     Started server process [{pid}]");
    eprintln!("INFO:     Waiting for application startup.");
    eprintln!("INFO:     Application startup complete.");
    if vt < (0, 7, 3) {
        eprintln!("INFO:     Uvicorn running on http://0.0.0.0:{port} (Press CTRL+C to quit)");
    }
    if let Some(secs) = fail_mode()
        .strip_prefix("crash:")
        .and_then(|s| s.parse::<f64>().ok())
    {
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs_f64(secs));
            eprintln!("ERROR 11-22 00:00:00 [core.py:387] EngineCore encountered a fatal error.");
            eprintln!("Traceback (most recent call last):");
            eprintln!("RuntimeError: Worker failed with error 'CUDA error: an illegal memory access was encountered', please check the stack trace above for the root cause");
            std::process::exit(1);
        });
    }
    for conn in listener.incoming().flatten() {
        let model = model.clone();
        std::thread::spawn(move || handle(conn, &model));
    }
    0
}

fn handle(mut conn: TcpStream, model: &str) {
    let peer = conn.peer_addr().map(|a| a.to_string()).unwrap_or_default();
    let mut reader = BufReader::new(conn.try_clone().expect("clone socket"));
    loop {
        let mut request = String::new();
        if reader.read_line(&mut request).unwrap_or(0) == 0 {
            return;
        }
        let mut content_length = 0usize;
        let mut close = request.contains("HTTP/1.0");
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let lower = h.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix("content-length:") {
                content_length = v.trim().parse().unwrap_or(0);
            }
            if lower.starts_with("connection: close") {
                close = true;
            }
            if h == "\r\n" || h == "\n" {
                break;
            }
        }
        let mut body = vec![0u8; content_length];
        let _ = reader.read_exact(&mut body);
        let mut parts = request.split_whitespace();
        let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let (status, payload) = match (method, path) {
            ("GET", "/health") => ("200 OK", String::new()),
            ("GET", "/v1/models") => ("200 OK", format!("{{\"object\":\"list\",\"data\":[{{\"id\":\"{model}\",\"object\":\"model\",\"owned_by\":\"vllm\",\"root\":\"{model}\",\"max_model_len\":32768}}]}}")),
            ("GET", "/version") => ("200 OK", format!("{{\"version\":\"{}\"}}", version())),
            ("POST", "/v1/completions") => ("200 OK", format!("{{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"model\":\"{model}\",\"choices\":[{{\"index\":0,\"text\":\" hello\",\"finish_reason\":\"length\"}}],\"usage\":{{\"prompt_tokens\":215,\"completion_tokens\":198,\"total_tokens\":413}}}}")),
            _ => ("404 Not Found", "{\"detail\":\"Not Found\"}".to_string()),
        };
        println!("INFO:     {peer} - \"{method} {path} HTTP/1.1\" {status}");
        let resp = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{}\r\n{payload}",
            payload.len(),
            if close { "connection: close\r\n" } else { "" }
        );
        if conn.write_all(resp.as_bytes()).is_err() || close {
            return;
        }
    }
}

/// One HTTP/1.0 request; the status code and the time it took.
fn request(host: &str, port: u16, method: &str, path: &str) -> Result<(u16, Duration), String> {
    let t = Instant::now();
    let mut s = TcpStream::connect((host, port))
        .map_err(|e| format!("Cannot connect to host {host}:{port} ssl:default [{e}]"))?;
    let body = if method == "POST" {
        "{\"prompt\":\"hi\",\"max_tokens\":198}"
    } else {
        ""
    };
    write!(
        s,
        "{method} {path} HTTP/1.0\r\nHost: {host}\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .map_err(|e| e.to_string())?;
    let mut out = String::new();
    s.read_to_string(&mut out).map_err(|e| e.to_string())?;
    let code = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok((code, t.elapsed()))
}

fn row(label: &str, value: String) -> String {
    format!("{label:<40} {value:<10}")
}

fn serving_client(args: &[String]) -> i32 {
    let host = flag(args, "--host").unwrap_or_else(|| "127.0.0.1".into());
    let host = if host == "localhost" {
        "127.0.0.1".to_string()
    } else {
        host
    };
    let port: u16 = flag(args, "--port")
        .and_then(|p| p.parse().ok())
        .unwrap_or(8000);
    let n: usize = flag(args, "--num-prompts")
        .and_then(|p| p.parse().ok())
        .unwrap_or(1000);
    let model = flag(args, "--model").unwrap_or_default();
    println!(
        "Namespace(backend='vllm', host='{host}', port={port}, model='{model}', num_prompts={n})"
    );
    println!("Starting initial single prompt test run...");
    if let Err(e) = request(&host, port, "POST", "/v1/completions") {
        eprintln!("Traceback (most recent call last):");
        eprintln!("aiohttp.client_exceptions.ClientConnectorError: {e}");
        eprintln!("ValueError: Initial test run failed - Please make sure benchmark arguments are correctly specified. Error: {e}");
        return 1;
    }
    println!("Initial test run completed. Starting main benchmark run...");
    println!("Traffic request rate: inf");
    println!("Burstiness factor: 1.0 (Poisson process)");
    println!("Maximum request concurrency: None");
    let t = Instant::now();
    let mut lat = Vec::new();
    let mut ok = 0usize;
    for _ in 0..n.min(200) {
        if let Ok((200, d)) = request(&host, port, "POST", "/v1/completions") {
            ok += 1;
            lat.push(d.as_secs_f64() * 1000.0);
        }
    }
    // A tqdm-like line far longer than any log buffer, then a last line with no newline:
    // what a log collector must keep whole.
    eprintln!("{}", long_line());
    let dur = t.elapsed().as_secs_f64().max(1e-3);
    lat.sort_by(|a, b| a.total_cmp(b));
    let mean = lat.iter().sum::<f64>() / lat.len().max(1) as f64;
    let med = lat.get(lat.len() / 2).copied().unwrap_or(0.0);
    let p99 = lat.last().copied().unwrap_or(0.0);
    let (inp, outp) = (215 * ok, 198 * ok);
    println!("============ Serving Benchmark Result ============");
    println!("{}", row("Successful requests:", ok.to_string()));
    println!("{}", row("Benchmark duration (s):", format!("{dur:.2}")));
    println!("{}", row("Total input tokens:", inp.to_string()));
    println!("{}", row("Total generated tokens:", outp.to_string()));
    println!(
        "{}",
        row(
            "Request throughput (req/s):",
            format!("{:.2}", ok as f64 / dur)
        )
    );
    println!(
        "{}",
        row(
            "Output token throughput (tok/s):",
            format!("{:.2}", outp as f64 / dur)
        )
    );
    println!(
        "{}",
        row(
            "Total Token throughput (tok/s):",
            format!("{:.2}", (inp + outp) as f64 / dur)
        )
    );
    for (title, short, scale) in [
        ("Time to First Token", "TTFT", 1.0),
        ("Time per Output Token (excl. 1st token)", "TPOT", 0.01),
        ("Inter-token Latency", "ITL", 0.01),
    ] {
        println!("{:-^50}", title);
        println!(
            "{}",
            row(
                &format!("Mean {short} (ms):"),
                format!("{:.2}", mean * scale)
            )
        );
        println!(
            "{}",
            row(
                &format!("Median {short} (ms):"),
                format!("{:.2}", med * scale)
            )
        );
        println!(
            "{}",
            row(&format!("P99 {short} (ms):"), format!("{:.2}", p99 * scale))
        );
    }
    println!("{}", "=".repeat(50));
    eprint!("benchmark finished (no newline at end)");
    0
}

fn long_line() -> String {
    let mut s = String::from("100%|");
    while s.len() < 200_000 {
        s.push_str("██████████");
    }
    s.push_str("| 200/200 [00:01<00:00, 199.00it/s]");
    s
}

fn offline(kind: &str, args: &[String]) -> i32 {
    if let Err(c) = import_vllm() {
        return c;
    }
    let model = flag(args, "--model").unwrap_or_else(|| "facebook/opt-125m".into());
    println!("Namespace(model='{model}')");
    if let Err(c) = load_engine(&model) {
        return c;
    }
    match kind {
        "throughput" => {
            println!(
                "Throughput: 24.61 requests/s, 10759.51 total tokens/s, 5272.16 output tokens/s"
            );
            // As vLLM's --output-json (4-space indent, total tokens/s), with more digits
            // than the printed line so a test can tell which one was read.
            if let Some(path) = flag(args, "--output-json") {
                let json = "{\n    \"elapsed_time\": 8.126,\n    \"num_requests\": 200,\n    \"total_num_tokens\": 87433,\n    \"requests_per_second\": 24.6123456789,\n    \"tokens_per_second\": 10759.5123456\n}\n";
                if let Err(e) = std::fs::write(&path, json) {
                    eprintln!("cannot write {path}: {e}");
                    return 1;
                }
            }
        }
        "latency" => {
            println!("Warming up...");
            println!("Avg latency: 1.7312 seconds");
            for (p, v) in [
                (10, 1.69),
                (25, 1.71),
                (50, 1.73),
                (75, 1.75),
                (90, 1.76),
                (99, 1.81),
            ] {
                println!("{p}% percentile latency: {v} seconds");
            }
        }
        _ => {
            println!("Testing filtered requests");
            println!("------start generating------");
            println!("cost time 12.913");
        }
    }
    0
}
