//! The operator's vLLM clone, read with `git`: abbreviated hashes to full ones, an unknown
//! parent to `commit^`, and what changed between parent and commit. Two `git` processes
//! for a whole plan (`cat-file --batch-check`, `diff-tree --stdin`), so a 1,000-commit
//! plan resolves in well under a second. The only I/O the plan does besides its files.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// One file changed between a commit's parent and the commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChange {
    /// `A` added, `M` modified, `D` deleted, `T` type changed (renames are split into D + A).
    pub status: char,
    pub path: String,
}

/// Files whose change means compiled code or the build itself changed: no overlay of
/// Python files can stand in for a build then (issue: images; spec real-images §4).
pub fn needs_build(path: &str) -> bool {
    let base = path.rsplit('/').next().unwrap_or(path);
    path.starts_with("csrc/")
        || base == "setup.py"
        || base == "CMakeLists.txt"
        || base.starts_with("requirements")
        || path.starts_with("requirements/")
        || base == "pyproject.toml"
        || path.starts_with("cmake/")
        || [".cu", ".cuh", ".cpp", ".cc", ".c", ".h", ".hpp"]
            .iter()
            .any(|e| base.ends_with(e))
}

/// The files a unified diff touches (`diff --git a/X b/X`, or `--- a/X` / `+++ b/X` for
/// plain diffs), each once, in order. `/dev/null` sides are not files.
pub(crate) fn patch_paths(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |p: &str| {
        let p = p.trim_end_matches('\r');
        // Timestamps after a tab (`+++ b/x.py\t2024-…`) are not part of the name.
        let p = p.split('\t').next().unwrap_or(p).trim();
        let p = p
            .strip_prefix("a/")
            .or_else(|| p.strip_prefix("b/"))
            .unwrap_or(p);
        if !p.is_empty() && p != "/dev/null" && !out.iter().any(|o| o == p) {
            out.push(p.to_string());
        }
    };
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("diff --git ") {
            if let Some((a, b)) = rest.split_once(" b/") {
                add(a);
                add(b);
            }
        } else if let Some(rest) = line
            .strip_prefix("+++ ")
            .or_else(|| line.strip_prefix("--- "))
        {
            add(rest);
        }
    }
    out
}

/// The files of an agent's patch that need a build (compiled sources, the build itself).
pub(crate) fn patch_needs_build(text: &str) -> Vec<String> {
    patch_paths(text)
        .into_iter()
        .filter(|p| needs_build(p))
        .collect()
}

pub struct Clone {
    dir: PathBuf,
}

