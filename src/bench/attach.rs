//! `nightshift bench attach` and `bench daemon`: the daemon as the product runs it (this
//! binary, `run --headless`, a sim sweep), measured from outside. `attach` times a client
//! from connecting to its first full frame; `daemon` follows the daemon's RSS and the logs
//! it writes over a whole simulated night.

use crate::daemon::protocol::{self, ClientMsg, DaemonMsg, Want};
use crate::tui::{app::App, keymap::KeyMap, theme::Theme};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A daemon of this binary on a synthetic plan, killed when dropped.
struct Daemon {
    child: Child,
    store: std::path::PathBuf,
    _tmp: tempfile::TempDir,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(runs: usize, speed: &str, log_kb: u64) -> Result<Daemon, String> {
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let plan = tmp.path().join("plan.toml");
    let text = crate::plan::synthetic::synthetic_plan_text_logging(
        runs,
        &["serving", "throughput", "latency"],
        log_kb,
    );
    std::fs::write(&plan, text).map_err(|e| e.to_string())?;
    let store = tmp.path().join("store");
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let child = Command::new(exe)
        .arg("run")
        .arg(&plan)
        .args([
            "--runtime",
            "sim",
            "--headless",
            "--gpus",
            "8",
            "--speed",
            speed,
        ])
        .arg("--store")
        .arg(&store)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
    let d = Daemon {
        child,
        store,
        _tmp: tmp,
    };
    let until = Instant::now() + Duration::from_secs(60);
    while UnixStream::connect(protocol::socket_path(&d.store)).is_err() {
        if Instant::now() > until {
            return Err("the daemon did not serve within 60 s".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(d)
}

/// Connect, take the snapshot, build the TUI's state from it and draw one full frame.
fn first_frame(store: &Path, w: u16, h: u16) -> Result<Duration, String> {
    let t = Instant::now();
    let mut s = UnixStream::connect(protocol::socket_path(store)).map_err(|e| e.to_string())?;
    let hello = ClientMsg::Hello {
        version: protocol::VERSION,
        want: Want::Attach,
    };
    s.write_all(protocol::line(&hello).as_bytes())
        .map_err(|e| e.to_string())?;
    let mut line = String::new();
    BufReader::new(&s)
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    let DaemonMsg::Welcome {
        meta,
        plan_text,
        state,
        ..
    } = serde_json::from_str(&line).map_err(|e| e.to_string())?
    else {
        return Err("no welcome".into());
    };
    let plan = crate::plan::Plan::from_text_with(&meta.plan_path, plan_text, &Default::default())
        .map_err(|e| e.to_string())?;
    let mut app = App::new(
        Arc::new(plan),
        meta.gpus,
        Theme::builtin("dark").ok_or("no dark theme")?,
        KeyMap::default(),
    );
    app.night.state = state;
    app.attached = true;
    let mut term = ratatui::Terminal::new(ratatui::backend::TestBackend::new(w, h))
        .map_err(|e| e.to_string())?;
    term.draw(|f| crate::tui::views::draw(f, &app))
        .map_err(|e| e.to_string())?;
    Ok(t.elapsed())
}

fn pct(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 - 1.0) * q).round() as usize]
}

fn rss_kib(pid: u32, field: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// `bench attach --runs N`: connect → snapshot → first full frame (160×48), 30 times.
pub fn attach(runs: usize) -> i32 {
    let d = match start(runs, "1", 0) {
        Ok(d) => d,
        Err(e) => {
            tracing::error!("{e}");
            return 1;
        }
    };
    let mut times = Vec::new();
    for _ in 0..30 {
        match first_frame(&d.store, 160, 48) {
            Ok(t) => times.push(t.as_secs_f64() * 1000.0),
            Err(e) => {
                tracing::error!("attach: {e}");
                return 1;
            }
        }
    }
    let (p50, p99) = (pct(&mut times, 0.5), pct(&mut times, 0.99));
    println!(
        "attach: {runs} runs, connect → snapshot → first full frame (160×48): p50 {p50:.1} ms, max {p99:.1} ms (30 attaches)"
    );
    0
}

fn dir_bytes(p: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(p) else {
        return 0;
    };
    rd.flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// `bench daemon --runs N --size-mb M`: a whole sim night at `--speed max`, the servers
/// printing M MB of request logs in all, with one client attached; the daemon's RSS sampled
/// every 100 ms and the logs it wrote.
pub fn daemon(runs: usize, log_mb: usize) -> i32 {
    let log_kb = (log_mb as u64 * 1024).div_ceil(runs.max(1) as u64);
    let mut d = match start(runs, "max", log_kb) {
        Ok(d) => d,
        Err(e) => {
            tracing::error!("{e}");
            return 1;
        }
    };
    let pid = d.child.id();
    // An attached client reads the whole event stream, as a TUI left open all night would.
    let store = d.store.clone();
    let reader = std::thread::spawn(move || -> u64 {
        let Ok(mut s) = UnixStream::connect(protocol::socket_path(&store)) else {
            return 0;
        };
        let hello = ClientMsg::Hello {
            version: protocol::VERSION,
            want: Want::Attach,
        };
        if s.write_all(protocol::line(&hello).as_bytes()).is_err() {
            return 0;
        }
        BufReader::new(s).lines().map_while(Result::ok).count() as u64
    });
    let t = Instant::now();
    let (mut peak, mut last) = (0u64, 0u64);
    while let Ok(None) = d.child.try_wait() {
        if let Some(k) = rss_kib(pid, "VmRSS:") {
            peak = peak.max(k);
            last = k;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let lines = reader.join().unwrap_or(0);
    let logs = dir_bytes(&d.store.join("logs"));
    println!(
        "daemon: {runs} runs in {:.1} s wall; {} event lines to an attached client; logs written {:.1} MB; daemon RSS peak {:.1} MiB, last sample {:.1} MiB",
        t.elapsed().as_secs_f64(),
        lines,
        logs as f64 / 1e6,
        peak as f64 / 1024.0,
        last as f64 / 1024.0
    );
    0
}
