//! The article's two fingerprint programs as the oracle: generated tool lists,
//! written as raw JSON text with varied escapes, number spellings and
//! whitespace, must get from `mcplint fingerprint --scheme ts` exactly what
//! `node seed_fingerprint.mjs` prints, and from `--scheme python` exactly what
//! `python3 seed_fingerprint.py` prints.
//!
//! The oracles live in `../shared/oracles/` next to the crate; CI has them, and
//! node and python3. If any is missing these tests FAIL (they do not skip):
//! a silently skipped oracle would prove nothing.
//!
//! Generated inputs stay inside what both oracles can read: tool names are
//! unique (the article's JavaScript comparator is inconsistent for equal names,
//! so their order is up to the engine's sort), integers have at most 400 digits
//! (Python refuses to convert ints over 4300 digits), and known tool fields
//! have the types MCP gives them (mcplint rejects a non-string `description`).
//! Within that there is no known case where mcplint cannot match an oracle.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use proptest::prelude::*;

// ---------------------------------------------------------------------------
// The oracles

fn shared_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared");
    assert!(
        dir.join("oracles/seed_fingerprint.mjs").is_file()
            && dir.join("oracles/seed_fingerprint.py").is_file(),
        "the fingerprint oracles are missing: expected {}/oracles/seed_fingerprint.{{mjs,py}} \
         (the shared materials must sit next to the crate; CI provides them)",
        dir.display()
    );
    dir
}

/// Runs a program and returns its stdout lines; panics with a clear message
/// if it cannot be started or fails.
fn run(program: &str, args: &[&std::ffi::OsStr], what: &str) -> Vec<String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run `{program}` for {what}: {e} (install it: CI has node and python3)")
        });
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8 output")
        .lines()
        .map(str::to_string)
        .collect()
}

/// Runs the unmodified oracle program once per file, inside one interpreter
/// (starting node or python3 per file would make the test slow): node
/// re-imports the module with a fresh URL per file, Python re-runs the script
/// as `__main__`, each time with `argv` set as the command line would.
const NODE_BATCH: &str = r#"
import { pathToFileURL } from "node:url";
const [oracle, ...files] = process.argv.slice(1);
let i = 0;
for (const f of files) {
  process.argv = [process.argv[0], oracle, f];
  await import(pathToFileURL(oracle).href + "?case=" + i++);
}
"#;
const PYTHON_BATCH: &str = r#"
import runpy, sys
oracle, files = sys.argv[1], sys.argv[2:]
for f in files:
    sys.argv = [oracle, f]
    runpy.run_path(oracle, run_name="__main__")
"#;

/// The oracle's fingerprint of each file, in order.
fn oracle(scheme: &str, files: &[PathBuf]) -> Vec<String> {
    let shared = shared_dir();
    let (program, prelude, script, what) = match scheme {
        "ts" => (
            "node",
            vec!["--input-type=module", "-e", NODE_BATCH],
            "seed_fingerprint.mjs",
            "the TypeScript oracle",
        ),
        "python" => (
            "python3",
            vec!["-c", PYTHON_BATCH],
            "seed_fingerprint.py",
            "the Python oracle",
        ),
        _ => unreachable!("scheme"),
    };
    let script = shared.join("oracles").join(script);
    let mut args: Vec<&std::ffi::OsStr> = prelude.iter().map(std::ffi::OsStr::new).collect();
    args.push(script.as_os_str());
    args.extend(files.iter().map(|f| f.as_os_str()));
    let lines = run(program, &args, what);
    assert_eq!(lines.len(), files.len(), "{what} printed {lines:?}");
    lines
}

/// `mcplint fingerprint --scheme SCHEME FILE...`, the hex of each file in order.
fn ours(scheme: &str, files: &[PathBuf]) -> Vec<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_mcplint"))
        .args(["fingerprint", "--scheme", scheme])
        .args(files)
        .env("NO_COLOR", "1")
        .output()
        .expect("run mcplint");
    assert!(
        out.status.success(),
        "mcplint fingerprint failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), files.len(), "mcplint printed {stdout}");
    lines
        .iter()
        .zip(files)
        .map(|(line, f)| {
            let (hex, path) = line.split_once("  ").expect("`<hex>  <path>`");
            assert_eq!(path, f.display().to_string(), "output order");
            hex.to_string()
        })
        .collect()
}

fn ours1(scheme: &str, file: &Path) -> String {
    ours(scheme, &[file.to_path_buf()]).remove(0)
}

