//! The sled engine behind [`super::Backend`].

use super::{Backend, StoreError, Tree, Visit};
use std::path::Path;

pub struct SledBackend {
    db: sled::Db,
    meta: sled::Tree,
    events: sled::Tree,
    runs: sled::Tree,
}

fn damaged(dir: &Path, why: impl std::fmt::Display) -> StoreError {
    StoreError::Damaged {
        dir: dir.to_path_buf(),
        why: why.to_string(),
    }
}

fn map_err(dir: &Path, e: sled::Error) -> StoreError {
    match e {
        sled::Error::Io(io) if io.to_string().contains("could not acquire lock") => {
            StoreError::Locked {
                dir: dir.to_path_buf(),
            }
        }
        sled::Error::Io(io) => StoreError::Io {
            dir: dir.to_path_buf(),
            why: io.to_string(),
        },
        other => damaged(dir, other),
    }
}

/// sled fixes the segment size when a store is made (it is kept in `conf` and a different
/// one is refused): reuse the store's own.
fn stored_segment_size(dir: &Path) -> Option<usize> {
    let conf = std::fs::read_to_string(dir.join("conf")).ok()?;
    conf.lines()
        .find_map(|l| l.strip_prefix("segment_size: "))
        .and_then(|v| v.trim().parse().ok())
}

/// sled's default 512 KiB segments cost ~145 KB per run on disk in `bench store` (whole
/// segments stay allocated as pages are rewritten); 16 KiB segments ~10 KB. Bigger writes
/// (the plan snapshot, large node rewrites) go to blob files above segment/4.
const SEGMENT_SIZE: usize = 16 * 1024;
/// The page cache: a night's store fits; sled's default is 1 GiB.
const CACHE_BYTES: u64 = 64 << 20;

fn config(dir: &Path) -> sled::Config {
    sled::Config::new()
        .path(dir)
        .segment_size(stored_segment_size(dir).unwrap_or(SEGMENT_SIZE))
        .cache_capacity(CACHE_BYTES)
}

impl SledBackend {
    pub fn open(dir: &Path) -> Result<SledBackend, StoreError> {
        // sled may panic on some damaged files: catch it quietly and call it damaged.
        let path = dir.to_path_buf();
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let opened = std::panic::catch_unwind(move || {
            let db = config(&path).open()?;
            let meta = db.open_tree("meta")?;
            let events = db.open_tree("events")?;
            let runs = db.open_tree("runs")?;
            Ok::<_, sled::Error>(SledBackend {
                db,
                meta,
                events,
                runs,
            })
        });
        std::panic::set_hook(prev);
        match opened {
            Ok(Ok(b)) => Ok(b),
            Ok(Err(e)) => Err(map_err(dir, e)),
            Err(p) => {
                let why = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "the database engine failed to read it".into());
                Err(damaged(dir, why))
            }
        }
    }

    fn tree(&self, t: Tree) -> &sled::Tree {
        match t {
            Tree::Meta => &self.meta,
            Tree::Events => &self.events,
            Tree::Runs => &self.runs,
        }
    }
}

impl Backend for SledBackend {
    fn get(&self, t: Tree, key: &[u8]) -> anyhow::Result<Option<Vec<u8>>> {
        Ok(self.tree(t).get(key)?.map(|v| v.to_vec()))
    }
    fn put(&self, t: Tree, key: &[u8], value: &[u8]) -> anyhow::Result<()> {
        self.tree(t).insert(key, value)?;
        Ok(())
    }
    fn remove(&self, t: Tree, key: &[u8]) -> anyhow::Result<()> {
        self.tree(t).remove(key)?;
        Ok(())
    }
    fn scan(&self, t: Tree, f: &mut Visit<'_>) -> anyhow::Result<()> {
        for kv in self.tree(t).iter() {
            let (k, v) = kv?;
            f(&k, &v)?;
        }
        Ok(())
    }
    fn last_key(&self, t: Tree) -> anyhow::Result<Option<Vec<u8>>> {
        Ok(self.tree(t).last()?.map(|(k, _)| k.to_vec()))
    }
    fn len(&self, t: Tree) -> usize {
        self.tree(t).len()
    }
    fn flush(&self) -> anyhow::Result<()> {
        self.db.flush()?;
        Ok(())
    }
}
