//! What happens after a failure: one action per category (configurable), bounded retries
//! with capped exponential backoff, fixes applied at most once per run, and a circuit
//! breaker that stops what keeps failing the same way: the whole sweep when the host is the
//! problem (or when every run fails, across models), only one model's runs when that model
//! keeps failing alike on other commits, so the rest of the night goes on. Pure and
//! synchronous; the engine executes the decision.
//!
//! A failure nobody has named (`other`, or a diagnosis with low confidence) never waits
//! for an operator who is asleep: it is retried once with backoff, then ends `failed` with
//! its telling line, unless the operator's policy names its category explicitly.

use crate::category::{Action, Category};
use crate::diagnose::{DataError, Diagnosis, RecipeBook};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

mod breaker;

pub use breaker::BreakerScope;
use breaker::{Breaker, Failure, Trip};

/// The operator's policy settings (a `[policy]`-style TOML table; unknown keys are errors).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PolicyConfig {
    /// Per-category action overrides, e.g. `version_port_bug = "skip"`.
    pub actions: BTreeMap<Category, Action>,
    /// Retries for `retry` categories without their own limit.
    pub max_retries: u32,
    /// Per-category retry limits (defaults: 1 for timeouts, OOM, NCCL and no_metrics).
    pub retry_limits: BTreeMap<Category, u32>,
    /// First retry delay; doubles per attempt up to the cap.
    pub backoff_base_s: u64,
    pub backoff_cap_s: u64,
    /// `registry_rate_limited`: first wait before pulling again, doubling up to the cap,
    /// unless the registry said when its limit resets.
    pub rate_limit_backoff_base_s: u64,
    pub rate_limit_backoff_cap_s: u64,
    /// Trip the breaker after this many consecutive commits failed alike (0 = off): a host
    /// category pauses the sweep, one model's failure holds that model's runs, and every
    /// run of this many commits failing across models pauses the sweep.
    pub breaker_threshold: u32,
    /// Categories that say nothing about the host (a missing image, a bad patch, an
    /// unsupported model): they neither count towards the breaker nor break a streak.
    pub breaker_ignore: Vec<Category>,
    /// Also apply recipes that can change what is measured without asking.
    pub allow_measurement_changing_fixes: bool,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            actions: BTreeMap::new(),
            max_retries: 2,
            retry_limits: BTreeMap::new(),
            backoff_base_s: 30,
            backoff_cap_s: 600,
            // Docker Hub's anonymous limit is counted over hours; hammering it helps no one.
            rate_limit_backoff_base_s: 600,
            rate_limit_backoff_cap_s: 3600,
            // Five distinct commits in a row: with several GPUs in flight, three alike
            // happen by chance in a sweep of broken commits; five rarely do.
            breaker_threshold: 5,
            breaker_ignore: vec![
                Category::ImageNotFound,
                Category::AgentPatchFailed,
                Category::ModelArchUnsupported,
                Category::RopeScalingIncompatible,
                Category::VersionPortBug,
                // The command, not the box: every attempt would fail the same way.
                Category::BenchCommandInvalid,
                Category::NeedsBuild,
                // The model or the server's options, not the box.
                Category::ModelNotFound,
                Category::ModelTooLarge,
                Category::ServerConfigInvalid,
                // The registry's quota, not the box: it waits and pulls again.
                Category::RegistryRateLimited,
            ],
            allow_measurement_changing_fixes: false,
        }
    }
}

impl PolicyConfig {
    /// Parses a policy table; errors name `origin:line:col`.
    pub fn from_toml(text: &str, origin: &str) -> Result<Self, DataError> {
        toml::from_str(text)
            .map_err(|e| DataError::at(origin, text, e.span().map_or(0, |s| s.start), e.message()))
    }
}

/// The policy's answer for one failed attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub action: Action,
    /// For `auto_fix`: the recipe to apply. For `operator`: the recipe offered (one key).
    pub recipe: Option<String>,
    /// For `retry`: how long to wait first.
    pub retry_after: Option<Duration>,
    /// Set when the whole sweep must pause, with the reason.
    pub pause_sweep: Option<String>,
    /// One readable line for the TUI and the log.
    pub reason: String,
    /// Set when the breaker stops one model's runs (not the sweep): the model, and why.
    #[serde(default)]
    pub hold_model: Option<(String, String)>,
}

