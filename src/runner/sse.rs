//! The legacy HTTP+SSE transport (protocol 2024-11-05, deprecated but still
//! served): one long GET whose `text/event-stream` first carries an
//! `endpoint` event (the URL to POST messages to), then every message from
//! the server as a `message` event. Each client message is its own POST to
//! that endpoint (the answer to the POST is usually just 202; the JSON-RPC
//! response arrives on the stream).
//!
//! The stream is read on its own thread, so every wait has a deadline; its
//! bytes count against the session's cap. The endpoint must have the same
//! origin as the stream's URL: a server must not be able to send our POSTs,
//! and the headers they carry (credentials), to another host.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::client::{ClientError, ClientOptions, Incoming, Transport};

/// One server-sent event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field (`message` when absent).
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// What the stream thread hands over.
#[derive(Debug)]
enum StreamItem {
    Event(SseEvent),
    End(Option<ClientError>),
}

/// Reads events from an SSE body until it ends or a cap is hit. Comment
/// lines, `id:` and `retry:` are skipped; an event with no data is dropped
/// (priming events), as the SSE format says.
fn read_events(body: impl Read, tx: SyncSender<StreamItem>, max_bytes: u64, max_line: usize) {
    let mut r = BufReader::new(body.take(max_bytes.saturating_add(1)));
    let mut total: u64 = 0;
    let mut event = String::new();
    let mut data: Option<String> = None;
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = match (&mut r)
            .take(max_line as u64 + 2)
            .read_until(b'\n', &mut line)
        {
            Ok(n) => n,
            Err(e) => {
                let _ = tx.send(StreamItem::End(Some(ClientError::Read(e.to_string()))));
                return;
            }
        };
        total += n as u64;
        if total > max_bytes {
            let _ = tx.send(StreamItem::End(Some(ClientError::TooMuchOutput {
                limit: max_bytes,
            })));
            return;
        }
        if n == 0 {
            let _ = tx.send(StreamItem::End(None));
            return;
        }
        if line.len() > max_line && !line.ends_with(b"\n") {
            let _ = tx.send(StreamItem::End(Some(ClientError::LineTooLong {
                limit: max_line,
            })));
            return;
        }
        let text = String::from_utf8_lossy(&line);
        let l = text.trim_end_matches(['\r', '\n']);
        if l.is_empty() {
            // Dispatch; an event without data (a priming event) is dropped.
            if let Some(d) = data.take().filter(|d| !d.is_empty()) {
                let ev = SseEvent {
                    event: if event.is_empty() {
                        "message".into()
                    } else {
                        std::mem::take(&mut event)
                    },
                    data: d,
                };
                if tx.send(StreamItem::Event(ev)).is_err() {
                    return;
                }
            }
            event.clear();
            continue;
        }
        if l.starts_with(':') {
            continue;
        }
        let (field, value) = match l.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (l, ""),
        };
        match field {
            "event" => event = value.to_owned(),
            "data" => match &mut data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => data = Some(value.to_owned()),
            },
            _ => {}
        }
    }
}

/// `scheme://authority` of an http(s) URL.
fn origin(url: &str) -> Option<&str> {
    let scheme_end = url.find("://")?;
    let scheme = &url[..scheme_end];
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return None;
    }
    let rest = &url[scheme_end + 3..];
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    if end == 0 {
        return None;
    }
    Some(&url[..scheme_end + 3 + end])
}

/// Resolves the `endpoint` event's data against the stream's URL, and
/// refuses an endpoint on another origin.
pub fn resolve_endpoint(stream_url: &str, data: &str) -> Result<String, String> {
    let data = data.trim();
    let base = origin(stream_url).ok_or_else(|| format!("{stream_url}: not an http(s) URL"))?;
    if data.is_empty() {
        return Err("the endpoint event is empty".into());
    }
    if data.chars().any(|c| c.is_control() || c == ' ') {
        return Err("the endpoint holds control characters or spaces".into());
    }
    let url = if data.contains("://") {
        data.to_owned()
    } else if data.starts_with("//") {
        return Err(format!(
            "the endpoint {:?} names another host",
            crate::display::visible_short(data, 200)
        ));
    } else if data.starts_with('/') {
        format!("{base}{data}")
    } else {
        // Relative to the stream URL's folder.
        let path_part = &stream_url[base.len()..];
        let path_only = path_part.split(['?', '#']).next().unwrap_or("");
        let dir = match path_only.rfind('/') {
            Some(i) => &path_only[..=i],
            None => "/",
        };
        format!("{base}{dir}{data}")
    };
    match origin(&url) {
        Some(o) if o.eq_ignore_ascii_case(base) => Ok(url),
        _ => Err(format!(
            "the endpoint {:?} is not on the stream's origin {base}: refused (our POSTs and their headers would go elsewhere)",
            crate::display::visible_short(data, 200)
        )),
    }
}

