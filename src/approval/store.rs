//! Approval files: one pretty, canonically ordered JSON file per server.
//!
//! An approval file is itself a capture manifest (`tools`, `prompts`,
//! `resources`, `resourceTemplates`, `instructions`, `serverInfo`), so every
//! command that reads manifests reads it, and `mcplint diff APPROVAL CURRENT`
//! works on it directly. Its first keys record the review:
//!
//! ```json
//! {
//!   "mcplint_approval": 1,
//!   "server": "weather",
//!   "source": "npm:weather-mcp@1.2.3",
//!   "integrity": null,
//!   "approved_at": "2026-01-02T03:04:05Z",
//!   "approved_by": "Ada <ada@example.com>",
//!   "reason": "reviewed every tool description",
//!   "fingerprints": { "ts": "…64 hex…", "python": "…", "context_ts": "…", "context_python": "…" },
//!   "package": "npm:weather-mcp@1.4.2",   (only for a server.json source: what it resolved to)
//!   "instructions": null,
//!   "prompts": [], "resources": [], "resourceTemplates": [],
//!   "tools": [ … sorted by name, keys sorted … ]
//! }
//! ```
//!
//! Canonical form: lists sorted by name, object keys sorted by code point,
//! duplicate keys resolved as JSON parsers do (the last wins), numbers kept
//! digit for digit, and every control or invisible character written as a
//! `\uXXXX` escape, so a pull request shows hidden text as text. Escapes do
//! not change the decoded value, so both fingerprints of the file equal the
//! fingerprints of what the server sent; [`load`] checks that, and refuses an
//! approval whose content no longer matches its recorded fingerprints.
//!
//! Writes are atomic: a temporary file in the same folder, synced, renamed.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::display::needs_escape;
use crate::fingerprint::{context_digest, server_fingerprint, Scheme};
use crate::manifest::json::{for_each_unit, Document, Kind, NodeId, Unit};
use crate::manifest::load::{load_bytes, LoadError, LoadOptions};
use crate::manifest::{InputKind, Loaded, Server};

/// The format version written in `mcplint_approval`.
pub const FORMAT_VERSION: u64 = 1;

/// The four digests an approval records (64 hex digits each).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Fingerprints {
    /// The article's fingerprint, TypeScript scheme.
    pub ts: String,
    /// The article's fingerprint, Python scheme.
    pub python: String,
    /// mcplint's context digest (prompts, resources, instructions), TypeScript scheme.
    pub context_ts: String,
    /// The context digest, Python scheme.
    pub context_python: String,
}

impl Fingerprints {
    /// The digests of `server` in `doc`.
    pub fn of(doc: &Document, server: &Server) -> Self {
        Fingerprints {
            ts: server_fingerprint(doc, server, Scheme::Ts).full(),
            python: server_fingerprint(doc, server, Scheme::Python).full(),
            context_ts: context_digest(doc, server, Scheme::Ts).full(),
            context_python: context_digest(doc, server, Scheme::Python).full(),
        }
    }

    /// True if `other` (the current manifest's digests) matches: the tool
    /// fingerprint under either scheme and the context digest under the same.
    pub fn matches(&self, other: &Fingerprints) -> bool {
        (self.ts == other.ts && self.context_ts == other.context_ts)
            || (self.python == other.python && self.context_python == other.context_python)
    }
}

/// What an approval records besides the manifest.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ApprovalMeta {
    /// The server's name in `mcplint.toml`.
    pub server: String,
    /// The source pin as written in `mcplint.toml`, if it came from there.
    pub source: Option<String>,
    /// The package artifact's integrity hash, when the registry gave one.
    pub integrity: Option<String>,
    /// The package a launch-spec source (a `server.json`) resolved to when it
    /// was approved (`npm:ID@VERSION`), so a version bump inside the
    /// `server.json` is a moved pin. Written only when set.
    pub package: Option<String>,
    /// When (UTC, RFC 3339).
    pub approved_at: String,
    /// Who.
    pub approved_by: String,
    /// Why.
    pub reason: String,
    /// The digests of the approved manifest.
    pub fingerprints: Fingerprints,
}

