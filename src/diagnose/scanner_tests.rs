//! Per-signature positives and near-miss negatives, and the streaming/context rules.

use super::*;
use crate::diagnose::diagnose_text;

fn cat() -> Arc<Catalog> {
    Arc::new(Catalog::builtin())
}

fn file(text: &str) -> Diagnosis {
    diagnose_text(&Catalog::builtin(), text.as_bytes())
}

/// (expected category, a line that must match, a near miss that must not give it)
const CASES: &[(Category, &str, &str)] = &[
    (
        Category::Aimv2Conflict,
        "ValueError: 'aimv2' is already used by a Transformers config, pick another name.",
        "ValueError: 'qwen3' is already used by a Transformers config, pick another name.",
    ),
    (
        Category::NumpyAbi,
        "A module that was compiled using NumPy 1.x cannot be run in",
        "ModuleNotFoundError: No module named 'numpy'",
    ),
    (
        Category::NumpyAbi,
        "ModuleNotFoundError: No module named 'numpy.lib.function_base'",
        "INFO numpy version 1.26.4 detected",
    ),
    (
        Category::LogitsWarperImport,
        "ImportError: cannot import name 'LogitsWarper' from 'transformers.generation.logits_process'",
        "ImportError: cannot import name 'LogitsProcessor' from 'transformers'",
    ),
    (
        Category::PyairportsMissing,
        "ModuleNotFoundError: No module named 'pyairports'",
        "ModuleNotFoundError: No module named 'pycountry'",
    ),
    (
        Category::FaUtilsMissing,
        "ModuleNotFoundError: No module named 'vllm.vllm_flash_attn.fa_utils'",
        "ModuleNotFoundError: No module named 'vllm.vllm_flash_attn'",
    ),
    (
        Category::CudaOom,
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.1 GiB",
        "INFO 01-01 00:00:00 worker.py:1] To avoid CUDA out of memory, lower --gpu-memory-utilization",
    ),
    (
        Category::CudaOom,
        "RuntimeError: CUDA error: out of memory",
        "INFO 01-01 00:00:00 a.py:1] CUDA memory usage: 12.5 GiB",
    ),
    (
        Category::KvCacheTooSmall,
        "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
        "    raise ValueError(\"No available memory for the cache blocks. \"",
    ),
    (
        Category::KvCacheTooSmall,
        "(EngineCore_0 pid=1) INFO 09-06 03:10:08 [gpu_worker.py:276] Available KV cache memory: -0.53 GiB",
        "(EngineCore_0 pid=1) INFO 09-06 03:10:08 [gpu_worker.py:276] Available KV cache memory: 30.53 GiB",
    ),
    (
        Category::NcclError,
        "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)",
        "ERROR 06-17 06:23:53 pynccl.py:53] Failed to load NCCL library from libnccl.so.2 .It is expected if you are not running on NVIDIA/AMD GPUs.",
    ),
    (
        Category::ModelArchUnsupported,
        "ValueError: Model architectures ['Gemma2ForCausalLM'] are not supported for now. Supported architectures: ['LlamaForCausalLM']",
        "INFO 01-01 00:00:00 a.py:1] Resolved architecture: Gemma2ForCausalLM",
    ),
    (
        Category::RopeScalingIncompatible,
        "ValueError: `rope_scaling` must be a dictionary with two fields, `type` and `factor`, got {'factor': 8.0, 'rope_type': 'llama3'}",
        "INFO 01-01 00:00:00 config.py:1] rope_scaling={'factor': 8.0, 'rope_type': 'llama3'}",
    ),
    (
        Category::GatedModelAuth,
        "huggingface_hub.errors.GatedRepoError: 401 Client Error. Cannot access gated repo for url https://huggingface.co/meta-llama/Llama-3.1-8B/resolve/main/config.json.",
        "huggingface_hub.errors.RepositoryNotFoundError: 404 Client Error. Repository Not Found for url",
    ),
    (
        Category::DiskFull,
        "ERROR: Could not install packages due to an OSError: [Errno 28] No space left on device",
        "NCCL WARN Error while creating shared memory segment /dev/shm/nccl-x (size 9637888): No space left on device",
    ),
    (
        Category::ImageNotFound,
        "Error response from daemon: manifest for org/vllm-bench:abc not found: manifest unknown: manifest unknown",
        "Unable to find image 'org/vllm-bench:abc' locally",
    ),
    (
        Category::RegistryAuth,
        "Error response from daemon: unauthorized: authentication required",
        "Error response from daemon: pull access denied for org/private, repository does not exist or may require 'docker login': denied: requested access to the resource is denied",
    ),
    (
        Category::RegistryAuth,
        "Error response from daemon: Head \"http://127.0.0.1:5000/v2/ns/x/manifests/v1\": no basic auth credentials",
        "requests.exceptions.HTTPError: 401 Client Error: Unauthorized for url: https://huggingface.co/api/models/x",
    ),
    (
        Category::RegistryAuth,
        "denied: requested access to the resource is denied",
        "INFO 01-01 00:00:00 a.py:1] access to the resource is allowed",
    ),
    (
        Category::RegistryRateLimited,
        "Error response from daemon: toomanyrequests: You have reached your pull rate limit. You may increase the limit by authenticating and upgrading: https://www.docker.com/increase-rate-limit",
        "INFO 01-01 00:00:00 a.py:1] request rate limit: 10 requests/s",
    ),
    (
        Category::RegistryRateLimited,
        "Error response from daemon: error parsing HTTP 429 response body: invalid character '<' looking for beginning of value: \"<html><head><title>429 Too Many Requests</title></head></html>\"",
        "INFO 01-01 00:00:00 a.py:1] 429 requests completed",
    ),
    (
        Category::NvidiaRuntimeMissing,
        "docker: Error response from daemon: could not select device driver \"\" with capabilities: [[gpu]].",
        "INFO 01-01 00:00:00 a.py:1] Automatically detected platform cuda.",
    ),
    (
        Category::NvidiaRuntimeMissing,
        "RuntimeError: No CUDA GPUs are available",
        "(RayWorkerWrapper pid=5) ERROR 01-01 00:00:00 worker_base.py:1] RuntimeError: No CUDA GPUs are available",
    ),
    (
        Category::AgentPatchFailed,
        "error: patch failed: vllm/worker/model_runner.py:120",
        "INFO 01-01 00:00:00 a.py:1] Applying dispatch patch for MoE layers",
    ),
    (
        Category::EngineCoreInitFailed,
        "ERROR 04-30 10:20:36 [core.py:396] EngineCore failed to start.",
        "INFO 04-30 10:20:36 [core.py:58] Initializing a V1 LLM engine (v0.8.5) with config: model='x'",
    ),
    (
        Category::BrokenPipe,
        "BrokenPipeError: [Errno 32] Broken pipe",
        "INFO 01-01 00:00:00 a.py:1] pipeline_parallel_size=2",
    ),
    (
        Category::VersionPortBug,
        "INFO:     Application startup complete.\nERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use",
        "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use",
    ),
    (
        Category::PyairportsMissing,
        "ImportError: The `airports` module requires \"pyairports\" to be installed. You can install it with \"pip install pyairports\"",
        "INFO 01-01 00:00:00 a.py:1] outlines 0.0.46 loaded",
    ),
    (
        Category::CudaOom,
        "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB",
        "INFO 01-01 00:00:00 a.py:1] HIP memory usage 12 GiB",
    ),
    (
        Category::NcclError,
        "[rank1]:[E ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.",
        "INFO 01-01 00:00:00 a.py:1] NCCL version 2.19.3",
    ),
    (
        Category::AgentPatchFailed,
        "1 out of 2 hunks FAILED -- saving rejects to file vllm/x.py.rej",
        "patching file vllm/x.py",
    ),
    (
        Category::ModelArchUnsupported,
        "ValueError: Model architectures ['Qwen3ForCausalLM'] failed to be inspected. Please check the logs for more details.",
        "INFO 01-01 00:00:00 a.py:1] Inspecting model architectures",
    ),
    (
        Category::BenchCommandInvalid,
        "benchmark_serving.py: error: unrecognized arguments: --dtype float16",
        "WARNING 01-01 00:00:00 arg_utils.py:1] error: unrecognized value in config, ignoring",
    ),
    (
        Category::BenchCommandInvalid,
        "api_server.py: error: the following arguments are required: --model",
        "INFO 01-01 00:00:00 a.py:1] the following arguments are set: --model m",
    ),
    (
        Category::BenchCommandInvalid,
        "FileNotFoundError: [Errno 2] No such file or directory: 'ShareGPT_V3_unfiltered_cleaned_split.json'",
        "FileNotFoundError: [Errno 2] No such file or directory: '/root/.cache/huggingface/hub/models--x'",
    ),
    (
        Category::BenchCommandInvalid,
        "TypeError: expected str, bytes or os.PathLike object, not NoneType",
        "TypeError: expected str, bytes or os.PathLike object, not int",
    ),
    (
        Category::BenchCommandInvalid,
        "python3: can't open file '/vllm-workspace/benchmarks/benchmark_serving.py': [Errno 2] No such file or directory",
        "python3: opened file '/vllm-workspace/benchmarks/benchmark_serving.py'",
    ),
    (
        Category::BenchCommandInvalid,
        "sh: 1: python: not found",
        "INFO 01-01 00:00:00 a.py:1] python found at /usr/bin/python3",
    ),
    (
        Category::BenchCommandInvalid,
        "DEPRECATED: This script has been moved to the vLLM CLI. Please use the following command instead: vllm bench serve",
        "DeprecationWarning: benchmark_serving.py is deprecated; use vllm bench serve",
    ),
    (
        Category::NeedsBuild,
        "the patch of agent a1 changes compiled code or the build (csrc/attention.cu); building is off (--no-build)",
        "INFO 01-01 00:00:00 a.py:1] building the prompt list took 0.2 s",
    ),
    (
        Category::ServerStartTimeout,
        "E   RuntimeError: Server failed to start in time.",
        "INFO 01-01 00:00:00 a.py:1] Waiting for the server to start (timeout 600 s)",
    ),
    (
        Category::NoMetrics,
        "Successful requests:                     0",
        "Successful requests:                     10",
    ),
    // The model is not on the Hub (the Hub's 401 for a repository it will not admit).
    (
        Category::ModelNotFound,
        "huggingface_hub.errors.RepositoryNotFoundError: 401 Client Error. (Request ID: Root=1-0000aaaa-0123456789abcdef01234567;00000000-1111-2222-3333-444444444444)",
        "INFO 01-01 00:00:00 a.py:1] repository org/model-x found in the local cache",
    ),
    // nightshift's own prefetch; a dataset that is not on the Hub is not the model's.
    (
        Category::ModelNotFound,
        "401 Client Error: Repository Not Found for url: https://huggingface.co/api/models/org/model-x/revision/main. Check that org/model-x is a model on the Hub; if it is private or gated, set HF_TOKEN to a token that can read it.",
        "404 Client Error: Repository Not Found for url: https://huggingface.co/api/datasets/org/prompts/revision/main. Check that org/prompts is a dataset on the Hub; if it is private or gated, set HF_TOKEN to a token that can read it.",
    ),
    (
        Category::ModelTooLarge,
        "org/model-x: model weights (140.0 GiB) are larger than GPU memory × TP (80.0 GiB × 1 = 80.0 GiB): raise --tensor-parallel-size or use GPUs with more memory",
        "INFO 01-01 00:00:00 [worker.py:1] model weights take 14.99GiB; non_torch_memory takes 0.20GiB; PyTorch activation peak memory takes 1.23GiB; the rest of the memory reserved for KV Cache is 54.77GiB.",
    ),
    (
        Category::HubOffline,
        "huggingface_hub.errors.OfflineModeIsEnabled: Cannot reach https://huggingface.co/api/models/org/model-x: offline mode is enabled. To disable it, please unset the `HF_HUB_OFFLINE` environment variable.",
        "WARNING 01-01 00:00:00 [config.py:1] Error retrieving file list: Cannot reach https://huggingface.co/api/models/org/model-x/tree/main: offline mode is enabled., retrying 1 of 2",
    ),
    (
        Category::HubOffline,
        "huggingface_hub.errors.LocalEntryNotFoundError: Cannot find the requested files in the disk cache and outgoing traffic has been disabled. To enable hf.co look-ups and downloads online, set 'local_files_only' to False.",
        "INFO 01-01 00:00:00 a.py:1] HF_HUB_OFFLINE=1: the weights are read from the local cache",
    ),
    (
        Category::ServerConfigInvalid,
        "ValueError: ngram prompt lookup max and min must be provided when using the ngram method",
        "INFO 01-01 00:00:00 a.py:1] ngram prompt lookup max=5, min=3",
    ),
    (
        Category::ServerConfigInvalid,
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig",
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for ChatCompletionRequest",
    ),
    (
        Category::ServerConfigInvalid,
        "api_server.py: error: argument --speculative-config: invalid loads value: \"{method: ngram}\"",
        "INFO 01-01 00:00:00 a.py:1] speculative_config=SpeculativeConfig(method='ngram', num_spec_tokens=4)",
    ),
    (
        Category::RopeScalingIncompatible,
        "  Value error, rope_scaling should have a 'rope_type' key [type=value_error, input_value=ArgsKwargs((), {'model': 'org/model-x'}), input_type=ArgsKwargs]",
        "INFO 01-01 00:00:00 a.py:1] rope_scaling={'rope_type': 'llama3', 'factor': 8.0}",
    ),
    (
        Category::KvCacheTooSmall,
        "RuntimeError: insufficient KV cache blocks for a single request of 32768 tokens",
        "INFO 01-01 00:00:00 a.py:1] GPU KV cache size: 521,088 tokens",
    ),
    (
        Category::NcclError,
        "[rank1]:[E1107 10:11:12.345678901 ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) Rank 1] ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring enqueued collectives.",
        "[rank1]:[I1107 10:11:12.345678901 ProcessGroupNCCL.cpp:900] [PG ID 0 Rank 1] ProcessGroupNCCL initialization options: size: 2",
    ),
    (
        Category::RegistryAuth,
        "Error response from daemon: Get \"https://registry.example.com:5000/token?account=ci&scope=repository%3Aorg%2Fvllm%3Apull&service=registry\": 401 Unauthorized",
        "Error response from daemon: Get \"https://registry.example.com:5000/token?scope=repository%3Aorg%2Fvllm%3Apull\": 429 Too Many Requests",
    ),
    (
        Category::BenchCommandInvalid,
        "ValueError: Unknown dataset: sharegpt4",
        "INFO 01-01 00:00:00 a.py:1] Unknown fields in the dataset were ignored",
    ),
];

