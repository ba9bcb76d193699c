//! Full logs on disk: one file per run, attempt, stream and pipe, every line, never
//! truncated. The TUI keeps only a bounded ring; this is the record.

use crate::event::{Envelope, Event};
use crate::model::{Pipe, RunId, RunState};
use crate::observer::Observer;
use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{LineWriter, Write};
use std::path::PathBuf;

pub struct LogWriter {
    dir: PathBuf,
    keys: Vec<String>,
    /// Line-buffered: a line is on disk as soon as it is complete, so a crash or `o` (the
    /// pager) never sees a log cut short by a buffer.
    open: HashMap<(RunId, u32, &'static str), LineWriter<File>>,
    /// `<dir>/images.log`: images fetched, made and removed ahead of their runs.
    images: Option<LineWriter<File>>,
}

pub(crate) use crate::record::logs::log_path;

impl LogWriter {
    pub fn new(dir: PathBuf, keys: Vec<String>) -> Self {
        LogWriter {
            dir,
            keys,
            open: HashMap::new(),
            images: None,
        }
    }

    fn close_run(&mut self, run: RunId) -> anyhow::Result<()> {
        let keys: Vec<_> = self.open.keys().filter(|k| k.0 == run).copied().collect();
        for k in keys {
            if let Some(mut w) = self.open.remove(&k) {
                w.flush()?;
            }
        }
        Ok(())
    }
}

impl Observer for LogWriter {
    fn on_event(&mut self, env: &Envelope) -> anyhow::Result<()> {
        match &env.event {
            Event::Log {
                run,
                attempt,
                stream,
                pipe,
                line,
            } => {
                let name: &'static str = match (stream.as_str(), pipe) {
                    (s, Pipe::Stdout) => match s {
                        "server" => "server.stdout",
                        "bench" => "bench.stdout",
                        "docker" => "docker.stdout",
                        _ => "pull.stdout",
                    },
                    (s, Pipe::Stderr) => match s {
                        "server" => "server.stderr",
                        "bench" => "bench.stderr",
                        "docker" => "docker.stderr",
                        _ => "pull.stderr",
                    },
                };
                let k = (*run, *attempt, name);
                if !self.open.contains_key(&k) {
                    let key = self
                        .keys
                        .get(run.0 as usize)
                        .cloned()
                        .unwrap_or_else(|| run.0.to_string());
                    let path = log_path(&self.dir, &key, *attempt, stream.as_str(), *pipe);
                    if let Some(parent) = path.parent() {
                        fs::create_dir_all(parent)?;
                    }
                    let f = fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(&path)?;
                    self.open.insert(k, LineWriter::new(f));
                }
                let w = self.open.get_mut(&k).expect("just opened");
                w.write_all(line.as_bytes())?;
                w.write_all(b"\n")?;
            }
            Event::State { run, to, .. } if !matches!(to, RunState::Active { .. }) => {
                self.close_run(*run)?;
            }
            // Images fetched ahead of their runs belong to no run: one file for the sweep.
            Event::Image {
                image,
                status,
                detail,
            } => {
                if self.images.is_none() {
                    fs::create_dir_all(&self.dir)?;
                    let f = fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(self.dir.join("images.log"))?;
                    self.images = Some(LineWriter::new(f));
                }
                let w = self.images.as_mut().expect("just opened");
                writeln!(w, "{} {image} {}: {detail}", env.at_ms, status.as_str())?;
            }
            Event::SweepFinished { .. } => {
                if let Some(w) = self.images.as_mut() {
                    w.flush()?;
                }
                for (_, mut w) in self.open.drain() {
                    w.flush()?;
                }
            }
            _ => {}
        }
        Ok(())
    }
}
