//! The streaming scanner: fed every line of one attempt as it arrives, it keeps only
//! bounded state (the candidate lines of each signature, a few fallback lines, the last
//! server lines) and never the log itself.

use super::capture::{line_time, CaptureState, CaptureWatch};
use super::confidence;
use super::context::FailureContext;
use super::predict::port_bug_affected;
use super::telling::Telling;
use super::text;
use super::{Catalog, Diagnosis, EvidencePick};
use crate::category::Category;
use crate::model::{Stage, Stream};
use std::collections::VecDeque;
use std::sync::Arc;

/// Server lines kept for the graph-capture check.
const RECENT_SERVER: usize = 8;

#[derive(Debug, Clone)]
pub(super) struct Cand {
    raw: String,
    line_no: u64,
    stream: Stream,
}

#[derive(Debug, Clone, Default)]
struct SigState {
    first: Option<Cand>,
    /// First match that is an exception line (`XxxError: …` after the prefixes).
    exc: Option<Cand>,
    /// First match that is an uncaught exception line of a process (no logger prefix).
    bare: Option<Cand>,
    last: Option<Cand>,
    after_seen: bool,
}

#[derive(Debug, Clone)]
struct Recent {
    progress: bool,
    done: bool,
    cand: Cand,
}

pub struct Scanner {
    catalog: Arc<Catalog>,
    sigs: Vec<SigState>,
    line_no: u64,
    /// File mode: streams are unknown, every signature looks at every line.
    file_mode: bool,
    first_exception: Option<Cand>,
    first_error: Option<Cand>,
    last_line: Option<Cand>,
    startup_complete: Option<Cand>,
    /// The last line that showed the server's start going on (capture progress, the end
    /// of capture, startup complete).
    last_progress: Option<u64>,
    recent_server: VecDeque<Recent>,
    capture: CaptureWatch<Cand>,
    telling: Telling,
    /// Source files named by traceback frames (`File "…/x.py", line N`), so a failure in
    /// code the agent's patch changed can be blamed on the patch. Bounded.
    frames: std::collections::BTreeSet<String>,
}

/// Distinct traceback files kept per attempt.
const MAX_FRAMES: usize = 512;

impl Scanner {
    pub fn new(catalog: Arc<Catalog>) -> Self {
        let n = catalog.signatures.len();
        Scanner {
            catalog,
            sigs: vec![SigState::default(); n],
            line_no: 0,
            file_mode: false,
            first_exception: None,
            first_error: None,
            last_line: None,
            startup_complete: None,
            last_progress: None,
            recent_server: VecDeque::with_capacity(RECENT_SERVER),
            capture: CaptureWatch::default(),
            telling: Telling::default(),
            frames: std::collections::BTreeSet::new(),
        }
    }

    pub(crate) fn file_mode(catalog: Arc<Catalog>) -> Self {
        let mut s = Self::new(catalog);
        s.file_mode = true;
        s
    }

    /// Lines fed so far.
    pub fn lines_seen(&self) -> u64 {
        self.line_no
    }

    /// Feeds one line (with or without its trailing newline). Its time, where capture's
    /// pace needs one, is read from the line's own timestamp.
    pub fn feed(&mut self, stream: Stream, line: &str) {
        self.feed_at(stream, line, None);
    }

