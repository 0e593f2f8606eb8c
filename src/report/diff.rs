//! Rendering changes: `human`, `json`, `sarif`, `github`, `markdown`.
//!
//! Every text that came from a manifest (names, messages, values) goes
//! through [`crate::display`] before it reaches a terminal, a workflow
//! command or a pull-request comment; the markdown renderer also escapes HTML
//! and table pipes and picks a code fence longer than any backtick run in
//! the text, so a description cannot break out of its box. `json` keeps the
//! values exactly (it is for programs; JSON escapes control characters).

use std::fmt::Write as _;
use std::time::Duration;

use serde_json::{json, Value};
use similar::{ChangeTag, TextDiff};

use crate::display::{visible, visible_short, visible_with};
use crate::finding::change::{Change, ChangeKind};
use crate::finding::Severity;

/// Output format for changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DiffFormat {
    /// A rich inline diff for people (coloured on a terminal).
    Human,
    /// `{"version":1,"changes":[...]}`.
    Json,
    /// SARIF 2.1.0, for code scanning.
    Sarif,
    /// GitHub Actions workflow commands (`::warning file=…::…`).
    Github,
    /// A pull-request comment: a table and a diff per change.
    Markdown,
}

/// Renders `changes` in `format`; `color` only affects `human`.
pub fn render(changes: &[Change], format: DiffFormat, color: bool) -> String {
    match format {
        DiffFormat::Human => human(changes, color),
        DiffFormat::Json => json_report(changes),
        DiffFormat::Sarif => sarif(changes),
        DiffFormat::Github => github(changes),
        DiffFormat::Markdown => markdown(changes),
    }
}

const RESET: &str = "\x1b[0m";

fn sev_color(s: Severity) -> &'static str {
    match s {
        Severity::High => "\x1b[1;31m",
        Severity::Medium => "\x1b[33m",
        Severity::Low => "\x1b[36m",
        Severity::Info => "\x1b[2m",
    }
}

/// "3 changes (1 high, 2 medium)".
pub fn summary(changes: &[Change]) -> String {
    if changes.is_empty() {
        return "no changes".into();
    }
    let mut parts = Vec::new();
    for s in [
        Severity::High,
        Severity::Medium,
        Severity::Low,
        Severity::Info,
    ] {
        let n = changes.iter().filter(|c| c.severity == s).count();
        if n > 0 {
            parts.push(format!("{n} {s}"));
        }
    }
    let noun = if changes.len() == 1 {
        "change"
    } else {
        "changes"
    };
    format!("{} {noun} ({})", changes.len(), parts.join(", "))
}

/// An inline word diff of two texts: `[-deleted-]{+inserted+}` without
/// colour, red struck-through and green with it. Hostile characters are
/// shown; newlines are kept and each new line starts with `indent`.
pub fn inline_word_diff(old: &str, new: &str, color: bool, indent: &str) -> String {
    let diff = TextDiff::configure()
        .timeout(Duration::from_millis(250))
        .diff_words(old, new);
    // Whitespace between two edits belongs to both sides of the edit, so a
    // rewritten phrase reads as one deletion and one insertion rather than
    // word by word.
    let tokens: Vec<(ChangeTag, &str)> = diff
        .iter_all_changes()
        .map(|c| (c.tag(), c.value()))
        .collect();
    let mut runs: Vec<(ChangeTag, String)> = Vec::new();
    let mut pending_del = String::new();
    let mut pending_ins = String::new();
    let flush = |runs: &mut Vec<(ChangeTag, String)>, del: &mut String, ins: &mut String| {
        if !del.is_empty() {
            runs.push((ChangeTag::Delete, std::mem::take(del)));
        }
        if !ins.is_empty() {
            runs.push((ChangeTag::Insert, std::mem::take(ins)));
        }
    };
    for (i, &(tag, value)) in tokens.iter().enumerate() {
        let in_edit = !pending_del.is_empty() || !pending_ins.is_empty();
        let bridges = tag == ChangeTag::Equal
            && value.trim().is_empty()
            && in_edit
            && tokens.get(i + 1).is_some_and(|n| n.0 != ChangeTag::Equal);
        match tag {
            ChangeTag::Delete => pending_del.push_str(value),
            ChangeTag::Insert => pending_ins.push_str(value),
            ChangeTag::Equal if bridges => {
                pending_del.push_str(value);
                pending_ins.push_str(value);
            }
            ChangeTag::Equal => {
                flush(&mut runs, &mut pending_del, &mut pending_ins);
                match runs.last_mut() {
                    Some((ChangeTag::Equal, text)) => text.push_str(value),
                    _ => runs.push((ChangeTag::Equal, value.to_string())),
                }
            }
        }
    }
    flush(&mut runs, &mut pending_del, &mut pending_ins);
    let mut out = String::new();
    for (tag, raw) in runs {
        let text = visible_with(&raw, true).replace('\n', &format!("\n{indent}"));
        match (tag, color) {
            (ChangeTag::Equal, _) => out.push_str(&text),
            (ChangeTag::Delete, true) => {
                let _ = write!(out, "\x1b[31;9m{text}{RESET}");
            }
            (ChangeTag::Insert, true) => {
                let _ = write!(out, "\x1b[1;32m{text}{RESET}");
            }
            (ChangeTag::Delete, false) => {
                let _ = write!(out, "[-{text}-]");
            }
            (ChangeTag::Insert, false) => {
                let _ = write!(out, "{{+{text}+}}");
            }
        }
    }
    out
}

