//! The Python environment the stand-in impersonates: where `import vllm` finds the package
//! (PYTHONPATH, the site dir, an editable install's `.pth`), its version, and the ways the
//! import fails (missing package, the aimv2 and NumPy rot selected by `STANDIN_FAIL`).

use crate::eras::Ver;
use std::path::{Path, PathBuf};

/// The site dir of the images' Python 3.12 (`STANDIN_SITE` moves it, for tests outside Docker).
pub fn site() -> String {
    env("STANDIN_SITE").unwrap_or_else(|| "/usr/local/lib/python3.12/dist-packages".into())
}

pub const DEFAULT_VERSION: &str = "0.8.5";

pub fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

pub fn fail_mode() -> String {
    env("STANDIN_FAIL").unwrap_or_default()
}

fn has_pkg(dir: &Path) -> bool {
    dir.join("vllm/__init__.py").is_file()
}

/// The `vllm` package directory `import vllm` would load, as Python's path search does:
/// PYTHONPATH entries, then the site dir, then directories named by `*.pth` files there.
pub fn locate_vllm() -> Option<PathBuf> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    if let Some(pp) = env("PYTHONPATH") {
        for d in pp.split(':') {
            // An empty entry means the current directory.
            let dir = if d.is_empty() {
                cwd.clone()
            } else {
                cwd.join(d)
            };
            if has_pkg(&dir) {
                return Some(dir.join("vllm"));
            }
        }
    }
    let site = PathBuf::from(site());
    if has_pkg(&site) {
        return Some(site.join("vllm"));
    }
    let mut pths: Vec<PathBuf> = std::fs::read_dir(&site)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "pth"))
                .collect()
        })
        .unwrap_or_default();
    pths.sort();
    for pth in pths {
        let text = std::fs::read_to_string(&pth).unwrap_or_default();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with("import ") {
                continue;
            }
            let dir = site.join(line);
            if has_pkg(&dir) {
                return Some(dir.join("vllm"));
            }
        }
    }
    None
}

/// `__version__ = "X"` from `<pkg>/version.py`.
pub fn pkg_version(pkg: &Path) -> Option<String> {
    let text = std::fs::read_to_string(pkg.join("version.py")).ok()?;
    text.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == "__version__")
            .then(|| v.trim().trim_matches(|c| c == '"' || c == '\'').to_string())
    })
}

/// What this process runs as: the vLLM version (and its era) and where the package is.
#[derive(Clone, Debug)]
pub struct Env {
    /// The version string the package reports (`0.0.0+local` for ISO-Bench human builds).
    pub version: String,
    /// The release whose behaviour this is (`STANDIN_ERA`, else the reported version).
    pub era: String,
    pub ver: Ver,
    pub pkg: Option<PathBuf>,
}

impl Env {
    /// `STANDIN_VERSION`, else the located package's `version.py`, else 0.8.5.
    pub fn detect() -> Env {
        Self::with_script(None)
    }
    /// For a benchmark script: its `# vllm-standin script for vLLM X` header decides the
    /// era (the script belongs to that vLLM), unless `STANDIN_VERSION` says otherwise.
    pub fn with_script(script: Option<&Path>) -> Env {
        let pkg = locate_vllm();
        let header = script.and_then(script_version);
        let version = env("STANDIN_VERSION")
            .or(header)
            .or_else(|| pkg.as_deref().and_then(pkg_version))
            .unwrap_or_else(|| DEFAULT_VERSION.into());
        // A human image built at a commit reports `0.0.0+local` and behaves as its era.
        let era = env("STANDIN_ERA").unwrap_or_else(|| version.clone());
        Env {
            ver: Ver::parse(&era),
            era,
            version,
            pkg,
        }
    }
    pub fn pkg_str(&self) -> String {
        self.pkg
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| format!("{}/vllm", site()))
    }
}

pub fn script_version(path: &Path) -> Option<String> {
    let text = std::fs::read(path).ok()?;
    let first = text.split(|&b| b == b'\n').next()?;
    let first = String::from_utf8_lossy(first);
    first
        .trim()
        .strip_prefix("# vllm-standin script for vLLM ")
        .map(|v| v.trim().to_string())
}

/// Where an import happens, for the traceback's first frames.
pub enum Site<'a> {
    /// `python3 -m MODULE`: runpy reports a missing package in one line.
    Module(&'a str),
    /// `python3 -c CODE`.
    Code,
    /// A script: its absolute path and the import line.
    Script(&'a str, &'a str),
    /// The `vllm` console script.
    Console,
}

