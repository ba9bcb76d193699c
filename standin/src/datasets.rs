//! The benchmark datasets and how they fail (spec real-images.md §3 and §5 "What happens with
//! no dataset"): ShareGPT JSON, sonnet lines, random prompts, BurstGPT CSV, custom JSONL, and
//! HF hub datasets (which need the network the images do not have). Token counts are
//! whitespace words (the stand-in has no tokenizer).

use crate::argparse::Ns;
use crate::eras::{Era, Ver};
use crate::json::{self, Json};
use crate::pyenv::{env, traceback};
use crate::rng::Rng;

#[derive(Clone, Debug)]
pub struct Request {
    pub prompt: String,
    pub prompt_len: u64,
    pub output_len: u64,
}

pub fn tokens(s: &str) -> u64 {
    s.split_whitespace().count() as u64
}

/// What a dataset failure looks like: the sampler's frame and the exception line.
pub struct Fail {
    pub func: &'static str,
    pub code: &'static str,
    pub exc: String,
}

fn fail(func: &'static str, code: &'static str, exc: String) -> Fail {
    Fail { func, code, exc }
}

/// Python's `open(path)` errors.
fn read(path: &str, func: &'static str) -> Result<String, Fail> {
    let p = std::path::Path::new(path);
    if p.is_dir() {
        return Err(fail(
            func,
            "with open(dataset_path, encoding='utf-8') as f:",
            format!("IsADirectoryError: [Errno 21] Is a directory: '{path}'"),
        ));
    }
    std::fs::read(p)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .map_err(|e| {
            let exc = if e.kind() == std::io::ErrorKind::PermissionDenied {
                format!("PermissionError: [Errno 13] Permission denied: '{path}'")
            } else {
                format!("FileNotFoundError: [Errno 2] No such file or directory: '{path}'")
            };
            fail(func, "with open(dataset_path, encoding='utf-8') as f:", exc)
        })
}

fn words(rng: &mut Rng, n: u64) -> String {
    const W: &[&str] = &[
        "alpha", "beta", "gamma", "delta", "night", "shift", "token", "model", "serve", "bench",
        "river", "stone", "cloud", "lamp",
    ];
    (0..n)
        .map(|_| W[(rng.next_u64() % W.len() as u64) as usize])
        .collect::<Vec<_>>()
        .join(" ")
}

/// ShareGPT: conversations with ≥ 2 turns; prompt = first turn, output length = the second
/// turn's length (or `fixed`); too-short and too-long pairs pruned, as the real sampler does.
pub fn sharegpt(
    path: &str,
    num: usize,
    fixed: Option<u64>,
    rng: &mut Rng,
    oversample: bool,
) -> Result<Vec<Request>, Fail> {
    let text = read(path, "sample_sharegpt_requests")?;
    let data = json::parse(&text).map_err(|e| {
        fail(
            "sample_sharegpt_requests",
            "dataset = json.load(f)",
            format!("json.decoder.JSONDecodeError: {e}"),
        )
    })?;
    let mut convs: Vec<(String, String)> = data
        .as_arr()
        .unwrap_or(&[])
        .iter()
        .filter_map(|d| {
            let c = d.get("conversations")?.as_arr()?;
            if c.len() < 2 {
                return None;
            }
            let turn = |t: &Json| t.get("value").and_then(Json::as_str).map(str::to_string);
            Some((turn(&c[0])?, turn(&c[1])?))
        })
        .collect();
    rng.shuffle(&mut convs);
    let mut out = Vec::new();
    for (prompt, completion) in convs {
        if out.len() >= num {
            break;
        }
        let prompt_len = tokens(&prompt);
        let output_len = fixed.unwrap_or_else(|| tokens(&completion));
        if prompt_len < 4 || (fixed.is_none() && output_len < 4) {
            continue;
        }
        if prompt_len > 1024 || prompt_len + output_len > 2048 {
            continue;
        }
        out.push(Request {
            prompt,
            prompt_len,
            output_len,
        });
    }
    if oversample && !out.is_empty() && out.len() < num {
        let have = out.len();
        while out.len() < num {
            let pick = out[(rng.next_u64() % have as u64) as usize].clone();
            out.push(pick);
        }
        println!(
            "INFO {} [datasets.py:111] Oversampled requests to reach {num} total samples.",
            crate::engine::timestamp()
        );
    }
    Ok(out)
}

