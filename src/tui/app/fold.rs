//! How a client folds what arrives into its [`Night`]: engine events into the state and
//! the activity log, log lines into the bounded rings, image-fetch lines into the runs
//! waiting for that image, GPU samples into their history. What the operator's screen
//! does about it (a toast, the selection following a run, the log pane's place) is
//! `events.rs`, told by the [`Folded`] this returns.

use super::*;
use crate::report::activity::Entry;

/// What folding one envelope did that a screen may react to.
#[derive(Debug, Default)]
pub(crate) struct Folded {
    /// The activity entry it made (an operator's action, a policy's decision).
    pub activity: Option<Entry>,
    /// Lines that went into the watched run's rings, by tab (server, benchmark): how many,
    /// and how many of the ring's oldest went to make room. Counts, not a list: a log line
    /// is the hot path, and nothing is allocated for it here.
    pub watched_lines: [(u32, u32); 2],
    /// A run that changed state, and to what.
    pub moved: Option<(RunId, RunState)>,
    /// A run ended (finished or held): what the night's bands are learned from changed.
    pub ended: bool,
}

impl Night {
    /// Fold `env` in. `watched`: the run a screen shows, whose rings are kept however many
    /// lines the night holds.
    pub(crate) fn fold(&mut self, env: &Envelope, watched: Option<RunId>) -> Folded {
        let mut f = Folded::default();
        let _ = self.state.apply(env);
        let plan = self.plan.clone();
        let key = |r: RunId| {
            plan.runs
                .get(r.0 as usize)
                .map_or_else(|| r.to_string(), |s| s.key.clone())
        };
        if let Some(e) = crate::report::activity::entry(env, &key) {
            if self.activity.len() >= ACTIVITY_KEPT {
                self.activity.pop_front();
            }
            self.activity.push_back(e.clone());
            f.activity = Some(e);
        }
        match &env.event {
            Event::SweepStarted { runtime, gpus, .. } => {
                self.runtime = runtime.clone();
                self.gpus_total = *gpus;
                self.finished = false;
            }
            Event::SweepFinished { .. } => self.finished = true,
            Event::Log {
                run,
                stream,
                pipe,
                line,
                ..
            } => self.push_log(*run, *stream, *pipe, line, watched, &mut f),
            Event::Pull {
                run,
                layer,
                done,
                total,
            } => {
                self.pull_layers
                    .entry(*run)
                    .or_default()
                    .insert(layer.clone(), (*done, *total));
            }
            Event::Gpu { sample } => self.push_gpu(sample.clone()),
            Event::Image {
                image,
                status,
                detail,
            } => self.push_image_line(image, *status, detail, watched, &mut f),
            Event::State {
                run, to, attempt, ..
            } => {
                self.entered_ms.insert(*run, env.at_ms);
                if let RunState::Active {
                    stage: crate::model::Stage::PreparingImage,
                } = to
                {
                    self.pull_layers.remove(run);
                    // The rings span attempts; say where a new one begins.
                    let has_lines = self
                        .logs
                        .get(run.0 as usize)
                        .is_some_and(|l| l.as_ref().is_some_and(|l| l.len() > 0));
                    if has_lines {
                        let marker = format!("──── attempt {attempt} ────");
                        self.push_log(*run, Stream::Server, Pipe::Stdout, &marker, watched, &mut f);
                        self.push_log(*run, Stream::Bench, Pipe::Stdout, &marker, watched, &mut f);
                    }
                }
                if matches!(to, RunState::Finished { .. } | RunState::Held { .. }) {
                    self.finished_order.push_back(*run);
                    f.ended = true;
                }
                f.moved = Some((*run, to.clone()));
            }
            _ => {}
        }
        f
    }

    /// A prefetch's line (a build's log, a status) into each run still waiting for it.
    fn push_image_line(
        &mut self,
        image: &str,
        status: crate::event::ImageStatus,
        detail: &str,
        watched: Option<RunId>,
        f: &mut Folded,
    ) {
        use crate::event::ImageStatus;
        let line = match status {
            ImageStatus::Log if detail.is_empty() => return, // pull progress: the bar shows it
            ImageStatus::Log => detail.to_string(),
            s => format!("image {image} {}: {detail}", s.as_str()),
        };
        let pipe = match status {
            ImageStatus::Failed | ImageStatus::Full => Pipe::Stderr,
            _ => Pipe::Stdout,
        };
        let waiting: Vec<RunId> = self
            .runs_by_image
            .get(image)
            .into_iter()
            .flatten()
            .copied()
            .filter(|r| {
                matches!(
                    self.state.run(*r).state,
                    RunState::Queued
                        | RunState::Active {
                            stage: crate::model::Stage::PreparingImage
                        }
                )
            })
            .collect();
        for r in waiting {
            self.push_log(r, Stream::Docker, pipe, &line, watched, f);
        }
    }

