//! Containers: one per run, labelled so leftovers of a sweep can be found; created with the
//! run's GPUs, shm/ipc, HF cache, token and a published server port; torn down with a grace
//! period, then killed, then removed.

use crate::runtime::RunJob;
use bollard::models::{ContainerCreateBody, DeviceRequest, HostConfig, PortBinding};
use bollard::query_parameters::{
    CreateContainerOptions, KillContainerOptions, ListContainersOptions, RemoveContainerOptions,
    StopContainerOptions,
};
use bollard::Docker;
use std::collections::HashMap;

pub use crate::model::labels::{LABEL_KEY, LABEL_RUN, LABEL_SWEEP};
pub const LABEL_COMMIT: &str = "nightshift.commit";
pub const LABEL_VARIANT: &str = "nightshift.variant";
pub const LABEL_ATTEMPT: &str = "nightshift.attempt";
pub const LABEL_ROLE: &str = "nightshift.role";

/// Where the HF cache is mounted (the image's default `HF_HOME` parent for root).
pub const HF_CACHE_IN_CONTAINER: &str = "/root/.cache/huggingface";

pub fn labels(job: &RunJob, role: &str) -> HashMap<String, String> {
    HashMap::from([
        (LABEL_SWEEP.into(), job.sweep.clone()),
        (LABEL_RUN.into(), job.run.0.to_string()),
        (LABEL_KEY.into(), job.key.clone()),
        (LABEL_COMMIT.into(), job.commit.clone()),
        (LABEL_VARIANT.into(), job.variant.to_string()),
        (LABEL_ATTEMPT.into(), job.attempt.to_string()),
        (LABEL_ROLE.into(), role.into()),
    ])
}

/// A container name unique per sweep, run, attempt and role (Docker names: `[a-zA-Z0-9_.-]`).
pub fn name(job: &RunJob, role: &str) -> String {
    let raw = format!("ns-{}-{}-a{}-{role}", job.sweep, job.key, job.attempt);
    let mut s: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if s.len() > 200 {
        s.truncate(200);
    }
    s
}

/// "16g", "512m", "1024" → bytes.
pub(crate) fn parse_size(s: &str) -> Option<i64> {
    let s = s.trim().to_ascii_lowercase();
    let s = s.strip_suffix('b').unwrap_or(&s);
    let (num, mult) = match s.chars().last()? {
        'k' => (&s[..s.len() - 1], 1i64 << 10),
        'm' => (&s[..s.len() - 1], 1 << 20),
        'g' => (&s[..s.len() - 1], 1 << 30),
        't' => (&s[..s.len() - 1], 1 << 40),
        _ => (s, 1),
    };
    let n: f64 = num.trim().parse().ok()?;
    Some((n * mult as f64) as i64)
}

/// Everything about a run container except its command.
pub struct Spec {
    pub image: String,
    pub entrypoint: Vec<String>,
    pub env: Vec<String>,
    pub labels: HashMap<String, String>,
    pub gpus: Vec<u32>,
    pub shm_size: Option<i64>,
    pub ipc: Option<String>,
    pub binds: Vec<String>,
    /// Container port to publish on 127.0.0.1 with an ephemeral host port.
    pub port: Option<u16>,
    pub workdir: Option<String>,
}

pub async fn create(
    docker: &Docker,
    name: &str,
    spec: Spec,
) -> Result<String, bollard::errors::Error> {
    let device_requests = (!spec.gpus.is_empty()).then(|| {
        vec![DeviceRequest {
            driver: Some("nvidia".into()),
            device_ids: Some(spec.gpus.iter().map(|g| g.to_string()).collect()),
            capabilities: Some(vec![vec!["gpu".into()]]),
            ..Default::default()
        }]
    });
    let port_key = spec.port.map(|p| format!("{p}/tcp"));
    let port_bindings = port_key.as_ref().map(|k| {
        HashMap::from([(
            k.clone(),
            Some(vec![PortBinding {
                host_ip: Some("127.0.0.1".into()),
                host_port: Some(String::new()),
            }]),
        )])
    });
    let host_config = HostConfig {
        device_requests,
        shm_size: spec.shm_size,
        ipc_mode: spec.ipc,
        binds: (!spec.binds.is_empty()).then_some(spec.binds),
        port_bindings,
        ..Default::default()
    };
    let body = ContainerCreateBody {
        image: Some(spec.image),
        entrypoint: Some(spec.entrypoint),
        cmd: Some(Vec::new()),
        env: Some(spec.env),
        labels: Some(spec.labels),
        exposed_ports: port_key.map(|k| vec![k]),
        working_dir: spec.workdir,
        host_config: Some(host_config),
        ..Default::default()
    };
    let r = docker
        .create_container(
            Some(CreateContainerOptions {
                name: Some(name.to_string()),
                ..Default::default()
            }),
            body,
        )
        .await?;
    Ok(r.id)
}

