//! TEMPORARY minimal diagnosis (replaced by the diagnosis issue's module; same API).
use crate::category::Category;
use crate::model::{Stage, Stream};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Diagnosis {
    pub category: Category,
    pub evidence: String,
    pub stream: Option<Stream>,
    pub line_no: Option<u64>,
    pub recipe: Option<String>,
    pub predicted: bool,
}

#[derive(Default)]
pub struct Catalog;
impl Catalog {
    pub fn builtin() -> Self {
        Catalog
    }
}

#[derive(Debug, Default, Clone)]
pub struct FailureContext {
    pub stage: Option<Stage>,
    pub exit_code: Option<i64>,
    pub signal: Option<String>,
    pub timed_out: bool,
    pub serving: bool,
    pub vllm_version: Option<String>,
    pub bench_finished: bool,
    pub has_result: bool,
    pub successful_requests: Option<f64>,
    pub patch_failed: bool,
    pub pull_error: Option<String>,
    pub image_missing: bool,
    pub disk_full: bool,
}

pub struct Scanner {
    last_error: Option<(Stream, String)>,
}

impl Scanner {
    pub fn new(_catalog: Arc<Catalog>) -> Self {
        Scanner { last_error: None }
    }
    pub fn feed(&mut self, stream: Stream, line: &str) {
        if line.contains("Error") || line.contains("ERROR") {
            self.last_error = Some((stream, line.to_string()));
        }
    }
    pub fn conclude(&self, ctx: &FailureContext) -> Option<Diagnosis> {
        let cat = if ctx.image_missing {
            Category::ImageNotFound
        } else if ctx.disk_full {
            Category::DiskFull
        } else if ctx.patch_failed {
            Category::AgentPatchFailed
        } else if ctx.timed_out && ctx.stage == Some(Stage::LoadingServer) {
            Category::ServerStartTimeout
        } else if ctx.timed_out {
            Category::BenchTimeout
        } else if ctx.bench_finished && ctx.exit_code == Some(0) && !ctx.has_result {
            Category::NoMetrics
        } else if ctx.bench_finished
            && ctx.exit_code == Some(0)
            && ctx.successful_requests != Some(0.0)
        {
            return None;
        } else {
            Category::Other
        };
        Some(Diagnosis {
            category: cat,
            evidence: self
                .last_error
                .as_ref()
                .map(|e| e.1.clone())
                .unwrap_or_default(),
            stream: self.last_error.as_ref().map(|e| e.0),
            line_no: None,
            recipe: None,
            predicted: false,
        })
    }
}

pub fn predict_port_bug(_version: &str, _serving: bool) -> Option<Diagnosis> {
    None
}

pub mod cli {
    pub fn main(
        files: &[std::path::PathBuf],
        _json: bool,
        _out: &mut dyn std::io::Write,
        err: &mut dyn std::io::Write,
    ) -> i32 {
        let _ = writeln!(
            err,
            "diagnose: {} files: not built yet (issue #4)",
            files.len()
        );
        2
    }
}
