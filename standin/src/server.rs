//! The OpenAI-compatible API server (`python3 -m vllm.entrypoints.openai.api_server`,
//! `vllm serve`): startup lines by era (spec vllm-output-formats.md §5), the port-binding bug
//! (§6), and real HTTP: `/health`, `/v1/models`, `/version`, `/v1/completions` and
//! `/v1/chat/completions`, streamed as SSE one token at a time.

use crate::argparse::Ns;
use crate::engine::{self, log, tag, EngineOpts};
use crate::eras::Ver;
use crate::pyenv::{env, fail_mode, Env};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

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

pub fn install_signal_handlers() {
    // SAFETY: the handler only calls async-signal-safe functions.
    unsafe {
        signal(15, on_term);
        signal(2, on_term);
    }
}

pub struct State {
    pub version: String,
    pub ver: Ver,
    pub names: Vec<String>,
    pub max_model_len: u64,
    pub api_key: Option<String>,
    pub access_log: bool,
}

/// Runs a parsed server command line; `serve` = the `vllm serve` entry point.
pub fn run(e: &Env, ns: &Ns, serve: bool) -> i32 {
    install_signal_handlers();
    let v = e.ver;
    let model = match (serve, ns.str("model_tag")) {
        (true, Some(tag)) => {
            // vllm/scripts.py (v0.5.4–v0.7.2) refuses any --model besides the positional one;
            // from v0.7.3 the positional simply wins.
            let default = Some("facebook/opt-125m".to_string());
            if v.within(Ver::new(0, 5, 4), Ver::new4(0, 7, 2, 99)) && ns.str("model") != default {
                eprintln!("Traceback (most recent call last):");
                eprintln!("  File \"/usr/local/bin/vllm\", line 8, in <module>");
                eprintln!("    sys.exit(main())");
                eprintln!("ValueError: With `vllm serve`, you should provide the model as a positional argument instead of via the `--model` option.");
                return 1;
            }
            tag
        }
        _ => ns
            .str("model")
            .unwrap_or_else(|| "facebook/opt-125m".into()),
    };
    let port = ns.int("port").unwrap_or(8000) as u16;
    let host = ns.str("host");
    let shown_host = host.clone().unwrap_or_else(|| "0.0.0.0".into());
    engine::platform(v);
    if v >= Ver::new(0, 15, 0) {
        for l in ["", "       █     █     █▄   ▄█"] {
            log(v, "INFO", "api_server.py:538", l);
        }
        log(
            v,
            "INFO",
            "api_server.py:538",
            &format!(" ▄▄ ▄█ █     █     █ ▀▄▀ █  version {}", e.version),
        );
        log(
            v,
            "INFO",
            "api_server.py:538",
            &format!("  █▄█▀ █     █     █     █  model   {model}"),
        );
        log(v, "INFO", "api_server.py:538", "   ▀▀  ▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀");
        log(v, "INFO", "api_server.py:538", "");
    } else if v >= Ver::new(0, 4, 0) {
        log(
            v,
            "INFO",
            "api_server.py:1043",
            &format!("vLLM API server version {}", e.version),
        );
    }
    if v >= Ver::new(0, 9, 0) {
        let mut kv = vec![];
        if serve {
            kv.push(format!("'model_tag': '{model}'"));
        }
        for (d, val) in &ns.items {
            if ns.given(d) && d != "model_tag" {
                kv.push(format!("'{d}': {}", val.repr()));
            }
        }
        log(
            v,
            "INFO",
            "utils.py:233",
            &format!("non-default args: {{{}}}", kv.join(", ")),
        );
    } else {
        log(
            v,
            "INFO",
            "api_server.py:1044",
            &format!("args: {}", ns.repr()),
        );
    }
    let opts = EngineOpts::from_ns(model.clone(), ns);
    if let Err(c) = engine::load_engine(e, &opts) {
        return c;
    }
    let quiet = matches!(
        ns.str("uvicorn_log_level").as_deref(),
        Some("warning" | "error" | "critical")
    );
    let t = tag(v, "APIServer");
    let uv = |msg: &str| {
        if !quiet {
            eprintln!("{t}INFO:     {msg}");
        }
    };
    let pid = std::process::id();
    let port_bug = fail_mode() == "portbug"
        && v.within(Ver::new(0, 6, 2), Ver::new4(0, 6, 99, 99))
        && env("VLLM_WORKER_MULTIPROC_METHOD").as_deref() != Some("spawn");
    if port_bug {
        uv(&format!("Started server process [{pid}]"));
        uv("Waiting for application startup.");
        uv("Application startup complete.");
        eprintln!("{t}ERROR:    [Errno 98] error while attempting to bind on address ('{shown_host}', {port}): address already in use");
        uv("Waiting for application shutdown.");
        uv("Application shutdown complete.");
        return 1;
    }
    let bind_host = host.clone().unwrap_or_else(|| "0.0.0.0".into());
    let bind_host = if bind_host == "localhost" {
        "127.0.0.1".into()
    } else {
        bind_host
    };
    let listener = match TcpListener::bind((bind_host.as_str(), port)) {
        Ok(l) => l,
        Err(err) => {
            let why = if err.kind() == std::io::ErrorKind::AddrInUse {
                "address already in use".to_string()
            } else {
                err.to_string()
            };
            if v >= Ver::new(0, 7, 3) {
                eprintln!("{t}Traceback (most recent call last):");
                eprintln!("{t}  File \"{}/entrypoints/openai/api_server.py\", line 1041, in create_server_socket", e.pkg_str());
                eprintln!("{t}    sock.bind(addr)");
                eprintln!("{t}OSError: [Errno 98] Address already in use");
            } else {
                uv(&format!("Started server process [{pid}]"));
                uv("Waiting for application startup.");
                uv("Application startup complete.");
                eprintln!("{t}ERROR:    [Errno 98] error while attempting to bind on address ('{shown_host}', {port}): {why}");
            }
            return 1;
        }
    };
    if v >= Ver::new(0, 18, 0) {
        log(
            v,
            "INFO",
            "api_server.py:602",
            &format!("Starting vLLM server on http://{shown_host}:{port}"),
        );
    } else if v >= Ver::new(0, 9, 1) {
        log(
            v,
            "INFO",
            "api_server.py:1912",
            &format!("Starting vLLM API server 0 on http://{shown_host}:{port}"),
        );
    } else if v >= Ver::new(0, 7, 3) {
        log(
            v,
            "INFO",
            "api_server.py:1090",
            &format!("Starting vLLM API server on http://{shown_host}:{port}"),
        );
    }
    if v >= Ver::new(0, 5, 2) {
        log(v, "INFO", "launcher.py:34", "Available routes are:");
        for (r, m) in [
            ("/health", "GET"),
            ("/version", "GET"),
            ("/v1/models", "GET"),
            ("/v1/chat/completions", "POST"),
            ("/v1/completions", "POST"),
        ] {
            log(
                v,
                "INFO",
                "launcher.py:42",
                &format!("Route: {r}, Methods: {m}"),
            );
        }
    }
    uv(&format!("Started server process [{pid}]"));
    uv("Waiting for application startup.");
    uv("Application startup complete.");
    if v < Ver::new(0, 7, 3) {
        if v.within(Ver::new(0, 6, 3), Ver::new4(0, 6, 3, 99)) {
            uv(&format!(
                "Uvicorn running on socket ('{shown_host}', {port}) (Press CTRL+C to quit)"
            ));
        } else {
            uv(&format!(
                "Uvicorn running on http://{shown_host}:{port} (Press CTRL+C to quit)"
            ));
        }
    }
    if let Some(secs) = fail_mode()
        .strip_prefix("crash:")
        .and_then(|s| s.parse::<f64>().ok())
    {
        let t = t.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs_f64(secs));
            eprintln!(
                "{t}ERROR {} [core.py:387] EngineCore encountered a fatal error.",
                engine::timestamp()
            );
            eprintln!("{t}Traceback (most recent call last):");
            eprintln!("{t}RuntimeError: Worker failed with error 'CUDA error: an illegal memory access was encountered', please check the stack trace above for the root cause");
            std::process::exit(1);
        });
    }
    let mut names = ns.list("served_model_name");
    if names.is_empty() {
        names.push(model);
    }
    let state = Arc::new(State {
        version: e.version.clone(),
        ver: v,
        names,
        max_model_len: opts.max_model_len,
        api_key: ns.str("api_key").or_else(|| env("VLLM_API_KEY")),
        access_log: !quiet,
    });
    for conn in listener.incoming().flatten() {
        let st = state.clone();
        std::thread::spawn(move || crate::api::handle(conn, &st));
    }
    0
}
