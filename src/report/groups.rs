//! Failure groups: runs that failed with the same unknown error (one
//! [`crate::failure_kind::FailureKind`]) are one group, so the operator reads one line and
//! decides once (skip, retry or fix every run of it) instead of once per run. Pure: the
//! runs' states and findings in, groups out; rendered for `results` (table and Markdown),
//! `results --group`, the digest, `show` and the TUI.

use crate::event::Finding;
use crate::failure_kind::{self, FailureKind};
use crate::model::{Outcome, RunState};
use crate::sanitize::{log_line, md_cell, terminal};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// One run as grouping reads it.
#[derive(Debug, Clone, Copy)]
pub struct Member<'a> {
    pub key: &'a str,
    pub model: Option<&'a str>,
    pub vllm_version: Option<&'a str>,
    pub state: &'a RunState,
    /// The run's last finding (its failure).
    pub finding: Option<&'a Finding>,
    pub attempt: u32,
}

impl<'a> Member<'a> {
    /// A run of the store (its summary).
    pub(crate) fn of_summary(s: &'a crate::record::RunSummary) -> Member<'a> {
        Member::of_record(&s.key, s.info.model.as_deref(), &s.record)
    }

    /// A run's folded record, with its key and model.
    pub(crate) fn of_record(
        key: &'a str,
        model: Option<&'a str>,
        r: &'a crate::state::RunRecord,
    ) -> Member<'a> {
        Member {
            key,
            model,
            vllm_version: r.vllm_version.as_deref(),
            state: &r.state,
            finding: r.finding.as_ref(),
            attempt: r.attempt,
        }
    }

    /// The kind id of this run's failure, if it ended failing (or waits, held) with an
    /// error no signature names.
    pub fn unknown_kind(&self) -> Option<String> {
        self.is_unknown_failure()
            .then(|| self.finding.map(failure_kind::kind_id_of))
            .flatten()
    }

    /// Whether this run ended failing (or waits, held) with an error no signature names.
    pub(crate) fn is_unknown_failure(&self) -> bool {
        let failed = matches!(
            self.state,
            RunState::Held { .. }
                | RunState::Finished {
                    outcome: Outcome::Failed { .. }
                }
        );
        failed && self.finding.is_some_and(failure_kind::finding_is_unknown)
    }
}

/// Runs failing with one unknown error.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailureGroup {
    /// The kind's short id (what `--group`, `:skip-group` and `diagnose --learn` take).
    pub id: String,
    /// The telling line as normalised (what every member's line reads as).
    pub text: String,
    /// The first member's telling line as it was written.
    pub first_line: String,
    /// The categories its members were given (`other`, or a low-confidence guess).
    pub categories: BTreeSet<String>,
    /// Runs in the group (failed and held).
    pub count: usize,
    /// Of them, held for the operator.
    pub held: usize,
    pub models: BTreeSet<String>,
    /// The vLLM versions its members ran (as the server printed them), where known.
    pub versions: BTreeSet<String>,
    /// Its runs' keys, in the order given.
    pub runs: Vec<String>,
}

/// The groups of the members' unknown failures, largest first (then by id).
pub fn group<'a>(members: impl IntoIterator<Item = Member<'a>>) -> Vec<FailureGroup> {
    let mut by_id: BTreeMap<String, FailureGroup> = BTreeMap::new();
    for m in members {
        let Some(id) = m.unknown_kind() else {
            continue;
        };
        let f = m.finding.expect("a kind comes from a finding");
        let g = by_id.entry(id).or_insert_with_key(|id| {
            // The kind's text once per group, from its first run's line (the id was worked
            // out when each run was diagnosed).
            let line = failure_kind::telling_line(&f.evidence, &f.telling);
            FailureGroup {
                id: id.clone(),
                text: FailureKind::of_line(line).text,
                first_line: line.trim().to_string(),
                categories: BTreeSet::new(),
                count: 0,
                held: 0,
                models: BTreeSet::new(),
                versions: BTreeSet::new(),
                runs: Vec::new(),
            }
        });
        g.count += 1;
        if matches!(m.state, RunState::Held { .. }) {
            g.held += 1;
        }
        // Most members repeat what their group already holds: no allocation for them.
        let add = |set: &mut BTreeSet<String>, v: &str| {
            if !set.contains(v) {
                set.insert(v.to_string());
            }
        };
        add(&mut g.categories, f.category.as_str());
        if let Some(model) = m.model {
            add(&mut g.models, model);
        }
        if let Some(v) = m.vllm_version {
            add(&mut g.versions, v);
        }
        g.runs.push(m.key.to_string());
    }
    let mut v: Vec<FailureGroup> = by_id.into_values().collect();
    v.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.id.cmp(&b.id)));
    v
}

