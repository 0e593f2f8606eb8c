//! The rule engine: the [`Rule`] trait, the walk over every model-visible field,
//! the registry and the post-passes (combined signals, configuration).
//!
//! A rule implements only the levels it needs (zizmor's layered audits): the
//! server, a tool, every object schema inside a tool (recursively through
//! `properties`, `items`, `anyOf`/`oneOf`/`allOf`, `$defs`/`definitions` ...),
//! every model-visible text field, or a group of servers that belong to one
//! agent. Declarative rules from TOML are matched by one shared prefilter in
//! [`crate::rules::pattern`] and report through the same [`Sink`].

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;

use crate::finding::{ByteSpan, Confidence, Finding, LineIndex, Related, Severity, Subject};
use crate::manifest::{Document, Kind, Loaded, NodeId, Server, Tool};
use crate::rules::memo::{Range, Recorded, TextMemo};
use crate::rules::normalize::{normalize_text_into, Normalized, RunCounter};
use crate::rules::pattern::PatternSet;

/// A rule's documentation, in ruff's template.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Docs {
    /// What it flags.
    pub what: String,
    /// Why it matters.
    pub why: String,
    /// An example of text it flags.
    pub example: String,
    /// What to do about it.
    pub remedy: String,
}

/// Where a rule comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Compiled into mcplint (a code rule or an embedded `rules/*.toml`).
    Builtin,
    /// A user rule file.
    File(PathBuf),
}

/// What every rule declares about itself.
#[derive(Clone, Debug)]
pub struct RuleMeta {
    /// Kebab-case id named after the pattern it flags.
    pub id: String,
    /// One line.
    pub summary: String,
    /// Default severity.
    pub severity: Severity,
    /// How often a match is what it claims.
    pub confidence: Confidence,
    /// Signal families (`instruction`, `concealment`, `secret`, `exfiltration`,
    /// `command`, `cross-tool`, `preference`, `hidden`, `schema`, `cross-server`),
    /// used to combine weak signals into strong ones.
    pub tags: Vec<String>,
    /// What to do, shown with each finding.
    pub help: String,
    /// Long documentation.
    pub docs: Docs,
    /// Where it comes from.
    pub origin: Origin,
    /// True for rules written in Rust, false for declarative rules.
    pub code: bool,
}

impl RuleMeta {
    /// A built-in code rule's metadata.
    #[allow(clippy::too_many_arguments)]
    pub fn code(
        id: &str,
        summary: &str,
        severity: Severity,
        confidence: Confidence,
        tags: &[&str],
        help: &str,
        docs: [&str; 4],
    ) -> Self {
        RuleMeta {
            id: id.into(),
            summary: summary.into(),
            severity,
            confidence,
            tags: tags.iter().map(|s| s.to_string()).collect(),
            help: help.into(),
            docs: Docs {
                what: docs[0].into(),
                why: docs[1].into(),
                example: docs[2].into(),
                remedy: docs[3].into(),
            },
            origin: Origin::Builtin,
            code: true,
        }
    }

    /// True if the rule carries `tag`.
    pub fn has_tag(&self, tag: &str) -> bool {
        self.tags.iter().any(|t| t == tag)
    }
}

/// One server in one loaded file: what rules look at.
#[derive(Clone, Copy)]
pub struct Scope<'a> {
    /// The file.
    pub loaded: &'a Loaded,
    /// Its document.
    pub doc: &'a Document,
    /// The server.
    pub server: &'a Server,
}

/// A model-visible text field: a string value or an object key that a model reads.
#[derive(Clone, Debug)]
pub struct Field<'a> {
    /// The string node (value or key).
    pub node: NodeId,
    /// Field path for `applies_to` globs: `tools/NAME/inputSchema/properties/P/description`;
    /// a property's own name ends in `#name`. Borrowed from the walk's one
    /// path buffer (no string per field).
    pub path: &'a str,
    /// The decoded text.
    pub text: Cow<'a, str>,
    /// True if this is a property name (an object key).
    pub is_key: bool,
}

/// Where rules report. The engine sets the subject before each call.
#[derive(Debug, Default)]
pub struct Sink {
    /// Findings so far.
    pub findings: Vec<Finding>,
    subject: Option<(Subject, Option<String>)>,
    /// Line/column lookups in the document being checked (by its text's
    /// address), so findings do not rescan large files.
    lines: Option<(usize, Lines)>,
    /// Set while the engine checks text decoded from a blob of a field.
    within: Option<crate::rules::decoded::Within>,
    /// Set while the engine checks one field's text: the number of findings
    /// before it, and each finding reported since (its index, node and the
    /// decoded range it covers), for [`crate::rules::memo::TextMemo`].
    recording: Option<(usize, Vec<Emitted>)>,
}

/// The stack of each thread [`Engine::check`] starts: the usual main
/// thread's. The walk over a document recurses once per level of nesting,
/// and with the 2 MiB that spawned threads get by default a document nested
/// 10,000 levels deep (read with a raised `--max-depth`) overflowed a worker
/// where the main thread checked it.
const WORKER_STACK: usize = 8 << 20;

/// A finding reported while recording: its index among the findings, its
/// node, and the decoded range it covers.
type Emitted = (usize, NodeId, Range);

/// Line/column lookups in one text. Findings mostly come in document order
/// (a tool's findings a little out of order), so a cursor moves from one to
/// the next counting line breaks, and only the bytes up to the last finding
/// are read. Should the moves add up to several times the text, a full
/// [`LineIndex`] answers the rest.
#[derive(Debug, Default)]
struct Lines {
    /// Byte offset, its 1-based line, and the offset where that line starts.
    cursor: (usize, usize, usize),
    /// Bytes the cursor has moved over so far.
    moved: usize,
    index: Option<LineIndex>,
}

impl Lines {
    fn new() -> Self {
        Lines {
            cursor: (0, 1, 0),
            moved: 0,
            index: None,
        }
    }

    /// The same answer as [`LineIndex::line_col`].
    fn line_col(&mut self, text: &str, offset: usize) -> (usize, usize) {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let (at, line, start) = self.cursor;
        if self.index.is_none() && self.moved > 4 * text.len() {
            self.index = Some(LineIndex::new(text));
        }
        if let Some(idx) = &self.index {
            return idx.line_col(text, offset);
        }
        let bytes = text.as_bytes();
        let (line, start) = if offset >= at {
            let skipped = &bytes[at..offset];
            self.moved += skipped.len();
            let breaks = crate::manifest::json::count_newlines(skipped);
            match skipped.iter().rposition(|&b| b == b'\n') {
                Some(i) => (line + breaks, at + i + 1),
                None => (line, start),
            }
        } else {
            let skipped = &bytes[offset..at];
            self.moved += skipped.len();
            let breaks = crate::manifest::json::count_newlines(skipped);
            if breaks == 0 {
                (line, start)
            } else {
                let start = bytes[..offset]
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |i| i + 1);
                self.moved += offset - start;
                (line - breaks, start)
            }
        };
        self.cursor = (offset, line, start);
        (line, text[start..offset].chars().count() + 1)
    }
}

