//! One attempt end to end: image, container, server, readiness, warm-up, benchmark client,
//! results copied out, and teardown whatever happened.

use super::*;
use invoke::Setup;

/// The most a result file's tarball may hold when copied out of a container.
const MAX_RESULT_TAR: usize = 512 << 20;

/// The container's exit, awaited while the server loads and the benchmark runs: it ending
/// first is the server dying.
type Exit<'a> = std::pin::Pin<
    Box<
        dyn futures_util::Stream<
                Item = Result<bollard::models::ContainerWaitResponse, bollard::errors::Error>,
            > + Send
            + 'a,
    >,
>;

/// One attempt and everything it works with: the job, where it reports, what it leaves
/// to tear down, and the clock of nightshift's own time. Its methods are the stages, in
/// order: image, fixes and patch, set-up (`DockerRuntime::setup`), container, ready,
/// warm-up, benchmark, results. A stage that fails ends the attempt with its `RunEnd`;
/// teardown is `execute`'s, whatever happened.
pub(super) struct Attempt<'a> {
    pub rt: &'a DockerRuntime,
    pub job: &'a RunJob,
    pub sink: &'a RunSink,
    pub lo: &'a Mutex<Leftovers>,
    pub clock: &'a Clock,
}

/// The run container as created and started.
struct Started<'a> {
    name: String,
    exit: Exit<'a>,
    created: Instant,
}

impl<'a> Attempt<'a> {
    pub async fn run(&self) -> RunReport {
        match self.stages().await {
            Ok(report) => report,
            Err(end) => RunReport::new(end),
        }
    }

    async fn stages(&self) -> Result<RunReport, RunEnd> {
        let image = self.image().await?;
        let setup = self
            .rt
            .setup(self.job, &image, self.sink, self.lo, self.clock)
            .await?;
        let mut run = self.container(&image, &setup).await?;
        if self.job.kind.needs_server() {
            self.ready(&mut run, setup.invocation.port).await?;
        }
        self.sink.stage(Stage::Benchmarking).await;
        self.warm_up(&run.name, &setup).await;
        // From the command as it runs: the rewrites may have asked for a result file.
        let wanted = results::wanted_args(&setup.resolved.bench_argv, &setup.facts.workdir);
        let end = self.bench(&mut run, &setup, !wanted.is_empty()).await;
        let mut report = RunReport::new(end);
        if matches!(report.end, RunEnd::BenchExited { .. }) {
            report.result_files = self
                .rt
                .copy_results(self.job, &run.name, &wanted, self.sink, self.clock)
                .await;
        }
        Ok(report)
    }

    /// The image to run: obtained (pulled, derived or built), said where it came from,
    /// then the operator's fixes and the agent's patch on top.
    async fn image(&self) -> Result<String, RunEnd> {
        let (rt, job, sink, lo, clock) = (self.rt, self.job, self.sink, self.lo, self.clock);
        sink.stage(Stage::PreparingImage).await;
        let (mut image, info) = rt.obtain_image(job, sink, lo, clock).await?;
        let mut facts = vec![("image_id".to_string(), info.id.clone())];
        // The driver and GPU models, so `results` can flag comparisons across either.
        facts.extend(gpu_facts(&job.gpus));
        facts.extend(info.digest.clone().map(|d| ("image_digest".to_string(), d)));
        for (key, value) in facts {
            sink.send(RuntimeMsg::Provenance { key, value }).await;
        }
        sink.stage(Stage::StartingContainer).await;
        if !job.fixes.is_empty() {
            image = rt.apply_fixes(job, &image, &info, sink, lo, clock).await?;
        }
        if job.variant.agent_id().is_some() {
            image = rt.apply_patch(job, &image, &info, sink, lo, clock).await?;
        }
        Ok(image)
    }

    /// What the run container gets in its environment: the job's, the command's prefix
    /// (it configures vLLM: the server gets it too, the benchmark by exec), the weights'
    /// and the secrets'.
    async fn env(&self, setup: &Setup) -> Result<Vec<String>, RunEnd> {
        let job = self.job;
        let weights = match setup.invocation.model.as_deref().or(job.model.as_deref()) {
            Some(m) => {
                self.rt
                    .ensure_weights(job, m, self.sink, self.clock)
                    .await?
            }
            None => Vec::new(),
        };
        let mut env: Vec<String> = job.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        if job.kind.needs_server() {
            env.extend(setup.env.iter().cloned());
        }
        env.extend(weights);
        env.extend(self.rt.cfg.secrets.container_env());
        Ok(env)
    }

