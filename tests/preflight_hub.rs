//! Preflight against a local server standing in for the Hub (`HF_ENDPOINT`): a model that
//! is not there (404) blocks its commit as `model_not_found`, a gated one the token cannot
//! read as `gated_model_auth`, and weight sizes come from the safetensors index the Hub
//! serves (metadata only: no weight byte is fetched). Nothing leaves 127.0.0.1.

mod common;

use common::hub::{FakeHub, HUB_TOKEN};
use serde_json::Value;
use std::process::Command;

const C1: &str = "1111111111111111111111111111111111111111";
const LLAMA: &str = r#"{"architectures": ["LlamaForCausalLM"], "torch_dtype": "bfloat16"}"#;

fn index(total: u64) -> Vec<u8> {
    format!(
        r#"{{"metadata": {{"total_size": {total}}}, "weight_map": {{"w": "model.safetensors"}}}}"#
    )
    .into_bytes()
}

fn hub() -> FakeHub {
    let hub = FakeHub::start();
    for (id, total) in [
        ("org/fits", 16_000_000_000u64),
        ("org/gated", 16_000_000_000),
        ("org/huge", 700_000_000_000),
    ] {
        hub.add(
            id,
            C1,
            &[
                ("config.json", LLAMA.as_bytes().to_vec()),
                ("model.safetensors.index.json", index(total)),
                ("model.safetensors", vec![0u8; 16]),
            ],
        );
    }
    hub.gate("org/gated");
    hub
}

fn plan(dir: &std::path::Path) -> std::path::PathBuf {
    let mut text = format!(
        "schema_version = 1\nname = \"preflight-hub\"\n[defaults]\nhf_cache = \"{}\"\nvariants = [\"baseline\", \"human\"]\n\
         [images]\nhuman = \"127.0.0.1:9/x:{{commit12}}\"\nbaseline = \"127.0.0.1:9/x:{{parent12}}\"\n",
        dir.join("hf").display()
    );
    for (i, m) in ["org/fits", "org/absent", "org/gated", "org/huge"]
        .iter()
        .enumerate()
    {
        text += &format!(
            "[[commits]]\ncommit = \"{i}{}\"\nparent = \"{i}{}\"\nmodel = \"{m}\"\n\
             perf_command = '''python benchmarks/benchmark_latency.py --model {m}'''\n",
            "a".repeat(39),
            "b".repeat(39)
        );
    }
    let p = dir.join("plan.toml");
    std::fs::write(&p, text).unwrap();
    p
}

fn preflight(plan: &std::path::Path, endpoint: &str, token: Option<&str>) -> Value {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nightshift"));
    cmd.args([
        "preflight",
        "--json",
        "--no-docker",
        "--no-cache",
        "--gpus",
        "8",
    ])
    .arg(plan)
    .env("HF_ENDPOINT", endpoint)
    .env_remove("HF_TOKEN")
    .env_remove("HUGGING_FACE_HUB_TOKEN");
    if let Some(t) = token {
        cmd.env("HF_TOKEN", t);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        !stdout.contains(HUB_TOKEN) && !String::from_utf8_lossy(&out.stderr).contains(HUB_TOKEN),
        "the token leaked"
    );
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)))
}

fn commit(doc: &Value, i: usize) -> &Value {
    &doc["commits"][i]
}

fn cats(c: &Value) -> Vec<&str> {
    c["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["category"].as_str().unwrap())
        .collect()
}

#[test]
fn the_hub_tells_missing_gated_and_too_large_models() {
    let hub = hub();
    let tmp = tempfile::tempdir().unwrap();
    let plan = plan(tmp.path());

    let doc = preflight(&plan, &hub.url, Some("hf_not_the_right_token"));
    let fits = commit(&doc, 0);
    assert_ne!(fits["verdict"], "blocked", "{fits:#}");
    assert_eq!(fits["weights_bytes"], 16_000_000_000u64);
    let absent = commit(&doc, 1);
    assert_eq!(absent["verdict"], "blocked");
    assert_eq!(cats(absent), ["model_not_found"], "{absent:#}");
    let gated = commit(&doc, 2);
    assert_eq!(gated["verdict"], "blocked");
    assert!(cats(gated).contains(&"gated_model_auth"), "{gated:#}");
    let huge = commit(&doc, 3);
    assert_eq!(huge["verdict"], "blocked");
    assert!(cats(huge).contains(&"model_too_large"), "{huge:#}");
    // Metadata only: the weights themselves were never asked for.
    assert_eq!(hub.weight_gets(), 0);

    // With the token that has access, the gated model is readable.
    let doc = preflight(&plan, &hub.url, Some(HUB_TOKEN));
    assert!(
        !cats(commit(&doc, 2)).contains(&"gated_model_auth"),
        "{doc:#}"
    );
    // The registry at 127.0.0.1:9 cannot be reached: said, not passed.
    assert!(
        doc["summary"]["not_reached"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("127.0.0.1:9")),
        "{doc:#}"
    );
}

#[test]
fn an_unreachable_hub_leaves_models_unchecked_not_passed() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = plan(tmp.path());
    let doc = preflight(&plan, "http://127.0.0.1:9", None);
    let absent = commit(&doc, 1);
    assert_ne!(absent["verdict"], "blocked", "nothing is known: {absent:#}");
    assert!(
        absent["unchecked"]
            .as_array()
            .unwrap()
            .iter()
            .any(|u| u.as_str().unwrap().contains("Hub")),
        "{absent:#}"
    );
}

/// The real Hub answers `resolve` of config.json with a 307 to a path of its own: preflight
/// follows it (on the same host) and reads the model's facts as before.
#[test]
fn the_hubs_own_redirects_are_followed() {
    let hub = hub();
    hub.st
        .redirect_small
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let tmp = tempfile::tempdir().unwrap();
    let plan = plan(tmp.path());
    let doc = preflight(&plan, &hub.url, Some(HUB_TOKEN));
    let fits = commit(&doc, 0);
    assert_ne!(fits["verdict"], "blocked", "{fits:#}");
    assert_eq!(fits["weights_bytes"], 16_000_000_000u64, "{fits:#}");
    let text = fits.to_string();
    assert!(!text.contains("HTTP 307"), "{fits:#}");
    assert!(
        hub.requests()
            .iter()
            .any(|r| r.path.starts_with("/api/resolve-cache/models/org/fits/")),
        "the redirect was not followed"
    );
    assert_eq!(hub.weight_gets(), 0);
}
