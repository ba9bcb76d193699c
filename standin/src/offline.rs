//! The in-process benchmarks (`benchmark_throughput.py`, `benchmark_latency.py`,
//! `benchmark_prefix_caching.py`, `vllm bench throughput|latency`): import vLLM, parse the
//! era's flags, load the engine, print the era's result lines (spec
//! vllm-output-formats.md §2–§4). No GPU work happens: the throughput figure is fixed at
//! 24.61 req/s (tests key on it); token counts follow the requested dataset.

use crate::argparse::{py_float, Ns, Parser};
use crate::datasets::{self, Request};
use crate::engine::{self, EngineOpts};
use crate::eras::Ver;
use crate::flags;
use crate::json;
use crate::pyenv::{import_vllm, traceback, Env, Site};
use crate::rng::Rng;

const REQ_PER_S: f64 = 24.6123456789;

fn prog(kind: &str, cli: bool) -> String {
    match (kind, cli) {
        (k, true) => format!("vllm bench {k}"),
        (k, false) => format!("benchmark_{k}.py"),
    }
}

/// `script` = the absolute script path (None for `vllm bench`).
pub fn main(e: &Env, kind: &str, argv: &[String], script: Option<&str>) -> i32 {
    let v = e.ver;
    let cli = script.is_none();
    if !cli && kind != "prefix_caching" && v >= Ver::new(0, 10, 2) {
        println!("DEPRECATED: This script has been moved to the vLLM CLI. Please use the following command instead: vllm bench {kind}");
        return 1;
    }
    let path = script.unwrap_or("/usr/local/bin/vllm").to_string();
    let at = if cli {
        Site::Console
    } else {
        Site::Script(&path, "from vllm import LLM, SamplingParams")
    };
    if let Err(c) = import_vllm(at) {
        return c;
    }
    let desc = match kind {
        "throughput" => "Benchmark the throughput.",
        "latency" => {
            "Benchmark the latency of processing a single batch of requests till completion."
        }
        _ => "Benchmark the performance with or without automatic prefix caching.",
    };
    let parser = Parser::new(
        &prog(kind, cli),
        desc,
        flags::offline_args(kind, v, cli),
        v >= Ver::new(0, 5, 1),
    );
    let ns = match parse(&parser, argv, cli, v) {
        Ok(ns) => ns,
        Err(c) => return c,
    };
    engine::platform(v);
    if !cli {
        println!("{}", ns.repr());
    }
    match kind {
        "throughput" => throughput(e, &ns, &path),
        "latency" => latency(e, &ns, cli),
        _ => prefix_caching(e, &ns, &path),
    }
}

fn tb(path: &str, func: &str, code: &str, exc: &str) -> i32 {
    traceback(
        path,
        &[
            ("<module>", 612, "main(args)", ""),
            ("main", 470, code, ""),
            (func, 0, "...", ""),
        ],
        exc,
    );
    1
}

fn load(e: &Env, ns: &Ns) -> Result<(), i32> {
    let model = ns
        .str("model")
        .unwrap_or_else(|| "facebook/opt-125m".into());
    engine::load_engine(e, &EngineOpts::from_ns(model, ns))
}

fn bar(label: &str, n: usize) {
    eprintln!("{label}: 100%|██████████| {n}/{n} [00:08<00:00, 24.61it/s, est. speed input: 5487.35 toks/s, output: 5272.16 toks/s]");
}

