//! Remote servers over Streamable HTTP: each message is a POST; the answer is
//! either one JSON object or an SSE stream carrying one or more messages.
//! Nothing runs locally, so there is no VM (the capture says `remote`).
//!
//! The transport keeps the session id (`Mcp-Session-Id`) the server hands out
//! and sends `MCP-Protocol-Version` once it is known; modern requests also
//! carry `Mcp-Method`. An HTTP error to a request is turned into a JSON-RPC
//! error for that request (keeping the server's own JSON-RPC error when the
//! body has one), so the client's era detection sees a refused probe.
//!
//! The legacy HTTP+SSE transport (2024-11-05) is in [`super::sse`]; [`fetch`]
//! picks between them as the spec's backwards-compatibility section says:
//! try Streamable HTTP, and when its `initialize` POST is refused with a 4xx,
//! open the SSE stream instead.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::time::Instant;

use serde_json::{json, Value};

use super::client::{Client, ClientError, ClientOptions, Incoming, Manifest, Transport};
use super::RunnerError;

/// Which HTTP transport to speak to a remote server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum HttpChoice {
    /// Streamable HTTP; the legacy HTTP+SSE transport when the server
    /// refuses its `initialize` POST with a 4xx status.
    Auto,
    /// Streamable HTTP only (2025-03-26 and later).
    StreamableHttp,
    /// The legacy HTTP+SSE transport only (2024-11-05): GET the SSE URL.
    Sse,
}

/// Streamable HTTP transport.
pub struct HttpTransport {
    agent: ureq::Agent,
    url: String,
    headers: Vec<(String, String)>,
    session: Option<String>,
    protocol: Option<String>,
    queue: VecDeque<Incoming>,
    max_bytes: u64,
    read: u64,
    /// The HTTP status of the last `initialize` POST.
    init_status: Option<u16>,
}

impl HttpTransport {
    /// A transport to `url` with extra headers (e.g. authorization).
    pub fn new(url: &str, headers: &[(String, String)], opts: &ClientOptions) -> Self {
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(opts.request_timeout.max(opts.handshake_timeout)))
            .http_status_as_error(false)
            .proxy(None)
            .max_redirects(0)
            .build();
        HttpTransport {
            agent: config.into(),
            url: url.to_owned(),
            headers: headers.to_vec(),
            session: None,
            protocol: None,
            queue: VecDeque::new(),
            max_bytes: opts.max_bytes,
            read: 0,
            init_status: None,
        }
    }

    fn take(&mut self, r: &mut dyn Read, limit: u64) -> Result<Vec<u8>, ClientError> {
        let mut v = Vec::new();
        r.take(limit + 1)
            .read_to_end(&mut v)
            .map_err(|e| ClientError::Read(e.to_string()))?;
        if v.len() as u64 > limit {
            return Err(ClientError::TooMuchOutput {
                limit: self.max_bytes,
            });
        }
        self.read += v.len() as u64;
        Ok(v)
    }

    fn queue_value(&mut self, v: Value) {
        match v {
            Value::Object(_) => {
                // Learn the negotiated version from an initialize result.
                if let Some(r) = v.get("result") {
                    if let (Some(pv), Some(_)) = (
                        r.get("protocolVersion").and_then(Value::as_str),
                        r.get("serverInfo"),
                    ) {
                        self.protocol = Some(pv.to_owned());
                    }
                }
                self.queue.push_back(Incoming::Message(v));
            }
            Value::Array(items) => self.queue.push_back(Incoming::Batch(items)),
            other => self.queue.push_back(Incoming::Noise(other.to_string())),
        }
    }
}

