//! MCPB bundles (formerly DXT): a bundle's `manifest.json` (manifest_version
//! 0.1–0.4, or the deprecated `dxt_version`), and `.mcpb`/`.dxt` zip files with
//! that manifest at their root.
//!
//! A manifest lists tools statically as `{name, description?}` without
//! schemas, so its server is [`Completeness::Partial`]. When the Windows
//! packaging metadata `_meta["com.microsoft.windows"].static_responses` holds
//! captured `initialize` and `tools/list` results, those are what the server
//! returns, with full schemas, and the server is [`Completeness::Complete`].
//! The launch recipe `server.mcp_config` becomes a [`Launch`] with client `mcpb`.

use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::config::{opt_bool, opt_sstr, references, sscalar, sstr};
use super::{tools, Ctx, LoadError, LoadOptions};
use crate::manifest::json::{Document, Kind, NodeId};
use crate::manifest::{
    Completeness, EnvVar, InputKind, Launch, Loaded, PackageRef, PlatformOverride, Server, Spanned,
    Transport,
};

/// The key of the Windows packaging metadata in a manifest's `_meta`.
const WINDOWS_META: &str = "com.microsoft.windows";

/// Loads an MCPB `manifest.json`.
pub fn load_manifest(ctx: &Ctx<'_>) -> Result<Vec<Server>, LoadError> {
    let doc = ctx.doc;
    let root = ctx.expect(doc.root(), Kind::Object, "an MCPB manifest")?;
    for key in ["manifest_version", "dxt_version"] {
        if let Some(v) = doc.get(root, key) {
            ctx.expect(v, Kind::String, &format!("`{key}`"))?;
        }
    }
    let name = opt_sstr(ctx, root, "name")?;
    let version = opt_sstr(ctx, root, "version")?;
    let server_name = name
        .as_ref()
        .map(|n| n.value.clone())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| stem(ctx.path));
    let mut server = Server::new(server_name, Completeness::Partial);
    server.node = Some(root);

    // Static lists from the manifest itself.
    if let Some(arr) = ctx.opt(root, "tools", Kind::Array)? {
        server.tools_node = Some(arr);
        server.tools = tools::tools_of(ctx, arr)?;
    }
    if let Some(arr) = ctx.opt(root, "prompts", Kind::Array)? {
        for &p in doc.array(arr).unwrap_or_default() {
            let prompt = tools::prompt(ctx, p)?;
            if let Some(t) = doc.get(p, "text") {
                ctx.expect(t, Kind::String, "a prompt's `text`")?;
            }
            server.prompts.push(prompt);
        }
    }
    for key in ["tools_generated", "prompts_generated"] {
        opt_bool(ctx, root, key)?;
    }

    // Captured responses, when the bundle carries them.
    if let Some(responses) = static_responses(ctx, root)? {
        apply_static_responses(ctx, responses, &mut server)?;
    }

    server.launch = launch(ctx, root, name, version)?;
    Ok(vec![server])
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("bundle")
        .to_string()
}

/// `_meta["com.microsoft.windows"].static_responses`, if present.
fn static_responses(ctx: &Ctx<'_>, root: NodeId) -> Result<Option<NodeId>, LoadError> {
    let Some(meta) = ctx.opt(root, "_meta", Kind::Object)? else {
        return Ok(None);
    };
    let Some(win) = ctx.opt(meta, WINDOWS_META, Kind::Object)? else {
        return Ok(None);
    };
    ctx.opt(win, "static_responses", Kind::Object)
}

/// A captured response: the result object itself, or a JSON-RPC envelope
/// around it.
fn result_of(ctx: &Ctx<'_>, node: NodeId, what: &str) -> Result<NodeId, LoadError> {
    ctx.expect(node, Kind::Object, what)?;
    match ctx.doc.get(node, "result") {
        Some(r) if ctx.doc.get(node, "jsonrpc").is_some() || ctx.doc.get(node, "id").is_some() => {
            ctx.expect(r, Kind::Object, "`result`")
        }
        _ => Ok(node),
    }
}

