//! The campaign's inputs: the base plan, its mutations, hostile files and arguments.

use super::{short, Case, Expect};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The plan every field mutation starts from: valid (`plan check` exits 0), one field a
/// line, every line unique so a mutation replaces exactly one.
pub(crate) const BASE: &str = r#"schema_version = 1
name = "bad-inputs"

[defaults]
gpu_type = "H100"
gpu_count = 1
server_start_timeout_s = 900
run_timeout_s = 3600
timeout_s_by_gpus = { "1" = 3600 }
repeats = 1
warmup = "none"
warmup_requests = 0
variants = ["baseline", "human", "agent"]
on_invalid = "skip"
fetch_weights = true
ipc = "host"

[images]
org = "anonymous"
human = "{org}/vllm-bench:{commit}"
baseline = "{org}/vllm-baseline:baseline-{parent12}"

[[agents]]
id = "claude_code"
patch = "patches/{commit8}.diff"

[[commits]]
commit = "3a243095e5e7b655b63ab08fbd5936cb40850415"
parent = "64172a976c8d975b3aec946f1675716d2532d94f"
title = "a commit"
model = "meta-llama/Llama-3.1-8B-Instruct"
gpu_config = "H100:1"
benchmark_mode = "latency"
perf_command = '''python benchmarks/benchmark_latency.py --model meta-llama/Llama-3.1-8B-Instruct --batch-size 1'''
repeats = 2
skip = false
vllm_version = "0.6.3"
notes = "n"
sim = { transient = false }
"#;

/// How a field's values are judged.
#[derive(Clone, Copy)]
enum Kind {
    /// An integer with bounds; `zero_ok` when 0 is a valid value.
    Count {
        zero_ok: bool,
    },
    /// Seconds: 1 ..= a week.
    Secs,
    /// Only the original fits: schema_version = 1, a word of a few, a commit hash.
    Exact,
    Bool,
    /// Free text: any string is acceptable, other types are not.
    Text,
    /// Text with rules: an empty string is refused; others are valid or refused by name.
    NonEmpty,
    /// A parent hash: empty means "unknown" (a warning), other text is refused.
    Parent,
    /// A list of variant names.
    List,
}

/// (label, TOML value): wrong types, signs, sizes, and hostile strings.
#[rustfmt::skip]
fn values() -> Vec<(&'static str, String)> {
    let v = |l: &'static str, t: &str| (l, t.to_string());
    vec![
        v("string", "\"x\""), v("bool", "true"), v("array", "[]"), v("table", "{}"),
        v("float", "1.5"), v("negative", "-1"), v("zero", "0"), v("u32::MAX", "4294967295"),
        v("u32::MAX+1", "4294967296"), v("i64::MAX", "9223372036854775807"),
        v("u64::MAX", "18446744073709551615"), v("1e308", "1e308"), v("inf", "inf"),
        v("nan", "nan"), v("\"NaN\"", "\"NaN\""), v("empty", "\"\""),
        ("1 MB", format!("\"{}\"", "a".repeat(1 << 20))),
        v("control", "\"\\u0001\\u001b[31mred\\u0007\""), v("NUL", "\"a\\u0000b\""),
    ]
}

fn expect(kind: Kind, label: &str) -> Expect {
    let string = matches!(
        label,
        "string" | "\"NaN\"" | "empty" | "1 MB" | "control" | "NUL"
    );
    match kind {
        Kind::Count { zero_ok: true } if label == "zero" => Expect::Either,
        Kind::Count { .. } | Kind::Secs | Kind::Exact => Expect::Refuse,
        // `true` where `false` was written: valid (skip = true makes nothing runnable).
        Kind::Bool if label == "bool" => Expect::Either,
        Kind::Text if string => Expect::Either,
        Kind::NonEmpty if string && label != "empty" => Expect::Either,
        Kind::Parent if label == "empty" => Expect::Either,
        // An empty list is a plan that runs nothing (valid, not runnable).
        Kind::List if label == "array" => Expect::Either,
        _ => Expect::Refuse,
    }
}

