//! Client configs that list servers to launch: the `mcpServers` family (Claude
//! Desktop, Cursor, Claude Code's `.mcp.json` and `~/.claude.json`, Windsurf,
//! Gemini CLI), VS Code's `mcp.json` (and the legacy settings.json `"mcp"` key),
//! and Codex's `config.toml`.
//!
//! Each entry becomes a [`Server`] with [`Completeness::LaunchOnly`] and a
//! [`Launch`] whose every value keeps the byte span it came from, so config
//! rules can point at the exact command, argument or header. Shapes follow
//! `../shared/protocol/FACTS.md` §4.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use toml_edit::{ImDocument, Item, Table, TableLike, Value};

use super::{Ctx, LoadError, LoadOptions};
use crate::manifest::json::{Document, Kind, NodeId, ParseOptions, Span};
use crate::manifest::{
    Completeness, EnvVar, InputKind, Launch, Loaded, Server, Spanned, Transport,
};

/// Name/value pairs (`env`, `headers`) with their spans, in source order.
type Pairs = Vec<(Spanned<String>, Spanned<String>)>;

/// A string value with its span, or a shape error naming `what`.
pub(super) fn sstr(ctx: &Ctx<'_>, node: NodeId, what: &str) -> Result<Spanned<String>, LoadError> {
    ctx.expect(node, Kind::String, what)?;
    Ok(Spanned::new(
        ctx.doc.str(node).unwrap_or_default().into_owned(),
        Some(ctx.span(node)),
    ))
}

/// A scalar written as an environment value or header: strings decoded,
/// numbers and booleans as written (clients stringify them).
pub(super) fn sscalar(
    ctx: &Ctx<'_>,
    node: NodeId,
    what: &str,
) -> Result<Spanned<String>, LoadError> {
    match ctx.doc.kind(node) {
        Kind::Number | Kind::Bool => Ok(Spanned::new(
            ctx.doc.raw(node).to_string(),
            Some(ctx.span(node)),
        )),
        _ => sstr(ctx, node, what),
    }
}

/// An optional string member (null counts as absent).
pub(super) fn opt_sstr(
    ctx: &Ctx<'_>,
    obj: NodeId,
    key: &str,
) -> Result<Option<Spanned<String>>, LoadError> {
    match ctx.doc.get(obj, key) {
        None => Ok(None),
        Some(v) if ctx.doc.kind(v) == Kind::Null => Ok(None),
        Some(v) => sstr(ctx, v, &format!("`{key}`")).map(Some),
    }
}

/// An optional array of strings.
pub(super) fn opt_str_array(
    ctx: &Ctx<'_>,
    obj: NodeId,
    key: &str,
) -> Result<Option<Vec<Spanned<String>>>, LoadError> {
    let Some(arr) = ctx.opt(obj, key, Kind::Array)? else {
        return Ok(None);
    };
    let items = ctx.doc.array(arr).unwrap_or_default();
    let mut out = Vec::with_capacity(items.len());
    for &a in items {
        out.push(sscalar(ctx, a, &format!("an element of `{key}`"))?);
    }
    Ok(Some(out))
}

/// An optional boolean member.
pub(super) fn opt_bool(ctx: &Ctx<'_>, obj: NodeId, key: &str) -> Result<Option<bool>, LoadError> {
    match ctx.doc.get(obj, key) {
        None => Ok(None),
        Some(v) if ctx.doc.kind(v) == Kind::Null => Ok(None),
        Some(v) => match ctx.doc.as_bool(v) {
            Some(b) => Ok(Some(b)),
            None => Err(ctx.shape(
                v,
                format!(
                    "`{key}` must be a boolean, found {}",
                    ctx.doc.kind(v).name()
                ),
                "expected true or false",
            )),
        },
    }
}

/// An object of name → scalar pairs (`env`, `headers`), in source order.
fn string_map(ctx: &Ctx<'_>, obj: NodeId, key: &str) -> Result<Pairs, LoadError> {
    let Some(map) = ctx.opt(obj, key, Kind::Object)? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for (k, v) in ctx.doc.members(map).into_iter().flatten() {
        let name = Spanned::new(
            ctx.doc.str(k).unwrap_or_default().into_owned(),
            Some(ctx.span(k)),
        );
        let value = sscalar(
            ctx,
            v,
            &format!(
                "the value of `{key}.{}`",
                crate::display::visible_short(&name.value, 60)
            ),
        )?;
        out.push((name, value));
    }
    Ok(out)
}