impl Sink {
    /// Sets what the next findings are about.
    pub fn set_subject(&mut self, subject: Subject, name: Option<String>) {
        self.subject = Some((subject, name));
    }

    /// Reports a finding on a whole node, or on `decoded` bytes of a string node's
    /// decoded text. Returns it so the caller can add notes and related spans.
    pub fn emit(
        &mut self,
        scope: &Scope<'_>,
        meta: &RuleMeta,
        node: NodeId,
        decoded: Option<(usize, usize)>,
        message: impl Into<String>,
        label: impl Into<String>,
    ) -> &mut Finding {
        // Text decoded from a blob: the finding is on the blob's bytes.
        let within = self.within.as_ref().filter(|w| w.node == node).cloned();
        let decoded = match &within {
            Some(w) => Some((w.decoded.start, w.decoded.end)),
            None => decoded,
        };
        if let Some((_, r)) = &mut self.recording {
            r.push((self.findings.len(), node, decoded));
        }
        let (span, pointer, line_col) = self.locate(scope, node, decoded);
        let (subject, name) = self.subject.clone().unwrap_or((Subject::Server, None));
        let f = self.push(
            meta,
            scope.loaded.display_path(),
            Some(scope.server.name.clone()),
            subject,
            name,
            pointer,
            span,
            line_col,
            message.into(),
            label.into(),
        );
        if let Some(w) = within {
            f.message
                .push_str(&format!(" (found in decoded {})", w.decoded.how));
            f.notes.push(format!(
                "decoded {}: {}",
                w.decoded.how,
                crate::display::visible_short(&w.decoded.text, 200)
            ));
        }
        f
    }

    /// Where `decoded` bytes of node `node`'s text (or the whole node) are:
    /// the raw span, the pointer, and the line and column.
    fn locate(
        &mut self,
        scope: &Scope<'_>,
        node: NodeId,
        decoded: Range,
    ) -> (ByteSpan, String, (usize, usize)) {
        let doc = scope.doc;
        let span = match decoded {
            Some((s, e)) if doc.kind(node) == Kind::String => doc.raw_span_of_decoded(node, s..e),
            _ => doc.span(node),
        };
        let text = doc.text();
        let key = text.as_ptr() as usize;
        if self.lines.as_ref().is_none_or(|(k, _)| *k != key) {
            self.lines = Some((key, Lines::new()));
        }
        let line_col = match &mut self.lines {
            Some((_, lines)) => lines.line_col(text, span.start),
            None => doc.line_col(span.start),
        };
        (
            ByteSpan::new(span.start, span.end),
            doc.pointer(node),
            line_col,
        )
    }

    /// Starts recording what is reported (see [`Sink::recording`]).
    fn start_recording(&mut self) {
        self.recording = Some((self.findings.len(), Vec::new()));
    }

    /// Stops recording and returns what was reported on `node` since
    /// [`Sink::start_recording`], without its place. None when it cannot be
    /// placed again: a finding with related spans (they point at other
    /// nodes), one on another node, or one reported other than through
    /// [`Sink::emit`] (findings pushed directly, or removed).
    fn take_recorded(&mut self, node: NodeId) -> Option<Vec<Recorded>> {
        let (from, recorded) = self.recording.take()?;
        // Most texts have no findings: no iterator to set up for them.
        if recorded.is_empty() && self.findings.len() == from {
            return Some(Vec::new());
        }
        if recorded.len() != self.findings.len().checked_sub(from)? {
            return None;
        }
        recorded
            .into_iter()
            .zip(from..)
            .map(|((i, n, range), expected)| {
                let f = self.findings.get(i)?;
                (i == expected && n == node && f.related.is_empty()).then(|| Recorded {
                    rule: f.rule.clone(),
                    severity: f.severity,
                    confidence: f.confidence,
                    message: f.message.clone(),
                    help: f.help.clone(),
                    label: f.label.clone(),
                    notes: f.notes.clone(),
                    range,
                })
            })
            .collect()
    }

    /// Reports again, on node `node` of the current subject, findings recorded
    /// for an equal text elsewhere: rule, message, label and notes as they
    /// were, the place found anew. (Every field is named, so that a new field
    /// of [`Finding`] has to be thought about here.)
    fn replay(&mut self, scope: &Scope<'_>, node: NodeId, found: &[Recorded]) {
        // Most texts have no findings: no copy of the subject's name for them.
        if found.is_empty() {
            return;
        }
        let (subject, name) = self.subject.clone().unwrap_or((Subject::Server, None));
        for r in found {
            let (span, pointer, (line, column)) = self.locate(scope, node, r.range);
            self.findings.push(Finding {
                rule: r.rule.clone(),
                severity: r.severity,
                confidence: r.confidence,
                message: r.message.clone(),
                help: r.help.clone(),
                path: scope.loaded.display_path(),
                server: Some(scope.server.name.clone()),
                subject,
                name: name.clone(),
                pointer,
                span,
                line,
                column,
                label: r.label.clone(),
                related: Vec::new(),
                notes: r.notes.clone(),
            });
        }
    }

    /// Reports a finding at an explicit place (for files without a JSON document).
    #[allow(clippy::too_many_arguments)]
    pub fn push(
        &mut self,
        meta: &RuleMeta,
        path: String,
        server: Option<String>,
        subject: Subject,
        name: Option<String>,
        pointer: String,
        span: ByteSpan,
        (line, column): (usize, usize),
        message: String,
        label: String,
    ) -> &mut Finding {
        self.findings.push(Finding {
            rule: meta.id.clone(),
            severity: meta.severity,
            confidence: meta.confidence,
            message,
            help: (!meta.help.is_empty()).then(|| meta.help.clone()),
            path,
            server,
            subject,
            name,
            pointer,
            span,
            line,
            column,
            label,
            related: Vec::new(),
            notes: Vec::new(),
        });
        let last = self.findings.len() - 1;
        &mut self.findings[last]
    }
}

