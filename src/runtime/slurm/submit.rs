//! One run as one Slurm job: the `sbatch` arguments and the two scripts it runs. The batch
//! script (bash, on the node) starts the container with the configured launcher; the
//! in-container script (`inner.sh`, POSIX sh: busybox in the stand-in, dash or bash in real
//! images) probes the image for its interpreter, applies fix recipes and the agent's patch,
//! starts the server, waits for it, runs the benchmark and writes what happened to files in
//! the job's directory on the shared filesystem — the runtime's only channel back:
//!
//! - `status`: one marker per line (`stage …`, `provenance …`, `fix_ok …`, and one end
//!   marker: `bench_exit N`, `server_exit N`, `timeout STAGE`, `invalid …`, `patch_failed …`,
//!   `fix_failed …`); parsed by [`super::logs::Marker`].
//! - `server.out|err`, `bench.out|err`: the processes' pipes, kept apart.
//! - `slurm.out|err`: the batch script's (launcher, image pull) output.
//! - `results/`: the benchmark's result files (`--save-result`, `--output-json`).
//!
//! Pure: text only; `super` writes the files and calls sbatch.

use super::launcher::{self, Container, Launcher, JOB_MOUNT};
use crate::plan::BenchKind;
use crate::rewrite::{self, Program, Resolved};
use crate::runtime::docker::recipes::FixStep;
use crate::runtime::docker::results::{self, Wanted};
use crate::runtime::RunJob;
use std::time::Duration;

/// Placeholders resolved inside the container (the login node cannot probe the image).
const PY: &str = "@NS_PY@";
const BENCH: &str = "@NS_BENCH@";

/// The job name: the sweep and the run key, so a restarted nightshift finds its jobs.
/// (Commas would split `squeue --name`'s list; whitespace is awkward in every tool.)
pub(crate) fn job_name(sweep: &str, key: &str) -> String {
    format!("ns:{sweep}:{key}")
        .chars()
        .map(|c| {
            if c == ',' || c.is_whitespace() {
                '_'
            } else {
                c
            }
        })
        .collect()
}

