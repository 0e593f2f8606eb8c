//! Tests of `mcplint fetch`: the protocol client against small fake servers
//! (run on the host with `--no-sandbox`), a remote Streamable HTTP server on
//! loopback, and (when the guest image is built) hostile and real servers in
//! the microVM.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Instant;

use serde_json::Value;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_mcplint")
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/servers").join(name)
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
        self.capture.as_ref().unwrap_or_else(|| panic!("no capture; stderr:\n{}", self.stderr()))
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
    let capture = std::fs::read(&out_path).ok().map(|b| serde_json::from_slice(&b).expect("capture is JSON"));
    Run { out, secs, capture }
}

fn fake(mode: &str, extra: &[&str]) -> Run {
    let script = fixture("fake_server.py");
    let script = script.to_str().expect("utf-8 path");
    let mut args: Vec<&str> = vec!["--no-sandbox"];
    args.extend_from_slice(extra);
    for (flag, default) in [("--handshake-timeout", "5"), ("--request-timeout", "3")] {
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
        .map(|a| a.iter().map(|t| t["name"].as_str().unwrap_or("").to_owned()).collect())
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
    assert_eq!(keys, ["name", "title", "description", "inputSchema", "annotations", "execution"]);
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
    assert!(r.stderr().contains("WARNING: --no-sandbox"), "{}", r.stderr());
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
    assert!(st.status.success(), "{}", String::from_utf8_lossy(&st.stderr));
    let out = Command::new(bin()).args(["inspect", "--format", "json"]).arg(&path).output().expect("inspect");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
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
        .any(|s| s["method"] == "resources/list" && s["reason"].as_str().unwrap_or("").contains("not declared")));
}

#[test]
fn legacy_server_that_ignores_the_probe_falls_back_without_waiting() {
    let r = fake("ignore_discover", &[]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert_eq!(r.cap()["capture"]["era"], "legacy");
    assert!(r.secs < 5.0, "took {:.1} s", r.secs);
}

#[test]
fn server_ping_is_answered() {
    // The fake withholds tools/list until its ping is answered.
    let r = fake("ping", &[]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let msgs = r.cap()["capture"]["server_messages"].as_array().cloned().unwrap_or_default();
    assert!(msgs.iter().any(|m| m["method"] == "ping"));
    assert_eq!(names(r.cap(), "tools").len(), 3);
}

#[test]
fn log_lines_on_stdout_are_recorded_not_fatal() {
    let r = fake("noisy", &[]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let noise = &r.cap()["capture"]["stdout_noise"];
    assert_eq!(noise[0], "Server starting on stdio...");
    assert!(r.cap()["capture"]["stdout_noise_count"].as_u64().unwrap_or(0) >= 3);
    assert_eq!(names(r.cap(), "tools").len(), 3);
}

#[test]
fn garbage_answers_end_in_a_timeout() {
    let r = fake("garbage", &["--handshake-timeout", "2"]);
    assert_eq!(r.code(), 2);
    assert!(r.stderr().contains("did not answer"), "{}", r.stderr());
    assert!(r.capture.is_none());
    assert!(r.secs < 8.0, "took {:.1} s", r.secs);
}

#[test]
fn server_that_never_answers_times_out() {
    let r = fake("silent", &["--handshake-timeout", "2"]);
    assert_eq!(r.code(), 2);
    assert!(r.stderr().contains("did not answer server/discover or initialize within 2.0 s"), "{}", r.stderr());
    assert!(r.secs < 6.0, "took {:.1} s", r.secs);
}

#[test]
fn hang_after_initialize_times_out_on_tools_list() {
    let r = fake("hang_after_init", &["--request-timeout", "2"]);
    assert_eq!(r.code(), 2);
    assert!(r.stderr().contains("did not answer tools/list within 2.0 s"), "{}", r.stderr());
    assert!(r.secs < 7.0, "took {:.1} s", r.secs);
}

#[test]
fn wall_clock_limit_kills_the_server() {
    let r = fake("silent", &["--handshake-timeout", "60", "--timeout", "2"]);
    assert_eq!(r.code(), 2);
    assert!(r.stderr().contains("wall-clock limit"), "{}", r.stderr());
    assert!(r.secs < 6.0, "took {:.1} s", r.secs);
}

#[test]
fn stdout_flood_hits_the_byte_cap() {
    let r = fake("flood", &["--max-bytes", "3000000"]);
    assert_eq!(r.code(), 2);
    assert!(r.stderr().contains("more than 3000000 bytes"), "{}", r.stderr());
    assert!(r.secs < 8.0, "took {:.1} s", r.secs);
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
    assert!(desc.contains('\u{1b}') && desc.contains('\u{202e}'), "kept verbatim: {desc:?}");
    assert_eq!(c["tools"][0]["name"], "evil\u{200b}tool");
    // The summary line on stderr never carries the raw characters.
    assert!(!r.stderr().contains('\u{1b}'));
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
fn unpinned_sources_are_refused() {
    for src in ["npm:left-pad", "npm:left-pad@latest", "npm:left-pad@^1.3.0", "pypi:mcp-server-time", "pypi:x>=1"] {
        let out = Command::new(bin()).args(["fetch", src]).output().expect("run");
        assert_eq!(out.status.code(), Some(2), "{src}");
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(e.contains("exact version") || e.contains("not a valid") || e.contains("not supported"), "{src}: {e}");
    }
}

/// Starts the fake HTTP server and returns (child, port).
fn http_server(mode: &str) -> (std::process::Child, u16) {
    use std::io::BufRead;
    let mut child = Command::new("python3")
        .arg(fixture("fake_http.py"))
        .arg(mode)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start fake http server");
    let mut line = String::new();
    let stdout = child.stdout.take().expect("stdout");
    std::io::BufReader::new(stdout).read_line(&mut line).expect("port");
    (child, line.trim().parse().expect("a port number"))
}

#[test]
fn remote_streamable_http_json_and_sse() {
    for mode in ["json", "sse"] {
        let (mut child, port) = http_server(mode);
        let url = format!("http://127.0.0.1:{port}/mcp");
        let r = fetch(&[&url, "--header", "Authorization: Bearer test-token", "--handshake-timeout", "5"]);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(r.code(), 0, "{mode}: {}", r.stderr());
        let c = r.cap();
        assert_eq!(names(c, "tools"), ["t0", "t1", "t2"], "{mode}");
        assert_eq!(c["tools"][2]["x-extra"], 2);
        assert_eq!(c["capture"]["sandbox"]["boundary"], "remote");
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

#[test]
fn plain_http_only_to_loopback() {
    let out = Command::new(bin()).args(["fetch", "http://example.invalid/mcp"]).output().expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("loopback"));
}
