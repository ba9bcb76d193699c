//! `python3 -c CODE` for the snippets nightshift runs (the stand-in cannot run Python), and
//! `pip`. Recognised in CODE:
//! * `import vllm…` / `from vllm… import` → the real import (missing package, aimv2, NumPy);
//!   `find_spec("vllm")` → locate only (no import side effects; `None.origin` if missing);
//! * `import torch` / `numpy` with the NumPy rot → the ABI error;
//! * each `print(...)`, in order: `__version__` → the version; `__file__`/`.origin` →
//!   `<pkg>/__init__.py` with one `dirname(` stripped per occurrence (so
//!   `dirname(dirname(find_spec("vllm").origin))` is the dir holding the package);
//!   `__path__`/`submodule_search_locations` → `['<pkg>']`; a string literal → itself.

use crate::pyenv::{self, import_vllm, locate_vllm, site, Env, Site};
use std::path::Path;

fn mentions_find_spec_vllm(code: &str) -> bool {
    code.contains("find_spec(\"vllm\")") || code.contains("find_spec('vllm')")
}

fn imports_vllm(code: &str) -> bool {
    code.split([';', '\n']).any(|stmt| {
        let s = stmt.trim();
        let imp = s.strip_prefix("import ").map(|r| {
            r.split(',').any(|m| {
                let m = m.trim();
                m == "vllm" || m.starts_with("vllm.") || m.starts_with("vllm ")
            })
        });
        imp.unwrap_or(false) || s.starts_with("from vllm ") || s.starts_with("from vllm.")
    }) || code.contains("import_module(\"vllm")
        || code.contains("import_module('vllm")
}

/// The argument text of each `print(...)` call, in order.
fn prints(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("print(") {
        let after = &rest[i + 6..];
        let mut depth = 1;
        let mut end = after.len();
        for (j, c) in after.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        end = j;
                        break;
                    }
                }
                _ => {}
            }
        }
        out.push(after[..end].to_string());
        rest = &after[end.min(after.len())..];
    }
    out
}

/// `python3 -c CODE ARG...`: nightshift's warm-up snippet (urllib POSTs to
/// `/v1/completions`, argv: port, model, count) really sends its requests; any other
/// snippet as [`run`].
pub fn run_with_args(code: &str, args: &[String]) -> i32 {
    if code.contains("urllib.request") && code.contains("/v1/completions") {
        return warm_up(args);
    }
    run(code)
}

fn warm_up(args: &[String]) -> i32 {
    let (Some(port), Some(model), Some(n)) = (
        args.first(),
        args.get(1),
        args.get(2).and_then(|n| n.parse::<u32>().ok()),
    ) else {
        eprintln!("IndexError: list index out of range");
        return 1;
    };
    let e = Env::detect();
    let sender = crate::sender::Sender {
        url: crate::http::parse_url(&format!("http://127.0.0.1:{port}/v1/completions")),
        model: model.clone(),
        chat: false,
        era: crate::eras::serving_era(e.ver),
        best_of: 1,
        ignore_eos: false,
        logprobs: None,
        stream: false,
    };
    let req = crate::datasets::Request {
        prompt: "Warm up.".into(),
        prompt_len: 2,
        output_len: 16,
    };
    let mut ok = 0;
    for _ in 0..n {
        let out = sender.send(&req);
        if out.success {
            ok += 1;
        } else {
            eprintln!("warm-up request failed: {}", out.error);
        }
    }
    println!("ok {ok}");
    0
}

pub fn run(code: &str) -> i32 {
    let wants_import = imports_vllm(code);
    let wants_spec = mentions_find_spec_vllm(code);
    if wants_import {
        if let Err(c) = import_vllm(Site::Code) {
            return c;
        }
    } else if wants_spec
        && locate_vllm().is_none()
        && (code.contains(".origin")
            || code.contains("__file__")
            || code.contains(".submodule_search_locations"))
    {
        eprintln!("Traceback (most recent call last):");
        eprintln!("  File \"<string>\", line 1, in <module>");
        eprintln!("AttributeError: 'NoneType' object has no attribute 'origin'");
        return 1;
    }
    let torchy = code.split([';', '\n']).any(|s| {
        let s = s.trim();
        (s.starts_with("import ") && (s.contains("torch") || s.contains("numpy")))
            || s.starts_with("from torch")
    });
    if torchy && pyenv::fail_mode() == "numpy" && !pyenv::numpy_ok() && code.contains("torch") {
        pyenv::numpy_abi_error(&Site::Code);
        return 1;
    }
    let pkg = locate_vllm();
    for arg in prints(code) {
        let other_spec = arg.contains("find_spec(") && !mentions_find_spec_vllm(&arg);
        let about_vllm = !other_spec && (arg.contains("vllm") || (wants_spec || wants_import));
        let lit = arg.trim();
        if lit == "torch.version.cuda" {
            println!("{}", crate::toolchain::TORCH_CUDA);
            continue;
        }
        if (lit.starts_with('"') && lit.ends_with('"')
            || lit.starts_with('\'') && lit.ends_with('\''))
            && lit.len() >= 2
        {
            println!("{}", &lit[1..lit.len() - 1]);
            continue;
        }
        if !about_vllm {
            continue;
        }
        let Some(pkg) = &pkg else {
            println!("None");
            continue;
        };
        if arg.contains("__version__") {
            println!("{}", Env::detect().version);
        } else if arg.contains("__file__") || arg.contains(".origin") {
            let mut p = pkg.join("__init__.py");
            for _ in 0..arg.matches("dirname(").count() {
                p = p.parent().map(Path::to_path_buf).unwrap_or(p);
            }
            println!("{}", p.display());
        } else if arg.contains("__path__") || arg.contains("submodule_search_locations") {
            println!("['{}']", pkg.display());
        } else if arg.contains("find_spec(") {
            println!("ModuleSpec(name='vllm', loader=<_frozen_importlib_external.SourceFileLoader object at 0x7f2b8c1d5e50>, origin='{}/__init__.py', submodule_search_locations=['{}'])", pkg.display(), pkg.display());
        }
    }
    0
}

