//! The command line as clap reads it: every subcommand, its flags and their help.

use super::*;
use clap::{Subcommand, ValueEnum};

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
    /// It gets a clean environment: PATH, HOME, USER, LOGNAME, LANG, LC_ALL, TZ, TMPDIR,
    /// SHELL and what --alert-env names; never the daemon's tokens or passwords.
    #[arg(long, value_name = "CMD")]
    pub alert_command: Vec<String>,
    /// A variable of this environment that --alert-command also gets (repeatable), e.g. the
    /// mail relay's address the command needs.
    #[arg(long, value_name = "NAME", value_parser = env_name)]
    pub alert_env: Vec<String>,
    /// Alert when a run has waited this long for the operator.
    #[arg(long, value_name = "MIN", default_value_t = 30)]
    pub alert_held_min: u64,
}

impl AlertArgs {
    pub(crate) fn targets(&self) -> (crate::alerts::Targets, crate::alerts::Limits) {
        (
            crate::alerts::Targets {
                webhooks: self.alert_webhook.clone(),
                slack: self.alert_slack.clone(),
                ntfy: self.alert_ntfy.clone(),
                commands: self.alert_command.clone(),
                command_env: self.alert_env.clone(),
            },
            crate::alerts::Limits {
                held_after_ms: self.alert_held_min.saturating_mul(60_000),
                ..Default::default()
            },
        )
    }
}

/// `--alert-env NAME`: a variable's name (not `NAME=VALUE`: the value is the daemon's).
fn env_name(s: &str) -> Result<String, String> {
    if s.is_empty() || s.contains(['=', '\0']) {
        return Err(format!(
            "`{s}`: expected a variable's name, e.g. SMTP_HOST (its value is taken from this environment)"
        ));
    }
    Ok(s.to_string())
}

