//! Faults the night must survive, with the real binary: a foreground sweep whose terminal
//! goes away, silent and hostile clients on the socket, a disk that fills, a store that
//! belongs to someone else or was overwritten, and `stop --now` followed at once by `run`.

mod support;
use nightshift::model::RunState;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::daemon::*;

/// Every run of the store has a final outcome (none queued, active or held).
fn all_final(store: &Path) -> Result<usize, String> {
    let s = nightshift::store::Store::open(store, false).map_err(|e| e.to_string())?;
    let open: Vec<String> = s
        .runs()
        .values()
        .filter(|r| !matches!(r.record.state, RunState::Finished { .. }))
        .map(|r| format!("{} {:?}", r.key, r.record.state))
        .collect();
    if open.is_empty() {
        Ok(s.runs().len())
    } else {
        Err(open.join(", "))
    }
}

/// `run PLAN --runtime sim --headless --speed max --store STORE EXTRA…`, to its end.
fn sim_run(plan: &Path, store: &Path, extra: &[&str]) -> std::process::Output {
    let store = store.to_str().unwrap();
    let mut args = vec!["--speed", "max", "--store", store];
    args.extend_from_slice(extra);
    headless_run(plan, &args)
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn a_foreground_sweep_goes_on_when_its_terminal_is_killed() {
    if !require_tmux() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let plan = plan(tmp.path(), 8);
    let store = tmp.path().join("store");
    let s = store.to_str().unwrap();
    let t = Tmux::new(
        "fg",
        &format!(
            "{BIN} run {} --runtime sim --headless --gpus 2 --speed 100 --store {s}",
            plan.display()
        ),
    );
    wait_for("the headless daemon", 30, || status(&store).0 == 0);
    wait_for("a line on the terminal", 30, || t.screen().contains(" a1 "));
    // The SSH session drops: the terminal goes, its processes get SIGHUP, and every later
    // write to the terminal fails with EIO.
    t.kill_server();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(status(&store).0, 0, "the sweep must outlive its terminal");
    wait_for("the sweep to end by itself", 180, || status(&store).0 != 0);
    wait_for("the store to be let go", 30, || {
        nightshift::store::Store::open(&store, false).is_ok()
    });
    let n = all_final(&store).unwrap_or_else(|open| panic!("runs without an outcome: {open}"));
    assert_eq!(n, 16);
    let log = std::fs::read_to_string(store.join("daemon.log")).unwrap();
    assert!(log.contains("the terminal hung up"), "{log}");
    assert!(log.contains("16 of 16 runs finished"), "{log}");
}

/// A daemon started with `ulimit -n 1024`, as the operator's shell might have it.
fn limited_daemon(plan: &Path, store: &Path) -> Daemon {
    Daemon(
        Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ulimit -n 1024 && exec {BIN} run {} --runtime sim --headless --gpus 2 --speed 1 --store {}",
                plan.display(),
                store.display()
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

fn raise_nofile() {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut r = getrlimit(Resource::Nofile);
    r.current = r.maximum;
    let _ = setrlimit(Resource::Nofile, r);
}

#[test]
fn silent_connections_never_lock_status_out() {
    raise_nofile();
    let tmp = tempfile::tempdir().unwrap();
    let plan = plan(tmp.path(), 40);
    let store = tmp.path().join("store");
    let mut daemon = limited_daemon(&plan, &store);
    wait_for("the daemon's socket", 30, || status(&store).0 == 0);
    let sock = nightshift::daemon::protocol::socket_path(&store);
    // More connections that never say hello than the daemon has descriptors.
    let mut idle = Vec::new();
    for _ in 0..1100 {
        match UnixStream::connect(&sock) {
            Ok(c) => idle.push(c),
            Err(e) => panic!("connect {}: {e}", idle.len()),
        }
    }
    let (code, line) = status(&store);
    assert_eq!(
        code, 0,
        "status must answer with 1,100 idle connections: {line}"
    );
    assert!(line.contains("night running"), "{line}");
    assert!(daemon.try_wait().unwrap().is_none(), "the daemon died");
    drop(idle);
    assert_eq!(status(&store).0, 0);
}

fn peak_rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

#[test]
fn a_line_without_end_costs_the_daemon_no_memory() {
    let (_tmp, _plan, store, mut daemon) = started(40, "1");
    let sock = nightshift::daemon::protocol::socket_path(&store);
    let mut c = UnixStream::connect(&sock).unwrap();
    c.set_write_timeout(Some(Duration::from_secs(20))).unwrap();
    let chunk = vec![b'x'; 1 << 20];
    let mut sent = 0usize;
    for _ in 0..100 {
        // The daemon ends the connection once the line passes its limit.
        if c.write_all(&chunk).is_err() {
            break;
        }
        sent += chunk.len();
    }
    assert!(sent < 100 << 20, "the daemon read a 100 MB line to its end");
    let peak = peak_rss_kib(daemon.id());
    assert!(peak < 200 * 1024, "daemon peak RSS {peak} KiB");
    assert!(daemon.try_wait().unwrap().is_none(), "the daemon died");
    assert_eq!(status(&store).0, 0);
}

#[test]
fn a_client_that_never_says_hello_is_told_why_and_closed() {
    let (_tmp, _plan, store, _daemon) = started(40, "1");
    let c = UnixStream::connect(nightshift::daemon::protocol::socket_path(&store)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(&c), &mut line).unwrap();
    assert!(line.contains("no hello within"), "{line}");
}

#[test]
fn below_the_disk_floor_the_sweep_stops_by_itself_naming_the_store_and_its_space() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = plan(tmp.path(), 3);
    let store = tmp.path().join("store");
    let out = sim_run(
        &plan,
        &store,
        // A floor no disk here meets: the same path as a disk that is nearly full.
        &["--min-free-mib", "1000000000"],
    );
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(&format!("store {} has", store.display())) && text.contains(" free of "),
        "{text}"
    );
    // Nothing ran, and the store says so; with room, the same command finishes the night.
    let again = sim_run(&plan, &store, &[]);
    assert_eq!(again.status.code(), Some(0), "{again:?}");
    assert_eq!(all_final(&store), Ok(6));
}

/// A store on a 4 MiB tmpfs (root only: the hidden fault check does the same).
#[test]
fn a_store_on_a_tiny_disk_stops_the_sweep_and_keeps_every_printed_outcome() {
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("tiny");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=4m", "tmpfs"])
        .arg(&mnt)
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "CI=true and a tmpfs cannot be mounted here: the disk-full test cannot run"
        );
        eprintln!("SKIP: cannot mount a tmpfs (not root?)");
        return;
    }
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
    let _u = Unmount(mnt.clone());
    // Enough runs that their logs and records fill 4 MiB.
    let plan = plan(tmp.path(), 400);
    let store = mnt.join("store");
    let out = sim_run(&plan, &store, &["--min-free-mib", "0"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let text = format!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert_ne!(out.status.code(), Some(0), "{text}");
    assert!(out.status.code().is_some(), "killed by a signal: {text}");
    assert!(text.contains(&store.display().to_string()), "{text}");
    assert!(text.contains(" free of "), "{text}");
    // Every outcome printed is in the store (read from a copy: the tmpfs is full).
    let copy = tmp.path().join("copy");
    Command::new("cp")
        .arg("-a")
        .arg(&store)
        .arg(&copy)
        .status()
        .unwrap();
    let _ = std::fs::remove_file(copy.join("nightshift.sock"));
    let s = nightshift::store::Store::open(&copy, false).unwrap();
    let mut printed = 0;
    for l in stdout.lines() {
        // `00:00:00.305 #129   c0000040/human   a1 success`
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() >= 5 && matches!(f[4], "success" | "failed" | "skipped") {
            printed += 1;
            let run = s
                .run(f[2])
                .unwrap_or_else(|| panic!("{} printed, not stored", f[2]));
            assert!(
                matches!(run.record.state, RunState::Finished { .. }),
                "{l}: stored as {:?}",
                run.record.state
            );
        }
    }
    assert!(printed > 10, "the disk filled before any outcome: {text}");
}

#[test]
fn stop_now_returns_once_the_store_is_free_again() {
    let (_tmp, plan, store, mut daemon) = started(40, "1");
    let out = stop_now(&store);
    assert!(out.status.success(), "{out:?}");
    // At once: the store must take the next sweep.
    let again = Command::new(BIN)
        .args([
            "run",
            plan.to_str().unwrap(),
            "--runtime",
            "sim",
            "--headless",
        ])
        .args(["--speed", "max", "--gpus", "2"])
        .args(["--store", store.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(0), "{again:?}");
    let _ = daemon.wait();
}

#[test]
fn a_store_with_random_bytes_is_refused_for_run_with_the_salvage_hint() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = plan(tmp.path(), 2);
    let store = tmp.path().join("store");
    let run = || sim_run(&plan, &store, &[]);
    assert_eq!(run().status.code(), Some(0));
    let db = store.join("db");
    let len = std::fs::metadata(&db).unwrap().len() as usize;
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let junk: Vec<u8> = (0..len.max(4096))
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(&db, junk).unwrap();
    let out = run();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("damaged") && err.contains("salvage"), "{err}");
    let results = Command::new(BIN)
        .args(["results", "--store", store.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&results.stderr);
    assert_eq!(results.status.code(), Some(2), "{err}");
    assert!(err.contains("salvage"), "{err}");
}

#[test]
fn the_store_and_its_logs_are_owner_only() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = plan(tmp.path(), 2);
    let store = tmp.path().join("store");
    std::fs::create_dir(&store).unwrap();
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = sim_run(&plan, &store, &[]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(mode(&store), 0o700);
    assert_eq!(mode(&store.join("db")), 0o600);
    let mut logs = 0;
    for e in walk(&store.join("logs")) {
        let m = mode(&e);
        assert_eq!(m & 0o077, 0, "{} is {m:o}", e.display());
        logs += 1;
    }
    assert!(logs > 0);
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        }
        out.push(p);
    }
    out
}

