//! The serving benchmark client (`benchmarks/benchmark_serving.py`, `vllm bench serve`):
//! strict argparse per era, datasets, real streaming requests against `--base-url` or
//! `--host`/`--port`, and the era's printed result block.
//!
//! Deviation from the real client, to keep a night fast: at most `STANDIN_MAX_REQUESTS`
//! (default 32) of the `--num-prompts` requests are sent; the result block reports what was
//! actually sent and received.

use crate::argparse::{Ns, Parser};
use crate::datasets::{self, Request};
use crate::eras::{self, Era, Ver};
use crate::http;
use crate::json;
use crate::metrics::{self, Out, View};
use crate::pyenv::{env, import_vllm, traceback, Env, Site};
use crate::rng::Rng;
use crate::sender::Sender;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// `script` = the absolute script path (None for `vllm bench serve`).
pub fn main(e: &Env, argv: &[String], script: Option<&str>) -> i32 {
    let v = e.ver;
    let era = eras::serving_era(v);
    let cli = script.is_none();
    if !cli && era == Era::Shim {
        println!("DEPRECATED: This script has been moved to the vLLM CLI. Please use the following command instead: vllm bench serve");
        return 1;
    }
    let path = script.unwrap_or("/usr/local/bin/vllm").to_string();
    let importable = if cli || v >= Ver::new(0, 10, 0) {
        // From v0.10.0 the script imports vllm.benchmarks (spec §5).
        if let Err(c) = import_vllm(Site::Script(
            &path,
            "from vllm.benchmarks.serve import add_cli_args, main",
        )) {
            return c;
        }
        true
    } else {
        crate::pyenv::locate_vllm().is_some()
    };
    let era = if cli && era == Era::Shim {
        Era::V091
    } else {
        era
    };
    let prog = if cli {
        "vllm bench serve"
    } else {
        "benchmark_serving.py"
    };
    let parser = Parser::new(
        prog,
        eras::SERVING_DESCRIPTION,
        eras::serving_args(era, v, cli),
        v >= Ver::new(0, 5, 1) && importable,
    );
    let ns = match parse(&parser, argv, cli, v) {
        Ok(ns) => ns,
        Err(c) => return c,
    };
    if !cli && v >= Ver::new(0, 10, 1) {
        eprintln!("{path}:1: DeprecationWarning: benchmark_serving.py is deprecated and will be removed in a future version. Please use 'vllm bench serve' instead.");
    }
    println!("{}", ns.repr());
    run(e, &ns, era, cli, &path)
}

pub fn tb(path: &str, exc: &str) -> i32 {
    traceback(
        path,
        &[
            ("<module>", 1086, "main(args)", ""),
            ("main", 771, "benchmark_result = asyncio.run(", ""),
        ],
        exc,
    );
    1
}

