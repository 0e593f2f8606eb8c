//! Load errors: every one names the file, and where it can, the line, the column
//! and the exact bytes, as a miette diagnostic.

use std::path::Path;

use miette::{Diagnostic, NamedSource, SourceSpan};

use crate::display::VisibleSource;
use crate::manifest::json::{line_col, ParseError, Span};

/// Why an input could not be loaded. Every variant is exit code 2.
#[derive(Debug, thiserror::Error, Diagnostic)]
pub enum LoadError {
    /// The file could not be read.
    #[error("{path}: cannot read: {message}")]
    #[diagnostic(code(mcplint::io))]
    Io {
        /// The path as given.
        path: String,
        /// The OS error.
        message: String,
    },

    /// A path, directory or glob matched nothing loadable.
    #[error("{path}: {message}")]
    #[diagnostic(code(mcplint::no_input))]
    NoInput {
        /// The path or pattern as given.
        path: String,
        /// What was wrong.
        message: String,
    },

    /// The text is not (strict) JSON or TOML.
    #[error("{path}:{line}:{column}: {message}")]
    #[diagnostic(code(mcplint::syntax))]
    Syntax {
        /// The path.
        path: String,
        /// 1-based line.
        line: usize,
        /// 1-based column, in characters.
        column: usize,
        /// What went wrong.
        message: String,
        /// The file (made safe to print).
        #[source_code]
        src: NamedSource<String>,
        /// The bytes it is about.
        #[label("{label}")]
        span: SourceSpan,
        /// The label text.
        label: String,
        /// What to do about it.
        #[help]
        help: Option<String>,
    },

    /// Valid JSON of the wrong shape (tools not an array, a tool without a name...).
    #[error("{path}:{line}:{column}: {message}")]
    #[diagnostic(code(mcplint::shape))]
    Shape {
        /// The path.
        path: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong.
        message: String,
        /// JSON pointer of the offending value.
        pointer: String,
        /// The file (made safe to print).
        #[source_code]
        src: NamedSource<String>,
        /// The offending value.
        #[label("{label}")]
        span: SourceSpan,
        /// The label text.
        label: String,
        /// What to do about it.
        #[help]
        help: Option<String>,
    },

    /// The input's kind could not be recognised.
    #[error("{path}: not a recognised MCP manifest or config: {message}")]
    #[diagnostic(
        code(mcplint::unknown_format),
        help("mcplint reads tools/list results, JSON-RPC responses, capture files, MCPB manifests and bundles, server.json, and client configs; use --input-format to force one")
    )]
    UnknownFormat {
        /// The path.
        path: String,
        /// What was seen.
        message: String,
    },
}

/// Source texts beyond this size are not attached to diagnostics in full:
/// miette only needs the lines around the label, and copying a 200 MB file for
/// one error would be wasteful.
const MAX_ATTACHED_SOURCE: usize = 4 * 1024 * 1024;

/// A printable copy of `text` and the label span remapped into it.
fn attach(path: &str, text: &str, span: Span) -> (NamedSource<String>, SourceSpan) {
    // For huge files keep only a window around the span; offsets are then
    // relative to the window.
    let (base, window) = if text.len() > MAX_ATTACHED_SOURCE {
        let mut s = span.start.saturating_sub(2048);
        while !text.is_char_boundary(s) {
            s -= 1;
        }
        let mut e = (span.end + 2048).min(text.len());
        while !text.is_char_boundary(e) {
            e += 1;
        }
        (s, &text[s..e])
    } else {
        (0, text)
    };
    let vis = VisibleSource::new(window);
    let mapped = vis.map_span(span.start - base, span.end.max(span.start) - base);
    (NamedSource::new(path, vis.text), mapped)
}

impl LoadError {
    /// An I/O error on `path`.
    pub fn io(path: &Path, err: &std::io::Error) -> Self {
        LoadError::Io {
            path: path.display().to_string(),
            message: err.to_string(),
        }
    }

    /// A JSON syntax error in `bytes` (which may not be UTF-8).
    pub fn syntax(path: &Path, bytes: &[u8], err: &ParseError) -> Self {
        let text = String::from_utf8_lossy(bytes);
        let path_s = path.display().to_string();
        let (line, column) = line_col(&text, err.span.start);
        let (src, span) = attach(&path_s, &text, err.span);
        let help = match &err.kind {
            crate::manifest::json::ErrorKind::TooLarge { .. } => Some(
                "raise the limit with --max-size BYTES if the file is trusted to be this big"
                    .into(),
            ),
            crate::manifest::json::ErrorKind::TooDeep(_) => {
                Some("raise the limit with --max-depth N if the nesting is legitimate".into())
            }
            crate::manifest::json::ErrorKind::ByteOrderMark => {
                Some("save the file as UTF-8 without a BOM".into())
            }
            _ => None,
        };
        LoadError::Syntax {
            path: path_s,
            line,
            column,
            message: err.kind.to_string(),
            src,
            span,
            label: "here".into(),
            help,
        }
    }

    /// A syntax error from another parser (TOML), with a byte range.
    pub fn syntax_at(path: &Path, text: &str, span: Span, message: String) -> Self {
        let path_s = path.display().to_string();
        let (line, column) = line_col(text, span.start);
        let (src, sspan) = attach(&path_s, text, span);
        LoadError::Syntax {
            path: path_s,
            line,
            column,
            message,
            src,
            span: sspan,
            label: "here".into(),
            help: None,
        }
    }

    /// A value of the wrong shape at `span` (JSON pointer `pointer`).
    pub fn shape(
        path: &Path,
        text: &str,
        span: Span,
        pointer: String,
        message: impl Into<String>,
        label: impl Into<String>,
        help: Option<String>,
    ) -> Self {
        let path_s = path.display().to_string();
        let (line, column) = line_col(text, span.start);
        let (src, sspan) = attach(&path_s, text, span);
        LoadError::Shape {
            path: path_s,
            line,
            column,
            message: message.into(),
            pointer,
            src,
            span: sspan,
            label: label.into(),
            help,
        }
    }

    /// The path the error is about.
    pub fn path(&self) -> &str {
        match self {
            LoadError::Io { path, .. }
            | LoadError::NoInput { path, .. }
            | LoadError::Syntax { path, .. }
            | LoadError::Shape { path, .. }
            | LoadError::UnknownFormat { path, .. } => path,
        }
    }
}