fn throughput(e: &Env, ns: &Ns, path: &str) -> i32 {
    let v = e.ver;
    let num = ns.int("num_prompts").unwrap_or(1000).max(0) as usize;
    let mut rng = Rng::new(ns.int("seed").unwrap_or(0) as u64);
    let input_len = ns.int("input_len");
    let output_len = ns.int("output_len");
    let reqs: Vec<Request> = if v < Ver::new(0, 8, 0) {
        match ns.str("dataset") {
            None => {
                if input_len.is_none() {
                    return tb(
                        path,
                        "main",
                        "assert args.input_len is not None",
                        "AssertionError",
                    );
                }
                if output_len.is_none() {
                    return tb(
                        path,
                        "main",
                        "assert args.output_len is not None",
                        "AssertionError",
                    );
                }
                let (i, o) = (
                    input_len.unwrap_or(0) as u64,
                    output_len.unwrap_or(0) as u64,
                );
                (0..num)
                    .map(|_| Request {
                        prompt: "hi ".repeat(i as usize),
                        prompt_len: i,
                        output_len: o,
                    })
                    .collect()
            }
            Some(p) => {
                match datasets::sharegpt(&p, num, output_len.map(|o| o as u64), &mut rng, false) {
                    Ok(r) => r,
                    Err(f) => {
                        return tb(
                            path,
                            f.func,
                            "requests = sample_requests(args.dataset, args.num_prompts, tokenizer,",
                            &f.exc,
                        )
                    }
                }
            }
        }
    } else {
        let dpath = ns.str("dataset_path").or_else(|| ns.str("dataset"));
        let mut name = ns.str("dataset_name").unwrap_or_else(|| "sharegpt".into());
        if dpath.is_none() {
            println!("When dataset path is not set, it will default to random dataset");
            name = "random".into();
        }
        match (name.as_str(), dpath) {
            ("random", _) => {
                if input_len.is_none() {
                    return tb(
                        path,
                        "get_requests",
                        "requests = get_requests(args, tokenizer)",
                        "ValueError: input_len must be provided for a random dataset",
                    );
                }
                let mut n2 = ns.clone();
                n2.set(
                    "output_len",
                    crate::argparse::Val::Int(output_len.unwrap_or(128)),
                );
                datasets::random(
                    &n2,
                    num,
                    v,
                    &mut rng,
                    [
                        "input_len",
                        "output_len",
                        "prefix_len",
                        "random_range_ratio",
                    ],
                )
            }
            (_, None) => unreachable!(),
            ("hf", Some(p)) => {
                let f = datasets::hf(&p);
                return tb(
                    path,
                    f.func,
                    "requests = get_requests(args, tokenizer)",
                    &f.exc,
                );
            }
            ("sonnet", Some(p)) => match datasets::sonnet(
                &p,
                num,
                input_len.unwrap_or(550) as u64,
                output_len.unwrap_or(150) as u64,
                ns.int("prefix_len").unwrap_or(200) as u64,
                &mut rng,
            ) {
                Ok(r) => r,
                Err(f) => {
                    return tb(
                        path,
                        f.func,
                        "requests = get_requests(args, tokenizer)",
                        &f.exc,
                    )
                }
            },
            ("burstgpt", Some(p)) => match datasets::burstgpt(&p, num, &mut rng) {
                Ok(r) => r,
                Err(f) => {
                    return tb(
                        path,
                        f.func,
                        "requests = get_requests(args, tokenizer)",
                        &f.exc,
                    )
                }
            },
            (_, Some(p)) => {
                match datasets::sharegpt(&p, num, output_len.map(|o| o as u64), &mut rng, true) {
                    Ok(r) => r,
                    Err(f) => {
                        return tb(
                            path,
                            f.func,
                            "requests = get_requests(args, tokenizer)",
                            &f.exc,
                        )
                    }
                }
            }
        }
    };
    if let Err(c) = load(e, ns) {
        return c;
    }
    let n = reqs.len();
    bar("Processed prompts", n);
    let prompt: u64 = reqs.iter().map(|r| r.prompt_len).sum();
    let output: u64 = reqs.iter().map(|r| r.output_len).sum();
    let elapsed = n as f64 / REQ_PER_S;
    let total = prompt + output;
    let tok_s = if elapsed > 0.0 {
        total as f64 / elapsed
    } else {
        0.0
    };
    let out_s = if elapsed > 0.0 {
        output as f64 / elapsed
    } else {
        0.0
    };
    let rps = if n > 0 { REQ_PER_S } else { 0.0 };
    if v < Ver::new(0, 6, 4) {
        println!("Throughput: {rps:.2} requests/s, {tok_s:.2} tokens/s");
    } else {
        println!("Throughput: {rps:.2} requests/s, {tok_s:.2} total tokens/s, {out_s:.2} output tokens/s");
    }
    if v >= Ver::new(0, 8, 0) {
        println!("Total num prompt tokens:  {prompt}");
        println!("Total num output tokens:  {output}");
    }
    if let Some(p) = ns.str("output_json") {
        let body = json::Obj::new()
            .f("elapsed_time", elapsed)
            .i("num_requests", n as i64)
            .i("total_num_tokens", total as i64)
            .f("requests_per_second", rps)
            .f("tokens_per_second", tok_s)
            .pretty();
        if let Err(err) = std::fs::write(&p, body) {
            return tb(
                path,
                "main",
                "with open(args.output_json, \"w\") as f:",
                &format!("FileNotFoundError: [Errno 2] No such file or directory: '{p}' ({err})"),
            );
        }
    }
    0
}

