//! The server's HTTP side: one thread per connection, keep-alive, the routes
//! (`/health`, `/version`, `/v1/models`, `/v1/completions`, `/v1/chat/completions`) and the
//! token stream (one SSE chunk per token, `STANDIN_TOKEN_US` apart).

use crate::engine::{self, tag};
use crate::eras::Ver;
use crate::json::{self, Json, Obj};
use crate::pyenv::env;
use crate::server::State;
use crate::sse;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

struct Req {
    method: String,
    path: String,
    auth: Option<String>,
    body: Vec<u8>,
    close: bool,
}

fn read_req(r: &mut BufReader<TcpStream>) -> Option<Req> {
    let mut line = String::new();
    if r.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.split('?').next()?.to_string();
    let mut close = line.contains("HTTP/1.0");
    let (mut len, mut auth) = (0usize, None);
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).ok()? == 0 {
            return None;
        }
        let t = h.trim_end();
        if t.is_empty() {
            break;
        }
        let (k, val) = t.split_once(':').unwrap_or((t, ""));
        match k.trim().to_ascii_lowercase().as_str() {
            "content-length" => len = val.trim().parse().unwrap_or(0),
            "connection" => close = close || val.trim().eq_ignore_ascii_case("close"),
            "authorization" => auth = Some(val.trim().to_string()),
            _ => {}
        }
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).ok()?;
    Some(Req {
        method,
        path,
        auth,
        body,
        close,
    })
}

pub fn handle(conn: TcpStream, st: &State) {
    let peer = conn.peer_addr().map(|a| a.to_string()).unwrap_or_default();
    let _ = conn.set_nodelay(true);
    let mut r = BufReader::new(match conn.try_clone() {
        Ok(c) => c,
        Err(_) => return,
    });
    let mut w = conn;
    while let Some(req) = read_req(&mut r) {
        let keep = respond(&mut w, &req, st, &peer);
        if !keep || req.close {
            return;
        }
    }
}

fn access(st: &State, peer: &str, req: &Req, status: &str) {
    if st.access_log {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(
            out,
            "{}INFO:     {peer} - \"{} {} HTTP/1.1\" {status}",
            tag(st.ver, "APIServer"),
            req.method,
            req.path
        );
        let _ = out.flush();
    }
}

fn send(
    w: &mut TcpStream,
    st: &State,
    peer: &str,
    req: &Req,
    status: &str,
    ctype: &str,
    body: &str,
) -> bool {
    access(st, peer, req, status);
    let head = format!(
        "HTTP/1.1 {status}\r\ndate: {}\r\nserver: uvicorn\r\ncontent-length: {}\r\ncontent-type: {ctype}\r\n\r\n",
        engine::timestamp(),
        body.len()
    );
    w.write_all(head.as_bytes()).is_ok() && w.write_all(body.as_bytes()).is_ok()
}

fn error_body(msg: &str, kind: &str, code: u16) -> String {
    Obj::new()
        .s("object", "error")
        .s("message", msg)
        .s("type", kind)
        .raw("param", "null")
        .i("code", code as i64)
        .compact()
}

