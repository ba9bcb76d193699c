//! What Slurm says about a job: `squeue` while it is queued or running, `scontrol show
//! job` after it ended (kept for `MinJobAge`), `sacct` when the cluster keeps accounting,
//! or `slurmrestd` when one is configured. Parsers are pure; the queries run the clients.

use std::process::Stdio;
use std::time::Duration;
use tokio::process::Command;

/// One job as the panel and the runtime need it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JobInfo {
    pub id: String,
    pub name: String,
    /// Slurm's state word: PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, …
    pub state: String,
    pub nodes: String,
    /// The allocation as Slurm prints it (`gres:gpu:2`, `gres/gpu=2`).
    pub gres: String,
    /// Why it waits (pending) or how it ended.
    pub reason: String,
    /// `code:signal` (scontrol/sacct), when known.
    pub exit: Option<String>,
    /// The job's working directory (nightshift's job directory, `--chdir`).
    pub workdir: String,
}

impl JobInfo {
    pub(crate) fn is_pending(&self) -> bool {
        matches!(self.state.as_str(), "PENDING" | "CONFIGURING" | "REQUEUED")
    }
    pub(crate) fn is_running(&self) -> bool {
        matches!(
            self.state.as_str(),
            "RUNNING" | "COMPLETING" | "SUSPENDED" | "STOPPED" | "RESIZING" | "SIGNALING"
        )
    }
    pub(crate) fn is_over(&self) -> bool {
        !self.is_pending() && !self.is_running()
    }
}

/// Slurm commands; `bin` is a directory prefix (empty: from `PATH`).
#[derive(Debug, Clone, Default)]
pub struct Client {
    pub bin: String,
    /// `slurmrestd` base URL (`http://host:6820`), with `SLURM_JWT` for its token.
    pub restd: Option<String>,
}

/// `%i|%j|%T|%N|%b|%r|%Z` rows of `squeue -h` (the directory last: it may hold `|`).
pub const SQUEUE_FORMAT: &str = "%i|%j|%T|%N|%b|%r|%Z";

pub(crate) fn parse_squeue(text: &str) -> Vec<JobInfo> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.trim().splitn(7, '|').collect();
            (f.len() == 7).then(|| JobInfo {
                id: f[0].into(),
                name: f[1].into(),
                state: f[2].into(),
                nodes: f[3].into(),
                gres: f[4].into(),
                reason: f[5].into(),
                exit: None,
                workdir: f[6].into(),
            })
        })
        .collect()
}

/// `scontrol show job ID` (one `Key=Value` soup per job).
pub(crate) fn parse_scontrol(text: &str) -> Option<JobInfo> {
    let mut j = JobInfo::default();
    for tok in text.split_whitespace() {
        let Some((k, v)) = tok.split_once('=') else {
            continue;
        };
        match k {
            "JobId" => j.id = v.into(),
            "JobName" => j.name = v.into(),
            "JobState" => j.state = v.into(),
            "Reason" => j.reason = v.into(),
            "NodeList" if v != "(null)" => j.nodes = v.into(),
            "TresPerNode" => j.gres = v.into(),
            "ExitCode" => j.exit = Some(v.into()),
            "WorkDir" => j.workdir = v.into(),
            _ => {}
        }
    }
    (!j.id.is_empty() && !j.state.is_empty()).then_some(j)
}

/// `sacct -n -P -X -o JobID,JobName,State,NodeList,ExitCode` (first row).
pub(crate) fn parse_sacct(text: &str) -> Option<JobInfo> {
    let l = text.lines().find(|l| !l.trim().is_empty())?;
    let f: Vec<&str> = l.trim().split('|').collect();
    (f.len() >= 5).then(|| JobInfo {
        id: f[0].into(),
        name: f[1].into(),
        // "CANCELLED by 0" → CANCELLED
        state: f[2].split_whitespace().next().unwrap_or("").into(),
        nodes: f[3].into(),
        exit: Some(f[4].into()),
        ..Default::default()
    })
}

