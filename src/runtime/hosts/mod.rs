//! Several Docker engines as one runtime (`run --hosts FILE`): one Docker runtime per
//! `[[hosts]]` entry, the engine's GPU slots laid end to end over the hosts (host 0's GPUs
//! first). A run goes to the host that owns its first slot when that host is up and has
//! the GPUs free, else to any up host that has; with none, it waits here for one.
//!
//! A health check pings every host twice a second. A host that stops answering is marked
//! down: its runs in flight are stopped and end as interrupted (`RunEnd::Cancelled`
//! without an operator's cancel), which the engine re-queues without spending a retry, and
//! no run is placed on it until it answers again. Readiness is asked inside each
//! container, through its host's engine (the port is published there, not here).

pub mod config;
mod tls;

use super::docker::{DockerConfig, DockerRuntime};
use super::{RunEnd, RunJob, RunReport, RunSink, Runtime};
use crate::model::{Pipe, Stream};
use async_trait::async_trait;
use bollard::Docker;
pub use config::HostSpec;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How often each host is pinged, how long one ping may take, and how many must fail in a
/// row before the host counts as gone. Docker answers slowly during big pulls and commits:
/// one slow or lost ping must not cancel a host's runs. A refused connection fails fast,
/// so a dead host is still noticed within about two seconds; a hung one within 20.
const HEALTH_PERIOD: Duration = Duration::from_millis(500);
const PING_TIMEOUT: Duration = Duration::from_secs(5);
const MISSES_DOWN: u32 = 4;
/// A host whose runs delivered bytes this recently is alive, however its pings fare: a
/// Docker busy with a big pull or commit answers `/_ping` late while its containers'
/// streams still flow.
const STREAMS_ALIVE: Duration = Duration::from_secs(15);
/// After a host is lost, how long its runs' teardown may take before they are let go
/// (a host that is gone does not answer the removal either).
const LOST_TEARDOWN: Duration = Duration::from_secs(5);

struct HostState {
    up: bool,
    /// Pings failed in a row.
    misses: u32,
    /// Local GPU index → busy.
    busy: Vec<bool>,
    /// Runs in flight here: id → their stop token.
    inflight: HashMap<u64, CancellationToken>,
    /// When a run here last delivered a line (its streams are the host's heartbeat too).
    last_bytes: Option<Instant>,
}

/// An attempt ended without its result while its host may be going (a stopped engine ends
/// its streams before the health check has missed enough pings): wait for the health
/// check's verdict, bounded by the time its rule takes, rather than decide here. An engine
/// that answers at all, however late (a busy Docker answers `/_ping` in seconds), is alive,
/// and the end is the attempt's own, with its diagnosis and the policy's retries.
async fn host_lost(host: &Host, stop: &CancellationToken) -> bool {
    let rule = STREAMS_ALIVE + PING_TIMEOUT + HEALTH_PERIOD * MISSES_DOWN;
    let deadline = Instant::now() + rule;
    while Instant::now() < deadline {
        if stop.is_cancelled() {
            return true;
        }
        let answer = tokio::time::timeout(ANSWERS_AT_ALL, host.docker.ping()).await;
        if matches!(answer, Ok(Ok(_))) {
            return false;
        }
        if !host.lock().up {
            return true;
        }
        tokio::time::sleep(HEALTH_PERIOD).await;
    }
    stop.is_cancelled() || !host.lock().up
}

/// How late a ping may answer and still say the engine is alive, when an attempt's end is
/// to be told from its host's.
const ANSWERS_AT_ALL: Duration = Duration::from_secs(12);

/// The health check's verdict on a host after a ping: `Some(up)` to mark it, `None` to
/// leave it. Down takes [`MISSES_DOWN`] missed pings in a row and no run on it streaming.
fn health(ok: bool, misses: u32, streaming: bool) -> Option<bool> {
    if ok {
        Some(true)
    } else if misses >= MISSES_DOWN && !streaming {
        Some(false)
    } else {
        None
    }
}

struct Host {
    spec: HostSpec,
    docker: Docker,
    rt: DockerRuntime,
    state: Mutex<HostState>,
    /// Keeps an `ssh://` host's tunnel open.
    _tunnel: Option<config::Tunnel>,
}