    /// Feeds one line that arrived `at` seconds into the attempt (`None`: unknown, read
    /// from the line's own timestamp if it has one).
    pub fn feed_at(&mut self, stream: Stream, line: &str, at: Option<f64>) {
        self.line_no += 1;
        let clean = text::clean(line);
        let clean = clean.as_ref();
        if clean.trim().is_empty() {
            return;
        }
        let line_no = self.line_no;
        if self.frames.len() < MAX_FRAMES {
            if let Some(f) = super::patch_blame::frame_file(clean) {
                self.frames.insert(f.to_string());
            }
        }
        let cand = || Cand {
            raw: text::evidence(line),
            line_no,
            stream,
        };
        let msg = text::message(clean);
        let echo = text::is_source_echo(msg);
        let cat = Arc::clone(&self.catalog);

        if !echo {
            let matches = cat.set.matches(clean);
            let mut last_owner = usize::MAX;
            for idx in matches.iter() {
                let i = cat.set_owner[idx];
                if i == last_owner {
                    continue; // several regexes of one signature matched
                }
                last_owner = i;
                let sig = &cat.signatures[i];
                if !self.file_mode && !sig.trusts(stream) {
                    continue;
                }
                if sig.exclude.iter().any(|r| r.is_match(clean)) {
                    continue;
                }
                if sig.after.is_some() && !self.sigs[i].after_seen {
                    continue;
                }
                let st = &mut self.sigs[i];
                let c = cand();
                if st.exc.is_none() && text::is_exception(msg) {
                    st.exc = Some(c.clone());
                    if text::is_bare_exception(clean) {
                        st.bare = Some(c.clone());
                    }
                } else if st.bare.is_none() && text::is_bare_exception(clean) {
                    st.bare = Some(c.clone());
                }
                if st.first.is_none() {
                    st.first = Some(c.clone());
                }
                st.last = Some(c);
            }
        }
        for (i, sig) in cat.signatures.iter().enumerate() {
            if let Some(a) = &sig.after {
                if !self.sigs[i].after_seen && a.is_match(clean) {
                    self.sigs[i].after_seen = true;
                }
            }
        }

        if !echo {
            let is_exc = text::is_exception(msg);
            let tb = !is_exc && msg.starts_with("Traceback (most recent call last)");
            if tb || is_exc {
                let noise = is_exc && cat.is_noise(clean);
                self.telling
                    .observe(tb, is_exc, noise, || text::evidence(line));
            }
            // Fallback evidence: only the first of each is kept, so the noise check runs
            // only while one is still missing.
            let exc = self.first_exception.is_none() && is_exc;
            let err = self.first_error.is_none() && text::is_error_level(clean);
            if (exc || err) && !cat.is_noise(clean) {
                if exc {
                    self.first_exception = Some(cand());
                }
                if err {
                    self.first_error = Some(cand());
                }
            }
        }
        if cat.startup_complete.iter().any(|r| r.is_match(clean)) {
            self.startup_complete = Some(cand());
            self.last_progress = Some(line_no);
        }
        let server = self.file_mode || stream == Stream::Server;
        let progress = server && cat.graph_progress.iter().any(|r| r.is_match(clean));
        let done = server && cat.graph_done.iter().any(|r| r.is_match(clean));
        if progress || done {
            self.last_progress = Some(line_no);
        }
        let at = at.or_else(|| line_time(clean));
        self.capture.observe(progress, done, at, cand);
        if server {
            if self.recent_server.len() == RECENT_SERVER {
                self.recent_server.pop_front();
            }
            self.recent_server.push_back(Recent {
                progress,
                done,
                cand: cand(),
            });
        }
        match &mut self.last_line {
            Some(l) => {
                l.raw.clear();
                l.raw.push_str(&text::evidence(line));
                l.line_no = line_no;
                l.stream = stream;
            }
            None => self.last_line = Some(cand()),
        }
    }

    /// File mode: the stream of each line is guessed from its shape.
    pub(crate) fn feed_guessed(&mut self, line: &str) {
        let s = guess_stream(&text::clean(line));
        self.feed(s, line);
    }

    fn pick(&self, i: usize) -> Option<&Cand> {
        let st = &self.sigs[i];
        match self.catalog.signatures[i].evidence {
            EvidencePick::Root => st.bare.as_ref().or(st.exc.as_ref()).or(st.first.as_ref()),
            EvidencePick::First => st.first.as_ref(),
            EvidencePick::Last => st.last.as_ref(),
        }
    }

    /// The best matching signature: highest priority, then earliest line.
    fn best(&self, symptom: bool, only: Option<Category>) -> Option<(usize, &Cand)> {
        self.best_after(symptom, only, None, false)
    }

    /// [`Self::best`] counting only lines after line `after`, and with `no_nccl` none of
    /// NCCL's. For a start that ran out of time: what came before its last sign of
    /// progress did not stop it, and when it hung in CUDA-graph capture, NCCL's watchdog
    /// and abort complaints are what tearing down the hung process group prints.
    fn best_after(
        &self,
        symptom: bool,
        only: Option<Category>,
        after: Option<u64>,
        no_nccl: bool,
    ) -> Option<(usize, &Cand)> {
        let mut best: Option<(usize, &Cand)> = None;
        for (i, sig) in self.catalog.signatures.iter().enumerate() {
            if sig.symptom != symptom || only.is_some_and(|c| c != sig.category) {
                continue;
            }
            if no_nccl && sig.category == Category::NcclError {
                continue;
            }
            let picked = match after {
                None => self.pick(i),
                Some(n) => self
                    .pick(i)
                    .filter(|c| c.line_no > n)
                    .or_else(|| self.sigs[i].last.as_ref().filter(|c| c.line_no > n)),
            };
            let Some(c) = picked else { continue };
            let better = match best {
                None => true,
                Some((j, bc)) => {
                    let bp = self.catalog.signatures[j].priority;
                    sig.priority > bp || (sig.priority == bp && c.line_no < bc.line_no)
                }
            };
            if better {
                best = Some((i, c));
            }
        }
        best
    }

