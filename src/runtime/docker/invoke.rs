//! Making the command runnable on a variant's image: probe the image for its interpreter
//! (the way ISO-Bench did), find the benchmark scripts (clone at the commit, else the
//! image's own copy), learn the client's flags from its `--help`, then plan the command
//! once per commit (`crate::rewrite`) and resolve it for this image. Probes and learned
//! flags are cached per image, so a night pays for each once.

use super::{err, upload, Clock, DockerRuntime, Leftovers};
use crate::model::{Pipe, Stage};
use crate::rewrite::{self, eras, flags::FlagSet, Facts, Invocation, Program, Resolved};
use crate::runtime::{RunEnd, RunJob, RunSink, RuntimeMsg};
use bollard::query_parameters::UploadToContainerOptions;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Interpreters tried in order, each with `import vllm` (ISO-Bench's runner's order).
pub const INTERPRETERS: &[&str] = &[
    "/opt/venv/bin/python3",
    "/usr/local/bin/python3",
    "/usr/bin/python3",
    "python3",
];
/// Where real images keep a copy of `benchmarks/` (spec real-images.md §1).
pub const IMAGE_BENCHMARKS: &[&str] = &[
    "/opt/vllm_baseline/benchmarks",
    "/vllm-workspace/benchmarks",
];
/// The editable baseline tree ISO-Bench's runner puts first on PYTHONPATH.
const BASELINE_TREE: &str = "/opt/vllm_baseline";

/// What a probe of one image found (kept with the image's memo).
pub use super::memo::ImageFacts;

