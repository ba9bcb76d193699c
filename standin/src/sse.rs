//! Server-Sent Events as vLLM's OpenAI server streams them (spec real-images.md §2):
//! `data: {json chunk}` + blank line per chunk, `data: [DONE]` at the end. Chunks carry
//! `choices[0].text` (completions) or `choices[0].delta.content` (chat).

use crate::json::{self, Json, Obj};

pub enum Event {
    Done,
    Chunk(Json),
    /// A `data:` line that is not JSON (the real client would raise on it).
    Bad(String),
}

/// One body line of a stream; None for blank lines and comments.
pub fn parse_line(line: &str) -> Option<Event> {
    let data = line.strip_prefix("data:")?.trim_start();
    if data == "[DONE]" {
        return Some(Event::Done);
    }
    Some(match json::parse(data) {
        Ok(j) => Event::Chunk(j),
        Err(_) => Event::Bad(data.to_string()),
    })
}

/// The generated text a chunk carries, if any.
pub fn chunk_text(j: &Json, chat: bool) -> Option<String> {
    let c = j.get("choices")?.idx(0)?;
    let t = if chat {
        c.get("delta")?.get("content")?.as_str()?
    } else {
        c.get("text")?.as_str()?
    };
    Some(t.to_string())
}

/// `usage.completion_tokens` of a chunk (the final usage chunk), if present.
pub fn chunk_usage(j: &Json) -> Option<u64> {
    j.get("usage")?
        .get("completion_tokens")?
        .as_f64()
        .map(|n| n as u64)
}

pub fn frame(payload: &str) -> String {
    format!("data: {payload}\n\n")
}

pub fn completion_chunk(
    id: &str,
    created: u64,
    model: &str,
    text: &str,
    finish: Option<&str>,
) -> String {
    let choice = Obj::new()
        .i("index", 0)
        .s("text", text)
        .raw("logprobs", "null")
        .raw(
            "finish_reason",
            finish.map(json::quote).unwrap_or_else(|| "null".into()),
        )
        .raw("stop_reason", "null")
        .compact();
    Obj::new()
        .s("id", id)
        .s("object", "text_completion")
        .i("created", created as i64)
        .s("model", model)
        .raw("choices", format!("[{choice}]"))
        .compact()
}

pub fn chat_chunk(
    id: &str,
    created: u64,
    model: &str,
    role: bool,
    content: &str,
    finish: Option<&str>,
) -> String {
    let mut delta = Obj::new();
    if role {
        delta = delta.s("role", "assistant");
    }
    let delta = delta.s("content", content).compact();
    let choice = Obj::new()
        .i("index", 0)
        .raw("delta", delta)
        .raw("logprobs", "null")
        .raw(
            "finish_reason",
            finish.map(json::quote).unwrap_or_else(|| "null".into()),
        )
        .compact();
    Obj::new()
        .s("id", id)
        .s("object", "chat.completion.chunk")
        .i("created", created as i64)
        .s("model", model)
        .raw("choices", format!("[{choice}]"))
        .compact()
}

pub fn usage_chunk(
    id: &str,
    created: u64,
    model: &str,
    object: &str,
    prompt: u64,
    completion: u64,
) -> String {
    Obj::new()
        .s("id", id)
        .s("object", object)
        .i("created", created as i64)
        .s("model", model)
        .raw("choices", "[]")
        .raw("usage", usage(prompt, completion))
        .compact()
}

pub fn usage(prompt: u64, completion: u64) -> String {
    Obj::new()
        .i("prompt_tokens", prompt as i64)
        .i("total_tokens", (prompt + completion) as i64)
        .i("completion_tokens", completion as i64)
        .compact()
}
