//! Starting runs: the queue, GPUs and images ready, each attempt's job for the runtime, and
//! the image task's demand and reports.

use super::*;
use crate::scheduler::Place;

impl Engine {
    /// While the schedule names a run, start it ([`crate::scheduler::Schedule::next`]
    /// decides; the engine acts).
    pub(super) fn start_runs(&mut self) -> anyhow::Result<()> {
        let now = Instant::now().into_std();
        while let Some((id, gpus)) = self.schedule.next(now) {
            self.start(id, gpus)?;
        }
        Ok(())
    }

    pub(super) fn start(&mut self, id: RunId, gpus: Vec<u32>) -> anyhow::Result<()> {
        let attempt = self.state.run(id).attempt.max(1);
        let cancel = CancellationToken::new();
        self.active.insert(
            id,
            Active {
                attempt,
                stage: Stage::PreparingImage,
                cancel: cancel.clone(),
                cancel_requested: false,
                parser: StreamParser::new(),
                scanner: Scanner::new(self.catalog.clone()),
                gpus: gpus.clone(),
                started: Instant::now(),
                version_seen: false,
            },
        );
        self.set_state(
            id,
            RunState::Active {
                stage: Stage::PreparingImage,
            },
            None,
        )?;
        let spec_commit = self.plan.runs[id.0 as usize].commit;
        let mut env = self
            .rules
            .commit_env
            .get(&spec_commit)
            .cloned()
            .unwrap_or_default();
        // Fixes stick to a run: a retry after a fixed attempt must not run on the unfixed
        // image again (the runtime reuses the committed fixed image).
        let mut fixes = self.state.run(id).fixes.clone();
        for f in self.rules.pending_fixes.remove(&id).unwrap_or_default() {
            if !fixes.contains(&f) {
                fixes.push(f);
            }
        }
        for f in &fixes {
            if let Some(r) = self.recipes.get(f) {
                env.extend(r.env.clone());
            }
        }
        let job = RunJob {
            env,
            fixes,
            ..self.job(id, attempt, gpus)
        };
        let runtime = self.runtime.clone();
        let sink = RunSink::new(id, attempt, self.msg_tx.clone());
        tokio::spawn(async move {
            let done = sink.clone();
            let (rt, held) = (runtime.clone(), job.clone());
            // A runtime that panics must still end the attempt and hand its GPUs back, but
            // only once what it started is gone (`Done` is what releases them).
            let report =
                match tokio::spawn(async move { runtime.execute(job, sink, cancel).await }).await {
                    Ok(r) => r,
                    Err(e) => {
                        let reclaimed = match rt.reclaim(&held).await {
                            Ok(lines) => lines.join("; "),
                            Err(r) => format!("could not reclaim its containers: {r:#}"),
                        };
                        RunReport::new(RunEnd::Error {
                            stage: Stage::PreparingImage,
                            message: format!("runtime task failed: {e} {reclaimed}")
                                .trim_end()
                                .to_string(),
                        })
                    }
                };
            done.send(RuntimeMsg::Done(report)).await;
        });
        Ok(())
    }

    /// The job for an attempt of `id`, without the fixes and environment the engine adds.
    pub(super) fn job(&self, id: RunId, attempt: u32, gpus: Vec<u32>) -> RunJob {
        let plan = &self.plan;
        let spec = &plan.runs[id.0 as usize];
        let commit = plan.commit_of(spec);
        let view = commit.view.clone().unwrap_or_else(|| {
            crate::plan::CommandView::parse("true").expect("trivial command parses")
        });
        RunJob {
            run: id,
            attempt,
            key: spec.key.clone(),
            sweep: plan.name.clone(),
            commit: commit.commit.clone(),
            parent: commit.parent.clone(),
            variant: spec.variant.clone(),
            image: spec.image.clone().unwrap_or_default(),
            model: commit.model.clone(),
            command: commit.perf_command.clone().unwrap_or_default(),
            view,
            kind: commit.kind().unwrap_or(BenchKind::Serving),
            gpus,
            server_start_timeout: Duration::from_secs(spec.server_start_timeout_s),
            run_timeout: Duration::from_secs(spec.run_timeout_s),
            env: BTreeMap::new(),
            fixes: Vec::new(),
            patch: spec.patch.as_ref().map(|p| {
                plan.path
                    .parent()
                    .unwrap_or(std::path::Path::new("."))
                    .join(p)
            }),
            patch_dir: plan.images.patch_dir.clone(),
            vllm_version: commit.vllm_version.clone(),
            human_image: plan
                .runs
                .iter()
                .find(|r| r.commit == spec.commit && r.variant == crate::model::Variant::Human)
                .and_then(|r| r.image.clone()),
            changes: commit.changes.clone(),
            sim: commit.sim.clone(),
            seed: mix(self.opts.seed, &spec.key, attempt),
            decisions: self.decisions.clone(),
        }
    }