pub fn sonnet(
    path: &str,
    num: usize,
    input_len: u64,
    output_len: u64,
    prefix_len: u64,
    rng: &mut Rng,
) -> Result<Vec<Request>, Fail> {
    if input_len <= prefix_len {
        return Err(fail(
            "sample_sonnet_requests",
            "assert input_len > prefix_len",
            "AssertionError: 'args.sonnet-input-len' must be greater than 'args.prefix-input-len'."
                .into(),
        ));
    }
    let text = read(path, "sample_sonnet_requests")?;
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return Err(fail(
            "sample_sonnet_requests",
            "prefix_lines = poem_lines[:num_prefix_lines]",
            "ZeroDivisionError: division by zero".into(),
        ));
    }
    let base = "Pick as many lines as you can from these poem lines:\n";
    let prefix: String = lines
        .iter()
        .cycle()
        .scan(0u64, |n, l| {
            if *n >= prefix_len {
                return None;
            }
            *n += tokens(l);
            Some(format!("{l}\n"))
        })
        .collect();
    let mut out = Vec::new();
    for _ in 0..num {
        let mut p = format!("{base}{prefix}");
        while tokens(&p) < input_len {
            let l = lines[(rng.next_u64() % lines.len() as u64) as usize];
            p.push_str(l);
            p.push('\n');
        }
        out.push(Request {
            prompt_len: tokens(&p),
            prompt: p,
            output_len,
        });
    }
    Ok(out)
}

/// Random prompts: before v0.8.0 lengths are uniform in [len·ratio, len] (ratio 1.0 by
/// default); from v0.8.0 in [len·(1−r), len·(1+r)] (r 0.0 by default).
/// `keys`: the input-length, output-length, prefix-length and range-ratio flags' dests.
pub fn random(ns: &Ns, num: usize, v: Ver, rng: &mut Rng, keys: [&str; 4]) -> Vec<Request> {
    let [input_key, output_key, prefix_key, ratio_key] = keys;
    let il = ns.int(input_key).unwrap_or(1024).max(0) as u64;
    let ol = ns.int(output_key).unwrap_or(128).max(0) as u64;
    let prefix = ns.int(prefix_key).unwrap_or(0).max(0) as u64;
    let r = ns
        .float(ratio_key)
        .unwrap_or(if v >= Ver::new(0, 8, 0) { 0.0 } else { 1.0 });
    let span = |len: u64, rng: &mut Rng| -> u64 {
        if v >= Ver::new(0, 8, 0) {
            let lo = (len as f64 * (1.0 - r)).floor().max(0.0) as u64;
            let hi = (len as f64 * (1.0 + r)).floor() as u64;
            rng.range(lo, hi)
        } else {
            rng.range((len as f64 * r) as u64, len)
        }
    };
    let pre = words(rng, prefix);
    (0..num)
        .map(|_| {
            let i = span(il, rng);
            let o = span(ol, rng).max(1);
            let body = words(rng, i);
            let prompt = if pre.is_empty() {
                body
            } else {
                format!("{pre} {body}")
            };
            Request {
                prompt,
                prompt_len: prefix + i,
                output_len: o,
            }
        })
        .collect()
}

/// BurstGPT's CSV: `Request tokens` / `Response tokens` columns, GPT-4 rows.
pub fn burstgpt(path: &str, num: usize, rng: &mut Rng) -> Result<Vec<Request>, Fail> {
    let text = read(path, "sample_burstgpt_requests")?;
    let mut lines = text.lines();
    let head: Vec<&str> = lines
        .next()
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .collect();
    let col = |n: &str| head.iter().position(|h| *h == n);
    let (Some(ri), Some(oi)) = (col("Request tokens"), col("Response tokens")) else {
        return Err(fail(
            "sample_burstgpt_requests",
            "data = df[df[\"Model\"] == \"GPT-4\"]",
            "KeyError: 'Model'".into(),
        ));
    };
    let rows: Vec<(u64, u64)> = lines
        .filter_map(|l| {
            let c: Vec<&str> = l.split(',').collect();
            Some((
                c.get(ri)?.trim().parse().ok()?,
                c.get(oi)?.trim().parse().ok()?,
            ))
        })
        .collect();
    Ok((0..num.min(rows.len()))
        .map(|k| {
            let (i, o) = rows[k];
            Request {
                prompt: words(rng, i),
                prompt_len: i,
                output_len: o.max(1),
            }
        })
        .collect())
}

/// Custom JSONL: one `{"prompt": ...}` per line.
pub fn custom(path: &str, num: usize, output_len: u64) -> Result<Vec<Request>, Fail> {
    let text = read(path, "load_data")?;
    let mut out = Vec::new();
    for l in text.lines().filter(|l| !l.trim().is_empty()) {
        let j = json::parse(l).map_err(|e| {
            fail(
                "load_data",
                "self.data = pd.read_json(path_or_buf=self.dataset_path, lines=True)",
                format!("ValueError: {e}"),
            )
        })?;
        if let Some(p) = j.get("prompt").and_then(Json::as_str) {
            out.push(Request {
                prompt: p.to_string(),
                prompt_len: tokens(p),
                output_len,
            });
        }
        if out.len() >= num {
            break;
        }
    }
    Ok(out)
}