/// Another user with write access to the store directory: the live daemon's socket is not
/// theirs to connect to, so it is not stale; their `status` says so and their `run` is
/// refused without touching the socket.
#[test]
fn another_users_permission_error_is_never_taken_for_a_dead_daemon() {
    let runuser = Command::new("runuser").arg("--help").output().is_ok();
    let root = rustix::process::geteuid().is_root();
    if !(runuser && root) {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "CI=true needs root and runuser for the second-user test"
        );
        eprintln!("SKIP: needs root and runuser");
        return;
    }
    let (tmp, plan, store, mut daemon) = started(40, "1");
    for d in [tmp.path(), store.as_path()] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    std::fs::set_permissions(&plan, std::fs::Permissions::from_mode(0o644)).unwrap();
    // The binary where `nobody` may run it.
    let bin = tmp.path().join("nightshift");
    std::fs::copy(BIN, &bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let as_nobody = |args: &[&str]| {
        Command::new("runuser")
            .args(["-u", "nobody", "--"])
            .arg(&bin)
            .args(args)
            .env("HOME", "/tmp")
            .output()
            .unwrap()
    };
    let s = store.to_str().unwrap();
    let st = as_nobody(&["status", "--store", s]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&st.stdout),
        String::from_utf8_lossy(&st.stderr)
    );
    assert!(text.contains("not yours"), "{text}");
    assert!(!text.contains("takes the store over"), "{text}");
    let run = as_nobody(&[
        "run",
        plan.to_str().unwrap(),
        "--runtime",
        "sim",
        "--headless",
        "--store",
        s,
    ]);
    let err = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{err}");
    assert!(err.contains("belongs to user 0"), "{err}");
    assert!(nightshift::daemon::protocol::socket_path(&store).exists());
    assert_eq!(status(&store).0, 0, "the live daemon must still answer");
    assert!(daemon.try_wait().unwrap().is_none());
}

