//! What a build from source needs that a runtime image lacks, and how hard the box may work
//! on it: the CUDA compiler of torch's CUDA, `TORCH_CUDA_ARCH_LIST` for the box's GPUs,
//! `MAX_JOBS` bounded by memory, a ccache volume shared by builds of neighbouring commits,
//! and the compiler's `[N/M]` progress. Pure functions here; Docker and NVML at the edges.
//!
//! The default template (see [`super::DEFAULT_DOCKERFILE`]) installs the toolchain in its
//! own step (Docker caches it per base image), copies the tree, and labels the image
//! [`COMPILE_LABEL`]: the compile then runs in a container of that image with the ccache
//! volume mounted (`docker build` cannot mount volumes), and the container is committed
//! as the built image.

use super::super::{container, Clock, DockerRuntime, Leftovers, MADE_FOR};
use super::{deciding_line, BUILD_DIR};
use crate::model::Pipe;
use crate::runtime::{RunJob, RunSink};
use bollard::exec::{CreateExecOptions, StartExecResults};
use futures_util::StreamExt;
use std::sync::Mutex;

/// The label (as the template writes it) that asks for the compile in a container.
pub const COMPILE_LABEL: &str = "nightshift.build=compile";
/// The named Docker volume that keeps ccache's objects between builds.
pub const CCACHE_VOLUME: &str = "nightshift-ccache";
/// Where it is mounted in the build container (root's default ccache dir).
pub const CCACHE_DIR: &str = "/root/.cache/ccache";
/// The arch list when NVML names no GPU (no driver on the build box): Hopper (H100/H200),
/// what the sweeps run on. Override with `TORCH_CUDA_ARCH_LIST` in nightshift's environment.
pub const FALLBACK_ARCH_LIST: &str = "9.0";
/// Memory one compile job may take: vLLM's CUDA files peak at 4–6 GB in nvcc/cicc.
pub const BYTES_PER_JOB: u64 = 6_000_000_000;

/// The progress layer's name: the TUI's pull bar shows it with the image layers.
pub const PROGRESS_LAYER: &str = "build";

/// Parallel compile jobs: one per [`BYTES_PER_JOB`] of RAM, at least 1, at most `cpus`.
pub(crate) fn max_jobs(mem_bytes: u64, cpus: u32) -> u32 {
    let by_mem = (mem_bytes / BYTES_PER_JOB).min(u32::MAX as u64) as u32;
    by_mem.clamp(1, cpus.max(1))
}

/// `TORCH_CUDA_ARCH_LIST` for GPUs of these compute capabilities: distinct, ascending,
/// `major.minor` joined by `;` (`[(9,0)]` → `9.0`). None known: [`FALLBACK_ARCH_LIST`].
pub(crate) fn arch_list(capabilities: &[(u32, u32)]) -> String {
    let mut caps = capabilities.to_vec();
    caps.sort_unstable();
    caps.dedup();
    if caps.is_empty() {
        return FALLBACK_ARCH_LIST.into();
    }
    caps.iter()
        .map(|(a, b)| format!("{a}.{b}"))
        .collect::<Vec<_>>()
        .join(";")
}

/// A ninja line `[N/M] Building CUDA object …` (also indented, as pip -v shows it) → (N, M).
pub(crate) fn parse_build_progress(line: &str) -> Option<(u32, u32)> {
    let rest = line.trim_start().strip_prefix('[')?;
    let (inside, after) = rest.split_once(']')?;
    let (n, m) = inside.split_once('/')?;
    let (n, m) = (n.trim().parse::<u32>().ok()?, m.trim().parse::<u32>().ok()?);
    (m > 0 && n <= m && after.starts_with(' ')).then_some((n, m))
}

