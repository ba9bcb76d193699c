//! How a Slurm job starts the run's container on its node. Clusters differ: NVIDIA's
//! pyxis/enroot plugin (`srun --container-image`), Apptainer (`apptainer exec`), or a Docker
//! engine on each node (`docker run`). Each launcher runs the same in-container script
//! (`inner.sh`, see `submit`) with the job's directory mounted at [`JOB_MOUNT`]; what differs
//! is how images, mounts, GPUs and the token reach the container. Pure: text only.

use std::fmt;
use std::str::FromStr;

/// Where the job's directory (on the shared filesystem) appears inside the container.
pub const JOB_MOUNT: &str = "/nightshift/job";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Launcher {
    /// `srun --container-image=IMAGE` (pyxis + enroot).
    Pyxis,
    /// `apptainer exec docker://IMAGE` (or a `.sif` path).
    Apptainer,
    /// `docker run IMAGE` with the node's Docker engine.
    #[default]
    Docker,
}

impl Launcher {
    pub fn as_str(self) -> &'static str {
        match self {
            Launcher::Pyxis => "pyxis",
            Launcher::Apptainer => "apptainer",
            Launcher::Docker => "docker",
        }
    }
}

impl fmt::Display for Launcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Launcher {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "pyxis" | "enroot" => Ok(Launcher::Pyxis),
            "apptainer" | "singularity" => Ok(Launcher::Apptainer),
            "docker" => Ok(Launcher::Docker),
            _ => Err(format!(
                "unknown launcher `{s}` (pyxis, apptainer or docker)"
            )),
        }
    }
}

/// What the container needs besides the image.
#[derive(Debug, Clone, Default)]
pub struct Container {
    pub image: String,
    /// `host:container[:ro]` binds (HF cache, datasets); the job directory is added here.
    pub binds: Vec<String>,
    /// Ask for the job's GPUs (off on test clusters whose GPUs are empty files).
    pub gpu_requests: bool,
    /// Forward `HF_TOKEN`/`HUGGING_FACE_HUB_TOKEN` from the job's environment (never
    /// written into a script: sbatch exports the submitting process's environment).
    pub token: bool,
    pub shm_size: Option<String>,
    pub ipc: Option<String>,
    /// Labels for `docker run`, so leftovers of a sweep can be found on a node.
    pub labels: Vec<(String, String)>,
}

fn q(s: &str) -> String {
    shell_words::quote(s).into_owned()
}

/// `s` inside double quotes, so it may sit next to `$J` in one word.
fn dq(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for ch in s.chars() {
        if matches!(ch, '"' | '$' | '`' | '\\') {
            out.push('\\');
        }
        out.push(ch);
    }
    out.push('"');
    out
}