fn compact(v: &Value, max: usize) -> String {
    visible_short(&serde_json::to_string(v).unwrap_or_default(), max)
}

fn subject_label(c: &Change) -> String {
    match &c.tool {
        Some(name) => format!("{} `{}`", c.subject.name(), visible(name)),
        None => "server".into(),
    }
}

/// The human report.
pub fn human(changes: &[Change], color: bool) -> String {
    let mut out = String::new();
    let paint = |code: &str, s: &str| {
        if color {
            format!("{code}{s}{RESET}")
        } else {
            s.to_string()
        }
    };
    let mut server: Option<&str> = None;
    for c in changes {
        if server != Some(c.server.as_str()) {
            server = Some(&c.server);
            let n: Vec<Change> = changes
                .iter()
                .filter(|x| x.server == c.server)
                .cloned()
                .collect();
            let _ = writeln!(
                out,
                "{}: {}",
                paint("\x1b[1m", &visible(&c.server)),
                summary(&n)
            );
        }
        let sev = format!("{:<6}", c.severity.name());
        let path = if c.path.is_empty() {
            String::new()
        } else {
            format!("  {}", visible(&c.path))
        };
        let _ = writeln!(
            out,
            "  {}  {}  {}{}",
            paint(sev_color(c.severity), &sev),
            paint("\x1b[1m", c.kind.name()),
            subject_label(c),
            path
        );
        let pad = "          ";
        let _ = writeln!(out, "{pad}{}", visible(&c.message));
        match (&c.before, &c.after) {
            (Some(Value::String(b)), Some(Value::String(a))) => {
                let _ = writeln!(out, "{pad}{}", inline_word_diff(b, a, color, pad));
            }
            (None, Some(Value::String(a))) => {
                let _ = writeln!(
                    out,
                    "{pad}{}",
                    paint(
                        "\x1b[32m",
                        &format!(
                            "+ {}",
                            visible_with(a, true).replace('\n', &format!("\n{pad}  "))
                        )
                    )
                );
            }
            (b, a) => {
                if let Some(b) = b {
                    if c.kind != ChangeKind::ToolRemoved || !b.is_object() {
                        let _ = writeln!(
                            out,
                            "{pad}{}",
                            paint("\x1b[31m", &format!("- {}", compact(b, 300)))
                        );
                    }
                }
                // New content is never shortened: it is what the reviewer
                // must read. Old content is context and is cut at 300 characters.
                if let Some(a) = a {
                    let _ = writeln!(
                        out,
                        "{pad}{}",
                        paint("\x1b[32m", &format!("+ {}", compact(a, usize::MAX)))
                    );
                }
            }
        }
        if let Some(loc) = c.location() {
            let _ = writeln!(
                out,
                "{pad}at {}:{}:{}",
                visible(&loc.file),
                loc.line,
                loc.column
            );
        }
    }
    if changes.is_empty() {
        out.push_str("no changes\n");
    } else {
        let _ = writeln!(out, "{}", summary(changes));
    }
    out
}

