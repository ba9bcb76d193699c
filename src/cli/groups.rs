//! The command line's side of failure groups: `results --group ID [--skip|--retry|--fix
//! RECIPE]` (list one group; decide for all its runs in a live sweep) and `diagnose
//! --learn ID --category NAME` (promote a group to a named signature in the operator's
//! catalog).

use crate::category::Category;
use crate::event::Command;
use crate::report::groups::{self, FailureGroup};
use crate::sanitize::terminal;
use std::path::{Path, PathBuf};

/// `results`' failure-group options.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct GroupArgs {
    /// One failure group (unknown failures of one kind; its id or 4+ of its first digits,
    /// as the table's "failure groups" lists them): its runs.
    #[arg(long, value_name = "ID")]
    pub group: Option<String>,
    /// With --group: skip every held, failed or queued run of the group (a live sweep).
    #[arg(long, requires = "group", conflicts_with_all = ["retry", "fix"])]
    pub skip: bool,
    /// With --group: retry every held or failed run of the group (a live sweep).
    #[arg(long, requires = "group", conflicts_with = "fix")]
    pub retry: bool,
    /// With --group: apply this fix recipe to every run of the group and retry it.
    #[arg(long, value_name = "RECIPE", requires = "group")]
    pub fix: Option<String>,
}

/// `diagnose --learn`'s options.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct LearnArgs {
    /// Promote a failure group (its id or 4+ of its first digits) to a named signature in
    /// the operator's catalog.
    #[arg(long, value_name = "GROUP")]
    pub learn: Option<String>,
    /// With --learn: the category the new signature gives (a stable category name).
    #[arg(long, value_name = "NAME", requires = "learn")]
    pub category: Option<String>,
    /// With --learn: the sweep's store the group is in (default: the only sweep).
    #[arg(long, requires = "learn")]
    pub store: Option<PathBuf>,
    /// With --learn: the catalog file to add it to (default: catalog.toml in the config
    /// folder, which every sweep loads and checks at its start).
    #[arg(long, value_name = "PATH", requires = "learn")]
    pub catalog: Option<PathBuf>,
}

/// `results --group ID [--skip|--retry|--fix RECIPE]`.
pub(crate) fn results_group(store: Option<PathBuf>, a: &GroupArgs) -> i32 {
    let Some(id) = a.group.as_deref() else {
        return 2;
    };
    let dir = match crate::daemon::commands::find_dir(store) {
        Ok(d) => d,
        Err(c) => return c,
    };
    let want = crate::daemon::protocol::Want::Group { id: id.to_string() };
    let text = match crate::daemon::client::query_text(&dir, want) {
        Some(r) => r,
        None => match crate::daemon::commands::find_store(Some(dir.clone())) {
            Ok(s) => crate::daemon::commands::group_for(&s, id),
            Err(c) => return c,
        },
    };
    let text = match text {
        Ok(t) => t,
        Err(e) => return crate::daemon::commands::answer(Err(e)),
    };
    // The id as given names one group (an ambiguous prefix was refused above).
    let full = id.trim().to_ascii_lowercase();
    let decision = if a.skip {
        Some(Command::SkipGroup { kind: full.clone() })
    } else if a.retry {
        Some(Command::RetryGroup { kind: full.clone() })
    } else {
        a.fix.as_ref().map(|r| Command::FixGroup {
            kind: full.clone(),
            recipe: r.clone(),
        })
    };
    let code = crate::daemon::commands::answer(Ok(text));
    let Some(cmd) = decision else {
        return code;
    };
    if let Command::FixGroup { recipe, .. } = &cmd {
        match crate::overrides::Overrides::load(crate::tui::config::config_dir().as_deref()) {
            Ok(o) if o.recipes.get(recipe).is_none() => {
                tracing::error!("--fix {recipe}: no such recipe");
                return 2;
            }
            Err(e) => {
                tracing::error!("{e}");
                return 2;
            }
            Ok(_) => {}
        }
    }
    let what = cmd.describe();
    match crate::daemon::client::send_command(&dir, cmd) {
        Ok(()) => {
            println!("nightshift: sent to the sweep: {what}");
            0
        }
        Err(e) => {
            tracing::error!(
                "{e} — a group's decision goes to a live sweep; for a finished night, `nightshift run PLAN --retry-failed other` runs its unknown failures again"
            );
            1
        }
    }
}

