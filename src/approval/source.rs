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
    /// The package a launch-spec source resolved to (`npm:ID@VERSION`).
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
    /// The source is a package, a URL or a launch spec: the runner must boot it.
    #[error(
        "{server}: `{source_text}` is a launch spec (server.json or client config): fetching from one is not built yet"
    )]
    #[diagnostic(
        code(mcplint::needs_runner),
        help("use the package itself as the source (npm:PKG@VERSION, pypi:PKG==VERSION), or a manifest captured with `mcplint fetch` as file:PATH")
    )]
    NeedsRunner {
        /// The server's name.
        server: String,
        /// The source as written.
        source_text: String,
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
    let needs_runner = || SourceError::NeedsRunner {
        server: cfg.name.clone(),
        source_text: cfg.source_text.clone(),
    };
    let path: &Path = match &cfg.source {
        Source::File(p) | Source::Path(p) => p,
        Source::Npm { .. } | Source::Pypi { .. } | Source::Url(_) => {
            return fetch_live(cfg, &cfg.source_text, Vec::new(), Vec::new(), opts)
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
        // A server.json or client config says how to launch, not what tools:
        // fetch the pinned package it names with the runner.
        return match package_source(&loaded, &cfg.name) {
            Some(p) => {
                let mut current = fetch_live(cfg, &p.source, p.env, p.secrets, opts)?;
                current.package = Some(p.source);
                Ok(current)
            }
            None => Err(needs_runner()),
        };
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

/// The runner source (`npm:ID@VERSION`, `pypi:ID==VERSION`) of the npm or PyPI
/// package a launch spec names (the server called `name` when there are
/// several), with a placeholder for each environment variable it declares
/// (a server is never given a real credential), and the names of those it
/// marks secret (`isSecret`).
fn package_source(loaded: &Loaded, name: &str) -> Option<PackageSource> {
    let launches: Vec<&crate::manifest::Launch> = loaded
        .servers
        .iter()
        .filter_map(|s| s.launch.as_ref())
        .collect();
    let pick = loaded
        .servers
        .iter()
        .find(|s| s.name == name)
        .and_then(|s| s.launch.as_ref())
        .or_else(|| launches.iter().copied().find(|l| l.package.is_some()))?;
    let pkg = pick.package.as_ref()?;
    let version = &pkg.version.as_ref()?.value;
    let source = match pkg.registry.as_str() {
        "npm" => format!("npm:{}@{version}", pkg.identifier.value),
        "pypi" => format!("pypi:{}=={version}", pkg.identifier.value),
        _ => return None,
    };
    let env = pick
        .env
        .iter()
        .map(|e| {
            (
                e.name.value.clone(),
                format!("mcplint-placeholder-{}", e.name.value),
            )
        })
        .collect();
    let secrets = pick
        .env
        .iter()
        .filter(|e| e.secret)
        .map(|e| e.name.value.clone())
        .collect();
    Some(PackageSource {
        source,
        env,
        secrets,
    })
}

/// What [`package_source`] found.
struct PackageSource {
    /// `npm:ID@VERSION` or `pypi:ID==VERSION`.
    source: String,
    /// Each declared variable with its placeholder.
    env: Vec<(String, String)>,
    /// The names of those marked secret.
    secrets: Vec<String>,
}

/// Fetches a package or remote source with the runner (a throwaway microVM for
/// packages, plain HTTPS for remote servers) and loads the capture it returns.
/// `env` comes first; the server's own `env` from mcplint.toml overrides it.
/// Secrets (`secrets` from the launch spec and from mcplint.toml) are given
/// placeholders by the runner, never their values, and recorded as such;
/// `allow_hosts` opens the runner's egress proxy to those hosts.
fn fetch_live(
    cfg: &ServerConfig,
    source_text: &str,
    mut env: Vec<(String, String)>,
    mut secrets: Vec<String>,
    opts: &LoadOptions,
) -> Result<Current, SourceError> {
    use crate::runner::{self, FetchOptions, Sandbox, Target};
    let fail = |message: String| SourceError::Fetch {
        server: cfg.name.clone(),
        source_text: cfg.source_text.clone(),
        message: crate::display::visible_with(&message, true),
    };
    let source =
        runner::source::Source::parse(source_text, false).map_err(|e| fail(e.to_string()))?;
    env.retain(|(k, _)| !cfg.env.contains_key(k));
    env.extend(cfg.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    for s in &cfg.secrets {
        if !secrets.contains(s) {
            secrets.push(s.clone());
        }
    }
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
        server_args: cfg.args.clone(),
        headers: Vec::new(),
        source_text: source_text.to_string(),
        notes: vec![format!(
            "fetched for mcplint.toml server `{}` ({})",
            cfg.name, cfg.source_text
        )],
        allow_hosts: cfg.allow_hosts.clone(),
        secrets,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_json_names_its_pinned_package_with_placeholders() {
        let text = br#"{"name":"io.github.x/weather","description":"d","version":"1.4.2",
          "packages":[{"registryType":"npm","identifier":"@acme/weather-mcp","version":"1.4.2",
            "transport":{"type":"stdio"},
            "environmentVariables":[{"name":"WEATHER_KEY","isSecret":true},{"name":"REGION"}]}]}"#;
        let loaded = crate::manifest::load::load_bytes(
            Path::new("server.json"),
            text.to_vec(),
            &LoadOptions::default(),
        )
        .expect("loads");
        let PackageSource {
            source,
            env,
            secrets,
        } = package_source(&loaded, "weather").expect("a package");
        assert_eq!(source, "npm:@acme/weather-mcp@1.4.2");
        assert_eq!(
            env,
            vec![
                (
                    "WEATHER_KEY".to_string(),
                    "mcplint-placeholder-WEATHER_KEY".to_string()
                ),
                (
                    "REGION".to_string(),
                    "mcplint-placeholder-REGION".to_string()
                )
            ]
        );
        // Only the variable marked isSecret is recorded as a secret.
        assert_eq!(secrets, ["WEATHER_KEY"]);
        // An OCI image is not something the runner can boot.
        let oci = br#"{"name":"io.github.x/w","description":"d","version":"1",
          "packages":[{"registryType":"oci","identifier":"ghcr.io/x/w","version":"1","transport":{"type":"stdio"}}]}"#;
        let loaded = crate::manifest::load::load_bytes(
            Path::new("server.json"),
            oci.to_vec(),
            &LoadOptions::default(),
        )
        .expect("loads");
        assert!(package_source(&loaded, "w").is_none());
    }
}