fn oracle1(scheme: &str, file: &Path) -> String {
    oracle(scheme, &[file.to_path_buf()]).remove(0)
}

// ---------------------------------------------------------------------------
// A JSON model that remembers how to spell itself

/// One unit of string content.
#[derive(Clone, Debug)]
enum Unit {
    Char(char),
    /// A lone UTF-16 surrogate, which only an escape can hold.
    Lone(u16),
}

#[derive(Clone, Debug)]
struct JStr(Vec<Unit>);

#[derive(Clone, Debug)]
enum J {
    Null,
    Bool(bool),
    /// A number, spelled exactly so.
    Num(String),
    Str(JStr),
    Arr(Vec<J>),
    /// Members in order; duplicates allowed.
    Obj(Vec<(JStr, J)>),
}

/// Spelling choices (escape forms, whitespace) come from this small
/// deterministic generator, seeded by proptest, so the tree shrinks
/// independently of how it is written.
struct Spell(u64);

impl Spell {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn pick(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn ws(&mut self, out: &mut String) {
        match self.pick(8) {
            0 => out.push(' '),
            1 => out.push_str("\n  "),
            2 => out.push_str("\r\n\t"),
            _ => {}
        }
    }
}

fn write_u(out: &mut String, unit: u16, upper: bool) {
    if upper {
        let _ = write!(out, "\\u{unit:04X}");
    } else {
        let _ = write!(out, "\\u{unit:04x}");
    }
}

fn write_str(s: &JStr, sp: &mut Spell, out: &mut String) {
    out.push('"');
    for u in &s.0 {
        match *u {
            Unit::Lone(n) => write_u(out, n, sp.pick(2) == 0),
            Unit::Char(c) => {
                let short = match c {
                    '"' => Some("\\\""),
                    '\\' => Some("\\\\"),
                    '/' => Some("\\/"),
                    '\u{8}' => Some("\\b"),
                    '\u{c}' => Some("\\f"),
                    '\n' => Some("\\n"),
                    '\r' => Some("\\r"),
                    '\t' => Some("\\t"),
                    _ => None,
                };
                // Raw is allowed for everything but `"`, `\` and C0 controls.
                let raw_ok = c != '"' && c != '\\' && c >= ' ';
                match (sp.pick(4), short) {
                    (0 | 1, _) if raw_ok => out.push(c),
                    (2, Some(esc)) => out.push_str(esc),
                    _ => {
                        let mut buf = [0u16; 2];
                        let upper = sp.pick(2) == 0;
                        for &unit in c.encode_utf16(&mut buf).iter() {
                            write_u(out, unit, upper);
                        }
                    }
                }
            }
        }
    }
    out.push('"');
}

fn write_json(v: &J, sp: &mut Spell, out: &mut String) {
    match v {
        J::Null => out.push_str("null"),
        J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        J::Num(n) => out.push_str(n),
        J::Str(s) => write_str(s, sp, out),
        J::Arr(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                sp.ws(out);
                write_json(item, sp, out);
                sp.ws(out);
            }
            out.push(']');
        }
        J::Obj(members) => {
            out.push('{');
            for (i, (k, val)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                sp.ws(out);
                write_str(k, sp, out);
                sp.ws(out);
                out.push(':');
                sp.ws(out);
                write_json(val, sp, out);
            }
            sp.ws(out);
            out.push('}');
        }
    }
}

fn plain(s: &str) -> JStr {
    JStr(s.chars().map(Unit::Char).collect())
}

// ---------------------------------------------------------------------------
// Strategies

/// Characters chosen to hit every difference between the two schemes and
/// every escape rule.
fn char_strategy() -> impl Strategy<Value = Unit> {
    prop_oneof![
        6 => (0x20u32..0x7f).prop_map(|c| Unit::Char(char::from_u32(c).expect("ascii"))),
        2 => (0u32..0x20).prop_map(|c| Unit::Char(char::from_u32(c).expect("control"))),
        2 => prop::sample::select(vec![
            '\u{7f}', '\u{80}', '\u{9f}', '\u{a0}', 'é', 'ß', 'ÿ', '\u{2028}', '\u{2029}', '\u{200b}', '\u{feff}',
            '\u{ff21}', '\u{ffff}', '\u{fffd}', '\u{e000}', '中', '\u{1f600}', '\u{1f468}', '\u{10000}',
            '\u{10ffff}', '"', '\\', '/'
        ])
        .prop_map(Unit::Char),
        2 => any::<char>().prop_map(Unit::Char),
        1 => (0xd800u16..0xe000).prop_map(Unit::Lone),
    ]
}