fn run(e: &Env, ns: &Ns, era: Era, cli: bool, path: &str) -> i32 {
    let v = e.ver;
    let backend = ns
        .str("endpoint_type")
        .or_else(|| ns.str("backend"))
        .unwrap_or_else(|| "vllm".into());
    let mut model = ns
        .str("model")
        .or_else(|| ns.str("tokenizer"))
        .unwrap_or_default();
    if model.is_empty() && cli {
        model = match first_model(ns, path) {
            Ok(m) => m,
            Err(c) => return c,
        };
    }
    let tokenizer = ns.str("tokenizer").unwrap_or_else(|| model.clone());
    let endpoint = ns.str("endpoint").unwrap_or_else(|| "/generate".into());
    let base = match ns.str("base_url") {
        Some(b) => b.trim_end_matches('/').to_string(),
        None => format!(
            "http://{}:{}",
            ns.str("host").unwrap_or_else(|| "localhost".into()),
            ns.int("port").unwrap_or(8000)
        ),
    };
    let api_url = format!("{base}{endpoint}");
    let chat = backend == "openai-chat";
    if era >= Era::V040 {
        if chat && !api_url.ends_with("chat/completions") {
            return tb(
                path,
                "AssertionError: OpenAI Chat Completions API URL must end with 'chat/completions'.",
            );
        }
        if !chat
            && matches!(
                backend.as_str(),
                "vllm" | "openai" | "lmdeploy" | "scalellm" | "sglang"
            )
            && !api_url.ends_with("completions")
            && !api_url.ends_with("profile")
        {
            return tb(path, "AssertionError: OpenAI Completions API URL must end with 'completions' or 'profile'.");
        }
    }
    let goodput = match goodput(ns, path) {
        Ok(g) => g,
        Err(c) => return c,
    };
    if ns.str("ramp_up_strategy").is_some()
        && (ns.int("ramp_up_start_rps").is_none() || ns.int("ramp_up_end_rps").is_none())
    {
        return tb(path, "ValueError: When using ramp-up, both --ramp-up-start-rps and --ramp-up-end-rps must be specified");
    }
    let num = ns.int("num_prompts").unwrap_or(1000).max(0) as usize;
    let mut rng = Rng::new(ns.int("seed").unwrap_or(0) as u64);
    let mut reqs = match datasets::for_serving(ns, era, v, num, &mut rng) {
        Ok(r) => r,
        Err(f) => {
            datasets::report(path, &f);
            return 1;
        }
    };
    let cap: usize = env("STANDIN_MAX_REQUESTS")
        .and_then(|x| x.parse().ok())
        .unwrap_or(32);
    reqs.truncate(cap);
    let request_rate = ns.float("request_rate").unwrap_or(f64::INFINITY);
    let burstiness = ns.float("burstiness").unwrap_or(1.0);
    let max_conc = ns.int("max_concurrency");
    let sender = Arc::new(Sender {
        url: http::parse_url(&api_url),
        model: ns.str("served_model_name").unwrap_or_else(|| model.clone()),
        chat,
        era,
        best_of: ns.int("best_of").unwrap_or(1),
        ignore_eos: ns.flag("ignore_eos") || era == Era::Y2023,
        logprobs: ns.int("logprobs"),
        stream: era > Era::Y2023,
    });
    if era >= Era::V040 && v >= Ver::new(0, 4, 3) {
        let Some(first) = reqs.first().cloned() else {
            return tb(path, "IndexError: list index out of range");
        };
        if let Err(c) = initial_test(&sender, &first, ns, v, cli, path) {
            return c;
        }
    }
    let profile = ns.flag("profile");
    if profile {
        println!("Starting profiler...");
        let _ = http::request(
            &http::parse_url(&format!("{base}/start_profile")),
            "POST",
            "{}",
            &[],
            &mut |_, _| {},
        );
        println!("Profiler started");
    }
    let rate_s = crate::argparse::py_float(request_rate);
    if !cli && v.within(Ver::new(0, 9, 2), Ver::new4(0, 10, 1, 99)) {
        println!("Traffic request rate: {rate_s} RPS.");
    } else {
        println!("Traffic request rate: {rate_s}");
    }
    if v >= Ver::new(0, 6, 4) {
        let dist = if burstiness == 1.0 {
            "Poisson process"
        } else {
            "Gamma distribution"
        };
        println!(
            "Burstiness factor: {} ({dist})",
            crate::argparse::py_float(burstiness)
        );
        println!(
            "Maximum request concurrency: {}",
            max_conc
                .map(|m| m.to_string())
                .unwrap_or_else(|| "None".into())
        );
    }
    let (outs, t0) = fire(&reqs, &sender, ns, &mut rng);
    let duration = t0.elapsed().as_secs_f64();
    if !ns.flag("disable_tqdm") {
        // A tqdm-like line far longer than any log buffer (what a log collector must keep
        // whole); the final unterminated line comes at the very end.
        eprintln!("{}", long_line());
    }
    if era == Era::Y2023 {
        if let Some(o) = outs.iter().find(|o| !o.success) {
            return tb(
                path,
                &format!(
                    "aiohttp.client_exceptions.ClientConnectorError: {}",
                    o.error
                ),
            );
        }
    }
    if profile && v < Ver::new(0, 10, 1) {
        println!("Stopping profiler...");
        println!("Profiler stopped");
    }
    if cli && v >= Ver::new(0, 14, 0) && outs.iter().any(|o| !o.success) {
        println!("Failed requests during benchmark run detected (capping to 10):");
        for (i, o) in outs.iter().filter(|o| !o.success).take(10).enumerate() {
            println!("Error {i}: {}", o.error);
        }
    }
    let s = metrics::summarize(&outs, duration, &goodput, t0);
    if s.completed == 0 && v >= Ver::new(0, 5, 0) {
        eprintln!("{path}:1: UserWarning: All requests failed. This is likely due to a misconfiguration on the benchmark arguments.");
    }
    let view = View {
        ver: v,
        cli,
        max_concurrency: max_conc,
        request_rate,
        metrics: ns
            .str("percentile_metrics")
            .unwrap_or_else(|| "ttft,tpot,itl".into())
            .split(',')
            .map(|m| m.trim().to_string())
            .collect(),
        percentiles: ns
            .str("metric_percentiles")
            .unwrap_or_else(|| "99".into())
            .split(',')
            .filter_map(|p| p.trim().parse().ok())
            .collect(),
    };
    metrics::print_block(&s, &view);
    if profile && v >= Ver::new(0, 10, 1) {
        println!("Stopping profiler...");
        println!("Profiler stopped");
    }
    if cli && v >= Ver::new(0, 11, 0) && s.completed > 0 {
        println!("tip: install termplotlib and gnuplot to plot the metrics");
    }
    if ns.flag("save_result") || ns.flag("append_result") {
        if let Err(c) = crate::results::save(
            ns, v, cli, &backend, &model, &tokenizer, &s, &outs, &view, path,
        ) {
            return c;
        }
    }
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

/// The script's parser; under `vllm bench` unknown flags are the top-level parser's error.
fn parse(p: &Parser, argv: &[String], cli: bool, v: Ver) -> Result<crate::argparse::Ns, i32> {
    if !cli {
        return p.parse(argv);
    }
    let (ns, extra) = p.parse_known(argv)?;
    if !extra.is_empty() {
        return Err(crate::cli::top_error(
            v,
            &format!("unrecognized arguments: {}", extra.join(" ")),
        ));
    }
    Ok(ns)
}

/// `vllm bench serve` 0.14+ without `--model`: the server's first model.
fn first_model(ns: &Ns, path: &str) -> Result<String, i32> {
    // CLI 0.14+: no --model → the server's first model.
    println!("Model not specified, fetching first model from server...");
    let url = match ns.str("base_url") {
        Some(b) => format!("{}/v1/models", b.trim_end_matches('/')),
        None => format!(
            "http://{}:{}/v1/models",
            ns.str("host").unwrap_or_else(|| "127.0.0.1".into()),
            ns.int("port").unwrap_or(8000)
        ),
    };
    let mut body = String::new();
    match http::request(&http::parse_url(&url), "GET", "", &[], &mut |l, _| {
        body.push_str(l)
    }) {
        Ok(r) if r.status == 200 => {
            let id = json::parse(&body)
                .ok()
                .and_then(|j| {
                    j.get("data")?
                        .idx(0)?
                        .get("id")?
                        .as_str()
                        .map(str::to_string)
                })
                .unwrap_or_default();
            println!("First model name: {id}, first model id: {id}");
            Ok(id)
        }
        Ok(r) => Err(tb(
            path,
            &format!(
                "aiohttp.client_exceptions.ClientResponseError: {}, message='{}', url='{url}'",
                r.status, r.reason
            ),
        )),
        Err(e) => Err(tb(
            path,
            &format!("aiohttp.client_exceptions.ClientConnectorError: {e}"),
        )),
    }
}

/// `--goodput KEY:VALUE` pairs (v0.6.4+), validated as the real client does.
fn goodput(ns: &Ns, path: &str) -> Result<Vec<(String, f64)>, i32> {
    let mut goodput = Vec::new();
    for g in ns.list("goodput") {
        let Some((k, val)) = g.split_once(':') else {
            return Err(tb(path, &format!("ValueError: Invalid format found for service level objectives. Specify service level objectives for goodput as \"KEY:VALUE\" pairs, where the key is a metric name, and the value is a number in milliseconds. Got: {g}")));
        };
        if !["ttft", "tpot", "e2el"].contains(&k) {
            return Err(tb(path, &format!("ValueError: Invalid metric name found, {k}: {val}. The service level objective name should be one of ['ttft', 'tpot', 'e2el']. ")));
        }
        match val.parse::<f64>() {
        Ok(x) if x >= 0.0 => goodput.push((k.to_string(), x)),
        _ => return Err(tb(path, &format!("ValueError: Invalid value found, {k}: {val}. The service level objective value should be non-negative."))),
    }
    }
    Ok(goodput)
}

/// The initial single-prompt test (v0.4.3+), or the CLI's endpoint ready check (v0.10.1+).
fn initial_test(
    sender: &Sender,
    first: &Request,
    ns: &Ns,
    v: Ver,
    cli: bool,
    path: &str,
) -> Result<(), i32> {
    if cli && v >= Ver::new(0, 10, 1) {
        let timeout = ns.int("ready_check_timeout_sec").unwrap_or(600);
        if timeout <= 0 {
            println!("Skipping endpoint ready check.");
        } else {
            println!("Waiting for endpoint to become up in {timeout} seconds");
            let deadline = Instant::now() + Duration::from_secs(timeout as u64);
            let mut last = sender.send(first);
            while !last.success && Instant::now() < deadline {
                std::thread::sleep(Duration::from_secs(1));
                last = sender.send(first);
            }
            if !last.success {
                return Err(tb(path, &format!("ValueError: Initial test run failed - Please make sure benchmark arguments are correctly specified. Error: {}", last.error)));
            }
            if v >= Ver::new(0, 11, 1) {
                println!("Initial test run completed.");
            }
        }
        if v >= Ver::new(0, 11, 1) {
            println!("Starting main benchmark run...");
        } else {
            println!("Initial test run completed. Starting main benchmark run...");
        }
    } else {
        println!("Starting initial single prompt test run...");
        let out = sender.send(first);
        if !out.success {
            return Err(tb(path, &format!("ValueError: Initial test run failed - Please make sure benchmark arguments are correctly specified. Error: {}", out.error)));
        }
        println!("Initial test run completed. Starting main benchmark run...");
    }
    Ok(())
}

/// Sends the requests on threads: arrival times from the rate (gamma, shape = burstiness;
/// ramp-up if asked), a semaphore for `--max-concurrency`.
fn fire(reqs: &[Request], sender: &Arc<Sender>, ns: &Ns, rng: &mut Rng) -> (Vec<Out>, Instant) {
    let request_rate = ns.float("request_rate").unwrap_or(f64::INFINITY);
    let burstiness = ns.float("burstiness").unwrap_or(1.0);
    let max_conc = ns.int("max_concurrency");
    // The requests, on threads: arrival times from the rate (gamma, shape = burstiness),
    // a semaphore for --max-concurrency.
    let sem = Arc::new((Mutex::new(max_conc.unwrap_or(i64::MAX)), Condvar::new()));
    let t0 = Instant::now();
    let ramp = ns.str("ramp_up_strategy");
    let (rs, re) = (
        ns.float("ramp_up_start_rps").unwrap_or(1.0),
        ns.float("ramp_up_end_rps").unwrap_or(1.0),
    );
    let n = reqs.len();
    let mut handles = Vec::new();
    for (i, r) in reqs.iter().cloned().enumerate() {
        let rate = match ramp.as_deref() {
            Some("linear") => rs + (re - rs) * i as f64 / n.max(1) as f64,
            Some(_) => rs * (re / rs.max(1e-9)).powf(i as f64 / n.max(1) as f64),
            None => request_rate,
        };
        if i > 0 && rate.is_finite() && rate > 0.0 {
            let gap = rng.gamma(burstiness, 1.0 / (rate * burstiness));
            std::thread::sleep(Duration::from_secs_f64(gap.min(60.0)));
        }
        let (s, sem) = (sender.clone(), sem.clone());
        handles.push(std::thread::spawn(move || {
            {
                let (m, cv) = &*sem;
                let mut free = m.lock().unwrap();
                while *free <= 0 {
                    free = cv.wait(free).unwrap();
                }
                *free -= 1;
            }
            let out = s.send(&r);
            let (m, cv) = &*sem;
            *m.lock().unwrap() += 1;
            cv.notify_one();
            out
        }));
    }
    let outs: Vec<Out> = handles
        .into_iter()
        .map(|h| h.join().unwrap_or_default())
        .collect();
    (outs, t0)
}
