//! The sweep plan: load a TOML file (and optional JSONL commit list), validate it with
//! positions, and expand it into runs (commit × variant × repeat). Pure apart from reading
//! the files it names; everything downstream works on the validated [`Plan`].

pub mod clone;
pub mod command;
pub mod datasets;
pub mod gpu;
pub mod import;
mod raw;
pub mod report;
mod resolve;
mod schedule;
pub mod source;
pub mod template;

pub use command::{BenchKind, CommandView};
pub use datasets::{expand_path, static_invocation, DATASET_HINT};
pub use gpu::GpuConfig;
pub use raw::{OnInvalid, SimSpec, Warmup};
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
    pub sim: Option<SimSpec>,
    pub loc: Option<Loc>,
    /// How the command is made runnable, as far as the era tables tell before the night
    /// (the runtime re-plans with what it learns from each image's client).
    pub invocation: Option<crate::rewrite::Invocation>,
    /// Why it cannot be made runnable yet (a dataset the operator can still provide).
    pub invocation_problem: Option<String>,
    /// Parent → commit, from the clone (None without one).
    pub changes: Option<Vec<clone::FileChange>>,
}

impl CommitSpec {
    pub fn short(&self) -> &str {
        &self.commit[..self.commit.len().min(8)]
    }
    /// The benchmark kind: from the command when it says, else the declared mode.
    pub fn kind(&self) -> Option<BenchKind> {
        self.view.as_ref().and_then(|v| v.kind).or(self.mode)
    }
    pub fn needs_server(&self) -> bool {
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
}

impl Plan {
    pub fn load(path: &Path) -> Result<Plan, LoadError> {
        let text = std::fs::read_to_string(path).map_err(|error| LoadError::Io {
            path: path.to_path_buf(),
            error,
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        Plan::from_str_at(&path.display().to_string(), text, base, path)
    }

    /// As [`Plan::load`], with the box's settings (from the config file) under the plan's
    /// own: a plan names its datasets and clone only where they differ from the box's.
    pub fn load_with(path: &Path, box_defaults: &BoxDefaults) -> Result<Plan, LoadError> {
        let text = std::fs::read_to_string(path).map_err(|error| LoadError::Io {
            path: path.to_path_buf(),
            error,
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        Plan::parse(&path.display().to_string(), text, base, path, box_defaults)
    }

    /// A plan from its text, as if loaded from `path` (a sweep's daemon hands its clients
    /// the text it loaded).
    pub fn from_text_with(
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
            let loc = e.span().map(|s| src.loc(s.start));
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
                let span = a.span();
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
            match std::fs::read_to_string(&p) {
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
                    format!("cannot read commits_file {}: {e}", p.display()),
                ),
            }
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
    pub fn max_gpus(&self) -> u32 {
        self.runs
            .iter()
            .filter(|r| r.skip_reason.is_none())
            .map(|r| r.gpus)
            .max()
            .unwrap_or(0)
    }

    pub fn invalid_commits(&self) -> impl Iterator<Item = &CommitSpec> {
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

impl Builder {
    fn error(
        &mut self,
        loc: Option<Loc>,
        commit: Option<&str>,
        kind: &'static str,
        message: String,
    ) {
        self.errors.push(Diag {
            loc,
            commit: commit.map(str::to_string),
            kind,
            message,
        });
    }
    fn warn(
        &mut self,
        loc: Option<Loc>,
        commit: Option<&str>,
        kind: &'static str,
        message: String,
    ) {
        self.warnings.push(Diag {
            loc,
            commit: commit.map(str::to_string),
            kind,
            message,
        });
    }

    fn defaults(&mut self, raw: &RawPlan, src: &SourceFile) -> Defaults {
        let d = &raw.defaults;
        let whole = 0..src.text.len();
        let variants = d
            .variants
            .clone()
            .unwrap_or_else(|| vec!["baseline".into(), "human".into(), "agent".into()]);
        for v in &variants {
            if !is_variant_selector(v) {
                self.error(
                    src.field_loc(&whole, "variants"),
                    None,
                    "variants",
                    format!(
                        "unknown variant `{v}` (expected baseline, human, agent or agent:<id>)"
                    ),
                );
            }
        }
        let mut by_gpus = BTreeMap::new();
        for (k, v) in d.timeout_s_by_gpus.clone().unwrap_or_default() {
            match k.parse::<u32>() {
                Ok(n) if n > 0 => {
                    by_gpus.insert(n, v);
                }
                _ => self.error(
                    src.field_loc(&whole, "timeout_s_by_gpus"),
                    None,
                    "timeout",
                    format!(
                        "timeout_s_by_gpus key `{k}` is not a GPU count (expected \"1\", \"2\", …)"
                    ),
                ),
            }
        }
        if d.shm_size.is_some() && d.ipc.is_some() {
            self.warn(
                src.field_loc(&whole, "ipc"),
                None,
                "shm_ipc",
                "both shm_size and ipc are set; ipc = \"host\" makes shm_size irrelevant".into(),
            );
        }
        if let Some(ipc) = &d.ipc {
            if ipc != "host" && ipc != "private" && ipc != "shareable" {
                self.error(
                    src.field_loc(&whole, "ipc"),
                    None,
                    "ipc",
                    format!("ipc `{ipc}` is not an IPC mode (expected host, private or shareable)"),
                );
            }
        }
        if d.gpu_count == Some(0) {
            self.error(
                src.field_loc(&whole, "gpu_count"),
                None,
                "gpu_count",
                "gpu_count = 0 cannot run anything (expected 1 or more)".into(),
            );
        }
        if d.repeats == Some(0) {
            self.error(
                src.field_loc(&whole, "repeats"),
                None,
                "repeats",
                "repeats must be at least 1".into(),
            );
        }
        Defaults {
            gpu_type: d.gpu_type.clone().unwrap_or_else(|| "H100".into()),
            gpu_count: d.gpu_count.unwrap_or(1).max(1),
            hf_cache: d.hf_cache.clone(),
            shm_size: d.shm_size.clone(),
            ipc: d.ipc.clone(),
            server_start_timeout_s: d.server_start_timeout_s.unwrap_or(900),
            run_timeout_s: d.run_timeout_s.unwrap_or(3600),
            timeout_s_by_gpus: by_gpus,
            repeats: d.repeats.unwrap_or(1).max(1),
            warmup: d.warmup.unwrap_or_default(),
            warmup_requests: d.warmup_requests.unwrap_or(0),
            variants_explicit: d.variants.is_some(),
            variants_loc: d
                .variants
                .as_ref()
                .and_then(|_| src.field_loc(&whole, "variants")),
            variants,
            on_invalid: d.on_invalid.unwrap_or_default(),
            vllm_src: d.vllm_src.clone(),
            fetch_weights: d.fetch_weights.unwrap_or(true),
        }
    }

    fn images(&mut self, raw: &RawPlan, src: &SourceFile) -> Images {
        let (img, span) = match &raw.images {
            Some(s) => (Some(s.get_ref()), table_extent(&src.text, s.span())),
            None => (None, 0..0),
        };
        let pick = |f: fn(&raw::RawImages) -> &Option<String>, dflt: &str| {
            img.and_then(|i| f(i).clone())
                .unwrap_or_else(|| dflt.to_string())
        };
        let images = Images {
            org: pick(|i| &i.org, "anonymous"),
            human: pick(|i| &i.human, "{org}/vllm-bench:{commit}"),
            baseline: pick(|i| &i.baseline, "{org}/vllm-baseline:baseline-{parent12}"),
            agent: pick(|i| &i.agent, "{baseline_image}"),
            patch_dir: img.and_then(|i| i.patch_dir.clone()),
        };
        for (key, t) in [
            ("human", &images.human),
            ("baseline", &images.baseline),
            ("agent", &images.agent),
        ] {
            if let Err(e) = template::check(t) {
                self.error(
                    src.field_loc(&span, key),
                    None,
                    "template",
                    format!("[images].{key}: {e}"),
                );
            }
        }
        images
    }

    fn commit(
        &mut self,
        rc: &RawCommit,
        loc: Option<Loc>,
        fl: &FieldLocator,
        defaults: &Defaults,
        agents: &[Agent],
        datasets: &BTreeMap<String, PathBuf>,
    ) -> Option<CommitSpec> {
        let Some(commit) = rc.commit.clone() else {
            self.error(
                loc,
                None,
                "hash",
                "commit has no `commit` hash (expected 40 hex digits)".into(),
            );
            return None;
        };
        let commit = commit.trim().to_ascii_lowercase();
        if !is_hex(&commit) || commit.len() < 7 || commit.len() > 40 {
            self.error(
                fl.loc("commit"),
                None,
                "hash",
                format!("`{commit}` is not a commit hash (expected 40 hex digits, or an unambiguous prefix of at least 7)"),
            );
            return None;
        }
        let parent = match rc.parent.as_deref().map(|p| p.trim().to_ascii_lowercase()) {
            Some(p) if p.is_empty() => None,
            Some(p) if !is_hex(&p) || p.len() < 7 || p.len() > 40 => {
                self.error(
                    fl.loc("parent"),
                    Some(&commit),
                    "hash",
                    format!("parent `{p}` is not a commit hash (expected 40 hex digits, or a prefix of at least 12)"),
                );
                return None;
            }
            other => other,
        };
        if parent.is_none() {
            self.warn(
                loc.clone(),
                Some(&commit),
                "unknown_parent",
                "parent unknown: baseline and agent variants need a per-commit image override"
                    .into(),
            );
        }
        let mode = match &rc.benchmark_mode {
            None => None,
            Some(m) => match BenchKind::parse(m) {
                Some(k) => Some(k),
                None => {
                    self.error(fl.loc("benchmark_mode"), Some(&commit), "mode", format!("benchmark_mode `{m}` is not one of serving, throughput, latency, prefix_caching"));
                    None
                }
            },
        };
        for key in rc.images.keys() {
            if !is_variant_selector(key) {
                self.error(fl.loc("images"), Some(&commit), "images", format!("images override for unknown variant `{key}` (expected baseline, human, agent or agent:<id>)"));
            }
        }
        for key in rc.patches.keys() {
            if !agents.iter().any(|a| &a.id == key) {
                self.error(
                    fl.loc("patches"),
                    Some(&commit),
                    "patches",
                    format!("patch override for unknown agent `{key}`"),
                );
            }
        }
        if let Some(vs) = &rc.variants {
            for v in vs {
                if !is_variant_selector(v) {
                    self.error(
                        fl.loc("variants"),
                        Some(&commit),
                        "variants",
                        format!(
                            "unknown variant `{v}` (expected baseline, human, agent or agent:<id>)"
                        ),
                    );
                }
            }
        }
        if let Some(sim) = &rc.sim {
            if let Some(f) = &sim.fail {
                if f.parse::<crate::category::Category>().is_err() {
                    self.error(
                        fl.loc("sim"),
                        Some(&commit),
                        "sim",
                        format!("sim.fail `{f}` is not a failure category"),
                    );
                }
            }
        }

        let command = rc
            .perf_command
            .as_deref()
            .map(str::trim)
            .filter(|c| !c.is_empty());
        let mut invalid = None;
        let view = match command {
            None => {
                invalid = Some(Invalid {
                    rule: "missing",
                    detail: "no perf_command".into(),
                    loc: fl.loc("perf_command").or(loc.clone()),
                });
                None
            }
            Some(cmd) => match CommandView::parse(cmd) {
                Ok(v) => Some(v),
                Err(e) => {
                    self.error(
                        fl.loc("perf_command"),
                        Some(&commit),
                        "command",
                        format!("perf_command: {e}"),
                    );
                    None
                }
            },
        };
        let gpu = match &rc.gpu_config {
            Some(g) => match GpuConfig::parse(g) {
                Ok(g) => Some(g),
                Err(e) => {
                    self.error(
                        fl.loc("gpu_config"),
                        Some(&commit),
                        "gpu_config",
                        format!("gpu_config `{g}`: {e}"),
                    );
                    None
                }
            },
            None => None,
        };
        let gpu_derived = gpu.is_none();
        let gpu = gpu.unwrap_or_else(|| {
            let (tp, pp) = view.as_ref().map(|v| (v.tp, v.pp)).unwrap_or((1, 1));
            let derived = GpuConfig::count_for_parallelism(tp, pp);
            GpuConfig {
                gpu_type: defaults.gpu_type.clone(),
                count: derived.max(if tp * pp > 1 { 1 } else { defaults.gpu_count }),
            }
        });
        if let Some(v) = &view {
            if invalid.is_none() {
                if let Some(p) = v.problems().into_iter().next() {
                    invalid = Some(Invalid {
                        rule: p.rule,
                        detail: p.detail,
                        loc: fl.loc("perf_command"),
                    });
                }
            }
            if invalid.is_none() && v.tp * v.pp > gpu.count {
                invalid = Some(Invalid {
                    rule: "tp_exceeds_gpus",
                    detail: format!(
                        "TP {} × PP {} needs {} GPUs but gpu_config gives {}",
                        v.tp,
                        v.pp,
                        v.tp * v.pp,
                        gpu
                    ),
                    loc: fl.loc("gpu_config"),
                });
            }
            if let Some(s) = v.script() {
                if !s.starts_with("benchmarks/") {
                    self.warn(fl.loc("perf_command"), Some(&commit), "script_path", format!("script `{s}` is not under benchmarks/; it is mapped to the image's benchmarks folder"));
                }
            }
            if let (Some(cm), Some(m)) = (&v.model, &rc.model) {
                if cm != m && m != "N/A" {
                    self.warn(
                        fl.loc("model"),
                        Some(&commit),
                        "model_mismatch",
                        format!("--model {cm} differs from model = {m}"),
                    );
                }
            }
            if let (Some(k), Some(m)) = (v.kind, mode) {
                if k != m {
                    self.warn(fl.loc("benchmark_mode"), Some(&commit), "mode_mismatch", format!("benchmark_mode {} disagrees with the command, which runs a {} benchmark", m.as_str(), k.as_str()));
                }
            }
            if v.kind.is_none() && mode.is_none() {
                self.warn(
                    fl.loc("perf_command"),
                    Some(&commit),
                    "unknown_kind",
                    "cannot tell the benchmark kind from the command; set benchmark_mode".into(),
                );
            }
        }
        let (invocation, invocation_problem) = match &view {
            Some(v) if invalid.is_none() => {
                let model = rc.model.as_deref().filter(|m| *m != "N/A");
                match static_invocation(v, mode, rc.vllm_version.as_deref(), model, datasets) {
                    Ok(inv) => {
                        for d in &inv.hub_datasets {
                            self.warn(fl.loc("perf_command"), Some(&commit), "hub_dataset", format!("the client loads the Hub dataset `{d}` at run time: the box needs the Hub, or the dataset in the HF cache (hf_cache) for offline runs"));
                        }
                        for m in &inv.mounts {
                            if !m.host.exists() {
                                self.warn(
                                    fl.loc("perf_command"),
                                    Some(&commit),
                                    "dataset_missing",
                                    format!(
                                        "dataset `{}` is not at {} ({})",
                                        m.name,
                                        m.host.display(),
                                        DATASET_HINT
                                    ),
                                );
                            }
                        }
                        (Some(inv), None)
                    }
                    Err(r) if r.dataset => {
                        self.warn(
                            fl.loc("perf_command"),
                            Some(&commit),
                            "dataset_missing",
                            r.reason.clone(),
                        );
                        (None, Some(r.reason))
                    }
                    Err(r) => {
                        invalid = Some(Invalid {
                            rule: "bench_command_invalid",
                            detail: r.reason,
                            loc: fl.loc("perf_command"),
                        });
                        (None, None)
                    }
                }
            }
            _ => (None, None),
        };
        if gpu.gpu_type != defaults.gpu_type {
            self.warn(
                fl.loc("gpu_config"),
                Some(&commit),
                "gpu_type",
                format!(
                    "gpu_config asks for {} but the machine has {}",
                    gpu.gpu_type, defaults.gpu_type
                ),
            );
        }
        Some(CommitSpec {
            commit,
            parent,
            title: rc.title.clone().unwrap_or_default(),
            pr_url: rc.pr_url.clone(),
            model: rc
                .model
                .clone()
                .filter(|m| m != "N/A")
                .or_else(|| view.as_ref().and_then(|v| v.model.clone())),
            gpu,
            gpu_derived,
            mode,
            perf_command: command.map(str::to_string),
            view,
            files_changed: rc.files_changed.clone(),
            notes: rc.notes.clone().filter(|n| !n.is_empty()),
            skip: rc.skip,
            invalid,
            vllm_version: rc.vllm_version.clone(),
            invocation,
            invocation_problem,
            changes: None,
            sim: rc.sim.clone(),
            loc,
        })
    }

    /// Duplicate commits, and prefixes that match more than one commit, are errors.
    fn check_hash_uniqueness(&mut self, commits: &[CommitSpec]) {
        let mut sorted: Vec<&CommitSpec> = commits.iter().collect();
        sorted.sort_by(|a, b| a.commit.cmp(&b.commit));
        for w in sorted.windows(2) {
            let (a, b) = (w[0], w[1]);
            if a.commit == b.commit {
                self.error(
                    b.loc.clone(),
                    Some(&b.commit),
                    "hash",
                    format!(
                        "commit listed twice (first at {})",
                        a.loc.as_ref().map(|l| l.to_string()).unwrap_or_default()
                    ),
                );
            } else if b.commit.starts_with(&a.commit) {
                self.error(
                    a.loc.clone(),
                    Some(&a.commit),
                    "hash",
                    format!(
                        "`{}` is an ambiguous prefix: it also matches {}",
                        a.commit, b.commit
                    ),
                );
            }
        }
        // A parent may match commits that extend it (a contiguous run of the sorted list
        // from where it would sort) and commits it extends (its own prefixes, looked up
        // one length at a time): logarithmic per commit, where a scan of every commit
        // made large plans quadratic.
        let hashes: Vec<&str> = sorted.iter().map(|c| c.commit.as_str()).collect();
        for c in commits {
            if let Some(p) = &c.parent {
                let from = hashes.partition_point(|h| *h < p.as_str());
                let longer = hashes[from..]
                    .iter()
                    .take_while(|h| h.starts_with(p.as_str()))
                    .count();
                let shorter = (1..p.len())
                    .filter(|&n| p.is_char_boundary(n))
                    .filter(|&n| hashes.binary_search(&&p[..n]).is_ok())
                    .count();
                let matches = longer + shorter;
                if matches > 1 {
                    self.error(
                        c.loc.clone(),
                        Some(&c.commit),
                        "hash",
                        format!(
                            "parent `{p}` is ambiguous: it matches {matches} commits of the plan"
                        ),
                    );
                }
            }
        }
    }

    fn expand(
        &mut self,
        commits: &[CommitSpec],
        defaults: &Defaults,
        images: &Images,
        agents: &[Agent],
        raw: &[(RawCommit, Option<Loc>, FieldLocator)],
    ) -> Vec<RunSpec> {
        let mut runs = Vec::new();
        let mut short_commit_template = 0usize;
        // Keyed as CommitSpec keys them (lower case): an upper-case hash keeps its settings.
        let by_commit: BTreeMap<String, (&RawCommit, &FieldLocator)> = raw
            .iter()
            .filter_map(|(rc, _, fl)| {
                rc.commit
                    .as_deref()
                    .map(|c| (c.trim().to_ascii_lowercase(), (rc, fl)))
            })
            .collect();
        // The built-in default lists `agent`; only a list the operator wrote is wrong to
        // name it when there is no agent.
        if agents.is_empty()
            && defaults.variants_explicit
            && defaults.variants.iter().any(|v| v == "agent")
        {
            self.error(
                defaults.variants_loc.clone(),
                None,
                "variants",
                "variant `agent` but the plan has no [[agents]] to run it with".into(),
            );
        }
        for (ci, c) in commits.iter().enumerate() {
            let (rc, fl) = match by_commit.get(&c.commit) {
                Some((rc, fl)) => (Some(*rc), Some(*fl)),
                None => (None, None),
            };
            let own = rc.and_then(|r| r.variants.clone());
            // A commit's own list naming `agent` without agents (the defaults' list is
            // checked once, above).
            let explicit = own.is_some();
            let variants_loc = fl.and_then(|fl| fl.loc("variants")).or(c.loc.clone());
            let selectors = own.unwrap_or_else(|| defaults.variants.clone());
            let mut variants: Vec<Variant> = Vec::new();
            for s in &selectors {
                match s.as_str() {
                    "baseline" => variants.push(Variant::Baseline),
                    "human" => variants.push(Variant::Human),
                    "agent" if agents.is_empty() && explicit => {
                        self.error(
                            variants_loc.clone(),
                            Some(&c.commit),
                            "variants",
                            "variant `agent` but the plan has no [[agents]] to run it with".into(),
                        );
                    }
                    "agent" => variants.extend(agents.iter().map(|a| Variant::Agent(a.id.clone()))),
                    other => {
                        if let Some(id) = other.strip_prefix("agent:") {
                            if agents.iter().any(|a| a.id == id) {
                                variants.push(Variant::Agent(id.to_string()));
                            } else {
                                self.error(
                                    c.loc.clone(),
                                    Some(&c.commit),
                                    "variants",
                                    format!("variant agent:{id} names no [[agents]] entry"),
                                );
                            }
                        }
                    }
                }
            }
            variants.sort_by_key(|v| v.order());
            variants.dedup();
            let overrides = rc.map(|r| r.images.clone()).unwrap_or_default();
            let patch_overrides = rc.map(|r| r.patches.clone()).unwrap_or_default();
            let base_vars = template::vars(&images.org, &c.commit, c.parent.as_deref(), None, None);
            let baseline_image = overrides
                .get("baseline")
                .cloned()
                .map(Ok)
                .unwrap_or_else(|| template::expand(&images.baseline, &base_vars));
            if c.commit.len() < 40
                && images.human.contains("{commit}")
                && !overrides.contains_key("human")
            {
                short_commit_template += 1;
            }
            let repeats = match rc.and_then(|r| r.repeats) {
                Some(0) => {
                    self.error(
                        fl.and_then(|f| f.loc("repeats")),
                        Some(&c.commit),
                        "repeats",
                        "repeats must be at least 1".into(),
                    );
                    1
                }
                Some(n) => n,
                None => defaults.repeats,
            };
            for (order, (v, repeat)) in schedule(&c.commit, &variants, repeats)
                .into_iter()
                .enumerate()
            {
                {
                    let key = if repeats > 1 {
                        format!(
                            "{}/{}/r{}",
                            &c.commit[..c.commit.len().min(12)],
                            v,
                            repeat + 1
                        )
                    } else {
                        format!("{}/{}", &c.commit[..c.commit.len().min(12)], v)
                    };
                    let mut skip_reason = None;
                    if let Some(inv) = &c.invalid {
                        if defaults.on_invalid != OnInvalid::Run {
                            skip_reason = Some(format!("invalid: {} ({})", inv.rule, inv.detail));
                        }
                    }
                    if c.skip && skip_reason.is_none() {
                        skip_reason = Some("skip = true in the plan".into());
                    }
                    let image = match &v {
                        Variant::Human => overrides
                            .get("human")
                            .cloned()
                            .map(Ok)
                            .unwrap_or_else(|| template::expand(&images.human, &base_vars)),
                        Variant::Baseline => baseline_image.clone(),
                        Variant::Agent(id) => {
                            let key = format!("agent:{id}");
                            match overrides.get(&key).or_else(|| overrides.get("agent")) {
                                Some(i) => Ok(i.clone()),
                                None => match &baseline_image {
                                    Ok(b) => {
                                        let vars = template::vars(
                                            &images.org,
                                            &c.commit,
                                            c.parent.as_deref(),
                                            Some(id),
                                            Some(b),
                                        );
                                        template::expand(&images.agent, &vars)
                                    }
                                    Err(e) => Err(e.clone()),
                                },
                            }
                        }
                    };
                    let image = match image {
                        Ok(i) => Some(i),
                        Err(e) => {
                            if skip_reason.is_none() {
                                skip_reason = Some(format!("no image for {v}: {e}"));
                            }
                            None
                        }
                    };
                    let patch = match &v {
                        Variant::Agent(id) => {
                            let agent = agents.iter().find(|a| &a.id == id);
                            let t = patch_overrides
                                .get(id)
                                .cloned()
                                .or_else(|| agent.and_then(|a| a.patch.clone()));
                            match t {
                                Some(t) => {
                                    let vars = template::vars(
                                        &images.org,
                                        &c.commit,
                                        c.parent.as_deref(),
                                        Some(id),
                                        None,
                                    );
                                    template::expand(&t, &vars).ok()
                                }
                                None => None,
                            }
                        }
                        _ => None,
                    };
                    let gpus = c.gpu.count;
                    runs.push(RunSpec {
                        id: RunId(runs.len() as u32),
                        commit: ci,
                        variant: v.clone(),
                        repeat,
                        warmup: repeat == 0
                            && repeats > 1
                            && defaults.warmup == Warmup::DiscardFirst,
                        order: if repeats > 1 {
                            u8::try_from(order).unwrap_or(u8::MAX)
                        } else {
                            v.order()
                        },
                        key,
                        image,
                        patch,
                        gpus,
                        server_start_timeout_s: defaults.server_start_timeout_s,
                        run_timeout_s: defaults
                            .timeout_s_by_gpus
                            .get(&gpus)
                            .copied()
                            .unwrap_or(defaults.run_timeout_s),
                        skip_reason,
                    });
                }
            }
        }
        if short_commit_template > 0 {
            self.warn(None, None, "short_hash", format!("{short_commit_template} commits are abbreviated hashes; `{{commit}}` in the human image template expands to the prefix (give full hashes or per-commit images)"));
        }
        runs
    }
}

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