    /// The container's spec: the server (or a keeper for offline benchmarks), GPUs,
    /// shared memory, the HF cache and datasets, the published port.
    async fn spec(&self, image: &str, setup: &Setup) -> Result<container::Spec, RunEnd> {
        let cfg = &self.rt.cfg;
        let mut binds = Vec::new();
        if let Some(h) = &cfg.hf_cache {
            let cache = container::HF_CACHE_IN_CONTAINER;
            binds.push(format!("{}:{cache}", h.display()));
        }
        binds.extend(invoke::dataset_binds(&setup.invocation));
        let ipc = cfg.ipc.clone();
        let shm_size = if ipc.as_deref() == Some("host") {
            None
        } else {
            cfg.shm_size.as_deref().and_then(container::parse_size)
        };
        Ok(container::Spec {
            image: image.to_string(),
            entrypoint: setup.resolved.server_argv.clone().unwrap_or_else(keeper),
            env: self.env(setup).await?,
            labels: container::labels(self.job, "run"),
            gpus: if cfg.gpu_requests {
                self.job.gpus.clone()
            } else {
                Vec::new()
            },
            shm_size,
            ipc,
            binds,
            port: self
                .job
                .kind
                .needs_server()
                .then_some(setup.invocation.port),
            workdir: Some(setup.facts.workdir.clone()),
        })
    }

