//! Every real output of the shared corpus (`../shared/corpus/metrics`, read by path, never
//! copied) must parse to the same metrics when each line carries a prefix the corpus never
//! had: Python logging formatters, container and compose columns, timestamps of many
//! shapes, rank markers, CI and pytest capture prefixes, with ANSI colour, CRLF and tabs.
//! The prefixes are generated, not listed, so the parser has to ignore *whatever* comes
//! before a label rather than recognise a fixed set.
//!
//! A long run (one core): `NIGHTSHIFT_PROPTEST_CASES=100000 nice -n 19 cargo test --release
//! --test parse_prefix_props -- --test-threads 1`.

mod support;

use nightshift::parse::{parse_bytes, ParseResult, StreamParser};
use proptest::prelude::*;
use std::sync::OnceLock;

/// (file name, text, parse of the bare text) for every metrics case.
fn cases() -> &'static [(String, String, ParseResult)] {
    static C: OnceLock<Vec<(String, String, ParseResult)>> = OnceLock::new();
    C.get_or_init(|| {
        let dir = support::corpus().join("metrics");
        let mut v: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("corpus at {}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "txt"))
            .map(|p| {
                let text = String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned();
                let bare = parse_bytes(text.as_bytes());
                (p.display().to_string(), text, bare)
            })
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        assert!(v.len() >= 24, "expected the 24 metrics cases");
        v
    })
}

/// One piece of a line prefix; `render` varies the parts a real log varies per line.
#[derive(Debug, Clone)]
enum Part {
    /// `INFO bench:benchmark_serving.py:812 ` (`%(levelname)s %(name)s:%(filename)s:%(lineno)d`).
    PyNameFile {
        level: &'static str,
        name: String,
        file: String,
    },
    /// `2024-07-08 20:49:31,123 - bench - INFO - `.
    PyDashed { name: String, level: &'static str },
    /// `[2024-07-08 20:49:31] [INFO] ` or `[2024-07-08 20:49:31,123][INFO][x.py:12] `.
    BracketDateLevel {
        level: &'static str,
        file: Option<String>,
    },
    /// `INFO:root:` / `WARNING:bench:` (logging.basicConfig default).
    PyDefault { level: &'static str, name: String },
    /// glog / absl: `I0708 20:49:31.123456  4321 file.py:123] `.
    Glog { file: String, pid: u32 },
    /// vLLM's own logger header, both layouts.
    Vllm {
        level: &'static str,
        file: String,
        bracket: bool,
    },
    /// `vllm-server-1  | `.
    Compose { name: String, pad: usize },
    /// `(APIServer pid=1) `.
    ProcTag { name: &'static str, pid: u32 },
    /// `[pod/vllm-0/server] ` (kubectl logs --prefix).
    Kube { pod: String },
    /// A timestamp in one of many shapes.
    Time { shape: u8 },
    /// `[rank0]: `, `[Rank 3] `, `[1,0]<stdout>:`, `0: `, `[default0]:`.
    Rank { shape: u8, rank: u32 },
    /// GitHub Actions / Buildkite / Jenkins / pytest / tox / xdist prefixes.
    Ci { shape: u8, name: String },
    /// Words of no known format: each holds a digit or punctuation, or ends in a
    /// separator, as every real prefix word does (plain words are labels).
    Random { words: Vec<String> },
}

const LEVELS: &[&str] = &[
    "INFO", "DEBUG", "WARNING", "ERROR", "info", "Info", "NOTICE",
];

fn name() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9_]{0,10}(\\.[a-z][a-z0-9_]{0,8}){0,2}"
}

fn file() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9_]{0,16}".prop_map(|f| format!("{f}.py"))
}

