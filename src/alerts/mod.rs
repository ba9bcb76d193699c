//! Alerts for a night with nobody watching: which moments deserve one, how often, and what
//! it says. Pure: [`Alerter`] takes the sweep's events and the clock and returns the alerts
//! to send; delivery ([`send`]) is at the edge.
//!
//! When: the sweep paused (whatever paused it: the breaker, the disk, a held run), runs held
//! for the operator longer than a threshold, a new kind of unknown failure appeared (one
//! no signature names, [`crate::failure_kind`]), the sweep finished, the daemon restarted
//! after a crash. An operator's own pause is not news to them, so it alerts no one.
//!
//! How often: one alert per kind per `per_kind_gap` (repeats are counted into the next),
//! and at most `per_hour` in any hour: a broken night must not flood a phone.

pub mod send;

use crate::event::{Envelope, Event};
use crate::model::{PauseBy, RunState};
use crate::state::SweepState;
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};

/// Where alerts go (`run --alert-*`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Targets {
    /// Generic JSON (the [`Alert`] itself) POSTed to each.
    pub webhooks: Vec<String>,
    /// Slack/Discord-compatible incoming webhooks (`text` and `content`).
    pub slack: Vec<String>,
    /// ntfy topic URLs (plain-text body, Title/Tags/Priority headers).
    pub ntfy: Vec<String>,
    /// Shell commands run with the alert in the environment and as JSON on stdin.
    pub commands: Vec<String>,
    /// Variables of the daemon's environment the commands get beyond the few a shell
    /// needs ([`send::HOOK_ENV`]): the operator names them (`--alert-env`); nothing else
    /// of the daemon's environment (its tokens, registry passwords) reaches a command.
    pub command_env: Vec<String>,
}

impl Targets {
    pub fn is_empty(&self) -> bool {
        self.webhooks.is_empty()
            && self.slack.is_empty()
            && self.ntfy.is_empty()
            && self.commands.is_empty()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Paused,
    Held,
    /// A failure of a kind not seen before tonight that no signature names.
    NewFailure,
    Finished,
    Restarted,
    /// The drift reference moved beyond the noise band.
    Drift,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Paused => "paused",
            Kind::Held => "held",
            Kind::NewFailure => "new_failure",
            Kind::Finished => "finished",
            Kind::Restarted => "restarted",
            Kind::Drift => "drift",
        }
    }
}

/// One alert, as every target gets it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Alert {
    pub sweep: String,
    pub kind: Kind,
    pub title: String,
    pub text: String,
    pub at_ms: u64,
    /// Alerts of this kind held back by the rate limit since the last one sent.
    pub suppressed: u32,
}

#[derive(Debug, Clone)]
pub struct Limits {
    /// A run held this long (ms) without a decision alerts.
    pub held_after_ms: u64,
    pub per_kind_gap_ms: u64,
    pub per_hour: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            held_after_ms: 30 * 60_000,
            per_kind_gap_ms: 10 * 60_000,
            per_hour: 12,
        }
    }
}

/// Decides which alerts to send, from the events and the clock.
pub struct Alerter {
    sweep: String,
    limits: Limits,
    state: SweepState,
    /// Runs held, since when (ms).
    held_since: BTreeMap<u32, u64>,
    /// Held runs already alerted about.
    held_told: std::collections::BTreeSet<u32>,
    last_sent: BTreeMap<Kind, u64>,
    suppressed: BTreeMap<Kind, u32>,
    sent_times: VecDeque<u64>,
    /// Unknown failure kinds already seen (in the state it started from, or since).
    kinds_seen: std::collections::BTreeSet<String>,
}

impl Alerter {
    pub fn new(sweep: &str, state: SweepState, limits: Limits) -> Self {
        // A restart does not announce the kinds the night had already met.
        let kinds_seen = state
            .runs
            .iter()
            .filter_map(|r| r.finding.as_ref())
            .filter_map(crate::failure_kind::unknown_kind_id)
            .collect();
        Alerter {
            kinds_seen,
            sweep: sweep.to_string(),
            limits,
            state,
            held_since: BTreeMap::new(),
            held_told: Default::default(),
            last_sent: BTreeMap::new(),
            suppressed: BTreeMap::new(),
            sent_times: VecDeque::new(),
        }
    }

    /// The daemon took its store over from one that died.
    pub fn restarted(&mut self, now_ms: u64, detail: &str) -> Vec<Alert> {
        let c = self.state.counts();
        self.emit(
            Kind::Restarted,
            now_ms,
            "the sweep's daemon restarted after a crash".into(),
            format!(
                "{detail}; resuming: {}/{} done, {} queued",
                c.done(),
                c.total,
                c.queued
            ),
        )
    }

