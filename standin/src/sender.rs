//! One benchmark request, as the era's client sends it (completions or chat payload,
//! streamed), measured on arrival: TTFT = first chunk with text, ITL = gaps between chunks,
//! E2EL = the whole exchange.

use crate::datasets::Request;
use crate::eras::Era;
use crate::http;
use crate::json::{self, Obj};
use crate::metrics::Out;
use crate::pyenv::env;
use crate::sse::{self, Event};
use std::time::Instant;

pub struct Sender {
    pub url: http::Url,
    pub model: String,
    pub chat: bool,
    pub era: Era,
    pub best_of: i64,
    pub ignore_eos: bool,
    pub logprobs: Option<i64>,
    pub stream: bool,
}

impl Sender {
    fn body(&self, r: &Request) -> String {
        let mut o = Obj::new().s("model", &self.model);
        o = if self.chat {
            o.raw(
                "messages",
                format!(
                    "[{{\"role\": \"user\", \"content\": {}}}]",
                    json::quote(&r.prompt)
                ),
            )
        } else {
            o.s("prompt", &r.prompt)
        };
        o = o.f("temperature", 0.0);
        if self.era <= Era::V064 && !self.chat {
            o = o.i("best_of", self.best_of);
        }
        o = o.i(
            if self.chat && self.era >= Era::V080 {
                "max_completion_tokens"
            } else {
                "max_tokens"
            },
            r.output_len as i64,
        );
        if let Some(l) = self.logprobs {
            o = o.i("logprobs", l);
        }
        o = o.raw("stream", if self.stream { "true" } else { "false" });
        if self.era >= Era::V080 {
            o = o.raw("stream_options", "{\"include_usage\": true}");
        }
        if self.ignore_eos {
            o = o.raw("ignore_eos", "true");
        }
        o.compact()
    }

    /// One request, measured: TTFT = first chunk with text, ITL = gaps between chunks.
    pub fn send(&self, r: &Request) -> Out {
        let mut out = Out {
            prompt_len: r.prompt_len,
            ..Default::default()
        };
        let body = self.body(r);
        let start = Instant::now();
        out.start = Some(start);
        let mut last: Option<Instant> = None;
        let mut done = false;
        let mut usage = None;
        let mut bad = None;
        let mut plain = String::new();
        let headers: Vec<(&str, String)> = env("OPENAI_API_KEY")
            .map(|k| vec![("Authorization", format!("Bearer {k}"))])
            .unwrap_or_default();
        let res = http::request(&self.url, "POST", &body, &headers, &mut |line, at| {
            if !self.stream {
                plain.push_str(line);
                return;
            }
            match sse::parse_line(line) {
                Some(Event::Done) => done = true,
                Some(Event::Chunk(j)) => {
                    if let Some(u) = sse::chunk_usage(&j) {
                        usage = Some(u);
                    }
                    if let Some(t) = sse::chunk_text(&j, self.chat).filter(|t| !t.is_empty()) {
                        match last {
                            None => out.ttft = (at - start).as_secs_f64(),
                            Some(prev) => out.itl.push((at - prev).as_secs_f64()),
                        }
                        last = Some(at);
                        out.token_times.push(at);
                        out.text.push_str(&t);
                    }
                }
                Some(Event::Bad(d)) => bad = Some(d),
                None => {}
            }
        });
        let end = Instant::now();
        out.end = Some(end);
        out.latency = (end - start).as_secs_f64();
        match res {
            Err(e) => out.error = e,
            Ok(resp) if resp.status != 200 && self.stream => out.error = resp.reason,
            Ok(_) if !self.stream => {
                // The 2023 client retried only while the JSON body said "error".
                out.success = true;
                out.output_len = r.output_len;
            }
            Ok(_) => {
                if let Some(d) = bad {
                    out.error = format!("json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0): {d}");
                } else if last.is_none() {
                    out.error = "Never received a valid chunk to calculate TTFT.This response will be marked as failed!".into();
                } else {
                    let _ = done;
                    out.success = true;
                    out.output_len = usage.unwrap_or(out.token_times.len() as u64);
                }
            }
        }
        if !out.success && out.error.is_empty() {
            out.error = "request failed".into();
        }
        out
    }
}
