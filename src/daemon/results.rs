//! The read path of `results`: docs from the run summaries (or, for per-attempt formats,
//! the event log), the pure report core, and for the table the rows kept in the store's
//! `view` between reads, so a morning's repeated reads of 10,000 runs do not rebuild what
//! did not change.

use crate::report::groups::{FailureGroup, Member};
use crate::report::{self, view};
use crate::store::Store;
use std::sync::OnceLock;

pub fn results_text(
    store: &Store,
    format: &str,
    filter: &[(String, bool, String)],
    judge: report::Judge,
) -> anyhow::Result<String> {
    let mut opts = report::Options::of(judge);
    opts.calibration = store.calibration();
    let kept = match format {
        "table" => Some(view::Text::Table),
        "md" => Some(view::Text::Markdown),
        _ => None,
    };
    if let (Some(text), true) = (kept, filter.is_empty()) {
        let mut out = kept_text(store, text, &opts);
        out.push_str(&groups_text(text, &groups_of(store)));
        return Ok(out);
    }
    // Records of every attempt need the event log; the report itself reads one attempt per
    // run, which the run summaries already hold (fast at 10,000 runs).
    let all = if matches!(format, "json" | "jsonl" | "csv") {
        store.docs()?
    } else {
        store.summary_docs()
    };
    let docs: Vec<_> = store
        .in_order(&all)
        .into_iter()
        .filter(|d| report::matches(d, filter))
        .collect();
    if format == "jsonl" {
        let text = report::render_jsonl(&docs);
        drop(docs);
        drop_aside(all);
        return Ok(text);
    }
    let r = report::build(&docs, &opts);
    let groups = || {
        report::groups::group(
            docs.iter()
                .map(|d| Member::of_record(&d.key, d.info.model.as_deref(), &d.record)),
        )
    };
    let narrow = format
        .strip_prefix("table:")
        .and_then(|w| w.parse::<usize>().ok());
    let text = match format {
        _ if narrow.is_some() => {
            report::narrow::render(&r, narrow.unwrap_or(80))
                + &groups_text(view::Text::Table, &groups())
        }
        "json" => report::render_json(&r, &docs),
        "csv" => report::render_csv(&r, &docs),
        "md" => report::render_md(&r) + &groups_text(view::Text::Markdown, &groups()),
        "html" => {
            crate::report::html::render(&r, store.plan().map_or("sweep", |p| p.name.as_str()))
        }
        _ => report::render_table(&r) + &groups_text(view::Text::Table, &groups()),
    };
    drop(docs);
    drop_aside((all, r));
    Ok(text)
}

/// The failure groups of every run in the store (plan order: a group's first line is its
/// first run's). From the run summaries in memory: no event log, no report; only the runs
/// that failed unknown are put in order.
pub(crate) fn groups_of(store: &Store) -> Vec<FailureGroup> {
    let mut failed: Vec<&crate::record::RunSummary> = store
        .runs()
        .values()
        .filter(|s| Member::of_summary(s).is_unknown_failure())
        .collect();
    failed.sort_by_key(|s| crate::store::view::order_key(s.removed, s.order));
    report::groups::group(failed.into_iter().map(Member::of_summary))
}

/// The groups' section under the table or the Markdown.
fn groups_text(text: view::Text, groups: &[FailureGroup]) -> String {
    match text {
        view::Text::Table => report::groups::render_table(groups),
        view::Text::Markdown => report::groups::render_md(groups),
    }
}

/// Bring the kept texts up to date (the sweep's end does, for the morning's reads).
pub(crate) fn keep_texts(store: &Store) {
    let mut opts = report::Options::of(report::Judge::default());
    opts.calibration = store.calibration();
    for text in [view::Text::Table, view::Text::Markdown] {
        drop_aside(kept_text(store, text, &opts));
    }
}

