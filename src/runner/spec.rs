//! Launch specs as fetch sources: a registry `server.json`, a client-config
//! entry, or an MCPB bundle, resolved to something the runner can start.
//!
//! The manifest loaders already parse all three into [`Launch`]es; this maps
//! one of them to a runner [`Source`] plus the server's arguments and
//! environment. It is the only such mapping: `mcplint fetch` and approvals
//! of a `server.json` source both call [`resolve`].
//!
//! Secrets never travel: a client config is the user's own file and may hold
//! real credentials, so every environment value, header value and
//! secret-looking argument of an entry is replaced by a placeholder
//! (`mcplint-placeholder-NAME`); from a `server.json` or a bundle only values
//! the author published for non-secret variables are kept. Unpinned packages
//! are refused as everywhere else, unless `--allow-unpinned`.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::source::{Bundle, Runtime, Source};
use super::RunnerError;
use crate::manifest::json::{Document, Kind, NodeId};
use crate::manifest::load::{load_file, LoadOptions};
use crate::manifest::{EnvVar, InputKind, Launch, Loaded, Transport};

/// Which entry of a launch-spec file to fetch.
#[derive(Debug, Clone, Default)]
pub struct Pick {
    /// A client config's server name (or a `server.json` entry's loaded name).
    pub server: Option<String>,
    /// A `server.json` package by its index in `packages` (from 0).
    pub package: Option<usize>,
}

/// A launch spec resolved to a runner source.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// What the runner installs and starts.
    pub source: Source,
    /// Arguments after the server's entry point.
    pub args: Vec<String>,
    /// Environment for the server: placeholders and published values.
    pub env: Vec<(String, String)>,
    /// HTTP headers for a remote server (placeholder values).
    pub headers: Vec<(String, String)>,
    /// Where it came from, for the capture's provenance.
    pub origin: Origin,
}

/// The provenance of a launch-spec fetch: the original source and what it
/// resolved to.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Origin {
    /// The file as given.
    pub file: String,
    /// Its kind (`server-json`, `mcp-servers`, `vscode`, `codex`, `mcpb`, `mcpb-bundle`).
    pub kind: String,
    /// The entry's name (config key, `server.json` name, bundle name).
    pub server: String,
    /// The `server.json` package index, when one was picked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub package_index: Option<usize>,
    /// What it resolved to (`npm:PKG@1.2.3`, `pypi:PKG==1.0`, `file:DIR`,
    /// `mcpb:PATH`, a URL).
    pub resolved: String,
    /// Environment variables, headers, arguments and user_config keys given
    /// placeholder values.
    pub placeholders: Vec<String>,
    /// Anything else a reader should know (ignored runtime arguments, ...).
    pub notes: Vec<String>,
}

/// The value given in place of a secret or a user's own setting.
pub fn placeholder(name: &str) -> String {
    format!("mcplint-placeholder-{name}")
}

fn usage(m: impl Into<String>) -> RunnerError {
    RunnerError::Usage(m.into())
}

/// True if `path` should be read as a launch spec rather than a source
/// string: an existing file or a folder holding an MCPB `manifest.json`.
pub fn is_spec_path(s: &str) -> bool {
    let p = Path::new(s);
    p.is_file() || (p.is_dir() && p.join("manifest.json").is_file())
}

/// Loads a launch-spec file (or MCPB bundle folder) and resolves one entry.
pub fn load(path: &Path, pick: &Pick, allow_unpinned: bool) -> Result<Resolved, RunnerError> {
    let file = if path.is_dir() {
        path.join("manifest.json")
    } else {
        path.to_path_buf()
    };
    let loaded = load_file(&file, &LoadOptions::default())
        .map_err(|e| usage(format!("{}: {e}", path.display())))?;
    resolve(&loaded, pick, allow_unpinned)
}

/// Resolves one entry of a loaded launch-spec file.
pub fn resolve(
    loaded: &Loaded,
    pick: &Pick,
    allow_unpinned: bool,
) -> Result<Resolved, RunnerError> {
    match loaded.kind {
        InputKind::ServerJson => server_json(loaded, pick, allow_unpinned),
        InputKind::McpServers | InputKind::Vscode | InputKind::Codex => {
            if pick.package.is_some() {
                return Err(usage("--package picks a package of a server.json; a client config's entries are picked with --server NAME"));
            }
            client_entry(loaded, pick, allow_unpinned)
        }
        InputKind::Mcpb | InputKind::McpbBundle => {
            if pick.package.is_some() || pick.server.is_some() {
                return Err(usage("an MCPB bundle holds one server: --package and --server do not apply"));
            }
            mcpb(loaded)
        }
        other => Err(usage(format!(
            "{}: a {} file lists tools already captured; there is nothing to launch (give it to check, diff or fingerprint instead)",
            loaded.display_path(),
            other.name()
        ))),
    }
}

fn origin(loaded: &Loaded, server: &str) -> Origin {
    Origin {
        file: loaded.display_path(),
        kind: loaded.kind.name().to_string(),
        server: server.to_string(),
        package_index: None,
        resolved: String::new(),
        placeholders: Vec::new(),
        notes: Vec::new(),
    }
}

// ---------------------------------------------------------------------------
// server.json

