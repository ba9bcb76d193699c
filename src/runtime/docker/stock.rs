//! The sweep's images on this Docker engine, for prefetch and eviction: what is here and
//! how big, and removing an image with the images nightshift made from it (fixed and
//! derived images carry the label `nightshift.made_for=<the plan's image>`).

use super::{build, derive, err, image, Clock, DockerRuntime, Leftovers, MADE_FOR};
use crate::model::{Pipe, Stage, Variant};
use crate::runtime::{RunEnd, RunJob, RunSink, RuntimeMsg};
use bollard::query_parameters::{ListImagesOptions, RemoveImageOptions};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use tokio_util::sync::CancellationToken;

/// Which plan image a local image belongs to: itself, or the one it was made for.
fn owner<'a>(
    tags: &'a [String],
    labels: &'a std::collections::HashMap<String, String>,
    images: &BTreeSet<&str>,
) -> Option<&'a str> {
    tags.iter()
        .map(String::as_str)
        .find(|t| images.contains(t))
        .or_else(|| {
            labels
                .get(MADE_FOR)
                .map(String::as_str)
                .filter(|m| images.contains(m))
        })
}

/// What to remove for an image made from a plan image: its tags, or its id when it has
/// none (an untagged image lists `<none>:<none>`, which is no reference: Docker refuses it
/// with "invalid reference format", and eviction asked again at every step).
fn removable(tags: &[String], id: &str) -> Vec<String> {
    let real: Vec<String> = tags
        .iter()
        .filter(|t| t.as_str() != "<none>:<none>")
        .cloned()
        .collect();
    if real.is_empty() && !id.is_empty() {
        vec![id.to_string()]
    } else {
        real
    }
}

impl DockerRuntime {
    /// The image a run starts from: its own, or a derived baseline made earlier or now.
    pub(super) async fn obtain_image(
        &self,
        job: &RunJob,
        sink: &RunSink,
        lo: &Mutex<Leftovers>,
        clock: &Clock,
    ) -> Result<(String, image::ImageInfo), RunEnd> {
        // A baseline derived ahead of the run (prefetch): no second trip to a registry
        // that has already said no.
        if job.variant != Variant::Human {
            if let (Some(human), Some(parent)) = (&job.human_image, &job.parent) {
                if image::inspect(&self.docker, &job.image).await.is_none() {
                    let made = [
                        (derive::derived_tag(human, parent), "derived by overlay"),
                        (build::built_tag(human, parent, None), "built from source"),
                    ];
                    for (tag, how) in made {
                        if let Some(info) = image::inspect(&self.docker, &tag).await {
                            self.dlog(sink, Pipe::Stdout, format!("baseline {how} earlier: {tag}"))
                                .await;
                            sink.send(RuntimeMsg::Provenance {
                                key: "image_origin".into(),
                                value: format!(
                                    "{how} from {human} at parent {parent} (made earlier: {tag})"
                                ),
                            })
                            .await;
                            return Ok((tag, info));
                        }
                    }
                }
            }
        }
        match self.prepare_image(&job.image, sink, clock).await {
            Ok(info) => Ok((job.image.clone(), info)),
            // A baseline (or an agent built on it) whose image cannot be had (not in the
            // registry, or no registry reachable): derive it from the human image where
            // the diff allows, else keep the pull's failure.
            Err(
                end @ (RunEnd::ImageMissing { .. }
                | RunEnd::Error {
                    stage: Stage::PreparingImage,
                    ..
                }),
            ) if job.variant != Variant::Human => {
                let made = match job.changes.as_deref().and_then(derive::overlay_blocker) {
                    Some(why) => self.build_baseline(job, &why, end, sink, lo, clock).await,
                    None => self
                        .derive_baseline(job, sink, lo, clock)
                        .await
                        .map_err(|why| derive::missing_with(end, &why)),
                };
                let tag = made?;
                let info = self.prepare_image(&tag, sink, clock).await?;
                Ok((tag, info))
            }
            Err(end) => Err(end),
        }
    }

