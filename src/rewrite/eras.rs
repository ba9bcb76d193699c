//! What each era's benchmark clients and vLLM server accept: the static fallback used when
//! a client cannot be asked for its `--help` (plan check, an image that cannot be probed).
//! Facts from `shared/spec/real-images.md` §2 and §5 (read from vLLM's history).
//! Markers: `?` a boolean flag, `*` several values, `~` an optional value.

use super::flags::FlagSet;
use crate::diagnose::predict::PyVersion;
use crate::kind::BenchKind;

/// The serving client (`benchmarks/benchmark_serving.py`), era by era: (first version, flags).
const SERVING: &[(&str, &str)] = &[
    ("0.0.0", "--backend --host --port --dataset --tokenizer --best-of --use-beam-search? --num-prompts --request-rate --seed --trust-remote-code?"),
    ("0.3.0", "--backend --protocol --host --port --endpoint --model --dataset --tokenizer --best-of --use-beam-search? --num-prompts --request-rate --seed --trust-remote-code?"),
    ("0.3.1", "--backend --version --base-url --host --port --endpoint --dataset --model --tokenizer --best-of --use-beam-search? --num-prompts --request-rate --seed --trust-remote-code? --disable-tqdm? --save-result?"),
    ("0.4.0", "--backend --base-url --host --port --endpoint --dataset --dataset-name --dataset-path --model --tokenizer --best-of --use-beam-search? --num-prompts --sharegpt-output-len --sonnet-input-len --sonnet-output-len --sonnet-prefix-len --request-rate --seed --trust-remote-code? --disable-tqdm? --save-result? --metadata* --result-dir --result-filename"),
    ("0.5.2", "--backend --base-url --host --port --endpoint --dataset --dataset-name --dataset-path --model --tokenizer --best-of --use-beam-search? --num-prompts --sharegpt-output-len --sonnet-input-len --sonnet-output-len --sonnet-prefix-len --random-input-len --random-output-len --random-range-ratio --request-rate --seed --trust-remote-code? --disable-tqdm? --save-result? --metadata* --result-dir --result-filename"),
    ("0.5.5", "--backend --base-url --host --port --endpoint --dataset --dataset-name --dataset-path --model --tokenizer --best-of --use-beam-search? --num-prompts --logprobs --request-rate --seed --trust-remote-code? --disable-tqdm? --profile? --save-result? --metadata* --result-dir --result-filename --ignore-eos? --percentile-metrics --metric-percentiles --sonnet-input-len --sonnet-output-len --sonnet-prefix-len --sharegpt-output-len --random-input-len --random-output-len --random-range-ratio --random-prefix-len --hf-subset --hf-split --hf-output-len"),
    ("0.6.4", "--backend --base-url --host --port --endpoint --dataset --dataset-name --dataset-path --max-concurrency --model --tokenizer --best-of --use-beam-search? --num-prompts --logprobs --request-rate --burstiness --seed --trust-remote-code? --disable-tqdm? --profile? --save-result? --metadata* --result-dir --result-filename --ignore-eos? --percentile-metrics --metric-percentiles --goodput* --sonnet-input-len --sonnet-output-len --sonnet-prefix-len --sharegpt-output-len --random-input-len --random-output-len --random-range-ratio --random-prefix-len --hf-subset --hf-split --hf-output-len --tokenizer-mode --served-model-name --lora-modules*"),
    ("0.8.0", "--backend --base-url --host --port --endpoint --dataset-name --dataset-path --max-concurrency --model --tokenizer --use-beam-search? --num-prompts --logprobs --request-rate --burstiness --seed --trust-remote-code? --disable-tqdm? --profile? --save-result? --save-detailed? --append-result? --metadata* --result-dir --result-filename --ignore-eos? --percentile-metrics --metric-percentiles --goodput* --sonnet-input-len --sonnet-output-len --sonnet-prefix-len --sharegpt-output-len --random-input-len --random-output-len --random-range-ratio --random-prefix-len --hf-subset --hf-split --hf-output-len --top-p --top-k --min-p --temperature --tokenizer-mode --served-model-name --lora-modules*"),
    ("0.9.1", "--backend --base-url --host --port --endpoint --dataset-name --dataset-path --no-stream? --max-concurrency --model --tokenizer --use-beam-search? --num-prompts --logprobs --request-rate --burstiness --seed --trust-remote-code? --disable-tqdm? --profile? --save-result? --save-detailed? --append-result? --metadata* --result-dir --result-filename --ignore-eos? --percentile-metrics --metric-percentiles --goodput* --custom-output-len --custom-skip-chat-template? --sonnet-input-len --sonnet-output-len --sonnet-prefix-len --sharegpt-output-len --random-input-len --random-output-len --random-range-ratio --random-prefix-len --hf-subset --hf-split --hf-output-len --top-p --top-k --min-p --temperature --tokenizer-mode --served-model-name --lora-modules* --ramp-up-strategy --ramp-up-start-rps --ramp-up-end-rps"),
];