/// The `[[signature]]` entry a group becomes. Its comment quotes the group's first line and
/// models (log and plan text) with their controls escaped: a TOML comment may not hold
/// them, and the entry is printed to the terminal too.
pub(crate) fn signature_entry(g: &FailureGroup, category: Category, today: &str) -> String {
    let q = |s: &str| toml::Value::String(s.to_string()).to_string();
    let models: Vec<String> = g.models.iter().map(|s| terminal(s).into_owned()).collect();
    let first: String = g.first_line.chars().take(300).collect();
    let first = terminal(&first);
    let mut o = String::new();
    o.push_str(&format!(
        "\n# Learned {today} from failure group {} ({} run{}{}):\n#   {}\n",
        g.id,
        g.count,
        if g.count == 1 { "" } else { "s" },
        if models.is_empty() {
            String::new()
        } else {
            format!(", {}", models.join(", "))
        },
        first
    ));
    o.push_str("[[signature]]\n");
    o.push_str(&format!("name = {}\n", q(&format!("learned-{}", g.id))));
    o.push_str(&format!("category = {}\n", q(category.as_str())));
    o.push_str("priority = 100\n");
    o.push_str(&format!(
        "regex = [{}]\n",
        q(&crate::failure_kind::to_regex(&g.text))
    ));
    o.push_str(&format!(
        "description = {}\n",
        q(&format!("learned from failure group {}: {}", g.id, g.text))
    ));
    o
}