impl Transport for HttpTransport {
    fn send(&mut self, msg: &Value) -> Result<(), ClientError> {
        let method = msg
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let id = msg.get("id").cloned();
        let body =
            serde_json::to_vec(msg).map_err(|e| ClientError::Write(std::io::Error::other(e)))?;
        let mut req = self
            .agent
            .post(&self.url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream");
        let modern = msg
            .get("params")
            .and_then(|p| p.get("_meta"))
            .and_then(|m| m.get("io.modelcontextprotocol/protocolVersion"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        if let Some(v) = &modern {
            req = req
                .header("MCP-Protocol-Version", v)
                .header("Mcp-Method", &method);
        } else if let Some(v) = &self.protocol {
            req = req.header("MCP-Protocol-Version", v);
        }
        if let Some(s) = &self.session {
            req = req.header("Mcp-Session-Id", s);
        }
        for (k, v) in &self.headers {
            req = req.header(k, v);
        }
        let mut resp = match req.send(&body[..]) {
            Ok(r) => r,
            Err(e) => return Err(ClientError::Write(std::io::Error::other(e.to_string()))),
        };
        let status = resp.status().as_u16();
        if method == "initialize" {
            self.init_status = Some(status);
        }
        if let Some(s) = resp
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
        {
            if s.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
                self.session = Some(s.to_owned());
            }
        }
        let ctype = content_type(resp.headers());
        let left = self.max_bytes.saturating_sub(self.read);
        if status == 202 || id.is_none() {
            return Ok(());
        }
        let mut reader = resp.body_mut().as_reader();
        if !(200..300).contains(&status) {
            let bytes = self.take(&mut reader, left.min(1 << 20))?;
            // A JSON-RPC error in the body is the server's own answer.
            if let Ok(v) = serde_json::from_slice::<Value>(&bytes) {
                if let Some(err) = v.get("error") {
                    self.queue_value(json!({"jsonrpc": "2.0", "id": id, "error": err}));
                    return Ok(());
                }
            }
            let text = String::from_utf8_lossy(&bytes);
            self.queue_value(json!({"jsonrpc": "2.0", "id": id, "error": {
                "code": -32000 - i64::from(status),
                "message": format!("HTTP {status}: {}", crate::display::visible_short(text.trim(), 200)),
            }}));
            return Ok(());
        }
        if ctype.starts_with("text/event-stream") {
            // Read events until our answer arrives (the server may send
            // requests and notifications first).
            let mut r = BufReader::new(reader.take(left));
            let mut data = String::new();
            let mut line = String::new();
            loop {
                line.clear();
                let n = r
                    .read_line(&mut line)
                    .map_err(|e| ClientError::Read(e.to_string()))?;
                self.read += n as u64;
                if n == 0 || line.trim_end_matches(['\r', '\n']).is_empty() {
                    if !data.is_empty() {
                        let got = std::mem::take(&mut data);
                        match serde_json::from_str::<Value>(&got) {
                            Ok(v) => {
                                let answers =
                                    v.get("id") == id.as_ref() && v.get("method").is_none();
                                self.queue_value(v);
                                if answers {
                                    return Ok(());
                                }
                            }
                            Err(_) => self.queue.push_back(Incoming::Noise(got)),
                        }
                    }
                    if n == 0 {
                        if self.read >= self.max_bytes {
                            return Err(ClientError::TooMuchOutput {
                                limit: self.max_bytes,
                            });
                        }
                        return Ok(());
                    }
                    continue;
                }
                let l = line.trim_end_matches(['\r', '\n']);
                if l.starts_with(':') {
                    continue;
                }
                let (field, value) = match l.split_once(':') {
                    Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
                    None => (l, ""),
                };
                if field == "data" {
                    if !data.is_empty() {
                        data.push('\n');
                    }
                    data.push_str(value);
                }
            }
        }
        let bytes = self.take(&mut reader, left)?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(v) => self.queue_value(v),
            Err(_) => self.queue.push_back(Incoming::Noise(
                String::from_utf8_lossy(&bytes).into_owned(),
            )),
        }
        Ok(())
    }

    fn recv(&mut self, _deadline: Instant, _method: &str) -> Result<Option<Incoming>, ClientError> {
        // Every answer arrives with its POST: an empty queue means none came.
        Ok(self.queue.pop_front())
    }
}

/// Fetches a remote server's manifest. Returns it with the transport used
/// (`streamable-http` or `sse`) and, after a fallback, a note saying why.
pub fn fetch(
    url: &str,
    headers: &[(String, String)],
    opts: &ClientOptions,
) -> Result<(Manifest, &'static str, Option<String>), RunnerError> {
    if url.starts_with("http://") {
        let rest = url.trim_start_matches("http://");
        let host = if rest.starts_with("[::1]") {
            "[::1]"
        } else {
            rest.split(['/', ':']).next().unwrap_or("")
        };
        if !matches!(host, "127.0.0.1" | "localhost" | "[::1]") {
            return Err(RunnerError::Usage(format!(
                "{url}: plain http is accepted only for loopback servers; use https://"
            )));
        }
    }
    let session = |error| RunnerError::Session {
        error,
        stderr_tail: String::new(),
    };
    if opts.http_transport == HttpChoice::Sse {
        return fetch_sse(url, headers, opts)
            .map(|m| (m, "sse", None))
            .map_err(session);
    }
    let t = HttpTransport::new(url, headers, opts);
    let mut c = Client::new(t, opts.clone());
    let first = match c.fetch() {
        Ok(m) => return Ok((m, "streamable-http", None)),
        Err(e) => e,
    };
    let status = c.into_transport().init_status;
    match status {
        // The spec's backwards-compatibility test: a 4xx to the initialize
        // POST means a server of the old HTTP+SSE transport. (401 and 403
        // too: an old server behind authentication answers POSTs so.)
        Some(s @ 400..=499) if opts.http_transport == HttpChoice::Auto => {
            match fetch_sse(url, headers, opts) {
                Ok(m) => Ok((
                    m,
                    "sse",
                    Some(format!(
                        "the Streamable HTTP initialize POST got HTTP {s}: fell back to the legacy HTTP+SSE transport (2024-11-05)"
                    )),
                )),
                // Not an SSE server either: the first error says more.
                Err(sse_err) => Err(RunnerError::Session {
                    error: ClientError::Protocol {
                        method: "initialize".into(),
                        message: format!(
                            "{first} (and the legacy HTTP+SSE transport failed too: {sse_err})"
                        ),
                    },
                    stderr_tail: String::new(),
                }),
            }
        }
        _ => Err(session(first)),
    }
}

fn fetch_sse(
    url: &str,
    headers: &[(String, String)],
    opts: &ClientOptions,
) -> Result<Manifest, ClientError> {
    let t = super::sse::SseTransport::connect(url, headers, opts)?;
    Client::new(t, opts.clone()).fetch()
}

/// A response's `Content-Type`, lower-cased (empty when missing or not text).
pub(super) fn content_type(headers: &ureq::http::HeaderMap) -> String {
    headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase()
}
