//! Free space on a filesystem, measured one way (statvfs through rustix): images' disk,
//! the HF cache, and the store and log directories a night writes to.

use std::path::{Path, PathBuf};

/// Space on the filesystem that holds a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Space {
    /// Bytes an unprivileged writer can still use.
    pub avail: u64,
    pub total: u64,
}

/// The space of the filesystem holding `path`, or its nearest existing ancestor (a cache
/// directory may not exist yet). `None` when it cannot be measured.
pub fn space(path: &Path) -> Option<Space> {
    let mut p = path;
    while !p.exists() {
        p = p.parent()?;
    }
    let st = rustix::fs::statvfs(p).ok()?;
    Some(Space {
        avail: st.f_bavail.saturating_mul(st.f_frsize),
        total: st.f_blocks.saturating_mul(st.f_frsize),
    })
}

/// Free bytes on the filesystem holding `path`.
pub(crate) fn free_bytes(path: &Path) -> Option<u64> {
    space(path).map(|s| s.avail)
}

/// `1.5 GiB`, `640.0 MiB`, `12 B`.
pub(crate) fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// "12.0 MiB free of 4.0 GiB" for a path, or why it could not be measured.
pub fn describe(path: &Path) -> String {
    match space(path) {
        Some(s) => format!("{} free of {}", human_bytes(s.avail), human_bytes(s.total)),
        None => "free space unknown".into(),
    }
}

/// The directories a night writes to (the store, the run logs), each with a floor of free
/// space below which the sweep pauses: sled and the log writer then fail cleanly never,
/// because nothing new starts writing.
#[derive(Debug, Clone)]
pub struct Watch {
    pub dirs: Vec<(&'static str, PathBuf)>,
    pub floor: u64,
}

/// What the night's writes need at least, by default: a night's run logs are tens of MiB
/// per run at most, and sled's segments a few MiB; 256 MiB leaves the runs in flight room
/// to finish and the store room to record them.
pub const DEFAULT_FLOOR_MIB: u64 = 256;

impl Watch {
    /// The first directory below the floor, worded for the operator (and the pause reason).
    pub fn low(&self) -> Option<String> {
        self.low_with(space)
    }

    fn low_with(&self, measure: impl Fn(&Path) -> Option<Space>) -> Option<String> {
        self.dirs.iter().find_map(|(what, dir)| {
            let s = measure(dir)?;
            (s.avail < self.floor).then(|| {
                format!(
                    "{PREFIX}{what} {} has {} free of {} (below the {} floor): the sweep pauses until space is freed",
                    dir.display(),
                    human_bytes(s.avail),
                    human_bytes(s.total),
                    human_bytes(self.floor)
                )
            })
        })
    }
}

/// What the watch does at a tick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Below the floor: pause (again, if the operator resumed meanwhile — by level, so the
    /// floor holds all night, not only at the moment space ran low).
    Pause(String),
    /// Back above the floor with room to spare: lift the watch's own pause.
    Resume,
    /// Nothing to do.
    Hold,
}

impl Watch {
    /// Space above the floor a paused night waits for before it resumes, so a disk
    /// hovering at the floor does not flap pause/resume every tick.
    pub(crate) fn margin(&self) -> u64 {
        (self.floor / 4).max(64 << 20)
    }

    /// The tick's decision, given whether the watch had paused the night.
    pub fn step(&self, paused_by_watch: bool) -> Step {
        self.step_with(paused_by_watch, space)
    }

    fn step_with(&self, paused: bool, measure: impl Fn(&Path) -> Option<Space> + Copy) -> Step {
        if let Some(why) = self.low_with(measure) {
            return Step::Pause(why);
        }
        let clear = self.dirs.iter().all(|(_, dir)| {
            measure(dir).is_none_or(|s| s.avail >= self.floor.saturating_add(self.margin()))
        });
        if paused && clear {
            Step::Resume
        } else {
            Step::Hold
        }
    }
}

/// How a pause for disk space begins (the pause itself carries `PauseBy::Disk`: the watch
/// lifts only its own pauses).
pub const PREFIX: &str = crate::state::DISK_PAUSE;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_this_filesystem_and_missing_paths_by_their_ancestor() {
        let here = space(Path::new(".")).expect("statvfs works here");
        assert!(here.total >= here.avail && here.total > 0);
        let missing = space(Path::new("./no/such/dir/yet")).unwrap();
        assert_eq!(missing.total, here.total);
    }

    #[test]
    fn the_floor_holds_by_level_and_resumes_with_a_margin() {
        let w = Watch {
            dirs: vec![("store", PathBuf::from("/s"))],
            floor: 256 << 20,
        };
        let at = |mib: u64| {
            move |_: &Path| {
                Some(Space {
                    avail: mib << 20,
                    total: 1 << 40,
                })
            }
        };
        // Below: pause, and again at every tick while below (a resume does not stick).
        assert!(matches!(w.step_with(false, at(100)), Step::Pause(_)));
        assert!(matches!(w.step_with(true, at(49)), Step::Pause(_)));
        assert!(matches!(w.step_with(false, at(1)), Step::Pause(_)));
        // Just above the floor: no flapping; with the margin: resume.
        assert_eq!(w.step_with(true, at(260)), Step::Hold);
        assert_eq!(w.step_with(true, at(400)), Step::Resume);
        assert_eq!(w.step_with(false, at(400)), Step::Hold);
    }

    #[test]
    fn names_the_first_directory_below_the_floor_with_its_space() {
        let w = Watch {
            dirs: vec![
                ("store", PathBuf::from("/s")),
                ("run logs", PathBuf::from("/l")),
            ],
            floor: 256 << 20,
        };
        let plenty = |_: &Path| {
            Some(Space {
                avail: 1 << 40,
                total: 2 << 40,
            })
        };
        assert_eq!(w.low_with(plenty), None);
        let tight = |p: &Path| {
            Some(Space {
                avail: if p == Path::new("/l") {
                    3 << 20
                } else {
                    1 << 40
                },
                total: 4 << 20,
            })
        };
        let why = w.low_with(tight).unwrap();
        assert!(why.starts_with(PREFIX), "{why}");
        assert!(
            why.contains("run logs /l has 3.0 MiB free of 4.0 MiB"),
            "{why}"
        );
        assert!(why.contains("256.0 MiB floor"), "{why}");
    }
}