impl Host {
    fn lock(&self) -> std::sync::MutexGuard<'_, HostState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

pub struct MultiHost {
    hosts: Vec<Arc<Host>>,
    /// First global slot of each host.
    offsets: Vec<u32>,
    freed: tokio::sync::Notify,
    monitor: AtomicBool,
    next_id: AtomicU64,
    /// (host, when it was lost), for the runs that were on it.
    lost_log: Mutex<Vec<(String, Instant)>>,
    /// The sweep (from `cleanup_leftovers`): a host that answers again first loses what
    /// the sweep's interrupted runs left on it.
    sweep: Mutex<Option<String>>,
    /// The ssh tunnels' sockets live here: a folder of this process's own (random name,
    /// this user only), removed with it. A guessable socket in a shared `$TMPDIR` let
    /// another user bind it first and take the sweep's Docker traffic, tokens included.
    _tunnels: tempfile::TempDir,
}

/// The host owning global slot `slot`, and the slot's local GPU index there.
pub(crate) fn locate(offsets: &[u32], sizes: &[u32], slot: u32) -> Option<(usize, u32)> {
    offsets
        .iter()
        .zip(sizes)
        .position(|(o, n)| slot >= *o && slot < o + n)
        .map(|i| (i, slot - offsets[i]))
}

/// Where a run of `n` GPUs goes: the preferred host if it is up with room, else the up
/// host with the most free GPUs. Returns (host, local GPUs).
fn choose(
    free: &[(bool, Vec<u32>)],
    n: usize,
    preferred: Option<usize>,
) -> Option<(usize, Vec<u32>)> {
    let fits = |i: usize| free[i].0 && free[i].1.len() >= n;
    let pick = preferred
        .filter(|p| *p < free.len() && fits(*p))
        .or_else(|| {
            (0..free.len())
                .filter(|i| fits(*i))
                .max_by_key(|i| (free[*i].1.len(), std::cmp::Reverse(*i)))
        })?;
    Some((pick, free[pick].1.iter().take(n).copied().collect()))
}

impl MultiHost {
    /// One Docker runtime per host, each with `cfg` (the plan's container settings) and
    /// the operator's recipe book.
    pub fn new(
        specs: Vec<HostSpec>,
        cfg: &DockerConfig,
        recipes: Arc<dyn super::docker::recipes::RecipeSteps>,
    ) -> Result<Self, String> {
        let tunnels = tempfile::Builder::new()
            .prefix("nightshift-ssh-")
            .tempdir()
            .map_err(|e| format!("a private folder for the ssh tunnels: {e}"))?;
        let mut hosts = Vec::new();
        let mut offsets = Vec::new();
        let mut at = 0;
        for spec in specs {
            let (docker, tunnel) = config::connect(&spec, tunnels.path())?;
            let mut host_cfg = cfg.clone();
            host_cfg.gpu_requests = spec.gpu_requests.unwrap_or(cfg.gpu_requests);
            let rt =
                DockerRuntime::on_engine(host_cfg, docker.clone()).with_recipes(recipes.clone());
            offsets.push(at);
            at += spec.gpus;
            hosts.push(Arc::new(Host {
                state: Mutex::new(HostState {
                    up: true,
                    misses: 0,
                    busy: vec![false; spec.gpus as usize],
                    inflight: HashMap::new(),
                    last_bytes: None,
                }),
                spec,
                docker,
                rt,
                _tunnel: tunnel,
            }));
        }
        Ok(MultiHost {
            hosts,
            offsets,
            freed: tokio::sync::Notify::new(),
            monitor: AtomicBool::new(false),
            next_id: AtomicU64::new(1),
            lost_log: Mutex::new(Vec::new()),
            sweep: Mutex::new(None),
            _tunnels: tunnels,
        })
    }

    pub fn total_gpus(&self) -> u32 {
        self.hosts.iter().map(|h| h.spec.gpus).sum()
    }

    /// Whether each host is up, by name (for tests and `doctor`).
    pub fn up(&self) -> BTreeMap<String, bool> {
        self.hosts
            .iter()
            .map(|h| (h.spec.name.clone(), h.lock().up))
            .collect()
    }

    /// A host back from the dead: the containers its interrupted runs left (stopped, not
    /// removed, when its engine went down) go, before it takes new runs' names.
    async fn revive(&self, h: &Host) {
        let sweep = self.sweep.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(sweep) = sweep {
            match h.rt.cleanup_leftovers(&sweep).await {
                Ok(lines) => {
                    for l in lines {
                        tracing::warn!("host {}: {l}", h.spec.name);
                    }
                }
                Err(e) => tracing::warn!("host {}: leftovers not removed: {e:#}", h.spec.name),
            }
        }
        self.set_up(h, true);
    }

