//! The official registry's `server.json`, every published schema from
//! 2025-07-09 (snake_case) to 2025-12-11 (camelCase); field names of both eras
//! are accepted. See `../shared/protocol/FACTS.md` §3.
//!
//! A `server.json` lists no tools, only ways to run the server: one [`Server`]
//! ([`Completeness::LaunchOnly`]) per package and per remote, named
//! `NAME [npm]`, `NAME [remote streamable-http]` and so on. A package's launch
//! command is built the way the registry documents it (`npx -y id@ver`,
//! `uvx id==ver`, `docker run -i --rm … id:ver …`, `dnx id@ver -- …`), with the
//! runtime and package arguments as written; every piece keeps its span.
//! A registry API response for one version (`{"server": {…}, "_meta": {…}}`)
//! loads the same way.

use super::config::{opt_sstr, sscalar, sstr};
use super::{Ctx, LoadError};
use crate::manifest::json::{Kind, NodeId};
use crate::manifest::{Completeness, EnvVar, Launch, PackageRef, Server, Spanned, Transport};

/// The first present member among `names` (a field's camelCase and
/// snake_case spellings).
fn get_any(ctx: &Ctx<'_>, obj: NodeId, names: &[&str]) -> Option<NodeId> {
    names.iter().find_map(|n| ctx.doc.get(obj, n))
}

/// An optional string under any of `names`.
fn opt_str_any(
    ctx: &Ctx<'_>,
    obj: NodeId,
    names: &[&str],
) -> Result<Option<Spanned<String>>, LoadError> {
    match get_any(ctx, obj, names) {
        None => Ok(None),
        Some(v) if ctx.doc.kind(v) == Kind::Null => Ok(None),
        Some(v) => sstr(ctx, v, &format!("`{}`", names[0])).map(Some),
    }
}

/// An optional array under any of `names`.
fn opt_array_any<'d>(
    ctx: &Ctx<'d>,
    obj: NodeId,
    names: &[&str],
) -> Result<&'d [NodeId], LoadError> {
    match get_any(ctx, obj, names) {
        None => Ok(&[]),
        Some(v) if ctx.doc.kind(v) == Kind::Null => Ok(&[]),
        Some(v) => {
            ctx.expect(v, Kind::Array, &format!("`{}`", names[0]))?;
            Ok(ctx.doc.array(v).unwrap_or_default())
        }
    }
}

fn is_true(ctx: &Ctx<'_>, obj: NodeId, names: &[&str]) -> Result<bool, LoadError> {
    match get_any(ctx, obj, names) {
        None => Ok(false),
        Some(v) => match ctx.doc.as_bool(v) {
            Some(b) => Ok(b),
            None => Err(ctx.shape(
                v,
                format!(
                    "`{}` must be a boolean, found {}",
                    names[0],
                    ctx.doc.kind(v).name()
                ),
                "expected true or false",
            )),
        },
    }
}

/// Loads a `server.json`.
pub fn load(ctx: &Ctx<'_>) -> Result<Vec<Server>, LoadError> {
    let doc = ctx.doc;
    let mut root = ctx.expect(doc.root(), Kind::Object, "a server.json")?;
    // A registry API response for one version: `{"server": {…}, "_meta": {…}}`.
    if doc.get(root, "name").is_none() {
        if let Some(inner) = doc.get(root, "server") {
            root = ctx.expect(inner, Kind::Object, "`server`")?;
        }
    }
    let Some(name_node) = doc.get(root, "name") else {
        return Err(ctx.shape_help(
            root,
            "server.json without `name`",
            "no `name` in this object",
            Some("the registry requires a reverse-DNS `name` such as io.github.user/server".into()),
        ));
    };
    let name = sstr(ctx, name_node, "`name`")?.value;
    let mut out: Vec<Server> = Vec::new();
    let mut push = |mut s: Server, label: String| {
        let base = format!("{name} [{label}]");
        let same = out
            .iter()
            .filter(|o| o.name == base || o.name.starts_with(&format!("{base} #")))
            .count();
        s.name = if same == 0 {
            base
        } else {
            format!("{base} #{}", same + 1)
        };
        out.push(s);
    };
    for &pkg in opt_array_any(ctx, root, &["packages"])? {
        let (server, label) = package(ctx, pkg)?;
        push(server, label);
    }
    for &remote in opt_array_any(ctx, root, &["remotes"])? {
        let (server, label) = remote_entry(ctx, remote)?;
        push(server, label);
    }
    Ok(out)
}