    pub fn on_event(&mut self, env: &Envelope) -> Vec<Alert> {
        let _ = self.state.apply(env);
        let now = env.at_ms;
        match &env.event {
            Event::Paused { reason, by } if by.or_of_text(reason) != PauseBy::Operator => self
                .emit(
                    Kind::Paused,
                    now,
                    "the sweep paused".into(),
                    format!("{reason} — `nightshift attach` to decide"),
                ),
            Event::Diagnosed { run, finding, .. } => {
                match crate::failure_kind::unknown_kind_id(finding) {
                    Some(id) if self.kinds_seen.insert(id.clone()) => {
                        let line =
                            crate::failure_kind::telling_line(&finding.evidence, &finding.telling)
                                .trim();
                        let line: String = line.chars().take(300).collect();
                        self.emit(
                            Kind::NewFailure,
                            now,
                            format!("a new kind of failure: {id} ({})", finding.category),
                            format!(
                                "run {run} failed with an error no signature names: {line} — `nightshift results --group {id}` lists its runs, `nightshift diagnose --learn {id} --category NAME` names it; the night goes on"
                            ),
                        )
                    }
                    _ => self.tick(now),
                }
            }
            Event::Drift { shift } => self.emit(
                Kind::Drift,
                now,
                "the box drifted".into(),
                format!(
                    "{}; comparisons measured across it are marked in `nightshift results`",
                    shift.describe()
                ),
            ),
            Event::ModelPaused { model, reason } => self.emit(
                Kind::Paused,
                now,
                format!("the runs of {model} paused"),
                format!("{reason}; other runs go on — `nightshift attach`, space resumes"),
            ),
            Event::State { run, to, .. } => {
                if matches!(to, RunState::Held { .. }) {
                    self.held_since.entry(run.0).or_insert(now);
                } else {
                    self.held_since.remove(&run.0);
                    self.held_told.remove(&run.0);
                }
                self.tick(now)
            }
            Event::SweepFinished { interrupted } => {
                let c = self.state.counts();
                let how = if *interrupted { "stopped" } else { "finished" };
                self.emit(
                    Kind::Finished,
                    now,
                    format!("the sweep {how}"),
                    format!(
                        "{}/{} done: {} ok, {} failed, {} skipped, {} held, {} queued",
                        c.done(),
                        c.total,
                        c.success,
                        c.failed,
                        c.skipped,
                        c.held,
                        c.queued
                    ),
                )
            }
            _ => self.tick(now),
        }
    }

    /// Held runs past the threshold (call now and then even without events).
    pub fn tick(&mut self, now_ms: u64) -> Vec<Alert> {
        let overdue: Vec<u32> = self
            .held_since
            .iter()
            .filter(|(r, since)| {
                now_ms.saturating_sub(**since) >= self.limits.held_after_ms
                    && !self.held_told.contains(r)
            })
            .map(|(r, _)| *r)
            .collect();
        if overdue.is_empty() {
            return Vec::new();
        }
        let out = self.emit(
            Kind::Held,
            now_ms,
            format!(
                "{} run(s) waiting for the operator for over {} min",
                overdue.len(),
                self.limits.held_after_ms / 60_000
            ),
            format!(
                "runs #{} wait for a decision (fix, retry or skip) — `nightshift attach`",
                overdue
                    .iter()
                    .map(|r| r.to_string())
                    .collect::<Vec<_>>()
                    .join(", #")
            ),
        );
        if !out.is_empty() {
            self.held_told.extend(overdue);
        }
        out
    }

