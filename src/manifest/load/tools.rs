//! Loaders for what servers return: `tools/list` results, JSON-RPC responses
//! (one, or several pages), bare arrays of tools, and capture files (an object
//! with `tools` plus prompts, resources, templates, instructions, serverInfo,
//! protocolVersion — the shape `mcplint fetch` writes).

use super::{Ctx, LoadError};
use crate::manifest::json::{Kind, NodeId};
use crate::manifest::{Completeness, InputKind, Prompt, Resource, Server, Tool, TOOL_FIELDS};

/// Loads a document of one of the tools-family kinds.
pub fn load(ctx: &Ctx<'_>, kind: InputKind) -> Result<Vec<Server>, LoadError> {
    let doc = ctx.doc;
    let root = doc.root();
    let default_name = ctx
        .path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("server")
        .to_string();
    let mut server = Server::new(default_name, Completeness::Complete);
    server.node = Some(root);
    match kind {
        InputKind::ToolArray => {
            ctx.expect(root, Kind::Array, "a bare tool list")?;
            server.tools_node = Some(root);
            server.tools = tools_of(ctx, root)?;
        }
        InputKind::ToolsList | InputKind::Capture => {
            ctx.expect(root, Kind::Object, "a tools/list result")?;
            fill_from_result(ctx, root, &mut server, true)?;
        }
        InputKind::JsonRpc => {
            let result = response_result(ctx, root)?;
            fill_from_result(ctx, result, &mut server, true)?;
        }
        InputKind::JsonRpcPages => {
            ctx.expect(root, Kind::Array, "a list of JSON-RPC responses")?;
            for (i, page) in doc.children(root).enumerate() {
                let result = response_result(ctx, page)?;
                // The first page may be an initialize result (serverInfo,
                // instructions) rather than a list page.
                let is_list = ["tools", "prompts", "resources", "resourceTemplates"]
                    .iter()
                    .any(|k| doc.get(result, k).is_some());
                if !is_list
                    && doc.get(result, "serverInfo").is_none()
                    && doc.get(result, "instructions").is_none()
                {
                    return Err(ctx.shape(
                        result,
                        format!("response {i} is neither a list result nor an initialize result"),
                        "this result",
                    ));
                }
                fill_from_result(ctx, result, &mut server, false)?;
            }
        }
        _ => unreachable_kind(ctx, kind)?,
    }
    // The name: a capture's `server` field, else serverInfo.name, else the file stem.
    let named =
        |n: Option<std::borrow::Cow<'_, str>>| n.filter(|s| !s.is_empty()).map(|s| s.into_owned());
    let from_capture = (doc.kind(root) == Kind::Object)
        .then(|| named(doc.get_str(root, "server")))
        .flatten();
    let from_info = server
        .server_info
        .and_then(|i| named(doc.get_str(i, "name")));
    if let Some(name) = from_capture.or(from_info) {
        server.name = name;
    }
    Ok(vec![server])
}

fn unreachable_kind(ctx: &Ctx<'_>, kind: InputKind) -> Result<(), LoadError> {
    Err(LoadError::UnknownFormat {
        path: ctx.path.display().to_string(),
        message: format!("{} is not a tool-list kind", kind.name()),
    })
}

/// The `result` of a JSON-RPC response, or an error for error responses.
fn response_result(ctx: &Ctx<'_>, resp: NodeId) -> Result<NodeId, LoadError> {
    let doc = ctx.doc;
    ctx.expect(resp, Kind::Object, "a JSON-RPC response")?;
    if let Some(err) = doc.get(resp, "error") {
        let msg = doc
            .get_str(err, "message")
            .map(|m| crate::display::visible_short(&m, 200))
            .unwrap_or_default();
        return Err(ctx.shape(
            err,
            format!("the JSON-RPC response is an error: {msg}"),
            "error response",
        ));
    }
    let Some(result) = doc.get(resp, "result") else {
        return Err(ctx.shape(
            resp,
            "JSON-RPC response without `result`",
            "no `result` here",
        ));
    };
    ctx.expect(result, Kind::Object, "`result`")
}