    /// Create the run container (known to the teardown before it exists), upload the
    /// commit's `benchmarks/` into it, start it.
    async fn container(&self, image: &str, setup: &Setup) -> Result<Started<'a>, RunEnd> {
        let (rt, job, sink, clock) = (self.rt, self.job, self.sink, self.clock);
        let spec = self.spec(image, setup).await?;
        let entrypoint = shell_words::join(&spec.entrypoint);
        let name = container::name(job, "run");
        let serving = job.kind.needs_server();
        self.lo
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .containers
            .push((name.clone(), serving));
        let created = Instant::now();
        let starting = |what: &str, e: &dyn std::fmt::Display| {
            err(Stage::StartingContainer, format!("{what} {name}: {e}"))
        };
        clock
            .wait(container::create(&rt.docker, &name, spec))
            .await
            .map_err(|e| starting("creating", &e))?;
        let line = format!(
            "container {name} created from {image} on GPUs {:?}: {entrypoint}",
            job.gpus
        );
        rt.dlog(sink, Pipe::Stdout, line).await;
        let workdir = &setup.facts.workdir;
        if let Some(tar) = setup.bench_tar.clone() {
            rt.upload(&name, workdir, tar, clock).await.map_err(|e| {
                err(
                    Stage::StartingContainer,
                    format!("uploading benchmarks/: {e}"),
                )
            })?;
            let at = rt.benchmarks_commit(job);
            let line = format!("uploaded benchmarks/ at {at} to {workdir}");
            rt.dlog(sink, Pipe::Stdout, line).await;
        }
        clock
            .wait(rt.docker.start_container(&name, None))
            .await
            .map_err(|e| starting("starting", &e))?;
        let exit: Exit<'a> = Box::pin(rt.docker.wait_container(&name, None));
        Ok(Started {
            name,
            exit,
            created,
        })
    }

    /// Follow the server's log, find its port, and wait (the server's time, bounded by
    /// the job's `server_start_timeout`) until it answers — or dies.
    async fn ready(&self, run: &mut Started<'a>, port: u16) -> Result<(), RunEnd> {
        let (rt, sink, clock) = (self.rt, self.sink, self.clock);
        sink.stage(Stage::LoadingServer).await;
        self.follow_server_log(&run.name);
        let Some(host_port) = clock
            .wait(container::host_port(&rt.docker, &run.name, port))
            .await
        else {
            // A server that dies at once leaves no port mapping behind.
            if let Ok(r) = tokio::time::timeout(Duration::from_secs(5), run.exit.next()).await {
                let exit_code = exit_code_of(r);
                rt.flush_followers(self.lo).await;
                return Err(RunEnd::ServerDied { exit_code });
            }
            let why = format!("no host port published for {port}/tcp");
            return Err(err(Stage::LoadingServer, why));
        };
        let failed = clock.wait(self.answers(run, port, host_port)).await;
        if let Some(end) = failed {
            return Err(end);
        }
        let took = run.created.elapsed().as_secs_f64();
        let line =
            format!("server ready on 127.0.0.1:{host_port} ({took:.3} s after container create)");
        rt.dlog(sink, Pipe::Stdout, line).await;
        let (key, value) = ("server_ready_s".into(), format!("{took:.3}"));
        sink.send(RuntimeMsg::Provenance { key, value }).await;
        Ok(())
    }

    /// The server's output, line by line, into the run's log while the container lives.
    fn follow_server_log(&self, name: &str) {
        let docker = self.rt.docker.clone();
        let sink = self.sink.clone();
        let secrets = self.rt.cfg.secrets.clone();
        let name = name.to_string();
        let follower = tokio::spawn(async move {
            let opts = bollard::query_parameters::LogsOptions {
                follow: true,
                stdout: true,
                stderr: true,
                ..Default::default()
            };
            let logs = docker.logs(&name, Some(opts));
            let mut out = LineOut {
                sink: &sink,
                stream: Stream::Server,
                secrets: &secrets,
                capture: None,
            };
            let _ = exec::pump(Box::pin(logs), &mut out).await;
        });
        self.lo
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .followers
            .push(follower);
    }

    /// Poll the server's health until it answers (`None`), it dies, or its start times out.
    async fn answers(&self, run: &mut Started<'a>, port: u16, host_port: u16) -> Option<RunEnd> {
        let deadline = tokio::time::sleep(self.job.server_start_timeout);
        tokio::pin!(deadline);
        loop {
            let ready = tokio::select! {
                r = run.exit.next() => {
                    let exit_code = exit_code_of(r);
                    self.rt.flush_followers(self.lo).await;
                    return Some(RunEnd::ServerDied { exit_code });
                }
                _ = &mut deadline => return Some(RunEnd::Timeout { stage: Stage::LoadingServer }),
                ok = async {
                    if self.rt.probe_in_container {
                        health::ready_in(&self.rt.docker, &run.name, port).await
                    } else {
                        health::ready(host_port).await
                    }
                } => ok,
            };
            if ready {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The rewrite's warm-up requests, bounded by the run's timeout. A warm-up that fails
    /// is said, and the benchmark runs without it.
    async fn warm_up(&self, name: &str, setup: &Setup) {
        if !self.job.kind.needs_server() || setup.invocation.warmup_requests == 0 {
            return;
        }
        let sent = tokio::time::timeout(
            self.job.run_timeout,
            health::warm_up_in(&self.rt.docker, name, setup),
        );
        let line = match sent.await {
            Ok(Ok(w)) => w.to_string(),
            Ok(Err(e)) => format!("warm-up not sent ({e}); the benchmark runs without it"),
            Err(_) => "warm-up cut short at the run's timeout".to_string(),
        };
        let (key, value) = ("warmup".into(), line.clone());
        self.sink.send(RuntimeMsg::Provenance { key, value }).await;
        self.rt.dlog(self.sink, Pipe::Stdout, line).await;
    }

    /// The benchmark client, by exec, until it exits, the container dies, or the run's
    /// timeout. Its time is the benchmark's, not nightshift's.
    async fn bench(&self, run: &mut Started<'a>, setup: &Setup, marks: bool) -> RunEnd {
        let (rt, job, sink) = (self.rt, self.job, self.sink);
        if marks {
            // Marks the start so "the JSON this run wrote" can be told from older ones.
            let touch = format!("touch {RESULT_MARKER}");
            let _ = rt.exec_stdout(&run.name, &touch, sink, self.clock).await;
        }
        let t_bench = Instant::now();
        let mut out = rt.out(sink, Stream::Bench);
        let mut env = setup.env.clone();
        env.extend(job.env.iter().map(|(k, v)| format!("{k}={v}")));
        let argv = setup.resolved.bench_argv.clone();
        let workdir = Some(setup.facts.workdir.clone());
        let bench = exec::run_with_env(&rt.docker, &run.name, argv, workdir, env, &mut out);
        let end = tokio::select! {
            r = bench => match r {
                Ok(code) => RunEnd::BenchExited { exit_code: code },
                Err(e) => err(Stage::Benchmarking, format!("benchmark exec: {e}")),
            },
            r = run.exit.next() => {
                let code = exit_code_of(r);
                if job.kind.needs_server() {
                    RunEnd::ServerDied { exit_code: code }
                } else {
                    err(Stage::Benchmarking, format!("container exited ({code:?}) during the benchmark"))
                }
            }
            _ = tokio::time::sleep(job.run_timeout) => RunEnd::Timeout { stage: Stage::Benchmarking },
        };
        if let Ok(mut w) = self.clock.0.lock() {
            *w += t_bench.elapsed();
        }
        end
    }
}

impl DockerRuntime {
    /// Copy the benchmark's result files out (tar over the API) for the parser. A file
    /// that cannot be fetched is reported and skipped: stdout is still parsed.
    pub(super) async fn copy_results(
        &self,
        job: &RunJob,
        container: &str,
        wanted: &[results::Wanted],
        sink: &RunSink,
        clock: &Clock,
    ) -> Vec<PathBuf> {
        let mut files = Vec::new();
        let dest = match self.results_dir() {
            Ok(d) => d
                .join(job.key.replace('/', "_"))
                .join(format!("attempt-{}", job.attempt)),
            Err(e) => {
                self.dlog(sink, Pipe::Stderr, format!("result files not copied: {e}"))
                    .await;
                return files;
            }
        };
        for w in wanted {
            let path = match w {
                results::Wanted::File(p) => Some(p.clone()),
                results::Wanted::NewestJsonIn(dir) => {
                    let cmd = format!(
                        "ls -1t $(find '{dir}' -maxdepth 1 -name '*.json' -newer {RESULT_MARKER}) 2>/dev/null | head -n 1"
                    );
                    self.exec_stdout(container, &cmd, sink, clock).await
                }
            };
            let Some(path) = path else { continue };
            let opts =
                bollard::query_parameters::DownloadFromContainerOptions { path: path.clone() };
            let mut stream = self.docker.download_from_container(container, Some(opts));
            let mut tarball = Vec::new();
            let mut failed = None;
            while let Some(chunk) = clock.wait(stream.next()).await {
                match chunk {
                    // Bounded like every read: the parser reads no result file larger
                    // than this either (with --save-detailed real ones are tens of MB).
                    Ok(b) if tarball.len() + b.len() > MAX_RESULT_TAR => {
                        failed = Some(format!("larger than {} MiB", MAX_RESULT_TAR >> 20));
                        break;
                    }
                    Ok(b) => tarball.extend_from_slice(&b),
                    Err(e) => {
                        failed = Some(e.to_string());
                        break;
                    }
                }
            }
            let saved = match failed {
                Some(e) => Err(e),
                None => save_first_file(&tarball, &dest),
            };
            match saved {
                Ok(p) => {
                    self.dlog(
                        sink,
                        Pipe::Stdout,
                        format!("copied result file {path} to {}", p.display()),
                    )
                    .await;
                    files.push(p);
                }
                Err(e) => {
                    self.dlog(
                        sink,
                        Pipe::Stderr,
                        format!("result file {path} not copied: {e}"),
                    )
                    .await
                }
            }
        }
        files
    }

    /// Let the log followers deliver what the container printed last.
    pub(super) async fn flush_followers(&self, lo: &Mutex<Leftovers>) {
        let followers: Vec<JoinHandle<()>> =
            std::mem::take(&mut lo.lock().unwrap_or_else(|e| e.into_inner()).followers);
        for f in followers {
            let abort = f.abort_handle();
            if tokio::time::timeout(Duration::from_secs(10), f)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
    }

    pub(super) async fn teardown(
        &self,
        lo: &Mutex<Leftovers>,
        sink: &RunSink,
        grace_s: i32,
        clock: &Clock,
    ) {
        let (containers, images) = {
            let mut l = lo.lock().unwrap_or_else(|e| e.into_inner());
            (
                std::mem::take(&mut l.containers),
                std::mem::take(&mut l.images),
            )
        };
        for (c, graceful) in containers.iter().rev() {
            let grace = if *graceful { grace_s } else { 0 };
            if let Some(what) = clock
                .wait(container::teardown(&self.docker, c, grace))
                .await
            {
                self.dlog(sink, Pipe::Stdout, what).await;
            }
        }
        clock.wait(self.flush_followers(lo)).await;
        for i in images {
            let _ = clock
                .wait(self.docker.remove_image(
                    &i,
                    Some(RemoveImageOptions {
                        force: true,
                        ..Default::default()
                    }),
                    None,
                ))
                .await;
        }
    }
}
