//! JSON output, version 1. The wire structs here are frozen: change them only
//! with a new `version`. They are separate from the internal [`Finding`] so
//! refactoring never changes the output by accident.

use serde::Serialize;

use crate::finding::{Finding, Severity};
use crate::report::Report;

/// The format version.
pub const VERSION: u32 = 1;

/// The top-level object.
#[derive(Serialize)]
pub struct Output<'a> {
    /// Always 1.
    pub version: u32,
    /// Findings, sorted by file and position.
    pub findings: Vec<WireFinding<'a>>,
    /// Counts.
    pub summary: Summary,
}

/// A byte range.
#[derive(Serialize)]
pub struct WireSpan {
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
}

/// A related location.
#[derive(Serialize)]
pub struct WireRelated<'a> {
    /// RFC 6901 pointer.
    pub pointer: &'a str,
    /// Byte range.
    pub span: WireSpan,
    /// 1-based line.
    pub line: usize,
    /// 1-based column (characters).
    pub column: usize,
    /// What it is.
    pub label: &'a str,
}

/// One finding.
#[derive(Serialize)]
pub struct WireFinding<'a> {
    /// Rule id.
    pub rule: &'a str,
    /// `info|low|medium|high`.
    pub severity: Severity,
    /// `low|medium|high`.
    pub confidence: &'static str,
    /// One sentence.
    pub message: &'a str,
    /// What to do.
    pub help: Option<&'a str>,
    /// The input file as given.
    pub path: &'a str,
    /// Server name or null.
    pub server: Option<&'a str>,
    /// Tool name or null.
    pub tool: Option<&'a str>,
    /// Prompt name or null.
    pub prompt: Option<&'a str>,
    /// Resource name or null.
    pub resource: Option<&'a str>,
    /// RFC 6901 pointer into the file.
    pub pointer: &'a str,
    /// 1-based line.
    pub line: usize,
    /// 1-based column (characters).
    pub column: usize,
    /// Byte range of the exact offending bytes.
    pub span: WireSpan,
    /// Label of the primary span.
    pub label: &'a str,
    /// Related locations.
    pub related: Vec<WireRelated<'a>>,
    /// Extra facts (decoded hidden text ...).
    pub notes: &'a [String],
}

/// Counts.
#[derive(Serialize)]
pub struct Summary {
    /// Input files.
    pub files: usize,
    /// Servers.
    pub servers: usize,
    /// Tools.
    pub tools: usize,
    /// Findings.
    pub findings: usize,
    /// High.
    pub high: usize,
    /// Medium.
    pub medium: usize,
    /// Low.
    pub low: usize,
    /// Info.
    pub info: usize,
    /// Removed by ignores.
    pub ignored: usize,
}

fn wire<'a>(report: &Report<'_>, f: &'a Finding) -> WireFinding<'a> {
    WireFinding {
        rule: &f.rule,
        severity: f.severity,
        confidence: f.confidence.name(),
        message: &f.message,
        help: f.help.as_deref(),
        path: &f.path,
        server: f.server.as_deref(),
        tool: f.tool(),
        prompt: f.prompt(),
        resource: f.resource(),
        pointer: &f.pointer,
        line: f.line,
        column: f.column,
        span: WireSpan {
            start: f.span.start,
            end: f.span.end,
        },
        label: &f.label,
        related: f
            .related
            .iter()
            .map(|r| {
                let (line, column) = report.line_col(&f.path, r.span.start);
                WireRelated {
                    pointer: &r.pointer,
                    span: WireSpan {
                        start: r.span.start,
                        end: r.span.end,
                    },
                    line,
                    column,
                    label: &r.label,
                }
            })
            .collect(),
        notes: &f.notes,
    }
}

/// Renders the report as pretty JSON.
pub fn render(report: &Report<'_>) -> String {
    let c = report.counts();
    let out = Output {
        version: VERSION,
        findings: report.findings.iter().map(|f| wire(report, f)).collect(),
        summary: Summary {
            files: report.stats.files,
            servers: report.stats.servers,
            tools: report.stats.tools,
            findings: c.total(),
            high: c.high,
            medium: c.medium,
            low: c.low,
            info: c.info,
            ignored: report.stats.ignored,
        },
    };
    let mut s =
        serde_json::to_string_pretty(&out).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    s.push('\n');
    s
}