/// Every field of [`BASE`]: its line, and how its values are judged.
#[rustfmt::skip]
fn fields() -> Vec<(&'static str, &'static str, Kind)> {
    use Kind::*;
    vec![
        ("schema_version", "schema_version = 1", Exact),
        ("name", "name = \"bad-inputs\"", NonEmpty),
        ("gpu_type", "gpu_type = \"H100\"", Text),
        ("gpu_count", "gpu_count = 1", Count { zero_ok: false }),
        ("server_start_timeout_s", "server_start_timeout_s = 900", Secs),
        ("run_timeout_s", "run_timeout_s = 3600", Secs),
        ("timeout_s_by_gpus.1", "timeout_s_by_gpus = { \"1\" = 3600 }", Secs),
        ("repeats", "repeats = 1", Count { zero_ok: false }),
        ("warmup", "warmup = \"none\"", Exact),
        ("warmup_requests", "warmup_requests = 0", Count { zero_ok: true }),
        ("variants", "variants = [\"baseline\", \"human\", \"agent\"]", List),
        ("on_invalid", "on_invalid = \"skip\"", Exact),
        ("fetch_weights", "fetch_weights = true", Bool),
        ("ipc", "ipc = \"host\"", Exact),
        ("images.org", "org = \"anonymous\"", Text),
        ("images.human", "human = \"{org}/vllm-bench:{commit}\"", Text),
        ("images.baseline", "baseline = \"{org}/vllm-baseline:baseline-{parent12}\"", Text),
        ("agents.id", "id = \"claude_code\"", NonEmpty),
        ("agents.patch", "patch = \"patches/{commit8}.diff\"", Text),
        ("commit", "commit = \"3a243095e5e7b655b63ab08fbd5936cb40850415\"", Exact),
        ("parent", "parent = \"64172a976c8d975b3aec946f1675716d2532d94f\"", Parent),
        ("title", "title = \"a commit\"", Text),
        ("model", "model = \"meta-llama/Llama-3.1-8B-Instruct\"", Text),
        // Any GPU name is a GPU type (not this machine's: a warning).
        ("gpu_config", "gpu_config = \"H100:1\"", NonEmpty),
        ("benchmark_mode", "benchmark_mode = \"latency\"", Exact),
        // Any text is a command; one that cannot run makes the commit invalid (skipped).
        ("perf_command", "perf_command = '''python benchmarks/benchmark_latency.py --model meta-llama/Llama-3.1-8B-Instruct --batch-size 1'''", Text),
        ("commit.repeats", "repeats = 2", Count { zero_ok: false }),
        ("skip", "skip = false", Bool),
        ("vllm_version", "vllm_version = \"0.6.3\"", Text),
        ("notes", "notes = \"n\"", Text),
    ]
}

fn with_value(line: &str, value: &str) -> String {
    let (key, _) = line.split_once(" = ").unwrap();
    if key == "timeout_s_by_gpus" {
        return format!("timeout_s_by_gpus = {{ \"1\" = {value} }}");
    }
    format!("{key} = {value}")
}

fn replace_once(text: &str, from: &str, to: &str) -> String {
    assert_eq!(text.matches(from).count(), 1, "`{from}` is not unique");
    text.replacen(from, to, 1)
}

/// [`BASE`] with a `commits_file` line.
fn with_commits_file(f: &str) -> String {
    let name = "name = \"bad-inputs\"\n";
    replace_once(BASE, name, &format!("{name}commits_file = \"{f}\"\n"))
}

pub(crate) struct Campaign {
    pub(crate) dir: PathBuf,
    pub(crate) cases: Vec<Case>,
    n: usize,
}

/// Every case of the campaign; `store` holds a finished sim sweep.
pub(crate) fn all(c: &mut Campaign, store: &str) {
    plan_cases(c);
    syntax_cases(c);
    encoding_cases(c);
    file_cases(c);
    limit_cases(c);
    override_cases(c);
    cli_cases(c, store);
}

impl Campaign {
    pub(crate) fn new(dir: PathBuf) -> Campaign {
        std::fs::create_dir_all(&dir).unwrap();
        Campaign {
            dir,
            cases: Vec::new(),
            n: 0,
        }
    }

    /// A file of the campaign with these bytes; returns its path.
    fn file(&mut self, name: &str, bytes: impl AsRef<[u8]>) -> String {
        self.n += 1;
        let p = self.dir.join(format!("{:04}-{name}", self.n));
        std::fs::write(&p, bytes).unwrap();
        p.display().to_string()
    }

    fn add(
        &mut self,
        cat: &'static str,
        name: impl Into<String>,
        args: &[&str],
        file: Option<&str>,
        expect: Expect,
    ) {
        let args = args.iter().map(OsString::from).collect();
        let (name, file) = (name.into(), file.map(str::to_string));
        self.cases.push(Case {
            category: cat,
            name,
            args,
            file,
            expect,
        });
    }

    /// `plan check` on a plan with this text; a refusal must name `names` (default: the
    /// plan).
    fn plan_naming(
        &mut self,
        cat: &'static str,
        name: impl Into<String>,
        text: impl AsRef<[u8]>,
        names: Option<&str>,
        expect: Expect,
    ) {
        let p = self.file("plan.toml", text);
        self.add(
            cat,
            name,
            &["plan", "check", &p],
            Some(names.unwrap_or(&p)),
            expect,
        );
    }

