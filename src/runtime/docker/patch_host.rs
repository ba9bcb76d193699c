//! An agent's patch applied on the host, for an image that has neither `patch` nor `git`
//! (a slim image, the real night's vllm-cpu images): the files the patch touches are copied
//! out of the container, `git apply` checks and applies it there, and the results go back
//! in. The same strictness as inside (no fuzz, every hunk or nothing).

use super::*;
use std::io::Read;

impl DockerRuntime {
    /// Apply `data` to `dir` of container `name` from the host. Ok(()) or the failure's
    /// evidence (git's own words).
    pub(super) async fn apply_patch_on_host(
        &self,
        name: &str,
        dir: &str,
        data: &[u8],
        sink: &RunSink,
        clock: &Clock,
    ) -> Result<(), String> {
        let text = String::from_utf8_lossy(data);
        let (existing, deleted) = crate::patchfile::touched_paths(&text)?;
        let work = tempfile::Builder::new()
            .prefix("nightshift-patch-")
            .tempdir()
            .map_err(|e| format!("a folder to patch in: {e}"))?;
        let tree = work.path().join("tree");
        std::fs::create_dir(&tree).map_err(|e| e.to_string())?;
        for rel in &existing {
            let path = format!("{}/{rel}", dir.trim_end_matches('/'));
            let opts = bollard::query_parameters::DownloadFromContainerOptions { path };
            let mut stream = self.docker.download_from_container(name, Some(opts));
            let mut tarball = Vec::new();
            while let Some(chunk) = clock.wait(stream.next()).await {
                match chunk {
                    Ok(b) if tarball.len() + b.len() <= MAX_PATCHED_FILE => {
                        tarball.extend_from_slice(&b)
                    }
                    Ok(_) => return Err(format!("{rel} is over {MAX_PATCHED_FILE} bytes")),
                    // Absent: git apply says so in its own words below.
                    Err(_) => break,
                }
            }
            if let Some(bytes) = first_file(&tarball) {
                let to = tree.join(rel);
                if let Some(p) = to.parent() {
                    std::fs::create_dir_all(p).map_err(|e| e.to_string())?;
                }
                std::fs::write(&to, bytes).map_err(|e| e.to_string())?;
            }
        }
        let patch = work.path().join("agent.patch");
        std::fs::write(&patch, data).map_err(|e| e.to_string())?;
        for (step, args) in [
            ("$ git apply --check (on the host)", vec!["--check"]),
            ("$ git apply (on the host)", vec![]),
        ] {
            self.dlog(sink, Pipe::Stdout, step).await;
            let out = tokio::process::Command::new("git")
                .current_dir(&tree)
                // Never the repository a temp folder may sit in.
                .env("GIT_CEILING_DIRECTORIES", work.path())
                .arg("apply")
                .args(&args)
                .arg(&patch)
                .output()
                .await
                .map_err(|e| format!("git on the host: {e}"))?;
            let said = String::from_utf8_lossy(&out.stderr).to_string();
            for l in said.lines() {
                self.dlog(sink, Pipe::Stderr, l).await;
            }
            if !out.status.success() {
                let last = said.lines().rev().find(|l| !l.trim().is_empty());
                return Err(last.unwrap_or("git apply failed").trim().to_string());
            }
        }
        let mut b = tar::Builder::new(Vec::new());
        b.append_dir_all(".", &tree).map_err(|e| e.to_string())?;
        let tar = b.into_inner().map_err(|e| e.to_string())?;
        self.upload(name, dir, tar, clock).await?;
        if !deleted.is_empty() {
            let rm: Vec<String> = deleted
                .iter()
                .map(|d| shell_words::quote(d).into())
                .collect();
            let script = format!(
                "cd {} && rm -f -- {}",
                shell_words::quote(dir),
                rm.join(" ")
            );
            let (code, _) = self.exec_captured(name, script, sink, clock).await;
            if code != Ok(0) {
                return Err("removing the files the patch deletes failed".into());
            }
        }
        Ok(())
    }
}

/// No source file a patch touches is this large; the bound keeps a hostile image from
/// filling the host.
const MAX_PATCHED_FILE: usize = 64 << 20;

/// The contents of the first regular file in a tar archive.
fn first_file(tarball: &[u8]) -> Option<Vec<u8>> {
    let mut a = tar::Archive::new(tarball);
    for e in a.entries().ok()? {
        let mut e = e.ok()?;
        if e.header().entry_type().is_file() {
            let mut v = Vec::new();
            e.read_to_end(&mut v).ok()?;
            return Some(v);
        }
    }
    None
}
