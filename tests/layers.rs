//! The layering rule of ARCHITECTURE.md, held by a test instead of prose: every file under
//! `src/` may import (`crate::m`) only modules of its own layer or a lower one, the TUI
//! never the engine, a runtime or the store, and nothing but `cli` itself reaches `cli`.
//! The layers are read from ARCHITECTURE.md's own lists, so the map and the check are one
//! definition: a module the document does not place fails here until it is placed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const LAYERS: [&str; 5] = ["core", "adapters", "engine", "application", "faces"];

/// Top-level module → layer index, from the "## Layers" section.
fn layers(root: &Path) -> BTreeMap<String, usize> {
    let doc = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let start = doc.find("## Layers").expect("a Layers section");
    let end = doc[start + 3..]
        .find("\n## ")
        .map_or(doc.len(), |e| start + 3 + e);
    let section = &doc[start..end];
    let mut out = BTreeMap::new();
    for (i, layer) in LAYERS.iter().enumerate() {
        let marker = format!("**{layer}**");
        let Some(at) = section.find(&marker) else {
            panic!("ARCHITECTURE.md names no {marker} layer");
        };
        let rest = &section[at + marker.len()..];
        let stop = LAYERS
            .iter()
            .filter_map(|l| rest.find(&format!("**{l}**")))
            .min()
            .unwrap_or(rest.len());
        for name in rest[..stop].split('`').skip(1).step_by(2) {
            let is_module = root.join("src").join(format!("{name}.rs")).exists()
                || root.join("src").join(name).join("mod.rs").exists();
            if is_module && !out.contains_key(name) {
                out.insert(name.to_string(), i);
            }
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The `crate::m` paths a file names (comments included: a doc link upward is a smell too).
fn imports(text: &str) -> Vec<String> {
    let mut v: Vec<String> = text
        .match_indices("crate::")
        .filter(|(i, _)| !text[..*i].ends_with("nightshift::"))
        .map(|(i, m)| {
            text[i + m.len()..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                .collect()
        })
        .filter(|s: &String| !s.is_empty())
        .collect();
    v.sort();
    v.dedup();
    v
}

#[test]
fn no_module_imports_from_a_layer_above_its_own() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let map = layers(root);
    assert!(map.len() > 30, "too few modules placed: {map:?}");
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let mut unplaced = Vec::new();
    let mut upward = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(root.join("src")).unwrap();
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if top == "lib" || top == "main" {
            continue;
        }
        let Some(&mine) = map.get(&top) else {
            unplaced.push(top);
            continue;
        };
        let text = std::fs::read_to_string(f).unwrap();
        for m in imports(&text) {
            let Some(&theirs) = map.get(&m) else { continue };
            let forbidden = theirs > mine
                || (top == "tui" && matches!(m.as_str(), "engine" | "runtime" | "store"))
                || (m == "cli" && top != "cli");
            if forbidden {
                upward.push(format!(
                    "src/{}: {top} ({}) imports {m} ({})",
                    rel.display(),
                    LAYERS[mine],
                    LAYERS[theirs]
                ));
            }
        }
    }
    unplaced.sort();
    unplaced.dedup();
    assert!(
        unplaced.is_empty(),
        "modules ARCHITECTURE.md does not place in a layer: {unplaced:?}"
    );
    assert!(upward.is_empty(), "upward imports:\n{}", upward.join("\n"));
}

/// The check sees what it is meant to: an upward import in a file is found.
#[test]
fn the_check_finds_an_upward_import() {
    let text =
        "use crate::plan::Plan;\n// see crate::engine::Engine\nfn f() { nightshift::crate::x(); }";
    assert_eq!(imports(text), vec!["engine", "plan"]);
}

/// Code (not comments) of a file.
fn code(text: &str) -> String {
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The sibling modules a file uses through `super::` (its parent's other children).
fn siblings_used(text: &str, siblings: &[String]) -> Vec<String> {
    let text = code(text);
    let mut names: Vec<String> = Vec::new();
    for (i, m) in text.match_indices("super::") {
        let rest = &text[i + m.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for part in group[..end].split(',') {
                names.push(part.trim().split("::").next().unwrap_or("").to_string());
            }
        } else {
            names.push(
                rest.chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect(),
            );
        }
    }
    names.retain(|n| siblings.contains(n));
    names.sort();
    names.dedup();
    names
}

/// No two modules of one folder use each other: a pair that does is one concept split in
/// two files, or a third concept both need (it goes beneath them).
#[test]
fn no_two_sibling_modules_use_each_other() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut dirs = vec![root.join("src")];
    let mut loops = Vec::new();
    while let Some(dir) = dirs.pop() {
        let mut files = BTreeMap::new();
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let stem = p.file_stem().unwrap().to_string_lossy().to_string();
                if stem != "mod" {
                    files.insert(stem, std::fs::read_to_string(&p).unwrap());
                }
            }
        }
        let names: Vec<String> = files.keys().cloned().collect();
        let uses: BTreeMap<&String, Vec<String>> = files
            .iter()
            .map(|(k, t)| {
                let others: Vec<String> = names.iter().filter(|n| *n != k).cloned().collect();
                (k, siblings_used(t, &others))
            })
            .collect();
        for (a, used) in &uses {
            for b in used {
                if a.as_str() < b.as_str() && uses.get(b).is_some_and(|u| u.contains(*a)) {
                    loops.push(format!("{}: {a} ↔ {b}", dir.display()));
                }
            }
        }
    }
    assert!(
        loops.is_empty(),
        "sibling modules that use each other:\n{}",
        loops.join("\n")
    );
}

#[test]
fn the_sibling_check_reads_paths_and_groups() {
    let sibs = vec!["a".to_string(), "b".to_string(), "c".to_string()];
    let text = "use super::{a, b::X, Clock};\n// super::c in a comment\nfn f() { super::c::g() }";
    assert_eq!(siblings_used(text, &sibs), vec!["a", "b", "c"]);
    assert_eq!(siblings_used("// super::c", &sibs), Vec::<String>::new());
}

/// The names of the functions a file declares `pub` (not `pub(crate)`).
fn pub_fns(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim_start().strip_prefix("pub ")?;
            let l = l.strip_prefix("async ").unwrap_or(l);
            let l = l.strip_prefix("const ").unwrap_or(l);
            let name = l.strip_prefix("fn ")?;
            let end = name.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
            Some(name[..end].to_string())
        })
        .collect()
}

