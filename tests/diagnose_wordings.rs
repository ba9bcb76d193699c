//! Diagnosis by mechanism: each known failure, worded as different vLLM versions, client
//! libraries and harnesses word it, lands in its category. The logs are our own, written
//! in the shapes public reports show (no third-party text); a property test then puts
//! generated line prefixes in front of every line and expects the same diagnosis.

mod support;

use nightshift::category::Category;
use nightshift::diagnose::{diagnose_text, Catalog};
use proptest::prelude::*;
use std::sync::OnceLock;

fn catalog() -> &'static Catalog {
    static C: OnceLock<Catalog> = OnceLock::new();
    C.get_or_init(Catalog::builtin)
}

/// (category, a short log in one wording).
const LOGS: &[(Category, &str)] = &[
    // --- gated / auth: the Hub's 401/403 through any client library.
    (Category::GatedModelAuth, "Traceback (most recent call last):\n  File \"/app/dl.py\", line 4, in <module>\nrequests.exceptions.HTTPError: 403 Client Error: Forbidden for url: https://huggingface.co/org/model-x/resolve/main/config.json\n"),
    (Category::GatedModelAuth, "httpx.HTTPStatusError: Client error '401 Unauthorized' for url 'https://huggingface.co/org/model-x/resolve/main/tokenizer.json'\n"),
    (Category::GatedModelAuth, "aiohttp.client_exceptions.ClientResponseError: 403, message='Forbidden', url=URL('https://huggingface.co/org/model-x/resolve/main/model.safetensors')\n"),
    (Category::GatedModelAuth, "Error: request error: https://huggingface.co/org/model-x/resolve/main/config.json: status code 401\n"),
    (Category::GatedModelAuth, "OSError: org/model-x is a gated repository. Make sure to request access and pass a token\n"),
    (Category::GatedModelAuth, "Access to model org/model-x is restricted and you are not in the authorized list. Visit https://huggingface.co/org/model-x to ask for access.\n"),
    (Category::GatedModelAuth, "huggingface_hub.errors.HfHubHTTPError: 403 Forbidden: Please enable access to public gated repositories in your fine-grained token settings to view this repository.\n"),
    // --- a harness that gave up waiting for the server.
    (Category::ServerStartTimeout, "tests/utils.py:120: in __init__\n    self._wait_for_server(url=self.url_for(\"health\"), timeout=max_wait_seconds)\nE   RuntimeError: Server failed to start in time.\n"),
    (Category::ServerStartTimeout, "RuntimeError: Server failed to start within 900 seconds\n"),
    (Category::ServerStartTimeout, "2025-01-02 03:04:05.678 [Error] (Wrapper) vllm-server failed to start within timeout\n"),
    (Category::ServerStartTimeout, "ERROR: vLLM server did not become ready after 1800s, giving up\n"),
    (Category::ServerStartTimeout, "TimeoutError: timed out waiting for the vllm server to come up\n"),
    // --- disk: free-space warnings and ENOSPC from any library.
    (Category::DiskFull, "/usr/lib/python3/site-packages/huggingface_hub/file_download.py:900: UserWarning: Not enough free disk space to download the file. The expected file size is: 4800.00 MB. The target location /root/.cache/huggingface/hub only has 120.50 MB free disk space.\n"),
    (Category::DiskFull, "safetensors_rust.SafetensorError: Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: \"No space left on device\" })\n"),
    (Category::DiskFull, "OSError: [Errno 122] Disk quota exceeded: '/data/hf/blobs/abc.incomplete'\n"),
    (Category::DiskFull, "failed to register layer: write /var/lib/docker/overlay2/x/diff/usr/lib/libx.so: no space left on device\n"),
    (Category::DiskFull, "error: failed to write /tmp/build/out.o (os error 28)\n"),
    // --- patches: every git-apply / patch(1) failure.
    (Category::AgentPatchFailed, "Checking patch vllm/worker/model_runner.py...\nerror: while searching for:\n    def forward(self):\nerror: patch failed: vllm/worker/model_runner.py:120\nerror: vllm/worker/model_runner.py: patch does not apply\n"),
    (Category::AgentPatchFailed, "patching file vllm/config.py\nHunk #2 FAILED at 311.\n1 out of 3 hunks FAILED -- saving rejects to file vllm/config.py.rej\n"),
    (Category::AgentPatchFailed, "patch: **** malformed patch at line 42: @@ -10,7 +10,8 @@\n"),
    (Category::AgentPatchFailed, "error: corrupt patch at line 17\n"),
    (Category::AgentPatchFailed, "Patch Apply Failed: agent.diff (exit status 1)\n"),
    // --- the client's connection to a server that went away.
    (Category::BrokenPipe, "Traceback (most recent call last):\n  File \"/app/benchmarks/backend_request_func.py\", line 260, in async_request_openai_completions\n    async with session.post(url=api_url, json=payload) as response:\naiohttp.client_exceptions.ClientOSError: [Errno 104] Connection reset by peer\n"),
    (Category::BrokenPipe, "aiohttp.client_exceptions.ServerDisconnectedError: Server disconnected\n"),
    (Category::BrokenPipe, "requests.exceptions.ConnectionError: ('Connection aborted.', RemoteDisconnected('Remote end closed connection without response'))\n"),
    (Category::BrokenPipe, "httpx.RemoteProtocolError: peer closed connection without sending complete message body (incomplete chunked read)\n"),
    (Category::BrokenPipe, "requests.exceptions.ChunkedEncodingError: (\"Connection broken: ConnectionResetError(104, 'Connection reset by peer')\", ConnectionResetError(104, 'Connection reset by peer'))\n"),
    // --- pyairports: resolver conflicts naming it.
    (Category::PyairportsMissing, "ERROR: Cannot install vllm==0.6.3 because these package versions have conflicting dependencies.\nThe conflict is caused by:\n    outlines 0.0.46 depends on pyairports\nERROR: ResolutionImpossible: for help visit https://pip.pypa.io/en/latest/topics/dependency-resolution/\n"),
    (Category::PyairportsMissing, "ERROR: Could not find a version that satisfies the requirement pyairports (from versions: none)\nERROR: No matching distribution found for pyairports\n"),
    (Category::PyairportsMissing, "  × No solution found when resolving dependencies:\n  ╰─▶ Because pyairports was not found in the package registry and outlines==0.0.46 depends on pyairports, we can conclude that outlines==0.0.46 cannot be used.\n"),
    // --- NumPy 1.x/2.x guards, from numpy, numba, pandas, scipy, old C extensions.
    (Category::NumpyAbi, "  File \"/usr/lib/python3/site-packages/numba/__init__.py\", line 45, in _ensure_critical_deps\nImportError: Numba needs NumPy 2.0 or less. Got NumPy 2.1.\n"),
    (Category::NumpyAbi, "ValueError: numpy.dtype size changed, may indicate binary incompatibility. Expected 96 from C header, got 88 from PyObject\n"),
    (Category::NumpyAbi, "RuntimeError: module compiled against ABI version 0x1000009 but this version of numpy is 0x2000000\n"),
    (Category::NumpyAbi, "UserWarning: A NumPy version >=1.22.4 and <2.3.0 is required for this version of SciPy (detected version 2.3.1)\n"),
    (Category::NumpyAbi, "AttributeError: `np.float_` was removed in the NumPy 2.0 release. Use `np.float64` instead.\n"),
    // --- OOM in its CUDA and PyTorch forms.
    (Category::CudaOom, "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 79.10 GiB total capacity)\n"),
    (Category::CudaOom, "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB\n"),
    (Category::CudaOom, "RuntimeError: Triton Error [CUDA]: out of memory\n"),
    (Category::CudaOom, "gpu-1:392:494 [2] enqueue.cc:43 NCCL WARN Cuda failure 'out of memory'\n"),
    (Category::CudaOom, "RuntimeError: [TensorRT-LLM][ERROR] CUDA runtime error in ::cudaMallocAsync(ptr, n, stream): out of memory\n"),
    (Category::CudaOom, "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: CUDA_ERROR_OUT_OF_MEMORY: out of memory\n"),
    // --- capture that stops making progress, judged by the time between capture lines.
    (Category::CudaGraphCaptureTimeout, "INFO 01-14 01:49:37 [kv_cache_utils.py:1] GPU KV cache size: 521,088 tokens\nINFO 01-14 01:49:38 [gpu_model_runner.py:1] Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):   0%|          | 0/67 [00:00<?, ?it/s]\nINFO 01-14 01:49:39 [gpu_model_runner.py:1] Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):   1%|          | 1/67 [00:01<01:06, 1.00it/s]\nINFO 01-14 02:49:40 [launcher.py:1] Shutting down FastAPI HTTP server.\nINFO 01-14 02:49:41 [launcher.py:1] Received SIGTERM\n"),
    (Category::CudaGraphCaptureTimeout, "INFO 05-01 10:00:00 model_runner.py:1] Capturing cudagraphs for decoding.\nCapturing CUDA graph shapes:  40%|####      | 14/35 [00:06<00:09, 2.30it/s]\nE   RuntimeError: Server failed to start in time.\n"),
];