/// From this version the scripts are shims that run nothing (`vllm bench …` instead).
pub const SHIM_FROM: &str = "0.10.2";
/// `vllm bench serve` exists from v0.8.0; `throughput` and `latency` from v0.8.5
/// (vllm-output-formats.md §0).
const CLI_SERVE_FROM: &str = "0.8.0";
const CLI_OFFLINE_FROM: &str = "0.8.5";
const READY_CHECK_FROM: &str = "0.11.0";
const WARMUPS_FROM: &str = "0.11.1";
/// FlexibleArgumentParser (underscore spellings) in the scripts from here.
const FLEXIBLE_FROM: &str = "0.5.1";
/// Engine flags became part of the offline scripts' parsers (EngineArgs.add_cli_args).
const OFFLINE_ENGINE_FROM: &str = "0.6.4";
/// Datasets moved to benchmark_dataset.py: `--dataset-name/--dataset-path` for throughput.
const DATASETS_MODULE_FROM: &str = "0.8.0";

/// vLLM's engine arguments (EngineArgs): (flags, first version, first version without).
const ENGINE: &[(&str, &str, &str)] = &[
    ("--model --tokenizer --revision --code-revision --tokenizer-revision --tokenizer-mode --trust-remote-code? --download-dir --load-format --dtype --kv-cache-dtype --quantization-param-path --max-model-len --seed --swap-space --gpu-memory-utilization --max-num-batched-tokens --max-num-seqs --max-logprobs --disable-log-stats? --quantization -q --enforce-eager? --max-context-len-to-capture --block-size --enable-prefix-caching? --pipeline-parallel-size -pp --tensor-parallel-size -tp --worker-use-ray? --max-parallel-loading-workers --disable-custom-all-reduce? --tokenizer-pool-size --tokenizer-pool-type --enable-lora? --max-loras --max-lora-rank --lora-dtype --max-cpu-loras --device --image-input-type --served-model-name* --ray-workers-use-nsight? --num-gpu-blocks-override --num-lookahead-slots --model-loader-extra-config --preemption-mode --skip-tokenizer-init? --rope-scaling --enable-chunked-prefill~ --distributed-executor-backend --max-seq-len-to-capture --fully-sharded-loras? --speculative-max-model-len --ngram-prompt-lookup-max --ngram-prompt-lookup-min --speculative-draft-tensor-parallel-size --cpu-offload-gb --disable-sliding-window? --rope-theta --qlora-adapter-name-or-path --otlp-traces-endpoint --collect-detailed-traces --scheduler-delay-factor --ignore-patterns* --limit-mm-per-prompt --mm-processor-kwargs --config-format --scheduling-policy --override-neuron-config --disable-async-output-proc? --pooling-type --hf-overrides --override-pooler-config --generation-config --enable-sleep-mode? --calculate-kv-scales? --worker-cls --kv-transfer-config --compilation-config -O --additional-config --reasoning-parser --disable-cascade-attn? --max-num-partial-prefills --max-long-partial-prefills --long-prefill-token-threshold --override-generation-config --data-parallel-size -dp --enable-expert-parallel? --async-scheduling? --disable-log-requests? --enable-log-requests? --speculative-disable-by-batch-size --spec-decoding-acceptance-method --typical-acceptance-sampler-posterior-threshold --typical-acceptance-sampler-posterior-alpha --disable-logprobs-during-spec-decoding --speculative-model-quantization --multi-step-stream-outputs~ --enable-reasoning? --enable-eplb? --num-redundant-experts --kv-sharing-fast-prefill?", "0.0.0", "99"),
    ("--use-v2-block-manager?", "0.4.0", "0.7.0"),
    ("--guided-decoding-backend", "0.4.2", "0.10.2"),
    ("--speculative-model --num-speculative-tokens", "0.3.0", "0.8.3"),
    ("--speculative-config", "0.8.0", "99"),
    ("--num-scheduler-steps", "0.5.5", "0.10.1"),
    ("--attention-backend", "0.10.1", "99"),
];

