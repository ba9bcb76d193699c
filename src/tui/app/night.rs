//! The night one client folds from its sweep's envelopes: the plan, the sweep's state, the
//! runs' log rings, the GPUs' history and the activity log. What every client of one sweep
//! agrees on; where an operator is in it is [`super::Ui`], and what frames keep is `App`'s.

use super::{GpuView, Progress, RunLogs};
use crate::model::{Outcome, RunId, RunState, Variant};
use crate::plan::Plan;
use crate::state::SweepState;
use crate::tui::gpu::GpuSource;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

pub struct Night {
    pub plan: Arc<Plan>,
    pub state: SweepState,
    pub runtime: String,
    pub gpus_total: u32,
    pub now_ms: u64,
    pub finished: bool,
    pub variants: Vec<Variant>,
    /// commit → variant column → its (first repeat's) run.
    pub cells: Vec<Vec<Option<RunId>>>,
    pub baseline_of: Vec<Option<RunId>>,
    /// plan image → its runs: a prefetch (pull, overlay, build) logs by image, and its
    /// lines show in the log pane of each run still waiting for that image.
    pub(super) runs_by_image: std::collections::HashMap<String, Vec<RunId>>,
    pub logs: Vec<Option<Box<RunLogs>>>,
    pub lines_in_memory: usize,
    pub lines_seen: u64,
    pub(super) finished_order: VecDeque<RunId>,
    pub pull_layers: BTreeMap<RunId, BTreeMap<String, (u64, u64)>>,
    pub gpu_source: GpuSource,
    pub gpus: Vec<GpuView>,
    /// When each run entered its present state, as this client saw it happen (the active
    /// panel's "held 12m" and "in stage 40s").
    pub entered_ms: std::collections::HashMap<RunId, u64>,
    /// Operator actions (signed, with their outcome) and the policy's own decisions, oldest
    /// first (the last [`ACTIVITY_KEPT`]).
    pub activity: std::collections::VecDeque<crate::report::activity::Entry>,
    /// The fix recipes a `:fix-group` may name (built-in and the operator's), checked and
    /// completed where they are typed.
    pub recipes: Vec<String>,
    /// The box's noise bands from `nightshift calibrate`, as the daemon's store holds them:
    /// the results view judges as `results` does.
    pub calibration: crate::stats::Calibration,
    /// When the night's window closes (epoch ms): shown in the header beside the ETA.
    pub window_closes_ms: Option<u64>,
    /// A run's typical wall-clock length where the runtime says it (the sim at its speed):
    /// the ETA's prior before any run ended.
    pub run_prior_ms: Option<u64>,
    /// Runs whose logs were read from disk once (an attached client's view of the lines
    /// from before it attached).
    pub(super) from_disk: std::collections::HashSet<RunId>,
}

impl Night {
    pub fn new(plan: Arc<Plan>, gpus: u32) -> Night {
        let mut variants: Vec<Variant> = Vec::new();
        for r in &plan.runs {
            if !variants.contains(&r.variant) {
                variants.push(r.variant.clone());
            }
        }
        variants.sort_by(|a, b| a.order().cmp(&b.order()).then(a.cmp(b)));
        let mut cells = vec![vec![None; variants.len()]; plan.commits.len()];
        for r in &plan.runs {
            let col = variants.iter().position(|v| *v == r.variant).unwrap_or(0);
            let cell = &mut cells[r.commit][col];
            if cell.is_none() {
                *cell = Some(r.id);
            }
        }
        let baseline_of = plan
            .runs
            .iter()
            .map(|r| {
                let col = variants.iter().position(|v| *v == Variant::Baseline)?;
                cells[r.commit][col].filter(|b| *b != r.id)
            })
            .collect();
        let mut runs_by_image: std::collections::HashMap<String, Vec<RunId>> = Default::default();
        for r in &plan.runs {
            if let Some(img) = &r.image {
                runs_by_image.entry(img.clone()).or_default().push(r.id);
            }
        }
        Night {
            runs_by_image,
            state: SweepState::for_plan(&plan),
            logs: (0..plan.runs.len()).map(|_| None).collect(),
            plan,
            runtime: String::new(),
            gpus_total: gpus,
            now_ms: 0,
            finished: false,
            variants,
            cells,
            baseline_of,
            lines_in_memory: 0,
            lines_seen: 0,
            finished_order: VecDeque::new(),
            pull_layers: BTreeMap::new(),
            gpu_source: GpuSource::Waiting,
            gpus: Vec::new(),
            entered_ms: Default::default(),
            activity: Default::default(),
            recipes: crate::diagnose::recipe::RecipeBook::builtin()
                .all()
                .iter()
                .map(|r| r.name.clone())
                .collect(),
            calibration: Default::default(),
            from_disk: Default::default(),
            window_closes_ms: None,
            run_prior_ms: None,
        }
    }

    /// The runs as the report reads them, from the live state (one attempt each).
    pub fn docs(&self) -> Vec<crate::record::RunDoc> {
        use crate::record::{RunDoc, RunInfo};
        self.plan
            .runs
            .iter()
            .map(|spec| {
                RunDoc::of_record(
                    RunInfo::from_spec(&self.plan, spec),
                    self.state.run(spec.id),
                )
            })
            .collect()
    }