/// Answers one request; false = close the connection.
fn respond(w: &mut TcpStream, req: &Req, st: &State, peer: &str) -> bool {
    const JSON: &str = "application/json";
    let get = req.method == "GET";
    let post = req.method == "POST";
    if req.path.starts_with("/v1") {
        if let Some(key) = &st.api_key {
            if req.auth.as_deref() != Some(&format!("Bearer {key}")) {
                return send(
                    w,
                    st,
                    peer,
                    req,
                    "401 Unauthorized",
                    JSON,
                    "{\"error\":\"Unauthorized\"}",
                );
            }
        }
    }
    match req.path.as_str() {
        "/health" if get => send(w, st, peer, req, "200 OK", JSON, ""),
        "/version" if get && st.ver >= Ver::new(0, 4, 0) => send(
            w,
            st,
            peer,
            req,
            "200 OK",
            JSON,
            &format!("{{\"version\":{}}}", json::quote(&st.version)),
        ),
        "/v1/models" if get => {
            let data: Vec<String> = st
                .names
                .iter()
                .map(|n| {
                    Obj::new()
                        .s("id", n)
                        .s("object", "model")
                        .i("created", now() as i64)
                        .s("owned_by", "vllm")
                        .s("root", &st.names[0])
                        .raw("parent", "null")
                        .i("max_model_len", st.max_model_len as i64)
                        .compact()
                })
                .collect();
            send(
                w,
                st,
                peer,
                req,
                "200 OK",
                JSON,
                &format!("{{\"object\":\"list\",\"data\":[{}]}}", data.join(",")),
            )
        }
        "/v1/completions" | "/v1/chat/completions" if post => {
            generate(w, req, st, peer, req.path.contains("chat"))
        }
        "/health" | "/version" | "/v1/models" | "/v1/completions" | "/v1/chat/completions" => send(
            w,
            st,
            peer,
            req,
            "405 Method Not Allowed",
            JSON,
            "{\"detail\":\"Method Not Allowed\"}",
        ),
        _ => send(
            w,
            st,
            peer,
            req,
            "404 Not Found",
            JSON,
            "{\"detail\":\"Not Found\"}",
        ),
    }
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn words(s: &str) -> u64 {
    s.split_whitespace().count() as u64
}

fn hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100000001b3)
    })
}

const VOCAB: &[&str] = &[
    " the", " model", " serves", " a", " token", " at", " night", ",", " and", " then", " another",
    ".",
];