/// Which client wrote an `mcpServers` file, from its path, then its fields.
fn client_of(ctx: &Ctx<'_>) -> &'static str {
    let path = ctx.path.to_string_lossy().replace('\\', "/");
    let mut parts: Vec<&str> = path.split('/').collect();
    let name = parts.pop().unwrap_or("");
    // A directory on the way to the file, by exact name.
    let in_dir = |d: &str| parts.contains(&d);
    if name == "claude_desktop_config.json" || in_dir("Claude") {
        return "claude-desktop";
    }
    if in_dir(".cursor") {
        return "cursor";
    }
    if name == ".mcp.json" || name == ".claude.json" || in_dir(".claude") {
        return "claude-code";
    }
    if name == "mcp_config.json" || in_dir(".codeium") || in_dir("windsurf") {
        return "windsurf";
    }
    if in_dir(".gemini") {
        return "gemini";
    }
    // No telling path: look for fields only one client uses.
    let doc = ctx.doc;
    let root = doc.root();
    if doc.get(root, "projects").is_some() {
        return "claude-code";
    }
    let entries: Vec<NodeId> = doc
        .get(root, "mcpServers")
        .and_then(|m| doc.members(m))
        .into_iter()
        .flatten()
        .map(|(_, v)| v)
        .collect();
    let any = |k: &str| entries.iter().any(|&e| doc.get(e, k).is_some());
    if any("serverUrl") {
        "windsurf"
    } else if any("httpUrl") || any("includeTools") || any("excludeTools") || any("trust") {
        "gemini"
    } else {
        "generic"
    }
}

/// Loads an `mcpServers` config: top-level `mcpServers`, and Claude Code's
/// per-project `projects["/abs/path"].mcpServers` (names prefixed with the
/// project path and a colon).
pub fn load_mcp_servers(ctx: &Ctx<'_>) -> Result<Vec<Server>, LoadError> {
    let doc = ctx.doc;
    let root = ctx.expect(doc.root(), Kind::Object, "a client config")?;
    if doc.get(root, "mcpServers").is_none() && doc.get(root, "projects").is_none() {
        // Only reachable with --input-format mcp-servers on another file.
        return Err(ctx.shape(
            root,
            "no `mcpServers` object",
            "expected `mcpServers` in this object",
        ));
    }
    let client = client_of(ctx);
    let mut out = Vec::new();
    if let Some(servers) = ctx.opt(root, "mcpServers", Kind::Object)? {
        for (k, v) in doc.members(servers).into_iter().flatten() {
            let name = doc.str(k).unwrap_or_default().into_owned();
            out.push(entry(ctx, name, v, client, &Inputs::default())?);
        }
    }
    if let Some(projects) = ctx.opt(root, "projects", Kind::Object)? {
        for (pk, pv) in doc.members(projects).into_iter().flatten() {
            // Projects hold much else (history, trust dialogs); only their
            // `mcpServers` matter here, and a project may have none.
            if doc.kind(pv) != Kind::Object {
                continue;
            }
            let Some(servers) = ctx.opt(pv, "mcpServers", Kind::Object)? else {
                continue;
            };
            let project = doc.str(pk).unwrap_or_default();
            for (k, v) in doc.members(servers).into_iter().flatten() {
                let name = format!("{project}:{}", doc.str(k).unwrap_or_default());
                out.push(entry(ctx, name, v, client, &Inputs::default())?);
            }
        }
    }
    Ok(out)
}

/// VS Code `inputs`: ids of inputs marked `password: true`.
#[derive(Default)]
struct Inputs {
    secret: HashSet<String>,
}

impl Inputs {
    /// True if `value` references a password input (`${input:id}`).
    fn references_secret(&self, value: &str) -> bool {
        references(value, "${input:")
            .iter()
            .any(|id| self.secret.contains(*id))
    }
}

/// The names inside every `<prefix>NAME}` in `value`.
pub(super) fn references<'v>(value: &'v str, prefix: &str) -> Vec<&'v str> {
    let mut out = Vec::new();
    let mut rest = value;
    while let Some(i) = rest.find(prefix) {
        let after = &rest[i + prefix.len()..];
        match after.find('}') {
            Some(j) => {
                out.push(&after[..j]);
                rest = &after[j + 1..];
            }
            None => break,
        }
    }
    out
}