pub struct Policy {
    cfg: PolicyConfig,
    recipes: Arc<RecipeBook>,
    breaker: Breaker,
}

impl Policy {
    pub fn new(cfg: PolicyConfig, recipes: Arc<RecipeBook>) -> Self {
        Policy {
            cfg,
            recipes,
            breaker: Breaker::default(),
        }
    }

    pub fn config(&self) -> &PolicyConfig {
        &self.cfg
    }

    /// The action for a category before retries, fixes already applied and the breaker
    /// are considered (what `diagnose --json` prints).
    pub fn default_action(&self, c: Category) -> Action {
        if let Some(a) = self.cfg.actions.get(&c) {
            return *a;
        }
        use Category::*;
        match c {
            Aimv2Conflict | NumpyAbi | LogitsWarperImport | PyairportsMissing | FaUtilsMissing => {
                match self.recipes.for_category(c) {
                    Some(r) if r.automatic(self.cfg.allow_measurement_changing_fixes) => {
                        Action::AutoFix
                    }
                    _ => Action::Operator,
                }
            }
            CudaOom
            | CudaGraphCaptureTimeout
            | ServerStartTimeout
            | BenchTimeout
            | NoMetrics
            | NcclError
            | BrokenPipe
            | RegistryRateLimited
            // The server started offline and needed the Hub: one more try, whose weights
            // prefetch fetches what the cache lacks.
            | HubOffline
            // Nobody named it: one more try, then it ends failed with its telling line
            // (never held for an operator who may be asleep; see `decide_in`).
            | Other => Action::Retry,
            DiskFull | NvidiaRuntimeMissing => Action::PauseSweep,
            // One gated model says nothing of the others: its runs end, the night goes on.
            GatedModelAuth => Action::Skip,
            // A client that refuses its arguments refuses them again: no retry, no server
            // restart. The reason is on the run; a fixed plan and `r` run it again.
            ModelArchUnsupported
            | RopeScalingIncompatible
            | AgentPatchFailed
            | BenchCommandInvalid
            // Compiled sources changed and building is off: benchmarking stale binaries
            // would measure the wrong thing, and no retry changes that.
            | NeedsBuild
            // The model is not on the Hub, or its weights alone exceed the GPUs: none of
            // its runs can succeed as planned.
            | ModelNotFound
            | ModelTooLarge
            // The server refuses the option combination on this version: the command is
            // wrong for it, not the box.
            | ServerConfigInvalid => Action::Skip,
            VersionPortBug | KvCacheTooSmall | EngineCoreInitFailed | ImageNotFound
            | RegistryAuth => Action::Operator,
        }
    }

    /// Retries allowed for a `retry` category.
    pub fn retry_limit(&self, c: Category) -> u32 {
        if let Some(n) = self.cfg.retry_limits.get(&c) {
            return *n;
        }
        match c {
            Category::BrokenPipe => self.cfg.max_retries,
            Category::CudaOom
            | Category::CudaGraphCaptureTimeout
            | Category::ServerStartTimeout
            | Category::BenchTimeout
            | Category::NoMetrics
            | Category::NcclError
            | Category::HubOffline
            | Category::Other => 1,
            // Waiting out a registry's limit is not a retry: no budget, no end.
            Category::RegistryRateLimited => u32::MAX,
            _ => self.cfg.max_retries,
        }
    }

    /// Whether a retry of this category spends the run's retry budget (a rate-limited
    /// pull only waits its turn; an engine counting attempts against a limit leaves it out).
    pub(crate) fn spends_retries(&self, c: Category) -> bool {
        c != Category::RegistryRateLimited || self.cfg.retry_limits.contains_key(&c)
    }

    /// The wait before pulling again after a registry's rate limit, for retry number `n`:
    /// the registry's reset hint in `evidence` when it gave one, else
    /// `rate_limit_backoff_base_s` × 2^(n-1), capped.
    pub(crate) fn rate_limit_wait(&self, n: u32, evidence: &str) -> Duration {
        if let Some(hint) = reset_hint(evidence) {
            return hint;
        }
        let factor = 1u64.checked_shl(n.saturating_sub(1)).unwrap_or(u64::MAX);
        Duration::from_secs(
            self.cfg
                .rate_limit_backoff_base_s
                .saturating_mul(factor)
                .min(self.cfg.rate_limit_backoff_cap_s),
        )
    }