/// The host port Docker picked for `port`/tcp.
pub(crate) async fn host_port(docker: &Docker, id: &str, port: u16) -> Option<u16> {
    let c = docker.inspect_container(id, None).await.ok()?;
    let ports = c.network_settings?.ports?;
    let bindings = ports.get(&format!("{port}/tcp"))?.as_ref()?;
    bindings
        .iter()
        .find_map(|b| b.host_port.as_deref().and_then(|p| p.parse().ok()))
}

/// Stop (SIGTERM, `grace_s` seconds), kill if that failed, remove. Quiet when the container
/// is already gone. Returns what happened, for the Docker log.
pub async fn teardown(docker: &Docker, name: &str, grace_s: i32) -> Option<String> {
    let stop = docker
        .stop_container(
            name,
            Some(StopContainerOptions {
                t: Some(grace_s),
                ..Default::default()
            }),
        )
        .await;
    let mut what = Vec::new();
    match stop {
        Ok(()) => what.push("stopped"),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => return None,
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 304, ..
        }) => {}
        Err(_) => {
            let _ = docker
                .kill_container(
                    name,
                    Some(KillContainerOptions {
                        signal: "SIGKILL".into(),
                    }),
                )
                .await;
            what.push("killed");
        }
    }
    match docker
        .remove_container(
            name,
            Some(RemoveContainerOptions {
                force: true,
                v: true,
                ..Default::default()
            }),
        )
        .await
    {
        Ok(()) => what.push("removed"),
        Err(e) => return Some(format!("container {name}: removing failed: {e}")),
    }
    Some(format!("container {name}: {}", what.join(", ")))
}

/// Containers of `sweep` (any state).
pub(crate) async fn of_sweep(
    docker: &Docker,
    sweep: &str,
) -> Result<Vec<(String, String)>, bollard::errors::Error> {
    labelled(docker, vec![format!("{LABEL_SWEEP}={sweep}")]).await
}

/// The containers of one attempt of one run (any role).
pub(crate) async fn of_attempt(
    docker: &Docker,
    job: &RunJob,
) -> Result<Vec<(String, String)>, bollard::errors::Error> {
    labelled(
        docker,
        vec![
            format!("{LABEL_SWEEP}={}", job.sweep),
            format!("{LABEL_KEY}={}", job.key),
            format!("{LABEL_ATTEMPT}={}", job.attempt),
        ],
    )
    .await
}

/// (id, name) of every container carrying all of `labels` (`k=v`).
async fn labelled(
    docker: &Docker,
    labels: Vec<String>,
) -> Result<Vec<(String, String)>, bollard::errors::Error> {
    let list = docker
        .list_containers(Some(ListContainersOptions {
            all: true,
            filters: Some(HashMap::from([("label".to_string(), labels)])),
            ..Default::default()
        }))
        .await?;
    Ok(list
        .into_iter()
        .map(|c| {
            let name = c
                .names
                .and_then(|n| n.into_iter().next())
                .unwrap_or_default()
                .trim_start_matches('/')
                .to_string();
            (c.id.unwrap_or_default(), name)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("16g"), Some(16 << 30));
        assert_eq!(parse_size("512m"), Some(512 << 20));
        assert_eq!(parse_size("1024"), Some(1024));
        assert_eq!(parse_size("x"), None);
    }
}
