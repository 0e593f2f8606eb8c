//! Markdown output: a table for a pull-request comment or a job summary.
//! Cells are escaped so manifest text can neither break the table nor inject
//! HTML.

use crate::report::Report;

/// Escapes text for a Markdown table cell.
pub fn cell(s: &str) -> String {
    let v = crate::display::visible(s);
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '|' => out.push_str("\\|"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '`' => out.push_str("\\`"),
            '*' | '_' | '[' | ']' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

/// Renders the findings as a Markdown table with a summary line.
pub fn render(report: &Report<'_>) -> String {
    let mut out = String::from("### mcplint\n\n");
    if report.findings.is_empty() {
        out.push_str(&format!("{}\n", report.summary_line()));
        return out;
    }
    out.push_str(
        "| Severity | Rule | Location | Server / tool | Message |\n|---|---|---|---|---|\n",
    );
    for f in report.findings {
        let who = match (&f.server, &f.name) {
            (Some(s), Some(n)) => format!("{} / {}", cell(s), cell(n)),
            (Some(s), None) => cell(s),
            (None, Some(n)) => cell(n),
            (None, None) => String::new(),
        };
        out.push_str(&format!(
            "| {} | {} | {}:{}:{} | {} | {} |\n",
            f.severity,
            cell(&f.rule),
            cell(&f.path),
            f.line,
            f.column,
            who,
            cell(&f.message)
        ));
    }
    out.push_str(&format!("\n{}\n", report.summary_line()));
    out
}
