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
    assert!(r.secs < 5.0, "took {:.1} s", r.secs);
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
    assert!(r.secs < 8.0, "took {:.1} s", r.secs);
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
    assert!(r.secs < 6.0, "took {:.1} s", r.secs);
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
    assert!(
        r.stderr().contains("more than 3000000 bytes"),
        "{}",
        r.stderr()
    );
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
    std::io::BufReader::new(stdout)
        .read_line(&mut line)
        .expect("port");
    (child, line.trim().parse().expect("a port number"))
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
    let out = Command::new(bin())
        .args(["fetch", "http://example.invalid/mcp"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("loopback"));
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

/// Runs a fetch with its own TMPDIR, and checks that it left nothing behind:
/// no temporary files and no QEMU or bubblewrap process using them.
fn vm_fetch(args: &[&str]) -> Run {
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
        .stdin(Stdio::null())
        .output()
        .expect("run mcplint");
    let secs = t0.elapsed().as_secs_f64();
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .expect("list")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "temporary files left behind: {left:?}");
    let tmp_s = tmp.path().to_string_lossy().into_owned();
    let running: Vec<String> = std::fs::read_dir("/proc")
        .expect("proc")
        .filter_map(Result::ok)
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&tmp_s))
        .collect();
    assert!(running.is_empty(), "processes left running: {running:?}");
    let capture = std::fs::read(&out_path)
        .ok()
        .map(|b| serde_json::from_slice(&b).expect("capture is JSON"));
    Run { out, secs, capture }
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
    assert_eq!(r.code(), 0, "{}", r.stderr());
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

    // 6. Real servers from the shared benign captures: same fingerprints.
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
}
