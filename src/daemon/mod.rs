//! The sweep daemon: the one process that owns a store's sweep (engine, sled, log files)
//! and outlives the terminal that started it. Clients attach through a Unix socket in the
//! store directory (see [`protocol`]).
//!
//! - `nightshift run PLAN` starts it in the background (a new session, so a dropped SSH
//!   connection's SIGHUP never reaches it; output to `daemon.log` in the store) and attaches
//!   the TUI; if one already runs on the store, it just attaches.
//! - `nightshift run PLAN --headless` is the same daemon in the foreground (systemd,
//!   journald, scripts): its stdout is the event log.
//! - `attach`, `status`, `stop [--now]` are clients.
//!
//! A daemon killed with -9 leaves its socket behind; the next daemon finds nobody
//! answering on it and takes the store over (orphan containers are removed as the engine
//! starts, runs in flight are re-queued by the store's resume).

pub mod calibrate;
pub mod client;
pub mod commands;
pub mod console;
pub mod protocol;
pub mod results;
pub mod server;

use crate::daemon::commands::{prepare_run, resolve_dir, Prepared, RunArgs};
use crate::engine::{Engine, EngineOptions};
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Set in the environment of a daemon started in the background by `run`.
pub const BACKGROUND_ENV: &str = "NIGHTSHIFT_DAEMON";

/// The daemon's own log in the store directory (background mode).
pub const LOG: &str = "daemon.log";

/// Whether this process is a daemon started by `run` in the background.
pub(crate) fn in_background() -> bool {
    std::env::var_os(BACKGROUND_ENV).is_some_and(|v| v == "1")
}

/// Run the sweep as the store's daemon in this process until it ends. In the background it
/// waits for the operator where a run needs one (there may be a client to decide later);
/// in the foreground (`--headless`) nobody can answer, and such runs end as held.
/// glibc gives every thread that allocates its own malloc arena, each keeping freed memory:
/// the daemon's threads (tokio, sled, the I/O threads) held ≈8 MiB more over a 10 GB night
/// (`bench daemon`: RSS peak 102.8 MiB with glibc's default, 94.7 MiB with two arenas).
/// Set before the sweep's runtime and threads start (it limits arenas made after it).
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes an allocator setting and takes glibc's own lock; no
    // memory is touched.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