/// The OpenAI server's own options (besides the engine's).
const SERVER: &str = "--host --port --uvicorn-log-level --allow-credentials? --allowed-origins --allowed-methods --allowed-headers --api-key --lora-modules* --prompt-adapters* --chat-template --response-role --ssl-keyfile --ssl-certfile --ssl-ca-certs --root-path --middleware* --return-tokens-as-token-ids? --disable-frontend-multiprocessing? --enable-auto-tool-choice? --tool-call-parser --max-log-len --disable-fastapi-docs? --enable-prompt-tokens-details?";

/// The offline scripts' own options, up to v0.6.3 (with the engine flags they listed).
const THROUGHPUT_OLD: &str = "--backend --dataset --input-len --output-len --model --tokenizer --quantization -q --tensor-parallel-size -tp --n --use-beam-search? --num-prompts --seed --hf-max-batch-size --trust-remote-code? --max-model-len --dtype --gpu-memory-utilization --enforce-eager? --kv-cache-dtype --quantization-param-path --device --enable-prefix-caching? --enable-chunked-prefill? --max-num-batched-tokens --download-dir --output-json --distributed-executor-backend --load-format --num-scheduler-steps --use-v2-block-manager? --disable-async-output-proc? --async-engine? --disable-frontend-multiprocessing?";
const LATENCY_OLD: &str = "--model --speculative-model --num-speculative-tokens --speculative-draft-tensor-parallel-size --tokenizer --quantization -q --tensor-parallel-size -tp --input-len --output-len --batch-size --n --use-beam-search? --num-iters-warmup --num-iters --trust-remote-code? --max-model-len --dtype --enforce-eager? --kv-cache-dtype --quantization-param-path --profile? --profile-result-dir --device --block-size --enable-chunked-prefill? --enable-prefix-caching? --use-v2-block-manager? --ray-workers-use-nsight? --download-dir --output-json --gpu-memory-utilization --load-format --distributed-executor-backend --otlp-traces-endpoint --num-scheduler-steps --disable-async-output-proc?";
const PREFIX_OLD: &str = "--model --tensor-parallel-size -tp --output-len --enable-prefix-caching? --use-v2-block-manager? --dataset-path --num-prompts --sort? --repeat-count --input-length-range --prefix-len";
/// Their own options from v0.6.4, on top of every engine flag.
const THROUGHPUT_OWN: &str = "--backend --dataset --input-len --output-len --n --num-prompts --hf-max-batch-size --output-json --async-engine? --disable-frontend-multiprocessing? --lora-path";
const THROUGHPUT_OWN_DATASETS: &str = "--dataset-name --dataset-path --prefix-len --random-range-ratio --hf-subset --hf-split --disable-detokenize?";
const LATENCY_OWN: &str = "--input-len --output-len --batch-size --n --use-beam-search? --num-iters-warmup --num-iters --profile? --profile-result-dir --output-json --disable-detokenize?";
const PREFIX_OWN: &str = "--dataset-path --output-len --num-prompts --sort? --repeat-count --input-length-range --prefix-len";

fn v(s: &str) -> PyVersion {
    PyVersion::parse(s).expect("era table versions parse")
}

