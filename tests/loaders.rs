//! Loaders for MCPB manifests and bundles, `server.json` and client configs,
//! through the library API and through `mcplint inspect`; malformed inputs;
//! and the 56 benign captures.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use mcplint::manifest::load::{load_all, load_file, LoadOptions};
use mcplint::manifest::{Completeness, InputKind, Launch, Loaded, Server, Spanned, Transport};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/loaders")
        .join(rel)
}

fn load(rel: &str) -> Loaded {
    let p = fixture(rel);
    match load_file(&p, &LoadOptions::default()) {
        Ok(l) => l,
        Err(e) => panic!("{} should load: {e}", p.display()),
    }
}

fn server<'l>(l: &'l Loaded, name: &str) -> &'l Server {
    l.servers
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| {
            panic!(
                "no server {name} in {:?}",
                l.servers.iter().map(|s| &s.name).collect::<Vec<_>>()
            )
        })
}

fn launch<'l>(l: &'l Loaded, name: &str) -> &'l Launch {
    server(l, name).launch.as_ref().expect("a launch spec")
}

/// The source text a span covers, read from the file itself.
fn text_at(path: &Path, s: &Spanned<String>) -> String {
    let text = std::fs::read_to_string(path).expect("readable");
    let span = s.span.expect("a span");
    text[span.range()].to_string()
}

fn stdio(l: &Launch) -> (&Spanned<String>, Vec<&str>) {
    match &l.transport {
        Transport::Stdio { command, args, .. } => {
            (command, args.iter().map(|a| a.value.as_str()).collect())
        }
        other => panic!("expected stdio, got {other:?}"),
    }
}

fn env_of<'l>(l: &'l Launch, name: &str) -> &'l mcplint::manifest::EnvVar {
    l.env
        .iter()
        .find(|e| e.name.value == name)
        .unwrap_or_else(|| panic!("no env {name}"))
}

fn mcplint(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mcplint"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("mcplint runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Error text with miette's line wrapping and gutter undone.
fn flat(err: &str) -> String {
    err.split_whitespace()
        .filter(|w| *w != "│")
        .collect::<Vec<_>>()
        .join(" ")
}

fn inspect_json(path: &Path) -> serde_json::Value {
    let (code, out, err) = mcplint(&[
        "inspect",
        "--format",
        "json",
        path.to_str().expect("utf-8 path"),
    ]);
    assert_eq!(code, 0, "inspect failed: {err}");
    serde_json::from_str(&out).expect("inspect prints JSON")
}

// --- client configs -------------------------------------------------------

#[test]
fn claude_desktop_config() {
    let l = load("claude-desktop/claude_desktop_config.json");
    assert_eq!(l.kind, InputKind::McpServers);
    assert_eq!(l.servers.len(), 2);
    let fs = launch(&l, "filesystem");
    assert_eq!(fs.client, "claude-desktop");
    let (cmd, args) = stdio(fs);
    assert_eq!(cmd.value, "npx");
    assert_eq!(
        text_at(&fixture("claude-desktop/claude_desktop_config.json"), cmd),
        "\"npx\""
    );
    assert_eq!(args[1], "@modelcontextprotocol/server-filesystem");
    assert!(l
        .servers
        .iter()
        .all(|s| s.completeness == Completeness::LaunchOnly && s.tools.is_empty()));
    let gh = launch(&l, "github");
    let tok = env_of(gh, "GITHUB_PERSONAL_ACCESS_TOKEN");
    assert!(!tok.secret, "Claude Desktop has no secret marker");
    assert_eq!(
        text_at(
            &fixture("claude-desktop/claude_desktop_config.json"),
            &tok.name
        ),
        "\"GITHUB_PERSONAL_ACCESS_TOKEN\""
    );
}

#[test]
fn cursor_config() {
    let l = load("cursor/.cursor/mcp.json");
    let pg = launch(&l, "postgres");
    assert_eq!(pg.client, "cursor");
    assert_eq!(
        pg.env_file.as_ref().map(|e| e.value.as_str()),
        Some("${workspaceFolder}/.env")
    );
    let lin = launch(&l, "linear");
    match &lin.transport {
        Transport::Http { url, headers } => {
            assert_eq!(url.value, "https://mcp.linear.app/mcp");
            assert_eq!(headers[0].0.value, "Authorization");
            assert_eq!(headers[0].1.value, "Bearer ${env:LINEAR_API_KEY}");
        }
        other => panic!("expected http, got {other:?}"),
    }
}

#[test]
fn claude_code_project_config() {
    let l = load("claude-code/.mcp.json");
    assert_eq!(l.servers.len(), 3);
    assert_eq!(launch(&l, "sentry").client, "claude-code");
    assert!(matches!(
        launch(&l, "sentry").transport,
        Transport::Http { .. }
    ));
    assert!(matches!(
        launch(&l, "legacy-sse").transport,
        Transport::Sse { .. }
    ));
    let (cmd, args) = stdio(launch(&l, "local-db"));
    assert_eq!(cmd.value, "${HOME}/bin/db-mcp");
    assert_eq!(args, ["--read-only"]);
}

#[test]
fn claude_code_user_config_with_projects() {
    let l = load("claude-code/.claude.json");
    let names: Vec<&str> = l.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["memory", "/home/alice/src/webapp:playwright"]);
    assert!(l
        .servers
        .iter()
        .all(|s| s.launch.as_ref().is_some_and(|l| l.client == "claude-code")));
}