/// Loads VS Code's `mcp.json` (`servers` + `inputs`), or a settings.json with
/// the legacy `"mcp": {"servers": …, "inputs": …}` key.
pub fn load_vscode(ctx: &Ctx<'_>) -> Result<Vec<Server>, LoadError> {
    let doc = ctx.doc;
    let root = ctx.expect(doc.root(), Kind::Object, "a VS Code MCP config")?;
    let base = match doc.get(root, "servers") {
        Some(_) => root,
        None => match doc.get(root, "mcp") {
            Some(mcp) => ctx.expect(mcp, Kind::Object, "`mcp`")?,
            None => {
                return Err(ctx.shape(
                    root,
                    "no `servers` object",
                    "expected `servers` in this object",
                ))
            }
        },
    };
    let mut inputs = Inputs::default();
    if let Some(arr) = ctx.opt(base, "inputs", Kind::Array)? {
        for &inp in doc.array(arr).unwrap_or_default() {
            ctx.expect(inp, Kind::Object, "an input")?;
            let Some(id) = doc.get(inp, "id") else {
                return Err(ctx.shape(inp, "an input without an `id`", "this input"));
            };
            let id = sstr(ctx, id, "an input's `id`")?;
            if opt_bool(ctx, inp, "password")? == Some(true) {
                inputs.secret.insert(id.value);
            }
        }
    }
    let Some(servers) = doc.get(base, "servers") else {
        return Err(ctx.shape(
            base,
            "no `servers` object",
            "expected `servers` in this object",
        ));
    };
    ctx.expect(servers, Kind::Object, "`servers`")?;
    let mut out = Vec::new();
    for (k, v) in doc.members(servers).into_iter().flatten() {
        let name = doc.str(k).unwrap_or_default().into_owned();
        out.push(entry(ctx, name, v, "vscode", &inputs)?);
    }
    Ok(out)
}

/// One server entry of any JSON client config.
fn entry(
    ctx: &Ctx<'_>,
    name: String,
    node: NodeId,
    client: &str,
    inputs: &Inputs,
) -> Result<Server, LoadError> {
    ctx.expect(
        node,
        Kind::Object,
        &format!("server `{}`", crate::display::visible_short(&name, 60)),
    )?;
    let ty = opt_sstr(ctx, node, "type")?;
    let command = opt_sstr(ctx, node, "command")?;
    // Windsurf calls it `serverUrl`; Gemini's `httpUrl` is streamable HTTP and
    // its `url` is SSE.
    let url = opt_sstr(ctx, node, "url")?;
    let server_url = opt_sstr(ctx, node, "serverUrl")?;
    let http_url = opt_sstr(ctx, node, "httpUrl")?;
    let headers = string_map(ctx, node, "headers")?;
    let transport = if let Some(command) = command {
        let args = opt_str_array(ctx, node, "args")?.unwrap_or_default();
        Transport::Stdio {
            command,
            args,
            cwd: opt_sstr(ctx, node, "cwd")?,
        }
    } else if let Some(url) = http_url {
        Transport::Http { url, headers }
    } else if let Some(url) = url.or(server_url) {
        let ty = ty.as_ref().map(|t| t.value.as_str());
        let sse = match ty {
            Some("sse") => true,
            Some(_) => false,
            None => client == "gemini",
        };
        if sse {
            Transport::Sse { url, headers }
        } else {
            Transport::Http { url, headers }
        }
    } else {
        return Err(ctx.shape_help(
            node,
            format!(
                "server `{}` has neither `command` nor a URL",
                crate::display::visible_short(&name, 60)
            ),
            "this entry",
            Some(
                "a server entry needs `command` (stdio) or `url`/`serverUrl`/`httpUrl` (remote)"
                    .into(),
            ),
        ));
    };
    let mut launch = Launch::new(client, transport);
    for (k, v) in string_map(ctx, node, "env")? {
        let secret = inputs.references_secret(&v.value);
        launch.env.push(EnvVar {
            name: k,
            value: Some(v),
            secret,
        });
    }
    let disabled = opt_bool(ctx, node, "disabled")?.unwrap_or(false);
    let enabled = opt_bool(ctx, node, "enabled")?.unwrap_or(true);
    launch.disabled = disabled || !enabled;
    launch.trust = opt_bool(ctx, node, "trust")?.unwrap_or(false);
    launch.include_tools = opt_str_array(ctx, node, "includeTools")?;
    launch.exclude_tools = opt_str_array(ctx, node, "excludeTools")?.unwrap_or_default();
    launch.env_file = opt_sstr(ctx, node, "envFile")?;
    let mut server = Server::new(name, Completeness::LaunchOnly);
    server.node = Some(node);
    server.launch = Some(launch);
    Ok(server)
}

// ---------------------------------------------------------------------------
// Codex config.toml

