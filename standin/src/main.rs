//! A stand-in for a vLLM image's entry points, for nightshift's Docker integration tests.
//! One static binary installed as `python3`, `vllm` and `pip` (whichever the image family
//! has); it dispatches on argv[0] so a plan's commands run unchanged, and fails where a real
//! image fails: no `python`, no vLLM on the path, unknown flags, missing datasets, a client
//! pointed at the wrong port. Facts: shared/spec/real-images.md and
//! shared/spec/vllm-output-formats.md.
//!
//! Environment:
//! * `STANDIN_VERSION` — the vLLM version to impersonate (else the located package's
//!   `version.py`, a script's `# vllm-standin script for vLLM X` header, else 0.8.5).
//! * `STANDIN_FAIL` — `aimv2` (fails at import unless `configs/ovis.py` holds `exist_ok=True`),
//!   `numpy` (fails unless `numpy/version.py` says 1.x; `pip install "numpy<2"` fixes it),
//!   `fa_utils` (`No module named 'vllm.vllm_flash_attn.fa_utils'` at import until the file
//!   exists), `oom` (CUDA OOM while loading), `hang` (CUDA-graph capture never ends), `crash:N`
//!   (server dies N seconds after it is ready), `portbug` (vLLM #8791 on 0.6.2–0.6.x: Errno 98
//!   after "Application startup complete." unless `VLLM_WORKER_MULTIPROC_METHOD=spawn`).
//! * `STANDIN_ERA` — the release whose behaviour to show when the package reports another
//!   version (ISO-Bench human builds report `0.0.0+local`).
//! * A `.standin-catalog.json` in the mounted HF hub cache: models are checked as vLLM
//!   would meet them (see `models.rs`).
//! * `STANDIN_LOAD_MS` — how long "loading the model" takes (default 300).
//! * `STANDIN_ECHO_TOKEN=1` — print `HF_TOKEN` in a startup line (to test redaction).
//! * `STANDIN_MAX_REQUESTS` — requests the serving client really sends (default 32).
//! * `STANDIN_TOKEN_US` — the server's delay per streamed token (default 200 µs).
//! * `STANDIN_MAX_TOKENS` — cap on tokens generated per request (default 256).
//! * `STANDIN_SITE` — the site-packages dir (default /usr/local/lib/python3.12/dist-packages).

mod api;
mod argparse;
mod cli;
mod client;
mod datasets;
mod engine;
mod eras;
mod flags;
mod http;
mod json;
mod metrics;
mod models;
mod offline;
mod pycode;
mod pyenv;
mod results;
mod rng;
mod sender;
mod server;
mod sse;
#[cfg(test)]
mod tests;
mod toolchain;

use std::io::Write;
use std::path::Path;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let prog = Path::new(&args[0])
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let rest = args[1..].to_vec();
    let code = match prog.as_str() {
        p if p.starts_with("python") => python(&rest),
        "vllm" => cli::main(&rest, pyenv::Site::Console),
        p if p.starts_with("pip") => pycode::pip(&rest),
        "apt-get" => toolchain::apt_get(&rest),
        t @ ("nvcc" | "gcc" | "g++" | "cc" | "c++" | "ccache") => toolchain::tool(t, &rest),
        _ => match rest.split_first() {
            // Invoked by its own name: `vllm-standin python3 ...`.
            Some((p, r)) if p.starts_with("python") => python(r),
            Some((p, r)) if p == "vllm" => cli::main(r, pyenv::Site::Console),
            Some((p, r)) if p.starts_with("pip") => pycode::pip(r),
            _ => {
                eprintln!("usage: python3|vllm|pip ARGS");
                2
            }
        },
    };
    let _ = std::io::stdout().flush();
    std::process::exit(code);
}

