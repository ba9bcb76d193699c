//! vLLM version detection from server logs of every era and from `pip show vllm`,
//! `pip list`/`pip freeze`, `vllm --version` or `print(vllm.__version__)` output.

use super::line;
use regex::Regex;
use std::sync::OnceLock;

/// How much a match can be trusted on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Strength {
    /// A bare version string (`0.6.4.post1`), as `print(vllm.__version__)` prints it.
    Bare,
    /// `Version: 0.6.4` from `pip show`: only vLLM's if the `Name:` line said so.
    PipField,
    /// Names vLLM explicitly.
    Strong,
}

const VER: &str = r"v?(?P<v>\d+\.\d+(?:\.\d+)*(?:[.\-+]?[A-Za-z0-9]+)*(?:\+[A-Za-z0-9._\-]+)?)";

struct Res {
    strong: Vec<Regex>,
    logo: Regex,
    pip_field: Regex,
    bare: Regex,
}

fn res() -> &'static Res {
    static R: OnceLock<Res> = OnceLock::new();
    R.get_or_init(|| {
        let re = |s: &str| Regex::new(&s.replace("VER", VER)).expect("version regex");
        Res {
            strong: vec![
                // v0.4.0–≈0.14: `vLLM API server version 0.6.4.post1`;
                // ≈0.15+ without logo: `vLLM server version 0.20.0, serving model …`.
                re(r"(?i)\bvLLM (?:API )?server version:?\s+VER"),
                // v0.4.0+: `Initializing an LLM engine (v0.5.1)`, `a V1 LLM engine (v0.8.5)`.
                re(r"(?i)LLM engine \(VER\)"),
                // pip freeze / pip list / pip install output.
                re(r"(?i)(?:^|\s)vllm\s*==\s*VER"),
                re(r"(?i)^vllm\s+VER\s*$"),
                re(r"(?i)successfully installed\b.*\bvllm-VER"),
                // `vllm version 0.6.3`, `vLLM version: 0.6.3`, `vllm.__version__ = '0.6.3'`.
                re(r#"(?i)\bvllm(?:\.__version__\s*[:=]?|\s+version:?)\s*['"]?VER"#),
                // GET /version body.
                re(r#"^\{\s*"version"\s*:\s*"VER"\s*\}$"#),
            ],
            // ≈0.15+ logo: block characters then `version 0.20.0`.
            logo: re(r"[█▄▀].*\bversion\s+VER\s*$"),
            pip_field: re(r"^Version:\s*VER\s*$"),
            bare: re(r"^VER$"),
        }
    })
}

fn tidy(v: &str) -> String {
    v.trim_end_matches(['.', ',', '-', '+']).to_string()
}

/// Detects a version in an already cleaned line.
pub(crate) fn detect_clean(text: &str) -> Option<(String, Strength)> {
    if text.len() > 4096 {
        return None;
    }
    let r = res();
    let has_v = text.contains(['v', 'V']);
    if has_v {
        for re in &r.strong {
            if let Some(c) = re.captures(text) {
                return Some((tidy(&c["v"]), Strength::Strong));
            }
        }
        if let Some(c) = r.logo.captures(text) {
            return Some((tidy(&c["v"]), Strength::Strong));
        }
        if let Some(c) = r.pip_field.captures(text) {
            return Some((tidy(&c["v"]), Strength::PipField));
        }
    }
    if text.len() <= 64 && text.starts_with(|c: char| c.is_ascii_digit() || c == 'v') {
        if let Some(c) = r.bare.captures(text) {
            let v = tidy(&c["v"]);
            // `0.6` alone is too weak; versions have three parts, and a one-digit major
            // (an address like `10.254.5.35` is not a version).
            let major_ok = v.split('.').next().is_some_and(|m| m.len() == 1);
            if v.split('.').count() >= 3 && major_ok {
                return Some((v, Strength::Bare));
            }
        }
    }
    None
}

/// One log line → the vLLM version it names, for any era, `pip show` (`Version:` line),
/// `pip list`/`freeze`, or a bare `__version__` print. Stateless: a `Version:` line is
/// accepted without checking that the `Name:` line above it was `vllm` — the
/// [`StreamParser`](super::StreamParser) does check that.
pub fn detect_version(line: &str) -> Option<String> {
    let c = line::clean(line.as_bytes());
    detect_clean(&c.text).map(|(v, _)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_era() {
        let cases = [
            ("INFO 07-08 20:49:31 api_server.py:206] vLLM API server version 0.5.1", "0.5.1"),
            ("(APIServer pid=188747) INFO 10-21 09:11:24 [api_server.py:1839] vLLM API server version 0.11.0", "0.11.0"),
            ("INFO 07-08 20:49:33 llm_engine.py:169] Initializing an LLM engine (v0.5.1) with config: model='m'", "0.5.1"),
            ("(EngineCore_DP0 pid=1) INFO 10-21 09:11:33 [core.py:77] Initializing a V1 LLM engine (v0.11.0) with config: model='Qwen/Qwen3-8B'", "0.11.0"),
            ("(APIServer pid=1) INFO 05-06 21:00:11 [api_server.py:538]  ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.20.0", "0.20.0"),
            ("INFO 05-06 21:00:11 [api_server.py:538] vLLM server version 0.33.0, serving model Qwen/Qwen3-8B", "0.33.0"),
            ("INFO 09-01 10:00:00 api_server.py:1] vLLM API server version 0.6.3.post2.dev355+g9d5b4e4d", "0.6.3.post2.dev355+g9d5b4e4d"),
            ("Version: 0.6.4.post1", "0.6.4.post1"),
            ("0.6.4.post1", "0.6.4.post1"),
            ("vllm==0.8.5", "0.8.5"),
            ("vllm                              0.10.1.1", "0.10.1.1"),
            ("{\"version\":\"0.9.2\"}", "0.9.2"),
        ];
        for (line, want) in cases {
            assert_eq!(detect_version(line).as_deref(), Some(want), "{line}");
        }
        assert_eq!(detect_version("INFO 07-08 20:49:33 llm_engine.py:1] Initializing an LLM engine with config: model='m'"), None);
        assert_eq!(detect_version("CUDA version 12.1"), None);
        assert_eq!(detect_version("10.254.5.35"), None);
        assert_eq!(detect_version("Throughput: 1.0 requests/s"), None);
    }
}
