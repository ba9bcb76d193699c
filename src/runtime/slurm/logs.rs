//! The job's files on the shared filesystem, followed as they grow: every line goes to the
//! same RunSink as the Docker runtime's (so the streaming parser and the diagnoser see the
//! same text), and the `status` file's markers become stages and the attempt's end.

use crate::model::{Pipe, Stage, Stream};
use crate::runtime::docker::secrets::Secrets;
use crate::runtime::RunSink;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Lines longer than this are still delivered whole; the limit only bounds one read.
const CHUNK: usize = 1 << 20;

/// One followed file: where we are in it and the unterminated tail so far.
struct Followed {
    path: PathBuf,
    stream: Stream,
    pipe: Pipe,
    offset: u64,
    partial: Vec<u8>,
}

impl Followed {
    /// New complete lines since the last call (and, at `end`, the unterminated last one).
    fn read(&mut self, end: bool) -> Vec<String> {
        let mut lines = Vec::new();
        if let Ok(mut f) = std::fs::File::open(&self.path) {
            if f.seek(SeekFrom::Start(self.offset)).is_ok() {
                let mut buf = vec![0u8; CHUNK];
                loop {
                    match f.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            self.offset += n as u64;
                            for &b in &buf[..n] {
                                if b == b'\n' {
                                    let l = std::mem::take(&mut self.partial);
                                    lines.push(String::from_utf8_lossy(&l).into_owned());
                                } else {
                                    self.partial.push(b);
                                }
                            }
                        }
                    }
                }
            }
        }
        if end && !self.partial.is_empty() {
            let l = std::mem::take(&mut self.partial);
            lines.push(String::from_utf8_lossy(&l).into_owned());
        }
        lines
    }
}

/// What a `status` line says.
#[derive(Debug, Clone, PartialEq)]
pub enum Marker {
    Stage(Stage),
    Provenance(String, String),
    FixOk(String),
    Ready(u64),
    /// `node NAME gpus=LIST job=ID` (the batch script's first line).
    Node {
        node: String,
        gpus: String,
    },
    End(End),
    Other(String),
}

/// How the in-container script ended the attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum End {
    BenchExit(i64),
    ServerExit(i64),
    Timeout(Stage),
    Invalid(String),
    PatchFailed(String),
    FixFailed(String),
    /// The launcher (docker run, apptainer, srun) exited; after `inner.sh` ended or not.
    Launcher(i64),
}

fn stage_named(s: &str) -> Option<Stage> {
    Stage::ALL.into_iter().find(|x| x.as_str() == s)
}

pub fn marker(line: &str) -> Marker {
    let (word, rest) = line.trim().split_once(' ').unwrap_or((line.trim(), ""));
    let code = || rest.trim().parse::<i64>().ok();
    match word {
        "stage" => stage_named(rest.trim())
            .map(Marker::Stage)
            .unwrap_or_else(|| Marker::Other(line.into())),
        "provenance" => {
            let (k, v) = rest.split_once(' ').unwrap_or((rest, ""));
            Marker::Provenance(k.into(), v.into())
        }
        "fix_ok" => Marker::FixOk(rest.trim().into()),
        "ready" => Marker::Ready(code().unwrap_or(0).max(0) as u64),
        "node" => {
            let mut it = rest.split_whitespace();
            let node = it.next().unwrap_or("").to_string();
            let gpus = it
                .find_map(|t| t.strip_prefix("gpus="))
                .unwrap_or("")
                .to_string();
            Marker::Node { node, gpus }
        }
        "bench_exit" => code().map_or(Marker::Other(line.into()), |c| {
            Marker::End(End::BenchExit(c))
        }),
        "server_exit" => code().map_or(Marker::Other(line.into()), |c| {
            Marker::End(End::ServerExit(c))
        }),
        "launcher_exit" => code().map_or(Marker::Other(line.into()), |c| {
            Marker::End(End::Launcher(c))
        }),
        "timeout" => Marker::End(End::Timeout(
            stage_named(rest.trim()).unwrap_or(Stage::Benchmarking),
        )),
        "invalid" => Marker::End(End::Invalid(rest.into())),
        "patch_failed" => Marker::End(End::PatchFailed(rest.into())),
        "fix_failed" => Marker::End(End::FixFailed(rest.into())),
        _ => Marker::Other(line.into()),
    }
}

