//! Result files: serving `--save-result` (one object, or JSON Lines with
//! `--append-result`), throughput/latency `--output-json`, and the
//! `SAVE_TO_PYTORCH_BENCHMARK_FORMAT` list of records. Mapped to the same keys as the
//! printed blocks.

use super::label::slug;
use super::Kind;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// A parsed result object.
pub(crate) struct JsonBlock {
    pub kind: Kind,
    pub metrics: BTreeMap<String, f64>,
}

/// Parses `input` as one JSON document or as JSON Lines. `None` when it is not JSON.
pub(crate) fn parse(input: &[u8]) -> Option<Vec<JsonBlock>> {
    let start = input.iter().position(|b| !b.is_ascii_whitespace())?;
    let body = input[start..]
        .strip_prefix(b"\xef\xbb\xbf")
        .unwrap_or(&input[start..]);
    if !matches!(body.first(), Some(b'{' | b'[')) {
        return None;
    }
    let docs: Vec<(Value, &[u8])> = match serde_json::from_slice::<Value>(body) {
        Ok(v) => vec![(v, body)],
        Err(_) => {
            let mut docs = Vec::new();
            for line in body.split(|&b| b == b'\n') {
                let line = line.trim_ascii();
                if line.is_empty() {
                    continue;
                }
                docs.push((serde_json::from_slice::<Value>(line).ok()?, line));
            }
            docs
        }
    };
    let blocks: Vec<JsonBlock> = docs
        .iter()
        .filter_map(|(v, raw)| {
            let mut b = block(v)?;
            exact(&String::from_utf8_lossy(raw), v, &mut b.metrics);
            Some(b)
        })
        .collect();
    (!blocks.is_empty()).then_some(blocks)
}

/// serde_json's default float reader can be one ULP off for 17-digit values (vLLM writes
/// full `repr` floats); re-read each top-level number from its own text, correctly rounded.
fn exact(raw: &str, v: &Value, metrics: &mut BTreeMap<String, f64>) {
    let Value::Object(o) = v else { return };
    let mut fix = |src: &str, parent: Option<&str>, dst: String| {
        let Some(got) = metrics.get_mut(&dst) else {
            return;
        };
        let pat = format!(
            r#""{}"\s*:\s*(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"#,
            regex::escape(src)
        );
        let Ok(re) = regex::Regex::new(&pat) else {
            return;
        };
        let hay = match parent.and_then(|p| raw.find(&format!("\"{p}\""))) {
            Some(at) => &raw[at..],
            None => raw,
        };
        if let Some(c) = re.captures(hay) {
            if let Ok(x) = c[1].parse::<f64>() {
                if (x - *got).abs() <= x.abs() * 1e-15 {
                    *got = x;
                }
            }
        }
    };
    for (k, val) in o {
        if !val.as_number().is_some_and(|n| n.is_f64()) {
            if let (Value::Object(p), "percentiles") = (val, k.as_str()) {
                for pk in p.keys() {
                    fix(pk, Some("percentiles"), format!("latency_p{}_s", slug(pk)));
                }
            }
            continue;
        }
        let dst = if o.contains_key("avg_latency") && k == "avg_latency" {
            Some("latency_avg_s".to_string())
        } else if o.contains_key("requests_per_second") || o.contains_key("tokens_per_second") {
            match k.as_str() {
                "requests_per_second" => Some("throughput_req_s".into()),
                "tokens_per_second" => Some("throughput_total_tok_s".into()),
                "elapsed_time" => Some("elapsed_s".into()),
                _ => None,
            }
        } else {
            serving_key(k)
        };
        if let Some(dst) = dst {
            fix(k, None, dst);
        }
    }
}

fn block(v: &Value) -> Option<JsonBlock> {
    match v {
        Value::Object(o) => object(o),
        Value::Array(records) => pytorch(records),
        _ => None,
    }
}

fn num(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64().filter(|f| f.is_finite()),
        // `--metadata` values and `request_rate` may be strings; "inf" is not a number.
        Value::String(s) => s.trim().parse::<f64>().ok().filter(|f| f.is_finite()),
        _ => None,
    }
}

