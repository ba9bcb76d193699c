//! What a unified (or git) diff touches, read from its `---`/`+++` headers. Pure: the
//! runtime copies those files out to patch them on the host, the diagnoser blames a failure
//! raised in one of them on the patch.

use std::collections::BTreeSet;
use std::path::Component;

/// The paths (after `-p1`) a unified or git diff touches: `(existing, deleted)`. Existing
/// files are copied out to patch; deleted ones are removed in the container afterwards.
/// Err names a path that would leave the directory.
pub(crate) fn touched_paths(patch: &str) -> Result<(BTreeSet<String>, BTreeSet<String>), String> {
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
pub(crate) fn all_paths(patch: &str) -> BTreeSet<String> {
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

/// The patch restricted to the files under `prefix` (`vllm/`: what an installed package
/// holds), and the paths of the files left out. A file's section runs from its `diff --git`
/// (or its `---`/`+++` pair) to the next file's; text before the first file is kept.
pub(crate) fn only_under(patch: &str, prefix: &str) -> (String, Vec<String>) {
    let lines: Vec<&str> = patch.split_inclusive('\n').collect();
    let mut out = String::new();
    let mut dropped = Vec::new();
    let mut block: Vec<&str> = Vec::new();
    let mut seen_new = false;
    let flush = |block: &mut Vec<&str>, out: &mut String, dropped: &mut Vec<String>| {
        let text: String = block.concat();
        let path = all_paths(&text).into_iter().next();
        match path {
            Some(p) if !p.starts_with(prefix) => dropped.push(p),
            _ => out.push_str(&text),
        }
        block.clear();
    };
    for (i, line) in lines.iter().enumerate() {
        let next_is_new = lines.get(i + 1).is_some_and(|n| n.starts_with("+++ "));
        // A file starts at its `diff --git`, or at a `---`/`+++` pair once the current
        // file has had its own (a plain unified diff of several files).
        if line.starts_with("diff --git ") || (line.starts_with("--- ") && next_is_new && seen_new)
        {
            flush(&mut block, &mut out, &mut dropped);
            seen_new = false;
        }
        if line.starts_with("+++ ") {
            seen_new = true;
        }
        block.push(line);
    }
    flush(&mut block, &mut out, &mut dropped);
    (out, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_patch_kept_to_the_installed_package() {
        let p = "preamble\ndiff --git a/vllm/a.py b/vllm/a.py\n--- a/vllm/a.py\n+++ b/vllm/a.py\n@@ -1 +1 @@\n-a\n+b\ndiff --git a/examples/x.py b/examples/x.py\n--- a/examples/x.py\n+++ b/examples/x.py\n@@ -1 +1 @@\n-x\n+y\n--- a/tests/t.py\n+++ b/tests/t.py\n@@ -1 +1 @@\n---- not a header\n+t\n--- a/vllm/b.py\n+++ b/vllm/b.py\n@@ -1 +1 @@\n-c\n+d\n";
        let (kept, dropped) = only_under(p, "vllm/");
        assert_eq!(dropped, ["examples/x.py", "tests/t.py"]);
        assert!(kept.starts_with("preamble\ndiff --git a/vllm/a.py"));
        assert!(kept.contains("+++ b/vllm/b.py\n@@ -1 +1 @@\n-c\n+d\n"));
        assert!(!kept.contains("examples") && !kept.contains("tests/t.py"));
        // Nothing outside: the patch as it was.
        let only = "--- a/vllm/a.py\n+++ b/vllm/a.py\n@@ -1 +1 @@\n-a\n+b\n";
        assert_eq!(only_under(only, "vllm/"), (only.to_string(), vec![]));
    }

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
