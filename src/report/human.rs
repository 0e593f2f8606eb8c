//! Human output: miette graphical diagnostics.
//!
//! The source shown is a [`VisibleSource`] of the raw file, so control and
//! invisible characters appear as `⟨ESC⟩` or `⟨U+200B⟩` and never reach the
//! terminal raw; spans are remapped into that text.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use miette::{GraphicalReportHandler, GraphicalTheme, LabeledSpan, MietteDiagnostic, NamedSource};

use crate::display::{visible, VisibleSource};
use crate::finding::{Finding, Severity};
use crate::report::Report;

/// Renders findings as miette diagnostics. `color` selects the coloured unicode
/// theme; `width` is the terminal width.
pub fn render(report: &Report<'_>, color: bool, width: usize) -> String {
    let theme = if color {
        GraphicalTheme::unicode()
    } else {
        GraphicalTheme::unicode_nocolor()
    };
    let handler = GraphicalReportHandler::new_themed(theme)
        .with_width(width)
        .with_links(false);
    let mut visible_sources: HashMap<&str, (Arc<VisibleSource>, Arc<String>)> = HashMap::new();
    let mut out = String::new();
    for f in report.findings {
        let (vs, text) = visible_sources
            .entry(f.path.as_str())
            .or_insert_with(|| {
                let raw = report
                    .sources
                    .get(&f.path)
                    .map(|s| s.as_str())
                    .unwrap_or("");
                let vs = VisibleSource::new(raw);
                let text = Arc::new(vs.text.clone());
                (Arc::new(vs), text)
            })
            .clone();
        let diag = diagnostic(f, &vs);
        let src = NamedSource::new(visible(&f.path), text).with_language("json");
        let report = miette::Report::new(diag).with_source_code(src);
        let _ = handler.render_report(&mut out, report.as_ref());
        out.push('\n');
    }
    out.push_str(&report.summary_line());
    out.push('\n');
    out
}

fn diagnostic(f: &Finding, vs: &VisibleSource) -> MietteDiagnostic {
    let sev = match f.severity {
        Severity::High => miette::Severity::Error,
        Severity::Medium => miette::Severity::Warning,
        Severity::Low | Severity::Info => miette::Severity::Advice,
    };
    let mut where_ = String::new();
    if let Some(s) = &f.server {
        let _ = write!(where_, "server `{}`", visible(s));
    }
    if let Some(n) = &f.name {
        let kind = match f.subject {
            crate::finding::Subject::Prompt => "prompt",
            crate::finding::Subject::Resource => "resource",
            _ => "tool",
        };
        if !where_.is_empty() {
            where_.push_str(", ");
        }
        let _ = write!(where_, "{kind} `{}`", visible(n));
    }
    let message = if where_.is_empty() {
        format!("{} [{}]", f.message, f.severity)
    } else {
        format!("{} [{}] ({where_})", f.message, f.severity)
    };
    let mut help = String::new();
    if let Some(h) = &f.help {
        help.push_str(h);
        help.push('\n');
    }
    for n in &f.notes {
        let _ = writeln!(help, "note: {n}");
    }
    let _ = write!(
        help,
        "pointer: {} · docs: mcplint explain {}",
        visible(&f.pointer),
        f.rule
    );
    let mut labels = vec![LabeledSpan::new_primary_with_span(
        Some(f.label.clone()),
        vs.map_span(f.span.start, f.span.end),
    )];
    for r in &f.related {
        labels.push(LabeledSpan::new_with_span(
            Some(r.label.clone()),
            vs.map_span(r.span.start, r.span.end),
        ));
    }
    MietteDiagnostic::new(message)
        .with_code(f.rule.clone())
        .with_severity(sev)
        .with_help(help)
        .with_labels(labels)
}
