//! Build from source: the images an overlay cannot make. A baseline whose parent → commit
//! diff touches compiled code or the build (`csrc/`, `setup.py`, `CMakeLists.txt`,
//! `requirements*`), and an agent variant whose patch does, are built from the operator's
//! clone with a Dockerfile template: by default it starts from the human image, takes the
//! tree (parent, or parent + patch) as build context and installs it editable.
//!
//! The build runs on the CPU in the prefetch stage, ahead of its run, with its own time
//! limit; its log streams into the run's log (the TUI's log pane) and to disk. A build that
//! finished is not trusted: the image must import vLLM from the built tree, and the tree's
//! marker must name the commit it was built from. Otherwise the build failed, and the
//! failure carries the log's deciding line.

use super::{derive, Clock, DockerRuntime, Leftovers, MADE_FOR};
use crate::model::{Pipe, Variant};
use crate::runtime::{RunEnd, RunJob, RunSink, RuntimeMsg};
use bollard::query_parameters::BuildImageOptions;
use bollard::query_parameters::RemoveImageOptions;
use futures_util::StreamExt;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

#[path = "build_toolchain.rs"]
pub mod toolchain;
pub use toolchain::BuildHost;

/// Where the default recipe puts the source tree in the image.
pub const BUILD_DIR: &str = "/opt/nightshift-build";
/// The file in the build context that names the commit the tree is.
pub const MARKER: &str = ".nightshift-commit";
/// The Dockerfile's name inside the context (the tree may have its own `Dockerfile`).
const DOCKERFILE: &str = "Dockerfile.nightshift";

