//! Tar archives uploaded into containers: the benchmark scripts from the operator's vLLM
//! clone at the variant's commit, and agent patches.

use anyhow::{bail, Context};
use std::path::Path;

/// `benchmarks/` of `vllm_src` at `commit`, as a tar archive (`git archive`: exactly the
/// committed files, no working-tree changes).
pub(crate) async fn benchmarks_tar(vllm_src: &Path, commit: &str) -> anyhow::Result<Vec<u8>> {
    let out = tokio::process::Command::new("git")
        .arg("-C")
        .arg(vllm_src)
        .args(["archive", "--format=tar", commit, "--", "benchmarks"])
        .output()
        .await
        .with_context(|| format!("running git in {}", vllm_src.display()))?;
    if !out.status.success() {
        bail!(
            "git archive {commit} benchmarks in {}: {}",
            vllm_src.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out.stdout)
}

/// One file of `vllm_src` at `commit` (`git show commit:path`).
pub(crate) async fn file_at_commit(
    vllm_src: &Path,
    commit: &str,
    path: &str,
) -> anyhow::Result<Vec<u8>> {
    let out = tokio::process::Command::new("git")
        .arg("-C")
        .arg(vllm_src)
        .arg("show")
        .arg(format!("{commit}:{path}"))
        .output()
        .await
        .with_context(|| format!("running git in {}", vllm_src.display()))?;
    if !out.status.success() {
        bail!(
            "{path} at {commit} in {}: {}",
            vllm_src.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out.stdout)
}

/// A tar holding one file.
pub(crate) fn single_file_tar(name: &str, data: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(data.len() as u64);
    h.set_mode(0o644);
    h.set_mtime(0);
    h.set_cksum();
    b.append_data(&mut h, name, data)?;
    Ok(b.into_inner()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_file_round_trips() {
        let t = single_file_tar("x.patch", b"hello").unwrap();
        let mut a = tar::Archive::new(&t[..]);
        let mut e = a.entries().unwrap().next().unwrap().unwrap();
        assert_eq!(e.path().unwrap().to_str(), Some("x.patch"));
        let mut s = String::new();
        std::io::Read::read_to_string(&mut e, &mut s).unwrap();
        assert_eq!(s, "hello");
    }
}