    /// Backoff before retry number `n` (1-based): base × 2^(n-1), capped.
    pub(crate) fn backoff(&self, n: u32) -> Duration {
        let factor = 1u64.checked_shl(n.saturating_sub(1)).unwrap_or(u64::MAX);
        let secs = self
            .cfg
            .backoff_base_s
            .saturating_mul(factor)
            .min(self.cfg.backoff_cap_s);
        Duration::from_secs(secs)
    }

    /// Decides what to do about attempt `attempt` (1-based) of a run that failed with `d`,
    /// given the recipes already applied to this run.
    pub fn decide(
        &mut self,
        d: &Diagnosis,
        attempt: u32,
        fixes_already_applied: &[String],
    ) -> Decision {
        self.decide_for(None, d, attempt, fixes_already_applied)
    }

    /// As [`Policy::decide`], for a run of `commit`. The breaker counts commits, not runs:
    /// the variants of one broken commit failing alike say nothing about the host.
    pub(crate) fn decide_for(
        &mut self,
        commit: Option<&str>,
        d: &Diagnosis,
        attempt: u32,
        fixes_already_applied: &[String],
    ) -> Decision {
        self.decide_in(commit, None, d, attempt, fixes_already_applied)
    }

    /// As [`Policy::decide_for`], for a run of `model`: failures that are the model's
    /// ([`breaker::breaker_scope`]) count towards that model's breaker, which holds only its runs.
    pub(crate) fn decide_in(
        &mut self,
        commit: Option<&str>,
        model: Option<&str>,
        d: &Diagnosis,
        attempt: u32,
        fixes_already_applied: &[String],
    ) -> Decision {
        let cat = d.category;
        let what = if d.predicted {
            format!("{cat} (predicted)")
        } else {
            cat.to_string()
        };
        let recipe = d
            .recipe
            .as_deref()
            .and_then(|n| self.recipes.get(n))
            .or_else(|| self.recipes.for_category(cat));
        let applied = recipe.is_some_and(|r| fixes_already_applied.iter().any(|a| a == &r.name));
        let offer = |r: &crate::diagnose::Recipe| {
            let caveat = if r.changes_measurement {
                " (may change what is measured)"
            } else {
                ""
            };
            format!(
                "press f to apply fix {}{caveat}, r to retry, s to skip",
                r.name
            )
        };

        // A fix that was applied and did not help is the operator's call, whatever the
        // category's default.
        let again = |r: &crate::diagnose::Recipe| {
            format!(
                "{what} again after fix {} — waiting for operator (r to retry, s to skip)",
                r.name
            )
        };
        // A failure nobody named: retried once, then failed — unless the operator's policy
        // names its category, and even then it waits for them only if it says `operator`.
        let unknown = crate::failure_kind::is_unknown(cat, Some(d.confidence), d.predicted);
        let explicit = self.cfg.actions.get(&cat).copied();
        let mut spent = false;
        let mut dec = match self.default_action(cat) {
            _ if unknown && explicit.is_none() => self.unknown_decision(d, &what, attempt),
            Action::AutoFix => match recipe {
                Some(r) if !applied => Decision {
                    action: Action::AutoFix,
                    recipe: Some(r.name.clone()),
                    retry_after: None,
                    pause_sweep: None,
                    hold_model: None,
                    reason: if r.scope == crate::diagnose::recipe::RecipeScope::Commit {
                        format!(
                            "{what} — applying fix {} to every variant of the commit, then retry",
                            r.name
                        )
                    } else {
                        format!("{what} — applying fix {}, then retry", r.name)
                    },
                },
                Some(r) => operator(None, again(r)),
                None => operator(
                    None,
                    format!("{what} — no fix recipe; waiting for operator (r to retry, s to skip)"),
                ),
            },
            Action::Retry if cat == Category::RegistryRateLimited && !self.spends_retries(cat) => {
                let wait = self.rate_limit_wait(attempt, &d.evidence);
                let why = if reset_hint(&d.evidence).is_some() {
                    " (the registry's reset hint)"
                } else {
                    ""
                };
                Decision {
                    action: Action::Retry,
                    recipe: None,
                    retry_after: Some(wait),
                    pause_sweep: None,
                    hold_model: None,
                    reason: format!(
                        "{what} — the registry limits pulls: pulling again in {}{why}; spends no retry, other runs go on",
                        fmt_secs(wait)
                    ),
                }
            }
            Action::Retry => {
                let limit = self.retry_limit(cat);
                let retries = if limit == 1 { "retry" } else { "retries" };
                if attempt <= limit {
                    self.retry_after_backoff(attempt, |wait| {
                        format!("{what} — retry {attempt}/{limit} in {wait}")
                    })
                } else if explicit == Some(Action::Operator) || unknown {
                    // The operator asked to decide these (the engine bounds the wait); an
                    // unknown failure is given up on below, with its telling line.
                    operator(
                        None,
                        format!(
                            "{what} — still failing after {limit} {retries} — waiting for operator (r to retry, s to skip)"
                        ),
                    )
                } else {
                    // Nobody is awake to decide: the run ends failed with its reason.
                    spent = true;
                    ends_failed(format!(
                        "{what} — still failing after {limit} {retries}: failed, the night goes on (r retries it)"
                    ))
                }
            }
            Action::Operator => match recipe {
                Some(r) if !applied => {
                    operator(Some(r.name.clone()), format!("{what} — {}", offer(r)))
                }
                Some(r) => operator(None, again(r)),
                None => operator(
                    None,
                    match hint(cat) {
                        Some(h) => {
                            format!("{what} — {h} — waiting for operator (r to retry, s to skip)")
                        }
                        None => format!("{what} — waiting for operator (r to retry, s to skip)"),
                    },
                ),
            },
            Action::Skip => Decision {
                action: Action::Skip,
                recipe: None,
                retry_after: None,
                pause_sweep: None,
                hold_model: None,
                reason: if cat == Category::GatedModelAuth {
                    format!("{what} — the model's runs end here; the rest of the night goes on (`run --retry-failed {cat}` once the token has access)")
                } else {
                    format!("{what} — cannot run on this commit; skipped (r retries it anyway)")
                },
            },
            Action::PauseSweep => {
                let why =
                    format!("{what} — host-level problem, every later run would fail the same way");
                Decision {
                    action: Action::PauseSweep,
                    recipe: None,
                    retry_after: None,
                    pause_sweep: Some(why.clone()),
                    hold_model: None,
                    reason: format!("{why}; sweep paused (space resumes)"),
                }
            }
        };

        if unknown && dec.action == Action::Operator && explicit != Some(Action::Operator) {
            dec = give_up(d, &what, self.unknown_retry_limit(cat));
        }

        // The breaker counts runs that end failing (not retries, fixes or skips; an
        // unknown failure given up on ends failing).
        let gave_up = (unknown || spent) && dec.action == Action::Skip;
        let counts = (gave_up || matches!(dec.action, Action::Operator | Action::PauseSweep))
            && !self.cfg.breaker_ignore.contains(&cat)
            && !d.predicted;
        if counts {
            let failure = if unknown {
                let k = crate::failure_kind::FailureKind::of_line(
                    crate::failure_kind::telling_line(&d.evidence, &d.telling),
                );
                Failure {
                    category: cat,
                    label: format!("{cat} [kind {}]", k.id),
                    alike: format!("kind:{}", k.id),
                }
            } else {
                Failure::of(cat)
            };
            match self
                .breaker
                .count(self.cfg.breaker_threshold, &failure, commit, model)
            {
                // A run given up on stays failed (not held) whatever the breaker stops.
                Some(Trip::Sweep(why)) => {
                    if !gave_up {
                        dec.action = Action::PauseSweep;
                    }
                    dec.reason = format!("{}; {why} — sweep paused", dec.reason);
                    dec.pause_sweep = Some(why);
                }
                Some(Trip::Model(m, why)) => {
                    if !gave_up {
                        dec.action = Action::Operator;
                    }
                    dec.reason = format!(
                        "{}; {why} — {m}'s queued runs wait (space resumes), other runs go on",
                        dec.reason
                    );
                    dec.hold_model = Some((m, why));
                }
                None => {}
            }
        }
        dec
    }

