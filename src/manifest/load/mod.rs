//! Loaders: from a path (file, directory or glob) to [`Loaded`] manifests.
//!
//! The input kind is recognised from content ([`detect`]); `--input-format`
//! forces one. Each family of inputs has its own file:
//! [`tools`] (tools/list results, JSON-RPC responses and pages, bare arrays,
//! capture files), [`mcpb`] (bundle manifests and `.mcpb` zips),
//! [`server_json`] (the registry's `server.json`) and [`config`] (client configs).

pub mod config;
pub mod error;
pub mod mcpb;
pub mod server_json;
pub mod tools;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use error::LoadError;

use super::json::{Document, Kind, NodeId, ParseOptions, Span};
use super::{InputKind, Loaded, Server};

/// How to load inputs.
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// Parser limits.
    pub parse: ParseOptions,
    /// Force an input kind instead of recognising it.
    pub format: Option<InputKind>,
}

/// Context for the loaders of one file: its path and document, for errors.
pub struct Ctx<'a> {
    /// The path as given.
    pub path: &'a Path,
    /// The document.
    pub doc: &'a Document,
}

impl Ctx<'_> {
    /// A shape error at `node`.
    pub fn shape(
        &self,
        node: NodeId,
        message: impl Into<String>,
        label: impl Into<String>,
    ) -> LoadError {
        self.shape_help(node, message, label, None)
    }

    /// A shape error at `node` with help text.
    pub fn shape_help(
        &self,
        node: NodeId,
        message: impl Into<String>,
        label: impl Into<String>,
        help: Option<String>,
    ) -> LoadError {
        LoadError::shape(
            self.path,
            self.doc.text(),
            self.doc.span(node),
            self.doc.pointer(node),
            message,
            label,
            help,
        )
    }

    /// Requires `node` to be of `kind`, naming the field in the error.
    pub fn expect(&self, node: NodeId, kind: Kind, what: &str) -> Result<NodeId, LoadError> {
        let got = self.doc.kind(node);
        if got == kind {
            Ok(node)
        } else {
            Err(self.shape(
                node,
                format!("{what} must be {}, found {}", kind.name(), got.name()),
                format!("{} here", got.name()),
            ))
        }
    }

    /// The optional member `name` of `obj`, required to be of `kind` when present.
    pub fn opt(&self, obj: NodeId, name: &str, kind: Kind) -> Result<Option<NodeId>, LoadError> {
        match self.doc.get(obj, name) {
            None => Ok(None),
            Some(v) => self.expect(v, kind, &format!("`{name}`")).map(Some),
        }
    }

    /// The span of a node.
    pub fn span(&self, node: NodeId) -> Span {
        self.doc.span(node)
    }
}

/// Files in a directory that mcplint tries to load.
fn is_candidate(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("json" | "mcpb" | "dxt" | "toml")
    )
}

fn has_glob_chars(s: &str) -> bool {
    s.contains(['*', '?', '[', '{'])
}

/// One input path after expansion, and whether it was named explicitly (an
/// explicit file of an unknown kind is an error; one found in a directory is skipped).
#[derive(Clone, Debug)]
pub struct InputPath {
    /// The path.
    pub path: PathBuf,
    /// True if the user named this file itself.
    pub explicit: bool,
}

/// Expands files, directories (recursively, `.json`/`.toml`/`.mcpb` files,
/// sorted) and globs into input paths.
pub fn expand(args: &[String]) -> Result<Vec<InputPath>, LoadError> {
    let mut out = Vec::new();
    for arg in args {
        let p = Path::new(arg);
        if p.is_dir() {
            let before = out.len();
            walk(p, &mut out).map_err(|e| LoadError::io(p, &e))?;
            if out.len() == before {
                return Err(LoadError::NoInput {
                    path: arg.clone(),
                    message: "directory holds no .json, .toml or .mcpb file".into(),
                });
            }
        } else if p.exists() || !has_glob_chars(arg) {
            out.push(InputPath {
                path: p.to_path_buf(),
                explicit: true,
            });
        } else {
            let before = out.len();
            glob(arg, &mut out)?;
            if out.len() == before {
                return Err(LoadError::NoInput {
                    path: arg.clone(),
                    message: "glob matched no file".into(),
                });
            }
        }
    }
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<InputPath>) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        let hidden = p
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with('.') && n != ".mcp.json");
        if p.is_dir() {
            if !hidden {
                walk(&p, out)?;
            }
        } else if is_candidate(&p) {
            out.push(InputPath {
                path: p,
                explicit: false,
            });
        }
    }
    Ok(())
}

