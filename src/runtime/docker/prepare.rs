//! The attempt's image: found, pulled or built, the run's container prepared from it, and a
//! fixed container committed as an image.

use super::*;

impl DockerRuntime {
    pub(super) async fn prepare_image(
        &self,
        image: &str,
        sink: &RunSink,
        clock: &Clock,
    ) -> Result<image::ImageInfo, RunEnd> {
        if image.is_empty() {
            return Err(RunEnd::ImageMissing {
                message: "no image for this run (check the plan's [images] templates)".into(),
            });
        }
        if let Some(i) = clock.wait(image::inspect(&self.docker, image)).await {
            self.dlog(
                sink,
                Pipe::Stdout,
                format!("image {image} present ({})", i.id),
            )
            .await;
            return Ok(i);
        }
        if let Ok(Some(root)) = self.init().await {
            if let Some(free) = image::free_bytes(root) {
                if free < self.cfg.min_free_bytes {
                    let msg = format!(
                        "not pulling {image}: {:.1} GB free on Docker's root {} — an image needs about {:.0} GB; free space (docker image prune) first",
                        free as f64 / 1e9,
                        root.display(),
                        self.cfg.min_free_bytes as f64 / 1e9
                    );
                    sink.log(Stream::Pull, Pipe::Stderr, msg.clone()).await;
                    return Err(RunEnd::DiskFull { message: msg });
                }
            }
        }
        // A stalled registry must not hold a run (and its GPUs) forever.
        let pulled = tokio::time::timeout(
            PULL_TIMEOUT,
            clock.wait(image::pull(&self.docker, image, &self.auth, sink)),
        );
        let Ok(pulled) = pulled.await else {
            return Err(RunEnd::Timeout {
                stage: Stage::PreparingImage,
            });
        };
        match pulled {
            Ok(()) => {}
            Err(image::ImageError::Missing(m)) => return Err(RunEnd::ImageMissing { message: m }),
            Err(image::ImageError::DiskFull(m)) => return Err(RunEnd::DiskFull { message: m }),
            Err(image::ImageError::Other(m)) => {
                return Err(err(Stage::PreparingImage, format!("pulling {image}: {m}")))
            }
        }
        clock
            .wait(image::inspect(&self.docker, image))
            .await
            .ok_or_else(|| {
                err(
                    Stage::PreparingImage,
                    format!("{image} missing after its pull"),
                )
            })
    }

    /// Create and start a keeper container of `image` (no token, no GPUs: what is committed
    /// from it must not hold secrets).
    pub(super) async fn prep_container(
        &self,
        job: &RunJob,
        image: &str,
        role: &str,
        lo: &Mutex<Leftovers>,
        clock: &Clock,
    ) -> Result<String, RunEnd> {
        let name = container::name(job, role);
        lo.lock()
            .unwrap_or_else(|e| e.into_inner())
            .containers
            .push((name.clone(), false));
        let spec = container::Spec {
            image: image.to_string(),
            entrypoint: keeper(),
            env: Vec::new(),
            labels: container::labels(job, role),
            gpus: Vec::new(),
            shm_size: None,
            ipc: None,
            binds: Vec::new(),
            port: None,
            workdir: None,
        };
        clock
            .wait(container::create(&self.docker, &name, spec))
            .await
            .map_err(|e| err(Stage::StartingContainer, format!("creating {name}: {e}")))?;
        clock
            .wait(self.docker.start_container(&name, None))
            .await
            .map_err(|e| err(Stage::StartingContainer, format!("starting {name}: {e}")))?;
        Ok(name)
    }

    /// Commit `container` as `repo:tag` (one argument: they name one reference), keeping the base image's entrypoint and command
    /// (not the keeper's).
    pub(super) async fn commit(
        &self,
        container: &str,
        (repo, tag): (&str, &str),
        base: &image::ImageInfo,
        comment: &str,
        made_for: &str,
        clock: &Clock,
    ) -> Result<(), RunEnd> {
        clock
            .wait(self.docker.commit_container(
                CommitContainerOptions {
                    container: Some(container.to_string()),
                    repo: Some(repo.to_string()),
                    tag: Some(tag.to_string()),
                    comment: Some(comment.to_string()),
                    pause: true,
                    ..Default::default()
                },
                ContainerConfig {
                    entrypoint: base.entrypoint.clone(),
                    cmd: base.cmd.clone(),
                    // Eviction removes it with the plan image it stands for.
                    labels: Some([(MADE_FOR.to_string(), made_for.to_string())].into()),
                    ..Default::default()
                },
            ))
            .await
            .map(|_| ())
            .map_err(|e| {
                err(
                    Stage::StartingContainer,
                    format!("committing {container}: {e}"),
                )
            })
    }

    pub(super) async fn remove_now(&self, name: &str, lo: &Mutex<Leftovers>, clock: &Clock) {
        clock.wait(container::teardown(&self.docker, name, 0)).await;
        lo.lock()
            .unwrap_or_else(|e| e.into_inner())
            .containers
            .retain(|c| c.0 != name);
    }
}