/// A TOML item, a value inside an array or inline table (those hold values,
/// not items), or a table of an array of tables: whatever the shape checks
/// look at, with its kind and span.
#[derive(Clone, Copy)]
enum TNode<'a> {
    Item(&'a Item),
    Value(&'a Value),
    Table(&'a Table),
}

impl<'a> TNode<'a> {
    /// The scalar, array or inline table, if this is one.
    fn value(self) -> Option<&'a Value> {
        match self {
            TNode::Item(i) => i.as_value(),
            TNode::Value(v) => Some(v),
            TNode::Table(_) => None,
        }
    }

    /// The byte span in the text. `None` only for tables with no text of
    /// their own: the implicit parent of a `[mcp_servers.x.env]` header, or a
    /// table made by dotted keys.
    fn span(self) -> Option<Span> {
        let r = match self {
            TNode::Item(i) => i.span(),
            TNode::Value(v) => v.span(),
            TNode::Table(t) => t.span(),
        };
        r.map(|r| Span::new(r.start, r.end))
    }

    /// What this is, for messages ("found an integer").
    fn kind(self) -> &'static str {
        match self {
            TNode::Item(Item::Value(v)) | TNode::Value(v) => match v {
                Value::String(_) => "a string",
                Value::Integer(_) => "an integer",
                Value::Float(_) => "a float",
                Value::Boolean(_) => "a boolean",
                Value::Datetime(_) => "a datetime",
                Value::Array(_) => "an array",
                Value::InlineTable(_) => "a table",
            },
            TNode::Item(Item::Table(_)) | TNode::Table(_) => "a table",
            TNode::Item(Item::ArrayOfTables(_)) => "an array",
            // A parsed document holds no empty items.
            TNode::Item(Item::None) => "nothing",
        }
    }

    /// The table (`[header]`, dotted or inline), if this is one.
    fn table(self) -> Option<&'a dyn TableLike> {
        match self {
            TNode::Item(i) => i.as_table_like(),
            TNode::Value(v) => v.as_inline_table().map(|t| t as &dyn TableLike),
            TNode::Table(t) => Some(t as &dyn TableLike),
        }
    }
}

/// Shape checks over the parsed TOML, with errors pointing into the text.
struct TomlCtx<'a> {
    path: &'a Path,
    text: &'a str,
}

impl TomlCtx<'_> {
    /// A shape error at `span` (the start of the file when the thing has no
    /// text of its own).
    fn err(&self, span: Option<Span>, pointer: &str, message: String, label: &str) -> LoadError {
        LoadError::shape(
            self.path,
            self.text,
            span.unwrap_or(Span::new(0, 0)),
            pointer.to_string(),
            message,
            label,
            None,
        )
    }

    /// The error for `node` not being `expected`.
    fn wrong(&self, node: TNode<'_>, pointer: &str, expected: &str, label: &str) -> LoadError {
        self.err(
            node.span(),
            pointer,
            format!(
                "`{}` must be {expected}, found {}",
                last(pointer),
                node.kind()
            ),
            label,
        )
    }

    fn string(&self, node: TNode<'_>, pointer: &str) -> Result<Spanned<String>, LoadError> {
        match node.value() {
            Some(Value::String(s)) => Ok(Spanned::new(s.value().clone(), node.span())),
            _ => Err(self.wrong(node, pointer, "a string", "expected a string")),
        }
    }

    fn table<'t>(&self, node: TNode<'t>, pointer: &str) -> Result<&'t dyn TableLike, LoadError> {
        node.table()
            .ok_or_else(|| self.wrong(node, pointer, "a table", "expected a table"))
    }

    /// The entries of a table in source order, each key with its span.
    fn entries<'t>(&self, table: &'t dyn TableLike) -> Vec<(Spanned<String>, TNode<'t>)> {
        table
            .iter()
            .filter_map(|(k, _)| table.get_key_value(k))
            .map(|(k, v)| {
                let span = k.span().map(|r| Span::new(r.start, r.end));
                (Spanned::new(k.get().to_string(), span), TNode::Item(v))
            })
            .collect()
    }

    fn strings(&self, node: TNode<'_>, pointer: &str) -> Result<Vec<Spanned<String>>, LoadError> {
        let items: Vec<TNode<'_>> = match node {
            TNode::Item(Item::ArrayOfTables(a)) => a.iter().map(TNode::Table).collect(),
            _ => match node.value() {
                Some(Value::Array(a)) => a.iter().map(TNode::Value).collect(),
                _ => {
                    return Err(self.wrong(
                        node,
                        pointer,
                        "an array of strings",
                        "expected an array",
                    ))
                }
            },
        };
        items
            .into_iter()
            .enumerate()
            .map(|(i, it)| self.string(it, &format!("{pointer}/{i}")))
            .collect()
    }

    fn boolean(&self, node: TNode<'_>, pointer: &str) -> Result<bool, LoadError> {
        match node.value() {
            Some(Value::Boolean(b)) => Ok(*b.value()),
            _ => Err(self.wrong(node, pointer, "a boolean", "expected true or false")),
        }
    }

    /// A table of string → string (`env`, `http_headers`, `env_http_headers`).
    fn string_table(&self, node: TNode<'_>, pointer: &str) -> Result<Pairs, LoadError> {
        let t = self.table(node, pointer)?;
        let mut out = Vec::with_capacity(t.len());
        for (k, val) in self.entries(t) {
            let p = format!("{pointer}/{}", escape_pointer(&k.value));
            // Codex stringifies nothing, but a number or boolean here is
            // clearly meant as text. Datetimes are not.
            let text = match val.value() {
                Some(Value::Integer(i)) => Some(i.value().to_string()),
                Some(Value::Float(f)) => Some(f.value().to_string()),
                Some(Value::Boolean(b)) => Some(b.value().to_string()),
                _ => None,
            };
            let value = match text {
                Some(s) => Spanned::new(s, val.span()),
                None => self.string(val, &p)?,
            };
            out.push((k, value));
        }
        Ok(out)
    }
}

