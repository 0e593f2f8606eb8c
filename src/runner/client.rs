//! A small MCP client over any byte pipe: enough protocol to ask a server what
//! it offers, and nothing that could lose what it said.
//!
//! Why not the Rust SDK: its `Tool` is a closed struct that drops unknown
//! fields, and its HTTP client silently removes some tools; an auditor must
//! keep every byte the server sent. So results stay `serde_json::Value`
//! (with `preserve_order`, so key order is kept as received).
//!
//! The reader runs on its own thread and hands lines over a channel, so a
//! silent or flooding server can never block us past a deadline: every wait
//! has a timeout, the total bytes read are capped, and so is one line.
//!
//! Era detection (FACTS §2): the modern probe `server/discover` goes first.
//! The legacy `initialize` is written right behind it, without waiting,
//! because some legacy servers ignore unknown requests before initialisation
//! instead of answering with an error: waiting for a probe timeout would cost
//! seconds on every fetch under emulation and misjudge slow starters. A
//! `server/discover` result means the modern era (the `initialize` answer, if
//! any, is ignored and no `notifications/initialized` is sent); an error or no
//! answer to it while `initialize` succeeds means the legacy era.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

/// The newest protocol version of the modern (handshake-free) era.
pub const MODERN_VERSION: &str = "2026-07-28";
/// The newest protocol version that opens with `initialize`.
pub const LEGACY_VERSION: &str = "2025-11-25";
/// Versions of the modern era this client speaks.
const MODERN_KNOWN: &[&str] = &[MODERN_VERSION];

/// How many non-protocol stdout lines are kept, and how much of each.
const MAX_NOISE_LINES: usize = 200;
const MAX_NOISE_LINE_CHARS: usize = 2000;
/// How many server notifications are kept.
const MAX_NOTIFICATIONS: usize = 200;
/// More pages than this for one list is treated as a server that loops.
const MAX_PAGES: usize = 10_000;

/// Limits and identity of one session.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// `clientInfo.name`.
    pub client_name: String,
    /// `clientInfo.version`.
    pub client_version: String,
    /// The legacy protocol version asked for in `initialize`.
    pub legacy_version: String,
    /// How long to wait for the first answer (covers the server's start-up,
    /// which under emulation can take many seconds).
    pub handshake_timeout: Duration,
    /// How long to wait for each later answer.
    pub request_timeout: Duration,
    /// Total bytes read from the server before giving up.
    pub max_bytes: u64,
    /// Longest accepted line (one JSON-RPC message).
    pub max_line: usize,
    /// Which era to speak.
    pub era: EraChoice,
    /// Which HTTP transport to use for a remote server.
    pub http_transport: super::http::HttpChoice,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            client_name: "mcplint".into(),
            client_version: env!("CARGO_PKG_VERSION").into(),
            legacy_version: LEGACY_VERSION.into(),
            handshake_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(30),
            max_bytes: 64 * 1024 * 1024,
            max_line: 32 * 1024 * 1024,
            era: EraChoice::Auto,
            http_transport: super::http::HttpChoice::Auto,
        }
    }
}

/// Which protocol era to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EraChoice {
    /// Probe with `server/discover`, fall back to `initialize`.
    Auto,
    /// Only `server/discover` (2026-07-28).
    Modern,
    /// Only `initialize` (2025-11-25 and earlier).
    Legacy,
}

/// The era a session ended up in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// 2026-07-28: `server/discover`, `_meta` on every request.
    Modern,
    /// `initialize` + `notifications/initialized`.
    Legacy,
}

impl Era {
    /// Lower-case name for provenance.
    pub fn name(self) -> &'static str {
        match self {
            Era::Modern => "modern",
            Era::Legacy => "legacy",
        }
    }
}