#[test]
fn each_signature_matches_its_positive_and_not_its_near_miss() {
    for (want, pos, neg) in CASES {
        let d = file(pos);
        assert_eq!(d.category, *want, "positive: {pos}");
        assert!(
            pos.lines().any(|l| l == d.evidence),
            "evidence {:?} for {pos}",
            d.evidence
        );
        let n = file(neg);
        assert_ne!(n.category, *want, "near miss: {neg}");
    }
}

#[test]
fn every_builtin_category_signature_is_exercised() {
    let covered: std::collections::BTreeSet<_> = CASES.iter().map(|c| c.0).collect();
    for s in Catalog::builtin().signatures() {
        if s.category != Category::Other {
            assert!(covered.contains(&s.category), "no test case for {}", s.name);
        }
    }
}

#[test]
fn prefixes_ansi_and_interleaving_do_not_defeat_signatures() {
    for line in [
        "\x1b[1;36m(VllmWorkerProcess pid=305)\x1b[0;0m ERROR 01-19 03:55:24 x.py:1] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1 GiB",
        "\u{a0} | 2025-03-07T05:56:27.270Z | (VllmWorker TP0 pid=1) (VllmWorker TP1 pid=2) ERROR [x.py:1] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1 GiB\r",
        "[2025-05-20T10:47:04Z] [rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1 GiB",
        "VLLM_PREFIX (APIServer pid=1) ERROR 05-06 21:00:11 [api_server.py:1] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1 GiB",
    ] {
        let d = file(line);
        assert_eq!(d.category, Category::CudaOom, "{line:?}");
        assert_eq!(d.evidence, line.trim_end_matches('\r'));
    }
}

