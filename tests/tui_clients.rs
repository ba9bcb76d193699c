//! Two operators on one sweep, each in their own terminal (tmux), against the real daemon
//! (#25): what one does is in the other's activity log with who did it and what came of
//! it; the other's selection stays on the run it picked; a client that attaches late sees
//! the logs written before it came (read back from disk), at 80×24 as at 150×40; the other
//! is told by a toast as it happens; a third attaching late gets the activity log with its
//! snapshot, and its 3-way view names the one cell its keys act on.

mod support;

use support::daemon::{require_tmux, started, stop_now, wait_for, Tmux, BIN};

/// The selected row of the queue (the line with the selection bar), trimmed.
fn selected_row(screen: &str) -> Option<String> {
    screen
        .lines()
        .find(|l| l.contains("│▌"))
        // The commit only: the row's state glyphs and numbers change as its runs go on.
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
}

fn wait_screen(t: &Tmux, what: &str, secs: u64, ok: impl Fn(&str) -> bool) -> String {
    let mut last = String::new();
    let t0 = std::time::Instant::now();
    while t0.elapsed() < std::time::Duration::from_secs(secs) {
        last = t.screen();
        if ok(&last) {
            return last;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("timed out waiting for {what}; the screen:\n{last}");
}

#[test]
fn two_clients_share_the_activity_log_keep_their_selection_and_see_earlier_logs() {
    if !require_tmux() {
        return;
    }
    let (_tmp, _plan, store, _daemon) = started(8, "20");
    let s = store.to_str().unwrap().to_string();
    // The first runs finish before anyone attaches: what a client shows of them can only
    // come from the files on disk.
    let logs = store.join("logs");
    wait_for("a finished run's log files", 60, || {
        std::fs::read_dir(&logs)
            .map(|d| d.flatten().count() >= 3)
            .unwrap_or(false)
    });

    let a = Tmux::new("a", &format!("env USER=ana {BIN} attach --store {s}"));
    let b = Tmux::new("b", &format!("env USER=bo {BIN} attach --store {s}"));
    b.run(&["resize-window", "-t", "b", "-x", "80", "-y", "24"]);
    wait_screen(&a, "client a", 20, |sc| sc.contains("night"));
    wait_screen(&b, "client b", 20, |sc| sc.contains("night"));

    // B (80×24) goes to the first commit, finished before it attached: its log is there.
    b.run(&["send-keys", "-t", "b", "g"]);
    let sb = wait_screen(&b, "b's earlier logs", 20, |sc| {
        sc.contains("c0000000/baseline") && sc.contains("[pull] Pulling from o/b:c0000000")
    });
    let b_sel = selected_row(&sb).expect("b has a selection");

    // A skips the last commit's first run.
    a.run(&["send-keys", "-t", "a", "G"]);
    std::thread::sleep(std::time::Duration::from_millis(500));
    a.run(&["send-keys", "-t", "a", "s"]);
    wait_screen(&a, "a's skip", 20, |sc| sc.contains("⊘"));

    // B is told as it happens: a toast naming A and what came of it, read to its end at
    // 80 columns (it wraps).
    let sb = wait_screen(&b, "a toast of a's skip on b", 20, |sc| {
        sc.contains("⚑ ana@tui:") && sc.contains("done")
    });
    eprintln!("client b at 80×24, a's action as a toast:\n{sb}");
    // B's selection stayed on its run; B's activity log names A and the outcome.
    assert_eq!(selected_row(&sb).as_deref(), Some(b_sel.as_str()), "{sb}");
    b.run(&["send-keys", "-t", "b", "A"]);
    let sb = wait_screen(&b, "the activity log on b", 20, |sc| {
        sc.contains("ana@tui:")
    });
    eprintln!("client b at 80×24, the activity log:\n{sb}");
    assert!(sb.contains("skip"), "{sb}");
    assert!(sb.contains("done"), "{sb}");
    // On A, its own line is "you".
    a.run(&["send-keys", "-t", "a", "A"]);
    let sa = wait_screen(&a, "the activity log on a", 20, |sc| {
        sc.contains("activity (")
    });
    assert!(sa.contains("you"), "{sa}");

    // C attaches late (80×24): the night's activity so far comes with its snapshot.
    let c = Tmux::new("c", &format!("env USER=cy {BIN} attach --store {s}"));
    c.run(&["resize-window", "-t", "c", "-x", "80", "-y", "24"]);
    wait_screen(&c, "client c", 20, |sc| sc.contains("night"));
    c.run(&["send-keys", "-t", "c", "A"]);
    let sc = wait_screen(&c, "the activity log on c, attached late", 20, |sc| {
        sc.contains("ana@tui:")
    });
    assert!(sc.contains("skip"), "{sc}");
    c.run(&["send-keys", "-t", "c", "Escape"]);
    // C's 3-way view names the one cell its keys act on, and h/l moves it.
    c.run(&["send-keys", "-t", "c", "4"]);
    let target = |sc: &str| {
        sc.lines()
            .find_map(|l| l.split("▸ ").nth(1))
            .and_then(|t| t.split_whitespace().next())
            .map(str::to_string)
    };
    let s1 = wait_screen(&c, "c's 3-way target", 20, |sc| {
        sc.contains("s skip · r retry") && target(sc).is_some_and(|t| t.contains('/'))
    });
    let first = target(&s1).unwrap();
    c.run(&["send-keys", "-t", "c", "l"]);
    let s2 = wait_screen(&c, "c's next target", 20, |sc| {
        target(sc).is_some_and(|t| t != first)
    });
    eprintln!("client c at 80×24, the 3-way view:\n{s2}");
    let second = target(&s2).unwrap();
    assert_eq!(
        first.split('/').next(),
        second.split('/').next(),
        "l moves along the commit's variants: {first} → {second}"
    );

    for (t, name) in [(&a, "a"), (&b, "b"), (&c, "c")] {
        t.run(&["send-keys", "-t", name, "Escape"]);
    }
    let out = std::process::Command::new(BIN)
        .args(["digest", "--store", &s])
        .output()
        .unwrap();
    let digest = String::from_utf8_lossy(&out.stdout);
    assert!(digest.contains("## Activity"), "{digest}");
    assert!(digest.contains("ana@tui:"), "{digest}");
    stop_now(&store);
}
