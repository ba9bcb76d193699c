//! `nightshift demo`: the example plan on the sim, with the TUI. The face wires an engine
//! in this process to the TUI's session through the same link an attached client uses.

use crate::engine::{CommandSender, Engine, EngineOptions};
use crate::observer::ChannelObserver;
use crate::plan::Plan;
use crate::runtime::sim::{SimRuntime, Speed};
use crate::runtime::Runtime;
use crate::tui::{link, session, TuiExit, TuiOptions};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

#[derive(clap::Args, Debug, Clone)]
pub struct DemoArgs {
    /// Sim speed: a factor (200 = 200× faster than real) or `max`.
    #[arg(long, default_value = "200")]
    pub speed: String,
    /// The sim's seed: the same seed gives the same night.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Simulated GPUs.
    #[arg(long, default_value_t = 8)]
    pub gpus: u32,
    /// Theme: dark, light, high-contrast, or a file name in the config's themes/.
    #[arg(long, env = "NIGHTSHIFT_THEME")]
    pub theme: Option<String>,
    /// Config file (default: $XDG_CONFIG_HOME/nightshift/config.toml).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Where full logs go (default: a temporary directory).
    #[arg(long)]
    pub log_dir: Option<PathBuf>,
}

/// `nightshift demo`.
pub fn demo(args: DemoArgs) -> i32 {
    let speed: Speed = match args.speed.parse() {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("--speed: {e}");
            return 2;
        }
    };
    // Without --log-dir the demo's logs live in a temporary directory removed when it ends.
    let (tmp, log_dir) = match &args.log_dir {
        Some(d) => (None, d.clone()),
        None => match tempfile::Builder::new()
            .prefix("nightshift-demo-")
            .tempdir()
        {
            Ok(t) => {
                let p = t.path().to_path_buf();
                (Some(t), p)
            }
            Err(e) => {
                tracing::error!("a temporary log directory: {e}");
                return 2;
            }
        },
    };
    let opts = match TuiOptions::load(
        args.theme.as_deref(),
        args.config.as_deref(),
        true,
        Some(log_dir),
    ) {
        Ok(o) => o,
        Err(e) => {
            tracing::error!("{e:#}");
            return 2;
        }
    };
    let code = start(
        Arc::new(crate::plan::example::example_plan()),
        Arc::new(SimRuntime::new(speed)),
        args.gpus,
        args.seed,
        speed.time_scale(),
        opts,
    );
    drop(tmp);
    code
}

fn finish(result: anyhow::Result<TuiExit>, resumable: bool) -> i32 {
    match result {
        Ok(exit) => {
            println!(
                "nightshift: {} of {} runnable runs done{}",
                exit.done,
                exit.total,
                match (exit.finished, resumable) {
                    (true, _) => "",
                    (false, true) => "; run the same command to resume",
                    (false, false) => " (the demo keeps no store)",
                }
            );
            // The demo is a demo: its simulated failures are not the operator's.
            if resumable {
                exit.code()
            } else {
                0
            }
        }
        Err(e) => {
            tracing::error!("{e:#}");
            1
        }
    }
}

fn start(
    plan: Arc<Plan>,
    runtime: Arc<dyn Runtime>,
    gpus: u32,
    seed: u64,
    time_scale: f64,
    opts: TuiOptions,
) -> i32 {
    if !std::io::stdout().is_terminal() {
        tracing::error!("the TUI needs a terminal (use `nightshift run --headless` for logs)");
        return 2;
    }
    finish(
        crate::rt::block_on(async move {
            let (engine, cmds) = Engine::new(
                plan.clone(),
                runtime,
                EngineOptions {
                    gpus,
                    seed,
                    wait_for_operator: true,
                },
            );
            // (run_tui adds the log writer: one per sweep, or every line is written twice.)
            let engine = engine.with_time_scale(time_scale);
            run_tui(plan, engine, cmds, opts).await
        }),
        false,
    )
}

/// The TUI over an engine in this process (the demo): returns when the operator quits or a
/// signal arrives; the sweep stops with it.
pub(crate) async fn run_tui(
    plan: Arc<Plan>,
    mut engine: Engine,
    cmds: CommandSender,
    opts: TuiOptions,
) -> anyhow::Result<TuiExit> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    engine.observe(Box::new(ChannelObserver(tx)));
    if let Some(dir) = &opts.log_dir {
        let keys = plan.runs.iter().map(|r| r.key.clone()).collect();
        engine.observe(crate::engine::offthread::logs(
            crate::engine::logs::LogWriter::new(dir.clone(), keys),
        )?);
    }
    let shutdown = CancellationToken::new();
    let engine_task = tokio::spawn(engine.run(shutdown.clone()));
    let ended: link::Ended = Box::pin(async move {
        match engine_task.await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(format!("{e:#}")),
            Err(e) => Err(format!("the engine task failed: {e}")),
        }
    });
    let link = link::Link {
        events: link::envelopes(rx),
        commands: cmds,
        ended,
        owner: link::Owner::InProcess(shutdown),
        gpus: 8,
        runtime: None,
    };
    session::run(plan, link, opts).await
}