/// The operator's `TORCH_CUDA_ARCH_LIST` / `MAX_JOBS`, else none (the box decides).
pub(crate) fn env_override(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// The environment of the compile: jobs, ccache as the compilers' launcher.
pub(crate) fn compile_env(max_jobs: u32, arch_list: &str) -> Vec<String> {
    vec![
        format!("MAX_JOBS={max_jobs}"),
        format!("TORCH_CUDA_ARCH_LIST={arch_list}"),
        format!("CCACHE_DIR={CCACHE_DIR}"),
        "CCACHE_MAXSIZE=40G".into(),
        "CMAKE_C_COMPILER_LAUNCHER=ccache".into(),
        "CMAKE_CXX_COMPILER_LAUNCHER=ccache".into(),
        "CMAKE_CUDA_COMPILER_LAUNCHER=ccache".into(),
    ]
}

/// The compile, run in the tree (`BUILD_DIR`) of the image the template made: build
/// requirements, the old vLLM out, `pip install -v` (verbose: ninja's `[N/M]` lines show).
pub const COMPILE_SCRIPT: &str = r#"set -e; py=""
for c in python3 /usr/bin/python3 /usr/local/bin/python3 /opt/venv/bin/python3 /opt/conda/bin/python3 python; do
  if command -v "$c" >/dev/null 2>&1; then py="$c"; break; fi; done
if [ -z "$py" ]; then echo "ERROR: no Python interpreter"; exit 1; fi
for r in requirements-build.txt requirements/build.txt; do
  if [ -f "$r" ]; then "$py" -m pip install -r "$r"; fi; done
"$py" -m pip uninstall -y vllm || true
if command -v ccache >/dev/null 2>&1; then ccache -z >/dev/null 2>&1 || true; fi
echo "nightshift build: TORCH_CUDA_ARCH_LIST=$TORCH_CUDA_ARCH_LIST MAX_JOBS=$MAX_JOBS CCACHE_DIR=$CCACHE_DIR nvcc=$(command -v nvcc || echo none)"
"$py" -m pip install -v --no-build-isolation -e .
if command -v ccache >/dev/null 2>&1; then ccache -s || true; fi
"#;

/// What the box gives a build: the arch list and the jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildHost {
    pub arch_list: String,
    pub max_jobs: u32,
}

/// Compute capabilities of the GPUs NVML sees (none without a driver).
fn nvml_capabilities() -> Vec<(u32, u32)> {
    let Ok(nvml) = nvml_wrapper::Nvml::init() else {
        return Vec::new();
    };
    (0..nvml.device_count().unwrap_or(0))
        .filter_map(|i| {
            let c = nvml
                .device_by_index(i)
                .ok()?
                .cuda_compute_capability()
                .ok()?;
            Some((c.major.max(0) as u32, c.minor.max(0) as u32))
        })
        .collect()
}

impl DockerRuntime {
    /// The build box's arch list and jobs: the operator's overrides, else NVML and the
    /// Docker host's memory and CPUs.
    pub(in crate::runtime::docker) async fn build_host(&self) -> BuildHost {
        let b = &self.cfg.build;
        let arch = match &b.arch_list {
            Some(a) => a.clone(),
            None => arch_list(
                &tokio::task::spawn_blocking(nvml_capabilities)
                    .await
                    .unwrap_or_default(),
            ),
        };
        let jobs = match b.max_jobs {
            Some(j) => j.max(1),
            None => {
                let info = self.docker.info().await.ok();
                let mem = info.as_ref().and_then(|i| i.mem_total).unwrap_or(0);
                let cpus = info.as_ref().and_then(|i| i.ncpu).unwrap_or(1);
                max_jobs(mem.max(0) as u64, cpus.clamp(1, u32::MAX as i64) as u32)
            }
        };
        BuildHost {
            arch_list: arch,
            max_jobs: jobs,
        }
    }