/// A related location for a node, for [`Finding::related`].
pub fn related(
    doc: &Document,
    node: NodeId,
    decoded: Option<(usize, usize)>,
    label: impl Into<String>,
) -> Related {
    let span = match decoded {
        Some((s, e)) if doc.kind(node) == Kind::String => doc.raw_span_of_decoded(node, s..e),
        _ => doc.span(node),
    };
    Related {
        span: ByteSpan::new(span.start, span.end),
        pointer: doc.pointer(node),
        label: label.into(),
    }
}

/// Every pair of distinct servers among `servers`, each once: `(i, a, k,
/// b)` with `k < i`, for the cross-server rules. A server listed twice (the
/// same name in the same file) is not paired with itself.
pub fn server_pairs<'s, 'a>(
    servers: &'s [Scope<'a>],
) -> impl Iterator<Item = (usize, &'s Scope<'a>, usize, &'s Scope<'a>)> {
    servers.iter().enumerate().flat_map(move |(i, a)| {
        servers[..i]
            .iter()
            .enumerate()
            .filter(move |(_, b)| {
                !(a.server.name == b.server.name && std::ptr::eq(a.loaded, b.loaded))
            })
            .map(move |(k, b)| (i, a, k, b))
    })
}

/// Points `f` at a tool of another server (`other` in `b`), for the
/// cross-server rules: a note with its file, line and column, and, when both
/// servers are in the same file, a related span on its name (a related span
/// carries no file of its own).
pub fn point_at_other_tool(
    f: &mut Finding,
    a: &Scope<'_>,
    b: &Scope<'_>,
    other: &crate::manifest::Tool,
    note: &str,
    label: &str,
) {
    let (l, c) = b.doc.line_col(b.doc.span(other.name_node).start);
    f.notes
        .push(format!("{note}: {}:{l}:{c}", b.loaded.display_path()));
    if std::ptr::eq(a.loaded, b.loaded) {
        f.related
            .push(related(b.doc, other.name_node, None, label.to_string()));
    }
}

/// Which of the two most frequent levels a rule implements (see
/// [`Rule::levels`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Levels {
    /// It implements [`Rule::check_text`].
    pub text: bool,
    /// It implements [`Rule::check_schema`].
    pub schema: bool,
}

impl Levels {
    /// Neither: the rule checks other levels only (the tool, the manifest).
    pub const NONE: Levels = Levels {
        text: false,
        schema: false,
    };
    /// Text fields only.
    pub const TEXT: Levels = Levels {
        text: true,
        schema: false,
    };
    /// Schemas only.
    pub const SCHEMA: Levels = Levels {
        text: false,
        schema: true,
    };
    /// Both text fields and schemas.
    pub const BOTH: Levels = Levels {
        text: true,
        schema: true,
    };
}

/// What a text rule's findings depend on besides a field's text and whether
/// it is a key, for [`crate::rules::memo`]: a text's findings are reused for
/// an equal text only where every text rule would say the same. Read once,
/// when the engine is built.
#[derive(Clone, Copy, Debug)]
pub enum TextContext {
    /// Anything (the node, the server, the tool): fields are checked afresh
    /// each time.
    Any,
    /// Nothing more: the text decides.
    TextOnly,
    /// The field's path, as this function's number tells it (paths with the
    /// same number are treated alike).
    Path(fn(&str) -> u32),
}