#[test]
fn root_causes_beat_symptoms() {
    // Illegal memory access, then NCCL watchdog noise and broken pipes: `other`.
    let d = file(
        "[rank0]:[E520 ProcessGroupNCCL.cpp:1896] Process group watchdog thread terminated with exception: CUDA error: an illegal memory access was encountered\n\
         terminate called after throwing an instance of 'c10::DistBackendError'\n\
         (VllmWorker rank=0 pid=1) ERROR 05-20 03:47:04 [multiproc_executor.py:522] RuntimeError: CUDA error: an illegal memory access was encountered\n\
         ERROR 05-20 03:47:04 [core.py:489] EngineCore failed to start.\n\
         [W520 TCPStore.cpp:106] [c10d] sendBytes failed on SocketImpl(fd=135): Broken pipe\n",
    );
    assert_eq!(d.category, Category::Other);
    assert!(d
        .evidence
        .contains("RuntimeError: CUDA error: an illegal memory access"));

    // KV cache inside EngineCore failing to start.
    let d = file(
        "ERROR 04-30 10:20:36 [core.py:396] EngineCore failed to start.\n\
         ERROR 04-30 10:20:36 [core.py:396] ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`.\n",
    );
    assert_eq!(d.category, Category::KvCacheTooSmall);

    // Ray worker without GPUs is not the NVIDIA runtime.
    let d = file("\x1b[36m(_MapWorker pid=13019)\x1b[0m ERROR 03-07 05:56:27 worker_base.py:581] RuntimeError: No CUDA GPUs are available");
    assert_eq!(d.category, Category::Other);

    // A symptom with an unexplained earlier exception reports the exception.
    let d = file(
        "KeyError: 'model.layers.0.mlp.experts.w13_weight'\n\
         ERROR 04-30 10:20:36 [core.py:396] EngineCore failed to start.\n",
    );
    assert_eq!(d.category, Category::Other);
    assert!(d.evidence.starts_with("KeyError"));
    // An inspection failure after a real import error reports the import error.
    let d = file(
        "ImportError: cannot import name 'Qwen3Config' from 'transformers'\n\
         ValueError: Model architectures ['Qwen3ForCausalLM'] failed to be inspected. Please check the logs for more details.\n",
    );
    assert_eq!(d.category, Category::Other);
    assert!(d.evidence.starts_with("ImportError"));
    // Asking for more GPUs than there are is named, not guessed.
    let d = file("ValueError: The number of required GPUs exceeds the total number of available GPUs in the placement group.\nEngineCore failed to start.");
    assert_eq!(d.category, Category::Other);
    assert!(d.evidence.contains("required GPUs"));
    // …and alone it is what it is.
    let d = file("ERROR 04-30 10:20:36 [core.py:396] EngineCore failed to start.\n");
    assert_eq!(d.category, Category::EngineCoreInitFailed);
}

