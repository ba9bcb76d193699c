//! Offline benchmarks: throughput, latency and prefix caching. Their results are single
//! lines among engine logs, not framed blocks, so each shape is matched on its own.

use super::label::{after_prefix, parse_num, slug};
use regex::{Captures, Regex};
use std::sync::OnceLock;

/// One recognised offline result line.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Offline {
    /// `Throughput: 24.61 requests/s, 10758.87 [total ]tokens/s[, 5308.64 output tokens/s]`.
    Throughput(Vec<(&'static str, f64)>),
    /// `Throughput: 4.61 requests/s` alone: the pre-2024 serving script.
    ServingThroughput(f64),
    /// `Total num prompt tokens:  221443` (after the throughput line, v0.8+).
    TotalNum(&'static str, f64),
    /// `Avg latency: 1.73 seconds`.
    AvgLatency(f64),
    /// `99% percentile latency: 1.78 seconds` → (`latency_p99_s`, value).
    Percentile(String, f64),
    /// `cost time 12.94` (prefix caching; the last one is the measurement).
    CostTime(f64),
    /// `Processed prompts` bar: `est. speed input: 23747.88 toks/s, output: 1544.21 toks/s`.
    Speeds(f64, f64),
}

const NUM: &str =
    r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?(?:e[-+]?\d+)?|[-+]?\.\d+(?:e[-+]?\d+)?";
struct Res {
    throughput: Regex,
    item: Regex,
    total_num: Regex,
    avg: Regex,
    pct: Regex,
    cost: Regex,
    speeds: Regex,
}

fn res() -> &'static Res {
    static R: OnceLock<Res> = OnceLock::new();
    R.get_or_init(|| {
        let re = |s: String| Regex::new(&s).expect("offline regex");
        Res {
            throughput: re(r"throughput:\s*(?P<rest>.*)$".to_string()),
            item: re(format!(
                r"^(?P<num>{NUM})\s*(?P<unit>requests/s|req/s|(?:(?P<which>total|output|input|prompt)\s+)?(?:tokens|tok|toks)/s)$"
            )),
            total_num: re(format!(
                r"total num (?P<which>prompt|input|output) tokens\s*:\s*(?P<num>{NUM})$"
            )),
            avg: re(format!(
                r"avg latency\s*:\s*(?P<num>{NUM})\s*(?P<unit>seconds|secs|sec|s|ms)?$"
            )),
            pct: re(format!(
                r"(?P<p>\d+(?:\.\d+)?)\s*% percentile latency\s*:\s*(?P<num>{NUM})\s*(?P<unit>seconds|secs|sec|s|ms)?$"
            )),
            cost: re(format!(r"cost time\s*[:=]?\s*(?P<num>{NUM})\s*(?:seconds|s)?$")),
            speeds: re(format!(
                r"est\. speed input:\s*(?P<i>{NUM})\s*toks/s,\s*output:\s*(?P<o>{NUM})\s*toks/s"
            )),
        }
    })
}

/// The first match of `re` in `text` that starts where a label may start: anything before
/// it is a line prefix of any shape, never a word of another label (`avg prompt
/// throughput:` is not `throughput:`).
fn captures_after_prefix<'t>(re: &Regex, text: &'t str) -> Option<Captures<'t>> {
    let mut from = 0;
    while from <= text.len() {
        let c = re.captures_at(text, from)?;
        let start = c.get(0)?.start();
        if after_prefix(text.as_bytes(), start) {
            return Some(c);
        }
        // Next char boundary after this start.
        from = start + text[start..].chars().next().map_or(1, char::len_utf8);
    }
    None
}

fn secs(num: &str, unit: Option<&str>) -> Option<f64> {
    let v = parse_num(num)?;
    Some(if unit == Some("ms") { v / 1000.0 } else { v })
}

/// Matches a cleaned line (any case) against the offline result shapes.
pub(crate) fn match_line(text: &str) -> Option<Offline> {
    if text.len() > super::label::MAX_TEXT {
        return None;
    }
    let lower = super::label::without_trailer(text).to_ascii_lowercase();
    let r = res();
    if lower.contains("throughput:") {
        if let Some(c) = captures_after_prefix(&r.throughput, &lower) {
            return throughput_items(c.name("rest")?.as_str());
        }
    }
    if lower.contains("latency") {
        if let Some(c) = captures_after_prefix(&r.avg, &lower) {
            return Some(Offline::AvgLatency(secs(
                &c["num"],
                c.name("unit").map(|m| m.as_str()),
            )?));
        }
        if let Some(c) = captures_after_prefix(&r.pct, &lower) {
            let key = format!("latency_p{}_s", slug(&c["p"]));
            let v = secs(&c["num"], c.name("unit").map(|m| m.as_str()))?;
            return Some(Offline::Percentile(key, v));
        }
    }
    if lower.contains("total num ") {
        if let Some(c) = captures_after_prefix(&r.total_num, &lower) {
            let key = if &c["which"] == "output" {
                "total_output_tokens"
            } else {
                "total_input_tokens"
            };
            return Some(Offline::TotalNum(key, parse_num(&c["num"])?));
        }
    }
    if lower.contains("cost time") {
        if let Some(c) = captures_after_prefix(&r.cost, &lower) {
            return Some(Offline::CostTime(parse_num(&c["num"])?));
        }
    }
    if lower.contains("est. speed") {
        if let Some(c) = r.speeds.captures(&lower) {
            return Some(Offline::Speeds(parse_num(&c["i"])?, parse_num(&c["o"])?));
        }
    }
    None
}