/// The snapshot of Hub dataset `id` in the mounted HF cache, if one was fetched there
/// (`hub/datasets--org--name/snapshots/<rev>/`): what `load_dataset` finds offline.
fn cached_hub_dataset(id: &str) -> Option<std::path::PathBuf> {
    let home = env("HF_HOME").unwrap_or_else(|| "/root/.cache/huggingface".into());
    let dir = std::path::Path::new(&home)
        .join("hub")
        .join(format!("datasets--{}", id.replace('/', "--")))
        .join("snapshots");
    let snap = std::fs::read_dir(dir).ok()?.flatten().next()?.path();
    std::fs::read_dir(&snap)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "json" || x == "jsonl"))
}

/// Hub datasets: from the HF cache when fetched there (rows read as ShareGPT
/// conversations, a simplification of the real loaders), else the Hub, which no image
/// here can reach.
pub fn hf_dataset(path: &str, num: usize, rng: &mut Rng) -> Result<Vec<Request>, Fail> {
    match cached_hub_dataset(path) {
        Some(file) => sharegpt(&file.to_string_lossy(), num, None, rng, true),
        None => Err(hf(path)),
    }
}

/// HF hub datasets: the images are offline.
pub fn hf(path: &str) -> Fail {
    let exc = if env("HF_HUB_OFFLINE").is_some_and(|v| v != "0")
        || env("HF_DATASETS_OFFLINE").is_some_and(|v| v != "0")
    {
        format!("ConnectionError: Couldn't reach '{path}' on the Hub (LocalEntryNotFoundError)")
    } else {
        format!("requests.exceptions.ConnectionError: (MaxRetryError(\"HTTPSConnectionPool(host='huggingface.co', port=443): Max retries exceeded with url: /api/datasets/{path} (Caused by NameResolutionError(\\\"<urllib3.connection.HTTPSConnection object at 0x7f3c2a1b5d90>: Failed to resolve 'huggingface.co' ([Errno -3] Temporary failure in name resolution)\\\"))\"), '(Request ID: 5c1e8f0a-2b7d-4e39-9a51-0d6f3c2e4b18)')")
    };
    fail("load_data", "self.data = load_dataset(", exc)
}

/// The serving client's dataset choice by era. Err(Fail) = the traceback to print.
pub fn for_serving(
    ns: &Ns,
    era: Era,
    v: Ver,
    num: usize,
    rng: &mut Rng,
) -> Result<Vec<Request>, Fail> {
    let sharegpt_len = ns.int("sharegpt_output_len").map(|n| n as u64);
    let oversample = era >= Era::V080;
    if era < Era::V040 || (era <= Era::V064 && ns.str("dataset").is_some()) {
        let path = ns.str("dataset").unwrap_or_default();
        if era >= Era::V040 {
            eprintln!("benchmark_serving.py:1: UserWarning: The '--dataset' argument will be deprecated in the next release. Please use '--dataset-name' and '--dataset-path' in the future runs.");
        }
        return sharegpt(&path, num, sharegpt_len, rng, false);
    }
    let name = ns.str("dataset_name").unwrap_or_else(|| "sharegpt".into());
    let path = ns.str("dataset_path");
    if name == "random" {
        return Ok(random(
            ns,
            num,
            v,
            rng,
            [
                "random_input_len",
                "random_output_len",
                "random_prefix_len",
                "random_range_ratio",
            ],
        ));
    }
    let Some(path) = path else {
        return Err(if era >= Era::V080 {
            fail(
                "load_data",
                "raise ValueError(\"dataset_path must be provided for loading data.\")",
                "ValueError: dataset_path must be provided for loading data.".into(),
            )
        } else {
            fail(
                "sample_requests",
                "with open(dataset_path, encoding='utf-8') as f:",
                "TypeError: expected str, bytes or os.PathLike object, not NoneType".into(),
            )
        });
    };
    match name.as_str() {
        "sonnet" => sonnet(
            &path,
            num,
            ns.int("sonnet_input_len").unwrap_or(550) as u64,
            ns.int("sonnet_output_len").unwrap_or(150) as u64,
            ns.int("sonnet_prefix_len").unwrap_or(200) as u64,
            rng,
        ),
        "hf" => hf_dataset(&path, num, rng),
        "burstgpt" => burstgpt(&path, num, rng),
        "custom" => custom(
            &path,
            num,
            ns.int("custom_output_len").unwrap_or(256) as u64,
        ),
        _ => sharegpt(&path, num, sharegpt_len, rng, oversample),
    }
}

/// Prints a dataset failure as the script's traceback.
pub fn report(script: &str, f: &Fail) {
    traceback(
        script,
        &[
            ("<module>", 1086, "main(args)", ""),
            ("main", 712, "input_requests = sample_requests(", ""),
            (f.func, 98, f.code, ""),
        ],
        &f.exc,
    );
}