/// Deterministic per-iteration latencies around a figure that grows with the work asked.
fn latencies(ns: &Ns) -> Vec<f64> {
    let il = ns.int("input_len").unwrap_or(32) as f64;
    let ol = ns.int("output_len").unwrap_or(128) as f64;
    let bs = ns.int("batch_size").unwrap_or(8) as f64;
    let base = 0.35 + ol * 0.010_77 + bs * il * 0.000_02;
    let iters = ns.int("num_iters").unwrap_or(30).max(1) as usize;
    let mut rng = Rng::new(ns.int("seed").unwrap_or(0) as u64);
    (0..iters)
        .map(|_| base * (0.98 + 0.04 * rng.f64()))
        .collect()
}

fn latency(e: &Env, ns: &Ns, cli: bool) -> i32 {
    let v = e.ver;
    if !cli {
        let n = ns.int("n").unwrap_or(1);
        let ol = ns.int("output_len").unwrap_or(128);
        println!("SamplingParams(n={n}, presence_penalty=0.0, frequency_penalty=0.0, repetition_penalty=1.0, temperature=1.0, top_p=1.0, top_k=-1, min_p=0.0, seed=None, stop=[], stop_token_ids=[], bad_words=[], include_stop_str_in_output=False, ignore_eos=True, max_tokens={ol}, min_tokens=0, logprobs=None, prompt_logprobs=None, skip_special_tokens=True, spaces_between_special_tokens=True, truncate_prompt_tokens=None, guided_decoding=None, extra_args=None)");
    }
    if let Err(c) = load(e, ns) {
        return c;
    }
    println!("Warming up...");
    let warm = ns.int("num_iters_warmup").unwrap_or(10);
    if v >= Ver::new(0, 4, 1) {
        eprintln!("Warmup iterations: 100%|██████████| {warm}/{warm} [00:17<00:00,  1.73s/it]");
    }
    let lat = latencies(ns);
    let it = lat.len();
    eprintln!("Profiling iterations: 100%|██████████| {it}/{it} [00:51<00:00,  1.73s/it]");
    let avg = metrics_mean(&lat);
    println!("Avg latency: {} seconds", py_float(avg));
    let pcts: &[u32] = if v >= Ver::new(0, 5, 1) {
        &[10, 25, 50, 75, 90, 99]
    } else if v >= Ver::new(0, 4, 1) {
        &[10, 25, 50, 75, 90]
    } else {
        &[]
    };
    let vals: Vec<(u32, f64)> = pcts
        .iter()
        .map(|&p| (p, crate::metrics::percentile(&lat, p as f64)))
        .collect();
    for (p, x) in &vals {
        println!("{p}% percentile latency: {} seconds", py_float(*x));
    }
    if let Some(p) = ns.str("output_json") {
        let lats: Vec<String> = lat
            .iter()
            .map(|x| format!("        {}", py_float(*x)))
            .collect();
        let ps: Vec<String> = vals
            .iter()
            .map(|(p, x)| format!("        \"{p}\": {}", py_float(*x)))
            .collect();
        let body = format!(
            "{{\n    \"avg_latency\": {},\n    \"latencies\": [\n{}\n    ],\n    \"percentiles\": {{\n{}\n    }}\n}}",
            py_float(avg),
            lats.join(",\n"),
            ps.join(",\n")
        );
        if std::fs::write(&p, body).is_err() {
            eprintln!("FileNotFoundError: [Errno 2] No such file or directory: '{p}'");
            return 1;
        }
    }
    0
}