fn jstr(max: usize) -> impl Strategy<Value = JStr> {
    prop::collection::vec(char_strategy(), 0..max).prop_map(JStr)
}

/// Keys: a pool whose UTF-16 and code-point orders differ, plus random text.
fn key_strategy() -> impl Strategy<Value = JStr> {
    prop_oneof![
        3 => prop::sample::select(vec![
            "a", "b", "A", "Z", "aa", "", "é", "e\u{301}", "\u{ff21}", "\u{1f600}", "\u{e000}", "\u{ffff}",
            "\u{10000}", "\u{2028}", "__proto__", "constructor", "1", "10", "2", "-1", "type", "default",
        ])
        .prop_map(plain),
        2 => jstr(6),
    ]
}

/// Numbers in every spelling JSON allows.
fn number_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(vec![
            "0", "-0", "1", "-1", "1.0", "-1.0", "0.0", "-0.0", "1.5", "0.1", "100", "1e16", "1E16", "1e+16",
            "1e21", "1e-7", "1E-7", "1e-6", "0.000001", "0.0000001", "5e-324", "4.9e-324", "2e-324",
            "1.7976931348623157e308", "1.7976931348623159e308", "1e308", "1e400", "-1e400", "1e-400", "0e0",
            "0E-0", "1e007", "123456789012345678", "9007199254740991", "9007199254740992",
            "9007199254740993", "-9007199254740993", "18446744073709551616", "1.0e0", "100e-2",
            "0.30000000000000004", "2.5e-5", "123456789.123456789", "1e-5", "12345678901234567890.5",
        ])
        .prop_map(String::from),
        2 => (-(1i64 << 53)..=(1i64 << 53)).prop_map(|i| i.to_string()),
        1 => any::<i64>().prop_map(|i| i.to_string()),
        // Integers far beyond 2^64, still under Python's 4300-digit limit.
        1 => ("-?[1-9][0-9]{19,400}").prop_map(|s| s),
        2 => any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_flat_map(|f| {
            prop::sample::select(vec![format!("{f:?}"), format!("{f:e}"), format!("{f:E}"), format!("{f}")])
        }),
        1 => ("-?(0|[1-9][0-9]{0,5})\\.[0-9]{1,30}([eE][+-]?[0-9]{1,3})?").prop_map(|s| s),
    ]
}

fn value_strategy() -> impl Strategy<Value = J> {
    let leaf = prop_oneof![
        Just(J::Null),
        any::<bool>().prop_map(J::Bool),
        number_strategy().prop_map(J::Num),
        jstr(12).prop_map(J::Str),
    ];
    leaf.prop_recursive(3, 24, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(J::Arr),
            // Duplicate keys arise from the small key pool.
            prop::collection::vec((key_strategy(), inner), 0..5).prop_map(J::Obj),
        ]
    })
}

/// A JSON-schema property: type, description, sometimes enum/default/nested.
fn param_strategy() -> impl Strategy<Value = J> {
    (
        prop::sample::select(vec![
            "string", "number", "integer", "boolean", "object", "array",
        ]),
        jstr(40),
        prop::option::of(prop::collection::vec(value_strategy(), 1..4)),
        prop::option::of(value_strategy()),
    )
        .prop_map(|(ty, desc, en, default)| {
            let mut m = vec![
                (plain("type"), J::Str(plain(ty))),
                (plain("description"), J::Str(desc)),
            ];
            if let Some(e) = en {
                m.push((plain("enum"), J::Arr(e)));
            }
            if let Some(d) = default {
                m.push((plain("default"), d));
            }
            J::Obj(m)
        })
}

fn tool_strategy() -> impl Strategy<Value = (JStr, J)> {
    (
        jstr(8),
        prop::option::of(jstr(60)),
        prop::collection::vec((key_strategy(), param_strategy()), 0..4),
        prop::collection::vec((key_strategy(), value_strategy()), 0..3),
        any::<bool>(),
    )
        .prop_map(|(name, desc, params, extra, required)| {
            let mut schema = vec![
                (plain("type"), J::Str(plain("object"))),
                (plain("properties"), J::Obj(params.clone())),
            ];
            if required && !params.is_empty() {
                schema.push((plain("required"), J::Arr(vec![J::Str(params[0].0.clone())])));
            }
            let mut members = Vec::new();
            if let Some(d) = desc {
                members.push((plain("description"), J::Str(d)));
            }
            members.push((plain("inputSchema"), J::Obj(schema)));
            // Unknown fields with any value, kept verbatim by both programs;
            // fields mcplint types (description, title, ...) are left out here.
            let typed = [
                "name",
                "description",
                "title",
                "inputSchema",
                "outputSchema",
                "annotations",
                "jsonrpc",
                "result",
            ];
            for (k, v) in extra {
                let text: String =
                    k.0.iter()
                        .map(|u| if let Unit::Char(c) = u { *c } else { '?' })
                        .collect();
                if !typed.contains(&text.as_str()) {
                    members.push((k, v));
                }
            }
            (name, J::Obj(members))
        })
}

