//! Every `nightshift bench` harness, on the path the product really takes: the engine with
//! its store and log writers, the TUI's draw, a daemon with attached clients, the night's
//! schedule, the ETA's replay, the parser, preflight's reading of a variant's own tree.

pub mod attach;
pub mod engine;
pub mod eta;
pub mod night;
pub mod parse;
pub mod requests;
pub mod source;
pub mod tui;
