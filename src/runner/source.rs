//! What to fetch, and getting it onto the host without running any of it.
//!
//! The host only downloads and unpacks: npm packages are installed with
//! `--ignore-scripts` (no lifecycle script runs), PyPI packages as wheels only
//! (`--only-binary=:all:`: an sdist would run its build code). The result is a
//! folder the guest mounts read-only at `/app`, plus the command to start the
//! server there.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::RunnerError;

/// Where the guest (or sandbox) sees the package folder.
pub const APP_DIR: &str = "/app";

/// A parsed `SOURCE` argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `npm:PKG@VERSION` (version `None` only with `--allow-unpinned`).
    Npm {
        /// Package name, scope included.
        name: String,
        /// Version or range as given.
        version: Option<String>,
        /// The executable (a key of `bin` in package.json) to start, when not
        /// the one named like the package (`npx --package PKG@VER BIN` in a
        /// client config).
        bin: Option<String>,
    },
    /// `pypi:PKG==VERSION`.
    Pypi {
        /// Distribution name.
        name: String,
        /// Version as given.
        version: Option<String>,
        /// The console script to start, when not the one named like the
        /// package (`uvx --from PKG==1.0 SCRIPT` in a client config).
        script: Option<String>,
    },
    /// `file:PATH`: an npm tarball or package folder, or a wheel.
    File(PathBuf),
    /// `https://…` (or `http://` to loopback): a remote server.
    Remote(String),
    /// `node SCRIPT` from a client config: the npm package folder holding
    /// the script, packed and installed like `file:`, started at that script.
    NodeScript {
        /// The package folder (with `package.json`).
        package: PathBuf,
        /// The script, relative to the package folder.
        script: String,
    },
    /// An MCPB bundle (`.mcpb` file or unpacked folder), started as its
    /// manifest's `mcp_config` says.
    Bundle(Bundle),
}

/// An MCPB bundle resolved to what to start (see [`super::spec`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bundle {
    /// The `.mcpb` file or the bundle folder.
    pub path: PathBuf,
    /// The manifest's `name`.
    pub name: String,
    /// The manifest's `version`.
    pub version: String,
    /// Node, Python, or a binary shipped in the bundle.
    pub runtime: Runtime,
    /// The arguments after the interpreter (for a binary: the binary first);
    /// `{app}` stands for the bundle's root.
    pub entry: Vec<String>,
    /// Environment values from the manifest that are not placeholders
    /// (`{app}` stands for the bundle's root).
    pub env: Vec<(String, String)>,
}

impl Source {
    /// Parses a source, refusing unpinned versions unless allowed.
    pub fn parse(s: &str, allow_unpinned: bool) -> Result<Source, RunnerError> {
        let bad = |m: String| Err(RunnerError::Usage(m));
        if let Some(rest) = s.strip_prefix("npm:") {
            // The version follows the last `@` that is not the scope's.
            let (name, version) = match rest[1.min(rest.len())..].rfind('@') {
                Some(i) => (&rest[..i + 1], Some(&rest[i + 2..])),
                None => (rest, None),
            };
            if !valid_npm_name(name) {
                return bad(format!("{s:?}: not a valid npm package name"));
            }
            let version = version.filter(|v| !v.is_empty());
            if !allow_unpinned && !version.is_some_and(is_exact_semver) {
                return bad(format!(
                    "{s:?}: an exact version is needed (npm:{name}@1.2.3); ranges, tags and `latest` change under you. Use --allow-unpinned to fetch whatever resolves now (the resolved version is recorded)"
                ));
            }
            return Ok(Source::Npm {
                name: name.to_owned(),
                version: version.map(str::to_owned),
                bin: None,
            });
        }
        if let Some(rest) = s.strip_prefix("pypi:") {
            let (name, version) = match rest.find("==") {
                Some(i) => (&rest[..i], Some(&rest[i + 2..])),
                None => (rest, None),
            };
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            {
                return bad(format!(
                    "{s:?}: not a valid PyPI project name (pypi:NAME==VERSION)"
                ));
            }
            let version = version.filter(|v| !v.is_empty());
            if !allow_unpinned && !version.is_some_and(is_exact_pep440) {
                return bad(format!(
                    "{s:?}: an exact version is needed (pypi:{name}==1.2.3). Use --allow-unpinned to fetch whatever resolves now (the resolved version is recorded)"
                ));
            }
            if let Some(v) = version {
                if !v
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || ".+!-_*".contains(c))
                {
                    return bad(format!(
                        "{s:?}: a version specifier other than == is not supported"
                    ));
                }
            }
            return Ok(Source::Pypi {
                name: name.to_owned(),
                version: version.map(str::to_owned),
                script: None,
            });
        }
        if let Some(rest) = s.strip_prefix("file:") {
            if rest.is_empty() {
                return bad(
                    "file: needs a path (file:./server.tgz, file:./pkg-folder, file:./x.whl)"
                        .into(),
                );
            }
            return Ok(Source::File(PathBuf::from(rest)));
        }
        if s.starts_with("https://") || s.starts_with("http://") {
            return Ok(Source::Remote(s.to_owned()));
        }
        bad(format!(
            "{s:?}: unknown source; use npm:PKG@VERSION, pypi:PKG==VERSION, file:PATH, https://URL, the path of a server.json, client config or MCPB bundle, or --command with --no-sandbox"
        ))
    }
}

