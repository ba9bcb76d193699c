//! Exec in a running container, and turning Docker's multiplexed byte streams into complete
//! lines: split on `\n` only, however long the line, and the last unterminated line kept.

use super::secrets::Secrets;
use crate::model::{Pipe, Stream};
use crate::runtime::RunSink;
use bollard::container::LogOutput;
use bollard::exec::{StartExecOptions, StartExecResults};
use bollard::models::ExecConfig;
use bollard::Docker;
use futures_util::StreamExt;

/// Re-assembles lines from arbitrary chunks, per pipe.
#[derive(Default)]
pub struct LineSplitter {
    out: Vec<u8>,
    err: Vec<u8>,
}

impl LineSplitter {
    /// Complete lines in `chunk` (with what earlier chunks left over), without the `\n`.
    pub fn push(&mut self, pipe: Pipe, chunk: &[u8]) -> Vec<String> {
        let buf = match pipe {
            Pipe::Stdout => &mut self.out,
            Pipe::Stderr => &mut self.err,
        };
        buf.extend_from_slice(chunk);
        let mut lines = Vec::new();
        let mut start = 0;
        while let Some(pos) = buf[start..].iter().position(|b| *b == b'\n') {
            lines.push(String::from_utf8_lossy(&buf[start..start + pos]).into_owned());
            start += pos + 1;
        }
        buf.drain(..start);
        lines
    }

    /// The unterminated last lines, at end of stream.
    pub fn finish(&mut self) -> Vec<(Pipe, String)> {
        let mut v = Vec::new();
        for (pipe, buf) in [(Pipe::Stdout, &mut self.out), (Pipe::Stderr, &mut self.err)] {
            if !buf.is_empty() {
                v.push((pipe, String::from_utf8_lossy(buf).into_owned()));
                buf.clear();
            }
        }
        v
    }
}

fn pipe_of(o: &LogOutput) -> (Pipe, &[u8]) {
    match o {
        LogOutput::StdErr { message } => (Pipe::Stderr, message),
        LogOutput::StdOut { message }
        | LogOutput::Console { message }
        | LogOutput::StdIn { message } => (Pipe::Stdout, message),
    }
}

/// Where the lines of a stream go: the run's sink (redacted), and optionally a capture
/// (for short helper execs whose output nightshift reads).
pub struct LineOut<'a> {
    pub sink: &'a RunSink,
    pub stream: Stream,
    pub secrets: &'a Secrets,
    pub capture: Option<&'a mut Vec<(Pipe, String)>>,
}

impl LineOut<'_> {
    pub async fn line(&mut self, pipe: Pipe, line: String) {
        let line = self.secrets.redact(&line);
        if let Some(c) = self.capture.as_deref_mut() {
            c.push((pipe, line.clone()));
        }
        self.sink.log(self.stream, pipe, line).await;
    }
}

/// Forward a Docker output stream (logs or exec) as lines until it ends.
pub(crate) async fn pump<S>(mut s: S, out: &mut LineOut<'_>) -> Result<(), bollard::errors::Error>
where
    S: futures_util::Stream<Item = Result<LogOutput, bollard::errors::Error>> + Unpin,
{
    let mut split = LineSplitter::default();
    let mut result = Ok(());
    while let Some(item) = s.next().await {
        match item {
            Ok(o) => {
                let (pipe, bytes) = pipe_of(&o);
                for l in split.push(pipe, bytes) {
                    out.line(pipe, l).await;
                }
            }
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    for (pipe, l) in split.finish() {
        out.line(pipe, l).await;
    }
    result
}

/// An exec whose output comes back to us.
fn attached(cmd: Vec<String>, workdir: Option<String>, env: Vec<String>) -> ExecConfig {
    ExecConfig {
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        cmd: Some(cmd),
        working_dir: workdir,
        env: (!env.is_empty()).then_some(env),
        ..Default::default()
    }
}

/// Run `cmd` in `container` and collect its output without streaming it to the run's log
/// (a `--help` text is long and tells the operator nothing).
pub async fn capture(
    docker: &Docker,
    container: &str,
    cmd: Vec<String>,
    env: Vec<String>,
) -> Result<(i64, String), String> {
    let exec = docker
        .create_exec(container, attached(cmd, None, env))
        .await
        .map_err(|e| e.to_string())?;
    let mut text = String::new();
    if let StartExecResults::Attached { mut output, .. } = docker
        .start_exec(
            &exec.id,
            Some(StartExecOptions {
                detach: false,
                tty: false,
                output_capacity: None,
            }),
        )
        .await
        .map_err(|e| e.to_string())?
    {
        while let Some(Ok(o)) = output.next().await {
            text.push_str(&String::from_utf8_lossy(&o.into_bytes()));
        }
    }
    let code = docker
        .inspect_exec(&exec.id)
        .await
        .map_err(|e| e.to_string())?
        .exit_code
        .unwrap_or(-1);
    Ok((code, text))
}

/// Run `cmd` in `container` (attached), stream its lines, return its exit code.
pub async fn run(
    docker: &Docker,
    container: &str,
    cmd: Vec<String>,
    workdir: Option<String>,
    out: &mut LineOut<'_>,
) -> anyhow::Result<i64> {
    run_with_env(docker, container, cmd, workdir, Vec::new(), out).await
}

/// As [`run`], with extra `NAME=value` environment for the exec'd process.
pub(crate) async fn run_with_env(
    docker: &Docker,
    container: &str,
    cmd: Vec<String>,
    workdir: Option<String>,
    env: Vec<String>,
    out: &mut LineOut<'_>,
) -> anyhow::Result<i64> {
    let exec = docker
        .create_exec(container, attached(cmd, workdir, env))
        .await?;
    match docker
        .start_exec(
            &exec.id,
            Some(StartExecOptions {
                detach: false,
                tty: false,
                output_capacity: Some(64 * 1024),
            }),
        )
        .await?
    {
        StartExecResults::Attached { output, .. } => pump(output, out).await?,
        StartExecResults::Detached => {}
    }
    let info = docker.inspect_exec(&exec.id).await?;
    Ok(info.exit_code.unwrap_or(-1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_across_chunks_keeps_long_and_last_lines() {
        let mut s = LineSplitter::default();
        assert_eq!(s.push(Pipe::Stdout, b"ab"), Vec::<String>::new());
        assert_eq!(s.push(Pipe::Stderr, b"e1\ne"), vec!["e1"]);
        assert_eq!(s.push(Pipe::Stdout, b"c\n\nd"), vec!["abc", ""]);
        let long = "x".repeat(300_000);
        let mut got = Vec::new();
        for c in long.as_bytes().chunks(16 * 1024) {
            got.extend(s.push(Pipe::Stdout, c));
        }
        got.extend(s.push(Pipe::Stdout, b"\n"));
        assert_eq!(got, vec![format!("d{long}")]);
        s.push(Pipe::Stdout, b"tail");
        assert_eq!(
            s.finish(),
            vec![(Pipe::Stdout, "tail".into()), (Pipe::Stderr, "e".into())]
        );
    }
}