#[test]
fn fallback_is_the_most_error_like_line() {
    let d = file("INFO starting\nINFO loading\nAssertionError: shapes do not match\nINFO bye\n");
    assert_eq!(d.category, Category::Other);
    assert_eq!(d.evidence, "AssertionError: shapes do not match");
    assert_eq!(d.line_no, Some(3));
    let d = file("INFO starting\nsomething ERROR happened here\nINFO bye\n");
    assert_eq!(d.evidence, "something ERROR happened here");
    let d = file("");
    assert_eq!(d.category, Category::Other);
}

fn feed(sc: &mut Scanner, stream: Stream, text: &str) {
    for l in text.lines() {
        sc.feed(stream, l);
    }
}

#[test]
fn streams_are_respected_in_streaming_mode() {
    // The benchmark client printing a patch-like line does not make it a patch failure.
    let mut sc = Scanner::new(cat());
    feed(&mut sc, Stream::Bench, "error: patch failed: x.py:1");
    let ctx = FailureContext {
        exit_code: Some(1),
        ..Default::default()
    };
    assert_ne!(
        sc.conclude(&ctx).unwrap().category,
        Category::AgentPatchFailed
    );
    let mut sc = Scanner::new(cat());
    feed(&mut sc, Stream::Docker, "error: patch failed: x.py:1");
    let d = sc.conclude(&ctx).unwrap();
    assert_eq!(d.category, Category::AgentPatchFailed);
    assert_eq!(d.stream, Some(Stream::Docker));
}