fn valid_npm_name(n: &str) -> bool {
    let body = match n.strip_prefix('@') {
        Some(scoped) => match scoped.split_once('/') {
            Some((scope, name)) if !scope.is_empty() && !name.is_empty() => {
                return [scope, name].iter().all(|p| p.chars().all(npm_char));
            }
            _ => return false,
        },
        None => n,
    };
    !body.is_empty() && body.chars().all(npm_char) && !body.starts_with('.')
}

fn npm_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || "-._~".contains(c) || c.is_ascii_uppercase()
}

/// `1.2.3`, `1.2.3-beta.1`, `1.2.3+build`: an exact semver, no range.
pub fn is_exact_semver(v: &str) -> bool {
    let core = v.split(['-', '+']).next().unwrap_or("");
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-+".contains(c))
}

/// An exact PEP 440 version: digits first, no wildcard.
pub fn is_exact_pep440(v: &str) -> bool {
    v.starts_with(|c: char| c.is_ascii_digit())
        && !v.contains('*')
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || ".+!-_".contains(c))
}

/// How the server starts, once its package is in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    /// `node FILE` (FILE relative to the package folder).
    Node,
    /// `python3 -c 'from MODULE import OBJ; …'` with the folder's `site` on the path.
    Python,
    /// A program shipped in the package itself (an MCPB `binary` server).
    Binary,
}

/// A package unpacked on the host, ready to be mounted at `/app`.
#[derive(Debug)]
pub struct Prepared {
    /// The folder (mounted read-only at `/app` in the guest).
    pub dir: PathBuf,
    /// The package's name.
    pub name: String,
    /// The version that was installed.
    pub version: String,
    /// The artifact's integrity (npm `dist.integrity`, wheel sha256, file sha256).
    pub integrity: Option<String>,
    /// Node or Python.
    pub runtime: Runtime,
    /// The command line, relative to `app` (see [`Prepared::argv`]).
    entry: Vec<String>,
    /// Environment the server needs to find its code, `{app}` for the folder.
    env: Vec<(String, String)>,
    /// What a reader of the capture should know about how it was prepared.
    pub notes: Vec<String>,
}

impl Prepared {
    /// A prepared package (`entry` and `env` use `{app}` for the folder).
    pub(crate) fn new(
        dir: PathBuf,
        name: String,
        version: String,
        integrity: Option<String>,
        runtime: Runtime,
        entry: Vec<String>,
        env: Vec<(String, String)>,
    ) -> Self {
        Prepared {
            dir,
            name,
            version,
            integrity,
            runtime,
            entry,
            env,
            notes: Vec::new(),
        }
    }