/// Processes that are zombies (exited, never reaped) and whose parent is `parent`.
fn zombies_of(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) S ppid …`: comm may hold spaces, so read after the last ')'.
        let rest: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, r)| r.split_whitespace().collect())
            .unwrap_or_default();
        if rest.first() == Some(&"Z") && rest.get(1) == Some(&parent.to_string().as_str()) {
            out.push(pid);
        }
    }
    out
}

#[test]
fn the_tui_tells_a_crashed_daemon_from_a_finished_one_and_reaps_it() {
    if !require_tmux() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let plan = plan(tmp.path(), 30);
    let store = tmp.path().join("store");
    let t = Tmux::new(
        "tui",
        &format!(
            "exec {BIN} run {} --runtime sim --gpus 2 --speed 1 --store {}",
            plan.display(),
            store.display()
        ),
    );
    wait_for("the TUI attached", 30, || t.screen().contains("queue"));
    let (_, line) = status(&store);
    let pid: i32 = line
        .split("pid ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no pid in {line}"));
    let tui: u32 = t
        .run(&["display-message", "-p", "#{pane_pid}"])
        .trim()
        .parse()
        .unwrap();
    Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    wait_for("the TUI to say the daemon crashed", 30, || {
        t.screen().contains("ended without finishing")
    });
    let screen = t.screen();
    assert!(screen.contains("signal 9"), "{screen}");
    wait_for("the daemon reaped", 10, || zombies_of(tui).is_empty());
}
