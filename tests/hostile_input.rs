//! Hostile input, end to end: the real binary on files that are broken, huge,
//! deep, of the wrong shape or full of terminal escapes. Each must give exit
//! code 2 and a diagnostic that names the file (with line and column where the
//! input has them) and labels the bytes, without a panic, a stack overflow, or
//! a raw control character reaching the terminal.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn mcplint(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mcplint"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .output()
        .expect("run mcplint")
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).expect("write fixture");
    p
}

/// Asserts nothing but newlines among the control characters of `text`: no
/// ESC, NUL, CR, BEL, C1 control, or the like.
fn assert_no_control(what: &str, text: &str) {
    assert!(
        !text.contains('\u{1b}'),
        "{what} holds an ESC byte:\n{text:?}"
    );
    if let Some(c) = text.chars().find(|&c| c.is_control() && c != '\n') {
        panic!(
            "{what} holds control character U+{:04X}:\n{text:?}",
            c as u32
        );
    }
}

/// What a failing run must show.
struct Expect<'a> {
    /// `name:line:column` (or just the name when the input has no position).
    location: &'a str,
    /// Words of the message.
    message: &'a str,
    /// The label text under the bytes (None: the error has no source snippet).
    label: Option<&'a str>,
}

/// Runs `mcplint <args>` and checks exit code 2 and the diagnostic.
fn assert_rejected(dir: &Path, args: &[&str], want: Expect<'_>) -> String {
    let out = mcplint(dir, args);
    let stderr = String::from_utf8(out.stderr).expect("stderr is UTF-8");
    let stdout = String::from_utf8(out.stdout).expect("stdout is UTF-8");
    assert_eq!(
        out.status.code(),
        Some(2),
        "args {args:?}: exit code\nstderr:\n{stderr}"
    );
    assert!(!stderr.contains("panicked"), "panic:\n{stderr}");
    assert!(
        stderr.contains(want.location),
        "stderr does not name {:?}:\n{stderr}",
        want.location
    );
    assert!(
        stderr.contains(want.message),
        "stderr lacks {:?}:\n{stderr}",
        want.message
    );
    if let Some(label) = want.label {
        // miette draws the label under the snippet: `╰── label`.
        assert!(
            stderr.contains(&format!("── {label}")),
            "stderr lacks label {label:?}:\n{stderr}"
        );
    }
    assert_no_control("stderr", &stderr);
    assert_no_control("stdout", &stdout);
    stderr
}

fn fingerprint_rejects(bytes: &[u8], want: Expect<'_>) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "in.json", bytes);
    let err = assert_rejected(dir.path(), &["fingerprint", "in.json"], want);
    // inspect goes through the same loader and must fail the same way.
    let out = mcplint(dir.path(), &["inspect", "in.json"]);
    assert_eq!(out.status.code(), Some(2));
    err
}

#[test]
fn invalid_utf8() {
    fingerprint_rejects(
        b"{\"tools\":[{\"name\":\"a\xff\"}]}",
        Expect {
            location: "in.json:1:21",
            message: "invalid UTF-8",
            label: Some("here"),
        },
    );
}

#[test]
fn invalid_utf8_on_a_later_line() {
    fingerprint_rejects(
        b"{\n  \"tools\": [\n    {\"name\": \"caf\xc3\"}\n  ]\n}",
        Expect {
            location: "in.json:3:18",
            message: "invalid UTF-8",
            label: Some("here"),
        },
    );
}

#[test]
fn nul_byte_inside_a_string() {
    let err = fingerprint_rejects(
        b"{\"tools\":[{\"name\":\"a\0b\"}]}",
        Expect {
            location: "in.json:1:21",
            message: "U+0000",
            label: Some("here"),
        },
    );
    assert!(
        err.contains("⟨NUL⟩"),
        "the NUL is shown as a stand-in:\n{err}"
    );
}

