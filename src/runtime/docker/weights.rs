//! Model weights into the host's HF cache before the server-start clock (`crate::prefetch`),
//! so a 140 GB download does not count against `server_start_timeout_s`, a gated repo is
//! known before a GPU is held by a loading server, and the server then starts offline.

use super::{err, Clock, DockerRuntime};
use crate::model::{Pipe, Stage};
use crate::prefetch::{free_disk_bytes, Budget, FitProblem, PrefetchError, OFFLINE_ENV};
use crate::runtime::{RunEnd, RunJob, RunSink};

impl DockerRuntime {
    /// Fetch what the cache lacks of `model`; the environment that makes the server (and
    /// the client's tokenizer) use the cache offline. With no Hub reachable and nothing
    /// cached, the server is left to try on its own (an air-gapped box with a private
    /// mirror set in the image, say).
    pub(super) async fn ensure_weights(
        &self,
        job: &RunJob,
        model: &str,
        sink: &RunSink,
        clock: &Clock,
    ) -> Result<Vec<String>, RunEnd> {
        let Some(hub) = &self.cfg.weights else {
            // No fetching here; an operator who said the night has no Hub gets containers
            // that do not try one either (vLLM would wait on its timeouts, then fail).
            return Ok(if crate::prefetch::hub_offline() {
                OFFLINE_ENV
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect()
            } else {
                Vec::new()
            });
        };
        let budget = Budget {
            gpu_mem_per_gpu: self.cfg.gpu_mem_per_gpu,
            tp: (job.view.tp * job.view.pp).max(1),
            free_disk: free_disk_bytes(hub.cache_dir()),
        };
        let revision = job
            .view
            .flags
            .iter()
            .find(|f| f.name == "--revision")
            .and_then(|f| f.value.clone());
        // `--load-format dummy` makes the weights up: config and tokenizer are all it reads.
        let dummy = job.view.flags.iter().any(|f| {
            f.name.replace('_', "-") == "--load-format" && f.value.as_deref() == Some("dummy")
        });
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let forward = {
            let sink = sink.clone();
            tokio::spawn(async move {
                while let Some(p) = rx.recv().await {
                    let p: crate::prefetch::Progress = p;
                    sink.pull(format!("weights {}", p.file), p.done, p.total)
                        .await;
                }
            })
        };
        let result = clock
            .wait(
                hub.ensure_model_with(model, revision.as_deref(), &budget, !dummy, move |p| {
                    let _ = tx.send(p);
                }),
            )
            .await;
        let _ = forward.await;
        match result {
            Ok(prep) => {
                self.dlog(
                    sink,
                    Pipe::Stdout,
                    format!(
                        "weights of {model} ready in {} ({} files, {} fetched now); the server starts offline",
                        hub.cache_dir().display(),
                        prep.files.files.len(),
                        crate::prefetch::human_bytes(prep.summary.downloaded_bytes),
                    ),
                )
                .await;
                Ok(OFFLINE_ENV
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect())
            }
            Err(PrefetchError::Fit { problem, .. }) => {
                let message = format!("{model}: {problem}");
                self.dlog(sink, Pipe::Stderr, &message).await;
                Err(match problem {
                    FitProblem::Disk { .. } => RunEnd::DiskFull { message },
                    FitProblem::GpuMemory { .. } => err(Stage::PreparingImage, message),
                })
            }
            Err(PrefetchError::Fetch(e)) if e.is_network() => {
                self.dlog(
                    sink,
                    Pipe::Stderr,
                    format!("weights of {model}: Hub unreachable and not cached ({e}); the server will fetch them itself"),
                )
                .await;
                Ok(Vec::new())
            }
            Err(e) => {
                // Logged on the Docker stream, where the diagnoser reads a gated repo's 401.
                let message = hub.redact(&e.to_string());
                self.dlog(sink, Pipe::Stderr, &message).await;
                Err(err(Stage::PreparingImage, message))
            }
        }
    }
}