/// A loaded approval: the file as a manifest, and its record.
#[derive(Debug, Clone)]
pub struct Approval {
    /// The file, loaded as a capture manifest (spans point into the approval file).
    pub loaded: Loaded,
    /// The record.
    pub meta: ApprovalMeta,
}

impl Approval {
    /// The approved server.
    pub fn server(&self) -> &Server {
        &self.loaded.servers[0]
    }
}

/// The approval file of `server` in `dir`.
pub fn approval_path(dir: &Path, server: &str) -> PathBuf {
    dir.join(format!("{server}.json"))
}

/// Approval files in `dir` (`*.json`, sorted), as `(server name, path)`.
pub fn list(dir: &Path) -> std::io::Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e),
    };
    for e in rd {
        let p = e?.path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with('.') || !name.ends_with(".json") || !p.is_file() {
            continue;
        }
        out.push((name.trim_end_matches(".json").to_string(), p));
    }
    out.sort();
    Ok(out)
}

/// Canonical, pretty JSON writer over a document's nodes.
struct Writer<'d> {
    doc: &'d Document,
    out: String,
}

fn json_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

impl Writer<'_> {
    fn indent(&mut self, level: usize) {
        self.out.push('\n');
        for _ in 0..level {
            self.out.push_str("  ");
        }
    }

    fn u_escape(&mut self, c: char) {
        let mut b = [0u16; 2];
        for u in c.encode_utf16(&mut b) {
            let _ = write!(self.out, "\\u{u:04x}");
        }
    }

    fn char(&mut self, c: char) {
        match c {
            '"' => self.out.push_str("\\\""),
            '\\' => self.out.push_str("\\\\"),
            '\n' => self.out.push_str("\\n"),
            '\r' => self.out.push_str("\\r"),
            '\t' => self.out.push_str("\\t"),
            c if needs_escape(c, false) => self.u_escape(c),
            c => self.out.push(c),
        }
    }

    fn string(&mut self, n: NodeId) {
        let raw = self.doc.str_raw(n).unwrap_or_default();
        self.out.push('"');
        for_each_unit(raw, |u| match u {
            Unit::Text(t) => t.chars().for_each(|c| self.char(c)),
            Unit::Char(c) => self.char(c),
            Unit::LoneSurrogate(s) => {
                let _ = write!(self.out, "\\u{s:04x}");
            }
        });
        self.out.push('"');
    }

    fn value(&mut self, n: NodeId, level: usize) {
        let doc = self.doc;
        match doc.kind(n) {
            Kind::Null | Kind::Bool | Kind::Number => self.out.push_str(doc.raw(n)),
            Kind::String => self.string(n),
            Kind::Array => {
                let items = doc.array(n).unwrap_or_default();
                self.list(items, level);
            }
            Kind::Object => {
                // Last duplicate wins; keys in code point order.
                let mut members: Vec<(String, NodeId, NodeId)> = Vec::new();
                for (k, v) in doc.members(n).into_iter().flatten() {
                    let key = doc.str(k).unwrap_or_default().into_owned();
                    match members.iter_mut().find(|m| m.0 == key) {
                        Some(m) => {
                            m.1 = k;
                            m.2 = v;
                        }
                        None => members.push((key, k, v)),
                    }
                }
                members.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
                if members.is_empty() {
                    self.out.push_str("{}");
                    return;
                }
                self.out.push('{');
                for (i, (_, k, v)) in members.iter().enumerate() {
                    if i > 0 {
                        self.out.push(',');
                    }
                    self.indent(level + 1);
                    self.string(*k);
                    self.out.push_str(": ");
                    self.value(*v, level + 1);
                }
                self.indent(level);
                self.out.push('}');
            }
        }
    }

    fn list(&mut self, items: &[NodeId], level: usize) {
        if items.is_empty() {
            self.out.push_str("[]");
            return;
        }
        self.out.push('[');
        for (i, &c) in items.iter().enumerate() {
            if i > 0 {
                self.out.push(',');
            }
            self.indent(level + 1);
            self.value(c, level + 1);
        }
        self.indent(level);
        self.out.push(']');
    }

    /// Items sorted by their decoded name (stable), as a list.
    fn sorted_list(&mut self, items: Vec<(String, NodeId)>, level: usize) {
        let mut items = items;
        items.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        let nodes: Vec<NodeId> = items.into_iter().map(|(_, n)| n).collect();
        self.list(&nodes, level);
    }
}

