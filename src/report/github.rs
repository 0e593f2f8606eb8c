//! GitHub Actions workflow commands: `::error file=…,line=…,col=…,title=…::…`.
//!
//! Escaping follows the runner's rules: in the message `%`, CR and LF are
//! percent-encoded; in properties also `:` and `,`. Manifest text is made
//! visible first, so no escape sequence reaches the log.

use crate::finding::Severity;
use crate::report::Report;

/// Escapes a workflow command's message.
pub fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escapes a workflow command's property value.
pub fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// Renders one command per finding.
pub fn render(report: &Report<'_>) -> String {
    let mut out = String::new();
    for f in report.findings {
        let cmd = match f.severity {
            Severity::High => "error",
            Severity::Medium => "warning",
            Severity::Low | Severity::Info => "notice",
        };
        let (el, ec) = report.line_col(&f.path, f.span.end);
        let title = format!("mcplint {} ({})", f.rule, f.severity);
        let mut msg = crate::display::visible_with(&f.message, true);
        if let Some(t) = f.tool() {
            msg.push_str(&format!(" [tool {}]", crate::display::visible(t)));
        }
        for n in &f.notes {
            msg.push('\n');
            msg.push_str(&crate::display::visible(n));
        }
        msg.push_str(&format!("\nRun `mcplint explain {}` for details.", f.rule));
        let mut props = format!(
            "file={},line={},col={}",
            escape_property(&crate::display::visible(&f.path)),
            f.line,
            f.column
        );
        if el >= f.line {
            props.push_str(&format!(",endLine={el}"));
            if el == f.line {
                props.push_str(&format!(",endColumn={ec}"));
            }
        }
        props.push_str(&format!(",title={}", escape_property(&title)));
        out.push_str(&format!("::{cmd} {props}::{}\n", escape_data(&msg)));
    }
    out
}
