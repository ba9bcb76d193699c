//! A failure no signature names, raised in code the agent's patch changed, is the patch's:
//! an agent whose patch breaks vLLM's import (a renamed name, a syntax error) fails as
//! `agent_patch_failed`, not as an unknown failure retried for nothing. The evidence stays
//! the line vLLM printed; the traceback's frames say where it was raised.

use super::{confidence, Diagnosis};
use crate::category::Category;
use std::collections::BTreeSet;

/// The file of a Python traceback frame: `File "/…/vllm/x.py", line 19, in <module>`.
pub(crate) fn frame_file(line: &str) -> Option<&str> {
    let at = line.find("File \"")?;
    let rest = &line[at + 6..];
    let end = rest.find("\", line ")?;
    let path = &rest[..end];
    (path.ends_with(".py") && !path.is_empty()).then_some(path)
}

/// `d`, or the patch's failure when `d` names nothing and a frame is in a patched file.
pub(crate) fn blame(d: Diagnosis, patched: &[String], frames: &BTreeSet<String>) -> Diagnosis {
    let unnamed = d.category == Category::Other && !d.predicted;
    if !unnamed || patched.is_empty() {
        return d;
    }
    let hit = frames.iter().any(|f| {
        patched
            .iter()
            .any(|p| f == p || f.ends_with(&format!("/{}", p.trim_start_matches('/'))))
    });
    if !hit {
        return d;
    }
    Diagnosis {
        category: Category::AgentPatchFailed,
        recipe: None,
        confidence: confidence::SIGNATURE,
        ..d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn other(line: &str) -> Diagnosis {
        Diagnosis {
            category: Category::Other,
            evidence: line.into(),
            stream: None,
            line_no: Some(3),
            recipe: None,
            predicted: false,
            confidence: confidence::EXCEPTION,
            telling: vec![],
        }
    }

    #[test]
    fn frames_in_patched_files_blame_the_patch() {
        assert_eq!(
            frame_file(
                r#"  File "/opt/venv/lib/python3.11/site-packages/vllm/sampling_params.py", line 19, in <module>"#
            ),
            Some("/opt/venv/lib/python3.11/site-packages/vllm/sampling_params.py")
        );
        assert_eq!(frame_file("ImportError: cannot import name"), None);
        let frames: BTreeSet<String> =
            ["/opt/venv/lib/python3.11/site-packages/vllm/sampling_params.py".to_string()].into();
        let d = other("ImportError: cannot import name 'X' from 'vllm.exceptions'");
        let patched = vec!["vllm/sampling_params.py".to_string()];
        assert_eq!(
            blame(d.clone(), &patched, &frames).category,
            Category::AgentPatchFailed
        );
        // Not an agent, another file, or a named failure: left alone.
        assert_eq!(blame(d.clone(), &[], &frames).category, Category::Other);
        let elsewhere = vec!["vllm/engine/llm_engine.py".to_string()];
        assert_eq!(
            blame(d.clone(), &elsewhere, &frames).category,
            Category::Other
        );
        let named = Diagnosis {
            category: Category::CudaOom,
            ..d
        };
        assert_eq!(blame(named, &patched, &frames).category, Category::CudaOom);
        // `…/my_vllm/sampling_params.py` is not `vllm/sampling_params.py`.
        let near: BTreeSet<String> = ["/x/my_vllm/sampling_params.py".to_string()].into();
        assert_eq!(blame(other("E"), &patched, &near).category, Category::Other);
    }
}