fn part() -> impl Strategy<Value = Part> {
    let level = || prop::sample::select(LEVELS);
    prop_oneof![
        (level(), name(), file()).prop_map(|(level, name, file)| Part::PyNameFile {
            level,
            name,
            file
        }),
        (name(), level()).prop_map(|(name, level)| Part::PyDashed { name, level }),
        (level(), prop::option::of(file()))
            .prop_map(|(level, file)| Part::BracketDateLevel { level, file }),
        (level(), name()).prop_map(|(level, name)| Part::PyDefault { level, name }),
        (file(), 1u32..99999).prop_map(|(file, pid)| Part::Glog { file, pid }),
        (level(), file(), any::<bool>()).prop_map(|(level, file, bracket)| Part::Vllm {
            level,
            file,
            bracket
        }),
        ("[a-z][a-z0-9_-]{0,14}", 1usize..6).prop_map(|(name, pad)| Part::Compose { name, pad }),
        (
            prop::sample::select(vec![
                "APIServer",
                "EngineCore_DP0",
                "VllmWorker TP0",
                "bench"
            ]),
            1u32..99999
        )
            .prop_map(|(name, pid)| Part::ProcTag { name, pid }),
        "[a-z][a-z0-9-]{0,12}".prop_map(|pod| Part::Kube { pod }),
        (0u8..14).prop_map(|shape| Part::Time { shape }),
        (0u8..6, 0u32..16).prop_map(|(shape, rank)| Part::Rank { shape, rank }),
        (0u8..8, "[a-z][a-z0-9_]{0,10}").prop_map(|(shape, name)| Part::Ci { shape, name }),
        prop::collection::vec(
            // (No leading `#`/`>` before letters, no `*`: markdown the parser removes.)
            "[A-Za-z]{1,6}[0-9:.\\[\\]()|#/<>@_~+%]{1,4}[a-z0-9]{0,4}|[0-9:.\\[\\]()|/<@_~%]{1,4}[a-z0-9]{0,4}",
            1..4
        )
        .prop_map(|words| Part::Random { words }),
    ]
}

/// A clock that moves with the line number, so every line's prefix differs.
fn clock(n: usize) -> (u32, u32, u32, u32) {
    let t = 20 * 3600 + n as u32 * 7;
    (
        (t / 3600) % 24,
        (t / 60) % 60,
        t % 60,
        (n as u32 * 7919) % 1000,
    )
}

fn time(shape: u8, n: usize) -> String {
    let (h, m, s, ms) = clock(n);
    match shape {
        0 => format!("2024-07-08T{h:02}:{m:02}:{s:02}.{ms:03}Z "),
        1 => format!("2024-07-08T{h:02}:{m:02}:{s:02}.{ms:03}4567Z "),
        2 => format!("2024-07-08 {h:02}:{m:02}:{s:02},{ms:03} "),
        3 => format!("2024/07/08 {h:02}:{m:02}:{s:02} "),
        4 => format!("Jul 08 {h:02}:{m:02}:{s:02} "),
        5 => format!("[{h:02}:{m:02}:{s:02}] "),
        6 => format!("{h:02}:{m:02}:{s:02}.{ms:03} "),
        7 => format!("1720468{s:03}.{ms:03} "),
        8 => format!("[2024-07-08 {h:02}:{m:02}:{s:02}.{ms:03}+00:00] "),
        9 => format!("Mon Jul  8 {h:02}:{m:02}:{s:02} UTC 2024: "),
        10 => format!("[+{s}.{ms:03}s] "),
        11 => format!("({h}:{m:02}:{s:02}) "),
        12 => format!("2024-07-08T{h:02}:{m:02}:{s:02}+0200 "),
        _ => format!("{}.{ms:03}s ", s + 60 * m),
    }
}

fn render_part(p: &Part, n: usize, out: &mut String) {
    let (h, m, s, ms) = clock(n);
    let line_no = 10 + (n * 31) % 900;
    let piece = match p {
        Part::PyNameFile { level, name, file } => format!("{level} {name}:{file}:{line_no} "),
        Part::PyDashed { name, level } => {
            format!("2024-07-08 {h:02}:{m:02}:{s:02},{ms:03} - {name} - {level} - ")
        }
        Part::BracketDateLevel { level, file: None } => {
            format!("[2024-07-08 {h:02}:{m:02}:{s:02}] [{level}] ")
        }
        Part::BracketDateLevel {
            level,
            file: Some(f),
        } => format!("[2024-07-08 {h:02}:{m:02}:{s:02},{ms:03}][{level}][{f}:{line_no}] "),
        Part::PyDefault { level, name } => format!("{level}:{name}:"),
        Part::Glog { file, pid } => {
            format!("I0708 {h:02}:{m:02}:{s:02}.{ms:03}456 {pid:>6} {file}:{line_no}] ")
        }
        Part::Vllm {
            level,
            file,
            bracket: true,
        } => format!("{level} 07-08 {h:02}:{m:02}:{s:02} [{file}:{line_no}] "),
        Part::Vllm {
            level,
            file,
            bracket: false,
        } => format!("{level} 07-08 {h:02}:{m:02}:{s:02} {file}:{line_no}] "),
        Part::Compose { name, pad } => format!("{name}{}| ", " ".repeat(*pad)),
        Part::ProcTag { name, pid } => format!("({name} pid={pid}) "),
        Part::Kube { pod } => format!("[pod/{pod}-0/server] "),
        Part::Time { shape } => time(*shape, n),
        Part::Rank { shape, rank } => match shape {
            0 => format!("[rank{rank}]: "),
            1 => format!("[rank{rank}]:"),
            2 => format!("[Rank {rank}] "),
            3 => format!("[1,{rank}]<stdout>:"),
            4 => format!("{rank}: "),
            _ => format!("[default{rank}]:"),
        },
        Part::Ci { shape, name } => match shape {
            0 => format!("[2024-07-08T{h:02}:{m:02}:{s:02}Z] "),
            1 => "E       ".to_string(),
            2 => format!("[gw{}] ", n % 4),
            3 => format!("{name}: "),
            4 => format!("{name} run-test: "),
            5 => "[Pipeline] ".to_string(),
            6 => format!("#{} {s}.{ms:03} ", 5 + n % 20),
            _ => "##[debug]".to_string(),
        },
        Part::Random { words } => words.iter().map(|w| format!("{w} ")).collect(),
    };
    out.push_str(&piece);
}

