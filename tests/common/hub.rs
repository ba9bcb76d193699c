//! A local HTTP server standing in for the Hugging Face Hub: the endpoints hf-hub and
//! nightshift call (model info with `?blobs=true`, `resolve` with `etag`/`x-repo-commit`
//! headers and range requests), gated repos, Hub-style CDN redirects, request counts.
//! Nothing leaves 127.0.0.1.

use nightshift::prefetch::Hub;
use sha2::{Digest, Sha256};
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The token the stand-in Hub accepts for gated repos.
pub const HUB_TOKEN: &str = "hf_TESTtokenDoNotLeak0123456789abcdef";

#[derive(Clone, Debug)]
pub struct Req {
    pub method: String,
    pub path: String,
    pub auth: Option<String>,
    pub range: Option<String>,
}

#[derive(Clone)]
pub struct RepoData {
    pub commit: String,
    /// Name, content, sha256 of the content (hashed once: 200 MiB files are served).
    pub files: Vec<(String, Arc<Vec<u8>>, String)>,
}

#[derive(Default)]
pub struct State {
    /// Answer `resolve` of LFS files as the Hub does: a redirect to another host (here
    /// `localhost` instead of `127.0.0.1`) that serves `/cdn/<sha256>`.
    pub redirect_lfs: std::sync::atomic::AtomicBool,
    /// Answer `resolve` of small files as the real Hub does (seen 2026): a 307 to a path of
    /// its own, `/api/resolve-cache/models/<repo>/<commit>/<file>`, which serves it.
    pub redirect_small: std::sync::atomic::AtomicBool,
    /// Model info without sizes and blob ids (`?blobs=true` ignored), as a bare mirror
    /// might answer: nightshift must probe each file.
    pub hide_sizes: std::sync::atomic::AtomicBool,
    pub port: std::sync::atomic::AtomicU16,
    pub repos: Mutex<HashMap<String, RepoData>>,
    pub gated: Mutex<HashSet<String>>,
    pub log: Mutex<Vec<Req>>,
}

/// The stand-in Hub: one thread per connection, `Connection: close`.
pub struct FakeHub {
    pub url: String,
    pub st: Arc<State>,
}

impl FakeHub {
    pub fn start() -> FakeHub {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let st = Arc::new(State::default());
        st.port
            .store(listener.local_addr().unwrap().port(), Ordering::Relaxed);
        let s = st.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let s = s.clone();
                std::thread::spawn(move || serve(conn, &s));
            }
        });
        FakeHub { url, st }
    }

    /// `key` is `org/name` for a model, `datasets/org/name` for a dataset.
    pub fn add(&self, key: &str, commit: &str, files: &[(&str, Vec<u8>)]) {
        let files = files
            .iter()
            .map(|(n, b)| (n.to_string(), Arc::new(b.clone()), sha256(b)))
            .collect();
        self.st.repos.lock().unwrap().insert(
            key.into(),
            RepoData {
                commit: commit.into(),
                files,
            },
        );
    }

    pub fn gate(&self, key: &str) {
        self.st.gated.lock().unwrap().insert(key.into());
    }

    pub fn requests(&self) -> Vec<Req> {
        self.st.log.lock().unwrap().clone()
    }

    /// Requests that moved file content (not a 1-byte size probe).
    pub fn content_gets(&self) -> usize {
        self.requests()
            .iter()
            .filter(|r| {
                r.method == "GET"
                    && r.path.contains("/resolve/")
                    && r.range.as_deref() != Some("bytes=0-0")
            })
            .count()
    }

    /// Requests for weight files' content.
    pub fn weight_gets(&self) -> usize {
        self.requests()
            .iter()
            .filter(|r| r.method == "GET" && r.path.ends_with(".safetensors"))
            .count()
    }

    pub fn hub(&self, cache: &Path, token: Option<&str>) -> Hub {
        Hub::new(&self.url, token.map(str::to_string), cache.join("hub"))
            .unwrap()
            .with_retries(1)
    }
}

