//! The daemon's wire protocol: JSON Lines over a Unix socket in the store directory
//! (owner-only). A client says hello with the protocol version and what it wants; an
//! attached client then gets a snapshot (the plan's text and the sweep state) followed by
//! the live event stream, and may send commands at any time.

use crate::event::{Command, Envelope};
use crate::state::SweepState;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Bumped on any change a client of the previous version could misread. 2: runs carry
/// per-request quantiles (`Event::Requests`), drifts (`Event::Drift`, `SweepState.drifts`),
/// and skips their kind (`Outcome::Skipped.by`).
pub const VERSION: u32 = 2;

/// How much of the activity log a welcome carries (the TUI keeps as many).
pub const ACTIVITY_SENT: usize = 2000;

/// The socket's name in the store directory.
pub const SOCKET: &str = "nightshift.sock";

pub fn socket_path(store: &Path) -> PathBuf {
    store.join(SOCKET)
}

/// What a client asks for in its hello.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "want", rename_all = "snake_case")]
pub enum Want {
    /// The snapshot, then events; commands flow back.
    Attach,
    /// One status line, then the daemon closes.
    Status,
    /// Stop the sweep: after the runs in flight finish, or `now` (they are re-queued).
    Stop { now: bool },
    /// `nightshift results` from the live store.
    Results {
        format: String,
        filter: Option<String>,
        /// threshold, alpha, token share (older clients send the threshold alone).
        #[serde(flatten)]
        judge: crate::report::Judge,
    },
    /// `nightshift show` from the live store.
    Show { what: String, json: bool },
    /// `nightshift digest` from the live store (`md` or `html`).
    Digest { format: String },
    /// `nightshift results --group ID`: one failure group and its runs.
    Group { id: String },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ClientMsg {
    Hello { version: u32, want: Want },
    Command { command: Command },
}

/// Where the sweep stands, for `status` and the attach snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    pub pid: u32,
    pub sweep: String,
    pub plan_path: PathBuf,
    pub store: PathBuf,
    pub log_dir: PathBuf,
    pub runtime: String,
    pub gpus: u32,
    /// When the night's window (`--until`) closes, epoch ms. Absent from older daemons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_closes_ms: Option<u64>,
    /// A run's typical wall-clock length where the runtime knows it better than the
    /// benchmark kinds do (the sim at its speed), for the ETA before any run ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_prior_ms: Option<u64>,
}

// The welcome is large and sent once per client; boxing it would buy nothing on the wire.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum DaemonMsg {
    Welcome {
        version: u32,
        meta: Meta,
        /// The plan as the daemon loaded it (the file may have changed since).
        plan_text: String,
        state: SweepState,
        /// The store's noise bands (`nightshift calibrate`), so the client judges as
        /// `results` does. Absent from older daemons: uncalibrated.
        #[serde(default)]
        calibration: crate::stats::Calibration,
        /// The night's activity log so far (the last [`ACTIVITY_SENT`]), so a client that
        /// attaches late sees who did what. Absent from older daemons: empty.
        #[serde(default)]
        activity: Vec<crate::report::activity::Entry>,
    },
    Event {
        env: Envelope,
    },
    /// The client fell behind and events were dropped: the state as it is now.
    Resync {
        state: SweepState,
        dropped: u64,
    },
    Status {
        line: String,
    },
    Stopping {
        now: bool,
    },
    Refused {
        why: String,
    },
    /// A query's answer: its text, or an error and the exit status it means.
    Output {
        text: String,
        error: Option<String>,
        code: i32,
    },
}

/// One message as a line.
pub fn line<T: Serialize>(msg: &T) -> String {
    let mut s = serde_json::to_string(msg).expect("protocol messages serialize");
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_as_single_lines() {
        let hello = ClientMsg::Hello {
            version: VERSION,
            want: Want::Stop { now: true },
        };
        let l = line(&hello);
        assert!(l.ends_with('\n') && !l[..l.len() - 1].contains('\n'));
        assert_eq!(serde_json::from_str::<ClientMsg>(&l).unwrap(), hello);
        let cmd = ClientMsg::Command {
            command: Command::Pause,
        };
        assert_eq!(serde_json::from_str::<ClientMsg>(&line(&cmd)).unwrap(), cmd);
        let st = DaemonMsg::Status { line: "x".into() };
        assert!(matches!(
            serde_json::from_str::<DaemonMsg>(&line(&st)).unwrap(),
            DaemonMsg::Status { .. }
        ));
    }

    /// The welcome carries the store's calibration; one from a daemon that sends none
    /// still reads (uncalibrated).
    #[test]
    fn the_welcome_carries_the_calibration_and_reads_without_it() {
        let mut cal = crate::stats::Calibration::default();
        cal.bands.insert(
            "ttft_mean_ms@small".into(),
            crate::stats::band::Band {
                sigma: 0.02,
                groups: 3,
                runs: 9,
                source: "calibrate".into(),
            },
        );
        let welcome = DaemonMsg::Welcome {
            version: VERSION,
            meta: Meta {
                pid: 1,
                sweep: "s".into(),
                plan_path: "p.toml".into(),
                store: "st".into(),
                log_dir: "logs".into(),
                runtime: "sim".into(),
                gpus: 1,
                window_closes_ms: None,
                run_prior_ms: None,
            },
            plan_text: String::new(),
            state: SweepState::default(),
            calibration: cal.clone(),
            activity: vec![crate::report::activity::Entry {
                at_ms: 7,
                source: "ana@tui:1 (uid 1000)".into(),
                what: "skip c/base".into(),
                outcome: "done".into(),
                run: Some(crate::model::RunId(3)),
            }],
        };
        let mut v: serde_json::Value = serde_json::from_str(&line(&welcome)).unwrap();
        match serde_json::from_value::<DaemonMsg>(v.clone()).unwrap() {
            DaemonMsg::Welcome {
                calibration,
                activity,
                ..
            } => {
                assert_eq!(calibration, cal);
                assert_eq!(activity[0].source, "ana@tui:1 (uid 1000)");
            }
            other => panic!("{other:?}"),
        }
        // An older daemon's welcome: no calibration, no activity log.
        v.as_object_mut().unwrap().remove("calibration");
        v.as_object_mut().unwrap().remove("activity");
        match serde_json::from_value::<DaemonMsg>(v).unwrap() {
            DaemonMsg::Welcome {
                calibration,
                activity,
                ..
            } => assert!(calibration.bands.is_empty() && activity.is_empty()),
            other => panic!("{other:?}"),
        }
    }
}