fn glob(pattern: &str, out: &mut Vec<InputPath>) -> Result<(), LoadError> {
    let matcher = globset::GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map_err(|e| LoadError::NoInput {
            path: pattern.into(),
            message: format!("invalid glob: {e}"),
        })?
        .compile_matcher();
    // Walk from the longest literal directory prefix of the pattern.
    let mut base = PathBuf::new();
    for comp in Path::new(pattern).components() {
        let s = comp.as_os_str().to_string_lossy();
        if has_glob_chars(&s) {
            break;
        }
        base.push(comp);
    }
    if base.as_os_str().is_empty() {
        base.push(".");
    }
    let mut found = Vec::new();
    let _ = walk_all(&base, &mut found);
    found.sort();
    for p in found {
        let rel = p.strip_prefix("./").unwrap_or(&p);
        if matcher.is_match(rel) || matcher.is_match(&p) {
            out.push(InputPath {
                path: p,
                explicit: false,
            });
        }
    }
    Ok(())
}

fn walk_all(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    if dir.is_file() {
        out.push(dir.to_path_buf());
        return Ok(());
    }
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            walk_all(&p, out)?;
        } else {
            out.push(p);
        }
    }
    Ok(())
}

/// Reads and loads one file.
pub fn load_file(path: &Path, opts: &LoadOptions) -> Result<Loaded, LoadError> {
    let meta = std::fs::metadata(path).map_err(|e| LoadError::io(path, &e))?;
    if meta.is_dir() {
        return Err(LoadError::NoInput {
            path: path.display().to_string(),
            message: "is a directory".into(),
        });
    }
    // Check the size before reading, so a huge file is refused without being
    // read into memory.
    if meta.len() > opts.parse.max_size as u64 {
        let err = super::json::ParseError {
            kind: super::json::ErrorKind::TooLarge {
                size: meta.len() as usize,
                limit: opts.parse.max_size,
            },
            span: Span::new(0, 0),
        };
        return Err(LoadError::syntax(path, b"", &err));
    }
    let bytes = std::fs::read(path).map_err(|e| LoadError::io(path, &e))?;
    load_bytes(path, bytes, opts)
}

/// True for file names whose format is JSONC by definition (comments and
/// trailing commas allowed): VS Code's and Gemini CLI's settings.
fn is_jsonc_name(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let parent = path
        .parent()
        .and_then(|p| p.file_name())
        .and_then(|n| n.to_str())
        .unwrap_or("");
    name == "settings.json" || (name == "mcp.json" && (parent == ".vscode" || parent == "User"))
}

/// Loads a file's bytes, recognising its kind from content.
pub fn load_bytes(path: &Path, bytes: Vec<u8>, opts: &LoadOptions) -> Result<Loaded, LoadError> {
    if bytes.len() > opts.parse.max_size {
        let err = super::json::ParseError {
            kind: super::json::ErrorKind::TooLarge {
                size: bytes.len(),
                limit: opts.parse.max_size,
            },
            span: Span::new(0, 0),
        };
        return Err(LoadError::syntax(path, b"", &err));
    }
    let forced = opts.format;
    if forced == Some(InputKind::McpbBundle)
        || (forced.is_none() && bytes.starts_with(b"PK\x03\x04"))
    {
        return mcpb::load_bundle(path, &bytes, opts);
    }
    let is_toml = path.extension().and_then(|e| e.to_str()) == Some("toml");
    if forced == Some(InputKind::Codex) || (forced.is_none() && is_toml) {
        return config::load_codex(path, bytes, opts);
    }
    let mut popts = opts.parse.clone();
    popts.jsonc = popts.jsonc || is_jsonc_name(path);
    let doc = match Document::parse_keep(bytes, &popts) {
        Ok(d) => d,
        Err((e, bytes)) => return Err(LoadError::syntax(path, &bytes, &e)),
    };
    load_document(path, doc, opts)
}

/// Loads a parsed document, recognising its kind unless forced.
pub fn load_document(path: &Path, doc: Document, opts: &LoadOptions) -> Result<Loaded, LoadError> {
    let kind = match opts.format {
        Some(k) => k,
        None => detect(&doc).ok_or_else(|| LoadError::UnknownFormat {
            path: path.display().to_string(),
            message: describe_root(&doc),
        })?,
    };
    let ctx = Ctx { path, doc: &doc };
    let servers: Vec<Server> = match kind {
        InputKind::ToolsList
        | InputKind::Capture
        | InputKind::JsonRpc
        | InputKind::JsonRpcPages
        | InputKind::ToolArray => tools::load(&ctx, kind)?,
        InputKind::Mcpb => mcpb::load_manifest(&ctx)?,
        InputKind::ServerJson => server_json::load(&ctx)?,
        InputKind::McpServers => config::load_mcp_servers(&ctx)?,
        InputKind::Vscode => config::load_vscode(&ctx)?,
        InputKind::McpbBundle | InputKind::Codex => {
            return Err(LoadError::UnknownFormat {
                path: path.display().to_string(),
                message: format!("{} input is not JSON", kind.name()),
            })
        }
    };
    Ok(Loaded {
        path: path.to_path_buf(),
        doc: Arc::new(doc),
        source: None,
        kind,
        servers,
    })
}

