//! Unit tests of the pieces whose behaviour must match Python's exactly:
//! `cd standin && cargo test` (its own crate; the main crate's tests use the images).

use crate::argparse::{py_float, Arg, Kind, Parser, Ty, Val};
use crate::eras::{serving_args, serving_era, Era, Ver};
use crate::metrics::{p_label, percentile};

fn argv(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_string).collect()
}

fn serving(v: &str) -> Parser {
    let v = Ver::parse(v);
    Parser::new(
        "benchmark_serving.py",
        "",
        serving_args(serving_era(v), v, false),
        v >= Ver::new(0, 5, 1),
    )
}

#[test]
fn versions_and_eras() {
    assert_eq!(Ver::parse("0.6.3.post1"), Ver::new(0, 6, 3));
    assert_eq!(Ver::parse("v0.10.1.1"), Ver::new4(0, 10, 1, 1));
    assert_eq!(Ver::parse("0.10.2rc1"), Ver::new(0, 10, 2));
    assert_eq!(serving_era(Ver::parse("0.2.7")), Era::Y2023);
    assert_eq!(serving_era(Ver::parse("0.5.1")), Era::V040);
    assert_eq!(serving_era(Ver::parse("0.6.3.post1")), Era::V055);
    assert_eq!(serving_era(Ver::parse("0.10.1.1")), Era::V091);
    assert_eq!(serving_era(Ver::parse("0.10.2")), Era::Shim);
}

#[test]
fn parses_like_argparse() {
    let p = serving("0.8.5");
    let ns = p
        .parse(&argv(
            "--model m --num-prom 5 --port=9000 --dataset-n random",
        ))
        .unwrap();
    assert_eq!(ns.int("num_prompts"), Some(5));
    assert_eq!(ns.int("port"), Some(9000));
    assert_eq!(ns.str("dataset_name").as_deref(), Some("random"));
    assert_eq!(ns.str("host").as_deref(), Some("127.0.0.1"));
    assert_eq!(ns.float("request_rate"), Some(f64::INFINITY));
    // Unknown, ambiguous, missing: exit status 2.
    assert_eq!(p.parse(&argv("--model m --dtype float16")).unwrap_err(), 2);
    assert_eq!(p.parse(&argv("--model m --dataset x")).unwrap_err(), 2);
    assert_eq!(p.parse(&argv("--num-prompts 3")).unwrap_err(), 2);
    // FlexibleArgumentParser from v0.5.1 only.
    assert!(p.parse(&argv("--model m --num_prompts 3")).is_ok());
    assert_eq!(
        serving("0.5.0")
            .parse(&argv("--model m --num_prompts 3"))
            .unwrap_err(),
        2
    );
    // --dataset is exact (not ambiguous) while it exists.
    assert!(serving("0.6.3")
        .parse(&argv("--model m --dataset x"))
        .is_ok());
    assert_eq!(
        serving("0.6.3")
            .parse(&argv("--model m"))
            .unwrap()
            .str("host")
            .as_deref(),
        Some("localhost")
    );
}

#[test]
fn unknown_tokens_and_positionals() {
    let args = vec![
        Arg::new(&["model_tag"], Kind::Pos, Ty::Str, Val::None, ""),
        Arg::new(
            &["--enable-chunked-prefill"],
            Kind::OptBool,
            Ty::Str,
            Val::None,
            "",
        ),
        Arg::new(
            &["--tensor-parallel-size", "-tp"],
            Kind::Store,
            Ty::Int,
            Val::Int(1),
            "",
        ),
        Arg::new(
            &["--compilation-config", "-O"],
            Kind::Store,
            Ty::Str,
            Val::None,
            "",
        ),
        Arg::new(
            &["--enable-prefix-caching"],
            Kind::BoolOpt,
            Ty::Str,
            Val::None,
            "",
        ),
    ];
    let p = Parser::new("vllm serve", "", args, true);
    let (ns, extra) = p
        .parse_known(&argv(
            "M --enable-chunked-prefill False -tp 2 -O3 --no-enable-prefix-caching --dtype half",
        ))
        .unwrap();
    assert_eq!(ns.str("model_tag").as_deref(), Some("M"));
    assert_eq!(ns.get("enable_chunked_prefill"), &Val::Bool(false));
    assert_eq!(ns.int("tensor_parallel_size"), Some(2));
    assert_eq!(ns.str("compilation_config").as_deref(), Some("3"));
    assert_eq!(ns.get("enable_prefix_caching"), &Val::Bool(false));
    assert_eq!(extra, argv("--dtype half"));
    // argparse hands the first plain argument after an unknown option to the positional.
    let (ns, extra) = p.parse_known(&argv("--dtype float16 M")).unwrap();
    assert_eq!(ns.str("model_tag").as_deref(), Some("float16"));
    assert_eq!(extra, argv("--dtype M"));
}

#[test]
fn python_reprs_and_percentiles() {
    assert_eq!(py_float(f64::INFINITY), "inf");
    assert_eq!(py_float(1.0), "1.0");
    assert_eq!(py_float(1e-5), "1e-05");
    assert_eq!(Val::Str("it's".into()).repr(), "\"it's\"");
    assert_eq!(p_label(99.0), "99");
    assert_eq!(p_label(99.9), "99.9");
    assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0], 50.0), 2.5);
    assert_eq!(percentile(&[], 99.0), 0.0);
    assert_eq!(
        format!("{:-^50}", "Time to First Token"),
        "---------------Time to First Token----------------"
    );
    assert_eq!(
        format!("{:=^50}", " Serving Benchmark Result "),
        "============ Serving Benchmark Result ============"
    );
}

#[test]
fn json_roundtrip() {
    let j = crate::json::parse(
        r#"[{"conversations":[{"from":"human","value":"a \"b\" \u00e9 \ud83d\ude00"}]}]"#,
    )
    .unwrap();
    let v = j
        .idx(0)
        .unwrap()
        .get("conversations")
        .unwrap()
        .idx(0)
        .unwrap()
        .get("value")
        .unwrap();
    assert_eq!(v.as_str(), Some("a \"b\" é 😀"));
    assert!(crate::json::parse("[1,").is_err());
    assert_eq!(crate::json::quote("a\"\n"), "\"a\\\"\\n\"");
}
