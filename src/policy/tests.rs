//! The policy: actions, retries, fixes and the breaker.

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
        (ModelNotFound, Action::Skip),
        (ModelTooLarge, Action::Skip),
        (ServerConfigInvalid, Action::Skip),
        (HubOffline, Action::Retry),
        (RegistryAuth, Action::Operator),
        (RegistryRateLimited, Action::Retry),
        (KvCacheTooSmall, Action::Operator),
        (EngineCoreInitFailed, Action::Operator),
        (ImageNotFound, Action::Operator),
        // Unknown: retried once, then failed (never held; see the unknown tests below).
        (Other, Action::Retry),
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
fn retries_back_off_with_a_cap_then_end_failed() {
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
    // Nobody is awake to decide: spent retries end the run failed, not held.
    assert_eq!(fifth.action, Action::Skip);
    assert!(fifth.reason.contains("after 4 retries"), "{}", fifth.reason);
    assert!(fifth.reason.contains("night goes on"), "{}", fifth.reason);
    // Unless the operator's policy says they decide this category.
    let mut q = policy(
        PolicyConfig::from_toml(
            "max_retries = 1\n[actions]\nbroken_pipe = \"operator\"\n",
            "p",
        )
        .unwrap(),
    );
    assert_eq!(q.decide(&d, 2, &[]).action, Action::Operator);
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
        assert_eq!(p.decide(&diag(c), 2, &[]).action, Action::Skip, "{c}");
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
        PolicyConfig::from_toml("[actions]\nversion_port_bug = \"skip\"\n", "policy.toml").unwrap();
    let mut p = policy(cfg);
    assert_eq!(p.decide(&pred, 1, &[]).action, Action::Skip);
}

#[test]
fn config_rejects_unknown_fields_with_a_location() {
    let e = PolicyConfig::from_toml("max_retries = 3\nbreaker = 2\n", "policy.toml").unwrap_err();
    assert!(e.to_string().starts_with("policy.toml:2:"), "{e}");
    let e =
        PolicyConfig::from_toml("[actions]\ncuda_oom = \"explode\"\n", "policy.toml").unwrap_err();
    assert!(e.to_string().starts_with("policy.toml:2:"), "{e}");
    let c = PolicyConfig::from_toml("breaker_threshold = 5\n[retry_limits]\ncuda_oom = 0\n", "p")
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
    // Retries do not count; each run ends failed after one retry.
    for run in 1..=3 {
        assert_eq!(p.decide(&d, 1, &[]).action, Action::Retry);
        let end = p.decide(&d, 2, &[]);
        if run < 3 {
            assert_eq!(end.action, Action::Skip, "run {run}");
            assert!(end.pause_sweep.is_none());
        } else {
            // The run stays failed; the sweep pauses.
            assert_eq!(end.action, Action::Skip);
            // No model named: the pervasive rule sees every run of 3 commits failing.
            assert_eq!(
                end.pause_sweep.as_deref(),
                Some("breaker tripped: every run of 3 commits in a row failed, no success in between (cuda_oom ×3)")
            );
            assert!(end.reason.contains("breaker tripped"), "{}", end.reason);
        }
    }
    // Tripping resets the streak.
    let again = p.decide(&d, 2, &[]);
    assert_eq!(again.action, Action::Skip);
    assert!(again.pause_sweep.is_none());
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
            assert_eq!(d.action, Action::Skip);
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
    assert!(last.pause_sweep.is_some(), "{last:?}");
    assert!(last.hold_model.is_none());
}

#[test]
fn breaker_resets_on_success_and_on_a_different_failure() {
    let mut p = policy(PolicyConfig {
        breaker_threshold: 3,
        ..PolicyConfig::default()
    });
    let kv = diag(Category::KvCacheTooSmall);
    let on =
        |p: &mut Policy, c: &str, d: &Diagnosis| p.decide_in(Some(c), Some("m"), d, 9, &[]).action;
    on(&mut p, "c1", &kv);
    on(&mut p, "c2", &kv);
    p.record_success_of(Some("m"));
    assert_eq!(on(&mut p, "c3", &kv), Action::Operator);
    on(&mut p, "c4", &kv);
    // Another failure of the model between two alike ends the model's streak.
    on(&mut p, "c5", &diag(Category::EngineCoreInitFailed));
    assert_eq!(on(&mut p, "c6", &kv), Action::Operator);
    on(&mut p, "c7", &kv);
    // Ignored categories (per-commit problems) neither count nor break a streak.
    for c in ["i1", "i2", "i3", "i4", "i5"] {
        assert_eq!(
            on(&mut p, c, &diag(Category::ImageNotFound)),
            Action::Operator
        );
    }
    let d = p.decide_in(Some("c8"), Some("m"), &kv, 9, &[]);
    assert_eq!(d.action, Action::Operator);
    let (m, why) = d.hold_model.unwrap();
    assert_eq!(m, "m");
    assert_eq!(why, "breaker tripped: 3 × kv_cache_too_small in a row on m");
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
        late.reason.contains("pulling again in 1h") || late.reason.contains("pulling again in 60m"),
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
    let cfg = PolicyConfig::from_toml("[retry_limits]\nregistry_rate_limited = 1\n", "p").unwrap();
    let mut p = policy(cfg);
    assert_eq!(p.decide(&d, 1, &[]).action, Action::Retry);
    assert_eq!(p.decide(&d, 2, &[]).action, Action::Skip);
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
    for i in 0..10 {
        let d = p.decide_in(
            Some(&format!("c{i}")),
            None,
            &diag(Category::NcclError),
            9,
            &[],
        );
        assert_eq!(d.action, Action::Skip);
        assert!(d.pause_sweep.is_none() && d.hold_model.is_none());
    }
}