    fn diag_sig(&self, i: usize, c: &Cand) -> Diagnosis {
        let sig = &self.catalog.signatures[i];
        let confidence = if let Some(c) = sig.confidence {
            c
        } else if sig.symptom {
            confidence::SYMPTOM
        } else if sig.category == Category::Other {
            confidence::NAMED_FAULT
        } else {
            confidence::SIGNATURE
        };
        Diagnosis {
            recipe: sig.recipe.clone(),
            ..self.diag_line(sig.category, c, confidence)
        }
    }

    fn diag_line(&self, category: Category, c: &Cand, confidence: f32) -> Diagnosis {
        Diagnosis {
            category,
            evidence: c.raw.clone(),
            stream: Some(c.stream),
            line_no: Some(c.line_no),
            recipe: None,
            predicted: false,
            confidence,
            telling: Vec::new(),
        }
    }

    fn fact(category: Category, evidence: String) -> Diagnosis {
        // A fact with no words (an empty runtime message) still says what was decided.
        let evidence = if evidence.trim().is_empty() {
            format!("{category} (the runtime gave no details)")
        } else {
            evidence
        };
        Diagnosis {
            category,
            evidence,
            stream: None,
            line_no: None,
            recipe: None,
            predicted: false,
            confidence: confidence::FACT,
            telling: Vec::new(),
        }
    }

    /// `other` shows the lines that tell most about it.
    fn with_telling(&self, mut d: Diagnosis) -> Diagnosis {
        if d.category == Category::Other {
            let first_error = self.first_error.as_ref().map(|c| c.raw.as_str());
            d.telling = self.telling.lines(first_error, &d.evidence);
        }
        d
    }

    /// Combines the lines seen with the attempt's facts. `None` when the attempt did not
    /// fail: the context shows a usable result, or neither the facts nor the lines show
    /// anything wrong.
    pub fn conclude(&self, ctx: &FailureContext) -> Option<Diagnosis> {
        if ctx.succeeded() {
            return None;
        }
        self.decide(ctx, ctx.shows_failure())
            .map(|d| super::patch_blame::blame(d, &ctx.patched_files, &self.frames))
            .map(|d| self.with_telling(d))
    }

    pub(crate) fn conclude_file(&self) -> Diagnosis {
        let d = self
            .decide(&FailureContext::default(), true)
            .unwrap_or_else(|| Self::fact(Category::Other, "no output".into()));
        self.with_telling(d)
    }

