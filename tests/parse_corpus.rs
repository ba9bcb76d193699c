//! Every labeled value of the shared corpus of real published outputs must be extracted
//! exactly, with the right kind. The corpus is read by path and never copied here.

mod support;

use nightshift::parse::{parse_bytes, Kind, StreamParser};

/// Corpus label names → contract keys (see the corpus README).
fn contract_key(label: &str) -> &str {
    match label {
        "request_throughput" => "request_throughput_req_s",
        "throughput_tok_s" => "throughput_total_tok_s",
        "traffic_request_rate" => "request_rate",
        "accept_length" => "spec_decode_acceptance_length",
        "cost_time_s" => "elapsed_s",
        other => other,
    }
}

fn kind(s: &str) -> Kind {
    match s {
        "serving" => Kind::Serving,
        "throughput" => Kind::Throughput,
        "latency" => Kind::Latency,
        "prefix_caching" => Kind::PrefixCaching,
        _ => Kind::Unknown,
    }
}

#[test]
fn every_labeled_value_in_the_corpus() {
    let labels_path = support::corpus().join("labels.json");
    let labels = std::fs::read(&labels_path)
        .unwrap_or_else(|e| panic!("corpus labels at {}: {e}", labels_path.display()));
    let labels: serde_json::Value = serde_json::from_slice(&labels).unwrap();
    let (mut matched, mut total, mut cases) = (0, 0, 0);
    let mut failures = Vec::new();
    for case in labels.as_array().unwrap() {
        let file = case["file"].as_str().unwrap();
        if !file.starts_with("metrics/") {
            continue;
        }
        cases += 1;
        let bytes = std::fs::read(support::corpus().join(file)).unwrap();
        let r = parse_bytes(&bytes);
        let want_kind = kind(case["kind"].as_str().unwrap());
        if r.kind != want_kind {
            failures.push(format!("{file}: kind {} != {}", r.kind, want_kind));
        }
        // The streaming parser fed in awkward chunks must agree with the whole-text one.
        let mut p = StreamParser::new();
        for chunk in bytes.chunks(7) {
            p.feed(chunk);
        }
        let streamed = p.finish();
        if streamed != r {
            failures.push(format!("{file}: chunked parse differs"));
        }
        for (label, want) in case["expect"].as_object().unwrap() {
            total += 1;
            let key = contract_key(label);
            let want = want.as_f64().unwrap();
            // serde_json (without `float_roundtrip`) may read a 17-digit label one ULP
            // off; reading our exact value's shortest text the same way undoes that.
            let same = |got: f64| {
                got == want || serde_json::from_str::<f64>(&format!("{got:?}")).ok() == Some(want)
            };
            match r.metrics.get(key) {
                Some(got) if same(*got) => matched += 1,
                got => failures.push(format!("{file}: {key} = {got:?}, want {want}")),
            }
        }
    }
    eprintln!("corpus: {matched}/{total} labeled values over {cases} cases");
    assert!(cases >= 24, "expected the 24 metrics cases, found {cases}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn failure_logs_hold_no_result_values_by_accident() {
    // Failure logs are server output; nothing in them is a benchmark result, except
    // what a log genuinely contains. At least: parsing them must not panic, and any
    // result found must carry a known kind.
    let dir = support::corpus().join("failures");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    for e in entries {
        let path = e.unwrap().path();
        let r = parse_bytes(&std::fs::read(&path).unwrap());
        assert!(
            !r.has_result(),
            "{}: unexpected result {:?}",
            path.display(),
            r.metrics
        );
    }
}
