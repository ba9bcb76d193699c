//! `nightshift diagnose FILE... [--json]` (design.md §3).

use crate::diagnose::{diagnose_reader, text, Catalog, Diagnosis, RecipeBook};
use crate::policy::{Policy, PolicyConfig};
use serde::Serialize;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Serialize)]
struct JsonLine<'a> {
    file: String,
    category: &'a str,
    evidence: &'a str,
    action: &'a str,
    recipe: Option<&'a str>,
    confidence: f32,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    telling: &'a [String],
}

/// Exit 0 when every file got a diagnosis, 2 when a file could not be read (the other
/// files are still diagnosed).
pub fn main(files: &[PathBuf], json: bool, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let catalog = Catalog::builtin();
    let recipes = Arc::new(RecipeBook::builtin());
    let policy = Policy::new(PolicyConfig::default(), Arc::clone(&recipes));
    let mut status = 0;
    if files.is_empty() {
        let _ = writeln!(err, "nightshift diagnose: no files given");
        return 2;
    }
    for f in files {
        // Streamed: a log of any size is diagnosed in bounded memory.
        let read = crate::cli::input::open_log(f)
            .map_err(|e| e.reason())
            .and_then(|mut r| diagnose_reader(&catalog, &mut r).map_err(|e| e.to_string()));
        let d = match read {
            Ok(d) => d,
            Err(e) => {
                let _ = writeln!(err, "nightshift diagnose: {}: {e}", f.display());
                status = 2;
                continue;
            }
        };
        let action = policy.default_action(d.category);
        let recipe = d
            .recipe
            .clone()
            .or_else(|| recipes.for_category(d.category).map(|r| r.name.clone()));
        let res = if json {
            let line = JsonLine {
                file: f.display().to_string(),
                category: d.category.as_str(),
                evidence: &d.evidence,
                action: action.as_str(),
                recipe: recipe.as_deref(),
                confidence: d.confidence,
                telling: &d.telling,
            };
            serde_json::to_string(&line)
                .map_err(std::io::Error::other)
                .and_then(|s| writeln!(out, "{s}"))
        } else {
            human(out, f, &d, action.as_str(), recipe.as_deref(), &recipes)
        };
        if res.is_err() {
            return 2;
        }
    }
    status
}

/// A log line for the terminal: no ANSI colours, other controls shown escaped (as
/// [`crate::sanitize::log_line`] shows every log line).
fn printable(line: &str) -> String {
    crate::sanitize::terminal(&text::clean(line)).into_owned()
}

fn human(
    out: &mut dyn Write,
    f: &std::path::Path,
    d: &Diagnosis,
    action: &str,
    recipe: Option<&str>,
    recipes: &RecipeBook,
) -> std::io::Result<()> {
    writeln!(out, "{}", f.display())?;
    writeln!(out, "  category: {}", d.category)?;
    let ev = printable(&d.evidence);
    match d.line_no {
        Some(n) => writeln!(out, "  evidence: line {n}: {}", ev.trim())?,
        None => writeln!(out, "  evidence: {}", ev.trim())?,
    }
    for l in &d.telling {
        writeln!(out, "  also:     {}", printable(l))?;
    }
    writeln!(out, "  confidence: {:.0}%", d.confidence * 100.0)?;
    writeln!(out, "  action:   {action}")?;
    match recipe.and_then(|r| recipes.get(r)) {
        Some(r) => {
            let caveat = if r.changes_measurement {
                " (may change what is measured)"
            } else {
                ""
            };
            writeln!(out, "  recipe:   {}{caveat}", r.name)?;
            writeln!(out, "            {}", r.description)?;
        }
        None => writeln!(out, "  recipe:   -")?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wave-2 categories come out of `diagnose --json` from logs in their shapes,
    /// with the policy's action.
    #[test]
    fn json_names_the_new_categories() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            (
                "bench_command_invalid",
                "skip",
                "usage: benchmark_serving.py [-h] [--backend {vllm,openai}]\nbenchmark_serving.py: error: unrecognized arguments: --max-concurrency 8\n",
            ),
            (
                "registry_auth",
                "operator",
                "Error response from daemon: Head \"https://registry.example.com/v2/org/vllm-bench/manifests/abc\": unauthorized: authentication required\n",
            ),
            (
                "registry_rate_limited",
                "retry",
                "Error response from daemon: toomanyrequests: You have reached your pull rate limit.\n",
            ),
            (
                "needs_build",
                "skip",
                "baseline image missing and the commit changes compiled code; building is off (--no-build)\n",
            ),
            (
                "model_not_found",
                "skip",
                "OSError: org/model-xl is not a local folder and is not a valid model identifier listed on 'https://huggingface.co/models'\n",
            ),
            (
                "model_too_large",
                "skip",
                "org/model-xl: model weights (140.0 GiB) are larger than GPU memory × TP (80.0 GiB × 1 = 80.0 GiB): raise --tensor-parallel-size or use GPUs with more memory\n",
            ),
            (
                "hub_offline",
                "retry",
                "huggingface_hub.errors.OfflineModeIsEnabled: Cannot reach https://huggingface.co/api/models/org/tok-x: offline mode is enabled.\n",
            ),
            (
                "server_config_invalid",
                "skip",
                "ValueError: ngram prompt lookup max and min must be provided\n",
            ),
        ];
        for (i, (cat, action, log)) in cases.into_iter().enumerate() {
            let p = dir.path().join(format!("{i}.log"));
            std::fs::write(&p, log).unwrap();
            let (mut out, mut err) = (Vec::new(), Vec::new());
            assert_eq!(main(std::slice::from_ref(&p), true, &mut out, &mut err), 0);
            let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
            assert_eq!(v["category"], cat, "{log}");
            assert_eq!(v["action"], action, "{log}");
            assert!(log.lines().any(|l| l == v["evidence"]), "{v}");
        }
    }

    #[test]
    fn json_and_human_output_and_unreadable_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.log");
        std::fs::write(
            &p,
            "Traceback (most recent call last):\nValueError: 'aimv2' is already used by a Transformers config, pick another name.\n",
        )
        .unwrap();
        let mut out = Vec::new();
        let mut err = Vec::new();
        assert_eq!(main(std::slice::from_ref(&p), true, &mut out, &mut err), 0);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["category"], "aimv2_conflict");
        assert_eq!(v["action"], "auto_fix");
        assert_eq!(v["recipe"], "aimv2-exist-ok");
        assert!(v["evidence"]
            .as_str()
            .unwrap()
            .contains("'aimv2' is already used"));
        assert_eq!(v["file"], p.display().to_string());

        let mut out = Vec::new();
        assert_eq!(main(std::slice::from_ref(&p), false, &mut out, &mut err), 0);
        let s = String::from_utf8(out).unwrap();
        assert!(
            s.contains("category: aimv2_conflict") && s.contains("recipe:   aimv2-exist-ok"),
            "{s}"
        );

        let mut out = Vec::new();
        let missing = dir.path().join("nope.log");
        assert_eq!(main(&[missing, p], true, &mut out, &mut err), 2);
        assert_eq!(String::from_utf8(out).unwrap().lines().count(), 1);
        assert!(String::from_utf8(err).unwrap().contains("nope.log"));
    }
}