#[test]
fn nul_byte_after_the_value() {
    let err = fingerprint_rejects(
        b"{\"tools\":[]}\0",
        Expect {
            location: "in.json:1:13",
            message: "NUL byte",
            label: Some("here"),
        },
    );
    assert!(err.contains("⟨NUL⟩"), "{err}");
}

#[test]
fn unescaped_ansi_escape_in_a_string() {
    // A description that would turn the terminal red and clear the screen.
    let err = fingerprint_rejects(
        b"{\"tools\":[{\"name\":\"a\x1b[31mred\x1b[2J\"}]}",
        Expect {
            location: "in.json:1:21",
            message: "unescaped control character U+001B",
            label: Some("here"),
        },
    );
    assert!(err.contains("⟨ESC⟩[31m"), "ESC shown as a stand-in:\n{err}");
}

#[test]
fn unescaped_newline_in_a_string() {
    fingerprint_rejects(
        b"{\"tools\":[{\"name\":\"a\nb\"}]}",
        Expect {
            location: "in.json:1:21",
            message: "unescaped control character U+000A",
            label: Some("here"),
        },
    );
}

#[test]
fn carriage_return_and_bell_outside_strings() {
    fingerprint_rejects(
        b"{\"tools\":[]\x07}",
        Expect {
            location: "in.json:1:12",
            message: "",
            label: Some("here"),
        },
    );
}

#[test]
fn bad_escape() {
    fingerprint_rejects(
        b"{\"tools\":[{\"name\":\"a\\q\"}]}",
        Expect {
            location: "in.json:1:21",
            message: "invalid escape",
            label: Some("here"),
        },
    );
}

#[test]
fn truncated_unicode_escape() {
    fingerprint_rejects(
        b"{\"tools\":[{\"name\":\"a\\u12\"}]}",
        Expect {
            location: "in.json:1:",
            message: "escape",
            label: Some("here"),
        },
    );
}

#[test]
fn trailing_garbage() {
    fingerprint_rejects(
        b"{\"tools\":[]} x",
        Expect {
            location: "in.json:1:14",
            message: "after the JSON value",
            label: Some("here"),
        },
    );
}

#[test]
fn second_document_after_the_first() {
    fingerprint_rejects(
        b"{\"tools\":[]}\n{\"tools\":[]}\n",
        Expect {
            location: "in.json:2:1",
            message: "after the JSON value",
            label: Some("here"),
        },
    );
}

#[test]
fn truncated_file() {
    fingerprint_rejects(
        b"{\"tools\":[{\"name\":\"a\"",
        Expect {
            location: "in.json:1:",
            message: "end of input",
            label: Some("here"),
        },
    );
}

#[test]
fn comments_are_not_json() {
    fingerprint_rejects(
        b"{\"tools\":[] // no\n}",
        Expect {
            location: "in.json:1:13",
            message: "",
            label: Some("here"),
        },
    );
}

#[test]
fn a_million_open_brackets_do_not_overflow_the_stack() {
    let err = fingerprint_rejects(
        &vec![b'['; 1_000_000],
        Expect {
            location: "in.json:1:129",
            message: "nesting deeper than 128",
            label: Some("here"),
        },
    );
    assert!(err.contains("--max-depth"), "help names the flag:\n{err}");
    // The snippet shows the label's neighbourhood, not the whole megabyte line.
    assert!(err.len() < 4096, "stderr is {} bytes", err.len());
}

#[test]
fn error_in_a_long_minified_line_keeps_its_column() {
    let mut text = br#"{"tools":[{"name":"a","x":1 1}"#.to_vec();
    text.extend(std::iter::repeat_n(b' ', 100_000));
    text.extend(b"]}");
    let err = fingerprint_rejects(
        &text,
        Expect {
            location: "in.json:1:29",
            message: "expected `,` or `}`",
            label: Some("here"),
        },
    );
    assert!(err.contains("[in.json:1:29]"), "{err}");
    assert!(err.len() < 4096, "stderr is {} bytes", err.len());
}

