//! `nightshift doctor`: can a sweep run on this machine? Each check prints ok/warn/FAIL with
//! a hint. Exit 0 when a sweep can run (no FAIL), 1 otherwise. The HF token's value is never
//! printed, only whether it is set.

use super::secrets::{Secrets, TOKEN_VARS};
use super::{image, DEFAULT_MIN_FREE_BYTES};
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Ok,
    Warn,
    Fail,
}

#[derive(Debug, Clone)]
pub struct Check {
    pub name: &'static str,
    pub level: Level,
    pub detail: String,
    pub hint: Option<String>,
}

fn check(name: &'static str, level: Level, detail: String, hint: Option<&str>) -> Check {
    Check {
        name,
        level,
        detail,
        hint: hint.map(Into::into),
    }
}

/// Run every check. `vllm_src` comes from a plan when one is given.
pub async fn checks(vllm_src: Option<PathBuf>) -> Vec<Check> {
    let mut v = Vec::new();
    let docker = super::connect().await;
    let mut root = None;
    match &docker {
        Ok(d) => match d.version().await {
            Ok(ver) => {
                v.push(check(
                    "docker",
                    Level::Ok,
                    format!(
                        "Docker {} reachable (API {}, client negotiated {})",
                        ver.version.unwrap_or_default(),
                        ver.api_version.unwrap_or_default(),
                        d.client_version()
                    ),
                    None,
                ));
                if let Ok(info) = d.info().await {
                    root = info.docker_root_dir.map(PathBuf::from);
                    let runtimes: Vec<String> = info
                        .runtimes
                        .map(|r| r.into_keys().collect())
                        .unwrap_or_default();
                    let cdi = info.cdi_spec_dirs.map(|d| !d.is_empty()).unwrap_or(false);
                    let toolkit = which("nvidia-container-cli")
                        || which("nvidia-container-runtime-hook")
                        || which("nvidia-ctk");
                    if runtimes.iter().any(|r| r == "nvidia") || toolkit || cdi {
                        v.push(check(
                            "gpu requests",
                            Level::Ok,
                            format!(
                                "NVIDIA device requests possible (runtimes: {}; toolkit hook {})",
                                runtimes.join(", "),
                                if toolkit { "found" } else { "not found" }
                            ),
                            None,
                        ));
                    } else {
                        v.push(check(
                            "gpu requests",
                            Level::Fail,
                            format!(
                                "no NVIDIA container toolkit: runtimes {} and no nvidia-container-cli",
                                runtimes.join(", ")
                            ),
                            Some("install nvidia-container-toolkit, run `nvidia-ctk runtime configure --runtime=docker`, restart dockerd"),
                        ));
                    }
                }
            }
            Err(e) => v.push(check(
                "docker",
                Level::Fail,
                format!("Docker not reachable: {e}"),
                Some("start dockerd, and make sure this user can use /var/run/docker.sock (group `docker`) or set DOCKER_HOST"),
            )),
        },
        Err(e) => v.push(check(
            "docker",
            Level::Fail,
            format!("Docker not reachable: {e}"),
            Some("start dockerd, and make sure this user can use /var/run/docker.sock (group `docker`) or set DOCKER_HOST"),
        )),
    }
    match nvml_wrapper::Nvml::init() {
        Ok(nvml) => {
            let n = nvml.device_count().unwrap_or(0);
            let driver = nvml.sys_driver_version().unwrap_or_default();
            v.push(check(
                "nvml",
                if n > 0 { Level::Ok } else { Level::Warn },
                format!("NVML loaded: {n} GPU(s), driver {driver}"),
                (n == 0).then_some("no GPU visible: check `nvidia-smi`"),
            ));
        }
        Err(e) => v.push(check(
            "nvml",
            Level::Fail,
            format!("NVML not loadable: {e}"),
            Some("install the NVIDIA driver (libnvidia-ml.so.1); `nvidia-smi` must work"),
        )),
    }
    let root = root.unwrap_or_else(|| PathBuf::from("/var/lib/docker"));
    match image::free_bytes(&root) {
        Some(free) => {
            let enough = free >= DEFAULT_MIN_FREE_BYTES;
            v.push(check(
                "disk",
                if enough { Level::Ok } else { Level::Warn },
                format!(
                    "{:.1} GB free on Docker's root {} ({} GB needed per image pull)",
                    free as f64 / 1e9,
                    root.display(),
                    DEFAULT_MIN_FREE_BYTES / 1_000_000_000
                ),
                (!enough).then_some(
                    "images are 17–22 GB: free space (`docker image prune -a`) or pre-pull the sweep's images",
                ),
            ));
        }
        None => v.push(check(
            "disk",
            Level::Warn,
            format!("cannot read free space on {}", root.display()),
            Some("run doctor as a user who can stat Docker's root dir, or check `df` yourself"),
        )),
    }
    if Secrets::from_env().has_token() {
        v.push(check(
            "hf token",
            Level::Ok,
            "Hugging Face token set (value not shown)".into(),
            None,
        ));
    } else {
        v.push(check(
            "hf token",
            Level::Warn,
            format!("no Hugging Face token in {}", TOKEN_VARS.join(" or ")),
            Some("export HF_TOKEN=... (needed for gated models such as Llama)"),
        ));
    }
    match vllm_src {
        Some(p) if p.join(".git").exists() && p.join("benchmarks").is_dir() => v.push(check(
            "vllm source",
            Level::Ok,
            format!("vLLM clone at {}", p.display()),
            None,
        )),
        Some(p) => v.push(check(
            "vllm source",
            Level::Fail,
            format!("{} is not a vLLM git clone", p.display()),
            Some("git clone https://github.com/vllm-project/vllm and set `vllm_src` in the plan's [defaults]"),
        )),
        None => v.push(check(
            "vllm source",
            Level::Warn,
            "no vLLM clone configured (NIGHTSHIFT_VLLM_SRC or a plan's `vllm_src`)".into(),
            Some("benchmarks/ then comes from each image's own copy (/vllm-workspace or /opt/vllm_baseline); older images have none: clone vLLM and set `vllm_src` in the plan"),
        )),
    }
    v
}

