//! The sweep plan: load a TOML file (and optional JSONL commit list), validate it with
//! positions, and expand it into runs (commit × variant × repeat). Pure apart from reading
//! the files it names; everything downstream works on the validated [`Plan`].

mod builder;
pub mod clone;

pub mod datasets;
mod entry;
pub mod example;
mod expand;
pub mod fixes;
pub mod gpu;
pub mod import;
pub mod limits;
mod raw;
pub mod read;
pub mod report;
mod resolve;
mod schedule;
pub mod source;
pub mod synthetic;
pub mod template;

pub use crate::command::{BenchKind, CommandView};
pub use datasets::DATASET_HINT;
pub(crate) use datasets::{expand_path, static_invocation};
pub use gpu::GpuConfig;
pub use raw::{Interleave, OnInvalid, SimSpec, Warmup};
pub use schedule::schedule;
pub use source::Loc;

use crate::model::{RunId, Variant};
use raw::{RawCommit, RawPlan};
use serde::Serialize;
use sha2::{Digest, Sha256};
use source::SourceFile;
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// A problem with a position: an error (the plan is refused) or a warning.
#[derive(Debug, Clone, Serialize)]
pub struct Diag {
    pub loc: Option<Loc>,
    pub commit: Option<String>,
    /// A short stable name for grouping (e.g. `model_mismatch`).
    pub kind: &'static str,
    pub message: String,
}

impl fmt::Display for Diag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(loc) = &self.loc {
            write!(f, "{loc}: ")?;
        }
        if let Some(c) = &self.commit {
            write!(f, "commit {c}: ")?;
        }
        f.write_str(&self.message)
    }
}