/// slurmrestd's `GET /slurm/v0.0.38/job/{id}` answer.
pub(crate) fn parse_restd(v: &serde_json::Value) -> Option<JobInfo> {
    let j = v.get("jobs")?.as_array()?.first()?;
    let s = |k: &str| j.get(k).and_then(|x| x.as_str()).unwrap_or("").to_string();
    Some(JobInfo {
        id: j.get("job_id").map(|x| x.to_string()).unwrap_or_default(),
        name: s("name"),
        state: s("job_state"),
        nodes: s("nodes"),
        gres: s("tres_per_node"),
        reason: s("state_reason"),
        exit: j.get("exit_code").map(|x| x.to_string()),
        workdir: s("current_working_directory"),
    })
}

/// Longest a Slurm client may take before the query counts as failed (a busy controller).
const QUERY_TIMEOUT: Duration = Duration::from_secs(30);

impl Client {
    fn cmd(&self, name: &str) -> Command {
        let mut c = Command::new(format!("{}{name}", self.bin));
        c.stdin(Stdio::null()).kill_on_drop(true);
        c
    }

    /// Run a client; Ok(stdout) on exit 0, Err(its stderr or why it did not run).
    pub async fn run(&self, name: &str, args: &[String]) -> Result<String, String> {
        let out = tokio::time::timeout(QUERY_TIMEOUT, self.cmd(name).args(args).output())
            .await
            .map_err(|_| format!("{name} did not answer within {} s", QUERY_TIMEOUT.as_secs()))?
            .map_err(|e| format!("cannot run {name}: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "{name} failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// The job's state from the best source available; Err when none knows the job.
    pub async fn job(&self, id: &str) -> Result<JobInfo, String> {
        if let Some(url) = &self.restd {
            return self.job_restd(url, id).await;
        }
        let q = self
            .run(
                "squeue",
                &[
                    "-h".into(),
                    "-j".into(),
                    id.into(),
                    "-o".into(),
                    SQUEUE_FORMAT.into(),
                ],
            )
            .await;
        if let Ok(text) = &q {
            if let Some(j) = parse_squeue(text).into_iter().next() {
                return Ok(j);
            }
        }
        // Left the queue: how it ended.
        if let Ok(text) = self
            .run("scontrol", &["show".into(), "job".into(), id.into()])
            .await
        {
            if let Some(j) = parse_scontrol(&text) {
                return Ok(j);
            }
        }
        let acct = self
            .run(
                "sacct",
                &[
                    "-n".into(),
                    "-P".into(),
                    "-X".into(),
                    "-j".into(),
                    id.into(),
                    "-o".into(),
                    "JobID,JobName,State,NodeList,ExitCode".into(),
                ],
            )
            .await;
        match acct {
            Ok(text) => parse_sacct(&text).ok_or_else(|| format!("Slurm does not know job {id}")),
            Err(e) => Err(format!(
                "job {id} is gone from squeue and scontrol, and sacct cannot tell ({e})"
            )),
        }
    }

    async fn job_restd(&self, url: &str, id: &str) -> Result<JobInfo, String> {
        let client = reqwest::Client::builder()
            .timeout(QUERY_TIMEOUT)
            .build()
            .map_err(|e| e.to_string())?;
        let mut req = client.get(format!(
            "{}/slurm/v0.0.38/job/{id}",
            url.trim_end_matches('/')
        ));
        if let Some(user) = user_name() {
            req = req.header("X-SLURM-USER-NAME", user);
        }
        // The token authenticates; it is never logged.
        if let Ok(t) = std::env::var("SLURM_JWT") {
            req = req.header("X-SLURM-USER-TOKEN", t);
        }
        let v: serde_json::Value = req
            .send()
            .await
            .map_err(|e| format!("slurmrestd {url}: {e}"))?
            .json()
            .await
            .map_err(|e| format!("slurmrestd {url}: {e}"))?;
        parse_restd(&v).ok_or_else(|| format!("slurmrestd {url} does not know job {id}"))
    }

    /// Queued or running jobs whose name starts with `prefix` (this sweep's).
    pub(crate) async fn jobs_named(&self, prefix: &str) -> Result<Vec<JobInfo>, String> {
        let text = self
            .run("squeue", &["-h".into(), "-o".into(), SQUEUE_FORMAT.into()])
            .await?;
        Ok(parse_squeue(&text)
            .into_iter()
            .filter(|j| j.name.starts_with(prefix))
            .collect())
    }

    /// GPUs the partition's nodes declare (`gpu:8`, `gpu:h100:8(S:0-1)`), summed.
    pub(crate) async fn partition_gpus(&self, partition: Option<&str>) -> Result<u32, String> {
        let mut args: Vec<String> = vec!["-h".into(), "-N".into(), "-o".into(), "%N|%G".into()];
        if let Some(p) = partition {
            args.extend(["-p".into(), p.into()]);
        }
        let text = self.run("sinfo", &args).await?;
        Ok(sum_gpus(&text))
    }
}

/// Who the token is for: `SLURM_USER_NAME`, `USER`, else this process's user.
fn user_name() -> Option<String> {
    if let Ok(u) = std::env::var("SLURM_USER_NAME").or_else(|_| std::env::var("USER")) {
        return Some(u);
    }
    // SAFETY: getpwuid returns a pointer into static storage or null; the name is copied
    // out at once, before any other call could overwrite it.
    unsafe {
        let pw = libc::getpwuid(libc::getuid());
        if pw.is_null() || (*pw).pw_name.is_null() {
            return None;
        }
        Some(
            std::ffi::CStr::from_ptr((*pw).pw_name)
                .to_string_lossy()
                .into_owned(),
        )
    }
}

pub(crate) fn sum_gpus(sinfo: &str) -> u32 {
    let mut seen = std::collections::BTreeSet::new();
    let mut total = 0;
    for l in sinfo.lines() {
        let Some((node, gres)) = l.trim().split_once('|') else {
            continue;
        };
        // A node in two partitions is listed twice.
        if !seen.insert(node.to_string()) {
            continue;
        }
        for g in gres.split(',') {
            let g = g.split('(').next().unwrap_or("");
            if g.starts_with("gpu") {
                total += g
                    .rsplit(':')
                    .next()
                    .and_then(|n| n.parse::<u32>().ok())
                    .unwrap_or(0);
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squeue_rows() {
        let j = parse_squeue("12|ns:s:abc/human|RUNNING|node1|gres:gpu:2|None|/shared/a|b\n");
        assert_eq!(j.len(), 1);
        assert_eq!(j[0].id, "12");
        assert_eq!(j[0].name, "ns:s:abc/human");
        assert!(j[0].is_running());
        assert_eq!(j[0].workdir, "/shared/a|b");
        assert!(parse_squeue("garbage\n").is_empty());
    }

    #[test]
    fn scontrol_soup() {
        let t = "JobId=7 JobName=ns:s:k\n   JobState=TIMEOUT Reason=TimeLimit Dependency=(null)\n   ExitCode=0:15\n   NodeList=vm\n   TresPerNode=gres:gpu:1\n";
        let j = parse_scontrol(t).unwrap();
        assert_eq!((j.id.as_str(), j.state.as_str()), ("7", "TIMEOUT"));
        assert_eq!(j.exit.as_deref(), Some("0:15"));
        assert_eq!(j.nodes, "vm");
        assert!(j.is_over());
        assert_eq!(
            parse_scontrol("slurm_load_jobs error: Invalid job id specified"),
            None
        );
    }

    #[test]
    fn sacct_and_restd() {
        let j = parse_sacct("9|ns:s:k|CANCELLED by 0|vm|0:15\n").unwrap();
        assert_eq!(j.state, "CANCELLED");
        let v = serde_json::json!({"jobs": [{"job_id": 5, "name": "ns:s:k", "job_state": "RUNNING", "nodes": "n1", "tres_per_node": "gres:gpu:2", "state_reason": "None"}]});
        let j = parse_restd(&v).unwrap();
        assert_eq!(
            (j.id.as_str(), j.state.as_str(), j.nodes.as_str()),
            ("5", "RUNNING", "n1")
        );
    }

    #[test]
    fn gpus_summed_once_per_node() {
        assert_eq!(
            sum_gpus("n1|gpu:8\nn2|gpu:h100:4(S:0-1)\nn1|gpu:8\nn3|(null)\n"),
            12
        );
    }
}