/// Fills `server` from a list or initialize result object. With `need_tools`,
/// a missing `tools` array is an error.
fn fill_from_result(
    ctx: &Ctx<'_>,
    obj: NodeId,
    server: &mut Server,
    need_tools: bool,
) -> Result<(), LoadError> {
    let doc = ctx.doc;
    match doc.get(obj, "tools") {
        Some(tools) => {
            ctx.expect(tools, Kind::Array, "`tools`")?;
            if server.tools_node.is_none() {
                server.tools_node = Some(tools);
            }
            server.tools.extend(tools_of(ctx, tools)?);
        }
        None if need_tools => {
            return Err(ctx.shape(obj, "no `tools` array", "expected `tools` in this object"));
        }
        None => {}
    }
    if let Some(p) = ctx.opt(obj, "prompts", Kind::Array)? {
        for n in doc.children(p) {
            server.prompts.push(prompt(ctx, n)?);
        }
    }
    if let Some(r) = ctx.opt(obj, "resources", Kind::Array)? {
        for n in doc.children(r) {
            server.resources.push(resource(ctx, n, "uri")?);
        }
    }
    if let Some(r) = ctx.opt(obj, "resourceTemplates", Kind::Array)? {
        for n in doc.children(r) {
            server
                .resource_templates
                .push(resource(ctx, n, "uriTemplate")?);
        }
    }
    if let Some(i) = doc.get(obj, "instructions") {
        if doc.kind(i) != Kind::Null {
            server.instructions = Some(ctx.expect(i, Kind::String, "`instructions`")?);
        }
    }
    if let Some(i) = doc.get(obj, "serverInfo") {
        if doc.kind(i) != Kind::Null {
            server.server_info = Some(ctx.expect(i, Kind::Object, "`serverInfo`")?);
        }
    } else if let Some(meta) = doc.get(obj, "_meta") {
        // Modern (2026-07-28) results carry the server's identity in _meta.
        if let Some(i) = doc.get(meta, "io.modelcontextprotocol/serverInfo") {
            if doc.kind(i) == Kind::Object {
                server.server_info = Some(i);
            }
        }
    }
    if let Some(v) = doc.get(obj, "protocolVersion") {
        if doc.kind(v) == Kind::String {
            server.protocol_version = Some(v);
        }
    }
    Ok(())
}

/// Parses every element of a `tools` array.
pub fn tools_of(ctx: &Ctx<'_>, arr: NodeId) -> Result<Vec<Tool>, LoadError> {
    let doc = ctx.doc;
    let items = doc.children(arr);
    let mut out = Vec::with_capacity(items.len());
    // A large list was parsed long enough ago to have left the CPU caches:
    // warm each tool a couple of places ahead (`Document::warm`), so that the
    // reads of its keys overlap instead of stalling one at a time.
    let mut ahead = items.clone().skip(2);
    for n in items {
        if let Some(a) = ahead.next() {
            std::hint::black_box(doc.warm(&doc.footprint(a)));
        }
        out.push(tool(ctx, n)?);
    }
    Ok(out)
}

/// The `name` of a listed object: required, a string.
fn name_of(ctx: &Ctx<'_>, obj: NodeId, what: &str) -> Result<(NodeId, String), LoadError> {
    let doc = ctx.doc;
    let Some(n) = doc.get(obj, "name") else {
        return Err(ctx.shape_help(
            obj,
            format!("{what} without a `name`"),
            format!("this {what} has no name"),
            Some("every tool, prompt and resource must have a string `name`".into()),
        ));
    };
    ctx.expect(n, Kind::String, &format!("a {what}'s `name`"))?;
    Ok((n, doc.str(n).unwrap_or_default().into_owned()))
}

