//! nightshift: run and watch overnight vLLM commit benchmark sweeps.
//!
//! The core (plan, parse, diagnose, policy, scheduler, state) is pure and synchronous;
//! adapters (sim, docker, sled store, terminal, NVML) sit at the edges.

pub mod category;
pub mod cli;
pub mod model;
pub mod parse;