    fn start_monitor(self: &Arc<Self>) {
        if self.monitor.swap(true, Ordering::SeqCst) {
            return;
        }
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(HEALTH_PERIOD);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                tick.tick().await;
                let Some(me) = me.upgrade() else { return };
                let pings = me.hosts.iter().map(|h| {
                    let d = h.docker.clone();
                    async move {
                        matches!(
                            tokio::time::timeout(PING_TIMEOUT, d.ping()).await,
                            Ok(Ok(_))
                        )
                    }
                });
                let answers = futures_util::future::join_all(pings).await;
                for (h, ok) in me.hosts.iter().zip(answers) {
                    let (misses, streaming) = {
                        let mut st = h.lock();
                        st.misses = if ok { 0 } else { st.misses + 1 };
                        let streaming = st.last_bytes.is_some_and(|t| t.elapsed() < STREAMS_ALIVE);
                        (st.misses, streaming)
                    };
                    match health(ok, misses, streaming) {
                        Some(true) if !h.lock().up => me.revive(h).await,
                        Some(up) => me.set_up(h, up),
                        None => {}
                    }
                }
            }
        });
    }

    fn set_up(&self, h: &Host, ok: bool) {
        let mut st = h.lock();
        if st.up == ok {
            return;
        }
        st.up = ok;
        if ok {
            tracing::warn!("host {} answers again: runs are placed on it", h.spec.name);
            drop(st);
            self.freed.notify_waiters();
        } else {
            tracing::warn!(
                "host {} stopped answering: its {} runs in flight are re-queued, and it gets no run until it answers",
                h.spec.name,
                st.inflight.len()
            );
            for t in st.inflight.values() {
                t.cancel();
            }
            self.lost_log
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((h.spec.name.clone(), Instant::now()));
        }
    }

    /// Take GPUs for a run: (host, local GPUs), waiting while no up host has room.
    async fn place(
        &self,
        job: &RunJob,
        sink: &RunSink,
        cancel: &CancellationToken,
    ) -> Option<(usize, Vec<u32>)> {
        let sizes: Vec<u32> = self.hosts.iter().map(|h| h.spec.gpus).collect();
        let preferred = job
            .gpus
            .first()
            .and_then(|g| locate(&self.offsets, &sizes, *g))
            .map(|(h, _)| h);
        let mut said = false;
        loop {
            let notified = self.freed.notified();
            {
                let states: Vec<_> = self.hosts.iter().map(|h| h.lock()).collect();
                let free: Vec<(bool, Vec<u32>)> = states
                    .iter()
                    .map(|s| {
                        let f = s
                            .busy
                            .iter()
                            .enumerate()
                            .filter(|(_, b)| !**b)
                            .map(|(i, _)| i as u32)
                            .collect();
                        (s.up, f)
                    })
                    .collect();
                drop(states);
                if let Some((h, gpus)) = choose(&free, job.gpus.len(), preferred) {
                    let mut st = self.hosts[h].lock();
                    if st.up && gpus.iter().all(|g| !st.busy[*g as usize]) {
                        for g in &gpus {
                            st.busy[*g as usize] = true;
                        }
                        return Some((h, gpus));
                    }
                    continue;
                }
            }
            if !said {
                said = true;
                let down: Vec<&str> = self
                    .hosts
                    .iter()
                    .filter(|h| !h.lock().up)
                    .map(|h| h.spec.name.as_str())
                    .collect();
                sink.log(
                    Stream::Docker,
                    Pipe::Stdout,
                    format!(
                        "waiting for a host with {} free GPU(s){}",
                        job.gpus.len(),
                        if down.is_empty() {
                            String::new()
                        } else {
                            format!(" ({} down)", down.join(", "))
                        }
                    ),
                )
                .await;
            }
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                _ = cancel.cancelled() => return None,
            }
        }
    }

    fn release(&self, h: usize, gpus: &[u32], id: u64) {
        let mut st = self.hosts[h].lock();
        for g in gpus {
            if let Some(b) = st.busy.get_mut(*g as usize) {
                *b = false;
            }
        }
        st.inflight.remove(&id);
        drop(st);
        self.freed.notify_waiters();
    }

    async fn execute_arc(
        self: Arc<Self>,
        job: RunJob,
        sink: RunSink,
        cancel: CancellationToken,
    ) -> RunReport {
        self.start_monitor();
        let Some((h, local)) = self.place(&job, &sink, &cancel).await else {
            return RunReport::new(RunEnd::Cancelled);
        };
        let host = self.hosts[h].clone();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let stop = cancel.child_token();
        host.lock().inflight.insert(id, stop.clone());
        sink.log(
            Stream::Docker,
            Pipe::Stdout,
            format!(
                "host {}: GPUs {local:?} (slots {:?})",
                host.spec.name, job.gpus
            ),
        )
        .await;
        sink.send(super::RuntimeMsg::Provenance {
            key: "host".into(),
            value: host.spec.name.clone(),
        })
        .await;
        let mut local_job = job.clone();
        local_job.gpus = local.clone();
        // The attempt reports through a sink of the host's own that notes each line as the
        // host's heartbeat, then hands it on in order.
        let (tx, mut rx) = tokio::sync::mpsc::channel(256);
        let forward = {
            let (host, sink) = (host.clone(), sink.clone());
            tokio::spawn(async move {
                while let Some((_, _, msg)) = rx.recv().await {
                    if matches!(msg, super::RuntimeMsg::Log { .. }) {
                        host.lock().last_bytes = Some(Instant::now());
                    }
                    sink.send(msg).await;
                }
            })
        };
        let report = {
            let via = RunSink::new(sink.run, sink.attempt, tx);
            let exec = host.rt.execute(local_job, via, stop.clone());
            tokio::pin!(exec);
            tokio::select! {
                r = &mut exec => r,
                _ = stop.cancelled(), if !cancel.is_cancelled() => {
                    // The host went away (an operator's cancel also fires `cancel`).
                    match tokio::time::timeout(LOST_TEARDOWN, &mut exec).await {
                        Ok(r) => r,
                        Err(_) => RunReport::new(RunEnd::Cancelled),
                    }
                }
            }
        };
        // Every line the attempt sent is with the engine before its end is. Bounded: a log
        // follower the attempt left behind keeps its copy of the sink, and its late lines
        // are still handed on.
        let _ = tokio::time::timeout(Duration::from_secs(2), forward).await;
        // A run that came back with its result keeps it, whatever a ping says now. One
        // cut short because the health check marked its host down is re-queued; any other
        // end is the attempt's own, with its diagnosis and the policy's retries. Only the
        // health check decides a host is down (by its rule: missed pings and silent
        // streams): one failed run with slow pings must not take the host's other runs.
        let finished = matches!(report.end, RunEnd::BenchExited { .. });
        let lost = !cancel.is_cancelled() && !finished && host_lost(&host, &stop).await;
        self.release(h, &local, id);
        if lost {
            sink.log(
                Stream::Docker,
                Pipe::Stderr,
                format!(
                    "host {} stopped answering during this attempt: re-queued (no retry spent); it gets no run until it answers again",
                    host.spec.name
                ),
            )
            .await;
            return RunReport::new(RunEnd::Cancelled);
        }
        report
    }

    /// When each lost host was noticed (for the test's and the operator's timing).
    pub fn losses(&self) -> Vec<(String, Instant)> {
        self.lost_log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn up_hosts(&self) -> Vec<Arc<Host>> {
        self.hosts.iter().filter(|h| h.lock().up).cloned().collect()
    }
}

