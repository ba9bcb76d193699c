//! `--save-result` / `--append-result`: the one-line result JSON with the era's keys
//! (spec vllm-output-formats.md §1.7) and its default file name.

use crate::argparse::Ns;
use crate::engine::date_stamp;
use crate::eras::Ver;
use crate::json::{self, Obj};
use crate::metrics::{mean, p_label, percentile, std, Out, Summary, View};

pub struct SaveCfg<'a> {
    pub ver: Ver,
    pub cli: bool,
    pub backend: &'a str,
    pub label: Option<String>,
    pub model: &'a str,
    pub tokenizer: &'a str,
    pub num_prompts: i64,
    pub request_rate: f64,
    pub burstiness: f64,
    pub max_concurrency: Option<i64>,
    pub best_of: Option<i64>,
    pub use_beam_search: bool,
    pub version_arg: Option<String>,
    pub metadata: Vec<(String, String)>,
    pub detailed: bool,
    pub goodput_given: bool,
    pub date: String,
    pub view: &'a View,
}

fn nums(v: impl Iterator<Item = f64>) -> String {
    json::arr(v.map(json::num))
}

/// The one-line result JSON, keys as the era writes them.
pub fn result_json(s: &Summary, outs: &[Out], c: &SaveCfg) -> String {
    let v = c.ver;
    let d = s.duration.max(1e-9);
    let rate = if c.request_rate.is_finite() {
        json::num(c.request_rate)
    } else {
        "\"inf\"".into()
    };
    let mut o = Obj::new().s("date", &c.date);
    if c.cli && v >= Ver::new(0, 8, 0) {
        if v >= Ver::new(0, 11, 0) {
            o = o.s("backend", c.backend);
        }
        o = o.s("endpoint_type", c.backend);
        o = o.raw(
            "label",
            c.label
                .as_deref()
                .map(json::quote)
                .unwrap_or_else(|| "null".into()),
        );
    } else {
        o = o.s("backend", c.backend);
    }
    o = o.s("model_id", c.model).s("tokenizer_id", c.tokenizer);
    if let Some(ver) = &c.version_arg {
        o = o.s("version", ver);
    }
    if let Some(b) = c.best_of {
        o = o.i("best_of", b);
    }
    if v < Ver::new(0, 6, 2) {
        o = o.raw(
            "use_beam_search",
            if c.use_beam_search { "true" } else { "false" },
        );
    }
    o = o.i("num_prompts", c.num_prompts).raw("request_rate", rate);
    if v >= Ver::new(0, 6, 4) {
        o = o.f("burstiness", c.burstiness).raw(
            "max_concurrency",
            c.max_concurrency
                .map(|m| m.to_string())
                .unwrap_or_else(|| "null".into()),
        );
    }
    for (k, val) in &c.metadata {
        o = o.s(k, val);
    }
    o = o
        .f("duration", s.duration)
        .i("completed", s.completed as i64);
    if c.cli && v >= Ver::new(0, 11, 1) {
        o = o.i("failed", s.failed as i64);
    }
    o = o
        .i("total_input_tokens", s.total_input as i64)
        .i("total_output_tokens", s.total_output as i64);
    let rt = s.completed as f64 / d;
    o = if v < Ver::new(0, 4, 0) {
        o.f("request_inthroughput", rt)
    } else {
        o.f("request_throughput", rt)
    };
    if v >= Ver::new(0, 6, 4) {
        let g = s
            .good
            .filter(|_| c.goodput_given)
            .map(|g| json::num(g as f64 / d))
            .unwrap_or_else(|| "null".into());
        o = o.raw(
            if v < Ver::new(0, 9, 2) {
                "request_goodput:"
            } else {
                "request_goodput"
            },
            g,
        );
    }
    if v < Ver::new(0, 6, 0) {
        o = o.f("input_throughput", s.total_input as f64 / d);
    }
    o = o.f("output_throughput", s.total_output as f64 / d);
    if v >= Ver::new(0, 6, 0) {
        o = o.f(
            "total_token_throughput",
            (s.total_input + s.total_output) as f64 / d,
        );
    }
    if c.cli && v >= Ver::new(0, 11, 0) {
        o = o
            .f("max_output_tokens_per_s", s.peak_tok_s)
            .i("max_concurrent_requests", s.peak_conc as i64);
    }
    if c.detailed || v < Ver::new(0, 8, 0) {
        o = o
            .raw(
                "input_lens",
                json::arr(outs.iter().map(|x| x.prompt_len.to_string())),
            )
            .raw(
                "output_lens",
                json::arr(outs.iter().map(|x| x.output_len.to_string())),
            )
            .raw("ttfts", nums(outs.iter().map(|x| x.ttft)))
            .raw(
                "itls",
                json::arr(outs.iter().map(|x| nums(x.itl.iter().copied()))),
            )
            .raw(
                "generated_texts",
                json::arr(outs.iter().map(|x| json::quote(&x.text))),
            )
            .raw(
                "errors",
                json::arr(outs.iter().map(|x| json::quote(&x.error))),
            );
    }
    let metrics: Vec<(&str, &Vec<f64>)> = [
        ("ttft", &s.ttfts),
        ("tpot", &s.tpots),
        ("itl", &s.itls),
        ("e2el", &s.e2els),
    ]
    .into_iter()
    .filter(|(m, _)| {
        if v < Ver::new(0, 6, 0) {
            *m == "ttft" || *m == "tpot" || (*m == "itl" && v >= Ver::new(0, 5, 0))
        } else {
            c.view.metrics.iter().any(|x| x == m)
        }
    })
    .collect();
    let pcts = if v < Ver::new(0, 6, 0) {
        vec![99.0]
    } else {
        c.view.percentiles.clone()
    };
    for (m, l) in metrics {
        o = o
            .f(&format!("mean_{m}_ms"), mean(l))
            .f(&format!("median_{m}_ms"), percentile(l, 50.0));
        if v >= Ver::new(0, 5, 2) {
            o = o.f(&format!("std_{m}_ms"), std(l));
        }
        for p in &pcts {
            o = o.f(&format!("p{}_{m}_ms", p_label(*p)), percentile(l, *p));
        }
    }
    o.compact()
}