fn at_least(version: &PyVersion, from: &str) -> bool {
    *version >= v(from)
}

/// The engine's flags in `version`'s era; `None` = every flag any era had.
pub fn engine(version: Option<&PyVersion>) -> FlagSet {
    // The common flags only (real-images.md §2): a flag missing here says nothing.
    let mut out = FlagSet::default();
    for (list, from, until) in ENGINE {
        let live = match version {
            None => true,
            Some(ver) => *ver >= v(from) && *ver < v(until),
        };
        if live {
            out.extend(&FlagSet::from_list(list, false));
        }
    }
    out.underscores = version.is_none_or(|ver| at_least(ver, FLEXIBLE_FROM));
    out
}

/// The server's flags: engine + its own.
pub fn server(version: Option<&PyVersion>) -> FlagSet {
    let mut out = engine(version);
    out.extend(&FlagSet::from_list(SERVER, false));
    out
}

/// Whether the era's scripts are shims (only `vllm bench …` runs).
pub(crate) fn is_shim(version: Option<&PyVersion>) -> bool {
    version.is_some_and(|ver| at_least(ver, SHIM_FROM))
}

/// Whether the era has the `vllm bench` subcommand for `kind`.
pub(crate) fn has_cli_bench(kind: BenchKind, version: Option<&PyVersion>) -> bool {
    let from = match kind {
        BenchKind::Serving => CLI_SERVE_FROM,
        BenchKind::Throughput | BenchKind::Latency => CLI_OFFLINE_FROM,
        BenchKind::PrefixCaching | BenchKind::Unknown => return false,
    };
    version.is_none_or(|ver| at_least(ver, from))
}

/// The flags a client accepts in `version`'s era; for an unknown version, those any era
/// accepted (plan check must not refuse what some real client takes).
pub fn client(kind: BenchKind, version: Option<&PyVersion>) -> FlagSet {
    match version {
        Some(ver) => client_at(kind, ver),
        None => {
            let mut all = FlagSet {
                complete: true,
                ..FlagSet::default()
            };
            for (from, _) in SERVING {
                all.extend(&client_at(kind, &v(from)));
            }
            all.extend(&client_at(kind, &v("0.9.1")));
            all.underscores = true;
            all
        }
    }
}

fn client_at(kind: BenchKind, ver: &PyVersion) -> FlagSet {
    let underscores = at_least(ver, FLEXIBLE_FROM);
    let modern = at_least(ver, OFFLINE_ENGINE_FROM);
    let mut set = match kind {
        BenchKind::Serving => {
            let list = SERVING
                .iter()
                .rev()
                .find(|(from, _)| at_least(ver, from))
                .map(|(_, l)| *l)
                .unwrap_or(SERVING[0].1);
            let mut s = FlagSet::from_list(list, underscores);
            // `vllm bench serve`'s later options (vllm-output-formats.md: the ready check
            // from 0.11.0, warm-up requests from ≈0.11.1).
            for (from, flag) in [
                (READY_CHECK_FROM, "--ready-check-timeout-sec"),
                (WARMUPS_FROM, "--num-warmups"),
            ] {
                if at_least(ver, from) {
                    s.extend(&FlagSet::from_list(flag, underscores));
                }
            }
            return s;
        }
        BenchKind::Throughput if modern => {
            let mut s = FlagSet::from_list(THROUGHPUT_OWN, underscores);
            if at_least(ver, DATASETS_MODULE_FROM) {
                s.extend(&FlagSet::from_list(THROUGHPUT_OWN_DATASETS, underscores));
            }
            s
        }
        BenchKind::Latency if modern => FlagSet::from_list(LATENCY_OWN, underscores),
        BenchKind::PrefixCaching if modern => FlagSet::from_list(PREFIX_OWN, underscores),
        BenchKind::Throughput => return FlagSet::from_list(THROUGHPUT_OLD, underscores),
        BenchKind::Latency => return FlagSet::from_list(LATENCY_OLD, underscores),
        BenchKind::PrefixCaching => return FlagSet::from_list(PREFIX_OLD, underscores),
        BenchKind::Unknown => return FlagSet::default(),
    };
    set.extend(&engine(Some(ver)));
    set.underscores = underscores;
    set
}