    /// How far the night is over the runs the plan can run. The runs it marks unrunnable
    /// (no image, an invalid command, `skip = true`) end in the first second: counted as
    /// done they would put the bar at half way before anything ran.
    pub fn progress(&self) -> Progress {
        // Called while drawing (the header, popups): no allocation per frame.
        let runs = &self.plan.runs;
        self.state
            .progress(|i| runs.get(i).is_some_and(|s| s.skip_reason.is_some()))
    }

    /// The finding a run waits on: the diagnosis of what it is held or failed with. An
    /// earlier one (the run fixed, retried or skipped since) is history, not a question:
    /// no banner offers keys for it.
    pub(crate) fn current_finding(&self, run: RunId) -> Option<&crate::event::Finding> {
        let r = self.state.runs.get(run.0 as usize)?;
        let now = match &r.state {
            RunState::Held { category }
            | RunState::Finished {
                outcome: Outcome::Failed { category },
            } => *category,
            _ => return None,
        };
        r.finding.as_ref().filter(|f| f.category == now)
    }

    /// How long the sweep has run: frozen at its end once it has ended (see
    /// [`SweepState::elapsed_ms`]).
    pub(crate) fn elapsed_ms(&self) -> Option<u64> {
        self.state.elapsed_ms(self.now_ms, self.finished)
    }

    pub(super) fn eta_input(&self) -> Vec<(crate::eta::Need, crate::eta::Now)> {
        use crate::eta::{Need, Now};
        let started = self.started_commits();
        // The engine's order of commits: the replay starts runs as the scheduler will.
        let ranks = match self.window_closes_ms {
            Some(_) => crate::night::order::window_ranks(&self.plan),
            None => crate::night::order::plan_ranks(&self.plan, self.gpus_total),
        };
        self.state
            .runs
            .iter()
            .zip(&self.plan.runs)
            .map(|(r, spec)| {
                let c = self.plan.commit_of(spec);
                let need = Need {
                    gpus: spec.gpus.max(1),
                    group: format!("{}|{}", c.model.as_deref().unwrap_or("?"), c.needs_server()),
                    order: (ranks.of(crate::model::CommitIx(spec.commit)).0, spec.order),
                    // The sim's runs are as long as its speed makes them: the daemon says
                    // how long (no prior without it).
                    prior_ms: if self.runtime == "sim" {
                        self.run_prior_ms.unwrap_or(0)
                    } else {
                        c.kind().unwrap_or_default().typical_secs() * 1000
                    },
                    commit_started: started.contains(&spec.commit),
                };
                let now = match r.state {
                    RunState::Queued if spec.skip_reason.is_none() => Now::Queued,
                    RunState::Active { .. } => Now::Active {
                        elapsed_ms: self
                            .now_ms
                            .saturating_sub(r.started_ms.unwrap_or(self.now_ms)),
                    },
                    // Lengths come from runs that ran to a result: a run that failed in
                    // its first second says nothing of how long the next will take.
                    RunState::Finished {
                        outcome: Outcome::Success,
                    } => Now::Done {
                        took_ms: r
                            .finished_ms
                            .zip(r.started_ms)
                            .map(|(f, s)| f.saturating_sub(s)),
                    },
                    _ => Now::Done { took_ms: None },
                };
                (need, now)
            })
            .collect()
    }

    /// Why free GPUs sit idle while runs wait: the sweep is paused, or the first waiting
    /// run in the scheduler's order needs more GPUs than are free, and the scheduler keeps
    /// them for it (smaller runs pass only if they end before it could start, see
    /// [`crate::scheduler::may_backfill`]). `(run, GPUs it needs)`, or `None` for paused.
    pub(crate) fn idle_reason(&self) -> Option<Option<(RunId, u32)>> {
        if self.state.paused.is_some() {
            return Some(None);
        }
        let free = self.gpus_total.saturating_sub(self.gpus_busy());
        if free == 0 {
            return None;
        }
        let started = self.started_commits();
        let (i, spec) = self
            .state
            .runs
            .iter()
            .zip(&self.plan.runs)
            .enumerate()
            .filter(|(_, (r, s))| {
                r.state == RunState::Queued && s.skip_reason.is_none() && s.gpus <= self.gpus_total
            })
            .map(|(i, (_, s))| (i, s))
            .min_by_key(|(_, s)| (!started.contains(&s.commit), s.commit, s.order))?;
        (spec.gpus > free).then_some(Some((RunId(i as u32), spec.gpus)))
    }

    pub(crate) fn gpus_busy(&self) -> u32 {
        crate::tui::gpu::holders(&self.state, self.gpus_total)
            .iter()
            .filter(|h| h.is_some())
            .count() as u32
    }

    pub(crate) fn newest_active(&self) -> Option<RunId> {
        self.state
            .runs
            .iter()
            .enumerate()
            .filter(|(_, r)| r.state.is_active())
            .max_by_key(|(_, r)| r.started_ms.unwrap_or(0))
            .map(|(i, _)| RunId(i as u32))
    }

    /// The commits with a run that has started: the scheduler finishes a started commit
    /// before it opens the next, and the ETA's replay and the idle reason follow it.
    fn started_commits(&self) -> std::collections::HashSet<usize> {
        self.state
            .runs
            .iter()
            .zip(&self.plan.runs)
            .filter(|(r, _)| r.started_ms.is_some())
            .map(|(_, s)| s.commit)
            .collect()
    }
}
