//! Whether two variants of a commit measured the same thing: the facts each attempt
//! recorded (the benchmark command as executed, model, dataset, prompts, GPUs, driver,
//! tokens generated, failed requests) and the flags a comparison gets when they differ.

use crate::record::{AttemptDoc, RunDoc};
use serde::Serialize;
use std::collections::HashMap;

/// What a comparison depends on, as one attempt ran.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Facts {
    /// The benchmark's own flags as executed (after rewrites), without what legitimately
    /// differs per image or container: interpreter, script location, host and port.
    pub command: Option<String>,
    pub model: Option<String>,
    pub dataset: Option<String>,
    pub num_prompts: Option<String>,
    pub gpu_type: String,
    pub gpu_count: u32,
    pub driver: Option<String>,
}

/// Flags whose values differ per container or image without changing the benchmark.
const PER_CONTAINER: &[&str] = &["--host", "--port", "--base-url"];
const DATASET: &[&str] = &["--dataset-name", "--dataset-path", "--dataset"];
const PROMPTS: &[&str] = &["--num-prompts"];

/// The benchmark's flags: what follows the script (`…/benchmark_serving.py`) or `vllm bench
/// SUB`, minus per-container flags. `(flag, value)` pairs; a bare flag has an empty value.
fn bench_flags(argv: &[String]) -> Vec<(String, String)> {
    let start = argv
        .iter()
        .position(|t| t.ends_with(".py"))
        .map(|i| i + 1)
        .or_else(|| argv.iter().position(|t| t == "bench").map(|i| i + 2))
        // `python3 -c <benchmark module runner> <sub> …` (an image whose CLI cannot start).
        .or_else(|| argv.iter().position(|t| t == "-c").map(|i| i + 3))
        .unwrap_or(0)
        .min(argv.len());
    let mut out = Vec::new();
    let mut i = start;
    while i < argv.len() {
        let t = &argv[i];
        if let Some((f, v)) = t.split_once('=').filter(|_| t.starts_with("--")) {
            out.push((f.to_string(), v.to_string()));
            i += 1;
        } else if t.starts_with('-') {
            let v = argv.get(i + 1).filter(|v| !v.starts_with("--"));
            out.push((t.clone(), v.cloned().unwrap_or_default()));
            i += 1 + usize::from(v.is_some());
        } else {
            out.push((String::new(), t.clone()));
            i += 1;
        }
    }
    out.retain(|(f, _)| !PER_CONTAINER.contains(&f.as_str()));
    out
}

fn value_of(flags: &[(String, String)], names: &[&str]) -> Option<String> {
    flags
        .iter()
        .find(|(f, _)| names.contains(&f.as_str()))
        .map(|(_, v)| v.clone())
}

