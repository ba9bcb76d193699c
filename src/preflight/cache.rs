//! Answers of the Hub and the registries, kept between preflights: a plan checked at 6 p.m.
//! and again by `run` at 7 p.m. asks nobody twice. Positive answers keep a day, negative
//! ones an hour (a model may be published, an image pushed); "could not ask" is never kept.
//! The file is written whole and renamed into place; a torn or foreign file is ignored.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

pub const KEEP_FOUND_S: u64 = 24 * 3600;
pub const KEEP_MISSING_S: u64 = 3600;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Entry {
    at: u64,
    keep_s: u64,
    value: serde_json::Value,
}

#[derive(Debug, Default)]
pub struct LookupCache {
    path: Option<PathBuf>,
    entries: BTreeMap<String, Entry>,
    dirty: bool,
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `$XDG_CACHE_HOME/nightshift/preflight.json` (else `~/.cache/…`).
pub(crate) fn default_path() -> Option<PathBuf> {
    crate::dirs::cache_root().map(|d| d.join("preflight.json"))
}

impl LookupCache {
    /// No file: answers live for this process only.
    pub fn memory() -> LookupCache {
        LookupCache::default()
    }

    pub fn open(path: &Path) -> LookupCache {
        let entries = std::fs::read(path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        LookupCache {
            path: Some(path.to_path_buf()),
            entries,
            dirty: false,
        }
    }

    pub fn get<T: DeserializeOwned>(&self, key: &str) -> Option<T> {
        let e = self.entries.get(key)?;
        if now().saturating_sub(e.at) > e.keep_s {
            return None;
        }
        serde_json::from_value(e.value.clone()).ok()
    }

    pub fn put<T: Serialize>(&mut self, key: &str, value: &T, keep_s: u64) {
        if let Ok(value) = serde_json::to_value(value) {
            self.entries.insert(
                key.to_string(),
                Entry {
                    at: now(),
                    keep_s,
                    value,
                },
            );
            self.dirty = true;
        }
    }

    /// Writes the file when something changed; expired entries are dropped. Failure to
    /// write only costs the next preflight its lookups, so it is reported, not fatal.
    pub fn save(&mut self) -> Result<(), String> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        if !self.dirty {
            return Ok(());
        }
        let t = now();
        self.entries
            .retain(|_, e| t.saturating_sub(e.at) <= e.keep_s);
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let tmp =
            tempfile::NamedTempFile::new_in(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        serde_json::to_writer(&tmp, &self.entries).map_err(|e| e.to_string())?;
        tmp.persist(path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        self.dirty = false;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_survive_a_reopen_and_expire() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.json");
        let mut c = LookupCache::open(&p);
        c.put("hub:m", &42u64, 100);
        c.put("old", &1u64, 0);
        c.save().unwrap();
        let c = LookupCache::open(&p);
        assert_eq!(c.get::<u64>("hub:m"), Some(42));
        std::fs::write(&p, b"{torn").unwrap();
        assert_eq!(LookupCache::open(&p).get::<u64>("hub:m"), None);
    }
}
