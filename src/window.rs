//! The night's window: start at 7 p.m., read at 7 a.m. Pure: when the window closes, how
//! long a run is expected to take (learned from the night's own runs, else the runtime's
//! typical run), and whether a run may still start. The engine asks; the daemon parses
//! `--until`.
//!
//! The rule that keeps 3-way results whole: a commit whose variants have not started
//! starts only if all of them can finish before the window closes; once one has started,
//! its other variants go first and may start while each can still finish. What cannot
//! start stays queued for the next night and is named in the summary.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// `--until`: a wall-clock time today or tomorrow (`07:00`), or a length of night in the
/// runtime's own time (`+6h`, `+90m`: on the sim, simulated time).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Until {
    Clock { hour: u32, minute: u32 },
    After(Duration),
}

impl std::str::FromStr for Until {
    type Err = String;
    fn from_str(s: &str) -> Result<Until, String> {
        let bad =
            || format!("`{s}` is not a time (07:00) or a length of night (+6h, +90m, +2h30m)");
        let s = s.trim();
        if let Some(rest) = s.strip_prefix('+') {
            return length(rest).map(Until::After).ok_or_else(bad);
        }
        let (h, m) = s.split_once(':').ok_or_else(bad)?;
        let (hour, minute): (u32, u32) =
            (h.parse().map_err(|_| bad())?, m.parse().map_err(|_| bad())?);
        if hour > 23 || minute > 59 {
            return Err(bad());
        }
        Ok(Until::Clock { hour, minute })
    }
}

/// `6h`, `90m`, `2h30m`, `45s`.
fn length(s: &str) -> Option<Duration> {
    let mut total = 0u64;
    let mut num = String::new();
    for c in s.chars() {
        if c.is_ascii_digit() {
            num.push(c);
            continue;
        }
        let n: u64 = num.parse().ok()?;
        num.clear();
        total = total.checked_add(n.checked_mul(match c {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => return None,
        })?)?;
    }
    (num.is_empty() && total > 0 && total <= 7 * 86_400).then(|| Duration::from_secs(total))
}

impl Until {
    /// How long from now, in the runtime's time, given the wall clock's seconds since local
    /// midnight (the caller reads the clock and the time zone).
    pub(crate) fn length_from(self, now_since_midnight: Duration) -> Duration {
        match self {
            Until::After(d) => d,
            Until::Clock { hour, minute } => {
                let at = Duration::from_secs(u64::from(hour * 3600 + minute * 60));
                if at > now_since_midnight {
                    at - now_since_midnight
                } else {
                    at + Duration::from_secs(86_400) - now_since_midnight
                }
            }
        }
    }
}

/// `2h05m`, `45m`.
pub(crate) fn hm(d: Duration) -> String {
    let m = d.as_secs().div_ceil(60);
    if m >= 60 {
        format!("{}h{:02}m", m / 60, m % 60)
    } else {
        format!("{m}m")
    }
}

/// The window as the engine holds it.
#[derive(Debug, Clone)]
pub struct Window {
    /// When it closes, on the engine's (wall) clock.
    pub closes: Instant,
    /// Wall seconds per second of runtime time (the sim's speed; 1 for real runtimes).
    pub scale: f64,
    /// Start runs even when they cannot finish in time (the operator said so).
    pub start_late: bool,
    /// A run's expected length before any has finished tonight, in runtime time.
    pub typical: Duration,
}

/// Run lengths measured tonight (wall), per model.
#[derive(Debug, Default, Clone)]
pub struct Lengths {
    by_model: HashMap<String, Vec<Duration>>,
    all: Vec<Duration>,
}

impl Lengths {
    pub fn record(&mut self, model: Option<&str>, took: Duration) {
        self.all.push(took);
        if let Some(m) = model {
            self.by_model.entry(m.to_string()).or_default().push(took);
        }
    }

    /// The expected wall length of a run of `model`: the median of that model's runs
    /// tonight, else of all runs, else the window's typical run.
    pub fn expect(&self, model: Option<&str>, w: &Window) -> Duration {
        self.expect_or(model, w.typical.mul_f64(w.scale))
    }

