//! What happens after a failure: one action per category (configurable), bounded retries
//! with capped exponential backoff, fixes applied at most once per run, and a circuit
//! breaker that stops what keeps failing the same way: the whole sweep when the host is the
//! problem, only one model's runs when that model keeps failing alike on other commits
//! (its memory, its start-up), so the rest of the night goes on. Pure and synchronous;
//! the engine executes the decision.

use crate::category::{Action, Category};
use crate::diagnose::{DataError, Diagnosis, RecipeBook};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

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
    /// Pause the sweep after this many runs in a row failed with one category (0 = off).
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

/// What a tripped breaker stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerScope {
    /// The host: every later run would fail the same way (disk, driver, NCCL, unknown).
    Host,
    /// The model: too big for the box as configured, too slow to start, its outputs.
    /// Other models' runs go on.
    Model,
}

/// The one place that says which failures are a model's rather than the host's.
pub fn breaker_scope(c: Category) -> BreakerScope {
    match c {
        Category::CudaOom
        | Category::KvCacheTooSmall
        | Category::ServerStartTimeout
        | Category::CudaGraphCaptureTimeout
        | Category::EngineCoreInitFailed
        | Category::NoMetrics
        | Category::BenchTimeout => BreakerScope::Model,
        _ => BreakerScope::Host,
    }
}

pub struct Policy {
    cfg: PolicyConfig,
    recipes: Arc<RecipeBook>,
    /// Per scope (None: the host; Some(model)): (category, runs in a row, the commit that
    /// last counted).
    streaks: BTreeMap<Option<String>, (Category, u32, Option<String>)>,
}

impl Policy {
    pub fn new(cfg: PolicyConfig, recipes: Arc<RecipeBook>) -> Self {
        Policy {
            cfg,
            recipes,
            streaks: BTreeMap::new(),
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
            | RegistryRateLimited => Action::Retry,
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
            | NeedsBuild => Action::Skip,
            VersionPortBug | KvCacheTooSmall | EngineCoreInitFailed | ImageNotFound
            | RegistryAuth | Other => Action::Operator,
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
            | Category::NcclError => 1,
            // Waiting out a registry's limit is not a retry: no budget, no end.
            Category::RegistryRateLimited => u32::MAX,
            _ => self.cfg.max_retries,
        }
    }

    /// Whether a retry of this category spends the run's retry budget (a rate-limited
    /// pull only waits its turn; an engine counting attempts against a limit leaves it out).
    pub fn spends_retries(&self, c: Category) -> bool {
        c != Category::RegistryRateLimited || self.cfg.retry_limits.contains_key(&c)
    }

