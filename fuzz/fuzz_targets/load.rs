//! Coverage-guided fuzz target for the JSON parser and every loader.
//!
//! The first input byte chooses how the rest is loaded (which `--input-format`
//! is forced, or auto-detection; the file name, which decides JSONC and TOML;
//! a small depth limit sometimes), the rest is the file's bytes. Beyond "never
//! panic, never hang", the target checks invariants that a crash makes visible:
//!
//! - an error renders as a miette report that names the file and holds no raw
//!   control character or ESC byte (hostile bytes must not reach a terminal);
//! - every fingerprint of a loaded tool list is accepted by `matches` (the
//!   `--check` path), in its short and full form;
//! - the ts canonical form is itself strict JSON and canonicalises to itself;
//! - every node's JSON pointer resolves back to it (when keys are unambiguous);
//! - `raw_span_of_decoded` / `raw_span_of_chars` stay inside the string's
//!   span, are ordered, and give back the decoded text exactly when the string
//!   has no escapes.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use mcplint::fingerprint::{
    canonical, context_digest, matches, server_fingerprint, tools_fingerprint, Scheme,
};
use mcplint::manifest::json::{Document, Kind, ParseOptions};
use mcplint::manifest::load::{load_bytes, LoadError, LoadOptions};
use mcplint::manifest::InputKind;

const KINDS: [InputKind; 12] = [
    InputKind::ToolsList,
    InputKind::JsonRpc,
    InputKind::JsonRpcPages,
    InputKind::ToolArray,
    InputKind::Capture,
    InputKind::Mcpb,
    InputKind::McpbBundle,
    InputKind::ServerJson,
    InputKind::McpServers,
    InputKind::Vscode,
    InputKind::Codex,
    // Duplicated on purpose: the last slot means "auto-detect" below.
    InputKind::ToolsList,
];

const NAMES: [&str; 4] = ["in.json", ".vscode/mcp.json", "config.toml", "b.mcpb"];

fuzz_target!(|data: &[u8]| {
    let Some((&sel, body)) = data.split_first() else {
        return;
    };
    let kind_sel = (sel & 0x0f) as usize;
    // Values 11..=15 auto-detect, so detection gets a third of the inputs.
    let format = (kind_sel < 11).then(|| KINDS[kind_sel]);
    let path = Path::new(NAMES[((sel >> 4) & 3) as usize]);
    let parse = ParseOptions {
        max_depth: if sel & 0x40 != 0 { 4 } else { 128 },
        jsonc: sel & 0x80 != 0 && sel & 0x40 == 0,
        ..ParseOptions::default()
    };
    let opts = LoadOptions { parse, format };
    match load_bytes(path, body.to_vec(), &opts) {
        Err(e) => check_error(path, e),
        Ok(loaded) => {
            let doc = &loaded.doc;
            for server in &loaded.servers {
                let nodes: Vec<_> = server.tools.iter().map(|t| t.node).collect();
                // Fingerprinting dominates the cost of an execution: check one
                // scheme's `--check` path per input, chosen by the input.
                let scheme = if body.len() % 2 == 0 {
                    Scheme::Ts
                } else {
                    Scheme::Python
                };
                let fp = server_fingerprint(doc, server, scheme);
                let hex = if body.len() % 3 == 0 {
                    fp.full()
                } else {
                    fp.short()
                };
                let got = matches(doc, &nodes, &hex);
                assert!(got.is_some(), "{scheme} fingerprint {hex} not accepted");
                // ts is tried first; a python match may be reported as ts only
                // when both schemes give the same digest (ASCII and integers).
                if got != Some(scheme) {
                    assert_eq!(tools_fingerprint(doc, &nodes, Scheme::Ts).full(), fp.full());
                }
                let _ = context_digest(doc, server, scheme);
                for tool in &server.tools {
                    let _ = tool.params(doc);
                    let _ = tool.description_text(doc);
                    check_canonical(doc, tool.node);
                }
            }
            check_nodes(doc);
        }
    }
});

