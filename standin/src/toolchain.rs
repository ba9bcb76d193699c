//! The build from source: what `pip install -e .` of a vLLM tree with kernels (a
//! `CMakeLists.txt` or `csrc/`) needs, checked as CMake and torch check it, and the tools a
//! build template installs (`apt-get` of NVIDIA's repo, `nvcc`, `gcc`/`g++`, `ccache`), all
//! played by this binary. A runtime image has none of them: the template must install them.

use std::path::{Path, PathBuf};

/// The CUDA torch is built for (`torch.version.cuda`).
pub const TORCH_CUDA: &str = "12.4";

fn on_path(tool: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    path.split(':')
        .map(|d| Path::new(d).join(tool))
        .find(|p| p.is_file())
}

/// The CUDA compiler as CMake finds it: `CUDACXX`, `nvcc` on PATH, `$CUDA_HOME/bin/nvcc`,
/// `/usr/local/cuda/bin/nvcc`.
fn nvcc() -> Option<PathBuf> {
    if let Some(c) = std::env::var_os("CUDACXX").map(PathBuf::from) {
        return c.is_file().then_some(c);
    }
    on_path("nvcc")
        .or_else(|| {
            std::env::var_os("CUDA_HOME")
                .map(|h| PathBuf::from(h).join("bin/nvcc"))
                .filter(|p| p.is_file())
        })
        .or_else(|| Some(PathBuf::from("/usr/local/cuda/bin/nvcc")).filter(|p| p.is_file()))
}