fn generate(w: &mut TcpStream, req: &Req, st: &State, peer: &str, chat: bool) -> bool {
    const JSON: &str = "application/json";
    let body = String::from_utf8_lossy(&req.body).into_owned();
    let j = match json::parse(&body) {
        Ok(j @ Json::Obj(_)) => j,
        _ => {
            let msg = error_body("JSON decode error", "BadRequestError", 400);
            return send(w, st, peer, req, "400 Bad Request", JSON, &msg);
        }
    };
    if let Some(m) = j.get("model").and_then(Json::as_str) {
        if !st.names.iter().any(|n| n == m) {
            let msg = error_body(
                &format!("The model `{m}` does not exist."),
                "NotFoundError",
                404,
            );
            return send(w, st, peer, req, "404 Not Found", JSON, &msg);
        }
    }
    let prompt_tokens: u64 = if chat {
        j.get("messages")
            .and_then(Json::as_arr)
            .map(|ms| {
                ms.iter()
                    .map(|m| {
                        4 + m
                            .get("content")
                            .and_then(Json::as_str)
                            .map(words)
                            .unwrap_or(0)
                    })
                    .sum()
            })
            .unwrap_or(0)
    } else {
        match j.get("prompt") {
            Some(Json::Str(s)) => words(s),
            Some(Json::Arr(a)) if a.iter().all(|x| matches!(x, Json::Num(_))) => a.len() as u64,
            Some(Json::Arr(a)) => a.iter().filter_map(Json::as_str).map(words).sum(),
            _ => 0,
        }
    };
    let key = if chat {
        "max_completion_tokens"
    } else {
        "max_tokens"
    };
    let max_tokens = j
        .get(key)
        .or_else(|| j.get("max_tokens"))
        .and_then(Json::as_f64)
        .map(|n| n as u64)
        .unwrap_or(if chat { 256 } else { 16 });
    if prompt_tokens + max_tokens > st.max_model_len {
        let msg = error_body(&format!("This model's maximum context length is {} tokens. However, you requested {} tokens ({prompt_tokens} in the messages, {max_tokens} in the completion). Please reduce the length of the messages or completion.", st.max_model_len, prompt_tokens + max_tokens), "BadRequestError", 400);
        return send(w, st, peer, req, "400 Bad Request", JSON, &msg);
    }
    let cap: u64 = env("STANDIN_MAX_TOKENS")
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    let ignore_eos = j.get("ignore_eos").and_then(Json::as_bool).unwrap_or(false);
    let h = hash(&body);
    let mut n = max_tokens.min(cap).max(1);
    // Without ignore_eos a quarter of the requests meet EOS early (as models do).
    if !ignore_eos && h.is_multiple_of(4) {
        n = (n * (50 + h % 50) / 100).max(1);
    }
    let finish = if n < max_tokens.min(cap) {
        "stop"
    } else {
        "length"
    };
    let token_us: u64 = env("STANDIN_TOKEN_US")
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let stream = j.get("stream").and_then(Json::as_bool).unwrap_or(false);
    let include_usage = j
        .get("stream_options")
        .and_then(|o| o.get("include_usage"))
        .and_then(Json::as_bool)
        .unwrap_or(false);
    let id = format!("{}-{:016x}", if chat { "chatcmpl" } else { "cmpl" }, h);
    let created = now();
    let model = j
        .get("model")
        .and_then(Json::as_str)
        .unwrap_or(&st.names[0])
        .to_string();
    let object = if chat {
        "chat.completion.chunk"
    } else {
        "text_completion"
    };
    let prefill = Duration::from_micros(token_us * 2 + prompt_tokens / 10);
    if !stream {
        std::thread::sleep(prefill + Duration::from_micros(token_us * n));
        let text: String = (0..n)
            .map(|i| VOCAB[((h >> 3) as usize + i as usize) % VOCAB.len()])
            .collect();
        let choice = if chat {
            format!("{{\"index\":0,\"message\":{{\"role\":\"assistant\",\"content\":{}}},\"finish_reason\":\"{finish}\"}}", json::quote(&text))
        } else {
            format!(
                "{{\"index\":0,\"text\":{},\"logprobs\":null,\"finish_reason\":\"{finish}\"}}",
                json::quote(&text)
            )
        };
        let obj = if chat {
            "chat.completion"
        } else {
            "text_completion"
        };
        let out = format!(
            "{{\"id\":\"{id}\",\"object\":\"{obj}\",\"created\":{created},\"model\":{},\"choices\":[{choice}],\"usage\":{}}}",
            json::quote(&model),
            sse::usage(prompt_tokens, n)
        );
        return send(w, st, peer, req, "200 OK", JSON, &out);
    }
    access(st, peer, req, "200 OK");
    let head = format!("HTTP/1.1 200 OK\r\ndate: {}\r\nserver: uvicorn\r\ncontent-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n\r\n", engine::timestamp());
    if w.write_all(head.as_bytes()).is_err() {
        return false;
    }
    let mut put = |payload: &str| -> bool {
        let frame = sse::frame(payload);
        w.write_all(format!("{:x}\r\n{frame}\r\n", frame.len()).as_bytes())
            .is_ok()
            && w.flush().is_ok()
    };
    std::thread::sleep(prefill);
    if chat && !put(&sse::chat_chunk(&id, created, &model, true, "", None)) {
        return false;
    }
    for i in 0..n {
        if i > 0 {
            std::thread::sleep(Duration::from_micros(token_us));
        }
        let word = VOCAB[((h >> 3) as usize + i as usize) % VOCAB.len()];
        let last = (i + 1 == n).then_some(finish);
        let chunk = if chat {
            sse::chat_chunk(&id, created, &model, false, word, last)
        } else {
            sse::completion_chunk(&id, created, &model, word, last)
        };
        if !put(&chunk) {
            return false;
        }
    }
    if include_usage
        && !put(&sse::usage_chunk(
            &id,
            created,
            &model,
            object,
            prompt_tokens,
            n,
        ))
    {
        return false;
    }
    if !put("[DONE]") {
        return false;
    }
    w.write_all(b"0\r\n\r\n").is_ok()
}