    fn emit(&mut self, kind: Kind, now: u64, title: String, text: String) -> Vec<Alert> {
        while self
            .sent_times
            .front()
            .is_some_and(|t| now.saturating_sub(*t) >= 3_600_000)
        {
            self.sent_times.pop_front();
        }
        let too_soon = self
            .last_sent
            .get(&kind)
            .is_some_and(|t| now.saturating_sub(*t) < self.limits.per_kind_gap_ms);
        // The sweep's end always goes out: it is the one the operator waits for.
        let over_hour = self.sent_times.len() >= self.limits.per_hour;
        if kind != Kind::Finished && (too_soon || over_hour) {
            *self.suppressed.entry(kind).or_default() += 1;
            return Vec::new();
        }
        self.last_sent.insert(kind, now);
        self.sent_times.push_back(now);
        vec![Alert {
            sweep: self.sweep.clone(),
            kind,
            title,
            text,
            at_ms: now,
            suppressed: self.suppressed.remove(&kind).unwrap_or(0),
        }]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::category::Category;
    use crate::model::RunId;

    fn env(at_ms: u64, event: Event) -> Envelope {
        Envelope {
            seq: 0,
            at_ms,
            event,
        }
    }

    fn alerter() -> Alerter {
        let st = SweepState {
            runs: vec![Default::default(); 3],
            ..Default::default()
        };
        Alerter::new("night", st, Limits::default())
    }

    #[test]
    fn pauses_alert_once_per_gap_and_the_operators_own_never() {
        let mut a = alerter();
        let op = env(
            0,
            Event::Paused {
                reason: "paused by the operator".into(),
                by: PauseBy::Operator,
            },
        );
        assert!(a.on_event(&op).is_empty());
        let p = |t| {
            env(
                t,
                Event::Paused {
                    reason: "disk full".into(),
                    by: PauseBy::Policy,
                },
            )
        };
        assert_eq!(a.on_event(&p(1_000)).len(), 1);
        assert!(a.on_event(&p(2_000)).is_empty());
        assert!(a.on_event(&p(3_000)).is_empty());
        let later = a.on_event(&p(11 * 60_000));
        assert_eq!(later.len(), 1);
        assert_eq!(later[0].suppressed, 2);
    }

    #[test]
    fn held_runs_alert_after_the_threshold_once() {
        let mut a = alerter();
        let held = env(
            0,
            Event::State {
                run: RunId(1),
                attempt: 1,
                from: RunState::Queued,
                to: RunState::Held {
                    category: Category::Other,
                },
                gpus: vec![],
                detail: None,
                interrupted: false,
            },
        );
        assert!(a.on_event(&held).is_empty());
        assert!(a.tick(29 * 60_000).is_empty());
        let got = a.tick(31 * 60_000);
        assert_eq!(got.len(), 1);
        assert!(got[0].text.contains("#1"), "{:?}", got[0]);
        assert!(a.tick(90 * 60_000).is_empty(), "told once");
    }

    #[test]
    fn a_new_unknown_kind_alerts_once_and_a_known_one_never() {
        use crate::category::Action;
        let finding = |category, line: &str, confidence| crate::event::Finding {
            category,
            evidence: "ERROR x".into(),
            action: Action::Retry,
            recipe: None,
            reason: String::new(),
            predicted: false,
            confidence: Some(confidence),
            telling: vec![line.to_string()],
            kind: None,
        };
        let diag = |t, run, f| {
            env(
                t,
                Event::Diagnosed {
                    run: RunId(run),
                    attempt: 1,
                    finding: f,
                },
            )
        };
        let mut a = alerter();
        let first = a.on_event(&diag(
            0,
            0,
            finding(Category::Other, "RuntimeError: shard 3 at /a/b lost", 0.3),
        ));
        assert_eq!(first.len(), 1, "{first:?}");
        assert_eq!(first[0].kind, Kind::NewFailure);
        assert!(first[0].text.contains("RuntimeError: shard 3 at /a/b lost"));
        assert!(first[0].text.contains("--group"), "{}", first[0].text);
        // The same kind on another run (numbers and paths differ): no news.
        let again = a.on_event(&diag(
            20 * 60_000,
            1,
            finding(Category::Other, "RuntimeError: shard 9 at /c/d lost", 0.3),
        ));
        assert!(again.is_empty(), "{again:?}");
        // A named failure is not unknown.
        let named = a.on_event(&diag(
            40 * 60_000,
            2,
            finding(Category::CudaOom, "torch.OutOfMemoryError", 0.9),
        ));
        assert!(named.is_empty());
        // Another unknown kind is.
        let other = a.on_event(&diag(
            60 * 60_000,
            2,
            finding(Category::Other, "KeyError: 'weight'", 0.3),
        ));
        assert_eq!(other.len(), 1);
        // A restarted daemon's alerter knows the kinds its state already holds.
        let mut st = SweepState {
            runs: vec![Default::default(); 1],
            ..Default::default()
        };
        st.runs[0].finding = Some(finding(Category::Other, "KeyError: 'weight'", 0.3));
        let mut b = Alerter::new("night", st, Limits::default());
        assert!(b
            .on_event(&diag(
                0,
                0,
                finding(Category::Other, "KeyError: 'weight'", 0.3)
            ))
            .is_empty());
    }

    #[test]
    fn an_hour_holds_at_most_the_limit_but_the_end_always_goes() {
        let mut a = alerter();
        let mut sent = 0;
        for i in 0..40u64 {
            let r = env(
                i * 11 * 60_000 / 10,
                Event::Paused {
                    reason: format!("r{i}"),
                    by: PauseBy::Policy,
                },
            );
            sent += a.on_event(&r).len();
        }
        assert!(sent <= 12, "{sent}");
        let end = env(3_000_000, Event::SweepFinished { interrupted: false });
        assert_eq!(a.on_event(&end).len(), 1);
    }
}
