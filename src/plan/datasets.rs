//! The plan's `[datasets]` table and the before-the-night view of how each commit's command
//! is made runnable (era tables only; the runtime re-plans with each image's own client).

use super::{Builder, SourceFile};
use crate::diagnose::predict::PyVersion;
use crate::plan::{BenchKind, CommandView};
use crate::rewrite::flags::FlagSet;
use crate::rewrite::{self, Facts, Invocation, Refusal};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::rc::Rc;

pub const DATASET_HINT: &str =
    "`nightshift prefetch PLAN` downloads ShareGPT; or set its path under [datasets]";

/// `~/x` → `$HOME/x`; relative paths are relative to `base` (the plan's folder).
pub(crate) fn expand_path(p: &str, base: &Path) -> PathBuf {
    let p = match p.strip_prefix("~/") {
        Some(rest) => std::env::var_os("HOME")
            .map(|h| PathBuf::from(h).join(rest))
            .unwrap_or_else(|| PathBuf::from(p)),
        None => PathBuf::from(p),
    };
    if p.is_absolute() {
        p
    } else {
        base.join(p)
    }
}

impl Builder {
    pub(super) fn datasets(
        &mut self,
        raw: &super::raw::RawPlan,
        src: &SourceFile,
        base: &Path,
    ) -> BTreeMap<String, PathBuf> {
        let Some(table) = &raw.datasets else {
            return BTreeMap::new();
        };
        let mut out = BTreeMap::new();
        for (name, path) in table.get_ref() {
            if path.trim().is_empty() {
                self.error(
                    Some(src.loc(table.span().start)),
                    None,
                    "datasets",
                    format!(
                        "[datasets] {name}: empty path (expected a file or folder on this box)"
                    ),
                );
                continue;
            }
            out.insert(name.clone(), expand_path(path.trim(), base));
        }
        out
    }
}

/// The invocation the era tables predict for a commit's command.
/// The era tables for `(kind, version)`, built once per pair: a plan of thousands of
/// commits names a handful of versions, and building the tables is most of what checking
/// one commit costs.
fn era_tables(
    kind: BenchKind,
    raw_version: Option<&str>,
    version: Option<&PyVersion>,
) -> Rc<(FlagSet, FlagSet)> {
    type Key = (BenchKind, Option<String>);
    thread_local! {
        static MEMO: RefCell<HashMap<Key, Rc<(FlagSet, FlagSet)>>> = RefCell::new(HashMap::new());
    }
    let key = (kind, raw_version.map(str::to_string));
    MEMO.with(|m| {
        let mut m = m.borrow_mut();
        if let Some(t) = m.get(&key) {
            return Rc::clone(t);
        }
        // Plans name few versions; the bound only guards against a pathological one.
        if m.len() >= 256 {
            m.clear();
        }
        let t = Rc::new(rewrite::tables(kind, version));
        m.insert(key, Rc::clone(&t));
        t
    })
}

pub(crate) fn static_invocation(
    view: &CommandView,
    mode: Option<BenchKind>,
    vllm_version: Option<&str>,
    model: Option<&str>,
    datasets: &BTreeMap<String, PathBuf>,
) -> Result<Invocation, Refusal> {
    let version = vllm_version.and_then(PyVersion::parse);
    let kind = view.kind.or(mode).unwrap_or(BenchKind::Serving);
    let tables = era_tables(kind, vllm_version, version.as_ref());
    let facts = Facts::from_tables(
        view.kind.or(mode),
        version.as_ref(),
        &tables,
        model,
        datasets,
    );
    rewrite::plan(view, &facts)
}
