//! The dataset a benchmark client opens: named files mounted read-only, the era's default
//! applied, what is missing refused with where to get it.

use super::*;

const SHAREGPT_HINT: &str = "set `sharegpt = \"/path/ShareGPT_V3_unfiltered_cleaned_split.json\"` under [datasets] (`nightshift prefetch PLAN` downloads it)";

fn mount_for(name: &str, host: &Path) -> Mount {
    let base = host
        .file_name()
        .map(|b| b.to_string_lossy().into_owned())
        .unwrap_or_else(|| name.to_string());
    Mount {
        name: name.into(),
        host: host.to_path_buf(),
        container: format!("{DATASET_DIR}/{base}"),
    }
}

/// The dataset the client will open: named ones are mounted, the era's default applied.
pub(super) fn datasets(
    kind: BenchKind,
    client: &mut Vec<Flag>,
    facts: &Facts,
    rewrites: &mut Vec<Rewrite>,
    hub: &mut Vec<String>,
) -> Result<Vec<Mount>, Refusal> {
    let mut mounts = Vec::new();
    let sharegpt = facts.datasets.get("sharegpt");
    let missing = |what: &str| Refusal {
        dataset: true,
        reason: format!("{what}: {SHAREGPT_HINT}"),
    };
    let path_flag = if facts.client.accepts("--dataset-path") {
        "--dataset-path"
    } else {
        "--dataset"
    };
    let name = value_of(client, "--dataset-name").map(str::to_string);
    let path = value_of(client, "--dataset-path")
        .or(value_of(client, "--dataset"))
        .map(str::to_string);
    let modern = facts.client.accepts("--dataset-name");
    if name.is_some() && !modern {
        // An older client: ShareGPT is `--dataset PATH`; other names did not exist yet.
        if name.as_deref() != Some("sharegpt") || !facts.client.accepts("--dataset") {
            return Err(refuse(format!(
                "--dataset-name is not accepted by this era's {} client",
                kind.as_str()
            )));
        }
        client.retain(|f| f.name != "--dataset-name");
        rewrites.push(rw(
            "dataset",
            "--dataset-name sharegpt",
            "--dataset PATH",
            "before v0.8.0 this client takes ShareGPT as --dataset PATH",
        ));
    }
    let effective = match (&name, kind) {
        (Some(n), _) => Some(n.as_str()),
        (None, BenchKind::Serving)
            if path.is_some() || modern || eras::dataset_required(facts.client) =>
        {
            Some("sharegpt")
        }
        (None, _) if path.is_some() => Some("sharegpt"),
        _ => None,
    };
    match effective {
        Some("sharegpt") => {
            let Some(host) = sharegpt else {
                return Err(missing(if path.is_some() {
                    "the ShareGPT file the command names is not on this box"
                } else {
                    "the command names no dataset, so the client opens ShareGPT"
                }));
            };
            let m = mount_for("sharegpt", host);
            let from = path
                .clone()
                .map(|p| format!("{path_flag} {p}"))
                .unwrap_or_else(|| "(no dataset path)".into());
            if path.as_deref() != Some(m.container.as_str()) {
                rewrites.push(rw(
                    "dataset",
                    from,
                    format!("{path_flag} {}", m.container),
                    format!(
                        "ShareGPT from [datasets] ({}), mounted read-only",
                        host.display()
                    ),
                ));
                client.retain(|f| f.name != "--dataset" || path_flag == "--dataset");
                set_value(client, path_flag, m.container.clone());
            }
            mounts.push(m);
        }
        Some("sonnet") => {
            if let Some(host) = facts.datasets.get("sonnet") {
                let m = mount_for("sonnet", host);
                rewrites.push(rw(
                    "dataset",
                    path.clone().unwrap_or_else(|| "(no dataset path)".into()),
                    format!("--dataset-path {}", m.container),
                    "sonnet from [datasets], mounted read-only",
                ));
                set_value(client, "--dataset-path", m.container.clone());
                mounts.push(m);
            } else if path.as_deref().is_none_or(|p| p.ends_with("sonnet.txt")) {
                let to = format!("{BENCH_DIR}/sonnet.txt");
                if path.as_deref() != Some(to.as_str()) {
                    rewrites.push(rw(
                        "dataset",
                        path.clone().unwrap_or_else(|| "(no dataset path)".into()),
                        "--dataset-path benchmarks/sonnet.txt",
                        "sonnet.txt ships with the benchmark scripts",
                    ));
                    set_value(client, "--dataset-path", to);
                }
            }
        }
        Some("hf") => {
            // A Hub dataset id: vLLM's client picks its loader by that id, so the path is
            // never rewritten; the dataset comes from the Hub, or the HF cache offline.
            if let Some(p) = &path {
                hub.push(p.clone());
            }
        }
        Some(other) => {
            // random needs nothing; custom and the rest name a file that may be provided
            // under [datasets] by that name.
            if let Some(p) = &path {
                if let Some(host) = facts
                    .datasets
                    .get(p.as_str())
                    .or_else(|| facts.datasets.get(other))
                {
                    let m = mount_for(p, host);
                    rewrites.push(rw(
                        "dataset",
                        format!("--dataset-path {p}"),
                        format!("--dataset-path {}", m.container),
                        "from [datasets], mounted read-only",
                    ));
                    set_value(client, "--dataset-path", m.container.clone());
                    mounts.push(m);
                }
            }
        }
        None => {
            if kind == BenchKind::Throughput {
                let has = |f: &str| value_of(client, f).is_some();
                if !has("--input-len") || (!modern && !has("--output-len")) {
                    return Err(refuse(format!(
                        "benchmark_throughput.py with no dataset makes synthetic prompts and needs --input-len{} ",
                        if modern { "" } else { " and --output-len" }
                    ).trim_end().to_string()));
                }
            }
        }
    }
    Ok(mounts)
}