    /// The command line with the package folder at `app` and the
    /// interpreters at `node` / `python`.
    pub fn argv(&self, app: &str, node: &str, python: &str) -> Vec<String> {
        let mut v = Vec::new();
        match self.runtime {
            Runtime::Node => v.push(node.to_owned()),
            Runtime::Python => v.push(python.to_owned()),
            Runtime::Binary => {}
        }
        v.extend(self.entry.iter().map(|a| a.replace("{app}", app)));
        v
    }

    /// Environment the server needs to find its code.
    pub fn env(&self, app: &str) -> Vec<(String, String)> {
        self.env
            .iter()
            .map(|(k, v)| (k.clone(), v.replace("{app}", app)))
            .collect()
    }
}

pub(crate) fn run_tool(cmd: &mut Command, what: &str) -> Result<std::process::Output, RunnerError> {
    let out = super::process::output(cmd.stdin(std::process::Stdio::null())).map_err(|e| {
        RunnerError::Prepare(format!(
            "{what}: could not run {:?}: {e}",
            cmd.get_program()
        ))
    })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: String = err
            .lines()
            .rev()
            .take(15)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n");
        return Err(RunnerError::Prepare(format!(
            "{what} failed ({}):\n{}",
            out.status,
            crate::display::visible(&tail)
        )));
    }
    Ok(out)
}

/// sha256 of a file, as `sha256-<hex>`.
pub fn file_sha256(p: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(p)?;
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h)?;
    Ok(format!("sha256:{:x}", h.finalize()))
}

/// Unpacks a package source into `work` (a fresh folder). With
/// `build_in_guest`, a PyPI package that has no wheel is laid out to be
/// built inside the sandbox (see [`super::sdist`]) instead of refused.
pub fn prepare(src: &Source, work: &Path, build_in_guest: bool) -> Result<Prepared, RunnerError> {
    match src {
        Source::Npm { name, version, bin } => {
            let spec = match version {
                Some(v) => format!("{name}@{v}"),
                None => name.clone(),
            };
            npm_install(&spec, work, None, bin.as_deref())
        }
        Source::Pypi {
            name,
            version,
            script,
        } => {
            let spec = match version {
                Some(v) => format!("{name}=={v}"),
                None => name.clone(),
            };
            match pip_install(&spec, work, None, script.as_deref()) {
                Err(RunnerError::Prepare(m)) if build_in_guest && no_wheel_for(&m, name) => {
                    let mut p =
                        super::sdist::from_pypi(name, version.as_deref(), work, script.as_deref())?;
                    p.notes.push(format!(
                        "{name} has no wheel for the guest: its sdist was built inside the sandbox (--build-in-guest)"
                    ));
                    Ok(p)
                }
                other => other,
            }
        }
        Source::File(p) => prepare_file(p, work, build_in_guest),
        Source::NodeScript { package, script } => {
            let mut prepared = prepare_file(package, work, false)?;
            let rel = script.trim_start_matches("./");
            if rel.split('/').any(|c| c == "..") || rel.starts_with('/') {
                return Err(RunnerError::Usage(format!(
                    "node {script}: the script must be inside its package folder"
                )));
            }
            let installed = work.join("node_modules").join(&prepared.name).join(rel);
            if !installed.is_file() {
                return Err(RunnerError::Prepare(format!(
                    "{}: {rel} is not in the package as `npm pack` makes it (not listed in `files`, or built by a script mcplint does not run)",
                    prepared.name
                )));
            }
            prepared.entry = vec![format!("{{app}}/node_modules/{}/{rel}", prepared.name)];
            Ok(prepared)
        }
        Source::Bundle(b) => super::bundle::prepare(b, work),
        Source::Remote(_) => Err(RunnerError::Usage(
            "a remote server has nothing to install".into(),
        )),
    }
}

