//! SARIF 2.1.0 output for code-scanning upload (GitHub, Azure DevOps).
//!
//! Columns are counted in Unicode code points (`columnKind`), byte offsets are
//! given as `byteOffset`/`byteLength`, and every rule that exists is listed in
//! the driver with its docs, so viewers can show help without mcplint.

use serde_json::{json, Value};

use crate::finding::Severity;
use crate::report::Report;
use crate::rules::RuleMeta;

fn level(s: Severity) -> &'static str {
    match s {
        Severity::High => "error",
        Severity::Medium => "warning",
        Severity::Low | Severity::Info => "note",
    }
}

/// A relative path as a URI reference (percent-encoding what a URI may not hold).
pub fn uri(path: &str) -> String {
    let mut out = String::new();
    for b in path.bytes() {
        let c = b as char;
        if c.is_ascii_alphanumeric() || "-._~/!$&'()*+,;=:@".contains(c) {
            out.push(c);
        } else if c == '\\' {
            out.push('/');
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `tool-shadowing` → `ToolShadowing` (SARIF wants `name` to differ from `id`).
fn pascal(id: &str) -> String {
    id.split('-')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

fn rule_json(m: &RuleMeta) -> Value {
    let md = format!(
        "## What it flags\n{}\n\n## Why it matters\n{}\n\n## Example\n```\n{}\n```\n\n## Remedy\n{}\n",
        m.docs.what, m.docs.why, m.docs.example, m.docs.remedy
    );
    let precision = match m.confidence {
        crate::finding::Confidence::High => "high",
        crate::finding::Confidence::Medium => "medium",
        crate::finding::Confidence::Low => "low",
    };
    let security = match m.severity {
        Severity::High => "8.0",
        Severity::Medium => "5.0",
        Severity::Low => "3.0",
        Severity::Info => "1.0",
    };
    json!({
        "id": m.id,
        "name": pascal(&m.id),
        "shortDescription": {"text": m.summary},
        "fullDescription": {"text": m.docs.what},
        "help": {"text": format!("{}\n\n{}", m.help, m.docs.remedy), "markdown": md},
        "defaultConfiguration": {"level": level(m.severity)},
        "properties": {"tags": m.tags, "precision": precision, "security-severity": security}
    })
}

fn region(report: &Report<'_>, path: &str, start: usize, end: usize) -> Value {
    let (sl, sc) = report.line_col(path, start);
    let (el, ec) = report.line_col(path, end);
    json!({
        "startLine": sl, "startColumn": sc, "endLine": el, "endColumn": ec,
        "byteOffset": start, "byteLength": end.saturating_sub(start)
    })
}

/// Renders the report as a SARIF 2.1.0 log.
pub fn render(report: &Report<'_>) -> String {
    let metas = report.engine.metas();
    let rules: Vec<Value> = metas.iter().map(|m| rule_json(m)).collect();
    let results: Vec<Value> = report
        .findings
        .iter()
        .map(|f| {
            let idx = metas.iter().position(|m| m.id == f.rule);
            let mut text = f.message.clone();
            for n in &f.notes {
                text.push('\n');
                text.push_str(n);
            }
            let mut logical = Vec::new();
            if let Some(s) = &f.server {
                let fq = match &f.name {
                    Some(n) => format!("{s}/{n}"),
                    None => s.clone(),
                };
                logical.push(json!({"fullyQualifiedName": fq, "kind": "object"}));
            }
            let mut loc = json!({
                "physicalLocation": {
                    "artifactLocation": {"uri": uri(&f.path)},
                    "region": region(report, &f.path, f.span.start, f.span.end)
                }
            });
            if !logical.is_empty() {
                loc["logicalLocations"] = Value::Array(logical);
            }
            let related: Vec<Value> = f
                .related
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    json!({
                        "id": i + 1,
                        "message": {"text": r.label},
                        "physicalLocation": {
                            "artifactLocation": {"uri": uri(&f.path)},
                            "region": region(report, &f.path, r.span.start, r.span.end)
                        }
                    })
                })
                .collect();
            let mut r = json!({
                "ruleId": f.rule,
                "level": level(f.severity),
                "message": {"text": text},
                "locations": [loc],
                "partialFingerprints": {"mcplint/v1": format!("{}:{}:{}", f.rule, f.pointer, f.server.as_deref().unwrap_or(""))},
                "properties": {"severity": f.severity.name(), "pointer": f.pointer}
            });
            if let Some(i) = idx {
                r["ruleIndex"] = json!(i);
            }
            if !related.is_empty() {
                r["relatedLocations"] = Value::Array(related);
            }
            r
        })
        .collect();
    let log = json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "mcplint",
                "version": env!("CARGO_PKG_VERSION"),
                "informationUri": "https://github.com/mcplint/mcplint",
                "rules": rules
            }},
            "columnKind": "unicodeCodePoints",
            "results": results
        }]
    });
    let mut s = serde_json::to_string_pretty(&log).unwrap_or_default();
    s.push('\n');
    s
}
