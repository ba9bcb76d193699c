//! The read-only view of a perf command. The command itself always runs exactly as written;
//! this view exists for checks (placeholders, TP vs GPUs, model mismatch) and display.

pub use crate::kind::BenchKind;
use serde::Serialize;

/// At most this many GPUs for one run: bounded before TP × PP is multiplied anywhere.
pub const MAX_GPUS: u32 = 64;

/// How the benchmark is launched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Launcher {
    /// `python[3] path/to/script.py`
    Script {
        python: String,
        script: String,
    },
    /// `python -m module`
    Module {
        python: String,
        module: String,
    },
    /// `vllm bench <sub>`
    VllmBench {
        sub: String,
    },
    Other {
        program: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Flag {
    pub name: String,
    /// `None` for a boolean flag.
    pub value: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommandView {
    pub env: Vec<(String, String)>,
    pub launcher: Launcher,
    pub kind: Option<BenchKind>,
    pub model: Option<String>,
    pub tp: u32,
    pub pp: u32,
    pub flags: Vec<Flag>,
    /// Tokens that are neither flags nor flag values (e.g. a positional model).
    pub positional: Vec<String>,
}

/// Why a command cannot be run as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommandProblem {
    pub rule: &'static str,
    pub detail: String,
}

/// Flags whose values are conventionally upper-case enum names, not placeholders.
const UPPERCASE_VALUE_FLAGS: &[&str] = &[
    "--attention-backend",
    "--kv-cache-dtype",
    "--compilation-level",
    "--cuda-graph-mode",
];

impl CommandView {
    pub fn parse(command: &str) -> Result<CommandView, String> {
        let tokens = shell_words::split(command)
            .map_err(|e| format!("cannot split the command into words: {e}"))?;
        let mut i = 0;
        let mut env = Vec::new();
        while i < tokens.len() {
            match tokens[i].split_once('=') {
                Some((name, value)) if is_env_name(name) => {
                    env.push((name.to_string(), value.to_string()));
                    i += 1;
                }
                _ => break,
            }
        }
        let Some(program) = tokens.get(i) else {
            return Err("the command has environment assignments but no program".into());
        };
        i += 1;
        let base = program.rsplit('/').next().unwrap_or(program);
        let launcher = if base.starts_with("python") {
            if tokens.get(i).map(String::as_str) == Some("-m") {
                let module = tokens.get(i + 1).cloned().unwrap_or_default();
                i += 2;
                Launcher::Module {
                    python: program.clone(),
                    module,
                }
            } else {
                let script = tokens.get(i).cloned().unwrap_or_default();
                i += 1;
                Launcher::Script {
                    python: program.clone(),
                    script,
                }
            }
        } else if base == "vllm" && tokens.get(i).map(String::as_str) == Some("bench") {
            let sub = tokens.get(i + 1).cloned().unwrap_or_default();
            i += 2;
            Launcher::VllmBench { sub }
        } else {
            Launcher::Other {
                program: program.clone(),
            }
        };
        let kind = match &launcher {
            Launcher::Script { script, .. } => kind_from_script(script),
            Launcher::Module { module, .. } => kind_from_script(module),
            Launcher::VllmBench { sub } => BenchKind::parse(sub),
            Launcher::Other { .. } => None,
        };
        let mut flags = Vec::new();
        let mut positional = Vec::new();
        while i < tokens.len() {
            let t = &tokens[i];
            if t.starts_with('-') && t.len() > 1 && !looks_numeric(t) {
                if let Some((name, value)) = t.split_once('=') {
                    flags.push(Flag {
                        name: name.to_string(),
                        value: Some(value.to_string()),
                    });
                } else {
                    let next = tokens.get(i + 1);
                    let takes_value = next
                        .map(|n| !(n.starts_with('-') && n.len() > 1 && !looks_numeric(n)))
                        .unwrap_or(false);
                    if takes_value {
                        flags.push(Flag {
                            name: t.clone(),
                            value: next.cloned(),
                        });
                        i += 1;
                    } else {
                        flags.push(Flag {
                            name: t.clone(),
                            value: None,
                        });
                    }
                }
            } else {
                positional.push(t.clone());
            }
            i += 1;
        }
        let get = |names: &[&str]| {
            flags
                .iter()
                .rev()
                .find(|f| names.contains(&f.name.as_str()))
                .and_then(|f| f.value.clone())
        };
        let model = get(&["--model", "-m"]);
        let parse_n = |names: &[&str]| -> Result<u32, String> {
            match get(names) {
                None => Ok(1),
                Some(v) => v
                    .parse::<u32>()
                    .map_err(|_| format!("{} value `{v}` is not a whole number", names[0])),
            }
        };
        let tp_names = ["--tensor-parallel-size", "-tp", "--tp", "--tp-size"];
        let pp_names = ["--pipeline-parallel-size", "-pp", "--pp", "--pp-size"];
        let tp = parse_n(&tp_names).unwrap_or(1);
        let pp = parse_n(&pp_names).unwrap_or(1);
        // A size of 0 is not a placeholder to fill in later: no image can run it.
        for (n, names) in [(tp, &tp_names), (pp, &pp_names)] {
            if n == 0 {
                let flag = flags
                    .iter()
                    .rev()
                    .find(|f| names.contains(&f.name.as_str()))
                    .map_or(names[0], |f| f.name.as_str());
                return Err(format!(
                    "`{flag} 0` cannot run: a parallel size is at least 1"
                ));
            }
        }
        // Bounded before TP × PP is multiplied (or GPUs are counted) anywhere.
        let max = MAX_GPUS;
        if tp.saturating_mul(pp) > max {
            return Err(format!(
                "tensor parallel {tp} × pipeline parallel {pp} needs more GPUs than one run can take (at most {max})"
            ));
        }
        Ok(CommandView {
            env,
            launcher,
            kind,
            model,
            tp: tp.max(1),
            pp: pp.max(1),
            flags,
            positional,
        })
    }

    pub fn script(&self) -> Option<&str> {
        match &self.launcher {
            Launcher::Script { script, .. } => Some(script),
            _ => None,
        }
    }

    /// The placeholder and optional-bracket rules of the plan format. Env values are exempt.
    pub(crate) fn problems(&self) -> Vec<CommandProblem> {
        let mut out = Vec::new();
        let bracket = |t: &str| t.starts_with("[-");
        for f in &self.flags {
            if let Some(t) = std::iter::once(f.name.as_str())
                .chain(f.value.as_deref())
                .find(|t| bracket(t))
            {
                out.push(CommandProblem {
                    rule: "optional_brackets",
                    detail: format!("`{t}` is an optional-argument template, not an argument"),
                });
                continue;
            }
            if let Some(v) = &f.value {
                if let Some(why) = placeholder_reason(v, &f.name) {
                    out.push(CommandProblem {
                        rule: "placeholder",
                        detail: format!("{} {v}: {why}", f.name),
                    });
                }
            }
        }
        for p in &self.positional {
            if bracket(p) {
                out.push(CommandProblem {
                    rule: "optional_brackets",
                    detail: format!("`{p}` is an optional-argument template, not an argument"),
                });
            } else if let Some(why) = placeholder_reason(p, "") {
                out.push(CommandProblem {
                    rule: "placeholder",
                    detail: format!("{p}: {why}"),
                });
            }
        }
        // The bracket rule is the more specific diagnosis when both apply.
        out.sort_by_key(|p| p.rule != "optional_brackets");
        out
    }
}

fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn looks_numeric(s: &str) -> bool {
    s.parse::<f64>().is_ok()
}

fn kind_from_script(script: &str) -> Option<BenchKind> {
    let name = script
        .rsplit(['/', '.'])
        .find(|s| !s.is_empty() && *s != "py")?;
    let name = if script.ends_with(".py") {
        script
            .rsplit('/')
            .next()
            .unwrap_or(script)
            .trim_end_matches(".py")
    } else {
        name
    };
    match name {
        "benchmark_serving" | "bench_serving" => Some(BenchKind::Serving),
        "benchmark_throughput" => Some(BenchKind::Throughput),
        "benchmark_latency" => Some(BenchKind::Latency),
        "benchmark_prefix_caching" => Some(BenchKind::PrefixCaching),
        _ => None,
    }
}

fn placeholder_reason(value: &str, flag: &str) -> Option<&'static str> {
    let is_caps = value.len() >= 2
        && value.chars().any(|c| c.is_ascii_uppercase())
        && value.chars().all(|c| c.is_ascii_uppercase() || c == '_');
    if is_caps && !UPPERCASE_VALUE_FLAGS.contains(&flag) {
        return Some("an all-capitals value is a placeholder to fill in");
    }
    // A JSON value (`--speculative-config '{"method": "ngram"}'`, histogram buckets, hf
    // overrides) is a value, whatever brackets it holds.
    let t = value.trim_start();
    if (t.starts_with('{') || t.starts_with('['))
        && serde_json::from_str::<serde_json::Value>(value).is_ok_and(|v| !v.is_string())
    {
        return None;
    }
    if value.contains('<') && value.contains('>') {
        return Some("`<...>` is a placeholder to fill in");
    }
    if value.contains('{') && value.contains('}') {
        return Some("`{...}` is a placeholder to fill in");
    }
    if value.contains("...") {
        return Some("`...` is an elision, not a value");
    }
    if let Some(pos) = value.find('$') {
        let rest = &value[pos + 1..];
        if rest.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_' || c == '{') {
            return Some("an unexpanded `$VAR` (the command is not run through a shell)");
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_launcher_kind_model_tp() {
        let v = CommandView::parse("VLLM_USE_V1=1 VLLM_ATTENTION_BACKEND=FLASHMLA python benchmarks/benchmark_serving.py --model deepseek-ai/DeepSeek-R1 --tensor-parallel-size 8 --trust-remote-code").unwrap();
        assert_eq!(v.env.len(), 2);
        assert_eq!(v.kind, Some(BenchKind::Serving));
        assert_eq!(v.model.as_deref(), Some("deepseek-ai/DeepSeek-R1"));
        assert_eq!(v.tp, 8);
        assert_eq!(v.flags.last().unwrap().value, None);
        assert!(v.problems().is_empty());
    }

    #[test]
    fn vllm_bench_cli_and_equals_flags() {
        let v = CommandView::parse("vllm bench throughput --model=Qwen/Qwen3-30B-A3B -tp 2 --pp=2")
            .unwrap();
        assert_eq!(
            v.launcher,
            Launcher::VllmBench {
                sub: "throughput".into()
            }
        );
        assert_eq!(v.kind, Some(BenchKind::Throughput));
        assert_eq!((v.tp, v.pp), (2, 2));
        assert_eq!(v.model.as_deref(), Some("Qwen/Qwen3-30B-A3B"));
    }

    #[test]
    fn quoted_values_and_python_module() {
        let v = CommandView::parse("python3 -m vllm.benchmarks.benchmark_latency --speculative-model '[ngram]' --num-speculative-tokens 5").unwrap();
        assert!(matches!(v.launcher, Launcher::Module { .. }));
        assert_eq!(v.flags[0].value.as_deref(), Some("[ngram]"));
        assert!(v.problems().is_empty(), "{:?}", v.problems());
    }

    #[test]
    fn placeholders_are_found_but_env_values_are_exempt() {
        let v = CommandView::parse("X=ABC python benchmarks/benchmark_latency.py --batch-size BS --input-len INPUT_LEN --model MODEL").unwrap();
        let p = v.problems();
        assert_eq!(p.len(), 3);
        assert!(p.iter().all(|p| p.rule == "placeholder"));
        for bad in ["--model <model>", "--x {len}", "--x $HOME/data", "--x ..."] {
            let v = CommandView::parse(&format!("python benchmarks/benchmark_serving.py {bad}"))
                .unwrap();
            assert_eq!(v.problems().len(), 1, "{bad}");
        }
        for fine in [
            "--dtype float16",
            "--request-rate inf",
            "--kv-cache-dtype FP8",
            "--attention-backend FLASH_ATTN",
            "--x 10",
            r#"--custom-histogram-buckets '{"time_to_first_token":[0.01,0.1,1.0]}'"#,
            r#"--speculative-config '{"method": "ngram", "num_speculative_tokens": 5}'"#,
        ] {
            let v = CommandView::parse(&format!("python benchmarks/benchmark_serving.py {fine}"))
                .unwrap();
            assert!(v.problems().is_empty(), "{fine}");
        }
    }

    #[test]
    fn optional_brackets_are_invalid() {
        let v = CommandView::parse("python3 benchmarks/benchmark_prefix_caching.py --model m --enable-prefix-caching [--use-v2-block-manager]").unwrap();
        assert_eq!(v.kind, Some(BenchKind::PrefixCaching));
        let p = v.problems();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].rule, "optional_brackets");
    }

    #[test]
    fn script_paths_outside_benchmarks_still_give_a_kind() {
        let v = CommandView::parse(
            "python /home/ray/default/vllm_public/benchmarks/benchmark_latency.py --model m",
        )
        .unwrap();
        assert_eq!(v.kind, Some(BenchKind::Latency));
        let v =
            CommandView::parse("python benchmark/benchmark_latency.py --model facebook/opt-13b")
                .unwrap();
        assert_eq!(v.kind, Some(BenchKind::Latency));
    }

    #[test]
    fn unbalanced_quotes_are_an_error_not_a_panic() {
        assert!(CommandView::parse("python 'unterminated").is_err());
        assert!(CommandView::parse("A=1 B=2").is_err());
    }
}
