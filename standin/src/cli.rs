//! The `vllm` console script (v0.5.2+): `vllm serve MODEL`, `vllm bench serve|throughput|
//! latency` where the version has them, argparse's subcommand errors where it does not.
//! `python3 -m vllm.entrypoints.cli.main` lands here too.

use crate::argparse::{Arg, Kind, Parser, Ty, Val};
use crate::eras::Ver;
use crate::pyenv::{import_vllm, Env, Site};
use crate::{client, flags, offline, server};

/// `vllm bench serve` exists from v0.8.0, `bench throughput|latency` from v0.8.5
/// (spec vllm-output-formats.md §0 table; the brief's "v0.8.3" for all three is not used).
const BENCH_SERVE: Ver = Ver::new(0, 8, 0);
const BENCH_OFFLINE: Ver = Ver::new(0, 8, 5);

fn subcommands(v: Ver) -> Vec<&'static str> {
    let mut s = vec!["serve", "complete", "chat"];
    if v >= BENCH_SERVE {
        s.push("bench");
    }
    if v >= BENCH_OFFLINE {
        s.extend(["collect-env", "run-batch"]);
    }
    s
}

fn top_help(v: Ver) -> String {
    let mut out = format!(
        "{}\n\nvLLM CLI\n\npositional arguments:\n  {{{}}}\n",
        usage_top(v),
        subcommands(v).join(",")
    );
    for s in subcommands(v) {
        let h = match s {
            "serve" => "Start the vLLM OpenAI Compatible API server.",
            "complete" => {
                "Generate text completions based on the given prompt via the running API server."
            }
            "chat" => "Generate chat completions via the running API server.",
            "bench" => "vLLM bench subcommand.",
            "collect-env" => "Start collecting environment information.",
            _ => "Run batch prompts and write results to file.",
        };
        out.push_str(&format!("    {s:<20}{h}\n"));
    }
    out.push_str("\noptions:\n  -h, --help            show this help message and exit\n  -v, --version         show program's version number and exit\n");
    out
}

fn usage_top(v: Ver) -> String {
    format!("usage: vllm [-h] [-v] {{{}}} ...", subcommands(v).join(","))
}

pub fn top_error(v: Ver, msg: &str) -> i32 {
    eprintln!("{}", usage_top(v));
    eprintln!("vllm: error: {msg}");
    2
}

/// `at`: where the import happens (console script or `python3 -m`).
pub fn main(argv: &[String], at: Site) -> i32 {
    if let Err(c) = import_vllm(at) {
        return c;
    }
    let e = Env::detect();
    let v = e.ver;
    let Some(first) = argv.first() else {
        print!("{}", top_help(v));
        return 0;
    };
    match first.as_str() {
        "-h" | "--help" => {
            print!("{}", top_help(v));
            return 0;
        }
        "-v" | "--version" => {
            println!("{}", e.version);
            return 0;
        }
        s if s.starts_with('-') => {
            return top_error(v, &format!("unrecognized arguments: {s}"));
        }
        _ => {}
    }
    let subs = subcommands(v);
    if !subs.contains(&first.as_str()) {
        let list: Vec<String> = subs.iter().map(|s| format!("'{s}'")).collect();
        return top_error(
            v,
            &format!(
                "argument subparser: invalid choice: '{first}' (choose from {})",
                list.join(", ")
            ),
        );
    }
    let rest = &argv[1..];
    match first.as_str() {
        "serve" => {
            // model_tag: required up to v0.7.2 (vllm/scripts.py), optional from v0.7.3.
            let tag = Arg::new(
                &["model_tag"],
                Kind::Pos,
                Ty::Str,
                Val::None,
                "The model tag to serve",
            );
            let mut args = vec![if v >= Ver::new(0, 7, 3) {
                tag.optional()
            } else {
                tag
            }];
            args.extend(flags::server_args(v));
            let p = Parser::new(
                "vllm serve",
                "Start the vLLM OpenAI Compatible API server.",
                args,
                true,
            );
            let (ns, extra) = match p.parse_known(rest) {
                Ok(x) => x,
                Err(c) => return c,
            };
            if !extra.is_empty() {
                return top_error(v, &format!("unrecognized arguments: {}", extra.join(" ")));
            }
            server::run(&e, &ns, true)
        }
        "bench" => bench(&e, rest),
        other => {
            eprintln!("vllm {other}: not modelled by the stand-in");
            2
        }
    }
}

fn bench(e: &Env, argv: &[String]) -> i32 {
    let v = e.ver;
    let mut kinds = vec!["serve"];
    if v >= BENCH_OFFLINE {
        kinds.extend(["latency", "throughput"]);
    }
    let usage = format!("usage: vllm bench [-h] {{{}}} ...", kinds.join(","));
    let Some(kind) = argv.first() else {
        eprintln!("{usage}");
        eprintln!("vllm bench: error: the following arguments are required: bench_type");
        return 2;
    };
    if kind == "-h" || kind == "--help" {
        println!("{usage}\n\npositional arguments:\n  {{{}}}\n\noptions:\n  -h, --help            show this help message and exit", kinds.join(","));
        return 0;
    }
    if !kinds.contains(&kind.as_str()) {
        let list: Vec<String> = kinds.iter().map(|s| format!("'{s}'")).collect();
        eprintln!("{usage}");
        eprintln!(
            "vllm bench: error: argument bench_type: invalid choice: '{kind}' (choose from {})",
            list.join(", ")
        );
        return 2;
    }
    let rest = &argv[1..];
    match kind.as_str() {
        "serve" => client::main(e, rest, None),
        k => offline::main(e, k, rest, None),
    }
}
