//! GPU time spent free while runs waited: the schedule's waste (runs waiting on images,
//! on backoff, or for a big run's GPUs to drain), measured from the event log. What the
//! digest reports and the rehearsal prints; a run's own GPUs are its until it ends.

use crate::event::{Envelope, Event};
use crate::model::RunState;
use std::collections::HashMap;

#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Idle {
    /// GPU-milliseconds free while some run was queued and the sweep not paused.
    pub waiting_gpu_ms: u64,
    /// GPU-milliseconds of the night (GPUs × time the sweep ran, over all its lives).
    pub total_gpu_ms: u64,
}

impl Idle {
    pub(crate) fn waiting_minutes(&self) -> f64 {
        self.waiting_gpu_ms as f64 / 60_000.0
    }
    pub(crate) fn total_minutes(&self) -> f64 {
        self.total_gpu_ms as f64 / 60_000.0
    }
}

/// Folds the events of every life of a sweep, in order. Each run's state is taken from its
/// last transition as written (a resumed life starts from what the store restored, which
/// no event repeats); time between a life's end (or a kill) and the next start counts for
/// nothing.
pub fn of<'a>(events: impl IntoIterator<Item = &'a Envelope>) -> Idle {
    let mut out = Idle::default();
    let mut gpus_total = 0u64;
    let mut runs: HashMap<u32, (RunState, usize)> = HashMap::new();
    let mut paused = false;
    let mut since: Option<u64> = None;
    for env in events {
        if let Some(t0) = since {
            let dt = env.at_ms.saturating_sub(t0);
            let busy: u64 = runs
                .values()
                .filter(|(s, _)| s.is_active())
                .map(|(_, g)| *g as u64)
                .sum();
            let waiting = runs.values().any(|(s, _)| *s == RunState::Queued);
            out.total_gpu_ms += gpus_total * dt;
            if waiting && !paused {
                out.waiting_gpu_ms += gpus_total.saturating_sub(busy) * dt;
            }
        }
        since = Some(env.at_ms);
        match &env.event {
            Event::SweepStarted { runs: n, gpus, .. } => {
                gpus_total = *gpus as u64;
                // Runs not heard of yet are queued (a first life starts with all of them).
                for i in 0..*n as u32 {
                    runs.entry(i).or_insert((RunState::Queued, 0));
                }
                // Whatever was active when the last life ended is gone with it.
                for (s, g) in runs.values_mut() {
                    if s.is_active() {
                        *s = RunState::Queued;
                        *g = 0;
                    }
                }
            }
            Event::State { run, to, gpus, .. } => {
                let e = runs.entry(run.0).or_insert((RunState::Queued, 0));
                if !gpus.is_empty() {
                    e.1 = gpus.len();
                }
                if !to.is_active() {
                    e.1 = 0;
                }
                e.0 = to.clone();
            }
            Event::Paused { .. } => paused = true,
            Event::Resumed => paused = false,
            Event::SweepFinished { .. } => since = None,
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{RunId, Stage};

    fn at(ms: u64, event: Event) -> Envelope {
        Envelope {
            seq: 0,
            at_ms: ms,
            event,
        }
    }
    fn state(run: u32, to: RunState, gpus: Vec<u32>) -> Event {
        Event::State {
            run: RunId(run),
            attempt: 1,
            from: RunState::Queued,
            to,
            detail: None,
            gpus,
            interrupted: false,
        }
    }
    const PREP: RunState = RunState::Active {
        stage: Stage::PreparingImage,
    };

    #[test]
    fn free_gpus_count_only_while_a_run_waits() {
        let done = RunState::Finished {
            outcome: crate::model::Outcome::Success,
        };
        let ev = [
            at(
                0,
                Event::SweepStarted {
                    name: "n".into(),
                    runs: 2,
                    gpus: 4,
                    runtime: "sim".into(),
                },
            ),
            // Run 0 takes 1 GPU at once; run 1 (needing more) waits 10 s with 3 free.
            at(0, state(0, PREP, vec![0])),
            at(10_000, state(1, PREP, vec![0, 1, 2])),
            // Nothing queued from here: free GPUs are not waste.
            at(20_000, state(0, done.clone(), vec![])),
            at(30_000, state(1, done, vec![])),
            at(30_000, Event::SweepFinished { interrupted: false }),
            // A later life's gap counts for nothing.
            at(
                90_000,
                Event::SweepStarted {
                    name: "n".into(),
                    runs: 2,
                    gpus: 4,
                    runtime: "sim".into(),
                },
            ),
            at(90_000, Event::SweepFinished { interrupted: false }),
        ];
        let i = of(&ev);
        assert_eq!(i.waiting_gpu_ms, 3 * 10_000);
        assert_eq!(i.total_gpu_ms, 4 * 30_000);
    }
}