#[test]
fn success_concludes_nothing() {
    let mut sc = Scanner::new(cat());
    feed(
        &mut sc,
        Stream::Server,
        "WARNING something Broken pipe\nINFO:     Application startup complete.",
    );
    let ok = FailureContext {
        bench_finished: true,
        has_result: true,
        successful_requests: Some(100.0),
        exit_code: Some(0),
        ..Default::default()
    };
    assert_eq!(sc.conclude(&ok), None);
    assert_eq!(
        Scanner::new(cat()).conclude(&FailureContext::default()),
        None
    );
}

#[test]
fn stage_timeouts() {
    let capture = "INFO 07-08 20:49:43 gpu_executor.py:84] # GPU blocks: 7281, # CPU blocks: 512\n\
                   INFO 07-08 20:49:45 model_runner.py:924] Capturing the model for CUDA graphs. This may lead to unexpected consequences if the model is not static.";
    let ctx = FailureContext {
        stage: Some(Stage::LoadingServer),
        timed_out: true,
        serving: true,
        ..Default::default()
    };
    let mut sc = Scanner::new(cat());
    feed(&mut sc, Stream::Server, capture);
    let d = sc.conclude(&ctx).unwrap();
    assert_eq!(d.category, Category::CudaGraphCaptureTimeout);
    assert!(d.evidence.contains("Capturing the model for CUDA graphs"));

    // Capture finished, then nothing: a plain start timeout.
    feed(
        &mut sc,
        Stream::Server,
        "INFO 07-08 20:49:53 model_runner.py:1117] Graph capturing finished in 8 secs.",
    );
    let d = sc.conclude(&ctx).unwrap();
    assert_eq!(d.category, Category::ServerStartTimeout);
    assert!(d.evidence.contains("Graph capturing finished"));

    // Capture progress on the bench stream does not count.
    let mut sc = Scanner::new(cat());
    feed(&mut sc, Stream::Bench, capture);
    assert_eq!(
        sc.conclude(&ctx).unwrap().category,
        Category::ServerStartTimeout
    );

    let bench = FailureContext {
        stage: Some(Stage::Benchmarking),
        timed_out: true,
        ..Default::default()
    };
    let mut sc = Scanner::new(cat());
    feed(
        &mut sc,
        Stream::Bench,
        "  5%|▌         | 50/1000 [00:10<03:10,  5.00it/s]",
    );
    let d = sc.conclude(&bench).unwrap();
    assert_eq!(d.category, Category::BenchTimeout);

    // A root cause in the log beats the timeout it caused.
    let mut sc = Scanner::new(cat());
    feed(
        &mut sc,
        Stream::Server,
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1 GiB",
    );
    assert_eq!(sc.conclude(&ctx).unwrap().category, Category::CudaOom);
}

