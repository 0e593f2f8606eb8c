//! Load errors: every one names the file, and where it can, the line, the column
//! and the exact bytes, as a miette diagnostic.

use std::path::Path;

use miette::{Diagnostic, NamedSource, SourceSpan};

use crate::display::{visible, VisibleSource};
use crate::manifest::json::{line_col, ParseError, Span};

/// Why an input could not be loaded. Every variant is exit code 2.
///
/// Paths and messages are stored as given and made visible only when shown
/// ([`visible`]): a file name or a glob can hold an ESC byte as well as a
/// manifest can, and must not drive the terminal.
#[derive(Debug, thiserror::Error, Diagnostic)]
pub enum LoadError {
    /// The file could not be read.
    #[error("{}: cannot read: {}", visible(.path), visible(.message))]
    #[diagnostic(code(mcplint::io))]
    Io {
        /// The path as given.
        path: String,
        /// The OS error.
        message: String,
    },

    /// A path, directory or glob matched nothing loadable.
    #[error("{}: {}", visible(.path), visible(.message))]
    #[diagnostic(code(mcplint::no_input))]
    NoInput {
        /// The path or pattern as given.
        path: String,
        /// What was wrong.
        message: String,
    },

    /// The text is not (strict) JSON or TOML.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Syntax(Box<SyntaxError>),

    /// Valid JSON of the wrong shape (tools not an array, a tool without a name...).
    #[error(transparent)]
    #[diagnostic(transparent)]
    Shape(Box<ShapeError>),

    /// The input's kind could not be recognised.
    #[error("{}: not a recognised MCP manifest or config: {}", visible(.path), visible(.message))]
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

/// A syntax error: file, line, column and a label on the bytes.
#[derive(Debug, thiserror::Error, Diagnostic)]
#[error("{}:{line}:{column}: {}", visible(.path), visible(.message))]
#[diagnostic(code(mcplint::syntax))]
pub struct SyntaxError {
    /// The path.
    pub path: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// What went wrong.
    pub message: String,
    /// The file (made safe to print).
    #[source_code]
    pub src: NamedSource<String>,
    /// The bytes it is about.
    #[label("{label}")]
    pub span: SourceSpan,
    /// The label text.
    pub label: String,
    /// What to do about it.
    #[help]
    pub help: Option<String>,
}

/// Valid JSON of the wrong shape, with the JSON pointer of the offending value.
#[derive(Debug, thiserror::Error, Diagnostic)]
#[error("{}:{line}:{column}: {}", visible(.path), visible(.message))]
#[diagnostic(code(mcplint::shape))]
pub struct ShapeError {
    /// The path.
    pub path: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// What is wrong.
    pub message: String,
    /// JSON pointer of the offending value.
    pub pointer: String,
    /// The file (made safe to print).
    #[source_code]
    pub src: NamedSource<String>,
    /// The offending value.
    #[label("{label}")]
    pub span: SourceSpan,
    /// The label text.
    pub label: String,
    /// What to do about it.
    #[help]
    pub help: Option<String>,
}

/// Source texts beyond this size are not attached to diagnostics in full:
/// miette only needs the lines around the label, and copying a 200 MB file for
/// one error would be wasteful.
const MAX_ATTACHED_SOURCE: usize = 4 * 1024 * 1024;

/// A printable copy of `text` and the label span remapped into it. With
/// `mark_eof`, a span at the end of the text gets something to point at.
fn attach(path: &str, text: &str, span: Span, mark_eof: bool) -> (NamedSource<String>, SourceSpan) {
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
    // A long line (minified JSON, a million `[`) would be printed whole under
    // the label: keep at most 256 bytes of its line after the label. Cutting
    // after the label leaves the label's line and column as they are.
    let mut after = (span.end.max(span.start) - base).min(window.len());
    // Invalid UTF-8 is shown lossily: a span in the raw bytes can end inside
    // a 3-byte U+FFFD.
    while !window.is_char_boundary(after) {
        after += 1;
    }
    let line_end = window[after..]
        .find('\n')
        .map_or(window.len(), |i| after + i);
    let mut cut = after + 256;
    let truncated = line_end > cut;
    if truncated {
        while !window.is_char_boundary(cut) {
            cut += 1;
        }
    }
    let window = if truncated { &window[..cut] } else { window };
    let mut vis = VisibleSource::new(window);
    if truncated {
        vis.text.push_str(" …");
    }
    let mut mapped = vis.map_span(span.start - base, span.end.max(span.start) - base);
    if mark_eof && span.start >= text.len() {
        // miette draws no label on an empty span at the very end of the
        // source: give it one blank column past the last byte to point at, so
        // "unexpected end of input" still shows where.
        mapped = (vis.text.len(), 1).into();
        vis.text.push(' ');
    }
    (NamedSource::new(visible(path), vis.text), mapped)
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
        // A file refused for its size was not read: there is nothing to point at.
        let too_large = matches!(err.kind, crate::manifest::json::ErrorKind::TooLarge { .. });
        let (src, span) = attach(&path_s, &text, err.span, !too_large);
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
        LoadError::Syntax(Box::new(SyntaxError {
            path: path_s,
            line,
            column,
            message: err.kind.to_string(),
            src,
            span,
            label: "here".into(),
            help,
        }))
    }

    /// A syntax error from another parser (TOML), with a byte range.
    pub fn syntax_at(path: &Path, text: &str, span: Span, message: String) -> Self {
        let path_s = path.display().to_string();
        let (line, column) = line_col(text, span.start);
        let (src, sspan) = attach(&path_s, text, span, true);
        LoadError::Syntax(Box::new(SyntaxError {
            path: path_s,
            line,
            column,
            message,
            src,
            span: sspan,
            label: "here".into(),
            help: None,
        }))
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
        let (src, sspan) = attach(&path_s, text, span, true);
        LoadError::Shape(Box::new(ShapeError {
            path: path_s,
            line,
            column,
            message: message.into(),
            pointer,
            src,
            span: sspan,
            label: label.into(),
            help,
        }))
    }

    /// The path the error is about.
    pub fn path(&self) -> &str {
        match self {
            LoadError::Io { path, .. }
            | LoadError::NoInput { path, .. }
            | LoadError::UnknownFormat { path, .. } => path,
            LoadError::Syntax(e) => &e.path,
            LoadError::Shape(e) => &e.path,
        }
    }
}