pub use crate::runtime::docker::DockerOptions;

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
        /// End the night by this time: `07:00` (local, today or tomorrow) or a length of
        /// night (`+6h`, `+90m`; on the sim, simulated time). No run starts that cannot
        /// finish by then, a commit starts only if its whole 3-way result can, and what
        /// does not fit stays queued for the next night.
        #[arg(long, value_name = "HH:MM|+LENGTH")]
        until: Option<crate::window::Until>,
        /// With --until: start runs while the window is open even if they may not finish.
        #[arg(long, requires = "until")]
        start_late: bool,
        /// Pause the sweep while the store's or the run logs' filesystem has less than this
        /// free (MiB); it resumes when space is back.
        #[arg(long, default_value_t = crate::disk::DEFAULT_FLOOR_MIB)]
        min_free_mib: u64,
        /// Re-queue failed runs (all, or only this category).
        #[arg(long, value_name = "CATEGORY", num_args = 0..=1, default_missing_value = "all")]
        retry_failed: Option<String>,
        /// Re-run finished runs whose command, model or GPU changed in the plan.
        #[arg(long)]
        rerun_changed: bool,
        /// Skip the preflight (docker and slurm runtimes run it first and skip blocked
        /// variants with their reason).
        #[arg(long)]
        no_preflight: bool,
        /// Run the variants preflight blocks anyway (their reasons are still printed).
        #[arg(long)]
        run_blocked: bool,
        /// Apply the fixes in this file (as `preflight --suggest` writes them) to their
        /// commits, every variant alike; each is recorded with its commit.
        #[arg(long, value_name = "FILE")]
        fixes: Option<PathBuf>,
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
    /// Block until the store's sweep needs the operator (a run held) or ends, as pueue's
    /// `wait`: exit 0 when it ended, 3 when a run waits for a decision, 1 when no sweep is
    /// running, 4 when --timeout passed first.
    Wait {
        /// Store directory (default: the only sweep under the data dir).
        #[arg(long)]
        store: Option<PathBuf>,
        /// Give up after this many seconds (default: a day).
        #[arg(long, default_value_t = 86_400)]
        timeout: u64,
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
    Demo(super::demo::DemoArgs),
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
        #[command(flatten)]
        learn: super::groups::LearnArgs,
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
        /// The table's width in columns (default: the terminal's when stdout is one, else
        /// the wide table). Narrower than 120, each commit shows the metrics that fit, its
        /// primary first, and says its verdicts on lines of their own.
        #[arg(long)]
        width: Option<u16>,
        #[command(flatten)]
        group: super::groups::GroupArgs,
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
        /// Commits whose baseline is repeated (the first runnable ones of the plan; at
        /// most 1,000).
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=1000))]
        commits: u64,
        /// Identical runs per commit (at least 2; at most 100, as a plan's `repeats`).
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
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
    /// Everything about the plan that can be known before a GPU is spent: per commit and
    /// variant the vLLM era (from the clone), the command on that era, images (local or in
    /// the registry), agent patches (present, `git apply --check` on the parent), models
    /// (on the Hub, gated, architecture, weights vs GPU memory × TP, known incompatibilities),
    /// datasets and the box. One verdict per commit: ready, at_risk or blocked. Exit 0 when
    /// nothing is blocked, 1 when something is, 2 on bad input.
    Preflight {
        /// The sweep plan (TOML).
        plan: PathBuf,
        /// One JSON document: {"commits": [{commit, verdict, reasons, unchecked, …}], "summary"}.
        #[arg(long)]
        json: bool,
        /// Only what the box and the clone can tell (no Hub, no registry).
        #[arg(long)]
        offline: bool,
        /// List ready commits too.
        #[arg(long)]
        all: bool,
        /// GPUs on the box (default: what NVML sees).
        #[arg(long)]
        gpus: Option<u32>,
        /// Memory of one GPU in GiB (default: NVML, else the plan's gpu_type).
        #[arg(long)]
        gpu_mem_gib: Option<f64>,
        /// Do not ask the local Docker engine for images.
        #[arg(long)]
        no_docker: bool,
        /// Ask the Hub and registries again instead of using answers kept from earlier runs.
        #[arg(long)]
        no_cache: bool,
        /// Write the fixes preflight knows for the commits it blocks (a substitute model kept
        /// as data with its source, more GPUs for weights one cannot hold) to
        /// PLAN.fixes.toml beside the plan, for review (`run --fixes`).
        #[arg(long)]
        suggest: bool,
        /// Judge the plan with these fixes applied (see `--suggest`).
        #[arg(long, value_name = "FILE")]
        fixes: Option<PathBuf>,
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
    /// What the GPU panel sees on this machine (NVML), printed once: a table of the GPUs
    /// and the sweep screen with its GPU panel.
    Gpus {
        /// NVML samples to take before printing (the panel's sparklines need a few).
        #[arg(long, default_value_t = 5)]
        samples: usize,
        /// Milliseconds between samples.
        #[arg(long, default_value_t = 500)]
        every_ms: u64,
        /// Width of the printed screen.
        #[arg(long, default_value_t = 120)]
        width: u16,
        /// Height of the printed screen.
        #[arg(long, default_value_t = 30)]
        height: u16,
    },
    /// Check this machine can run a sweep.
    Doctor {
        /// Take the vLLM clone (`vllm_src`) from this plan.
        #[arg(long)]
        plan: Option<PathBuf>,
    },
    /// Benchmarks: `engine` (sim at max speed), `store`, `stats`, `parse`, or `tui` (frame times; try --runs 1000).
    Bench {
        /// engine | store | groups (grouping a store's unknown failures) | stats (false positives and power of the verdicts on simulated
        /// A/A and true effects; --runs = comparisons per row, default 2000) | parse | tui |
        /// night (images, link and disk over the seed mix) | eta (the night's estimate against sim nights) |
        /// attach (a client's first frame from a live daemon) | daemon (its RSS over a sim night) |
        /// source (preflight reading vLLM's argparse source, per file and per variant)
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