/// The offline scripts' own options that no vLLM engine or server takes: given to a
/// client that lacks them, they are a mistake, not an unlisted engine flag.
pub const OFFLINE_ONLY: &[&str] = &[
    "--input-len",
    "--output-len",
    "--batch-size",
    "--num-iters",
    "--num-iters-warmup",
    "--n",
    "--use-beam-search",
    "--dataset",
    "--output-json",
    "--hf-max-batch-size",
    "--async-engine",
    "--disable-frontend-multiprocessing",
    "--profile-result-dir",
    "--prefix-len",
    "--repeat-count",
    "--input-length-range",
    "--sort",
];

/// Options the serving client and the server both take, with the same meaning for the run
/// (the tokenizer the client counts with must be the model's; remote code must be trusted
/// on both sides): a split gives them to both.
pub const SHARED: &[&str] = &[
    "--trust-remote-code",
    "--tokenizer",
    "--tokenizer-mode",
    "--served-model-name",
    "--lora-modules",
];

/// Values argparse's `choices` allow, for options whose set has not changed across eras.
pub const CHOICES: &[(&str, &[&str])] = &[(
    "--dtype",
    &["auto", "half", "float16", "bfloat16", "float", "float32"],
)];

/// Up to v0.3.3 the serving client requires `--dataset PATH` (ShareGPT).
pub(crate) fn dataset_required(client: &FlagSet) -> bool {
    client.accepts("--dataset") && !client.accepts("--dataset-name")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(kind: BenchKind, ver: &str) -> FlagSet {
        client(kind, Some(&v(ver)))
    }

    #[test]
    fn serving_client_never_takes_engine_flags() {
        for (from, _) in SERVING {
            let s = c(BenchKind::Serving, from);
            for f in [
                "--dtype",
                "--tensor-parallel-size",
                "--enable-prefix-caching",
                "--max-model-len",
            ] {
                assert!(!s.accepts(f), "{from} {f}");
            }
        }
    }

    #[test]
    fn era_boundaries() {
        assert!(!c(BenchKind::Serving, "0.3.3").accepts("--dataset-name"));
        assert!(c(BenchKind::Serving, "0.4.0").accepts("--dataset-name"));
        assert!(c(BenchKind::Serving, "0.7.3").accepts("--dataset"));
        assert!(!c(BenchKind::Serving, "0.8.0").accepts("--dataset"));
        assert!(c(BenchKind::Serving, "0.6.4.post2.dev375+gd263bd9d").accepts("--max-concurrency"));
        assert!(!c(BenchKind::Serving, "0.6.3.post1").accepts("--max-concurrency"));
        assert!(c(BenchKind::Serving, "0.9.2rc2.dev58").accepts("--ramp-up-strategy"));
        assert!(c(BenchKind::Latency, "0.8.5").accepts("--dtype"));
        assert!(c(BenchKind::Latency, "0.8.5").accepts("--speculative-config"));
        assert!(!c(BenchKind::Latency, "0.8.5").accepts("--speculative-model"));
        assert!(c(BenchKind::Latency, "0.6.4.dev22").accepts("--speculative-model"));
        assert!(!c(BenchKind::Throughput, "0.7.3").accepts("--dataset-name"));
        assert!(c(BenchKind::Throughput, "0.8.0").accepts("--dataset-name"));
        assert!(is_shim(Some(&v("0.10.2"))));
        assert!(!is_shim(Some(&v("0.10.1.dev295+g88faa466d"))));
        assert!(!server(Some(&v("0.11.0"))).accepts("--num-scheduler-steps"));
        assert!(server(Some(&v("0.6.4"))).accepts("--use-v2-block-manager"));
    }

    #[test]
    fn unknown_version_is_the_union() {
        let s = client(BenchKind::Serving, None);
        assert!(s.accepts("--dataset") && s.accepts("--ramp-up-strategy"));
        assert!(!s.accepts("--dtype"));
    }
}