    fn decide(&self, ctx: &FailureContext, failed: bool) -> Option<Diagnosis> {
        // 1. Facts that settle it whatever the log says.
        if ctx.patch_failed {
            return Some(self.category_or_fact(
                Category::AgentPatchFailed,
                "the agent's patch did not apply to the baseline image; not benchmarked as agent".into(),
            ));
        }
        if let Some(why) = &ctx.bench_invalid {
            return Some(Self::fact(Category::BenchCommandInvalid, why.clone()));
        }
        if let Some(why) = &ctx.needs_build {
            return Some(Self::fact(Category::NeedsBuild, why.clone()));
        }
        // A registry that turned the pull away (credentials, rate limit) is not a missing
        // image, whatever the runtime concluded from Docker's wording.
        if ctx.image_missing || ctx.pull_error.is_some() {
            if let Some(d) = self.registry_refusal(ctx.pull_error.as_deref()) {
                return Some(d);
            }
        }
        if ctx.image_missing {
            let fact = ctx
                .pull_error
                .clone()
                .unwrap_or_else(|| "image not found".into());
            return Some(self.category_or_fact(Category::ImageNotFound, fact));
        }
        if ctx.disk_full {
            let fact = ctx.pull_error.clone().unwrap_or_else(|| "disk full".into());
            return Some(self.category_or_fact(Category::DiskFull, fact));
        }
        if let Some(pe) = &ctx.pull_error {
            let mut sub = Scanner::new(Arc::clone(&self.catalog));
            for l in pe.lines() {
                sub.feed(Stream::Pull, l);
            }
            if let Some((i, c)) = sub.best(false, None) {
                return Some(sub.diag_sig(i, c));
            }
        }

        // 2. A root cause in the log. When nightshift's start-up timeout fired, only what
        // came after the start's last sign of progress, and if that was capture, no NCCL
        // line (see `best_after`); else the timeout decides (3).
        let (after, no_nccl) = if ctx.start_timed_out() {
            (self.last_progress, self.capture_unfinished().is_some())
        } else {
            (None, false)
        };
        if let Some((i, c)) = self.best_after(false, None, after, no_nccl) {
            let mut d = self.diag_sig(i, c);
            if d.category == Category::VersionPortBug
                && ctx.vllm_version.as_deref().and_then(port_bug_affected) == Some(false)
            {
                // Outside #8791's range the port really is taken by something else.
                d.category = Category::Other;
                d.recipe = None;
            }
            return Some(d);
        }

        // A capture that stopped making progress, whatever ended the attempt after it.
        if self.capture.state() == CaptureState::Stalled {
            if let Some(c) = self.capture.last() {
                return Some(self.diag_line(
                    Category::CudaGraphCaptureTimeout,
                    c,
                    confidence::TIMING,
                ));
            }
        }

        // 3. Which stage ran out of time.
        if ctx.timed_out {
            return Some(self.timeout(ctx));
        }

        // 4. Generic symptoms, unless an earlier exception explains them.
        if let Some((i, c)) = self.best(true, None) {
            // A harness gave up on a server that was still capturing graphs.
            if self.catalog.signatures[i].category == Category::ServerStartTimeout {
                if let Some(cap) = self.capture_hang() {
                    return Some(self.diag_line(
                        Category::CudaGraphCaptureTimeout,
                        cap,
                        confidence::TIMING,
                    ));
                }
            }
            if let Some(e) = &self.first_exception {
                if e.line_no < c.line_no {
                    return Some(self.diag_line(Category::Other, e, confidence::EXCEPTION));
                }
            }
            return Some(self.diag_sig(i, c));
        }

        // 5. The benchmark ran but measured nothing, or nothing that is a measurement.
        if let Some(why) = &ctx.invalid_result {
            return Some(Self::fact(Category::NoMetrics, why.clone()));
        }
        if ctx.no_metrics() {
            let ev = match ctx.successful_requests {
                Some(n) if ctx.has_result && n <= 0.0 => {
                    "benchmark finished with 0 successful requests".to_string()
                }
                _ => "benchmark finished without a result block".to_string(),
            };
            return Some(Self::fact(Category::NoMetrics, ev));
        }

        // 6. Something failed, but nothing we know: the most error-like line.
        if !failed && self.first_exception.is_none() {
            return None;
        }
        let guess = |d: Diagnosis| Diagnosis {
            confidence: confidence::GUESS,
            ..d
        };
        if let Some(pe) = &ctx.pull_error {
            return Some(guess(Self::fact(Category::Other, pe.clone())));
        }
        if let Some(e) = &self.first_exception {
            return Some(self.diag_line(Category::Other, e, confidence::EXCEPTION));
        }
        if let Some(e) = &self.first_error {
            return Some(self.diag_line(Category::Other, e, confidence::GUESS));
        }
        if let Some(ex) = ctx.exit_description() {
            return Some(guess(Self::fact(Category::Other, ex)));
        }
        Some(match &self.last_line {
            Some(l) => self.diag_line(Category::Other, l, confidence::GUESS),
            None => guess(Self::fact(Category::Other, "no output".into())),
        })
    }

    /// A `registry_rate_limited` or `registry_auth` line in the pull error, else in the
    /// attempt's own lines (the pull stream).
    fn registry_refusal(&self, pull_error: Option<&str>) -> Option<Diagnosis> {
        const REFUSALS: [Category; 2] = [Category::RegistryRateLimited, Category::RegistryAuth];
        if let Some(pe) = pull_error {
            let mut sub = Scanner::new(Arc::clone(&self.catalog));
            for l in pe.lines() {
                sub.feed(Stream::Pull, l);
            }
            for c in REFUSALS {
                if let Some((i, cand)) = sub.best(false, Some(c)) {
                    return Some(sub.diag_sig(i, cand));
                }
            }
        }
        REFUSALS.into_iter().find_map(|c| {
            self.best(false, Some(c))
                .map(|(i, cand)| self.diag_sig(i, cand))
        })
    }

