//! Where nightshift keeps what it learns between nights on this machine (XDG base
//! directories). One place, so the runtime's image memos and preflight's lookups agree on
//! it without one reaching into the other.

use std::path::PathBuf;

/// `$XDG_CACHE_HOME/nightshift` (an absolute one), else `~/.cache/nightshift`.
pub(crate) fn cache_root() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map(|d| d.join("nightshift"))
}