/// The text of an approval file for `server` of `doc`.
pub fn render(doc: &Document, server: &Server, meta: &ApprovalMeta) -> String {
    let mut w = Writer {
        doc,
        out: String::with_capacity(doc.text().len() + 1024),
    };
    let opt = |s: &Option<String>| {
        s.as_deref()
            .map(json_string)
            .unwrap_or_else(|| "null".into())
    };
    let _ = write!(
        w.out,
        "{{\n  \"mcplint_approval\": {FORMAT_VERSION},\n  \"server\": {},\n  \"source\": {},\n  \"integrity\": {},\n  \"approved_at\": {},\n  \"approved_by\": {},\n  \"reason\": {},\n  \"fingerprints\": {{\n    \"ts\": \"{}\",\n    \"python\": \"{}\",\n    \"context_ts\": \"{}\",\n    \"context_python\": \"{}\"\n  }},",
        json_string(&meta.server),
        opt(&meta.source),
        opt(&meta.integrity),
        json_string(&meta.approved_at),
        json_string(&meta.approved_by),
        json_string(&meta.reason),
        meta.fingerprints.ts,
        meta.fingerprints.python,
        meta.fingerprints.context_ts,
        meta.fingerprints.context_python,
    );
    if let Some(package) = &meta.package {
        let _ = write!(w.out, "\n  \"package\": {},", json_string(package));
    }
    if let Some(info) = server.server_info {
        w.out.push_str("\n  \"serverInfo\": ");
        w.value(info, 1);
        w.out.push(',');
    }
    w.out.push_str("\n  \"instructions\": ");
    match server.instructions {
        Some(i) => w.string(i),
        None => w.out.push_str("null"),
    }
    // Every list sorted by name, so reordering is never a change in review.
    let lists: [(&str, Vec<(String, NodeId)>); 4] = [
        (
            "prompts",
            server
                .prompts
                .iter()
                .map(|p| (p.name.clone(), p.node))
                .collect(),
        ),
        (
            "resources",
            server
                .resources
                .iter()
                .map(|r| (r.name.clone(), r.node))
                .collect(),
        ),
        (
            "resourceTemplates",
            server
                .resource_templates
                .iter()
                .map(|r| (r.name.clone(), r.node))
                .collect(),
        ),
        (
            "tools",
            server
                .tools
                .iter()
                .map(|t| (t.name.clone(), t.node))
                .collect(),
        ),
    ];
    for (key, items) in lists {
        let _ = write!(w.out, ",\n  \"{key}\": ");
        w.sorted_list(items, 1);
    }
    w.out.push_str("\n}\n");
    w.out
}

/// Why an approval could not be written.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum StoreError {
    /// The file system refused.
    #[error("{path}: cannot write the approval: {message}")]
    #[diagnostic(code(mcplint::approval_write))]
    Io {
        /// The path.
        path: String,
        /// The OS error.
        message: String,
    },
    /// The canonical form did not reproduce the fingerprints (a bug; nothing was written).
    #[error("{path}: the canonical approval does not reproduce the manifest's fingerprints; nothing was written")]
    #[diagnostic(
        code(mcplint::approval_canonical),
        help("please report this with the manifest")
    )]
    Canonical {
        /// The path.
        path: String,
    },
}