/// The job directory's name part for a run key (keys hold `/` and `:`).
pub(crate) fn key_dir(key: &str) -> String {
    key.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `--time` in minutes: the server's start budget and the benchmark's, plus room for the
/// image to arrive and the container to stop. Slurm's own limit is the backstop; the
/// in-container script enforces the two budgets itself so the stage that ran over is known.
pub(crate) fn time_limit_min(job: &RunJob) -> u64 {
    let secs = job.server_start_timeout.as_secs() + job.run_timeout.as_secs() + 15 * 60;
    secs.div_ceil(60).max(1)
}

/// The sbatch command line (without the script path).
pub(crate) fn sbatch_args(
    job: &RunJob,
    dir: &std::path::Path,
    partition: Option<&str>,
    extra: &[String],
) -> Vec<String> {
    let mut a = vec![
        "--parsable".to_string(),
        format!("--job-name={}", job_name(&job.sweep, &job.key)),
        format!(
            "--comment=nightshift sweep={} run={} attempt={}",
            job.sweep.replace(char::is_whitespace, "_"),
            job.key,
            job.attempt
        ),
        format!("--time={}", time_limit_min(job)),
        format!("--output={}", dir.join("slurm.out").display()),
        format!("--error={}", dir.join("slurm.err").display()),
        format!("--chdir={}", dir.display()),
        "--nodes=1".into(),
        "--ntasks=1".into(),
    ];
    if !job.gpus.is_empty() {
        a.push(format!("--gres=gpu:{}", job.gpus.len()));
    }
    if let Some(p) = partition {
        a.push(format!("--partition={p}"));
    }
    a.extend(extra.iter().cloned());
    a
}

/// The batch script: where the job runs, then the launcher.
pub(crate) fn batch_script(
    job: &RunJob,
    dir: &std::path::Path,
    l: Launcher,
    c: &Container,
) -> String {
    format!(
        r#"#!/bin/bash
# nightshift: run {key} attempt {attempt} of sweep {sweep} ({launcher} launcher)
J={dir}
N=${{SLURMD_NODENAME:-$(hostname)}}
echo "node $N gpus=${{CUDA_VISIBLE_DEVICES:-${{SLURM_JOB_GPUS:-none}}}} job=$SLURM_JOB_ID" >> "$J/status"
echo "nightshift: slurm job $SLURM_JOB_ID on $N, GPUs ${{CUDA_VISIBLE_DEVICES:-${{SLURM_JOB_GPUS:-none}}}}, launcher {launcher}"
{body}echo "launcher_exit $rc" >> "$J/status"
exit $rc
"#,
        key = job.key,
        attempt = job.attempt,
        sweep = job.sweep,
        launcher = l,
        dir = shell_words::quote(&dir.display().to_string()),
        body = launcher::lines(l, c),
    )
}

/// One argument as a shell word, with the placeholders expanded from the probe's variables.
fn word(arg: &str) -> String {
    let mut out = String::new();
    let mut rest = arg;
    loop {
        let next = [(PY, "\"$NS_PY\""), (BENCH, "\"$NS_BENCH\"")]
            .iter()
            .filter_map(|(p, v)| rest.find(p).map(|i| (i, *p, *v)))
            .min_by_key(|(i, _, _)| *i);
        match next {
            Some((i, p, v)) => {
                if i > 0 {
                    out.push_str(&shell_words::quote(&rest[..i]));
                }
                out.push_str(v);
                rest = &rest[i + p.len()..];
            }
            None => {
                if !rest.is_empty() || out.is_empty() {
                    out.push_str(&shell_words::quote(rest));
                }
                return out;
            }
        }
    }
}

fn argv_line(argv: &[String]) -> String {
    argv.iter().map(|a| word(a)).collect::<Vec<_>>().join(" ")
}

/// What the in-container script needs beyond the job.
pub struct Inner<'a> {
    pub resolved: &'a Resolved,
    pub program: &'a Program,
    pub port: u16,
    /// `NAME=value` exported for the server and the benchmark (command env prefix, recipes).
    pub env: Vec<(String, String)>,
    /// Recipes with their shell steps (steps that need the clone are left out, said so).
    pub fixes: Vec<(String, Vec<FixStep>)>,
    /// The agent patch is in the job directory as `agent.patch`.
    pub patch: bool,
    pub patch_dir: Option<&'a str>,
}

/// The plan's command for this job, resolved against placeholders the script fills in.
pub fn resolve(inv: &rewrite::Invocation) -> Resolved {
    inv.resolve(PY, BENCH, rewrite::CliRunner::EntryModule)
}

