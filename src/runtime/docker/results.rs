//! Result files a benchmark writes (`--save-result`, `--output-json`): which ones to copy
//! out of the container after the run, so the parser reads the exact numbers the JSON
//! holds and not only what was printed. Pure; the copy itself is in the runtime.

/// What to fetch after the benchmark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wanted {
    /// A file the command names (absolute in the container).
    File(String),
    /// The newest `*.json` written during the run in this directory (serving's default
    /// file name carries a timestamp, so it cannot be known in advance).
    NewestJsonIn(String),
}

fn abs(path: &str, workdir: &str) -> String {
    if path.starts_with('/') {
        path.to_string()
    } else {
        format!(
            "{}/{}",
            workdir.trim_end_matches('/'),
            path.trim_start_matches("./")
        )
    }
}

/// The same from an argv as it runs (`--flag value` or `--flag=value`).
pub(crate) fn wanted_args(argv: &[String], workdir: &str) -> Vec<Wanted> {
    let value = |name: &str| {
        let eq = format!("{name}=");
        argv.iter().enumerate().rev().find_map(|(i, a)| {
            if let Some(v) = a.strip_prefix(&eq) {
                Some(v.to_string())
            } else if a == name {
                argv.get(i + 1).filter(|v| !v.starts_with("--")).cloned()
            } else {
                None
            }
        })
    };
    let has = |name: &str| {
        let eq = format!("{name}=");
        argv.iter().any(|a| a == name || a.starts_with(&eq))
    };
    wanted_by(value, has, workdir)
}

fn wanted_by(
    value: impl Fn(&str) -> Option<String>,
    has: impl Fn(&str) -> bool,
    workdir: &str,
) -> Vec<Wanted> {
    let mut out = Vec::new();
    if let Some(f) = value("--output-json") {
        out.push(Wanted::File(abs(&f, workdir)));
    }
    if has("--save-result") || has("--append-result") {
        let dir = value("--result-dir")
            .map(|d| abs(&d, workdir))
            .unwrap_or_else(|| workdir.to_string());
        match value("--result-filename") {
            Some(f) => out.push(Wanted::File(abs(&f, &dir))),
            None => out.push(Wanted::NewestJsonIn(dir)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(cmd: &str) -> Vec<Wanted> {
        // The argv as the command runs (the path the attempt takes).
        wanted_args(&shell_words::split(cmd).unwrap(), "/vllm-workspace")
    }

    #[test]
    fn result_files_come_from_the_flags() {
        assert_eq!(
            w("python benchmarks/benchmark_throughput.py --model m --output-json out/t.json"),
            vec![Wanted::File("/vllm-workspace/out/t.json".into())]
        );
        assert_eq!(
            w("vllm bench serve --model m --save-result --result-dir /res --result-filename r.json"),
            vec![Wanted::File("/res/r.json".into())]
        );
        assert_eq!(
            w("python benchmarks/benchmark_serving.py --model m --save-result"),
            vec![Wanted::NewestJsonIn("/vllm-workspace".into())]
        );
        assert!(w("python benchmarks/benchmark_serving.py --model m").is_empty());
    }

    #[test]
    fn from_the_argv_as_it_runs() {
        let argv = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(
            wanted_args(
                &argv("vllm bench serve --model m --save-result --result-filename nightshift-result.json --save-detailed"),
                "/w"
            ),
            vec![Wanted::File("/w/nightshift-result.json".into())]
        );
        assert_eq!(
            wanted_args(
                &argv("vllm bench serve --save-result --result-dir=/r"),
                "/w"
            ),
            vec![Wanted::NewestJsonIn("/r".into())]
        );
        assert!(wanted_args(&argv("vllm bench serve --model m"), "/w").is_empty());
    }
}