impl Clone {
    /// The clone at `dir`, if it is a git work tree or bare repository.
    pub fn open(dir: &Path) -> Option<Clone> {
        let ok = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["rev-parse", "--git-dir"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Clone {
            dir: dir.to_path_buf(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn piped(&self, args: &[&str], input: &str) -> Result<String, String> {
        let mut child = Command::new("git")
            .arg("-C")
            .arg(&self.dir)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("running git in {}: {e}", self.dir.display()))?;
        let mut stdin = child.stdin.take().expect("piped stdin");
        let input = input.to_string();
        // Written from a thread: git answers while reading, and a full pipe must not
        // deadlock a large plan.
        let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
        let out = child
            .wait_with_output()
            .map_err(|e| format!("git {}: {e}", args.join(" ")))?;
        let _ = writer.join();
        if !out.status.success() {
            return Err(format!(
                "git {} in {}: {}",
                args.join(" "),
                self.dir.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Each revision (`abc1234`, `abc1234^`) as a full commit hash; `None` when the clone
    /// does not have it or the prefix is ambiguous.
    pub fn resolve(&self, revs: &[String]) -> Result<Vec<Option<String>>, String> {
        if revs.is_empty() {
            return Ok(Vec::new());
        }
        let input: String = revs.iter().map(|r| format!("{r}^{{commit}}\n")).collect();
        let out = self.piped(&["cat-file", "--batch-check"], &input)?;
        // One answer line per input line, in order.
        Ok(out
            .lines()
            .map(|l| {
                let mut it = l.split_whitespace();
                match (it.next(), it.next()) {
                    (Some(h), Some("commit")) if h.len() == 40 => Some(h.to_string()),
                    _ => None,
                }
            })
            .chain(std::iter::repeat(None))
            .take(revs.len())
            .collect())
    }

    /// The release a revision descends from: `git describe --tags --match 'v[0-9]*'` as
    /// (tag, commits after it). `None` when no release tag is an ancestor.
    pub fn describe(&self, rev: &str) -> Option<(String, u32)> {
        let out = self
            .piped(
                &["describe", "--tags", "--long", "--match", "v[0-9]*", rev],
                "",
            )
            .ok()?;
        let line = out.trim();
        // `v0.4.2-35-gabcdef0`: the tag itself may contain dashes, so split from the right.
        let mut parts = line.rsplitn(3, '-');
        let _hash = parts.next()?;
        let after = parts.next()?.parse().ok()?;
        Some((parts.next()?.to_string(), after))
    }

    /// The earliest release tag that contains `rev` (its code shipped in that release).
    pub(crate) fn first_release_containing(&self, rev: &str) -> Option<String> {
        let out = self
            .piped(
                &[
                    "tag",
                    "--contains",
                    rev,
                    "--list",
                    "v[0-9]*",
                    "--sort=version:refname",
                ],
                "",
            )
            .ok()?;
        out.lines().next().map(|l| l.trim().to_string())
    }

    /// Whether `ancestor` is `rev` or in its history: `None` when git cannot answer (a
    /// commit the clone lacks).
    pub(crate) fn is_ancestor(&self, ancestor: &str, rev: &str) -> Option<bool> {
        let st = Command::new("git")
            .arg("-C")
            .arg(&self.dir)
            .args(["merge-base", "--is-ancestor", ancestor, rev])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .ok()?;
        match st.code() {
            Some(0) => Some(true),
            Some(1) => Some(false),
            _ => None,
        }
    }

    /// Whether the tree at `rev` mentions `needle` under `dir` (`git grep -F`): `None`
    /// when git cannot answer (unknown revision).
    /// Whether `path` (a file or a folder) is in the tree at `rev`.
    pub(crate) fn has_path(&self, rev: &str, path: &str) -> bool {
        Command::new("git")
            .arg("-C")
            .arg(&self.dir)
            .args(["cat-file", "-e", &format!("{rev}:{path}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// The text of `path` in the tree at `rev`, read up to `max` bytes: `None` when the
    /// tree lacks it, git cannot answer, or it is larger (no evidence either way).
    pub fn show(&self, rev: &str, path: &str, max: u64) -> Option<String> {
        use std::io::Read;
        let mut child = Command::new("git")
            .arg("-C")
            .arg(&self.dir)
            .args(["cat-file", "blob", &format!("{rev}:{path}")])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let mut bytes = Vec::new();
        let read = child.stdout.take()?.take(max + 1).read_to_end(&mut bytes);
        // Past the bound git may still be writing: end it rather than wait on a full pipe.
        let _ = child.kill();
        let ok = child.wait().is_ok_and(|s| s.success()) || bytes.len() as u64 <= max;
        (read.is_ok() && ok && bytes.len() as u64 <= max && !bytes.is_empty())
            .then(|| String::from_utf8_lossy(&bytes).into_owned())
    }

    pub(crate) fn tree_mentions(&self, rev: &str, dir: &str, needle: &str) -> Option<bool> {
        let out = Command::new("git")
            .arg("-C")
            .arg(&self.dir)
            .args(["grep", "-q", "-F", "-e", needle, rev, "--", dir])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .ok()?;
        // git grep: 0 found, 1 not found, anything else an error.
        match out.code() {
            Some(0) => Some(true),
            Some(1) => Some(false),
            _ => None,
        }
    }

    /// `git apply --check` of `patch` against the tree at `rev`, without touching the
    /// clone's work tree or index: a temporary index is read from `rev` and the patch is
    /// checked against it (`--cached`). `Err` carries git's first complaint.
    pub(crate) fn apply_check(&self, rev: &str, patch: &Path) -> Result<(), String> {
        // git runs in the clone (`-C`): a relative path would be read from there.
        let patch = std::path::absolute(patch).map_err(|e| format!("{}: {e}", patch.display()))?;
        let dir = tempfile::tempdir().map_err(|e| format!("temporary index: {e}"))?;
        let index = dir.path().join("index");
        let git = |args: &[&std::ffi::OsStr]| {
            Command::new("git")
                .arg("-C")
                .arg(&self.dir)
                .args(args)
                .env("GIT_INDEX_FILE", &index)
                .stdin(Stdio::null())
                .output()
                .map_err(|e| format!("running git: {e}"))
        };
        let read = git(&["read-tree".as_ref(), rev.as_ref()])?;
        if !read.status.success() {
            return Err(format!(
                "git read-tree {rev}: {}",
                String::from_utf8_lossy(&read.stderr).trim()
            ));
        }
        let out = git(&[
            "apply".as_ref(),
            "--cached".as_ref(),
            "--check".as_ref(),
            patch.as_os_str(),
        ])?;
        if out.status.success() {
            return Ok(());
        }
        let err = String::from_utf8_lossy(&out.stderr);
        Err(err
            .lines()
            .find(|l| l.starts_with("error:"))
            .or_else(|| err.lines().next())
            .unwrap_or("git apply --check failed")
            .trim()
            .to_string())
    }

    /// Files changed from parent to commit, for each (commit, parent) pair (full hashes).
    pub fn changes(
        &self,
        pairs: &[(String, String)],
    ) -> Result<HashMap<(String, String), Vec<FileChange>>, String> {
        let mut map = HashMap::new();
        if pairs.is_empty() {
            return Ok(map);
        }
        let input: String = pairs.iter().map(|(c, p)| format!("{c} {p}\n")).collect();
        let out = self.piped(
            &[
                "diff-tree",
                "--stdin",
                "--always",
                "-r",
                "--no-renames",
                "--name-status",
            ],
            &input,
        )?;
        // `diff-tree --stdin --always` prints each input's commit id, in input order, then
        // its changes.
        let mut order = pairs.iter();
        let mut current: Option<(String, String)> = None;
        for line in out.lines() {
            let word = line.trim();
            if word.len() == 40 && word.chars().all(|c| c.is_ascii_hexdigit()) {
                current = order.next().filter(|(c, _)| c == word).cloned();
                if let Some(key) = &current {
                    map.entry(key.clone()).or_insert_with(Vec::new);
                }
                continue;
            }
            let Some((status, path)) = line.split_once('\t') else {
                continue;
            };
            if let (Some(key), Some(s)) = (&current, status.chars().next()) {
                map.entry(key.clone()).or_default().push(FileChange {
                    status: s,
                    path: path.to_string(),
                });
            }
        }
        Ok(map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiled_sources_need_a_build() {
        for p in [
            "csrc/attention.cu",
            "setup.py",
            "CMakeLists.txt",
            "requirements/cuda.txt",
            "requirements-common.txt",
            "vllm/x.cpp",
        ] {
            assert!(needs_build(p), "{p}");
        }
        for p in [
            "vllm/core/scheduler.py",
            "benchmarks/benchmark_serving.py",
            "docs/setup.md",
        ] {
            assert!(!needs_build(p), "{p}");
        }
    }

    #[test]
    fn patches_name_the_files_they_touch() {
        let git = "diff --git a/csrc/k.cu b/csrc/k.cu\nindex 1..2 100644\n--- a/csrc/k.cu\n+++ b/csrc/k.cu\n@@ -1 +1 @@\n-x\n+y\ndiff --git a/vllm/new.py b/vllm/new.py\nnew file mode 100644\n--- /dev/null\n+++ b/vllm/new.py\n";
        assert_eq!(patch_paths(git), ["csrc/k.cu", "vllm/new.py"]);
        assert_eq!(patch_needs_build(git), ["csrc/k.cu"]);
        let plain = "--- a/vllm/worker/model_runner.py\t2024-01-01\n+++ b/vllm/worker/model_runner.py\t2024-01-02\n@@ -1 +1,2 @@\n # x\n+# y\n";
        assert_eq!(patch_paths(plain), ["vllm/worker/model_runner.py"]);
        assert!(patch_needs_build(plain).is_empty());
        // A removed line that looks like a header inside a hunk is `-`-prefixed once more.
        assert!(patch_paths("garbage\n\u{0}\n").is_empty());
    }
}