/// The group named by `id` (a kind id or a prefix of 4+ digits): the one group, or why not.
pub fn find<'g>(groups: &'g [FailureGroup], id: &str) -> Result<&'g FailureGroup, String> {
    let id = id.trim().to_ascii_lowercase();
    if id.len() < 4 {
        return Err(format!(
            "failure group `{id}`: give at least 4 digits of its id"
        ));
    }
    let hits: Vec<&FailureGroup> = groups.iter().filter(|g| g.id.starts_with(&id)).collect();
    match hits.as_slice() {
        [g] => Ok(g),
        [] => Err(format!(
            "no failure group `{id}` ({} group{} in this store: {})",
            groups.len(),
            if groups.len() == 1 { "" } else { "s" },
            if groups.is_empty() {
                "no unknown failures".to_string()
            } else {
                groups
                    .iter()
                    .take(8)
                    .map(|g| g.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        )),
        many => Err(format!(
            "failure group `{id}` is ambiguous: {}",
            many.iter()
                .map(|g| g.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// A line without its log prefix (`(Worker pid=3) ERROR 07-21 03:20:18 file.py:233] `),
/// for a narrow column: what follows the prefix is what differs between groups.
pub(crate) fn short_line(line: &str) -> &str {
    match line.rfind("] ") {
        Some(i) if !line[i + 2..].trim().is_empty() => line[i + 2..].trim(),
        _ => line.trim(),
    }
}

/// Up to `most` of a set of plan or log words (models, versions), controls escaped.
fn list(s: &BTreeSet<String>, most: usize) -> String {
    if s.is_empty() {
        return "-".into();
    }
    let mut v: Vec<String> = s.iter().take(most).map(|x| terminal(x).into()).collect();
    let more = s.len().saturating_sub(most);
    if more > 0 {
        v.push(format!("+{more}"));
    }
    v.join(", ")
}

fn shorten(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_string();
    }
    let mut o: String = s.chars().take(n.saturating_sub(1)).collect();
    o.push('…');
    o
}

fn counted(g: &FailureGroup) -> String {
    let runs = if g.count == 1 { "run" } else { "runs" };
    if g.held > 0 {
        format!("{} {runs} ({} held)", g.count, g.held)
    } else {
        format!("{} {runs}", g.count)
    }
}

/// How the operator decides for a group from the command line.
pub const DECIDE_HINT: &str = "one decision per group: `nightshift results --group ID --skip|--retry|--fix RECIPE` (a live sweep), `nightshift diagnose --learn ID --category NAME` names it";

/// The terminal table's section (empty when there are none).
pub fn render_table(groups: &[FailureGroup]) -> String {
    if groups.is_empty() {
        return String::new();
    }
    let mut o = String::new();
    let runs: usize = groups.iter().map(|g| g.count).sum();
    let _ = writeln!(
        o,
        "\nfailure groups: {runs} unknown failures in {} group{} ({DECIDE_HINT})",
        groups.len(),
        if groups.len() == 1 { "" } else { "s" }
    );
    for g in groups {
        let _ = writeln!(
            o,
            "  {}  {:<16} {}",
            g.id,
            counted(g),
            log_line(&shorten(short_line(&g.first_line), 160))
        );
        let _ = writeln!(
            o,
            "  {:12}  models {} · vLLM {} · {}",
            "",
            list(&g.models, 4),
            list(&g.versions, 4),
            list(&g.categories, 3)
        );
    }
    o
}

/// The Markdown section (empty when there are none).
pub fn render_md(groups: &[FailureGroup]) -> String {
    if groups.is_empty() {
        return String::new();
    }
    let cell = |s: &str| md_cell(&log_line(s)).replace('`', "'");
    let mut o = String::from("\n## Failure groups\n\n");
    let _ = writeln!(o, "Unknown failures, one row per kind ({DECIDE_HINT}).\n");
    o.push_str("| group | runs | first line | models | vLLM |\n|---|---|---|---|---|\n");
    for g in groups {
        let _ = writeln!(
            o,
            "| `{}` | {} | `{}` | {} | {} |",
            g.id,
            counted(g),
            cell(&shorten(&g.first_line, 200)),
            cell(&list(&g.models, 6)),
            cell(&list(&g.versions, 6))
        );
    }
    o
}

/// `results --group ID`: the group and each of its runs.
pub(crate) fn render_detail(g: &FailureGroup, members: &[Member<'_>]) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "failure group {} — {}", g.id, counted(g));
    let _ = writeln!(o, "  kind        {}", log_line(&g.text));
    let _ = writeln!(o, "  first line  {}", log_line(&g.first_line));
    let _ = writeln!(o, "  categories  {}", list(&g.categories, 10));
    let _ = writeln!(o, "  models      {}", list(&g.models, 20));
    let _ = writeln!(o, "  vLLM        {}", list(&g.versions, 20));
    let _ = writeln!(o, "  runs:");
    for m in members.iter().filter(|m| g.runs.iter().any(|k| k == m.key)) {
        let line = m
            .finding
            .map(|f| failure_kind::telling_line(&f.evidence, &f.telling).trim())
            .unwrap_or("");
        let _ = writeln!(
            o,
            "    {:<40} {:<24} attempt {}  {}",
            terminal(m.key),
            m.state.label(),
            m.attempt,
            log_line(&shorten(line, 120))
        );
    }
    let _ = writeln!(
        o,
        "decide for all of them: --skip, --retry or --fix RECIPE (with a live sweep); name it: nightshift diagnose --learn {} --category NAME",
        g.id
    );
    o
}

/// The one line `show` prints for a run in a group.
pub(crate) fn show_line(g: &FailureGroup) -> String {
    format!(
        "failure group {} ({} in the group): {}",
        g.id,
        counted(g),
        log_line(&g.text)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::category::{Action, Category};

    fn finding(category: Category, line: &str, confidence: f32) -> Finding {
        Finding {
            category,
            evidence: "ERROR worker died".into(),
            action: Action::Skip,
            recipe: None,
            reason: String::new(),
            predicted: false,
            confidence: Some(confidence),
            telling: vec![line.into()],
            kind: None,
        }
    }

    #[test]
    fn runs_failing_with_one_unknown_error_are_one_group() {
        let failed = RunState::Finished {
            outcome: Outcome::Failed {
                category: Category::Other,
            },
        };
        let held = RunState::Held {
            category: Category::Other,
        };
        let ok = RunState::Finished {
            outcome: Outcome::Success,
        };
        let oom = RunState::Finished {
            outcome: Outcome::Failed {
                category: Category::CudaOom,
            },
        };
        let fs: Vec<(String, Finding, &RunState, &str)> = vec![
            (
                "a/baseline".into(),
                finding(Category::Other, "RuntimeError: shard 3 at /x/1 lost", 0.3),
                &failed,
                "m/one",
            ),
            (
                "b/human".into(),
                finding(Category::Other, "RuntimeError: shard 17 at /y/2 lost", 0.3),
                &held,
                "m/two",
            ),
            (
                "c/human".into(),
                finding(Category::Other, "KeyError: 'w'", 0.3),
                &failed,
                "m/one",
            ),
            // A finding left from an earlier attempt of a run that then succeeded.
            (
                "d/human".into(),
                finding(Category::Other, "KeyError: 'w'", 0.3),
                &ok,
                "m/one",
            ),
            // Named failures are not grouped here.
            (
                "e/human".into(),
                finding(Category::CudaOom, "torch.OutOfMemoryError", 0.9),
                &oom,
                "m/one",
            ),
        ];
        let members: Vec<Member> = fs
            .iter()
            .map(|(k, f, s, m)| Member {
                key: k,
                model: Some(m),
                vllm_version: Some("0.6.3"),
                state: s,
                finding: Some(f),
                attempt: 2,
            })
            .collect();
        let gs = group(members.iter().copied());
        assert_eq!(gs.len(), 2, "{gs:#?}");
        assert_eq!(gs[0].count, 2);
        assert_eq!(gs[0].held, 1);
        assert_eq!(gs[0].first_line, "RuntimeError: shard 3 at /x/1 lost");
        assert_eq!(gs[0].text, "RuntimeError: shard <N> at <PATH> lost");
        assert_eq!(gs[0].runs, ["a/baseline", "b/human"]);
        assert_eq!(gs[0].models.iter().collect::<Vec<_>>(), ["m/one", "m/two"]);
        assert_eq!(gs[1].count, 1);
        assert_eq!(find(&gs, &gs[0].id[..5]).unwrap().id, gs[0].id);
        assert!(find(&gs, "zz").is_err());
        assert!(find(&gs, "ffffffff")
            .unwrap_err()
            .contains("no failure group"));

        let t = render_table(&gs);
        assert!(
            t.contains("failure groups: 3 unknown failures in 2 groups"),
            "{t}"
        );
        assert!(t.contains("2 runs (1 held)"), "{t}");
        let md = render_md(&gs);
        assert!(md.contains("## Failure groups"), "{md}");
        assert!(
            md.contains(&format!("| `{}` | 2 runs (1 held) |", gs[0].id)),
            "{md}"
        );
        let d = render_detail(&gs[0], &members);
        assert!(d.contains("b/human") && !d.contains("c/human"), "{d}");
        assert!(render_table(&[]).is_empty() && render_md(&[]).is_empty());
        assert_eq!(
            short_line("(W pid=3) ERROR 07-21 03:20:18 x.py:233] TypeError: boom"),
            "TypeError: boom"
        );
        assert_eq!(short_line("[a] "), "[a]");
        // The id recorded when a run was diagnosed is the one it is grouped by (no line is
        // normalised again per read); a record without one gets it worked out.
        let mut f = finding(Category::Other, "RuntimeError: shard 9 at /z/9 lost", 0.3);
        f.kind = Some(gs[0].id.clone());
        let stored = [Member {
            key: "z/human",
            model: None,
            vllm_version: None,
            state: &failed,
            finding: Some(&f),
            attempt: 2,
        }];
        let g = group(members.iter().copied().chain(stored));
        assert_eq!(g[0].count, 3);
    }

    /// A group's line (from a log), its models, versions and runs' keys (from the plan),
    /// hostile: the table, the Markdown, `--group`'s detail and `show`'s line show them
    /// escaped, the Markdown row stays one row.
    #[test]
    fn plan_and_log_text_is_inert() {
        use crate::sanitize::{assert_inert, HOSTILE, HOSTILE_SHOWN};
        let failed = RunState::Finished {
            outcome: Outcome::Failed {
                category: Category::Other,
            },
        };
        let f = finding(Category::Other, &format!("KeyError: {HOSTILE}"), 0.3);
        let key = format!("c/{HOSTILE}");
        let m = [Member {
            key: &key,
            model: Some(HOSTILE),
            vllm_version: Some(HOSTILE),
            state: &failed,
            finding: Some(&f),
            attempt: 1,
        }];
        let gs = group(m.iter().copied());
        assert_eq!(gs.len(), 1);
        let all = [
            render_table(&gs),
            render_md(&gs),
            render_detail(&gs[0], &m),
            show_line(&gs[0]),
        ];
        for out in &all {
            assert_inert(out, "KeyError: \\x07evil");
        }
        assert_inert(&all[0], HOSTILE_SHOWN);
        assert_inert(&all[2], HOSTILE_SHOWN);
        let rows: Vec<&str> = all[1].lines().filter(|l| l.starts_with('|')).collect();
        let cells = |l: &str| l.replace("\\|", "").matches('|').count();
        assert_eq!(rows.len(), 3, "{}", all[1]);
        assert!(rows.iter().all(|l| cells(l) == 6), "{}", all[1]);
    }
}