/// `pub(crate)` by default: a function is `pub` only if something outside the library
/// uses it (the binary, the integration tests, the benches). Everything else is
/// `pub(crate)`, so rustc's dead-code lint sees it: a function nothing calls fails the
/// build instead of lingering.
#[test]
fn a_pub_function_is_used_outside_the_crate() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut outside = Vec::new();
    for dir in ["tests", "benches"] {
        if root.join(dir).is_dir() {
            rust_files(&root.join(dir), &mut outside);
        }
    }
    outside.push(root.join("src/main.rs"));
    let used: String = outside
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .collect::<Vec<_>>()
        .join("\n");
    let words: std::collections::HashSet<&str> = used
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .collect();
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let mut wrong = Vec::new();
    for f in files.iter().filter(|f| !f.ends_with("src/main.rs")) {
        let text = std::fs::read_to_string(f).unwrap();
        for name in pub_fns(&text) {
            if !words.contains(name.as_str()) {
                let rel = f.strip_prefix(root).unwrap().display().to_string();
                wrong.push(format!("{rel}: fn {name}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "pub but used only inside the crate (make them pub(crate); rustc then says which are dead):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_pub_check_reads_declarations() {
    let text = "pub fn a() {}\npub(crate) fn b() {}\n    pub async fn c_d(x: u8) {}\nfn e() {}\npub const fn f() {}";
    assert_eq!(pub_fns(text), ["a", "c_d", "f"]);
}
