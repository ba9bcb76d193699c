//! End to end: the real binary (`nightshift demo`) in tmux. Keys go in with send-keys, the
//! screen comes back with capture-pane; every wait polls with a deadline.

use std::process::Command;
use std::time::{Duration, Instant};

struct Tmux {
    socket: String,
    _dir: tempfile::TempDir,
}

impl Tmux {
    fn cmd(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
    fn screen(&self) -> String {
        self.cmd(&["capture-pane", "-p", "-t", "e2e"])
    }
    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "e2e"];
        args.extend_from_slice(keys);
        self.cmd(&args);
    }
    fn literal(&self, text: &str) {
        self.cmd(&["send-keys", "-t", "e2e", "-l", text]);
    }
    fn wait(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let s = self.screen();
            if ok(&s) {
                return s;
            }
            if Instant::now() > deadline {
                panic!("timed out waiting for {what}; screen:\n{s}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

/// The glyph in the selected cell of the queue (the one after the `▸` marker).
fn selected_glyph(screen: &str) -> Option<char> {
    let row = screen.lines().find(|l| l.contains("│▌"))?;
    let mut it = row.chars().skip_while(|c| *c != '▸');
    it.next()?;
    it.next()
}

/// A tmux server of this test's own running `shell(dir)` in a 160×48 session `e2e`, or
/// None when tmux is missing outside CI (under CI=true a missing tmux fails the test).
fn start(name: &str, shell: impl FnOnce(&str) -> String) -> Option<Tmux> {
    if Command::new("tmux").arg("-V").output().is_err() {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "CI=true and tmux is not installed: the end-to-end TUI test cannot run"
        );
        eprintln!("skipping: tmux is not installed");
        return None;
    }
    let t = Tmux {
        socket: format!("nightshift-{name}-{}", std::process::id()),
        _dir: tempfile::tempdir().unwrap(),
    };
    let shell = shell(&t._dir.path().display().to_string());
    t.cmd(&[
        "new-session",
        "-d",
        "-s",
        "e2e",
        "-x",
        "160",
        "-y",
        "48",
        &shell,
    ]);
    Some(t)
}

#[test]
fn demo_in_tmux() {
    let bin = env!("CARGO_BIN_EXE_nightshift");
    let Some(t) = start("e2e", |d| {
        format!(
            "cd {d} && XDG_CONFIG_HOME={d} {bin} demo --speed 20 --log-dir {d}/logs; echo EXITED:$?; sleep 120"
        )
    }) else {
        return;
    };

    // The queue is visible.
    let s = t.wait("the queue", |s| {
        s.contains("queue · 95 commits") && s.contains("baseline")
    });
    assert!(s.contains("nightshift"), "{s}");
    assert_eq!(
        t.cmd(&["display-message", "-p", "-t", "e2e", "#{alternate_on}"])
            .trim(),
        "1"
    );

    // ? opens help, esc closes it.
    t.keys(&["?"]);
    t.wait("help", |s| {
        s.contains("help · keys") && s.contains("skip the selected run")
    });
    t.keys(&["Escape"]);
    t.wait("help closed", |s| !s.contains("help · keys"));

    // s skips a queued run and its cell changes from · to ⊘.
    t.keys(&["G"]);
    let mut found = false;
    for _ in 0..60 {
        let s = t.screen();
        if selected_glyph(&s) == Some('·') {
            found = true;
            break;
        }
        t.keys(&["k"]);
        std::thread::sleep(Duration::from_millis(60));
    }
    assert!(found, "a queued run to skip; screen:\n{}", t.screen());
    t.keys(&["s"]);
    t.wait("the skipped glyph", |s| selected_glyph(s) == Some('⊘'));

    // / finds a line in the log of a running run.
    t.keys(&["Escape"]);
    t.wait("a container log line", |s| {
        s.contains("[docker] container ns-")
    });
    t.keys(&["/"]);
    t.literal("created on GPUs");
    t.keys(&["Enter"]);
    let s = t.wait("the search", |s| s.contains("/created on GPUs"));
    assert!(!s.contains("no match for"), "{s}");
    t.keys(&["n"]);

    // q asks (runs are active), y quits, the terminal is restored.
    t.keys(&["q"]);
    t.wait("quit confirmation", |s| {
        s.contains("quit?") || s.contains("EXITED:0")
    });
    t.keys(&["y"]);
    let s = t.wait("exit", |s| s.contains("EXITED:0"));
    assert!(s.contains("runs done"), "{s}");
    assert!(
        !s.contains("queue · 95 commits"),
        "alternate screen left: {s}"
    );
    assert_eq!(
        t.cmd(&["display-message", "-p", "-t", "e2e", "#{alternate_on}"])
            .trim(),
        "0"
    );
}

/// `kill -INT` from outside (not the Ctrl-C key, which raw mode turns into a key): the
/// screen quits and the terminal is the shell's again (cooked, echoing, main screen).
#[test]
fn an_external_sigint_restores_the_terminal() {
    let bin = env!("CARGO_BIN_EXE_nightshift");
    // The inner shell leaves its pid and becomes nightshift; the outer one reads the
    // terminal's modes once it is gone.
    let Some(t) = start("e2e-int", |d| {
        format!(
            "cd {d} && XDG_CONFIG_HOME={d} sh -c 'echo $$ > {d}/pid; exec {bin} demo --speed 20'; stty -a > {d}/stty; echo EXITED; sleep 120"
        )
    }) else {
        return;
    };
    t.wait("the queue", |s| s.contains("queue · 95 commits"));
    let pid = std::fs::read_to_string(t._dir.path().join("pid")).unwrap();
    let ok = Command::new("kill")
        .args(["-INT", pid.trim()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    t.wait("the shell again", |s| s.contains("EXITED"));
    let stty = std::fs::read_to_string(t._dir.path().join("stty")).unwrap();
    let modes: Vec<&str> = stty.split_whitespace().collect();
    for mode in ["icanon", "echo", "isig"] {
        assert!(modes.contains(&mode), "{mode} not restored: {stty}");
    }
    assert_eq!(
        t.cmd(&["display-message", "-p", "-t", "e2e", "#{alternate_on}"])
            .trim(),
        "0"
    );
}