/// Why a session failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No answer within the deadline.
    #[error("the server did not answer {method} within {secs:.1} s")]
    Timeout {
        /// The request waited for.
        method: String,
        /// The timeout.
        secs: f64,
    },
    /// The server closed its output.
    #[error("the server closed its output (it exited?) before answering {method}")]
    Closed {
        /// The request waited for.
        method: String,
    },
    /// The byte cap was hit.
    #[error("the server wrote more than {limit} bytes; stopped reading")]
    TooMuchOutput {
        /// The cap.
        limit: u64,
    },
    /// One line was longer than allowed.
    #[error("the server wrote a line longer than {limit} bytes")]
    LineTooLong {
        /// The cap.
        limit: usize,
    },
    /// The server answered with a JSON-RPC error.
    #[error("{method} failed: JSON-RPC error {code}: {message}")]
    Rpc {
        /// The request.
        method: String,
        /// The error code.
        code: i64,
        /// The error message (made visible).
        message: String,
        /// The whole error object.
        error: Box<Value>,
    },
    /// The server's answer had the wrong shape.
    #[error("{method}: {message}")]
    Protocol {
        /// The request.
        method: String,
        /// What was wrong.
        message: String,
    },
    /// Writing to the server failed.
    #[error("could not write to the server: {0}")]
    Write(std::io::Error),
    /// Reading failed.
    #[error("could not read from the server: {0}")]
    Read(String),
}

/// What the reader thread hands over.
#[derive(Debug)]
enum Event {
    Line(Vec<u8>),
    Eof,
    TooMuch,
    LineTooLong,
    Error(String),
}

/// A message source and sink: a stdio pipe or an HTTP endpoint.
pub trait Transport {
    /// Sends one JSON-RPC message.
    fn send(&mut self, msg: &Value) -> Result<(), ClientError>;
    /// The next incoming item, waiting at most until `deadline`.
    /// `Ok(None)` means the deadline passed.
    fn recv(&mut self, deadline: Instant, method: &str) -> Result<Option<Incoming>, ClientError>;
    /// Non-protocol output seen so far (drained).
    fn take_noise(&mut self) -> Vec<String> {
        Vec::new()
    }
}

/// One incoming item.
#[derive(Debug)]
pub enum Incoming {
    /// A JSON-RPC message (object).
    Message(Value),
    /// A JSON-RPC batch (2025-03-26 allowed them).
    Batch(Vec<Value>),
    /// Something that was not a JSON-RPC message.
    Noise(String),
}

/// A newline-delimited JSON-RPC pipe (stdio servers, or QEMU's virtio port).
pub struct LinePipe {
    writer: Box<dyn Write + Send>,
    rx: Receiver<Event>,
    max_bytes: u64,
    max_line: usize,
    finished: bool,
}

impl LinePipe {
    /// Wraps a writer (the server's stdin) and a reader (its stdout). The
    /// reader is moved to its own thread.
    pub fn new(
        writer: Box<dyn Write + Send>,
        reader: Box<dyn Read + Send>,
        max_bytes: u64,
        max_line: usize,
    ) -> Self {
        // A small bound: the reader blocks (and so does the server) when we
        // are slow, instead of buffering a flood in memory.
        let (tx, rx) = mpsc::sync_channel(64);
        std::thread::Builder::new()
            .name("mcp-reader".into())
            .spawn(move || read_lines(reader, tx, max_bytes, max_line))
            .ok();
        LinePipe {
            writer,
            rx,
            max_bytes,
            max_line,
            finished: false,
        }
    }
}

/// The reader thread: splits on `\n`, enforces the caps.
fn read_lines(
    reader: Box<dyn Read + Send>,
    tx: SyncSender<Event>,
    max_bytes: u64,
    max_line: usize,
) {
    let mut r = BufReader::with_capacity(64 * 1024, reader);
    let mut total: u64 = 0;
    let mut line: Vec<u8> = Vec::new();
    loop {
        let buf = match r.fill_buf() {
            Ok([]) => {
                if !line.is_empty() {
                    let _ = tx.send(Event::Line(std::mem::take(&mut line)));
                }
                let _ = tx.send(Event::Eof);
                return;
            }
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let _ = tx.send(Event::Error(e.to_string()));
                return;
            }
        };
        let n = buf.len();
        total += n as u64;
        if total > max_bytes {
            let _ = tx.send(Event::TooMuch);
            return;
        }
        let mut start = 0;
        while let Some(pos) = buf[start..].iter().position(|&b| b == b'\n') {
            line.extend_from_slice(&buf[start..start + pos]);
            start += pos + 1;
            if line.len() > max_line {
                let _ = tx.send(Event::LineTooLong);
                return;
            }
            if tx.send(Event::Line(std::mem::take(&mut line))).is_err() {
                return;
            }
        }
        line.extend_from_slice(&buf[start..]);
        r.consume(n);
        if line.len() > max_line {
            let _ = tx.send(Event::LineTooLong);
            return;
        }
    }
}