#[test]
fn deep_objects_within_a_raised_limit_still_stop_at_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = "{\"a\":".repeat(100_000);
    write(dir.path(), "in.json", text.as_bytes());
    assert_rejected(
        dir.path(),
        &["--max-depth", "1000", "fingerprint", "in.json"],
        Expect {
            location: "in.json:1:5001",
            message: "nesting deeper than 1000",
            label: Some("here"),
        },
    );
}

#[test]
fn file_over_max_size() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "big.json", b"{\"tools\":[{\"name\":\"a\"}]}");
    let err = assert_rejected(
        dir.path(),
        &["--max-size", "10", "fingerprint", "big.json"],
        Expect {
            location: "big.json",
            message: "over the 10-byte limit",
            label: None,
        },
    );
    assert!(err.contains("--max-size"), "{err}");
    // The same file loads under a large enough limit.
    let out = mcplint(
        dir.path(),
        &["--max-size", "1000", "fingerprint", "big.json"],
    );
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn tools_not_an_array() {
    fingerprint_rejects(
        b"{\"tools\":{\"name\":\"a\"}}",
        Expect {
            location: "in.json:1:10",
            message: "`tools` must be an array, found an object",
            label: Some("an object here"),
        },
    );
}

#[test]
fn tool_without_a_name() {
    fingerprint_rejects(
        b"{\"tools\":[\n  {\"name\":\"ok\"},\n  {\"description\":\"x\"}\n]}",
        Expect {
            location: "in.json:3:3",
            message: "tool without a `name`",
            label: Some("this tool has no name"),
        },
    );
}

#[test]
fn name_not_a_string() {
    fingerprint_rejects(
        b"{\"tools\":[{\"name\":5}]}",
        Expect {
            location: "in.json:1:19",
            message: "`name` must be a string, found a number",
            label: Some("a number here"),
        },
    );
}

#[test]
fn tool_not_an_object() {
    fingerprint_rejects(
        b"{\"tools\":[\"get_weather\"]}",
        Expect {
            location: "in.json:1:11",
            message: "",
            label: Some("a string here"),
        },
    );
}

#[test]
fn result_not_an_object() {
    fingerprint_rejects(
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":[1]}",
        Expect {
            location: "in.json:1:34",
            message: "`result` must be an object, found an array",
            label: Some("an array here"),
        },
    );
}

#[test]
fn json_rpc_error_response_with_escapes_in_its_message() {
    let err = fingerprint_rejects(
        br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method \u001b[2Jnot found\r\n"}}"#,
        Expect {
            location: "in.json:1:33",
            message: "the JSON-RPC response is an error",
            label: Some("error response"),
        },
    );
    assert!(err.contains("⟨ESC⟩[2J"), "{err}");
}

#[test]
fn empty_file() {
    fingerprint_rejects(
        b"",
        Expect {
            location: "in.json:1:1",
            message: "empty",
            label: Some("here"),
        },
    );
}

#[test]
fn whitespace_only_file() {
    fingerprint_rejects(
        b"  \n\t\n",
        Expect {
            location: "in.json:1:1",
            message: "empty",
            label: Some("here"),
        },
    );
}

#[test]
fn byte_order_mark() {
    let err = fingerprint_rejects(
        b"\xef\xbb\xbf{\"tools\":[]}",
        Expect {
            location: "in.json:1:1",
            message: "byte-order mark",
            label: Some("here"),
        },
    );
    assert!(err.contains("⟨U+FEFF⟩"), "the BOM is shown:\n{err}");
}

#[test]
fn unrecognised_document() {
    fingerprint_rejects(
        b"{\"hello\":\"\\u001b[31mworld\"}",
        Expect {
            location: "in.json",
            message: "not a recognised MCP manifest",
            label: None,
        },
    );
}

#[test]
fn unrecognised_document_with_an_escape_in_a_key() {
    let err = fingerprint_rejects(
        b"{\"\\u001b]0;pwned\\u0007\":1}",
        Expect {
            location: "in.json",
            message: "not a recognised MCP manifest",
            label: None,
        },
    );
    assert!(err.contains("⟨ESC⟩"), "{err}");
}

#[test]
fn directory_with_nothing_loadable() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("empty")).expect("mkdir");
    write(dir.path(), "empty/notes.txt", b"hello");
    assert_rejected(
        dir.path(),
        &["fingerprint", "empty"],
        Expect {
            location: "empty",
            message: "no .json",
            label: None,
        },
    );
}