/// The text, reusing the rows kept from an earlier read where their inputs are unchanged,
/// and keeping the rows it rebuilt (unless this is a private copy of a store in use).
fn kept_text(store: &Store, text: view::Text, opts: &report::Options) -> String {
    use rayon::prelude::*;
    // The night's drifts from its reference runs alone (a few summaries): kept rows are
    // rebuilt when they change (the drifts are among each row's inputs).
    let runs = store.runs();
    let reference_keys: Vec<&str> = runs
        .iter()
        .filter(|(_, s)| s.info.reference)
        .map(|(k, _)| k.as_str())
        .collect();
    let references = crate::store::view::summary_docs_of(runs, &reference_keys);
    let mut with_drifts = opts.clone();
    with_drifts.drifts =
        report::drift::shifts_of(references.iter(), &opts.calibration, opts.stats.alpha);
    let opts = &with_drifts;
    let commits = store.commits_in_order();
    let ids: Vec<&str> = commits.iter().map(|(c, _)| *c).collect();
    let kept = store.kept(text.name(), &ids);
    let salt = build_salt();
    let digests = store.run_digests();
    // An unreadable entry (another build's, or torn) is simply rebuilt; a run changed in
    // memory and not yet written has no digest, and its commit is rebuilt and not kept.
    let pending: Vec<view::Pending> = commits
        .par_iter()
        .zip(kept.par_iter())
        .map(|((_, keys), bytes)| {
            let d: Option<Vec<u64>> = keys.iter().map(|k| digests.get(*k).copied()).collect();
            view::Pending {
                inputs: d.map_or(0, |d| view::inputs_of(salt, text, opts, d)),
                kept: bytes.as_deref().and_then(view::Materialised::from_bytes),
            }
        })
        .collect();
    let t = view::read(
        text,
        pending,
        |i| crate::store::view::summary_docs_of(runs, &commits[i].1),
        opts,
    );
    tracing::debug!(
        "results: {} of {} commits' rows rebuilt, the rest kept",
        t.rebuilt.len(),
        commits.len()
    );
    if !t.rebuilt.is_empty() && !store.is_copy() {
        // Every commit's row now: the kept ones as read, the rebuilt ones anew (a row that
        // cannot be kept is dropped; commits gone from the plan drop out).
        let mut now = kept;
        for (i, m) in &t.rebuilt {
            now[*i] = (m.inputs != 0).then(|| m.to_bytes());
        }
        let entries: Vec<(&str, &[u8])> = ids
            .iter()
            .zip(&now)
            .filter_map(|(id, b)| Some((*id, b.as_deref()?)))
            .collect();
        if let Err(e) = store.keep(text.name(), &entries) {
            tracing::warn!(
                "results: the {} could not be kept for the next read: {e:#}",
                text.name()
            );
        }
    }
    drop_aside(t.rebuilt);
    t.text
}

/// What identifies the build that renders: kept rows from another build are not reused
/// (its rendering or statistics may differ). The version, and the executable's size and
/// modification time.
fn build_salt() -> u64 {
    static SALT: OnceLock<u64> = OnceLock::new();
    *SALT.get_or_init(|| {
        let mut id = env!("CARGO_PKG_VERSION").to_string();
        if let Some(m) = std::env::current_exe()
            .ok()
            .and_then(|p| std::fs::metadata(p).ok())
        {
            let mtime = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            id.push_str(&format!("/{}/{mtime}", m.len()));
        }
        xxhash_rust::xxh3::xxh3_64(id.as_bytes())
    })
}

/// Free what a read built off the caller's path: at 10,000 runs dropping the docs and the
/// report took ≈60 ms after the answer was ready. The CLI exits without waiting for it;
/// the daemon frees it on the side.
fn drop_aside<T: Send + 'static>(v: T) {
    // When no thread can start, the closure (and `v` with it) is dropped right here.
    let _ = std::thread::Builder::new()
        .name("drop".into())
        .spawn(move || drop(v));
}
