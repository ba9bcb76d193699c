//! Following a job to its end: its files into the sink, the status markers into stages,
//! Slurm's view of the job into the GPU panel's provenance, and how it ended into a RunEnd.

use super::logs::{End, JobFiles, Marker};
use super::state::JobInfo;
use super::{err, submit, Followed, SlurmRuntime};
use crate::model::{Pipe, Stage};
use crate::runtime::{RunEnd, RunReport, RunSink, RuntimeMsg};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How an image pull failure reads in docker's, apptainer's and enroot's words.
fn image_missing(text: &str) -> Option<String> {
    const SIGNS: &[&str] = &[
        "Unable to find image",
        "pull access denied",
        "manifest unknown",
        "repository does not exist",
        "No such image",
        "FATAL:   Unable to handle docker://",
        "[ERROR] URI",
    ];
    let hit = text
        .lines()
        .rev()
        .find(|l| SIGNS.iter().any(|s| l.contains(s)) && !l.contains("locally"))
        .or_else(|| text.lines().find(|l| l.contains("Unable to find image")))?;
    Some(hit.trim().to_string())
}

impl SlurmRuntime {
    /// Follow the job to its end: files into the sink, markers into stages, Slurm's state.
    pub(super) async fn follow(
        &self,
        f: &Followed,
        sink: &RunSink,
        cancel: &CancellationToken,
    ) -> RunReport {
        let mut files = JobFiles::new(&f.dir, self.cfg.secrets.clone());
        let mut stage = Stage::PreparingImage;
        let mut end: Option<End> = None;
        let mut launcher_exit: Option<i64> = None;
        let mut info: Option<JobInfo> = None;
        let mut running_seen = false;
        let mut failures = 0u32;
        let mut next_poll = Instant::now();
        loop {
            tokio::select! {
                _ = cancel.cancelled() => {
                    self.cancel_job(&f.id, sink).await;
                    self.take(&mut files, sink, true, &mut stage, &mut end, &mut launcher_exit).await;
                    return RunReport::new(RunEnd::Cancelled);
                }
                _ = tokio::time::sleep(Duration::from_millis(250)) => {}
            }
            self.take(
                &mut files,
                sink,
                false,
                &mut stage,
                &mut end,
                &mut launcher_exit,
            )
            .await;
            if launcher_exit.is_some() {
                break;
            }
            // The job's own output came before the controller's poll said it runs (the
            // poll is seconds apart): the output is the evidence, and the wait ends here.
            if !running_seen && !f.attached && stage > Stage::PreparingImage {
                running_seen = true;
                let waited = f.submitted.elapsed().as_secs_f64();
                sink.send(RuntimeMsg::Provenance {
                    key: "slurm_start_s".into(),
                    value: format!("{waited:.3}"),
                })
                .await;
                self.dlog(
                    sink,
                    Pipe::Stdout,
                    format!(
                        "slurm job {} running {waited:.2} s after sbatch (its output came first)",
                        f.id
                    ),
                )
                .await;
            }
            if Instant::now() < next_poll {
                continue;
            }
            match self.watch.job(&f.id).await {
                Ok(j) => {
                    failures = 0;
                    if j.is_running() && !running_seen {
                        running_seen = true;
                        let waited = f.submitted.elapsed().as_secs_f64();
                        let msg = if f.attached {
                            format!(
                                "slurm job {} running on {} ({}), followed again after a restart",
                                j.id, j.nodes, j.gres
                            )
                        } else {
                            sink.send(RuntimeMsg::Provenance {
                                key: "slurm_start_s".into(),
                                value: format!("{waited:.3}"),
                            })
                            .await;
                            format!(
                                "slurm job {} running on {} ({}) {waited:.2} s after sbatch",
                                j.id, j.nodes, j.gres
                            )
                        };
                        self.dlog(sink, Pipe::Stdout, msg).await;
                    }
                    self.report_changes(info.as_ref(), &j, sink).await;
                    let over = j.is_over();
                    let poll = if j.is_pending() {
                        submit::POLL_PENDING
                    } else {
                        submit::POLL_RUNNING
                    };
                    info = Some(j);
                    if over {
                        break;
                    }
                    next_poll = Instant::now() + poll;
                }
                Err(e) => {
                    failures += 1;
                    // A controller restart is not the run's failure; a job nobody knows of
                    // for a minute is over.
                    // Said once (a misconfigured slurmrestd shows at once), then retried.
                    if failures == 1 {
                        self.dlog(sink, Pipe::Stderr, format!("slurm: {e} (asking again)"))
                            .await;
                    }
                    if failures >= 60 {
                        self.dlog(sink, Pipe::Stderr, format!("slurm: {e}")).await;
                        break;
                    }
                    next_poll = Instant::now() + submit::POLL_RUNNING;
                }
            }
        }
        self.take(
            &mut files,
            sink,
            true,
            &mut stage,
            &mut end,
            &mut launcher_exit,
        )
        .await;
        let run_end = self.decide(f, end, stage, info.as_ref(), sink).await;
        let mut report = RunReport::new(run_end);
        if matches!(report.end, RunEnd::BenchExited { .. }) {
            if let Ok(rd) = std::fs::read_dir(f.dir.join("results")) {
                report.result_files = rd.flatten().map(|e| e.path()).collect();
                report.result_files.sort();
            }
        }
        report
    }

