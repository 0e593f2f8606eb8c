//! Tests of `mcplint fetch`: the protocol client against small fake servers
//! (run on the host with `--no-sandbox`), a remote Streamable HTTP server on
//! loopback, and (when the guest image is built) hostile and real servers in
//! the microVM.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Instant;

use serde_json::{json, Value};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_mcplint")
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/servers")
        .join(name)
}

struct Run {
    out: Output,
    secs: f64,
    capture: Option<Value>,
}

impl Run {
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }
    fn code(&self) -> i32 {
        self.out.status.code().unwrap_or(-1)
    }
    fn cap(&self) -> &Value {
        self.capture
            .as_ref()
            .unwrap_or_else(|| panic!("no capture; stderr:\n{}", self.stderr()))
    }
}

/// Runs `mcplint fetch ARGS -o TMP` and reads the capture if one was written.
fn fetch(args: &[&str]) -> Run {
    let dir = tempfile::tempdir().expect("tempdir");
    let out_path = dir.path().join("capture.json");
    let (before, after) = match args.iter().position(|a| *a == "--") {
        Some(i) => (&args[..i], &args[i..]),
        None => (args, &[][..]),
    };
    let t0 = Instant::now();
    let out = Command::new(bin())
        .arg("fetch")
        .args(before)
        .arg("-o")
        .arg(&out_path)
        .args(after)
        .stdin(Stdio::null())
        .output()
        .expect("run mcplint");
    let secs = t0.elapsed().as_secs_f64();
    let capture = std::fs::read(&out_path)
        .ok()
        .map(|b| serde_json::from_slice(&b).expect("capture is JSON"));
    Run { out, secs, capture }
}

/// Runs the fake server. The default limits (60 s) are far above what any
/// mode needs, so a test that asserts an early end (well under 60 s) proves
/// the mechanism it tests fired, not a default limit, and stays robust on a
/// loaded machine.
fn fake(mode: &str, extra: &[&str]) -> Run {
    let script = fixture("fake_server.py");
    let script = script.to_str().expect("utf-8 path");
    let mut args: Vec<&str> = vec!["--no-sandbox"];
    args.extend_from_slice(extra);
    for (flag, default) in [("--handshake-timeout", "60"), ("--request-timeout", "60")] {
        if !extra.contains(&flag) {
            args.extend_from_slice(&[flag, default]);
        }
    }
    args.extend_from_slice(&["--command", "--", "python3", script, mode]);
    fetch(&args)
}

fn names(v: &Value, key: &str) -> Vec<String> {
    v[key]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|t| t["name"].as_str().unwrap_or("").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn legacy_server_with_pagination_keeps_every_field() {
    let r = fake("legacy", &[]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let c = r.cap();
    assert_eq!(names(c, "tools"), ["get_weather", "add", "page_three"]);
    // Unknown and newer fields are kept verbatim, in order.
    assert_eq!(c["tools"][0]["x-vendor"]["kept"], Value::Bool(true));
    assert_eq!(c["tools"][1]["execution"]["taskSupport"], "optional");
    let keys: Vec<&String> = c["tools"][1].as_object().expect("object").keys().collect();
    assert_eq!(
        keys,
        [
            "name",
            "title",
            "description",
            "inputSchema",
            "annotations",
            "execution"
        ]
    );
    assert_eq!(names(c, "prompts").len(), 5);
    assert_eq!(c["resources"].as_array().map(Vec::len), Some(0));
    assert_eq!(c["resourceTemplates"].as_array().map(Vec::len), Some(1));
    assert_eq!(c["protocolVersion"], "2025-06-18");
    assert_eq!(c["serverInfo"]["name"], "fake-legacy");
    assert_eq!(c["instructions"], "Use get_weather for weather.");
    let cap = &c["capture"];
    assert_eq!(cap["era"], "legacy");
    assert_eq!(cap["sandbox"]["boundary"], "none");
    assert_eq!(cap["timings"]["tools/list_pages"], 2);
    assert_eq!(cap["timings"]["prompts/list_pages"], 3);
    assert_eq!(cap["skipped_lists"][0]["method"], "resources/list");
    assert!(
        r.stderr().contains("WARNING: --no-sandbox"),
        "{}",
        r.stderr()
    );
}

#[test]
fn capture_loads_with_the_existing_loaders() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("c.json");
    let script = fixture("fake_server.py");
    let st = Command::new(bin())
        .args(["fetch", "--no-sandbox", "-o"])
        .arg(&path)
        .args(["--command", "--", "python3"])
        .arg(&script)
        .arg("legacy")
        .output()
        .expect("run");
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let out = Command::new(bin())
        .args(["inspect", "--format", "json"])
        .arg(&path)
        .output()
        .expect("inspect");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["inputs"][0]["kind"], "capture");
    assert_eq!(v["inputs"][0]["servers"][0]["counts"]["tools"], 3);
    assert_eq!(v["inputs"][0]["servers"][0]["counts"]["prompts"], 5);
}