    /// Run [`COMPILE_SCRIPT`] in a container of `tag` (the template's image) with the ccache
    /// volume, streaming its log and progress, and commit the container as `tag`.
    #[allow(clippy::too_many_arguments)] // the build's context, as build_from_source has it
    pub(in crate::runtime::docker) async fn compile_in_container(
        &self,
        job: &RunJob,
        tag: &str,
        host: &BuildHost,
        sink: &RunSink,
        lo: &Mutex<Leftovers>,
        clock: &Clock,
        log: &mut Vec<String>,
    ) -> Result<(), String> {
        let base = super::super::image::inspect(&self.docker, tag)
            .await
            .ok_or_else(|| format!("{tag} missing after its build"))?;
        let name = container::name(job, "build");
        lo.lock()
            .unwrap_or_else(|e| e.into_inner())
            .containers
            .push((name.clone(), false));
        let spec = container::Spec {
            image: tag.to_string(),
            entrypoint: super::super::keeper(),
            env: Vec::new(),
            labels: container::labels(job, "build"),
            gpus: Vec::new(),
            shm_size: None,
            ipc: None,
            binds: vec![format!("{CCACHE_VOLUME}:{CCACHE_DIR}")],
            port: None,
            workdir: None,
        };
        let started = async {
            container::create(&self.docker, &name, spec)
                .await
                .map_err(|e| format!("creating the build container {name}: {e}"))?;
            self.docker
                .start_container(&name, None)
                .await
                .map_err(|e| format!("starting the build container {name}: {e}"))
        };
        if let Err(e) = clock.wait(started).await {
            self.remove_now(&name, lo, clock).await;
            return Err(e);
        }
        self.dlog(
            sink,
            Pipe::Stdout,
            format!(
                "build │ compiling in {name} (ccache volume {CCACHE_VOLUME}, MAX_JOBS={}, TORCH_CUDA_ARCH_LIST={})",
                host.max_jobs, host.arch_list
            ),
        )
        .await;
        let code = self
            .stream_exec(
                &name,
                compile_env(host.max_jobs, &host.arch_list),
                sink,
                log,
            )
            .await;
        let result = match code {
            Ok(0) => {
                let (repo, t) = split_tag(tag);
                let made_for = base_label(&self.docker, tag).await;
                self.commit(
                    &name,
                    (repo, t),
                    &base,
                    "nightshift build from source",
                    &made_for,
                    clock,
                )
                .await
                .map_err(|e| format!("committing the build: {e:?}"))
            }
            Ok(c) => Err(format!("exit {c}: {}", deciding_line(log))),
            Err(e) => Err(e),
        };
        self.remove_now(&name, lo, clock).await;
        result
    }