    /// Retries an unknown failure gets: the category's own limit when the operator set
    /// one, else one.
    pub(crate) fn unknown_retry_limit(&self, c: Category) -> u32 {
        self.cfg.retry_limits.get(&c).copied().unwrap_or(1)
    }

    /// An unknown failure with no policy of its own: retry with backoff, then give up.
    fn unknown_decision(&self, d: &Diagnosis, what: &str, attempt: u32) -> Decision {
        let limit = self.unknown_retry_limit(d.category);
        if attempt > limit {
            return give_up(d, what, limit);
        }
        self.retry_after_backoff(attempt, |wait| {
            format!("{what} (no signature names it) — retry {attempt}/{limit} in {wait}")
        })
    }

    /// A retry after this attempt's backoff; `reason` gets the wait, worded.
    fn retry_after_backoff(&self, attempt: u32, reason: impl FnOnce(String) -> String) -> Decision {
        let wait = self.backoff(attempt);
        Decision {
            action: Action::Retry,
            recipe: None,
            retry_after: Some(wait),
            pause_sweep: None,
            hold_model: None,
            reason: reason(fmt_secs(wait)),
        }
    }

    /// A run of `model` succeeded: the host's streak and the model's are over; other
    /// models' go on counting.
    pub(crate) fn record_success_of(&mut self, model: Option<&str>) {
        self.breaker.success_of(model);
    }
}

