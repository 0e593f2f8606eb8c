//! `mcplint fetch SOURCE [-o FILE]`: start a server in a throwaway microVM,
//! ask it what it offers, write a capture file.

use std::path::PathBuf;
use std::time::Duration;

use crate::display::visible;
use crate::runner::client::{ClientOptions, EraChoice};
use crate::runner::firecracker::BackendChoice;
use crate::runner::http::HttpChoice;
use crate::runner::source::Source;
use crate::runner::spec;
use crate::runner::vm::{AccelChoice, VmConfig};
use crate::runner::{FetchOptions, RunnerError, Sandbox, Target};

/// Arguments of `mcplint fetch`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Sources:
  npm:PKG@VERSION        an exact npm version (installed with scripts off)
  pypi:PKG==VERSION      an exact PyPI version (wheels only; an sdist is refused
                         unless --build-in-guest builds it inside the sandbox)
  file:PATH              a local npm tarball or package folder, or a wheel
                         (or a Python sdist .tar.gz with --build-in-guest)
  https://HOST/PATH      a remote server (no VM: nothing runs here): Streamable
                         HTTP, or the legacy HTTP+SSE transport (2024-11-05)
                         when the initialize POST gets a 4xx (--transport)
  --command -- CMD ARGS  a local stdio server, only with --no-sandbox
  PATH                   a launch spec, recognised by its content:
    server.json          a registry server.json: its npm/PyPI package (pick one
                         of several with --package N, N = index in `packages`),
                         with its package arguments and environment variables
                         (secrets and user-supplied values get placeholders)
    a client config      one entry (--server NAME when it lists several) of
                         Claude Desktop, Cursor, VS Code, Codex ... configs:
                         `npx -y PKG@VER`, `uvx PKG==VER`, `uv tool run`, or
                         `node SCRIPT` (its npm package folder) with its args;
                         EVERY env value and secret-looking argument becomes a
                         placeholder (the config's real values are never used)
    BUNDLE.mcpb | DIR    an MCPB bundle (zip, or a folder with manifest.json):
                         its mcp_config is run in the guest from the bundle's
                         files, ${user_config.*} defaults used unless sensitive
  Unpinned packages in a launch spec are refused like elsewhere. The capture's
  `launch_spec` block records the file, the entry and what it resolved to.

The package is downloaded and unpacked on this host without running any of it,
then started in a microVM (QEMU microvm, KVM when it really works, else TCG;
or Firecracker, see --backend) with no network device, read-only disks and no
secrets. Run `mcplint runner
setup` once first.

Secrets: each --secret NAME (and each isSecret variable of a server.json, or
`secrets` in mcplint.toml) is given the value mcplint-placeholder-NAME, never a
real credential; the capture lists them in secrets_given_placeholders.

Network: --allow-host HOST gives the VM a restricted network whose only exits
are HOST:443 for each allowed host (the guest's /etc/hosts maps each name to
10.0.2.100, .101, ...). Every connection goes through a proxy in mcplint that
resolves the name itself, refuses it when any address is private, loopback,
link-local, CGNAT, unique-local or a cloud metadata address, connects on port
443 only (TLS stays end to end) and logs the attempt in the capture's
`network` block. Not with --sandbox namespaces (no network there) or
--no-sandbox.

Examples:
  mcplint fetch npm:@modelcontextprotocol/server-memory@2026.8.31 -o memory.json
  mcplint fetch pypi:mcp-server-time==2026.10.19 -o time.json
  mcplint fetch --sandbox namespaces npm:@eslint/mcp@0.3.13
  mcplint fetch https://mcp.example.com/mcp --header 'Authorization: Bearer x'
  mcplint fetch https://old.example.com/sse --transport sse
  mcplint fetch npm:@acme/weather-mcp@1.4.2 --secret WEATHER_KEY --allow-host api.weather.example
  mcplint fetch server.json --package 1 -o weather.json
  mcplint fetch ~/.cursor/mcp.json --server github
  mcplint fetch ./my-bundle.mcpb
  mcplint fetch --no-sandbox --command -- python3 my_server.py")]
pub struct Args {
    /// What to fetch (see below).
    #[arg(value_name = "SOURCE", required_unless_present = "command")]
    pub source: Option<String>,
    /// Write the capture here (atomically) instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Run the command after `--` as the server (needs --no-sandbox).
    #[arg(long, requires = "rest")]
    pub command: bool,
    /// With --command, the program and its arguments; otherwise extra
    /// arguments for the server.
    #[arg(last = true, value_name = "ARGS")]
    pub rest: Vec<String>,
    /// Run the server directly on this host, as you, with no isolation.
    #[arg(long)]
    pub no_sandbox: bool,
    /// The isolation boundary.
    #[arg(long, value_enum, default_value_t = Sandbox::Microvm, conflicts_with = "no_sandbox")]
    pub sandbox: Sandbox,
    /// Accept a version range, a tag or no version (the resolved version is recorded).
    #[arg(long)]
    pub allow_unpinned: bool,
    /// Wall-clock limit for the whole server run, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    pub timeout: u64,
    /// Limit for the first answer (server start-up included), in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 120)]
    pub handshake_timeout: u64,
    /// Limit for each later answer, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub request_timeout: u64,
    /// Stop reading after this many bytes from the server.
    #[arg(long, value_name = "BYTES", default_value_t = 64 * 1024 * 1024)]
    pub max_bytes: u64,
    /// Guest memory in MiB.
    #[arg(long, value_name = "MIB", default_value_t = 1024)]
    pub memory: u32,
    /// Guest vCPUs.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub cpus: u32,
    /// Accelerator for the microVM.
    #[arg(long, value_enum, default_value_t = AccelChoice::Auto)]
    pub accel: AccelChoice,
    /// Which VMM runs the microVM: Firecracker needs a `firecracker` binary
    /// on PATH and working KVM (auto uses it only then, else QEMU).
    #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
    pub backend: BackendChoice,
    /// Protocol era to speak.
    #[arg(long, value_enum, default_value_t = EraChoice::Auto)]
    pub era: EraChoice,
    /// clientInfo sent to the server, NAME/VERSION.
    #[arg(long, value_name = "NAME/VERSION", conflicts_with = "identities")]
    pub client_info: Option<String>,
    /// Fetch once per client identity (comma-separated NAME/VERSION) and
    /// report whether the tool lists differ (a server may show a scanner
    /// something else than a real client). Writes the first identity's
    /// capture, with every identity's result in its `capture` block; exits 1
    /// when the lists differ.
    #[arg(long, value_name = "A,B,...", value_delimiter = ',')]
    pub identities: Vec<String>,
    /// Protocol version asked for in a legacy `initialize`.
    #[arg(long, value_name = "VERSION", default_value = crate::runner::client::LEGACY_VERSION)]
    pub protocol_version: String,
    /// An environment variable for the server, KEY=VALUE (give placeholders,
    /// never real secrets). Repeatable.
    #[arg(long = "env", value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// A declared secret: the server gets NAME=mcplint-placeholder-NAME
    /// (never a real credential), recorded as a secret placeholder in the
    /// capture. Repeatable.
    #[arg(long = "secret", value_name = "NAME")]
    pub secrets: Vec<String>,
    /// Let the server open HTTPS connections (port 443 only) to HOST, for
    /// servers that must reach their own API even to list tools. microVM
    /// only. Goes through a proxy in mcplint that refuses private, loopback,
    /// link-local, CGNAT and metadata addresses and logs every attempt in the
    /// capture. Repeatable; without it the VM has no network device.
    #[arg(long = "allow-host", value_name = "HOST")]
    pub allow_hosts: Vec<String>,
    /// An HTTP header for remote servers, 'Name: value'. Repeatable.
    #[arg(long = "header", value_name = "HEADER")]
    pub headers: Vec<String>,
    /// The transport for a remote server: Streamable HTTP with a fallback to
    /// the legacy HTTP+SSE transport when its initialize POST gets a 4xx
    /// (auto), or one of them only.
    #[arg(long, value_enum, default_value_t = HttpChoice::Auto)]
    pub transport: HttpChoice,
    /// Build a PyPI package that has no wheel from its sdist inside the
    /// sandbox (never on this host): the host downloads the sdist (checked
    /// against PyPI's sha256), its dependencies and build requirements as
    /// wheels; the guest, offline, builds it with pip into its scratch /tmp
    /// and starts it. Adds 600 s to --handshake-timeout and --timeout.
    #[arg(long)]
    pub build_in_guest: bool,
    /// With a client config as SOURCE: the entry to fetch (its key).
    #[arg(long, value_name = "NAME")]
    pub server: Option<String>,
    /// With a server.json as SOURCE: the package to fetch, by its index in
    /// `packages` (from 0).
    #[arg(long, value_name = "N")]
    pub package: Option<usize>,
}

fn usage(msg: impl Into<String>) -> RunnerError {
    RunnerError::Usage(msg.into())
}

/// Runs the command.
pub fn run(args: &Args) -> Result<i32, RunnerError> {
    let sandbox = if args.no_sandbox {
        Sandbox::None
    } else {
        args.sandbox
    };
    if sandbox == Sandbox::None && !args.no_sandbox {
        return Err(usage("--sandbox none is spelled --no-sandbox"));
    }
    let mut notes = Vec::new();
    let mut resolved: Option<spec::Resolved> = None;
    let (target, source_text) = if args.command {
        if args.source.is_some() {
            return Err(usage("give either SOURCE or --command -- CMD, not both"));
        }
        if !args.no_sandbox {
            return Err(usage(
                "--command runs a program directly on this host; say so with --no-sandbox (there is no sandbox for arbitrary commands)",
            ));
        }
        let text = format!("command:{}", args.rest.join(" "));
        (Target::Command(args.rest.clone()), text)
    } else {
        let s = args.source.clone().unwrap_or_default();
        let known_prefix = ["npm:", "pypi:", "file:", "https://", "http://"]
            .iter()
            .any(|p| s.starts_with(p));
        let src = if !known_prefix && spec::is_spec_path(&s) {
            let pick = spec::Pick {
                server: args.server.clone(),
                package: args.package,
            };
            let r = spec::load(std::path::Path::new(&s), &pick, args.allow_unpinned)?;
            eprintln!(
                "mcplint: {} -> {}{}",
                visible(&s),
                visible(&r.origin.resolved),
                if r.origin.placeholders.is_empty() {
                    String::new()
                } else {
                    format!(" (placeholders: {})", r.origin.placeholders.join(", "))
                }
            );
            let src = r.source.clone();
            resolved = Some(r);
            src
        } else {
            if args.server.is_some() || args.package.is_some() {
                return Err(usage(
                    "--server and --package pick an entry of a launch-spec file (server.json, client config)",
                ));
            }
            Source::parse(&s, args.allow_unpinned)?
        };
        if args.allow_unpinned {
            notes.push(
                "fetched with --allow-unpinned: the version is whatever resolved at capture time"
                    .into(),
            );
        }
        if matches!(src, Source::Remote(_)) && !args.rest.is_empty() {
            return Err(usage("a remote server takes no arguments after --"));
        }
        (Target::Source(src), s)
    };
    if sandbox == Sandbox::None {
        eprintln!(
            "mcplint: WARNING: --no-sandbox: the server runs directly on this host as you, with your files and your network.\n\
             mcplint: WARNING: only do this with code you already trust; the capture records boundary \"none\"."
        );
    } else if sandbox == Sandbox::Namespaces {
        eprintln!("mcplint: note: --sandbox namespaces shares this host's kernel; a microVM is the stronger boundary");
    }
    let mut env = Vec::new();
    for e in &args.env {
        let Some((k, v)) = e.split_once('=') else {
            return Err(usage(format!("--env {}: expected KEY=VALUE", visible(e))));
        };
        if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(usage(format!("--env {}: bad variable name", visible(e))));
        }
        env.push((k.to_owned(), v.to_owned()));
    }
    for name in &args.secrets {
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(usage(format!(
                "--secret {}: bad variable name",
                visible(name)
            )));
        }
        if env.iter().any(|(k, _)| k == name) {
            return Err(usage(format!(
                "--secret {name} and --env {name}=…: a secret always gets a placeholder; give it once, with --secret"
            )));
        }
    }
    let mut headers = Vec::new();
    for h in &args.headers {
        let Some((k, v)) = h.split_once(':') else {
            return Err(usage(format!(
                "--header {}: expected 'Name: value'",
                visible(h)
            )));
        };
        headers.push((k.trim().to_owned(), v.trim().to_owned()));
    }
    // The build runs before the server can answer.
    let build_secs = if args.build_in_guest { 600 } else { 0 };
    let mut client = ClientOptions {
        handshake_timeout: Duration::from_secs(args.handshake_timeout + build_secs),
        request_timeout: Duration::from_secs(args.request_timeout),
        max_bytes: args.max_bytes,
        era: args.era,
        legacy_version: args.protocol_version.clone(),
        http_transport: args.transport,
        ..ClientOptions::default()
    };
    if let Some(ci) = &args.client_info {
        (client.client_name, client.client_version) = split_identity(ci);
    }
    let mut server_args = if args.command {
        Vec::new()
    } else {
        args.rest.clone()
    };
    let mut origin = None;
    if let Some(r) = resolved {
        // The spec's values come first; what the user gives overrides them.
        let given: Vec<String> = env.iter().map(|(k, _)| k.clone()).collect();
        let mut merged: Vec<(String, String)> = r
            .env
            .into_iter()
            .filter(|(k, _)| !given.contains(k))
            .collect();
        merged.append(&mut env);
        env = merged;
        let hgiven: Vec<String> = headers
            .iter()
            .map(|(k, _)| k.to_ascii_lowercase())
            .collect();
        let mut hmerged: Vec<(String, String)> = r
            .headers
            .into_iter()
            .filter(|(k, _)| !hgiven.contains(&k.to_ascii_lowercase()))
            .collect();
        hmerged.append(&mut headers);
        headers = hmerged;
        let mut a = r.args;
        a.append(&mut server_args);
        server_args = a;
        origin = Some(r.origin);
    }
    let opts = FetchOptions {
        sandbox,
        client,
        timeout: Duration::from_secs(args.timeout + build_secs),
        vm: VmConfig {
            memory_mib: args.memory,
            cpus: args.cpus,
        },
        accel: args.accel,
        backend: args.backend,
        env,
        server_args,
        headers,
        source_text,
        notes,
        allow_hosts: args.allow_hosts.clone(),
        secrets: args.secrets.clone(),
        origin,
        build_in_guest: args.build_in_guest,
        progress: crate::runner::progress_to_terminal,
    };
    let (capture, code) = if args.identities.is_empty() {
        (crate::runner::fetch(&target, &opts)?, super::EXIT_OK)
    } else {
        fetch_identities(&target, &opts, &args.identities)?
    };
    let tools = capture
        .get("tools")
        .and_then(|t| t.as_array())
        .map_or(0, Vec::len);
    match &args.output {
        Some(path) => {
            crate::runner::capture::write_atomic(path, &capture)
                .map_err(|e| RunnerError::io(&format!("writing {}", path.display()), e))?;
            let c = &capture["capture"];
            eprintln!(
                "mcplint: {} tools from {} ({}, {}{}) in {:.1} s -> {}",
                tools,
                visible(capture["server"].as_str().unwrap_or("?")),
                c["sandbox"]["boundary"].as_str().unwrap_or("?"),
                c["sandbox"]["backend"].as_str().unwrap_or("?"),
                c["sandbox"]["accelerator"]
                    .as_str()
                    .map(|a| format!("/{a}"))
                    .unwrap_or_default(),
                c["timings"]["wall_s"].as_f64().unwrap_or(0.0),
                path.display()
            );
        }
        None => {
            let text = serde_json::to_string_pretty(&capture)
                .map_err(|e| RunnerError::io("encoding", std::io::Error::other(e)))?;
            // Hostile text must not reach a terminal raw: escape every
            // non-ASCII character (valid JSON either way).
            if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
                println!("{}", ascii_json(&text));
            } else {
                println!("{text}");
            }
        }
    }
    Ok(code)
}