/// How a generated file differs from the bare one, beyond its prefix.
#[derive(Debug, Clone)]
struct Noise {
    /// Colour each prefix part (`\x1b[32m…\x1b[0m`).
    ansi_prefix: bool,
    /// Colour the whole original text of the line.
    ansi_text: bool,
    crlf: bool,
    /// Runs of two or more spaces become a tab.
    tabs: bool,
}

fn noise() -> impl Strategy<Value = Noise> {
    (any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(a, b, c, d)| Noise {
        ansi_prefix: a,
        ansi_text: b,
        crlf: c,
        tabs: d,
    })
}

fn tabbed(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut spaces = 0;
    for ch in line.chars() {
        if ch == ' ' {
            spaces += 1;
            continue;
        }
        match spaces {
            0 => {}
            1 => out.push(' '),
            _ => out.push('\t'),
        }
        spaces = 0;
        out.push(ch);
    }
    out
}

fn decorate(text: &str, parts: &[Part], noise: &Noise) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    for (n, line) in text.lines().enumerate() {
        for (i, p) in parts.iter().enumerate() {
            if noise.ansi_prefix {
                out.push_str(["\x1b[32m", "\x1b[1;36m", "\x1b[2m"][i % 3]);
            }
            render_part(p, n, &mut out);
            if noise.ansi_prefix {
                out.push_str("\x1b[0m");
            }
        }
        let line = if noise.tabs {
            tabbed(line)
        } else {
            line.to_string()
        };
        if noise.ansi_text && !line.trim().is_empty() {
            out.push_str("\x1b[1m");
            out.push_str(&line);
            out.push_str("\x1b[0m");
        } else {
            out.push_str(&line);
        }
        out.push_str(if noise.crlf { "\r\n" } else { "\n" });
    }
    out
}

fn same(got: &ParseResult, bare: &ParseResult) -> Result<(), TestCaseError> {
    prop_assert_eq!(got.kind, bare.kind);
    prop_assert_eq!(&got.metrics, &bare.metrics);
    prop_assert_eq!(got.truncated, bare.truncated);
    Ok(())
}

proptest! {
    #![proptest_config(support::config())]

    #[test]
    fn corpus_metrics_survive_any_prefix(
        idx in any::<prop::sample::Index>(),
        parts in prop::collection::vec(part(), 1..4),
        noise in noise(),
        chunk in 1usize..4096,
    ) {
        let (name, text, bare) = &cases()[idx.index(cases().len())];
        let decorated = decorate(text, &parts, &noise);
        let whole = parse_bytes(decorated.as_bytes());
        same(&whole, bare).map_err(|e| {
            TestCaseError::fail(format!("{name}: {e}\n--- first lines:\n{}",
                decorated.lines().take(6).collect::<Vec<_>>().join("\n")))
        })?;
        // The engine's path: line by line, or chunks as a container prints them.
        let mut p = StreamParser::new();
        for c in decorated.as_bytes().chunks(chunk) {
            p.feed(c);
        }
        same(&p.finish(), bare)?;
    }
}

/// The bare corpus must have something to lose, or the property above proves nothing.
#[test]
fn corpus_cases_have_metrics() {
    for (name, _, bare) in cases() {
        assert!(!bare.metrics.is_empty(), "{name}: nothing parsed");
    }
}