#[test]
fn port_bug_confirmation_depends_on_order_and_version() {
    let log = "INFO:     Started server process [11912]\n\
               INFO:     Waiting for application startup.\n\
               INFO:     Application startup complete.\n\
               ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use\n\
               INFO:     Waiting for application shutdown.";
    let mut ctx = FailureContext {
        stage: Some(Stage::LoadingServer),
        exit_code: Some(1),
        serving: true,
        vllm_version: Some("0.6.3.post2.dev398".into()),
        ..Default::default()
    };
    let mut sc = Scanner::new(cat());
    feed(&mut sc, Stream::Server, log);
    let d = sc.conclude(&ctx).unwrap();
    assert_eq!(d.category, Category::VersionPortBug);
    assert!(!d.predicted);
    assert_eq!(d.recipe.as_deref(), Some("port-bug-spawn"));
    assert_eq!(d.line_no, Some(4));
    // Outside the bug's range the port is really taken.
    ctx.vllm_version = Some("0.5.4".into());
    assert_eq!(sc.conclude(&ctx).unwrap().category, Category::Other);

    // The quiet form: ready, then never healthy, on an affected version.
    let mut sc = Scanner::new(cat());
    feed(
        &mut sc,
        Stream::Server,
        "INFO:     Application startup complete.",
    );
    let quiet = FailureContext {
        stage: Some(Stage::LoadingServer),
        timed_out: true,
        serving: true,
        vllm_version: Some("0.6.4.post1".into()),
        ..Default::default()
    };
    assert_eq!(
        sc.conclude(&quiet).unwrap().category,
        Category::VersionPortBug
    );
    let later = FailureContext {
        vllm_version: Some("0.8.5".into()),
        ..quiet
    };
    assert_eq!(
        sc.conclude(&later).unwrap().category,
        Category::ServerStartTimeout
    );
}

