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

/// A server's current manifest.
#[derive(Debug, Clone)]
pub struct Current {
    /// The loaded file.
    pub loaded: Loaded,
    /// Which of its servers is this one.
    pub index: usize,
    /// The package artifact's integrity hash, when the source gives one.
    pub integrity: Option<String>,
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
    /// The source is a package, a URL or a launch spec: the runner must boot it.
    #[error(
        "{server}: `{source_text}`: fetching package sources needs the runner (`mcplint fetch`)"
    )]
    #[diagnostic(
        code(mcplint::needs_runner),
        help("fetch a manifest with the runner, or point the source at a captured manifest with file:PATH")
    )]
    NeedsRunner {
        /// The server's name.
        server: String,
        /// The source as written.
        source_text: String,
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
    let needs_runner = || SourceError::NeedsRunner {
        server: cfg.name.clone(),
        source_text: cfg.source_text.clone(),
    };
    let path: &Path = match &cfg.source {
        Source::File(p) | Source::Path(p) => p,
        Source::Npm { .. } | Source::Pypi { .. } | Source::Url(_) => return Err(needs_runner()),
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
        // A server.json or client config: it says how to launch, not what tools.
        return Err(needs_runner());
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
    })
}