pub fn sha256(b: &[u8]) -> String {
    Sha256::digest(b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

pub fn is_lfs(name: &str) -> bool {
    name.ends_with(".safetensors") || name.ends_with(".bin") || name.ends_with(".gguf")
}

/// The blob name: the sha256 for LFS files, a git-oid-like id for the rest.
pub fn blob_id(name: &str, sha: &str) -> String {
    if is_lfs(name) {
        sha.to_string()
    } else {
        sha[..40].to_string()
    }
}

pub fn serve(mut conn: TcpStream, st: &State) {
    conn.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let mut rd = BufReader::new(conn.try_clone().unwrap());
    let mut line = String::new();
    if rd.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let target = parts.next().unwrap_or("").to_string();
    let mut headers = HashMap::new();
    loop {
        let mut h = String::new();
        if rd.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    st.log.lock().unwrap().push(Req {
        method: method.clone(),
        path: path.to_string(),
        auth: headers.get("authorization").cloned(),
        range: headers.get("range").cloned(),
    });
    let authed =
        headers.get("authorization").map(String::as_str) == Some(&format!("Bearer {HUB_TOKEN}"));
    let mut reply = |status: u16, extra: Vec<(&'static str, String)>, body: &[u8]| {
        let mut head = format!(
            "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n",
            body.len()
        );
        for (k, v) in extra {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        let _ = conn.write_all(head.as_bytes());
        if method != "HEAD" {
            let _ = conn.write_all(body);
        }
    };
    let err = |code: &str| vec![("x-error-code", code.to_string())];
    let repos = st.repos.lock().unwrap().clone();
    if let Some(rest) = path.strip_prefix("/api/models/") {
        let (id, rev) = rest.split_once("/revision/").unwrap_or((rest, "main"));
        let Some(repo) = repos.get(id) else {
            return reply(404, err("RepoNotFound"), b"Repository not found");
        };
        if rev != "main" && rev != repo.commit {
            return reply(404, err("RevisionNotFound"), b"Invalid rev id");
        }
        let blobs = query.contains("blobs=true") && !st.hide_sizes.load(Ordering::Relaxed);
        let siblings: Vec<serde_json::Value> = repo
            .files
            .iter()
            .map(|(n, b, sha)| {
                let mut s = serde_json::json!({ "rfilename": n });
                if blobs {
                    s["size"] = b.len().into();
                    s["blobId"] = sha[..40].into();
                    if is_lfs(n) {
                        s["lfs"] =
                            serde_json::json!({"sha256": sha, "size": b.len(), "pointerSize": 134});
                    }
                }
                s
            })
            .collect();
        let body = serde_json::json!({"id": id, "sha": repo.commit, "siblings": siblings});
        return reply(
            200,
            vec![("content-type", "application/json".into())],
            body.to_string().as_bytes(),
        );
    }
    if let Some(sha) = path.strip_prefix("/cdn/") {
        let found = repos
            .values()
            .flat_map(|r| r.files.iter())
            .find(|(_, _, s)| s == sha)
            .map(|(_, d, _)| d.clone());
        return match found {
            Some(data) => send_range(&headers, &data, vec![], &mut reply),
            None => reply(404, vec![], b"no such object"),
        };
    }
    if let Some(rest) = path.strip_prefix("/api/resolve-cache/models/") {
        // <org>/<name>/<commit>/<file>
        let parts: Vec<&str> = rest.splitn(4, '/').collect();
        let found = (parts.len() == 4)
            .then(|| repos.get(&format!("{}/{}", parts[0], parts[1])))
            .flatten()
            .filter(|r| r.commit == parts[2])
            .and_then(|r| {
                r.files
                    .iter()
                    .find(|(n, _, _)| n == parts[3])
                    .map(|f| (r, f))
            });
        return match found {
            Some((repo, (name, data, sha))) => {
                let h = vec![
                    ("etag", format!("\"{}\"", blob_id(name, sha))),
                    ("x-repo-commit", repo.commit.clone()),
                ];
                send_range(&headers, data, h, &mut reply)
            }
            None => reply(404, vec![], b"Entry not found"),
        };
    }
    let Some((left, right)) = path.split_once("/resolve/") else {
        return reply(404, vec![], b"no route");
    };
    let key = left.trim_start_matches('/');
    let Some(repo) = repos.get(key) else {
        return reply(401, err("RepoNotFound"), b"Repository not found");
    };
    if st.gated.lock().unwrap().contains(key) && !authed {
        let body = format!("Access to model {key} is restricted. You must have access to it and be authenticated to access it. Please log in.");
        return reply(401, err("GatedRepo"), body.as_bytes());
    }
    let (rev, file) = right.split_once('/').unwrap_or((right, ""));
    if rev != "main" && rev != repo.commit {
        return reply(404, err("RevisionNotFound"), b"Invalid rev id");
    }
    let Some((name, data, sha)) = repo.files.iter().find(|(n, _, _)| n == file) else {
        return reply(404, err("EntryNotFound"), b"Entry not found");
    };
    if is_lfs(name) && st.redirect_lfs.load(Ordering::Relaxed) {
        let port = st.port.load(Ordering::Relaxed);
        let h = vec![
            ("location", format!("http://localhost:{port}/cdn/{sha}")),
            ("x-linked-etag", format!("\"{sha}\"")),
            ("x-linked-size", data.len().to_string()),
            ("x-repo-commit", repo.commit.clone()),
        ];
        return reply(302, h, b"");
    }
    if !is_lfs(name) && st.redirect_small.load(Ordering::Relaxed) {
        let h = vec![
            (
                "location",
                format!("/api/resolve-cache/models/{key}/{}/{name}", repo.commit),
            ),
            ("x-repo-commit", repo.commit.clone()),
        ];
        return reply(307, h, b"");
    }
    let h = vec![
        ("etag", format!("\"{}\"", blob_id(name, sha))),
        ("x-repo-commit", repo.commit.clone()),
    ];
    send_range(&headers, data, h, &mut reply)
}

/// 200 with the whole body, or 206 with the asked range.
pub fn send_range(
    headers: &HashMap<String, String>,
    data: &[u8],
    mut h: Vec<(&'static str, String)>,
    reply: &mut impl FnMut(u16, Vec<(&'static str, String)>, &[u8]),
) {
    let len = data.len();
    h.push(("accept-ranges", "bytes".into()));
    match headers.get("range").and_then(|r| r.strip_prefix("bytes=")) {
        Some(r) => {
            let (a, b) = r.split_once('-').unwrap();
            let a: usize = a.parse().unwrap();
            // hf-hub asks one byte past the end for its last chunk: clamp, as the Hub does.
            let b = b.parse::<usize>().map_or(len - 1, |b| b.min(len - 1));
            h.push(("content-range", format!("bytes {a}-{b}/{len}")));
            reply(206, h, &data[a..=b])
        }
        None => reply(200, h, data),
    }
}

pub fn tiny_model() -> Vec<(&'static str, Vec<u8>)> {
    let index = br#"{"metadata":{"total_size":3000},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}}"#;
    vec![
        (".gitattributes", b"*.safetensors filter=lfs".to_vec()),
        ("README.md", b"# tiny".to_vec()),
        (
            "config.json",
            br#"{"architectures":["LlamaForCausalLM"]}"#.to_vec(),
        ),
        ("tokenizer.json", br#"{"model":{}}"#.to_vec()),
        ("model-00001-of-00002.safetensors", vec![1u8; 2000]),
        ("model-00002-of-00002.safetensors", vec![2u8; 1000]),
        ("model.safetensors.index.json", index.to_vec()),
        ("consolidated.safetensors", vec![3u8; 3000]),
        ("original/consolidated.00.pth", vec![4u8; 500]),
        ("tiny-Q4.gguf", vec![5u8; 700]),
    ]
}
