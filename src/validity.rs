//! Whether a benchmark's result is a measurement at all. A real vLLM whose engine died
//! prints a full result block of zeros; one that lost a few requests prints latencies of
//! the survivors, biased towards the easy ones. Neither is a number to compare: the run is
//! a failure that says why, never a result in a verdict, a chart or the digest. Pure.

use std::collections::BTreeMap;

/// More failed requests than this share makes a serving result unusable: latency
/// percentiles of the requests that survived are not the command's.
pub const MAX_FAILED_SHARE: f64 = 0.01;

/// Why `metrics` are no measurement, or None when they are one.
pub fn invalid_reason(metrics: &BTreeMap<String, f64>) -> Option<String> {
    let ok = metrics.get("successful_requests").copied();
    let failed = metrics.get("failed_requests").copied().unwrap_or(0.0);
    if let Some(ok) = ok {
        if ok <= 0.0 {
            return Some(format!(
                "no request succeeded ({failed:.0} failed): the result block is zeros"
            ));
        }
        let share = failed / (ok + failed);
        if share > MAX_FAILED_SHARE {
            return Some(format!(
                "{failed:.0} of {:.0} requests failed ({:.1}%, more than {:.0}%): latencies of the survivors are not the command's",
                ok + failed,
                share * 100.0,
                MAX_FAILED_SHARE * 100.0
            ));
        }
        if metrics.get("total_output_tokens") == Some(&0.0) {
            return Some("the requests generated no token".into());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn zeros_losses_and_silence_are_no_measurement() {
        assert!(invalid_reason(&m(&[
            ("successful_requests", 0.0),
            ("failed_requests", 50.0)
        ]))
        .unwrap()
        .contains("no request succeeded"));
        assert!(invalid_reason(&m(&[
            ("successful_requests", 97.0),
            ("failed_requests", 3.0)
        ]))
        .unwrap()
        .contains("3 of 100 requests failed"));
        assert!(invalid_reason(&m(&[
            ("successful_requests", 10.0),
            ("total_output_tokens", 0.0)
        ]))
        .is_some());
        // Whole, or within the bound, or an offline benchmark with no request counts.
        assert_eq!(
            invalid_reason(&m(&[
                ("successful_requests", 50.0),
                ("failed_requests", 0.0)
            ])),
            None
        );
        assert_eq!(
            invalid_reason(&m(&[
                ("successful_requests", 1000.0),
                ("failed_requests", 5.0)
            ])),
            None
        );
        assert_eq!(invalid_reason(&m(&[("throughput_req_s", 4.0)])), None);
    }
}