/// One shell script, one exec: cheaper than an exec per candidate. The first interpreter
/// that imports vllm wins; failing that, the first that finds the package without
/// importing it (an image whose vllm is installed but rotten: the run goes on, so the
/// import error is seen and diagnosed, and its fix applied, instead of "no interpreter").
pub(crate) fn probe_script() -> String {
    let cands = INTERPRETERS.join(" ");
    let dirs = IMAGE_BENCHMARKS.join(" ");
    format!(
        r#"found=; located=
for py in {cands}; do
  case "$py" in /*) [ -x "$py" ] || continue;; *) command -v "$py" >/dev/null 2>&1 || continue;; esac
  for pp in "" {BASELINE_TREE}; do
    if [ -n "$pp" ] && [ ! -d "$pp/vllm" ]; then continue; fi
    if out=$(PYTHONPATH="$pp${{PYTHONPATH:+:$PYTHONPATH}}" "$py" -c 'import vllm, os; print(os.path.dirname(vllm.__file__)); print(vllm.__version__)' 2>/dev/null); then
      echo "interpreter=$py"; echo "pythonpath=$pp"
      echo "$out" | sed -n '1s/^/vllm_dir=/p;2s/^/vllm_version=/p'
      found=1; break 2
    fi
    if [ -z "$located" ] && loc=$(PYTHONPATH="$pp${{PYTHONPATH:+:$PYTHONPATH}}" "$py" -c 'import importlib.util, os; print(os.path.dirname(importlib.util.find_spec("vllm").origin))' 2>/dev/null) && [ -n "$loc" ]; then
      located="$py|$pp|$loc"
    fi
  done
done
if [ -z "$found" ] && [ -n "$located" ]; then
  rest=${{located#*|}}
  echo "interpreter=${{located%%|*}}"; echo "pythonpath=${{rest%%|*}}"; echo "vllm_dir=${{rest#*|}}"; echo "import_failed=1"
fi
for d in {dirs}; do [ -d "$d" ] && echo "bench_dir=$d"; done
echo "vllm_cli=$(command -v vllm 2>/dev/null)"
true"#
    )
}

pub(crate) fn parse_probe(out: &str, workdir: &str) -> ImageFacts {
    let mut f = ImageFacts {
        workdir: workdir.to_string(),
        ..Default::default()
    };
    for line in out.lines() {
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        let v = v.trim().to_string();
        match k {
            "interpreter" => f.interpreter = Some(v),
            "pythonpath" if !v.is_empty() => f.pythonpath = Some(v),
            "vllm_dir" if !v.is_empty() => f.vllm_dir = Some(v),
            "vllm_version" if !v.is_empty() => f.vllm_version = Some(v),
            "bench_dir" => f.bench_dirs.push(v),
            "import_failed" => f.import_failed = v == "1",
            "vllm_cli" if v.starts_with('/') => f.vllm_cli = Some(v),
            _ => {}
        }
    }
    f
}

/// What images told us: in memory for the night, and on disk by image id between nights
/// ([`super::memo`]).
pub struct Caches {
    probes: Mutex<HashMap<String, Arc<ImageFacts>>>,
    /// (image id, benchmarks source, program) → learned flags (None: the help said nothing).
    helps: Mutex<HashMap<(String, String, String), Option<FlagSet>>>,
    /// Where the memos live (None: this process only).
    dir: Option<std::path::PathBuf>,
}

impl Default for Caches {
    fn default() -> Self {
        Caches::in_dir(super::memo::default_dir())
    }
}

impl Caches {
    pub(crate) fn in_dir(dir: Option<std::path::PathBuf>) -> Self {
        Caches {
            probes: Mutex::default(),
            helps: Mutex::default(),
            dir,
        }
    }

    /// The probe of `image_id`, from memory or an earlier night.
    fn probe(&self, image_id: &str) -> Option<Arc<ImageFacts>> {
        if let Some(f) = self
            .probes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(image_id)
        {
            return Some(f.clone());
        }
        let memo = super::memo::load(self.dir.as_ref()?, image_id);
        let f = Arc::new(memo.probe?);
        self.probes
            .lock()
            .unwrap()
            .insert(image_id.to_string(), f.clone());
        Some(f)
    }

    fn keep_probe(&self, image_id: &str, f: Arc<ImageFacts>) {
        if let Some(dir) = &self.dir {
            let mut memo = super::memo::load(dir, image_id);
            memo.probe = Some((*f).clone());
            super::memo::save(dir, image_id, &memo);
        }
        self.probes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(image_id.to_string(), f);
    }

    /// A help answer by (image id, source, program), from memory or an earlier night.
    fn help(&self, key: &(String, String, String)) -> Option<Option<FlagSet>> {
        if let Some(h) = self
            .helps
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
        {
            return Some(h.clone());
        }
        let memo = super::memo::load(self.dir.as_ref()?, &key.0);
        let h = memo.helps.get(&format!("{} {}", key.1, key.2))?.clone();
        self.helps
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.clone(), h.clone());
        Some(h)
    }

    fn keep_help(&self, key: (String, String, String), flags: Option<FlagSet>) {
        if let Some(dir) = &self.dir {
            let mut memo = super::memo::load(dir, &key.0);
            memo.helps
                .insert(format!("{} {}", key.1, key.2), flags.clone());
            super::memo::save(dir, &key.0, &memo);
        }
        self.helps
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, flags);
    }
}

/// Everything the run container and the benchmark exec need.
pub struct Setup {
    pub facts: Arc<ImageFacts>,
    pub resolved: Resolved,
    pub invocation: Invocation,
    /// The clone's `benchmarks/` to upload into the run container.
    pub bench_tar: Option<Vec<u8>>,
    pub env: Vec<String>,
}

fn bench_invalid(m: impl Into<String>) -> RunEnd {
    RunEnd::BenchInvalid { message: m.into() }
}

impl DockerRuntime {
    /// Probe `image` (cached by image id), learn its client's flags, plan and resolve.
    pub(super) async fn setup(
        &self,
        job: &RunJob,
        image: &str,
        sink: &RunSink,
        lo: &Mutex<Leftovers>,
        clock: &Clock,
    ) -> Result<Setup, RunEnd> {
        let info = super::image::inspect(&self.docker, image)
            .await
            .ok_or_else(|| err(Stage::StartingContainer, format!("image {image} vanished")))?;
        let workdir = info
            .workdir
            .clone()
            .filter(|w| !w.is_empty())
            .unwrap_or_else(|| "/".into());
        let mut probe: Option<String> = None;
        let cached = self.caches.probe(&info.id);
        let facts = match cached {
            Some(f) => f,
            None => {
                let name = self.prep_container(job, image, "probe", lo, clock).await?;
                let (code, out) = clock
                    .wait(super::exec::capture(
                        &self.docker,
                        &name,
                        vec!["sh".into(), "-c".into(), probe_script()],
                        Vec::new(),
                    ))
                    .await
                    .map_err(|e| err(Stage::StartingContainer, format!("probing {image}: {e}")))?;
                probe = Some(name);
                let f = Arc::new(parse_probe(&out, &workdir));
                if code == 0 && f.interpreter.is_some() {
                    self.caches.keep_probe(&info.id, f.clone());
                }
                f
            }
        };
        let result = self
            .plan_on(job, image, &info.id, facts, &mut probe, sink, lo, clock)
            .await;
        if let Some(name) = probe {
            self.remove_now(&name, lo, clock).await;
        }
        result
    }

    #[allow(clippy::too_many_arguments)]
    async fn plan_on(
        &self,
        job: &RunJob,
        image: &str,
        image_id: &str,
        facts: Arc<ImageFacts>,
        probe: &mut Option<String>,
        sink: &RunSink,
        lo: &Mutex<Leftovers>,
        clock: &Clock,
    ) -> Result<Setup, RunEnd> {
        let Some(interp) = facts.interpreter.clone() else {
            return Err(bench_invalid(format!(
                "no interpreter in {image} imports vllm (tried {})",
                INTERPRETERS.join(", ")
            )));
        };
        let prov = |k: &str, v: String| RuntimeMsg::Provenance {
            key: k.into(),
            value: v,
        };
        sink.send(prov("interpreter", interp.clone())).await;
        if facts.import_failed {
            self.dlog(
                sink,
                Pipe::Stderr,
                format!("vllm is installed for {interp} but does not import; running anyway so the error can be diagnosed"),
            )
            .await;
        }
        if let Some(v) = &facts.vllm_version {
            sink.send(prov("image_vllm_version", v.clone())).await;
        }
        let version_text = self.era_of(job, &facts);
        let version = version_text
            .as_deref()
            .and_then(crate::diagnose::predict::PyVersion::parse);
        let commit = self.benchmarks_commit(job).to_string();
        let Benchmarks {
            tar: bench_tar,
            dir: bench_dir,
            source,
        } = self.benchmarks_folder(&commit, &facts, image, sink).await;
        let kind = job.view.kind.unwrap_or(job.kind);
        let mut shim = eras::is_shim(version.as_ref());
        let cli_bench = eras::has_cli_bench(kind, version.as_ref());
        let static_tables = rewrite::tables(kind, version.as_ref());
        // Learn what the client accepts from the client itself.
        let t0 = Instant::now();
        let source_key = if bench_tar.is_some() {
            format!("clone@{commit}")
        } else {
            "image".into()
        };
        let mut learned: Option<FlagSet> = None;
        // Each program with the ways it may run: `vllm bench` through the CLI, else through
        // the benchmark module itself when the image's CLI cannot start (found by asking).
        let programs = programs_for(&job.view.launcher, kind, cli_bench);
        let mut bench_module = false;
        for (program, via_module) in &programs {
            let key = (
                image_id.to_string(),
                source_key.clone(),
                format!("{program:?}{}", if *via_module { " module" } else { "" }),
            );
            let hit = self.caches.help(&key);
            let got = match hit {
                Some(h) => h,
                None => {
                    let argv = match program {
                        Program::Script(s) if !bench_dir.is_empty() => {
                            vec![interp.clone(), format!("{bench_dir}/{s}"), "--help".into()]
                        }
                        Program::Script(_) => continue,
                        Program::Cli(sub) if *via_module => vec![
                            interp.clone(),
                            "-c".into(),
                            rewrite::BENCH_MODULE_RUNNER.into(),
                            sub.clone(),
                            "--help".into(),
                        ],
                        Program::Cli(sub) => vec![
                            interp.clone(),
                            "-m".into(),
                            rewrite::CLI_MODULE.into(),
                            "bench".into(),
                            sub.clone(),
                            "--help".into(),
                        ],
                    };
                    let name = self.probe_name(job, image, probe, lo, clock).await?;
                    if let (Some(tar), Program::Script(_)) = (&bench_tar, program) {
                        self.upload(&name, &facts.workdir, tar.clone(), clock)
                            .await
                            .map_err(|e| {
                                err(
                                    Stage::StartingContainer,
                                    format!("uploading benchmarks/: {e}"),
                                )
                            })?;
                    }
                    let (code, flags) = self
                        .help_of(&name, argv, &facts, "the client", clock)
                        .await?;
                    self.dlog(
                        sink,
                        Pipe::Stdout,
                        format!(
                            "asked {} for --help: exit {code}, {}",
                            help_label(program, *via_module),
                            match &flags {
                                Some(f) => format!("{} options", f.options.len()),
                                None => "no options learned".into(),
                            }
                        ),
                    )
                    .await;
                    self.caches.keep_help(key, flags.clone());
                    flags
                }
            };
            match (program, got) {
                (Program::Script(_), None) if cli_bench && !bench_dir.is_empty() => {
                    // A script that answers --help with nothing: the v0.10.2+ shim.
                    shim = true;
                }
                (_, Some(f)) => {
                    learned = Some(f);
                    bench_module = *via_module;
                    break;
                }
                _ => {}
            }
        }
        let learned_ms = t0.elapsed().as_secs_f64() * 1000.0;
        let client_source = match &learned {
            Some(f) => format!("--help ({} options, {learned_ms:.0} ms)", f.options.len()),
            None => format!(
                "era table for vLLM {}",
                version_text.as_deref().unwrap_or("(unknown)")
            ),
        };
        sink.send(prov("client_flags", client_source.clone())).await;
        let client = learned.unwrap_or(static_tables.0);
        // The server's flags from the server itself, while the commit's invocation is still
        // to be decided: nightshift's table lists the common engine flags, vLLM has hundreds.
        let server = if kind.needs_server() && job.decisions.get(&job.commit).is_none() {
            let asked = self
                .server_help(
                    job, image, image_id, &interp, &facts, probe, sink, lo, clock,
                )
                .await?;
            if let Some(f) = &asked {
                sink.send(prov(
                    "server_flags",
                    format!("--help ({} options)", f.options.len()),
                ))
                .await;
            }
            asked.unwrap_or(static_tables.1)
        } else {
            static_tables.1
        };
        let datasets = &self.cfg.datasets;
        let facts_r = Facts {
            model: job.model.as_deref(),
            kind: Some(job.kind),
            version: version.as_ref(),
            client: &client,
            server: &server,
            shim,
            cli_bench,
            datasets,
        };
        // One invocation per commit: the first variant to get here decides for all of them,
        // on every host and after a restart (the engine's decisions, kept in the store).
        let invocation = match job.decisions.get(&job.commit) {
            Some(inv) => inv,
            None => {
                let mut inv =
                    rewrite::plan(&job.view, &facts_r).map_err(|r| bench_invalid(r.reason))?;
                rewrite::warm_up(&mut inv, self.cfg.warmup_requests, &client);
                rewrite::per_request(&mut inv, &client);
                // Two variants that got here at once both planned: the first one settled
                // wins, so they still run the same benchmark.
                let (inv, decided) = job.decisions.settle(&job.commit, inv);
                if decided {
                    sink.send(RuntimeMsg::Decided(Box::new(inv.clone()))).await;
                }
                inv
            }
        };
        self.check_invocation(&invocation, &bench_dir, image, &commit)?;
        if !source.is_empty() {
            sink.send(prov("bench_source", format!("{source} → {bench_dir}")))
                .await;
        }
        let runner = match (bench_module, facts.vllm_cli.as_deref()) {
            (true, _) => rewrite::CliRunner::BenchModule,
            (false, Some(c)) => rewrite::CliRunner::Console(c),
            (false, None) => rewrite::CliRunner::EntryModule,
        };
        let resolved = invocation.resolve(&interp, &bench_dir, runner);
        let mut env: Vec<String> = invocation
            .env
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        if let Some(p) = &facts.pythonpath {
            env.push(format!("PYTHONPATH={p}"));
        }
        self.tell_setup(sink, &invocation, &resolved, &client_source, &interp)
            .await;
        Ok(Setup {
            facts,
            resolved,
            invocation,
            bench_tar,
            env,
        })
    }

    /// The release whose era the client's flags and the rewrites follow.
    /// ISO-Bench's human images call themselves `0.0.0+local`: that names no era. The
    /// clone's history does (the release the commit descends from), then the plan's.
    fn era_of(&self, job: &RunJob, facts: &ImageFacts) -> Option<String> {
        facts
            .vllm_version
            .clone()
            .filter(|v| !crate::diagnose::predict::names_no_release(v))
            .or_else(|| {
                let src = self.cfg.vllm_src.as_ref()?;
                let (tag, _) =
                    crate::plan::clone::Clone::open(src)?.describe(self.benchmarks_commit(job))?;
                Some(tag.trim_start_matches('v').to_string())
            })
            .or_else(|| job.vllm_version.clone())
    }

    /// The benchmarks folder: the clone at this variant's commit (uploaded into the run
    /// container), else the image's own copy, else none.
    async fn benchmarks_folder(
        &self,
        commit: &str,
        facts: &ImageFacts,
        image: &str,
        sink: &RunSink,
    ) -> Benchmarks {
        let mut bench_tar = None;
        let mut source = String::new();
        if let Some(src) = &self.cfg.vllm_src {
            match upload::benchmarks_tar(src, commit).await {
                Ok(t) => {
                    bench_tar = Some(t);
                    source = format!("clone {} at {commit}", src.display());
                }
                Err(e) => {
                    self.dlog(
                        sink,
                        Pipe::Stderr,
                        format!("benchmarks/ not taken from the clone: {e:#}"),
                    )
                    .await
                }
            }
        }
        let bench_dir = if bench_tar.is_some() {
            format!("{}/benchmarks", facts.workdir.trim_end_matches('/'))
        } else if let Some(d) = facts.bench_dirs.first() {
            source = format!("image {image}");
            d.clone()
        } else {
            String::new()
        };
        Benchmarks {
            tar: bench_tar,
            dir: bench_dir,
            source,
        }
    }

    /// What the chosen invocation needs and cannot have: a benchmarks folder for a script,
    /// a dataset where the plan says it is.
    fn check_invocation(
        &self,
        invocation: &Invocation,
        bench_dir: &str,
        image: &str,
        commit: &str,
    ) -> Result<(), RunEnd> {
        if matches!(invocation.program, Program::Script(_)) && bench_dir.is_empty() {
            return Err(bench_invalid(format!(
                "no benchmarks folder: {} and {image} has none at {}",
                match &self.cfg.vllm_src {
                    Some(s) => format!("the clone {} lacks commit {commit}", s.display()),
                    None => "no vllm_src clone is set".into(),
                },
                IMAGE_BENCHMARKS.join(" or ")
            )));
        }
        for m in &invocation.mounts {
            if !m.host.exists() {
                return Err(bench_invalid(format!(
                    "dataset `{}` is not at {} ({})",
                    m.name,
                    m.host.display(),
                    crate::plan::DATASET_HINT
                )));
            }
        }
        Ok(())
    }

    /// The setup said: the client's flags and where they came from, each rewrite, the argv
    /// (secrets redacted), the dataset mounts — to the run's log and its provenance.
    async fn tell_setup(
        &self,
        sink: &RunSink,
        invocation: &Invocation,
        resolved: &Resolved,
        client_source: &str,
        interp: &str,
    ) {
        let prov = |k: &str, v: String| RuntimeMsg::Provenance {
            key: k.into(),
            value: v,
        };
        self.dlog(
            sink,
            Pipe::Stdout,
            format!("client flags: {client_source}; interpreter {interp}"),
        )
        .await;
        for r in invocation.rewrites.iter().chain(&resolved.rewrites) {
            self.dlog(sink, Pipe::Stdout, format!("rewrite {r}")).await;
        }
        let all: Vec<_> = invocation
            .rewrites
            .iter()
            .chain(&resolved.rewrites)
            .cloned()
            .collect();
        sink.send(prov("rewrites", json(&all))).await;
        let redact = |argv: &[String]| {
            argv.iter()
                .map(|a| self.cfg.secrets.redact(a))
                .collect::<Vec<_>>()
        };
        sink.send(prov("bench_argv", json(&redact(&resolved.bench_argv))))
            .await;
        if let Some(s) = &resolved.server_argv {
            sink.send(prov("server_argv", json(&redact(s)))).await;
        }
        if !invocation.mounts.is_empty() {
            let m: Vec<String> = invocation
                .mounts
                .iter()
                .map(|m| format!("{}:{}:ro", m.host.display(), m.container))
                .collect();
            sink.send(prov("dataset_mounts", json(&m))).await;
        }
    }

    /// The probe container of this setup, made on first need.
    async fn probe_name(
        &self,
        job: &RunJob,
        image: &str,
        probe: &mut Option<String>,
        lo: &Mutex<Leftovers>,
        clock: &Clock,
    ) -> Result<String, RunEnd> {
        if let Some(n) = probe {
            return Ok(n.clone());
        }
        let n = self.prep_container(job, image, "probe", lo, clock).await?;
        *probe = Some(n.clone());
        Ok(n)
    }

    /// Runs a `--help` argv in the probe container: its exit code and what it taught.
    async fn help_of(
        &self,
        name: &str,
        argv: Vec<String>,
        facts: &ImageFacts,
        who: &str,
        clock: &Clock,
    ) -> Result<(i64, Option<FlagSet>), RunEnd> {
        let env = facts
            .pythonpath
            .iter()
            .map(|p| format!("PYTHONPATH={p}"))
            .collect();
        let (code, text) = clock
            .wait(super::exec::capture(&self.docker, name, argv, env))
            .await
            .map_err(|e| {
                err(
                    Stage::StartingContainer,
                    format!("asking {who} for --help: {e}"),
                )
            })?;
        Ok((
            code,
            (code == 0).then(|| FlagSet::from_help(&text)).flatten(),
        ))
    }

    /// The image's server, asked for its `--help` (memoized by image id like the client's).
    #[allow(clippy::too_many_arguments)]
    async fn server_help(
        &self,
        job: &RunJob,
        image: &str,
        image_id: &str,
        interp: &str,
        facts: &ImageFacts,
        probe: &mut Option<String>,
        sink: &RunSink,
        lo: &Mutex<Leftovers>,
        clock: &Clock,
    ) -> Result<Option<FlagSet>, RunEnd> {
        let key = (
            image_id.to_string(),
            "image".to_string(),
            format!("server {}", rewrite::SERVER_MODULE),
        );
        if let Some(h) = self.caches.help(&key) {
            return Ok(h);
        }
        let name = self.probe_name(job, image, probe, lo, clock).await?;
        let argv = vec![
            interp.to_string(),
            "-m".into(),
            rewrite::SERVER_MODULE.into(),
            "--help".into(),
        ];
        let (code, flags) = self
            .help_of(&name, argv, facts, "the server", clock)
            .await?;
        self.dlog(
            sink,
            Pipe::Stdout,
            format!(
                "asked the vLLM server for --help: exit {code}, {}",
                flags
                    .as_ref()
                    .map_or("no options learned".to_string(), |f| {
                        format!("{} options", f.options.len())
                    })
            ),
        )
        .await;
        self.caches.keep_help(key, flags.clone());
        Ok(flags)
    }

    /// Untar `tar` into `dir` of container `name`.
    pub(super) async fn upload(
        &self,
        name: &str,
        dir: &str,
        tar: Vec<u8>,
        clock: &Clock,
    ) -> Result<(), String> {
        clock
            .wait(self.docker.upload_to_container(
                name,
                Some(UploadToContainerOptions {
                    path: dir.to_string(),
                    ..Default::default()
                }),
                bollard::body_full(tar.into()),
            ))
            .await
            .map_err(|e| e.to_string())
    }
}

/// How a help probe names what it asked.
fn help_label(program: &Program, via_module: bool) -> String {
    match program {
        Program::Script(s) => s.clone(),
        Program::Cli(sub) if via_module => format!("vllm.benchmarks.{sub}"),
        Program::Cli(sub) => format!("vllm bench {sub}"),
    }
}

/// The read-only binds of a run's dataset mounts.
pub(crate) fn dataset_binds(inv: &Invocation) -> Vec<String> {
    inv.mounts
        .iter()
        .map(|m| format!("{}:{}:ro", m.host.display(), m.container))
        .collect()
}

/// JSON text of a provenance value (provenance is kept as text in the event log).
/// Each program a benchmark may run as, with whether through the benchmark module: `vllm
/// bench` through the CLI, else through the module when the image's CLI cannot start
/// (found by asking), else the era's script.
fn programs_for(
    launcher: &crate::command::Launcher,
    kind: crate::kind::BenchKind,
    cli_bench: bool,
) -> Vec<(Program, bool)> {
    match (launcher, kind) {
        (crate::command::Launcher::VllmBench { sub }, _) if cli_bench => {
            vec![
                (Program::Cli(sub.clone()), false),
                (Program::Cli(sub.clone()), true),
            ]
        }
        (_, k) => {
            let mut v = vec![(Program::Script(rewrite::script_of(k)), false)];
            if let Some(sub) = k.cli_sub() {
                if cli_bench {
                    v.push((Program::Cli(sub.into()), false));
                    v.push((Program::Cli(sub.into()), true));
                }
            }
            v
        }
    }
}

/// The benchmarks folder a run uses, and where it came from (for provenance).
struct Benchmarks {
    tar: Option<Vec<u8>>,
    dir: String,
    source: String,
}

fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_output_parses() {
        let f = parse_probe("interpreter=/usr/bin/python3\npythonpath=\nvllm_dir=/opt/vllm_baseline/vllm\nvllm_version=0.6.4\nbench_dir=/opt/vllm_baseline/benchmarks\n", "/");
        assert_eq!(f.interpreter.as_deref(), Some("/usr/bin/python3"));
        assert_eq!(f.pythonpath, None);
        assert_eq!(f.vllm_version.as_deref(), Some("0.6.4"));
        assert_eq!(f.bench_dirs, vec!["/opt/vllm_baseline/benchmarks"]);
        assert!(parse_probe("bench_dir=/vllm-workspace/benchmarks\n", "/")
            .interpreter
            .is_none());
    }
}