    fn plan(
        &mut self,
        cat: &'static str,
        name: impl Into<String>,
        text: impl AsRef<[u8]>,
        expect: Expect,
    ) {
        self.plan_naming(cat, name, text, None, expect)
    }
}

#[rustfmt::skip]
fn plan_cases(c: &mut Campaign) {
    c.plan("plan: base", "the valid base plan", BASE, Expect::Exit(&[0]));
    for (field, line, kind) in fields() {
        for (label, value) in values() {
            let text = replace_once(BASE, line, &with_value(line, &value));
            c.plan("plan: field values", format!("{field} = {label}"), text, expect(kind, label));
        }
    }
    let k = "plan: keys";
    // Unknown and duplicate keys, in every table.
    for (at, extra) in [
        ("name = \"bad-inputs\"\n", "bogus = 1\n"),
        ("gpu_count = 1\n", "gpu_cuont = 2\n"),
        ("org = \"anonymous\"\n", "bogus = \"x\"\n"),
        ("id = \"claude_code\"\n", "bogus = \"x\"\n"),
        ("title = \"a commit\"\n", "bogus = \"x\"\n"),
        ("title = \"a commit\"\n", "Commit = \"x\"\n"),
    ] {
        let text = replace_once(BASE, at, &format!("{at}{extra}"));
        c.plan(k, format!("unknown key {} after `{}`", extra.trim(), at.trim()), text, Expect::Refuse);
    }
    c.plan(k, "unknown key in sim", BASE.replace("{ transient = false }", "{ bogus = 1 }"), Expect::Refuse);
    for (at, twice) in [
        ("name = \"bad-inputs\"\n", "name = \"again\"\n"),
        ("repeats = 1\n", "repeats = 1\n"),
        ("title = \"a commit\"\n", "commit = \"3a243095e5e7b655b63ab08fbd5936cb40850415\"\n"),
        ("ipc = \"host\"\n", "\n[defaults]\nrepeats = 1\n"),
        ("baseline = \"{org}/vllm-baseline:baseline-{parent12}\"\n", "\n[images]\norg = \"x\"\n"),
        ("timeout_s_by_gpus = { \"1\" = 3600 }\n", "timeout_s_by_gpus = { \"1\" = 1 }\n"),
    ] {
        let text = replace_once(BASE, at, &format!("{at}{twice}"));
        c.plan(k, format!("duplicate {}", twice.trim().replace('\n', " ")), text, Expect::Refuse);
    }
    let gpus = |to: &str| BASE.replace("{ \"1\" = 3600 }", to);
    c.plan(k, "duplicate key in an inline table", gpus("{ \"1\" = 3600, \"1\" = 60 }"), Expect::Refuse);
    c.plan(k, "a GPU count key that is not one", gpus("{ \"x\" = 3600 }"), Expect::Refuse);
    c.plan(k, "GPU count key u32::MAX+1", gpus("{ \"4294967296\" = 3600 }"), Expect::Refuse);
    let commit = &BASE[BASE.find("[[commits]]").unwrap()..];
    c.plan(k, "the same commit twice", format!("{BASE}{commit}"), Expect::Refuse);
    c.plan(k, "an unknown variant", BASE.replace("\"agent\"]", "\"agent\", \"bogus\"]"), Expect::Refuse);
    let agents = "[[agents]]\nid = \"claude_code\"\npatch = \"patches/{commit8}.diff\"\n";
    c.plan(k, "an agent variant without agents", BASE.replace(agents, ""), Expect::Refuse);
}

