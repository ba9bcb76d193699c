//! The real binary's daemon for tests: a small sim plan, a headless daemon that dies with
//! the test, status and stop, and tmux as the terminal that can be dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_nightshift");

pub fn plan(dir: &Path, commits: usize) -> PathBuf {
    let mut t = String::from(
        "schema_version = 1\nname = \"night\"\n[defaults]\nvariants = [\"baseline\", \"human\"]\n[images]\norg = \"o\"\nhuman = \"{org}/h:{commit}\"\nbaseline = \"{org}/b:{commit}\"\n",
    );
    for i in 0..commits {
        t.push_str(&format!(
            "[[commits]]\ncommit = \"c{i:07x}\"\nparent = \"c{i:07x}0000\"\nmodel = \"m/x\"\ngpu_config = \"H100:1\"\nperf_command = '''python benchmarks/benchmark_throughput.py --model m/x --input-len 256 --output-len 256'''\n"
        ));
    }
    let p = dir.join("plan.toml");
    std::fs::write(&p, t).unwrap();
    p
}

pub fn status(store: &Path) -> (i32, String) {
    let o = Command::new(BIN)
        .args(["status", "--store", store.to_str().unwrap()])
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

pub fn stop_now(store: &Path) -> std::process::Output {
    Command::new(BIN)
        .args(["stop", "--now", "--store", store.to_str().unwrap()])
        .output()
        .unwrap()
}

pub fn wait_for(what: &str, secs: u64, mut ok: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(secs) {
        if ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("timed out waiting for {what}");
}

pub fn headless(plan: &Path, store: &Path, speed: &str) -> Daemon {
    spawn_run(plan, store, speed, false)
}

/// As the TUI starts it: `--headless` with the daemon's mark, so it waits for a client
/// where a run (or a pause) needs an operator.
#[allow(dead_code)] // each test binary uses part of this module
pub fn background(plan: &Path, store: &Path, speed: &str) -> Daemon {
    spawn_run(plan, store, speed, true)
}

fn spawn_run(plan: &Path, store: &Path, speed: &str, background: bool) -> Daemon {
    let mut cmd = Command::new(BIN);
    if background {
        cmd.env("NIGHTSHIFT_DAEMON", "1");
    }
    Daemon(
        cmd.args([
            "run",
            plan.to_str().unwrap(),
            "--runtime",
            "sim",
            "--headless",
        ])
        .args([
            "--gpus",
            "2",
            "--speed",
            speed,
            "--store",
            store.to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap(),
    )
}

/// A daemon that dies with the test, even a failing one: a leaked daemon would keep its
/// store (and whatever descriptors it inherited) for good.
pub struct Daemon(pub Child);

impl std::ops::Deref for Daemon {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Daemon {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// A headless daemon on a fresh store, serving.
pub fn started(commits: usize, speed: &str) -> (tempfile::TempDir, PathBuf, PathBuf, Daemon) {
    let tmp = tempfile::tempdir().unwrap();
    let plan = plan(tmp.path(), commits);
    let store = tmp.path().join("store");
    let daemon = headless(&plan, &store, speed);
    wait_for("the daemon's socket", 30, || status(&store).0 == 0);
    (tmp, plan, store, daemon)
}

pub fn require_tmux() -> bool {
    if Command::new("tmux").arg("-V").output().is_ok() {
        return true;
    }
    assert!(
        std::env::var("CI").map_or(true, |v| v != "true"),
        "CI=true and tmux is not installed: the daemon's terminal test cannot run"
    );
    eprintln!("SKIP: tmux is not installed");
    false
}

pub struct Tmux(pub String);

impl Tmux {
    pub fn new(name: &str, cmd: &str) -> Tmux {
        let socket = format!("ns-daemon-{}-{name}", std::process::id());
        let t = Tmux(socket);
        t.run(&[
            "new-session",
            "-d",
            "-s",
            name,
            "-x",
            "150",
            "-y",
            "40",
            cmd,
        ]);
        t
    }
    pub fn run(&self, args: &[&str]) -> String {
        let o = Command::new("tmux")
            .args(["-L", &self.0])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    }
    pub fn screen(&self) -> String {
        self.run(&["capture-pane", "-p"])
    }
    pub fn kill_server(&self) {
        self.run(&["kill-server"]);
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        self.kill_server();
    }
}

/// `run PLAN --runtime sim --headless ARGS…`, to its end.
pub fn headless_run(plan: &Path, args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .args([
            "run",
            plan.to_str().unwrap(),
            "--runtime",
            "sim",
            "--headless",
        ])
        .args(args)
        .output()
        .unwrap()
}

/// `headless_run` on `store` with two GPUs at full speed: a small sweep to its end.
#[allow(dead_code)] // each test binary uses part of this module
pub fn headless_to_end(plan: &Path, store: &Path) -> std::process::Output {
    headless_run(
        plan,
        &[
            "--gpus",
            "2",
            "--speed",
            "max",
            "--store",
            store.to_str().unwrap(),
        ],
    )
}