/// Sources ninja would compile: `csrc/**/*.{cu,cpp,cc}`, sorted.
fn sources(root: &Path) -> Vec<String> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<String>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, root, out);
            } else if p
                .extension()
                .is_some_and(|x| x == "cu" || x == "cpp" || x == "cc")
            {
                out.push(p.strip_prefix(root).unwrap_or(&p).display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(&root.join("csrc"), root, &mut out);
    out.sort();
    out
}

fn pip_failed() -> i32 {
    eprintln!("  error: subprocess-exited-with-error");
    eprintln!("  ");
    eprintln!("  × Building editable for vllm (pyproject.toml) did not run successfully.");
    eprintln!("  │ exit code: 1");
    eprintln!(
        "  note: This error originates from a subprocess, and is likely not a problem with pip."
    );
    eprintln!("  ERROR: Failed building editable for vllm");
    eprintln!("ERROR: Could not build wheels for vllm, which is required to install pyproject.toml-based projects");
    1
}

/// The kernels of a tree at `root`, compiled as vLLM's setup.py → CMake → ninja would:
/// fails as they fail without a C++ compiler, without nvcc, and (no GPU in a `docker
/// build`) without `TORCH_CUDA_ARCH_LIST`. A tree without kernels passes untouched.
pub fn build_kernels(root: &Path, verbose: bool) -> i32 {
    if !root.join("CMakeLists.txt").is_file() && !root.join("csrc").is_dir() {
        return 0;
    }
    println!("  running build_ext");
    println!("  -- The CXX compiler identification is GNU 11.4.0");
    if on_path("g++").or_else(|| on_path("c++")).is_none() {
        eprintln!("  CMake Error at CMakeLists.txt:1 (project):");
        eprintln!("    No CMAKE_CXX_COMPILER could be found.");
        eprintln!();
        eprintln!("    Tell CMake where to find the compiler by setting either the environment");
        eprintln!(
            "    variable \"CXX\" or the CMake cache entry CMAKE_CXX_COMPILER to the full path"
        );
        eprintln!("    to the compiler, or to the compiler name if it is in the PATH.");
        eprintln!("  -- Configuring incomplete, errors occurred!");
        return pip_failed();
    }
    let Some(nv) = nvcc() else {
        eprintln!("  -- The CUDA compiler identification is unknown");
        eprintln!("  CMake Error at CMakeLists.txt:1 (project):");
        eprintln!("    No CMAKE_CUDA_COMPILER could be found.");
        eprintln!();
        eprintln!("    Tell CMake where to find the compiler by setting either the environment");
        eprintln!(
            "    variable \"CUDACXX\" or the CMake cache entry CMAKE_CUDA_COMPILER to the full"
        );
        eprintln!("    path to the compiler, or to the compiler name if it is in the PATH.");
        eprintln!("  -- Configuring incomplete, errors occurred!");
        return pip_failed();
    };
    println!("  -- The CUDA compiler identification is NVIDIA {TORCH_CUDA}.131");
    println!(
        "  -- Check for working CUDA compiler: {} - skipped",
        nv.display()
    );
    let arch = std::env::var("TORCH_CUDA_ARCH_LIST").unwrap_or_default();
    if arch.trim().is_empty() {
        let cpp = "/usr/local/lib/python3.12/dist-packages/torch/utils/cpp_extension.py";
        eprintln!("  {cpp}:2059: UserWarning: TORCH_CUDA_ARCH_LIST is not set, all archs for visible cards are included for compilation.");
        eprintln!("  If this is not desired, please set os.environ['TORCH_CUDA_ARCH_LIST'].");
        eprintln!("    warnings.warn(");
        eprintln!("  Traceback (most recent call last):");
        eprintln!("    File \"{cpp}\", line 2087, in _get_cuda_arch_flags");
        eprintln!("      arch_list[-1] += '+PTX'");
        eprintln!("  IndexError: list index out of range");
        return pip_failed();
    }
    println!("  -- CUDA target architectures: {arch}");
    let launcher = std::env::var("CMAKE_CUDA_COMPILER_LAUNCHER").unwrap_or_default();
    if !launcher.is_empty() {
        println!("  -- Using {launcher} as the CUDA compiler launcher");
    }
    let srcs = sources(root);
    let total = srcs.len() + 1;
    for (i, s) in srcs.iter().enumerate() {
        if verbose {
            let kind = if s.ends_with(".cu") { "CUDA" } else { "CXX" };
            println!(
                "  [{}/{total}] Building {kind} object CMakeFiles/_C.dir/{s}.o",
                i + 1
            );
        }
    }
    if verbose {
        println!("  [{total}/{total}] Linking CXX shared module _C.abi3.so");
    }
    0
}

/// `nvcc`, `gcc`, `g++`, `cc`, `c++`, `ccache`: enough for `--version` and stats.
pub fn tool(name: &str, args: &[String]) -> i32 {
    match name {
        "nvcc" => {
            println!("nvcc: NVIDIA (R) Cuda compiler driver");
            println!("Copyright (c) 2005-2024 NVIDIA Corporation");
            println!("Cuda compilation tools, release {TORCH_CUDA}, V{TORCH_CUDA}.131");
            0
        }
        "ccache" => {
            if args.iter().any(|a| a == "-s" || a == "--show-stats") {
                let dir =
                    std::env::var("CCACHE_DIR").unwrap_or_else(|_| "/root/.cache/ccache".into());
                println!("Cacheable calls:   0 / 0");
                println!("Local storage:");
                println!("  Cache size (GB): 0.0 / 40.0 ({dir})");
            }
            0
        }
        _ => {
            println!("{name} (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0");
            0
        }
    }
}

/// `apt-get update` / `apt-get install [-y] PKG…`: the packages a build template asks for
/// put their tools in place (links to this binary); an unknown one fails as apt does.
pub fn apt_get(args: &[String]) -> i32 {
    let me =
        std::env::current_exe().unwrap_or_else(|_| "/usr/lib/vllm-standin/vllm-standin".into());
    match args
        .iter()
        .find(|a| !a.starts_with('-'))
        .map(String::as_str)
    {
        Some("update") => {
            println!("Hit:1 https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64  InRelease");
            println!("Reading package lists... Done");
            0
        }
        Some("install") => {
            let pkgs: Vec<&String> = args
                .iter()
                .skip_while(|a| a.as_str() != "install")
                .skip(1)
                .filter(|a| !a.starts_with('-'))
                .collect();
            println!("Reading package lists... Done");
            let cuda = format!("-{}", TORCH_CUDA.replace('.', "-"));
            let mut links: Vec<String> = Vec::new();
            for p in &pkgs {
                match p.as_str() {
                    "build-essential" => links.extend(
                        [
                            "/usr/bin/gcc",
                            "/usr/bin/g++",
                            "/usr/bin/cc",
                            "/usr/bin/c++",
                        ]
                        .map(String::from),
                    ),
                    "ccache" => links.push("/usr/bin/ccache".into()),
                    "ca-certificates" | "curl" => {}
                    p if p.starts_with("cuda-nvcc-") && p.ends_with(&cuda) => {
                        links.push(format!("/usr/local/cuda-{TORCH_CUDA}/bin/nvcc"))
                    }
                    p if p.starts_with("cuda-") && p.ends_with(&cuda) => {}
                    other => {
                        eprintln!("E: Unable to locate package {other}");
                        return 100;
                    }
                }
            }
            for l in &links {
                let l = Path::new(l);
                if let Some(d) = l.parent() {
                    let _ = std::fs::create_dir_all(d);
                }
                let _ = std::fs::remove_file(l);
                if let Err(e) = std::os::unix::fs::symlink(&me, l) {
                    eprintln!("E: Could not install {}: {e}", l.display());
                    return 100;
                }
            }
            let names: Vec<&str> = pkgs.iter().map(|p| p.as_str()).collect();
            println!("Setting up {} ...", names.join(" ... Setting up "));
            0
        }
        _ => {
            eprintln!(
                "E: Invalid operation {}",
                args.first().map(String::as_str).unwrap_or("")
            );
            100
        }
    }
}