fn unknown(line: &str) -> Diagnosis {
    Diagnosis {
        evidence: "ERROR something went wrong".into(),
        telling: vec![line.to_string()],
        confidence: crate::diagnose::confidence::EXCEPTION,
        ..diag(Category::Other)
    }
}

#[test]
fn an_unknown_failure_is_retried_once_then_fails_with_its_telling_line() {
    let mut p = policy(PolicyConfig::default());
    let d = unknown("RuntimeError: shard 3 lost");
    let first = p.decide_in(Some("c1"), Some("m"), &d, 1, &[]);
    assert_eq!(first.action, Action::Retry);
    assert_eq!(first.retry_after, Some(Duration::from_secs(30)));
    assert_eq!(
        first.reason,
        "other (no signature names it) — retry 1/1 in 30s"
    );
    let end = p.decide_in(Some("c1"), Some("m"), &d, 2, &[]);
    // Ends failed (the engine's `skip` arm: no further attempt), never held.
    assert_eq!(end.action, Action::Skip);
    assert!(end.pause_sweep.is_none() && end.hold_model.is_none());
    assert!(
        end.reason.starts_with(
            "other — failed after 1 retry: RuntimeError: shard 3 lost — the night goes on"
        ),
        "{}",
        end.reason
    );
    // A known category diagnosed with low confidence is treated the same way.
    let guess = Diagnosis {
        confidence: crate::diagnose::confidence::GUESS,
        ..diag(Category::KvCacheTooSmall)
    };
    assert_eq!(p.decide(&guess, 1, &[]).action, Action::Retry);
    assert_eq!(p.decide(&guess, 2, &[]).action, Action::Skip);
    // Without a telling line, the deciding line is told.
    let bare = Diagnosis {
        telling: vec![],
        ..d.clone()
    };
    assert!(p
        .decide(&bare, 2, &[])
        .reason
        .contains(": ERROR something went wrong —"));
}

#[test]
fn an_unknown_failure_waits_for_the_operator_only_where_the_policy_says_so() {
    // `operator` by name: held (the engine bounds how long, unattended).
    let cfg = PolicyConfig::from_toml("[actions]\nother = \"operator\"\n", "p").unwrap();
    let mut p = policy(cfg);
    let d = unknown("RuntimeError: x");
    assert_eq!(p.decide(&d, 1, &[]).action, Action::Operator);
    // `retry` by name: the operator's retries, then failed, not held.
    let cfg = PolicyConfig::from_toml(
        "[actions]\nother = \"retry\"\n[retry_limits]\nother = 3\n",
        "p",
    )
    .unwrap();
    let mut p = policy(cfg);
    for a in 1..=3 {
        assert_eq!(p.decide(&d, a, &[]).action, Action::Retry, "{a}");
    }
    let end = p.decide(&d, 4, &[]);
    assert_eq!(end.action, Action::Skip);
    assert!(
        end.reason.contains("failed after 3 retries"),
        "{}",
        end.reason
    );
    // `skip` by name: skipped at once.
    let cfg = PolicyConfig::from_toml("[actions]\nother = \"skip\"\n", "p").unwrap();
    assert_eq!(policy(cfg).decide(&d, 1, &[]).action, Action::Skip);
}

#[test]
fn unknown_failures_mixed_with_successes_never_pause_the_night() {
    let mut p = policy(PolicyConfig::default());
    // 8 of 20 commits fail alike on every variant, spread among commits that succeed.
    for c in 0..20 {
        let commit = format!("c{c}");
        for _variant in 0..3 {
            if [1, 3, 6, 8, 11, 13, 16, 18].contains(&c) {
                let line = format!("RuntimeError: shard {c} of /models/{c}/ab{c}cd9 lost");
                let d = unknown(&line);
                assert_eq!(
                    p.decide_in(Some(&commit), Some("m"), &d, 1, &[]).action,
                    Action::Retry
                );
                let end = p.decide_in(Some(&commit), Some("m"), &d, 2, &[]);
                assert_eq!(end.action, Action::Skip, "{c}");
                assert!(
                    end.pause_sweep.is_none() && end.hold_model.is_none(),
                    "{end:?}"
                );
            } else {
                p.record_success_of(Some("m"));
            }
        }
    }
}

#[test]
fn one_model_failing_alike_again_and_again_is_held_alone() {
    let mut p = policy(PolicyConfig::default());
    let mut held = None;
    for c in 0..5 {
        let d = unknown(&format!("ValueError: bad tensor {c} at 0x7f{c}a0"));
        p.decide_in(Some(&format!("c{c}")), Some("big"), &d, 1, &[]);
        let end = p.decide_in(Some(&format!("c{c}")), Some("big"), &d, 2, &[]);
        // Another model's runs succeed meanwhile.
        p.record_success_of(Some("small"));
        assert!(end.pause_sweep.is_none());
        if c < 4 {
            assert!(end.hold_model.is_none(), "{c}: {end:?}");
        } else {
            held = end.hold_model.clone();
            // The run itself still ends failed; its model's queued runs wait.
            assert_eq!(end.action, Action::Skip);
        }
    }
    let (m, why) = held.expect("the model is held");
    assert_eq!(m, "big");
    assert!(
        why.starts_with("breaker tripped: 5 × other [kind "),
        "{why}"
    );
}