/// The rendered error names the file and holds no terminal control bytes.
fn check_error(path: &Path, e: LoadError) {
    assert_eq!(e.path(), path.display().to_string());
    let report: miette::Report = e.into();
    let mut out = String::new();
    miette::GraphicalReportHandler::new_themed(miette::GraphicalTheme::unicode_nocolor())
        .render_report(&mut out, report.as_ref())
        .expect("render");
    assert!(
        out.contains(&path.display().to_string()),
        "report does not name the file:\n{out}"
    );
    if let Some(c) = out.chars().find(|&c| c.is_control() && c != '\n') {
        panic!(
            "raw control character U+{:04X} in the report:\n{out:?}",
            c as u32
        );
    }
}

/// The ts canonical form is strict JSON whose canonical form is itself.
fn check_canonical(doc: &Document, node: u32) {
    let ts = canonical(doc, node, Scheme::Ts);
    let again = Document::parse(
        ts.clone(),
        &ParseOptions {
            max_depth: 100_000,
            ..ParseOptions::default()
        },
    )
    .unwrap_or_else(|e| {
        panic!(
            "ts canonical form is not JSON ({e}): {:?}",
            String::from_utf8_lossy(&ts)
        )
    });
    assert!(
        again.duplicates().is_empty(),
        "canonical form has duplicate keys"
    );
    let ts2 = canonical(&again, again.root(), Scheme::Ts);
    assert_eq!(
        String::from_utf8_lossy(&ts),
        String::from_utf8_lossy(&ts2),
        "ts canonical form is not a fixed point"
    );
    let py = canonical(doc, node, Scheme::Python);
    assert!(py.is_ascii(), "python canonical form is not ASCII");
}

/// Pointers resolve back; decoded-to-raw span mapping stays in bounds.
fn check_nodes(doc: &Document) {
    let n = doc.node_count() as u32;
    let unambiguous = doc.duplicates().is_empty() && (0..n).all(|i| !doc.has_lone_surrogate(i));
    for id in 0..n {
        let span = doc.span(id);
        assert!(span.start <= span.end && span.end <= doc.text().len());
        if unambiguous && id % 7 == 0 {
            let p = doc.pointer(id);
            let back = doc
                .resolve(&p)
                .unwrap_or_else(|| panic!("pointer {p:?} of node {id} does not resolve"));
            // For an object key, the pointer is its value's, the next node.
            let ok = back == id || (doc.kind(id) == Kind::String && back == id + 1);
            assert!(ok, "pointer {p:?} of node {id} resolves to {back}");
        }
        if doc.kind(id) != Kind::String {
            continue;
        }
        let text = doc.str(id).expect("string node decodes");
        let len = text.len();
        let chars = text.chars().count();
        for (a, b) in [
            (0, len),
            (0, 0),
            (len / 3, len / 2),
            (len / 2, len),
            (1, len + 5),
            (len, len),
        ] {
            let r = doc.raw_span_of_decoded(id, a..b);
            assert!(r.start <= r.end, "reversed span {r:?}");
            assert!(
                span.start < r.start + 1 && r.end < span.end,
                "span {r:?} outside string {span:?}"
            );
            if !doc.is_escaped(id)
                && a <= b
                && b <= len
                && text.is_char_boundary(a)
                && text.is_char_boundary(b)
            {
                assert_eq!(&doc.text()[r.range()], &text[a..b]);
            }
        }
        // The whole decoded text maps to everything between the quotes.
        let r = doc.raw_span_of_chars(id, 0..chars);
        assert_eq!(
            (r.start, r.end),
            (span.start + 1, span.end - 1),
            "whole-string span"
        );
    }
    // line_col is linear in the offset: once, at the end, is enough.
    let (line, col) = doc.line_col(doc.text().len());
    assert!(line >= 1 && col >= 1);
    let _ = doc.to_value(doc.root());
}