#[rustfmt::skip]
fn syntax_cases(c: &mut Campaign) {
    let s = "plan: syntax";
    let lines: Vec<&str> = BASE.lines().collect();
    // A line that is no TOML before every line, and every line cut in half.
    for i in 0..lines.len() {
        let mut l = lines.clone();
        l.insert(i, "= oops");
        c.plan(s, format!("`= oops` before line {}", i + 1), l.join("\n"), Expect::Refuse);
    }
    for (i, line) in lines.iter().enumerate().filter(|(_, l)| l.contains(" = ")) {
        let mut l = lines.clone();
        l[i] = &line[..line.len() / 2];
        // Almost every half is broken; one that happens to parse may be valid.
        c.plan(s, format!("line {} cut in half", i + 1), l.join("\n"), Expect::Either);
    }
    for (what, from, to) in [
        ("unclosed table header", "[[commits]]", "[[commits]"),
        ("unclosed string", "title = \"a commit\"", "title = \"a commit"),
        ("unclosed array", "\"agent\"]", "\"agent\""),
        ("unclosed inline table", "{ transient = false }", "{ transient = false"),
        ("unclosed multi-line string", "--batch-size 1'''", "--batch-size 1"),
        ("no value", "title = \"a commit\"", "title ="),
        ("no =", "title = \"a commit\"", "title \"a commit\""),
        ("stray }", "notes = \"n\"", "notes = \"n\" }"),
        ("bad escape", "title = \"a commit\"", "title = \"a \\q commit\""),
        ("header in a value", "title = \"a commit\"", "title = [defaults]"),
        ("raw newline in a string", "title = \"a commit\"", "title = \"a\ncommit\""),
        ("bare word value", "title = \"a commit\"", "title = commit"),
        ("leading zero", "gpu_count = 1", "gpu_count = 01"),
        ("date value", "gpu_count = 1", "gpu_count = 1979-05-27"),
    ] {
        c.plan(s, what, replace_once(BASE, from, to), Expect::Refuse);
    }
    // TOML allows hexadecimal integers: 0x1 is 1.
    c.plan(s, "hex count", replace_once(BASE, "gpu_count = 1", "gpu_count = 0x1"), Expect::Exit(&[0]));
    let deep = format!("x = {}{}\n{BASE}", "[".repeat(100_000), "]".repeat(100_000));
    c.plan(s, "arrays nested 100 000 deep", deep, Expect::Refuse);
    let deep = format!("x = {}1{}\n{BASE}", "{ a = ".repeat(20_000), " }".repeat(20_000));
    c.plan(s, "tables nested 20 000 deep", deep, Expect::Refuse);
    let deep = format!("{} = 1\n{BASE}", vec!["a"; 50_000].join("."));
    c.plan(s, "a dotted key 50 000 deep", deep, Expect::Refuse);
}

#[rustfmt::skip]
fn encoding_cases(c: &mut Campaign) {
    let b = BASE.as_bytes();
    let at = |s: &str| BASE.find(s).unwrap();
    let splice = |i: usize, bad: &[u8]| [&b[..i], bad, &b[i..]].concat();
    let title = at("a commit") + 2;
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("0xff first", splice(0, b"\xff")),
        ("0xff in a string", splice(title, b"\xff")),
        ("0xff in a key", splice(at("title"), b"\xff")),
        ("0xff in a comment", splice(0, b"# \xff\n")),
        ("Latin-1 e-acute in a title", splice(title, b"\xe9")),
        ("UTF-16 byte-order mark", splice(0, b"\xff\xfe")),
        ("UTF-16 text", BASE.encode_utf16().flat_map(u16::to_le_bytes).collect()),
        ("a cut UTF-8 sequence last", [b, &b"# \xe2\x82"[..]].concat()),
        ("an overlong NUL", splice(title, b"\xc0\x80")),
        ("a surrogate in UTF-8", splice(title, b"\xed\xa0\x80")),
        ("NUL bytes raw", splice(at("title"), b"\0\0")),
        ("a raw control byte in a string", splice(title, b"\x1b")),
        ("CR line ends", BASE.replace('\n', "\r").into_bytes()),
    ];
    for (what, bytes) in cases {
        c.plan("plan: encoding", what, bytes, Expect::Refuse);
    }
    // A UTF-8 byte-order mark: either answer is right, never a crash. CRLF is TOML.
    c.plan("plan: encoding", "UTF-8 byte-order mark", [&b"\xef\xbb\xbf"[..], b].concat(), Expect::Either);
    c.plan("plan: encoding", "CRLF line ends", BASE.replace('\n', "\r\n"), Expect::Exit(&[0]));
}