#[test]
fn windsurf_config() {
    let l = load("windsurf/mcp_config.json");
    let brave = launch(&l, "brave-search");
    assert_eq!(brave.client, "windsurf");
    assert!(brave.disabled);
    let figma = launch(&l, "figma");
    assert!(!figma.disabled);
    match &figma.transport {
        Transport::Http { url, .. } => assert_eq!(url.value, "https://mcp.figma.example/mcp"),
        other => panic!("serverUrl is streamable HTTP, got {other:?}"),
    }
}

#[test]
fn gemini_settings() {
    // JSONC (a comment and a trailing comma), with a `tools` object that is
    // Gemini's own setting, not a tool list.
    let l = load("gemini/.gemini/settings.json");
    assert_eq!(l.kind, InputKind::McpServers);
    let py = launch(&l, "pythonTools");
    assert_eq!(py.client, "gemini");
    assert!(py.trust);
    let inc: Vec<&str> = py
        .include_tools
        .as_ref()
        .expect("includeTools")
        .iter()
        .map(|t| t.value.as_str())
        .collect();
    assert_eq!(inc, ["safe_tool", "file_reader"]);
    match &py.transport {
        Transport::Stdio { cwd, .. } => assert_eq!(
            cwd.as_ref().map(|c| c.value.as_str()),
            Some("./mcp-servers/python")
        ),
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(launch(&l, "sseServer").transport, Transport::Sse { .. }),
        "Gemini `url` is SSE"
    );
    let http = launch(&l, "httpServer");
    assert!(
        matches!(http.transport, Transport::Http { .. }),
        "Gemini `httpUrl` is streamable HTTP"
    );
    assert_eq!(http.exclude_tools[0].value, "dangerous_tool");
}

#[test]
fn vscode_inputs_mark_secrets() {
    let path = fixture("vscode/.vscode/mcp.json");
    let l = load("vscode/.vscode/mcp.json");
    assert_eq!(l.kind, InputKind::Vscode);
    let p = launch(&l, "perplexity");
    assert_eq!(p.client, "vscode");
    assert!(
        env_of(p, "PERPLEXITY_API_KEY").secret,
        "references a password input"
    );
    assert!(!env_of(p, "REGION").secret, "references a plain input");
    let v = env_of(p, "PERPLEXITY_API_KEY")
        .value
        .as_ref()
        .expect("value");
    assert_eq!(text_at(&path, v), "\"${input:perplexity-key}\"");
    assert!(matches!(
        launch(&l, "github").transport,
        Transport::Http { .. }
    ));
}

#[test]
fn vscode_legacy_settings() {
    let l = load("vscode-legacy/settings.json");
    assert_eq!(l.kind, InputKind::Vscode);
    let (cmd, args) = stdio(launch(&l, "fetch"));
    assert_eq!(
        (cmd.value.as_str(), args),
        ("uvx", vec!["mcp-server-fetch"])
    );
}