    /// As [`Lengths::expect`], with `guess` before any run has ended.
    pub(crate) fn expect_or(&self, model: Option<&str>, guess: Duration) -> Duration {
        let own = model
            .and_then(|m| self.by_model.get(m))
            .filter(|v| !v.is_empty());
        match own.or((!self.all.is_empty()).then_some(&self.all)) {
            Some(v) => median(v),
            None => guess,
        }
    }
}

fn median(v: &[Duration]) -> Duration {
    let mut s = v.to_vec();
    s.sort();
    s[s.len() / 2]
}

impl Window {
    /// May a run expected to take `expect` start at `now`? `commit_started`: a variant of
    /// its commit has started; `rest_fits_now`: the commit's remaining variants all find
    /// free GPUs now (they then run side by side, else one may wait for another).
    pub(crate) fn may_start(
        &self,
        now: Instant,
        expect: Duration,
        commit_started: bool,
        rest_fits_now: bool,
    ) -> bool {
        if self.start_late {
            return now < self.closes;
        }
        let need = if commit_started || rest_fits_now {
            expect
        } else {
            expect * 2
        };
        now + need <= self.closes
    }

    pub fn closed(&self, now: Instant) -> bool {
        now >= self.closes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_clock_times_and_lengths() {
        assert_eq!("07:00".parse(), Ok(Until::Clock { hour: 7, minute: 0 }));
        assert_eq!(
            "+6h".parse(),
            Ok(Until::After(Duration::from_secs(6 * 3600)))
        );
        assert_eq!(
            "+2h30m".parse(),
            Ok(Until::After(Duration::from_secs(9000)))
        );
        for bad in ["25:00", "7", "+", "+6x", "+0m", "+999999h", "ab:cd", ""] {
            assert!(bad.parse::<Until>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_clock_time_already_past_is_tomorrow() {
        let seven = Until::Clock { hour: 7, minute: 0 };
        let at_19 = Duration::from_secs(19 * 3600);
        assert_eq!(seven.length_from(at_19), Duration::from_secs(12 * 3600));
        let at_6 = Duration::from_secs(6 * 3600);
        assert_eq!(seven.length_from(at_6), Duration::from_secs(3600));
    }

    #[test]
    fn a_commit_starts_only_when_its_whole_triple_can_finish() {
        let now = Instant::now();
        let w = Window {
            closes: now + Duration::from_secs(100),
            scale: 1.0,
            start_late: false,
            typical: Duration::from_secs(60),
        };
        let l = Lengths::default();
        let e = l.expect(Some("m"), &w);
        assert_eq!(e, Duration::from_secs(60));
        // Alone on free GPUs it fits; needing to wait for GPUs (2 × 60 s) it does not.
        assert!(w.may_start(now, e, false, true));
        assert!(!w.may_start(now, e, false, false));
        // A started commit's next variant still may.
        assert!(w.may_start(now, e, true, false));
        assert!(!w.may_start(now + Duration::from_secs(50), e, true, false));
        let late = Window {
            start_late: true,
            ..w.clone()
        };
        assert!(late.may_start(now + Duration::from_secs(99), e, false, false));
        assert!(!late.may_start(now + Duration::from_secs(100), e, false, false));
    }

    #[test]
    fn tonights_lengths_replace_the_guess() {
        let w = Window {
            closes: Instant::now(),
            scale: 0.5,
            start_late: false,
            typical: Duration::from_secs(600),
        };
        let mut l = Lengths::default();
        assert_eq!(l.expect(Some("a"), &w), Duration::from_secs(300));
        l.record(Some("b"), Duration::from_secs(40));
        assert_eq!(l.expect(Some("a"), &w), Duration::from_secs(40));
        for s in [10, 12, 14] {
            l.record(Some("a"), Duration::from_secs(s));
        }
        assert_eq!(l.expect(Some("a"), &w), Duration::from_secs(12));
    }
}