fn metrics_mean(v: &[f64]) -> f64 {
    crate::metrics::mean(v)
}

fn prefix_caching(e: &Env, ns: &Ns, path: &str) -> i32 {
    let v = e.ver;
    let num = ns.int("num_prompts").unwrap_or(1).max(1) as usize;
    let repeat = ns.int("repeat_count").unwrap_or(100).max(1) as usize;
    let mut rng = Rng::new(ns.int("seed").unwrap_or(0) as u64);
    let dpath = ns.str("dataset_path");
    let mut lens: Vec<u64> = Vec::new();
    if v >= Ver::new(0, 6, 0) {
        let range = ns
            .str("input_length_range")
            .unwrap_or_else(|| "128:256".into());
        let (lo, hi) = range
            .split_once(':')
            .and_then(|(a, b)| Some((a.trim().parse::<u64>().ok()?, b.trim().parse::<u64>().ok()?)))
            .unwrap_or((128, 256));
        match &dpath {
            Some(p) => {
                if v < Ver::new(0, 6, 5) {
                    println!("Start to sample {{num_prompts}} promptsfrom {{args.dataset_path}}");
                } else {
                    println!("Start to sample {num} prompts from {p}");
                }
                match datasets::sharegpt(p, num, None, &mut rng, false) {
                    Ok(r) => lens = r.iter().map(|r| r.prompt_len).collect(),
                    Err(f) => {
                        return tb(path, f.func, "filtered_requests = sample_requests(", &f.exc)
                    }
                }
            }
            None => {
                if v >= Ver::new(0, 6, 5) {
                    println!("Start to sample {num} prompts from random");
                }
                lens = (0..num).map(|_| rng.range(lo, hi)).collect();
            }
        }
        if v >= Ver::new(0, 6, 5) {
            let mut s = lens.clone();
            s.sort();
            let avg = s.iter().sum::<u64>() as f64 / s.len().max(1) as f64;
            println!("Sampled {} requests.", s.len());
            println!("Average input length: {}", py_float(avg));
            println!(
                "P50 input length: {}",
                s.get(s.len() / 2).copied().unwrap_or(0)
            );
            println!("Min Prompt Length: {}", s.first().copied().unwrap_or(0));
            println!("Max Prompt Length: {}", s.last().copied().unwrap_or(0));
            println!("Testing filtered requests");
        } else {
            println!("Testing filtered datasets");
        }
    }
    if let Err(c) = load(e, ns) {
        return c;
    }
    let work = (lens.iter().sum::<u64>().max(200) as f64) * repeat as f64;
    let cost =
        0.000_45 * work.sqrt() + 0.5 * rng.f64() * 0.01 + 12.0 * (repeat as f64 / 100.0) * 0.05;
    if v < Ver::new(0, 6, 4) {
        println!("------warm up------");
        bar("Processed prompts", num * repeat);
        println!("cost time {}", py_float(cost * 1.35));
    }
    println!("------start generating------");
    bar("Processed prompts", num * repeat);
    println!("cost time {}", py_float(cost));
    0
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
