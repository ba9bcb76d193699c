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
    // --- the model is not on the Hub: huggingface_hub, transformers, vLLM, nightshift's
    // own prefetch (the Hub's 401 for a repository it will not admit exists).
    (Category::ModelNotFound, "Traceback (most recent call last):\n  File \"/usr/local/lib/python3.12/dist-packages/huggingface_hub/utils/_http.py\", line 409, in hf_raise_for_status\nhuggingface_hub.errors.RepositoryNotFoundError: 401 Client Error. (Request ID: Root=1-0000abcd-00112233445566778899aabb;0a0b0c0d-1111-2222-3333-444455556666)\n\nRepository Not Found for url: https://huggingface.co/api/models/org/model-xl/tree/main?recursive=True&expand=False.\nPlease make sure you specified the correct `repo_id` and `repo_type`.\nIf you are trying to access a private or gated repo, make sure you are authenticated.\n"),
    (Category::ModelNotFound, "ERROR 02-11 08:15:02 [core.py:1] EngineCore failed to start.\nOSError: org/model-xl is not a local folder and is not a valid model identifier listed on 'https://huggingface.co/models'\nIf this is a private repository, make sure to pass a token having permission to this repo either by logging in with `huggingface-cli login` or by passing `token=<your_token>`\n"),
    (Category::ModelNotFound, "weights of org/model-xl: 401 Client Error: Repository Not Found for url: https://huggingface.co/api/models/org/model-xl/revision/main. Check that org/model-xl is a model on the Hub; if it is private or gated, set HF_TOKEN to a token that can read it.\n"),
    (Category::ModelNotFound, "requests.exceptions.HTTPError: 404 Client Error: Not Found for url: https://huggingface.co/api/models/org/model-xl/revision/v2\n"),
    // --- the weights alone do not fit the GPUs: nightshift's fit check, vLLM's memory
    // accounting raised as an error, a weight that cannot be allocated.
    (Category::ModelTooLarge, "org/model-xl: model weights (140.0 GiB) are larger than GPU memory × TP (80.0 GiB × 1 = 80.0 GiB): raise --tensor-parallel-size or use GPUs with more memory\n"),
    (Category::ModelTooLarge, "INFO 06-02 11:00:00 [worker.py:1] Memory profiling takes 4.10 seconds\nValueError: Not enough GPU memory: model weights take 141.20GiB; total_gpu_memory (79.10GiB) x gpu_memory_utilization (0.90) = 71.19GiB of GPU memory is usable\n"),
    (Category::ModelTooLarge, "(VllmWorker rank=0 pid=77) ERROR 06-02 11:00:00 [multiproc_executor.py:1] RuntimeError: Failed to create unquantized linear weights: CUDA out of memory. This may be caused by insufficient memory to allocate the weight.\n"),
    (Category::ModelTooLarge, "ValueError: The model weights (152.3 GB) exceed the available GPU memory (79.1 GB); use more GPUs or a quantized checkpoint\n"),
    // --- the server ran offline and needed the Hub.
    (Category::HubOffline, "Traceback (most recent call last):\n  File \"/usr/local/lib/python3.12/dist-packages/huggingface_hub/utils/_http.py\", line 106, in send\nhuggingface_hub.errors.OfflineModeIsEnabled: Cannot reach https://huggingface.co/api/models/org/tok-x/revision/main: offline mode is enabled. To disable it, please unset the `HF_HUB_OFFLINE` environment variable.\n"),
    (Category::HubOffline, "huggingface_hub.errors.LocalEntryNotFoundError: Cannot find an appropriate cached snapshot folder for the specified revision on the local disk and outgoing traffic has been disabled. To enable repo look-ups and downloads online, pass 'local_files_only=False' as input.\n"),
    (Category::HubOffline, "OSError: We couldn't connect to 'https://huggingface.co' to load this file, couldn't find it in the cached files and it looks like org/tok-x is not the path to a directory containing a file named tokenizer_config.json.\nCheckout your internet connection or see how to run the library in offline mode at 'https://huggingface.co/docs/transformers/installation#offline-mode'.\n"),
    (Category::HubOffline, "ConnectionError: Couldn't reach the Hugging Face Hub for dataset 'org/prompts': Offline mode is enabled.\n"),
    // --- the server refuses the option combination on this version.
    (Category::ServerConfigInvalid, "Traceback (most recent call last):\n  File \"/usr/local/lib/python3.10/dist-packages/vllm/config.py\", line 1402, in __post_init__\nValueError: ngram prompt lookup max and min must be provided when speculative_model is '[ngram]'\n"),
    (Category::ServerConfigInvalid, "ValueError: `prompt_lookup_max` must be set to a positive integer for the ngram method, got None\n"),
    (Category::ServerConfigInvalid, "ValueError: Chunked prefill is not supported with prefix caching yet; pass only one of --enable-chunked-prefill and --enable-prefix-caching\n"),
    (Category::ServerConfigInvalid, "NotImplementedError: Prefix caching is not supported with chunked prefill.\n"),
    (Category::ServerConfigInvalid, "pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig\n  Value error, num_speculative_tokens must be provided with speculative model ngram [type=value_error, input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]\n"),
    (Category::ServerConfigInvalid, "vllm serve: error: argument --speculative-config: Value {method: ngram, num_speculative_tokens: 4} cannot be converted to <function loads at 0x7f00deadbeef>.\n"),
    (Category::ServerConfigInvalid, "ValueError: Error parsing --speculative-config: json.decoder.JSONDecodeError: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)\n"),
    // --- rope_scaling: vLLM's own `rope_scaling[\"type\"]`, transformers' and pydantic's checks.
    (Category::RopeScalingIncompatible, "Traceback (most recent call last):\n  File \"/usr/local/lib/python3.10/dist-packages/vllm/model_executor/layers/rotary_embedding.py\", line 714, in get_rope\n    scaling_type = rope_scaling[\"type\"]\nKeyError: 'type'\n"),
    (Category::RopeScalingIncompatible, "ValueError: `rope_scaling` must be a dictionary with two fields, `type` and `factor`, got {'factor': 8.0, 'rope_type': 'llama3', 'high_freq_factor': 4.0}\n"),
    (Category::RopeScalingIncompatible, "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n  Value error, rope_scaling should have a 'rope_type' key [type=value_error, input_value=ArgsKwargs((), {'model': 'org/m'}), input_type=ArgsKwargs]\n"),
    (Category::RopeScalingIncompatible, "ValueError: `rope_scaling`'s type field must be one of ['linear', 'dynamic'], got yarn\n"),
    // --- KV cache: V1's check before any request, in its words.
    (Category::KvCacheTooSmall, "(EngineCore_0 pid=88) ERROR 07-03 09:00:00 [core.py:1] ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the available KV cache memory (9.25 GiB). Based on the available memory, the estimated maximum model length is 75776. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.\n"),
    (Category::KvCacheTooSmall, "ERROR 07-03 09:00:00 [core.py:1] EngineCore failed to start.\nValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.\n"),
    (Category::KvCacheTooSmall, "RuntimeError: insufficient KV cache for the scheduler's token budget (8192 tokens)\n"),
    // --- NCCL: its own errors, torch's wrappers and watchdog.
    (Category::NcclError, "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:317, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\nncclUnhandledCudaError: Call to CUDA function failed.\n"),
    (Category::NcclError, "RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)\n"),
    (Category::NcclError, "node-3:412:530 [1] transport/p2p.cc:275 NCCL WARN Cuda failure 'peer access is not supported between these two devices' unhandled cuda error\n"),
    (Category::NcclError, "[rank0]:[E301 02:00:00.000000000 ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) Rank 0] ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring enqueued collectives.\n"),
    // --- a registry's token endpoint refusing the credentials.
    (Category::RegistryAuth, "Error response from daemon: Get \"https://registry.example.com:5000/token?account=ci&scope=repository%3Aorg%2Fvllm%3Apull&service=registry\": 401 Unauthorized\n"),
    (Category::RegistryAuth, "failed to resolve reference \"ghcr.io/org/vllm:nightly\": failed to authorize: failed to fetch oauth token: unexpected status from GET request to https://ghcr.io/token?scope=repository%3Aorg%2Fvllm%3Apull&service=ghcr.io: 401 Unauthorized\n"),
    (Category::RegistryAuth, "Error response from daemon: Head \"https://registry.example.com/v2/org/vllm/manifests/nightly\": unauthorized: authentication required\n"),
    // --- `vllm bench` refusing its arguments, argparse's way or not.
    (Category::BenchCommandInvalid, "usage: vllm bench serve [-h] [--backend BACKEND] [--dataset-name {sharegpt,random}]\nvllm bench serve: error: argument --dataset-name: invalid choice: 'sharegpt4' (choose from 'sharegpt', 'random')\n"),
    (Category::BenchCommandInvalid, "Traceback (most recent call last):\n  File \"/usr/local/lib/python3.12/dist-packages/vllm/benchmarks/datasets.py\", line 1300, in get_samples\nValueError: Unknown dataset: sharegpt4\n"),
    (Category::BenchCommandInvalid, "error: the following arguments are required: --model\n"),
    (Category::BenchCommandInvalid, "Error: Invalid value for '--request-rate': 'fast' is not a valid float.\n"),
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
        Category::ModelNotFound,
        Category::ModelTooLarge,
        Category::HubOffline,
        Category::ServerConfigInvalid,
        Category::RopeScalingIncompatible,
        Category::KvCacheTooSmall,
        Category::NcclError,
        Category::RegistryAuth,
        Category::BenchCommandInvalid,
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
        // Every start prints vLLM's memory accounting; a negative remainder is the KV cache's.
        (Category::ModelTooLarge, "INFO 01-01 00:00:00 [worker.py:1] model weights take 14.99GiB; non_torch_memory takes 0.20GiB; PyTorch activation peak memory takes 1.23GiB; the rest of the memory reserved for KV Cache is 54.77GiB.\nRuntimeError: engine loop exited unexpectedly\n"),
        (Category::ModelTooLarge, "INFO 01-01 00:00:00 [worker.py:1] model weights take 5.20GiB; non_torch_memory takes 0.03GiB; PyTorch activation peak memory takes 1.42GiB; the rest of the memory reserved for KV Cache is -1.05GiB.\nValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.\n"),
        // Offline warnings of a run that died of something else.
        (Category::HubOffline, "WARNING 01-01 00:00:00 [config.py:1] Error retrieving file list: Cannot reach https://huggingface.co/api/models/org/m/tree/main: offline mode is enabled., retrying 1 of 2\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB\n"),
        (Category::HubOffline, "INFO 01-01 00:00:00 [a.py:1] Offline mode: forcing local_files_only=True\n"),
        // The Hub's not-found message mentions gated repos; a gated repo is not missing.
        (Category::GatedModelAuth, "huggingface_hub.errors.RepositoryNotFoundError: 401 Client Error. (Request ID: Root=1-0000abcd)\nRepository Not Found for url: https://huggingface.co/api/models/org/m.\nIf you are trying to access a private or gated repo, make sure you are authenticated.\n"),
        (Category::ModelNotFound, "OSError: You are trying to access a gated repo.\nMake sure to have access to it at https://huggingface.co/org/m.\n401 Client Error. (Request ID: Root=1-0000abcd)\nCannot access gated repo for url https://huggingface.co/org/m/resolve/main/config.json.\n"),
        // A KeyError: 'type' that no rope lookup raised.
        (Category::RopeScalingIncompatible, "Traceback (most recent call last):\n  File \"/app/bench.py\", line 40, in load_rows\n    kind = row[\"type\"]\nKeyError: 'type'\n"),
        // NCCL's watchdog starting is not NCCL failing.
        (Category::NcclError, "[rank0]:[I301 02:00:00.000000000 ProcessGroupNCCL.cpp:900] [PG ID 0 Rank 0] ProcessGroupNCCL watchdog thread started, heartbeat timeout 480 s\n"),
        // A request that fails validation is not the engine's config.
        (Category::ServerConfigInvalid, "pydantic_core._pydantic_core.ValidationError: 1 validation error for ChatCompletionRequest\n"),
        // A registry's rate limit on its token endpoint, and "pull access denied" (a
        // missing repository and a private one are worded alike: image_not_found).
        (Category::RegistryAuth, "failed to fetch anonymous token: unexpected status from GET request to https://auth.docker.io/token?scope=repository%3Aorg%2Fvllm%3Apull: 429 Too Many Requests\n"),
        (Category::RegistryAuth, "Error response from daemon: pull access denied for org/vllm, repository does not exist or may require 'docker login': denied: requested access to the resource is denied\n"),
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

