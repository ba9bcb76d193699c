//! What an image told us, kept between nights: its probe (interpreter, where vLLM lives)
//! and its client's `--help`, by image id. An id names the image's content, so an answer
//! never goes stale; a night that meets an image a previous night probed starts its runs
//! without the tens of seconds a vLLM import costs on each probe.
//!
//! One small JSON file per image under `$XDG_CACHE_HOME/nightshift/images/` (else
//! `~/.cache/…`), in a folder only the user can enter, written whole and renamed into
//! place. A torn, foreign or oversized file is ignored: the image is asked again.

use crate::rewrite::flags::FlagSet;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

/// What a probe of one image found.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ImageFacts {
    pub interpreter: Option<String>,
    /// Set when vllm imports only with this on PYTHONPATH.
    pub pythonpath: Option<String>,
    pub vllm_dir: Option<String>,
    pub vllm_version: Option<String>,
    /// The image's own benchmarks folders that exist.
    pub bench_dirs: Vec<String>,
    /// vllm is installed for this interpreter but `import vllm` fails.
    pub import_failed: bool,
    /// The image's `vllm` console script, when it has one.
    pub vllm_cli: Option<String>,
    pub workdir: String,
}

/// No memo is this large; the bound keeps a planted file from costing memory.
const MAX_BYTES: u64 = 1 << 20;

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Memo {
    pub probe: Option<ImageFacts>,
    /// (benchmarks source, program) → the flags learned (None: the help said nothing).
    pub helps: BTreeMap<String, Option<FlagSet>>,
}

/// What an image's own `--help` said, for one kind of benchmark (preflight's view).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Learned {
    pub client: Option<FlagSet>,
    pub server: Option<FlagSet>,
}

/// The flags `image_id`'s client for `kind` and its server answered with on an earlier
/// night, from the memo in the default folder.
pub fn learned(image_id: &str, kind: crate::kind::BenchKind) -> Learned {
    let Some(dir) = default_dir() else {
        return Learned::default();
    };
    learned_in(&dir, image_id, kind)
}

pub(crate) fn learned_in(dir: &Path, image_id: &str, kind: crate::kind::BenchKind) -> Learned {
    let memo = load(dir, image_id);
    let script = crate::rewrite::script_of(kind);
    let programs = [
        kind.cli_sub().map(|s| format!("Cli(\"{s}\")")),
        Some(format!("Script(\"{script}\")")),
    ];
    let client = memo
        .helps
        .iter()
        .filter(|(k, _)| programs.iter().flatten().any(|p| k.contains(p.as_str())))
        .find_map(|(_, v)| v.clone());
    let server = memo
        .helps
        .iter()
        .filter(|(k, _)| k.contains(crate::rewrite::SERVER_MODULE))
        .find_map(|(_, v)| v.clone());
    Learned { client, server }
}

/// `$XDG_CACHE_HOME/nightshift/images` (else `~/.cache/…`).
pub(crate) fn default_dir() -> Option<PathBuf> {
    crate::dirs::cache_root().map(|d| d.join("images"))
}

fn file(dir: &Path, image_id: &str) -> Option<PathBuf> {
    let hex = image_id.strip_prefix("sha256:").unwrap_or(image_id);
    (!hex.is_empty() && hex.len() <= 128 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| dir.join(format!("{hex}.json")))
}

/// The memo of `image_id`, or an empty one.
pub fn load(dir: &Path, image_id: &str) -> Memo {
    let Some(path) = file(dir, image_id) else {
        return Memo::default();
    };
    let mut bytes = Vec::new();
    let read =
        std::fs::File::open(&path).and_then(|f| f.take(MAX_BYTES + 1).read_to_end(&mut bytes));
    if read.is_err() || bytes.len() as u64 > MAX_BYTES {
        return Memo::default();
    }
    serde_json::from_slice(&bytes).unwrap_or_default()
}

/// Writes `memo` for `image_id`. Failing costs the next night a probe, so it is only logged.
pub fn save(dir: &Path, image_id: &str, memo: &Memo) {
    let Some(path) = file(dir, image_id) else {
        return;
    };
    let wrote = (|| -> std::io::Result<()> {
        private_dir(dir)?;
        let tmp = tempfile::NamedTempFile::new_in(dir)?;
        serde_json::to_writer(&tmp, memo)?;
        tmp.persist(&path).map_err(|e| e.error)?;
        Ok(())
    })();
    if let Err(e) = wrote {
        tracing::debug!("image memo {}: {e}", path.display());
    }
}

/// Creates `dir` for this user alone; refuses one that another user owns or may write.
fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let m = std::fs::symlink_metadata(dir)?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if !m.is_dir() || m.uid() != me || m.mode() & 0o022 != 0 {
        return Err(std::io::Error::other(format!(
            "{} is not a folder of this user's alone",
            dir.display()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_memo_survives_and_a_bad_one_is_ignored() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("images");
        let id = "sha256:0123abcd";
        let mut m = Memo {
            probe: Some(ImageFacts {
                interpreter: Some("/opt/venv/bin/python3".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        m.helps.insert(
            "image Cli(\"serve\") module".into(),
            Some(FlagSet::from_list("--seed --num-prompts", true)),
        );
        save(&dir, id, &m);
        let back = load(&dir, id);
        assert_eq!(back.probe, m.probe);
        assert_eq!(back.helps, m.helps);
        // Only this user may enter the folder.
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        // A torn file, a name that is not an id, an oversized file: asked again.
        std::fs::write(dir.join("0123abcd.json"), b"{\"probe\": ").unwrap();
        assert!(load(&dir, id).probe.is_none());
        assert!(load(&dir, "../../etc/passwd").probe.is_none());
        // Preflight's view: the serving client's and the server's answers.
        let mut m = Memo::default();
        m.helps.insert(
            "image Cli(\"serve\") module".into(),
            Some(FlagSet::from_list("--seed", true)),
        );
        m.helps.insert("image Cli(\"serve\")".into(), None);
        m.helps.insert(
            "image server vllm.entrypoints.openai.api_server".into(),
            Some(FlagSet::from_list("--dtype", true)),
        );
        save(&dir, "sha256:feed", &m);
        let l = learned_in(&dir, "sha256:feed", crate::kind::BenchKind::Serving);
        assert!(l.client.unwrap().accepts("--seed"));
        assert!(l.server.unwrap().accepts("--dtype"));
        let none = learned_in(&dir, "sha256:feed", crate::kind::BenchKind::Throughput);
        assert!(none.client.is_none());
        let big = vec![b' '; (MAX_BYTES + 10) as usize];
        std::fs::write(dir.join("0123abcd.json"), big).unwrap();
        assert!(load(&dir, id).probe.is_none());
    }
}