fn object(o: &Map<String, Value>) -> Option<JsonBlock> {
    let has = |k: &str| o.contains_key(k);
    if has("avg_latency") && (has("latencies") || has("percentiles")) {
        return Some(latency(o));
    }
    if has("requests_per_second") || has("tokens_per_second") {
        return Some(throughput(o));
    }
    if has("completed") || has("request_throughput") || has("request_inthroughput") {
        return Some(serving(o));
    }
    None
}

fn latency(o: &Map<String, Value>) -> JsonBlock {
    let mut m = BTreeMap::new();
    if let Some(v) = o.get("avg_latency").and_then(num) {
        m.insert("latency_avg_s".into(), v);
    }
    if let Some(Value::Object(p)) = o.get("percentiles") {
        for (k, v) in p {
            if let Some(v) = num(v) {
                m.insert(format!("latency_p{}_s", slug(k)), v);
            }
        }
    }
    JsonBlock {
        kind: Kind::Latency,
        metrics: m,
    }
}

fn throughput(o: &Map<String, Value>) -> JsonBlock {
    let mut m = BTreeMap::new();
    for (src, dst) in [
        ("requests_per_second", "throughput_req_s"),
        ("tokens_per_second", "throughput_total_tok_s"),
        ("elapsed_time", "elapsed_s"),
        ("num_requests", "num_requests"),
        ("total_num_tokens", "total_num_tokens"),
    ] {
        if let Some(v) = o.get(src).and_then(num) {
            m.insert(dst.into(), v);
        }
    }
    JsonBlock {
        kind: Kind::Throughput,
        metrics: m,
    }
}

/// Serving result keys → contract keys. Per-request arrays and config strings are skipped.
fn serving_key(k: &str) -> Option<String> {
    let fixed = match k {
        "completed" => "successful_requests",
        "failed" => "failed_requests",
        "duration" => "duration_s",
        "total_input_tokens" => "total_input_tokens",
        "total_output_tokens" => "total_output_tokens",
        "request_throughput" | "request_inthroughput" => "request_throughput_req_s",
        "request_goodput" | "request_goodput:" => "request_goodput_req_s",
        "input_throughput" => "input_throughput_tok_s",
        "output_throughput" => "output_throughput_tok_s",
        "total_token_throughput" => "total_throughput_tok_s",
        "max_output_tokens_per_s" => "peak_output_throughput_tok_s",
        "max_concurrent_requests" => "peak_concurrent_requests",
        "max_concurrency" => "max_concurrency",
        "request_rate" => "request_rate",
        "burstiness" => "burstiness",
        "rtfx" => "rtfx",
        "spec_decode_acceptance_rate" => "spec_decode_acceptance_rate_pct",
        "spec_decode_acceptance_length" => "spec_decode_acceptance_length",
        "spec_decode_num_drafts" => "spec_decode_drafts",
        "spec_decode_draft_tokens" => "spec_decode_draft_tokens",
        "spec_decode_accepted_tokens" => "spec_decode_accepted_tokens",
        "probe_completed" => "probe_completed_requests",
        "probe_failed" => "probe_failed_requests",
        "probe_median_e2el_ms" => "probe_e2el_median_ms",
        "probe_p99_e2el_ms" => "probe_e2el_p99_ms",
        "probe_max_e2el_ms" => "probe_e2el_max_ms",
        "total_input_sequences" => "total_input_sequences",
        "input_sequence_throughput" => "input_throughput_inputs_s",
        "num_prompts" => "num_prompts",
        _ => "",
    };
    if !fixed.is_empty() {
        return Some(fixed.into());
    }
    // `mean_ttft_ms`, `std_itl_ms`, `p99.9_ttft_ms`, `p50_e2el_ms`.
    let stem = k.strip_suffix("_ms")?;
    let (stat, metric) = stem.split_once('_')?;
    let stat_ok = matches!(stat, "mean" | "median" | "std" | "min" | "max")
        || (stat.len() > 1
            && stat.starts_with('p')
            && stat[1..].bytes().all(|b| b.is_ascii_digit() || b == b'.'));
    if !stat_ok || metric.is_empty() {
        return None;
    }
    // 0.33.0 spells out what the printed label abbreviates (`E2EL incl. Client Queue`).
    let metric = match metric {
        "e2el_including_client_queue" => "e2el_incl_client_queue",
        m => m,
    };
    // The 50th percentile is the median, as in printed output.
    let stat = match stat {
        "p50" | "p50.0" => "median",
        s => s,
    };
    Some(format!("{}_{}_ms", metric, slug(stat)))
}

