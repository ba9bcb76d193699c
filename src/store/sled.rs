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
        sled::Error::Io(io)
            if matches!(
                io.kind(),
                std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem
            ) =>
        {
            StoreError::ReadOnly {
                dir: dir.to_path_buf(),
                why: io.to_string(),
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

/// sled 0.34 writes a snapshot to `snap.<lsn>.generating`, then renames it; but when it
/// reads, it takes the greatest `snap.*` name, which is the unfinished `.generating` file if
/// a kill landed mid-write, and calls the store corrupt (sled issues #1527, #1533). Such a
/// file was never committed: the previous snapshot and the log still hold everything.
fn unfinished_snapshots(dir: &Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("snap.") && n.ends_with(".generating"))
        })
        .collect()
}

impl SledBackend {
    pub fn open(dir: &Path) -> Result<SledBackend, StoreError> {
        match Self::open_once(dir) {
            // A corruption error comes after sled took the store's lock, so no other process
            // is writing a snapshot now: the leftover can go.
            Err(StoreError::Damaged { .. }) if !unfinished_snapshots(dir).is_empty() => {
                for p in unfinished_snapshots(dir) {
                    tracing::info!(
                        "{}: removing an unfinished snapshot left by a crash",
                        p.display()
                    );
                    std::fs::remove_file(&p).map_err(|e| StoreError::Io {
                        dir: dir.to_path_buf(),
                        why: format!("{}: {e}", p.display()),
                    })?;
                }
                Self::open_once(dir)
            }
            other => other,
        }
    }

    fn open_once(dir: &Path) -> Result<SledBackend, StoreError> {
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
    fn first_key(&self, t: Tree) -> anyhow::Result<Option<Vec<u8>>> {
        Ok(self.tree(t).first()?.map(|(k, _)| k.to_vec()))
    }
    fn len(&self, t: Tree) -> usize {
        self.tree(t).len()
    }
    fn flush(&self) -> anyhow::Result<()> {
        self.db.flush()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kill mid-snapshot leaves `snap.<lsn>.generating` with a torn tail, and sled 0.34
    /// reads it as the newest snapshot. The store must open with everything it had.
    #[test]
    fn a_torn_snapshot_left_by_a_kill_is_not_damage() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("store");
        {
            let b = SledBackend::open(&dir).unwrap();
            for i in 0..200u32 {
                b.put(Tree::Runs, &i.to_be_bytes(), b"kept").unwrap();
            }
            b.flush().unwrap();
        }
        let torn = dir.join("snap.7FFFFFFFFFFFFFFF.generating");
        std::fs::write(&torn, b"\x01\x02\x03 torn by SIGKILL").unwrap();
        // sled's background flusher may hold the previous handle's file lock a moment
        // longer in this same process (under load): wait for it, as a new process never has to.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let b = loop {
            match SledBackend::open(&dir) {
                Err(StoreError::Locked { .. }) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(50))
                }
                other => break other.unwrap(),
            }
        };
        assert_eq!(b.len(Tree::Runs), 200);
        assert_eq!(
            b.get(Tree::Runs, &7u32.to_be_bytes()).unwrap().unwrap(),
            b"kept"
        );
        assert!(!torn.exists());
    }
}