#[test]
fn codex_toml_keeps_spans() {
    let path = fixture("codex/config.toml");
    let l = load("codex/config.toml");
    assert_eq!(l.kind, InputKind::Codex);
    assert_eq!(l.servers.len(), 2);
    let c7 = launch(&l, "context7");
    assert_eq!(c7.client, "codex");
    let (cmd, args) = stdio(c7);
    assert_eq!(text_at(&path, cmd), "\"npx\"");
    // The TOML text travels with the result, for diagnostics.
    assert_eq!(&l.text()[cmd.span.expect("span").range()], "\"npx\"");
    assert_eq!(args, ["-y", "@upstash/context7-mcp"]);
    let Transport::Stdio { args, .. } = &c7.transport else {
        unreachable!()
    };
    assert_eq!(text_at(&path, &args[1]), "\"@upstash/context7-mcp\"");
    assert_eq!(
        env_of(c7, "CONTEXT7_LOG")
            .value
            .as_ref()
            .map(|v| v.value.as_str()),
        Some("warn")
    );
    assert!(
        env_of(c7, "CONTEXT7_API_KEY").value.is_none(),
        "env_vars pass names through"
    );
    let inc: Vec<&str> = c7
        .include_tools
        .as_ref()
        .expect("enabled_tools")
        .iter()
        .map(|t| t.value.as_str())
        .collect();
    assert_eq!(inc, ["resolve-library-id", "get-library-docs"]);

    let figma = launch(&l, "figma");
    assert!(figma.disabled, "enabled = false");
    assert_eq!(figma.exclude_tools[0].value, "delete_file");
    assert!(
        env_of(figma, "FIGMA_OAUTH_TOKEN").secret,
        "bearer token variable"
    );
    match &figma.transport {
        Transport::Http { url, headers } => {
            assert_eq!(text_at(&path, url), "\"https://mcp.figma.com/mcp\"");
            let auth = headers
                .iter()
                .find(|(k, _)| k.value == "Authorization")
                .expect("bearer header");
            assert_eq!(auth.1.value, "Bearer ${FIGMA_OAUTH_TOKEN}");
            let region = headers
                .iter()
                .find(|(k, _)| k.value == "X-Figma-Region")
                .expect("http header");
            assert_eq!(text_at(&path, &region.0), "\"X-Figma-Region\"");
        }
        other => panic!("{other:?}"),
    }
}

// --- server.json ----------------------------------------------------------

#[test]
fn server_json_packages_and_remotes() {
    let l = load("server-json/server.json");
    assert_eq!(l.kind, InputKind::ServerJson);
    let names: Vec<&str> = l.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "io.github.example/weather-mcp [npm]",
            "io.github.example/weather-mcp [oci]",
            "io.github.example/weather-mcp [mcpb]",
            "io.github.example/weather-mcp [remote streamable-http]",
            "io.github.example/weather-mcp [remote sse]",
        ]
    );
    let npm = launch(&l, "io.github.example/weather-mcp [npm]");
    assert_eq!(npm.client, "server.json");
    let (cmd, args) = stdio(npm);
    assert_eq!(cmd.value, "npx");
    assert_eq!(
        args,
        [
            "-y",
            "@example/weather-mcp@1.4.2",
            "--units",
            "metric",
            "{config_path}"
        ]
    );
    assert!(env_of(npm, "WEATHER_API_KEY").secret);
    assert!(!env_of(npm, "WEATHER_CACHE_DIR").secret);
    let pkg = npm.package.as_ref().expect("package");
    assert_eq!(
        (pkg.registry.as_str(), pkg.identifier.value.as_str()),
        ("npm", "@example/weather-mcp")
    );

    let (cmd, args) = stdio(launch(&l, "io.github.example/weather-mcp [oci]"));
    assert_eq!(cmd.value, "docker");
    assert_eq!(
        args,
        [
            "run",
            "-i",
            "--rm",
            "-e",
            "WEATHER_API_KEY",
            "docker.io/example/weather-mcp:1.4.2"
        ]
    );

    let mcpb = launch(&l, "io.github.example/weather-mcp [mcpb]");
    assert_eq!(
        mcpb.package.as_ref().and_then(|p| p.sha256.as_deref()),
        Some("fe333e598595000ae021bd27117db32ec69af6987f507ba7a63c90638ff633ce")
    );
    match &launch(&l, "io.github.example/weather-mcp [remote streamable-http]").transport {
        Transport::Http { url, headers } => {
            assert_eq!(url.value, "https://{tenant_id}.weather.example.com/mcp");
            assert_eq!(headers[0].0.value, "Authorization");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        launch(&l, "io.github.example/weather-mcp [remote sse]").transport,
        Transport::Sse { .. }
    ));
}

#[test]
fn server_json_snake_case_era() {
    let l = load("server-json/server-2025-07-09.json");
    assert_eq!(l.servers.len(), 1);
    let pypi = launch(&l, "io.github.example/notes [pypi]");
    let (cmd, args) = stdio(pypi);
    assert_eq!(
        (cmd.value.as_str(), args),
        ("uvx", vec!["example-notes-mcp==0.3.0"])
    );
    assert!(env_of(pypi, "NOTES_TOKEN").secret, "is_secret");
}

// --- MCPB -----------------------------------------------------------------