impl Transport for LinePipe {
    fn send(&mut self, msg: &Value) -> Result<(), ClientError> {
        // serde_json never writes raw newlines inside a value.
        let mut bytes =
            serde_json::to_vec(msg).map_err(|e| ClientError::Write(std::io::Error::other(e)))?;
        bytes.push(b'\n');
        self.writer.write_all(&bytes).map_err(ClientError::Write)?;
        self.writer.flush().map_err(ClientError::Write)
    }

    fn recv(&mut self, deadline: Instant, method: &str) -> Result<Option<Incoming>, ClientError> {
        if self.finished {
            return Err(ClientError::Closed {
                method: method.into(),
            });
        }
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            let ev = match self.rx.recv_timeout(deadline - now) {
                Ok(ev) => ev,
                Err(RecvTimeoutError::Timeout) => return Ok(None),
                Err(RecvTimeoutError::Disconnected) => Event::Eof,
            };
            match ev {
                Event::Line(bytes) => {
                    let text = String::from_utf8_lossy(&bytes);
                    let trimmed = text.trim();
                    if trimmed.is_empty() {
                        continue;
                    }
                    return Ok(Some(match serde_json::from_str::<Value>(trimmed) {
                        Ok(v @ Value::Object(_)) => Incoming::Message(v),
                        // 2025-03-26 allowed batches; anything else is noise.
                        Ok(Value::Array(items))
                            if !items.is_empty() && items.iter().all(Value::is_object) =>
                        {
                            Incoming::Batch(items)
                        }
                        _ => Incoming::Noise(text.into_owned()),
                    }));
                }
                Event::Eof => {
                    self.finished = true;
                    return Err(ClientError::Closed {
                        method: method.into(),
                    });
                }
                Event::TooMuch => {
                    self.finished = true;
                    return Err(ClientError::TooMuchOutput {
                        limit: self.max_bytes,
                    });
                }
                Event::LineTooLong => {
                    self.finished = true;
                    return Err(ClientError::LineTooLong {
                        limit: self.max_line,
                    });
                }
                Event::Error(e) => {
                    self.finished = true;
                    return Err(ClientError::Read(e));
                }
            }
        }
    }
}

/// How long each step took, in seconds from the session's start.
#[derive(Debug, Clone, Default)]
pub struct Timings {
    /// First answer to the handshake (server start-up included).
    pub handshake_s: f64,
    /// Each list request: (method, seconds it took, pages).
    pub lists: Vec<(String, f64, usize)>,
    /// The whole session.
    pub total_s: f64,
}

/// Everything a server told us.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// Which era was spoken.
    pub era: Era,
    /// The negotiated (legacy) or chosen (modern) protocol version.
    pub protocol_version: Option<String>,
    /// `serverInfo` (legacy) or `_meta["io.modelcontextprotocol/serverInfo"]` (modern).
    pub server_info: Option<Value>,
    /// Declared capabilities.
    pub capabilities: Option<Value>,
    /// Server instructions, if any.
    pub instructions: Option<Value>,
    /// The raw `initialize` or `server/discover` result.
    pub handshake: Value,
    /// Every tool, in order, as sent.
    pub tools: Vec<Value>,
    /// Every prompt.
    pub prompts: Vec<Value>,
    /// Every resource.
    pub resources: Vec<Value>,
    /// Every resource template.
    pub resource_templates: Vec<Value>,
    /// Lists that were not asked for (capability not declared) or failed
    /// softly (-32601): (method, reason).
    pub skipped: Vec<(String, String)>,
    /// Lines on stdout that were not JSON-RPC messages.
    pub stdout_noise: Vec<String>,
    /// How many noise lines there were in all.
    pub stdout_noise_count: usize,
    /// Notifications and requests the server sent us.
    pub server_messages: Vec<Value>,
    /// Timings.
    pub timings: Timings,
}

/// A session with one server.
pub struct Client<T: Transport> {
    t: T,
    opts: ClientOptions,
    next_id: u64,
    start: Instant,
    pending: VecDeque<Value>,
    noise: Vec<String>,
    noise_count: usize,
    server_messages: Vec<Value>,
    modern_version: String,
}

/// The outcome of waiting for one response.
enum Reply {
    Result(Value),
    Error(Value),
}