#[test]
fn every_wording_lands_in_its_category() {
    let catalog = catalog();
    let mut wrong = Vec::new();
    for (want, log) in LOGS {
        let d = diagnose_text(catalog, log.as_bytes());
        if d.category != *want {
            wrong.push(format!(
                "want {want}, got {} ({:?})\n{log}",
                d.category, d.evidence
            ));
        }
        // The evidence is a line of the log, as written.
        if !log.lines().any(|l| l == d.evidence) {
            wrong.push(format!("evidence {:?} is not a line of\n{log}", d.evidence));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n---\n"));
}

#[test]
fn every_new_category_has_wordings() {
    for c in [
        Category::GatedModelAuth,
        Category::ServerStartTimeout,
        Category::DiskFull,
        Category::AgentPatchFailed,
        Category::BrokenPipe,
        Category::PyairportsMissing,
        Category::NumpyAbi,
        Category::CudaOom,
        Category::CudaGraphCaptureTimeout,
    ] {
        assert!(LOGS.iter().filter(|(k, _)| *k == c).count() >= 2, "{c}");
    }
}

/// Near misses: lines that share words with a signature but are not the failure.
#[test]
fn near_misses_stay_out() {
    let catalog = catalog();
    for (not, log) in [
        (Category::GatedModelAuth, "INFO 01-01 00:00:00 a.py:1] Downloading https://huggingface.co/org/model-x/resolve/main/model-00001-of-00004.safetensors (4013 MB)\n"),
        (Category::DiskFull, "INFO 01-01 00:00:00 a.py:1] Free disk space: 812.4 GB\n"),
        (Category::CudaOom, "INFO 01-01 00:00:00 a.py:1] If out-of-memory error occurs during cudagraph capture, consider decreasing gpu_memory_utilization\n"),
        (Category::ServerStartTimeout, "INFO 01-01 00:00:00 a.py:1] Waiting for server to start (timeout 600 s)\n"),
        (Category::CudaGraphCaptureTimeout, "INFO 01-14 01:49:38 [r.py:1] Capturing CUDA graphs (PIECEWISE):  50%|#  | 1/2 [00:01<00:01]\nINFO 01-14 01:49:39 [r.py:1] Graph capturing finished in 2 secs, took 0.20 GiB\nINFO 01-14 03:00:00 [r.py:1] Shutting down\n"),
    ] {
        let d = diagnose_text(catalog, log.as_bytes());
        assert_ne!(d.category, not, "{log}");
    }
}

fn prefix() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[a-z][a-z0-9_-]{0,10}".prop_map(|n| format!("{n}  | ")),
        (0u32..24, 0u32..60).prop_map(|(h, m)| format!("2025-03-07T{h:02}:{m:02}:27.269Z ")),
        (0u32..8).prop_map(|r| format!("[rank{r}]: ")),
        (1u32..99999).prop_map(|p| format!("(APIServer pid={p}) ")),
        Just("\x1b[36m(VllmWorker TP0 pid=7)\x1b[0m ".to_string()),
        Just("> ".to_string()),
        Just("Error: ".to_string()),
    ]
}