#[rustfmt::skip]
fn file_cases(c: &mut Campaign) {
    let f = "plan: files";
    c.plan(f, "empty file", "", Expect::Refuse);
    c.plan(f, "whitespace only", "  \n\t\n", Expect::Refuse);
    c.plan(f, "a comment only", "# nothing\n", Expect::Refuse);
    // Valid, and runs nothing: `plan check` says so with exit 2.
    c.plan(f, "no commits", "schema_version = 1\n", Expect::Either);
    let big = format!("{BASE}{}", "# padding padding padding padding\n".repeat(520_000));
    c.plan(f, "17 MiB plan", big, Expect::Refuse);
    let dir = c.dir.join("a-directory");
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = c.dir.join("a-fifo");
    let cs = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(cs.as_ptr(), 0o600) }, 0);
    let looped = c.dir.join("a-loop");
    std::os::unix::fs::symlink(&looped, &looped).unwrap();
    let dangling = c.dir.join("dangling");
    std::os::unix::fs::symlink(c.dir.join("nowhere"), &dangling).unwrap();
    let shown = |p: &Path| p.display().to_string();
    let specials: Vec<(&str, String)> = vec![
        ("a directory", shown(&dir)), ("/dev/zero", "/dev/zero".into()),
        ("/dev/null", "/dev/null".into()), ("/dev/urandom", "/dev/urandom".into()),
        ("a FIFO", shown(&fifo)), ("a missing file", shown(&c.dir.join("missing.toml"))),
        ("a symlink loop", shown(&looped)), ("a dangling symlink", shown(&dangling)),
    ];
    for (what, p) in &specials {
        for (cat, cmd) in [
            (f, &["plan", "check"][..]), (f, &["plan", "show", "--json"]),
            ("cli: parse", &["parse"]), ("cli: diagnose", &["diagnose"]),
            ("cli: plan", &["plan", "import", "--from", "seed-json", "--name", "x"]),
        ] {
            let args = [cmd, &[p.as_str()]].concat();
            c.add(cat, format!("{} {what}", cmd.join(" ")), &args, Some(p), Expect::Refuse);
        }
        if *what != "/dev/null" {
            let text = with_commits_file(p);
            c.plan("plan: commits_file", format!("commits_file: {what}"), text, Expect::Refuse);
        }
        // Paths the plan names for later (read by `plan check` or not): valid or refused
        // with the plan's path, never a hang on a device.
        let patch = "patch = \"patches/{commit8}.diff\"";
        c.plan(f, format!("agent patch {what}"), replace_once(BASE, patch, &format!("patch = \"{p}\"")), Expect::Either);
        let src = format!("ipc = \"host\"\nvllm_src = \"{p}\"\nhf_cache = \"{p}\"");
        c.plan(f, format!("vllm_src and hf_cache {what}"), replace_once(BASE, "ipc = \"host\"", &src), Expect::Either);
        c.plan(f, format!("dataset {what}"), format!("{BASE}[datasets]\nsharegpt = \"{p}\"\n"), Expect::Either);
    }
    // What is in a commits file: errors there name the commits file.
    let good = r#"{"commit": "4b243095e5e7b655b63ab08fbd5936cb40850415", "parent": "64172a976c8d975b3aec946f1675716d2532d94f", "model": "m", "perf_command": "python benchmarks/benchmark_latency.py --model m"}"#;
    let field = |f: &str| good.replace("\"model\"", &format!("{f}, \"model\""));
    let jsonl: Vec<(&str, Vec<u8>)> = vec![
        ("a bad JSON line", format!("{good}\n{{\"commit\": \n").into_bytes()),
        ("non-UTF-8", [format!("{good}\n").as_bytes(), b"\xff\n"].concat()),
        ("repeats u32::MAX", field("\"repeats\": 4294967295").into_bytes()),
        ("repeats 1e308", field("\"repeats\": 1e308").into_bytes()),
        ("an unknown field", field("\"bogus\": 1").into_bytes()),
        ("sim.log_kb u64::MAX", field("\"sim\": {\"log_kb\": 18446744073709551615}").into_bytes()),
    ];
    for (what, bytes) in jsonl {
        let p = c.file("commits.jsonl", bytes);
        c.plan_naming("plan: commits_file", format!("commits_file: {what}"), with_commits_file(&p), Some(&p), Expect::Refuse);
    }
}

#[rustfmt::skip]
fn limit_cases(c: &mut Campaign) {
    let l = "plan: limits";
    for (what, from, to) in [
        ("repeats 101", "repeats = 1\n", "repeats = 101\n"),
        ("repeats 1 000 000", "repeats = 1\n", "repeats = 1000000\n"),
        ("commit repeats u32::MAX", "repeats = 2\n", "repeats = 4294967295\n"),
        ("gpu_config H100:4294967295", "\"H100:1\"", "\"H100:4294967295\""),
        ("gpu_config H100:65", "\"H100:1\"", "\"H100:65\""),
        ("tp u32::MAX", "--batch-size 1", "--batch-size 1 -tp 4294967295"),
        ("tp × pp 65536 × 65536", "--batch-size 1", "--batch-size 1 -tp 65536 -pp 65536"),
        ("tp 128", "--batch-size 1", "--batch-size 1 -tp 128"),
        ("sim.log_kb i64::MAX", "{ transient = false }", "{ log_kb = 9223372036854775807 }"),
        ("timeout a week and a second", "run_timeout_s = 3600", "run_timeout_s = 604801"),
    ] {
        c.plan(l, what, replace_once(BASE, from, to), Expect::Refuse);
    }
    // More runs than the limit: 701 commits × 3 variants × 100 repeats.
    let commit = BASE[BASE.find("[[commits]]").unwrap()..].replace("repeats = 2\n", "");
    let mut text = BASE.replace("repeats = 1\n", "repeats = 100\n").replace("repeats = 2\n", "");
    for i in 0..700 {
        text.push_str(&commit.replace("3a243095e5e7b655b63a", &format!("{i:020x}")));
    }
    c.plan(l, "210 300 runs", text, Expect::Refuse);
    // More commits than the limit, from a commits file (the error names its line).
    let lines: String = (0..50_001).map(|i| format!("{{\"commit\": \"{i:040x}\"}}\n")).collect();
    let p = c.file("many.jsonl", lines);
    c.plan_naming(l, "50 001 commits", with_commits_file(&p), Some(&p), Expect::Refuse);
}