/// The default recipe. Placeholders: `{base}` (the image to start from), `{commit}` (the
/// full hash of the tree), `{version}` (a PEP 440 version from `git describe`, which
/// setuptools-scm cannot compute without the `.git` the context leaves out),
/// `{arch_list}` (`TORCH_CUDA_ARCH_LIST` for the box's GPUs) and `{max_jobs}` (compile
/// jobs the box's memory bears). The interpreter is found as the runtime finds it.
///
/// A runtime image has torch but not what compiling vLLM needs: the first step installs
/// `nvcc` and the CUDA headers of torch's CUDA from NVIDIA's apt repo, a C/C++ compiler and
/// ccache when missing (cached by Docker per base image). The compile itself runs in a
/// container of this image with the ccache volume ([`toolchain::COMPILE_LABEL`]).
pub const DEFAULT_DOCKERFILE: &str = r#"FROM {base}
RUN set -e; py=""; \
    for c in python3 /usr/bin/python3 /usr/local/bin/python3 /opt/venv/bin/python3 /opt/conda/bin/python3 python; do \
      if command -v "$c" >/dev/null 2>&1; then py="$c"; break; fi; done; \
    if [ -z "$py" ]; then echo "ERROR: no Python interpreter in {base}"; exit 1; fi; \
    cu="$("$py" -c 'import torch; print(torch.version.cuda)' 2>/dev/null | tail -n 1)"; \
    case "$cu" in [0-9]*.[0-9]*) ;; *) echo "ERROR: torch in {base} names no CUDA version ('$cu'): nothing to compile vLLM's kernels with"; exit 1;; esac; \
    cuv="$(echo "$cu" | cut -d. -f1,2)"; pkg="$(echo "$cuv" | tr . -)"; echo "torch is built for CUDA $cuv"; \
    nv="$(command -v nvcc 2>/dev/null || true)"; \
    for d in "/usr/local/cuda-$cuv" /usr/local/cuda; do \
      if [ -z "$nv" ] && [ -x "$d/bin/nvcc" ]; then nv="$d/bin/nvcc"; fi; done; \
    need=""; \
    if [ -z "$nv" ]; then need="cuda-nvcc-$pkg cuda-cudart-dev-$pkg cuda-libraries-dev-$pkg cuda-nvtx-$pkg"; fi; \
    if ! command -v gcc >/dev/null 2>&1 || ! command -v g++ >/dev/null 2>&1; then need="$need build-essential"; fi; \
    if ! command -v ccache >/dev/null 2>&1; then need="$need ccache"; fi; \
    if [ -n "$need" ]; then \
      need="$(echo $need)"; echo "installing: $need"; \
      if ! command -v apt-get >/dev/null 2>&1; then echo "ERROR: {base} lacks $need and has no apt-get to install them"; exit 1; fi; \
      if [ -z "$nv" ] && ! ls /etc/apt/sources.list.d/ 2>/dev/null | grep -q cuda; then \
        . /etc/os-release; arch="$(uname -m)"; if [ "$arch" = aarch64 ]; then arch=sbsa; fi; \
        repo="https://developer.download.nvidia.com/compute/cuda/repos/$ID$(echo "$VERSION_ID" | tr -d .)/$arch"; \
        apt-get update; DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates curl; \
        curl -fsSL -o /tmp/cuda-keyring.deb "$repo/cuda-keyring_1.1-1_all.deb"; dpkg -i /tmp/cuda-keyring.deb; rm -f /tmp/cuda-keyring.deb; \
      fi; \
      apt-get update; DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $need; \
      rm -rf /var/lib/apt/lists/*; \
    fi; \
    if [ ! -x /usr/local/cuda/bin/nvcc ]; then \
      nv="$(command -v nvcc 2>/dev/null || echo "/usr/local/cuda-$cuv/bin/nvcc")"; \
      if [ ! -x "$nv" ]; then echo "ERROR: no nvcc for CUDA $cuv after installing cuda-nvcc-$pkg"; exit 1; fi; \
      ln -sfn "$(cd "$(dirname "$nv")/.." && pwd -P)" /usr/local/cuda; \
    fi; \
    /usr/local/cuda/bin/nvcc --version
ENV CUDA_HOME=/usr/local/cuda PATH=/usr/local/cuda/bin:$PATH
COPY . /opt/nightshift-build
WORKDIR /opt/nightshift-build
ENV SETUPTOOLS_SCM_PRETEND_VERSION={version} TORCH_CUDA_ARCH_LIST="{arch_list}"
LABEL nightshift.build=compile
WORKDIR /
"#;

/// How images are built from source.
#[derive(Debug, Clone)]
pub struct BuildConfig {
    /// Off: a run that needs a build ends as `needs_build` instead.
    pub enabled: bool,
    /// The Dockerfile template (see [`DEFAULT_DOCKERFILE`] for its placeholders).
    pub dockerfile: String,
    /// A build that runs longer is stopped and fails (the seeds saw builds hang 30–77 min).
    pub timeout: Duration,
    /// `TORCH_CUDA_ARCH_LIST` for the build; None: from the box's GPUs (NVML), else
    /// [`toolchain::FALLBACK_ARCH_LIST`]. Default: nightshift's own `TORCH_CUDA_ARCH_LIST`.
    pub arch_list: Option<String>,
    /// Compile jobs; None: one per 6 GB of the Docker host's memory, at most its CPUs.
    /// Default: nightshift's own `MAX_JOBS`.
    pub max_jobs: Option<u32>,
}

impl Default for BuildConfig {
    fn default() -> Self {
        BuildConfig {
            enabled: true,
            dockerfile: DEFAULT_DOCKERFILE.into(),
            timeout: Duration::from_secs(90 * 60),
            arch_list: toolchain::env_override("TORCH_CUDA_ARCH_LIST"),
            max_jobs: toolchain::env_override("MAX_JOBS").and_then(|j| j.parse().ok()),
        }
    }
}

/// The tag a built image gets: per parent, and per patch for an agent's tree, so a
/// retry or a later run of the same tree reuses it.
pub(crate) fn built_tag(human: &str, parent: &str, patch_sha: Option<&str>) -> String {
    let p = &parent[..parent.len().min(12)];
    match patch_sha {
        Some(s) => format!(
            "{}:nsbuild-{p}-p{}",
            derive::repo_of(human),
            &s[..s.len().min(8)]
        ),
        None => format!("{}:nsbuild-{p}", derive::repo_of(human)),
    }
}

/// The template with its placeholders filled.
pub fn render(template: &str, base: &str, commit: &str, version: &str, host: &BuildHost) -> String {
    template
        .replace("{base}", base)
        .replace("{commit}", commit)
        .replace("{version}", version)
        .replace("{arch_list}", &host.arch_list)
        .replace("{max_jobs}", &host.max_jobs.to_string())
}

/// Whether the rendered Dockerfile leaves the compile to a container with the ccache
/// volume (it labels the image [`toolchain::COMPILE_LABEL`]).
pub(crate) fn compiles_in_container(dockerfile: &str) -> bool {
    dockerfile.lines().any(|l| {
        let l = l.trim();
        l.starts_with("LABEL") && l.contains(toolchain::COMPILE_LABEL)
    })
}

/// `git describe --tags` output → a PEP 440 version whose local part names the commit:
/// `v0.6.3-45-gabc` → `0.6.3.post45+g<commit12>`, `v0.6.3` → `0.6.3+g<commit12>`.
pub(crate) fn pep440_version(describe: Option<&str>, commit: &str) -> String {
    let local = format!("+g{}", &commit[..commit.len().min(12)]);
    let Some(d) = describe.map(str::trim).filter(|d| !d.is_empty()) else {
        return format!("0.0.0{local}");
    };
    let d = d.trim_start_matches('v');
    let mut parts = d.rsplitn(3, '-');
    let (last, mid, first) = (parts.next(), parts.next(), parts.next());
    let release = |s: &str| {
        let ok = !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '.');
        ok.then(|| s.to_string())
    };
    let base = match (first, mid, last) {
        (Some(tag), Some(n), Some(g)) if g.starts_with('g') && n.parse::<u64>().is_ok() => {
            release(tag).map(|t| format!("{t}.post{n}"))
        }
        _ => release(d),
    };
    format!("{}{local}", base.unwrap_or_else(|| "0.0.0".into()))
}

async fn git(src: &Path, args: &[&str], env: &[(&str, &Path)]) -> Result<Vec<u8>, String> {
    let mut cmd = tokio::process::Command::new("git");
    cmd.arg("-C").arg(src).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd
        .output()
        .await
        .map_err(|e| format!("running git in {}: {e}", src.display()))?;
    if !out.status.success() {
        return Err(format!(
            "git {} in {}: {}",
            args.join(" "),
            src.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(out.stdout)
}

/// The git tree to build: `commit`'s, or `commit`'s with `patch` applied (in a temporary
/// index: the operator's clone and its working tree are not touched).
pub(crate) async fn tree_of(
    src: &Path,
    commit: &str,
    patch: Option<&Path>,
) -> Result<String, String> {
    let Some(patch) = patch else {
        let t = git(src, &["rev-parse", &format!("{commit}^{{tree}}")], &[]).await?;
        return Ok(String::from_utf8_lossy(&t).trim().to_string());
    };
    let tmp = tempfile::Builder::new()
        .prefix("nightshift-index")
        .tempdir()
        .map_err(|e| format!("a temporary index: {e}"))?;
    let index = tmp.path().join("index");
    let env = [("GIT_INDEX_FILE", index.as_path())];
    git(src, &["read-tree", commit], &env).await?;
    let patch_s = patch.to_string_lossy();
    git(src, &["apply", "--cached", &patch_s], &env)
        .await
        .map_err(|e| format!("the patch does not apply to {commit}: {e}"))?;
    let t = git(src, &["write-tree"], &env).await?;
    Ok(String::from_utf8_lossy(&t).trim().to_string())
}

/// The build context: the tree (`git archive`), the Dockerfile and the commit marker.
pub async fn context(
    src: &Path,
    tree: &str,
    dockerfile: &str,
    marker: &str,
) -> Result<Vec<u8>, String> {
    let archive = git(src, &["archive", "--format=tar", tree], &[]).await?;
    let mut out = tar::Builder::new(Vec::with_capacity(archive.len() + 4096));
    let mut a = tar::Archive::new(&archive[..]);
    let entries = a
        .entries()
        .map_err(|e| format!("reading git archive: {e}"))?;
    for e in entries {
        let mut e = e.map_err(|e| format!("reading git archive: {e}"))?;
        // git's pax header (the commit id) means nothing to Docker.
        if e.header().entry_type() == tar::EntryType::XGlobalHeader {
            continue;
        }
        let mut h = e.header().clone();
        let path = e.path().map_err(|e| e.to_string())?.into_owned();
        if h.entry_type().is_symlink() {
            let target = e
                .link_name()
                .map_err(|e| e.to_string())?
                .map(|t| t.into_owned())
                .unwrap_or_default();
            out.append_link(&mut h, &path, &target)
                .map_err(|e| e.to_string())?;
        } else {
            out.append_data(&mut h, &path, &mut e)
                .map_err(|e| e.to_string())?;
        }
    }
    for (name, data) in [(DOCKERFILE, dockerfile), (MARKER, marker)] {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(0);
        h.set_cksum();
        out.append_data(&mut h, name, data.as_bytes())
            .map_err(|e| e.to_string())?;
    }
    out.into_inner().map_err(|e| e.to_string())
}

/// The line of a build log that says why it failed: the last error-looking line, else the
/// last line.
pub(crate) fn deciding_line(log: &[String]) -> String {
    let telling = |l: &str| {
        let t = l.trim();
        t.starts_with("ERROR")
            || t.starts_with("error:")
            || t.contains("Error:")
            || t.contains("FAILED")
            || t.contains("fatal error")
            || t.contains("returned a non-zero code")
    };
    log.iter()
        .rev()
        .find(|l| telling(l))
        .or_else(|| log.iter().rev().find(|l| !l.trim().is_empty()))
        .map(|l| l.trim().to_string())
        .unwrap_or_default()
}

/// What to build: `tag`, from `base`, with the tree of `commit` (+ `patch`).
#[derive(Debug, Clone, Copy)]
pub struct Recipe<'a> {
    pub base: &'a str,
    pub commit: &'a str,
    pub patch: Option<&'a Path>,
    pub tag: &'a str,
}

/// What a build made.
#[derive(Debug, Clone)]
pub struct Built {
    pub tag: String,
    pub secs: f64,
    /// `vllm.__version__` of the built image.
    pub version: String,
}

impl DockerRuntime {
    /// A baseline whose diff rules out an overlay: built from the parent's tree on the
    /// human image (or reused when built earlier). `pulled` is the pull's failure, kept
    /// when nothing could be attempted.
    pub(super) async fn build_baseline(
        &self,
        job: &RunJob,
        blocker: &str,
        pulled: RunEnd,
        sink: &RunSink,
        lo: &Mutex<Leftovers>,
        clock: &Clock,
    ) -> Result<String, RunEnd> {
        if !self.cfg.build.enabled {
            return Err(RunEnd::NeedsBuild {
                message: format!("{blocker}; building is off (--no-build)"),
            });
        }
        let (Some(human), Some(parent)) = (&job.human_image, &job.parent) else {
            return Err(derive::missing_with(
                pulled,
                "the commit needs a build and its parent or human image is unknown",
            ));
        };
        let tag = built_tag(human, parent, None);
        let _making = self.making(&tag).await;
        if super::image::inspect(&self.docker, &tag).await.is_some() {
            self.dlog(sink, Pipe::Stdout, format!("baseline built earlier: {tag}"))
                .await;
            return Ok(tag);
        }
        self.dlog(
            sink,
            Pipe::Stdout,
            format!("baseline image missing and {blocker}: building it from source"),
        )
        .await;
        self.prepare_image(human, sink, clock)
            .await
            .map_err(|e| derive::missing_with(e, "the human image to build on is missing too"))?;
        let recipe = Recipe {
            base: human,
            commit: parent,
            patch: None,
            tag: &tag,
        };
        let built = self
            .build_from_source(job, recipe, sink, lo, clock)
            .await
            .map_err(|message| RunEnd::NeedsBuild { message })?;
        self.built_provenance(&built, recipe, sink).await;
        Ok(tag)
    }

    /// An agent patch that changes compiled code: its tree (parent + patch) built on
    /// `image`, the image the run would patch. None: the patch needs no build.
    pub(super) async fn patch_build(
        &self,
        job: &RunJob,
        image: &str,
        sink: &RunSink,
        lo: &Mutex<Leftovers>,
        clock: &Clock,
    ) -> Result<Option<String>, RunEnd> {
        let (Variant::Agent(agent), Some(path)) = (&job.variant, &job.patch) else {
            return Ok(None);
        };
        let Ok(data) = crate::bounded::read_file(path, crate::plan::limits::MAX_PATCH_BYTES) else {
            return Ok(None); // apply_patch reports the unreadable patch
        };
        let compiled = crate::plan::clone::patch_needs_build(&String::from_utf8_lossy(&data));
        if compiled.is_empty() {
            return Ok(None);
        }
        let why = format!(
            "the patch of agent {agent} changes compiled code or the build ({})",
            compiled.join(", ")
        );
        if !self.cfg.build.enabled {
            return Err(RunEnd::NeedsBuild {
                message: format!("{why}; building is off (--no-build)"),
            });
        }
        let parent = job.parent.as_deref().ok_or_else(|| RunEnd::NeedsBuild {
            message: format!("{why}, and the commit's parent is unknown"),
        })?;
        let sha: String = {
            use sha2::Digest;
            let h = sha2::Sha256::digest(&data);
            h.iter().map(|b| format!("{b:02x}")).collect()
        };
        let tag = built_tag(image, parent, Some(&sha));
        let _making = self.making(&tag).await;
        if super::image::inspect(&self.docker, &tag).await.is_some() {
            self.dlog(
                sink,
                Pipe::Stdout,
                format!("agent tree built earlier: {tag}"),
            )
            .await;
            return Ok(Some(tag));
        }
        self.dlog(
            sink,
            Pipe::Stdout,
            format!("{why}: building it from source"),
        )
        .await;
        let recipe = Recipe {
            base: image,
            commit: parent,
            patch: Some(path),
            tag: &tag,
        };
        let built = self
            .build_from_source(job, recipe, sink, lo, clock)
            .await
            .map_err(|message| RunEnd::NeedsBuild { message })?;
        self.built_provenance(&built, recipe, sink).await;
        Ok(Some(tag))
    }

    async fn built_provenance(&self, built: &Built, r: Recipe<'_>, sink: &RunSink) {
        let tree = match r.patch {
            Some(p) => format!("{} + patch {}", r.commit, p.display()),
            None => r.commit.to_string(),
        };
        self.dlog(
            sink,
            Pipe::Stdout,
            format!("built and verified {} in {:.1} s", built.tag, built.secs),
        )
        .await;
        sink.send(RuntimeMsg::Provenance {
            key: "image_origin".into(),
            value: format!(
                "built from source: {tree} on {} as {} (vLLM {}, {:.1} s; build log in the run's docker log)",
                r.base, built.tag, built.version, built.secs
            ),
        })
        .await;
    }

    async fn drop_image(&self, tag: &str) {
        let opts = RemoveImageOptions {
            force: true,
            ..Default::default()
        };
        let _ = self.docker.remove_image(tag, Some(opts), None).await;
    }

    /// Build the recipe's image, then verify it (a failed one is removed).
    pub(super) async fn build_from_source(
        &self,
        job: &RunJob,
        r: Recipe<'_>,
        sink: &RunSink,
        lo: &Mutex<Leftovers>,
        clock: &Clock,
    ) -> Result<Built, String> {
        let Recipe {
            base,
            commit,
            patch,
            tag,
        } = r;
        let src = self
            .cfg
            .vllm_src
            .as_ref()
            .ok_or("no vLLM clone (vllm_src) to build from")?;
        let t0 = std::time::Instant::now();
        let tree = tree_of(src, commit, patch).await?;
        let describe = git(src, &["describe", "--tags", commit], &[])
            .await
            .ok()
            .map(|d| String::from_utf8_lossy(&d).into_owned());
        let version = pep440_version(describe.as_deref(), commit);
        let host = self.build_host().await;
        let dockerfile = render(&self.cfg.build.dockerfile, base, commit, &version, &host);
        let ctx = context(src, &tree, &dockerfile, commit).await?;
        let what = match patch {
            Some(p) => format!("{commit} + {}", p.display()),
            None => commit.to_string(),
        };
        self.dlog(
            sink,
            Pipe::Stdout,
            format!(
                "building {tag} from source: {what} on {base} ({} KiB context, limit {} min, TORCH_CUDA_ARCH_LIST={}, MAX_JOBS={})",
                ctx.len() / 1024,
                self.cfg.build.timeout.as_secs() / 60,
                host.arch_list,
                host.max_jobs
            ),
        )
        .await;
        let opts = BuildImageOptions {
            dockerfile: DOCKERFILE.into(),
            t: Some(tag.into()),
            rm: true,
            forcerm: true,
            // The plan image it stands for (the run's), as derived and fixed images are
            // labelled: stock and eviction then count it with that image, not with the
            // image it was built on (evicting the human image once its runs were done
            // removed the baseline built from it that the baseline runs still needed).
            labels: Some(HashMap::from([(MADE_FOR.to_string(), job.image.clone())])),
            ..Default::default()
        };
        let mut log: Vec<String> = Vec::new();
        let stream = self
            .docker
            .build_image(opts, None, Some(bollard::body_full(ctx.into())));
        let run = async {
            let mut stream = std::pin::pin!(stream);
            while let Some(item) = stream.next().await {
                match item {
                    Ok(info) => {
                        if let Some(text) = info.stream.or(info.status) {
                            for l in text.lines() {
                                self.build_line(sink, Pipe::Stdout, l, &mut log).await;
                            }
                        }
                        if let Some(e) = info.error_detail.and_then(|d| d.message) {
                            self.dlog(sink, Pipe::Stderr, format!("build │ {e}")).await;
                            log.push(e);
                            return Err(());
                        }
                    }
                    Err(e) => {
                        let m = e.to_string();
                        self.dlog(sink, Pipe::Stderr, format!("build │ {m}")).await;
                        log.push(m);
                        return Err(());
                    }
                }
            }
            if compiles_in_container(&dockerfile) {
                if let Err(e) = self
                    .compile_in_container(job, tag, &host, sink, lo, clock, &mut log)
                    .await
                {
                    self.dlog(sink, Pipe::Stderr, format!("build │ {e}")).await;
                    log.push(e);
                    return Err(());
                }
            }
            Ok(())
        };
        match clock
            .wait(tokio::time::timeout(self.cfg.build.timeout, run))
            .await
        {
            Err(_) => {
                self.drop_image(tag).await;
                return Err(format!(
                    "the build of {tag} ran past its limit of {} min; last line: {}",
                    self.cfg.build.timeout.as_secs() / 60,
                    deciding_line(&log)
                ));
            }
            Ok(Err(())) => {
                self.drop_image(tag).await;
                return Err(format!(
                    "the build of {tag} failed: {}",
                    deciding_line(&log)
                ));
            }
            Ok(Ok(())) => {}
        }
        match self.verify_built(job, r, sink, lo, clock).await {
            Ok(version) => Ok(Built {
                tag: tag.into(),
                secs: t0.elapsed().as_secs_f64(),
                version,
            }),
            Err(why) => {
                self.drop_image(tag).await;
                Err(format!(
                    "the build of {tag} finished but {why}; build log: {}",
                    deciding_line(&log)
                ))
            }
        }
    }

    /// The built image imports vLLM from the built tree, and the tree is `commit`'s. Ok:
    /// the version vLLM reports.
    async fn verify_built(
        &self,
        job: &RunJob,
        Recipe { commit, tag, .. }: Recipe<'_>,
        sink: &RunSink,
        lo: &Mutex<Leftovers>,
        clock: &Clock,
    ) -> Result<String, String> {
        let script = format!(
            "cd / && for c in python3 /usr/bin/python3 /usr/local/bin/python3 /opt/venv/bin/python3 /opt/conda/bin/python3 python; do \
               if command -v \"$c\" >/dev/null 2>&1; then py=\"$c\"; break; fi; done; \
             [ -n \"$py\" ] || {{ echo 'no Python interpreter'; exit 1; }}; \
             \"$py\" -c 'import vllm; print(vllm.__file__); print(vllm.__version__)' || exit 2; \
             echo \"marker=$(cat {BUILD_DIR}/{MARKER} 2>/dev/null)\""
        );
        let name = self
            .prep_container(job, tag, "verify", lo, clock)
            .await
            .map_err(|e| format!("its check could not start: {e:?}"))?;
        let checked = clock
            .wait(super::exec::capture(
                &self.docker,
                &name,
                vec!["sh".into(), "-c".into(), script],
                Vec::new(),
            ))
            .await;
        self.remove_now(&name, lo, clock).await;
        let (code, out) = checked.map_err(|e| format!("its check could not run: {e}"))?;
        let lines: Vec<&str> = out.lines().map(str::trim).collect();
        if code != 0 {
            let last = lines.iter().rev().find(|l| !l.is_empty()).unwrap_or(&"");
            return Err(format!("vLLM does not import in it: {last}"));
        }
        let file = lines.iter().find(|l| l.ends_with("__init__.py")).copied();
        if !file.is_some_and(|f| f.starts_with(&format!("{BUILD_DIR}/"))) {
            return Err(format!(
                "vLLM imports from {} instead of the built tree {BUILD_DIR}",
                file.unwrap_or("nowhere")
            ));
        }
        let marker = lines
            .iter()
            .find_map(|l| l.strip_prefix("marker="))
            .unwrap_or("");
        if marker != commit {
            return Err(format!(
                "its tree is {} instead of {commit}",
                if marker.is_empty() {
                    "unmarked"
                } else {
                    marker
                }
            ));
        }
        let version = lines
            .iter()
            .skip_while(|l| !l.ends_with("__init__.py"))
            .nth(1)
            .unwrap_or(&"")
            .to_string();
        self.dlog(
            sink,
            Pipe::Stdout,
            format!("verified {tag}: vLLM {version} imports from {BUILD_DIR}, tree {commit}"),
        )
        .await;
        Ok(version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_name_the_commit() {
        let c = "0123456789abcdef0123";
        assert_eq!(
            pep440_version(Some("v0.6.3-45-gabc1234\n"), c),
            "0.6.3.post45+g0123456789ab"
        );
        assert_eq!(pep440_version(Some("v0.6.3"), c), "0.6.3+g0123456789ab");
        assert_eq!(pep440_version(None, c), "0.0.0+g0123456789ab");
        assert_eq!(pep440_version(Some("weird tag!"), c), "0.0.0+g0123456789ab");
    }

    #[test]
    fn tags_and_templates() {
        assert_eq!(
            built_tag("org/h:abc", "0123456789abcdef", None),
            "org/h:nsbuild-0123456789ab"
        );
        assert_eq!(
            built_tag("org/h:abc", "0123456789abcdef", Some("feedbeef99")),
            "org/h:nsbuild-0123456789ab-pfeedbeef"
        );
        let host = BuildHost {
            arch_list: "8.0;9.0".into(),
            max_jobs: 12,
        };
        let d = render(DEFAULT_DOCKERFILE, "img:1", "c0ffee", "1.0+gc0ffee", &host);
        assert!(d.starts_with("FROM img:1\n"));
        assert!(d.contains("SETUPTOOLS_SCM_PRETEND_VERSION=1.0+gc0ffee"));
        assert!(d.contains("TORCH_CUDA_ARCH_LIST=\"8.0;9.0\""));
        assert!(!d.contains("{base}") && !d.contains("{version}") && !d.contains("{arch_list}"));
        assert_eq!(
            render("RUN make -j{max_jobs}", "b", "c", "v", &host),
            "RUN make -j12"
        );
        assert!(compiles_in_container(&d));
        assert!(!compiles_in_container("FROM x\nRUN pip install -e .\n"));
    }

    #[test]
    fn the_default_template_brings_the_toolchain_of_torchs_cuda() {
        let d = DEFAULT_DOCKERFILE;
        // torch's CUDA decides the packages; nvcc is installed only when missing.
        assert!(d.contains("import torch; print(torch.version.cuda)"));
        assert!(d.contains(r#"nv="$(command -v nvcc"#));
        for pkg in [
            "cuda-nvcc-$pkg",
            "cuda-libraries-dev-$pkg",
            "build-essential",
            "ccache",
        ] {
            assert!(d.contains(pkg), "{pkg}");
        }
        assert!(d.contains("developer.download.nvidia.com/compute/cuda/repos/"));
        assert!(d.contains("ENV CUDA_HOME=/usr/local/cuda PATH=/usr/local/cuda/bin:$PATH"));
        // The toolchain step comes before the tree: Docker caches it across commits.
        assert!(d.find("apt-get install").unwrap() < d.find("COPY . ").unwrap());
        assert!(d.ends_with("WORKDIR /\n"));
    }

    #[test]
    fn the_deciding_line_is_the_error() {
        let log: Vec<String> = [
            "Step 5/6 : RUN pip install -e .",
            "ERROR: Could not build wheels for vllm",
            "The command '/bin/sh -c pip install -e .' returned a non-zero code: 1",
            "",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert!(deciding_line(&log).contains("returned a non-zero code"));
        assert_eq!(deciding_line(&log[..1]), "Step 5/6 : RUN pip install -e .");
    }
}