#[test]
fn modern_server_is_detected_by_discover() {
    let r = fake("modern", &[]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let c = r.cap();
    assert_eq!(c["capture"]["era"], "modern");
    assert_eq!(c["protocolVersion"], "2026-07-28");
    assert_eq!(c["serverInfo"]["name"], "fake-modern");
    assert_eq!(c["instructions"], "Modern instructions.");
    assert_eq!(names(c, "tools").len(), 3);
    assert_eq!(names(c, "prompts").len(), 5);
    // resources were not declared: not asked.
    assert!(c["capture"]["skipped_lists"]
        .as_array()
        .expect("array")
        .iter()
        .any(|s| s["method"] == "resources/list"
            && s["reason"].as_str().unwrap_or("").contains("not declared")));
}

#[test]
fn legacy_server_that_ignores_the_probe_falls_back_without_waiting() {
    let r = fake("ignore_discover", &[]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert_eq!(r.cap()["capture"]["era"], "legacy");
    assert!(r.secs < 30.0, "took {:.1} s", r.secs);
}

#[test]
fn server_ping_is_answered() {
    // The fake withholds tools/list until its ping is answered.
    let r = fake("ping", &[]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let msgs = r.cap()["capture"]["server_messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(msgs.iter().any(|m| m["method"] == "ping"));
    assert_eq!(names(r.cap(), "tools").len(), 3);
}

#[test]
fn log_lines_on_stdout_are_recorded_not_fatal() {
    let r = fake("noisy", &[]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let noise = &r.cap()["capture"]["stdout_noise"];
    assert_eq!(noise[0], "Server starting on stdio...");
    assert!(
        r.cap()["capture"]["stdout_noise_count"]
            .as_u64()
            .unwrap_or(0)
            >= 3
    );
    assert_eq!(names(r.cap(), "tools").len(), 3);
}

#[test]
fn garbage_answers_end_in_a_timeout() {
    let r = fake("garbage", &["--handshake-timeout", "2"]);
    assert_eq!(r.code(), 2);
    assert!(r.stderr().contains("did not answer"), "{}", r.stderr());
    assert!(r.capture.is_none());
    assert!(r.secs < 20.0, "took {:.1} s", r.secs);
}

#[test]
fn server_that_never_answers_times_out() {
    let r = fake("silent", &["--handshake-timeout", "2"]);
    assert_eq!(r.code(), 2);
    assert!(
        r.stderr()
            .contains("did not answer server/discover or initialize within 2.0 s"),
        "{}",
        r.stderr()
    );
    assert!(r.secs < 20.0, "took {:.1} s", r.secs);
}

#[test]
fn hang_after_initialize_times_out_on_tools_list() {
    let r = fake("hang_after_init", &["--request-timeout", "2"]);
    assert_eq!(r.code(), 2);
    assert!(
        r.stderr()
            .contains("did not answer tools/list within 2.0 s"),
        "{}",
        r.stderr()
    );
    assert!(r.secs < 20.0, "took {:.1} s", r.secs);
}

#[test]
fn wall_clock_limit_kills_the_server() {
    let r = fake("silent", &["--handshake-timeout", "60", "--timeout", "2"]);
    assert_eq!(r.code(), 2);
    assert!(r.stderr().contains("wall-clock limit"), "{}", r.stderr());
    assert!(r.secs < 20.0, "took {:.1} s", r.secs);
}

#[test]
fn stdout_flood_hits_the_byte_cap() {
    let r = fake("flood", &["--max-bytes", "3000000"]);
    assert_eq!(r.code(), 2);
    assert!(
        r.stderr().contains("more than 3000000 bytes"),
        "{}",
        r.stderr()
    );
    assert!(r.secs < 30.0, "took {:.1} s", r.secs);
}

#[test]
fn early_exit_reports_the_servers_stderr() {
    let r = fake("exit_early", &[]);
    assert_eq!(r.code(), 2);
    let e = r.stderr();
    assert!(e.contains("closed its output"), "{e}");
    assert!(e.contains("fatal: missing API_KEY"), "{e}");
}

#[test]
fn hostile_text_is_kept_in_the_file_and_escaped_on_screen() {
    let r = fake("ansi", &[]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let c = r.cap();
    let desc = c["tools"][0]["description"].as_str().unwrap_or("");
    assert!(
        desc.contains('\u{1b}') && desc.contains('\u{202e}'),
        "kept verbatim: {desc:?}"
    );
    assert_eq!(c["tools"][0]["name"], "evil\u{200b}tool");
    // The summary line on stderr never carries the raw characters.
    assert!(!r.stderr().contains('\u{1b}'));
}

#[test]
fn identities_reveal_a_server_that_cloaks_from_scanners() {
    let r = fake("cloak", &["--identities", "mcplint/0.1,claude-ai/0.1.0"]);
    assert_eq!(r.code(), 1, "{}", r.stderr());
    let ids = r.cap()["capture"]["identities"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(ids.len(), 2);
    assert_eq!(ids[0]["tools"].as_array().map(Vec::len), Some(1));
    assert_eq!(ids[1]["tools"].as_array().map(Vec::len), Some(3));
    assert_eq!(ids[1]["same_as_first"], false);
    assert!(r.stderr().contains("DIFFERS"), "{}", r.stderr());
    // An honest server: same list for everyone.
    let r = fake("legacy", &["--identities", "mcplint/0.1,claude-ai/0.1.0"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert_eq!(r.cap()["capture"]["identities_differ"], false);
}

/// `runner status` lists the snapshots (only complete warm ones) and
/// `runner clean` removes them all. (Status needs a guest image: skipped
/// without one.)
#[test]
fn runner_status_lists_snapshots_and_clean_removes_them() {
    let snaps = tempfile::tempdir().expect("tempdir");
    let boot = snaps.path().join("0123456789abcdef0123456789abcdef");
    let warm = snaps.path().join(".warm/fedcba9876543210fedcba9876543210");
    let partial = snaps.path().join(".warm/00000000000000000000000000000000");
    for d in [&boot, &warm, &partial] {
        std::fs::create_dir_all(d).expect("mkdir");
        std::fs::write(d.join("state.bin"), vec![1u8; 8192]).expect("state");
    }
    std::fs::write(warm.join("app.ext4"), b"disk").expect("disk");
    let run = |action: &str| {
        Command::new(bin())
            .args(["runner", action])
            .env("MCPLINT_VM_SNAPSHOT_DIR", snaps.path())
            .output()
            .expect("run mcplint")
    };
    let status = run("status");
    let text = String::from_utf8_lossy(&status.stdout);
    if status.status.success() {
        assert!(
            text.contains(&format!("boot snapshot {}", boot.display())),
            "{text}"
        );
        assert!(text.contains("1 warm snapshots"), "{text}");
        assert!(text.contains(&warm.display().to_string()), "{text}");
        assert!(!text.contains(&partial.display().to_string()), "{text}");
    }
    let clean = run("clean");
    assert!(
        clean.status.success(),
        "{}",
        String::from_utf8_lossy(&clean.stderr)
    );
    assert!(!snaps.path().exists());
    let again = run("clean");
    assert!(again.status.success());
    assert!(String::from_utf8_lossy(&again.stdout).contains("no snapshots"));
}

#[test]
fn command_needs_no_sandbox() {
    let out = Command::new(bin())
        .args(["fetch", "--command", "--", "python3", "-c", "pass"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--no-sandbox"));
}

#[test]
fn secrets_get_placeholders_recorded_as_such() {
    let r = fake("env", &["--secret", "API_TOKEN", "--env", "REGION=eu-1"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let c = r.cap();
    let seen: Value =
        serde_json::from_str(c["instructions"].as_str().unwrap_or("")).expect("instructions");
    assert_eq!(seen["API_TOKEN"], "mcplint-placeholder-API_TOKEN");
    assert_eq!(seen["REGION"], "eu-1");
    assert_eq!(
        c["capture"]["secrets_given_placeholders"],
        json!(["API_TOKEN"])
    );
    assert_eq!(
        c["capture"]["env_keys_with_dummy_values"],
        json!(["REGION", "API_TOKEN"])
    );
    // A secret never takes a value from the command line.
    let r = fake("env", &["--secret", "API_TOKEN", "--env", "API_TOKEN=real"]);
    assert_eq!(r.code(), 2);
    assert!(r.stderr().contains("placeholder"), "{}", r.stderr());
}

#[test]
fn allow_host_is_checked_before_anything_runs() {
    let hostile = format!("file:{}", fixture("hostile").display());
    for (args, expect) in [
        (
            vec![
                "--sandbox",
                "namespaces",
                "--allow-host",
                "api.example.com",
                &hostile,
            ],
            "no network at all",
        ),
        (
            vec![
                "--allow-host",
                "api.example.com",
                "https://mcp.example.com/mcp",
            ],
            "remote server",
        ),
        (
            vec!["--allow-host", "169.254.169.254", &hostile],
            "not an address",
        ),
        (vec!["--allow-host", "*.example.com", &hostile], "wildcards"),
        (vec!["--allow-host", "api.example.com:80", &hostile], "443"),
    ] {
        let r = fetch(&args);
        assert_eq!(r.code(), 2, "{args:?}");
        assert!(r.stderr().contains(expect), "{args:?}: {}", r.stderr());
    }
}

#[test]
fn unpinned_sources_are_refused() {
    for src in [
        "npm:left-pad",
        "npm:left-pad@latest",
        "npm:left-pad@^1.3.0",
        "pypi:mcp-server-time",
        "pypi:x>=1",
    ] {
        let out = Command::new(bin())
            .args(["fetch", src])
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(2), "{src}");
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(
            e.contains("exact version") || e.contains("not a valid") || e.contains("not supported"),
            "{src}: {e}"
        );
    }
}

/// Starts a fake remote server (a Python script among the fixtures, in
/// `mode`) and returns (child, port): the script prints its port first.
fn python_server(script: &str, mode: &str) -> (std::process::Child, u16) {
    use std::io::BufRead;
    let mut child = Command::new("python3")
        .arg(fixture(script))
        .arg(mode)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("start {script}: {e}"));
    let mut line = String::new();
    let stdout = child.stdout.take().expect("stdout");
    std::io::BufReader::new(stdout)
        .read_line(&mut line)
        .expect("port");
    (child, line.trim().parse().expect("a port number"))
}

/// Starts the fake HTTP server and returns (child, port).
fn http_server(mode: &str) -> (std::process::Child, u16) {
    python_server("fake_http.py", mode)
}

#[test]
fn remote_streamable_http_json_and_sse() {
    for mode in ["json", "sse"] {
        let (mut child, port) = http_server(mode);
        let url = format!("http://127.0.0.1:{port}/mcp");
        let r = fetch(&[
            &url,
            "--header",
            "Authorization: Bearer test-token",
            "--handshake-timeout",
            "5",
        ]);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(r.code(), 0, "{mode}: {}", r.stderr());
        let c = r.cap();
        assert_eq!(names(c, "tools"), ["t0", "t1", "t2"], "{mode}");
        assert_eq!(c["tools"][2]["x-extra"], 2);
        assert_eq!(c["capture"]["sandbox"]["boundary"], "remote");
        assert_eq!(c["capture"]["transport"], "streamable-http");
        assert_eq!(c["serverInfo"]["name"], "fake-http");
    }
}

#[test]
fn remote_without_credentials_fails_clearly() {
    let (mut child, port) = http_server("json");
    let url = format!("http://127.0.0.1:{port}/mcp");
    let r = fetch(&[&url, "--handshake-timeout", "5"]);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(r.code(), 2);
    assert!(r.stderr().contains("unauthorized"), "{}", r.stderr());
}

/// Starts the fake legacy HTTP+SSE server and returns (child, port).
fn sse_server(mode: &str) -> (std::process::Child, u16) {
    python_server("fake_sse.py", mode)
}

#[test]
fn remote_legacy_sse_by_fallback_and_by_choice() {
    for (mode, transport) in [("relative", "auto"), ("absolute", "sse")] {
        let (mut child, port) = sse_server(mode);
        let url = format!("http://127.0.0.1:{port}/sse");
        let r = fetch(&[
            &url,
            "--transport",
            transport,
            "--header",
            "Authorization: Bearer sse-token",
            "--handshake-timeout",
            "5",
            "--request-timeout",
            "5",
        ]);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(r.code(), 0, "{mode}: {}", r.stderr());
        let c = r.cap();
        assert_eq!(names(c, "tools"), ["sse_t0", "sse_t1", "sse_t2"], "{mode}");
        assert_eq!(c["tools"][2]["x-keep"], 2);
        assert_eq!(c["protocolVersion"], "2024-11-05");
        assert_eq!(c["instructions"], "legacy");
        assert_eq!(c["capture"]["transport"], "sse");
        assert_eq!(
            c["capture"]["server_messages"][0]["method"],
            "notifications/message"
        );
        let fell_back = c["capture"]["notes"].as_array().is_some_and(|n| {
            n.iter()
                .any(|n| n.as_str().unwrap_or("").contains("HTTP 405"))
        });
        assert_eq!(fell_back, transport == "auto", "{mode}: {c}");
    }
}

#[test]
fn remote_legacy_sse_refusals() {
    // Streamable HTTP only: the 405 is the answer, no fallback.
    let (mut child, port) = sse_server("relative");
    let url = format!("http://127.0.0.1:{port}/sse");
    let r = fetch(&[
        &url,
        "--transport",
        "streamable-http",
        "--header",
        "Authorization: Bearer sse-token",
        "--handshake-timeout",
        "5",
    ]);
    assert_eq!(r.code(), 2);
    assert!(r.stderr().contains("HTTP 405"), "{}", r.stderr());
    assert!(!r.stderr().contains("HTTP+SSE"), "{}", r.stderr());
    // Without the credentials the stream itself is refused.
    let r = fetch(&[&url, "--transport", "sse", "--handshake-timeout", "5"]);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(r.code(), 2);
    assert!(r.stderr().contains("HTTP 401"), "{}", r.stderr());
    // An endpoint on another origin would receive our POSTs and headers.
    let (mut child, port) = sse_server("elsewhere");
    let url = format!("http://127.0.0.1:{port}/sse");
    let r = fetch(&[
        &url,
        "--header",
        "Authorization: Bearer sse-token",
        "--handshake-timeout",
        "5",
    ]);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(r.code(), 2);
    assert!(
        r.stderr().contains("not on the stream's origin"),
        "{}",
        r.stderr()
    );
}

#[test]
fn plain_http_only_to_loopback() {
    let out = Command::new(bin())
        .args(["fetch", "http://example.invalid/mcp"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("loopback"));
}

// ---------------------------------------------------------------------------
// Launch specs as sources: a server.json, a client-config entry, an MCPB
// bundle. The echo fixture reports its arguments and environment in its one
// tool's description.

/// What the echo fixture saw: its arguments and environment.
fn echo_seen(r: &Run) -> Value {
    serde_json::from_str(r.cap()["tools"][0]["description"].as_str().unwrap_or("{}"))
        .expect("echo report")
}

/// The echo fixture as a `.mcpb` zip in `dir`.
fn echo_mcpb(dir: &Path) -> PathBuf {
    use std::io::Write;
    let src = fixture("echo");
    let out = dir.join("echo.mcpb");
    let mut w = zip::ZipWriter::new(std::fs::File::create(&out).expect("create"));
    let opts = zip::write::SimpleFileOptions::default();
    for rel in ["manifest.json", "package.json", "server/echo.js"] {
        w.start_file(rel, opts).expect("start");
        w.write_all(&std::fs::read(src.join(rel)).expect("read"))
            .expect("write");
    }
    w.finish().expect("finish");
    out
}

fn assert_echo_bundle(r: &Run) {
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let seen = echo_seen(r);
    let argv: Vec<&str> = seen["argv"]
        .as_array()
        .expect("argv")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(argv, ["--root", "/tmp/data", "/a", "/b"], "{seen}");
    // The sensitive user_config value is a placeholder, never its default.
    assert_eq!(seen["env"]["ECHO_TOKEN"], "mcplint-placeholder-token");
    assert_eq!(seen["env"]["ECHO_MODE"], "plain");
    assert!(!r.cap().to_string().contains("bundle-secret-default"));
    let spec = &r.cap()["capture"]["launch_spec"];
    assert_eq!(spec["server"], "mcplint-echo-fixture", "{spec}");
    assert!(spec["resolved"].as_str().unwrap_or("").starts_with("mcpb:"));
    assert_eq!(
        r.cap()["capture"]["env_keys_with_dummy_values"],
        serde_json::json!(["ECHO_TOKEN"])
    );
}

#[test]
fn an_mcpb_bundle_folder_and_zip_run_their_mcp_config() {
    let r = fetch(&["--no-sandbox", fixture("echo").to_str().expect("utf-8")]);
    assert_echo_bundle(&r);
    assert_eq!(r.cap()["capture"]["launch_spec"]["kind"], "mcpb");
    let dir = tempfile::tempdir().expect("tempdir");
    let mcpb = echo_mcpb(dir.path());
    let r = fetch(&["--no-sandbox", mcpb.to_str().expect("utf-8")]);
    assert_echo_bundle(&r);
    assert_eq!(r.cap()["capture"]["launch_spec"]["kind"], "mcpb-bundle");
    assert!(r.cap()["capture"]["integrity"]
        .as_str()
        .unwrap_or("")
        .starts_with("sha256:"));
}

/// Steps are announced on a terminal (a first fetch under TCG takes tens of
/// seconds), and only there: logs and pipes get the summary line alone.
#[test]
fn progress_shows_on_a_terminal_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("capture.json");
    let quote = |p: &Path| format!("'{}'", p.display().to_string().replace('\'', "'\\''"));
    let line = format!(
        "{} fetch --no-sandbox {} -o {}",
        quote(Path::new(bin())),
        quote(&fixture("echo")),
        quote(&out)
    );
    // `script` (util-linux) gives the command a pseudo-terminal.
    let tty = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .expect("run script");
    let shown = String::from_utf8_lossy(&tty.stdout);
    assert!(tty.status.success(), "{shown}");
    assert!(shown.contains("mcplint: unpacking "), "{shown}");
    assert!(
        shown.contains("mcplint: starting the server on this host, with no sandbox"),
        "{shown}"
    );
    assert!(out.exists(), "{shown}");
    let piped = fetch(&["--no-sandbox", fixture("echo").to_str().expect("utf-8")]);
    assert_eq!(piped.code(), 0, "{}", piped.stderr());
    assert!(!piped.stderr().contains("unpacking"), "{}", piped.stderr());
    assert!(
        !piped.stderr().contains("starting the server"),
        "{}",
        piped.stderr()
    );
}

#[test]
fn launch_specs_in_the_namespaces_sandbox() {
    if !vm_tests_enabled() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mcpb = echo_mcpb(dir.path());
    let r = vm_fetch(&["--sandbox", "namespaces", mcpb.to_str().expect("utf-8")]);
    assert_echo_bundle(&r);
    assert_eq!(r.cap()["capture"]["sandbox"]["boundary"], "namespaces");
    let cfg = echo_config(dir.path());
    let r = vm_fetch(&[
        "--sandbox",
        "namespaces",
        cfg.to_str().expect("utf-8"),
        "--server",
        "echo",
    ]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert_eq!(echo_seen(&r)["argv"][1], "mcplint-placeholder-args2");
    assert!(!r.cap().to_string().contains(CONFIG_SECRET));
}

const CONFIG_SECRET: &str = "ghp_realrealrealrealreal0123456789abcdef";

/// A client config with the echo fixture started as `node SCRIPT` and a
/// second, unpinned entry.
fn echo_config(dir: &Path) -> PathBuf {
    let script = fixture("echo").join("server/echo.js");
    let cfg = dir.join("claude_desktop_config.json");
    let text = serde_json::json!({"mcpServers": {
        "echo": {"command": "node",
                 "args": [script, "--api-key", CONFIG_SECRET, "--repo", "x/y"],
                 "env": {"GITHUB_TOKEN": CONFIG_SECRET, "LOG_LEVEL": "debug"}},
        "memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]},
    }});
    std::fs::write(&cfg, text.to_string()).expect("write config");
    cfg
}

#[test]
fn a_client_config_entry_never_passes_the_configs_secrets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = echo_config(dir.path());
    let cfg_s = cfg.to_str().expect("utf-8");
    let r = fetch(&["--no-sandbox", cfg_s, "--server", "echo"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let seen = echo_seen(&r);
    assert_eq!(seen["argv"][0], "--api-key");
    assert_eq!(seen["argv"][1], "mcplint-placeholder-args2");
    assert_eq!(seen["argv"][3], "x/y");
    assert_eq!(
        seen["env"]["GITHUB_TOKEN"],
        "mcplint-placeholder-GITHUB_TOKEN"
    );
    assert_eq!(seen["env"]["LOG_LEVEL"], "mcplint-placeholder-LOG_LEVEL");
    // Nowhere in the capture, nor on screen.
    assert!(!r.cap().to_string().contains(CONFIG_SECRET));
    assert!(!r.stderr().contains(CONFIG_SECRET));
    let spec = &r.cap()["capture"]["launch_spec"];
    assert_eq!(spec["server"], "echo");
    assert_eq!(spec["kind"], "mcp-servers");
    assert!(
        spec["resolved"]
            .as_str()
            .unwrap_or("")
            .contains("(script server/echo.js)"),
        "{spec}"
    );
    assert_eq!(r.cap()["capture"]["resolved_version"], "1.0.0");

    // Several entries need --server; an unpinned one is refused.
    let r = fetch(&["--no-sandbox", cfg_s]);
    assert_eq!(r.code(), 2);
    assert!(r.stderr().contains("--server NAME"), "{}", r.stderr());
    let r = fetch(&["--no-sandbox", cfg_s, "--server", "memory"]);
    assert_eq!(r.code(), 2);
    assert!(
        r.stderr().contains("an exact version is needed"),
        "{}",
        r.stderr()
    );
    assert!(r.capture.is_none());
}

#[test]
fn server_json_sources_are_resolved_or_refused_with_a_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sj = dir.path().join("server.json");
    std::fs::write(
        &sj,
        r#"{"name":"io.github.x/w","description":"d","version":"1.0.0",
            "packages":[{"registryType":"oci","identifier":"ghcr.io/x/w","version":"1.0.0","transport":{"type":"stdio"}},
                        {"registryType":"npm","identifier":"w-mcp","version":"^1.0.0","transport":{"type":"stdio"}},
                        {"registryType":"pypi","identifier":"w-mcp","version":"1.0.0","transport":{"type":"stdio"}}]}"#,
    )
    .expect("write");
    let sj_s = sj.to_str().expect("utf-8");
    for (extra, why) in [
        (&[][..], "pick one with --package N"),
        (&["--package", "0"][..], "`oci` package"),
        (&["--package", "1"][..], "an exact version is needed"),
        (&["--package", "9"][..], "no package 9"),
        (&["--server", "nope"][..], "no entry named"),
    ] {
        let mut args = vec!["--no-sandbox", sj_s];
        args.extend_from_slice(extra);
        let r = fetch(&args);
        assert_eq!(r.code(), 2, "{extra:?}");
        assert!(r.stderr().contains(why), "{extra:?}: {}", r.stderr());
    }
    // --server/--package only go with a launch-spec file.
    let r = fetch(&["--no-sandbox", "npm:x@1.0.0", "--package", "0"]);
    assert_eq!(r.code(), 2);
    assert!(r.stderr().contains("launch-spec file"), "{}", r.stderr());
}

// ---------------------------------------------------------------------------
// --build-in-guest: a Python sdist is built inside the sandbox, never here.

/// The sdist fixture as `NAME-VER.tar.gz` in `dir` (packed with tar; nothing
/// of it runs on this host).
fn fixture_sdist(dir: &Path) -> PathBuf {
    let name = "mcplint-sdist-fixture-1.0.0";
    let out = dir.join(format!("{name}.tar.gz"));
    let st = Command::new("tar")
        .arg("-czf")
        .arg(&out)
        .arg("-C")
        .arg(fixture("sdist"))
        .arg(name)
        .status()
        .expect("run tar");
    assert!(st.success());
    out
}

#[test]
fn an_sdist_is_refused_without_build_in_guest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = format!("file:{}", fixture_sdist(dir.path()).display());
    let r = fetch(&["--sandbox", "namespaces", &src]);
    assert_eq!(r.code(), 2);
    assert!(r.stderr().contains("--build-in-guest"), "{}", r.stderr());
    assert!(r.capture.is_none());
    let r = fetch(&["--no-sandbox", "--build-in-guest", &src]);
    assert_eq!(r.code(), 2);
    assert!(r.stderr().contains("there is none"), "{}", r.stderr());
}

#[test]
fn build_in_guest_builds_an_sdist_inside_the_sandbox() {
    if !vm_tests_enabled() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let src = format!("file:{}", fixture_sdist(dir.path()).display());
    let r = vm_fetch(&["--sandbox", "namespaces", "--build-in-guest", &src]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let built: Value =
        serde_json::from_str(r.cap()["tools"][0]["description"].as_str().unwrap_or("{}"))
            .expect("fixture report");
    // The fixture's build step records where it ran: inside the sandbox.
    assert_eq!(built["built_by"], "sandbox", "{built}");
    let c = &r.cap()["capture"];
    assert_eq!(c["resolved_version"], "1.0.0");
    assert!(c["integrity"].as_str().unwrap_or("").starts_with("sha256:"));
    assert!(
        c["notes"].to_string().contains("built inside the sandbox"),
        "{c}"
    );
}

// ---------------------------------------------------------------------------
// In the microVM. These need the guest image (`mcplint runner setup`, which
// scripts/test.sh runs). Without it they fail, unless MCPLINT_SKIP_VM_TESTS=1
// says to skip them (for machines that cannot build it); CI builds it.
// They run one after another inside a single test, so that at most one VM
// runs at a time on these 2-core machines.

fn vm_tests_enabled() -> bool {
    if std::env::var_os("MCPLINT_SKIP_VM_TESTS").is_some_and(|v| v == "1") {
        eprintln!("MCPLINT_SKIP_VM_TESTS=1: skipping the microVM tests");
        return false;
    }
    let st = Command::new(bin())
        .args(["runner", "status"])
        .output()
        .expect("run");
    assert!(
        st.status.success(),
        "no guest image: run `mcplint runner setup` (scripts/test.sh does), or set MCPLINT_SKIP_VM_TESTS=1"
    );
    true
}

/// The guest image's Python standard library is compiled to bytecode the
/// guest uses as it is (its disk is read-only: without it every start
/// compiled every module it imported, most of a Python server's start under
/// emulation).
#[test]
fn guest_python_stdlib_is_compiled_to_unchecked_bytecode() {
    if !vm_tests_enabled() {
        return;
    }
    let st = Command::new(bin())
        .args(["runner", "status"])
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&st.stdout);
    let folder = text
        .lines()
        .find_map(|l| l.strip_prefix("folder "))
        .expect("runner status names the image folder");
    let lib = Path::new(folder.trim()).join("runtime/lib/python3.11");
    for pyc in [
        "__pycache__/typing.cpython-311.pyc",
        "asyncio/__pycache__/base_events.cpython-311.pyc",
        "json/__pycache__/decoder.cpython-311.pyc",
        "email/__pycache__/message.cpython-311.pyc",
    ] {
        let bytes = std::fs::read(lib.join(pyc)).unwrap_or_else(|e| panic!("{pyc}: {e}"));
        // PEP 552: the flags word after the magic number; 1 = hash-based,
        // source not checked (a timestamp-based file would need the source's
        // mtime to match, which nothing guarantees on the guest's disk).
        assert_eq!(bytes.get(4..8), Some(&[1u8, 0, 0, 0][..]), "{pyc}");
        let path = String::from_utf8_lossy(&bytes);
        assert!(
            path.contains("/usr/lib/python3.11/"),
            "{pyc} names guest paths"
        );
    }
}

/// Runs a fetch with its own TMPDIR, and checks that it left nothing behind:
/// no temporary files and no QEMU or bubblewrap process using them.
fn vm_fetch(args: &[&str]) -> Run {
    vm_fetch_env(args, &[])
}

/// [`vm_fetch`] with extra environment variables.
fn vm_fetch_env(args: &[&str], env: &[(&str, &Path)]) -> Run {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out_dir = tempfile::tempdir().expect("tempdir");
    let out_path = out_dir.path().join("capture.json");
    let (before, after) = match args.iter().position(|a| *a == "--") {
        Some(i) => (&args[..i], &args[i..]),
        None => (args, &[][..]),
    };
    let t0 = Instant::now();
    let out = Command::new(bin())
        .arg("fetch")
        .args(before)
        .arg("-o")
        .arg(&out_path)
        .args(after)
        .env("TMPDIR", tmp.path())
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("run mcplint");
    let secs = t0.elapsed().as_secs_f64();
    let left = entries(tmp.path());
    assert!(left.is_empty(), "temporary files left behind: {left:?}");
    let running = processes_naming(&tmp.path().to_string_lossy());
    assert!(running.is_empty(), "processes left running: {running:?}");
    let capture = std::fs::read(&out_path)
        .ok()
        .map(|b| serde_json::from_slice(&b).expect("capture is JSON"));
    Run { out, secs, capture }
}

/// What a folder holds (a test's TMPDIR must be empty after a fetch).
fn entries(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .expect("list")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect()
}

/// Processes whose command line names `needle`.
fn processes_naming(needle: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .expect("proc")
        .filter_map(Result::ok)
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(needle))
        .collect()
}

/// Interrupting `fetch` (Ctrl-C, or a CI job cancelled with SIGTERM) kills
/// what it started and removes the session's files: signalled as soon as a
/// process of the session runs whose command line holds `when` (`npm`: while
/// the package is unpacked on the host; `bwrap`, `qemu`: while the server
/// runs in its sandbox).
fn interrupted_fetch_cleans_up(sandbox: &str, signal: nix::sys::signal::Signal, when: &str) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let tmp_s = tmp.path().to_string_lossy().into_owned();
    let out_dir = tempfile::tempdir().expect("tempdir");
    let src = format!("file:{}", fixture("hostile").display());
    let child = Command::new(bin())
        .args([
            "fetch",
            "--sandbox",
            sandbox,
            &src,
            "--timeout",
            "300",
            "-o",
        ])
        .arg(out_dir.path().join("capture.json"))
        .args(["--", "silent"])
        .env("TMPDIR", tmp.path())
        .env("MCPLINT_VM_WARM", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run mcplint");
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    // mcplint itself does not name the session's folder; its children do.
    let t0 = Instant::now();
    while !processes_naming(&tmp_s).iter().any(|c| c.contains(when)) {
        assert!(t0.elapsed().as_secs() < 240, "{when} never ran");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    if when != "npm" {
        // Let the server get going (the guest's, or bubblewrap's child).
        std::thread::sleep(std::time::Duration::from_secs(2));
    }
    nix::sys::signal::kill(pid, signal).expect("signal");
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{sandbox} {signal}: {stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    // The handler killed the children (SIGKILL) before exiting: a killed
    // process is gone at once (a zombie has no command line), while one
    // that was missed would still be at work for seconds (npm, QEMU).
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(
        processes_naming(&tmp_s),
        Vec::<String>::new(),
        "{sandbox} {signal}"
    );
    let left = entries(tmp.path());
    assert!(
        left.is_empty(),
        "{sandbox} {signal}: files left behind: {left:?}"
    );
    assert!(!out_dir.path().join("capture.json").exists());
}

#[test]
fn ctrl_c_and_sigterm_kill_the_server_and_remove_its_files() {
    if !vm_tests_enabled() {
        return;
    }
    use nix::sys::signal::Signal;
    interrupted_fetch_cleans_up("namespaces", Signal::SIGTERM, "npm");
    interrupted_fetch_cleans_up("namespaces", Signal::SIGINT, "bwrap");
    interrupted_fetch_cleans_up("namespaces", Signal::SIGTERM, "bwrap");
    interrupted_fetch_cleans_up("microvm", Signal::SIGINT, "qemu");
}

fn fingerprint_of(path: &Path) -> String {
    let out = Command::new(bin())
        .arg("fingerprint")
        .arg(path)
        .output()
        .expect("fingerprint");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_owned()
}

/// The complete snapshot folders (not the dot folders) directly in `dir`.
fn snapshot_dirs(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// Keeps the first hundredth of a snapshot's saved state.
fn truncate_state(dir: &Path) {
    let state = dir.join("state.bin");
    let bytes = std::fs::read(&state).expect("state");
    std::fs::write(&state, &bytes[..bytes.len() / 100]).expect("truncate the state");
}

/// Snapshots that cannot be restored. A damaged warm snapshot: the fetch
/// restores the boot snapshot instead, says so, drops the damaged one and
/// saves it anew. A damaged boot snapshot: the fetch boots cold, says so,
/// and drops it (the next fetch makes it anew).
fn damaged_snapshots_fall_back() {
    if std::env::var_os("MCPLINT_VM_BASELINE").is_some() {
        return;
    }
    let snaps = tempfile::tempdir().expect("tempdir");
    let warm_root = snaps.path().join(".warm");
    let env = [("MCPLINT_VM_SNAPSHOT_DIR", snaps.path())];
    let echo = format!("file:{}", fixture("echo").display());
    let tunings = |r: &Run| r.cap()["capture"]["sandbox"]["tunings"].to_string();
    let notes = |r: &Run| r.cap()["capture"]["notes"].to_string();
    let first = vm_fetch_env(&[&echo, "--timeout", "150"], &env);
    assert_eq!(first.code(), 0, "{}", first.stderr());
    assert!(
        tunings(&first).contains("boot-snapshot"),
        "{}",
        tunings(&first)
    );
    let boot = snapshot_dirs(snaps.path());
    assert_eq!(boot.len(), 1, "{boot:?}");
    let warm = snapshot_dirs(&warm_root);
    assert_eq!(warm.len(), 1, "{warm:?} {}", notes(&first));

    truncate_state(&warm[0]);
    let second = vm_fetch_env(&[&echo, "--timeout", "150"], &env);
    assert_eq!(second.code(), 0, "{}", second.stderr());
    assert!(
        tunings(&second).contains("boot-snapshot"),
        "{}",
        tunings(&second)
    );
    assert!(
        !tunings(&second).contains("warm-snapshot"),
        "{}",
        tunings(&second)
    );
    assert!(
        notes(&second).contains("the warm snapshot did not start"),
        "{}",
        notes(&second)
    );
    assert!(
        notes(&second).contains("saved this server's warm snapshot"),
        "{}",
        notes(&second)
    );
    assert_eq!(echo_seen(&second)["argv"], serde_json::json!([]));
    // Saved anew, whole.
    let state = std::fs::metadata(warm[0].join("state.bin")).expect("saved anew");
    assert!(state.len() > 1 << 20, "{}", state.len());

    let third = vm_fetch_env(&[&echo, "--timeout", "150"], &env);
    assert_eq!(third.code(), 0, "{}", third.stderr());
    assert!(
        tunings(&third).contains("warm-snapshot"),
        "{}",
        tunings(&third)
    );
    assert_eq!(echo_seen(&third)["argv"], serde_json::json!([]));

    truncate_state(&boot[0]);
    let no_warm = [
        ("MCPLINT_VM_SNAPSHOT_DIR", snaps.path()),
        ("MCPLINT_VM_WARM", Path::new("0")),
    ];
    let fourth = vm_fetch_env(&[&echo, "--timeout", "150"], &no_warm);
    assert_eq!(fourth.code(), 0, "{}", fourth.stderr());
    assert!(
        !tunings(&fourth).contains("boot-snapshot"),
        "{}",
        tunings(&fourth)
    );
    assert!(
        notes(&fourth).contains("booted cold instead"),
        "{}",
        notes(&fourth)
    );
    assert_eq!(echo_seen(&fourth)["argv"], serde_json::json!([]));
    assert!(!boot[0].exists(), "the damaged snapshot was kept");
}

#[test]
fn a_guest_that_dies_in_early_boot_is_booted_again_then_reported() {
    if !vm_tests_enabled() {
        return;
    }
    // 48 MiB cannot hold the kernel and its initramfs: every boot dies
    // before the guest's init prints its first line (the same shape as an
    // emulation fault in early boot, but every time). The fetch boots it
    // again, then gives up with a message that says what happened.
    let src = format!("file:{}", fixture("hostile").display());
    let r = vm_fetch(&[&src, "--memory", "48", "--timeout", "120"]);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(
        r.stderr()
            .contains("the guest kernel died before its init ran, 3 boots in a row"),
        "{}",
        r.stderr()
    );
}

#[test]
fn microvm_hostile_battery_and_real_servers() {
    if !vm_tests_enabled() {
        return;
    }
    let hostile = fixture("hostile");
    let src = format!("file:{}", hostile.display());

    // 1. The spy: reads, writes, lists home, connects out.
    let home = PathBuf::from(std::env::var("HOME").expect("HOME"));
    let canary = home.join(format!(".mcplint-canary-{}", std::process::id()));
    let secret = format!("canary-{}-{:?}", std::process::id(), Instant::now());
    std::fs::write(&canary, &secret).expect("write canary");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let port = listener.local_addr().expect("addr").port().to_string();
    let canary_s = canary.to_string_lossy().into_owned();
    let r = vm_fetch(&[&src, "--timeout", "120", "--", "spy", &canary_s, &port]);
    // Again: a second restore of the same boot snapshot.
    let r2 = vm_fetch(&[&src, "--timeout", "120", "--", "spy", &canary_s, &port]);
    // The same spy under the weaker boundary a person may ask for.
    let ns = vm_fetch(&[
        "--sandbox",
        "namespaces",
        &src,
        "--timeout",
        "60",
        "--",
        "spy",
        &canary_s,
        &port,
    ]);
    // The spy again, with one allowed host: the VM gets a network whose
    // only exit is that name on port 443, through mcplint's proxy. (No
    // internet in tests: the `.test` name never resolves, so the proxy
    // refuses; the proxy's splicing and address policy have unit tests.)
    let net = vm_fetch(&[
        &src,
        "--allow-host",
        "allowed.mcplint.test",
        "--timeout",
        "150",
        "--",
        "spy",
        &canary_s,
        &port,
        "allowed.mcplint.test",
    ]);
    let accepted = listener.accept().is_ok();
    let after = std::fs::read_to_string(&canary).unwrap_or_default();
    let _ = std::fs::remove_file(&canary);
    assert_eq!(ns.code(), 0, "{}", ns.stderr());
    assert_eq!(ns.cap()["capture"]["sandbox"]["boundary"], "namespaces");
    let ns_report: Value =
        serde_json::from_str(ns.cap()["tools"][0]["description"].as_str().unwrap_or("{}"))
            .expect("spy report");
    assert_eq!(ns_report["read"], "ENOENT", "{ns_report}");
    assert_eq!(ns_report["home"], "", "no host home: {ns_report}");
    for k in ["loopback", "gateway", "metadata"] {
        assert_ne!(ns_report[k], "CONNECTED", "{k}: {ns_report}");
    }
    assert_eq!(net.code(), 0, "{}", net.stderr());
    let net_report: Value = serde_json::from_str(
        net.cap()["tools"][0]["description"]
            .as_str()
            .unwrap_or("{}"),
    )
    .expect("spy report");
    assert!(
        net_report["hosts"]
            .as_str()
            .unwrap_or("")
            .contains("10.0.2.100 allowed.mcplint.test"),
        "{net_report}"
    );
    assert_eq!(net_report["interfaces"], "lo,eth0", "{net_report}");
    for k in [
        "loopback",
        "gateway",
        "gateway_443",
        "metadata",
        "public",
        "allowed_80",
    ] {
        assert_ne!(net_report[k], "CONNECTED", "{k}: {net_report}");
    }
    // The connection to the allowed name reached the proxy, which logged it
    // (and refused it: the name does not resolve).
    let log = &net.cap()["capture"]["network"];
    assert_eq!(
        log["allowed_hosts"][0]["guest_address"], "10.0.2.100",
        "{log}"
    );
    assert_eq!(log["attempts"][0]["host"], "allowed.mcplint.test", "{log}");
    assert_eq!(log["attempts"][0]["verdict"], "refused", "{log}");
    assert_eq!(log["port"], 443);
    eprintln!("spy with --allow-host: {:.1} s", net.secs);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert_eq!(r.cap()["capture"]["network"], "none");
    assert_eq!(after, secret, "the canary changed");
    assert!(!accepted, "the guest reached the host's loopback");
    let c = r.cap();
    let report: Value = serde_json::from_str(c["tools"][0]["description"].as_str().unwrap_or("{}"))
        .expect("spy report");
    assert_eq!(report["read"], "ENOENT", "{report}");
    // (A write lands in the guest's own throwaway /root, if anywhere.)
    for k in ["loopback", "gateway", "metadata"] {
        assert_ne!(report[k], "CONNECTED", "{k}: {report}");
    }
    // No network device: at most the loopback (which is not even up).
    let ifaces = report["interfaces"].as_str().unwrap_or("?");
    assert!(
        ifaces.split(',').all(|i| i.is_empty() || i == "lo"),
        "{report}"
    );
    assert!(
        !report["env"].as_str().unwrap_or("").contains("CARGO"),
        "host environment leaked: {report}"
    );
    // The first fetch restored the boot snapshot and saved the spy's warm
    // snapshot; the second restored that. Neither sees what the other left
    // behind, the random numbers drawn per request differ (the go lines'
    // seeds) and both read the host's time; what the spy drew while
    // starting is shared, which proves the second really resumed the
    // first's saved server (without warm snapshots it differs).
    assert_eq!(r2.code(), 0, "{}", r2.stderr());
    let report2: Value =
        serde_json::from_str(r2.cap()["tools"][0]["description"].as_str().unwrap_or("{}"))
            .expect("spy report");
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as f64;
    for rep in [&report, &report2] {
        assert_eq!(rep["leftover"], "none", "{rep}");
        assert_eq!(rep["random"].as_str().map(str::len), Some(32), "{rep}");
        assert_eq!(
            rep["request_random"].as_str().map(str::len),
            Some(32),
            "{rep}"
        );
        let t = rep["request_time"].as_f64().unwrap_or(0.0);
        assert!(
            (now_ms - t).abs() < 600_000.0,
            "guest clock {t} vs {now_ms}: {rep}"
        );
    }
    assert_ne!(report["request_random"], report2["request_random"]);
    let tunings = |c: &Value| c["capture"]["sandbox"]["tunings"].to_string();
    let warm = tunings(r2.cap()).contains("warm-snapshot");
    if std::env::var_os("MCPLINT_VM_BASELINE").is_none() {
        assert!(tunings(c).contains("boot-snapshot"), "{}", tunings(c));
        let saved = c["capture"]["notes"].to_string();
        if std::env::var_os("MCPLINT_VM_WARM").is_none_or(|v| v != "0") {
            assert!(
                saved.contains("saved this server's warm snapshot"),
                "{saved}"
            );
            assert!(warm, "{}", tunings(r2.cap()));
            assert!(r2.cap()["capture"]["timings"]["warmup_s"]
                .as_f64()
                .is_some());
        } else {
            assert!(tunings(r2.cap()).contains("boot-snapshot"));
        }
    }
    if warm {
        assert_eq!(report["random"], report2["random"]);
        assert_eq!(report["math_random"], report2["math_random"]);
    } else {
        assert_ne!(report["random"], report2["random"]);
        assert_ne!(report["math_random"], report2["math_random"]);
    }
    let cap = &c["capture"];
    assert_eq!(cap["sandbox"]["boundary"], "microvm");
    assert_eq!(cap["sandbox"]["backend"], "qemu-microvm");
    assert!(["tcg", "kvm"].contains(&cap["sandbox"]["accelerator"].as_str().unwrap_or("")));
    assert!(cap["sandbox"]["guest_image"]
        .as_str()
        .unwrap_or("")
        .starts_with("sha256:"));
    assert!(cap["timings"]["boot_s"].as_f64().is_some(), "{cap}");
    // The start-up tunings are on by default and recorded, and the VM's CPU
    // time is measured (QEMU inside bubblewrap, seconds of emulation).
    let tunings = cap["sandbox"]["tunings"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        tunings.contains(&Value::from("kernel-cmdline-fast-boot")),
        "{cap}"
    );
    assert!(
        cap["timings"]["sandbox_cpu_s"]
            .as_f64()
            .is_some_and(|s| s > 0.1),
        "{cap}"
    );
    assert!(cap["integrity"]
        .as_str()
        .unwrap_or("")
        .starts_with("sha256:"));
    assert_eq!(cap["resolved_version"], "1.0.0");
    // ANSI and invisible characters are kept in the file, never on screen.
    assert!(c["tools"][1]["description"]
        .as_str()
        .unwrap_or("")
        .contains('\u{1b}'));
    assert!(!r.stderr().contains('\u{1b}'));
    eprintln!("spy: {:.1} s", r.secs);

    // 2. Fork bomb after initialize: the request timeout ends it.
    let r = vm_fetch(&[
        &src,
        "--request-timeout",
        "10",
        "--timeout",
        "120",
        "--",
        "forkbomb",
    ]);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(
        r.stderr().contains("did not answer tools/list")
            || r.stderr().contains("closed its output"),
        "{}",
        r.stderr()
    );
    eprintln!("forkbomb: {:.1} s", r.secs);

    // 3. Memory bomb: the guest's memory is capped; the server dies or times out.
    let r = vm_fetch(&[
        &src,
        "--memory",
        "384",
        "--request-timeout",
        "30",
        "--timeout",
        "120",
        "--",
        "membomb",
    ]);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(
        r.stderr().contains("closed its output")
            || r.stderr().contains("did not answer tools/list"),
        "{}",
        r.stderr()
    );
    eprintln!(
        "membomb: {:.1} s: {}",
        r.secs,
        r.stderr().lines().next().unwrap_or("")
    );

    // 4. Stdout flood: the byte cap stops it.
    let r = vm_fetch(&[
        &src,
        "--max-bytes",
        "5000000",
        "--timeout",
        "120",
        "--",
        "flood",
    ]);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(
        r.stderr().contains("more than 5000000 bytes") || r.stderr().contains("longer than"),
        "{}",
        r.stderr()
    );
    eprintln!("flood: {:.1} s", r.secs);

    // 5. Never answers: the wall clock ends it.
    let r = vm_fetch(&[&src, "--timeout", "25", "--", "silent"]);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(
        r.stderr().contains("wall-clock") || r.stderr().contains("did not answer"),
        "{}",
        r.stderr()
    );
    assert!(r.secs < 40.0, "took {:.1} s", r.secs);

    // 5b. Exits at once, while its warm snapshot was to be made: the guest
    // says so (not `busy`), the host saves nothing and reports the exit.
    let r = vm_fetch(&[&src, "--timeout", "120", "--", "exit"]);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    for want in [
        "closed its output",
        "hostile: exiting at once",
        "mcplint-guest: ended",
    ] {
        assert!(r.stderr().contains(want), "{want}: {}", r.stderr());
    }
    assert!(
        !r.stderr().contains("mcplint-guest: busy"),
        "{}",
        r.stderr()
    );

    // 6. An MCPB bundle: unpacked on the host, its mcp_config run in the guest.
    let dir = tempfile::tempdir().expect("tempdir");
    let mcpb = echo_mcpb(dir.path());
    let r = vm_fetch(&[mcpb.to_str().expect("utf-8"), "--timeout", "120"]);
    assert_echo_bundle(&r);
    assert_eq!(r.cap()["capture"]["sandbox"]["boundary"], "microvm");
    eprintln!("mcpb bundle: {:.1} s", r.secs);

    // 7. Real servers from the shared benign captures: same fingerprints.
    let benign = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/datasets/benign");
    let real: [(&str, &str, &[&str]); 2] = [
        ("npm:@eslint/mcp@0.3.13", "eslint__mcp@0.3.13.json", &[]),
        (
            "npm:@modelcontextprotocol/server-google-maps@0.6.2",
            "modelcontextprotocol__server-google-maps@0.6.2.json",
            &["--env", "GOOGLE_MAPS_API_KEY=dummy-not-a-real-credential"],
        ),
    ];
    for (source, file, extra) in real {
        let reference = benign.join(file);
        if !reference.is_file() {
            panic!(
                "{} is missing (shared/ is expected beside the repository)",
                reference.display()
            );
        }
        let mut args = vec![source, "--timeout", "240"];
        args.extend_from_slice(extra);
        let r = vm_fetch(&args);
        assert_eq!(r.code(), 0, "{source}: {}", r.stderr());
        let dir = tempfile::tempdir().expect("tempdir");
        let got = dir.path().join("got.json");
        std::fs::write(&got, serde_json::to_vec(r.cap()).expect("json")).expect("write");
        assert_eq!(
            fingerprint_of(&got),
            fingerprint_of(&reference),
            "{source}: fingerprint differs from the shared capture"
        );
        eprintln!("{source}: {:.1} s", r.secs);
    }
    damaged_snapshots_fall_back();
}

// ---------------------------------------------------------------------------
// The Firecracker backend, against a FAKE `firecracker`
// (tests/fixtures/firecracker/fake_firecracker.py): no Firecracker is
// installable here, so these check what mcplint asks of it (the API calls,
// the sandbox around it, the vsock channel, the provenance), not that a real
// Firecracker boots the guest. They need bubblewrap and mkfs.ext4 (which
// scripts/install-runner-deps.sh installs) and /dev/kvm to exist, not to work.

/// A fake guest image in a cache of its own, and a folder holding the fake
/// `firecracker` (generated from the fixture with its MODE set).
struct FakeFirecracker {
    root: tempfile::TempDir,
    image_hash: String,
    /// sha256 of the fake vmlinux, initrd.cpio, runtime.ext4.
    files: Vec<(&'static str, String)>,
}

impl FakeFirecracker {
    fn new(mode: &str) -> Self {
        use sha2::{Digest, Sha256};
        let root = tempfile::tempdir().expect("tempdir");
        let bin = root.path().join("bin");
        std::fs::create_dir(&bin).expect("mkdir");
        let script = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/firecracker/fake_firecracker.py"),
        )
        .expect("fixture");
        assert!(script.contains("\nMODE = \"boot\"\n"));
        let script = script.replace("\nMODE = \"boot\"\n", &format!("\nMODE = {mode:?}\n"));
        let fc = bin.join("firecracker");
        std::fs::write(&fc, script).expect("write");
        std::fs::set_permissions(&fc, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("chmod");
        let cache = root.path().join("cache");
        let img = cache.join("image-fc-test");
        std::fs::create_dir_all(&img).expect("mkdir");
        let image_hash = format!("{:x}", Sha256::digest(format!("fake image {mode}")));
        std::fs::write(
            img.join("image.json"),
            serde_json::to_vec(&serde_json::json!({"hash": image_hash, "kernel": "fake"}))
                .expect("json"),
        )
        .expect("write");
        let mut files = Vec::new();
        for name in ["vmlinux", "initrd.cpio", "runtime.ext4"] {
            let bytes = format!("fake {name} for the Firecracker test, {mode}").into_bytes();
            std::fs::write(img.join(name), &bytes).expect("write");
            files.push((name, format!("{:x}", Sha256::digest(&bytes))));
        }
        std::fs::write(cache.join("current"), "image-fc-test\n").expect("write");
        FakeFirecracker {
            root,
            image_hash,
            files,
        }
    }

    fn sha(&self, name: &str) -> &str {
        &self.files.iter().find(|(n, _)| *n == name).expect("file").1
    }

    /// `mcplint fetch ARGS` with the fake first on PATH and the fake cache;
    /// checks that no temporary file or process is left behind.
    fn fetch(&self, args: &[&str]) -> Run {
        let tmp = tempfile::tempdir().expect("tempdir");
        let out_path = self.root.path().join("capture.json");
        let _ = std::fs::remove_file(&out_path);
        let path = format!(
            "{}:{}",
            self.root.path().join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let t0 = Instant::now();
        let out = Command::new(bin())
            .arg("fetch")
            .args(args)
            .arg("-o")
            .arg(&out_path)
            .env("PATH", path)
            .env("MCPLINT_CACHE", self.root.path().join("cache"))
            .env("TMPDIR", tmp.path())
            .stdin(Stdio::null())
            .output()
            .expect("run mcplint");
        let secs = t0.elapsed().as_secs_f64();
        let left = entries(tmp.path());
        assert!(left.is_empty(), "temporary files left behind: {left:?}");
        let root_s = self.root.path().to_string_lossy().into_owned();
        let running: Vec<String> = std::fs::read_dir("/proc")
            .expect("proc")
            .filter_map(Result::ok)
            .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
            .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
            .filter(|c| c.contains(&root_s) && c.contains("firecracker"))
            .collect();
        assert!(running.is_empty(), "processes left running: {running:?}");
        let capture = std::fs::read(&out_path)
            .ok()
            .map(|b| serde_json::from_slice(&b).expect("capture is JSON"));
        Run { out, secs, capture }
    }

    fn verdict(&self) -> Option<Value> {
        std::fs::read(self.root.path().join("cache/firecracker-verdict.json"))
            .ok()
            .map(|b| serde_json::from_slice(&b).expect("verdict is JSON"))
    }
}

/// The fake's `fake-firecracker: KIND {json}` lines in a console tail.
fn fake_records(tail: &str, kind: &str) -> Vec<Value> {
    let prefix = format!("fake-firecracker: {kind} ");
    tail.lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .map(|j| serde_json::from_str(j).expect("record is JSON"))
        .collect()
}

fn kvm_openable() -> bool {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_ok()
}

#[test]
fn firecracker_backend_configures_the_vm_through_its_api() {
    let fake = FakeFirecracker::new("boot");
    let src = format!("file:{}", fixture("hostile").display());
    let r = fake.fetch(&[
        &src,
        "--backend",
        "firecracker",
        "--memory",
        "300",
        "--cpus",
        "2",
        "--timeout",
        "60",
        "--handshake-timeout",
        "30",
    ]);
    if !kvm_openable() {
        // Without /dev/kvm the fake is never started: a clear error, no fallback.
        assert_eq!(r.code(), 2, "{}", r.stderr());
        assert!(r.stderr().contains("/dev/kvm"), "{}", r.stderr());
        eprintln!("no usable /dev/kvm here: only the refusal was checked");
        return;
    }
    assert_eq!(r.code(), 0, "{}", r.stderr());
    // The probe guest ran first, under the fake, and its verdict was cached.
    let verdict = fake.verdict().expect("a cached Firecracker verdict");
    assert_eq!(verdict["works"], true, "{verdict}");
    let c = r.cap();
    let cap = &c["capture"];
    assert_eq!(cap["sandbox"]["boundary"], "microvm");
    assert_eq!(cap["sandbox"]["backend"], "firecracker");
    assert_eq!(cap["sandbox"]["accelerator"], "kvm");
    assert_eq!(
        cap["sandbox"]["guest_image"],
        format!("sha256:{}", fake.image_hash)
    );
    assert!(cap["timings"]["boot_s"].as_f64().is_some(), "{cap}");
    // The session went over the vsock proxy socket to the fake guest.
    assert_eq!(c["serverInfo"]["name"], "fake-firecracker-guest");
    assert_eq!(names(c, "tools"), ["vm_facts"]);
    let tail = cap["stderr_tail"].as_str().unwrap_or("");
    assert!(tail.contains("mcplint-guest: exit 0"), "{tail}");
    let fc_path = fake.root.path().join("bin/firecracker");
    let fc_note = format!("Firecracker binary {} (sha256:", fc_path.display());
    assert!(
        cap["notes"].as_array().is_some_and(|n| n
            .iter()
            .any(|n| n.as_str().unwrap_or("").starts_with(&fc_note))),
        "{cap}"
    );

    // Every API call, in order.
    let argv = fake_records(tail, "argv");
    assert_eq!(
        argv,
        [serde_json::json!(["--api-sock", "/run/fc/api.sock"])]
    );
    let calls = fake_records(tail, "api");
    let paths: Vec<&str> = calls
        .iter()
        .map(|c| c["path"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        paths,
        [
            "/machine-config",
            "/boot-source",
            "/drives/runtime",
            "/drives/app",
            "/vsock",
            "/actions"
        ],
        "{calls:?}"
    );
    assert!(calls.iter().all(|c| c["method"] == "PUT"));
    // Memory and vCPUs from the flags.
    assert_eq!(
        calls[0]["body"],
        serde_json::json!({"vcpu_count": 2, "mem_size_mib": 300})
    );
    let boot = &calls[1]["body"];
    assert_eq!(boot["kernel_image_path"], "/img/vmlinux");
    assert_eq!(boot["initrd_path"], "/img/initrd.cpio");
    let args = boot["boot_args"].as_str().unwrap_or("");
    for want in [
        "console=ttyS0",
        "reboot=k",
        "mcplint.chan=vsock",
        "mcplint.port=1024",
    ] {
        assert!(args.split(' ').any(|a| a == want), "{want} missing: {args}");
    }
    assert!(!args.contains("mcplint.probe"), "{args}");
    // Both drives read-only, neither the root device.
    for (i, id, path) in [
        (2, "runtime", "/img/runtime.ext4"),
        (3, "app", "/disk/app.ext4"),
    ] {
        assert_eq!(
            calls[i]["body"],
            serde_json::json!({"drive_id": id, "path_on_host": path, "is_root_device": false, "is_read_only": true}),
        );
    }
    assert_eq!(
        calls[4]["body"],
        serde_json::json!({"guest_cid": 3, "uds_path": "/run/fc/v.sock"})
    );
    assert_eq!(
        calls[5]["body"],
        serde_json::json!({"action_type": "InstanceStart"})
    );
    // No network interface, ever.
    assert!(!paths.iter().any(|p| p.starts_with("/network-interfaces")));

    // What the fake found at those paths inside its sandbox: the guest
    // image's own files, the package as an ext4 image, nothing writable,
    // uid 65534, /dev/kvm, no network but loopback.
    let guest = fake_records(tail, "guest");
    assert_eq!(guest.len(), 1, "{tail}");
    let g = &guest[0];
    assert_eq!(g["kernel"]["sha256"], fake.sha("vmlinux"), "{g}");
    assert_eq!(g["initrd"]["sha256"], fake.sha("initrd.cpio"), "{g}");
    assert_eq!(
        g["drives"]["runtime"]["sha256"],
        fake.sha("runtime.ext4"),
        "{g}"
    );
    assert_eq!(g["drives"]["app"]["ext4"], true, "{g}");
    for f in [
        &g["kernel"],
        &g["initrd"],
        &g["drives"]["runtime"],
        &g["drives"]["app"],
    ] {
        assert_eq!(f["writable"], false, "{g}");
    }
    assert_eq!(g["uid"], 65534, "{g}");
    assert_eq!(g["kvm_visible"], true, "{g}");
    assert_eq!(g["interfaces"], serde_json::json!(["lo"]), "{g}");
    // The machine the fake was given, as the server saw it.
    let facts: Value =
        serde_json::from_str(c["tools"][0]["description"].as_str().unwrap_or("")).expect("json");
    assert_eq!(facts["mem_size_mib"], 300);

    // The cached verdict is used the second time: no probe, same result.
    let before = fake.verdict();
    let r = fake.fetch(&[&src, "--timeout", "60"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert_eq!(
        r.cap()["capture"]["sandbox"]["backend"],
        "firecracker",
        "auto picks it"
    );
    assert_eq!(fake.verdict(), before);
}

#[test]
fn firecracker_without_working_kvm_is_an_error_not_a_fallback() {
    let fake = FakeFirecracker::new("nokvm");
    let src = format!("file:{}", fixture("hostile").display());
    let r = fake.fetch(&[&src, "--backend", "firecracker", "--timeout", "60"]);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(r.capture.is_none());
    let e = r.stderr();
    assert!(
        e.contains("--backend firecracker: KVM does not work here"),
        "{e}"
    );
    assert!(e.contains("not falling back to QEMU"), "{e}");
    if kvm_openable() {
        // The probe ran the fake, which refused: its words are in the error,
        // and the failed verdict is cached.
        assert!(e.contains("simulated"), "{e}");
        assert_eq!(fake.verdict().expect("verdict")["works"], false);
    } else {
        assert!(e.contains("/dev/kvm"), "{e}");
    }

    // Firecracker and --accel tcg cannot go together.
    let r = fake.fetch(&[&src, "--backend", "firecracker", "--accel", "tcg"]);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(
        r.stderr().contains("--accel tcg needs --backend qemu"),
        "{}",
        r.stderr()
    );
}

#[test]
fn firecracker_refusals_and_a_silent_guest_end_in_clear_errors() {
    if !kvm_openable() {
        eprintln!("no usable /dev/kvm here: the fake is never started");
        return;
    }
    let src = format!("file:{}", fixture("hostile").display());
    // Firecracker answers 400 to the package drive.
    let fake = FakeFirecracker::new("baddrive");
    let r = fake.fetch(&[&src, "--backend", "firecracker", "--timeout", "60"]);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(r.capture.is_none());
    assert!(
        r.stderr().contains(
            "configuring Firecracker: PUT /drives/app: Firecracker answered 400 Bad Request: Unable to open the drive file (simulated)"
        ),
        "{}",
        r.stderr()
    );
    // The guest boots but never connects: the handshake limit ends it.
    let fake = FakeFirecracker::new("noconnect");
    let r = fake.fetch(&[
        &src,
        "--backend",
        "firecracker",
        "--timeout",
        "60",
        "--handshake-timeout",
        "3",
    ]);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(
        r.stderr()
            .contains("the guest did not connect its MCP channel (vsock port 1024) within 3.0 s"),
        "{}",
        r.stderr()
    );
    // Its console is shown.
    assert!(
        r.stderr().contains("mcplint-guest: start"),
        "{}",
        r.stderr()
    );
}

#[test]
fn firecracker_missing_from_path_is_a_clear_error() {
    let fake = FakeFirecracker::new("boot");
    std::fs::remove_file(fake.root.path().join("bin/firecracker")).expect("rm");
    let src = format!("file:{}", fixture("hostile").display());
    let r = fake.fetch(&[&src, "--backend", "firecracker"]);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(
        r.stderr().contains("no `firecracker` binary on PATH"),
        "{}",
        r.stderr()
    );
}

#[test]
fn guest_vsock_bridge_relays_both_ways_and_passes_end_of_input_on() {
    // The guest's bridge, run on the host over a unix socket instead of a
    // vsock: the server is `tr a-z A-Z`, which ends at end of input.
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = dir.path().join("chan.sock");
    let l = std::os::unix::net::UnixListener::bind(&sock).expect("bind");
    let bridge = Path::new(env!("CARGO_MANIFEST_DIR")).join("guest/vsock-bridge.py");
    let child = Command::new("python3")
        .arg("-I")
        .arg(&bridge)
        .arg(format!("unix:{}", sock.display()))
        .args(["/usr/bin/tr", "a-z", "A-Z"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    let (mut s, _) = l.accept().expect("the bridge connects");
    s.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .expect("timeout");
    let big = "x".repeat(300_000);
    let writer = {
        let mut w = s.try_clone().expect("clone");
        let big = big.clone();
        std::thread::spawn(move || {
            w.write_all(b"hello\n").expect("write");
            w.write_all(big.as_bytes()).expect("write");
            w.shutdown(std::net::Shutdown::Write).expect("shutdown");
        })
    };
    let mut got = String::new();
    s.read_to_string(&mut got).expect("read to the end");
    writer.join().expect("writer");
    assert_eq!(got.len(), 6 + big.len());
    assert!(got.starts_with("HELLO\nXXX"));
    let out = child.wait_with_output().expect("wait");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty(), "nothing on the bridge's own stdout");

    // No host listening: a clear error on stderr, not a hang.
    let out = Command::new("python3")
        .arg("-I")
        .arg(&bridge)
        .arg(format!("unix:{}", dir.path().join("none.sock").display()))
        .arg("/bin/true")
        .output()
        .expect("python3");
    assert_eq!(out.status.code(), Some(69));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot connect the MCP channel"));
}
