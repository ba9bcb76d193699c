//! GPU data for the panel. Real machines: an NVML sampler on its own thread (NVML calls
//! block), sending samples at a fixed period. The sim: plausible samples synthesised from
//! which runs hold which GPUs, labelled as simulated.

use crate::event::GpuSample;
use crate::model::{RunId, RunState, Stage};
use crate::state::SweepState;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;

#[derive(Debug, Clone, PartialEq)]
pub enum GpuMsg {
    /// NVML is not there (no driver, no library): the panel says so, the rest works.
    Unavailable(String),
    /// One sample per GPU, with the host PIDs of the compute processes on it.
    Samples(Vec<(GpuSample, Vec<u32>)>),
}

/// Where the panel's numbers come from.
#[derive(Debug, Clone, PartialEq)]
pub enum GpuSource {
    Waiting,
    Nvml,
    Simulated,
    Unavailable(String),
}

/// Start the NVML sampler thread. It stops when the receiver is dropped.
pub(crate) fn spawn_nvml(period: Duration, tx: UnboundedSender<GpuMsg>) {
    std::thread::Builder::new()
        .name("nvml-sampler".into())
        .spawn(move || nvml_loop(period, tx))
        .ok();
}

fn nvml_loop(period: Duration, tx: UnboundedSender<GpuMsg>) {
    use nvml_wrapper::enum_wrappers::device::TemperatureSensor;
    let nvml = match nvml_wrapper::Nvml::init() {
        Ok(n) => n,
        Err(e) => {
            let _ = tx.send(GpuMsg::Unavailable(format!("no NVIDIA driver (NVML): {e}")));
            return;
        }
    };
    loop {
        let n = nvml.device_count().unwrap_or(0);
        let mut out = Vec::new();
        for i in 0..n {
            let Ok(d) = nvml.device_by_index(i) else {
                continue;
            };
            let mem = d.memory_info().ok();
            let pids = d
                .running_compute_processes()
                .map(|ps| ps.iter().map(|p| p.pid).collect())
                .unwrap_or_default();
            out.push((
                GpuSample {
                    index: i,
                    name: d.name().unwrap_or_else(|_| "GPU".into()),
                    util_pct: d.utilization_rates().map(|u| u.gpu).unwrap_or(0),
                    mem_used_mib: mem.as_ref().map(|m| m.used >> 20).unwrap_or(0),
                    mem_total_mib: mem.as_ref().map(|m| m.total >> 20).unwrap_or(0),
                    temp_c: d.temperature(TemperatureSensor::Gpu).unwrap_or(0),
                    power_w: d.power_usage().map(|mw| mw / 1000).unwrap_or(0),
                    run: None,
                },
                pids,
            ));
        }
        if tx.send(GpuMsg::Samples(out)).is_err() {
            return;
        }
        std::thread::sleep(period);
    }
}

/// The run holding each GPU, from the engine's allocation.
pub(crate) fn holders(state: &SweepState, gpus: u32) -> Vec<Option<(RunId, Stage)>> {
    let mut h = vec![None; gpus as usize];
    for (i, r) in state.runs.iter().enumerate() {
        if let RunState::Active { stage } = r.state {
            for g in &r.gpus {
                if let Some(slot) = h.get_mut(*g as usize) {
                    *slot = Some((RunId(i as u32), stage));
                }
            }
        }
    }
    h
}

fn noise(a: u64, b: u64) -> u64 {
    let mut x = a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ b.wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    x ^= x >> 31;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^ (x >> 29)
}

/// Simulated samples: a loading server fills memory, a benchmark keeps the GPU busy,
/// an idle GPU idles. Deterministic in `now_ms` so snapshots are stable.
pub(crate) fn synthesize(state: &SweepState, gpus: u32, now_ms: u64) -> Vec<GpuSample> {
    let tick = now_ms / 1000;
    holders(state, gpus)
        .into_iter()
        .enumerate()
        .map(|(i, h)| {
            let n = noise(tick, i as u64);
            let jitter = (n % 9) as u32;
            let (util, mem_gib) = match h.map(|(_, s)| s) {
                None => (0, 0.5),
                Some(Stage::PreparingImage) => (0, 0.5),
                Some(Stage::StartingContainer) => (2 + jitter / 3, 1.0),
                Some(Stage::LoadingServer) => (15 + jitter * 2, 40.0 + (n % 30) as f64),
                Some(Stage::Benchmarking) => (88 + jitter.min(11), 71.0 + (n % 5) as f64),
                Some(Stage::Parsing) => (5 + jitter, 71.0),
            };
            GpuSample {
                index: i as u32,
                name: "H100 80GB HBM3 (simulated)".into(),
                util_pct: util,
                mem_used_mib: (mem_gib * 1024.0) as u64,
                mem_total_mib: 81_559,
                temp_c: 33 + util * 45 / 100 + jitter / 3,
                power_w: 70 + util * 6 + jitter,
                run: h.map(|(r, _)| r),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_gpus_idle() {
        let s = SweepState::new(2);
        let g = synthesize(&s, 4, 5_000);
        assert_eq!(g.len(), 4);
        assert!(g.iter().all(|x| x.util_pct == 0 && x.run.is_none()));
    }
}
