//! An invocation resolved for one variant's image: interpreter, benchmarks folder or console
//! script, and the rewrites that took.

use super::*;

impl Invocation {
    /// The command lines for one variant: `interpreter` imports vllm in its image,
    /// `bench_dir` is where that variant's benchmarks folder is, and `cli` how `vllm bench`
    /// runs in that image.
    pub fn resolve(&self, interpreter: &str, bench_dir: &str, cli: CliRunner) -> Resolved {
        let mut rewrites = Vec::new();
        let runner = match (&self.program, cli) {
            (Program::Cli(_), CliRunner::Console(c)) => c,
            _ => interpreter,
        };
        if self.launcher != runner && !(self.launcher == "vllm" && runner.ends_with("/vllm")) {
            rewrites.push(rw(
                "interpreter",
                &self.launcher,
                runner,
                if runner == interpreter && matches!(self.program, Program::Cli(_)) {
                    "the image's vllm-bearing interpreter runs the CLI module"
                } else if runner != interpreter {
                    "the image's vllm console script"
                } else {
                    "the image's interpreter that imports vllm (real images have no bare `python`)"
                },
            ));
        }
        let mut bench_argv = vec![runner.to_string()];
        match &self.program {
            Program::Script(s) => {
                let path = format!("{}/{s}", bench_dir.trim_end_matches('/'));
                if path != format!("benchmarks/{s}") {
                    rewrites.push(rw(
                        "script",
                        format!("benchmarks/{s}"),
                        &path,
                        "where this variant's benchmarks folder is",
                    ));
                }
                bench_argv.push(path);
            }
            Program::Cli(sub) if runner != interpreter => {
                bench_argv.extend(["bench".into(), sub.clone()]);
            }
            Program::Cli(sub) if cli == CliRunner::BenchModule => {
                rewrites.push(rw(
                    "cli",
                    format!("vllm bench {sub}"),
                    format!("vllm.benchmarks.{sub} (add_cli_args, main)"),
                    "the image's vllm CLI does not start (its --help failed); the benchmark module runs with vLLM's own parser",
                ));
                bench_argv.extend(["-c".into(), BENCH_MODULE_RUNNER.into(), sub.clone()]);
            }
            Program::Cli(sub) => {
                bench_argv.extend(["-m".into(), CLI_MODULE.into(), "bench".into(), sub.clone()]);
            }
        }
        let dir = bench_dir.trim_end_matches('/');
        bench_argv.extend(self.client_args.iter().map(|a| a.replace(BENCH_DIR, dir)));
        let server_argv = self.kind.needs_server().then(|| {
            let mut s = vec![interpreter.to_string(), "-m".into(), SERVER_MODULE.into()];
            if let Some(m) = &self.model {
                s.extend(["--model".into(), m.clone()]);
            }
            s.extend(["--port".into(), self.port.to_string()]);
            s.extend(self.server_args.iter().cloned());
            s
        });
        Resolved {
            bench_argv,
            server_argv,
            rewrites,
        }
    }
}