    /// The wait before pulling again after a registry's rate limit, for retry number `n`:
    /// the registry's reset hint in `evidence` when it gave one, else
    /// `rate_limit_backoff_base_s` × 2^(n-1), capped.
    pub fn rate_limit_wait(&self, n: u32, evidence: &str) -> Duration {
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
    pub fn backoff(&self, n: u32) -> Duration {
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
    pub fn decide_for(
        &mut self,
        commit: Option<&str>,
        d: &Diagnosis,
        attempt: u32,
        fixes_already_applied: &[String],
    ) -> Decision {
        self.decide_in(commit, None, d, attempt, fixes_already_applied)
    }

    /// As [`Policy::decide_for`], for a run of `model`: failures that are the model's
    /// ([`breaker_scope`]) count towards that model's breaker, which holds only its runs.
    pub fn decide_in(
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
        let mut dec = match self.default_action(cat) {
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
                if attempt <= limit {
                    let wait = self.backoff(attempt);
                    Decision {
                        action: Action::Retry,
                        recipe: None,
                        retry_after: Some(wait),
                        pause_sweep: None,
                        hold_model: None,
                        reason: format!("{what} — retry {attempt}/{limit} in {}", fmt_secs(wait)),
                    }
                } else {
                    operator(
                        None,
                        format!(
                            "{what} — still failing after {limit} {} — waiting for operator (r to retry, s to skip)",
                            if limit == 1 { "retry" } else { "retries" }
                        ),
                    )
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

        // The breaker counts runs that end failing (not retries, fixes or skips).
        let counts = matches!(dec.action, Action::Operator | Action::PauseSweep)
            && !self.cfg.breaker_ignore.contains(&cat)
            && !d.predicted;
        if counts {
            let scope = match (breaker_scope(cat), model) {
                (BreakerScope::Model, Some(m)) => Some(m.to_string()),
                _ => None,
            };
            let n = match self.streaks.get(&scope) {
                Some((c, n, last)) if *c == cat => {
                    let same_commit = commit.is_some() && last.as_deref() == commit;
                    if same_commit {
                        *n
                    } else {
                        n + 1
                    }
                }
                _ => 1,
            };
            self.streaks
                .insert(scope.clone(), (cat, n, commit.map(str::to_string)));
            if self.cfg.breaker_threshold > 0 && n >= self.cfg.breaker_threshold {
                self.streaks.remove(&scope);
                match scope {
                    None => {
                        let why = format!("breaker tripped: {n} × {cat} in a row");
                        dec.action = Action::PauseSweep;
                        dec.reason = format!("{}; {why} — sweep paused", dec.reason);
                        dec.pause_sweep = Some(why);
                    }
                    Some(m) => {
                        let why = format!("breaker tripped: {n} × {cat} in a row on {m}");
                        dec.action = Action::Operator;
                        dec.reason = format!(
                            "{}; {why} — {m}'s queued runs wait (space resumes), other runs go on",
                            dec.reason
                        );
                        dec.hold_model = Some((m, why));
                    }
                }
            }
        }
        dec
    }

    /// A run succeeded: every failure streak is over.
    pub fn record_success(&mut self) {
        self.streaks.clear();
    }

    /// A run of `model` succeeded: the host's streak and the model's are over; other
    /// models' go on counting.
    pub fn record_success_of(&mut self, model: Option<&str>) {
        self.streaks
            .retain(|scope, _| scope.is_some() && scope.as_deref() != model);
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
pub fn reset_hint(text: &str) -> Option<Duration> {
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
mod tests {
    use super::*;

    fn diag(c: Category) -> Diagnosis {
        Diagnosis {
            category: c,
            evidence: "e".into(),
            stream: None,
            line_no: None,
            recipe: None,
            predicted: false,
            confidence: 0.9,
            telling: vec![],
        }
    }

    fn policy(cfg: PolicyConfig) -> Policy {
        Policy::new(cfg, Arc::new(RecipeBook::builtin()))
    }

    #[test]
    fn every_category_has_a_default_action() {
        let p = policy(PolicyConfig::default());
        use Category::*;
        let expect = [
            (VersionPortBug, Action::Operator),
            (Aimv2Conflict, Action::AutoFix),
            (FaUtilsMissing, Action::AutoFix),
            // Environment workarounds: applied to every variant of the commit alike.
            (NumpyAbi, Action::AutoFix),
            (LogitsWarperImport, Action::AutoFix),
            (PyairportsMissing, Action::AutoFix),
            (CudaOom, Action::Retry),
            (CudaGraphCaptureTimeout, Action::Retry),
            (ServerStartTimeout, Action::Retry),
            (BenchTimeout, Action::Retry),
            (NoMetrics, Action::Retry),
            (BrokenPipe, Action::Retry),
            (NcclError, Action::Retry),
            (DiskFull, Action::PauseSweep),
            (NvidiaRuntimeMissing, Action::PauseSweep),
            (GatedModelAuth, Action::Skip),
            (ModelArchUnsupported, Action::Skip),
            (RopeScalingIncompatible, Action::Skip),
            (AgentPatchFailed, Action::Skip),
            (BenchCommandInvalid, Action::Skip),
            (NeedsBuild, Action::Skip),
            (RegistryAuth, Action::Operator),
            (RegistryRateLimited, Action::Retry),
            (KvCacheTooSmall, Action::Operator),
            (EngineCoreInitFailed, Action::Operator),
            (ImageNotFound, Action::Operator),
            (Other, Action::Operator),
        ];
        assert_eq!(expect.len(), Category::ALL.len());
        for (c, a) in expect {
            assert_eq!(p.default_action(c), a, "{c}");
        }
    }

    #[test]
    fn auto_fix_applies_once_then_asks() {
        let mut p = policy(PolicyConfig::default());
        let d = diag(Category::Aimv2Conflict);
        let first = p.decide(&d, 1, &[]);
        assert_eq!(first.action, Action::AutoFix);
        assert_eq!(first.recipe.as_deref(), Some("aimv2-exist-ok"));
        assert_eq!(
            first.reason,
            "aimv2_conflict — applying fix aimv2-exist-ok, then retry"
        );
        let again = p.decide(&d, 2, &["aimv2-exist-ok".to_string()]);
        assert_eq!(again.action, Action::Operator);
        assert_eq!(again.recipe, None);
        assert!(
            again.reason.contains("again after fix aimv2-exist-ok"),
            "{}",
            again.reason
        );
    }

    #[test]
    fn measurement_changing_fixes_are_offered_not_applied() {
        // Environment workarounds go to every variant of the commit without asking.
        let mut p = policy(PolicyConfig::default());
        let d = p.decide(&diag(Category::NumpyAbi), 1, &[]);
        assert_eq!(d.action, Action::AutoFix);
        assert_eq!(d.recipe.as_deref(), Some("numpy-lt-2"));
        assert!(
            d.reason.contains("to every variant of the commit"),
            "{}",
            d.reason
        );
        // The same fix on one run's image only would make the comparison unfair: offered.
        let book = RecipeBook::builtin()
            .with_overrides(
                "[[recipe]]\nname = \"numpy-lt-2\"\nfixes = [\"numpy_abi\"]\nchanges_measurement = true\nscope = \"run\"\nenvironment_workaround = true\n",
                "ops.toml",
            )
            .unwrap();
        let mut p = Policy::new(PolicyConfig::default(), Arc::new(book.clone()));
        let d = p.decide(&diag(Category::NumpyAbi), 1, &[]);
        assert_eq!(d.action, Action::Operator);
        assert!(
            d.reason
                .contains("press f to apply fix numpy-lt-2 (may change what is measured)"),
            "{}",
            d.reason
        );
        let mut p = Policy::new(
            PolicyConfig {
                allow_measurement_changing_fixes: true,
                ..Default::default()
            },
            Arc::new(book),
        );
        let d = p.decide(&diag(Category::NumpyAbi), 1, &[]);
        assert_eq!(d.action, Action::AutoFix);
    }

    #[test]
    fn retries_back_off_with_a_cap_then_go_to_the_operator() {
        let mut p = policy(PolicyConfig {
            max_retries: 4,
            backoff_base_s: 30,
            backoff_cap_s: 100,
            breaker_threshold: 0,
            ..Default::default()
        });
        let d = diag(Category::BrokenPipe);
        let waits: Vec<_> = (1..=4)
            .map(|a| p.decide(&d, a, &[]).retry_after.unwrap().as_secs())
            .collect();
        assert_eq!(waits, [30, 60, 100, 100]);
        let fifth = p.decide(&d, 5, &[]);
        assert_eq!(fifth.action, Action::Operator);
        assert!(fifth.reason.contains("after 4 retries"), "{}", fifth.reason);
        assert_eq!(p.backoff(200), Duration::from_secs(100));
    }

    #[test]
    fn timeouts_and_no_metrics_retry_once() {
        for c in [
            Category::NoMetrics,
            Category::BenchTimeout,
            Category::ServerStartTimeout,
        ] {
            let mut p = policy(PolicyConfig::default());
            let d1 = p.decide(&diag(c), 1, &[]);
            assert_eq!(d1.action, Action::Retry, "{c}");
            assert_eq!(d1.reason, format!("{c} — retry 1/1 in 30s"));
            assert_eq!(p.decide(&diag(c), 2, &[]).action, Action::Operator, "{c}");
        }
    }

    #[test]
    fn skip_and_host_level_categories() {
        let mut p = policy(PolicyConfig::default());
        for c in [
            Category::ModelArchUnsupported,
            Category::RopeScalingIncompatible,
        ] {
            let d = p.decide(&diag(c), 1, &[]);
            assert_eq!(d.action, Action::Skip);
            assert!(d.pause_sweep.is_none());
        }
        let d = p.decide(&diag(Category::NvidiaRuntimeMissing), 1, &[]);
        assert_eq!(d.action, Action::PauseSweep);
        assert!(d.pause_sweep.unwrap().contains("nvidia_runtime_missing"));
    }

    #[test]
    fn port_bug_waits_for_the_operator_by_default_and_can_be_skipped() {
        let mut p = policy(PolicyConfig::default());
        let pred = crate::diagnose::predict_port_bug("0.6.4.post2.dev218", true).unwrap();
        let d = p.decide(&pred, 1, &[]);
        assert_eq!(d.action, Action::Operator);
        assert_eq!(d.recipe.as_deref(), Some("port-bug-spawn"));
        assert!(
            d.reason
                .starts_with("version_port_bug (predicted) — press f to apply fix port-bug-spawn"),
            "{}",
            d.reason
        );

        let cfg =
            PolicyConfig::from_toml("[actions]\nversion_port_bug = \"skip\"\n", "policy.toml")
                .unwrap();
        let mut p = policy(cfg);
        assert_eq!(p.decide(&pred, 1, &[]).action, Action::Skip);
    }

    #[test]
    fn config_rejects_unknown_fields_with_a_location() {
        let e =
            PolicyConfig::from_toml("max_retries = 3\nbreaker = 2\n", "policy.toml").unwrap_err();
        assert!(e.to_string().starts_with("policy.toml:2:"), "{e}");
        let e = PolicyConfig::from_toml("[actions]\ncuda_oom = \"explode\"\n", "policy.toml")
            .unwrap_err();
        assert!(e.to_string().starts_with("policy.toml:2:"), "{e}");
        let c =
            PolicyConfig::from_toml("breaker_threshold = 5\n[retry_limits]\ncuda_oom = 0\n", "p")
                .unwrap();
        assert_eq!(c.breaker_threshold, 5);
        assert_eq!(policy(c).retry_limit(Category::CudaOom), 0);
    }

    #[test]
    fn breaker_trips_after_n_runs_in_a_row() {
        let mut p = policy(PolicyConfig {
            breaker_threshold: 3,
            ..PolicyConfig::default()
        });
        let d = diag(Category::CudaOom);
        // Retries do not count; each run ends at the operator after one retry.
        for run in 1..=3 {
            assert_eq!(p.decide(&d, 1, &[]).action, Action::Retry);
            let end = p.decide(&d, 2, &[]);
            if run < 3 {
                assert_eq!(end.action, Action::Operator, "run {run}");
                assert!(end.pause_sweep.is_none());
            } else {
                assert_eq!(end.action, Action::PauseSweep);
                assert_eq!(
                    end.pause_sweep.as_deref(),
                    Some("breaker tripped: 3 × cuda_oom in a row")
                );
                assert!(end.reason.contains("breaker tripped"), "{}", end.reason);
            }
        }
        // Tripping resets the streak.
        assert_eq!(p.decide(&d, 2, &[]).action, Action::Operator);
    }

    #[test]
    fn a_models_breaker_holds_only_that_model_and_the_hosts_still_pauses() {
        let mut p = policy(PolicyConfig {
            breaker_threshold: 3,
            ..PolicyConfig::default()
        });
        let oom = diag(Category::CudaOom);
        // Model A fails alike on three commits; B's failures and successes between them
        // neither count for A nor reset A's streak.
        for (i, c) in ["c1", "c2", "c3"].iter().enumerate() {
            let d = p.decide_in(Some(c), Some("A"), &oom, 9, &[]);
            p.decide_in(Some(c), Some("B"), &oom, 9, &[]);
            p.record_success_of(Some("B"));
            if i < 2 {
                assert!(d.hold_model.is_none(), "{d:?}");
            } else {
                assert_eq!(d.action, Action::Operator);
                assert!(d.pause_sweep.is_none(), "the sweep goes on: {d:?}");
                let (m, why) = d.hold_model.clone().unwrap();
                assert_eq!(m, "A");
                assert_eq!(why, "breaker tripped: 3 × cuda_oom in a row on A");
                assert!(d.reason.contains("other runs go on"), "{}", d.reason);
            }
        }
        // A's success ends A's streak only.
        p.decide_in(Some("c4"), Some("A"), &oom, 9, &[]);
        p.decide_in(Some("c5"), Some("A"), &oom, 9, &[]);
        p.record_success_of(Some("A"));
        assert!(p
            .decide_in(Some("c6"), Some("A"), &oom, 9, &[])
            .hold_model
            .is_none());
        // A host failure (disk) still pauses the sweep, whatever the model.
        let disk = diag(Category::NcclError);
        let mut last = None;
        for c in ["d1", "d2", "d3"] {
            p.decide_in(Some(c), Some("A"), &disk, 1, &[]);
            last = Some(p.decide_in(Some(c), Some("A"), &disk, 9, &[]));
        }
        let last = last.unwrap();
        assert_eq!(last.action, Action::PauseSweep, "{last:?}");
        assert!(last.hold_model.is_none());
    }

    #[test]
    fn breaker_resets_on_success_and_on_a_different_category() {
        let mut p = policy(PolicyConfig {
            breaker_threshold: 3,
            ..PolicyConfig::default()
        });
        let oom = diag(Category::KvCacheTooSmall);
        p.decide(&oom, 1, &[]);
        p.decide(&oom, 1, &[]);
        p.record_success();
        assert_eq!(p.decide(&oom, 1, &[]).action, Action::Operator);
        p.decide(&oom, 1, &[]);
        p.decide(&diag(Category::Other), 1, &[]);
        assert_eq!(p.decide(&oom, 1, &[]).action, Action::Operator);
        // Ignored categories (per-commit problems) neither count nor break a streak.
        p.decide(&oom, 1, &[]);
        for _ in 0..5 {
            assert_eq!(
                p.decide(&diag(Category::ImageNotFound), 1, &[]).action,
                Action::Operator
            );
        }
        assert_eq!(p.decide(&oom, 1, &[]).action, Action::PauseSweep);
    }

    #[test]
    fn rate_limits_wait_without_spending_retries_or_the_breaker() {
        let mut p = policy(PolicyConfig {
            breaker_threshold: 2,
            ..Default::default()
        });
        let d = diag(Category::RegistryRateLimited);
        assert!(!p.spends_retries(Category::RegistryRateLimited));
        assert!(p.spends_retries(Category::BrokenPipe));
        let waits: Vec<u64> = (1..=6)
            .map(|a| {
                let dec = p.decide_for(Some("c"), &d, a, &[]);
                assert_eq!(dec.action, Action::Retry);
                assert!(dec.pause_sweep.is_none());
                dec.retry_after.unwrap().as_secs()
            })
            .collect();
        assert_eq!(waits, [600, 1200, 2400, 3600, 3600, 3600]);
        // Far past any retry limit it still waits, and the breaker never heard of it.
        let late = p.decide_for(Some("c"), &d, 1000, &[]);
        assert_eq!(late.action, Action::Retry);
        assert!(
            late.reason.contains("pulling again in 1h")
                || late.reason.contains("pulling again in 60m"),
            "{}",
            late.reason
        );
        assert!(late.reason.contains("spends no retry"), "{}", late.reason);
        // Between two failures of a breaking category, rate limits do not break the streak.
        let oom = diag(Category::KvCacheTooSmall);
        assert_eq!(
            p.decide_for(Some("a"), &oom, 1, &[]).action,
            Action::Operator
        );
        p.decide_for(Some("c"), &d, 1, &[]);
        assert_eq!(
            p.decide_for(Some("b"), &oom, 1, &[]).action,
            Action::PauseSweep
        );
        // The registry's own hint wins over the backoff.
        let hinted = Diagnosis {
            evidence: "toomanyrequests: rate limit exceeded; Retry-After: 120".into(),
            ..d.clone()
        };
        let dec = p.decide(&hinted, 3, &[]);
        assert_eq!(dec.retry_after, Some(Duration::from_secs(120)));
        assert!(dec.reason.contains("reset hint"), "{}", dec.reason);
        // An operator's limit makes it an ordinary retry again.
        let cfg =
            PolicyConfig::from_toml("[retry_limits]\nregistry_rate_limited = 1\n", "p").unwrap();
        let mut p = policy(cfg);
        assert_eq!(p.decide(&d, 1, &[]).action, Action::Retry);
        assert_eq!(p.decide(&d, 2, &[]).action, Action::Operator);
    }

    #[test]
    fn reset_hints() {
        for (text, secs) in [
            ("toomanyrequests: slow down. Retry-After: 120", Some(120)),
            ("429 Too Many Requests (ratelimit-reset: 3600)", Some(3600)),
            ("toomanyrequests: retry after 30s", Some(30)),
            ("too many requests, try again in 5 minutes", Some(300)),
            ("toomanyrequests: try again in 2 hours", Some(7200)),
            ("retry-after: 999999", Some(6 * 3600)),
            (
                "toomanyrequests: You have reached your pull rate limit. You may increase the limit by authenticating and upgrading: https://www.docker.com/increase-rate-limit",
                None,
            ),
        ] {
            assert_eq!(reset_hint(text).map(|d| d.as_secs()), secs, "{text}");
        }
    }

    #[test]
    fn registry_auth_waits_for_the_operator_with_a_hint() {
        let mut p = policy(PolicyConfig::default());
        let d = p.decide(&diag(Category::RegistryAuth), 1, &[]);
        assert_eq!(d.action, Action::Operator);
        assert!(d.reason.contains("docker login"), "{}", d.reason);
    }

    #[test]
    fn breaker_can_be_disabled() {
        let mut p = policy(PolicyConfig {
            breaker_threshold: 0,
            ..Default::default()
        });
        for _ in 0..10 {
            assert_eq!(
                p.decide(&diag(Category::Other), 1, &[]).action,
                Action::Operator
            );
        }
    }
}