    /// The matching signature's line for a category the facts already decided, else the
    /// fact itself.
    fn category_or_fact(&self, cat: Category, fact: String) -> Diagnosis {
        match self
            .best(false, Some(cat))
            .or_else(|| self.best(true, Some(cat)))
        {
            Some((i, c)) => {
                let mut d = self.diag_sig(i, c);
                d.category = cat;
                d
            }
            None => Self::fact(cat, fact),
        }
    }

    /// The last capture line when capture was still going at the end: stalled by its own
    /// pace, or the last thing the server printed.
    fn capture_hang(&self) -> Option<&Cand> {
        if self.capture.state() == CaptureState::Stalled {
            return self.capture.last();
        }
        let mut capture: Option<&Cand> = None;
        for r in &self.recent_server {
            if r.progress {
                capture = Some(&r.cand);
            } else if r.done {
                capture = None;
            }
        }
        capture
    }

    /// The last capture line when capture had begun and neither finished nor was followed
    /// by the server's startup-complete line, however many lines came after it.
    fn capture_unfinished(&self) -> Option<&Cand> {
        let last = self.capture.last()?;
        match &self.startup_complete {
            Some(s) if s.line_no > last.line_no => None,
            _ => Some(last),
        }
    }

    fn timeout(&self, ctx: &FailureContext) -> Diagnosis {
        match ctx.stage {
            Some(Stage::Benchmarking) | Some(Stage::Parsing) => {
                let mut d = Self::fact(
                    Category::BenchTimeout,
                    "benchmark did not finish within its time limit".into(),
                );
                d.confidence = confidence::TIMING;
                if let Some(l) = &self.last_line {
                    d.evidence = format!("{}; last line: {}", d.evidence, l.raw);
                    d.line_no = Some(l.line_no);
                    d.stream = Some(l.stream);
                }
                d
            }
            Some(Stage::PreparingImage) => Self::fact(
                Category::Other,
                ctx.pull_error
                    .clone()
                    .unwrap_or_else(|| "image preparation (pull/fix) timed out".into()),
            ),
            _ => {
                // Still capturing CUDA graphs when time ran out, whatever was printed after
                // the last capture line (the teardown's own lines, a warning)?
                if let Some(c) = self.capture_unfinished() {
                    return self.diag_line(
                        Category::CudaGraphCaptureTimeout,
                        c,
                        confidence::TIMING,
                    );
                }
                // Said it was ready but never answered: the quiet form of #8791.
                if ctx.serving
                    && ctx.vllm_version.as_deref().and_then(port_bug_affected) == Some(true)
                {
                    if let Some(c) = &self.startup_complete {
                        let mut d =
                            self.diag_line(Category::VersionPortBug, c, confidence::SYMPTOM);
                        d.recipe = Some(super::predict::PORT_BUG_RECIPE.into());
                        return d;
                    }
                }
                let mut d = Self::fact(
                    Category::ServerStartTimeout,
                    "server did not become healthy within the start timeout".into(),
                );
                d.confidence = confidence::TIMING;
                if let Some(l) = self.recent_server.back() {
                    d.evidence = format!("{}; last server line: {}", d.evidence, l.cand.raw);
                    d.line_no = Some(l.cand.line_no);
                    d.stream = Some(l.cand.stream);
                }
                d
            }
        }
    }
}

/// File mode's guess of where a line came from.
fn guess_stream(clean: &str) -> Stream {
    let s = text::strip_decoration(clean);
    const PULL: [&str; 9] = [
        "Pulling fs layer",
        "Pulling from ",
        "Pull complete",
        "Downloading",
        "Extracting",
        "Verifying Checksum",
        "Digest: sha256:",
        "Status: Downloaded",
        "manifest unknown",
    ];
    const DOCKER: [&str; 7] = [
        "Error response from daemon",
        "docker: ",
        "nvidia-container-cli",
        "patch failed",
        "does not apply",
        "Hunk #",
        "Unable to find image",
    ];
    const BENCH: [&str; 6] = [
        "Serving Benchmark Result",
        "Successful requests:",
        "benchmark_serving",
        "Traffic request rate",
        "Throughput: ",
        "Avg latency:",
    ];
    if PULL.iter().any(|p| s.contains(p)) || s.starts_with("pull access denied") {
        Stream::Pull
    } else if DOCKER.iter().any(|p| s.contains(p)) {
        Stream::Docker
    } else if BENCH.iter().any(|p| s.contains(p)) {
        Stream::Bench
    } else {
        Stream::Server
    }
}

#[cfg(test)]
#[path = "scanner_tests.rs"]
mod tests;