fn split_identity(s: &str) -> (String, String) {
    let (n, v) = s.split_once('/').unwrap_or((s, "0"));
    (n.to_owned(), v.to_owned())
}

/// One fetch per identity; the first capture, annotated with every result.
fn fetch_identities(
    target: &Target,
    opts: &FetchOptions,
    ids: &[String],
) -> Result<(serde_json::Value, i32), RunnerError> {
    use sha2::{Digest, Sha256};
    let mut first: Option<serde_json::Value> = None;
    let mut first_hash = String::new();
    let mut results = Vec::new();
    let mut differ = false;
    for id in ids.iter().filter(|s| !s.trim().is_empty()) {
        let mut o = opts.clone();
        (o.client.client_name, o.client.client_version) = split_identity(id.trim());
        let cap = crate::runner::fetch(target, &o)?;
        let tools = cap.get("tools").cloned().unwrap_or_default();
        let hash = format!(
            "{:x}",
            Sha256::digest(serde_json::to_vec(&tools).unwrap_or_default())
        );
        let names: Vec<&str> = tools
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|t| t.get("name").and_then(|n| n.as_str()))
                    .collect()
            })
            .unwrap_or_default();
        if first.is_none() {
            first_hash = hash.clone();
        }
        let same = hash == first_hash;
        differ |= !same;
        eprintln!(
            "mcplint: identity {}: {} tools{}",
            visible(id.trim()),
            names.len(),
            if same {
                ""
            } else {
                "  <- DIFFERS from the first identity"
            }
        );
        results.push(serde_json::json!({
            "client": id.trim(), "tools": names, "tools_sha256": hash, "same_as_first": same,
        }));
        if first.is_none() {
            first = Some(cap);
        }
    }
    let mut cap = first.ok_or_else(|| usage("--identities needs at least one NAME/VERSION"))?;
    if let Some(c) = cap.get_mut("capture").and_then(|c| c.as_object_mut()) {
        c.insert("identities".into(), serde_json::Value::Array(results));
        c.insert("identities_differ".into(), serde_json::Value::Bool(differ));
    }
    if differ {
        eprintln!("mcplint: the server shows different tool lists to different clients");
    }
    Ok((
        cap,
        if differ {
            super::EXIT_FINDINGS
        } else {
            super::EXIT_OK
        },
    ))
}

/// Escapes every non-ASCII character of serialised JSON as `\uXXXX`
/// (outside strings JSON has none, so this only touches string contents).
fn ascii_json(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut buf = [0u16; 2];
            for u in c.encode_utf16(&mut buf) {
                out.push_str(&format!("\\u{:04x}", u));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn ascii_escaping() {
        assert_eq!(
            super::ascii_json("\"a\u{200b}\u{1F600}\""),
            "\"a\\u200b\\ud83d\\ude00\""
        );
    }
}