/// The JSON report: `{"version":1,"changes":[...]}`.
pub fn json_report(changes: &[Change]) -> String {
    let v = json!({ "version": 1, "changes": changes });
    let mut s = serde_json::to_string_pretty(&v).unwrap_or_default();
    s.push('\n');
    s
}

fn sarif_level(s: Severity) -> &'static str {
    match s {
        Severity::High => "error",
        Severity::Medium => "warning",
        Severity::Low | Severity::Info => "note",
    }
}

/// The SARIF 2.1.0 report: one rule per change kind, one result per change.
pub fn sarif(changes: &[Change]) -> String {
    let mut kinds: Vec<ChangeKind> = changes.iter().map(|c| c.kind).collect();
    kinds.sort();
    kinds.dedup();
    let rules: Vec<Value> = kinds
        .iter()
        .map(|k| {
            json!({
                "id": k.name(),
                "shortDescription": { "text": k.describe() },
                "defaultConfiguration": { "level": sarif_level(k.base_severity()) },
                "properties": { "severity": k.base_severity().name() },
            })
        })
        .collect();
    let results: Vec<Value> = changes
        .iter()
        .map(|c| {
            let mut r = json!({
                "ruleId": c.kind.name(),
                "ruleIndex": kinds.iter().position(|k| *k == c.kind).unwrap_or(0),
                "level": sarif_level(c.severity),
                "message": { "text": visible(&format!("{}: {}", subject_label(c), c.message)) },
                "properties": {
                    "severity": c.severity.name(),
                    "server": visible(&c.server),
                    "subject": c.subject.name(),
                    "name": c.tool.as_deref().map(visible),
                    "path": visible(&c.path),
                    "rules": c.rules,
                },
            });
            let mut logical = c.server.clone();
            if let Some(t) = &c.tool {
                logical.push('/');
                logical.push_str(t);
            }
            logical.push_str(&c.path);
            let mut loc =
                json!({ "logicalLocations": [{ "fullyQualifiedName": visible(&logical) }] });
            if let Some(l) = c.location() {
                loc["physicalLocation"] = json!({
                    "artifactLocation": { "uri": l.file.replace('\\', "/") },
                    "region": {
                        "startLine": l.line,
                        "startColumn": l.column,
                        "endLine": l.end_line,
                        "endColumn": l.end_column,
                    },
                });
            }
            r["locations"] = json!([loc]);
            r
        })
        .collect();
    let v = json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": {
                "name": "mcplint",
                "version": env!("CARGO_PKG_VERSION"),
                // The same address as the findings' SARIF (src/report/sarif.rs).
                "informationUri": "https://github.com/mcplint/mcplint",
                "rules": rules,
            }},
            "results": results,
        }],
    });
    let mut s = serde_json::to_string_pretty(&v).unwrap_or_default();
    s.push('\n');
    s
}

