//! The headless sim sweep of the example plan, end to end through the binary.

use std::process::Command;

fn run(seed: &str) -> (i32, String) {
    let store = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_nightshift"))
        .args([
            "run",
            "examples/iso-vllm.toml",
            "--runtime",
            "sim",
            "--headless",
            "--speed",
            "max",
            "--seed",
            seed,
            "--store",
            store.path().to_str().unwrap(),
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run nightshift");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn summary(out: &str) -> String {
    out.lines()
        .skip_while(|l| !l.starts_with("sweep ") || !l.contains("runs finished"))
        .filter(|l| !l.contains("wall"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn every_run_ends_terminal_and_the_seed_mix_shows() {
    let (code, out) = run("7");
    assert_eq!(code, 0, "{out}");
    let s = summary(&out);
    assert!(
        s.contains("285 of 285 runs finished") || out.contains("285 of 285 runs finished"),
        "{out}"
    );
    assert!(s.contains("queued 0") && s.contains("held 0"), "{s}");
    for cat in ["image_not_found", "no_metrics"] {
        assert!(s.contains(cat), "{cat} missing from the failure mix:\n{s}");
    }
}

#[test]
fn same_seed_same_outcome() {
    let (_, a) = run("3");
    let (_, b) = run("3");
    assert_eq!(summary(&a), summary(&b));
    let finals = |o: &str| {
        let mut v: Vec<String> = o
            .lines()
            .filter(|l| {
                l.contains(" a")
                    && (l.contains("success") || l.contains("failed(") || l.contains("skipped("))
            })
            .map(|l| {
                l.split_whitespace()
                    .skip(1)
                    .take(4)
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        v.sort();
        v
    };
    assert_eq!(finals(&a), finals(&b));
}

#[test]
fn sigterm_and_sigint_stop_cleanly_and_the_sweep_resumes() {
    for signal in ["-TERM", "-INT"] {
        let store = tempfile::tempdir().unwrap();
        let args = |speed: &'static str| {
            vec![
                "run".to_string(),
                "examples/iso-vllm.toml".into(),
                "--runtime".into(),
                "sim".into(),
                "--headless".into(),
                "--speed".into(),
                speed.into(),
                "--store".into(),
                store.path().to_str().unwrap().into(),
            ]
        };
        let child = Command::new(env!("CARGO_BIN_EXE_nightshift"))
            .args(args("50"))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1500));
        let killed = Command::new("kill")
            .arg(signal)
            .arg(child.id().to_string())
            .status()
            .unwrap();
        assert!(killed.success());
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{signal}: {stdout}");
        assert!(stdout.contains("interrupted"), "{signal}: {stdout}");
        assert!(
            stdout.contains("interrupted by shutdown"),
            "runs in flight are re-queued: {stdout}"
        );
        // The next run resumes and finishes everything.
        let out = Command::new(env!("CARGO_BIN_EXE_nightshift"))
            .args(args("max"))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{stdout}");
        assert!(stdout.contains("285 of 285 runs finished"), "{stdout}");
    }
}

#[test]
fn operator_overrides_load_from_the_config_dir_and_errors_say_where() {
    let cfg = tempfile::tempdir().unwrap();
    let dir = cfg.path().join("nightshift");
    std::fs::create_dir_all(&dir).unwrap();
    let store = tempfile::tempdir().unwrap();
    let run = |dir: &std::path::Path| {
        Command::new(env!("CARGO_BIN_EXE_nightshift"))
            .args([
                "run",
                "examples/iso-vllm.toml",
                "--runtime",
                "sim",
                "--headless",
            ])
            .args(["--speed", "max", "--store"])
            .arg(store.path())
            .env("XDG_CONFIG_HOME", dir)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap()
    };
    std::fs::write(dir.join("policy.toml"), "max_retries = 1\nbreaker = 2\n").unwrap();
    let out = run(cfg.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("policy.toml:2:1"), "{err}");
    std::fs::write(dir.join("policy.toml"), "max_retries = 1\n").unwrap();
    let out = run(cfg.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("operator overrides from"), "{stdout}");
}
