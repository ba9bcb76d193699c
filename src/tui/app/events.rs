//! What the app does with what arrives: engine events, log lines into the rings, image
//! fetch lines, GPU samples.

use super::*;

impl App {
    pub(crate) fn on_envelope(&mut self, env: &Envelope) {
        let _ = self.night.state.apply(env);
        let plan = self.night.plan.clone();
        let key = |r: RunId| {
            plan.runs
                .get(r.0 as usize)
                .map_or_else(|| r.to_string(), |s| s.key.clone())
        };
        if let Some(e) = crate::report::activity::entry(env, &key) {
            // Ours, refused: the run moved since this screen showed it; say so, and the
            // operator acts again on it as it is now.
            if e.refused()
                && self
                    .me
                    .as_deref()
                    .is_some_and(|me| crate::event::signed_by(&e.source, me))
            {
                self.ui.toast = Some(format!("⚠ {}: {}", e.what, e.outcome));
            } else if e.by_operator()
                && !self
                    .me
                    .as_deref()
                    .is_some_and(|me| crate::event::signed_by(&e.source, me))
            {
                // Another operator's action: every client sees it as it happens.
                self.ui.toast = Some(format!("⚑ {}: {} — {}", e.source, e.what, e.outcome));
            }
            if self.night.activity.len() >= ACTIVITY_KEPT {
                self.night.activity.pop_front();
            }
            self.night.activity.push_back(e);
        }
        match &env.event {
            Event::SweepStarted { runtime, gpus, .. } => {
                self.night.runtime = runtime.clone();
                self.night.gpus_total = *gpus;
                self.night.finished = false;
            }
            Event::SweepFinished { .. } => self.night.finished = true,
            Event::Log {
                run,
                stream,
                pipe,
                line,
                ..
            } => self.push_log(*run, *stream, *pipe, line),
            Event::Pull {
                run,
                layer,
                done,
                total,
            } => {
                self.night
                    .pull_layers
                    .entry(*run)
                    .or_default()
                    .insert(layer.clone(), (*done, *total));
            }
            Event::Gpu { sample } => self.push_gpu(sample.clone()),
            Event::Image {
                image,
                status,
                detail,
            } => self.push_image_line(image, *status, detail),
            Event::State {
                run, to, attempt, ..
            } => {
                self.night.entered_ms.insert(*run, env.at_ms);
                if let RunState::Active {
                    stage: crate::model::Stage::PreparingImage,
                } = to
                {
                    self.night.pull_layers.remove(run);
                    // The rings span attempts; say where a new one begins.
                    let has_lines = self
                        .night
                        .logs
                        .get(run.0 as usize)
                        .is_some_and(|l| l.as_ref().is_some_and(|l| l.len() > 0));
                    if has_lines {
                        let marker = format!("──── attempt {attempt} ────");
                        self.push_log(*run, Stream::Server, Pipe::Stdout, &marker);
                        self.push_log(*run, Stream::Bench, Pipe::Stdout, &marker);
                    }
                }
                if matches!(to, RunState::Finished { .. } | RunState::Held { .. }) {
                    self.night.finished_order.push_back(*run);
                    self.caches.learned.take();
                }
                if self.ui.auto_select {
                    let cur = self.selected_run();
                    let cur_active = cur.is_some_and(|r| self.night.state.run(r).state.is_active());
                    if to.is_active() && !cur_active {
                        self.select_run(*run);
                    } else if Some(*run) == cur && !to.is_active() {
                        // The one we watched ended: move to the newest still running.
                        if let Some(next) = self.night.newest_active() {
                            self.select_run(next);
                        }
                    }
                }
            }
            _ => {}
        }
    }

    /// A prefetch's line (a build's log, a status) into each run still waiting for it.
    pub(super) fn push_image_line(
        &mut self,
        image: &str,
        status: crate::event::ImageStatus,
        detail: &str,
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
            .night
            .runs_by_image
            .get(image)
            .into_iter()
            .flatten()
            .copied()
            .filter(|r| {
                matches!(
                    self.night.state.run(*r).state,
                    RunState::Queued
                        | RunState::Active {
                            stage: crate::model::Stage::PreparingImage
                        }
                )
            })
            .collect();
        for r in waiting {
            self.push_log(r, Stream::Docker, pipe, &line);
        }
    }

    pub(super) fn push_log(&mut self, run: RunId, stream: Stream, pipe: Pipe, line: &str) {
        let Some(slot) = self.night.logs.get_mut(run.0 as usize) else {
            return;
        };
        self.night.lines_seen += 1;
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
        if ring.len() > RING_LINES {
            ring.pop_front();
            logs.dropped += 1;
            if let Some(a) = self.ui.search_at.as_mut() {
                *a = a.saturating_sub(1);
            }
        } else {
            self.night.lines_in_memory += 1;
        }
        if !self.ui.follow && self.selected_run() == Some(run) && self.ui.log_tab == tab {
            self.ui.log_scroll += 1;
        }
        while self.night.lines_in_memory > TOTAL_LINES {
            let Some(old) = self.night.finished_order.pop_front() else {
                break;
            };
            if Some(old) == self.selected_run() {
                continue;
            }
            if let Some(l) = self.night.logs[old.0 as usize].take() {
                self.night.lines_in_memory -= l.len();
            }
        }
    }

    pub(crate) fn on_gpu(&mut self, msg: GpuMsg) {
        match msg {
            GpuMsg::Unavailable(why) => self.night.gpu_source = GpuSource::Unavailable(why),
            GpuMsg::Samples(samples) => {
                self.night.gpu_source = GpuSource::Nvml;
                let n = samples
                    .iter()
                    .map(|(s, _)| s.index + 1)
                    .max()
                    .unwrap_or(0)
                    .max(self.night.gpus_total);
                let holders = crate::tui::gpu::holders(&self.night.state, n);
                for (mut s, pids) in samples {
                    s.run = holders
                        .get(s.index as usize)
                        .copied()
                        .flatten()
                        .map(|h| h.0);
                    let foreign = if s.run.is_none() { pids.len() } else { 0 };
                    let i = s.index as usize;
                    self.push_gpu(s);
                    self.night.gpus[i].foreign = foreign;
                }
            }
        }
    }

    pub(crate) fn sim_gpu_tick(&mut self) {
        self.night.gpu_source = GpuSource::Simulated;
        for s in
            crate::tui::gpu::synthesize(&self.night.state, self.night.gpus_total, self.night.now_ms)
        {
            self.push_gpu(s);
        }
    }

    pub(super) fn push_gpu(&mut self, s: GpuSample) {
        let i = s.index as usize;
        while self.night.gpus.len() <= i {
            let index = self.night.gpus.len() as u32;
            self.night.gpus.push(GpuView {
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
        let g = &mut self.night.gpus[i];
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
