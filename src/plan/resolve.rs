//! Resolving a plan's commits against the vLLM clone: abbreviated hashes become full ones,
//! an unknown parent becomes `commit^`, and the files each commit changed are read.

use super::clone::{Clone, FileChange};
use super::raw::RawCommit;
use super::{Builder, FieldLocator, Loc};
use std::collections::HashMap;

type Changes = HashMap<(String, String), Vec<FileChange>>;

pub(super) fn from_clone(
    b: &mut Builder,
    clone: &Clone,
    raw: &mut [(RawCommit, Option<Loc>, FieldLocator)],
) -> (Changes, Vec<String>) {
    let mut lines = Vec::new();
    // Requests: (raw index, is_parent, revision).
    let mut asks: Vec<(usize, bool, String)> = Vec::new();
    for (i, (rc, _, _)) in raw.iter().enumerate() {
        let Some(c) = rc.commit.as_deref().map(|c| c.trim().to_ascii_lowercase()) else {
            continue;
        };
        asks.push((i, false, c.clone()));
        match rc.parent.as_deref().map(|p| p.trim().to_ascii_lowercase()) {
            Some(p) if !p.is_empty() => asks.push((i, true, p)),
            _ => asks.push((i, true, format!("{c}^"))),
        }
    }
    let revs: Vec<String> = asks.iter().map(|(_, _, r)| r.clone()).collect();
    let answers = match clone.resolve(&revs) {
        Ok(a) => a,
        Err(e) => {
            b.warn(
                None,
                None,
                "clone",
                format!("cannot read the vLLM clone: {e}"),
            );
            return Default::default();
        }
    };
    let (mut commits_done, mut parents_found) = (0, 0);
    for ((i, is_parent, rev), full) in asks.iter().zip(answers) {
        let (rc, loc, _) = &mut raw[*i];
        let Some(full) = full else {
            if !is_parent {
                b.warn(
                    loc.clone(),
                    Some(rev),
                    "not_in_clone",
                    format!(
                        "{rev} is not a commit of the clone at {} (or the prefix is ambiguous): `git -C {} fetch` it",
                        clone.dir().display(),
                        clone.dir().display()
                    ),
                );
            }
            continue;
        };
        if *is_parent {
            let was = rc.parent.clone();
            if was.as_deref().map(|p| p.trim().to_ascii_lowercase()) != Some(full.clone()) {
                lines.push(match was {
                    Some(p) => format!("parent {p} → {full}"),
                    None => format!("parent of {} → {full} ({rev})", short(rc)),
                });
                if rc.parent.is_none() {
                    parents_found += 1;
                }
            }
            rc.parent = Some(full);
        } else {
            if rev != &full {
                lines.push(format!("commit {rev} → {full}"));
                commits_done += 1;
            }
            rc.commit = Some(full);
        }
    }
    let pairs: Vec<(String, String)> = raw
        .iter()
        .filter_map(|(rc, _, _)| match (&rc.commit, &rc.parent) {
            (Some(c), Some(p)) if c.len() == 40 && p.len() == 40 => Some((c.clone(), p.clone())),
            _ => None,
        })
        .collect();
    let changes = clone.changes(&pairs).unwrap_or_else(|e| {
        b.warn(
            None,
            None,
            "clone",
            format!("cannot diff commits in the vLLM clone: {e}"),
        );
        Changes::new()
    });
    if commits_done + parents_found > 0 {
        lines.insert(
            0,
            format!(
                "{commits_done} abbreviated hashes and {parents_found} unknown parents resolved from {}",
                clone.dir().display()
            ),
        );
    }
    (changes, lines)
}

fn short(rc: &RawCommit) -> String {
    rc.commit
        .as_deref()
        .unwrap_or("?")
        .chars()
        .take(12)
        .collect()
}
