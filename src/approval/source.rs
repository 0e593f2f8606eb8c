//! From a `[servers.NAME]` entry to the server's current manifest.
//!
//! Every command that needs "what the server shows now" goes through
//! [`current_manifest`], so the runner plugs in at one place. Local manifests
//! are read here; package and URL sources, and `server.json` launch specs,
//! need the runner to boot the server and list its tools.

use std::path::Path;

use crate::config::{ServerConfig, Source};
use crate::manifest::load::{load_file, LoadError, LoadOptions};
use crate::manifest::{Completeness, Loaded, Server};
use crate::runner;

/// A server's current manifest.
#[derive(Debug, Clone)]
pub struct Current {
    /// The loaded file.
    pub loaded: Loaded,
    /// Which of its servers is this one.
    pub index: usize,
    /// The package artifact's integrity hash, when the source gives one.
    pub integrity: Option<String>,
    /// What a launch-spec source resolved to (`npm:ID@VERSION`, ...).
    pub package: Option<String>,
}

impl Current {
    /// The server.
    pub fn server(&self) -> &Server {
        &self.loaded.servers[self.index]
    }
}

/// Why the current manifest could not be had.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum SourceError {
    /// The source is a launch spec the runner cannot start.
    #[error("{server}: `{source_text}` is a launch spec the runner cannot start: {why}")]
    #[diagnostic(
        code(mcplint::needs_runner),
        help("use the package itself as the source (npm:PKG@VERSION, pypi:PKG==VERSION), or a manifest captured with `mcplint fetch` as file:PATH")
    )]
    NeedsRunner {
        /// The server's name.
        server: String,
        /// The source as written.
        source_text: String,
        /// Why not.
        why: String,
    },
    /// The runner could not fetch the server.
    #[error("{server}: fetching `{source_text}` failed: {message}")]
    #[diagnostic(
        code(mcplint::fetch_failed),
        help("run `mcplint fetch {source_text}` to see the whole error; `mcplint runner status` checks the guest image")
    )]
    Fetch {
        /// The server's name.
        server: String,
        /// The source as written.
        source_text: String,
        /// What went wrong.
        message: String,
    },
    /// The manifest could not be loaded.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Load(#[from] LoadError),
    /// The file holds several servers and none has this name.
    #[error("{path}: holds {count} servers and none is named `{server}`")]
    #[diagnostic(code(mcplint::which_server))]
    WhichServer {
        /// The file.
        path: String,
        /// How many servers it holds.
        count: usize,
        /// The server's name.
        server: String,
    },
}

/// The current manifest of `cfg`: read for local manifests, an error naming
/// the runner for everything that must be fetched.
pub fn current_manifest(cfg: &ServerConfig, opts: &LoadOptions) -> Result<Current, SourceError> {
    let path: &Path = match &cfg.source {
        Source::File(p) | Source::Path(p) => p,
        Source::Npm { .. } | Source::Pypi { .. } | Source::Url(_) => {
            let source = runner::source::Source::parse(&cfg.source_text, false).map_err(|e| {
                SourceError::Fetch {
                    server: cfg.name.clone(),
                    source_text: cfg.source_text.clone(),
                    message: e.to_string(),
                }
            })?;
            return fetch_live(
                cfg,
                &cfg.source_text,
                source,
                Default::default(),
                None,
                opts,
            );
        }
    };
    let loaded = load_file(path, opts)?;
    let usable: Vec<usize> = loaded
        .servers
        .iter()
        .enumerate()
        .filter(|(_, s)| s.completeness != Completeness::LaunchOnly)
        .map(|(i, _)| i)
        .collect();
    if usable.is_empty() {
        // A server.json, client config or bundle manifest says how to launch,
        // not what tools: the runner resolves it (one implementation, shared
        // with `mcplint fetch`) and fetches the pinned package it names.
        let pick = runner::spec::Pick {
            server: loaded
                .servers
                .iter()
                .any(|s| s.name == cfg.name)
                .then(|| cfg.name.clone()),
            package: None,
        };
        let r =
            runner::spec::resolve(&loaded, &pick, false).map_err(|e| SourceError::NeedsRunner {
                server: cfg.name.clone(),
                source_text: cfg.source_text.clone(),
                why: crate::display::visible_with(&e.to_string(), true),
            })?;
        let resolved = r.origin.resolved.clone();
        let mut current = fetch_live(
            cfg,
            &cfg.source_text,
            r.source,
            Launched {
                env: r.env,
                args: r.args,
                headers: r.headers,
            },
            Some(r.origin),
            opts,
        )?;
        current.package = Some(resolved);
        return Ok(current);
    }
    let index = if usable.len() == 1 {
        usable[0]
    } else {
        usable
            .iter()
            .copied()
            .find(|&i| loaded.servers[i].name == cfg.name)
            .ok_or_else(|| SourceError::WhichServer {
                path: loaded.display_path(),
                count: usable.len(),
                server: cfg.name.clone(),
            })?
    };
    let integrity = loaded.servers[index]
        .launch
        .as_ref()
        .and_then(|l| l.package.as_ref())
        .and_then(|p| p.sha256.clone())
        .map(|h| format!("sha256-{h}"));
    Ok(Current {
        loaded,
        index,
        integrity,
        package: None,
    })
}

