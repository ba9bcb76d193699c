//! A minimal HTTP/1.1 client for the benchmark client: one request per connection, the
//! response body delivered line by line as it arrives (chunked, sized or close-delimited),
//! errors worded like aiohttp's.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

pub struct Url {
    pub host: String,
    pub port: u16,
    pub path: String,
    pub https: bool,
}

/// `http://host:port/path` (scheme optional, port defaults by scheme).
pub fn parse_url(url: &str) -> Url {
    let (https, rest) = if let Some(r) = url.strip_prefix("https://") {
        (true, r)
    } else {
        (false, url.strip_prefix("http://").unwrap_or(url))
    };
    let (hostport, path) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].to_string()),
        None => (rest, "/".to_string()),
    };
    let (host, port) = match hostport.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || hostport.starts_with('[') => (
            h.trim_matches(|c| c == '[' || c == ']').to_string(),
            p.parse().unwrap_or(if https { 443 } else { 80 }),
        ),
        _ => (hostport.to_string(), if https { 443 } else { 80 }),
    };
    Url {
        host,
        port,
        path,
        https,
    }
}

/// Name resolution without NSS: literals, localhost, /etc/hosts, then the system resolver.
fn resolve(host: &str, port: u16) -> Result<Vec<SocketAddr>, String> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    if host == "localhost" {
        return Ok(vec![SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port)]);
    }
    if let Ok(hosts) = std::fs::read_to_string("/etc/hosts") {
        for line in hosts.lines() {
            let mut it = line.split('#').next().unwrap_or("").split_whitespace();
            if let Some(ip) = it.next().and_then(|s| s.parse::<IpAddr>().ok()) {
                if it.any(|n| n == host) {
                    return Ok(vec![SocketAddr::new(ip, port)]);
                }
            }
        }
    }
    (host, port)
        .to_socket_addrs()
        .map(|a| a.collect())
        .map_err(|_| "Name or service not known".to_string())
}

/// aiohttp's `ClientConnectorError` text.
pub fn connect(host: &str, port: u16) -> Result<TcpStream, String> {
    let addrs = resolve(host, port)
        .map_err(|e| format!("Cannot connect to host {host}:{port} ssl:default [{e}]"))?;
    let mut last = String::new();
    for a in addrs {
        match TcpStream::connect_timeout(&a, Duration::from_secs(10)) {
            Ok(s) => return Ok(s),
            Err(e) => {
                last = if e.kind() == std::io::ErrorKind::ConnectionRefused {
                    format!("Connect call failed ('{}', {})", a.ip(), a.port())
                } else {
                    e.to_string()
                }
            }
        }
    }
    Err(format!(
        "Cannot connect to host {host}:{port} ssl:default [{last}]"
    ))
}

pub struct Response {
    pub status: u16,
    pub reason: String,
}

/// Sends one request; calls `on_line(line, arrival)` for every body line (without the
/// line ending). Err = a transport error (aiohttp wording).
pub fn request(
    url: &Url,
    method: &str,
    body: &str,
    headers: &[(&str, String)],
    on_line: &mut dyn FnMut(&str, Instant),
) -> Result<Response, String> {
    if url.https {
        return Err(format!(
            "Cannot connect to host {}:{} ssl:True [SSL: WRONG_VERSION_NUMBER] wrong version number",
            url.host, url.port
        ));
    }
    let mut s = connect(&url.host, url.port)?;
    let _ = s.set_nodelay(true);
    let mut req = format!(
        "{method} {} HTTP/1.1\r\nHost: {}:{}\r\nUser-Agent: Python/3.12 aiohttp/3.10.5\r\nAccept: */*\r\nConnection: close\r\n",
        url.path, url.host, url.port
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if method == "POST" {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes())
        .map_err(|e| format!("Server disconnected: {e}"))?;
    let mut r = BufReader::new(s);
    let mut status_line = String::new();
    r.read_line(&mut status_line)
        .map_err(|e| format!("Server disconnected: {e}"))?;
    if status_line.is_empty() {
        return Err("Server disconnected".into());
    }
    let mut parts = status_line.trim_end().splitn(3, ' ');
    let _ = parts.next();
    let status: u16 = parts.next().and_then(|c| c.parse().ok()).unwrap_or(0);
    let reason = parts.next().unwrap_or("").to_string();
    let (mut chunked, mut length) = (false, None::<usize>);
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).unwrap_or(0) == 0 {
            break;
        }
        let l = h.trim_end().to_ascii_lowercase();
        if l.is_empty() {
            break;
        }
        if l.starts_with("transfer-encoding:") && l.contains("chunked") {
            chunked = true;
        }
        if let Some(v) = l.strip_prefix("content-length:") {
            length = v.trim().parse().ok();
        }
    }
    let mut lines = LineSplitter::default();
    let mut feed = |bytes: &[u8]| lines.push(bytes, on_line);
    if chunked {
        loop {
            let mut size = String::new();
            if r.read_line(&mut size).unwrap_or(0) == 0 {
                break;
            }
            let n = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16)
                .unwrap_or(0);
            if n == 0 {
                break;
            }
            let mut buf = vec![0u8; n + 2];
            if r.read_exact(&mut buf).is_err() {
                return Err("Response payload is not completed".into());
            }
            feed(&buf[..n]);
        }
    } else if let Some(n) = length {
        let mut buf = vec![0u8; n];
        r.read_exact(&mut buf)
            .map_err(|_| "Response payload is not completed".to_string())?;
        feed(&buf);
    } else {
        let mut buf = [0u8; 8192];
        loop {
            match r.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => feed(&buf[..n]),
                Err(e) => return Err(e.to_string()),
            }
        }
    }
    lines.finish(on_line);
    Ok(Response { status, reason })
}

#[derive(Default)]
struct LineSplitter {
    buf: Vec<u8>,
}

impl LineSplitter {
    fn push(&mut self, bytes: &[u8], on_line: &mut dyn FnMut(&str, Instant)) {
        let now = Instant::now();
        self.buf.extend_from_slice(bytes);
        while let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.buf.drain(..=i).collect();
            let text = String::from_utf8_lossy(&line);
            on_line(text.trim_end_matches(['\n', '\r']), now);
        }
    }
    fn finish(&mut self, on_line: &mut dyn FnMut(&str, Instant)) {
        if !self.buf.is_empty() {
            let text = String::from_utf8_lossy(&self.buf).into_owned();
            self.buf.clear();
            on_line(&text, Instant::now());
        }
    }
}