    /// What the GPU panel shows of the job (state, node, allocation), when it changes.
    async fn report_changes(&self, before: Option<&JobInfo>, j: &JobInfo, sink: &RunSink) {
        let prov = |k: &str, v: String| RuntimeMsg::Provenance {
            key: k.into(),
            value: v,
        };
        let state = |i: &JobInfo| {
            if i.is_pending() && !i.reason.is_empty() && i.reason != "None" {
                format!("{} ({})", i.state, i.reason)
            } else {
                i.state.clone()
            }
        };
        if before.map(state) != Some(state(j)) {
            if j.is_pending() {
                self.dlog(
                    sink,
                    Pipe::Stdout,
                    format!("slurm job {} {}", j.id, state(j)),
                )
                .await;
            }
            sink.send(prov("slurm_state", state(j))).await;
        }
        if !j.gres.is_empty() && before.map(|b| &b.gres) != Some(&j.gres) {
            sink.send(prov("slurm_gres", j.gres.clone())).await;
        }
        if !j.nodes.is_empty() && before.map(|b| &b.nodes) != Some(&j.nodes) {
            sink.send(prov("slurm_node", j.nodes.clone())).await;
        }
    }

    /// Deliver the files' new lines and act on the status markers.
    async fn take(
        &self,
        files: &mut JobFiles,
        sink: &RunSink,
        last: bool,
        stage: &mut Stage,
        end: &mut Option<End>,
        launcher_exit: &mut Option<i64>,
    ) {
        for m in files.pump(sink, last).await {
            match m {
                Marker::Stage(s) => {
                    if s > *stage {
                        *stage = s;
                        sink.stage(s).await;
                    }
                }
                Marker::Provenance(k, v) => {
                    sink.send(RuntimeMsg::Provenance { key: k, value: v }).await
                }
                Marker::FixOk(r) => sink.send(RuntimeMsg::FixApplied { recipe: r }).await,
                Marker::Ready(s) => {
                    self.dlog(
                        sink,
                        Pipe::Stdout,
                        format!("server ready ({s} s after it started)"),
                    )
                    .await;
                    sink.send(RuntimeMsg::Provenance {
                        key: "server_ready_s".into(),
                        value: s.to_string(),
                    })
                    .await;
                }
                Marker::Node { node, gpus } => {
                    sink.send(RuntimeMsg::Provenance {
                        key: "slurm_alloc".into(),
                        value: format!("{node} gpus={gpus}"),
                    })
                    .await
                }
                Marker::End(End::Launcher(c)) => *launcher_exit = Some(c),
                Marker::End(e) => {
                    if end.is_none() {
                        *end = Some(e);
                    }
                }
                Marker::Other(_) => {}
            }
        }
    }

    async fn decide(
        &self,
        f: &Followed,
        end: Option<End>,
        stage: Stage,
        info: Option<&JobInfo>,
        sink: &RunSink,
    ) -> RunEnd {
        match end {
            Some(End::BenchExit(c)) => return RunEnd::BenchExited { exit_code: c },
            Some(End::ServerExit(c)) => return RunEnd::ServerDied { exit_code: Some(c) },
            Some(End::Timeout(s)) => return RunEnd::Timeout { stage: s },
            Some(End::Invalid(m)) => return RunEnd::BenchInvalid { message: m },
            Some(End::PatchFailed(m)) => return RunEnd::PatchFailed { message: m },
            Some(End::FixFailed(m)) => {
                return err(Stage::StartingContainer, format!("fix recipe {m}"))
            }
            Some(End::Launcher(_)) | None => {}
        }
        let state = info.map(|i| i.state.as_str()).unwrap_or("UNKNOWN");
        match state {
            "TIMEOUT" => return RunEnd::Timeout { stage },
            // The cluster took the job away (a node died, a higher-priority job): not the
            // run's failure, so it goes back to the queue without spending a retry.
            "NODE_FAIL" | "PREEMPTED" | "BOOT_FAIL" | "DEADLINE" => {
                self.dlog(
                    sink,
                    Pipe::Stderr,
                    format!("slurm job {} ended {state}: re-queued", f.id),
                )
                .await;
                return RunEnd::Cancelled;
            }
            _ => {}
        }
        let launcher_err = JobFiles::launcher_err(&f.dir);
        if stage == Stage::PreparingImage {
            if let Some(line) = image_missing(&launcher_err) {
                return RunEnd::ImageMissing {
                    message: self.cfg.secrets.redact(&line),
                };
            }
        }
        let last = launcher_err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim();
        err(
            stage,
            self.cfg.secrets.redact(&format!(
                "slurm job {} ended {state} (exit {}) before its script reported an end{}",
                f.id,
                info.and_then(|i| i.exit.clone())
                    .unwrap_or_else(|| "?".into()),
                if last.is_empty() {
                    String::new()
                } else {
                    format!(": {last}")
                }
            )),
        )
    }

    /// scancel, then wait (bounded) until Slurm has let the job go, so its GPUs are free
    /// when the engine hands them to the next run.
    async fn cancel_job(&self, id: &str, sink: &RunSink) {
        if let Err(e) = self.client.run("scancel", &[id.to_string()]).await {
            self.dlog(sink, Pipe::Stderr, format!("scancel {id}: {e}"))
                .await;
            return;
        }
        self.dlog(sink, Pipe::Stdout, format!("scancel {id}")).await;
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            match self.client.job(id).await {
                Ok(j) if !j.is_over() => tokio::time::sleep(Duration::from_millis(250)).await,
                _ => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_failures_read_as_missing_images() {
        let t = "Unable to find image 'org/x:1' locally\ndocker: Error response from daemon: pull access denied for org/x, repository does not exist\n";
        assert!(image_missing(t).unwrap().contains("pull access denied"));
        assert_eq!(image_missing("bash: docker: command not found\n"), None);
    }
}
