//! `results --filter EXPR` and the TUI's `:filter`: which runs a report covers.

use crate::record::RunDoc;

/// `--filter EXPR`: space- or comma-separated `field=value` / `field!=value` terms, all of
/// which must hold. Fields: commit (prefix), key, variant, agent, status, category, model
/// (substring), gpu.
pub(crate) fn parse_filter(expr: &str) -> Result<Vec<(String, bool, String)>, String> {
    let mut v = Vec::new();
    for term in expr.split([',', ' ']).filter(|t| !t.is_empty()) {
        let (field, neg, value) = if let Some((f, x)) = term.split_once("!=") {
            (f, true, x)
        } else if let Some((f, x)) = term.split_once('=') {
            (f, false, x)
        } else {
            return Err(format!(
                "filter term `{term}` is not FIELD=VALUE or FIELD!=VALUE"
            ));
        };
        let known = [
            "commit", "key", "variant", "agent", "status", "category", "model", "gpu",
        ];
        if !known.contains(&field) {
            return Err(format!(
                "unknown filter field `{field}` (expected one of: {})",
                known.join(", ")
            ));
        }
        check_value(field, value)?;
        v.push((field.to_string(), neg, value.to_string()));
    }
    Ok(v)
}

/// The statuses a run can be filtered by (an attempt's status or a run's state).
const STATUSES: &[&str] = &[
    "success",
    "failed",
    "skipped",
    "cancelled",
    "held",
    "running",
    "queued",
    "interrupted",
];

/// A value no run can have is a typo: say so instead of printing an empty report.
fn check_value(field: &str, value: &str) -> Result<(), String> {
    match field {
        "status" if !STATUSES.contains(&value) => Err(format!(
            "unknown status `{value}` (expected one of: {})",
            STATUSES.join(", ")
        )),
        "category" => value.parse::<crate::category::Category>().map(|_| ()),
        "variant"
            if !matches!(value, "baseline" | "human" | "agent") && !value.starts_with("agent:") =>
        {
            Err(format!(
                "unknown variant `{value}` (expected baseline, human, agent or agent:ID)"
            ))
        }
        _ => Ok(()),
    }
}

pub fn matches(doc: &RunDoc, filter: &[(String, bool, String)]) -> bool {
    let a = doc.representative();
    filter.iter().all(|(f, neg, val)| {
        let hit = match f.as_str() {
            "commit" => doc.info.commit.starts_with(val.as_str()),
            "key" => doc.key == *val,
            "variant" => {
                let v = doc.info.variant.to_string();
                v == *val || (val == "agent" && v.starts_with("agent:"))
            }
            "agent" => doc.info.variant.agent_id() == Some(val.as_str()),
            "status" => {
                a.map(|a| a.status()).unwrap_or("queued") == val || doc.record.state.label() == *val
            }
            // As every output names a run's cause: a skip after a diagnosis keeps it.
            "category" => super::cause::category(doc).is_some_and(|c| c.as_str() == val),
            "model" => doc
                .info
                .model
                .as_deref()
                .is_some_and(|m| m.contains(val.as_str())),
            "gpu" => doc.info.gpu.starts_with(val.as_str()),
            _ => false,
        };
        hit != *neg
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Variant;
    use crate::report::tests::doc;

    #[test]
    fn filters() {
        let d = doc("abc", Variant::Human, "x", 1.0);
        let f = parse_filter("commit=ab,variant=human status=success").unwrap();
        assert!(matches(&d, &f));
        assert!(!matches(&d, &parse_filter("variant!=human").unwrap()));
        assert!(parse_filter("bogus=1").is_err());
        assert!(parse_filter("nonsense").is_err());
        assert!(parse_filter("status=bogus")
            .unwrap_err()
            .contains("unknown status"));
        assert!(parse_filter("category=nope").is_err());
        assert!(parse_filter("variant=agent:x category=cuda_oom status=held").is_ok());
    }
}
