//! nightshift: run and watch overnight vLLM commit benchmark sweeps.
//!
//! The core (plan, parse, diagnose, policy, scheduler, state) is pure and synchronous;
//! adapters (sim, docker, sled store, terminal, NVML) sit at the edges.

pub mod alerts;
pub mod bench;
pub mod bounded;
pub mod category;
pub mod cli;
pub mod command;
pub mod daemon;
pub mod diagnose;
pub mod digest;
pub mod dirs;
pub mod disk;
pub mod engine;
pub mod eta;
pub mod event;
pub mod failure_kind;
pub mod headless;
pub mod images;
pub mod kind;
pub mod logging;
pub mod metric;
pub mod model;
pub mod night;
pub mod observer;
pub mod overrides;
pub mod parse;
pub mod patchfile;
pub mod plan;
pub mod policy;
pub mod prefetch;
pub mod preflight;
pub mod record;
pub mod report;
pub mod requests;
pub mod rewrite;
pub mod rt;
pub mod runtime;
pub mod sanitize;
pub mod scheduler;
pub mod state;
pub mod stats;
pub mod store;
pub mod tui;
pub mod validity;
pub mod window;