/// Low confidence marks a wording that more than one failure prints (vLLM's "Invalid
/// repository ID" is both a missing model and an offline cache miss); a root cause by a
/// signature of its own is sure.
#[test]
fn ambiguous_wordings_carry_low_confidence() {
    let weak = diagnose_text(
        catalog(),
        b"ValueError: Invalid repository ID or local directory specified: 'org/model-xl'.\nPlease verify the following requirements:\n",
    );
    assert_eq!(weak.category, Category::ModelNotFound);
    assert!(weak.confidence < 0.5, "{}", weak.confidence);
    for (want, log) in LOGS {
        let d = diagnose_text(catalog(), log.as_bytes());
        if [
            Category::ModelNotFound,
            Category::ModelTooLarge,
            Category::HubOffline,
            Category::ServerConfigInvalid,
        ]
        .contains(want)
        {
            assert!(d.confidence >= 0.5, "{want}: {} for\n{log}", d.confidence);
        }
    }
}

/// What the policy does with the new categories: a model that is not there, too large,
/// or a server option this version refuses ends the model's run (no retry, not the
/// host's fault); a server that needed the Hub offline gets one more try.
#[test]
fn new_categories_have_their_default_actions() {
    use nightshift::category::Action;
    use nightshift::diagnose::RecipeBook;
    use nightshift::policy::{Policy, PolicyConfig};
    let cfg = PolicyConfig::default();
    for c in [
        Category::ModelNotFound,
        Category::ModelTooLarge,
        Category::ServerConfigInvalid,
    ] {
        assert!(cfg.breaker_ignore.contains(&c), "{c}");
    }
    let p = Policy::new(cfg, std::sync::Arc::new(RecipeBook::builtin()));
    for (c, a) in [
        (Category::ModelNotFound, Action::Skip),
        (Category::ModelTooLarge, Action::Skip),
        (Category::ServerConfigInvalid, Action::Skip),
        (Category::HubOffline, Action::Retry),
    ] {
        assert_eq!(p.default_action(c), a, "{c}");
    }
    assert_eq!(p.retry_limit(Category::HubOffline), 1);
}