/// What a launch spec gives the server besides its package.
#[derive(Default)]
struct Launched {
    env: Vec<(String, String)>,
    args: Vec<String>,
    headers: Vec<(String, String)>,
}

/// Fetches a package or remote source with the runner (a throwaway microVM for
/// packages, plain HTTPS for remote servers) and loads the capture it returns.
/// `env` comes first; the server's own `env` from mcplint.toml overrides it.
/// `allow_hosts` opens the runner's egress proxy to those hosts.
fn fetch_live(
    cfg: &ServerConfig,
    source_text: &str,
    source: runner::source::Source,
    launched: Launched,
    origin: Option<runner::spec::Origin>,
    opts: &LoadOptions,
) -> Result<Current, SourceError> {
    use crate::runner::{FetchOptions, Sandbox, Target};
    let fail = |message: String| SourceError::Fetch {
        server: cfg.name.clone(),
        source_text: cfg.source_text.clone(),
        message: crate::display::visible_with(&message, true),
    };
    let mut env = launched.env;
    env.retain(|(k, _)| !cfg.env.contains_key(k));
    env.extend(cfg.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    let fetch_opts = FetchOptions {
        sandbox: Sandbox::Microvm,
        client: runner::client::ClientOptions::default(),
        timeout: std::time::Duration::from_secs(300),
        vm: runner::vm::VmConfig {
            memory_mib: 1024,
            cpus: 1,
        },
        accel: runner::vm::AccelChoice::Auto,
        backend: runner::firecracker::BackendChoice::Auto,
        env,
        server_args: launched.args.into_iter().chain(cfg.args.clone()).collect(),
        headers: launched.headers,
        source_text: source_text.to_string(),
        notes: vec![format!(
            "fetched for mcplint.toml server `{}` ({})",
            cfg.name, cfg.source_text
        )],
        origin,
        build_in_guest: false,
        allow_hosts: cfg.allow_hosts.clone(),
        // The runner gives each a placeholder (whatever value came with it)
        // and records it as such; the launch spec's own secrets already are
        // placeholders in `env`.
        secrets: cfg.secrets.clone(),
        progress: runner::progress_to_terminal,
    };
    let capture =
        runner::fetch(&Target::Source(source), &fetch_opts).map_err(|e| fail(e.to_string()))?;
    let integrity = capture
        .get("capture")
        .and_then(|c| c.get("integrity"))
        .and_then(|i| i.as_str())
        .map(str::to_owned);
    let bytes = serde_json::to_vec_pretty(&capture).map_err(|e| fail(e.to_string()))?;
    let label = Path::new(source_text).to_path_buf();
    let loaded = crate::manifest::load::load_bytes(&label, bytes, opts)?;
    if loaded.servers.is_empty() {
        return Err(fail("the capture holds no server".into()));
    }
    Ok(Current {
        loaded,
        index: 0,
        integrity,
        package: None,
    })
}