/// Replaces the static lists with the captured results: tools (with schemas),
/// and instructions, serverInfo and protocol version from `initialize`.
fn apply_static_responses(
    ctx: &Ctx<'_>,
    responses: NodeId,
    server: &mut Server,
) -> Result<(), LoadError> {
    let doc = ctx.doc;
    let mut have_tools = false;
    if let Some(list) = doc.get(responses, "tools/list") {
        let result = result_of(ctx, list, "the static `tools/list` response")?;
        let Some(arr) = doc.get(result, "tools") else {
            return Err(ctx.shape(
                result,
                "static `tools/list` response without `tools`",
                "no `tools` here",
            ));
        };
        ctx.expect(arr, Kind::Array, "`tools`")?;
        server.tools_node = Some(arr);
        server.tools = tools::tools_of(ctx, arr)?;
        have_tools = true;
    }
    if let Some(list) = doc.get(responses, "prompts/list") {
        let result = result_of(ctx, list, "the static `prompts/list` response")?;
        if let Some(arr) = ctx.opt(result, "prompts", Kind::Array)? {
            server.prompts.clear();
            for &p in doc.array(arr).unwrap_or_default() {
                server.prompts.push(tools::prompt(ctx, p)?);
            }
        }
    }
    for (method, key, uri) in [
        ("resources/list", "resources", "uri"),
        (
            "resources/templates/list",
            "resourceTemplates",
            "uriTemplate",
        ),
    ] {
        if let Some(list) = doc.get(responses, method) {
            let result = result_of(ctx, list, &format!("the static `{method}` response"))?;
            if let Some(arr) = ctx.opt(result, key, Kind::Array)? {
                for &r in doc.array(arr).unwrap_or_default() {
                    let res = tools::resource(ctx, r, uri)?;
                    if key == "resources" {
                        server.resources.push(res);
                    } else {
                        server.resource_templates.push(res);
                    }
                }
            }
        }
    }
    let mut have_init = false;
    if let Some(init) = doc.get(responses, "initialize") {
        let result = result_of(ctx, init, "the static `initialize` response")?;
        if let Some(i) = doc.get(result, "instructions") {
            if doc.kind(i) != Kind::Null {
                server.instructions = Some(ctx.expect(i, Kind::String, "`instructions`")?);
            }
        }
        if let Some(i) = ctx.opt(result, "serverInfo", Kind::Object)? {
            server.server_info = Some(i);
        }
        if let Some(v) = ctx.opt(result, "protocolVersion", Kind::String)? {
            server.protocol_version = Some(v);
        }
        have_init = true;
    }
    // Complete only when the capture is the whole handshake: the tool list
    // and the initialize result (which carries the instructions).
    if have_tools && have_init {
        server.completeness = Completeness::Complete;
    }
    Ok(())
}

