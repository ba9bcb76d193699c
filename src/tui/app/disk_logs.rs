//! Logs from before this client attached. The daemon streams lines as they come, so a
//! client that attaches at 3 a.m. has none of the night's earlier lines in memory — but
//! every line is on disk (`engine::logs`). The first time a run is shown, its current
//! attempt's files are read (their tails, bounded) and what the stream brought since is
//! kept after them without repeating it.

use super::{App, LogLine, RunLogs, RING_LINES};
use crate::model::Pipe;
use crate::record::logs::log_path;
use std::collections::VecDeque;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// At most this much of the end of each file is read: the ring keeps 5,000 lines anyway.
const TAIL_BYTES: u64 = 4 << 20;

/// The streams of each tab, in the order their files are read.
const SERVER: [(&str, Option<&str>); 3] = [
    ("pull", Some("pull")),
    ("docker", Some("docker")),
    ("server", None),
];

impl App {
    /// Fill the selected run's logs from disk once (attached clients only).
    pub(crate) fn load_logs_from_disk(&mut self) {
        if !self.attached {
            return;
        }
        let Some(run) = self.selected_run() else {
            return;
        };
        let Some(dir) = self.log_dir.clone() else {
            return;
        };
        if !self.night.from_disk.insert(run) {
            return;
        }
        let attempt = self.night.state.run(run).attempt;
        if attempt == 0 {
            return;
        }
        let key = self.night.plan.runs[run.0 as usize].key.clone();
        let read = |streams: &[(&str, Option<&'static str>)]| {
            let mut out: VecDeque<LogLine> = VecDeque::new();
            for (stream, tag) in streams {
                for pipe in [Pipe::Stdout, Pipe::Stderr] {
                    let p = log_path(&dir, &key, attempt, stream, pipe);
                    for text in tail_lines(&p) {
                        let error =
                            super::is_error_line(&text) || (pipe == Pipe::Stderr && tag.is_some());
                        out.push_back(LogLine {
                            text: text.into(),
                            error,
                            tag: *tag,
                        });
                    }
                }
            }
            out
        };
        let server = read(&SERVER);
        let bench = read(&[("bench", None)]);
        if server.is_empty() && bench.is_empty() {
            return;
        }
        let slot = self.night.logs[run.0 as usize].get_or_insert_with(Box::<RunLogs>::default);
        let before = slot.server.len() + slot.bench.len();
        slot.server = merged(server, std::mem::take(&mut slot.server));
        slot.bench = merged(bench, std::mem::take(&mut slot.bench));
        let after = slot.server.len() + slot.bench.len();
        self.night.lines_in_memory = (self.night.lines_in_memory + after).saturating_sub(before);
        self.ui.log_scroll = 0;
    }
}

/// The file's lines, then the streamed lines it does not end with yet (the stream and the
/// file overlap: the file was read after some of the stream had come). Ring-bounded.
fn merged(file: VecDeque<LogLine>, streamed: VecDeque<LogLine>) -> VecDeque<LogLine> {
    let mut overlap = streamed.len().min(file.len());
    while overlap > 0 {
        let tail = file.iter().skip(file.len() - overlap);
        if tail.zip(streamed.iter()).all(|(a, b)| a.text == b.text) {
            break;
        }
        overlap -= 1;
    }
    let mut out = file;
    out.extend(streamed.into_iter().skip(overlap));
    while out.len() > RING_LINES {
        out.pop_front();
    }
    out
}

/// The last lines of a log file (its last [`TAIL_BYTES`]), lossily decoded.
fn tail_lines(p: &Path) -> Vec<String> {
    let Ok(mut f) = std::fs::File::open(p) else {
        return Vec::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let from = len.saturating_sub(TAIL_BYTES);
    if f.seek(SeekFrom::Start(from)).is_err() {
        return Vec::new();
    }
    let mut buf = Vec::new();
    if f.take(TAIL_BYTES).read_to_end(&mut buf).is_err() {
        return Vec::new();
    }
    let text = String::from_utf8_lossy(&buf);
    let mut lines: Vec<String> = text.lines().map(|l| l.to_string()).collect();
    // Started mid-line: that first piece is not a line.
    if from > 0 && !lines.is_empty() {
        lines.remove(0);
    }
    let skip = lines.len().saturating_sub(RING_LINES);
    lines.into_iter().skip(skip).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::RunId;

    fn l(t: &str) -> LogLine {
        LogLine {
            text: t.into(),
            error: false,
            tag: None,
        }
    }

    #[test]
    fn the_stream_is_kept_after_the_file_without_repeating_it() {
        let file: VecDeque<LogLine> = ["a", "b", "c", "d"].map(l).into();
        let streamed: VecDeque<LogLine> = ["c", "d", "e"].map(l).into();
        let m: Vec<String> = merged(file, streamed)
            .iter()
            .map(|x| x.text.to_string())
            .collect();
        assert_eq!(m, ["a", "b", "c", "d", "e"]);
        let file: VecDeque<LogLine> = ["a", "b"].map(l).into();
        let m: Vec<String> = merged(file, ["x"].map(l).into())
            .iter()
            .map(|x| x.text.to_string())
            .collect();
        assert_eq!(m, ["a", "b", "x"]);
    }

    #[test]
    fn an_attached_client_shows_the_lines_from_before_it_attached() {
        let mut app = crate::tui::tests::scene();
        let dir = tempfile::tempdir().unwrap();
        let run = RunId(6);
        app.select_run(run);
        let key = app.night.plan.runs[6].key.clone();
        let attempt = app.night.state.run(run).attempt.max(1);
        let p = log_path(dir.path(), &key, attempt, "server", Pipe::Stdout);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, "INFO before attach 1\nINFO before attach 2\n").unwrap();
        app.night.logs[6] = None;
        app.log_dir = Some(dir.path().to_path_buf());
        app.attached = true;
        app.load_logs_from_disk();
        let shown: Vec<String> = app
            .shown_log()
            .expect("lines")
            .iter()
            .map(|x| x.text.to_string())
            .collect();
        assert_eq!(shown, ["INFO before attach 1", "INFO before attach 2"]);
        // Once: a second call reads nothing again.
        std::fs::write(&p, "changed\n").unwrap();
        app.load_logs_from_disk();
        assert_eq!(app.shown_log().unwrap().len(), 2);
    }
}