fn joined(flags: &[(String, String)], without: &[&str]) -> String {
    flags
        .iter()
        .filter(|(f, _)| !without.contains(&f.as_str()))
        .map(|(f, v)| match (f.is_empty(), v.is_empty()) {
            (true, _) => v.clone(),
            (false, true) => f.clone(),
            (false, false) => format!("{f} {v}"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The facts of one attempt of `doc`.
pub fn facts(doc: &RunDoc, a: Option<&AttemptDoc>) -> Facts {
    facts_in(&mut CommandFacts::default(), doc, a)
}

/// What a command's text says, by that text: a night runs few distinct commands, and
/// parsing every cell's argv again was a tenth of `results` at 10,000 runs.
#[derive(Debug, Default)]
pub struct CommandFacts {
    by_argv: HashMap<String, Parsed>,
    by_command: HashMap<String, Parsed>,
}

#[derive(Debug, Clone, Default)]
struct Parsed {
    command: Option<String>,
    dataset: Option<String>,
    num_prompts: Option<String>,
}

impl Parsed {
    fn of(argv: Option<Vec<String>>) -> Parsed {
        let flags = argv.as_deref().map(bench_flags).unwrap_or_default();
        Parsed {
            command: argv.map(|_| joined(&flags, &[DATASET, PROMPTS].concat())),
            dataset: value_of(&flags, DATASET),
            num_prompts: value_of(&flags, PROMPTS),
        }
    }
}

impl CommandFacts {
    /// The argv as executed when the runtime recorded it (Docker), else the planned command.
    fn parsed(&mut self, argv_json: Option<&str>, command: Option<&str>) -> Parsed {
        if let Some(j) = argv_json {
            if let Some(p) = self.by_argv.get(j) {
                return p.clone();
            }
            if let Ok(argv) = serde_json::from_str::<Vec<String>>(j) {
                let p = Parsed::of(Some(argv));
                self.by_argv.insert(j.to_string(), p.clone());
                return p;
            }
        }
        let c = command.unwrap_or("");
        if let Some(p) = self.by_command.get(c) {
            return p.clone();
        }
        let p = Parsed::of(command.and_then(|c| shell_words::split(c).ok()));
        self.by_command.insert(c.to_string(), p.clone());
        p
    }
}

/// [`facts`] with parsed commands remembered in `cache`.
pub(crate) fn facts_in(cache: &mut CommandFacts, doc: &RunDoc, a: Option<&AttemptDoc>) -> Facts {
    let info = a.and_then(|a| a.info.as_ref()).unwrap_or(&doc.info);
    let parsed = cache.parsed(
        a.and_then(|a| a.provenance.get("bench_argv"))
            .map(String::as_str),
        info.command.as_deref(),
    );
    let prov =
        |keys: &[&str]| a.and_then(|a| keys.iter().find_map(|k| a.provenance.get(*k).cloned()));
    let gpu_count = a
        .map(|a| a.gpus.len() as u32)
        .filter(|n| *n > 0)
        .unwrap_or(info.gpus);
    Facts {
        command: parsed.command,
        model: info.model.clone(),
        dataset: parsed.dataset,
        num_prompts: parsed.num_prompts,
        gpu_type: info.gpu_type().to_string(),
        gpu_count,
        driver: prov(&["driver", "driver_version"]),
    }
}

/// What a flag takes away from a comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Every metric: the two did not run the same benchmark.
    All,
    /// Throughputs only: the same benchmark, but different amounts of work.
    Throughput,
    /// Nothing, but a reader should know.
    Warning,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Flag {
    /// Stable name: command, model, dataset, num_prompts, gpu_type, gpu_count, driver,
    /// output_tokens, failed_requests.
    pub code: &'static str,
    pub scope: Scope,
    pub text: String,
}

/// The flags of comparing `a` with `b`: setup facts that differ, generated-token totals
/// that differ by more than `token_share` (a fraction), failed requests on either side.
pub fn flags(
    a: &Facts,
    b: &Facts,
    tokens: (Option<f64>, Option<f64>),
    failed: (f64, f64),
    token_share: f64,
) -> Vec<Flag> {
    let mut v = Vec::new();
    let mut differ = |code: &'static str, what: &str, x: String, y: String| {
        if x != y {
            v.push(Flag {
                code,
                scope: Scope::All,
                text: format!("different {what}: {x} vs {y}"),
            });
        }
    };
    let o = |s: &Option<String>| s.clone().unwrap_or_else(|| "-".into());
    differ("command", "command", o(&a.command), o(&b.command));
    differ("model", "model", o(&a.model), o(&b.model));
    differ("dataset", "dataset", o(&a.dataset), o(&b.dataset));
    differ(
        "num_prompts",
        "number of prompts",
        o(&a.num_prompts),
        o(&b.num_prompts),
    );
    differ(
        "gpu_type",
        "GPU type",
        a.gpu_type.clone(),
        b.gpu_type.clone(),
    );
    differ(
        "gpu_count",
        "GPU count",
        a.gpu_count.to_string(),
        b.gpu_count.to_string(),
    );
    // A driver only one side recorded is not a difference anyone can act on.
    if let (Some(x), Some(y)) = (&a.driver, &b.driver) {
        differ("driver", "driver", x.clone(), y.clone());
    }
    if let (Some(x), Some(y)) = tokens {
        let share = (x - y).abs() / x.max(y).max(1.0);
        if share > token_share {
            v.push(Flag {
                code: "output_tokens",
                scope: Scope::Throughput,
                text: format!(
                    "throughput incomparable: generated tokens differ by {:.1}% ({x:.0} vs {y:.0})",
                    share * 100.0
                ),
            });
        }
    }
    if failed.0 > 0.0 || failed.1 > 0.0 {
        v.push(Flag {
            code: "failed_requests",
            scope: Scope::Warning,
            text: format!("failed requests: {:.0} vs {:.0}", failed.0, failed.1),
        });
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        shell_words::split(s).unwrap()
    }

    #[test]
    fn the_command_is_compared_from_the_script_on_without_host_and_port() {
        let a = bench_flags(&argv(
            "/opt/venv/bin/python3 /vllm-workspace/benchmarks/benchmark_serving.py --model m --port 41234 --num-prompts 100 --dataset-name sharegpt",
        ));
        let b = bench_flags(&argv(
            "env PYTHONPATH=/opt/vllm_baseline python3 /opt/vllm_baseline/benchmarks/benchmark_serving.py --model m --port=39999 --num-prompts 100 --dataset-name sharegpt",
        ));
        assert_eq!(a, b);
        assert_eq!(value_of(&a, PROMPTS).as_deref(), Some("100"));
        assert_eq!(value_of(&a, DATASET).as_deref(), Some("sharegpt"));
        let c = bench_flags(&argv("vllm bench serve --model m --num-prompts 50"));
        assert_eq!(joined(&c, &[]), "--model m --num-prompts 50");
        // The benchmark module run directly (an image whose `vllm` cannot start).
        let mut d = vec![
            "/opt/venv/bin/python3".to_string(),
            "-c".into(),
            crate::rewrite::BENCH_MODULE_RUNNER.into(),
            "serve".into(),
        ];
        d.extend(argv("--model m --num-prompts 50"));
        assert_eq!(bench_flags(&d), c);
    }

    fn f() -> Facts {
        Facts {
            command: Some("--model m".into()),
            model: Some("m".into()),
            dataset: Some("sharegpt".into()),
            num_prompts: Some("100".into()),
            gpu_type: "H100".into(),
            gpu_count: 1,
            driver: Some("550.54".into()),
        }
    }

    #[test]
    fn every_difference_is_flagged_with_its_scope() {
        assert!(flags(&f(), &f(), (Some(1000.0), Some(1010.0)), (0.0, 0.0), 0.05).is_empty());
        let mut g = f();
        g.num_prompts = Some("50".into());
        g.gpu_count = 2;
        g.driver = None;
        let fl = flags(&f(), &g, (None, None), (0.0, 0.0), 0.05);
        let codes: Vec<_> = fl.iter().map(|x| x.code).collect();
        assert_eq!(codes, ["num_prompts", "gpu_count"]);
        assert!(fl.iter().all(|x| x.scope == Scope::All));
        let fl = flags(&f(), &f(), (Some(1000.0), Some(900.0)), (0.0, 2.0), 0.05);
        assert_eq!(fl[0].code, "output_tokens");
        assert_eq!(fl[0].scope, Scope::Throughput);
        assert!(fl[0].text.contains("10.0%"), "{}", fl[0].text);
        assert_eq!(
            (fl[1].code, fl[1].scope),
            ("failed_requests", Scope::Warning)
        );
    }
}