fn frames(at: &Site) {
    eprintln!("Traceback (most recent call last):");
    match at {
        Site::Module(_) => {
            eprintln!("  File \"<frozen runpy>\", line 189, in _run_module_as_main");
            eprintln!("  File \"<frozen runpy>\", line 112, in _get_module_details");
        }
        Site::Code => eprintln!("  File \"<string>\", line 1, in <module>"),
        Site::Script(path, line) => {
            eprintln!("  File \"{path}\", line 12, in <module>");
            eprintln!("    {line}");
        }
        Site::Console => {
            eprintln!("  File \"/usr/local/bin/vllm\", line 5, in <module>");
            eprintln!("    from vllm.entrypoints.cli.main import main");
        }
    }
}

/// `import vllm` (and what it drags in): Ok(package dir) or Err(exit status) after
/// printing what Python prints.
pub fn import_vllm(at: Site) -> Result<PathBuf, i32> {
    let Some(pkg) = locate_vllm() else {
        match at {
            Site::Module(m) => eprintln!(
                "{}: Error while finding module specification for '{m}' (ModuleNotFoundError: No module named 'vllm')",
                executable()
            ),
            other => {
                frames(&other);
                eprintln!("ModuleNotFoundError: No module named 'vllm'");
            }
        }
        return Err(1);
    };
    let mode = fail_mode();
    if mode == "aimv2" {
        let path = pkg.join("transformers_utils/configs/ovis.py");
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        if !text.contains("exist_ok=True") {
            frames(&at);
            eprintln!(
                "  File \"{}\", line 6, in <module>",
                pkg.join("__init__.py").display()
            );
            eprintln!("    from vllm.engine.arg_utils import AsyncEngineArgs, EngineArgs");
            eprintln!("  File \"{}\", line 75, in <module>", path.display());
            eprintln!("    AutoConfig.register(\"aimv2\", AIMv2Config)");
            eprintln!(
                "ValueError: 'aimv2' is already used by a Transformers config, pick another name."
            );
            return Err(1);
        }
    }
    if mode == "fa_utils" && !pkg.join("vllm_flash_attn/fa_utils.py").is_file() {
        frames(&at);
        eprintln!(
            "  File \"{}\", line 14, in <module>",
            pkg.join("attention/backends/flash_attn.py").display()
        );
        eprintln!("    from vllm.vllm_flash_attn.fa_utils import flash_attn_supports_fp8");
        eprintln!("ModuleNotFoundError: No module named 'vllm.vllm_flash_attn.fa_utils'");
        return Err(1);
    }
    if mode == "numpy" && !numpy_ok() {
        numpy_abi_error(&at);
        return Err(1);
    }
    Ok(pkg)
}

/// NumPy 1.x installed (the `numpy` rot wants `pip install "numpy<2"`)?
pub fn numpy_ok() -> bool {
    let text = std::fs::read_to_string(format!("{}/numpy/version.py", site())).unwrap_or_default();
    text.contains("\"1.")
}

pub fn numpy_abi_error(at: &Site) {
    eprintln!("A module that was compiled using NumPy 1.x cannot be run in");
    eprintln!("NumPy 2.2.6 as it may crash. To support both 1.x and 2.x");
    eprintln!("versions of NumPy, modules must be compiled with NumPy 2.0.");
    frames(at);
    eprintln!("ImportError: numpy.core.multiarray failed to import");
}

/// `sys.executable`: the interpreter as found on PATH.
pub fn executable() -> String {
    let argv0 = std::env::args().next().unwrap_or_else(|| "python3".into());
    let name = Path::new(&argv0)
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    if argv0.contains('/') {
        return absolute(&argv0);
    }
    let name = if name.starts_with("python") {
        name
    } else {
        "python3".into()
    };
    for dir in env("PATH").unwrap_or_default().split(':') {
        let p = Path::new(dir).join(&name);
        if p.exists() {
            return p.display().to_string();
        }
    }
    format!("/usr/bin/{name}")
}

pub fn absolute(p: &str) -> String {
    if p.starts_with('/') {
        return p.to_string();
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let mut out = cwd;
    for part in p.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            x => out.push(x),
        }
    }
    out.display().to_string()
}

/// A Python traceback ending in `exc`, from a script's `main()`.
pub fn traceback(script: &str, frames: &[(&str, u32, &str, &str)], exc: &str) {
    eprintln!("Traceback (most recent call last):");
    for (func, line, code, marks) in frames {
        eprintln!("  File \"{script}\", line {line}, in {func}");
        eprintln!("    {code}");
        if !marks.is_empty() {
            eprintln!("    {marks}");
        }
    }
    eprintln!("{exc}");
}