fn which(bin: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(bin).is_file()))
        .unwrap_or(false)
}

pub fn print(checks: &[Check], out: &mut dyn Write) -> std::io::Result<()> {
    for c in checks {
        let tag = match c.level {
            Level::Ok => "ok  ",
            Level::Warn => "warn",
            Level::Fail => "FAIL",
        };
        writeln!(out, "{tag}  {:<12} {}", c.name, c.detail)?;
        if let Some(h) = &c.hint {
            writeln!(out, "      {:<12} hint: {h}", "")?;
        }
    }
    Ok(())
}

/// The plan's datasets: each `[datasets]` file present, and every commit whose client
/// would open a dataset that is not configured.
/// The agents' patch files the plan names: on this box or not. Whether each applies to
/// its parent is preflight's (`nightshift preflight PLAN`, with the clone).
pub(crate) fn patch_checks(plan: &crate::plan::Plan) -> Vec<Check> {
    let base = plan.path.parent().unwrap_or(Path::new("."));
    let named: Vec<&str> = plan
        .runs
        .iter()
        .filter(|r| r.variant.agent_id().is_some() && r.skip_reason.is_none())
        .filter_map(|r| r.patch.as_deref())
        .collect();
    if named.is_empty() {
        return Vec::new();
    }
    let missing: Vec<&str> = named
        .iter()
        .copied()
        .filter(|p| !crate::plan::expand_path(p, base).is_file())
        .collect();
    let level = if missing.is_empty() {
        Level::Ok
    } else {
        Level::Warn
    };
    let mut detail = format!(
        "{} of {} agent patch files on this box",
        named.len() - missing.len(),
        named.len()
    );
    if let Some(first) = missing.first() {
        detail.push_str(&format!(" (missing: {first}"));
        if missing.len() > 1 {
            detail.push_str(&format!(" and {} more", missing.len() - 1));
        }
        detail.push(')');
    }
    vec![check(
        "agent patches",
        level,
        detail,
        (!missing.is_empty()).then_some(
            "those agent runs cannot give a result; `nightshift preflight PLAN` names each and checks the rest apply to their parent",
        ),
    )]
}

pub(crate) fn dataset_checks(plan: &crate::plan::Plan) -> Vec<Check> {
    let mut v = Vec::new();
    for (name, path) in &plan.datasets {
        match std::fs::metadata(path) {
            Ok(m) => v.push(check(
                "dataset",
                Level::Ok,
                format!("{name}: {} ({} bytes)", path.display(), m.len()),
                None,
            )),
            Err(e) => v.push(check(
                "dataset",
                Level::Fail,
                format!("{name}: {} ({e})", path.display()),
                Some("`nightshift prefetch PLAN` downloads ShareGPT; other files: copy them there"),
            )),
        }
    }
    let blocked: Vec<&str> = plan
        .commits
        .iter()
        .filter(|c| c.invocation_problem.is_some() && c.invalid.is_none())
        .map(|c| c.short())
        .collect();
    if !blocked.is_empty() {
        v.push(check(
            "dataset",
            Level::Fail,
            format!(
                "{} commit(s) open ShareGPT (they name no dataset) but [datasets] has no `sharegpt`: {}",
                blocked.len(),
                blocked.join(" ")
            ),
            Some(crate::plan::DATASET_HINT),
        ));
    }
    v
}

/// The `doctor` subcommand. `vllm_src`: from `--plan`, else `NIGHTSHIFT_VLLM_SRC`.
pub fn main(vllm_src: Option<&Path>, plan: Option<&crate::plan::Plan>) -> i32 {
    let src = vllm_src
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os("NIGHTSHIFT_VLLM_SRC").map(PathBuf::from));
    let mut checks = crate::rt::block_on(checks(src));
    if let Some(p) = plan {
        checks.extend(dataset_checks(p));
        checks.extend(patch_checks(p));
    }
    let _ = print(&checks, &mut std::io::stdout());
    let fails = checks.iter().filter(|c| c.level == Level::Fail).count();
    if fails == 0 {
        println!("a sweep can run");
        0
    } else {
        println!("{fails} problem(s) stop a sweep from running");
        1
    }
}