fn serving(o: &Map<String, Value>) -> JsonBlock {
    let mut m = BTreeMap::new();
    for (k, v) in o {
        if let (Some(key), Some(v)) = (serving_key(k), num(v)) {
            m.insert(key, v);
        }
    }
    JsonBlock {
        kind: Kind::Serving,
        metrics: m,
    }
}

/// `[{"benchmark": {...}, "metric": {"name": "median_ttft_ms", "benchmark_values": [..]}}]`.
fn pytorch(records: &[Value]) -> Option<JsonBlock> {
    let mut flat = Map::new();
    for r in records {
        let metric = r.get("metric")?;
        let name = metric.get("name")?.as_str()?;
        let first = metric.get("benchmark_values")?.as_array()?.first()?;
        flat.insert(name.to_string(), first.clone());
        if let Some(Value::Object(extra)) = metric.get("extra_info") {
            for (k, v) in extra {
                flat.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
    }
    object(&flat)
}

#[cfg(test)]
// The values are as benchmarks print them (full `repr` floats).
#[allow(clippy::excessive_precision)]
mod tests {
    use super::*;

    #[test]
    fn serving_result_file() {
        let j = br#"{"date":"20240601-101500","backend":"vllm","request_rate":"inf","duration":61.2,"completed":1000,"total_input_tokens":215196,"total_output_tokens":198343,"request_throughput":16.33,"request_goodput:":null,"output_throughput":3239.27,"total_token_throughput":6753.8,"mean_ttft_ms":2311.4,"p99.9_ttft_ms":5120.9,"std_tpot_ms":3.1,"ttfts":[0.1,0.2],"max_concurrency":null}"#;
        let b = parse(j).unwrap();
        let m = &b[0].metrics;
        assert_eq!(b[0].kind, Kind::Serving);
        assert_eq!(m["successful_requests"], 1000.0);
        assert_eq!(m["ttft_p99_9_ms"], 5120.9);
        assert_eq!(m["tpot_std_ms"], 3.1);
        assert!(!m.contains_key("request_rate"));
        assert!(!m.contains_key("request_goodput_req_s"));
        assert!(!m.contains_key("max_concurrency"));
    }

    #[test]
    fn latency_and_throughput_files() {
        let l = br#"{"avg_latency": 1.73, "latencies": [1.7], "percentiles": {"10": 1.71, "99": 1.78}}"#;
        let b = parse(l).unwrap();
        assert_eq!(b[0].kind, Kind::Latency);
        assert_eq!(b[0].metrics["latency_p99_s"], 1.78);
        let l =
            br#"{"avg_latency": 1.4704144389019347, "percentiles": {"10": 1.4711670397227863}}"#;
        let b = parse(l).unwrap();
        assert_eq!(b[0].metrics["latency_avg_s"], 1.4704144389019347);
        assert_eq!(b[0].metrics["latency_p10_s"], 1.4711670397227863);
        let t = br#"{"elapsed_time": 40.6, "num_requests": 1000, "total_num_tokens": 437133, "requests_per_second": 24.61, "tokens_per_second": 10758.87}"#;
        let b = parse(t).unwrap();
        assert_eq!(b[0].kind, Kind::Throughput);
        assert_eq!(b[0].metrics["throughput_total_tok_s"], 10758.87);
        assert!(parse(b"Throughput: 1 requests/s").is_none());
        assert!(parse(b"{not json").is_none());
    }
}
