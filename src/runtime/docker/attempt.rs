//! One attempt end to end: image, container, server, readiness, warm-up, benchmark client,
//! results copied out, and teardown whatever happened.

use super::*;

/// The most a result file's tarball may hold when copied out of a container.
const MAX_RESULT_TAR: usize = 512 << 20;

impl DockerRuntime {
    pub(super) async fn attempt(
        &self,
        job: &RunJob,
        sink: &RunSink,
        lo: &Mutex<Leftovers>,
        clock: &Clock,
    ) -> RunReport {
        macro_rules! tryr {
            ($e:expr) => {
                match $e {
                    Ok(v) => v,
                    Err(end) => return RunReport::new(end),
                }
            };
        }
        sink.stage(Stage::PreparingImage).await;
        let (mut image, info) = tryr!(self.obtain_image(job, sink, lo, clock).await);
        sink.send(RuntimeMsg::Provenance {
            key: "image_id".into(),
            value: info.id.clone(),
        })
        .await;
        // The driver and GPU models, so `results` can flag comparisons across either.
        for (key, value) in gpu_facts(&job.gpus) {
            sink.send(RuntimeMsg::Provenance { key, value }).await;
        }
        if let Some(d) = &info.digest {
            sink.send(RuntimeMsg::Provenance {
                key: "image_digest".into(),
                value: d.clone(),
            })
            .await;
        }
        sink.stage(Stage::StartingContainer).await;
        if !job.fixes.is_empty() {
            image = tryr!(self.apply_fixes(job, &image, &info, sink, lo, clock).await);
        }
        if job.variant.agent_id().is_some() {
            image = tryr!(self.apply_patch(job, &image, &info, sink, lo, clock).await);
        }
        let setup = tryr!(self.setup(job, &image, sink, lo, clock).await);
        let weights_env = match setup.invocation.model.as_deref().or(job.model.as_deref()) {
            Some(m) => tryr!(self.ensure_weights(job, m, sink, clock).await),
            None => Vec::new(),
        };
        let workdir = setup.facts.workdir.clone();
        let serving = job.kind.needs_server();
        let port = serving.then_some(setup.invocation.port);
        let entrypoint = match &setup.resolved.server_argv {
            Some(argv) => argv.clone(),
            None => keeper(),
        };
        let mut env: Vec<String> = job.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        if serving {
            // The command's env prefix configures vLLM (e.g. an attention backend): the
            // server gets it too, as does the benchmark (by exec).
            env.extend(setup.env.iter().cloned());
        }
        env.extend(weights_env);
        env.extend(self.cfg.secrets.container_env());
        let mut binds = Vec::new();
        if let Some(h) = &self.cfg.hf_cache {
            binds.push(format!(
                "{}:{}",
                h.display(),
                container::HF_CACHE_IN_CONTAINER
            ));
        }
        binds.extend(invoke::dataset_binds(&setup.invocation));
        let ipc = self.cfg.ipc.clone();
        let shm_size = if ipc.as_deref() == Some("host") {
            None
        } else {
            self.cfg.shm_size.as_deref().and_then(container::parse_size)
        };
        let name = container::name(job, "run");
        lo.lock()
            .unwrap_or_else(|e| e.into_inner())
            .containers
            .push((name.clone(), serving));
        let t_create = Instant::now();
        let spec = container::Spec {
            image: image.clone(),
            entrypoint: entrypoint.clone(),
            env,
            labels: container::labels(job, "run"),
            gpus: if self.cfg.gpu_requests {
                job.gpus.clone()
            } else {
                Vec::new()
            },
            shm_size,
            ipc,
            binds,
            port,
            workdir: Some(workdir.clone()),
        };
        tryr!(clock
            .wait(container::create(&self.docker, &name, spec))
            .await
            .map_err(|e| err(Stage::StartingContainer, format!("creating {name}: {e}"))));
        self.dlog(
            sink,
            Pipe::Stdout,
            format!(
                "container {name} created from {image} on GPUs {:?}: {}",
                job.gpus,
                shell_words::join(&entrypoint)
            ),
        )
        .await;
        if let Some(tar) = setup.bench_tar.clone() {
            tryr!(self
                .upload(&name, &workdir, tar, clock)
                .await
                .map_err(|e| err(
                    Stage::StartingContainer,
                    format!("uploading benchmarks/: {e}")
                )));
            self.dlog(
                sink,
                Pipe::Stdout,
                format!(
                    "uploaded benchmarks/ at {} to {workdir}",
                    self.benchmarks_commit(job)
                ),
            )
            .await;
        }
        tryr!(clock
            .wait(self.docker.start_container(&name, None))
            .await
            .map_err(|e| err(Stage::StartingContainer, format!("starting {name}: {e}"))));
        let mut wait = Box::pin(self.docker.wait_container(&name, None));

        if let Some(port) = port {
            sink.stage(Stage::LoadingServer).await;
            let follower = {
                let docker = self.docker.clone();
                let sink = sink.clone();
                let secrets = self.cfg.secrets.clone();
                let name = name.clone();
                tokio::spawn(async move {
                    let logs = docker.logs(
                        &name,
                        Some(bollard::query_parameters::LogsOptions {
                            follow: true,
                            stdout: true,
                            stderr: true,
                            ..Default::default()
                        }),
                    );
                    let mut out = LineOut {
                        sink: &sink,
                        stream: Stream::Server,
                        secrets: &secrets,
                        capture: None,
                    };
                    let _ = exec::pump(Box::pin(logs), &mut out).await;
                })
            };
            lo.lock()
                .unwrap_or_else(|e| e.into_inner())
                .followers
                .push(follower);
            let Some(host_port) = clock
                .wait(container::host_port(&self.docker, &name, port))
                .await
            else {
                // A server that dies at once leaves no port mapping behind.
                if let Ok(r) = tokio::time::timeout(Duration::from_secs(5), wait.next()).await {
                    let code = exit_code_of(r);
                    self.flush_followers(lo).await;
                    return RunReport::new(RunEnd::ServerDied { exit_code: code });
                }
                return RunReport::new(err(
                    Stage::LoadingServer,
                    format!("no host port published for {port}/tcp"),
                ));
            };
            // The readiness wait is the server's time, not nightshift's.
            let failed = clock
                .wait(async {
                    let deadline = tokio::time::sleep(job.server_start_timeout);
                    tokio::pin!(deadline);
                    loop {
                        let ready = tokio::select! {
                            r = wait.next() => {
                                let code = exit_code_of(r);
                                self.flush_followers(lo).await;
                                return Some(RunEnd::ServerDied { exit_code: code });
                            }
                            _ = &mut deadline => return Some(RunEnd::Timeout { stage: Stage::LoadingServer }),
                            ok = async {
                                if self.probe_in_container {
                                    health::ready_in(&self.docker, &name, port).await
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
                })
                .await;
            if let Some(end) = failed {
                return RunReport::new(end);
            }
            self.dlog(
                sink,
                Pipe::Stdout,
                format!(
                    "server ready on 127.0.0.1:{host_port} ({:.3} s after container create)",
                    t_create.elapsed().as_secs_f64()
                ),
            )
            .await;
            sink.send(RuntimeMsg::Provenance {
                key: "server_ready_s".into(),
                value: format!("{:.3}", t_create.elapsed().as_secs_f64()),
            })
            .await;
        }

        sink.stage(Stage::Benchmarking).await;
        if serving && setup.invocation.warmup_requests > 0 {
            let sent = tokio::time::timeout(
                job.run_timeout,
                health::warm_up_in(&self.docker, &name, &setup),
            );
            let line = match sent.await {
                Ok(Ok(w)) => w.to_string(),
                Ok(Err(e)) => format!("warm-up not sent ({e}); the benchmark runs without it"),
                Err(_) => "warm-up cut short at the run's timeout".to_string(),
            };
            sink.send(RuntimeMsg::Provenance {
                key: "warmup".into(),
                value: line.clone(),
            })
            .await;
            self.dlog(sink, Pipe::Stdout, line).await;
        }
        // From the command as it runs: the rewrites may have asked for a result file.
        let wanted = results::wanted_args(&setup.resolved.bench_argv, &workdir);
        if !wanted.is_empty() {
            // Marks the start so "the JSON this run wrote" can be told from older ones.
            let _ = self
                .exec_stdout(&name, &format!("touch {RESULT_MARKER}"), sink, clock)
                .await;
        }
        let t_bench = Instant::now();
        let mut out = self.out(sink, Stream::Bench);
        let mut bench_env = setup.env.clone();
        bench_env.extend(job.env.iter().map(|(k, v)| format!("{k}={v}")));
        let bench = exec::run_with_env(
            &self.docker,
            &name,
            setup.resolved.bench_argv.clone(),
            Some(workdir),
            bench_env,
            &mut out,
        );
        let end = tokio::select! {
            r = bench => match r {
                Ok(code) => RunEnd::BenchExited { exit_code: code },
                Err(e) => err(Stage::Benchmarking, format!("benchmark exec: {e}")),
            },
            r = wait.next() => {
                let code = exit_code_of(r);
                if serving {
                    RunEnd::ServerDied { exit_code: code }
                } else {
                    err(Stage::Benchmarking, format!("container exited ({code:?}) during the benchmark"))
                }
            }
            _ = tokio::time::sleep(job.run_timeout) => RunEnd::Timeout { stage: Stage::Benchmarking },
        };
        if let Ok(mut w) = clock.0.lock() {
            *w += t_bench.elapsed();
        }
        let mut report = RunReport::new(end);
        if matches!(report.end, RunEnd::BenchExited { .. }) {
            report.result_files = self.copy_results(job, &name, &wanted, sink, clock).await;
        }
        report
    }

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