    /// What the remaining runs need of images, for the image task.
    pub(super) fn demand(&self) -> images::Demand {
        let mut d = images::Demand::default();
        let mut all = std::collections::BTreeSet::new();
        // The images of queued runs in the order the scheduler will start them: pulls go
        // down the queue as the GPUs will.
        let mut upcoming: Vec<((bool, Place, u8, usize), String)> = Vec::new();
        // A missing baseline (and an agent's image) is made from its commit's human image:
        // while any run of the commit waits, that image is needed, even once the human
        // run is done, or eviction takes the source from under the derivation.
        let human: std::collections::HashMap<usize, &String> = self
            .plan
            .runs
            .iter()
            .filter(|r| r.variant == crate::model::Variant::Human)
            .filter_map(|r| Some((r.commit, r.image.as_ref().filter(|s| !s.is_empty())?)))
            .collect();
        for (i, r) in self.state.runs.iter().enumerate() {
            let Some(img) = self.plan.runs[i].image.as_ref().filter(|s| !s.is_empty()) else {
                continue;
            };
            all.insert(img.clone());
            match &r.state {
                RunState::Queued => {
                    let spec = &self.plan.runs[i];
                    upcoming.push((self.schedule.sort_key(spec), img.clone()));
                    d.needed.insert(img.clone());
                    if let Some(h) = human.get(&spec.commit) {
                        d.needed.insert((*h).clone());
                    }
                    if !d.jobs.contains_key(img) {
                        let job = self.job(RunId(i as u32), r.attempt.max(1), Vec::new());
                        d.jobs.insert(img.clone(), job);
                    }
                }
                RunState::Held { .. } => {
                    d.needed.insert(img.clone());
                }
                s if s.is_active() => {
                    d.needed.insert(img.clone());
                    d.in_use.insert(img.clone());
                }
                _ => {}
            }
        }
        upcoming.sort();
        d.upcoming = upcoming.into_iter().map(|(_, img)| img).collect();
        d.all = all.into_iter().collect();
        d
    }

    pub(super) fn send_demand(&mut self) {
        if !self.prefetch.demand_dirty {
            return;
        }
        self.prefetch.demand_dirty = false;
        if self.prefetch.demand_tx.is_some() {
            let d = self.demand();
            if let Some(tx) = &self.prefetch.demand_tx {
                tx.send_replace(d);
            }
        }
    }

    pub(super) fn on_image(&mut self, r: images::Report) -> anyhow::Result<()> {
        if let Some((run, layer, done, total)) = r.pull {
            return self.emit(Event::Pull {
                run,
                layer,
                done,
                total,
            });
        }
        // Which images a run may start on is the schedule's, from the `Image` event.
        if r.status == ImageStatus::Full && self.state.paused.is_none() {
            self.emit(Event::Paused {
                reason: format!("disk budget: {} needs room — {}", r.image, r.detail),
                by: crate::model::PauseBy::ImageBudget,
            })?;
        }
        self.emit(Event::Image {
            image: r.image,
            status: r.status,
            detail: r.detail,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Outcome, Variant};
    use crate::runtime::sim::{SimRuntime, Speed};

    /// The human image is the source a missing baseline is made from: once the human run
    /// is done it must stay needed while the commit's baseline waits, or eviction takes it.
    #[test]
    fn a_waiting_baseline_keeps_its_human_image_needed() {
        let plan = Arc::new(crate::plan::example::example_plan());
        let (engine, _cmds) = Engine::new(
            plan.clone(),
            Arc::new(SimRuntime::new(Speed::Max)),
            EngineOptions {
                gpus: 8,
                seed: 1,
                wait_for_operator: false,
            },
        );
        let (h, b) = plan
            .runs
            .iter()
            .filter(|r| r.variant == Variant::Human && r.image.is_some())
            .find_map(|h| {
                let b = plan.runs.iter().find(|b| {
                    b.commit == h.commit && b.variant == Variant::Baseline && b.image != h.image
                })?;
                Some((h.id, b.id))
            })
            .expect("a commit with a human and a baseline image");
        let mut st = engine.state().clone();
        for r in &mut st.runs {
            r.state = RunState::Finished {
                outcome: Outcome::Success,
            };
        }
        st.runs[b.0 as usize].state = RunState::Queued;
        let engine = engine.with_state(st);
        let d = engine.demand();
        let human = plan.runs[h.0 as usize].image.clone().unwrap();
        assert!(d.needed.contains(&human), "{:?}", d.needed);
        assert!(!d.upcoming.contains(&human));
    }
}