/// A rule. Every method has an empty default; implement the levels you need.
pub trait Rule: Send + Sync {
    /// The rule's metadata.
    fn meta(&self) -> &RuleMeta;
    /// Which of [`Rule::check_text`] (called for every text field) and
    /// [`Rule::check_schema`] (every schema) the rule implements: the engine
    /// does not call the others. Both by default, so a rule that does not
    /// say is always called.
    fn levels(&self) -> Levels {
        Levels::BOTH
    }
    /// Once per server.
    fn check_server(&self, _scope: &Scope<'_>, _out: &mut Sink) {}
    /// Once per tool.
    fn check_tool(&self, _scope: &Scope<'_>, _tool: &Tool, _out: &mut Sink) {}
    /// Once per object schema inside a tool's input or output schema (the root
    /// included), with the keywords the walk found in it. A finding points at
    /// a node, whose pointer says where it is.
    fn check_schema(&self, _scope: &Scope<'_>, _tool: &Tool, _schema: &Schema, _out: &mut Sink) {}
    /// Once per model-visible text field, with its normalised text. A rule
    /// whose [`Rule::text_context`] is not `Any` promises that what it reports
    /// here follows from the field's text, whether it is a key, and that
    /// context: the engine then reuses the findings of a text for an equal
    /// one elsewhere (see [`crate::rules::memo`]).
    fn check_text(
        &self,
        _scope: &Scope<'_>,
        _field: &Field<'_>,
        _norm: &Normalized,
        _out: &mut Sink,
    ) {
    }
    /// What [`Rule::check_text`] reads of a field besides its text and
    /// whether it is a key (see [`TextContext`]). `Any`, the default, turns
    /// the memo off.
    fn text_context(&self) -> TextContext {
        TextContext::Any
    }
    /// Once per group of servers that belong to one agent (two or more).
    fn check_agent(&self, _servers: &[Scope<'_>], _out: &mut Sink) {}
    /// After all other rules ran on one subject (a tool, prompt, resource or the
    /// server's own text), with that subject's findings so far.
    fn check_findings(
        &self,
        _scope: &Scope<'_>,
        _engine: &Engine,
        _found: &[Finding],
        _out: &mut Sink,
    ) {
    }
}

/// What a value's key says about the value, for [`walk_fields`]: worked out
/// once a key, with a `match` on its bytes (a branch on the length, then on
/// the bytes), rather than by comparing it with three lists of keywords at
/// every string and object below it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Parent {
    /// Schema machinery (`$schema`, `$ref`, `format`, ...): its strings
    /// are not prose a model reads as instructions (the standard `$schema`
    /// URL is not a finding).
    Machine,
    /// `type`: a JSON type name in it is no prose either.
    Type,
    /// An object whose keys are names a model reads (property names and
    /// definitions).
    Named,
    /// Any other key.
    Other,
}

impl Parent {
    /// What `key` says. Inlined into the walk's loop over members, where
    /// the call cost a fifth of the match (1.6 M instructions over the
    /// bench's four checks).
    #[inline(always)]
    fn of(key: &str) -> Parent {
        match key.as_bytes() {
            b"$schema" | b"$ref" | b"$id" | b"$anchor" | b"format" | b"contentMediaType"
            | b"contentEncoding" => Parent::Machine,
            b"type" => Parent::Type,
            // The schema walk's list of them, so the two walks agree.
            b if Keyword::of_bytes(b).names_schemas() => Parent::Named,
            _ => Parent::Other,
        }
    }
}

/// Whether `text` names a JSON type.
fn is_json_type(text: &str) -> bool {
    matches!(
        text.as_bytes(),
        b"string" | b"number" | b"integer" | b"boolean" | b"object" | b"array" | b"null"
    )
}

/// Replaces `/` in a name so it stays one path segment (without allocating
/// when there is none).
fn seg(s: &str) -> Cow<'_, str> {
    // A plain byte loop: names are short, and `str::contains` went through
    // `memchr`'s set-up for each. (`/` is never part of a longer UTF-8
    // character.)
    if s.bytes().any(|b| b == b'/') {
        Cow::Owned(s.replace('/', "_"))
    } else {
        Cow::Borrowed(s)
    }
}

/// Appends `/i` to `path` (without the formatting machinery of `write!`,
/// which cost more than the rest of the step for every array element).
fn push_index(path: &mut String, i: usize) {
    path.push('/');
    let mut digits = [0u8; 20];
    let mut n = i;
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for &d in &digits[at..] {
        path.push(char::from(d));
    }
}

/// Calls `visit` with every model-visible text field under `node`, in
/// document order. `path` is the node's field path (restored on return).
pub fn walk_fields<'d>(
    doc: &'d Document,
    node: NodeId,
    path: &mut String,
    parent_key: &str,
    visit: &mut dyn FnMut(&Field<'_>),
) {
    walk(doc, node, path, Parent::of(parent_key), visit);
}

/// [`walk_fields`], with what the parent key says. The path of an element
/// or a member is built only when there is something under it to visit
/// (building it cost more than the rest of the step): a number, a boolean,
/// a `"type": "string"` or a `$ref` takes none.
fn walk(
    doc: &Document,
    node: NodeId,
    path: &mut String,
    parent: Parent,
    visit: &mut dyn FnMut(&Field<'_>),
) {
    match doc.kind(node) {
        Kind::String => {
            if let Some(text) = visible_text(doc, node, parent) {
                visit(&Field {
                    node,
                    path,
                    text,
                    is_key: false,
                });
            }
        }
        Kind::Array => {
            if let Some(items) = doc.array(node) {
                for (i, &v) in items.iter().enumerate() {
                    let child = Child::of(doc, v, parent);
                    if let Child::Nothing = child {
                        continue;
                    }
                    let len = path.len();
                    push_index(path, i);
                    child.walk(doc, v, path, parent, visit);
                    path.truncate(len);
                }
            }
        }
        Kind::Object => {
            let named = parent == Parent::Named;
            if let Some(members) = doc.members(node) {
                for (k, v) in members {
                    let key = doc.str(k).unwrap_or_default();
                    // A property literally named "type" or "format" is a name, not
                    // a keyword, so its value is walked as a schema.
                    let pk = if named {
                        Parent::Other
                    } else {
                        Parent::of(&key)
                    };
                    let child = Child::of(doc, v, pk);
                    // A named key is visited itself, whatever its value.
                    if !named && matches!(child, Child::Nothing) {
                        continue;
                    }
                    let len = path.len();
                    path.push('/');
                    path.push_str(&seg(&key));
                    if named {
                        let l2 = path.len();
                        path.push_str("/#name");
                        visit(&Field {
                            node: k,
                            path,
                            text: key.clone(),
                            is_key: true,
                        });
                        path.truncate(l2);
                    }
                    child.walk(doc, v, path, pk, visit);
                    path.truncate(len);
                }
            }
        }
        _ => {}
    }
}

/// What an array's element or an object's value holds for [`walk`].
enum Child<'d> {
    /// A string to visit, decoded.
    Text(Cow<'d, str>),
    /// An array or an object, to walk.
    Nested,
    /// Nothing to visit: another scalar, or a string its key rules out.
    Nothing,
}

impl<'d> Child<'d> {
    #[inline(always)]
    fn of(doc: &'d Document, node: NodeId, parent: Parent) -> Child<'d> {
        match doc.kind(node) {
            Kind::String => visible_text(doc, node, parent).map_or(Child::Nothing, Child::Text),
            Kind::Array | Kind::Object => Child::Nested,
            _ => Child::Nothing,
        }
    }

    /// Visits the text, or walks the container, at `path`.
    #[inline(always)]
    fn walk(
        self,
        doc: &Document,
        node: NodeId,
        path: &mut String,
        parent: Parent,
        visit: &mut dyn FnMut(&Field<'_>),
    ) {
        match self {
            Child::Text(text) => visit(&Field {
                node,
                path,
                text,
                is_key: false,
            }),
            Child::Nested => walk(doc, node, path, parent, visit),
            Child::Nothing => {}
        }
    }
}

/// The decoded text of string node `node`, unless what its key says rules
/// it out (schema machinery, a JSON type name) or it is empty.
#[inline(always)]
fn visible_text(doc: &Document, node: NodeId, parent: Parent) -> Option<Cow<'_, str>> {
    if parent == Parent::Machine {
        return None;
    }
    let text = doc.str(node).unwrap_or_default();
    if parent == Parent::Type && is_json_type(&text) {
        return None;
    }
    (!text.is_empty()).then_some(text)
}

/// An object schema met by the schema walk, for [`Rule::check_schema`],
/// with the keywords that schema rules read, found in the walk's own pass
/// over its members (the last of a duplicated key, as [`Document::get`]
/// gives it), so that no rule looks them up again.
#[derive(Clone, Copy, Debug)]
pub struct Schema {
    /// The schema object.
    pub node: NodeId,
    /// The value of its `required`.
    pub required: Option<NodeId>,
    /// The value of its `properties`.
    pub properties: Option<NodeId>,
    /// The value of its `patternProperties`.
    pub pattern_properties: Option<NodeId>,
}

/// What a key of an object schema is to [`walk_schemas`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum Keyword {
    /// `required`.
    Required,
    /// `properties`.
    Properties,
    /// `patternProperties`.
    PatternProperties,
    /// An object of other named schemas: `$defs`, `definitions`,
    /// `dependentSchemas`.
    Named,
    /// A schema, or an array of them: `items`, `additionalProperties`, `not`,
    /// `if`, ...
    Schema,
    /// An array of schemas: `anyOf`, `oneOf`, `allOf`, `prefixItems`.
    List,
    /// Any other key.
    Other,
}

impl Keyword {
    /// What key node `key` is. Inlined into the walk's two loops: one read
    /// of the node and a `match` for a key without escapes (all but a few).
    #[inline(always)]
    fn of(doc: &Document, key: NodeId) -> Keyword {
        match doc.unescaped_bytes(key) {
            Some(b) => Keyword::of_bytes(b),
            None => Keyword::of_escaped(doc, key),
        }
    }

    /// [`Keyword::of`] for a key with escapes, decoded first.
    #[inline(never)]
    fn of_escaped(doc: &Document, key: NodeId) -> Keyword {
        Keyword::of_bytes(&doc.str_bytes(key))
    }

    /// True for a key whose value is an object of named schemas
    /// (`properties`, `patternProperties`, `$defs`, ...).
    #[inline(always)]
    fn names_schemas(self) -> bool {
        matches!(
            self,
            Keyword::Properties | Keyword::PatternProperties | Keyword::Named
        )
    }

    /// What a key with decoded bytes `key` is.
    #[inline(always)]
    fn of_bytes(key: &[u8]) -> Keyword {
        // A `match` on the key's bytes: a branch on the length, then on the
        // bytes, not one comparison a keyword.
        match key {
            b"required" => Keyword::Required,
            b"properties" => Keyword::Properties,
            b"patternProperties" => Keyword::PatternProperties,
            b"$defs" | b"definitions" | b"dependentSchemas" => Keyword::Named,
            b"items"
            | b"additionalProperties"
            | b"not"
            | b"if"
            | b"then"
            | b"else"
            | b"contains"
            | b"propertyNames"
            | b"unevaluatedProperties"
            | b"additionalItems" => Keyword::Schema,
            b"anyOf" | b"oneOf" | b"allOf" | b"prefixItems" => Keyword::List,
            _ => Keyword::Other,
        }
    }
}

/// Calls `visit` with every object schema in a tool's schemas, in document
/// order. (No field path is built: no schema rule needs one, and building it
/// cost a third of the walk.)
fn walk_schemas(doc: &Document, node: NodeId, visit: &mut dyn FnMut(&Schema), depth: usize) {
    if doc.kind(node) != Kind::Object || depth > 64 {
        return;
    }
    let Some(members) = doc.members(node) else {
        return;
    };
    // One pass for the keywords the rules read and whether any member holds
    // further schemas.
    let mut schema = Schema {
        node,
        required: None,
        properties: None,
        pattern_properties: None,
    };
    let mut nests = false;
    for (k, v) in members.clone() {
        match Keyword::of(doc, k) {
            Keyword::Required => schema.required = Some(v),
            Keyword::Properties => {
                schema.properties = Some(v);
                nests = true;
            }
            Keyword::PatternProperties => {
                schema.pattern_properties = Some(v);
                nests = true;
            }
            Keyword::Named | Keyword::Schema | Keyword::List => nests = true,
            Keyword::Other => {}
        }
    }
    visit(&schema);
    // Most schemas are a parameter's `{"type": ..., "description": ...}`,
    // with nothing to go into: those take no second pass.
    if !nests {
        return;
    }
    for (k, v) in members {
        match Keyword::of(doc, k) {
            Keyword::Properties | Keyword::PatternProperties | Keyword::Named => {
                if let Some(ms) = doc.members(v) {
                    for (_, pv) in ms {
                        walk_schemas(doc, pv, visit, depth + 1);
                    }
                }
            }
            Keyword::Schema => match doc.kind(v) {
                Kind::Object => walk_schemas(doc, v, visit, depth + 1),
                Kind::Array => {
                    for &x in doc.array(v).unwrap_or_default() {
                        walk_schemas(doc, x, visit, depth + 1);
                    }
                }
                _ => {}
            },
            Keyword::List => {
                for &x in doc.array(v).unwrap_or_default() {
                    walk_schemas(doc, x, visit, depth + 1);
                }
            }
            Keyword::Required | Keyword::Other => {}
        }
    }
}

/// Per-rule user settings (from `mcplint.toml`).
#[derive(Clone, Debug, Default)]
pub struct RuleSettings {
    /// Skip the rule.
    pub disabled: bool,
    /// Use this severity instead of the default.
    pub severity: Option<Severity>,
}

/// The registry: every rule, the shared pattern matcher and user settings.
pub struct Engine {
    rules: Vec<Box<dyn Rule>>,
    /// The rules that implement [`Rule::check_text`], by index.
    text_rules: Vec<usize>,
    /// The path contexts of those whose [`Rule::text_context`] reads the
    /// path (the others key nothing apart).
    path_contexts: Vec<fn(&str) -> u32>,
    /// False if one of them is [`TextContext::Any`], which turns the memo
    /// off for every field.
    contexts_known: bool,
    patterns: PatternSet,
    settings: HashMap<String, RuleSettings>,
    index: HashMap<String, usize>,
    metas: Vec<RuleMeta>,
    /// Reuse a text's findings for an equal text ([`crate::rules::memo`]).
    memo: bool,
    /// Threads [`Engine::check`] spreads the servers over.
    threads: usize,
}

impl Engine {
    /// An engine with the built-in code rules and the given declarative rules.
    /// Duplicate ids are an error (returned as the duplicate id).
    pub fn new(code: Vec<Box<dyn Rule>>, patterns: PatternSet) -> Result<Engine, String> {
        let mut metas: Vec<RuleMeta> = code.iter().map(|r| r.meta().clone()).collect();
        metas.extend(patterns.metas().cloned());
        let mut index = HashMap::new();
        for (i, m) in metas.iter().enumerate() {
            if index.insert(m.id.clone(), i).is_some() {
                return Err(m.id.clone());
            }
        }
        let text_rules: Vec<usize> = (0..code.len()).filter(|&i| code[i].levels().text).collect();
        let mut path_contexts = Vec::new();
        let mut contexts_known = true;
        for &i in &text_rules {
            match code[i].text_context() {
                TextContext::Any => contexts_known = false,
                TextContext::TextOnly => {}
                TextContext::Path(f) => path_contexts.push(f),
            }
        }
        Ok(Engine {
            text_rules,
            path_contexts,
            contexts_known,
            rules: code,
            patterns,
            settings: HashMap::new(),
            index,
            metas,
            memo: true,
            threads: 1,
        })
    }

    /// Every rule's metadata, sorted by id.
    pub fn metas(&self) -> Vec<&RuleMeta> {
        let mut v: Vec<&RuleMeta> = self.metas.iter().collect();
        v.sort_by(|a, b| a.id.cmp(&b.id));
        v
    }

    /// The metadata of rule `id`.
    pub fn meta(&self, id: &str) -> Option<&RuleMeta> {
        self.index.get(id).map(|&i| &self.metas[i])
    }

    /// The declarative rules.
    pub fn patterns(&self) -> &PatternSet {
        &self.patterns
    }

    /// Applies per-rule settings. Unknown ids are returned so the caller can report them.
    pub fn configure(&mut self, settings: HashMap<String, RuleSettings>) -> Vec<String> {
        let unknown = settings
            .keys()
            .filter(|k| !self.index.contains_key(*k))
            .cloned()
            .collect();
        self.settings = settings;
        unknown
    }

    /// Whether [`Engine::check`] reuses a text's findings for an equal text
    /// (on by default). The findings are the same either way; tests and the
    /// benchmark turn it off to show that, and what it saves.
    pub fn set_memo(&mut self, on: bool) {
        self.memo = on;
    }

    /// How many threads [`Engine::check`] may spread the servers over (one
    /// by default; zero counts as one). The findings are the same, in the
    /// same order, whatever the number: each server is checked by one
    /// thread, the servers' findings are put back in input order, and the
    /// rules over several servers run afterwards on the calling thread.
    pub fn set_threads(&mut self, n: usize) {
        self.threads = n.max(1);
    }

    fn enabled(&self, id: &str) -> bool {
        !self.settings.get(id).is_some_and(|s| s.disabled)
    }

    /// Runs every rule over `inputs`. Servers of one client config form one
    /// agent; with `together`, all inputs form one agent.
    pub fn check(&self, inputs: &[Loaded], together: bool) -> Vec<Finding> {
        let scopes = scopes_of(inputs);
        let mut per_server = self.check_servers(&scopes).into_iter();
        // Each file's servers' findings, then those of the file's servers
        // as one agent: the order a single thread reports them in.
        let mut sink = Sink::default();
        let mut rest = &scopes[..];
        for loaded in inputs {
            let (file, after) = rest.split_at(loaded.servers.len());
            rest = after;
            for found in per_server.by_ref().take(file.len()) {
                sink.findings.extend(found);
            }
            if !together && file.len() > 1 {
                self.check_agent(file, &mut sink);
            }
        }
        if together && scopes.len() > 1 {
            self.check_agent(&scopes, &mut sink);
        }
        let mut findings = sink.findings;
        findings.retain(|f| self.enabled(&f.rule));
        for f in &mut findings {
            if let Some(sev) = self.settings.get(&f.rule).and_then(|s| s.severity) {
                f.severity = sev;
            }
        }
        findings.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
        findings.dedup_by(|a, b| {
            a.rule == b.rule && a.path == b.path && a.span == b.span && a.message == b.message
        });
        findings
    }

    /// Each server's own findings (not those over several servers), in the
    /// order of `scopes`: on this thread with one memo for all, or spread
    /// over [`Engine::set_threads`] threads, each taking the next server not
    /// yet taken and keeping a memo of its own (a share of one memo's budget,
    /// all of it for one thread).
    fn check_servers(&self, scopes: &[Scope<'_>]) -> Vec<Vec<Finding>> {
        let threads = self.threads.min(scopes.len()).max(1);
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        /// Tells the other workers to stop when a rule panics in one of them
        /// (a bug, carried to the caller below), rather than check every
        /// remaining server first.
        struct StopOnPanic<'a>(&'a AtomicBool);
        impl Drop for StopOnPanic<'_> {
            fn drop(&mut self) {
                if std::thread::panicking() {
                    self.0.store(true, Ordering::Relaxed);
                }
            }
        }
        let (next, stop) = (AtomicUsize::new(0), AtomicBool::new(false));
        let worker = || {
            let _stop = StopOnPanic(&stop);
            let mut sink = Sink::default();
            // The threads share the one memo's budget, so that the memos'
            // total does not grow with the number of cores.
            let mut memo = TextMemo::with_budget(crate::rules::memo::MAX_BYTES / threads);
            let mut norm = Normalized::default();
            let mut done = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(scope) = scopes.get(i) else {
                    break;
                };
                self.check_server(scope, &mut sink, &mut memo, &mut norm);
                done.push((i, std::mem::take(&mut sink.findings)));
            }
            done
        };
        if threads == 1 {
            // In order already, and with the whole budget.
            return worker().into_iter().map(|(_, f)| f).collect();
        }
        let mut done: Vec<(usize, Vec<Finding>)> = std::thread::scope(|s| {
            // A thread the system refuses is not started: the others take
            // its servers.
            let others: Vec<_> = (1..threads)
                .filter_map(|_| {
                    std::thread::Builder::new()
                        .stack_size(WORKER_STACK)
                        .spawn_scoped(s, worker)
                        .ok()
                })
                .collect();
            let mut all = worker();
            for h in others {
                // A panic in a rule is a bug; carry it to the caller as a
                // single thread would.
                match h.join() {
                    Ok(d) => all.extend(d),
                    Err(e) => std::panic::resume_unwind(e),
                }
            }
            all
        });
        done.sort_unstable_by_key(|(i, _)| *i);
        done.into_iter().map(|(_, f)| f).collect()
    }

    fn check_agent(&self, servers: &[Scope<'_>], sink: &mut Sink) {
        sink.set_subject(Subject::Server, None);
        for r in &self.rules {
            if self.enabled(&r.meta().id) {
                r.check_agent(servers, sink);
            }
        }
    }

    /// Runs the text rules (declarative and code) over one field, then over
    /// the text decoded from its base64 and hex blobs
    /// ([`crate::rules::decoded`]), reported at the blob's bytes.
    /// `norm` is scratch space, reused from field to field.
    /// A text already checked in the same context gets the findings it got
    /// then ([`crate::rules::memo`]).
    fn check_field(
        &self,
        scope: &Scope<'_>,
        field: &Field<'_>,
        tool: Option<&str>,
        norm: &mut Normalized,
        sink: &mut Sink,
        memo: &mut TextMemo,
    ) {
        if !self.memo || !self.contexts_known {
            self.check_field_afresh(scope, field, tool, norm, sink);
            return;
        }
        // The key: the text, whether it is a key, and what the rules read of
        // its path. A user rule's `applies_to` and `tools` globs are not part
        // of it: a text whose check asked such a rule is not kept (below).
        let ctx = memo.context();
        ctx.push(u32::from(field.is_key));
        ctx.extend(self.path_contexts.iter().map(|f| f(field.path)));
        let slot = match memo.get(&field.text) {
            Ok(found) => return sink.replay(scope, field.node, found),
            Err(slot) => slot,
        };
        if !memo.has_room(field.text.len()) {
            self.check_field_afresh(scope, field, tool, norm, sink);
            return;
        }
        sink.start_recording();
        let read_path = self.check_field_afresh(scope, field, tool, norm, sink);
        let found = sink.take_recorded(field.node);
        // Findings that depend on the field's path or tool (a rule with globs
        // was asked about it) are not reused: the text is checked afresh
        // wherever it appears. Matching every field's path against the globs
        // to key on their answers made a check about a third slower even for
        // texts that no such rule reads.
        if let (false, Some(found)) = (read_path, found) {
            memo.insert(slot, &field.text, found);
        }
    }

    /// [`Engine::check_field`] without the memo. Returns true if a rule with
    /// globs was asked whether it takes the field in (see
    /// [`PatternSet::check`]).
    fn check_field_afresh(
        &self,
        scope: &Scope<'_>,
        field: &Field<'_>,
        tool: Option<&str>,
        norm: &mut Normalized,
        sink: &mut Sink,
    ) -> bool {
        let mut read_path = self.check_text_rules(scope, field, tool, norm, sink);
        // Still the field's own normalisation: blobs need a long enough run.
        if norm.blob_run < crate::rules::decoded::B64_MIN.min(2 * crate::rules::decoded::HEX_MIN) {
            return read_path;
        }
        for d in crate::rules::decoded::nested_with_runs(&field.text, norm.blob_run, norm.hex_run) {
            let inner = Field {
                node: field.node,
                path: field.path,
                text: Cow::Owned(d.text.clone()),
                is_key: false,
            };
            sink.within = Some(crate::rules::decoded::Within {
                node: field.node,
                decoded: d,
            });
            read_path |= self.check_text_rules(scope, &inner, tool, norm, sink);
            sink.within = None;
        }
        read_path
    }

    /// The text rules over one text; true if a rule with globs was asked
    /// whether it takes the field in.
    fn check_text_rules(
        &self,
        scope: &Scope<'_>,
        field: &Field<'_>,
        tool: Option<&str>,
        norm: &mut Normalized,
        sink: &mut Sink,
    ) -> bool {
        // Plain ASCII text's runs are counted in the pattern prefilter's loop
        // over it (a separate pass cost more than the loop itself).
        let mut runs = normalize_text_into(&field.text, norm).then(RunCounter::default);
        let read_path = self.patterns.check(
            scope,
            field,
            norm,
            runs.as_mut(),
            tool,
            &|id| self.enabled(id),
            sink,
        );
        if let Some(r) = runs {
            norm.set_runs(r.finish());
        }
        let norm = &*norm;
        for &i in &self.text_rules {
            self.rules[i].check_text(scope, field, norm, sink);
        }
        read_path
    }

    fn post_subject(&self, scope: &Scope<'_>, from: usize, sink: &mut Sink) {
        let found: Vec<Finding> = sink.findings[from..]
            .iter()
            .filter(|f| self.enabled(&f.rule))
            .cloned()
            .collect();
        if found.is_empty() {
            return;
        }
        for r in &self.rules {
            if self.enabled(&r.meta().id) {
                r.check_findings(scope, self, &found, sink);
            }
        }
    }

    /// Runs every rule over one server. `norm` is the worker's scratch
    /// space for normalised text, reused from server to server (its buffers
    /// grow to the longest text once, not once a server).
    fn check_server(
        &self,
        scope: &Scope<'_>,
        sink: &mut Sink,
        memo: &mut TextMemo,
        norm: &mut Normalized,
    ) {
        let doc = scope.doc;
        let server = scope.server;
        if doc.node_count() == 0 {
            return;
        }
        // The enabled rules, looked up once rather than per tool and schema.
        let enabled: Vec<&dyn Rule> = self
            .rules
            .iter()
            .filter(|r| self.enabled(&r.meta().id))
            .map(|r| &**r)
            .collect();
        let schema_rules: Vec<&dyn Rule> = enabled
            .iter()
            .copied()
            .filter(|r| r.levels().schema)
            .collect();
        sink.set_subject(Subject::Server, None);
        let from = sink.findings.len();
        for r in &enabled {
            r.check_server(scope, sink);
        }
        // One path buffer for the whole server.
        let mut path = String::new();
        let tool_name: Option<&str> = None;
        let mut check = |f: &Field<'_>| self.check_field(scope, f, tool_name, norm, sink, memo);
        if let Some(n) = server.instructions {
            path.push_str("instructions");
            walk_fields(doc, n, &mut path, "instructions", &mut check);
        }
        if let Some(info) = server.server_info {
            for key in ["description", "title"] {
                if let Some(n) = doc.get(info, key) {
                    path.clear();
                    path.push_str("serverInfo/");
                    path.push_str(key);
                    walk_fields(doc, n, &mut path, key, &mut check);
                }
            }
        }
        self.post_subject(scope, from, sink);

        for tool in &server.tools {
            sink.set_subject(Subject::Tool, Some(tool.name.clone()));
            let from = sink.findings.len();
            for r in &enabled {
                r.check_tool(scope, tool, sink);
            }
            path.clear();
            path.push_str("tools/");
            path.push_str(&seg(&tool.name));
            let base = path.len();
            for n in [tool.input_schema, tool.output_schema] {
                if let (Some(n), false) = (n, schema_rules.is_empty()) {
                    walk_schemas(
                        doc,
                        n,
                        &mut |n| {
                            for r in &schema_rules {
                                r.check_schema(scope, tool, n, sink);
                            }
                        },
                        0,
                    );
                }
            }
            path.truncate(base);
            if let Some(members) = doc.members(tool.node) {
                let mut check =
                    |f: &Field<'_>| self.check_field(scope, f, Some(&tool.name), norm, sink, memo);
                for (k, v) in members {
                    let key = doc.str(k).unwrap_or_default();
                    // Icons are fetched by clients, not read by the model.
                    if key == "icons" {
                        continue;
                    }
                    path.push('/');
                    path.push_str(&seg(&key));
                    walk_fields(doc, v, &mut path, &key, &mut check);
                    path.truncate(base);
                }
            }
            self.post_subject(scope, from, sink);
        }
        for (kind, list) in [("prompts", &server.prompts)] {
            for p in list.iter() {
                sink.set_subject(Subject::Prompt, Some(p.name.clone()));
                let from = sink.findings.len();
                path.clear();
                path.push_str(kind);
                path.push('/');
                path.push_str(&seg(&p.name));
                walk_fields(doc, p.node, &mut path, "", &mut |f| {
                    self.check_field(scope, f, None, norm, sink, memo)
                });
                self.post_subject(scope, from, sink);
            }
        }
        for (kind, list) in [
            ("resources", &server.resources),
            ("resourceTemplates", &server.resource_templates),
        ] {
            for r in list.iter() {
                sink.set_subject(Subject::Resource, Some(r.name.clone()));
                let from = sink.findings.len();
                path.clear();
                path.push_str(kind);
                path.push('/');
                path.push_str(&seg(&r.name));
                walk_fields(doc, r.node, &mut path, "", &mut |f| {
                    // A resource's URI is an address, not prose.
                    if !f.path.ends_with("/uri") && !f.path.ends_with("/uriTemplate") {
                        self.check_field(scope, f, None, norm, sink, memo)
                    }
                });
                self.post_subject(scope, from, sink);
            }
        }
    }
}

/// Every server of `inputs`, in order, as the rules see it.
fn scopes_of(inputs: &[Loaded]) -> Vec<Scope<'_>> {
    inputs
        .iter()
        .flat_map(|loaded| {
            loaded.servers.iter().map(move |server| Scope {
                loaded,
                doc: &loaded.doc,
                server,
            })
        })
        .collect()
}

/// The distinct tags of `findings`' rules, as known to `engine`.
pub fn tags_of<'e>(engine: &'e Engine, findings: &[Finding]) -> BTreeMap<&'e str, Vec<usize>> {
    let mut m: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, f) in findings.iter().enumerate() {
        if let Some(meta) = engine.meta(&f.rule) {
            let set: BTreeSet<&str> = meta.tags.iter().map(|s| s.as_str()).collect();
            for t in set {
                m.entry(t).or_default().push(i);
            }
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each server's findings come back in input order, as one thread gives
    /// them, whatever the number of threads (`tests/threads.rs` compares
    /// whole checks, whose final sort hides most misplacements).
    #[test]
    fn servers_findings_keep_their_order_on_threads() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let files: Vec<String> = ["corpus", "tests/fixtures/approval"]
            .iter()
            .flat_map(|d| std::fs::read_dir(dir.join(d)).expect("fixtures"))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .map(|p| p.display().to_string())
            .collect();
        let loaded = crate::manifest::load::load_all(&files, &Default::default()).expect("loads");
        let scopes = scopes_of(&loaded);
        let mut engine = crate::rules::build_engine(&[], true).expect("rules compile");
        let one = engine.check_servers(&scopes);
        assert_eq!(one.len(), scopes.len());
        assert!(one.iter().filter(|f| !f.is_empty()).count() >= 5);
        for threads in [2, 5] {
            engine.set_threads(threads);
            assert!(engine.check_servers(&scopes) == one, "{threads} threads");
        }
    }

    /// The schema walk visits the schemas a plain walk by decoded key names
    /// visits, in the same order, each with the keywords `Document::get`
    /// finds (escaped and duplicated keys included).
    #[test]
    fn schema_walk_matches_plain_lookups() {
        // Keywords whose value is a schema, or (some drafts) an array of them.
        const ONE_OR_MANY: &[&str] = &[
            "items",
            "additionalProperties",
            "not",
            "if",
            "then",
            "else",
            "contains",
            "propertyNames",
            "unevaluatedProperties",
            "additionalItems",
        ];
        fn plain(doc: &Document, node: NodeId, out: &mut Vec<NodeId>, depth: usize) {
            if doc.kind(node) != Kind::Object || depth > 64 {
                return;
            }
            out.push(node);
            for (k, v) in doc.members(node).into_iter().flatten() {
                let key = doc.str(k).unwrap_or_default();
                let schemas: Vec<NodeId> = match key.as_ref() {
                    "properties" | "patternProperties" | "$defs" | "definitions"
                    | "dependentSchemas" => doc
                        .members(v)
                        .into_iter()
                        .flatten()
                        .map(|(_, s)| s)
                        .collect(),
                    k if ONE_OR_MANY.contains(&k) && doc.kind(v) == Kind::Object => vec![v],
                    k if ONE_OR_MANY.contains(&k)
                        || matches!(k, "anyOf" | "oneOf" | "allOf" | "prefixItems") =>
                    {
                        doc.array(v).unwrap_or_default().to_vec()
                    }
                    _ => Vec::new(),
                };
                for s in schemas {
                    plain(doc, s, out, depth + 1);
                }
            }
        }
        let text = r#"{"type": "object", "required": ["a"], "properties": {
            "a": {"type": "string", "required": "x", "required": ["b"]},
            "b": {"items": [{"required": ["c"]}, {"properties": {}}], "anyOf": [{}, 3]},
            "c": {"properties": {"d": {"not": {"if": {}}}}, "patternProperties": {}},
            "d": {"$defs": {"e": {}}, "definitions": {"f": {"then": {}, "else": {}}}},
            "g": {"dependentSchemas": {"h": {"contains": {}}}, "properties": 1},
            "i": {"additionalProperties": {"propertyNames": {}}, "required": []},
            "j": {"unevaluatedProperties": {}, "additionalItems": [{}], "prefixItems": [{}]},
            "k": {"oneOf": [{"allOf": [{"items": {}}]}], "required": ["z"]}
        }}"#;
        let doc = Document::parse(text.as_bytes().to_vec(), &Default::default()).expect("parses");
        let mut want = Vec::new();
        plain(&doc, doc.root(), &mut want, 0);
        let mut got = Vec::new();
        walk_schemas(
            &doc,
            doc.root(),
            &mut |s| {
                assert_eq!(s.required, doc.get(s.node, "required"));
                assert_eq!(s.properties, doc.get(s.node, "properties"));
                assert_eq!(s.pattern_properties, doc.get(s.node, "patternProperties"));
                got.push(s.node);
            },
            0,
        );
        assert_eq!(got, want);
        assert!(got.len() > 20, "{}", got.len());
    }

    /// The forward cursor gives the same lines and columns as a full index, in
    /// order, out of order, inside multi-byte characters and past the end.
    #[test]
    fn lines_agree_with_line_index() {
        let text = "ab\ncdé\n\nfgh — ij\nk";
        let idx = LineIndex::new(text);
        let mut lines = Lines::new();
        let offsets = [0, 1, 3, 5, 6, 9, 13, 14, 20, 2, 0, 7, 99, 8, 7, 4, 18];
        for o in offsets {
            assert_eq!(lines.line_col(text, o), idx.line_col(text, o), "offset {o}");
        }
        assert!(lines.index.is_none(), "few moves need no full index");
        // Many jumps back and forth end in the full index, with the same answers.
        let mut o = 0usize;
        for _ in 0..200 {
            o = (o * 7 + 11) % (text.len() + 3);
            assert_eq!(lines.line_col(text, o), idx.line_col(text, o), "offset {o}");
        }
        assert!(lines.index.is_some());
    }
}