/// The interpreter: `-V`, `-c CODE`, `-m MODULE`, `SCRIPT`, stdin.
fn python(args: &[String]) -> i32 {
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "-u" | "-B" | "-E" | "-s" | "-S" | "-I" | "-O" | "-OO" | "-q" | "-P" => i += 1,
            "-W" | "-X" => i += 2,
            a if (a.starts_with("-W") || a.starts_with("-X")) && a.len() > 2 => i += 1,
            _ => break,
        }
    }
    let args = &args[i.min(args.len())..];
    let argv0 = std::env::args().next().unwrap_or_else(|| "python3".into());
    match args.first().map(String::as_str) {
        Some("-V" | "--version") => {
            println!("Python 3.12.3");
            0
        }
        Some("-h" | "--help") => {
            println!("usage: {argv0} [option] ... [-c cmd | -m mod | file | -] [arg] ...");
            0
        }
        Some("-c") => match args.get(1) {
            Some(code) => pycode::run_with_args(code, &args[2..]),
            None => {
                eprintln!("Argument expected for the -c option");
                2
            }
        },
        Some("-m") => match args.get(1) {
            Some(m) => module(m, &args[2..]),
            None => {
                eprintln!("Argument expected for the -m option");
                2
            }
        },
        Some("-") | None => {
            let mut code = String::new();
            let _ = std::io::Read::read_to_string(&mut std::io::stdin(), &mut code);
            pycode::run(&code)
        }
        Some(s) if s.starts_with('-') => {
            eprintln!("Unknown option: {s}");
            eprintln!("usage: {argv0} [option] ... [-c cmd | -m mod | file | -] [arg] ...");
            eprintln!("Try `python -h' for more information.");
            2
        }
        Some(script) => run_script(&argv0, script, &args[1..]),
    }
}

fn module(m: &str, rest: &[String]) -> i32 {
    match m {
        "vllm.entrypoints.openai.api_server" | "vllm.entrypoints.api_server" => {
            if let Err(c) = pyenv::import_vllm(pyenv::Site::Module(m)) {
                return c;
            }
            let e = pyenv::Env::detect();
            let p = argparse::Parser::new(
                "api_server.py",
                "vLLM OpenAI-Compatible RESTful API server.",
                flags::server_args(e.ver),
                e.ver >= eras::Ver::new(0, 5, 1),
            );
            match p.parse(rest) {
                Ok(ns) => server::run(&e, &ns, false),
                Err(c) => c,
            }
        }
        "vllm.entrypoints.cli.main" => cli::main(rest, pyenv::Site::Module(m)),
        "pip" => pycode::pip(rest),
        m if m == "vllm" || m.starts_with("vllm.") => {
            if pyenv::locate_vllm().is_none() {
                eprintln!(
                    "{}: Error while finding module specification for '{m}' (ModuleNotFoundError: No module named 'vllm')",
                    pyenv::executable()
                );
            } else {
                eprintln!("{}: No module named {m}", pyenv::executable());
            }
            1
        }
        m => {
            eprintln!("{}: No module named {m}", pyenv::executable());
            1
        }
    }
}

fn run_script(argv0: &str, script: &str, rest: &[String]) -> i32 {
    let abs = pyenv::absolute(script);
    let p = Path::new(&abs);
    if p.is_dir() {
        eprintln!("{argv0}: can't find '__main__' module in '{abs}'");
        return 1;
    }
    if !p.is_file() {
        eprintln!("{argv0}: can't open file '{abs}': [Errno 2] No such file or directory");
        return 2;
    }
    let base = abs.rsplit('/').next().unwrap_or(&abs).to_string();
    let e = pyenv::Env::with_script(Some(p));
    match base.as_str() {
        "benchmark_serving.py" => client::main(&e, rest, Some(&abs)),
        "benchmark_throughput.py" => offline::main(&e, "throughput", rest, Some(&abs)),
        "benchmark_latency.py" => offline::main(&e, "latency", rest, Some(&abs)),
        "benchmark_prefix_caching.py" => offline::main(&e, "prefix_caching", rest, Some(&abs)),
        _ => 0,
    }
}