pub fn serve(a: RunArgs, background: bool) -> i32 {
    // Its lines go to a log file (or journald): nobody reads them as they happen.
    if background || !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        crate::logging::with_timestamps();
    }
    limit_malloc_arenas();
    let dir = match resolve_dir(a.store.clone(), &a.plan.name) {
        Ok(d) => d,
        Err(c) => return c,
    };
    // Everything the daemon creates (store, logs, digests, its socket) is its owner's alone:
    // run logs hold prompts and paths, and the socket takes commands.
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
    crate::rt::block_on(async move {
        // Before anything slow: a terminal dropped during preflight must not end the night.
        console::on_hangup(dir.join(LOG), !background);
        if let Err(code) = own_store_dir(&dir) {
            return code;
        }
        let (listener, took_over, bound) = match server::bind(&dir) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!("{e}");
                return 2;
            }
        };
        let Prepared {
            obs,
            state,
            log_dir,
            ended_pause,
        } = match prepare_run(&a) {
            Ok(p) => p,
            Err(c) => {
                bound.remove_socket();
                return c;
            }
        };
        let plan = a.plan.clone();
        let plan_text = crate::plan::read::read_text(&plan.path, "a plan file")
            .ok()
            .flatten()
            .unwrap_or_default();
        let (engine, cmds) = Engine::new(
            plan.clone(),
            a.runtime.clone(),
            EngineOptions {
                gpus: a.gpus,
                seed: a.seed,
                wait_for_operator: background,
            },
        );
        for f in &a.overrides.loaded {
            console::say(format_args!("nightshift: operator overrides from {f}"));
        }
        let disk = crate::disk::Watch {
            dirs: vec![
                ("store", dir.clone()),
                ("run log directory", log_dir.clone()),
            ],
            floor: a.min_free_mib << 20,
        };
        let window = match night_window(&a, &state) {
            Ok(w) => w,
            Err(code) => return code,
        };
        let window_closes_ms = window.as_ref().map(|w| {
            let left = w
                .closes
                .saturating_duration_since(std::time::Instant::now());
            crate::event::now_ms() + left.as_millis() as u64
        });
        let low_at_start = disk.low();
        if let Some(why) = &low_at_start {
            tracing::warn!("{why}");
        }
        let start_paused = start_pause(ended_pause, background, low_at_start.clone());
        let ov = a.overrides.clone();
        let calibration = obs
            .shared()
            .lock()
            .map(|s| s.calibration())
            .unwrap_or_default();
        let mut engine = engine
            .with_calibration(calibration)
            .with_diagnosis(ov.policy, ov.catalog, ov.recipes)
            .with_state(state.clone())
            .with_time_scale(a.time_scale)
            .with_image_budget(a.budget.clone())
            // A held unknown failure waits for a client at most as long as a held run
            // waits before it is alerted about.
            .with_held_limit(Duration::from_millis(a.alerts.1.held_after_ms))
            .with_start_paused(start_paused.clone())
            .with_window(window);
        let shutdown = CancellationToken::new();
        let meta = protocol::Meta {
            pid: std::process::id(),
            sweep: plan.name.clone(),
            plan_path: plan.path.clone(),
            store: dir.clone(),
            log_dir: log_dir.clone(),
            runtime: a.runtime.name().to_string(),
            gpus: a.gpus,
            window_closes_ms,
            // The sim's runs last what its speed makes of them; a real runtime's, what
            // the benchmark kinds typically take (the client's own priors).
            run_prior_ms: (a.runtime.name() == "sim")
                .then(|| a.runtime.typical_run().mul_f64(a.time_scale).as_millis() as u64),
        };
        let store = obs.shared();
        // A client may attach before the engine's first event: it is welcomed into the pause
        // the night starts in, not shown a moment of a running sweep (the engine's own
        // `Paused` follows, and is what the store keeps).
        let mut welcome = state;
        if let Some((reason, by)) = &start_paused {
            welcome.paused = Some(reason.clone());
            welcome.paused_by = *by;
        }
        let hub = server::Hub::new(
            welcome,
            meta,
            plan_text,
            cmds,
            shutdown.clone(),
            Some(store.clone()),
        );
        engine.count_clients(hub.clients());
        let keys: Vec<String> = plan.runs.iter().map(|r| r.key.clone()).collect();
        let past = store.lock().map(|s| s.activity()).unwrap_or_default();
        hub.know_plan(&plan, past);
        // Logs first: their files are closed (sizes final) before the store records them.
        let (logs, persist) = match (
            crate::engine::offthread::logs(crate::engine::logs::LogWriter::new(
                log_dir.clone(),
                keys,
            )),
            crate::engine::offthread::store(obs),
        ) {
            (Ok(l), Ok(s)) => (l, s),
            (Err(e), _) | (_, Err(e)) => {
                tracing::error!("starting the I/O threads: {e}");
                return 1;
            }
        };
        // Durable first: an outcome is printed, sent to clients or alerted only once the
        // store has it (an observer that fails stops the rest from seeing the event).
        engine.observe(logs);
        engine.observe(persist);
        engine.observe(Box::new(crate::headless::Printer::new(
            plan.clone(),
            console::Console,
        )));
        engine.observe(Box::new(server::HubObserver(hub.clone())));
        console::stop_on_signals(shutdown.clone());
        tokio::spawn(watch_disk(
            disk,
            hub.commands(),
            low_at_start.is_some(),
            shutdown.clone(),
        ));
        let serving = tokio::spawn(server::serve(listener, hub.clone()));
        let alerting = (!a.alerts.0.is_empty()).then(|| {
            tokio::spawn(alerts_task(
                hub.clone(),
                plan.name.clone(),
                a.alerts.clone(),
                took_over.then_some(match &start_paused {
                    Some((_, crate::model::PauseBy::Operator)) => {
                        "a stale socket was taken over (the previous daemon died); the operator's pause is kept: runs wait for `p`"
                    }
                    _ => "a stale socket was taken over (the previous daemon died)",
                }),
            ))
        });
        console::say(format_args!(
            "nightshift: daemon pid {} serving {} on {}",
            std::process::id(),
            plan.name,
            protocol::socket_path(&dir).display()
        ));
        let result = engine.run(shutdown.clone()).await;
        if let Err(e) = &result {
            // The store (or the log disk) failed: say so where the operator looks, with
            // the space left, alert, and exit within seconds. Nothing is flushed on the way
            // out: what the engine acted on is on disk already, and a flush into a full or
            // vanished disk can block forever.
            let why = format!(
                "the sweep stopped: {e:#}; store {}: {}; run logs {}: {}. Free space, then `nightshift run` resumes the sweep",
                dir.display(),
                crate::disk::describe(&dir),
                log_dir.display(),
                crate::disk::describe(&log_dir),
            );
            tracing::error!("{why}");
            hub.tell(crate::event::Event::Paused {
                reason: why,
                by: crate::model::PauseBy::Failure,
            });
            shutdown.cancel();
            let _ = tokio::time::timeout(Duration::from_secs(2), serving).await;
            if let Some(t) = alerting {
                let _ = tokio::time::timeout(Duration::from_secs(20), t).await;
            }
            bound.remove_socket();
            let _ = std::io::Write::flush(&mut std::io::stderr());
            std::process::exit(1);
        }
        // The morning digest, next to the store, whatever way the sweep ended.
        let digest = tokio::task::spawn_blocking(move || {
            let s = store.lock().unwrap_or_else(|e| e.into_inner());
            // The morning's first `results` then reads kept rows.
            crate::daemon::results::keep_texts(&s);
            crate::daemon::commands::write_digest(&s)
        })
        .await;
        match digest {
            Ok(Ok((md, html))) => console::say(format_args!(
                "nightshift: digest written to {} and {}",
                md.display(),
                html.display()
            )),
            Ok(Err(e)) => tracing::warn!("the digest could not be written: {e:#}"),
            Err(e) => tracing::warn!("the digest could not be written: {e}"),
        }
        // Clients get the last events, then the socket goes.
        shutdown.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(2), serving).await;
        if let Some(t) = alerting {
            let _ = tokio::time::timeout(Duration::from_secs(20), t).await;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        bound.remove_socket();
        match result {
            Ok((summary, _)) => {
                let _ = crate::headless::print_summary(&mut console::Console, &plan, &summary);
                if summary.interrupted || summary.paused.is_some() || summary.counts.queued > 0 {
                    1
                } else {
                    0
                }
            }
            Err(e) => {
                tracing::error!("{e:#}");
                1
            }
        }
    })
}