    /// The compile's exec: each line to the run's log and `log`, ninja's `[N/M]` as progress.
    async fn stream_exec(
        &self,
        container: &str,
        env: Vec<String>,
        sink: &RunSink,
        log: &mut Vec<String>,
    ) -> Result<i64, String> {
        let exec = self
            .docker
            .create_exec(
                container,
                CreateExecOptions {
                    attach_stdout: Some(true),
                    attach_stderr: Some(true),
                    cmd: Some(vec!["sh".into(), "-c".into(), COMPILE_SCRIPT.into()]),
                    working_dir: Some(BUILD_DIR.into()),
                    env: Some(env),
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| format!("the compile could not start: {e}"))?;
        let started = self
            .docker
            .start_exec(&exec.id, None)
            .await
            .map_err(|e| format!("the compile could not start: {e}"))?;
        if let StartExecResults::Attached { mut output, .. } = started {
            let mut split = super::super::exec::LineSplitter::default();
            while let Some(chunk) = output.next().await {
                let chunk = chunk.map_err(|e| format!("the compile's output broke off: {e}"))?;
                let (pipe, bytes) = match chunk {
                    bollard::container::LogOutput::StdErr { message } => (Pipe::Stderr, message),
                    other => (Pipe::Stdout, other.into_bytes()),
                };
                for l in split.push(pipe, &bytes) {
                    self.build_line(sink, pipe, &l, log).await;
                }
            }
            for (pipe, l) in split.finish() {
                self.build_line(sink, pipe, &l, log).await;
            }
        }
        let info = self
            .docker
            .inspect_exec(&exec.id)
            .await
            .map_err(|e| format!("the compile's exit is unknown: {e}"))?;
        Ok(info.exit_code.unwrap_or(-1))
    }

    /// One line of a build's log: to the run's log (and `log`), and its progress.
    pub(in crate::runtime::docker) async fn build_line(
        &self,
        sink: &RunSink,
        pipe: Pipe,
        line: &str,
        log: &mut Vec<String>,
    ) {
        if line.trim().is_empty() {
            return;
        }
        if let Some((n, m)) = parse_build_progress(line) {
            sink.pull(PROGRESS_LAYER, n as u64, m as u64).await;
        }
        self.dlog(sink, pipe, format!("build │ {line}")).await;
        log.push(line.to_string());
    }
}

/// `repo[:tag]` → (repo, tag) for a commit (`latest` when there is none).
fn split_tag(image: &str) -> (&str, &str) {
    match image.rsplit_once(':') {
        Some((repo, tag)) if !tag.contains('/') => (repo, tag),
        _ => (image, "latest"),
    }
}

/// The image the build was made for (its [`MADE_FOR`] label), so eviction still pairs them.
async fn base_label(docker: &bollard::Docker, tag: &str) -> String {
    docker
        .inspect_image(tag)
        .await
        .ok()
        .and_then(|i| i.config)
        .and_then(|c| c.labels)
        .and_then(|l| l.get(MADE_FOR).cloned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_are_bounded_by_memory_and_cpus() {
        const GB: u64 = 1_000_000_000;
        assert_eq!(max_jobs(2_000 * GB, 224), 224); // 333 by memory, 224 CPUs
        assert_eq!(max_jobs(256 * GB, 64), 42);
        assert_eq!(max_jobs(64 * GB, 8), 8);
        assert_eq!(max_jobs(5 * GB, 8), 1);
        assert_eq!(max_jobs(0, 0), 1);
        assert_eq!(max_jobs(12 * GB, 0), 1);
    }

    #[test]
    fn arch_lists_come_from_capabilities() {
        assert_eq!(arch_list(&[(9, 0)]), "9.0");
        assert_eq!(arch_list(&[(9, 0), (8, 0), (9, 0)]), "8.0;9.0");
        assert_eq!(arch_list(&[(8, 9), (8, 6)]), "8.6;8.9");
        assert_eq!(arch_list(&[]), FALLBACK_ARCH_LIST);
    }

    #[test]
    fn ninja_progress_is_read_and_other_brackets_are_not() {
        assert_eq!(
            parse_build_progress("[12/345] Building CUDA object CMakeFiles/_C.dir/csrc/a.cu.o"),
            Some((12, 345))
        );
        assert_eq!(
            parse_build_progress("  [345/345] Linking CXX shared module _C.abi3.so"),
            Some((345, 345))
        );
        assert_eq!(parse_build_progress("[ 45%] Building CXX object"), None);
        assert_eq!(parse_build_progress("[3/2] nonsense"), None);
        assert_eq!(parse_build_progress("[1/0] nonsense"), None);
        assert_eq!(parse_build_progress("[notice] A new release of pip"), None);
        assert_eq!(parse_build_progress("Step 3/7 : COPY . /x"), None);
        assert_eq!(parse_build_progress("[1/2]x"), None);
    }

    #[test]
    fn the_compile_gets_ccache_and_the_box_settings() {
        let env = compile_env(7, "8.0;9.0");
        for want in [
            "MAX_JOBS=7",
            "TORCH_CUDA_ARCH_LIST=8.0;9.0",
            "CCACHE_DIR=/root/.cache/ccache",
            "CMAKE_C_COMPILER_LAUNCHER=ccache",
            "CMAKE_CXX_COMPILER_LAUNCHER=ccache",
            "CMAKE_CUDA_COMPILER_LAUNCHER=ccache",
        ] {
            assert!(env.iter().any(|e| e == want), "{want} in {env:?}");
        }
        assert!(COMPILE_SCRIPT.contains("pip install -v --no-build-isolation -e ."));
        assert_eq!(split_tag("org/h:nsbuild-1"), ("org/h", "nsbuild-1"));
        assert_eq!(
            split_tag("localhost:5000/h"),
            ("localhost:5000/h", "latest")
        );
    }
}
