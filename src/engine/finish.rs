//! What the end of an attempt decides: its outcome from the report, parse and diagnosis,
//! the policy's action (retry, fix, hold, skip), a model's breaker, and queued fixes.

use super::*;

impl Engine {
    pub(super) fn finish(&mut self, run: RunId, report: RunReport) -> anyhow::Result<()> {
        let Some(a) = self.active.remove(&run) else {
            return Ok(());
        };
        self.schedule.ended(run);
        self.gpu_ms += a.started.elapsed().as_millis() * a.gpus.len() as u128;
        let spec = self.plan.runs[run.0 as usize].clone();
        let commit = self.plan.commit_of(&spec).clone();
        // A run's length is learned from runs that got to their benchmark's end: one that
        // failed in its first second says nothing of how long the next will hold GPUs.
        if matches!(report.end, RunEnd::BenchExited { .. }) {
            self.schedule
                .learned(commit.model.as_deref(), a.started.elapsed());
        }
        let stage = a.stage;
        let attempt = a.attempt;
        if report.end == RunEnd::Cancelled {
            // Operator cancel ends the run; a shutdown re-queues it for the next resume.
            if !a.cancel_requested {
                return self.requeue_interrupted(run, "interrupted by shutdown");
            }
            let cancelled = RunState::Finished {
                outcome: Outcome::Cancelled,
            };
            return self.set_state(run, cancelled, Some("cancelled by the operator".into()));
        }
        let mut result = a.parser.finish();
        let mut per_request = None;
        for f in &report.result_files {
            // Result files come out of a container: read only when regular and bounded.
            if let Ok(bytes) = crate::bounded::read_file(f, MAX_RESULT_FILE) {
                let r = parse::parse_bytes(&bytes);
                if r.has_result() {
                    result.metrics.extend(r.metrics);
                }
                per_request = crate::requests::from_result_json(&bytes).or(per_request);
            }
        }
        if let Some(p) = per_request.filter(|p| p.requests > 0) {
            let seed = crate::stats::noise::seed_of(&[&spec.key, &attempt.to_string()]);
            let requests = Box::new(crate::requests::Requests::of(&p, seed));
            self.emit(Event::Requests {
                run,
                attempt,
                requests,
            })?;
        }
        let bench_exit = match report.end {
            RunEnd::BenchExited { exit_code } => Some(exit_code),
            _ => None,
        };
        if bench_exit.is_some() && stage < Stage::Parsing {
            self.set_state(
                run,
                RunState::Active {
                    stage: Stage::Parsing,
                },
                None,
            )?;
        }
        let invalid = result
            .has_result()
            .then(|| crate::validity::invalid_reason(&result.metrics))
            .flatten();
        let ok = bench_exit == Some(0) && result.has_result() && invalid.is_none();
        if ok {
            return self.succeed(run, attempt, result, commit.model.as_deref());
        }
        let vllm = self
            .state
            .run(run)
            .vllm_version
            .clone()
            .or(commit.vllm_version.clone());
        let mut ctx = failure_context(stage, &report.end, &commit, vllm, &result);
        ctx.patched_files = patched_files(&self.plan, &spec);
        ctx.invalid_result = invalid;
        let diagnosis = a
            .scanner
            .conclude(&ctx)
            .unwrap_or_else(|| diagnose::Diagnosis {
                category: Category::Other,
                evidence: end_text(&report.end),
                stream: None,
                line_no: None,
                recipe: None,
                predicted: false,
                confidence: diagnose::confidence::GUESS,
                telling: vec![],
            });
        self.decide(run, attempt, &commit, &diagnosis, &report.end)
    }

    /// The policy's decision on a diagnosed failure, said (`Diagnosed`, and a pause of the
    /// sweep or of a model when it comes to that) and then carried out.
    fn decide(
        &mut self,
        run: RunId,
        attempt: u32,
        commit: &crate::plan::CommitSpec,
        diagnosis: &diagnose::Diagnosis,
        end: &RunEnd,
    ) -> anyhow::Result<()> {
        let applied = self.state.run(run).fixes.clone();
        // A crash, Ctrl-C or stop that cut attempts short spends none of the run's retries.
        let counted = self.state.run(run).counted_attempts();
        let decision = self.policy.decide_in(
            Some(&commit.commit),
            commit.model.as_deref(),
            diagnosis,
            counted,
            &applied,
        );
        let category = diagnosis.category;
        let finding = Finding {
            category,
            evidence: if diagnosis.evidence.is_empty() {
                end_text(end)
            } else {
                diagnosis.evidence.clone()
            },
            action: decision.action,
            recipe: decision.recipe.clone().or(diagnosis.recipe.clone()),
            reason: decision.reason.clone(),
            predicted: false,
            confidence: Some(diagnosis.confidence),
            telling: diagnosis.telling.clone(),
            kind: crate::failure_kind::kind_of_diagnosis(diagnosis),
        };
        self.emit(Event::Diagnosed {
            run,
            attempt,
            finding: finding.clone(),
        })?;
        if let Some(reason) = &decision.pause_sweep {
            self.emit(Event::Paused {
                reason: reason.clone(),
                by: PauseBy::Policy,
            })?;
        }
        if let Some((model, reason)) = &decision.hold_model {
            self.emit(Event::ModelPaused {
                model: model.clone(),
                reason: reason.clone(),
            })?;
        }
        self.act_on(run, category, &decision, &finding)
    }