/// The legacy HTTP+SSE transport.
pub struct SseTransport {
    agent: ureq::Agent,
    endpoint: String,
    headers: Vec<(String, String)>,
    rx: Receiver<StreamItem>,
    queue: VecDeque<Incoming>,
    ended: bool,
}

impl SseTransport {
    /// Opens the stream at `url` and waits for its `endpoint` event.
    pub fn connect(
        url: &str,
        headers: &[(String, String)],
        opts: &ClientOptions,
    ) -> Result<SseTransport, ClientError> {
        let wait = opts.handshake_timeout;
        // No global timeout: the stream stays open for the whole session;
        // waits are bounded by the channel below.
        let stream_agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_connect(Some(wait))
            .timeout_recv_response(Some(wait))
            .http_status_as_error(false)
            .proxy(None)
            .max_redirects(0)
            .build()
            .into();
        let mut req = stream_agent
            .get(url)
            .header("Accept", "text/event-stream")
            .header("Cache-Control", "no-cache");
        for (k, v) in headers {
            req = req.header(k, v);
        }
        let resp = req.call().map_err(|e| ClientError::Protocol {
            method: "GET (HTTP+SSE stream)".into(),
            message: e.to_string(),
        })?;
        let status = resp.status().as_u16();
        let ctype = super::http::content_type(resp.headers());
        if !(200..300).contains(&status) || !ctype.starts_with("text/event-stream") {
            return Err(ClientError::Protocol {
                method: "GET (HTTP+SSE stream)".into(),
                message: format!(
                    "HTTP {status}, content type {:?}: not an SSE stream",
                    crate::display::visible_short(&ctype, 80)
                ),
            });
        }
        let (tx, rx) = mpsc::sync_channel(64);
        let body = resp.into_body().into_reader();
        let (max_bytes, max_line) = (opts.max_bytes, opts.max_line);
        std::thread::Builder::new()
            .name("mcp-sse".into())
            .spawn(move || read_events(body, tx, max_bytes, max_line))
            .map_err(|e| ClientError::Read(e.to_string()))?;
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(opts.request_timeout.max(wait)))
            .http_status_as_error(false)
            .proxy(None)
            .max_redirects(0)
            .build()
            .into();
        let mut t = SseTransport {
            agent,
            endpoint: String::new(),
            headers: headers.to_vec(),
            rx,
            queue: VecDeque::new(),
            ended: false,
        };
        let deadline = Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match t.rx.recv_timeout(left) {
                Ok(StreamItem::Event(ev)) if ev.event == "endpoint" => {
                    t.endpoint =
                        resolve_endpoint(url, &ev.data).map_err(|m| ClientError::Protocol {
                            method: "endpoint event".into(),
                            message: m,
                        })?;
                    return Ok(t);
                }
                // Anything before the endpoint is kept for the session.
                Ok(StreamItem::Event(ev)) => t.queue_event(ev),
                Ok(StreamItem::End(e)) => {
                    return Err(e.unwrap_or(ClientError::Closed {
                        method: "endpoint event".into(),
                    }))
                }
                Err(RecvTimeoutError::Timeout) => {
                    return Err(ClientError::Timeout {
                        method: "endpoint event".into(),
                        secs: wait.as_secs_f64(),
                    })
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(ClientError::Closed {
                        method: "endpoint event".into(),
                    })
                }
            }
        }
    }

    /// The URL messages are posted to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn queue_event(&mut self, ev: SseEvent) {
        if ev.event != "message" {
            // An unknown event type is not a protocol message; keep it visible.
            self.queue
                .push_back(Incoming::Noise(format!("event {}: {}", ev.event, ev.data)));
            return;
        }
        self.queue
            .push_back(match serde_json::from_str::<Value>(&ev.data) {
                Ok(v @ Value::Object(_)) => Incoming::Message(v),
                Ok(Value::Array(items))
                    if !items.is_empty() && items.iter().all(Value::is_object) =>
                {
                    Incoming::Batch(items)
                }
                _ => Incoming::Noise(ev.data),
            });
    }
}