#[test]
fn mcpb_manifest_static_lists() {
    let l = load("mcpb/manifest.json");
    assert_eq!(l.kind, InputKind::Mcpb);
    let s = server(&l, "file-manager");
    assert_eq!(s.completeness, Completeness::Partial);
    let tools: Vec<&str> = s.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(tools, ["read_file", "search_files", "move_file"]);
    assert!(s.tools.iter().all(|t| t.input_schema.is_none()));
    assert_eq!(s.prompts.len(), 1);
    assert_eq!(s.prompts[0].name, "summarise_folder");
    let l8 = s.launch.as_ref().expect("launch");
    assert_eq!(l8.client, "mcpb");
    let (cmd, args) = stdio(l8);
    assert_eq!(cmd.value, "node");
    assert_eq!(args[0], "${__dirname}/server/index.js");
    assert!(
        env_of(l8, "API_KEY").secret,
        "references a sensitive user_config entry"
    );
    assert!(!env_of(l8, "LOG_LEVEL").secret);
    let pkg = l8.package.as_ref().expect("package");
    assert_eq!(
        pkg.version.as_ref().map(|v| v.value.as_str()),
        Some("1.0.0")
    );
    // What runs on Windows differs; the override is kept and shown.
    let o = &l8.platform_overrides[0];
    assert_eq!(o.platform.value, "win32");
    assert_eq!(
        o.command.as_ref().map(|c| c.value.as_str()),
        Some("node.exe")
    );
    assert!(o.args.is_none());
    let (_, human, _) = mcplint(&[
        "inspect",
        fixture("mcpb/manifest.json").to_str().expect("utf-8"),
    ]);
    assert!(human.contains("    on win32: node.exe\n"), "{human}");
}

#[test]
fn mcpb_windows_static_responses_are_complete() {
    let l = load("mcpb/manifest-windows.json");
    let s = server(&l, "WeatherServer");
    assert_eq!(s.completeness, Completeness::Complete);
    let tools: Vec<&str> = s.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        tools,
        ["get_forecast", "get_alerts"],
        "the captured list, not the manifest's"
    );
    assert!(s.tools.iter().all(|t| t.input_schema.is_some()));
    assert!(s.tools[0].output_schema.is_some());
    let doc = &l.doc;
    assert_eq!(
        s.instructions.and_then(|i| doc.str(i)).as_deref(),
        Some("Use get_forecast for weather questions.")
    );
    assert_eq!(
        s.server_info
            .and_then(|i| doc.get_str(i, "version"))
            .as_deref(),
        Some("2.1.0")
    );
    assert_eq!(
        s.protocol_version.and_then(|v| doc.str(v)).as_deref(),
        Some("2025-06-18")
    );
}

#[test]
fn dxt_legacy_manifest() {
    let l = load("mcpb/dxt-manifest.json");
    assert_eq!(l.kind, InputKind::Mcpb);
    let s = server(&l, "hello-python");
    assert_eq!(s.completeness, Completeness::Partial);
    assert_eq!(s.tools.len(), 1);
    let (cmd, _) = stdio(s.launch.as_ref().expect("launch"));
    assert_eq!(cmd.value, "python");
}

/// Writes a zip holding `entries` to `path`.
fn write_zip(path: &Path, entries: &[(&str, &[u8])]) {
    let f = std::fs::File::create(path).expect("create zip");
    let mut z = zip::ZipWriter::new(f);
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, data) in entries {
        z.start_file(*name, opts).expect("start entry");
        z.write_all(data).expect("write entry");
    }
    z.finish().expect("finish zip");
}

#[test]
fn mcpb_bundle_loads_manifest_from_zip() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bundle = dir.path().join("weather.mcpb");
    let manifest = std::fs::read(fixture("mcpb/manifest-windows.json")).expect("fixture");
    write_zip(
        &bundle,
        &[
            ("server/WeatherServer.exe", b"MZ"),
            ("manifest.json", &manifest),
        ],
    );

    let l = load_file(&bundle, &LoadOptions::default()).expect("bundle loads");
    assert_eq!(l.kind, InputKind::McpbBundle);
    assert_eq!(
        l.path,
        PathBuf::from(format!("{}!manifest.json", bundle.display()))
    );
    let plain = load("mcpb/manifest-windows.json");
    assert_eq!(l.servers.len(), 1);
    assert_eq!(l.servers[0].tools.len(), plain.servers[0].tools.len());
    assert_eq!(l.servers[0].completeness, Completeness::Complete);

    // Through the binary: the bundle and the bare manifest fingerprint alike.
    let v = inspect_json(&bundle);
    let input = &v["inputs"][0];
    assert_eq!(input["kind"], "mcpb-bundle");
    assert!(input["path"]
        .as_str()
        .is_some_and(|p| p.ends_with("weather.mcpb!manifest.json")));
    let w = inspect_json(&fixture("mcpb/manifest-windows.json"));
    assert_eq!(
        input["servers"][0]["fingerprints"],
        w["inputs"][0]["servers"][0]["fingerprints"]
    );
    assert_eq!(input["servers"][0]["counts"]["tools"], 2);
}