/// The bash lines of the batch script that run `inner.sh` in the container and leave its
/// exit status in `$rc`. `$J` is the job directory; `$SLURM_JOB_ID` is set by Slurm.
pub fn lines(launcher: Launcher, c: &Container) -> String {
    let inner = format!("{JOB_MOUNT}/inner.sh");
    // `$J` expands in the batch script; the plan's paths are taken literally.
    let mut binds = vec![format!("\"$J:{JOB_MOUNT}\"")];
    binds.extend(c.binds.iter().map(|b| dq(b)));
    match launcher {
        Launcher::Docker => {
            let mut args = vec![
                "docker run --rm --name \"$NAME\"".to_string(),
                "--entrypoint /bin/sh".into(),
            ];
            for (k, v) in &c.labels {
                args.push(format!("--label {}", q(&format!("{k}={v}"))));
            }
            args.push("--label \"nightshift.slurm_job=$SLURM_JOB_ID\"".into());
            for b in &binds {
                // `$J` must expand: it is not quoted by `q`.
                args.push(format!("-v {b}"));
            }
            if c.token {
                args.push(
                    "${HF_TOKEN:+-e HF_TOKEN} ${HUGGING_FACE_HUB_TOKEN:+-e HUGGING_FACE_HUB_TOKEN}"
                        .into(),
                );
            }
            if let Some(s) = &c.shm_size {
                args.push(format!("--shm-size {}", q(s)));
            }
            if let Some(i) = &c.ipc {
                args.push(format!("--ipc {}", q(i)));
            }
            args.push("\"${GPUS[@]}\"".into());
            args.push(q(&c.image));
            args.push(inner);
            format!(
                r#"NAME="ns-slurm-$SLURM_JOB_ID"
# scancel and the time limit signal this script: the container is removed with it.
trap 'docker rm -f "$NAME" >/dev/null 2>&1; exit 143' TERM INT
GPUS=()
{gpus}
{cmd} &
wait $!
rc=$?
"#,
                gpus = if c.gpu_requests {
                    r#"if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then GPUS=(--gpus "\"device=$CUDA_VISIBLE_DEVICES\""); fi"#
                } else {
                    "# GPU device requests off (--slurm-no-gpu-requests)"
                },
                cmd = args.join(" \\\n  ")
            )
        }
        Launcher::Apptainer => {
            let image = if c.image.starts_with('/') || c.image.ends_with(".sif") {
                c.image.clone()
            } else {
                format!("docker://{}", c.image)
            };
            let nv = if c.gpu_requests { " --nv" } else { "" };
            let mut args = vec![format!(
                "apptainer exec{nv} --writable-tmpfs --no-home --pwd /"
            )];
            for b in &binds {
                args.push(format!("--bind {b}"));
            }
            args.push(q(&image));
            args.push(format!("/bin/sh {inner}"));
            format!("{} &\nwait $!\nrc=$?\n", args.join(" \\\n  "))
        }
        Launcher::Pyxis => {
            // One word: the quoted pieces join with commas.
            format!(
                "srun --ntasks=1 --container-image={} --container-writable --no-container-mount-home \\\n  --container-mounts={} /bin/sh {inner} &\nwait $!\nrc=$?\n",
                q(&c.image),
                binds.join(",")
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c() -> Container {
        Container {
            image: "org/vllm-bench:abc".into(),
            binds: vec!["/data/hf:/root/.cache/huggingface".into()],
            gpu_requests: true,
            token: true,
            shm_size: Some("1g".into()),
            ipc: None,
            labels: vec![("nightshift.sweep".into(), "night one".into())],
        }
    }

    #[test]
    fn parses_names() {
        assert_eq!("enroot".parse::<Launcher>(), Ok(Launcher::Pyxis));
        assert_eq!("apptainer".parse::<Launcher>(), Ok(Launcher::Apptainer));
        assert!("podman".parse::<Launcher>().is_err());
    }

    #[test]
    fn docker_run_mounts_the_job_and_forwards_the_token_by_name() {
        let l = lines(Launcher::Docker, &c());
        assert!(l.contains("docker run --rm --name \"$NAME\""), "{l}");
        assert!(l.contains("-v \"$J:/nightshift/job\""), "{l}");
        assert!(
            l.contains("-v \"/data/hf:/root/.cache/huggingface\""),
            "{l}"
        );
        assert!(l.contains("${HF_TOKEN:+-e HF_TOKEN}"), "{l}");
        assert!(l.contains("--label 'nightshift.sweep=night one'"), "{l}");
        assert!(l.contains("device=$CUDA_VISIBLE_DEVICES"), "{l}");
        assert!(l.contains("trap 'docker rm -f"), "{l}");
        assert!(l.ends_with("rc=$?\n"));
    }

    #[test]
    fn apptainer_and_pyxis_take_the_image_their_way() {
        let a = lines(Launcher::Apptainer, &c());
        assert!(a.contains("apptainer exec --nv --writable-tmpfs"), "{a}");
        assert!(a.contains("docker://org/vllm-bench:abc"), "{a}");
        let mut sif = c();
        sif.image = "/images/vllm.sif".into();
        assert!(lines(Launcher::Apptainer, &sif).contains(" /images/vllm.sif"));
        let p = lines(Launcher::Pyxis, &c());
        assert!(p.contains("--container-image=org/vllm-bench:abc"), "{p}");
        assert!(
            p.contains(
                "--container-mounts=\"$J:/nightshift/job\",\"/data/hf:/root/.cache/huggingface\""
            ),
            "{p}"
        );
    }
}