impl Transport for SseTransport {
    fn send(&mut self, msg: &Value) -> Result<(), ClientError> {
        let body =
            serde_json::to_vec(msg).map_err(|e| ClientError::Write(std::io::Error::other(e)))?;
        let mut req = self
            .agent
            .post(&self.endpoint)
            .header("Content-Type", "application/json");
        for (k, v) in &self.headers {
            req = req.header(k, v);
        }
        let mut resp = req
            .send(&body[..])
            .map_err(|e| ClientError::Write(std::io::Error::other(e.to_string())))?;
        let status = resp.status().as_u16();
        if (200..300).contains(&status) {
            return Ok(());
        }
        // A refused POST to a request: answer it with an error so the client
        // does not wait for a response that will never come.
        let Some(id) = msg.get("id").cloned() else {
            return Ok(());
        };
        let mut bytes = Vec::new();
        let _ = resp
            .body_mut()
            .as_reader()
            .take(64 * 1024)
            .read_to_end(&mut bytes);
        let text = String::from_utf8_lossy(&bytes);
        self.queue.push_back(Incoming::Message(json!({"jsonrpc": "2.0", "id": id, "error": {
            "code": -32000 - i64::from(status),
            "message": format!("HTTP {status}: {}", crate::display::visible_short(text.trim(), 200)),
        }})));
        Ok(())
    }

    fn recv(&mut self, deadline: Instant, method: &str) -> Result<Option<Incoming>, ClientError> {
        if let Some(i) = self.queue.pop_front() {
            return Ok(Some(i));
        }
        if self.ended {
            return Err(ClientError::Closed {
                method: method.into(),
            });
        }
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left == Duration::ZERO {
                return Ok(None);
            }
            match self.rx.recv_timeout(left) {
                Ok(StreamItem::Event(ev)) => {
                    self.queue_event(ev);
                    if let Some(i) = self.queue.pop_front() {
                        return Ok(Some(i));
                    }
                }
                Ok(StreamItem::End(e)) => {
                    self.ended = true;
                    return Err(e.unwrap_or(ClientError::Closed {
                        method: method.into(),
                    }));
                }
                Err(RecvTimeoutError::Timeout) => return Ok(None),
                Err(RecvTimeoutError::Disconnected) => {
                    self.ended = true;
                    return Err(ClientError::Closed {
                        method: method.into(),
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(text: &str) -> Vec<SseEvent> {
        let (tx, rx) = mpsc::sync_channel(64);
        read_events(
            std::io::Cursor::new(text.as_bytes().to_vec()),
            tx,
            1 << 20,
            1 << 16,
        );
        rx.try_iter()
            .filter_map(|i| match i {
                StreamItem::Event(e) => Some(e),
                StreamItem::End(_) => None,
            })
            .collect()
    }

    #[test]
    fn sse_parsing() {
        let got = events(
            ": hello\r\n\r\nevent: endpoint\r\ndata: /messages?s=1\r\n\r\nid: 7\ndata:\n\nretry: 5\ndata: {\"a\":\ndata: 1}\n\ndata: tail-without-blank-line",
        );
        assert_eq!(
            got,
            vec![
                SseEvent {
                    event: "endpoint".into(),
                    data: "/messages?s=1".into()
                },
                SseEvent {
                    event: "message".into(),
                    data: "{\"a\":\n1}".into()
                },
            ]
        );
    }

    #[test]
    fn endpoint_resolution() {
        let s = "http://127.0.0.1:8000/mcp/sse?x=1";
        assert_eq!(
            resolve_endpoint(s, "/messages?sessionId=a").as_deref(),
            Ok("http://127.0.0.1:8000/messages?sessionId=a")
        );
        assert_eq!(
            resolve_endpoint(s, "messages?sessionId=a").as_deref(),
            Ok("http://127.0.0.1:8000/mcp/messages?sessionId=a")
        );
        assert_eq!(
            resolve_endpoint(s, "http://127.0.0.1:8000/m").as_deref(),
            Ok("http://127.0.0.1:8000/m")
        );
        for bad in [
            "http://127.0.0.1:8001/m",
            "https://127.0.0.1:8000/m",
            "http://evil.example/m",
            "//evil.example/m",
            "",
            "/a\nb",
            "file:///etc/passwd",
        ] {
            assert!(resolve_endpoint(s, bad).is_err(), "{bad:?}");
        }
    }
}