/// Escapes workflow-command data (`%`, CR, LF).
fn gh_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escapes workflow-command property values (also `:` and `,`).
fn gh_prop(s: &str) -> String {
    gh_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// GitHub Actions workflow commands, one per change.
pub fn github(changes: &[Change]) -> String {
    let mut out = String::new();
    for c in changes {
        let level = match c.severity {
            Severity::High => "error",
            Severity::Medium => "warning",
            Severity::Low | Severity::Info => "notice",
        };
        let mut props = Vec::new();
        if let Some(l) = c.location() {
            props.push(format!("file={}", gh_prop(&visible(&l.file))));
            props.push(format!("line={}", l.line));
            props.push(format!("col={}", l.column));
            props.push(format!("endLine={}", l.end_line));
        }
        props.push(format!(
            "title={}",
            gh_prop(&format!(
                "mcplint {} ({})",
                c.kind.name(),
                c.severity.name()
            ))
        ));
        let msg = format!(
            "{}: {}: {}",
            visible(&c.server),
            subject_label(c),
            visible(&c.message)
        );
        let _ = writeln!(out, "::{level} {}::{}", props.join(","), gh_data(&msg));
    }
    out
}

/// HTML-escapes text for a markdown table cell or summary (pipes and
/// backticks too, so the text cannot close the cell or open code).
fn md_cell(s: &str) -> String {
    visible(s)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('|', "&#124;")
        .replace('`', "&#96;")
        .replace('*', "&#42;")
        .replace('_', "&#95;")
        .replace('[', "&#91;")
        .replace(']', "&#93;")
}

/// A fence longer than any run of backticks in `body`.
fn fence_for(body: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in body.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    "`".repeat((longest + 1).max(3))
}

fn diff_lines(prefix: char, text: &str, out: &mut String) {
    for line in text.split('\n') {
        let _ = writeln!(out, "{prefix} {line}");
    }
}

fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => visible_with(s, true),
        other => visible_with(
            &serde_json::to_string_pretty(other).unwrap_or_default(),
            true,
        ),
    }
}

/// Characters after which the markdown table stops adding rows.
const MARKDOWN_TABLE_BUDGET: usize = 30_000;
/// Characters after which the markdown report stops adding details (one
/// more block adds at most about 8,500, keeping a comment under GitHub's
/// 65,536).
const MARKDOWN_BUDGET: usize = 55_000;

/// The markdown report: a table, then a `<details>` diff per change.
pub fn markdown(changes: &[Change]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "### mcplint: {}\n", summary(changes));
    if changes.is_empty() {
        return out;
    }
    out.push_str(
        "| Severity | Change | Server | Name | Path | What |\n|---|---|---|---|---|---|\n",
    );
    for (i, c) in changes.iter().enumerate() {
        if out.len() > MARKDOWN_TABLE_BUDGET {
            let _ = writeln!(
                out,
                "\n… and {} more changes (see `--format json`).",
                changes.len() - i
            );
            break;
        }
        let _ = writeln!(
            out,
            "| **{}** | {} | {} | {} | {} | {} |",
            c.severity.name(),
            c.kind.name(),
            md_cell(&c.server),
            c.tool.as_deref().map(md_cell).unwrap_or_default(),
            md_cell(&c.path),
            md_cell(&c.message),
        );
    }
    out.push('\n');
    // GitHub refuses comments over 65,536 characters: details stop at a
    // budget, and the rest are counted.
    for (shown, c) in changes.iter().enumerate() {
        if out.len() > MARKDOWN_BUDGET {
            let _ = writeln!(
                out,
                "… and {} more changes without details (see `--format json`).",
                changes.len() - shown
            );
            break;
        }
        let mut body = String::new();
        if let Some(b) = &c.before {
            diff_lines('-', &value_text(b), &mut body);
        }
        if let Some(a) = &c.after {
            diff_lines('+', &value_text(a), &mut body);
        }
        if body.len() > 8000 {
            let mut cut = 8000;
            while !body.is_char_boundary(cut) {
                cut -= 1;
            }
            body.truncate(cut);
            body.push_str("\n… (truncated)\n");
        }
        let fence = fence_for(&body);
        let name = c
            .tool
            .as_deref()
            .map(md_cell)
            .unwrap_or_else(|| "server".into());
        let _ = write!(
            out,
            "<details>\n<summary><b>{}</b> {} — {}{}</summary>\n\n",
            c.severity.name(),
            c.kind.name(),
            name,
            if c.path.is_empty() {
                String::new()
            } else {
                format!(" {}", md_cell(&c.path))
            },
        );
        if !c.rules.is_empty() {
            let _ = writeln!(out, "New text trips: {}\n", md_cell(&c.rules.join(", ")));
        }
        if let Some(l) = c.location() {
            let _ = writeln!(out, "At {}:{}:{}\n", md_cell(&l.file), l.line, l.column);
        }
        if !body.is_empty() {
            let _ = write!(out, "{fence}diff\n{body}{fence}\n\n");
        }
        out.push_str("</details>\n\n");
    }
    out
}