    /// A run with its result: what the stream did not already say, then success.
    fn succeed(
        &mut self,
        run: RunId,
        attempt: u32,
        result: parse::ParseResult,
        model: Option<&str>,
    ) -> anyhow::Result<()> {
        // The streamed values usually are the result already; only what differs (an
        // earlier block's value, a result file's number) is sent again.
        let streamed = self.state.run(run).metrics.clone();
        for (k, v) in result.metrics {
            if streamed.get(&k) == Some(&v) {
                continue;
            }
            self.emit(Event::Metric {
                run,
                attempt,
                key: k,
                value: v,
            })?;
        }
        self.policy.record_success_of(model);
        self.set_state(
            run,
            RunState::Finished {
                outcome: Outcome::Success,
            },
            None,
        )?;
        self.judge_drift(run)
    }

    /// The policy's decision on a failed attempt, carried out: retry after its backoff,
    /// retry with a fix, hold for the operator (pausing the sweep if it says so), or skip.
    fn act_on(
        &mut self,
        run: RunId,
        category: Category,
        decision: &crate::policy::Decision,
        finding: &Finding,
    ) -> anyhow::Result<()> {
        let failed = RunState::Finished {
            outcome: Outcome::Failed { category },
        };
        match decision.action {
            Action::Retry => {
                self.set_state(run, failed, Some(decision.reason.clone()))?;
                let delay = Duration::try_from_secs_f64(
                    decision.retry_after.unwrap_or_default().as_secs_f64() * self.time_scale,
                )
                .unwrap_or(Duration::from_secs(86_400));
                let at = Instant::now()
                    .checked_add(delay)
                    .unwrap_or_else(Instant::now);
                self.schedule.backoff(run, at.into_std());
                self.set_state(
                    run,
                    RunState::Queued,
                    Some(format!("retry after {}s", delay.as_secs())),
                )?;
            }
            Action::AutoFix => {
                self.set_state(run, failed, Some(decision.reason.clone()))?;
                if let Some(r) = &finding.recipe {
                    self.queue_fix(run, r)?;
                }
                self.set_state(
                    run,
                    RunState::Queued,
                    Some(format!(
                        "retry with fix {}",
                        finding.recipe.clone().unwrap_or_default()
                    )),
                )?;
            }
            Action::Operator => {
                self.hold(run, category, &decision.reason, finding)?;
            }
            Action::PauseSweep => {
                self.hold(run, category, &decision.reason, finding)?;
                if self.state.paused.is_none() {
                    self.emit(Event::Paused {
                        reason: decision.reason.clone(),
                        by: PauseBy::Policy,
                    })?;
                }
            }
            Action::Skip => {
                self.set_state(run, failed, Some(decision.reason.clone()))?;
                if category == Category::GatedModelAuth {
                    self.end_model_runs(run, category)?;
                }
            }
        }
        Ok(())
    }

    /// A gated model (no token, or no access) fails every run of it alike: skip the model's
    /// queued runs (their reason begins [`NOT_RUN_GATED`], so `run --retry-failed
    /// gated_model_auth` brings them back once the token has access); the night goes on.
    pub(super) fn end_model_runs(&mut self, run: RunId, category: Category) -> anyhow::Result<()> {
        let model = self
            .plan
            .commit_of(&self.plan.runs[run.0 as usize])
            .model
            .clone();
        let Some(model) = model else {
            return Ok(());
        };
        let same: Vec<RunId> = self
            .plan
            .runs
            .iter()
            .filter(|s| s.id != run && self.state.run(s.id).state == RunState::Queued)
            .filter(|s| self.plan.commit_of(s).model.as_deref() == Some(model.as_str()))
            .map(|s| s.id)
            .collect();
        for id in same {
            self.skip(id, crate::model::SkipBy::ModelRefused, &format!(
                "{NOT_RUN_GATED}{model} is gated or needs a token with access (run {run} was refused); `run --retry-failed {category}` once it has"
            ))?;
        }
        Ok(())
    }

