//! A missing baseline image derived from the human one (ISO-Bench's fallback): when parent →
//! commit touches only Python files, the parent's version of each changed file is written
//! into the human image's installed vLLM package (files the commit added are removed,
//! files it deleted restored), verified (vllm imports; every touched file has the parent's
//! content), and committed as `<human repo>:nsbase-<parent12>`. Never benchmarked unverified.

use super::{image, upload, Clock, DockerRuntime, Leftovers};
use crate::model::Pipe;
use crate::plan::clone::{needs_build, FileChange};
use crate::runtime::{RunEnd, RunJob, RunSink, RuntimeMsg};
use sha2::{Digest, Sha256};
use std::sync::Mutex;

/// `repo:tag` → `repo` (a registry port is not a tag: `host:5000/x:y` → `host:5000/x`).
pub(crate) fn repo_of(image: &str) -> &str {
    let image = image.split('@').next().unwrap_or(image);
    match image.rsplit_once(':') {
        Some((repo, tag)) if !tag.contains('/') => repo,
        _ => image,
    }
}

/// The tag a derived baseline gets.
pub(crate) fn derived_tag(human: &str, parent: &str) -> String {
    format!(
        "{}:nsbase-{}",
        repo_of(human),
        &parent[..parent.len().min(12)]
    )
}

/// Why a commit's baseline cannot be derived by overlay, if it cannot.
pub(crate) fn overlay_blocker(changes: &[FileChange]) -> Option<String> {
    let compiled: Vec<&str> = changes
        .iter()
        .filter(|f| needs_build(&f.path))
        .map(|f| f.path.as_str())
        .collect();
    (!compiled.is_empty()).then(|| {
        format!(
            "the commit changes compiled code or the build ({}): a baseline needs a build",
            compiled.join(", ")
        )
    })
}

fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl DockerRuntime {
    /// The baseline image for `job`, derived from the human image. Err: why not (the run
    /// then ends as image_not_found with the pull's message and this reason).
    pub(super) async fn derive_baseline(
        &self,
        job: &RunJob,
        sink: &RunSink,
        lo: &Mutex<Leftovers>,
        clock: &Clock,
    ) -> Result<String, String> {
        let src = self
            .cfg
            .vllm_src
            .as_ref()
            .ok_or("no vLLM clone (vllm_src) to read the parent's files from")?;
        let parent = job
            .parent
            .as_deref()
            .ok_or("the parent commit is unknown")?;
        let changes = job.changes.as_ref().ok_or(
            "the parent → commit diff is unknown (the clone lacked the commit at plan load)",
        )?;
        if let Some(why) = overlay_blocker(changes) {
            return Err(why);
        }
        let human = job
            .human_image
            .as_deref()
            .ok_or("the commit has no human image to derive from")?;
        let tag = derived_tag(human, parent);
        let _making = self.making(&tag).await;
        if image::inspect(&self.docker, &tag).await.is_some() {
            self.dlog(
                sink,
                Pipe::Stdout,
                format!("baseline derived earlier: {tag}"),
            )
            .await;
            return Ok(tag);
        }
        let t0 = std::time::Instant::now();
        self.dlog(
            sink,
            Pipe::Stdout,
            format!("baseline image missing: deriving it from {human} by overlaying the parent's Python files"),
        )
        .await;
        let base = self
            .prepare_image(human, sink, clock)
            .await
            .map_err(|e| format!("the human image {human} is not available either: {e:?}"))?;
        let name = self
            .prep_container(job, human, "derive", lo, clock)
            .await
            .map_err(|e| format!("{e:?}"))?;
        let result = self.overlay(&name, src, parent, changes, sink, clock).await;
        let outcome = match result {
            Ok(files) => {
                let (repo, t) = tag.rsplit_once(':').expect("derived tags have a tag");
                let comment = format!("nightshift overlay of {parent} on {human}");
                match self
                    .commit(&name, (repo, t), &base, &comment, &job.image, clock)
                    .await
                {
                    Ok(()) => {
                        let secs = t0.elapsed().as_secs_f64();
                        self.dlog(
                            sink,
                            Pipe::Stdout,
                            format!(
                                "derived and verified {tag} in {secs:.1} s ({} files)",
                                files.len()
                            ),
                        )
                        .await;
                        sink.send(RuntimeMsg::Provenance {
                            key: "image_origin".into(),
                            value: format!(
                                "derived by overlay from {human} at parent {parent}: {} ({secs:.1} s)",
                                files.join(", ")
                            ),
                        })
                        .await;
                        Ok(tag)
                    }
                    Err(e) => Err(format!("committing {tag}: {e:?}")),
                }
            }
            Err(e) => Err(e),
        };
        self.remove_now(&name, lo, clock).await;
        outcome
    }

    /// Write, remove and verify the files in container `name`. Ok: `status path` lines.
    #[allow(clippy::too_many_arguments)]
    async fn overlay(
        &self,
        name: &str,
        src: &std::path::Path,
        parent: &str,
        changes: &[FileChange],
        sink: &RunSink,
        clock: &Clock,
    ) -> Result<Vec<String>, String> {
        let site = self.vllm_parent_dir(name, sink, clock).await;
        if site == "/" {
            return Err("the human image has no importable vllm package to overlay".into());
        }
        let mut verify = String::from("set -e\n");
        let mut files = Vec::new();
        // Only the installed package can be overlaid; tests, docs and benchmarks are not
        // installed (the benchmarks come from the clone or the image's own copy).
        for ch in changes.iter().filter(|c| c.path.starts_with("vllm/")) {
            let dest = format!("{site}/{}", ch.path);
            let q = shell_words::quote(&dest).into_owned();
            match ch.status {
                'A' => {
                    verify.push_str(&format!(
                        "rm -f {q}\n[ ! -e {q} ] || {{ echo \"still there: {dest}\"; exit 1; }}\n"
                    ));
                }
                _ => {
                    let data = upload::file_at_commit(src, parent, &ch.path)
                        .await
                        .map_err(|e| format!("{e:#}"))?;
                    let (dir, file) = dest.rsplit_once('/').unwrap_or(("/", dest.as_str()));
                    let _ = super::exec::capture(
                        &self.docker,
                        name,
                        vec!["mkdir".into(), "-p".into(), dir.into()],
                        Vec::new(),
                    )
                    .await;
                    let tar = upload::single_file_tar(file, &data).map_err(|e| e.to_string())?;
                    self.upload(name, dir, tar, clock)
                        .await
                        .map_err(|e| format!("writing {dest}: {e}"))?;
                    verify.push_str(&format!(
                        "[ \"$(sha256sum {q} | cut -d' ' -f1)\" = {} ] || {{ echo \"not the parent's content: {dest}\"; exit 1; }}\n",
                        sha256_hex(&data)
                    ));
                }
            }
            files.push(format!("{} {}", ch.status, ch.path));
        }
        verify.push_str("python3 -c 'import vllm' || { echo 'vllm does not import after the overlay'; exit 1; }\necho verified\n");
        let (code, out) = clock
            .wait(super::exec::capture(
                &self.docker,
                name,
                vec!["sh".into(), "-c".into(), verify],
                Vec::new(),
            ))
            .await?;
        if code != 0 || !out.contains("verified") {
            // Dependency rot the human image carries (aimv2, NumPy 2, …) is not the
            // overlay's doing: the run meets it, is diagnosed and gets its fix recipe.
            use crate::category::Category::*;
            let d = crate::diagnose::diagnose_text(
                &crate::diagnose::Catalog::builtin(),
                out.as_bytes(),
            );
            if matches!(
                d.category,
                Aimv2Conflict | NumpyAbi | LogitsWarperImport | PyairportsMissing | FaUtilsMissing
            ) {
                return Ok(files);
            }
            let why = out
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("")
                .to_string();
            return Err(format!("the overlay did not verify: {why}"));
        }
        Ok(files)
    }
}

/// The image a baseline or agent run uses when its own is missing: `Err(end)` keeps the
/// pull's failure, with why no derivation was possible.
pub(crate) fn missing_with(end: RunEnd, why: &str) -> RunEnd {
    match end {
        RunEnd::ImageMissing { message } => RunEnd::ImageMissing {
            message: format!("{message}; no baseline could be derived: {why}"),
        },
        RunEnd::Error { stage, message } => RunEnd::Error {
            stage,
            message: format!("{message}; no baseline could be derived: {why}"),
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_and_blockers() {
        assert_eq!(repo_of("org/vllm-bench:abc"), "org/vllm-bench");
        assert_eq!(repo_of("localhost:5000/x:y"), "localhost:5000/x");
        assert_eq!(repo_of("localhost:5000/x"), "localhost:5000/x");
        assert_eq!(
            derived_tag("org/b:c", "0123456789abcdef"),
            "org/b:nsbase-0123456789ab"
        );
        let py = FileChange {
            status: 'M',
            path: "vllm/a.py".into(),
        };
        let cu = FileChange {
            status: 'M',
            path: "csrc/a.cu".into(),
        };
        assert!(overlay_blocker(std::slice::from_ref(&py)).is_none());
        assert!(overlay_blocker(&[py, cu]).unwrap().contains("csrc/a.cu"));
    }
}