impl<T: Transport> Client<T> {
    /// A client over a transport.
    pub fn new(t: T, opts: ClientOptions) -> Self {
        Client {
            t,
            opts,
            next_id: 0,
            start: Instant::now(),
            pending: VecDeque::new(),
            noise: Vec::new(),
            noise_count: 0,
            server_messages: Vec::new(),
            modern_version: MODERN_VERSION.into(),
        }
    }

    /// The transport (e.g. to close it).
    pub fn into_transport(self) -> T {
        self.t
    }

    fn fresh_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn modern_meta(&self) -> Value {
        json!({
            "io.modelcontextprotocol/protocolVersion": self.modern_version,
            "io.modelcontextprotocol/clientInfo": {"name": self.opts.client_name, "version": self.opts.client_version},
            "io.modelcontextprotocol/clientCapabilities": {}
        })
    }

    fn send_request(&mut self, method: &str, params: Value) -> Result<u64, ClientError> {
        let id = self.fresh_id();
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.t.send(&msg)?;
        Ok(id)
    }

    fn note_noise(&mut self, line: String) {
        self.noise_count += 1;
        if self.noise.len() < MAX_NOISE_LINES {
            let mut l = line;
            if l.chars().count() > MAX_NOISE_LINE_CHARS {
                l = l.chars().take(MAX_NOISE_LINE_CHARS).collect::<String>() + "…";
            }
            self.noise.push(l);
        }
    }