/// `YYYY-MM-DD` (UTC) of a time in ms since the epoch.
fn date_of(ms: u64) -> String {
    // Days to a civil date (H. Hinnant's algorithm).
    let z = (ms / 86_400_000) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// `diagnose --learn GROUP --category NAME [--store DIR] [--catalog PATH]`.
pub fn learn(a: &LearnArgs) -> i32 {
    let Some(id) = a.learn.as_deref() else {
        return 2;
    };
    let category: Category = match a.category.as_deref().map(str::parse) {
        Some(Ok(c)) => c,
        Some(Err(e)) => {
            tracing::error!("--category: {e}");
            return 2;
        }
        None => {
            tracing::error!("--learn needs --category NAME: the category the signature gives");
            return 2;
        }
    };
    let default_catalog = crate::tui::config::config_dir().map(|d| d.join("catalog.toml"));
    let Some(path) = a.catalog.clone().or(default_catalog.clone()) else {
        tracing::error!("no config folder (XDG_CONFIG_HOME or HOME): pass --catalog PATH");
        return 2;
    };
    let store = match crate::daemon::commands::find_store(a.store.clone()) {
        Ok(s) => s,
        Err(c) => return c,
    };
    let all = crate::daemon::results::groups_of(&store);
    let g = match groups::find(&all, id) {
        Ok(g) => g.clone(),
        Err(e) => {
            tracing::error!("{e}");
            return 2;
        }
    };
    // Every line the group was made from must be matched by what is written.
    let lines: Vec<String> = store
        .runs()
        .values()
        .filter(|s| g.runs.contains(&s.key))
        .filter_map(|s| s.record.finding.as_ref())
        .map(|f| {
            crate::failure_kind::telling_line(&f.evidence, &f.telling)
                .trim()
                .to_string()
        })
        .collect();
    drop(store);
    match write_learned(&path, &g, category, &lines) {
        Ok(entry) => {
            // The regex keeps the line's characters (a C1 control is valid in a TOML
            // string); the terminal is shown them escaped.
            print!("{}", crate::sanitize::text(&entry));
            println!(
                "\nnightshift: failure group {} ({} runs) is now signature learned-{} ({category}) in {}",
                g.id,
                g.count,
                g.id,
                path.display()
            );
            if Some(&path) != default_catalog.as_ref() {
                println!("nightshift: a sweep loads the config folder's catalog.toml; this file is checked as an override file wherever you put it there");
            } else {
                println!("nightshift: the next sweep loads and checks it like any other signature");
            }
            0
        }
        Err((code, e)) => {
            tracing::error!("{e}");
            code
        }
    }
}

/// Append the group's signature to the catalog at `path` once it is known to load with
/// the built-ins and to match every line in `lines`.
pub(crate) fn write_learned(
    path: &Path,
    g: &FailureGroup,
    category: Category,
    lines: &[String],
) -> Result<String, (i32, String)> {
    let existing = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err((2, format!("{}: {e}", path.display()))),
    };
    let name = format!("learned-{}", g.id);
    if existing.contains(&format!("name = \"{name}\"")) {
        return Err((
            2,
            format!(
                "{} already has signature {name}; edit or remove it there",
                path.display()
            ),
        ));
    }
    let re = regex::Regex::new(&crate::failure_kind::to_regex(&g.text))
        .map_err(|e| (1, format!("the group's regex does not compile: {e}")))?;
    let ansi = regex::Regex::new(r"\x1b\[[0-9;?]*[A-Za-z]").expect("ansi regex");
    if let Some(l) = lines
        .iter()
        .find(|l| !re.is_match(&ansi.replace_all(l, "").replace('\r', "")))
    {
        return Err((
            1,
            format!(
                "the learned regex `{}` does not match a line of the group: {}",
                terminal(re.as_str()),
                terminal(l)
            ),
        ));
    }
    let today = date_of(crate::event::now_ms());
    let entry = signature_entry(g, category, &today);
    let mut text = existing.clone();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&entry);
    // Checked as a sweep's start will check it: with the built-ins under it.
    crate::diagnose::Catalog::builtin()
        .with_overrides(&text, &path.display().to_string())
        .map_err(|e| (1, format!("the catalog would not load: {e}")))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| (2, format!("{}: {e}", dir.display())))?;
    }
    let tmp = path.with_extension("toml.tmp");
    std::fs::write(&tmp, &text)
        .and_then(|_| std::fs::rename(&tmp, path))
        .map_err(|e| (2, format!("{}: {e}", path.display())))?;
    Ok(entry)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::category::Action;
    use crate::event::Finding;
    use crate::model::{Outcome, RunState};
    use crate::report::groups::Member;

    #[test]
    fn dates() {
        assert_eq!(date_of(0), "1970-01-01");
        assert_eq!(date_of(1_709_164_800_000), "2024-02-29");
    }

    #[test]
    fn a_learned_group_is_a_signature_the_catalog_loads_and_matches() {
        let lines = [
            "RuntimeError: NCCL-free shard 3 of /models/a/7f3a2c001e40 refused: 'x' at 10.0.0.1:29500",
            "RuntimeError: NCCL-free shard 12 of /models/b/0c9d2e11aa55 refused: 'x' at 10.0.0.2:29501",
        ];
        let failed = RunState::Finished {
            outcome: Outcome::Failed {
                category: Category::Other,
            },
        };
        let findings: Vec<Finding> = lines
            .iter()
            .map(|l| Finding {
                category: Category::Other,
                evidence: l.to_string(),
                action: Action::Skip,
                recipe: None,
                reason: String::new(),
                predicted: false,
                confidence: Some(0.3),
                telling: vec![],
                kind: None,
            })
            .collect();
        let keys = ["a/human", "b/human"];
        let gs = groups::group((0..2).map(|i| Member {
            key: keys[i],
            model: Some("m/x"),
            vllm_version: None,
            state: &failed,
            finding: Some(&findings[i]),
            attempt: 2,
        }));
        assert_eq!(gs.len(), 1);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nightshift").join("catalog.toml");
        let owned: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
        let entry = write_learned(&path, &gs[0], Category::CudaOom, &owned).unwrap();
        assert!(entry.contains("category = \"cuda_oom\""), "{entry}");
        // Loaded and checked as a sweep's start does, and it now names the failure.
        let o = crate::overrides::Overrides::load(Some(path.parent().unwrap())).unwrap();
        let d = crate::diagnose::diagnose_text(&o.catalog, lines[1].as_bytes());
        assert_eq!(d.category, Category::CudaOom, "{d:?}");
        // Once only.
        let again = write_learned(&path, &gs[0], Category::CudaOom, &owned).unwrap_err();
        assert!(again.1.contains("already has signature"), "{again:?}");
    }

    /// A group whose line (from a log) and model (from the plan) hold control characters:
    /// the entry written and printed shows them escaped, and the catalog still loads (a
    /// TOML comment may not hold them).
    #[test]
    fn a_learned_group_of_hostile_text_is_written_inert() {
        use crate::sanitize::{assert_inert, HOSTILE};
        let line = format!("RuntimeError: shard 3 refused {HOSTILE}");
        let failed = RunState::Finished {
            outcome: Outcome::Failed {
                category: Category::Other,
            },
        };
        let f = Finding {
            category: Category::Other,
            evidence: line.clone(),
            action: Action::Skip,
            recipe: None,
            reason: String::new(),
            predicted: false,
            confidence: Some(0.3),
            telling: vec![],
            kind: None,
        };
        let gs = groups::group([Member {
            key: "a/human",
            model: Some(HOSTILE),
            vllm_version: None,
            state: &failed,
            finding: Some(&f),
            attempt: 1,
        }]);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("catalog.toml");
        let entry = write_learned(&path, &gs[0], Category::CudaOom, &[line]).unwrap();
        let comment: String = entry
            .lines()
            .filter(|l| l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n");
        assert_inert(&comment, "\\x1b[2J\\x07evil\\x0d\\x0a\\x9b31m");
        assert_inert(&crate::sanitize::text(&entry), "refused");
        crate::overrides::Overrides::load(Some(dir.path())).unwrap();
    }
}