    /// A line into its run's ring; the rings of long-finished runs go first when the night
    /// holds more than [`TOTAL_LINES`], never the watched run's.
    pub(super) fn push_log(
        &mut self,
        run: RunId,
        stream: Stream,
        pipe: Pipe,
        line: &str,
        watched: Option<RunId>,
        f: &mut Folded,
    ) {
        let Some(slot) = self.logs.get_mut(run.0 as usize) else {
            return;
        };
        self.lines_seen += 1;
        let logs = slot.get_or_insert_with(Default::default);
        let (ring, tag) = match stream {
            Stream::Bench => (&mut logs.bench, None),
            Stream::Server => (&mut logs.server, None),
            Stream::Docker => (&mut logs.server, Some("docker")),
            Stream::Pull => (&mut logs.server, Some("pull")),
        };
        let error = is_error_line(line) || (pipe == Pipe::Stderr && tag.is_some());
        ring.push_back(LogLine {
            text: line.into(),
            error,
            tag,
        });
        let tab = if stream == Stream::Bench {
            LogTab::Bench
        } else {
            LogTab::Server
        };
        let dropped = ring.len() > RING_LINES;
        if dropped {
            ring.pop_front();
            logs.dropped += 1;
        } else {
            self.lines_in_memory += 1;
        }
        if watched == Some(run) {
            let (added, gone) = &mut f.watched_lines[tab as usize];
            *added += 1;
            *gone += u32::from(dropped);
        }
        while self.lines_in_memory > TOTAL_LINES {
            let Some(old) = self.finished_order.pop_front() else {
                break;
            };
            if Some(old) == watched {
                continue;
            }
            if let Some(l) = self.logs[old.0 as usize].take() {
                self.lines_in_memory -= l.len();
            }
        }
    }

    pub(crate) fn on_gpu(&mut self, msg: GpuMsg) {
        match msg {
            GpuMsg::Unavailable(why) => self.gpu_source = GpuSource::Unavailable(why),
            GpuMsg::Samples(samples) => {
                self.gpu_source = GpuSource::Nvml;
                let n = samples
                    .iter()
                    .map(|(s, _)| s.index + 1)
                    .max()
                    .unwrap_or(0)
                    .max(self.gpus_total);
                let holders = crate::tui::gpu::holders(&self.state, n);
                for (mut s, pids) in samples {
                    s.run = holders
                        .get(s.index as usize)
                        .copied()
                        .flatten()
                        .map(|h| h.0);
                    let foreign = if s.run.is_none() { pids.len() } else { 0 };
                    let i = s.index as usize;
                    self.push_gpu(s);
                    self.gpus[i].foreign = foreign;
                }
            }
        }
    }

    pub(crate) fn sim_gpu_tick(&mut self) {
        self.gpu_source = GpuSource::Simulated;
        for s in crate::tui::gpu::synthesize(&self.state, self.gpus_total, self.now_ms) {
            self.push_gpu(s);
        }
    }

    fn push_gpu(&mut self, s: GpuSample) {
        let i = s.index as usize;
        while self.gpus.len() <= i {
            let index = self.gpus.len() as u32;
            self.gpus.push(GpuView {
                foreign: 0,
                // Until its own sample arrives, a GPU reads as "no sample".
                sample: GpuSample {
                    index,
                    name: String::new(),
                    util_pct: 0,
                    mem_used_mib: 0,
                    mem_total_mib: 0,
                    temp_c: 0,
                    power_w: 0,
                    run: None,
                },
                util: VecDeque::new(),
                mem_pct: VecDeque::new(),
            });
        }
        let g = &mut self.gpus[i];
        g.util.push_back(s.util_pct as u64);
        g.mem_pct
            .push_back(s.mem_used_mib * 100 / s.mem_total_mib.max(1));
        if g.util.len() > GPU_HISTORY {
            g.util.pop_front();
            g.mem_pct.pop_front();
        }
        g.sample = s;
    }
}