/// A short description of a document's root, for "unknown format" errors.
fn describe_root(doc: &Document) -> String {
    let root = doc.root();
    match doc.members(root) {
        Some(members) => {
            let keys: Vec<String> = members
                .take(8)
                .map(|(k, _)| crate::display::visible_short(&doc.str(k).unwrap_or_default(), 40))
                .collect();
            format!("an object with keys {}", keys.join(", "))
        }
        None => format!("the top-level value is {}", doc.kind(root).name()),
    }
}

/// Recognises the kind of a JSON document from its content.
pub fn detect(doc: &Document) -> Option<InputKind> {
    let root = doc.root();
    match doc.kind(root) {
        Kind::Array => {
            let Some(first) = doc.children(root).next() else {
                return Some(InputKind::ToolArray);
            };
            if doc.kind(first) != Kind::Object {
                return None;
            }
            if doc.get(first, "jsonrpc").is_some() || doc.get(first, "result").is_some() {
                Some(InputKind::JsonRpcPages)
            } else if doc.get(first, "name").is_some() {
                Some(InputKind::ToolArray)
            } else {
                None
            }
        }
        Kind::Object => {
            let has = |k: &str| doc.get(root, k).is_some();
            if has("jsonrpc") || (has("result") && has("id")) || (has("error") && has("id")) {
                return Some(InputKind::JsonRpc);
            }
            if has("manifest_version") || has("dxt_version") {
                return Some(InputKind::Mcpb);
            }
            // A `tools` array means a tool list; Gemini CLI settings have a
            // `tools` object of their own next to `mcpServers`.
            let tools_array = doc
                .get(root, "tools")
                .is_some_and(|t| doc.kind(t) == Kind::Array);
            if tools_array {
                let extra = [
                    "prompts",
                    "resources",
                    "resourceTemplates",
                    "instructions",
                    "serverInfo",
                    "protocolVersion",
                    "capture",
                    "server",
                ];
                return Some(if extra.iter().any(|k| has(k)) {
                    InputKind::Capture
                } else {
                    InputKind::ToolsList
                });
            }
            // `projects` alone is too common a key: it must hold Claude Code's
            // per-project `mcpServers`.
            let claude_projects = doc
                .get(root, "projects")
                .and_then(|p| doc.members(p))
                .is_some_and(|mut m| m.any(|(_, v)| doc.get(v, "mcpServers").is_some()));
            if has("mcpServers") || claude_projects {
                return Some(InputKind::McpServers);
            }
            if has("servers")
                && doc
                    .get(root, "servers")
                    .is_some_and(|s| doc.kind(s) == Kind::Object)
            {
                return Some(InputKind::Vscode);
            }
            if let Some(mcp) = doc.get(root, "mcp") {
                if doc.get(mcp, "servers").is_some() {
                    return Some(InputKind::Vscode);
                }
            }
            let schema_is_server = doc
                .get_str(root, "$schema")
                .is_some_and(|s| s.contains("server.schema.json"));
            // The registry API wraps a server.json as `{"server": {…}, "_meta": {…}}`.
            let api_wrapped = doc.get(root, "server").is_some_and(|s| {
                doc.get(s, "packages").is_some() || doc.get(s, "remotes").is_some()
            });
            if schema_is_server
                || api_wrapped
                || ((has("packages") || has("remotes")) && has("name"))
            {
                return Some(InputKind::ServerJson);
            }
            if has("tools") {
                // Not an array, but meant as a tool list (nothing else above
                // claimed the file): let the loader say what is wrong with it.
                return Some(InputKind::ToolsList);
            }
            None
        }
        _ => None,
    }
}

/// Loads every path (files, directories, globs). Unknown files found inside a
/// directory or by a glob are skipped with a warning on stderr; errors in
/// files that are recognised, or named explicitly, are returned.
pub fn load_all(args: &[String], opts: &LoadOptions) -> Result<Vec<Loaded>, LoadError> {
    let mut out = Vec::new();
    for input in expand(args)? {
        match load_file(&input.path, opts) {
            Ok(l) => out.push(l),
            Err(LoadError::UnknownFormat { path, message }) if !input.explicit => {
                eprintln!(
                    "mcplint: skipping {}: not a manifest ({})",
                    crate::display::visible(&path),
                    crate::display::visible(&message)
                );
            }
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}