/// `pip`: what the recipes and a curious operator ask.
pub fn pip(args: &[String]) -> i32 {
    let site = site();
    match args.first().map(String::as_str) {
        Some("-V" | "--version") => {
            println!("pip 24.2 from {site}/pip (python 3.12)");
            0
        }
        Some("install")
            if args
                .iter()
                .any(|a| a.starts_with("numpy<2") || a == "numpy==1.26.4") =>
        {
            let dir = format!("{site}/numpy");
            let _ = std::fs::create_dir_all(&dir);
            if let Err(e) = std::fs::write(format!("{dir}/version.py"), "version = \"1.26.4\"\n") {
                eprintln!("ERROR: could not install packages: {e}");
                return 1;
            }
            println!("Successfully installed numpy-1.26.4");
            0
        }
        Some("uninstall") if args.iter().any(|a| a == "vllm") => uninstall_vllm(),
        Some("install") if editable_target(args).is_some() => install_editable(
            &editable_target(args).unwrap_or_default(),
            args.iter().any(|a| a == "-v" || a == "--verbose"),
        ),
        Some("show") if args.iter().any(|a| a == "vllm") => match locate_vllm() {
            Some(pkg) => {
                let e = Env::detect();
                let root = pkg
                    .parent()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default();
                println!("Name: vllm\nVersion: {}\nSummary: A high-throughput and memory-efficient inference and serving engine for LLMs", e.version);
                if root == site {
                    println!("Location: {site}");
                } else {
                    println!("Location: {site}\nEditable project location: {root}");
                }
                0
            }
            None => {
                eprintln!("WARNING: Package(s) not found: vllm");
                1
            }
        },
        _ => {
            println!("Requirement already satisfied");
            0
        }
    }
}

/// `pip install -e DIR` / `--editable DIR` / `--editable=DIR`.
fn editable_target(args: &[String]) -> Option<String> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "-e" || a == "--editable" {
            return it.next().cloned();
        }
        if let Some(p) = a.strip_prefix("--editable=") {
            return Some(p.to_string());
        }
    }
    None
}

/// The `.pth` files in the site dir that put a vllm package on the path.
fn vllm_pths(site: &Path) -> Vec<std::path::PathBuf> {
    let Ok(rd) = std::fs::read_dir(site) else {
        return Vec::new();
    };
    rd.flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "pth"))
        .filter(|p| {
            std::fs::read_to_string(p).is_ok_and(|t| {
                t.lines()
                    .any(|l| site.join(l.trim()).join("vllm/__init__.py").is_file())
            })
        })
        .collect()
}

/// As pip does: the installed copy goes (site dir package, or the editable link).
fn uninstall_vllm() -> i32 {
    let Some(pkg) = locate_vllm() else {
        eprintln!("WARNING: Skipping vllm as it is not installed.");
        return 0;
    };
    let version = Env::detect().version;
    let site = std::path::PathBuf::from(site());
    println!("Found existing installation: vllm {version}");
    println!("Uninstalling vllm-{version}:");
    if pkg.parent() == Some(site.as_path()) {
        if let Err(e) = std::fs::remove_dir_all(&pkg) {
            eprintln!("ERROR: Could not uninstall vllm: {e}");
            return 1;
        }
    }
    for p in vllm_pths(&site) {
        let _ = std::fs::remove_file(p);
    }
    println!("  Successfully uninstalled vllm-{version}");
    0
}

/// `pip install -e DIR`: the project must be one (setup.py or pyproject.toml) with a
/// `vllm` package; the old install goes, and a `__editable__` `.pth` points at DIR.
/// A tree with kernels compiles them first ([`crate::toolchain::build_kernels`]).
fn install_editable(dir: &str, verbose: bool) -> i32 {
    let cwd = std::env::current_dir().unwrap_or_else(|_| "/".into());
    let root = std::fs::canonicalize(cwd.join(dir)).unwrap_or_else(|_| cwd.join(dir));
    println!("Obtaining file://{}", root.display());
    if !root.join("setup.py").is_file() && !root.join("pyproject.toml").is_file() {
        eprintln!(
            "ERROR: file://{} does not appear to be a Python project: neither 'setup.py' nor 'pyproject.toml' found.",
            root.display()
        );
        return 1;
    }
    println!("Building wheels for collected packages: vllm");
    if !root.join("vllm/__init__.py").is_file() {
        eprintln!("error: package directory 'vllm' does not exist");
        eprintln!("ERROR: Failed building editable for vllm");
        eprintln!("ERROR: Could not build wheels for vllm, which is required to install pyproject.toml-based projects");
        return 1;
    }
    let built = crate::toolchain::build_kernels(&root, verbose);
    if built != 0 {
        return built;
    }
    let version = pyenv::pkg_version(&root.join("vllm"))
        .unwrap_or_else(|| pyenv::DEFAULT_VERSION.to_string());
    println!("Successfully built vllm");
    if locate_vllm().is_some() {
        println!("Attempting uninstall: vllm");
        if uninstall_vllm() != 0 {
            return 1;
        }
    }
    let site = site();
    let pth = format!("{site}/__editable__.vllm-{version}.pth");
    if let Err(e) = std::fs::write(&pth, format!("{}\n", root.display())) {
        eprintln!("ERROR: Could not install packages due to an OSError: {e}");
        return 1;
    }
    println!("Successfully installed vllm-{version}");
    0
}
