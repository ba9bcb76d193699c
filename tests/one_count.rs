//! One count everywhere (#34): on one night, the same number for the same thing in the
//! TUI's header, its leave popup, `status`, `results` (text and JSON) and the digest. The
//! example plan's sim night, driven to where only held runs remain, in a real terminal
//! (tmux) against the real daemon.

mod support;

use regex::Regex;
use support::daemon::{require_tmux, stop_now, Tmux, BIN};

fn num(re: &str, text: &str) -> Vec<usize> {
    let caps = Regex::new(re)
        .unwrap()
        .captures(text)
        .unwrap_or_else(|| panic!("`{re}` not in:\n{text}"));
    caps.iter()
        .skip(1)
        .map(|m| m.unwrap().as_str().parse().unwrap())
        .collect()
}

fn cli(args: &[&str]) -> String {
    let o = std::process::Command::new(BIN).args(args).output().unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn the_same_number_for_the_same_thing_everywhere() {
    if !require_tmux() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let s = store.to_str().unwrap().to_string();
    let plan = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/iso-vllm.toml");
    let t = Tmux::new(
        "one",
        &format!("{BIN} run {plan} --runtime sim --store {s} --speed 2000"),
    );
    t.run(&["resize-window", "-t", "one", "-x", "120", "-y", "40"]);
    // Nothing queued or running: the night waits on its held runs alone.
    let t0 = std::time::Instant::now();
    let head = loop {
        let sc = t.screen();
        let second = sc.lines().nth(1).unwrap_or("").to_string();
        if second.contains("▶ 0 · 0 queued") {
            break second;
        }
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(120),
            "the night never settled:\n{sc}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let [done, total, ok, failed, held, skipped, not_runnable] = num(
        r"(\d+)/(\d+) done .*✓ (\d+) ✗ (\d+) ! (\d+) held .*⊘ (\d+) skipped \((\d+) not runnable\)",
        &head,
    )[..] else {
        unreachable!()
    };
    eprintln!("header: {head}");
    let runs = total + not_runnable;

    // status (live, from the daemon).
    let st = cli(&["status", "--store", &s]);
    assert_eq!(
        num(
            r"(\d+)/(\d+) done \((\d+) ok, (\d+) failed, (\d+) held, (\d+) skipped \((\d+) not runnable\)\)",
            &st
        ),
        vec![done, total, ok, failed, held, skipped, not_runnable],
        "status: {st}\nheader: {head}"
    );
    assert!(
        st.contains(&format!("{held} waiting for the operator")),
        "{st}"
    );

    // The digest (live): every run by outcome, and the commits' two counts.
    let digest = cli(&["digest", "--store", &s]);
    let line = digest
        .lines()
        .find(|l| l.contains(" runs: "))
        .expect("the digest's count line");
    let by = |word: &str| num(&format!(r"(\d+) {word}\b"), line)[0];
    assert_eq!(num(r"^(\d+) runs:", line)[0], runs, "{line}");
    assert_eq!(
        (by("success"), by("failed"), by("held"), by("skipped")),
        (ok, failed, held, skipped),
        "digest: {line}\nheader: {head}"
    );
    let [named, failed_night] = num(
        r"Named before the night: (\d+) commits; failed during the night: (\d+)\.",
        &digest,
    )[..] else {
        unreachable!()
    };

    // results, text and JSON.
    let text = cli(&["results", "--store", &s]);
    assert_eq!(
        num(r"runs: (\d+) \((\d+) successful\)", &text),
        vec![runs, ok],
        "results"
    );
    assert_eq!(
        num(
            r"named before the night: (\d+); failed during the night: (\d+)",
            &text
        ),
        vec![named, failed_night]
    );
    let json: serde_json::Value =
        serde_json::from_str(&cli(&["results", "--store", &s, "--format", "json"])).unwrap();
    let sum = &json["summary"];
    assert_eq!(sum["runs"], runs);
    assert_eq!(sum["successful_runs"], ok);
    assert_eq!(sum["named_before_night"], named);
    assert_eq!(sum["failed_during_night"], failed_night);

    // The leave popup says the header's done-of-total.
    t.run(&["send-keys", "-t", "one", "q"]);
    let t0 = std::time::Instant::now();
    let popup = loop {
        let sc = t.screen();
        if sc.contains("of") && sc.contains("leave the sweep?") {
            break sc;
        }
        assert!(t0.elapsed() < std::time::Duration::from_secs(10), "{sc}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(
        num(r"(\d+) of (\d+) done", &popup),
        vec![done, total],
        "{popup}"
    );
    t.run(&["send-keys", "-t", "one", "Escape"]);
    stop_now(&store);
}

/// At 80×24, 50 s into a sim night of the example plan at `--speed 5` (its first runs are
/// 8-GPU ones, none has ended yet): the header gives an ETA time and every count in full.
#[test]
fn eighty_columns_give_an_eta_and_every_count_from_the_first_minute() {
    if !require_tmux() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("store").to_str().unwrap().to_string();
    let plan = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/iso-vllm.toml");
    let t = Tmux::new(
        "eta80",
        &format!("{BIN} run {plan} --runtime sim --store {s} --speed 5"),
    );
    t.run(&["resize-window", "-t", "eta80", "-x", "80", "-y", "24"]);
    std::thread::sleep(std::time::Duration::from_secs(50));
    let sc = t.screen();
    eprintln!("at 50 s, 80×24:\n{sc}");
    let mut lines = sc.lines();
    let (top, second) = (lines.next().unwrap_or(""), lines.next().unwrap_or(""));
    assert!(
        Regex::new(r"ETA \d\d:\d\d").unwrap().is_match(top),
        "an ETA time: {top}"
    );
    let full = Regex::new(
        r"\d+/\d+ done .*✓ ?\d+ ✗ ?\d+ ! ?\d+ held ▶ ?\d+ · ?\d+ queued ⊘ ?\d+ skipped \(\d+ not runnable\)",
    )
    .unwrap();
    assert!(full.is_match(second), "every count in full: {second}");
    stop_now(std::path::Path::new(&s));
}