/// The files a job's processes write (the status file aside).
pub const FILES: [&str; 7] = [
    "slurm.out",
    "slurm.err",
    "fix.out",
    "server.out",
    "server.err",
    "bench.out",
    "bench.err",
];

/// All of a job's files, followed together.
pub struct JobFiles {
    files: Vec<Followed>,
    status: Followed,
    secrets: Secrets,
}

impl JobFiles {
    pub fn new(dir: &Path, secrets: Secrets) -> Self {
        let f = |name: &str, stream, pipe| Followed {
            path: dir.join(name),
            stream,
            pipe,
            offset: 0,
            partial: Vec::new(),
        };
        JobFiles {
            files: vec![
                f("slurm.out", Stream::Docker, Pipe::Stdout),
                f("slurm.err", Stream::Docker, Pipe::Stderr),
                f("fix.out", Stream::Docker, Pipe::Stdout),
                f("server.out", Stream::Server, Pipe::Stdout),
                f("server.err", Stream::Server, Pipe::Stderr),
                f("bench.out", Stream::Bench, Pipe::Stdout),
                f("bench.err", Stream::Bench, Pipe::Stderr),
            ],
            status: f("status", Stream::Docker, Pipe::Stdout),
            secrets,
        }
    }

    /// Deliver new lines to `sink`; returns the new status markers (in order).
    pub(crate) async fn pump(&mut self, sink: &RunSink, end: bool) -> Vec<Marker> {
        for f in &mut self.files {
            for l in f.read(end) {
                sink.log(f.stream, f.pipe, self.secrets.redact(&l)).await;
            }
        }
        self.status.read(end).iter().map(|l| marker(l)).collect()
    }

    /// Text of the launcher's stderr so far (why a job ended before its script ran).
    pub(crate) fn launcher_err(dir: &Path) -> String {
        std::fs::read_to_string(dir.join("slurm.err")).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers() {
        assert_eq!(
            marker("stage loading_server"),
            Marker::Stage(Stage::LoadingServer)
        );
        assert_eq!(marker("bench_exit 0"), Marker::End(End::BenchExit(0)));
        assert_eq!(marker("server_exit 137"), Marker::End(End::ServerExit(137)));
        assert_eq!(
            marker("timeout loading_server"),
            Marker::End(End::Timeout(Stage::LoadingServer))
        );
        assert_eq!(
            marker("provenance interpreter /usr/bin/python3"),
            Marker::Provenance("interpreter".into(), "/usr/bin/python3".into())
        );
        assert_eq!(
            marker("node vm gpus=0,1 job=12"),
            Marker::Node {
                node: "vm".into(),
                gpus: "0,1".into()
            }
        );
        assert_eq!(marker("bench_exit x"), Marker::Other("bench_exit x".into()));
    }

    #[test]
    fn follows_growth_and_keeps_the_unterminated_line_for_the_end() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("bench.out");
        let mut f = Followed {
            path: p.clone(),
            stream: Stream::Bench,
            pipe: Pipe::Stdout,
            offset: 0,
            partial: Vec::new(),
        };
        assert!(f.read(false).is_empty(), "no file yet");
        std::fs::write(&p, "a\nb").unwrap();
        assert_eq!(f.read(false), vec!["a"]);
        std::fs::write(&p, "a\nbc\nd").unwrap();
        assert_eq!(f.read(false), vec!["bc"]);
        assert_eq!(f.read(true), vec!["d"]);
    }
}