/// The last step of a pointer (a field or key name), made safe to print.
fn last(pointer: &str) -> String {
    let step = pointer.rsplit('/').next().unwrap_or(pointer);
    crate::display::visible_short(&step.replace("~1", "/").replace("~0", "~"), 60)
}

fn escape_pointer(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

/// Loads a Codex `config.toml`: one server per `[mcp_servers.NAME]` table.
///
/// The TOML is parsed with `toml_edit`, which keeps the byte span of every
/// key and value. The text is kept in [`Loaded::source`] and the spans in the
/// launch specs point into it; [`Loaded::doc`] is an empty JSON object (TOML
/// is not JSON).
///
/// The size limit was applied by the caller ([`super::load_bytes`]); TOML has
/// no option of its own here (the parser bounds nesting itself).
pub fn load_codex(path: &Path, bytes: Vec<u8>, _opts: &LoadOptions) -> Result<Loaded, LoadError> {
    let text = match String::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            let at = e.utf8_error().valid_up_to();
            let lossy = String::from_utf8_lossy(e.as_bytes()).into_owned();
            return Err(LoadError::syntax_at(
                path,
                &lossy,
                Span::new(at, at + 1),
                "invalid UTF-8 in TOML".into(),
            ));
        }
    };
    let parsed = match ImDocument::parse(text.as_str()) {
        Ok(d) => d,
        Err(e) => {
            let span = e
                .span()
                .map(|r| Span::new(r.start, r.end))
                .unwrap_or(Span::new(0, 0));
            let msg = e
                .message()
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join("; ");
            return Err(LoadError::syntax_at(
                path,
                &text,
                span,
                format!("invalid TOML: {msg}"),
            ));
        }
    };
    let tc = TomlCtx { path, text: &text };
    let mut servers = Vec::new();
    if let Some(ms) = parsed.as_table().get("mcp_servers") {
        let ms = tc.table(TNode::Item(ms), "/mcp_servers")?;
        for (name, entry) in tc.entries(ms) {
            let p = format!("/mcp_servers/{}", escape_pointer(&name.value));
            servers.push(codex_entry(&tc, &name, entry, &p)?);
        }
    }
    drop(parsed);
    let doc = Document::parse(b"{}".to_vec(), &ParseOptions::default())
        .map_err(|e| LoadError::syntax(path, b"{}", &e))?;
    Ok(Loaded {
        path: path.to_path_buf(),
        doc: Arc::new(doc),
        source: Some(Arc::from(text)),
        kind: InputKind::Codex,
        servers,
    })
}

fn codex_entry(
    tc: &TomlCtx<'_>,
    name: &Spanned<String>,
    entry: TNode<'_>,
    p: &str,
) -> Result<Server, LoadError> {
    let t = tc.table(entry, p)?;
    let field = |k: &str| t.get(k).map(TNode::Item);
    let sub = |k: &str| format!("{p}/{k}");
    let mut env = Vec::new();
    let mut headers = Vec::new();
    let transport = if let Some(cmd) = field("command") {
        let command = tc.string(cmd, &sub("command"))?;
        let args = match field("args") {
            Some(a) => tc.strings(a, &sub("args"))?,
            None => Vec::new(),
        };
        let cwd = field("cwd")
            .map(|c| tc.string(c, &sub("cwd")))
            .transpose()?;
        Transport::Stdio { command, args, cwd }
    } else if let Some(u) = field("url") {
        let url = tc.string(u, &sub("url"))?;
        if let Some(h) = field("http_headers") {
            headers.extend(tc.string_table(h, &sub("http_headers"))?);
        }
        if let Some(h) = field("env_http_headers") {
            // Header name → the environment variable holding its value.
            for (k, var) in tc.string_table(h, &sub("env_http_headers"))? {
                let value = Spanned::new(format!("${{{}}}", var.value), var.span);
                env.push(EnvVar {
                    name: var,
                    value: None,
                    secret: false,
                });
                headers.push((k, value));
            }
        }
        if let Some(b) = field("bearer_token_env_var") {
            // Codex sends `Authorization: Bearer <value of that variable>`.
            let var = tc.string(b, &sub("bearer_token_env_var"))?;
            headers.push((
                Spanned::new("Authorization".to_string(), var.span),
                Spanned::new(format!("Bearer ${{{}}}", var.value), var.span),
            ));
            env.push(EnvVar {
                name: var,
                value: None,
                secret: true,
            });
        }
        Transport::Http { url, headers }
    } else {
        return Err(tc.err(
            name.span,
            p,
            format!(
                "server `{}` has neither `command` nor `url`",
                crate::display::visible_short(&name.value, 60)
            ),
            "this server",
        ));
    };
    let mut launch = Launch::new("codex", transport);
    if let Some(e) = field("env") {
        for (k, v) in tc.string_table(e, &sub("env"))? {
            launch.env.push(EnvVar {
                name: k,
                value: Some(v),
                secret: false,
            });
        }
    }
    if let Some(vars) = field("env_vars") {
        // Variables passed through from Codex's own environment, by name.
        for v in tc.strings(vars, &sub("env_vars"))? {
            launch.env.push(EnvVar {
                name: v,
                value: None,
                secret: false,
            });
        }
    }
    launch.env.extend(env);
    if let Some(e) = field("enabled") {
        launch.disabled = !tc.boolean(e, &sub("enabled"))?;
    }
    if let Some(e) = field("enabled_tools") {
        launch.include_tools = Some(tc.strings(e, &sub("enabled_tools"))?);
    }
    if let Some(e) = field("disabled_tools") {
        launch.exclude_tools = tc.strings(e, &sub("disabled_tools"))?;
    }
    let mut server = Server::new(name.value.clone(), Completeness::LaunchOnly);
    server.launch = Some(launch);
    Ok(server)
}