/// The pause this life starts in: the operator's own from the last life where a client can
/// lift it (said on the console either way, `store::pause`), else the disk watch's.
fn start_pause(
    ended: Option<crate::store::pause::StoredPause>,
    background: bool,
    disk_low: Option<String>,
) -> Option<(String, crate::model::PauseBy)> {
    use crate::store::pause::{carry, Carry};
    match carry(ended, background) {
        Carry::Keep { reason, by } => {
            console::say(format_args!(
                "nightshift: the sweep starts paused, as its last run ended: {reason}; `p` in a client resumes it"
            ));
            // The operator's pause stands over a low disk: only they lift it, and the
            // disk watch pauses again on its next look if space is still short.
            Some((reason, by))
        }
        Carry::Lift { reason, why } => {
            console::say(format_args!(
                "nightshift: the last run ended paused ({reason}); {why}"
            ));
            disk_low.map(|w| (w, crate::model::PauseBy::Disk))
        }
        Carry::Nothing => disk_low.map(|w| (w, crate::model::PauseBy::Disk)),
    }
}

/// The store directory, owner-only: created 0700, tightened to 0700 when it is ours, and
/// refused when it belongs to another user (their sweep, their results).
fn own_store_dir(dir: &Path) -> Result<(), i32> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    if let Err(e) = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
    {
        tracing::error!("store {}: {e}", dir.display());
        return Err(2);
    }
    let meta = match std::fs::metadata(dir) {
        Ok(m) => m,
        Err(e) => {
            tracing::error!("store {}: {e}", dir.display());
            return Err(2);
        }
    };
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        tracing::error!(
            "store {} belongs to user {}, not to you (user {me}): a sweep runs on its owner's store; pass another --store",
            dir.display(),
            meta.uid()
        );
        return Err(2);
    }
    if meta.mode() & 0o077 != 0 {
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    }
    Ok(())
}