#[test]
fn facts_from_the_runtime() {
    let sc = Scanner::new(cat());
    let d = sc
        .conclude(&FailureContext {
            patch_failed: true,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(d.category, Category::AgentPatchFailed);

    let d = sc
        .conclude(&FailureContext {
            stage: Some(Stage::PreparingImage),
            pull_error: Some(
                "write /var/lib/docker/tmp/GetImageBlob123: no space left on device".into(),
            ),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(d.category, Category::DiskFull);
    assert!(d.evidence.contains("no space left"));

    let d = sc
        .conclude(&FailureContext {
            stage: Some(Stage::PreparingImage),
            pull_error: Some("manifest for org/vllm:abc not found: manifest unknown".into()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(d.category, Category::ImageNotFound);

    let d = sc
        .conclude(&FailureContext {
            image_missing: true,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(d.category, Category::ImageNotFound);

    // A registry's refusal is not a missing image, even when reported as one…
    for (pe, want) in [
        (
            "unauthorized: authentication required",
            Category::RegistryAuth,
        ),
        (
            "toomanyrequests: You have reached your pull rate limit.",
            Category::RegistryRateLimited,
        ),
        (
            "pull access denied for org/x, repository does not exist or may require 'docker login': denied: requested access to the resource is denied",
            Category::ImageNotFound,
        ),
    ] {
        let d = sc
            .conclude(&FailureContext {
                stage: Some(Stage::PreparingImage),
                image_missing: true,
                pull_error: Some(pe.into()),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(d.category, want, "{pe}");
        assert_eq!(d.evidence, pe);
    }
    // …and the Docker runtime's way: a pull error logged on the pull stream, the attempt
    // ended as a runtime error at the image stage (no pull fact).
    let mut sc = Scanner::new(cat());
    feed(
        &mut sc,
        Stream::Pull,
        "Pulling 127.0.0.1:5000/ns/standin:v1 with credentials for 127.0.0.1:5000 (auths in /tmp/x/config.json)\n\
         unauthorized: authentication required",
    );
    let d = sc
        .conclude(&FailureContext {
            stage: Some(Stage::PreparingImage),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(d.category, Category::RegistryAuth);
    assert_eq!(d.evidence, "unauthorized: authentication required");
    // The same line on the server's stream is not the registry's.
    let mut sc = Scanner::new(cat());
    feed(&mut sc, Stream::Server, "toomanyrequests: slow down");
    let d = sc
        .conclude(&FailureContext {
            exit_code: Some(1),
            ..Default::default()
        })
        .unwrap();
    assert_ne!(d.category, Category::RegistryRateLimited);
    let sc = Scanner::new(cat());

    let d = sc
        .conclude(&FailureContext {
            bench_finished: true,
            has_result: true,
            successful_requests: Some(0.0),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(d.category, Category::NoMetrics);
    assert!(d.evidence.contains("0 successful"));

    let d = sc
        .conclude(&FailureContext {
            bench_finished: true,
            exit_code: Some(0),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(d.category, Category::NoMetrics);

    let d = sc
        .conclude(&FailureContext {
            exit_code: Some(137),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(d.category, Category::Other);
    assert!(d.evidence.contains("137"));
}

#[test]
fn operator_signatures_take_effect_without_recompiling() {
    let c = Catalog::builtin()
        .with_overrides(
            "[[signature]]\nname = \"sandbox\"\ncategory = \"broken_pipe\"\npriority = 200\nregex = ['Sandbox terminated unexpectedly']\n",
            "ops.toml",
        )
        .unwrap();
    let d = diagnose_text(
        &c,
        b"torch.OutOfMemoryError: CUDA out of memory. Tried\nSandbox terminated unexpectedly\n",
    );
    assert_eq!(d.category, Category::BrokenPipe);
}

#[test]
fn state_stays_bounded_on_long_logs() {
    let mut sc = Scanner::new(cat());
    for i in 0..50_000 {
        sc.feed(
            Stream::Server,
            &format!("INFO 01-01 00:00:00 a.py:1] step {i} Broken pipe"),
        );
    }
    assert_eq!(sc.recent_server.len(), RECENT_SERVER);
    assert_eq!(sc.lines_seen(), 50_000);
    let d = sc
        .conclude(&FailureContext {
            exit_code: Some(1),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(d.category, Category::BrokenPipe);
    assert_eq!(d.line_no, Some(1));
}

/// nightshift's own start-up timeout fired: the category is the timeout's, whatever the
/// log's last lines are (teardown tracebacks, NCCL's watchdog, a warning), unless a root
/// cause came after the last capture line.
#[test]
fn start_timeout_decides_whatever_the_last_lines_say() {
    let start = FailureContext {
        stage: Some(Stage::LoadingServer),
        timed_out: true,
        serving: true,
        ..Default::default()
    };
    let capture = "ERROR 03-01 10:00:00 [config.py:1] Error retrieving file list: Cannot reach https://huggingface.co/api/models/org/m/tree/main: offline mode is enabled.\n\
                   INFO 03-01 10:00:02 [gpu_model_runner.py:1] Capturing CUDA graph shapes:  40%|####      | 14/35 [00:06<00:09,  2.30it/s]\n\
                   INFO 03-01 10:00:03 [gpu_model_runner.py:1] Capturing CUDA graph shapes:  43%|####3     | 15/35 [00:07<00:09,  2.30it/s]";
    // Tearing down the hung server prints more than the few lines kept of the end.
    let teardown = "INFO 03-01 10:30:00 [launcher.py:1] Shutting down FastAPI HTTP server.\n\
                    [rank0]:[E301 10:30:01.000000000 ProcessGroupNCCL.cpp:1595] [PG ID 0 Rank 0] ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring enqueued collectives.\n\
                    Traceback (most recent call last):\n\
                    File \"/usr/lib/python3.12/asyncio/runners.py\", line 118, in run\n\
                    asyncio.exceptions.CancelledError\n\
                    KeyboardInterrupt\n\
                    INFO 03-01 10:30:02 [launcher.py:1] Waiting for application shutdown.\n\
                    INFO 03-01 10:30:02 [launcher.py:1] Application shutdown complete.\n\
                    INFO 03-01 10:30:02 [launcher.py:1] Finished server process [1]\n\
                    WARNING 03-01 10:30:03 [x.py:1] leaked semaphore objects to clean up at shutdown, error ignored";
    let mut sc = Scanner::new(cat());
    feed(&mut sc, Stream::Server, capture);
    feed(&mut sc, Stream::Server, teardown);
    let d = sc.conclude(&start).unwrap();
    assert_eq!(d.category, Category::CudaGraphCaptureTimeout, "{d:?}");
    assert!(d.evidence.contains("15/35"), "{}", d.evidence);
    // The same log without the timeout fact: its lines decide (the Hub line, above the
    // watchdog's).
    let died = FailureContext {
        stage: Some(Stage::LoadingServer),
        exit_code: Some(1),
        serving: true,
        ..Default::default()
    };
    assert_eq!(sc.conclude(&died).unwrap().category, Category::HubOffline);
    let mut sc = Scanner::new(cat());
    feed(&mut sc, Stream::Server, teardown);
    assert_eq!(sc.conclude(&died).unwrap().category, Category::NcclError);

    // An OOM while capturing is the cause of the hang.
    let mut sc = Scanner::new(cat());
    feed(&mut sc, Stream::Server, capture);
    feed(
        &mut sc,
        Stream::Server,
        "(VllmWorker rank=1 pid=9) ERROR 03-01 10:00:04 [x.py:1] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    );
    assert_eq!(sc.conclude(&start).unwrap().category, Category::CudaOom);

    // No capture: a plain start timeout, whatever the last line is.
    let mut sc = Scanner::new(cat());
    feed(
        &mut sc,
        Stream::Server,
        "INFO 03-01 10:00:00 [loader.py:1] Loading safetensors checkpoint shards:  40% Completed | 2/5\n\
         WARNING 03-01 10:30:00 [x.py:1] connection to the metrics exporter failed with error 111",
    );
    let d = sc.conclude(&start).unwrap();
    assert_eq!(d.category, Category::ServerStartTimeout);
    assert!(d.evidence.contains("metrics exporter"), "{}", d.evidence);

    // Capture that finished and a server that said it was up: not capture.
    let mut sc = Scanner::new(cat());
    feed(&mut sc, Stream::Server, capture);
    feed(
        &mut sc,
        Stream::Server,
        "INFO:     Application startup complete.",
    );
    assert_eq!(
        sc.conclude(&start).unwrap().category,
        Category::ServerStartTimeout
    );
}

/// A wording that more than one failure prints carries its signature's low confidence.
#[test]
fn ambiguous_wordings_are_low_confidence() {
    let d = file("ValueError: Invalid repository ID or local directory specified: 'org/model-x'.");
    assert_eq!(d.category, Category::ModelNotFound);
    assert!(
        d.confidence < crate::diagnose::confidence::LOW,
        "{}",
        d.confidence
    );
    // With an offline line before it, the Hub being off is the cause.
    let d = file(
        "huggingface_hub.errors.OfflineModeIsEnabled: Cannot reach https://huggingface.co/api/models/org/model-x: offline mode is enabled.\n\
         ValueError: Invalid repository ID or local directory specified: 'org/model-x'.",
    );
    assert_eq!(d.category, Category::HubOffline);
    assert!(d.confidence >= crate::diagnose::confidence::LOW);
}