// ---------------------------------------------------------------------------
// Redaction for display

/// Environment and header names that hold credentials by convention.
const SECRET_NAME_PARTS: &[&str] = &[
    "KEY",
    "TOKEN",
    "SECRET",
    "AUTHORIZATION",
    "PASSWORD",
    "PASSWD",
    "PASS",
    "AUTH",
    "CREDENTIAL",
    "COOKIE",
    "SESSION",
    "PRIVATE",
    "BEARER",
    "PAT",
    "DSN",
];

/// Prefixes of well-known credential formats.
const SECRET_PREFIXES: &[&str] = &[
    "sk-",
    "sk_",
    "pk_",
    "rk_",
    "ghp_",
    "gho_",
    "ghs_",
    "ghu_",
    "github_pat_",
    "glpat-",
    "xoxb-",
    "xoxp-",
    "xoxa-",
    "AKIA",
    "ASIA",
    "AIza",
    "eyJ",
    "Bearer ",
    "Basic ",
    "npm_",
    "pypi-",
    "hf_",
    "shpat_",
    "SG.",
];

/// True if `value` is only references to variables (`${VAR}`, `${input:id}`,
/// `${env:X}`, `$VAR`), which are safe to show.
fn is_reference_only(value: &str) -> bool {
    let mut rest = value.trim();
    // `Bearer ${TOKEN}` shows nothing secret either.
    for scheme in ["Bearer ", "Basic ", "Token ", "token "] {
        if let Some(r) = rest.strip_prefix(scheme) {
            rest = r.trim_start();
        }
    }
    if rest.is_empty() {
        return false;
    }
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("${") {
            let Some(end) = r.find('}') else { return false };
            rest = &r[end + 1..];
        } else if let Some(r) = rest.strip_prefix('$') {
            let n = r
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(r.len());
            if n == 0 {
                return false;
            }
            rest = &r[n..];
        } else {
            return false;
        }
    }
    true
}

fn name_is_secret(name: &str) -> bool {
    let up = name.to_ascii_uppercase();
    up.split(|c: char| !c.is_ascii_alphanumeric()).any(|part| {
        SECRET_NAME_PARTS
            .iter()
            .any(|s| part == *s || (part.ends_with(s) && *s != "PAT" && *s != "PASS"))
    })
}

/// True if a literal value looks like a credential or holds one (a URL with a
/// password, a known token prefix, a long random-looking string).
fn value_looks_secret(value: &str) -> bool {
    let v = value.trim();
    if SECRET_PREFIXES.iter().any(|p| v.starts_with(p)) {
        return true;
    }
    // scheme://user:password@host
    if let Some(i) = v.find("://") {
        let rest = &v[i + 3..];
        let authority = rest.split('/').next().unwrap_or("");
        if authority.contains('@') && authority.split('@').next().is_some_and(|u| u.contains(':')) {
            return true;
        }
    }
    let lower = v.to_ascii_lowercase();
    if [
        "api_key=",
        "apikey=",
        "token=",
        "key=",
        "secret=",
        "password=",
        "access_token=",
    ]
    .iter()
    .any(|k| lower.contains(k))
    {
        return true;
    }
    // A long run of letters and digits mixed is a likely token.
    let long_run = v
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        .any(|w| {
            w.len() >= 24
                && w.chars().any(|c| c.is_ascii_digit())
                && w.chars().any(|c| c.is_ascii_alphabetic())
        });
    long_run
}

/// The text to show for a value: itself, or `<secret>`.
fn shown(value: &Spanned<String>, secret: bool) -> Spanned<String> {
    if is_reference_only(&value.value) || (!secret && !value_looks_secret(&value.value)) {
        value.clone()
    } else {
        Spanned::new("<secret>".to_string(), value.span)
    }
}

