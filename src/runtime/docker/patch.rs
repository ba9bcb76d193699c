//! An agent's patch applied to the baseline image's vLLM source inside the container.

use super::*;

impl DockerRuntime {
    /// Upload the agent's patch and apply it strictly; commit a per-attempt image.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn apply_patch(
        &self,
        job: &RunJob,
        image: &str,
        base: &image::ImageInfo,
        sink: &RunSink,
        lo: &Mutex<Leftovers>,
        clock: &Clock,
    ) -> Result<String, RunEnd> {
        let failed = |m: String| RunEnd::PatchFailed { message: m };
        let Some(path) = &job.patch else {
            return Err(failed("agent variant without a patch file".into()));
        };
        let data = crate::bounded::read_file(path, crate::plan::limits::MAX_PATCH_BYTES)
            .map_err(|e| failed(format!("cannot read patch {}: {e}", path.display())))?;
        {
            use sha2::Digest;
            let h = sha2::Sha256::digest(&data);
            let hex: String = h.iter().map(|b| format!("{b:02x}")).collect();
            sink.send(RuntimeMsg::Provenance {
                key: "patch_sha256".into(),
                value: hex,
            })
            .await;
        }
        if let Some(built) = self.patch_build(job, image, sink, lo, clock).await? {
            return Ok(built);
        }
        let name = self.prep_container(job, image, "patch", lo, clock).await?;
        let dir = self.patch_dir(job, &name, sink, clock).await;
        let data = self.package_only(&name, &dir, data, sink, clock).await;
        let tar = upload::single_file_tar("nightshift-agent.patch", &data)
            .map_err(|e| err(Stage::StartingContainer, e))?;
        self.upload(&name, "/tmp", tar, clock).await.map_err(|e| {
            err(
                Stage::StartingContainer,
                format!("uploading the patch: {e}"),
            )
        })?;
        let p = "/tmp/nightshift-agent.patch";
        let script = format!(
            "cd {dir} || exit 3; if command -v patch >/dev/null 2>&1; then \
             echo '$ patch -p1 --dry-run'; patch -p1 --dry-run -i {p} || exit 1; \
             echo '$ patch -p1'; patch -p1 -i {p} || exit 2; \
             elif command -v git >/dev/null 2>&1; then \
             echo '$ git apply --check'; git apply --check {p} || exit 1; \
             echo '$ git apply'; git apply {p} || exit 2; else exit 4; fi",
            dir = shell_words::quote(&dir)
        );
        self.dlog(
            sink,
            Pipe::Stdout,
            format!("applying the patch of agent {} in {dir}", job.variant),
        )
        .await;
        let (code, captured) = self.exec_captured(&name, script, sink, clock).await;
        let mut code =
            code.map_err(|e| err(Stage::StartingContainer, format!("applying the patch: {e}")))?;
        let mut host_said = None;
        if code == 4 {
            self.dlog(
                sink,
                Pipe::Stdout,
                "the image has neither patch nor git: the patch is applied from the host",
            )
            .await;
            code = match self
                .apply_patch_on_host(&name, &dir, &data, sink, clock)
                .await
            {
                Ok(()) => 0,
                Err(e) => {
                    host_said = Some(e);
                    1
                }
            };
        }
        if code != 0 {
            let evidence = host_said.unwrap_or_else(|| {
                captured
                    .iter()
                    .rev()
                    .map(|(_, l)| l.trim())
                    .find(|l| !l.is_empty() && !l.starts_with("$ "))
                    .unwrap_or("")
                    .to_string()
            });
            let what = match code {
                1 => "does not apply (dry run)",
                2 => "failed while applying",
                3 => "has no directory to apply in",
                _ => "could not be applied",
            };
            return Err(failed(format!(
                "patch {} {what} in {dir}: {evidence}",
                path.display()
            )));
        }
        let (repo, tag) = image::patched_ref(&job.sweep, &job.key, job.attempt);
        let patched = format!("{repo}:{tag}");
        lo.lock()
            .unwrap_or_else(|e| e.into_inner())
            .images
            .push(patched.clone());
        self.commit(
            &name,
            (&repo, &tag),
            base,
            "nightshift agent patch",
            &job.image,
            clock,
        )
        .await?;
        self.remove_now(&name, lo, clock).await;
        Ok(patched)
    }

    /// Where `patch -p1` runs by default: the parent of the installed `vllm` package.
    /// Where the patch applies: the plan's patch_dir where the image has it (ISO-Bench
    /// baselines: the editable tree); else the installed package's parent (a baseline
    /// derived by overlay keeps vLLM where the human image had it).
    async fn patch_dir(&self, job: &RunJob, name: &str, sink: &RunSink, clock: &Clock) -> String {
        let configured = match &job.patch_dir {
            Some(d) => self
                .exec_ok(name, vec!["test".into(), "-d".into(), d.clone()])
                .await
                .then(|| d.clone()),
            None => None,
        };
        if let Some(d) = configured {
            return d;
        }
        let d = self.vllm_parent_dir(name, sink, clock).await;
        if let Some(p) = &job.patch_dir {
            self.dlog(
                sink,
                Pipe::Stdout,
                format!(
                    "{p} is not in this image: the patch applies where vllm is installed ({d})"
                ),
            )
            .await;
        }
        d
    }

    async fn exec_ok(&self, name: &str, argv: Vec<String>) -> bool {
        exec::capture(&self.docker, name, argv, Vec::new())
            .await
            .is_ok_and(|(code, _)| code == 0)
    }

    /// An installed package (no `setup.py` or `pyproject.toml` beside `vllm/`) holds only
    /// vLLM's package: the patch's files elsewhere (`examples/`, `tests/`, `benchmarks/`)
    /// are not there to patch, change nothing the benchmark runs, and are dropped, said in
    /// the run's log and provenance (preflight says so before the night).
    async fn package_only(
        &self,
        name: &str,
        dir: &str,
        data: Vec<u8>,
        sink: &RunSink,
        _clock: &Clock,
    ) -> Vec<u8> {
        let Ok(text) = std::str::from_utf8(&data) else {
            return data;
        };
        let (kept, dropped) = crate::patchfile::only_under(text, "vllm/");
        if dropped.is_empty() {
            return data;
        }
        let tree = format!(
            "test -e {d}/setup.py -o -e {d}/pyproject.toml",
            d = shell_words::quote(dir)
        );
        if self
            .exec_ok(name, vec!["sh".into(), "-c".into(), tree])
            .await
        {
            return data;
        }
        self.dlog(
            sink,
            Pipe::Stdout,
            format!(
                "{dir} is an installed package, not vLLM's source tree: the patch's hunks for {} are dropped (outside vllm/, nothing the benchmark runs)",
                dropped.join(", ")
            ),
        )
        .await;
        sink.send(RuntimeMsg::Provenance {
            key: "patch_dropped".into(),
            value: dropped.join(" "),
        })
        .await;
        kept.into_bytes()
    }

    pub(super) async fn vllm_parent_dir(
        &self,
        container: &str,
        sink: &RunSink,
        clock: &Clock,
    ) -> String {
        let cmd = "python3 -c 'import os, importlib.util; print(os.path.dirname(os.path.dirname(importlib.util.find_spec(\"vllm\").origin)))'";
        self.exec_stdout(container, cmd, sink, clock)
            .await
            .unwrap_or_else(|| "/".into())
    }
}