proptest! {
    #![proptest_config(support::config())]

    /// The same log behind a prefix on every line gets the same category.
    #[test]
    fn prefixes_do_not_change_the_category(i in 0..LOGS.len(), p in prefix(), crlf in any::<bool>()) {
        let (want, log) = LOGS[i];
        // A fixed timestamp on every line would say no time passed, contradicting the
        // times a capture stall is judged by; real prefixes carry the real clock.
        prop_assume!(!(want == Category::CudaGraphCaptureTimeout && p.starts_with("2025")));
        let eol = if crlf { "\r\n" } else { "\n" };
        let text: String = log.lines().map(|l| format!("{p}{l}{eol}")).collect();
        let d = diagnose_text(catalog(), text.as_bytes());
        prop_assert_eq!(d.category, want, "{}", text);
    }
}

/// A failure no signature explains shows the final line of the last traceback and the
/// first ERROR line; every diagnosis carries a confidence that ranks how it was decided.
#[test]
fn other_shows_its_telling_lines_and_confidence_ranks_the_way_of_deciding() {
    let log = "INFO 01-01 00:00:00 a.py:1] starting\n\
        ERROR 01-01 00:00:01 b.py:2] worker 3 lost its heartbeat\n\
        Traceback (most recent call last):\n  File \"/x.py\", line 1, in <module>\n\
        ValueError: weights shard 3 has an unexpected dtype\n\
        Traceback (most recent call last):\n  File \"/y.py\", line 9, in run\n\
        RuntimeError: engine loop exited unexpectedly\n";
    let d = diagnose_text(catalog(), log.as_bytes());
    assert_eq!(d.category, Category::Other);
    assert_eq!(
        d.evidence,
        "ValueError: weights shard 3 has an unexpected dtype"
    );
    assert_eq!(
        d.telling,
        vec![
            "RuntimeError: engine loop exited unexpectedly".to_string(),
            "ERROR 01-01 00:00:01 b.py:2] worker 3 lost its heartbeat".to_string(),
        ]
    );
    let oom = diagnose_text(catalog(), LOGS[0].1.as_bytes());
    assert!(oom.telling.is_empty());
    assert!(oom.confidence > 0.8, "{}", oom.confidence);
    let symptom = diagnose_text(catalog(), b"BrokenPipeError: [Errno 32] Broken pipe\n");
    assert!(symptom.confidence < oom.confidence && symptom.confidence > d.confidence);
    assert!(d.confidence > 0.0);
}