/// Parses one tool object; unknown fields are kept.
pub fn tool(ctx: &Ctx<'_>, n: NodeId) -> Result<Tool, LoadError> {
    let doc = ctx.doc;
    ctx.expect(n, Kind::Object, "a tool")?;
    // One pass over the members instead of one lookup per known field: a
    // 100,000-tool list spends a good part of its load time here. The last of
    // duplicate keys wins, as with `Document::get`.
    let mut known: [Option<NodeId>; TOOL_FIELDS.len()] = [None; TOOL_FIELDS.len()];
    let mut unknown = Vec::new();
    for (k, v) in doc.members(n).into_iter().flatten() {
        match TOOL_FIELDS.iter().position(|f| doc.key_is(k, f)) {
            Some(i) => known[i] = Some(v),
            None => unknown.push((k, v)),
        }
    }
    let field = |name: &str| {
        let i = TOOL_FIELDS.iter().position(|f| *f == name);
        i.and_then(|i| known[i])
    };
    let (name_node, name) = match field("name") {
        Some(v) => {
            ctx.expect(v, Kind::String, "a tool's `name`")?;
            (v, doc.str(v).unwrap_or_default().into_owned())
        }
        // The usual error, from the usual place.
        None => name_of(ctx, n, "tool")?,
    };
    let nullable = |name: &str, kind: Kind, what: &str| -> Result<Option<NodeId>, LoadError> {
        match field(name) {
            Some(v) if doc.kind(v) == Kind::Null => Ok(None),
            Some(v) => ctx.expect(v, kind, what).map(Some),
            None => Ok(None),
        }
    };
    let description = nullable("description", Kind::String, "a tool's `description`")?;
    let title = nullable("title", Kind::String, "a tool's `title`")?;
    let input_schema = match field("inputSchema") {
        Some(v) => Some(ctx.expect(v, Kind::Object, "`inputSchema`")?),
        None => None,
    };
    let output_schema = nullable("outputSchema", Kind::Object, "a tool's `outputSchema`")?;
    let annotations = nullable("annotations", Kind::Object, "a tool's `annotations`")?;
    let icons = field("icons");
    let meta = field("_meta");
    Ok(Tool {
        node: n,
        name,
        name_node,
        title,
        description,
        input_schema,
        output_schema,
        annotations,
        icons,
        meta,
        unknown,
    })
}

fn opt_string(ctx: &Ctx<'_>, obj: NodeId, name: &str) -> Result<Option<NodeId>, LoadError> {
    match ctx.doc.get(obj, name) {
        Some(v) if ctx.doc.kind(v) == Kind::Null => Ok(None),
        Some(v) => ctx.expect(v, Kind::String, &format!("`{name}`")).map(Some),
        None => Ok(None),
    }
}

/// Parses one prompt object.
pub fn prompt(ctx: &Ctx<'_>, n: NodeId) -> Result<Prompt, LoadError> {
    ctx.expect(n, Kind::Object, "a prompt")?;
    let (_, name) = name_of(ctx, n, "prompt")?;
    let arguments = ctx.opt(n, "arguments", Kind::Array)?;
    if let Some(args) = arguments {
        for a in ctx.doc.children(args) {
            // MCPB bundles list prompt arguments as plain strings.
            if ctx.doc.kind(a) != Kind::String {
                ctx.expect(a, Kind::Object, "a prompt argument")?;
                name_of(ctx, a, "prompt argument")?;
            }
        }
    }
    Ok(Prompt {
        node: n,
        name,
        description: opt_string(ctx, n, "description")?,
        arguments,
    })
}

/// Parses one resource (`uri_key` = `uri`) or template (`uriTemplate`).
pub fn resource(ctx: &Ctx<'_>, n: NodeId, uri_key: &str) -> Result<Resource, LoadError> {
    ctx.expect(n, Kind::Object, "a resource")?;
    let uri = opt_string(ctx, n, uri_key)?;
    let name = match ctx.doc.get(n, "name") {
        Some(_) => name_of(ctx, n, "resource")?.1,
        None => match uri {
            Some(u) => ctx.doc.str(u).unwrap_or_default().into_owned(),
            None => {
                return Err(ctx.shape(
                    n,
                    format!("resource without `name` or `{uri_key}`"),
                    "this resource",
                ))
            }
        },
    };
    Ok(Resource {
        node: n,
        name,
        uri,
        description: opt_string(ctx, n, "description")?,
    })
}