/// The runtime the engine holds: `MultiHost` behind an Arc, so its health check (a
/// background task) can outlive no one and every attempt shares the hosts' state.
#[derive(Clone)]
pub struct Hosts(pub Arc<MultiHost>);

#[async_trait]
impl Runtime for Hosts {
    fn name(&self) -> &'static str {
        "docker"
    }

    async fn cleanup_leftovers(&self, sweep: &str) -> anyhow::Result<Vec<String>> {
        *self.0.sweep.lock().unwrap_or_else(|e| e.into_inner()) = Some(sweep.to_string());
        let mut lines = Vec::new();
        for h in &self.0.hosts {
            match h.rt.cleanup_leftovers(sweep).await {
                Ok(l) => lines.extend(l.into_iter().map(|l| format!("host {}: {l}", h.spec.name))),
                Err(e) => {
                    // A host that is down now is marked so; the night goes on with the rest.
                    self.0.set_up(h, false);
                    lines.push(format!(
                        "host {} does not answer ({e:#}): marked down",
                        h.spec.name
                    ));
                }
            }
        }
        Ok(lines)
    }

    async fn execute(&self, job: RunJob, sink: RunSink, cancel: CancellationToken) -> RunReport {
        self.0.clone().execute_arc(job, sink, cancel).await
    }

    fn prefetches(&self) -> bool {
        self.0.hosts.first().is_some_and(|h| h.rt.prefetches())
    }

    /// Every up host gets the image: the run may be placed on any of them.
    async fn fetch_image(
        &self,
        job: RunJob,
        sink: RunSink,
        cancel: CancellationToken,
    ) -> Result<(), RunEnd> {
        for h in self.0.up_hosts() {
            h.rt.fetch_image(job.clone(), sink.clone(), cancel.clone())
                .await?;
        }
        Ok(())
    }

    /// The tightest host's free space; each image's size as the first up host has it.
    async fn image_stock(&self, images: &[String]) -> (Option<u64>, BTreeMap<String, u64>) {
        let mut free: Option<u64> = None;
        let mut sizes = BTreeMap::new();
        for h in self.0.up_hosts() {
            let (f, s) = h.rt.image_stock(images).await;
            if let Some(f) = f {
                free = Some(free.map_or(f, |x| x.min(f)));
            }
            for (k, v) in s {
                sizes.entry(k).or_insert(v);
            }
        }
        (free, sizes)
    }

    async fn evict_image(&self, image: &str) -> Result<u64, String> {
        let mut freed = 0;
        for h in self.0.up_hosts() {
            freed += h.rt.evict_image(image).await?;
        }
        Ok(freed)
    }
}