/// A copy of `launch` safe to print: values of secret-marked or secret-named
/// environment variables (unless pure `${VAR}` references), arguments that
/// follow a credential flag, and anything that looks like a credential become
/// `<secret>`; so do header values whose name says they
/// carry credentials (`Authorization`, `X-API-Key`, `Cookie`). Names,
/// commands and references stay.
pub fn redact(launch: &Launch) -> Launch {
    let mut out = launch.clone();
    redact_env(&mut out.env);
    match &mut out.transport {
        Transport::Stdio { command, args, .. } => {
            *command = shown(command, false);
            redact_args(args);
        }
        Transport::Http { url, headers } | Transport::Sse { url, headers } => {
            *url = shown(url, false);
            for (k, v) in headers.iter_mut() {
                *v = shown(v, name_is_secret(&k.value));
            }
        }
    }
    for o in &mut out.platform_overrides {
        if let Some(c) = &mut o.command {
            *c = shown(c, false);
        }
        if let Some(a) = &mut o.args {
            redact_args(a);
        }
        redact_env(&mut o.env);
    }
    out
}

fn redact_env(env: &mut [EnvVar]) {
    for e in env {
        if let Some(v) = &e.value {
            let secret = e.secret || name_is_secret(&e.name.value);
            e.value = Some(shown(v, secret));
        }
    }
}