    /// Reads until one of `ids` is answered; handles everything else that
    /// arrives meanwhile. Returns the id answered and the reply.
    fn wait_any(
        &mut self,
        ids: &[u64],
        method: &str,
        timeout: Duration,
    ) -> Result<Option<(u64, Reply)>, ClientError> {
        let deadline = Instant::now() + timeout;
        loop {
            let msg = match self.pending.pop_front() {
                Some(m) => m,
                None => match self.t.recv(deadline, method)? {
                    None => return Ok(None),
                    Some(Incoming::Noise(line)) => {
                        self.note_noise(line);
                        continue;
                    }
                    Some(Incoming::Message(m)) => m,
                    Some(Incoming::Batch(items)) => {
                        self.pending.extend(items);
                        continue;
                    }
                },
            };
            let has_method = msg.get("method").and_then(Value::as_str).map(str::to_owned);
            match (has_method, msg.get("id")) {
                (Some(m), Some(id)) => {
                    // A request from the server: answer ping, refuse the rest.
                    let id = id.clone();
                    let reply = if m == "ping" {
                        json!({"jsonrpc": "2.0", "id": id, "result": {}})
                    } else {
                        json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "mcplint answers only ping"}})
                    };
                    self.record_server_message(msg);
                    // A server that stopped reading must not fail the session.
                    let _ = self.t.send(&reply);
                }
                (Some(_), None) => self.record_server_message(msg),
                (None, Some(id)) => {
                    let Some(n) = id.as_u64().filter(|n| ids.contains(n)) else {
                        // An answer to nothing we are waiting for (e.g. the
                        // initialize sent behind a successful discover).
                        continue;
                    };
                    if let Some(err) = msg.get("error") {
                        return Ok(Some((n, Reply::Error(err.clone()))));
                    }
                    match msg.get("result") {
                        Some(r) => return Ok(Some((n, Reply::Result(r.clone())))),
                        None => {
                            return Err(ClientError::Protocol {
                                method: method.into(),
                                message: "response without `result` or `error`".into(),
                            })
                        }
                    }
                }
                (None, None) => self.note_noise(msg.to_string()),
            }
        }
    }

    fn record_server_message(&mut self, msg: Value) {
        if self.server_messages.len() < MAX_NOTIFICATIONS {
            self.server_messages.push(msg);
        }
    }

    fn rpc_error(method: &str, err: &Value) -> ClientError {
        let code = err.get("code").and_then(Value::as_i64).unwrap_or(0);
        let message = err.get("message").and_then(Value::as_str).unwrap_or("");
        ClientError::Rpc {
            method: method.into(),
            code,
            message: crate::display::visible_short(message, 300),
            error: Box::new(err.clone()),
        }
    }

    /// One request, waiting for its answer.
    fn request(
        &mut self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, ClientError> {
        let id = self.send_request(method, params)?;
        match self.wait_any(&[id], method, timeout)? {
            None => Err(ClientError::Timeout {
                method: method.into(),
                secs: timeout.as_secs_f64(),
            }),
            Some((_, Reply::Result(r))) => Ok(r),
            Some((_, Reply::Error(e))) => Err(Self::rpc_error(method, &e)),
        }
    }

    fn initialize_params(&self) -> Value {
        json!({
            "protocolVersion": self.opts.legacy_version,
            "capabilities": {},
            "clientInfo": {"name": self.opts.client_name, "version": self.opts.client_version}
        })
    }

    /// The handshake: returns the era and the raw handshake result.
    fn handshake(&mut self) -> Result<(Era, Value), ClientError> {
        let timeout = self.opts.handshake_timeout;
        match self.opts.era {
            EraChoice::Legacy => {
                let r = self.request("initialize", self.initialize_params(), timeout)?;
                Ok((Era::Legacy, r))
            }
            EraChoice::Modern => {
                let r = self.discover(timeout)?;
                Ok((Era::Modern, r))
            }
            EraChoice::Auto => {
                let d =
                    self.send_request("server/discover", json!({"_meta": self.modern_meta()}))?;
                let i = self.send_request("initialize", self.initialize_params())?;
                let deadline = Instant::now() + timeout;
                let mut discover_failed: Option<Value> = None;
                let mut init_result: Option<Result<Value, Value>> = None;
                loop {
                    let left = deadline.saturating_duration_since(Instant::now());
                    let waiting: Vec<u64> =
                        [(d, discover_failed.is_none()), (i, init_result.is_none())]
                            .iter()
                            .filter(|(_, w)| *w)
                            .map(|(id, _)| *id)
                            .collect();
                    match self.wait_any(&waiting, "server/discover or initialize", left)? {
                        None => {
                            return Err(ClientError::Timeout {
                                method: "server/discover or initialize".into(),
                                secs: timeout.as_secs_f64(),
                            })
                        }
                        Some((id, Reply::Result(r))) if id == d => return Ok((Era::Modern, r)),
                        Some((id, Reply::Error(e))) if id == d => {
                            if let Some(v) = self.modern_retry_version(&e) {
                                self.modern_version = v;
                                let r = self.request(
                                    "server/discover",
                                    json!({"_meta": self.modern_meta()}),
                                    timeout,
                                )?;
                                return Ok((Era::Modern, r));
                            }
                            discover_failed = Some(e);
                            if let Some(res) = init_result.take() {
                                return res
                                    .map(|r| (Era::Legacy, r))
                                    .map_err(|e| Self::rpc_error("initialize", &e));
                            }
                        }
                        Some((_, Reply::Result(r))) => {
                            // initialize answered first: the discover probe
                            // was ignored or refused, so this is legacy.
                            return Ok((Era::Legacy, r));
                        }
                        Some((_, Reply::Error(e))) => {
                            if discover_failed.is_some() {
                                return Err(Self::rpc_error("initialize", &e));
                            }
                            init_result = Some(Err(e));
                        }
                    }
                }
            }
        }
    }

    /// A -32022 error naming a supported modern version we know: retry with it.
    fn modern_retry_version(&self, err: &Value) -> Option<String> {
        if err.get("code").and_then(Value::as_i64) != Some(-32022) {
            return None;
        }
        let supported = err.get("data")?.get("supported")?.as_array()?;
        supported
            .iter()
            .filter_map(Value::as_str)
            .find(|v| MODERN_KNOWN.contains(v) && *v != self.modern_version)
            .map(str::to_owned)
    }

    fn discover(&mut self, timeout: Duration) -> Result<Value, ClientError> {
        match self.request(
            "server/discover",
            json!({"_meta": self.modern_meta()}),
            timeout,
        ) {
            Err(ClientError::Rpc { error, .. }) if self.modern_retry_version(&error).is_some() => {
                self.modern_version = self.modern_retry_version(&error).unwrap_or_default();
                self.request(
                    "server/discover",
                    json!({"_meta": self.modern_meta()}),
                    timeout,
                )
            }
            other => other,
        }
    }

    /// One list, following `nextCursor`.
    fn list_all(
        &mut self,
        era: Era,
        method: &str,
        key: &str,
    ) -> Result<(Vec<Value>, usize), ClientError> {
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        let mut seen = std::collections::HashSet::new();
        for page in 0..MAX_PAGES {
            let mut params = Map::new();
            if era == Era::Modern {
                params.insert("_meta".into(), self.modern_meta());
            }
            if let Some(c) = &cursor {
                params.insert("cursor".into(), Value::String(c.clone()));
            }
            let timeout = self.opts.request_timeout;
            let result = self.request(method, Value::Object(params), timeout)?;
            let Some(obj) = result.as_object() else {
                return Err(ClientError::Protocol {
                    method: method.into(),
                    message: "the result is not an object".into(),
                });
            };
            match obj.get(key) {
                Some(Value::Array(list)) => items.extend(list.iter().cloned()),
                Some(_) => {
                    return Err(ClientError::Protocol {
                        method: method.into(),
                        message: format!("`{key}` is not an array"),
                    })
                }
                None => {
                    return Err(ClientError::Protocol {
                        method: method.into(),
                        message: format!("the result has no `{key}`"),
                    })
                }
            }
            cursor = match obj.get("nextCursor") {
                // Legacy SDKs treat an empty cursor as the end; 2026-07-28
                // says it is a valid cursor.
                Some(Value::String(c)) if !c.is_empty() || era == Era::Modern => Some(c.clone()),
                _ => None,
            };
            match &cursor {
                None => return Ok((items, page + 1)),
                Some(c) => {
                    if !seen.insert(c.clone()) {
                        return Err(ClientError::Protocol {
                            method: method.into(),
                            message: format!(
                                "the server repeated cursor {:?}: it would loop",
                                crate::display::visible_short(c, 60)
                            ),
                        });
                    }
                }
            }
        }
        Err(ClientError::Protocol {
            method: method.into(),
            message: format!("more than {MAX_PAGES} pages"),
        })
    }

    /// Runs the whole session: handshake, then every list.
    pub fn fetch(&mut self) -> Result<Manifest, ClientError> {
        self.start = Instant::now();
        let (era, handshake) = self.handshake()?;
        let handshake_s = self.start.elapsed().as_secs_f64();
        let hs = handshake.as_object().cloned().unwrap_or_default();
        let (protocol_version, server_info) = match era {
            Era::Legacy => {
                self.t
                    .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
                (
                    hs.get("protocolVersion")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    hs.get("serverInfo").cloned(),
                )
            }
            Era::Modern => {
                let supported: Vec<&str> = hs
                    .get("supportedVersions")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                if !supported.is_empty() && !supported.contains(&self.modern_version.as_str()) {
                    if let Some(v) = supported.iter().find(|v| MODERN_KNOWN.contains(v)) {
                        self.modern_version = (*v).to_owned();
                    }
                }
                (
                    Some(self.modern_version.clone()),
                    hs.get("_meta")
                        .and_then(|m| m.get("io.modelcontextprotocol/serverInfo"))
                        .cloned()
                        .or_else(|| hs.get("serverInfo").cloned()),
                )
            }
        };
        let capabilities = hs.get("capabilities").cloned();
        let instructions = hs.get("instructions").cloned();
        let declared = |name: &str| {
            capabilities
                .as_ref()
                .and_then(|c| c.get(name))
                .is_some_and(|v| !v.is_null())
        };
        let mut timings = Timings {
            handshake_s,
            ..Timings::default()
        };
        let mut skipped = Vec::new();
        let plan: [(&str, &str, &str, bool); 4] = [
            // tools/list is asked even without the capability: a server
            // that hides its tools from a client that checks is worth seeing.
            ("tools/list", "tools", "tools", true),
            ("prompts/list", "prompts", "prompts", declared("prompts")),
            (
                "resources/list",
                "resources",
                "resources",
                declared("resources"),
            ),
            (
                "resources/templates/list",
                "resourceTemplates",
                "resources",
                declared("resources"),
            ),
        ];
        let mut lists: Vec<Vec<Value>> = Vec::new();
        for (method, key, cap, ask) in plan {
            if !ask {
                skipped.push((
                    method.to_owned(),
                    format!("capability `{cap}` not declared"),
                ));
                lists.push(Vec::new());
                continue;
            }
            let t0 = Instant::now();
            match self.list_all(era, method, key) {
                Ok((items, pages)) => {
                    timings
                        .lists
                        .push((method.to_owned(), t0.elapsed().as_secs_f64(), pages));
                    lists.push(items);
                }
                // Method not found: the server has none.
                Err(ClientError::Rpc { code: -32601, .. }) => {
                    skipped.push((method.to_owned(), "method not found (-32601)".into()));
                    lists.push(Vec::new());
                }
                Err(e) if method != "tools/list" && matches!(e, ClientError::Rpc { .. }) => {
                    skipped.push((method.to_owned(), e.to_string()));
                    lists.push(Vec::new());
                }
                Err(e) => return Err(e),
            }
        }
        timings.total_s = self.start.elapsed().as_secs_f64();
        let mut noise = std::mem::take(&mut self.noise);
        for extra in self.t.take_noise() {
            self.noise_count += 1;
            if noise.len() < MAX_NOISE_LINES {
                noise.push(extra);
            }
        }
        let mut lists = lists.into_iter();
        Ok(Manifest {
            era,
            protocol_version,
            server_info,
            capabilities,
            instructions,
            handshake,
            tools: lists.next().unwrap_or_default(),
            prompts: lists.next().unwrap_or_default(),
            resources: lists.next().unwrap_or_default(),
            resource_templates: lists.next().unwrap_or_default(),
            skipped,
            stdout_noise: noise,
            stdout_noise_count: self.noise_count,
            server_messages: std::mem::take(&mut self.server_messages),
            timings,
        })
    }

    /// Noise seen so far (for error reports when `fetch` failed).
    pub fn noise(&self) -> (&[String], usize) {
        (&self.noise, self.noise_count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn client(script: &str, max_bytes: u64, max_line: usize) -> Client<LinePipe> {
        let pipe = LinePipe::new(
            Box::new(std::io::sink()),
            Box::new(Cursor::new(script.as_bytes().to_vec())),
            max_bytes,
            max_line,
        );
        let opts = ClientOptions {
            handshake_timeout: Duration::from_secs(2),
            request_timeout: Duration::from_secs(2),
            ..ClientOptions::default()
        };
        Client::new(pipe, opts)
    }

    #[test]
    fn batches_noise_and_unknown_ids_are_handled() {
        // ids: 1 discover, 2 initialize, 3 tools/list.
        let script = concat!(
            "starting up\n",
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"nope"}}"#,
            "\n",
            r#"[{"jsonrpc":"2.0","method":"notifications/message","params":{}},{"jsonrpc":"2.0","id":2,"result":{"protocolVersion":"2024-11-05","capabilities":{},"serverInfo":{"name":"b","version":"1"}}}]"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":99,"result":{}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":3,"result":{"tools":[{"name":"t","inputSchema":{"type":"object"},"zz":1,"aa":2}]}}"#,
            "\n",
        );
        let m = client(script, 1 << 20, 1 << 20).fetch().expect("fetch");
        assert_eq!(m.era, Era::Legacy);
        assert_eq!(m.protocol_version.as_deref(), Some("2024-11-05"));
        assert_eq!(m.stdout_noise, ["starting up"]);
        assert_eq!(m.server_messages.len(), 1);
        let keys: Vec<&String> = m.tools[0].as_object().expect("object").keys().collect();
        assert_eq!(keys, ["name", "inputSchema", "zz", "aa"]);
        // No prompts/resources capability: not asked.
        assert_eq!(m.skipped.len(), 3);
    }

    #[test]
    fn line_and_byte_caps() {
        let long = format!("{}\n", "x".repeat(5000));
        let e = client(&long, 1 << 20, 1000).fetch().expect_err("too long");
        assert!(matches!(e, ClientError::LineTooLong { limit: 1000 }), "{e}");
        let many = "y\n".repeat(10_000);
        let e = client(&many, 5000, 1000).fetch().expect_err("too much");
        assert!(
            matches!(e, ClientError::TooMuchOutput { limit: 5000 }),
            "{e}"
        );
    }

    #[test]
    fn repeated_cursor_is_refused() {
        let script = concat!(
            r#"{"jsonrpc":"2.0","id":2,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}}}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":3,"result":{"tools":[],"nextCursor":"a"}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":4,"result":{"tools":[],"nextCursor":"a"}}"#,
            "\n",
        );
        let e = client(script, 1 << 20, 1 << 20).fetch().expect_err("loop");
        assert!(e.to_string().contains("repeated cursor"), "{e}");
    }
}