/// For `nightshift run --hosts FILE`: the hosts file read and checked (exit 2 when it is
/// wrong), every host asked once (one that does not answer starts marked down). Returns
/// the runtime and its GPUs (all hosts', unless `--gpus`).
pub(crate) fn for_cli(
    plan: &crate::plan::Plan,
    file: &std::path::Path,
    opts: &crate::runtime::docker::DockerOptions,
    gpus: Option<u32>,
    recipes: Arc<crate::diagnose::RecipeBook>,
) -> Result<(Arc<dyn Runtime>, u32), i32> {
    let specs = config::load(file).map_err(|e| {
        tracing::error!("{e}");
        2
    })?;
    let mut cfg = DockerConfig::from_plan(plan);
    cfg.min_free_bytes = opts.min_free_bytes;
    cfg.build = opts.build.clone();
    let multi = MultiHost::new(specs, &cfg, recipes).map_err(|e| {
        tracing::error!("{}: {e}", file.display());
        2
    })?;
    let mut answering = 0;
    for h in &multi.hosts {
        let ok = crate::rt::block_on(async {
            matches!(
                tokio::time::timeout(PING_TIMEOUT, h.docker.ping()).await,
                Ok(Ok(_))
            )
        });
        if ok {
            answering += 1;
        } else {
            tracing::warn!(
                "host {} ({}) does not answer: marked down until it does",
                h.spec.name,
                h.spec.docker_host
            );
            h.lock().up = false;
        }
    }
    if answering == 0 {
        let names: Vec<&str> = multi.hosts.iter().map(|h| h.spec.name.as_str()).collect();
        tracing::error!(
            "no host in {} answers ({})",
            file.display(),
            names.join(", ")
        );
        return Err(1);
    }
    let total = multi.total_gpus();
    Ok((Arc::new(Hosts(Arc::new(multi))), gpus.unwrap_or(total)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_map_to_hosts() {
        let offsets = [0, 2, 6];
        let sizes = [2, 4, 1];
        assert_eq!(locate(&offsets, &sizes, 0), Some((0, 0)));
        assert_eq!(locate(&offsets, &sizes, 3), Some((1, 1)));
        assert_eq!(locate(&offsets, &sizes, 6), Some((2, 0)));
        assert_eq!(locate(&offsets, &sizes, 7), None);
    }

    #[test]
    fn placement_prefers_the_slot_owner_and_skips_down_hosts() {
        let free = vec![
            (true, vec![0, 1]),
            (false, vec![0, 1, 2, 3]),
            (true, vec![1]),
        ];
        assert_eq!(choose(&free, 1, Some(2)), Some((2, vec![1])));
        // Host 1 is down: its slots are refused; the up host with room takes the run.
        assert_eq!(choose(&free, 1, Some(1)), Some((0, vec![0])));
        assert_eq!(choose(&free, 2, Some(2)), Some((0, vec![0, 1])));
        assert_eq!(choose(&free, 3, None), None);
        assert_eq!(choose(&free, 0, Some(1)), Some((0, vec![])));
    }

    #[test]
    fn a_host_goes_down_only_after_missed_pings_and_silent_streams() {
        assert_eq!(health(true, 0, false), Some(true));
        // One slow ping, or three: nothing changes.
        for m in 1..MISSES_DOWN {
            assert_eq!(health(false, m, false), None, "{m} misses");
        }
        assert_eq!(health(false, MISSES_DOWN, false), Some(false));
        // Its runs still deliver bytes: alive, however many pings were missed.
        assert_eq!(health(false, MISSES_DOWN * 10, true), None);
    }
}