#[allow(clippy::too_many_arguments)]
pub fn save(
    ns: &Ns,
    v: Ver,
    cli: bool,
    backend: &str,
    model: &str,
    tokenizer: &str,
    s: &Summary,
    outs: &[Out],
    view: &View,
    path: &str,
) -> Result<(), i32> {
    let date = date_stamp();
    let mut metadata = Vec::new();
    for kv in ns.list("metadata") {
        match kv.split_once('=') {
            Some((k, val)) => metadata.push((k.trim().to_string(), val.trim().to_string())),
            None => {
                return Err(crate::client::tb(
                    path,
                    &format!(
                        "ValueError: Invalid metadata format: {kv}. Please use KEY=VALUE format."
                    ),
                ))
            }
        }
    }
    let cfg = SaveCfg {
        ver: v,
        cli,
        backend,
        label: ns.str("label"),
        model,
        tokenizer,
        num_prompts: ns.int("num_prompts").unwrap_or(1000),
        request_rate: view.request_rate,
        burstiness: ns.float("burstiness").unwrap_or(1.0),
        max_concurrency: view.max_concurrency,
        best_of: (ns.has("best_of")).then(|| ns.int("best_of").unwrap_or(1)),
        use_beam_search: ns.flag("use_beam_search"),
        version_arg: ns
            .has("version")
            .then(|| ns.str("version").unwrap_or_else(|| "N/A".into())),
        metadata,
        detailed: ns.flag("save_detailed"),
        goodput_given: !ns.list("goodput").is_empty(),
        date: date.clone(),
        view,
    };
    let body = result_json(s, outs, &cfg);
    let rate = crate::argparse::py_float(view.request_rate);
    let conc = match (v >= Ver::new(0, 6, 4), view.max_concurrency) {
        (true, Some(c)) => format!("-concurrency{c}"),
        _ => String::new(),
    };
    let base_model = model.rsplit('/').next().unwrap_or(model);
    let prefix = if cli && v >= Ver::new(0, 8, 0) {
        ns.str("label").unwrap_or_else(|| backend.to_string())
    } else {
        backend.to_string()
    };
    let name = ns
        .str("result_filename")
        .unwrap_or_else(|| format!("{prefix}-{rate}qps{conc}-{base_model}-{date}.json"));
    let file = match ns.str("result_dir") {
        Some(d) => {
            let _ = std::fs::create_dir_all(&d);
            format!("{}/{name}", d.trim_end_matches('/'))
        }
        None => name,
    };
    let append = ns.flag("append_result");
    let res = if append && std::path::Path::new(&file).exists() {
        std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .and_then(|mut f| {
                use std::io::Write;
                writeln!(f).and_then(|_| f.write_all(body.as_bytes()))
            })
    } else {
        std::fs::write(&file, &body)
    };
    res.map_err(|e| {
        let kind = if e.kind() == std::io::ErrorKind::PermissionDenied {
            "PermissionError: [Errno 13] Permission denied"
        } else {
            "FileNotFoundError: [Errno 2] No such file or directory"
        };
        crate::client::tb(path, &format!("{kind}: '{file}'"))
    })
}