/// True if pip's error says the package `name` itself has no usable wheel
/// (not one of its dependencies).
fn no_wheel_for(message: &str, name: &str) -> bool {
    let norm = |s: &str| s.to_ascii_lowercase().replace(['-', '.'], "_");
    message.lines().any(|l| {
        l.split_once("No matching distribution found for ")
            .is_some_and(|(_, req)| {
                let req_name: String = req
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || "-_.".contains(*c))
                    .collect();
                norm(&req_name) == norm(name)
            })
    })
}

/// `file:PATH`: an npm package folder or tarball, a wheel, or (with
/// `build_in_guest`) a Python sdist.
fn prepare_file(p: &Path, work: &Path, build_in_guest: bool) -> Result<Prepared, RunnerError> {
    let abs = std::fs::canonicalize(p)
        .map_err(|e| RunnerError::Usage(format!("file:{}: {e}", p.display())))?;
    let fname = abs
        .file_name()
        .and_then(|s| s.to_str())
        .unwrap_or("")
        .to_owned();
    if abs.is_dir() {
        if !abs.join("package.json").is_file() {
            return Err(RunnerError::Usage(format!(
                "file:{}: a folder must be an npm package (with package.json)",
                p.display()
            )));
        }
        // Pack it (scripts off) so what is installed is what would be published.
        let packdir = work.join(".pack");
        std::fs::create_dir_all(&packdir).map_err(|e| RunnerError::io("creating a folder", e))?;
        let out = run_tool(
            Command::new("npm")
                .args(["pack", "--ignore-scripts", "--silent", "--pack-destination"])
                .arg(&packdir)
                .arg(&abs),
            "npm pack",
        )?;
        let tgz = String::from_utf8_lossy(&out.stdout)
            .trim()
            .lines()
            .last()
            .unwrap_or("")
            .to_owned();
        let tgz = packdir.join(tgz);
        let integrity = file_sha256(&tgz).map_err(|e| RunnerError::io("hashing the tarball", e))?;
        let r = npm_install(&tgz.display().to_string(), work, Some(integrity), None);
        let _ = std::fs::remove_dir_all(&packdir);
        r
    } else if fname.ends_with(".whl") {
        let integrity = file_sha256(&abs).map_err(|e| RunnerError::io("hashing the wheel", e))?;
        pip_install(&abs.display().to_string(), work, Some(integrity), None)
    } else if fname.ends_with(".tar.gz") && super::sdist::is_python_sdist(&abs) {
        if !build_in_guest {
            return Err(RunnerError::Usage(format!(
                "file:{}: a Python sdist runs code to build; mcplint never builds on this host (--build-in-guest builds it inside the sandbox)",
                p.display()
            )));
        }
        let mut prepared = super::sdist::from_file(&abs, work)?;
        prepared
            .notes
            .push("a Python sdist, built inside the sandbox (--build-in-guest)".into());
        Ok(prepared)
    } else if fname.ends_with(".tgz") || fname.ends_with(".tar.gz") {
        let integrity = file_sha256(&abs).map_err(|e| RunnerError::io("hashing the tarball", e))?;
        npm_install(&abs.display().to_string(), work, Some(integrity), None)
    } else if fname.ends_with(".zip") {
        Err(RunnerError::Usage(format!(
            "file:{}: an sdist would run code to build; only wheels are accepted",
            p.display()
        )))
    } else {
        Err(RunnerError::Usage(format!(
            "file:{}: expected an npm tarball (.tgz), an npm package folder, or a wheel (.whl)",
            p.display()
        )))
    }
}