    /// [`crate::runtime::Runtime::fetch_image`]: the image step of an attempt, alone.
    pub(super) async fn fetch(
        &self,
        job: RunJob,
        sink: RunSink,
        cancel: CancellationToken,
    ) -> Result<(), RunEnd> {
        self.init()
            .await
            .map_err(|e| err(Stage::PreparingImage, e))?;
        let lo = Mutex::new(Leftovers::default());
        let clock = Clock::default();
        let got = tokio::select! {
            r = async {
                // An agent whose patch needs a build is built here too, off the GPU.
                let (image, _) = self.obtain_image(&job, &sink, &lo, &clock).await?;
                self.patch_build(&job, &image, &sink, &lo, &clock).await.map(|_| ())
            } => r,
            _ = cancel.cancelled() => Err(RunEnd::Cancelled),
        };
        self.teardown(&lo, &sink, 2, &clock).await;
        got.map_err(|mut end| {
            if let RunEnd::ImageMissing { message }
            | RunEnd::DiskFull { message }
            | RunEnd::NeedsBuild { message }
            | RunEnd::Error { message, .. } = &mut end
            {
                *message = self.cfg.secrets.redact(message);
            }
            end
        })
    }

    /// Free bytes on Docker's root, and the bytes each plan image (with what was made
    /// from it) takes here.
    pub(super) async fn stock(&self, images: &[String]) -> (Option<u64>, BTreeMap<String, u64>) {
        let free = match self.init().await {
            Ok(Some(root)) => image::free_bytes(root),
            _ => None,
        };
        let set: BTreeSet<&str> = images.iter().map(String::as_str).collect();
        let mut present = BTreeMap::new();
        let Ok(list) = self
            .docker
            .list_images(Some(ListImagesOptions::default()))
            .await
        else {
            return (free, present);
        };
        for i in list {
            if let Some(o) = owner(&i.repo_tags, &i.labels, &set) {
                *present.entry(o.to_string()).or_insert(0) += i.size.max(0) as u64;
            }
        }
        (free, present)
    }

    /// Remove `image` and every image made from it. Never forced: Docker refuses to
    /// remove an image a container uses, which is the guarantee wanted here.
    pub(super) async fn evict(&self, image: &str) -> Result<u64, String> {
        let set: BTreeSet<&str> = [image].into();
        let list = self
            .docker
            .list_images(Some(ListImagesOptions::default()))
            .await
            .map_err(|e| e.to_string())?;
        let mut freed = 0;
        // Images made from it first: removing the base first would only untag it.
        let mut victims: Vec<(bool, String, u64)> = list
            .iter()
            .filter(|i| owner(&i.repo_tags, &i.labels, &set).is_some())
            .flat_map(|i| {
                let own = i.repo_tags.iter().any(|t| t == image);
                let size = i.size.max(0) as u64;
                let tags: Vec<String> = if own {
                    vec![image.to_string()]
                } else {
                    removable(&i.repo_tags, &i.id)
                };
                tags.into_iter().map(move |t| (own, t, size))
            })
            .collect();
        victims.sort();
        for (_, tag, size) in victims {
            self.docker
                .remove_image(&tag, None::<RemoveImageOptions>, None)
                .await
                .map_err(|e| format!("removing {tag}: {e}"))?;
            freed += size;
        }
        Ok(freed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_untagged_image_is_removed_by_its_id() {
        assert_eq!(
            removable(&["<none>:<none>".into()], "sha256:ab"),
            vec!["sha256:ab".to_string()]
        );
        assert_eq!(
            removable(&["o/x:1".into(), "<none>:<none>".into()], "sha256:ab"),
            vec!["o/x:1".to_string()]
        );
    }

    #[test]
    fn images_belong_to_the_plan_image_they_were_made_for() {
        let set: BTreeSet<&str> = ["org/base:b1", "org/human:h1"].into();
        let mut labels = std::collections::HashMap::new();
        assert_eq!(
            owner(&["org/base:b1".into()], &labels, &set),
            Some("org/base:b1")
        );
        assert_eq!(owner(&["other:x".into()], &labels, &set), None);
        labels.insert(MADE_FOR.to_string(), "org/base:b1".to_string());
        assert_eq!(
            owner(&["org/human:nsbase-abc".into()], &labels, &set),
            Some("org/base:b1")
        );
        labels.insert(MADE_FOR.to_string(), "someone/else:1".to_string());
        assert_eq!(owner(&["x:y".into()], &labels, &set), None);
    }
}