/// How the registry runs each package type by default: command, leading
/// arguments, and how the identifier and version are joined.
fn runtime_for(registry: &str) -> Option<(&'static str, &'static [&'static str], &'static str)> {
    match registry {
        "npm" => Some(("npx", &["-y"], "@")),
        "pypi" => Some(("uvx", &[], "==")),
        "oci" | "docker" => Some(("docker", &["run", "-i", "--rm"], ":")),
        "nuget" => Some(("dnx", &[], "@")),
        _ => None,
    }
}

fn package(ctx: &Ctx<'_>, pkg: NodeId) -> Result<(Server, String), LoadError> {
    let doc = ctx.doc;
    ctx.expect(pkg, Kind::Object, "a package")?;
    let Some(registry) = opt_str_any(
        ctx,
        pkg,
        &["registryType", "registry_type", "registry_name"],
    )?
    else {
        return Err(ctx.shape(pkg, "a package without `registryType`", "this package"));
    };
    let Some(identifier) = opt_str_any(ctx, pkg, &["identifier", "name"])? else {
        return Err(ctx.shape(pkg, "a package without `identifier`", "this package"));
    };
    let version = opt_str_any(ctx, pkg, &["version"])?;
    let sha256 = match get_any(ctx, pkg, &["fileSha256", "file_sha256"]) {
        None => None,
        Some(n) => {
            let s = sstr(ctx, n, "`fileSha256`")?.value;
            if s.len() != 64
                || !s
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            {
                return Err(ctx.shape(
                    n,
                    "`fileSha256` must be 64 lowercase hex digits",
                    "not a sha-256 digest",
                ));
            }
            Some(s)
        }
    };
    let hint = opt_str_any(ctx, pkg, &["runtimeHint", "runtime_hint"])?;
    let runtime_args = arguments(
        ctx,
        opt_array_any(ctx, pkg, &["runtimeArguments", "runtime_arguments"])?,
    )?;
    let package_args = arguments(
        ctx,
        opt_array_any(ctx, pkg, &["packageArguments", "package_arguments"])?,
    )?;

    let reg = registry.value.as_str();
    let defaults = runtime_for(reg);
    let command = match (&hint, defaults) {
        (Some(h), _) => h.clone(),
        (None, Some((cmd, _, _))) => Spanned::new(cmd.to_string(), registry.span),
        // cargo, go, mcpb and unknown types: the installed binary by name.
        (None, None) => identifier.clone(),
    };
    let mut args: Vec<Spanned<String>> = Vec::new();
    let mut sep = None;
    if let Some((cmd, lead, s)) = defaults {
        // The registry's defaults apply when the runtime is the usual one;
        // a publisher's explicit `-y` is not doubled.
        if command.value == cmd {
            for l in lead.iter() {
                let dup = runtime_args
                    .iter()
                    .any(|a| a.value == *l || (*l == "-y" && a.value == "--yes"));
                if !dup {
                    args.push(Spanned::new(l.to_string(), None));
                }
            }
        }
        sep = Some(s);
    }
    args.extend(runtime_args);
    let spec = match (&version, sep) {
        // An oci identifier may carry its tag already.
        (Some(_), Some(":"))
            if identifier
                .value
                .rsplit('/')
                .next()
                .is_some_and(|l| l.contains(':')) =>
        {
            identifier.value.clone()
        }
        (Some(v), Some(s)) => format!("{}{s}{}", identifier.value, v.value),
        _ => identifier.value.clone(),
    };
    if command.value != identifier.value {
        args.push(Spanned::new(spec, identifier.span));
    }
    if reg == "nuget" && !package_args.is_empty() {
        args.push(Spanned::new("--".to_string(), None));
    }
    args.extend(package_args);

    let mut env = Vec::new();
    for &e in opt_array_any(ctx, pkg, &["environmentVariables", "environment_variables"])? {
        env.push(key_value_env(ctx, e)?);
    }

    let transport = match doc.get(pkg, "transport") {
        None => Transport::Stdio {
            command,
            args,
            cwd: None,
        },
        Some(t) => {
            ctx.expect(t, Kind::Object, "a package's `transport`")?;
            match transport_type(ctx, t)?.as_str() {
                "stdio" => Transport::Stdio {
                    command,
                    args,
                    cwd: None,
                },
                // The package is started locally and then reached over HTTP;
                // the launch spec keeps the endpoint, the package ref keeps
                // what to start.
                _ => remote_transport(ctx, t)?,
            }
        }
    };
    let mut launch = Launch::new("server.json", transport);
    launch.env = env;
    launch.package = Some(PackageRef {
        registry: registry.value.clone(),
        identifier,
        version,
        sha256,
    });
    let mut server = Server::new(String::new(), Completeness::LaunchOnly);
    server.node = Some(pkg);
    server.launch = Some(launch);
    Ok((server, registry.value))
}

fn transport_type(ctx: &Ctx<'_>, t: NodeId) -> Result<String, LoadError> {
    match opt_str_any(ctx, t, &["type", "transport_type"])? {
        Some(s) => match s.value.as_str() {
            "stdio" | "streamable-http" | "sse" | "http" | "streamable_http" => Ok(s.value),
            other => Err(ctx.shape(
                get_any(ctx, t, &["type", "transport_type"]).unwrap_or(t),
                format!(
                    "unknown transport type `{}`",
                    crate::display::visible_short(other, 40)
                ),
                "expected stdio, streamable-http or sse",
            )),
        },
        None => Err(ctx.shape(t, "a transport without `type`", "this transport")),
    }
}

/// A streamable-http or sse endpoint with its headers.
fn remote_transport(ctx: &Ctx<'_>, t: NodeId) -> Result<Transport, LoadError> {
    let ty = transport_type(ctx, t)?;
    let Some(url) = opt_sstr(ctx, t, "url")? else {
        return Err(ctx.shape(
            t,
            format!("a `{ty}` transport without `url`"),
            "this transport",
        ));
    };
    let mut headers = Vec::new();
    for &h in opt_array_any(ctx, t, &["headers"])? {
        let e = key_value_env(ctx, h)?;
        let value = e
            .value
            .unwrap_or_else(|| Spanned::new(format!("{{{}}}", e.name.value), Some(ctx.span(h))));
        headers.push((e.name, value));
    }
    Ok(match ty.as_str() {
        "sse" => Transport::Sse { url, headers },
        "stdio" => {
            return Err(ctx.shape(
                t,
                "a remote cannot use the stdio transport",
                "this transport",
            ))
        }
        _ => Transport::Http { url, headers },
    })
}

fn remote_entry(ctx: &Ctx<'_>, remote: NodeId) -> Result<(Server, String), LoadError> {
    ctx.expect(remote, Kind::Object, "a remote")?;
    let transport = remote_transport(ctx, remote)?;
    let label = match &transport {
        Transport::Sse { .. } => "remote sse",
        _ => "remote streamable-http",
    };
    let mut server = Server::new(String::new(), Completeness::LaunchOnly);
    server.node = Some(remote);
    server.launch = Some(Launch::new("server.json", transport));
    Ok((server, label.to_string()))
}

/// A `KeyValueInput` (`{name, value?, default?, isSecret?, …}`) as an env var.
fn key_value_env(ctx: &Ctx<'_>, node: NodeId) -> Result<EnvVar, LoadError> {
    ctx.expect(node, Kind::Object, "a key-value input")?;
    let Some(name) = ctx.doc.get(node, "name") else {
        return Err(ctx.shape(node, "a key-value input without `name`", "this input"));
    };
    let name = sstr(ctx, name, "an input's `name`")?;
    let value = match get_any(ctx, node, &["value", "default"]) {
        Some(v) if ctx.doc.kind(v) != Kind::Null => Some(sscalar(ctx, v, "an input's `value`")?),
        _ => None,
    };
    Ok(EnvVar {
        name,
        value,
        secret: is_true(ctx, node, &["isSecret", "is_secret"])?,
    })
}

/// Renders `runtimeArguments`/`packageArguments`: positional arguments as
/// their value (or `{valueHint}` when the user supplies it), named ones as
/// the flag followed by its value when it has one.
fn arguments(ctx: &Ctx<'_>, items: &[NodeId]) -> Result<Vec<Spanned<String>>, LoadError> {
    let doc = ctx.doc;
    let mut out = Vec::new();
    for &a in items {
        ctx.expect(a, Kind::Object, "an argument")?;
        let ty = opt_sstr(ctx, a, "type")?;
        let value = match get_any(ctx, a, &["value", "default"]) {
            Some(v) if doc.kind(v) != Kind::Null => Some(sscalar(ctx, v, "an argument's `value`")?),
            _ => None,
        };
        let hint = opt_str_any(ctx, a, &["valueHint", "value_hint"])?;
        let placeholder = |h: &Option<Spanned<String>>, fallback: &str| {
            Spanned::new(
                format!(
                    "{{{}}}",
                    h.as_ref().map(|h| h.value.as_str()).unwrap_or(fallback)
                ),
                Some(ctx.span(a)),
            )
        };
        match ty.as_ref().map(|t| t.value.as_str()) {
            Some("named") => {
                let Some(flag) = opt_sstr(ctx, a, "name")? else {
                    return Err(ctx.shape(a, "a named argument without `name`", "this argument"));
                };
                let has_value_input = value.is_some() || hint.is_some();
                let fallback = flag.value.trim_start_matches('-').to_string();
                out.push(flag);
                if has_value_input {
                    out.push(value.unwrap_or_else(|| placeholder(&hint, &fallback)));
                }
            }
            Some("positional") | None => {
                let fallback = opt_sstr(ctx, a, "name")?
                    .map(|n| n.value)
                    .unwrap_or_else(|| "value".into());
                out.push(value.unwrap_or_else(|| placeholder(&hint, &fallback)));
            }
            Some(other) => {
                return Err(ctx.shape(
                    ty.as_ref().and_then(|_| doc.get(a, "type")).unwrap_or(a),
                    format!(
                        "unknown argument type `{}`",
                        crate::display::visible_short(other, 40)
                    ),
                    "expected positional or named",
                ))
            }
        }
    }
    Ok(out)
}
