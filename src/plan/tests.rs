//! The plan's bounds on hostile numbers and unreadable files: each refused with an error
//! at its file:line:col that says the limit, before anything is sized by the number.

use super::limits::*;
use super::*;

const HEAD: &str = "schema_version = 1\nname = \"t\"\n[[agents]]\nid = \"a\"\n";

fn commit(i: usize, extra: &str) -> String {
    format!(
        "[[commits]]\ncommit = \"{i:012x}{:028x}\"\nparent = \"{i:012x}{:028x}\"\nmodel = \"m/x\"\ngpu_config = \"H100:1\"\nperf_command = '''python benchmarks/benchmark_latency.py --model m/x'''\n{extra}",
        0xabc, 0xdef
    )
}

fn load(text: &str) -> Result<Plan, LoadError> {
    Plan::from_str_at("p.toml", text.into(), Path::new("."), Path::new("p.toml"))
}

/// The errors of a plan that must be refused, as `file:line:col: …` lines.
fn errors(text: &str) -> Vec<String> {
    match load(text) {
        Err(LoadError::Invalid(d)) => d.iter().map(|d| d.to_string()).collect(),
        Err(e) => panic!("unexpected {e}"),
        Ok(p) => panic!("loaded with {} runs:\n{text}", p.runs.len()),
    }
}

fn one(text: &str, at: &str, says: &str) {
    let e = errors(text);
    assert!(
        e.iter().any(|e| e.starts_with(at) && e.contains(says)),
        "want `{at}` … `{says}` in {e:#?}"
    );
}

#[test]
fn repeats_beyond_the_limit_are_refused_at_the_field() {
    let plan = format!("{HEAD}[defaults]\nrepeats = 4294967295\n{}", commit(1, ""));
    one(&plan, "p.toml:6:11: ", "at most 100");
    let plan = format!("{HEAD}[defaults]\nrepeats = 101\n{}", commit(1, ""));
    one(&plan, "p.toml:6:11: ", "repeats = 101 is too many");
    // Per commit: the commit's own field (line 11 of this text).
    let plan = format!("{HEAD}{}", commit(1, "repeats = 1000000\n"));
    one(&plan, "p.toml:11:11: ", "at most 100");
    // The limit itself is fine.
    let plan = format!(
        "{HEAD}[defaults]\nrepeats = {MAX_REPEATS}\n{}",
        commit(1, "")
    );
    assert_eq!(load(&plan).unwrap().runs.len(), 3 * MAX_REPEATS as usize);
}

#[test]
fn too_many_runs_in_total_point_at_the_repeats_that_make_them() {
    // 100 repeats × 3 variants = 300 runs a commit: the commit that crosses 200 000 runs.
    let n = MAX_RUNS / 300 + 1;
    let mut plan = format!("{HEAD}[defaults]\nrepeats = 100\n");
    for i in 0..n {
        plan.push_str(&commit(i, ""));
    }
    let e = errors(&plan);
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(e[0].starts_with("p.toml:6:11: "), "{e:?}");
    assert!(e[0].contains("more than 200000 runs"), "{e:?}");
}

#[test]
fn too_many_commits_name_the_first_beyond_the_limit() {
    let src = std::rc::Rc::new(SourceFile::new("c.jsonl", String::new()));
    let mut commits: Vec<(RawCommit, Option<Loc>, FieldLocator)> = (0..MAX_COMMITS + 2)
        .map(|i| {
            let fl = FieldLocator {
                src: src.clone(),
                span: 0..0,
            };
            (RawCommit::default(), Some(src.line_loc(i + 1, 1)), fl)
        })
        .collect();
    let mut b = Builder {
        errors: Vec::new(),
        warnings: Vec::new(),
    };
    b.check_commit_count(&mut commits);
    assert_eq!(commits.len(), MAX_COMMITS);
    let e = b.errors[0].to_string();
    assert!(e.starts_with("c.jsonl:50001:1: "), "{e}");
    assert!(e.contains("more than 50000"), "{e}");
}

#[test]
fn other_numbers_that_size_the_night_are_bounded() {
    for (field, value, says) in [
        ("gpu_count", "65", "at most 64"),
        ("server_start_timeout_s", "0", "at once"),
        // TOML integers stop at i64::MAX.
        ("run_timeout_s", "9223372036854775807", "more than a week"),
        ("warmup_requests", "4294967295", "at most 10000"),
    ] {
        let plan = format!("{HEAD}[defaults]\n{field} = {value}\n{}", commit(1, ""));
        let col = field.len() + 4;
        one(&plan, &format!("p.toml:6:{col}: "), says);
    }
    let plan = format!(
        "{HEAD}[defaults]\ntimeout_s_by_gpus = {{ \"1\" = 0 }}\n{}",
        commit(1, "")
    );
    one(&plan, "p.toml:6:21: ", "timeout_s_by_gpus.1 = 0");
    let plan = format!(
        "{HEAD}{}",
        commit(1, "sim = { log_kb = 9223372036854775807 }\n")
    );
    one(&plan, "p.toml:11:18: ", "sim.log_kb");
    // A parallel size beyond any run's GPUs is refused before TP × PP is multiplied.
    let plan = format!("{HEAD}{}", commit(1, "")).replace(
        "--model m/x'''",
        "--model m/x -tp 4294967295 -pp 4294967295'''",
    );
    one(&plan, "p.toml:10:", "more GPUs than one run can take");
}

#[test]
fn plan_files_are_read_capped_and_located() {
    let d = tempfile::tempdir().unwrap();
    let e = Plan::load(d.path()).unwrap_err().to_string();
    assert!(e.contains("a directory, not a regular file"), "{e}");
    let p = d.path().join("bad.toml");
    std::fs::write(&p, b"schema_version = 1\nname = \"\xff\"\n").unwrap();
    let e = Plan::load(&p).unwrap_err().to_string();
    assert!(e.contains("bad.toml:2:9: ") && e.contains("0xff"), "{e}");
    #[cfg(unix)]
    {
        let e = Plan::load(Path::new("/dev/zero")).unwrap_err().to_string();
        assert!(
            e.contains("/dev/zero") && e.contains("character device"),
            "{e}"
        );
    }
}