fn throughput_items(rest: &str) -> Option<Offline> {
    let mut out = Vec::with_capacity(3);
    for (i, item) in rest.trim_end_matches(['.', ' ']).split(',').enumerate() {
        let c = res().item.captures(item.trim())?;
        let v = parse_num(&c["num"])?;
        let unit = &c["unit"];
        let key = if unit.starts_with("req") {
            if i != 0 {
                return None;
            }
            "throughput_req_s"
        } else {
            match c.name("which").map(|m| m.as_str()) {
                None | Some("total") => "throughput_total_tok_s",
                Some("output") => "throughput_output_tok_s",
                Some(_) => "throughput_input_tok_s",
            }
        };
        if i == 0 && key != "throughput_req_s" {
            return None;
        }
        out.push((key, v));
    }
    match out.as_slice() {
        [] => None,
        [(_, v)] => Some(Offline::ServingThroughput(*v)),
        _ => Some(Offline::Throughput(out)),
    }
}

#[cfg(test)]
// The values are as benchmarks print them (full `repr` floats).
#[allow(clippy::excessive_precision)]
mod tests {
    use super::*;

    #[test]
    fn a_throughput_line_with_commentary_is_read() {
        assert_eq!(
            match_line("Throughput: 2.10 requests/s, 500.00 total tokens/s, 100.00 output tokens/s (chunked prefill on)"),
            Some(Offline::Throughput(vec![
                ("throughput_req_s", 2.10),
                ("throughput_total_tok_s", 500.0),
                ("throughput_output_tok_s", 100.0),
            ]))
        );
        assert_eq!(
            match_line("Avg latency: 1.73 seconds   <-- best of three"),
            Some(Offline::AvgLatency(1.73))
        );
        assert_eq!(match_line("Avg latency: 1.73 -> 1.41 seconds"), None);
    }

    #[test]
    fn throughput_shapes() {
        assert_eq!(
            match_line("Throughput: 24.61 requests/s, 10758.87 tokens/s"),
            Some(Offline::Throughput(vec![
                ("throughput_req_s", 24.61),
                ("throughput_total_tok_s", 10758.87)
            ]))
        );
        assert_eq!(
            match_line(
                "After: Throughput: 0.16 requests/s, 735.49 total tokens/s, 654.65 output tokens/s"
            ),
            Some(Offline::Throughput(vec![
                ("throughput_req_s", 0.16),
                ("throughput_total_tok_s", 735.49),
                ("throughput_output_tok_s", 654.65)
            ]))
        );
        assert_eq!(
            match_line("Throughput: 4.61 requests/s"),
            Some(Offline::ServingThroughput(4.61))
        );
        assert_eq!(
            match_line(
                "Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 238.7 tokens/s"
            ),
            None
        );
        assert_eq!(
            match_line("throughput: 0.0 tokens/s, Avg generation throughput: 238.7 tokens/s"),
            None
        );
        assert_eq!(match_line("Request throughput: 8.46 requests/s"), None);
    }

    #[test]
    fn latency_and_prefix_caching() {
        assert_eq!(
            match_line("Avg latency: 1.7304185613989832 seconds"),
            Some(Offline::AvgLatency(1.7304185613989832))
        );
        assert_eq!(
            match_line("99% percentile latency: 1.78 seconds"),
            Some(Offline::Percentile("latency_p99_s".into(), 1.78))
        );
        assert_eq!(
            match_line("cost time 12.946571588516235"),
            Some(Offline::CostTime(12.946571588516235))
        );
        assert_eq!(
            match_line("Total num prompt tokens:  221443"),
            Some(Offline::TotalNum("total_input_tokens", 221443.0))
        );
        assert_eq!(
            match_line("Processed prompts: 100%|#| 200/200 [00:12<00:00, 15.45it/s, est. speed input: 23747.88 toks/s, output: 1544.21 toks/s]"),
            Some(Offline::Speeds(23747.88, 1544.21))
        );
        assert_eq!(match_line("Average latency: 7.96 s"), None);
        assert_eq!(
            match_line("2024/07/08 21:59:25 99% percentile latency: 1.78 seconds"),
            Some(Offline::Percentile("latency_p99_s".into(), 1.78))
        );
        assert_eq!(
            match_line("21:59:25 Throughput: 1.00 requests/s, 2.00 tokens/s"),
            Some(Offline::Throughput(vec![
                ("throughput_req_s", 1.0),
                ("throughput_total_tok_s", 2.0)
            ]))
        );
    }
}