fn server_json(
    loaded: &Loaded,
    pick: &Pick,
    allow_unpinned: bool,
) -> Result<Resolved, RunnerError> {
    let path = loaded.display_path();
    // The loader yields packages first, in order, then remotes.
    let packages: Vec<(usize, &crate::manifest::Server, &Launch)> = loaded
        .servers
        .iter()
        .filter_map(|s| s.launch.as_ref().map(|l| (s, l)))
        .filter(|(_, l)| l.package.is_some())
        .enumerate()
        .map(|(i, (s, l))| (i, s, l))
        .collect();
    let remotes: Vec<(&crate::manifest::Server, &Launch)> = loaded
        .servers
        .iter()
        .filter_map(|s| s.launch.as_ref().map(|l| (s, l)))
        .filter(|(_, l)| l.package.is_none())
        .collect();
    let listing = || {
        packages
            .iter()
            .map(|(i, _, l)| {
                let p = l.package.as_ref().expect("filtered on package");
                format!(
                    "  --package {i}: {} {}{}",
                    p.registry,
                    crate::display::visible_short(&p.identifier.value, 80),
                    p.version
                        .as_ref()
                        .map(|v| format!(" {}", crate::display::visible_short(&v.value, 40)))
                        .unwrap_or_default()
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let fetchable = |l: &Launch| {
        l.package
            .as_ref()
            .is_some_and(|p| p.registry == "npm" || p.registry == "pypi")
    };
    let by_name = pick
        .server
        .as_ref()
        .map(|n| {
            loaded
                .servers
                .iter()
                .position(|s| &s.name == n)
                .ok_or_else(|| {
                    let names: Vec<String> = loaded
                        .servers
                        .iter()
                        .map(|s| crate::display::visible_short(&s.name, 80))
                        .collect();
                    usage(format!(
                        "{path}: no entry named {:?}; it has: {}",
                        crate::display::visible_short(n, 80),
                        names.join(", ")
                    ))
                })
        })
        .transpose()?;
    let mut note = None;
    let chosen: (Option<usize>, &crate::manifest::Server, &Launch) = if let Some(n) = pick.package {
        let (i, s, l) = packages.get(n).ok_or_else(|| {
            usage(format!(
                "{path}: there is no package {n} (it has {}):\n{}",
                packages.len(),
                listing()
            ))
        })?;
        (Some(*i), s, l)
    } else if let Some(idx) = by_name {
        let s = &loaded.servers[idx];
        let l = s.launch.as_ref().ok_or_else(|| usage("no launch spec"))?;
        let i = packages
            .iter()
            .find(|(_, ps, _)| std::ptr::eq(*ps, s))
            .map(|(i, _, _)| *i);
        (i, s, l)
    } else if packages.len() == 1 {
        let (i, s, l) = packages[0];
        (Some(i), s, l)
    } else if !packages.is_empty() {
        let ok: Vec<_> = packages.iter().filter(|(_, _, l)| fetchable(l)).collect();
        if ok.len() != 1 {
            return Err(usage(format!(
                "{path} lists {} packages; pick one with --package N:\n{}",
                packages.len(),
                listing()
            )));
        }
        let (i, s, l) = *ok[0];
        note = Some(format!(
            "picked packages[{i}], the only npm or PyPI package of {}",
            packages.len()
        ));
        (Some(i), s, l)
    } else if remotes.len() == 1 {
        (None, remotes[0].0, remotes[0].1)
    } else if remotes.is_empty() {
        return Err(usage(format!("{path}: lists neither packages nor remotes")));
    } else {
        return Err(usage(format!(
            "{path} lists {} remotes and no package; fetch the one you mean by its URL",
            remotes.len()
        )));
    };
    let (index, server, launch) = chosen;
    let mut o = origin(loaded, &server.name);
    o.package_index = index;
    o.notes.extend(note);
    let Some(pkg) = &launch.package else {
        // A remote: reached over HTTP, nothing runs here.
        return remote(launch, o);
    };
    let (id, version) = (
        &pkg.identifier.value,
        pkg.version.as_ref().map(|v| &v.value),
    );
    let text = match pkg.registry.as_str() {
        "npm" => match version {
            Some(v) => format!("npm:{id}@{v}"),
            None => format!("npm:{id}"),
        },
        "pypi" => match version {
            Some(v) => format!("pypi:{id}=={v}"),
            None => format!("pypi:{id}"),
        },
        other => {
            return Err(usage(format!(
            "{path}: package {} is a `{}` package; the runner starts npm and PyPI packages only",
            index.unwrap_or(0),
            crate::display::visible_short(other, 40)
        )))
        }
    };
    let source = Source::parse(&text, allow_unpinned).map_err(|e| usage(format!("{path}: {e}")))?;
    let Transport::Stdio { args, .. } = &launch.transport else {
        return Err(usage(format!(
            "{path}: package {} is started locally and reached over HTTP; the runner speaks stdio to packages",
            index.unwrap_or(0)
        )));
    };
    // The launch is `npx -y [runtime args] ID@VER [package args]`: the
    // server's own arguments are those after the package spec.
    let spec_at = args
        .iter()
        .position(|a| a.span.is_some() && a.span == pkg.identifier.span)
        .or_else(|| args.iter().position(|a| a.value.starts_with(id.as_str())));
    let (runtime_args, package_args) = match spec_at {
        Some(i) => (&args[..i], &args[i + 1..]),
        None => (&args[..0], &args[..]),
    };
    let ignored: Vec<&str> = runtime_args
        .iter()
        .map(|a| a.value.as_str())
        .filter(|a| !["-y", "--yes"].contains(a))
        .collect();
    if !ignored.is_empty() {
        o.notes.push(format!(
            "runtime arguments not used (the runner installs the package itself): {}",
            ignored.join(" ")
        ));
    }
    let args: Vec<String> = package_args.iter().map(|a| a.value.clone()).collect();
    let asked: Vec<&str> = args
        .iter()
        .filter(|a| a.starts_with('{') && a.ends_with('}'))
        .map(String::as_str)
        .collect();
    if !asked.is_empty() {
        o.notes.push(format!(
            "arguments the user supplies are passed as written: {}",
            asked.join(" ")
        ));
    }
    let env = published_env(&launch.env, &mut o);
    o.resolved = text;
    Ok(Resolved {
        source,
        args,
        env,
        headers: Vec::new(),
        origin: o,
    })
}

/// A `server.json`'s variables: the published value of a non-secret
/// variable, a placeholder for secrets and for values the user supplies.
fn published_env(vars: &[EnvVar], o: &mut Origin) -> Vec<(String, String)> {
    vars.iter()
        .map(|e| {
            let name = e.name.value.clone();
            match &e.value {
                Some(v) if !e.secret && !v.value.contains('{') => (name, v.value.clone()),
                _ => {
                    o.placeholders.push(format!("env {name}"));
                    let p = placeholder(&name);
                    (name, p)
                }
            }
        })
        .collect()
}

/// A remote entry: its URL, headers with placeholder values.
fn remote(launch: &Launch, mut o: Origin) -> Result<Resolved, RunnerError> {
    let (url, headers) = match &launch.transport {
        Transport::Http { url, headers } => (url, headers),
        Transport::Sse { url, .. } => {
            return Err(usage(format!(
                "{}: a legacy HTTP+SSE endpoint; mcplint fetch speaks Streamable HTTP only",
                crate::display::visible_short(&url.value, 120)
            )))
        }
        Transport::Stdio { .. } => return Err(usage("not a remote")),
    };
    let source = Source::parse(&url.value, false)?;
    let headers = headers
        .iter()
        .map(|(k, _)| {
            o.placeholders.push(format!("header {}", k.value));
            (k.value.clone(), placeholder(&k.value))
        })
        .collect();
    o.resolved = url.value.clone();
    Ok(Resolved {
        source,
        args: Vec::new(),
        env: Vec::new(),
        headers,
        origin: o,
    })
}

// ---------------------------------------------------------------------------
// Client configs

fn client_entry(
    loaded: &Loaded,
    pick: &Pick,
    allow_unpinned: bool,
) -> Result<Resolved, RunnerError> {
    let path = loaded.display_path();
    let names = || {
        loaded
            .servers
            .iter()
            .map(|s| crate::display::visible_short(&s.name, 80))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let server = match &pick.server {
        Some(n) => loaded
            .servers
            .iter()
            .find(|s| &s.name == n)
            .ok_or_else(|| {
                usage(format!(
                    "{path}: no server named {:?}; it has: {}",
                    crate::display::visible_short(n, 80),
                    names()
                ))
            })?,
        None => match loaded.servers.as_slice() {
            [one] => one,
            [] => return Err(usage(format!("{path}: lists no servers"))),
            _ => {
                return Err(usage(format!(
                    "{path} lists {} servers; pick one with --server NAME ({})",
                    loaded.servers.len(),
                    names()
                )))
            }
        },
    };
    let launch = server
        .launch
        .as_ref()
        .ok_or_else(|| usage(format!("{path}: {} has no launch spec", server.name)))?;
    let mut o = origin(loaded, &server.name);
    if launch.disabled {
        o.notes
            .push("the entry is disabled in its config".to_string());
    }
    if launch.env_file.is_some() {
        o.notes
            .push("its envFile is not read (it may hold secrets)".to_string());
    }
    let (command, args, cwd) = match &launch.transport {
        Transport::Stdio { command, args, cwd } => (command, args, cwd),
        Transport::Http { .. } | Transport::Sse { .. } => return remote(launch, o),
    };
    if cwd.is_some() {
        o.notes.push("its cwd is not used".to_string());
    }
    // Arguments: secret-looking ones (as the redactor judges them) and
    // references to the user's variables become placeholders.
    let redacted = crate::manifest::load::config::redact(launch);
    let shown = match &redacted.transport {
        Transport::Stdio { args, .. } => args.clone(),
        _ => Vec::new(),
    };
    let args: Vec<String> = args
        .iter()
        .enumerate()
        .map(|(i, a)| {
            // The redactor keeps the arguments' order and number; a missing
            // one counts as redacted.
            let redacted = shown.get(i).is_none_or(|s| s.value != a.value);
            if redacted || a.value.contains("${") {
                o.placeholders.push(format!("args[{i}]"));
                // Keep `--flag=` so the server still parses its flag.
                match a.value.split_once('=') {
                    Some((flag, _)) if flag.starts_with('-') => {
                        format!("{flag}={}", placeholder(&format!("args{i}")))
                    }
                    _ => placeholder(&format!("args{i}")),
                }
            } else {
                a.value.clone()
            }
        })
        .collect();
    // Every environment value of a user's config is a placeholder.
    let env: Vec<(String, String)> = launch
        .env
        .iter()
        .map(|e| {
            o.placeholders.push(format!("env {}", e.name.value));
            (e.name.value.clone(), placeholder(&e.name.value))
        })
        .collect();
    let base = Path::new(&path)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let (source, rest, resolved) = command_source(&command.value, &args, &base, allow_unpinned)
        .map_err(|e| {
            usage(format!(
                "{path}: server {:?}: {e}",
                crate::display::visible_short(&server.name, 80)
            ))
        })?;
    o.resolved = resolved;
    Ok(Resolved {
        source,
        args: rest,
        env,
        headers: Vec::new(),
        origin: o,
    })
}

/// Maps a client's command line to a pinned package source and the server's
/// own arguments: `npx [-y] PKG@VER ARGS` (also `--package PKG@VER BIN`, and
/// the same through `pnpm dlx`, `yarn dlx`, `bunx`), `uvx PKG==VER ARGS` (also
/// `PKG@VER`, `--from PKG==VER SCRIPT`, `uv tool run`), `pipx run PKG==VER`
/// (also `--spec PKG==VER APP`), `node SCRIPT ARGS`.
fn command_source(
    command: &str,
    args: &[String],
    base: &Path,
    allow_unpinned: bool,
) -> Result<(Source, Vec<String>, String), String> {
    let prog = Path::new(command)
        .file_name()
        .and_then(|s| s.to_str())
        .unwrap_or(command);
    let prog = prog
        .strip_suffix(".cmd")
        .or_else(|| prog.strip_suffix(".exe"))
        .unwrap_or(prog);
    let shown = |s: &str| crate::display::visible_short(s, 80);
    match prog {
        "npx" | "bunx" => npm_runner(prog, args, allow_unpinned),
        "pnpm" | "yarn" => match args.split_first() {
            Some((dlx, rest)) if dlx == "dlx" => npm_runner(&format!("{prog} dlx"), rest, allow_unpinned),
            _ => Err(format!("only `{prog} dlx PKG@VER` is understood")),
        },
        "pipx" => pipx_run(args, allow_unpinned),
        "uvx" | "uv" => {
            let mut it = args.iter().peekable();
            if prog == "uv" {
                let (a, b) = (it.next(), it.next());
                if a.map(String::as_str) != Some("tool") || b.map(String::as_str) != Some("run") {
                    return Err("only `uv tool run PKG==VER` is understood (uv run needs a project and a network)".into());
                }
            }
            let mut from = None;
            let first = loop {
                match it.next() {
                    None => return Err("uvx without a package".into()),
                    Some(a) if a == "--from" => {
                        from = Some(it.next().ok_or("--from without a package")?.clone());
                    }
                    Some(a) if a.starts_with("--from=") => from = Some(a["--from=".len()..].to_string()),
                    Some(a) if a == "-q" || a == "--quiet" => {}
                    Some(a) if a == "--python" || a == "-p" => {
                        it.next();
                    }
                    Some(a) if a.starts_with('-') => {
                        return Err(format!("uvx option {} is not supported", shown(a)))
                    }
                    Some(a) => break a.clone(),
                }
            };
            let (spec, script) = match from {
                Some(f) => (f, Some(first)),
                None => (first, None),
            };
            // uvx also spells a pin `PKG@VER`.
            let spec = match spec.split_once('@') {
                Some((n, v)) if !spec.contains("==") => format!("{n}=={v}"),
                _ => spec,
            };
            let (src, text) = pypi_source(&spec, script, allow_unpinned)?;
            Ok((src, it.cloned().collect(), text))
        }
        "node" | "nodejs" => {
            let mut it = args.iter();
            let script = match it.next() {
                None => return Err("node without a script".into()),
                Some(a) if a.starts_with('-') => {
                    return Err(format!("node option {} is not supported", shown(a)))
                }
                Some(a) => a,
            };
            let p = if Path::new(script).is_absolute() {
                PathBuf::from(script)
            } else {
                base.join(script)
            };
            let p = std::fs::canonicalize(&p)
                .map_err(|e| format!("node {}: {e}", shown(script)))?;
            let pkg = p
                .ancestors()
                .skip(1)
                .find(|d| d.join("package.json").is_file())
                .ok_or_else(|| {
                    format!(
                        "node {}: no package.json above the script; mcplint installs npm packages (give the package folder as file:DIR)",
                        shown(script)
                    )
                })?
                .to_path_buf();
            let rel = p
                .strip_prefix(&pkg)
                .map_err(|_| "the script is outside its package".to_string())?
                .to_string_lossy()
                .into_owned();
            let text = format!("file:{} (script {rel})", pkg.display());
            Ok((
                Source::NodeScript {
                    package: pkg,
                    script: rel,
                },
                it.cloned().collect(),
                text,
            ))
        }
        "docker" | "podman" => Err("container images are not started by mcplint".into()),
        other => Err(format!(
            "`{}` is not a package runner mcplint knows (npx, pnpm dlx, yarn dlx, bunx, uvx, uv tool run, pipx run, node); give the package as npm:PKG@VER, pypi:PKG==VER or file:PATH",
            shown(other)
        )),
    }
}

/// What a package runner's command line resolves to: the source, the
/// server's own arguments, and the resolution as text for the capture.
type Mapped = (Source, Vec<String>, String);

/// `npx`, `pnpm dlx`, `yarn dlx` and `bunx` (`tool`) share one shape:
/// `[-y] PKG@VER ARGS`, or `--package PKG@VER BIN ARGS` to start an executable
/// not named like the package (also `-p PKG@VER`, `--package=PKG@VER`).
fn npm_runner(tool: &str, args: &[String], allow_unpinned: bool) -> Result<Mapped, String> {
    let shown = |s: &str| crate::display::visible_short(s, 80);
    let mut it = args.iter();
    let mut package: Option<String> = None;
    let mut set = |p: &str| match package.replace(p.to_owned()) {
        Some(_) => Err(format!("{tool} with several packages is not supported")),
        None => Ok(()),
    };
    let first = loop {
        match it.next() {
            None => break None,
            Some(a) if ["-y", "--yes", "-q", "--quiet", "--silent"].contains(&a.as_str()) => {}
            Some(a) if a == "-p" || a == "--package" => {
                let p = it
                    .next()
                    .ok_or_else(|| format!("{tool} {a} without a package"))?;
                set(p)?;
            }
            Some(a) if a.starts_with("--package=") => set(&a["--package=".len()..])?,
            Some(a) if a.starts_with('-') => {
                return Err(format!("{tool} option {} is not supported", shown(a)))
            }
            Some(a) => break Some(a),
        }
    };
    let rest = it.cloned().collect();
    match (package, first) {
        (None, None) => Err(format!("{tool} without a package")),
        (None, Some(spec)) => {
            let text = format!("npm:{spec}");
            let src = Source::parse(&text, allow_unpinned).map_err(|e| e.to_string())?;
            Ok((src, rest, text))
        }
        (Some(p), None) => Err(format!(
            "{tool} --package {} without the executable to start",
            shown(&p)
        )),
        (Some(p), Some(bin)) => {
            let text = format!("npm:{p}");
            let mut src = Source::parse(&text, allow_unpinned).map_err(|e| e.to_string())?;
            if let Source::Npm { bin: b, .. } = &mut src {
                *b = Some(bin.clone());
            }
            Ok((src, rest, format!("{text} (bin {bin})")))
        }
    }
}

/// `pipx run PKG==VER ARGS`, or `pipx run --spec PKG==VER APP ARGS` to start
/// a console script not named like the package.
fn pipx_run(args: &[String], allow_unpinned: bool) -> Result<Mapped, String> {
    let shown = |s: &str| crate::display::visible_short(s, 80);
    let mut it = args.iter();
    if it.next().map(String::as_str) != Some("run") {
        return Err("only `pipx run PKG==VER` is understood".into());
    }
    let mut spec = None;
    let app = loop {
        match it.next() {
            None => return Err("pipx run without a package".into()),
            Some(a) if a == "--spec" => {
                spec = Some(it.next().ok_or("--spec without a package")?.clone());
            }
            Some(a) if a.starts_with("--spec=") => spec = Some(a["--spec=".len()..].to_string()),
            Some(a) if ["-q", "--quiet", "--no-cache"].contains(&a.as_str()) => {}
            Some(a) if a == "--python" => {
                it.next();
            }
            Some(a) if a.starts_with('-') => {
                return Err(format!("pipx option {} is not supported", shown(a)))
            }
            Some(a) => break a.clone(),
        }
    };
    let (req, script) = match spec {
        Some(s) => (s, Some(app)),
        None => (app, None),
    };
    let (src, text) = pypi_source(&req, script, allow_unpinned)?;
    Ok((src, it.cloned().collect(), text))
}

/// The PyPI source for requirement `req` (`PKG==VER`), started at console
/// script `script` when given, and the resolution as text.
fn pypi_source(
    req: &str,
    script: Option<String>,
    allow_unpinned: bool,
) -> Result<(Source, String), String> {
    let text = format!("pypi:{req}");
    let mut src = Source::parse(&text, allow_unpinned).map_err(|e| e.to_string())?;
    if let Source::Pypi { script: s, .. } = &mut src {
        s.clone_from(&script);
    }
    let text = match &script {
        Some(s) => format!("{text} (script {s})"),
        None => text,
    };
    Ok((src, text))
}

// ---------------------------------------------------------------------------
// MCPB bundles

/// The bundle a loaded manifest belongs to: the `.mcpb` file, or the folder
/// holding `manifest.json`.
fn bundle_path(loaded: &Loaded) -> PathBuf {
    let shown = loaded.path.to_string_lossy();
    match shown.strip_suffix("!manifest.json") {
        Some(file) if loaded.kind == InputKind::McpbBundle => PathBuf::from(file),
        _ => loaded
            .path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from(".")),
    }
}

fn mcpb(loaded: &Loaded) -> Result<Resolved, RunnerError> {
    let path = loaded.display_path();
    let server = loaded
        .servers
        .first()
        .ok_or_else(|| usage(format!("{path}: no server")))?;
    let launch = server
        .launch
        .as_ref()
        .ok_or_else(|| usage(format!("{path}: the manifest has no `server` to start")))?;
    let mut o = origin(loaded, &server.name);
    let Transport::Stdio { command, args, .. } = &launch.transport else {
        return Err(usage(format!("{path}: not a stdio server")));
    };
    let mut command = command.value.clone();
    let mut args: Vec<String> = args.iter().map(|a| a.value.clone()).collect();
    let mut vars: Vec<EnvVar> = launch.env.clone();
    // The guest is Linux: the `linux` override is what would run there.
    if let Some(ov) = launch
        .platform_overrides
        .iter()
        .find(|p| p.platform.value == "linux")
    {
        if let Some(c) = &ov.command {
            command = c.value.clone();
        }
        if let Some(a) = &ov.args {
            args = a.iter().map(|a| a.value.clone()).collect();
        }
        for e in &ov.env {
            vars.retain(|v| v.name.value != e.name.value);
            vars.push(e.clone());
        }
        o.notes
            .push("applied the manifest's linux platform override".into());
    }
    let user = UserConfig::read(&loaded.doc, server.node);
    let command = match user.expand(&command, &mut o).as_slice() {
        [one] => one.clone(),
        _ => {
            return Err(usage(format!(
                "{path}: `mcp_config.command` expands to several words"
            )))
        }
    };
    let mut entry: Vec<String> = Vec::new();
    for a in &args {
        entry.extend(user.expand(a, &mut o));
    }
    let runtime = match command.as_str() {
        "node" | "nodejs" => Runtime::Node,
        "python" | "python3" => Runtime::Python,
        c if c.starts_with("{app}/") && !c.contains("/../") => {
            entry.insert(0, c.to_string());
            Runtime::Binary
        }
        "uv" | "uvx" => {
            return Err(usage(format!(
                "{path}: a `uv` bundle installs its dependencies from the network when it starts; the guest has none"
            )))
        }
        other => {
            return Err(usage(format!(
                "{path}: `mcp_config.command` {:?} is neither node, python nor a program in the bundle",
                crate::display::visible_short(other, 80)
            )))
        }
    };
    let mut env = Vec::new();
    let mut bundle_env = Vec::new();
    for v in &vars {
        let name = v.name.value.clone();
        let before = o.placeholders.len();
        let value = user
            .expand(
                v.value.as_ref().map(|s| s.value.as_str()).unwrap_or(""),
                &mut o,
            )
            .join(",");
        if v.secret || o.placeholders.len() != before {
            o.placeholders.push(format!("env {name}"));
            env.push((name, value));
        } else {
            bundle_env.push((name, value));
        }
    }
    let bundle = Bundle {
        path: bundle_path(loaded),
        name: server.name.clone(),
        version: launch
            .package
            .as_ref()
            .and_then(|p| p.version.as_ref())
            .map(|v| v.value.clone())
            .unwrap_or_default(),
        runtime,
        entry,
        env: bundle_env,
    };
    o.resolved = format!("mcpb:{}", bundle.path.display());
    Ok(Resolved {
        source: Source::Bundle(bundle),
        args: Vec::new(),
        env,
        headers: Vec::new(),
        origin: o,
    })
}

/// A bundle's `user_config`: each key's default, and whether it is sensitive.
struct UserConfig {
    entries: Vec<(String, Option<Vec<String>>, bool)>,
}

impl UserConfig {
    fn read(doc: &Document, root: Option<NodeId>) -> Self {
        let mut entries = Vec::new();
        let uc = root.and_then(|r| doc.get(r, "user_config"));
        for (k, v) in uc.and_then(|u| doc.members(u)).into_iter().flatten() {
            let key = doc.str(k).unwrap_or_default().into_owned();
            let sensitive = doc
                .get(v, "sensitive")
                .and_then(|s| doc.as_bool(s))
                .unwrap_or(false);
            let default = doc.get(v, "default").and_then(|d| match doc.kind(d) {
                Kind::String => Some(vec![doc.str(d).unwrap_or_default().into_owned()]),
                Kind::Number | Kind::Bool => Some(vec![doc.raw(d).to_string()]),
                Kind::Array => Some(
                    doc.array(d)
                        .unwrap_or_default()
                        .iter()
                        .filter_map(|&n| match doc.kind(n) {
                            Kind::String => Some(doc.str(n).unwrap_or_default().into_owned()),
                            Kind::Number | Kind::Bool => Some(doc.raw(n).to_string()),
                            _ => None,
                        })
                        .collect(),
                ),
                _ => None,
            });
            entries.push((key, default, sensitive));
        }
        UserConfig { entries }
    }

    /// Expands the manifest's variables in one argument: `${__dirname}` is the
    /// bundle (`{app}`), home and user folders are the guest's `/tmp`, a
    /// `user_config` value is its published default unless sensitive, else a
    /// placeholder. An argument that is exactly one list-valued reference
    /// becomes one argument per item.
    fn expand(&self, s: &str, o: &mut Origin) -> Vec<String> {
        let lookup = |key: &str, o: &mut Origin| -> Vec<String> {
            match self.entries.iter().find(|(k, _, _)| k == key) {
                Some((_, Some(d), false)) => d.iter().map(|v| self.simple(v)).collect(),
                _ => {
                    let tag = format!("user_config {key}");
                    if !o.placeholders.contains(&tag) {
                        o.placeholders.push(tag);
                    }
                    vec![placeholder(key)]
                }
            }
        };
        if let Some(key) = s
            .strip_prefix("${user_config.")
            .and_then(|r| r.strip_suffix('}'))
            .filter(|k| !k.contains('}'))
        {
            return lookup(key, o);
        }
        let mut out = String::new();
        let mut rest = s;
        while let Some(i) = rest.find("${") {
            out.push_str(&rest[..i]);
            let after = &rest[i + 2..];
            let Some(end) = after.find('}') else {
                out.push_str(&rest[i..]);
                rest = "";
                break;
            };
            let var = &after[..end];
            match var.strip_prefix("user_config.") {
                Some(key) => out.push_str(&lookup(key, o).join(",")),
                None => out.push_str(&self.simple(&format!("${{{var}}}"))),
            }
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        vec![out]
    }

    /// The built-in variables (no user_config).
    fn simple(&self, s: &str) -> String {
        s.replace("${__dirname}", "{app}")
            .replace("${HOME}", "/tmp")
            .replace("${DESKTOP}", "/tmp")
            .replace("${DOCUMENTS}", "/tmp")
            .replace("${DOWNLOADS}", "/tmp")
            .replace("${pathSeparator}", "/")
            .replace("${/}", "/")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_text(name: &str, text: &str) -> Loaded {
        crate::manifest::load::load_bytes(
            Path::new(name),
            text.as_bytes().to_vec(),
            &LoadOptions::default(),
        )
        .expect("loads")
    }

    fn pick(server: Option<&str>, package: Option<usize>) -> Pick {
        Pick {
            server: server.map(str::to_owned),
            package,
        }
    }

    fn err(r: Result<Resolved, RunnerError>) -> String {
        r.expect_err("refused").to_string()
    }

    const WEATHER: &str = r#"{"name":"io.github.x/weather","description":"d","version":"1.4.2",
      "packages":[
        {"registryType":"oci","identifier":"ghcr.io/x/weather","version":"1.4.2","transport":{"type":"stdio"}},
        {"registryType":"npm","identifier":"@acme/weather-mcp","version":"1.4.2",
         "transport":{"type":"stdio"},
         "runtimeArguments":[{"type":"named","name":"--node-options","value":"--max-old-space-size=512"}],
         "packageArguments":[{"type":"named","name":"--units","value":"metric"},
                             {"type":"positional","valueHint":"city"}],
         "environmentVariables":[{"name":"WEATHER_KEY","isSecret":true,"default":"published-secret"},
                                 {"name":"LOG_LEVEL","default":"info"},
                                 {"name":"REGION"}]},
        {"registryType":"pypi","identifier":"weather-mcp","version":"1.4.2","transport":{"type":"stdio"}}
      ]}"#;

    #[test]
    fn a_server_json_package_with_its_arguments_and_placeholders() {
        let l = load_text("server.json", WEATHER);
        let r = resolve(&l, &pick(None, Some(1)), false).expect("resolves");
        assert_eq!(
            r.source,
            Source::Npm {
                name: "@acme/weather-mcp".into(),
                version: Some("1.4.2".into()),
                bin: None,
            }
        );
        assert_eq!(r.args, ["--units", "metric", "{city}"]);
        assert_eq!(
            r.env,
            [
                (
                    "WEATHER_KEY".into(),
                    "mcplint-placeholder-WEATHER_KEY".into()
                ),
                ("LOG_LEVEL".into(), "info".into()),
                ("REGION".into(), "mcplint-placeholder-REGION".into()),
            ]
        );
        assert_eq!(r.origin.package_index, Some(1));
        assert_eq!(r.origin.resolved, "npm:@acme/weather-mcp@1.4.2");
        assert_eq!(r.origin.placeholders, ["env WEATHER_KEY", "env REGION"]);
        assert!(
            r.origin.notes.iter().any(|n| n.contains("--node-options")),
            "{:?}",
            r.origin.notes
        );

        let r = resolve(&l, &pick(None, Some(2)), false).expect("resolves");
        assert_eq!(r.origin.resolved, "pypi:weather-mcp==1.4.2");
        assert!(r.args.is_empty());
    }

    #[test]
    fn a_server_json_with_several_packages_needs_a_pick() {
        let l = load_text("server.json", WEATHER);
        let e = err(resolve(&l, &Pick::default(), false));
        assert!(
            e.contains("--package N") && e.contains("--package 2: pypi weather-mcp 1.4.2"),
            "{e}"
        );
        let e = err(resolve(&l, &pick(None, Some(0)), false));
        assert!(e.contains("`oci` package"), "{e}");
        let e = err(resolve(&l, &pick(None, Some(7)), false));
        assert!(e.contains("no package 7"), "{e}");
        // By its loaded name, as approvals pick it.
        let r =
            resolve(&l, &pick(Some("io.github.x/weather [pypi]"), None), false).expect("by name");
        assert_eq!(r.origin.package_index, Some(2));
        // One npm package among others that cannot run is picked alone.
        let two = WEATHER.replace(
            r#"{"registryType":"pypi","identifier":"weather-mcp","version":"1.4.2","transport":{"type":"stdio"}}"#,
            r#"{"registryType":"nuget","identifier":"W","version":"1.4.2"}"#,
        );
        let r = resolve(&load_text("server.json", &two), &Pick::default(), false).expect("one npm");
        assert_eq!(r.origin.package_index, Some(1));
        assert!(r
            .origin
            .notes
            .iter()
            .any(|n| n.contains("only npm or PyPI")));
    }

    #[test]
    fn a_server_json_without_a_pin_is_refused_unless_allowed() {
        let text = r#"{"name":"io.github.x/w","description":"d","version":"1",
          "packages":[{"registryType":"npm","identifier":"w-mcp","transport":{"type":"stdio"}}]}"#;
        let l = load_text("server.json", text);
        assert!(err(resolve(&l, &Pick::default(), false)).contains("exact version"));
        let r = resolve(&l, &Pick::default(), true).expect("allowed");
        assert_eq!(r.origin.resolved, "npm:w-mcp");
        let ranged = text.replace(
            r#""identifier":"w-mcp""#,
            r#""identifier":"w-mcp","version":"^1.0.0""#,
        );
        assert!(err(resolve(
            &load_text("server.json", &ranged),
            &Pick::default(),
            false
        ))
        .contains("exact version"));
    }

    #[test]
    fn a_server_json_remote_gets_placeholder_headers() {
        let text = r#"{"name":"io.github.x/w","description":"d","version":"1",
          "remotes":[{"type":"streamable-http","url":"https://mcp.example.com/mcp",
                      "headers":[{"name":"Authorization","value":"Bearer {token}","isSecret":true}]}]}"#;
        let r = resolve(&load_text("server.json", text), &Pick::default(), false).expect("remote");
        assert_eq!(
            r.source,
            Source::Remote("https://mcp.example.com/mcp".into())
        );
        assert_eq!(
            r.headers,
            [(
                "Authorization".into(),
                "mcplint-placeholder-Authorization".into()
            )]
        );
    }

    const SECRET: &str = "ghp_0123456789abcdefghijklmnopqrstuvwxyz";

    fn config(entries: &str) -> Loaded {
        load_text(
            "mcp.json",
            &format!(r#"{{"mcpServers": {{ {entries} }} }}"#),
        )
    }

    /// True if the real secret reaches the server anywhere.
    fn leaks(r: &Resolved) -> bool {
        r.args
            .iter()
            .chain(r.env.iter().map(|(_, v)| v))
            .chain(r.headers.iter().map(|(_, v)| v))
            .any(|v| v.contains(SECRET))
    }

    #[test]
    fn a_client_entry_npx_pinned_with_secrets_replaced() {
        let l = config(&format!(
            r#""gh": {{"command": "npx", "args": ["-y", "@acme/gh-mcp@2.0.1", "--token", "{SECRET}", "--api-key={SECRET}", "--repo", "x/y", "${{workspaceFolder}}"],
                      "env": {{"GITHUB_TOKEN": "{SECRET}", "LOG": "debug", "REF": "${{env:HOME}}"}}}}"#
        ));
        let r = resolve(&l, &Pick::default(), false).expect("resolves");
        assert_eq!(
            r.source,
            Source::Npm {
                name: "@acme/gh-mcp".into(),
                version: Some("2.0.1".into()),
                bin: None,
            }
        );
        assert!(!leaks(&r), "{r:?}");
        assert_eq!(
            r.args,
            [
                "--token",
                "mcplint-placeholder-args3",
                "--api-key=mcplint-placeholder-args4",
                "--repo",
                "x/y",
                "mcplint-placeholder-args7"
            ]
        );
        assert_eq!(
            r.env,
            [
                (
                    "GITHUB_TOKEN".into(),
                    "mcplint-placeholder-GITHUB_TOKEN".into()
                ),
                ("LOG".into(), "mcplint-placeholder-LOG".into()),
                ("REF".into(), "mcplint-placeholder-REF".into()),
            ]
        );
        assert_eq!(r.origin.server, "gh");
        assert_eq!(r.origin.resolved, "npm:@acme/gh-mcp@2.0.1");
        assert!(r
            .origin
            .placeholders
            .contains(&"env GITHUB_TOKEN".to_string()));
    }

    #[test]
    fn client_entries_uvx_forms() {
        for (args, name, script, rest) in [
            (
                r#"["mcp-server-time==2026.10.19", "--local-timezone", "UTC"]"#,
                "mcp-server-time",
                None,
                vec!["--local-timezone", "UTC"],
            ),
            (
                r#"["mcp-server-time@2026.10.19"]"#,
                "mcp-server-time",
                None,
                vec![],
            ),
            (
                r#"["--from", "acme-tools==1.0", "acme-mcp", "--x"]"#,
                "acme-tools",
                Some("acme-mcp"),
                vec!["--x"],
            ),
        ] {
            assert_pypi_entry("uvx", args, name, script, &rest);
        }
        let l =
            config(r#""t": {"command": "uv", "args": ["tool", "run", "mcp-server-time==1.0.0"]}"#);
        assert!(resolve(&l, &Pick::default(), false).is_ok());
    }

    #[test]
    fn client_entries_npm_runner_forms() {
        // Command, its arguments, the pin, the bin asked for, the server's arguments.
        type Case = (
            &'static str,
            &'static str,
            &'static str,
            Option<&'static str>,
            Vec<&'static str>,
        );
        let cases: [Case; 7] = [
            (
                "npx",
                r#"["-y", "@acme/x@1.0.0", "--a"]"#,
                "@acme/x@1.0.0",
                None,
                vec!["--a"],
            ),
            (
                "npx",
                r#"["--package", "@acme/tools@2.1.0", "-y", "acme-mcp", "stdio"]"#,
                "@acme/tools@2.1.0",
                Some("acme-mcp"),
                vec!["stdio"],
            ),
            (
                "npx",
                r#"["-p", "t@1.0.0", "t-mcp"]"#,
                "t@1.0.0",
                Some("t-mcp"),
                vec![],
            ),
            (
                "npx",
                r#"["--package=t@1.0.0", "t-mcp", "--b"]"#,
                "t@1.0.0",
                Some("t-mcp"),
                vec!["--b"],
            ),
            (
                "pnpm",
                r#"["dlx", "t@1.0.0", "--c"]"#,
                "t@1.0.0",
                None,
                vec!["--c"],
            ),
            (
                "yarn",
                r#"["dlx", "-p", "t@1.0.0", "srv"]"#,
                "t@1.0.0",
                Some("srv"),
                vec![],
            ),
            ("bunx", r#"["t@3.0.0"]"#, "t@3.0.0", None, vec![]),
        ];
        for (command, args, pin, bin, rest) in cases {
            let l = config(&format!(
                r#""t": {{"command": "{command}", "args": {args}}}"#
            ));
            let r = resolve(&l, &Pick::default(), false).expect("resolves");
            let (name, version) = pin.rsplit_once('@').expect("a pin");
            let want = Source::Npm {
                name: name.into(),
                version: Some(version.into()),
                bin: bin.map(str::to_owned),
            };
            assert_eq!(r.source, want, "{command} {args}");
            let text = match bin {
                Some(b) => format!("npm:{pin} (bin {b})"),
                None => format!("npm:{pin}"),
            };
            assert_eq!(r.origin.resolved, text);
            assert_eq!(r.args, rest, "{command} {args}");
        }
    }

    #[test]
    fn client_entries_pipx_forms() {
        for (args, name, script, rest) in [
            (
                r#"["run", "mcp-server-time==2026.10.19", "--x"]"#,
                "mcp-server-time",
                None,
                vec!["--x"],
            ),
            (
                r#"["run", "--spec", "acme-tools==1.0", "acme-mcp", "--y"]"#,
                "acme-tools",
                Some("acme-mcp"),
                vec!["--y"],
            ),
            (
                r#"["run", "--no-cache", "--spec=acme-tools==1.0", "acme-mcp"]"#,
                "acme-tools",
                Some("acme-mcp"),
                vec![],
            ),
        ] {
            assert_pypi_entry("pipx", args, name, script, &rest);
        }
    }

    /// A client entry `command args` resolves to PyPI package `name` (pinned),
    /// started at `script`, with the server's arguments `rest`.
    fn assert_pypi_entry(
        command: &str,
        args: &str,
        name: &str,
        script: Option<&str>,
        rest: &[&str],
    ) {
        let l = config(&format!(
            r#""t": {{"command": "{command}", "args": {args}}}"#
        ));
        let r = resolve(&l, &Pick::default(), false).expect("resolves");
        match &r.source {
            Source::Pypi {
                name: n,
                script: s,
                version,
            } => {
                assert_eq!(n, name, "{command} {args}");
                assert_eq!(s.as_deref(), script, "{command} {args}");
                assert!(version.is_some());
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(r.args, rest, "{command} {args}");
    }

    #[test]
    fn client_entries_that_are_refused() {
        for (entry, why) in [
            (
                r#""a": {"command": "npx", "args": ["-y", "@acme/x"]}"#,
                "exact version",
            ),
            (
                r#""a": {"command": "npx", "args": ["-y", "@acme/x@latest"]}"#,
                "exact version",
            ),
            (
                r#""a": {"command": "uvx", "args": ["mcp-server-time"]}"#,
                "exact version",
            ),
            (
                r#""a": {"command": "npx", "args": ["--package", "x@1.0.0"]}"#,
                "without the executable",
            ),
            (
                r#""a": {"command": "npx", "args": ["-p", "x@1.0.0", "-p", "y@1.0.0", "y"]}"#,
                "several packages",
            ),
            (
                r#""a": {"command": "npx", "args": ["--package", "x", "y"]}"#,
                "exact version",
            ),
            (
                r#""a": {"command": "npx", "args": ["-c", "x"]}"#,
                "not supported",
            ),
            (
                r#""a": {"command": "pnpm", "args": ["exec", "x"]}"#,
                "pnpm dlx",
            ),
            (
                r#""a": {"command": "pipx", "args": ["install", "x==1.0"]}"#,
                "pipx run",
            ),
            (
                r#""a": {"command": "pipx", "args": ["run", "x"]}"#,
                "exact version",
            ),
            (
                r#""a": {"command": "docker", "args": ["run", "-i", "img"]}"#,
                "container",
            ),
            (
                r#""a": {"command": "/usr/local/bin/my-server"}"#,
                "not a package runner",
            ),
            (
                r#""a": {"command": "uv", "args": ["run", "server.py"]}"#,
                "uv tool run",
            ),
            (
                r#""a": {"command": "node", "args": ["/nonexistent/mcplint/x.js"]}"#,
                "node /nonexistent",
            ),
        ] {
            let e = err(resolve(&config(entry), &Pick::default(), false));
            assert!(e.contains(why), "{entry}: {e}");
        }
    }

    #[test]
    fn client_entries_are_picked_by_name() {
        let l = config(
            r#""a": {"command": "npx", "args": ["a@1.0.0"]}, "b": {"command": "npx", "args": ["b@2.0.0"]}"#,
        );
        let e = err(resolve(&l, &Pick::default(), false));
        assert!(e.contains("--server NAME") && e.contains("a, b"), "{e}");
        let r = resolve(&l, &pick(Some("b"), None), false).expect("b");
        assert_eq!(r.origin.resolved, "npm:b@2.0.0");
        assert!(err(resolve(&l, &pick(Some("c"), None), false)).contains("no server named"));
        assert!(err(resolve(&l, &pick(Some("a"), Some(0)), false)).contains("--package picks"));
    }

    #[test]
    fn a_client_entry_node_script_maps_to_its_package_folder() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pkg = dir.path().join("srv");
        std::fs::create_dir_all(pkg.join("dist")).expect("mkdir");
        std::fs::write(
            pkg.join("package.json"),
            r#"{"name":"srv","version":"1.0.0"}"#,
        )
        .expect("write");
        std::fs::write(pkg.join("dist/index.js"), "").expect("write");
        let cfg = dir.path().join("mcp.json");
        std::fs::write(
            &cfg,
            r#"{"mcpServers":{"s":{"command":"node","args":["srv/dist/index.js","--flag"]}}}"#,
        )
        .expect("write");
        let r = load(&cfg, &Pick::default(), false).expect("resolves");
        match &r.source {
            Source::NodeScript { package, script } => {
                assert_eq!(package, &std::fs::canonicalize(&pkg).expect("canon"));
                assert_eq!(script, "dist/index.js");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(r.args, ["--flag"]);
    }

    #[test]
    fn a_remote_client_entry_never_sends_the_real_header() {
        let l = config(&format!(
            r#""r": {{"url": "https://mcp.example.com/mcp", "headers": {{"Authorization": "Bearer {SECRET}"}}}}"#
        ));
        let r = resolve(&l, &Pick::default(), false).expect("remote");
        assert_eq!(
            r.source,
            Source::Remote("https://mcp.example.com/mcp".into())
        );
        assert!(!leaks(&r));
        assert_eq!(r.origin.placeholders, ["header Authorization"]);
    }

    fn bundle(server: &str, user_config: &str) -> Loaded {
        load_text(
            "b/manifest.json",
            &format!(
                r#"{{"manifest_version":"0.3","name":"b","version":"2.1.0","description":"d",
                    "author":{{"name":"a"}},"server":{server},"user_config":{{ {user_config} }} }}"#
            ),
        )
    }

    #[test]
    fn a_bundle_runs_its_mcp_config_with_user_config_defaults_and_placeholders() {
        let l = bundle(
            r#"{"type":"node","entry_point":"server/index.js","mcp_config":{"command":"node",
                "args":["${__dirname}/server/index.js","--dir=${user_config.dir}","${user_config.more}"],
                "env":{"KEY":"${user_config.key}","PLAIN":"x","CACHE":"${HOME}/c","NOVAL":"${user_config.novalue}"}}}"#,
            r#""key":{"type":"string","title":"k","sensitive":true,"default":"published"},
               "dir":{"type":"directory","title":"d","default":"${HOME}/data"},
               "more":{"type":"directory","title":"m","multiple":true,"default":["/x","/y"]},
               "novalue":{"type":"string","title":"n"}"#,
        );
        let r = resolve(&l, &Pick::default(), false).expect("resolves");
        let Source::Bundle(b) = &r.source else {
            panic!("{:?}", r.source)
        };
        assert_eq!(b.path, PathBuf::from("b"));
        assert_eq!((b.name.as_str(), b.version.as_str()), ("b", "2.1.0"));
        assert_eq!(b.runtime, Runtime::Node);
        assert_eq!(
            b.entry,
            ["{app}/server/index.js", "--dir=/tmp/data", "/x", "/y"]
        );
        assert_eq!(
            b.env,
            [
                ("PLAIN".into(), "x".into()),
                ("CACHE".into(), "/tmp/c".into())
            ]
        );
        assert_eq!(
            r.env,
            [
                ("KEY".into(), "mcplint-placeholder-key".into()),
                ("NOVAL".into(), "mcplint-placeholder-novalue".into()),
            ]
        );
        assert!(!format!("{r:?}").contains("published"));
        assert_eq!(
            r.origin.placeholders,
            [
                "user_config key",
                "env KEY",
                "user_config novalue",
                "env NOVAL"
            ]
        );
    }

    #[test]
    fn bundles_linux_override_binary_and_refusals() {
        let l = bundle(
            r#"{"type":"binary","entry_point":"bin/s","mcp_config":{"command":"${__dirname}/bin/s.exe",
                "platform_overrides":{"linux":{"command":"${__dirname}/bin/s","args":["--stdio"]}}}}"#,
            "",
        );
        let r = resolve(&l, &Pick::default(), false).expect("resolves");
        let Source::Bundle(b) = &r.source else {
            panic!()
        };
        assert_eq!(b.runtime, Runtime::Binary);
        assert_eq!(b.entry, ["{app}/bin/s", "--stdio"]);
        assert!(r.origin.notes.iter().any(|n| n.contains("linux")));

        let uv = bundle(r#"{"type":"uv","entry_point":"server.py"}"#, "");
        assert!(err(resolve(&uv, &Pick::default(), false)).contains("network"));
        let other = bundle(
            r#"{"type":"binary","entry_point":"x","mcp_config":{"command":"/usr/bin/env"}}"#,
            "",
        );
        assert!(err(resolve(&other, &Pick::default(), false)).contains("neither node"));
        let py = bundle(
            r#"{"type":"python","entry_point":"server/main.py","mcp_config":{"command":"python3","args":["${__dirname}/server/main.py"],"env":{"PYTHONPATH":"${__dirname}/server/lib"}}}"#,
            "",
        );
        let r = resolve(&py, &Pick::default(), false).expect("python");
        let Source::Bundle(b) = &r.source else {
            panic!()
        };
        assert_eq!(b.runtime, Runtime::Python);
        assert_eq!(b.env, [("PYTHONPATH".into(), "{app}/server/lib".into())]);
        assert!(err(resolve(&py, &pick(Some("x"), None), false)).contains("one server"));
    }

    #[test]
    fn a_capture_is_not_a_launch_spec() {
        let l = load_text("c.json", r#"{"tools":[]}"#);
        assert!(err(resolve(&l, &Pick::default(), false)).contains("nothing to launch"));
    }
}