#[test]
fn glob_that_matches_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "a.txt", b"x");
    assert_rejected(
        dir.path(),
        &["fingerprint", "*.json"],
        Expect {
            location: "*.json",
            message: "glob matched no file",
            label: None,
        },
    );
}

#[test]
fn missing_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert_rejected(
        dir.path(),
        &["fingerprint", "absent.json"],
        Expect {
            location: "absent.json",
            message: "cannot read",
            label: None,
        },
    );
}

#[test]
fn file_name_with_terminal_escapes() {
    // A repository can hold a file whose very name is an attack on the terminal.
    let dir = tempfile::tempdir().expect("tempdir");
    let name = "evil\u{1b}[31m\u{7}.json";
    write(dir.path(), name, b"{\"tools\":[{\"name\":5}]}");
    assert_rejected(
        dir.path(),
        &["fingerprint", name],
        Expect {
            location: "evil⟨ESC⟩[31m⟨BEL⟩.json:1:19",
            message: "must be a string",
            label: Some("a number here"),
        },
    );
    // Found by a glob instead, and not a manifest: still no ESC on stderr.
    write(dir.path(), "evil\u{1b}[2J.json", b"[1,2]");
    let out = mcplint(dir.path(), &["fingerprint", "evil*"]);
    assert_eq!(out.status.code(), Some(2));
    assert_no_control("stderr", &String::from_utf8_lossy(&out.stderr));
}

#[test]
fn glob_with_an_escape_is_shown_safely() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert_rejected(
        dir.path(),
        &["fingerprint", "x\u{1b}7*.json"],
        Expect {
            location: "x⟨ESC⟩7*.json",
            message: "glob matched no file",
            label: None,
        },
    );
}

#[test]
fn duplicate_keys_load_and_are_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "dup.json",
        b"{\"tools\":[{\"name\":\"a\",\n \"description\":\"shown by one reader\",\n \"description\":\"run by another\"}]}",
    );
    let fp = mcplint(dir.path(), &["fingerprint", "dup.json"]);
    assert_eq!(
        fp.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&fp.stderr)
    );
    let out = mcplint(dir.path(), &["inspect", "--format", "json", "dup.json"]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("inspect JSON");
    let dups = &v["inputs"][0]["duplicateKeys"];
    assert_eq!(dups.as_array().map(Vec::len), Some(1), "{v:#}");
    assert_eq!(dups[0]["key"], "description");
    assert_eq!(dups[0]["pointer"], "/tools/0/description");
    // The second (later) key, the one JavaScript and Python keep.
    assert_eq!(dups[0]["line"], 3);
    assert_eq!(dups[0]["column"], 2);
    // The last duplicate wins, as in JSON.parse and json.loads.
    let text =
        String::from_utf8_lossy(&mcplint(dir.path(), &["inspect", "dup.json"]).stdout).into_owned();
    assert!(
        text.contains("run by another") || !text.contains("shown by one reader"),
        "{text}"
    );
}

#[test]
fn one_bad_file_among_good_ones_fails_the_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "a.json", b"{\"tools\":[{\"name\":\"a\"}]}");
    write(dir.path(), "b.json", b"{\"tools\":[{\"name\":\"b\"}]");
    assert_rejected(
        dir.path(),
        &["fingerprint", "a.json", "b.json"],
        Expect {
            location: "b.json:1:",
            message: "end of input",
            label: Some("here"),
        },
    );
}