/// The in-container script (POSIX sh).
pub(crate) fn inner_script(job: &RunJob, i: &Inner) -> String {
    let mut s = String::new();
    let serving = job.kind.needs_server() && i.resolved.server_argv.is_some();
    s.push_str(&format!(
        r#"#!/bin/sh
# nightshift: run {key} attempt {attempt}, inside the container
J={JOB_MOUNT}
st() {{ echo "$*" >> "$J/status"; }}
st "stage starting_container"
W=$(pwd)
"#,
        key = job.key,
        attempt = job.attempt,
    ));
    // The probe is the Docker runtime's: the same interpreter order, the same facts.
    s.push_str("( ");
    s.push_str(&crate::runtime::docker::invoke::probe_script());
    s.push_str(" ) > \"$J/probe.out\" 2> \"$J/probe.err\"\n");
    s.push_str(&format!(
        r#"NS_PY=$(sed -n 's/^interpreter=//p' "$J/probe.out" | head -n 1)
NS_PP=$(sed -n 's/^pythonpath=//p' "$J/probe.out" | head -n 1)
NS_VLLM=$(sed -n 's/^vllm_dir=//p' "$J/probe.out" | head -n 1)
NS_BENCH=$(sed -n 's/^bench_dir=//p' "$J/probe.out" | head -n 1)
if [ -z "$NS_PY" ]; then st "invalid no interpreter in {image} imports vllm (tried {tried})"; exit 0; fi
st "provenance interpreter $NS_PY"
if [ -n "$NS_PP" ]; then export PYTHONPATH="$NS_PP${{PYTHONPATH:+:$PYTHONPATH}}"; fi
"#,
        image = job.image.replace(['"', '$', '`', '\\'], "_"),
        tried = crate::runtime::docker::invoke::INTERPRETERS.join(", "),
    ));
    if matches!(i.program, Program::Script(_)) {
        s.push_str(&format!(
            "if [ -z \"$NS_BENCH\" ]; then st \"invalid no benchmarks folder in the image (looked at {})\"; exit 0; fi\nst \"provenance bench_source image → $NS_BENCH\"\n",
            crate::runtime::docker::invoke::IMAGE_BENCHMARKS.join(" and ")
        ));
    }
    for (k, v) in &i.env {
        s.push_str(&format!("export {k}={}\n", shell_words::quote(v)));
    }
    for (name, steps) in &i.fixes {
        for step in steps {
            if let FixStep::Shell { run } = step {
                s.push_str(&format!(
                    "echo {echo} >> \"$J/fix.out\"\nif ! sh -c {run} >> \"$J/fix.out\" 2>&1; then st \"fix_failed {name} step exited with status $?\"; exit 0; fi\n",
                    echo = shell_words::quote(&format!("fix recipe {name}: $ {}", run.trim())),
                    run = shell_words::quote(run),
                ));
            }
        }
        s.push_str(&format!("st \"fix_ok {name}\"\n"));
    }
    if i.patch {
        let configured = i.patch_dir.map(shell_words::quote).unwrap_or_default();
        s.push_str(&format!(
            r#"PD={configured}
if [ -z "$PD" ] || [ ! -d "$PD" ]; then PD=$(dirname "${{NS_VLLM:-/vllm}}"); fi
P="$J/agent.patch"
if ! cd "$PD"; then st "patch_failed has no directory to apply in ($PD)"; exit 0; fi
if command -v patch >/dev/null 2>&1; then
  echo '$ patch -p1 --dry-run' >> "$J/fix.out"
  if ! patch -p1 --dry-run -i "$P" >> "$J/fix.out" 2>&1; then st "patch_failed does not apply (dry run) in $PD: $(grep -v '^\$ ' "$J/fix.out" | grep . | tail -n 1)"; exit 0; fi
  patch -p1 -i "$P" >> "$J/fix.out" 2>&1 || {{ st "patch_failed failed while applying in $PD"; exit 0; }}
else
  git apply --check "$P" >> "$J/fix.out" 2>&1 || {{ st "patch_failed does not apply (git apply --check) in $PD"; exit 0; }}
  git apply "$P" >> "$J/fix.out" 2>&1 || {{ st "patch_failed failed while applying in $PD"; exit 0; }}
fi
cd "$W"
st "provenance patch_dir $PD"
"#
        ));
    }
    s.push_str("now() { date +%s; }\n");
    if serving {
        let server = argv_line(i.resolved.server_argv.as_deref().unwrap_or_default());
        let limit = job.server_start_timeout.as_secs().max(1);
        let port = i.port;
        s.push_str(&format!(
            r#"st "stage loading_server"
T0=$(now)
{server} > "$J/server.out" 2> "$J/server.err" &
SP=$!
# Asked inside the container: the server's port is not published anywhere.
healthy() {{
  u="http://127.0.0.1:{port}"
  if command -v curl >/dev/null 2>&1; then curl -fs -o /dev/null "$u/health" && curl -fs -o /dev/null "$u/v1/models"; return; fi
  if command -v wget >/dev/null 2>&1; then wget -q -O /dev/null "$u/health" && wget -q -O /dev/null "$u/v1/models"; return; fi
  "$NS_PY" -c "import urllib.request as r; r.urlopen('$u/health', timeout=2); r.urlopen('$u/v1/models', timeout=2)" >/dev/null 2>&1
}}
while :; do
  if ! kill -0 $SP 2>/dev/null; then wait $SP; st "server_exit $?"; exit 0; fi
  if healthy; then break; fi
  if [ $(( $(now) - T0 )) -ge {limit} ]; then st "timeout loading_server"; kill $SP 2>/dev/null; exit 0; fi
  sleep 1
done
st "ready $(( $(now) - T0 ))"
"#
        ));
    }
    let bench = argv_line(&i.resolved.bench_argv);
    let limit = job.run_timeout.as_secs().max(1);
    s.push_str(&format!(
        r#"st "stage benchmarking"
touch /tmp/.nightshift-bench-start
T1=$(now)
{bench} > "$J/bench.out" 2> "$J/bench.err" &
BP=$!
while kill -0 $BP 2>/dev/null; do
"#
    ));
    if serving {
        s.push_str(
            "  if ! kill -0 $SP 2>/dev/null; then wait $SP; c=$?; kill $BP 2>/dev/null; st \"server_exit $c\"; exit 0; fi\n",
        );
    }
    s.push_str(&format!(
        r#"  if [ $(( $(now) - T1 )) -ge {limit} ]; then kill $BP 2>/dev/null; st "timeout benchmarking"; exit 0; fi
  sleep 1
done
wait $BP
BC=$?
"#
    ));
    // From the command as it runs: the rewrites may have asked for a result file.
    s.push_str(&copy_results(&results::wanted_args(
        &i.resolved.bench_argv,
        ".",
    )));
    s.push_str("st \"bench_exit $BC\"\n");
    if serving {
        s.push_str("kill $SP 2>/dev/null\n");
    }
    s.push_str("exit 0\n");
    s
}

