//! Helpers the corpus and property tests share: where the shared corpus is, and the
//! proptest configuration whose case count an environment variable sets.
#![allow(dead_code)]

pub mod daemon;

use proptest::test_runner::Config;
use std::path::PathBuf;

/// `../shared/corpus` from the project root; a git worktree sits one level deeper, so
/// the nearest ancestor holding `shared/corpus` is used (or `$NIGHTSHIFT_CORPUS`).
pub fn corpus() -> PathBuf {
    if let Some(dir) = std::env::var_os("NIGHTSHIFT_CORPUS") {
        return PathBuf::from(dir);
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    root.ancestors()
        .skip(1)
        .map(|a| a.join("shared/corpus"))
        .find(|c| c.join("labels.json").is_file())
        .unwrap_or_else(|| root.join("../shared/corpus"))
}

/// The case count comes from `NIGHTSHIFT_PROPTEST_CASES` (default 256), so a long run is
/// one command.
pub fn config() -> Config {
    let cases = std::env::var("NIGHTSHIFT_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}