/// A generated case: the file's text and how it is wrapped.
#[derive(Clone, Debug)]
struct Case {
    text: String,
}

fn case_strategy() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec(tool_strategy(), 0..6),
        0u8..3,
        any::<u64>(),
    )
        .prop_map(|(tools, wrap, seed)| {
            let tools: Vec<J> = tools
                .into_iter()
                .enumerate()
                .map(|(i, (mut name, tool))| {
                    // Unique names: the text after the last `#` is the index.
                    name.0.extend(format!("#{i}").chars().map(Unit::Char));
                    let J::Obj(mut members) = tool else {
                        unreachable!("tool is an object")
                    };
                    let at = (seed as usize + i) % (members.len() + 1);
                    members.insert(at, (plain("name"), J::Str(name)));
                    J::Obj(members)
                })
                .collect();
            let list = J::Arr(tools);
            let doc = match wrap {
                0 => list,
                1 => J::Obj(vec![
                    (plain("tools"), list),
                    (plain("nextCursor"), J::Str(plain("c2"))),
                ]),
                _ => J::Obj(vec![
                    (plain("jsonrpc"), J::Str(plain("2.0"))),
                    (plain("id"), J::Num("1".into())),
                    (plain("result"), J::Obj(vec![(plain("tools"), list)])),
                ]),
            };
            let mut sp = Spell(seed | 1);
            let mut text = String::new();
            sp.ws(&mut text);
            write_json(&doc, &mut sp, &mut text);
            sp.ws(&mut text);
            Case { text }
        })
}

// ---------------------------------------------------------------------------
// The property

/// Writes a batch of cases and compares every file under both schemes.
fn check_batch(cases: &[Case]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let files: Vec<PathBuf> = cases
        .iter()
        .enumerate()
        .map(|(i, case)| {
            let file = dir.path().join(format!("case{i}.json"));
            std::fs::write(&file, &case.text).expect("write case");
            file
        })
        .collect();
    for scheme in ["ts", "python"] {
        let want = oracle(scheme, &files);
        let got = ours(scheme, &files);
        for (i, case) in cases.iter().enumerate() {
            prop_assert_eq!(&got[i], &want[i], "scheme {} on {:?}", scheme, case.text);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        // 8 batches of 8 tool lists: 64 generated files, with node, python3
        // and mcplint started twice per batch. MCPLINT_ORACLE_BATCHES=N runs
        // more for a longer soak.
        cases: std::env::var("MCPLINT_ORACLE_BATCHES").ok().and_then(|v| v.parse().ok()).unwrap_or(8),
        max_shrink_iters: 200,
        ..ProptestConfig::default()
    })]

    #[test]
    fn matches_the_articles_programs(cases in prop::collection::vec(case_strategy(), 8)) {
        check_batch(&cases)?;
    }
}