    pub(super) fn queue_fix(&mut self, run: RunId, recipe: &str) -> anyhow::Result<()> {
        let commit = self.plan.runs[run.0 as usize].commit;
        self.rules
            .pending_fixes
            .entry(run)
            .or_default()
            .push(recipe.to_string());
        let Some(r) = self.recipes.get(recipe) else {
            return Ok(());
        };
        // Spread once per commit, by name: a recipe of steps only has no env to compare.
        if r.scope != RecipeScope::Commit
            || !self.rules.commit_recipes.insert((commit, r.name.clone()))
        {
            return Ok(());
        }
        // Commit-scope workarounds apply to every variant so they stay comparable: variants
        // that already ended without it run again with it.
        let env = r.env.clone();
        self.rules.commit_env.entry(commit).or_default().extend(env);
        let siblings: Vec<RunId> = self
            .plan
            .runs
            .iter()
            .filter(|s| s.commit == commit && s.id != run && s.skip_reason.is_none())
            .map(|s| s.id)
            .collect();
        for id in siblings {
            let ended = matches!(
                self.state.run(id).state,
                RunState::Held { .. }
                    | RunState::Finished {
                        outcome: Outcome::Success | Outcome::Failed { .. }
                    }
            );
            if self.state.run(id).state == RunState::Queued {
                self.rules
                    .pending_fixes
                    .entry(id)
                    .or_default()
                    .push(recipe.to_string());
            }
            if ended {
                self.rules
                    .pending_fixes
                    .entry(id)
                    .or_default()
                    .push(recipe.to_string());
                self.set_state(
                    id,
                    RunState::Queued,
                    Some(format!(
                        "re-run with commit-wide fix {recipe} so the variants stay comparable"
                    )),
                )?;
            }
        }
        Ok(())
    }
}

fn end_text(end: &RunEnd) -> String {
    match end {
        RunEnd::BenchExited { exit_code } => format!("benchmark exited with status {exit_code}"),
        RunEnd::ServerDied { exit_code } => match exit_code {
            Some(c) => format!("server exited with status {c}"),
            None => "server exited".into(),
        },
        RunEnd::Timeout { stage } => format!("{stage} timed out"),
        RunEnd::ImageMissing { message }
        | RunEnd::DiskFull { message }
        | RunEnd::PatchFailed { message }
        | RunEnd::BenchInvalid { message }
        | RunEnd::NeedsBuild { message } => message.clone(),
        RunEnd::Error { stage, message } => format!("{stage}: {message}"),
        RunEnd::Cancelled => "cancelled".into(),
    }
}

/// What the diagnoser is told of an attempt's end besides its lines.
/// A result file larger than this is not read (with `--save-detailed` real ones are tens
/// of MB).
const MAX_RESULT_FILE: u64 = 512 << 20;

/// The files an agent run's patch changes, for blaming a failure raised in them on the
/// patch (read with a bound; a patch that cannot be read blames nothing).
fn patched_files(plan: &crate::plan::Plan, spec: &crate::plan::RunSpec) -> Vec<String> {
    let Some(p) = &spec.patch else {
        return Vec::new();
    };
    let path = plan
        .path
        .parent()
        .unwrap_or(std::path::Path::new("."))
        .join(p);
    let Ok(bytes) = crate::bounded::read_file(&path, crate::plan::limits::MAX_PATCH_BYTES) else {
        return Vec::new();
    };
    crate::patchfile::all_paths(&String::from_utf8_lossy(&bytes))
        .into_iter()
        .collect()
}

fn failure_context(
    stage: Stage,
    end: &RunEnd,
    commit: &crate::plan::CommitSpec,
    vllm_version: Option<String>,
    result: &parse::ParseResult,
) -> FailureContext {
    let bench_finished = matches!(end, RunEnd::BenchExited { .. });
    FailureContext {
        stage: Some(stage),
        exit_code: match end {
            RunEnd::BenchExited { exit_code } => Some(*exit_code),
            RunEnd::ServerDied { exit_code } => *exit_code,
            _ => None,
        },
        signal: None,
        timed_out: matches!(end, RunEnd::Timeout { .. }),
        serving: commit.needs_server(),
        vllm_version,
        bench_finished,
        has_result: result.has_result(),
        successful_requests: result.successful_requests(),
        patch_failed: matches!(end, RunEnd::PatchFailed { .. }),
        pull_error: match end {
            RunEnd::ImageMissing { message } | RunEnd::DiskFull { message } => {
                Some(message.clone())
            }
            _ => None,
        },
        image_missing: matches!(end, RunEnd::ImageMissing { .. }),
        bench_invalid: match end {
            RunEnd::BenchInvalid { message } => Some(message.clone()),
            _ => None,
        },
        needs_build: match end {
            RunEnd::NeedsBuild { message } => Some(message.clone()),
            _ => None,
        },
        disk_full: matches!(end, RunEnd::DiskFull { .. }),
        patched_files: Vec::new(),
        invalid_result: None,
    }
}
