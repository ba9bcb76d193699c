//! The store's side of reads kept between them ([`crate::report::view`]): a digest of each
//! run summary as stored, the commits in the order reports show them, and the kept bytes,
//! in a file beside the database (`view.<name>`). A file, not a database tree: the rows
//! are read all at once (one read of a few megabytes, where sled read its large nodes
//! from a blob file each), and they are derived from the rest of the store, rebuilt
//! whenever missing, stale or unreadable; salvage and resume never read them.

use super::{summary_doc, Store};
use crate::record::{RunDoc, RunSummary};
use std::collections::BTreeMap;

/// The digest of a run summary's stored bytes.
pub fn digest(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}

/// Plan order: removed runs last (then by key, the order they are visited in).
pub(crate) fn order_key(removed: bool, order: u32) -> (bool, u32) {
    (removed, if removed { 0 } else { order })
}

/// These runs (of [`Store::runs`]) as the report reads them from their summaries, in the
/// order given. A function of the run map, not a method: the map can be shared between
/// threads, the store (its database handle) cannot.
pub(crate) fn summary_docs_of(runs: &BTreeMap<String, RunSummary>, keys: &[&str]) -> Vec<RunDoc> {
    keys.iter()
        .filter_map(|k| runs.get(*k).map(|s| summary_doc(k, s)))
        .collect()
}

/// A commit and its runs' keys, in plan order.
pub type CommitRuns<'a> = (&'a str, Vec<&'a str>);

impl Store {
    /// The commits in the order reports show them (first appearance in plan order), each
    /// with its runs in plan order: the grouping `results` makes of [`Store::in_order`].
    pub fn commits_in_order(&self) -> Vec<CommitRuns<'_>> {
        let mut runs: Vec<&RunSummary> = self.runs.values().collect();
        runs.sort_by_cached_key(|s| order_key(s.removed, s.order));
        let mut out: Vec<CommitRuns<'_>> = Vec::new();
        let mut index: std::collections::HashMap<&str, usize> = Default::default();
        for s in runs {
            let c = s.info.commit.as_str();
            match index.get(c) {
                Some(&i) => out[i].1.push(s.key.as_str()),
                None => {
                    index.insert(c, out.len());
                    out.push((c, vec![s.key.as_str()]));
                }
            }
        }
        out
    }

    /// The digest of every run summary as stored (see [`Store::run_digest`]).
    pub(crate) fn run_digests(&self) -> &std::collections::HashMap<String, u64> {
        &self.digests
    }

    /// What was kept under `name` for each of `ids` (None where nothing was, or the file
    /// is unreadable: a read then rebuilds).
    pub fn kept(&self, name: &str, ids: &[&str]) -> Vec<Option<Vec<u8>>> {
        let mut all = std::fs::read(self.view_path(name))
            .ok()
            .and_then(|b| entries_of(&b))
            .unwrap_or_default();
        ids.iter().map(|id| all.remove(*id)).collect()
    }

    /// Keep `entries` under `name` for the next read, replacing what was kept there: one
    /// file, written whole and renamed into place, so a reader (or a copy of the store)
    /// sees the old entries or the new ones. Not synced: a crash costs one rebuild.
    pub fn keep(&self, name: &str, entries: &[(&str, &[u8])]) -> anyhow::Result<()> {
        let path = self.view_path(name);
        let mut out = Vec::with_capacity(
            MAGIC.len()
                + entries
                    .iter()
                    .map(|(k, v)| 8 + k.len() + v.len())
                    .sum::<usize>(),
        );
        out.extend_from_slice(MAGIC);
        for (id, bytes) in entries {
            for part in [id.as_bytes(), bytes] {
                out.extend_from_slice(&u32::try_from(part.len())?.to_be_bytes());
                out.extend_from_slice(part);
            }
        }
        let tmp = path.with_file_name(format!("view.{name}.tmp.{}", std::process::id()));
        std::fs::write(&tmp, &out)?;
        std::fs::rename(&tmp, &path).inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })?;
        Ok(())
    }

    /// The database's own directory: for a private copy, the copy (its view was copied
    /// with it, consistent with its runs).
    fn view_path(&self, name: &str) -> std::path::PathBuf {
        let dir = self
            .copy
            .as_ref()
            .map_or(self.dir.as_path(), |c| c.0.as_path());
        dir.join(format!("view.{name}"))
    }

    /// Whether this is a private copy of a store in use (what is kept in it is lost).
    pub(crate) fn is_copy(&self) -> bool {
        self.copy.is_some()
    }
}

/// What a view file starts with: a file of another format is not read.
const MAGIC: &[u8] = b"nightshift view 1\n";

/// A view file's entries: (id length, id, value length, value) after [`MAGIC`]; None when
/// any of it does not parse.
fn entries_of(b: &[u8]) -> Option<std::collections::HashMap<String, Vec<u8>>> {
    let mut rest = b.strip_prefix(MAGIC)?;
    let take = |rest: &mut &[u8]| -> Option<Vec<u8>> {
        let len = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
        let part = rest.get(4..4 + len)?.to_vec();
        *rest = &rest[4 + len..];
        Some(part)
    };
    let mut out = std::collections::HashMap::new();
    while !rest.is_empty() {
        let id = String::from_utf8(take(&mut rest)?).ok()?;
        let value = take(&mut rest)?;
        out.insert(id, value);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_view_file_reads_whole_or_not_at_all() {
        let mut b = MAGIC.to_vec();
        for part in [&b"c1"[..], b"row one", b"c2", b""] {
            b.extend_from_slice(&(part.len() as u32).to_be_bytes());
            b.extend_from_slice(part);
        }
        let all = entries_of(&b).unwrap();
        assert_eq!(all["c1"], b"row one");
        assert_eq!(all["c2"], b"");
        // Torn mid-entry: nothing is read (the rows are rebuilt); between entries: the
        // whole entries before the cut, never a part of one.
        for cut in 1..b.len() {
            match entries_of(&b[..cut]) {
                None => {}
                Some(some) => {
                    assert!(some.iter().all(|(k, v)| all[k] == *v), "cut at {cut}");
                    assert!(some.len() < all.len());
                }
            }
        }
        assert_eq!(entries_of(b"nightshift view 2\n"), None);
    }
}
