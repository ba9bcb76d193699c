//! CUDA-graph capture that stops making progress.
//!
//! Capture prints a progress line per shape (`Capturing CUDA graph shapes: 45%|… 30/67`)
//! and one line when it ends (`Graph capturing finished in 14 secs`). A hang is not an
//! error line: it is the absence of the next progress line. So the watcher keeps the
//! times of the capture lines and judges a stall by the time that passed after the last
//! one compared with the pace capture had until then. Times come from the engine (when
//! each line arrived) or, for a log file, from the timestamp a line carries.

use regex::Regex;
use std::sync::OnceLock;

/// Silence after the last capture line that is a stall whatever the pace was.
pub(crate) const STALL_MIN_S: f64 = 120.0;
/// …and a stall relative to the slowest step seen so far.
const STALL_PACE_FACTOR: f64 = 20.0;

/// Seconds of some arbitrary epoch from the timestamp at the start of a line: ISO
/// (`2024-07-08T20:49:31.123Z`), vLLM's logger (`INFO 07-08 20:49:31`), syslog-like or
/// a bare clock (`[20:49:31]`). `None` when the line's head carries none.
pub(crate) fn line_time(line: &str) -> Option<f64> {
    static DATED: OnceLock<Regex> = OnceLock::new();
    static CLOCK: OnceLock<Regex> = OnceLock::new();
    // Only the head of the line: a message may quote other times.
    let mut end = line.len().min(64);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    let head = &line[..end];
    let dated = DATED.get_or_init(|| {
        Regex::new(r"(?:\d{4}[-/])?(\d{2})[-/](\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?")
            .expect("dated time regex")
    });
    if let Some(c) = dated.captures(head) {
        let n = |i: usize| c.get(i).and_then(|m| m.as_str().parse::<f64>().ok());
        let day = n(1)? * 31.0 + n(2)?;
        return Some(day * 86400.0 + clock(n(3)?, n(4)?, n(5)?, c.get(6).map(|m| m.as_str())));
    }
    let bare = CLOCK.get_or_init(|| {
        Regex::new(r"(?:^|[\s\[(])(\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?(?:$|[\s\]),|Z])")
            .expect("clock regex")
    });
    let c = bare.captures(head)?;
    let n = |i: usize| c.get(i).and_then(|m| m.as_str().parse::<f64>().ok());
    Some(clock(n(1)?, n(2)?, n(3)?, c.get(4).map(|m| m.as_str())))
}

fn clock(h: f64, m: f64, s: f64, frac: Option<&str>) -> f64 {
    let frac = frac
        .and_then(|f| format!("0.{f}").parse::<f64>().ok())
        .unwrap_or(0.0);
    h * 3600.0 + m * 60.0 + s + frac
}

/// What the watcher concludes about capture when the attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CaptureState {
    /// No capture line, or capture finished.
    Idle,
    /// The last capture line was not followed by the end of capture.
    Unfinished,
    /// …and the time after it is far beyond capture's own pace.
    Stalled,
}

/// Bounded state: the last capture line (as `T`, the scanner's candidate) and the pace.
#[derive(Debug, Clone)]
pub(crate) struct CaptureWatch<T> {
    last: Option<T>,
    last_at: Option<f64>,
    /// Longest time between two consecutive capture lines.
    slowest_step: f64,
    /// Latest time seen on any line after the last capture line.
    latest_after: Option<f64>,
}

impl<T> Default for CaptureWatch<T> {
    fn default() -> Self {
        CaptureWatch {
            last: None,
            last_at: None,
            slowest_step: 0.0,
            latest_after: None,
        }
    }
}

impl<T> CaptureWatch<T> {
    /// One line: whether it is capture progress or the end of capture, and its time.
    pub(crate) fn observe(
        &mut self,
        progress: bool,
        done: bool,
        at: Option<f64>,
        cand: impl FnOnce() -> T,
    ) {
        if done {
            *self = Self::default();
            return;
        }
        if progress {
            if let (Some(prev), Some(now)) = (self.last_at, at) {
                if now >= prev {
                    self.slowest_step = self.slowest_step.max(now - prev);
                }
            }
            self.last = Some(cand());
            self.last_at = at.or(self.last_at);
            self.latest_after = None;
            return;
        }
        if self.last.is_some() {
            if let Some(t) = at {
                self.latest_after = Some(self.latest_after.map_or(t, |l: f64| l.max(t)));
            }
        }
    }

    /// The last capture line, if capture had not finished.
    pub(crate) fn last(&self) -> Option<&T> {
        self.last.as_ref()
    }

    pub(crate) fn state(&self) -> CaptureState {
        if self.last.is_none() {
            return CaptureState::Idle;
        }
        let silent = match (self.last_at, self.latest_after) {
            (Some(a), Some(b)) if b >= a => b - a,
            _ => return CaptureState::Unfinished,
        };
        if silent >= STALL_MIN_S.max(STALL_PACE_FACTOR * self.slowest_step) {
            CaptureState::Stalled
        } else {
            CaptureState::Unfinished
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_from_line_heads() {
        let a = line_time("INFO 07-08 20:49:31 [x.py:1] hi").unwrap();
        let b = line_time("(EngineCore pid=1) INFO 07-08 20:51:31 [x.py:1] hi").unwrap();
        assert_eq!(b - a, 120.0);
        let c = line_time("2024-07-08T20:49:31.500Z x").unwrap();
        assert_eq!(c - a, 0.5);
        assert_eq!(
            line_time("[20:49:31] x"),
            Some(20.0 * 3600.0 + 49.0 * 60.0 + 31.0)
        );
        assert_eq!(
            line_time("Capturing CUDA graphs: 45%|#| 30/67 [00:12<00:15]"),
            None
        );
        assert_eq!(line_time("no time here"), None);
    }

    #[test]
    fn stall_is_judged_by_pace() {
        let mut w: CaptureWatch<u32> = CaptureWatch::default();
        assert_eq!(w.state(), CaptureState::Idle);
        for (i, t) in [0.0, 1.0, 2.5, 3.0].into_iter().enumerate() {
            w.observe(true, false, Some(t), || i as u32);
        }
        w.observe(false, false, Some(60.0), || 9);
        assert_eq!(w.state(), CaptureState::Unfinished);
        w.observe(false, false, Some(3.0 + STALL_MIN_S), || 9);
        assert_eq!(w.state(), CaptureState::Stalled);
        assert_eq!(w.last(), Some(&3));
        w.observe(false, true, None, || 9);
        assert_eq!(w.state(), CaptureState::Idle);

        // A slow capture (a minute per shape) is not stalled after three minutes.
        let mut w: CaptureWatch<u32> = CaptureWatch::default();
        w.observe(true, false, Some(0.0), || 0);
        w.observe(true, false, Some(60.0), || 1);
        w.observe(false, false, Some(240.0), || 2);
        assert_eq!(w.state(), CaptureState::Unfinished);
        // No times at all: unfinished, never stalled.
        let mut w: CaptureWatch<u32> = CaptureWatch::default();
        w.observe(true, false, None, || 0);
        w.observe(false, false, None, || 1);
        assert_eq!(w.state(), CaptureState::Unfinished);
    }
}