#[test]
fn mcpb_bundle_errors() {
    let dir = tempfile::tempdir().expect("tempdir");

    // No manifest.json at the root (one in a folder does not count).
    let nomani = dir.path().join("nomanifest.mcpb");
    write_zip(&nomani, &[("sub/manifest.json", b"{}")]);
    let (code, _, err) = mcplint(&["inspect", nomani.to_str().expect("utf-8")]);
    assert_eq!(code, 2);
    assert!(
        flat(&err).contains("nomanifest.mcpb") && flat(&err).contains("no manifest.json"),
        "{err}"
    );

    // Two entries named manifest.json (written under different names, then
    // renamed in place): refused, as readers disagree on which one counts.
    let twice = dir.path().join("twice.mcpb");
    let good = std::fs::read(fixture("mcpb/manifest.json")).expect("fixture");
    write_zip(
        &twice,
        &[
            ("manifest.json", &good),
            ("manifest.jsoX", b"{\"manifest_version\":\"0.3\"}"),
        ],
    );
    let mut bytes = std::fs::read(&twice).expect("read");
    let mut renamed = 0;
    for i in 0..bytes.len().saturating_sub(13) {
        if &bytes[i..i + 13] == b"manifest.jsoX" {
            bytes[i + 12] = b'n';
            renamed += 1;
        }
    }
    assert_eq!(renamed, 2, "local header and central directory");
    std::fs::write(&twice, &bytes).expect("write");
    let (code, _, err) = mcplint(&["inspect", twice.to_str().expect("utf-8")]);
    assert_eq!(code, 2, "{err}");
    assert!(
        flat(&err).contains("2 entries named manifest.json"),
        "{err}"
    );

    // Corrupt zip.
    let (code, _, err) = mcplint(&[
        "inspect",
        fixture("malformed/corrupt.mcpb").to_str().expect("utf-8"),
    ]);
    assert_eq!(code, 2);
    assert!(
        flat(&err).contains("corrupt.mcpb") && flat(&err).contains("not a valid MCPB bundle"),
        "{err}"
    );

    // A syntax error inside the bundled manifest names bundle!manifest.json and the line.
    let bad = dir.path().join("bad.mcpb");
    write_zip(
        &bad,
        &[(
            "manifest.json",
            b"{\n  \"manifest_version\": \"0.3\",\n  \"name\": oops\n}",
        )],
    );
    let (code, _, err) = mcplint(&["inspect", bad.to_str().expect("utf-8")]);
    assert_eq!(code, 2);
    assert!(flat(&err).contains("bad.mcpb!manifest.json:3:"), "{err}");

    // A manifest bigger than --max-size is refused by its declared size, even
    // though the compressed bundle is small enough to pass the file check.
    let big = dir.path().join("big.mcpb");
    let mut body = b"{\"manifest_version\":\"0.3\",\"name\":\"x\",\"pad\":\"".to_vec();
    body.extend(std::iter::repeat_n(b'a', 200_000));
    body.extend(b"\"}");
    write_zip(&big, &[("manifest.json", &body)]);
    assert!(std::fs::metadata(&big).expect("meta").len() < 10_000);
    let (code, _, err) = mcplint(&[
        "--max-size",
        "10000",
        "inspect",
        big.to_str().expect("utf-8"),
    ]);
    assert_eq!(code, 2);
    assert!(
        flat(&err).contains("declared size 200") && flat(&err).contains("exceeds the limit"),
        "{err}"
    );

    // The same bundle with its headers lying about the size (a zip bomb's
    // trick) is refused by the bytes actually inflated.
    let mut bytes = std::fs::read(&big).expect("read");
    let lie = 100u32.to_le_bytes();
    let mut patched = 0;
    for i in 0..bytes.len().saturating_sub(4) {
        if bytes[i..i + 4] == *b"PK\x03\x04" {
            bytes[i + 22..i + 26].copy_from_slice(&lie);
            patched += 1;
        } else if bytes[i..i + 4] == *b"PK\x01\x02" {
            bytes[i + 24..i + 28].copy_from_slice(&lie);
            patched += 1;
        }
    }
    assert_eq!(
        patched, 2,
        "one local header and one central directory entry"
    );
    let liar = dir.path().join("liar.mcpb");
    std::fs::write(&liar, &bytes).expect("write");
    let (code, _, err) = mcplint(&[
        "--max-size",
        "10000",
        "inspect",
        liar.to_str().expect("utf-8"),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(flat(&err).contains("liar.mcpb!manifest.json"), "{err}");
    assert!(
        flat(&err).contains("inflates to more than the limit"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

// --- malformed inputs through the binary ----------------------------------

#[test]
fn malformed_inputs_name_file_and_line() {
    // (fixture, "file:line:column" expected in the error, a phrase of the message)
    let cases = [
        (
            "malformed/args-not-array.json",
            "args-not-array.json:6:15",
            "`args` must be an array",
        ),
        (
            "malformed/no-command.json",
            "no-command.json:3:16",
            "neither `command` nor a URL",
        ),
        (
            "malformed/server-bad-sha.json",
            "server-bad-sha.json:9:21",
            "64 lowercase hex",
        ),
        (
            "malformed/server-packages-object.json",
            "server-packages-object.json:6:15",
            "`packages` must be an array",
        ),
        (
            "malformed/mcpb-tool-no-name.json",
            "mcpb-tool-no-name.json:10:5",
            "tool without a `name`",
        ),
        (
            "malformed/vscode-input-no-id.json",
            "vscode-input-no-id.json:2:14",
            "input without an `id`",
        ),
        (
            "malformed/bad-syntax.toml",
            "bad-syntax.toml:4:1",
            "invalid TOML",
        ),
        (
            "malformed/args-wrong-type.toml",
            "args-wrong-type.toml:3:8",
            "`args` must be an array of strings",
        ),
    ];
    for (rel, at, phrase) in cases {
        let p = fixture(rel);
        let (code, out, err) = mcplint(&["inspect", p.to_str().expect("utf-8")]);
        assert_eq!(code, 2, "{rel}: exit code\n{err}");
        assert!(out.is_empty(), "{rel}: nothing on stdout");
        let flat = flat(&err);
        assert!(flat.contains(at), "{rel}: expected {at} in\n{err}");
        assert!(
            flat.contains(phrase),
            "{rel}: expected {phrase:?} in\n{err}"
        );
        // The library reports the same location.
        let e = load_file(&p, &LoadOptions::default()).expect_err("malformed");
        assert!(e.to_string().contains(at), "{rel}: {e}");
    }
}

#[test]
fn detection_edge_cases() {
    let dir = tempfile::tempdir().expect("tempdir");
    // `projects` alone is not a Claude Code config.
    let p = dir.path().join("projects.json");
    std::fs::write(&p, br#"{"projects": {"a": {"owner": "x"}}}"#).expect("write");
    let e = load_file(&p, &LoadOptions::default()).expect_err("not a config");
    assert!(e.to_string().contains("not a recognised"), "{e}");
    // ... but with a project's mcpServers it is.
    let p = dir.path().join("claude.json");
    std::fs::write(
        &p,
        br#"{"projects": {"/x": {"mcpServers": {"s": {"command": "c"}}}}}"#,
    )
    .expect("write");
    let l = load_file(&p, &LoadOptions::default()).expect("loads");
    assert_eq!(l.servers[0].name, "/x:s");
    // With no telling path, the client is guessed from fields only one uses.
    for (body, client) in [
        (
            r#"{"mcpServers": {"s": {"serverUrl": "https://x"}}}"#,
            "windsurf",
        ),
        (
            r#"{"mcpServers": {"s": {"httpUrl": "https://x"}}}"#,
            "gemini",
        ),
        (
            r#"{"mcpServers": {"s": {"command": "c", "trust": false}}}"#,
            "gemini",
        ),
        (r#"{"mcpServers": {"s": {"command": "c"}}}"#, "generic"),
    ] {
        let p = dir.path().join("servers.json");
        std::fs::write(&p, body).expect("write");
        let l = load_file(&p, &LoadOptions::default()).expect("loads");
        assert_eq!(
            l.servers[0].launch.as_ref().map(|l| l.client.as_str()),
            Some(client),
            "{body}"
        );
    }
    // A `tools` string is a broken tool list, reported as such.
    let p = dir.path().join("tools.json");
    std::fs::write(&p, br#"{"tools": "none"}"#).expect("write");
    let e = load_file(&p, &LoadOptions::default()).expect_err("broken");
    assert!(e.to_string().contains("`tools` must be an array"), "{e}");
}

// --- inspect output -------------------------------------------------------

#[test]
fn inspect_prints_launch_specs_without_secret_values() {
    let files = [
        "claude-desktop/claude_desktop_config.json",
        "cursor/.cursor/mcp.json",
        "windsurf/mcp_config.json",
        "vscode/.vscode/mcp.json",
        "codex/config.toml",
        "gemini/.gemini/settings.json",
    ];
    let secrets = [
        "ghp_EXAMPLEexample1234567890abcdefABCD",
        "hunter2",
        "BSA_example_key_0000000000",
        "figd_example0000000000000000000",
    ];
    let paths: Vec<String> = files
        .iter()
        .map(|f| fixture(f).display().to_string())
        .collect();
    let mut args = vec!["inspect"];
    args.extend(paths.iter().map(String::as_str));
    let (code, human, err) = mcplint(&args);
    assert_eq!(code, 0, "{err}");
    let mut json_args = vec!["inspect", "--format", "json"];
    json_args.extend(paths.iter().map(String::as_str));
    let (code, json, err) = mcplint(&json_args);
    assert_eq!(code, 0, "{err}");
    for s in secrets {
        assert!(!human.contains(s), "human output leaks {s}:\n{human}");
        assert!(!json.contains(s), "JSON output leaks {s}");
    }
    // What is shown: commands, references, redaction markers.
    assert!(human
        .contains("launch (claude-desktop): docker run -i --rm -e GITHUB_PERSONAL_ACCESS_TOKEN"));
    assert!(human.contains("GITHUB_PERSONAL_ACCESS_TOKEN=<secret>"));
    assert!(human.contains("PERPLEXITY_API_KEY=${input:perplexity-key}"));
    assert!(human.contains("[Authorization: Bearer ${FIGMA_OAUTH_TOKEN}]"));
    assert!(human.contains("trusted: the client skips tool-call confirmations"));
    let v: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    let inputs = v["inputs"].as_array().expect("inputs");
    assert_eq!(inputs.len(), files.len());
    let codex = &inputs[4];
    assert_eq!(codex["kind"], "codex");
    let ctx7 = &codex["servers"][0]["launch"];
    assert_eq!(ctx7["client"], "codex");
    assert_eq!(ctx7["transport"]["type"], "stdio");
    assert_eq!(ctx7["transport"]["command"]["value"], "npx");
    assert_eq!(codex["servers"][0]["completeness"], "launch-only");
    assert!(codex["servers"][0]["fingerprints"].is_null());
}

// --- the benign corpus ----------------------------------------------------

/// Where the 56 benign captures are: `$MCPLINT_BENIGN_DIR`, or the shared
/// datasets next to the repository.
fn benign_dir() -> PathBuf {
    if let Ok(d) = std::env::var("MCPLINT_BENIGN_DIR") {
        return PathBuf::from(d);
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for cand in ["../shared/datasets/benign", "corpus/benign"] {
        let p = root.join(cand);
        if p.join("INDEX.md").is_file() {
            return p;
        }
    }
    panic!(
        "benign captures not found: set MCPLINT_BENIGN_DIR or provide ../shared/datasets/benign"
    );
}

#[test]
fn all_benign_captures_load_with_indexed_tool_counts() {
    let dir = benign_dir();
    let index = std::fs::read_to_string(dir.join("INDEX.md")).expect("INDEX.md");
    // Rows: | `file.json` | `package` | tools | protocol |
    let mut expected = Vec::new();
    for line in index.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 5 {
            continue;
        }
        let Some(file) = cells[1].strip_prefix('`').and_then(|c| c.strip_suffix('`')) else {
            continue;
        };
        if !file.ends_with(".json") {
            continue;
        }
        let tools: usize = cells[3]
            .parse()
            .unwrap_or_else(|_| panic!("tool count in {line}"));
        expected.push((file.to_string(), tools));
    }
    assert_eq!(expected.len(), 56, "INDEX.md lists 56 captures");
    let loaded = load_all(&[dir.display().to_string()], &LoadOptions::default()).expect("all load");
    assert_eq!(loaded.len(), 56, "every capture in the directory loads");
    let mut total = 0;
    for (file, tools) in &expected {
        let l = loaded
            .iter()
            .find(|l| l.path.file_name().and_then(|n| n.to_str()) == Some(file.as_str()))
            .unwrap_or_else(|| panic!("{file} not loaded"));
        assert_eq!(l.kind, InputKind::Capture, "{file}");
        assert_eq!(l.servers.len(), 1, "{file}");
        assert_eq!(l.servers[0].tools.len(), *tools, "{file}: tool count");
        assert_eq!(l.servers[0].completeness, Completeness::Complete, "{file}");
        total += tools;
    }
    assert_eq!(total, 1123);
}

#[test]
fn registry_api_response_loads_as_server_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("latest.json");
    std::fs::write(
        &p,
        br#"{"server": {"name": "io.github.x/y", "description": "d", "version": "1.0.0",
            "packages": [{"registryType": "pypi", "identifier": "y-mcp", "version": "1.0.0", "transport": {"type": "stdio"}}]},
           "_meta": {"io.modelcontextprotocol.registry/official": {"status": "active", "isLatest": true}}}"#,
    )
    .expect("write");
    let l = load_file(&p, &LoadOptions::default()).expect("loads");
    assert_eq!(l.kind, InputKind::ServerJson);
    let (cmd, args) = stdio(launch(&l, "io.github.x/y [pypi]"));
    assert_eq!((cmd.value.as_str(), args), ("uvx", vec!["y-mcp==1.0.0"]));
}

// --- robustness -----------------------------------------------------------

mod robustness {
    use super::*;
    use mcplint::manifest::load::load_bytes;
    use proptest::prelude::*;

    const FILES: &[&str] = &[
        "claude-desktop/claude_desktop_config.json",
        "claude-code/.claude.json",
        "gemini/.gemini/settings.json",
        "vscode/.vscode/mcp.json",
        "codex/config.toml",
        "server-json/server.json",
        "server-json/server-2025-07-09.json",
        "mcpb/manifest.json",
        "mcpb/manifest-windows.json",
    ];

    /// A small bundle, as bytes.
    fn bundle() -> Vec<u8> {
        let mut cur = std::io::Cursor::new(Vec::new());
        {
            let mut z = zip::ZipWriter::new(&mut cur);
            let opts = zip::write::SimpleFileOptions::default()
                .compression_method(zip::CompressionMethod::Deflated);
            z.start_file("manifest.json", opts).expect("entry");
            z.write_all(&std::fs::read(fixture("mcpb/manifest.json")).expect("fixture"))
                .expect("write");
            z.finish().expect("finish");
        }
        cur.into_inner()
    }

    fn mutate(mut bytes: Vec<u8>, edits: &[(usize, u8)], cut: Option<usize>) -> Vec<u8> {
        for &(at, b) in edits {
            if !bytes.is_empty() {
                let i = at % bytes.len();
                bytes[i] = b;
            }
        }
        if let Some(c) = cut {
            bytes.truncate(c % (bytes.len() + 1));
        }
        bytes
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(384))]

        /// Damaged configs, manifests and bundles load or fail with an
        /// error; they never panic.
        #[test]
        fn damaged_inputs_never_panic(
            which in 0..FILES.len() + 1,
            edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6),
            cut in proptest::option::of(any::<usize>()),
        ) {
            let (path, bytes) = if which == FILES.len() {
                (PathBuf::from("damaged.mcpb"), bundle())
            } else {
                let p = fixture(FILES[which]);
                let b = std::fs::read(&p).expect("fixture");
                (p, b)
            };
            let bytes = mutate(bytes, &edits, cut);
            let _ = load_bytes(&path, bytes, &LoadOptions::default());
        }
    }
}

#[test]
fn hostile_names_are_made_visible_in_errors_and_output() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("mcp.json");
    std::fs::write(
        &p,
        "{\"mcpServers\": {\"evil\\u001b[31m\": {\"command\": \"x\"}, \"bad\\u001b[2J\": 5}}",
    )
    .expect("write");
    let (code, out, err) = mcplint(&["inspect", p.to_str().expect("utf-8")]);
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert!(!err.contains('\u{1b}'), "raw escape in {err:?}");
    assert!(err.contains("⟨ESC⟩"), "{err}");

    std::fs::write(
        &p,
        "{\"mcpServers\": {\"evil\\u001b[31m\": {\"command\": \"x\\u001b[2J\"}}}",
    )
    .expect("write");
    let (code, out, err) = mcplint(&["inspect", p.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains('\u{1b}'), "raw escape in {out:?}");
    assert!(out.contains("server evil⟨ESC⟩[31m"), "{out}");
}

/// Every manifest in corpus/ is a capture written by mcplint's runner, with its
/// provenance, and fingerprints like the shared capture of the same version.
#[test]
fn corpus_captures_load_and_match_the_shared_captures() {
    let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let shared = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/datasets/benign");
    let mut seen = 0;
    for entry in std::fs::read_dir(&corpus).expect("corpus/ exists") {
        let path = entry.expect("entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        seen += 1;
        let l = mcplint::manifest::load::load_file(&path, &Default::default())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(
            l.kind,
            mcplint::manifest::InputKind::Capture,
            "{}",
            path.display()
        );
        let capture = l
            .doc
            .get(l.doc.root(), "capture")
            .expect("provenance block");
        for key in ["source", "resolved_version", "integrity", "sandbox"] {
            assert!(
                l.doc.get(capture, key).is_some(),
                "{}: no {key}",
                path.display()
            );
        }
        let twin = shared.join(path.file_name().expect("name"));
        if twin.exists() {
            let s = mcplint::manifest::load::load_file(&twin, &Default::default())
                .expect("shared loads");
            for scheme in mcplint::fingerprint::Scheme::ALL {
                assert_eq!(
                    mcplint::fingerprint::server_fingerprint(&l.doc, &l.servers[0], scheme),
                    mcplint::fingerprint::server_fingerprint(&s.doc, &s.servers[0], scheme),
                    "{} ({scheme})",
                    path.display()
                );
            }
        }
    }
    assert!(seen >= 40, "corpus/ holds {seen} captures");
}