/// `--until` as the engine's window, and what fits in it said at the start: the runs still
/// queued, at the runtime's typical length, over the sweep's GPUs, commit by commit in
/// plan order.
fn night_window(
    a: &RunArgs,
    state: &crate::state::SweepState,
) -> Result<Option<crate::window::Window>, i32> {
    use crate::window::{Until, Window};
    let Some((until, start_late)) = a.window else {
        return Ok(None);
    };
    if a.time_scale <= 0.0 {
        tracing::error!("--until needs a clock: give the sim a speed (--speed 100), not `max`");
        return Err(2);
    }
    let now = jiff::Zoned::now();
    let t = now.time();
    let since_midnight =
        Duration::from_secs(t.hour() as u64 * 3600 + t.minute() as u64 * 60 + t.second() as u64);
    let length = until.length_from(since_midnight);
    // A clock time is wall time; a length of night is in the runtime's own time.
    let wall = match until {
        Until::Clock { .. } => length,
        Until::After(_) => length.mul_f64(a.time_scale),
    };
    let typical = a.runtime.typical_run();
    let mut need: std::collections::BTreeMap<usize, f64> = Default::default();
    for (i, r) in state.runs.iter().enumerate() {
        let spec = &a.plan.runs[i];
        // Runs kept in reserve (adaptive repeats, drift references) are spare time's,
        // not the night's need.
        if r.state == crate::model::RunState::Queued
            && spec.gpus <= a.gpus
            && !spec.extra
            && !spec.reference
        {
            *need.entry(spec.commit).or_default() += spec.gpus as f64 * typical.as_secs_f64();
        }
    }
    let capacity = length.as_secs_f64() * a.gpus as f64;
    let total: f64 = need.values().sum();
    let mut used = 0.0;
    let fit = need
        .values()
        .take_while(|n| {
            used += *n;
            used <= capacity
        })
        .count();
    let hours = |s: f64| s / 3600.0;
    console::say(format_args!(
        "nightshift: window: closes {}; {} commits queued need about {:.1} GPU-h at about {} min a run, the window holds {:.1} GPU-h on {} GPUs: about {fit} of them fit{}",
        match until {
            Until::Clock { hour, minute } =>
                format!("at {hour:02}:{minute:02} (in {})", crate::window::hm(length)),
            Until::After(_) =>
                format!("in {} of {} time", crate::window::hm(length), a.runtime.name()),
        },
        need.len(),
        hours(total),
        typical.as_secs() / 60,
        hours(capacity),
        a.gpus,
        if start_late { "; runs start while it is open even if they may not finish (--start-late)" } else { "; no run starts that cannot finish in time" },
    ));
    Ok(Some(Window {
        // On the engine's clock (tokio's: the same as the wall unless a test pauses it).
        closes: tokio::time::Instant::now().into_std() + wall,
        scale: a.time_scale,
        start_late,
        typical,
    }))
}

/// Every few seconds: is a directory the night writes to below its floor? Pause the sweep
/// before sled or a log write fails (runs in flight finish; nothing new starts), and lift
/// that pause once space is back.
async fn watch_disk(
    disk: crate::disk::Watch,
    cmds: crate::engine::CommandSender,
    mut low: bool,
    shutdown: CancellationToken,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(5));
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.cancelled() => return,
        }
        let d = disk.clone();
        let Ok(step) = tokio::task::spawn_blocking(move || d.step(low)).await else {
            continue;
        };
        match step {
            crate::disk::Step::Pause(why) => {
                if !low {
                    tracing::warn!("{why}");
                }
                low = true;
                // Sent at every tick while below the floor: a resume during the pause is
                // paused again (the engine ignores it while the sweep is paused).
                let _ = cmds.send(crate::event::Command::DiskSpace { low: Some(why) });
            }
            crate::disk::Step::Resume => {
                tracing::info!("disk space is back above the floor: the sweep resumes");
                low = false;
                let _ = cmds.send(crate::event::Command::DiskSpace { low: None });
            }
            crate::disk::Step::Hold => {}
        }
    }
}

