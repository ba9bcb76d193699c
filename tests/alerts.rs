//! Alerts received by a real HTTP server on 127.0.0.1: a headless sim sweep whose disk fills
//! (the sweep pauses) and then ends, with a generic webhook, a Slack-compatible one, an ntfy
//! topic and a command hook. The HF token in the daemon's environment appears nowhere.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::Command;
use std::sync::{Arc, Mutex};

const BIN: &str = env!("CARGO_BIN_EXE_nightshift");
const TOKEN: &str = "hf_ALERTtokenMUSTneverLEAVEthisBOX0";

#[derive(Debug, Clone)]
struct Req {
    path: String,
    headers: Vec<(String, String)>,
    body: String,
}

fn server() -> (u16, Arc<Mutex<Vec<Req>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut r = BufReader::new(conn.try_clone().unwrap());
            let mut first = String::new();
            if r.read_line(&mut first).is_err() {
                continue;
            }
            let path = first.split(' ').nth(1).unwrap_or("").to_string();
            let mut headers = Vec::new();
            let mut len = 0;
            loop {
                let mut h = String::new();
                if r.read_line(&mut h).is_err() || h.trim().is_empty() {
                    break;
                }
                if let Some((k, v)) = h.trim().split_once(':') {
                    if k.eq_ignore_ascii_case("content-length") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                    headers.push((k.to_ascii_lowercase(), v.trim().to_string()));
                }
            }
            let mut body = vec![0; len];
            let _ = r.read_exact(&mut body);
            g.lock().unwrap().push(Req {
                path,
                headers,
                body: String::from_utf8_lossy(&body).into_owned(),
            });
            let _ = conn
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    (port, got)
}

#[test]
fn alerts_reach_webhooks_ntfy_and_a_command_without_the_token() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = tmp.path().join("plan.toml");
    std::fs::write(
        &plan,
        "schema_version = 1\nname = \"alerting\"\n[defaults]\nvariants = [\"baseline\", \"human\"]\n[images]\norg = \"o\"\nhuman = \"{org}/h:{commit}\"\nbaseline = \"{org}/b:{commit}\"\n\
         [[commits]]\ncommit = \"c0000001\"\nparent = \"c00000010000\"\nmodel = \"m/x\"\ngpu_config = \"H100:1\"\nperf_command = '''python benchmarks/benchmark_throughput.py --model m/x --input-len 256 --output-len 256'''\n\
         [commits.sim]\nfail = \"disk_full\"\n",
    )
    .unwrap();
    let (port, got) = server();
    let hook_out = tmp.path().join("hook.txt");
    let base = format!("http://127.0.0.1:{port}");
    let o = Command::new(BIN)
        .args([
            "run",
            plan.to_str().unwrap(),
            "--runtime",
            "sim",
            "--headless",
        ])
        .args(["--gpus", "2", "--speed", "max"])
        .args(["--store", tmp.path().join("store").to_str().unwrap()])
        .args(["--alert-webhook", &format!("{base}/generic")])
        .args(["--alert-slack", &format!("{base}/slack")])
        .args(["--alert-ntfy", &format!("{base}/ntfy-topic")])
        .args([
            "--alert-command",
            &format!(
                "echo \"$NIGHTSHIFT_ALERT_KIND $NIGHTSHIFT_ALERT_TITLE\" >> {}",
                hook_out.display()
            ),
        ])
        .env("HF_TOKEN", TOKEN)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("alert sent"), "{out}");
    let reqs = got.lock().unwrap().clone();
    let kinds = |path: &str| -> Vec<String> {
        reqs.iter()
            .filter(|r| r.path == path)
            .map(|r| r.body.clone())
            .collect()
    };
    let generic = kinds("/generic");
    assert!(
        generic.iter().any(|b| b.contains("\"kind\":\"paused\"")),
        "{generic:?}"
    );
    assert!(
        generic.iter().any(|b| b.contains("\"kind\":\"finished\"")),
        "{generic:?}"
    );
    for b in &generic {
        let v: serde_json::Value = serde_json::from_str(b).unwrap();
        assert_eq!(v["sweep"], "alerting");
    }
    let slack = kinds("/slack");
    assert!(!slack.is_empty());
    for b in &slack {
        let v: serde_json::Value = serde_json::from_str(b).unwrap();
        assert!(v["text"].is_string() && v["content"] == v["text"], "{b}");
    }
    let ntfy: Vec<&Req> = reqs.iter().filter(|r| r.path == "/ntfy-topic").collect();
    assert!(!ntfy.is_empty());
    assert!(ntfy.iter().all(|r| r
        .headers
        .iter()
        .any(|(k, v)| k == "title" && v.starts_with("nightshift: "))));
    let hook = std::fs::read_to_string(&hook_out).unwrap_or_default();
    assert!(hook.contains("paused the sweep paused"), "{hook}");
    assert!(hook.contains("finished"), "{hook}");
    for r in &reqs {
        assert!(!r.body.contains(TOKEN), "token in an alert: {r:?}");
    }
    assert!(!hook.contains(TOKEN));
}

/// The alert command runs in a clean environment: what a shell needs (PATH, HOME, the
/// locale), its NIGHTSHIFT_ALERT_* variables and what the operator names with
/// `--alert-env`; never the daemon's secrets.
#[test]
fn the_alert_command_gets_a_clean_environment() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = tmp.path().join("plan.toml");
    std::fs::write(
        &plan,
        "schema_version = 1\nname = \"clean-env\"\n[defaults]\nvariants = [\"baseline\"]\n[images]\norg = \"o\"\nbaseline = \"{org}/b:{commit}\"\n\
         [[commits]]\ncommit = \"c0000002\"\nparent = \"c00000020000\"\nmodel = \"m/x\"\ngpu_config = \"H100:1\"\nperf_command = '''python benchmarks/benchmark_throughput.py --model m/x --input-len 256 --output-len 256'''\n",
    )
    .unwrap();
    let env_out = tmp.path().join("env.txt");
    let o = Command::new(BIN)
        .args(["run", plan.to_str().unwrap(), "--runtime", "sim"])
        .args(["--headless", "--gpus", "1", "--speed", "max"])
        .args(["--store", tmp.path().join("store").to_str().unwrap()])
        .args(["--alert-command", &format!("env > {}", env_out.display())])
        .args(["--alert-env", "NIGHTSHIFT_TEST_PASSED"])
        .env("HF_TOKEN", TOKEN)
        .env(
            "DOCKER_AUTH_CONFIG",
            "{\"auths\":{\"r\":{\"auth\":\"c2VjcmV0\"}}}",
        )
        .env("NIGHTSHIFT_TEST_PASSED", "yes")
        .env("NIGHTSHIFT_TEST_NOT_PASSED", "no")
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("alert sent"), "{out}");
    let env = std::fs::read_to_string(&env_out).unwrap();
    let names: Vec<&str> = env.lines().filter_map(|l| l.split('=').next()).collect();
    for absent in [
        "HF_TOKEN",
        "DOCKER_AUTH_CONFIG",
        "NIGHTSHIFT_TEST_NOT_PASSED",
    ] {
        assert!(!names.contains(&absent), "{absent} in\n{env}");
    }
    assert!(!env.contains(TOKEN), "{env}");
    for present in ["PATH", "NIGHTSHIFT_ALERT_KIND", "NIGHTSHIFT_ALERT_TITLE"] {
        assert!(names.contains(&present), "no {present} in\n{env}");
    }
    assert!(env.contains("NIGHTSHIFT_TEST_PASSED=yes\n"), "{env}");
}