/// Installs `spec` with scripts off and finds what to start: the `bin`
/// named `want` when given, else the one named like the package (or the only
/// one, or the first), else `main`.
fn npm_install(
    spec: &str,
    dir: &Path,
    integrity: Option<String>,
    want: Option<&str>,
) -> Result<Prepared, RunnerError> {
    std::fs::create_dir_all(dir).map_err(|e| RunnerError::io("creating the package folder", e))?;
    // An empty package.json keeps npm from walking up to a parent project.
    std::fs::write(dir.join("package.json"), "{}\n")
        .map_err(|e| RunnerError::io("writing package.json", e))?;
    run_tool(
        Command::new("npm")
            .args([
                "install",
                "--ignore-scripts",
                "--no-audit",
                "--no-fund",
                "--omit=dev",
                "--no-update-notifier",
                "--loglevel=error",
                "--prefix",
            ])
            .arg(dir)
            .arg(spec),
        "npm install (scripts off)",
    )?;
    let manifest: Value = read_json(&dir.join("package.json"))?;
    let deps = manifest
        .get("dependencies")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let Some(name) = deps.keys().next().cloned() else {
        return Err(RunnerError::Prepare(format!(
            "npm install {spec}: nothing was installed"
        )));
    };
    let pkg_dir = dir.join("node_modules").join(&name);
    let pj: Value = read_json(&pkg_dir.join("package.json"))?;
    let version = pj
        .get("version")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let lock: Value = read_json(&dir.join("package-lock.json")).unwrap_or(Value::Null);
    let integrity = integrity.or_else(|| {
        lock.get("packages")
            .and_then(|p| p.get(format!("node_modules/{name}")))
            .and_then(|e| e.get("integrity"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    let bin = entry_point(&pj, &name, want)
        .map_err(|e| RunnerError::Prepare(format!("{name}@{version}: {e}")))?;
    let bin = bin.trim_start_matches("./").to_owned();
    if bin.contains("..") {
        return Err(RunnerError::Prepare(format!(
            "{name}: `bin` points outside the package: {bin:?}"
        )));
    }
    if scripts_needed(&pj) && !pkg_dir.join(&bin).exists() {
        return Err(RunnerError::Prepare(format!(
            "{name}@{version}: its entry point {bin} does not exist: it is built by an install script, which mcplint does not run"
        )));
    }
    Ok(Prepared {
        dir: dir.to_path_buf(),
        name: name.clone(),
        version,
        integrity,
        runtime: Runtime::Node,
        entry: vec![format!("{{app}}/node_modules/{name}/{bin}")],
        env: Vec::new(),
        notes: Vec::new(),
    })
}

/// The file a package starts from, as package.json gives it: the `bin`
/// named `want` when asked for one; otherwise the `bin` named like the
/// package (scope dropped, or whole), else the first, else `main`.
fn entry_point(pj: &Value, name: &str, want: Option<&str>) -> Result<String, String> {
    let unscoped = name.rsplit('/').next().unwrap_or(name);
    let bin = pj.get("bin");
    let found = match (bin, want) {
        // A string `bin` is one executable named like the package.
        (Some(Value::String(s)), None) => Some(s.as_str()),
        (Some(Value::String(s)), Some(w)) if w == unscoped => Some(s.as_str()),
        (Some(Value::Object(m)), Some(w)) => m.get(w).and_then(Value::as_str),
        (Some(Value::Object(m)), None) => m
            .get(unscoped)
            .or_else(|| m.get(name))
            .or_else(|| m.values().next())
            .and_then(Value::as_str),
        _ => None,
    };
    match (found, want) {
        (Some(f), _) => Ok(f.to_owned()),
        (None, Some(w)) => {
            let names: Vec<String> = match bin {
                Some(Value::Object(m)) => m
                    .keys()
                    .map(|k| crate::display::visible_short(k, 40))
                    .collect(),
                Some(Value::String(_)) => vec![crate::display::visible_short(unscoped, 40)],
                _ => Vec::new(),
            };
            Err(format!(
                "no executable named {} (its bin: {})",
                crate::display::visible_short(w, 80),
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            ))
        }
        (None, None) => pj
            .get("main")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| "package.json has no `bin` (nor `main`) to start".to_string()),
    }
}

fn scripts_needed(pj: &Value) -> bool {
    pj.get("scripts")
        .and_then(Value::as_object)
        .is_some_and(|s| {
            ["preinstall", "install", "postinstall"]
                .iter()
                .any(|k| s.contains_key(*k))
        })
}

pub(crate) fn read_json(p: &Path) -> Result<Value, RunnerError> {
    let bytes =
        std::fs::read(p).map_err(|e| RunnerError::io(&format!("reading {}", p.display()), e))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| RunnerError::Prepare(format!("{}: {e}", p.display())))
}

/// `pip SUBCOMMAND` on the host, for wheels only, and only wheels the
/// guest's Python can use (Debian 12: CPython 3.11, glibc 2.36). With
/// `--only-binary=:all:` pip never runs a package's build code.
pub(crate) fn guest_wheels(subcommand: &[&str]) -> Command {
    let mut c = Command::new(host_python());
    c.arg("-m").arg("pip").args(subcommand);
    c.args([
        "--disable-pip-version-check",
        "--no-input",
        "--quiet",
        "--only-binary=:all:",
    ])
    .args([
        "--python-version",
        "3.11",
        "--implementation",
        "cp",
        "--abi",
        "cp311",
        "--abi",
        "abi3",
        "--abi",
        "none",
    ])
    .args([
        "--platform",
        "manylinux_2_36_x86_64",
        "--platform",
        "manylinux_2_28_x86_64",
        "--platform",
        "manylinux_2_17_x86_64",
        "--platform",
        "manylinux2014_x86_64",
        "--platform",
        "manylinux_2_5_x86_64",
        "--platform",
        "manylinux1_x86_64",
        "--platform",
        "linux_x86_64",
        "--platform",
        "any",
    ]);
    c
}

/// The Python interpreter used on the host (`MCPLINT_PYTHON`, else `python3`):
/// to download wheels, compile bytecode, and run a server with no sandbox.
pub(crate) fn host_python() -> String {
    std::env::var("MCPLINT_PYTHON").unwrap_or_else(|_| "python3".into())
}

fn pip_install(
    spec: &str,
    dir: &Path,
    integrity: Option<String>,
    script: Option<&str>,
) -> Result<Prepared, RunnerError> {
    let site = dir.join("site");
    std::fs::create_dir_all(&site)
        .map_err(|e| RunnerError::io("creating the package folder", e))?;
    let report = dir.join(".pip-report.json");
    run_tool(
        guest_wheels(&["install", "--no-compile"])
            .arg("--report")
            .arg(&report)
            .arg("--target")
            .arg(&site)
            .arg(spec),
        "pip install (wheels only)",
    )
    .map_err(|e| match e {
        RunnerError::Prepare(m) if m.contains("from versions: none") || m.contains("No matching distribution") => RunnerError::Prepare(format!(
            "{m}\n(no wheel for CPython 3.11 on x86_64 Linux: an sdist would run its build code on the host, so mcplint refuses it; --build-in-guest builds the requested package's sdist inside the sandbox)"
        )),
        other => other,
    })?;
    let rep: Value = read_json(&report)?;
    let _ = std::fs::remove_file(&report);
    let installs = rep
        .get("install")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let main = installs
        .iter()
        .find(|i| i.get("requested").and_then(Value::as_bool) == Some(true))
        .ok_or_else(|| {
            RunnerError::Prepare(format!("pip install {spec}: nothing was installed"))
        })?;
    let meta = main.get("metadata");
    let name = meta
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let version = meta
        .and_then(|m| m.get("version"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let integrity = integrity.or_else(|| {
        main.get("download_info")
            .and_then(|d| d.get("archive_info"))
            .and_then(|a| a.get("hashes"))
            .and_then(|h| h.get("sha256"))
            .and_then(Value::as_str)
            .map(|h| format!("sha256:{h}"))
    });
    let norm = |s: &str| s.to_ascii_lowercase().replace(['-', '.'], "_");
    let dist_info = std::fs::read_dir(&site)
        .map_err(|e| RunnerError::io("listing site-packages", e))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name().and_then(|s| s.to_str()).is_some_and(|f| {
                f.ends_with(".dist-info")
                    && norm(f).starts_with(&format!("{}_{}", norm(&name), norm(&version)))
            })
        })
        .ok_or_else(|| RunnerError::Prepare(format!("{name}: no .dist-info folder found")))?;
    let eps = std::fs::read_to_string(dist_info.join("entry_points.txt")).unwrap_or_default();
    let scripts = console_scripts(&eps);
    let chosen = match script {
        Some(want) => scripts.iter().find(|(n, _)| n == want).ok_or_else(|| {
            let have: Vec<&str> = scripts.iter().map(|(n, _)| n.as_str()).collect();
            RunnerError::Prepare(format!(
                "{name}=={version} has no console script {want:?} (it has: {})",
                if have.is_empty() {
                    "none".to_string()
                } else {
                    have.join(", ")
                }
            ))
        })?,
        None => scripts
            .iter()
            .find(|(n, _)| norm(n) == norm(&name))
            .or_else(|| scripts.first())
            .ok_or_else(|| {
                RunnerError::Prepare(format!(
                    "{name}=={version}: no console_scripts entry point to start"
                ))
            })?,
    };
    let target = chosen.1.clone();
    let (module, attr) = target.split_once(':').unwrap_or((target.as_str(), ""));
    let module = module.trim();
    let attr = attr.split_whitespace().next().unwrap_or("").trim();
    let ident_ok = |s: &str| {
        !s.is_empty()
            && s.split('.')
                .all(|p| !p.is_empty() && p.chars().all(|c| c.is_alphanumeric() || c == '_'))
    };
    if !ident_ok(module) || !(attr.is_empty() || ident_ok(attr)) {
        return Err(RunnerError::Prepare(format!(
            "{name}: entry point {target:?} is not module:function"
        )));
    }
    let code = if attr.is_empty() {
        format!("import runpy; runpy.run_module('{module}', run_name='__main__')")
    } else {
        format!("import sys, {module} as m; sys.argv[0] = '{name}'; sys.exit(m.{attr}())")
    };
    Ok(Prepared {
        dir: dir.to_path_buf(),
        name,
        version,
        integrity,
        runtime: Runtime::Python,
        entry: vec!["-c".into(), code],
        env: python_env(),
        notes: Vec::new(),
    })
}

/// PYTHONPATH for a tree installed with `pip --target {app}/site`.
pub(crate) fn python_env() -> Vec<(String, String)> {
    vec![
        ("PYTHONPATH".into(), "{app}/site".into()),
        ("PYTHONDONTWRITEBYTECODE".into(), "1".into()),
    ]
}

/// `[console_scripts]` entries of an `entry_points.txt`.
fn console_scripts(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut in_section = false;
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with('[') {
            in_section = l == "[console_scripts]";
            continue;
        }
        if in_section {
            if let Some((k, v)) = l.split_once('=') {
                out.push((k.trim().to_owned(), v.trim().to_owned()));
            }
        }
    }
    out
}

/// Compiles a Python tree to bytecode with the host's interpreter, so the
/// read-only guest does not compile on every start. `compileall` only
/// compiles; it imports nothing from the package.
/// `buildenv` (pip and the build requirements of an sdist built in the
/// guest) is compiled too: under emulation, compiling pip on every run costs
/// minutes.
/// `run_dir` is where the tree is when it runs (`/app` in a sandbox): the
/// bytecode names its source files under it, so tracebacks show real paths
/// and the same package compiles to the same bytes on every fetch (the warm
/// snapshot's key is a digest of the tree).
pub fn precompile_python(dir: &Path, run_dir: &Path) {
    for sub in ["site", "buildenv"] {
        if !dir.join(sub).is_dir() {
            continue;
        }
        let _ = super::process::output(
            Command::new(host_python())
                .args([
                    "-m",
                    "compileall",
                    "-q",
                    "-j",
                    "1",
                    "--invalidation-mode",
                    "unchecked-hash",
                ])
                .arg("-d")
                .arg(run_dir.join(sub))
                // Constant sets are written in hash order: a fixed seed keeps
                // the bytes the same from one fetch to the next.
                .env("PYTHONHASHSEED", "0")
                .arg(dir.join(sub))
                .stdin(std::process::Stdio::null()),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bin_and_main_entry_points() {
        let pj = |v: &str| serde_json::from_str::<Value>(v).expect("json");
        let many =
            pj(r#"{"bin": {"other": "o.js", "x-mcp": "m.js", "x": "x.js"}, "main": "i.js"}"#);
        assert_eq!(entry_point(&many, "@s/x", None).as_deref(), Ok("x.js"));
        assert_eq!(
            entry_point(&many, "@s/x", Some("x-mcp")).as_deref(),
            Ok("m.js")
        );
        let e = entry_point(&many, "@s/x", Some("nope")).expect_err("no such bin");
        assert!(e.contains("nope") && e.contains("other, x-mcp, x"), "{e}");
        let first = pj(r#"{"bin": {"b": "b.js", "c": "c.js"}}"#);
        assert_eq!(entry_point(&first, "a", None).as_deref(), Ok("b.js"));
        let one = pj(r#"{"bin": "cli.js"}"#);
        assert_eq!(entry_point(&one, "@s/t", None).as_deref(), Ok("cli.js"));
        assert_eq!(
            entry_point(&one, "@s/t", Some("t")).as_deref(),
            Ok("cli.js")
        );
        assert!(entry_point(&one, "@s/t", Some("u")).is_err());
        assert_eq!(
            entry_point(&pj(r#"{"main": "i.js"}"#), "t", None).as_deref(),
            Ok("i.js")
        );
        assert!(entry_point(&pj(r#"{"main": "i.js"}"#), "t", Some("t")).is_err());
        assert!(entry_point(&pj("{}"), "t", None).is_err());
    }

    #[test]
    fn pins() {
        assert!(Source::parse("npm:@modelcontextprotocol/server-memory@2026.8.31", false).is_ok());
        assert!(Source::parse("npm:left-pad@1.3.0", false).is_ok());
        assert!(Source::parse("npm:left-pad", false).is_err());
        assert!(Source::parse("npm:left-pad@latest", false).is_err());
        assert!(Source::parse("npm:left-pad@1.3.0", false)
            .is_ok_and(|s| matches!(s, Source::Npm { bin: None, .. })));
        assert!(Source::parse("npm:left-pad@^1.3.0", false).is_err());
        assert!(Source::parse("npm:@scope/x", false).is_err());
        assert_eq!(
            Source::parse("npm:@scope/x", true).ok(),
            Some(Source::Npm {
                name: "@scope/x".into(),
                version: None,
                bin: None,
            })
        );
        assert!(Source::parse("pypi:mcp-server-time==2026.10.19", false).is_ok());
        assert!(Source::parse("pypi:mcp-server-time>=1", false).is_err());
        assert!(Source::parse("pypi:mcp-server-time==1.*", false).is_err());
        assert!(Source::parse("pypi:mcp-server-time", false).is_err());
        assert!(Source::parse("gopher:x", false).is_err());
    }

    #[test]
    fn which_package_lacks_a_wheel() {
        let msg = "ERROR: Could not find a version that satisfies the requirement docopt==0.6.2 (from versions: none)\nERROR: No matching distribution found for docopt==0.6.2";
        assert!(no_wheel_for(msg, "docopt"));
        assert!(no_wheel_for(msg, "DocOpt"));
        assert!(!no_wheel_for(msg, "my-server"));
        assert!(!no_wheel_for("ERROR: something else", "docopt"));
    }

    #[test]
    fn entry_points() {
        let eps = "[console_scripts]\nmcp-server-time = mcp_server_time:main\n\n[other]\nx = y:z\n";
        assert_eq!(
            console_scripts(eps),
            vec![(
                "mcp-server-time".to_owned(),
                "mcp_server_time:main".to_owned()
            )]
        );
    }
}
