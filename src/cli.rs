//! Command-line interface (clap derive). Thin: every subcommand calls into the library.
//! Exit status: 0 success, 1 the work failed, 2 bad usage or bad input.

use crate::engine::{Engine, EngineOptions};
use crate::plan::{LoadError, Plan};
use crate::runtime::sim::{SimRuntime, Speed};
use crate::runtime::Runtime;
use clap::{Parser, Subcommand, ValueEnum};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

#[derive(Parser, Debug)]
#[command(
    name = "nightshift",
    version,
    about = "Run and watch overnight vLLM commit benchmark sweeps"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Cmd,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum RuntimeKind {
    Docker,
    Sim,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Run (or resume) a sweep.
    Run {
        plan: PathBuf,
        /// Print one line per state change instead of opening the TUI.
        #[arg(long)]
        headless: bool,
        #[arg(long, value_enum, default_value = "docker")]
        runtime: RuntimeKind,
        /// Store directory (default: XDG data dir per sweep name).
        #[arg(long)]
        store: Option<PathBuf>,
        /// GPUs to use (default: all NVML sees; sim: 8).
        #[arg(long)]
        gpus: Option<u32>,
        /// Sim speed: a factor (100 = 100× faster than real) or `max`.
        #[arg(long, default_value = "100")]
        speed: String,
        /// Seed for the sim's deterministic outcomes.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Where full logs go (default: under the store).
        #[arg(long)]
        log_dir: Option<PathBuf>,
    },
    /// The TUI on a simulated sweep of the example plan (no Docker or GPU needed).
    Demo(crate::tui::DemoArgs),
    /// Plan files: check, show, import.
    Plan {
        #[command(subcommand)]
        cmd: PlanCmd,
    },
    /// Parse benchmark output files.
    Parse {
        files: Vec<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Classify failure logs.
    Diagnose {
        files: Vec<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Results of a sweep from its store.
    Results {
        #[arg(long)]
        store: Option<PathBuf>,
        #[arg(long, default_value = "table")]
        format: String,
    },
    /// Everything about one commit or run.
    Show { what: String },
    /// Check this machine can run a sweep.
    Doctor,
    /// Benchmarks: `engine` (sim at max speed) or `tui` (frame times; try --runs 1000).
    Bench {
        what: String,
        /// Runs for the engine benchmark.
        #[arg(long, default_value_t = 10_000)]
        runs: usize,
    },
}

#[derive(Subcommand, Debug)]
pub enum PlanCmd {
    /// Validate a plan; exit 0 when runnable.
    Check { plan: PathBuf },
    /// Show the expanded runs.
    Show {
        plan: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Make a plan from a list of commit facts.
    Import {
        #[arg(long, value_parser = ["seed-json"])]
        from: String,
        file: PathBuf,
        #[arg(long, short)]
        output: Option<PathBuf>,
        #[arg(long, default_value = "iso-vllm-3way")]
        name: String,
    },
}

pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    run(cli)
}

fn not_yet(what: &str, issue: u32) -> i32 {
    eprintln!("nightshift: {what} is not built yet (it arrives with issue #{issue})");
    2
}

pub fn load_plan(path: &std::path::Path) -> Result<Plan, i32> {
    Plan::load(path).map_err(|e| {
        match &e {
            LoadError::Io { .. } => eprintln!("error: {e}"),
            LoadError::Invalid(diags) => {
                for d in diags {
                    eprintln!("error: {d}");
                }
            }
        }
        2
    })
}

pub fn run(cli: Cli) -> i32 {
    match cli.command {
        Cmd::Plan { cmd } => plan_cmd(cmd),
        Cmd::Run {
            plan,
            headless,
            runtime,
            store,
            gpus,
            speed,
            seed,
            log_dir,
        } => {
            if runtime == RuntimeKind::Docker {
                return not_yet("the Docker runtime (--runtime docker)", 5);
            }
            if store.is_some() {
                return not_yet("the store (--store)", 6);
            }
            let speed: Speed = match speed.parse() {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("error: --speed: {e}");
                    return 2;
                }
            };
            let plan = match load_plan(&plan) {
                Ok(p) => Arc::new(p),
                Err(code) => return code,
            };
            let rt: Arc<dyn Runtime> = Arc::new(SimRuntime::new(speed));
            if !headless {
                return crate::tui::run_plan(plan, rt, gpus.unwrap_or(8), seed, log_dir);
            }
            run_headless(plan, rt, gpus.unwrap_or(8), seed, log_dir)
        }
        Cmd::Demo(args) => crate::tui::demo(args),
        Cmd::Parse { files, json } => {
            if files.is_empty() {
                eprintln!("error: parse needs at least one FILE");
                return 2;
            }
            crate::parse::cli::main(&files, json, &mut std::io::stdout(), &mut std::io::stderr())
        }
        Cmd::Diagnose { files, json } => {
            if files.is_empty() {
                eprintln!("error: diagnose needs at least one FILE");
                return 2;
            }
            crate::diagnose::cli::main(&files, json, &mut std::io::stdout(), &mut std::io::stderr())
        }
        Cmd::Results { .. } => not_yet("`nightshift results`", 6),
        Cmd::Show { .. } => not_yet("`nightshift show`", 6),
        Cmd::Doctor => not_yet("`nightshift doctor`", 5),
        Cmd::Bench { what, runs } => match what.as_str() {
            "engine" => crate::bench::engine(runs),
            "tui" => crate::tui::bench::run(runs.min(100_000)),
            other => {
                eprintln!("error: unknown benchmark `{other}` (expected engine or tui)");
                2
            }
        },
    }
}

fn runtime_handle() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn run_headless(
    plan: Arc<Plan>,
    rt: Arc<dyn Runtime>,
    gpus: u32,
    seed: u64,
    log_dir: Option<PathBuf>,
) -> i32 {
    let tokio_rt = runtime_handle();
    tokio_rt.block_on(async move {
        let (mut engine, _cmds) = Engine::new(
            plan.clone(),
            rt,
            EngineOptions {
                gpus,
                seed,
                wait_for_operator: false,
            },
        );
        engine.observe(Box::new(crate::headless::Printer::new(
            plan.clone(),
            std::io::stdout(),
        )));
        if let Some(dir) = log_dir {
            let keys = plan.runs.iter().map(|r| r.key.clone()).collect();
            engine.observe(Box::new(crate::engine::logs::LogWriter::new(dir, keys)));
        }
        let shutdown = CancellationToken::new();
        spawn_signal_handler(shutdown.clone());
        match engine.run(shutdown).await {
            Ok((summary, _state)) => {
                let _ = crate::headless::print_summary(&mut std::io::stdout(), &plan, &summary);
                if summary.interrupted || summary.paused.is_some() || summary.counts.queued > 0 {
                    1
                } else {
                    0
                }
            }
            Err(e) => {
                eprintln!("error: {e:#}");
                1
            }
        }
    })
}

/// SIGINT and SIGTERM stop the sweep cleanly: runs in flight are cancelled and re-queued.
pub fn spawn_signal_handler(shutdown: CancellationToken) {
    tokio::spawn(async move {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let mut term = match signal(SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => return,
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {},
                _ = term.recv() => {},
            }
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
        eprintln!(
            "nightshift: stopping: cancelling runs in flight (run the same command to resume)"
        );
        shutdown.cancel();
    });
}

fn plan_cmd(cmd: PlanCmd) -> i32 {
    let mut out = std::io::stdout();
    match cmd {
        PlanCmd::Check { plan } => {
            let plan = match load_plan(&plan) {
                Ok(p) => p,
                Err(code) => return code,
            };
            let _ = crate::plan::report::check_summary(&plan, &mut out);
            0
        }
        PlanCmd::Show { plan, json } => {
            let plan = match load_plan(&plan) {
                Ok(p) => p,
                Err(code) => return code,
            };
            let _ = crate::plan::report::show(&plan, json, &mut out);
            0
        }
        PlanCmd::Import {
            from: _,
            file,
            output,
            name,
        } => {
            let text = match std::fs::read_to_string(&file) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("error: {}: cannot read: {e}", file.display());
                    return 2;
                }
            };
            let toml = match crate::plan::import::from_seed_json(
                &text,
                &file.display().to_string(),
                &name,
            ) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("error: {e}");
                    return 2;
                }
            };
            match output {
                Some(p) => {
                    if let Err(e) = std::fs::write(&p, toml) {
                        eprintln!("error: {}: cannot write: {e}", p.display());
                        return 2;
                    }
                }
                None => {
                    let _ = out.write_all(toml.as_bytes());
                }
            }
            0
        }
    }
}
