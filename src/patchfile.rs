//! What a unified (or git) diff touches, read from its `---`/`+++` headers. Pure: the
//! runtime copies those files out to patch them on the host, the diagnoser blames a failure
//! raised in one of them on the patch.

use std::collections::BTreeSet;
use std::path::Component;

/// The paths (after `-p1`) a unified or git diff touches: `(existing, deleted)`. Existing
/// files are copied out to patch; deleted ones are removed in the container afterwards.
/// Err names a path that would leave the directory.
pub fn touched_paths(patch: &str) -> Result<(BTreeSet<String>, BTreeSet<String>), String> {
    let mut existing = BTreeSet::new();
    let mut deleted = BTreeSet::new();
    let mut old: Option<String> = None;
    for line in patch.lines() {
        let side = |l: &str, p: &str| {
            l.strip_prefix(p).map(|rest| {
                // `--- a/x.py\t2024-01-01 …`: a timestamp after a tab is not the path.
                rest.split('\t').next().unwrap_or("").trim().to_string()
            })
        };
        if let Some(p) = side(line, "--- ") {
            old = Some(p);
        } else if let Some(new) = side(line, "+++ ") {
            let Some(o) = old.take() else { continue };
            match (strip1(&o)?, strip1(&new)?) {
                (Some(o), Some(_)) => {
                    existing.insert(o);
                }
                (Some(o), None) => {
                    existing.insert(o.clone());
                    deleted.insert(o);
                }
                _ => {}
            }
        }
    }
    Ok((existing, deleted))
}

/// `a/vllm/x.py` → `vllm/x.py`; `/dev/null` → None; a path that climbs out → Err.
fn strip1(p: &str) -> Result<Option<String>, String> {
    if p == "/dev/null" {
        return Ok(None);
    }
    let rest = p.split_once('/').map_or("", |(_, r)| r);
    let safe = !rest.is_empty()
        && std::path::Path::new(rest)
            .components()
            .all(|c| matches!(c, Component::Normal(_)));
    if safe {
        Ok(Some(rest.to_string()))
    } else {
        Err(format!("the patch names a path outside its tree: {p}"))
    }
}

/// Every path the diff names (changed, created or deleted), after `-p1`.
pub fn all_paths(patch: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in patch.lines() {
        let Some(rest) = line
            .strip_prefix("+++ ")
            .or_else(|| line.strip_prefix("--- "))
        else {
            continue;
        };
        let p = rest.split('\t').next().unwrap_or("").trim();
        if let Ok(Some(p)) = strip1(p) {
            out.insert(p);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_of_a_patch() {
        let p = "diff --git a/vllm/x.py b/vllm/x.py\n--- a/vllm/x.py\t2026-01-01\n+++ b/vllm/x.py\n@@ -1 +1 @@\n-a\n+b\n\
                 --- /dev/null\n+++ b/vllm/new.py\n@@ -0,0 +1 @@\n+c\n\
                 --- a/vllm/old.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-d\n";
        let (e, d) = touched_paths(p).unwrap();
        assert_eq!(
            e.into_iter().collect::<Vec<_>>(),
            vec!["vllm/old.py", "vllm/x.py"]
        );
        assert_eq!(d.into_iter().collect::<Vec<_>>(), vec!["vllm/old.py"]);
        assert_eq!(
            all_paths(p).into_iter().collect::<Vec<_>>(),
            vec!["vllm/new.py", "vllm/old.py", "vllm/x.py"]
        );
        assert!(touched_paths("--- a/../etc/passwd\n+++ b/../etc/passwd\n")
            .unwrap_err()
            .contains("outside"));
    }
}