/// What the operator can do about a category that has no fix recipe.
fn hint(c: Category) -> Option<&'static str> {
    match c {
        Category::RegistryAuth => Some(
            "the registry refused the pull's credentials: `docker login <registry>` as the user running nightshift (its Docker config, $DOCKER_CONFIG or ~/.docker/config.json, is read at each pull)",
        ),
        _ => None,
    }
}

/// When a registry said its limit resets, if its words say so: `Retry-After: 120`,
/// `ratelimit-reset: 3600`, `retry after 30s`, `try again in 5 minutes`. At most 6 hours
/// (Docker Hub's window), at least a second.
pub(crate) fn reset_hint(text: &str) -> Option<Duration> {
    use std::sync::OnceLock;
    static RE: OnceLock<regex::Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        regex::Regex::new(
            r"(?i)(?:retry-after|ratelimit-reset|x-ratelimit-reset)\W{0,3}(\d{1,6})\b|(?:retry|try again) (?:after|in) (\d{1,6}) ?(s|sec|secs|seconds?|m|min|mins|minutes?|h|hours?)\b",
        )
        .expect("reset hint regex")
    });
    let c = re.captures(text)?;
    let (n, unit) = match (c.get(1), c.get(2)) {
        (Some(n), _) => (n.as_str(), "s"),
        (None, Some(n)) => (n.as_str(), c.get(3).map_or("s", |u| u.as_str())),
        _ => return None,
    };
    let n: u64 = n.parse().ok()?;
    let secs = match unit.to_ascii_lowercase().chars().next() {
        Some('m') => n * 60,
        Some('h') => n * 3600,
        _ => n,
    };
    Some(Duration::from_secs(secs.clamp(1, 6 * 3600)))
}

/// An unknown failure that retrying did not help: the run ends failed, saying what it died
/// of, and the night goes on (no operator is waited for).
fn give_up(d: &Diagnosis, what: &str, retries: u32) -> Decision {
    let line = crate::failure_kind::telling_line(&d.evidence, &d.telling).trim();
    let mut line: String = line.chars().take(200).collect();
    if line.chars().count() == 200 {
        line.push('…');
    }
    let after = match retries {
        0 => String::new(),
        1 => " after 1 retry".to_string(),
        n => format!(" after {n} retries"),
    };
    ends_failed(format!(
        "{what} — failed{after}: {line} — the night goes on (r retries it; `diagnose --learn` names it)"
    ))
}

/// The run ends failed with `reason`: nobody is asked.
fn ends_failed(reason: String) -> Decision {
    Decision {
        action: Action::Skip,
        recipe: None,
        retry_after: None,
        pause_sweep: None,
        hold_model: None,
        reason,
    }
}

fn operator(recipe: Option<String>, reason: String) -> Decision {
    Decision {
        action: Action::Operator,
        recipe,
        retry_after: None,
        pause_sweep: None,
        hold_model: None,
        reason,
    }
}

fn fmt_secs(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 60 && s % 60 == 0 {
        format!("{}m", s / 60)
    } else if s >= 60 {
        format!("{}m{}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests;