#[rustfmt::skip]
fn cli_cases(c: &mut Campaign, store: &str) {
    let good = c.file("good.toml", BASE);
    let huge = c.file("huge.toml", BASE.replace("repeats = 1\n", "repeats = 4294967295\n"));
    let empty = c.file("empty.log", "");
    let binary: Vec<u8> = (0..200_000u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    let binary = c.file("binary.log", binary);
    let long_line = c.file("long.log", "x".repeat(6 << 20));
    let latin1 = c.file("latin1.log", b"Avg latency: 1.5 seconds \xe9\xff\n");
    let broken_json = c.file("broken.json", "{\"avg_latency\": ");
    let deep_json = c.file("deep.json", format!("{}{}", "[".repeat(200_000), "]".repeat(200_000)));
    let nul_log = c.file("nul.log", b"Traceback\0\0\0\nValueError: \0x\n");
    let cr_log = c.file("cr.log", "a\rb\rc\r".repeat(100_000));
    let missing = c.dir.join("missing.log").display().to_string();
    let a_file = c.file("not-a-store", "x");
    let empty_dir = c.dir.join("empty-dir");
    std::fs::create_dir_all(&empty_dir).unwrap();
    let empty_dir = empty_dir.display().to_string();
    let no_dir = c.dir.join("no-such-store").display().to_string();
    // Each `run` its own store: one wrongly accepted must not touch the others'.
    let rs: Vec<String> = (0..9).map(|i| c.dir.join(format!("run-{i}")).display().to_string()).collect();
    let (r, e) = (Expect::Refuse, Expect::Exit);
    let (p, d, s, x) = ("cli: plan", "cli: parse", "cli: diagnose", "cli: results/show");
    let sim = |plan: &str, more: &[&str], store: &str| -> Vec<String> {
        let mut a = vec!["run", plan, "--runtime", "sim", "--headless", "--store", store];
        a.extend_from_slice(more);
        a.into_iter().map(str::to_string).collect()
    };
    let runs: Vec<(Vec<String>, Option<&str>)> = vec![
        (sim(&huge, &[], &rs[0]), Some(&huge)),
        (sim("/dev/zero", &[], &rs[1]), Some("/dev/zero")),
        (sim(&good, &["--speed", "bogus"], &rs[2]), None),
        (sim(&good, &["--speed", "nan"], &rs[3]), None),
        (sim(&good, &["--speed", "-1"], &rs[4]), None),
        (sim(&good, &["--speed", "0"], &rs[5]), None),
        (sim(&good, &["--gpus", "0"], &rs[6]), None),
    ];
    let cases: Vec<(&'static str, Vec<&str>, Option<&str>, Expect)> = vec![
        (p, vec!["plan", "check"], None, r),
        (p, vec!["plan", "check", &good, &good], None, r),
        (p, vec!["plan", "check", "--bogus", &good], None, r),
        (p, vec!["plan"], None, r),
        (p, vec!["plan", "bogus"], None, r),
        (p, vec!["plan", "check", ""], None, r),
        (p, vec!["plan", "show", &huge], Some(&huge), r),
        (p, vec!["plan", "import", "--from", "seed-json", &binary, "--name", "x"], Some(&binary), r),
        (p, vec!["plan", "import", "--from", "bogus", &good, "--name", "x"], None, r),
        (d, vec!["parse"], None, r),
        (d, vec!["parse", &empty], None, e(&[1])),
        (d, vec!["parse", &binary], None, e(&[1])),
        (d, vec!["parse", "--json", &long_line], None, e(&[1])),
        (d, vec!["parse", &latin1], None, e(&[0, 1])),
        (d, vec!["parse", &broken_json], None, e(&[1])),
        (d, vec!["parse", &deep_json], None, e(&[1])),
        (d, vec!["parse", &nul_log, &cr_log], None, e(&[1])),
        (d, vec!["parse", &latin1, &missing], Some(&missing), r),
        (d, vec!["parse", "--bogus", &latin1], None, r),
        (s, vec!["diagnose"], None, r),
        (s, vec!["diagnose", &empty], None, e(&[0])),
        (s, vec!["diagnose", "--json", &binary], None, e(&[0])),
        (s, vec!["diagnose", &long_line], None, e(&[0])),
        (s, vec!["diagnose", &latin1, &nul_log, &cr_log], None, e(&[0])),
        (s, vec!["diagnose", &deep_json], None, e(&[0])),
        (s, vec!["diagnose", &nul_log, &missing], Some(&missing), r),
        (x, vec!["results", "--store", &no_dir], Some(&no_dir), r),
        (x, vec!["results", "--store", &empty_dir], Some(&empty_dir), r),
        (x, vec!["results", "--store", &a_file], Some(&a_file), r),
        (x, vec!["results", "--store", "/dev/zero"], Some("/dev/zero"), r),
        (x, vec!["results", "--store", store, "--format", "bogus"], None, r),
        (x, vec!["results", "--store", store, "--alpha", "nan"], None, r),
        (x, vec!["results", "--store", store, "--alpha", "2"], None, r),
        (x, vec!["results", "--store", store, "--min-effect", "-1e308"], None, r),
        (x, vec!["results", "--store", store, "--filter", "bogus=1"], None, r),
        (x, vec!["results", "--store", store, "--format", "json"], None, e(&[0])),
        (x, vec!["show", "deadbeef", "--store", store], None, r),
        (x, vec!["show", "#99999999999", "--store", store], None, r),
        (x, vec!["show", "#-1", "--store", store], None, r),
        (x, vec!["show", "", "--store", store], None, r),
        (x, vec!["show", "3a243095/bogus", "--store", store], None, r),
        (x, vec!["show", "3a243095", "--store", &no_dir], Some(&no_dir), r),
        (x, vec!["show", "3a243095", "--store", &empty_dir], Some(&empty_dir), r),
        (x, vec!["digest", "--store", &no_dir], Some(&no_dir), r),
        (x, vec!["salvage", &no_dir], Some(&no_dir), r),
        (x, vec!["salvage", &a_file], Some(&a_file), r),
        ("cli: run", vec!["calibrate", &huge, "--runtime", "sim", "--store", &rs[7]], Some(&huge), r),
        ("cli: run", vec!["calibrate", &good, "--runtime", "sim", "--repeats", "4294967295", "--store", &rs[8]], None, r),
    ];
    for (cat, args, file, expect) in cases {
        let name = args.iter().map(|a| short(a, &c.dir)).collect::<Vec<_>>().join(" ");
        c.add(cat, name, &args, file, expect);
    }
    for (args, file) in runs {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let name = args.iter().map(|a| short(a, &c.dir)).collect::<Vec<_>>().join(" ");
        c.add("cli: run", name, &args, file, r);
    }
    hosts_cases(c, &good);
}

/// `run --hosts FILE`: hostile hosts files, and an `ssh://` host whose tunnel fails (it
/// once panicked with "there is no reactor running").
#[rustfmt::skip]
fn hosts_cases(c: &mut Campaign, good: &str) {
    let store = c.dir.join("hosts-store").display().to_string();
    let host = |gpus: &str, url: &str| format!("[[hosts]]\nname = \"box\"\ndocker_host = \"{url}\"\ngpus = {gpus}\n");
    let nowhere = "unix:///nonexistent/docker.sock";
    let files: Vec<(&str, String)> = vec![
        ("an ssh host whose tunnel fails", host("1", "ssh://nobody@127.0.0.1:1")),
        ("an ssh host named like an option", host("1", "ssh://-oProxyCommand=x")),
        ("a unix socket that is not there", host("1", nowhere)),
        ("gpus u32::MAX", host("4294967295", nowhere)),
        ("gpus 0", host("0", nowhere)),
        ("gpus -1", host("-1", nowhere)),
        ("no hosts", String::new()),
    ];
    let run = |f: &str| ["run", good, "--runtime", "docker", "--headless", "--no-preflight", "--hosts", f, "--store", &store].map(str::to_string);
    for (what, text) in files {
        let f = c.file("hosts.toml", text);
        let args = run(&f);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        c.add("cli: hosts", format!("run --hosts: {what}"), &args, Some(&f), Expect::Refuse);
    }
    for f in ["/dev/zero", "/nonexistent/hosts.toml"] {
        let args = run(f);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        c.add("cli: hosts", format!("run --hosts {f}"), &args, Some(f), Expect::Refuse);
    }
}

/// The plan's own `[policy]`, `[[recipe]]` and `[[signature]]` in every form TOML allows
/// (a header, a sub-table with no header, dotted keys, inline tables): each bad value is
/// refused with the plan's position, never dropped; oversized regex lists are refused.
#[rustfmt::skip]
fn override_cases(c: &mut Campaign) {
    let k = "plan: overrides";
    let categories = [
        "other", "cuda_oom", "no_metrics", "server_start_timeout", "image_not_found",
        "bench_command_invalid", "kv_cache_too_small", "model_not_found", "disk_full",
        "agent_patch_failed",
    ];
    let bad_values = ["\"explode\"", "1", "true", "[\"skip\"]", "{ a = 1 }", "\"\"", "\"SKIP\""];
    for cat in categories {
        for v in bad_values {
            // Under a [policy] header, and as a sub-table with no header.
            let with_header = format!("{BASE}\n[policy]\n[policy.actions]\n{cat} = {v}\n");
            c.plan(k, format!("[policy.actions] {cat} = {v}"), with_header, Expect::Refuse);
            let headerless = format!("{BASE}\n[policy.actions]\n{cat} = {v}\n");
            c.plan(k, format!("headerless [policy.actions] {cat} = {v}"), headerless, Expect::Refuse);
        }
        // Dotted and inline forms at the top level: refused by name, whatever the value.
        c.plan(k, format!("dotted policy.actions.{cat}"), format!("policy.actions.{cat} = \"skip\"\n{BASE}"), Expect::Refuse);
        c.plan(k, format!("inline policy {{ actions.{cat} }}"), format!("policy = {{ actions = {{ {cat} = \"skip\" }} }}\n{BASE}"), Expect::Refuse);
    }
    for (key, v) in [
        ("max_retries", "-1"), ("max_retries", "\"2\""), ("max_retries", "4294967296"),
        ("backoff_base_s", "-5"), ("backoff_cap_s", "1.5"), ("breaker_threshold", "\"x\""),
        ("breaker_ignore", "[\"not_a_category\"]"), ("allow_measurement_changing_fixes", "\"yes\""),
        ("bogus_key", "1"), ("retry_limits", "{ cuda_oom = -1 }"), ("retry_limits", "{ nope = 1 }"),
    ] {
        c.plan(k, format!("[policy] {key} = {v}"), format!("{BASE}\n[policy]\n{key} = {v}\n"), Expect::Refuse);
    }
    for (what, body) in [
        ("recipe without fixes", "name = \"r\"\nchanges_measurement = false\n"),
        ("recipe fixing an unknown category", "name = \"r\"\nfixes = [\"nope\"]\nchanges_measurement = false\n"),
        ("recipe with an unknown key", "name = \"r\"\nfixes = [\"other\"]\nchanges_measurement = false\nbogus = 1\n"),
        ("recipe with a bad scope", "name = \"r\"\nfixes = [\"other\"]\nchanges_measurement = false\nscope = \"galaxy\"\n"),
        ("signature without category", "name = \"new_one\"\nregex = ['x']\n"),
        ("signature with a bad regex", "name = \"s\"\ncategory = \"other\"\nregex = ['(unclosed']\n"),
        ("signature with confidence 2", "name = \"s\"\ncategory = \"other\"\nregex = ['x']\nconfidence = 2.0\n"),
        ("signature with an empty regex list", "name = \"s\"\ncategory = \"other\"\nregex = []\n"),
    ] {
        let table = if what.starts_with("recipe") { "recipe" } else { "signature" };
        c.plan(k, what, format!("{BASE}\n[[{table}]]\n{body}"), Expect::Refuse);
    }
    c.plan(k, "recipe as an inline array", format!("recipe = [{{ name = \"r\" }}]\n{BASE}"), Expect::Refuse);
    c.plan(k, "signature as a dotted key", format!("signature.name = \"x\"\n{BASE}"), Expect::Refuse);
    // Regex lists past what a night can afford: refused, never a panic.
    for n in [257, 5_000, 100_000] {
        let list: Vec<String> = (0..n).map(|i| format!("'a{i}'")).collect();
        c.plan(k, format!("a signature with {n} regexes"), format!("{BASE}\n[[signature]]\nname = \"many\"\ncategory = \"other\"\nregex = [{}]\n", list.join(",")), Expect::Refuse);
    }
    let many: String = (0..60)
        .map(|j| {
            let list: Vec<String> = (0..200).map(|i| format!("'(?i)x{j}_{i}.{{0,200}}y'")).collect();
            format!("[[signature]]\nname = \"s{j}\"\ncategory = \"other\"\nregex = [{}]\n", list.join(","))
        })
        .collect();
    c.plan(k, "60 signatures of 200 wide regexes", format!("{BASE}\n{many}"), Expect::Refuse);
}
