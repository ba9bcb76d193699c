//! Command-line interface (clap derive). Thin: every subcommand calls into the library.
//! Exit status: 0 success, 1 the work failed, 2 bad usage or bad input.

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
    /// One Slurm batch job per run (see `--slurm-*`).
    Slurm,
}

/// `run`'s image options: disk budget and eviction, and builds from source.
#[derive(clap::Args, Debug, Clone)]
pub struct ImageArgs {
    /// Keep at least this much free on Docker's disk: images are prefetched only into
    /// room above it, and images no remaining run needs are evicted to keep it.
    #[arg(long, value_name = "GB", default_value_t = 25)]
    pub disk_min_free_gb: u64,
    /// Cap the disk the sweep's own images take (pulled, derived, built, fixed).
    #[arg(long, value_name = "GB")]
    pub image_budget_gb: Option<u64>,
    /// Never evict this image (repeatable; exact references).
    #[arg(long, value_name = "IMAGE")]
    pub keep_image: Vec<String>,
    /// Do not build images from source: runs that need one end as `needs_build`.
    #[arg(long)]
    pub no_build: bool,
    /// The Dockerfile template for builds from source ({base}, {commit}, {version}).
    #[arg(long, value_name = "FILE")]
    pub build_dockerfile: Option<PathBuf>,
    /// Stop a build from source that runs longer.
    #[arg(long, value_name = "MIN", default_value_t = 90)]
    pub build_timeout_min: u64,
}

/// `run`'s alert options: where the daemon tells someone that the night needs them.
#[derive(clap::Args, Debug, Clone)]
pub struct AlertArgs {
    /// POST each alert as JSON to this URL (repeatable).
    #[arg(long, value_name = "URL")]
    pub alert_webhook: Vec<String>,
    /// A Slack- or Discord-compatible incoming webhook (repeatable).
    #[arg(long, value_name = "URL")]
    pub alert_slack: Vec<String>,
    /// An ntfy topic URL, e.g. https://ntfy.sh/my-night (repeatable).
    #[arg(long, value_name = "URL")]
    pub alert_ntfy: Vec<String>,
    /// A shell command run per alert (NIGHTSHIFT_ALERT_* in its environment, JSON on stdin).
    #[arg(long, value_name = "CMD")]
    pub alert_command: Vec<String>,
    /// Alert when a run has waited this long for the operator.
    #[arg(long, value_name = "MIN", default_value_t = 30)]
    pub alert_held_min: u64,
}

impl AlertArgs {
    pub fn targets(&self) -> (crate::alerts::Targets, crate::alerts::Limits) {
        (
            crate::alerts::Targets {
                webhooks: self.alert_webhook.clone(),
                slack: self.alert_slack.clone(),
                ntfy: self.alert_ntfy.clone(),
                commands: self.alert_command.clone(),
            },
            crate::alerts::Limits {
                held_after_ms: self.alert_held_min.saturating_mul(60_000),
                ..Default::default()
            },
        )
    }
}

/// What the Docker runtime takes from [`ImageArgs`].
#[derive(Debug, Clone)]
pub struct DockerOptions {
    pub min_free_bytes: u64,
    pub build: crate::runtime::docker::build::BuildConfig,
    pub build_dockerfile: Option<PathBuf>,
}

const GB: u64 = 1_000_000_000;

impl ImageArgs {
    pub fn docker(&self) -> DockerOptions {
        DockerOptions {
            min_free_bytes: self.disk_min_free_gb.saturating_mul(GB),
            build: crate::runtime::docker::build::BuildConfig {
                enabled: !self.no_build,
                timeout: std::time::Duration::from_secs(self.build_timeout_min.saturating_mul(60)),
                ..Default::default()
            },
            build_dockerfile: self.build_dockerfile.clone(),
        }
    }
    pub fn budget(&self) -> crate::images::Budget {
        crate::images::Budget {
            min_free: self.disk_min_free_gb.saturating_mul(GB),
            max_bytes: self.image_budget_gb.map(|g| g.saturating_mul(GB)),
            keep: self.keep_image.iter().cloned().collect(),
            ..Default::default()
        }
    }
}