/// The launch recipe: `server{type, entry_point, mcp_config{command, args, env}}`.
fn launch(
    ctx: &Ctx<'_>,
    root: NodeId,
    name: Option<Spanned<String>>,
    version: Option<Spanned<String>>,
) -> Result<Option<Launch>, LoadError> {
    let doc = ctx.doc;
    let Some(srv) = ctx.opt(root, "server", Kind::Object)? else {
        return Ok(None);
    };
    let ty = opt_sstr(ctx, srv, "type")?;
    let entry_point = opt_sstr(ctx, srv, "entry_point")?;
    let sensitive = sensitive_user_config(ctx, root)?;
    let mut overrides = None;
    let (command, args, env_node) = match ctx.opt(srv, "mcp_config", Kind::Object)? {
        Some(cfg) => {
            let Some(cmd) = doc.get(cfg, "command") else {
                return Err(ctx.shape(cfg, "`mcp_config` without `command`", "no `command` here"));
            };
            let command = sstr(ctx, cmd, "`mcp_config.command`")?;
            let mut args = Vec::new();
            if let Some(a) = ctx.opt(cfg, "args", Kind::Array)? {
                for &n in doc.array(a).unwrap_or_default() {
                    args.push(sstr(ctx, n, "an element of `mcp_config.args`")?);
                }
            }
            overrides = ctx.opt(cfg, "platform_overrides", Kind::Object)?;
            (command, args, ctx.opt(cfg, "env", Kind::Object)?)
        }
        None => {
            // `mcp_config` is optional only for `uv` servers (0.4), which the
            // host runs as `uv run <entry_point>`; for others, run the entry
            // point with the runtime its type names.
            let Some(entry) = entry_point else {
                return Err(ctx.shape(
                    srv,
                    "`server` has neither `mcp_config` nor `entry_point`",
                    "this server",
                ));
            };
            let runtime = match ty.as_ref().map(|t| t.value.as_str()) {
                Some("uv") => Some(vec!["uv", "run"]),
                Some("node") => Some(vec!["node"]),
                Some("python") => Some(vec!["python"]),
                _ => None,
            };
            match runtime {
                Some(words) => {
                    let mut it = words
                        .into_iter()
                        .map(|w| Spanned::new(w.to_string(), ty.as_ref().and_then(|t| t.span)));
                    let command = it
                        .next()
                        .unwrap_or_else(|| Spanned::new(String::new(), None));
                    let mut args: Vec<_> = it.collect();
                    args.push(entry);
                    (command, args, None)
                }
                None => (entry, Vec::new(), None),
            }
        }
    };
    let mut launch = Launch::new(
        "mcpb",
        Transport::Stdio {
            command,
            args,
            cwd: None,
        },
    );
    launch.env = env_vars(ctx, env_node, &sensitive)?;
    for (k, o) in doc.members_opt(overrides) {
        ctx.expect(o, Kind::Object, "a platform override")?;
        let args = match ctx.opt(o, "args", Kind::Array)? {
            Some(a) => Some(
                doc.array(a)
                    .unwrap_or_default()
                    .iter()
                    .map(|&n| sstr(ctx, n, "an element of a platform override's `args`"))
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            None => None,
        };
        launch.platform_overrides.push(PlatformOverride {
            platform: Spanned::new(
                doc.str(k).unwrap_or_default().into_owned(),
                Some(ctx.span(k)),
            ),
            command: opt_sstr(ctx, o, "command")?,
            args,
            env: env_vars(ctx, ctx.opt(o, "env", Kind::Object)?, &sensitive)?,
        });
    }
    if let Some(name) = name {
        launch.package = Some(PackageRef {
            registry: "mcpb".into(),
            identifier: name,
            version,
            sha256: None,
        });
    }
    Ok(Some(launch))
}

/// An `env` object's variables; those referencing a sensitive `user_config`
/// entry (`${user_config.KEY}`) are secret.
fn env_vars(
    ctx: &Ctx<'_>,
    env: Option<NodeId>,
    sensitive: &HashSet<String>,
) -> Result<Vec<EnvVar>, LoadError> {
    let doc = ctx.doc;
    let mut out = Vec::new();
    for (k, v) in doc.members_opt(env) {
        let value = sscalar(ctx, v, "an `env` value")?;
        let secret = references(&value.value, "${user_config.")
            .iter()
            .any(|key| sensitive.contains(*key));
        out.push(EnvVar {
            name: Spanned::new(
                doc.str(k).unwrap_or_default().into_owned(),
                Some(ctx.span(k)),
            ),
            value: Some(value),
            secret,
        });
    }
    Ok(out)
}

/// Keys of `user_config` entries marked `sensitive: true`.
fn sensitive_user_config(ctx: &Ctx<'_>, root: NodeId) -> Result<HashSet<String>, LoadError> {
    let doc = ctx.doc;
    let mut out = HashSet::new();
    if let Some(uc) = ctx.opt(root, "user_config", Kind::Object)? {
        for (k, v) in doc.members(uc).into_iter().flatten() {
            ctx.expect(v, Kind::Object, "a `user_config` entry")?;
            if opt_bool(ctx, v, "sensitive")? == Some(true) {
                out.insert(doc.str(k).unwrap_or_default().into_owned());
            }
        }
    }
    Ok(out)
}

/// Members of an optional object node.
trait MembersOpt {
    fn members_opt(&self, node: Option<NodeId>) -> Vec<(NodeId, NodeId)>;
}

impl MembersOpt for Document {
    fn members_opt(&self, node: Option<NodeId>) -> Vec<(NodeId, NodeId)> {
        node.and_then(|n| self.members(n))
            .map(|m| m.collect())
            .unwrap_or_default()
    }
}

/// The name of the manifest inside a bundle.
const MANIFEST: &str = "manifest.json";

/// The path errors and results name for the manifest inside `bundle`:
/// `bundle.mcpb!manifest.json`.
pub fn inner_path(bundle: &Path) -> PathBuf {
    PathBuf::from(format!("{}!{MANIFEST}", bundle.display()))
}

fn bundle_error(path: &Path, message: String) -> LoadError {
    LoadError::Io {
        path: path.display().to_string(),
        message,
    }
}

/// How many central directory entries of the zip in `bytes` are named `name`
/// (walked from `start`; stops at the first thing that is not an entry).
fn central_directory_count(bytes: &[u8], start: u64, name: &str) -> usize {
    let u16_at = |i: usize| {
        bytes
            .get(i..i + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize)
    };
    let mut at = usize::try_from(start).unwrap_or(usize::MAX);
    let mut count = 0;
    while bytes.get(at..at + 4) == Some(b"PK\x01\x02") {
        let (Some(n), Some(m), Some(k)) = (u16_at(at + 28), u16_at(at + 30), u16_at(at + 32))
        else {
            break;
        };
        if bytes.get(at + 46..at + 46 + n) == Some(name.as_bytes()) {
            count += 1;
        }
        at += 46 + n + m + k;
    }
    count
}

/// Loads a `.mcpb` bundle: reads `manifest.json` at the zip's root, refusing
/// an entry larger than the parse size limit (by its declared size, and by the
/// bytes actually inflated, so a lying header cannot smuggle a zip bomb).
pub fn load_bundle(path: &Path, bytes: &[u8], opts: &LoadOptions) -> Result<Loaded, LoadError> {
    let max = opts.parse.max_size;
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(bytes))
        .map_err(|e| bundle_error(path, format!("not a valid MCPB bundle (zip archive): {e}")))?;
    let inner = inner_path(path);
    let copies = central_directory_count(bytes, archive.central_directory_start(), MANIFEST);
    if copies > 1 {
        // The zip crate keeps the last entry of a name; other unzippers keep
        // the first. Which manifest a host would run is then anyone's guess.
        return Err(bundle_error(
            path,
            format!("the bundle holds {copies} entries named {MANIFEST}; readers disagree on which one counts"),
        ));
    }
    let text = {
        let mut entry = match archive.by_name(MANIFEST) {
            Ok(e) => e,
            Err(zip::result::ZipError::FileNotFound) => {
                return Err(bundle_error(
                    path,
                    format!("no {MANIFEST} at the root of the MCPB bundle"),
                ))
            }
            Err(e) => {
                return Err(bundle_error(
                    path,
                    format!("cannot read {MANIFEST} in the bundle: {e}"),
                ))
            }
        };
        if entry.is_dir() {
            return Err(bundle_error(
                path,
                format!("{MANIFEST} in the bundle is a directory"),
            ));
        }
        if entry.size() > max as u64 {
            return Err(bundle_error(
                &inner,
                format!(
                    "declared size {} bytes exceeds the limit of {max} bytes (raise it with --max-size BYTES if the bundle is trusted)",
                    entry.size()
                ),
            ));
        }
        // The declared size may lie: reserve at most a modest amount up front.
        let mut buf = Vec::with_capacity((entry.size() as usize).min(max).min(16 << 20));
        (&mut entry)
            .take(max as u64 + 1)
            .read_to_end(&mut buf)
            .map_err(|e| bundle_error(&inner, format!("cannot inflate: {e}")))?;
        if buf.len() > max {
            return Err(bundle_error(
                &inner,
                format!("inflates to more than the limit of {max} bytes (its header understates its size)"),
            ));
        }
        buf
    };
    let doc = match Document::parse_keep(text, &opts.parse) {
        Ok(d) => d,
        Err((e, bytes)) => return Err(LoadError::syntax(&inner, &bytes, &e)),
    };
    let ctx = Ctx {
        path: &inner,
        doc: &doc,
    };
    let servers = load_manifest(&ctx)?;
    Ok(Loaded {
        path: inner,
        doc: Arc::new(doc),
        source: None,
        kind: InputKind::McpbBundle,
        servers,
    })
}