#[derive(Debug)]
pub enum LoadError {
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    Invalid(Vec<Diag>),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Io { path, error } => write!(f, "{}: cannot read: {error}", path.display()),
            LoadError::Invalid(diags) => {
                for (i, d) in diags.iter().enumerate() {
                    if i > 0 {
                        writeln!(f)?;
                    }
                    write!(f, "{d}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for LoadError {}

/// Why a commit is not run (plan-format rules).
#[derive(Debug, Clone, Serialize)]
pub struct Invalid {
    /// `missing | placeholder | optional_brackets | tp_exceeds_gpus`
    pub rule: &'static str,
    pub detail: String,
    pub loc: Option<Loc>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Defaults {
    pub gpu_type: String,
    pub gpu_count: u32,
    pub hf_cache: Option<String>,
    pub shm_size: Option<String>,
    pub ipc: Option<String>,
    pub server_start_timeout_s: u64,
    pub run_timeout_s: u64,
    pub timeout_s_by_gpus: BTreeMap<u32, u64>,
    pub repeats: u32,
    /// Where `repeats` is written (for errors about the runs it makes).
    #[serde(skip)]
    pub repeats_loc: Option<Loc>,
    /// Repeats a variant may reach when its comparison stays unknown (adaptive repeats);
    /// `repeats` when the plan adds none.
    pub max_repeats: u32,
    /// How repeats are spread over the night (asv's rounds by default).
    pub interleave: raw::Interleave,
    /// The drift reference (`COMMIT/VARIANT`), its interval and its most runs.
    pub reference: Option<String>,
    #[serde(skip)]
    pub reference_loc: Option<Loc>,
    pub reference_every_min: u32,
    pub reference_runs: u32,
    pub warmup: Warmup,
    /// Requests sent to the server before each serving benchmark measures: the client's
    /// `--num-warmups` where it has one, else sent by the runtime (a recorded rewrite,
    /// the same for every variant of a commit).
    pub warmup_requests: u32,
    pub variants: Vec<String>,
    /// `variants` was written in the plan (not the built-in default).
    #[serde(skip)]
    pub variants_explicit: bool,
    #[serde(skip)]
    pub variants_loc: Option<Loc>,
    pub on_invalid: OnInvalid,
    pub vllm_src: Option<String>,
    pub fetch_weights: bool,
    /// Ask Docker for each run's GPUs (default true). False runs CPU images (a smoke night,
    /// the real CPU vLLM): the scheduler still hands out slots, containers get no device.
    pub gpu_requests: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Images {
    pub org: String,
    pub human: String,
    pub baseline: String,
    pub agent: String,
    pub patch_dir: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Agent {
    pub id: String,
    pub model: Option<String>,
    pub patch: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CommitSpec {
    pub commit: String,
    pub parent: Option<String>,
    pub title: String,
    pub pr_url: Option<String>,
    pub model: Option<String>,
    pub gpu: GpuConfig,
    /// True when the GPU count was derived from TP × PP (no gpu_config).
    pub gpu_derived: bool,
    pub mode: Option<BenchKind>,
    pub perf_command: Option<String>,
    pub view: Option<CommandView>,
    pub files_changed: Vec<String>,
    pub notes: Option<String>,
    pub skip: bool,
    pub invalid: Option<Invalid>,
    pub vllm_version: Option<String>,
    /// The operator's priority (higher first; 0 by default).
    pub priority: i32,
    pub sim: Option<SimSpec>,
    pub loc: Option<Loc>,
    /// How the command is made runnable, as far as the era tables tell before the night
    /// (the runtime re-plans with what it learns from each image's client).
    pub invocation: Option<crate::rewrite::Invocation>,
    /// Why it cannot be made runnable yet (a dataset the operator can still provide).
    pub invocation_problem: Option<String>,
    /// Parent → commit, from the clone (None without one).
    pub changes: Option<Vec<clone::FileChange>>,
    /// A fix accepted before the night (`run --fixes`): what it changed and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fixed: Option<String>,
}

impl CommitSpec {
    pub fn short(&self) -> &str {
        &self.commit[..self.commit.len().min(8)]
    }
    /// The benchmark kind: from the command when it says, else the declared mode.
    pub fn kind(&self) -> Option<BenchKind> {
        self.view.as_ref().and_then(|v| v.kind).or(self.mode)
    }
    pub(crate) fn needs_server(&self) -> bool {
        self.kind().map(BenchKind::needs_server).unwrap_or(false)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct RunSpec {
    pub id: RunId,
    /// Index into `Plan::commits`.
    pub commit: usize,
    pub variant: Variant,
    /// 0-based repeat index (plans with `repeats > 1`).
    pub repeat: u32,
    /// A warm-up repeat (`warmup = "discard_first"`): run and stored, left out of the
    /// statistics.
    pub warmup: bool,
    /// Position among the commit's runs for the scheduler: the variant order with one
    /// repeat, else the slot in the seeded randomised-block schedule (see [`schedule`]).
    pub order: u8,
    /// Stable textual key: `<commit12>/<variant>[/r<N>]`; survives plan edits.
    pub key: String,
    pub image: Option<String>,
    pub patch: Option<String>,
    pub gpus: u32,
    pub server_start_timeout_s: u64,
    pub run_timeout_s: u64,
    /// Set when the run cannot start at all (invalid commit, `skip = true`, no image).
    pub skip_reason: Option<String>,
    /// A repeat past the plan's `repeats` (adaptive): held back, and run only while the
    /// commit's comparison is unknown once its other runs have ended.
    pub extra: bool,
    /// Which round of the commit's repeats this run belongs to (`interleave = "rounds"`:
    /// the scheduler runs every commit's round r before any round r+1); 0 with
    /// `interleave = "commits"`.
    pub round: u32,
    /// A drift reference run (`[defaults] reference`): the same commit and variant
    /// benchmarked again at the start, at intervals and at the end; never a repeat in a
    /// comparison.
    pub reference: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub name: String,
    pub repo: Option<String>,
    pub path: PathBuf,
    /// sha256 of the plan text and its commits file: detects a changed plan on resume.
    pub hash: String,
    pub defaults: Defaults,
    pub images: Images,
    pub agents: Vec<Agent>,
    pub commits: Vec<CommitSpec>,
    pub runs: Vec<RunSpec>,
    pub warnings: Vec<Diag>,
    /// `[datasets]`: name → host path (absolute).
    pub datasets: BTreeMap<String, PathBuf>,
    /// What the vLLM clone resolved (full hashes, parents), one line each, for `plan check`.
    pub resolved: Vec<String>,
}

/// Settings of the box (the config file) that a plan may leave out.
#[derive(Debug, Clone, Default)]
pub struct BoxDefaults {
    pub datasets: BTreeMap<String, PathBuf>,
    pub vllm_src: Option<PathBuf>,
    /// Fixes the operator accepted (`--fixes`): applied to their commits' fields before the
    /// plan is checked, as if the plan said so.
    pub fixes: Vec<fixes::Fix>,
}

impl Plan {
    pub fn load(path: &Path) -> Result<Plan, LoadError> {
        let text = read::plan_text(path)?;
        let base = path.parent().unwrap_or(Path::new("."));
        Plan::from_str_at(&path.display().to_string(), text, base, path)
    }

    /// As [`Plan::load`], with the box's settings (from the config file) under the plan's
    /// own: a plan names its datasets and clone only where they differ from the box's.
    pub fn load_with(path: &Path, box_defaults: &BoxDefaults) -> Result<Plan, LoadError> {
        let text = read::plan_text(path)?;
        let base = path.parent().unwrap_or(Path::new("."));
        Plan::parse(&path.display().to_string(), text, base, path, box_defaults)
    }

    /// A plan from its text, as if loaded from `path` (a sweep's daemon hands its clients
    /// the text it loaded).
    pub(crate) fn from_text_with(
        path: &Path,
        text: String,
        box_defaults: &BoxDefaults,
    ) -> Result<Plan, LoadError> {
        let base = path.parent().unwrap_or(Path::new("."));
        Plan::parse(&path.display().to_string(), text, base, path, box_defaults)
    }

    /// Parse a plan whose commits_file (if any) is resolved against `base`.
    pub fn from_str_at(
        name: &str,
        text: String,
        base: &Path,
        path: &Path,
    ) -> Result<Plan, LoadError> {
        Plan::parse(name, text, base, path, &BoxDefaults::default())
    }

    fn parse(
        name: &str,
        text: String,
        base: &Path,
        path: &Path,
        box_defaults: &BoxDefaults,
    ) -> Result<Plan, LoadError> {
        let src = SourceFile::new(name, text);
        let raw: RawPlan = toml::from_str(&src.text).map_err(|e| {
            // Some errors have no span (the parser's recursion limit): the file, at least.
            let loc = Some(e.span().map_or_else(|| src.loc(0), |s| src.loc(s.start)));
            LoadError::Invalid(vec![Diag {
                loc,
                commit: None,
                kind: "syntax",
                message: toml_message(&e),
            }])
        })?;
        let mut b = Builder {
            errors: Vec::new(),
            warnings: Vec::new(),
        };
        let mut hasher = Sha256::new();
        hasher.update(src.text.as_bytes());

        if *raw.schema_version.get_ref() != 1 {
            b.error(
                Some(src.loc(raw.schema_version.span().start)),
                None,
                "schema",
                format!(
                    "schema_version {} is not supported (expected 1)",
                    raw.schema_version.get_ref()
                ),
            );
        }
        let mut defaults = b.defaults(&raw, &src);
        if defaults.vllm_src.is_none() {
            defaults.vllm_src = box_defaults
                .vllm_src
                .as_ref()
                .map(|p| p.display().to_string());
        }
        let mut datasets = box_defaults.datasets.clone();
        datasets.extend(b.datasets(&raw, &src, base));
        if raw.name.as_deref().is_some_and(|n| n.trim().is_empty()) {
            b.error(
                src.field_loc(&(0..src.text.len()), "name"),
                None,
                "name",
                "name is empty (expected the sweep's name, or no `name` to use the file name)"
                    .into(),
            );
        }
        let images = b.images(&raw, &src);
        let agents: Vec<Agent> = raw
            .agents
            .iter()
            .map(|a| {
                // As for commits: the span may cover only the `[[agents]]` header.
                let span = table_extent(&src.text, a.span());
                let a = a.get_ref();
                if let Some(p) = &a.patch {
                    if let Err(e) = template::check(p) {
                        b.error(
                            src.field_loc(&span, "patch"),
                            None,
                            "template",
                            e.to_string(),
                        );
                    }
                }
                if a.id.is_empty() || a.id.contains(|c: char| c.is_whitespace() || c == '/') {
                    b.error(
                        src.field_loc(&span, "id"),
                        None,
                        "agent_id",
                        format!(
                            "agent id `{}` must be a non-empty word without spaces or `/`",
                            a.id
                        ),
                    );
                }
                Agent {
                    id: a.id.clone(),
                    model: a.model.clone(),
                    patch: a.patch.clone(),
                }
            })
            .collect();

        // Commits: inline tables first, then the JSONL file, each with its own positions.
        let mut raw_commits: Vec<(RawCommit, Option<Loc>, FieldLocator)> = Vec::new();
        let commit_src = std::rc::Rc::new(src);
        for c in raw.commits {
            // An array-of-tables span may cover only the `[[commits]]` header: the table
            // runs until the next header line.
            let span = table_extent(&commit_src.text, c.span());
            let loc = Some(commit_src.loc(span.start));
            raw_commits.push((
                c.into_inner(),
                loc,
                FieldLocator {
                    src: commit_src.clone(),
                    span,
                },
            ));
        }
        if let Some(cf) = &raw.commits_file {
            let rel = cf.get_ref();
            let p = base.join(rel);
            let read = read::read_capped(&p, read::PLAN_CAP, "a commits file")
                .map_err(|e| e.to_string())
                .and_then(|bytes| {
                    read::utf8(&p.display().to_string(), bytes)
                        .map_err(|(loc, m)| format!("{loc}: {m}"))
                });
            match read {
                Ok(text) => {
                    hasher.update(text.as_bytes());
                    let jsrc = std::rc::Rc::new(SourceFile::new(p.display().to_string(), text));
                    let mut offset = 0;
                    for (i, line) in jsrc.text.split('\n').enumerate() {
                        let span = offset..offset + line.len();
                        offset += line.len() + 1;
                        if line.trim().is_empty() {
                            continue;
                        }
                        match serde_json::from_str::<RawCommit>(line) {
                            Ok(c) => raw_commits.push((
                                c,
                                Some(jsrc.line_loc(i + 1, 1)),
                                FieldLocator {
                                    src: jsrc.clone(),
                                    span,
                                },
                            )),
                            Err(e) => b.error(
                                Some(jsrc.line_loc(i + 1, e.column())),
                                None,
                                "syntax",
                                format!("invalid commit record: {e}"),
                            ),
                        }
                    }
                }
                Err(e) => b.error(
                    Some(commit_src.loc(cf.span().start)),
                    None,
                    "commits_file",
                    format!("cannot read commits_file: {e}"),
                ),
            }
        }

        b.check_commit_count(&mut raw_commits);
        // Accepted fixes replace their commits' fields; they are part of what was asked, so
        // the plan's hash (a resume's check) counts them.
        for (rc, _, _) in raw_commits.iter_mut() {
            let Some(f) = rc
                .commit
                .as_deref()
                .and_then(|c| fixes::for_commit(&box_defaults.fixes, c))
            else {
                continue;
            };
            rc.model = f.model.clone().or(rc.model.take());
            rc.perf_command = f.perf_command.clone().or(rc.perf_command.take());
            rc.gpu_config = f.gpu_config.clone().or(rc.gpu_config.take());
            hasher.update(f.note().as_bytes());
        }
        let clone = defaults
            .vllm_src
            .as_deref()
            .and_then(|s| clone::Clone::open(&expand_path(s, base)));
        let (changes, resolved) = match &clone {
            Some(cl) => resolve::from_clone(&mut b, cl, &mut raw_commits),
            None => Default::default(),
        };
        let mut commits = Vec::with_capacity(raw_commits.len());
        for (rc, loc, fl) in &raw_commits {
            if let Some(mut c) = b.commit(rc, loc.clone(), fl, &defaults, &agents, &datasets) {
                if let Some(ch) = c
                    .parent
                    .as_ref()
                    .and_then(|p| changes.get(&(c.commit.clone(), p.clone())))
                {
                    if c.files_changed.is_empty() {
                        c.files_changed = ch.iter().map(|f| f.path.clone()).collect();
                    }
                    c.changes = Some(ch.clone());
                }
                c.fixed = fixes::for_commit(&box_defaults.fixes, &c.commit).map(fixes::Fix::note);
                commits.push(c);
            }
        }
        b.check_hash_uniqueness(&commits);
        if commits.is_empty() && b.errors.is_empty() {
            b.warn(None, None, "empty", "the plan has no commits".into());
        }
        let runs = b.expand(&commits, &defaults, &images, &agents, &raw_commits);
        if !b.errors.is_empty() {
            return Err(LoadError::Invalid(b.errors));
        }
        if defaults.on_invalid == OnInvalid::Fail {
            let invalid: Vec<Diag> = commits
                .iter()
                .filter_map(|c| {
                    c.invalid.as_ref().map(|i| Diag {
                        loc: i.loc.clone(),
                        commit: Some(c.commit.clone()),
                        kind: i.rule,
                        message: format!(
                            "invalid ({}): {} [on_invalid = \"fail\"]",
                            i.rule, i.detail
                        ),
                    })
                })
                .collect();
            if !invalid.is_empty() {
                return Err(LoadError::Invalid(invalid));
            }
        }
        Ok(Plan {
            name: raw.name.clone().unwrap_or_else(|| {
                path.file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "sweep".into())
            }),
            repo: raw.repo.clone(),
            path: path.to_path_buf(),
            hash: hex(&hasher.finalize()),
            defaults,
            images,
            agents,
            commits,
            runs,
            warnings: b.warnings,
            datasets,
            resolved,
        })
    }

    pub fn commit_of(&self, run: &RunSpec) -> &CommitSpec {
        &self.commits[run.commit]
    }

    /// Some run would run (not every one is skipped, and there is one).
    pub fn runnable(&self) -> bool {
        self.runs.iter().any(|r| r.skip_reason.is_none())
    }

    /// GPUs needed by the largest runnable run.
    pub(crate) fn max_gpus(&self) -> u32 {
        self.runs
            .iter()
            .filter(|r| r.skip_reason.is_none())
            .map(|r| r.gpus)
            .max()
            .unwrap_or(0)
    }

    pub(crate) fn invalid_commits(&self) -> impl Iterator<Item = &CommitSpec> {
        self.commits.iter().filter(|c| c.invalid.is_some())
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn toml_message(e: &toml::de::Error) -> String {
    // toml's message already says what was expected; keep it on one line.
    let msg = e.message().trim().replace('\n', " ");
    if msg.starts_with("unknown field") {
        format!("{msg} (fields are checked so typos are not silently ignored)")
    } else {
        msg
    }
}

/// Finds a field's position inside the commit's table or JSON line.
struct FieldLocator {
    src: std::rc::Rc<SourceFile>,
    span: Range<usize>,
}

impl FieldLocator {
    fn loc(&self, key: &str) -> Option<Loc> {
        self.src
            .field_loc(&self.span, key)
            .or_else(|| Some(self.src.loc(self.span.start)))
    }
}

struct Builder {
    errors: Vec<Diag>,
    warnings: Vec<Diag>,
}

fn is_hex(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_hexdigit())
}

impl Builder {}

fn table_extent(text: &str, span: Range<usize>) -> Range<usize> {
    let from = span.end.min(text.len());
    let end = text[from..]
        .match_indices('\n')
        .map(|(i, _)| from + i + 1)
        .find(|&i| text[i..].trim_start_matches([' ', '\t']).starts_with('['))
        .unwrap_or(text.len());
    span.start..end.max(span.end)
}

fn is_variant_selector(v: &str) -> bool {
    matches!(v, "baseline" | "human" | "agent")
        || v.strip_prefix("agent:").is_some_and(|id| !id.is_empty())
}

#[cfg(test)]
mod tests;