// Parsed once at start: the size of the `run` variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Run (or resume) a sweep.
    Run {
        /// The sweep plan (TOML).
        plan: PathBuf,
        /// Print one line per state change instead of opening the TUI.
        #[arg(long)]
        headless: bool,
        /// Where runs execute: docker (real containers), slurm (a batch job per run) or
        /// sim (simulated, no GPU).
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
        /// Re-queue failed runs (all, or only this category).
        #[arg(long, value_name = "CATEGORY", num_args = 0..=1, default_missing_value = "all")]
        retry_failed: Option<String>,
        /// Re-run finished runs whose command, model or GPU changed in the plan.
        #[arg(long)]
        rerun_changed: bool,
        #[command(flatten)]
        images: ImageArgs,
        #[command(flatten)]
        alerts: AlertArgs,
        #[command(flatten)]
        slurm: crate::runtime::slurm::SlurmArgs,
        #[command(flatten)]
        hosts: crate::runtime::hosts::config::HostsArgs,
    },
    /// The TUI on the store's running sweep (started by `run`; detach with `d`).
    Attach {
        /// Store directory (default: the only sweep under the data dir).
        #[arg(long)]
        store: Option<PathBuf>,
    },
    /// One line about the store's running sweep; exit 0 while one is alive, 1 when none is.
    Status {
        /// Store directory (default: the only sweep under the data dir).
        #[arg(long)]
        store: Option<PathBuf>,
    },
    /// Stop the store's running sweep once its runs in flight finish (or at once).
    Stop {
        /// Store directory (default: the only sweep under the data dir).
        #[arg(long)]
        store: Option<PathBuf>,
        /// Cancel the runs in flight now (they are re-queued for the next `run`).
        #[arg(long)]
        now: bool,
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
        /// Benchmark output files (server logs, client output, result JSON).
        files: Vec<PathBuf>,
        /// One JSON object per file instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Classify failure logs.
    Diagnose {
        /// Failure logs.
        files: Vec<PathBuf>,
        /// One JSON object per file: category, deciding line, action.
        #[arg(long)]
        json: bool,
    },
    /// Results of a sweep from its store.
    Results {
        /// The sweep's store directory (default: the only sweep under the XDG data dir).
        #[arg(long)]
        store: Option<PathBuf>,
        /// table, json (one document: per commit n, median, interval, Δ, p-value, verdict,
        /// flags; the summary; every attempt's record), jsonl (one results record per attempt
        /// per line), csv, md or html (one page with SVG charts).
        #[arg(long, default_value = "table")]
        format: String,
        /// e.g. `variant=human,status=success` (fields: commit key variant agent status category model gpu).
        #[arg(long)]
        filter: Option<String>,
        /// Minimum effect in percent for a verdict of better or worse; also the ±rule for
        /// single runs when the box is uncalibrated.
        #[arg(long, default_value_t = 2.0)]
        threshold: f64,
        /// Significance level of the rank test and the noise band.
        #[arg(long, default_value_t = 0.05)]
        alpha: f64,
        /// Generated-token totals may differ by this fraction before throughput is flagged
        /// incomparable.
        #[arg(long, default_value_t = 0.05)]
        token_share: f64,
    },
    /// Measure this box's run-to-run noise: the baselines of a few of the plan's commits,
    /// run several times unchanged (A/A), give each metric's noise band per model size.
    /// Kept in the sweep's store; single-run verdicts in `results` and the digest use it.
    Calibrate {
        /// The sweep plan (TOML).
        plan: PathBuf,
        /// Where runs execute: docker (real containers) or sim (simulated, no GPU).
        #[arg(long, value_enum, default_value = "docker")]
        runtime: RuntimeKind,
        /// The sweep's store directory (default: XDG data dir per sweep name); the A/A runs
        /// go to a store beside it, `<store>-calibration`.
        #[arg(long)]
        store: Option<PathBuf>,
        /// Commits whose baseline is repeated (the first runnable ones of the plan).
        #[arg(long, default_value_t = 5)]
        commits: usize,
        /// Identical runs per commit (at least 2).
        #[arg(long, default_value_t = 5)]
        repeats: u32,
        /// GPUs to use (default: all NVML sees; sim: 8).
        #[arg(long)]
        gpus: Option<u32>,
        /// Sim speed: a factor or `max`.
        #[arg(long, default_value = "max")]
        speed: String,
        /// Seed for the sim (its box and outcomes).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[command(flatten)]
        images: ImageArgs,
    },
    /// Everything about one commit or run.
    Show {
        /// A run key (`COMMIT/VARIANT`), `#N` (the run numbered N on every screen, from #0) or a commit prefix.
        what: String,
        /// The sweep's store directory (default: the only sweep under the XDG data dir).
        #[arg(long)]
        store: Option<PathBuf>,
        /// One JSON object per run: its facts and every attempt as a results record
        /// (argv as executed, interpreter, rewrites, dataset mounts).
        #[arg(long)]
        json: bool,
    },
    /// The morning digest: counts, the 3-way table, failures with their deciding lines,
    /// fixes applied, GPU-hours by outcome and the runs waiting for a decision. The sweep
    /// writes it into the store dir (digest.md, digest.html) when it ends.
    Digest {
        /// The sweep's store directory (default: the only sweep under the XDG data dir).
        #[arg(long)]
        store: Option<PathBuf>,
        /// md (Markdown) or html (one self-contained page).
        #[arg(long, default_value = "md")]
        format: String,
        /// Write here instead of to standard output.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Export what is still readable from a damaged store, as JSON Lines (the plan, every
    /// run's summary, every event), without writing to it.
    Salvage {
        /// The damaged store's directory.
        #[arg(long)]
        store: Option<PathBuf>,
        /// Write here instead of to standard output.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Fetch the plan's model weights (into the HF cache) and datasets ahead of the night.
    Prefetch {
        /// The sweep plan (TOML).
        plan: PathBuf,
        /// Only the models of runnable commits.
        #[arg(long, conflicts_with = "datasets_only")]
        models_only: bool,
        /// Only the datasets of the plan's [datasets] table.
        #[arg(long)]
        datasets_only: bool,
        /// Say what would be fetched (sizes, what is cached); fetch nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Check this machine can run a sweep.
    Doctor {
        /// Take the vLLM clone (`vllm_src`) from this plan.
        #[arg(long)]
        plan: Option<PathBuf>,
    },
    /// Benchmarks: `engine` (sim at max speed), `store`, `stats`, `parse`, or `tui` (frame times; try --runs 1000).
    Bench {
        /// engine | store | stats (false positives and power of the verdicts on simulated
        /// A/A and true effects; --runs = comparisons per row, default 2000) | parse | tui |
        /// night (images, link and disk over the seed mix) |
        /// attach (a client's first frame from a live daemon) | daemon (its RSS over a sim night)
        what: String,
        /// Runs for the engine, store and tui benchmarks.
        #[arg(long, default_value_t = 10_000)]
        runs: usize,
        /// Size of the synthetic server log for the parse benchmark; the request logs of the
        /// whole night for the daemon benchmark.
        #[arg(long, default_value_t = 1024)]
        size_mb: usize,
        /// store: keep the bench store in DIR; when DIR already holds one, only open and
        /// `results` are measured again (repeat reads without refilling).
        #[arg(long)]
        store: Option<PathBuf>,
    },
}

#[derive(Subcommand, Debug)]
pub enum PlanCmd {
    /// Validate a plan; exit 0 when runnable.
    Check {
        /// The sweep plan (TOML).
        plan: PathBuf,
    },
    /// Show the expanded runs.
    Show {
        /// The sweep plan (TOML).
        plan: PathBuf,
        /// The runs as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Make a plan from a list of commit facts.
    Import {
        /// The input's format (seed-json: a JSON list of commit facts).
        #[arg(long, value_parser = ["seed-json"])]
        from: String,
        /// The input file.
        file: PathBuf,
        /// Write the plan here instead of to standard output.
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// The sweep's name in the plan.
        #[arg(long, default_value = "iso-vllm-3way")]
        name: String,
    },
}

pub fn main() -> i32 {
    crate::logging::init();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    run(cli)
}

pub fn load_plan(path: &std::path::Path) -> Result<Plan, i32> {
    // The box's datasets and clone from the config file; a broken config is the TUI's to
    // report.
    let box_defaults = crate::tui::config::Config::load(None)
        .map(|c| c.box_defaults())
        .unwrap_or_default();
    let plan = Plan::load_with(path, &box_defaults).map_err(|e| {
        match &e {
            LoadError::Io { .. } => tracing::error!("{e}"),
            LoadError::Invalid(diags) => {
                for d in diags {
                    tracing::error!("{d}");
                }
            }
        }
        2
    })?;
    // The plan's own [policy], [[recipe]] and [[signature]] are checked with the plan.
    plan_overrides(crate::overrides::Overrides::default(), &plan)?;
    Ok(plan)
}

/// `base` with the plan's own overrides over it; errors (plan:line:col) printed, exit 2.
fn plan_overrides(
    base: crate::overrides::Overrides,
    plan: &Plan,
) -> Result<crate::overrides::Overrides, i32> {
    let text = std::fs::read_to_string(&plan.path).map_err(|e| {
        tracing::error!("{}: {e}", plan.path.display());
        2
    })?;
    base.with_plan(&text, &plan.path.display().to_string())
        .map_err(|e| {
            tracing::error!("{e}");
            2
        })
}

pub fn run(cli: Cli) -> i32 {
    if !matches!(
        cli.command,
        Cmd::Run { .. }
            | Cmd::Demo { .. }
            | Cmd::Doctor { .. }
            | Cmd::Prefetch { .. }
            | Cmd::Attach { .. }
    ) {
        die_quietly_on_closed_pipe();
    }
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
            retry_failed,
            rerun_changed,
            images,
            alerts,
            slurm,
            hosts,
        } => {
            let speed: Speed = match speed.parse() {
                Ok(s) => s,
                Err(e) => {
                    tracing::error!("--speed: {e}");
                    return 2;
                }
            };
            let plan = match load_plan(&plan) {
                Ok(p) => Arc::new(p),
                Err(code) => return code,
            };
            let overrides = match crate::overrides::Overrides::load(
                crate::tui::config::config_dir().as_deref(),
            ) {
                Ok(o) => o,
                Err(e) => {
                    tracing::error!("{e}");
                    return 2;
                }
            };
            let overrides = match plan_overrides(overrides, &plan) {
                Ok(o) => o,
                Err(code) => return code,
            };
            if hosts.hosts.is_some() && runtime != RuntimeKind::Docker {
                tracing::error!("--hosts names Docker engines: it goes with --runtime docker");
                return 2;
            }
            // Docker runs in real time (policy backoffs unscaled); the sim scales them.
            let (rt, gpus, time_scale): (Arc<dyn Runtime>, u32, f64) =
                if let (RuntimeKind::Docker, Some(file)) = (runtime, &hosts.hosts) {
                    match crate::runtime::hosts::for_cli(
                        &plan,
                        file,
                        &images.docker(),
                        gpus,
                        overrides.recipes.clone(),
                    ) {
                        Ok((rt, gpus)) => (rt, gpus, 1.0),
                        Err(code) => return code,
                    }
                } else if runtime == RuntimeKind::Docker {
                    match crate::runtime::docker::for_cli(
                        &plan,
                        &images.docker(),
                        gpus,
                        overrides.recipes.clone(),
                    ) {
                        Ok(rt) => (
                            rt,
                            gpus.unwrap_or_else(crate::runtime::docker::visible_gpus),
                            1.0,
                        ),
                        Err(code) => return code,
                    }
                } else if runtime == RuntimeKind::Slurm {
                    match crate::runtime::slurm::for_cli(
                        &plan,
                        &slurm,
                        gpus,
                        overrides.recipes.clone(),
                    ) {
                        Ok((rt, gpus)) => (rt, gpus, 1.0),
                        Err(code) => return code,
                    }
                } else {
                    (
                        Arc::new(SimRuntime::new(speed)),
                        gpus.unwrap_or(8),
                        speed.time_scale(),
                    )
                };
            let args = crate::daemon::commands::RunArgs {
                plan,
                runtime: rt,
                gpus,
                seed,
                store,
                log_dir,
                retry_failed: retry_failed.map(|c| Some(c).filter(|c| c != "all")),
                rerun_changed,
                time_scale,
                budget: images.budget(),
                alerts: alerts.targets(),
                overrides,
            };
            if !headless {
                return crate::daemon::start_and_attach(&args, std::env::args_os().collect());
            }
            crate::daemon::serve(args, crate::daemon::in_background())
        }
        Cmd::Calibrate {
            plan,
            runtime,
            store,
            commits,
            repeats,
            gpus,
            speed,
            seed,
            images,
        } => {
            if runtime == RuntimeKind::Slurm {
                tracing::error!("calibrate runs on this box: --runtime docker or sim");
                return 2;
            }
            if repeats < 2 || commits == 0 {
                tracing::error!("calibrate needs --repeats 2 or more and --commits 1 or more");
                return 2;
            }
            let speed: Speed = match speed.parse() {
                Ok(s) => s,
                Err(e) => {
                    tracing::error!("--speed: {e}");
                    return 2;
                }
            };
            let plan = match load_plan(&plan) {
                Ok(p) => p,
                Err(code) => return code,
            };
            let dir = match crate::daemon::commands::resolve_dir(store, &plan.name) {
                Ok(d) => d,
                Err(c) => return c,
            };
            let (rt, gpus, scale): (Arc<dyn Runtime>, u32, f64) = if runtime == RuntimeKind::Docker
            {
                let recipes = match crate::overrides::Overrides::load(
                    crate::tui::config::config_dir().as_deref(),
                ) {
                    Ok(o) => o.recipes,
                    Err(e) => {
                        tracing::error!("{e}");
                        return 2;
                    }
                };
                match crate::runtime::docker::for_cli(&plan, &images.docker(), gpus, recipes) {
                    Ok(rt) => (
                        rt,
                        gpus.unwrap_or_else(crate::runtime::docker::visible_gpus),
                        1.0,
                    ),
                    Err(code) => return code,
                }
            } else {
                (
                    Arc::new(SimRuntime::new(speed).on_box(seed)),
                    gpus.unwrap_or(8),
                    speed.time_scale(),
                )
            };
            crate::daemon::calibrate::main(&plan, rt, &dir, gpus, (commits, repeats), (seed, scale))
        }
        Cmd::Demo(args) => crate::tui::demo(args),
        Cmd::Attach { store } => match crate::daemon::commands::find_dir(store) {
            Ok(dir) => crate::daemon::client::attach(&dir),
            Err(c) => c,
        },
        Cmd::Status { store } => match crate::daemon::commands::find_dir(store) {
            Ok(dir) => crate::daemon::client::status(&dir),
            Err(c) => c,
        },
        Cmd::Stop { store, now } => match crate::daemon::commands::find_dir(store) {
            Ok(dir) => crate::daemon::client::stop(&dir, now),
            Err(c) => c,
        },
        Cmd::Parse { files, json } => {
            if files.is_empty() {
                tracing::error!("parse needs at least one FILE");
                return 2;
            }
            crate::parse::cli::main(&files, json, &mut std::io::stdout(), &mut std::io::stderr())
        }
        Cmd::Diagnose { files, json } => {
            if files.is_empty() {
                tracing::error!("diagnose needs at least one FILE");
                return 2;
            }
            crate::diagnose::cli::main(&files, json, &mut std::io::stdout(), &mut std::io::stderr())
        }
        Cmd::Results {
            store,
            format,
            filter,
            threshold,
            alpha,
            token_share,
        } => {
            let judge = crate::report::Judge {
                threshold,
                alpha,
                token_share,
            };
            if let Err(e) = crate::daemon::commands::check_results_args(&format, filter.as_deref())
                .and_then(|_| judge.check())
            {
                tracing::error!("{e}");
                return 2;
            }
            let dir = match crate::daemon::commands::find_dir(store) {
                Ok(d) => d,
                Err(c) => return c,
            };
            // A running sweep's daemon holds the store: it answers from it, live.
            let want = crate::daemon::protocol::Want::Results {
                format: format.clone(),
                filter: filter.clone(),
                judge,
            };
            if let Some(code) = crate::daemon::client::query(&dir, want) {
                return code;
            }
            crate::daemon::commands::results(Some(dir), &format, filter.as_deref(), judge)
        }
        Cmd::Show { what, store, json } => {
            let dir = match crate::daemon::commands::find_dir(store) {
                Ok(d) => d,
                Err(c) => return c,
            };
            let want = crate::daemon::protocol::Want::Show {
                what: what.clone(),
                json,
            };
            if let Some(code) = crate::daemon::client::query(&dir, want) {
                return code;
            }
            crate::daemon::commands::show_cmd(Some(dir), &what, json)
        }
        Cmd::Digest { store, format, out } => digest(store, &format, out),
        Cmd::Salvage { store, out } => match crate::daemon::commands::find_dir(store) {
            Ok(dir) => crate::store::salvage::main(&dir, out.as_deref()),
            Err(c) => c,
        },
        Cmd::Prefetch {
            plan,
            models_only,
            datasets_only,
            dry_run,
        } => match load_plan(&plan) {
            Ok(plan) => crate::prefetch::cli::main(
                &plan,
                crate::prefetch::cli::Options {
                    models: !datasets_only,
                    datasets: !models_only,
                    dry_run,
                },
            ),
            Err(code) => code,
        },
        Cmd::Doctor { plan } => {
            let loaded = match plan.as_deref().map(load_plan).transpose() {
                Ok(p) => p,
                Err(code) => return code,
            };
            let src = loaded.as_ref().and_then(|plan| {
                plan.defaults.vllm_src.as_deref().map(|s| {
                    let base = plan.path.parent().unwrap_or(std::path::Path::new("."));
                    crate::runtime::docker::expand_path(s, base)
                })
            });
            crate::runtime::docker::doctor::main(src.as_deref(), loaded.as_ref())
        }
        Cmd::Bench {
            what,
            runs,
            size_mb,
            store,
        } => match what.as_str() {
            "engine" => crate::bench::engine(runs),
            "store" => crate::daemon::commands::bench(runs, store.as_deref()),
            "stats" => {
                // Comparisons per table row: --runs, capped so the default finishes fast.
                let m = if runs == 10_000 {
                    2_000
                } else {
                    runs.clamp(10, 100_000)
                };
                print!(
                    "{}",
                    crate::stats::power::report(7, m, &crate::stats::Config::default())
                );
                0
            }
            "tui" => crate::tui::bench::run(runs.min(100_000)),
            "attach" => crate::daemon::bench::attach(runs.min(100_000)),
            "daemon" => crate::daemon::bench::daemon(runs, size_mb),
            "night" => {
                let plan = crate::tui::example_plan();
                match crate::night::bench(&plan, &mut std::io::stdout()) {
                    Ok(()) => 0,
                    Err(e) => {
                        tracing::error!("{e}");
                        1
                    }
                }
            }
            "parse" => match crate::parse::bench::run(size_mb, &mut std::io::stdout()) {
                Ok(()) => 0,
                Err(e) => {
                    tracing::error!("{e:#}");
                    1
                }
            },
            other => {
                tracing::error!(
                    "unknown benchmark `{other}` (expected engine, store, stats, parse, tui, night, attach or daemon)"
                );
                2
            }
        },
    }
}

/// Report commands are piped into `head` and `less`: a reader that goes away should end
/// them quietly, as with any Unix tool, not with a "failed printing to stdout" panic. Only
/// for commands that talk to no socket — a sweep keeps Rust's default (SIGPIPE ignored) so
/// a Docker connection dropping is an error, not a silent death.
/// `nightshift digest`: from the live daemon when one runs, else from the store.
fn digest(store: Option<PathBuf>, format: &str, out: Option<PathBuf>) -> i32 {
    if !["md", "html"].contains(&format) {
        tracing::error!("--format `{format}` (expected md or html)");
        return 2;
    }
    let dir = match crate::daemon::commands::find_dir(store) {
        Ok(d) => d,
        Err(c) => return c,
    };
    let want = crate::daemon::protocol::Want::Digest {
        format: format.to_string(),
    };
    let text = match crate::daemon::client::query_text(&dir, want) {
        Some(r) => r,
        None => match crate::daemon::commands::find_store(Some(dir)) {
            Ok(s) => crate::daemon::commands::digest_for(&s, format),
            Err(c) => return c,
        },
    };
    match (text, out) {
        (Ok(t), Some(path)) => match std::fs::write(&path, t) {
            Ok(()) => {
                println!("digest written to {}", path.display());
                0
            }
            Err(e) => {
                tracing::error!("{}: {e}", path.display());
                2
            }
        },
        (r, None) => crate::daemon::commands::answer(r),
        (Err(e), Some(_)) => crate::daemon::commands::answer(Err(e)),
    }
}

fn die_quietly_on_closed_pipe() {
    #[cfg(unix)]
    // SAFETY: restoring the default disposition of one signal at start-up, before any
    // thread is spawned.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
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
            tracing::warn!(
                "stopping: cancelling runs in flight (run the same command to resume; a second signal exits at once)"
            );
            shutdown.cancel();
            // Teardown can hang on a stuck Docker daemon: a second signal must still work.
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {},
                _ = term.recv() => {},
            }
            tracing::warn!("second signal: exiting now; leftovers are removed on the next run");
            std::process::exit(130);
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            shutdown.cancel();
        }
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
            // A plan that can run nothing is bad input (README: 0 when runnable).
            if plan.runnable() {
                0
            } else {
                2
            }
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
                    tracing::error!("{}: cannot read: {e}", file.display());
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
                    tracing::error!("{e}");
                    return 2;
                }
            };
            match output {
                Some(p) => {
                    if let Err(e) = std::fs::write(&p, toml) {
                        tracing::error!("{}: cannot write: {e}", p.display());
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

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Every argument of every command says what it is for in `--help`.
    #[test]
    fn every_argument_has_help() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for a in cmd.get_arguments() {
                let id = a.get_id().as_str();
                if id == "help" || id == "version" {
                    continue;
                }
                if a.get_help().is_none() && a.get_long_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in cmd.get_subcommands() {
                if cmd.get_name() != sub.get_name() {
                    walk(sub, &format!("{path} {}", sub.get_name()), missing);
                }
                if sub.get_about().is_none() && sub.get_name() != "help" {
                    missing.push(format!("{path} {} (about)", sub.get_name()));
                }
            }
        }
        let mut missing = Vec::new();
        walk(&super::Cli::command(), "nightshift", &mut missing);
        assert!(missing.is_empty(), "no --help text: {missing:#?}");
    }
}