/// Result files into `$J/results/` for the parser (stdout is parsed regardless).
fn copy_results(wanted: &[Wanted]) -> String {
    let mut s = String::new();
    for w in wanted {
        match w {
            Wanted::File(p) => s.push_str(&format!(
                "mkdir -p \"$J/results\"; cp {} \"$J/results/\" 2>/dev/null\n",
                shell_words::quote(p)
            )),
            Wanted::NewestJsonIn(d) => s.push_str(&format!(
                "mkdir -p \"$J/results\"; f=$(ls -1t $(find {} -maxdepth 1 -name '*.json' -newer /tmp/.nightshift-bench-start) 2>/dev/null | head -n 1); [ -n \"$f\" ] && cp \"$f\" \"$J/results/\"\n",
                shell_words::quote(d)
            )),
        }
    }
    s
}

/// The benchmark kind a job's command runs as.
pub(crate) fn kind_of(job: &RunJob) -> BenchKind {
    job.view.kind.unwrap_or(job.kind)
}

/// Poll periods: fast while waiting for the job to start (that latency is measured and
/// shown), slower once it runs.
pub const POLL_PENDING: Duration = Duration::from_millis(250);
pub const POLL_RUNNING: Duration = Duration::from_secs(1);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_survive_squeue_lists() {
        assert_eq!(
            job_name("night 1", "abc/agent:a,1"),
            "ns:night_1:abc/agent:a_1"
        );
        assert_eq!(key_dir("abc123/agent:a1"), "abc123_agent_a1");
    }

    #[test]
    fn placeholders_expand_in_the_shell() {
        assert_eq!(word("@NS_PY@"), "\"$NS_PY\"");
        assert_eq!(
            word("@NS_BENCH@/benchmark_serving.py"),
            "\"$NS_BENCH\"/benchmark_serving.py"
        );
        assert_eq!(word("it's"), "'it'\\''s'");
        assert_eq!(word(""), "''");
        assert_eq!(
            word("--x=@NS_BENCH@/sonnet.txt"),
            "'--x='\"$NS_BENCH\"/sonnet.txt"
        );
    }
}