/// Start the store's daemon in the background: this process's command line (`argv`) again
/// with `--headless` (and the store made explicit); returns once it serves.
pub(crate) fn spawn_background(
    dir: &Path,
    argv: Vec<OsString>,
    add_store: bool,
) -> Result<std::process::Child, i32> {
    if let Err(e) = std::fs::create_dir_all(dir) {
        tracing::error!("store {}: {e}", dir.display());
        return Err(2);
    }
    let log_path = dir.join(LOG);
    let log = console::open_log(&log_path).and_then(|f| Ok((f.try_clone()?, f)));
    let (out, err) = match log {
        Ok(x) => x,
        Err(e) => {
            tracing::error!("{}: {e}", log_path.display());
            return Err(2);
        }
    };
    let exe = std::env::current_exe().unwrap_or_else(|_| "nightshift".into());
    let mut cmd = std::process::Command::new(exe);
    cmd.args(argv.into_iter().skip(1)).arg("--headless");
    if add_store {
        cmd.arg("--store").arg(dir);
    }
    cmd.env(BACKGROUND_ENV, "1")
        .stdin(std::process::Stdio::null())
        .stdout(out)
        .stderr(err);
    // A session of its own: no controlling terminal, so no SIGHUP when it goes; and
    // SIGHUP ignored in case one is sent anyway.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            libc::signal(libc::SIGHUP, libc::SIG_IGN);
            Ok(())
        });
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            tracing::error!("starting the sweep's daemon: {e}");
            return Err(1);
        }
    };
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(60) {
        if client::alive(dir) {
            return Ok(child);
        }
        if let Ok(Some(status)) = child.try_wait() {
            let tail = std::fs::read_to_string(&log_path).unwrap_or_default();
            let tail: Vec<&str> = tail.lines().rev().take(12).collect();
            for l in tail.iter().rev() {
                eprintln!("{l}");
            }
            tracing::error!(
                "the sweep's daemon exited ({status}) before it served; its log: {}",
                log_path.display()
            );
            return Err(status.code().filter(|c| *c != 0).unwrap_or(1));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    tracing::error!(
        "the sweep's daemon did not open its socket within 60 s; its log: {}",
        log_path.display()
    );
    Err(1)
}

/// Alerts from the hub's events: held-run checks every 30 s, the last events drained when
/// the daemon stops (the end of the sweep is the one the operator waits for).
async fn alerts_task(
    hub: std::sync::Arc<server::Hub>,
    sweep: String,
    (targets, limits): (crate::alerts::Targets, crate::alerts::Limits),
    restarted: Option<&'static str>,
) {
    use crate::alerts::{send::Sender, Alerter};
    let (state, mut rx) = hub.subscribe();
    let mut alerter = Alerter::new(&sweep, state, limits);
    let sender = Sender::new(
        targets,
        crate::runtime::docker::secrets::Secrets::from_env(),
    );
    let deliver = |alerts: Vec<crate::alerts::Alert>| {
        let sender = &sender;
        async move {
            for a in alerts {
                match sender.send(&a).await {
                    Ok(()) => println!("nightshift: alert sent: {}", Sender::describe(&a)),
                    Err(failed) => tracing::warn!(
                        "alert not delivered to {}: {}",
                        failed.join("; "),
                        Sender::describe(&a)
                    ),
                }
            }
        }
    };
    if let Some(why) = restarted {
        let got = alerter.restarted(crate::event::now_ms(), why);
        deliver(got).await;
    }
    let mut tick = tokio::time::interval(Duration::from_secs(30));
    loop {
        tokio::select! {
            ev = rx.recv() => match ev {
                Ok(env) => deliver(alerter.on_event(&env)).await,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            },
            _ = tick.tick() => deliver(alerter.tick(crate::event::now_ms())).await,
            _ = hub.shutdown().cancelled() => {
                while let Ok(env) = rx.try_recv() {
                    deliver(alerter.on_event(&env)).await;
                }
                return;
            }
        }
    }
}
