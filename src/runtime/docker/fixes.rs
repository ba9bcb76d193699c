//! Fix recipes applied inside a run's container (a step at a time, each logged), and the
//! fixed image committed for the next attempt or redone each time.

use super::*;

impl DockerRuntime {
    /// Exec the recipes' steps in a prep container and commit the fixed image (reused by
    /// every later run of the same image with the same recipes).
    pub(super) async fn apply_fixes(
        &self,
        job: &RunJob,
        image: &str,
        base: &image::ImageInfo,
        sink: &RunSink,
        lo: &Mutex<Leftovers>,
        clock: &Clock,
    ) -> Result<String, RunEnd> {
        let mut with_steps: Vec<(String, Vec<FixStep>)> = Vec::new();
        for r in &job.fixes {
            match self.recipes.steps(r) {
                Some(s) if !s.is_empty() => with_steps.push((r.clone(), s)),
                Some(_) => {
                    self.dlog(
                        sink,
                        Pipe::Stdout,
                        format!("fix recipe {r}: environment only"),
                    )
                    .await;
                    sink.send(RuntimeMsg::FixApplied { recipe: r.clone() })
                        .await;
                }
                None => {
                    self.dlog(
                        sink,
                        Pipe::Stderr,
                        format!("fix recipe {r}: unknown to the Docker runtime; not applied"),
                    )
                    .await
                }
            }
        }
        if with_steps.is_empty() {
            return Ok(image.to_string());
        }
        // `commit_image = false`: the steps run again on every attempt, in an image of its
        // own removed at teardown, instead of a fixed image that later runs reuse.
        let (kept, fresh): (Vec<_>, Vec<_>) = with_steps
            .into_iter()
            .partition(|(r, _)| self.recipes.commits(r));
        let mut image = image.to_string();
        if !kept.is_empty() {
            let names: Vec<String> = kept.iter().map(|(r, _)| r.clone()).collect();
            let target = image::fixed_ref(&image, &names);
            image = self
                .fix_into(job, &image, base, &kept, target, true, sink, lo, clock)
                .await?;
        }
        if !fresh.is_empty() {
            let (repo, tag) = image::patched_ref(&job.sweep, &job.key, job.attempt);
            let target = (repo, format!("{tag}-fix"));
            lo.lock()
                .unwrap()
                .images
                .push(format!("{}:{}", target.0, target.1));
            image = self
                .fix_into(job, &image, base, &fresh, target, false, sink, lo, clock)
                .await?;
        }
        Ok(image)
    }

    /// Run `recipes`' steps in a prep container of `image` and commit it as `target`
    /// (`reuse`: an image already there under that name is taken as it is).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn fix_into(
        &self,
        job: &RunJob,
        image: &str,
        base: &image::ImageInfo,
        recipes: &[(String, Vec<FixStep>)],
        (repo, tag): (String, String),
        reuse: bool,
        sink: &RunSink,
        lo: &Mutex<Leftovers>,
        clock: &Clock,
    ) -> Result<String, RunEnd> {
        let names: Vec<String> = recipes.iter().map(|(r, _)| r.clone()).collect();
        let fixed = format!("{repo}:{tag}");
        if reuse
            && clock
                .wait(image::inspect(&self.docker, &fixed))
                .await
                .is_some()
        {
            self.dlog(sink, Pipe::Stdout, format!("reusing fixed image {fixed}"))
                .await;
        } else {
            let name = self.prep_container(job, image, "fix", lo, clock).await?;
            for (r, steps) in recipes {
                for step in steps {
                    self.fix_step(job, &name, r, step, sink, clock).await?;
                }
            }
            self.commit(
                &name,
                (&repo, &tag),
                base,
                &format!("nightshift fix: {}", names.join(", ")),
                &job.image,
                clock,
            )
            .await?;
            let how = if reuse {
                "committed fixed image"
            } else {
                "fixed this attempt's image (commit_image = false: not kept)"
            };
            self.dlog(sink, Pipe::Stdout, format!("{how} {fixed}"))
                .await;
            self.remove_now(&name, lo, clock).await;
        }
        for r in names {
            sink.send(RuntimeMsg::FixApplied { recipe: r }).await;
        }
        Ok(fixed)
    }

    /// One recipe step in the prep container `name`.
    pub(super) async fn fix_step(
        &self,
        job: &RunJob,
        name: &str,
        r: &str,
        step: &FixStep,
        sink: &RunSink,
        clock: &Clock,
    ) -> Result<(), RunEnd> {
        let fail = |m: String| err(Stage::StartingContainer, format!("fix recipe {r}: {m}"));
        match step {
            FixStep::Shell { run } => {
                self.dlog(
                    sink,
                    Pipe::Stdout,
                    format!("fix recipe {r}: $ {}", run.trim()),
                )
                .await;
                let mut out = self.out(sink, Stream::Docker);
                let step = clock.wait(exec::run(
                    &self.docker,
                    name,
                    vec!["sh".into(), "-c".into(), run.clone()],
                    None,
                    &mut out,
                ));
                // A `pip install` that hangs must not hold the run forever.
                let code = tokio::time::timeout(FIX_STEP_TIMEOUT, step)
                    .await
                    .map_err(|_| fail(format!("step ran past {} s", FIX_STEP_TIMEOUT.as_secs())))?
                    .map_err(|e| fail(e.to_string()))?;
                if code != 0 {
                    return Err(fail(format!("step exited with status {code}")));
                }
            }
            FixStep::CopyFromSource { path, dest } => {
                let Some(src) = &self.cfg.vllm_src else {
                    return Err(fail(format!(
                        "needs {path} from a vLLM clone; set `vllm_src` in the plan"
                    )));
                };
                let commit = self.benchmarks_commit(job);
                let data = upload::file_at_commit(src, commit, path)
                    .await
                    .map_err(|e| fail(format!("{e:#}")))?;
                let vllm_dir = self
                    .exec_stdout(name, crate::diagnose::recipe::FIND_VLLM_DIR, sink, clock)
                    .await;
                let dest = dest.replace(
                    crate::diagnose::recipe::VLLM_DIR_VAR,
                    vllm_dir.as_deref().unwrap_or("/").trim_end_matches('/'),
                );
                let (dir, file) = dest.rsplit_once('/').unwrap_or(("/", dest.as_str()));
                let dir = if dir.is_empty() { "/" } else { dir };
                let tar = upload::single_file_tar(file, &data).map_err(|e| fail(e.to_string()))?;
                self.upload(name, dir, tar, clock)
                    .await
                    .map_err(|e| fail(format!("copying {path} to {dest}: {e}")))?;
                self.dlog(
                    sink,
                    Pipe::Stdout,
                    format!("fix recipe {r}: copied {path} at {commit} to {dest}"),
                )
                .await;
            }
        }
        Ok(())
    }
}