/// Arguments: a value after a credential flag (`--api-key X`, `--header X`),
/// the value of `--api-key=X`, and anything that looks like a credential.
fn redact_args(args: &mut [Spanned<String>]) {
    let mut after_flag = false;
    for a in args.iter_mut() {
        let secret_flag = after_flag;
        after_flag = false;
        if let Some(flag) = a.value.strip_prefix('-') {
            let (flag_name, inline) = match flag.split_once('=') {
                Some((f, v)) => (f, Some(v)),
                None => (flag, None),
            };
            let is_secret_flag =
                name_is_secret(flag_name) || flag_name.trim_start_matches('-') == "header";
            match inline {
                Some(v) if !is_reference_only(v) && (is_secret_flag || value_looks_secret(v)) => {
                    a.value = format!("-{flag_name}=<secret>");
                }
                Some(_) => {}
                None => after_flag = is_secret_flag,
            }
            continue;
        }
        *a = shown(a, secret_flag);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> Spanned<String> {
        Spanned::new(v.to_string(), None)
    }

    #[test]
    fn references_only() {
        assert!(is_reference_only("${API_KEY}"));
        assert!(is_reference_only("${input:token}"));
        assert!(is_reference_only("$HOME"));
        assert!(!is_reference_only("Bearer ${TOKEN}x"));
        assert!(is_reference_only("Bearer ${env:LINEAR_API_KEY}"));
        assert!(!is_reference_only("Bearer abc"));
        assert!(!is_reference_only("ghp_abc"));
        assert!(!is_reference_only(""));
    }

    #[test]
    fn redacts_secrets_keeps_plain_values() {
        let mut l = Launch::new(
            "generic",
            Transport::Stdio {
                command: s("npx"),
                args: vec![
                    s("-y"),
                    s("pkg"),
                    s("--api-key"),
                    s("abc123"),
                    s("--token=xyz"),
                    s("--verbose"),
                    s("--db=postgres://u:pw@h/x"),
                    s("--key=${KEY}"),
                ],
                cwd: None,
            },
        );
        l.env = vec![
            EnvVar {
                name: s("GITHUB_TOKEN"),
                value: Some(s("ghp_realtoken")),
                secret: false,
            },
            EnvVar {
                name: s("LOG_LEVEL"),
                value: Some(s("debug")),
                secret: false,
            },
            EnvVar {
                name: s("X"),
                value: Some(s("plain")),
                secret: true,
            },
            EnvVar {
                name: s("API_KEY"),
                value: Some(s("${API_KEY}")),
                secret: true,
            },
        ];
        let r = redact(&l);
        let vals: Vec<_> = r
            .env
            .iter()
            .map(|e| {
                e.value
                    .as_ref()
                    .map(|v| v.value.clone())
                    .unwrap_or_default()
            })
            .collect();
        assert_eq!(vals, ["<secret>", "debug", "<secret>", "${API_KEY}"]);
        let Transport::Stdio { args, .. } = &r.transport else {
            panic!("stdio expected")
        };
        let args: Vec<_> = args.iter().map(|a| a.value.as_str()).collect();
        assert_eq!(
            args,
            [
                "-y",
                "pkg",
                "--api-key",
                "<secret>",
                "--token=<secret>",
                "--verbose",
                "--db=<secret>",
                "--key=${KEY}"
            ]
        );
    }

    #[test]
    fn secret_looking_values() {
        assert!(value_looks_secret("postgres://u:pw@db/x"));
        assert!(value_looks_secret("https://x.example/mcp?api_key=1"));
        assert!(value_looks_secret("a1b2c3d4e5f6a7b8c9d0e1f2a3b4"));
        assert!(!value_looks_secret("https://example.com/mcp"));
        assert!(!value_looks_secret("/Users/me/Desktop"));
    }
}

#[cfg(test)]
mod toml_tests {
    use super::*;

    #[test]
    fn toml_spans_and_datetimes() {
        let text = "when = 1979-05-27T07:32:00Z\n[mcp_servers.fs]\ncommand = \"npx\"\nargs = [\"-y\", \"x\"]\nenv = { A = \"b\" }\n";
        let l = load_codex(
            Path::new("c.toml"),
            text.as_bytes().to_vec(),
            &LoadOptions::default(),
        )
        .expect("loads");
        assert_eq!(l.servers.len(), 1);
        let launch = l.servers[0].launch.as_ref().expect("launch");
        let Transport::Stdio { command, args, .. } = &launch.transport else {
            panic!("stdio")
        };
        let sp = command.span.expect("span");
        assert_eq!(&text[sp.range()], "\"npx\"");
        assert_eq!(args.len(), 2);
        let name_span = launch.env[0].name.span.expect("span");
        assert_eq!(&text[name_span.range()], "A");
    }

    fn load(text: &str) -> Result<Loaded, LoadError> {
        load_codex(
            Path::new("c.toml"),
            text.as_bytes().to_vec(),
            &LoadOptions::default(),
        )
    }

    #[test]
    fn loaded_text_is_the_toml() {
        let text = "[mcp_servers.fs]\ncommand = 'npx'\n";
        let l = load(text).expect("loads");
        assert_eq!(l.text(), text);
        assert_eq!(l.doc.text(), "{}", "the JSON document stays empty");
        let Transport::Stdio { command, .. } =
            &l.servers[0].launch.as_ref().expect("launch").transport
        else {
            panic!("stdio")
        };
        assert_eq!(&l.text()[command.span.expect("span").range()], "'npx'");
    }

    #[test]
    fn implicit_parent_tables() {
        // `x` exists only through its `env` sub-table header, before its own.
        let text = "[mcp_servers.x.env]\nA = \"b\"\n[mcp_servers.x]\ncommand = \"c\"\n";
        let l = load(text).expect("loads");
        let launch = l.servers[0].launch.as_ref().expect("launch");
        assert_eq!(launch.env[0].name.value, "A");
        let sp = launch.env[0]
            .value
            .as_ref()
            .and_then(|v| v.span)
            .expect("span");
        assert_eq!(&text[sp.range()], "\"b\"");
        // Without its own header the server has no command, and the error
        // points at its name in the sub-table header.
        let e = load("[mcp_servers.x.env]\nA = \"b\"\n").expect_err("no command");
        assert!(e.to_string().contains("c.toml:1:14"), "{e}");
        assert!(e.to_string().contains("neither `command` nor `url`"), "{e}");
    }

    #[test]
    fn scalars_in_tables_become_text() {
        let text =
            "[mcp_servers.a]\ncommand = \"c\"\nenv = { C = 3, D = 0x10, E = 1.5, F = true }\n";
        let l = load(text).expect("loads");
        let env = &l.servers[0].launch.as_ref().expect("launch").env;
        let vals: Vec<(&str, &str)> = env
            .iter()
            .map(|e| {
                (
                    e.name.value.as_str(),
                    e.value.as_ref().map_or("", |v| &v.value),
                )
            })
            .collect();
        assert_eq!(vals, [("C", "3"), ("D", "16"), ("E", "1.5"), ("F", "true")]);
        let sp = env[1].value.as_ref().and_then(|v| v.span).expect("span");
        assert_eq!(&text[sp.range()], "0x10");
    }

    #[test]
    fn shape_and_syntax_errors_point_into_the_text() {
        for (text, at, phrase) in [
            // An array of tables is not an array of strings.
            (
                "[mcp_servers.a]\ncommand = \"c\"\n[[mcp_servers.a.args]]\nx = 1\n",
                "c.toml:3:1",
                "`0` must be a string, found a table",
            ),
            (
                "[mcp_servers.a]\ncommand = \"c\"\nenv = { A = 1979-05-27 }\n",
                "c.toml:3:13",
                "`A` must be a string, found a datetime",
            ),
            (
                "mcp_servers = 3\n",
                "c.toml:1:15",
                "must be a table, found an integer",
            ),
            (
                "a = 1\na = 2\n",
                "c.toml:2:1",
                "invalid TOML: duplicate key `a`",
            ),
        ] {
            let e = load(text).expect_err(text);
            let s = e.to_string();
            assert!(s.contains(at) && s.contains(phrase), "{text:?}: {s}");
        }
    }
}
