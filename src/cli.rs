//! Command-line interface (clap derive). Thin: every subcommand calls into the library.
//! Exit status: 0 success, 1 the work failed, 2 bad usage or bad input.

use crate::plan::{LoadError, Plan};
use crate::runtime::sim::{SimRuntime, Speed};
use crate::runtime::Runtime;
use clap::Parser;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

mod args;
mod attach;
mod demo;
mod diagnose;
mod gpus;
pub mod groups;
pub(crate) mod input;
mod link;
pub mod parse;
pub use args::*;

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

pub(crate) fn load_plan(path: &std::path::Path) -> Result<Plan, i32> {
    load_plan_fixed(path, None)
}

/// [`load_plan`] with the fixes of `fixes` (a `--fixes FILE`) applied to their commits.
pub(crate) fn load_plan_fixed(
    path: &std::path::Path,
    fixes: Option<&std::path::Path>,
) -> Result<Plan, i32> {
    // The box's datasets and clone from the config file; a broken config is the TUI's to
    // report.
    let mut box_defaults = crate::tui::config::Config::load(None)
        .map(|c| c.box_defaults())
        .unwrap_or_default();
    if let Some(f) = fixes {
        box_defaults.fixes = crate::plan::fixes::load(f).map_err(|e| {
            tracing::error!("--fixes {e}");
            2
        })?;
    }
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
    let text = input::plan_text(&plan.path).map_err(|e| {
        tracing::error!("{e}");
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
            min_free_mib,
            until,
            start_late,
            retry_failed,
            rerun_changed,
            no_preflight,
            run_blocked,
            fixes,
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
            let plan = match load_plan_fixed(&plan, fixes.as_deref()) {
                Ok(p) => Arc::new(p),
                Err(code) => return code,
            };
            for c in plan.commits.iter() {
                if let Some(f) = &c.fixed {
                    crate::daemon::console::say(format_args!(
                        "nightshift: {} fixed before the night: {f}",
                        c.short()
                    ));
                }
            }
            let gpus_asked = gpus;
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
                        Ok(rt) => (rt, crate::runtime::docker::slots(&plan, gpus), 1.0),
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
            // Know before the night: once the runtime is set up (bad usage is said first),
            // a real box's runs are preflighted and what cannot give a result is skipped
            // with its reason before any GPU is given. The sim has nothing to ask.
            let plan = if runtime != RuntimeKind::Sim && !no_preflight {
                let mut p = (*plan).clone();
                preflight_before_night(&mut p, gpus_asked, run_blocked);
                Arc::new(p)
            } else {
                plan
            };
            let args = crate::daemon::commands::RunArgs {
                plan,
                runtime: rt,
                gpus,
                seed,
                store,
                log_dir,
                min_free_mib,
                window: until.map(|u| (u, start_late)),
                retry_failed: retry_failed.map(|c| Some(c).filter(|c| c != "all")),
                rerun_changed,
                time_scale,
                budget: images.budget(),
                alerts: alerts.targets(),
                overrides,
            };
            if !headless {
                return attach::start_and_attach(&args, std::env::args_os().collect());
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
                    Ok(rt) => (rt, crate::runtime::docker::slots(&plan, gpus), 1.0),
                    Err(code) => return code,
                }
            } else {
                (
                    Arc::new(SimRuntime::new(speed).on_box(seed)),
                    gpus.unwrap_or(8),
                    speed.time_scale(),
                )
            };
            crate::daemon::calibrate::main(
                &plan,
                rt,
                &dir,
                gpus,
                (commits as usize, repeats),
                (seed, scale),
            )
        }
        Cmd::Demo(args) => demo::demo(args),
        Cmd::Attach { store } => match crate::daemon::commands::find_dir(store) {
            Ok(dir) => attach::attach(&dir),
            Err(c) => c,
        },
        Cmd::Status { store } => match crate::daemon::commands::find_dir(store) {
            Ok(dir) => crate::daemon::client::status(&dir),
            Err(c) => c,
        },
        Cmd::Wait { store, timeout } => match crate::daemon::commands::find_dir(store) {
            Ok(dir) => crate::daemon::client::wait(&dir, std::time::Duration::from_secs(timeout)),
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
            parse::main(&files, json, &mut std::io::stdout(), &mut std::io::stderr())
        }
        Cmd::Diagnose { files, json, learn } => {
            if learn.learn.is_some() {
                return groups::learn(&learn);
            }
            if files.is_empty() {
                tracing::error!("diagnose needs at least one FILE");
                return 2;
            }
            diagnose::main(&files, json, &mut std::io::stdout(), &mut std::io::stderr())
        }
        Cmd::Results {
            store,
            format,
            filter,
            threshold,
            alpha,
            token_share,
            width,
            group,
        } => {
            // A narrow terminal gets the narrow table (a pipe the wide one, for scripts).
            let width = width.or_else(|| {
                use std::io::IsTerminal;
                std::io::stdout()
                    .is_terminal()
                    .then(|| crossterm::terminal::size().ok().map(|(w, _)| w))
                    .flatten()
            });
            let format = match width {
                Some(w) if format == "table" && w < 120 => format!("table:{}", w.max(40)),
                _ => format,
            };
            if group.group.is_some() {
                return groups::results_group(store, &group);
            }
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
        Cmd::Preflight {
            plan,
            json,
            offline,
            all,
            gpus,
            gpu_mem_gib,
            no_docker,
            no_cache,
            suggest,
            fixes,
        } => {
            let plan_path = plan.clone();
            let plan = match load_plan_fixed(&plan, fixes.as_deref()) {
                Ok(p) => p,
                Err(code) => return code,
            };
            let opts = crate::preflight::gather::Options {
                offline,
                gpus,
                gpu_mem_gib,
                docker: !no_docker,
                cache: (!no_cache)
                    .then(crate::preflight::cache::default_path)
                    .flatten(),
            };
            if suggest {
                return crate::preflight::cli::suggest(&plan, &plan_path, &opts);
            }
            crate::preflight::cli::main(&plan, &opts, json, all)
        }
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
        Cmd::Gpus {
            samples,
            every_ms,
            width,
            height,
        } => gpus::main(
            samples,
            std::time::Duration::from_millis(every_ms),
            (width, height),
        ),
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
            "engine" => crate::bench::engine::engine(runs),
            "store" => crate::daemon::commands::bench(runs, store.as_deref()),
            "groups" => crate::bench::engine::groups(runs, store.as_deref()),
            "stats" => {
                // Comparisons per table row: --runs, capped so the default finishes fast.
                let m = if runs == 10_000 {
                    2_000
                } else {
                    runs.clamp(10, 100_000)
                };
                let cfg = crate::stats::Config::default();
                // The sim's model, then the same verdicts on a real vLLM's measured noise.
                print!("{}", crate::stats::power::report(7, m, &cfg));
                print!("{}", crate::stats::real::report(m, &cfg));
                0
            }
            "requests" => {
                print!("{}", crate::bench::requests::run());
                0
            }
            "tui" => crate::bench::tui::run(runs.min(100_000)),
            "attach" => crate::bench::attach::attach(runs.min(100_000)),
            "daemon" => crate::bench::attach::daemon(runs, size_mb),
            "night" => {
                let plan = crate::plan::example::example_plan();
                match crate::bench::night::bench(&plan, &mut std::io::stdout()) {
                    Ok(()) => 0,
                    Err(e) => {
                        tracing::error!("{e}");
                        1
                    }
                }
            }
            "eta" => {
                let plan = crate::plan::example::example_plan();
                match crate::bench::eta::run(&plan, &mut std::io::stdout()) {
                    Ok(()) => 0,
                    Err(e) => {
                        tracing::error!("{e}");
                        1
                    }
                }
            }
            "source" => match crate::bench::source::run(runs, &mut std::io::stdout()) {
                Ok(()) => 0,
                Err(e) => {
                    tracing::error!("{e:#}");
                    1
                }
            },
            "parse" => match crate::bench::parse::run(size_mb, &mut std::io::stdout()) {
                Ok(()) => 0,
                Err(e) => {
                    tracing::error!("{e:#}");
                    1
                }
            },
            other => {
                tracing::error!(
                    "unknown benchmark `{other}` (expected engine, store, groups, stats, requests, parse, source, tui, night, eta, attach or daemon)"
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
            let text = match input::read_capped(&file, input::PLAN_CAP, "a commit list") {
                Ok(b) => String::from_utf8_lossy(&b).into_owned(),
                Err(e) => {
                    tracing::error!("{e}");
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

/// `run`'s preflight: verdicts printed (stderr: the TUI takes the screen after), blocked
/// variants skipped with their reason unless `--run-blocked`. A preflight that cannot run
/// at all is reported and the night goes on unchecked.
fn preflight_before_night(plan: &mut Plan, gpus: Option<u32>, run_blocked: bool) {
    let opts = crate::preflight::gather::Options {
        gpus,
        docker: true,
        cache: crate::preflight::cache::default_path(),
        ..Default::default()
    };
    match crate::preflight::cli::preflight(plan, &opts) {
        Ok(report) => {
            for c in report.commits.iter().filter(|c| !c.reasons.is_empty()) {
                for r in &c.reasons {
                    tracing::info!(
                        "preflight {} {}: {} {}: {}",
                        &c.commit[..c.commit.len().min(8)],
                        c.verdict.as_str(),
                        r.variant,
                        r.category,
                        r.text
                    );
                }
            }
            tracing::info!("{}", crate::preflight::summary_line(&report));
            if !run_blocked {
                let n = crate::preflight::cli::skip_blocked(plan, &report);
                if n > 0 {
                    tracing::info!(
                        "preflight: {n} runs skipped before the night (--run-blocked runs them)"
                    );
                }
            }
        }
        Err(e) => tracing::warn!("preflight could not run ({e}); the night goes on unchecked"),
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