/// Writes `text` to `path` atomically: a temporary file in the same folder,
/// synced, then renamed over the target.
pub fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("approval");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let tmp = dir.join(format!(".{name}.tmp-{}-{nanos}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Renders and writes the approval of `server` to `path`, after checking that
/// the rendered file reproduces the recorded fingerprints.
pub fn write(
    path: &Path,
    doc: &Document,
    server: &Server,
    meta: &ApprovalMeta,
) -> Result<(), StoreError> {
    let text = render(doc, server, meta);
    let reparsed = load_text(path, text.clone(), &LoadOptions::default());
    match reparsed {
        Ok(a) if Fingerprints::of(&a.loaded.doc, a.server()) == meta.fingerprints => {}
        _ => {
            return Err(StoreError::Canonical {
                path: path.display().to_string(),
            })
        }
    }
    write_atomic(path, &text).map_err(|e| StoreError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    })
}

/// Loads and checks an approval file.
pub fn load(path: &Path, opts: &LoadOptions) -> Result<Approval, LoadError> {
    let bytes = std::fs::read(path).map_err(|e| LoadError::io(path, &e))?;
    let text = String::from_utf8(bytes).map_err(|e| LoadError::Io {
        path: path.display().to_string(),
        message: format!("not UTF-8: {e}"),
    })?;
    load_text(path, text, opts)
}

fn load_text(path: &Path, text: String, opts: &LoadOptions) -> Result<Approval, LoadError> {
    let mut o = opts.clone();
    o.format = Some(InputKind::Capture);
    let loaded = load_bytes(path, text.into_bytes(), &o)?;
    let doc = loaded.doc.clone();
    let root = doc.root();
    let shape = |node: NodeId, msg: &str| {
        LoadError::shape(
            path,
            doc.text(),
            doc.span(node),
            doc.pointer(node),
            msg.to_string(),
            "here".to_string(),
            Some("approval files are written by `mcplint approve`".to_string()),
        )
    };
    match doc.get(root, "mcplint_approval") {
        Some(v) if doc.number_raw(v) == Some("1") => {}
        Some(v) => return Err(shape(v, "unsupported approval format version")),
        None => {
            return Err(shape(
                root,
                "not an mcplint approval file (no `mcplint_approval`)",
            ))
        }
    }
    let req_str = |key: &str| -> Result<String, LoadError> {
        match doc.get(root, key) {
            Some(v) if doc.kind(v) == Kind::String => {
                Ok(doc.str(v).unwrap_or_default().into_owned())
            }
            Some(v) => Err(shape(v, &format!("`{key}` must be a string"))),
            None => Err(shape(root, &format!("approval without `{key}`"))),
        }
    };
    let opt_str = |key: &str| -> Result<Option<String>, LoadError> {
        match doc.get(root, key) {
            None => Ok(None),
            Some(v) if doc.kind(v) == Kind::Null => Ok(None),
            Some(v) if doc.kind(v) == Kind::String => {
                Ok(Some(doc.str(v).unwrap_or_default().into_owned()))
            }
            Some(v) => Err(shape(v, &format!("`{key}` must be a string or null"))),
        }
    };
    let fp_node = doc
        .get(root, "fingerprints")
        .filter(|&n| doc.kind(n) == Kind::Object)
        .ok_or_else(|| shape(root, "approval without a `fingerprints` object"))?;
    let fp = |key: &str| -> Result<String, LoadError> {
        match doc.get_str(fp_node, key) {
            Some(s) if s.len() == 64 && s.chars().all(|c| c.is_ascii_hexdigit()) => {
                Ok(s.to_ascii_lowercase())
            }
            _ => Err(shape(
                fp_node,
                &format!("`fingerprints.{key}` must be 64 hex digits"),
            )),
        }
    };
    let meta = ApprovalMeta {
        server: req_str("server")?,
        source: opt_str("source")?,
        integrity: opt_str("integrity")?,
        package: opt_str("package")?,
        approved_at: req_str("approved_at")?,
        approved_by: req_str("approved_by")?,
        reason: req_str("reason")?,
        fingerprints: Fingerprints {
            ts: fp("ts")?,
            python: fp("python")?,
            context_ts: fp("context_ts")?,
            context_python: fp("context_python")?,
        },
    };
    if loaded.servers.len() != 1 {
        return Err(shape(root, "an approval holds exactly one server"));
    }
    let now = Fingerprints::of(&doc, &loaded.servers[0]);
    if now != meta.fingerprints {
        return Err(LoadError::shape(
            path,
            doc.text(),
            doc.span(fp_node),
            doc.pointer(fp_node),
            "the approved manifest no longer matches its recorded fingerprints (edited by hand?)",
            "recorded here",
            Some("an approval is only what `mcplint approve` wrote; approve again to record a new review".into()),
        ));
    }
    Ok(Approval { loaded, meta })
}

pub use crate::timefmt::{now_rfc3339, rfc3339};

/// `Name <email>` from `git config`, run in `dir`; `None` without a name.
pub fn git_identity(dir: &Path) -> Option<String> {
    let get = |key: &str| -> Option<String> {
        let out = std::process::Command::new("git")
            .arg("config")
            .arg(key)
            .current_dir(dir)
            .stderr(std::process::Stdio::null())
            .output()
            .ok()?;
        let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
        (out.status.success() && !s.is_empty()).then_some(s)
    };
    let name = get("user.name")?;
    Some(match get("user.email") {
        Some(email) => format!("{name} <{email}>"),
        None => name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::json::ParseOptions;

    fn meta(doc: &Document, server: &Server) -> ApprovalMeta {
        ApprovalMeta {
            server: "s".into(),
            source: Some("file:x.json".into()),
            integrity: None,
            package: None,
            approved_at: rfc3339(0),
            approved_by: "t".into(),
            reason: "r".into(),
            fingerprints: Fingerprints::of(doc, server),
        }
    }

    #[test]
    fn canonical_form_keeps_fingerprints_and_shows_hidden_text() {
        let src = r#"{"tools":[{"name":"z","description":"a\u200bb\u0007 caf\u00e9 1","inputSchema":{"type":"object","b":1.0,"a":1e2,"a":2}},{"description":"x\ud800y","name":"a"}]}"#;
        let l = load_bytes(
            Path::new("t.json"),
            src.as_bytes().to_vec(),
            &LoadOptions::default(),
        )
        .expect("loads");
        let m = meta(&l.doc, &l.servers[0]);
        let text = render(&l.doc, &l.servers[0], &m);
        assert!(text.contains("\\u200b"), "{text}");
        assert!(text.contains("\\u0007"), "{text}");
        assert!(text.contains("café"));
        assert!(
            text.find("\"a\"").expect("a") < text.find("\"z\"").expect("z"),
            "tools sorted"
        );
        let a = load_text(Path::new("a.json"), text, &LoadOptions::default()).expect("reloads");
        assert_eq!(Fingerprints::of(&a.loaded.doc, a.server()), m.fingerprints);
        let _ = ParseOptions::default();
    }

    #[test]
    fn hand_edits_are_refused() {
        let src = r#"{"tools":[{"name":"a","description":"x"}]}"#;
        let l = load_bytes(
            Path::new("t.json"),
            src.as_bytes().to_vec(),
            &LoadOptions::default(),
        )
        .expect("loads");
        let text = render(&l.doc, &l.servers[0], &meta(&l.doc, &l.servers[0]));
        let edited = text.replace("\"x\"", "\"y\"");
        assert!(load_text(Path::new("a.json"), edited, &LoadOptions::default()).is_err());
    }

    #[test]
    fn the_resolved_package_of_a_launch_spec_round_trips() {
        let src = r#"{"tools":[{"name":"a","description":"x"}]}"#;
        let l = load_bytes(
            Path::new("t.json"),
            src.as_bytes().to_vec(),
            &LoadOptions::default(),
        )
        .expect("loads");
        let mut m = meta(&l.doc, &l.servers[0]);
        let plain = render(&l.doc, &l.servers[0], &m);
        assert!(!plain.contains("\"package\""), "written only when set");
        m.package = Some("npm:@acme/weather-mcp@1.4.2".into());
        let text = render(&l.doc, &l.servers[0], &m);
        let a = load_text(Path::new("a.json"), text, &LoadOptions::default()).expect("reloads");
        assert_eq!(
            a.meta.package.as_deref(),
            Some("npm:@acme/weather-mcp@1.4.2")
        );
        let a = load_text(Path::new("a.json"), plain, &LoadOptions::default()).expect("reloads");
        assert_eq!(a.meta.package, None);
    }
}