/// Hand-picked inputs the generator might take long to find.
#[test]
fn edge_cases_match_the_oracles() {
    let cases = [
        r#"[{"name":"a","x":[1.0,-0.0,1e16,1E-7,5e-324,1e400,-1e400,9007199254740993,123456789012345678901234567890]}]"#,
        r#"[{"name":"b","\uff21":1,"\ud83d\ude00":2,"\ue000":3,"z":4}]"#,
        r#"[{"name":"\ud83d\ude00"},{"name":"\uff21"},{"name":"\ue000"},{"name":"a"}]"#,
        r#"[{"name":"c","d":"\ud800 lone \udfff","e":"\u2028\u2029\u007f\u0000\u001f","f":"caf\u00e9 ☕"}]"#,
        r#"{"tools":[{"name":"d","k":1,"k":2,"o":{"x":1,"x":[true,false,null]}}]}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#,
        "[{\"name\":\"e\",\"big\":1e999999,\"small\":0.000000000000000000000000001,\"n\":-0}]",
        r#"[{"name":"f","__proto__":{"a":1},"constructor":"x","10":1,"9":2,"1":3}]"#,
        // Exactly halfway between two shortest candidates (found by the
        // property test): both languages take the even digit.
        r#"[{"name":"t","x":931443840231012.2,"y":931443840231012.25,"z":[1125899906842624.5,1125899906842624.75,-281474976710656.125]}]"#,
        // Names sharing 16-byte prefixes, NULs, prefixes of each other.
        r#"[{"name":"abcdefghijklmnopqrstuvwxyz2"},{"name":"abcdefghijklmnopqrstuvwxyz1"},{"name":"abcdefghijklmnop"},{"name":"abcdefghijklmnop\u0000"},{"name":"abcdefghijklmno"},{"name":"a\u0000b"},{"name":"a"},{"name":"abcdefghijklmnop\ud83d\ude00"},{"name":"abcdefghijklmnop\uff21"}]"#,
    ];
    let dir = tempfile::tempdir().expect("tempdir");
    let files: Vec<PathBuf> = cases
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let file = dir.path().join(format!("edge{i}.json"));
            std::fs::write(&file, text).expect("write");
            file
        })
        .collect();
    for scheme in ["ts", "python"] {
        let (got, want) = (ours(scheme, &files), oracle(scheme, &files));
        for (i, text) in cases.iter().enumerate() {
            assert_eq!(got[i], want[i], "scheme {scheme} on {text}");
        }
    }
}

// ---------------------------------------------------------------------------
// The documented divergence, and `--check` accepting either scheme

fn check(dir: &Path, hex: &str, file: &str) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mcplint"))
        .args(["fingerprint", "--check", hex, file])
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .output()
        .expect("run mcplint");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn schemes_diverge_on_non_ascii_text_and_floats_and_check_accepts_either() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases = [
        ("cafe.json", r#"[{"name":"café","description":"x"}]"#),
        (
            "float.json",
            r#"[{"name":"a","inputSchema":{"type":"object","properties":{"n":{"type":"number","default":1.0}}}}]"#,
        ),
    ];
    for (name, text) in cases {
        let file = dir.path().join(name);
        std::fs::write(&file, text).expect("write");
        let ts = ours1("ts", &file);
        let py = ours1("python", &file);
        assert_eq!(ts, oracle1("ts", &file), "{name}: ts");
        assert_eq!(py, oracle1("python", &file), "{name}: python");
        // The article claims a fingerprint taken in one language checks in the
        // other; for these inputs it does not.
        assert_ne!(ts, py, "{name}: the schemes should differ");

        let (code, out) = check(dir.path(), &ts, name);
        assert_eq!(
            (code, out.starts_with("ok (ts scheme)")),
            (0, true),
            "{out}"
        );
        let (code, out) = check(dir.path(), &py, name);
        assert_eq!(
            (code, out.starts_with("ok (python scheme)")),
            (0, true),
            "{out}"
        );
        // A wrong fingerprint: exit 1, and both current values are shown.
        let wrong: String = ts
            .chars()
            .map(|c| if c == '0' { '1' } else { '0' })
            .collect();
        let (code, out) = check(dir.path(), &wrong, name);
        assert_eq!(code, 1, "{out}");
        assert!(
            out.contains("CHANGED") && out.contains(&ts) && out.contains(&py),
            "{out}"
        );
    }
    // ASCII text and integers: the schemes agree, as the article says.
    let file = dir.path().join("ascii.json");
    std::fs::write(&file, r#"[{"name":"cafe","n":1,"big":12345678901234}]"#).expect("write");
    assert_eq!(ours1("ts", &file), ours1("python", &file));
}

#[test]
fn check_takes_the_full_digest_and_refuses_bad_hex() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("t.json"), r#"[{"name":"café"}]"#).expect("write");
    let full = Command::new(env!("CARGO_BIN_EXE_mcplint"))
        .args(["fingerprint", "--full", "--scheme", "python", "t.json"])
        .current_dir(dir.path())
        .output()
        .expect("run");
    let full = String::from_utf8_lossy(&full.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string();
    assert_eq!(full.len(), 64);
    assert_eq!(check(dir.path(), &full, "t.json").0, 0);
    assert_eq!(check(dir.path(), &full[..20], "t.json").0, 0);
    assert_eq!(check(dir.path(), "abc", "t.json").0, 2);
    assert_eq!(check(dir.path(), "zzzzzzzzzzzzzzzz", "t.json").0, 2);
}
