//! A strict, span-keeping JSON parser.
//!
//! Manifests are hostile input, and every finding must point at the exact bytes it
//! is about, so mcplint does not parse JSON with `serde_json`: it keeps a compact
//! tree in which every value knows its byte range in the source, duplicate object
//! keys are kept (and reported: one reader shows the first `description`, another
//! the last), numbers keep their raw text (the fingerprint schemes format numbers
//! differently and need the original digits), and strings are decoded lazily.
//!
//! The parser is strict RFC 8259 JSON (no comments, no trailing commas, no `NaN`,
//! no byte-order mark) unless [`ParseOptions::jsonc`] is set, which the loaders use
//! only for client configs that are JSONC by definition (VS Code's `mcp.json`).
//! It never recurses deeper than [`ParseOptions::max_depth`], so a deeply nested
//! file is an error, not a stack overflow.
//!
//! Node ids are assigned in pre-order: a container comes before its children and
//! its whole subtree occupies a contiguous id range. Each node records where its
//! subtree ends, so a container's children are reached by skipping from one to
//! the next ([`Document::children`], [`Document::members`]) and the tree needs no
//! child lists: for a 100 MB manifest that is 18 MB less to write while parsing,
//! and less for the fingerprint to fetch. Callers that want a container's
//! children as a slice ([`Document::array`], [`Document::entries`]) get lists
//! built once, on first use.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;

/// Index of a node in a [`Document`].
pub type NodeId = u32;

/// A byte range in the source text, `start..end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Span {
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
}

impl Span {
    /// A span from `start` to `end`.
    pub fn new(start: usize, end: usize) -> Self {
        Span { start, end }
    }
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.end - self.start
    }
    /// True if the span covers no byte.
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }
    /// As a `Range<usize>`.
    pub fn range(&self) -> Range<usize> {
        self.start..self.end
    }
}

impl From<Span> for miette::SourceSpan {
    fn from(s: Span) -> Self {
        (s.start, s.len()).into()
    }
}

/// The kind of a JSON value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// `null`
    Null,
    /// `true` or `false`
    Bool,
    /// A number; its raw text is kept.
    Number,
    /// A string.
    String,
    /// An array.
    Array,
    /// An object (members in source order, duplicates kept).
    Object,
}

impl Kind {
    /// The JSON name of the kind, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Null => "null",
            Kind::Bool => "a boolean",
            Kind::Number => "a number",
            Kind::String => "a string",
            Kind::Array => "an array",
            Kind::Object => "an object",
        }
    }
}

/// Flag: a string contains at least one backslash escape.
const F_ESCAPED: u8 = 1;
/// Flag: a boolean is true.
const F_TRUE: u8 = 2;
/// Flag: a string contains an escaped lone surrogate (`\ud800` without its pair),
/// which Rust strings cannot hold; [`Document::str`] shows it as U+FFFD.
const F_LONE_SURROGATE: u8 = 4;

/// One value's record: 16 bytes, so four share a cache line.
///
/// A large manifest has millions of nodes, and the fingerprint reads them in
/// name order, not file order: their size is what the walk waits on. So the
/// kind, the flags and a container's entry count share one word.
#[derive(Clone, Copy, Debug)]
struct Node {
    start: u32,
    end: u32,
    /// The id one past the node's subtree (its own id plus one for a
    /// scalar): the next sibling's id, when there is one.
    next: u32,
    /// Bits 0-2 the kind, 3-5 the flags, 6-31 (containers) the number of
    /// entries (children; an object's keys and values both count, so twice
    /// its member count).
    meta: u32,
}

/// Most entries one array or object may have (an object's members count
/// twice): what fits in a node's record, 67,108,863. A manifest near it
/// would be gigabytes of tools.
pub const MAX_ENTRIES: usize = (1 << 26) - 1;

impl Node {
    #[inline]
    fn kind(&self) -> Kind {
        match self.meta & 7 {
            0 => Kind::Null,
            1 => Kind::Bool,
            2 => Kind::Number,
            3 => Kind::String,
            4 => Kind::Array,
            _ => Kind::Object,
        }
    }
    #[inline]
    fn flags(&self) -> u8 {
        ((self.meta >> 3) & 7) as u8
    }
    #[inline]
    fn set_flags(&mut self, flags: u8) {
        self.meta = (self.meta & !(7 << 3)) | (u32::from(flags & 7) << 3);
    }
    /// Containers: the number of entries.
    #[inline]
    fn len(&self) -> u32 {
        self.meta >> 6
    }
    #[inline]
    fn set_len(&mut self, len: u32) {
        self.meta = (self.meta & 63) | (len << 6);
    }
}

/// Where a subtree's data sits in a [`Document`], from
/// [`Document::footprint`], for [`Document::warm`]: byte range of its text,
/// and index range of its node records.
#[derive(Clone, Copy, Debug, Default)]
pub struct Footprint {
    text: (u32, u32),
    nodes: (u32, u32),
}

/// Limits and leniency for [`Document::parse`].
#[derive(Clone, Debug)]
pub struct ParseOptions {
    /// Deepest nesting of arrays and objects accepted.
    pub max_depth: usize,
    /// Largest input accepted, in bytes.
    pub max_size: usize,
    /// Accept `//` and `/* */` comments and trailing commas (JSONC).
    pub jsonc: bool,
    /// Most entries in one array or object (an object's members count
    /// twice); at most, and by default, [`MAX_ENTRIES`].
    pub max_entries: usize,
}

/// Default nesting limit: real manifests nest schemas a dozen levels deep at most.
pub const DEFAULT_MAX_DEPTH: usize = 128;
/// Default size limit: 256 MiB, four times the largest tool list seen in the wild.
pub const DEFAULT_MAX_SIZE: usize = 256 * 1024 * 1024;

impl Default for ParseOptions {
    fn default() -> Self {
        ParseOptions {
            max_depth: DEFAULT_MAX_DEPTH,
            max_size: DEFAULT_MAX_SIZE,
            jsonc: false,
            max_entries: MAX_ENTRIES,
        }
    }
}

/// What went wrong while parsing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The bytes are not UTF-8.
    InvalidUtf8,
    /// A NUL byte outside any string.
    NulByte,
    /// A UTF-8 byte-order mark at the start.
    ByteOrderMark,
    /// A raw control character (U+0000..U+001F) inside a string.
    ControlInString(u8),
    /// A backslash escape that JSON does not define.
    BadEscape,
    /// A `\u` escape without four hex digits.
    BadUnicodeEscape,
    /// A number that does not follow JSON's grammar.
    BadNumber,
    /// Something unexpected, with what was expected.
    Unexpected(&'static str),
    /// The input ended inside a value.
    UnexpectedEof(&'static str),
    /// Something after the top-level value.
    TrailingGarbage,
    /// Nesting deeper than the limit.
    TooDeep(usize),
    /// An array or object with more entries than the limit (an object's
    /// members count twice).
    TooManyEntries(usize),
    /// Input larger than the limit.
    TooLarge {
        /// Actual size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// An empty file.
    Empty,
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::InvalidUtf8 => write!(f, "invalid UTF-8"),
            ErrorKind::NulByte => write!(f, "NUL byte in JSON text"),
            ErrorKind::ByteOrderMark => write!(
                f,
                "byte-order mark at the start of the file (JSON must not have one)"
            ),
            ErrorKind::ControlInString(b) => write!(
                f,
                "unescaped control character U+{b:04X} inside a string (must be written as \\u{b:04x})"
            ),
            ErrorKind::BadEscape => write!(f, "invalid escape sequence in a string"),
            ErrorKind::BadUnicodeEscape => write!(f, "\\u escape needs four hex digits"),
            ErrorKind::BadNumber => write!(f, "invalid number"),
            ErrorKind::Unexpected(what) => write!(f, "unexpected character, expected {what}"),
            ErrorKind::UnexpectedEof(what) => write!(f, "unexpected end of input, expected {what}"),
            ErrorKind::TrailingGarbage => write!(f, "unexpected data after the JSON value"),
            ErrorKind::TooDeep(limit) => write!(f, "nesting deeper than {limit} levels"),
            ErrorKind::TooManyEntries(limit) => write!(
                f,
                "array or object with more than {limit} entries (object members count twice)"
            ),
            ErrorKind::TooLarge { size, limit } => {
                write!(f, "input is {size} bytes, over the {limit}-byte limit")
            }
            ErrorKind::Empty => write!(f, "empty input, expected a JSON value"),
        }
    }
}

/// A parse error with the byte range it is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// What went wrong.
    pub kind: ErrorKind,
    /// Where.
    pub span: Span,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.kind.fmt(f)
    }
}

impl std::error::Error for ParseError {}

/// A duplicated object key: `first` and `second` are the key nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DuplicateKey {
    /// The object holding both.
    pub object: NodeId,
    /// The earlier key.
    pub first: NodeId,
    /// The later key (the one JavaScript and Python keep).
    pub second: NodeId,
}

/// A parsed JSON text: the source and a compact tree with byte spans.
#[derive(Clone)]
pub struct Document {
    text: String,
    nodes: Vec<Node>,
    duplicates: Vec<DuplicateKey>,
    /// Every container's children as a slice, built on first use.
    lists: std::sync::OnceLock<Lists>,
}

/// Child lists of all containers, for the slice accessors.
#[derive(Clone, Debug)]
struct Lists {
    /// Per node: where its children start in `children` (containers only).
    first: Vec<u32>,
    /// The children of each container in turn, in pre-order of containers.
    children: Vec<NodeId>,
}

impl fmt::Debug for Document {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Document")
            .field("bytes", &self.text.len())
            .field("nodes", &self.nodes.len())
            .finish()
    }
}

/// Entry in a string's map from decoded to raw offsets.
///
/// Each escape, and each run of plain text, is one segment.
#[derive(Clone, Copy, Debug)]
struct Segment {
    decoded: usize,
    raw: usize,
    /// Decoded length of this segment.
    decoded_len: usize,
    /// Raw length of this segment.
    raw_len: usize,
    /// True for a run of unescaped text (so offsets map one to one inside it).
    plain: bool,
}

impl Document {
    /// Parses `bytes` as JSON.
    pub fn parse(bytes: Vec<u8>, opts: &ParseOptions) -> Result<Document, ParseError> {
        Self::parse_keep(bytes, opts).map_err(|(e, _)| e)
    }

    /// Parses `bytes` as JSON; on failure the bytes come back with the error, so
    /// the caller can show the source without keeping a second copy.
    pub fn parse_keep(
        bytes: Vec<u8>,
        opts: &ParseOptions,
    ) -> Result<Document, (ParseError, Vec<u8>)> {
        let limit = opts.max_size.min(u32::MAX as usize - 1);
        if bytes.len() > limit {
            let e = ParseError {
                kind: ErrorKind::TooLarge {
                    size: bytes.len(),
                    limit,
                },
                span: Span::new(0, 0),
            };
            return Err((e, bytes));
        }
        let text = match String::from_utf8(bytes) {
            Ok(t) => t,
            Err(e) => {
                let at = e.utf8_error().valid_up_to();
                let len = e.utf8_error().error_len().unwrap_or(1);
                let err = ParseError {
                    kind: ErrorKind::InvalidUtf8,
                    span: Span::new(at, at + len),
                };
                return Err((err, e.into_bytes()));
            }
        };
        Self::parse_string(text, opts).map_err(|(e, t)| (e, t.into_bytes()))
    }

    /// Parses a string; on failure the string comes back with the error.
    pub fn parse_string(
        text: String,
        opts: &ParseOptions,
    ) -> Result<Document, (ParseError, String)> {
        match Self::build(&text, opts) {
            Ok((nodes, duplicates)) => Ok(Document {
                text,
                nodes,
                duplicates,
                lists: std::sync::OnceLock::new(),
            }),
            Err(e) => Err((e, text)),
        }
    }

    fn build(
        text: &str,
        opts: &ParseOptions,
    ) -> Result<(Vec<Node>, Vec<DuplicateKey>), ParseError> {
        let limit = opts.max_size.min(u32::MAX as usize - 1);
        if text.len() > limit {
            return Err(ParseError {
                kind: ErrorKind::TooLarge {
                    size: text.len(),
                    limit,
                },
                span: Span::new(0, 0),
            });
        }
        if text.starts_with('\u{feff}') {
            return Err(ParseError {
                kind: ErrorKind::ByteOrderMark,
                span: Span::new(0, 3),
            });
        }
        let mut p = Parser {
            src: text.as_bytes(),
            pos: 0,
            opts,
            nodes: Vec::with_capacity(text.len() / 24 + 4),
            keys: Vec::new(),
            duplicates: Vec::new(),
            depth: 0,
        };
        p.skip_ws()?;
        if p.pos >= p.src.len() {
            return Err(ParseError {
                kind: ErrorKind::Empty,
                span: Span::new(0, 0),
            });
        }
        p.value()?;
        p.skip_ws()?;
        if p.pos < p.src.len() {
            let kind = if p.src[p.pos] == 0 {
                ErrorKind::NulByte
            } else {
                ErrorKind::TrailingGarbage
            };
            return Err(ParseError {
                kind,
                span: Span::new(p.pos, p.src.len().min(p.pos + char_len(p.src, p.pos))),
            });
        }
        p.nodes.shrink_to_fit();
        Ok((p.nodes, p.duplicates))
    }

    /// The source text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The root value.
    pub fn root(&self) -> NodeId {
        0
    }

    /// Number of nodes (values and object keys).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Duplicate keys found while parsing.
    pub fn duplicates(&self) -> &[DuplicateKey] {
        &self.duplicates
    }

    fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id as usize]
    }

    /// The kind of a node.
    pub fn kind(&self, id: NodeId) -> Kind {
        self.node(id).kind()
    }

    /// The byte range of a node's raw text (strings include their quotes).
    pub fn span(&self, id: NodeId) -> Span {
        let n = self.node(id);
        Span::new(n.start as usize, n.end as usize)
    }

    /// The raw source text of a node.
    pub fn raw(&self, id: NodeId) -> &str {
        &self.text[self.span(id).range()]
    }

    /// The value of a boolean node.
    pub fn as_bool(&self, id: NodeId) -> Option<bool> {
        let n = self.node(id);
        (n.kind() == Kind::Bool).then_some(n.flags() & F_TRUE != 0)
    }

    /// The raw text of a number node.
    pub fn number_raw(&self, id: NodeId) -> Option<&str> {
        (self.kind(id) == Kind::Number).then(|| self.raw(id))
    }

    /// True if a string node contains a backslash escape.
    #[inline]
    pub fn is_escaped(&self, id: NodeId) -> bool {
        self.node(id).flags() & F_ESCAPED != 0
    }

    /// True if a string node contains an escaped lone surrogate.
    pub fn has_lone_surrogate(&self, id: NodeId) -> bool {
        self.node(id).flags() & F_LONE_SURROGATE != 0
    }

    /// The raw bytes between the quotes of a string node without escapes,
    /// which are its decoded text; `None` for any other node. One read of
    /// the node's record, for hot loops such as the fingerprint writer.
    #[inline]
    pub fn unescaped_bytes(&self, id: NodeId) -> Option<&[u8]> {
        let n = self.node(id);
        // The kind and the escape flag in one comparison.
        let mask = 7 | u32::from(F_ESCAPED) << 3;
        (n.meta & mask == Kind::String as u32)
            .then(|| &self.text.as_bytes()[n.start as usize + 1..n.end as usize - 1])
    }

    /// The raw text between a string node's quotes.
    #[inline]
    pub fn str_raw(&self, id: NodeId) -> Option<&str> {
        let n = self.node(id);
        (n.kind() == Kind::String).then(|| &self.text[n.start as usize + 1..n.end as usize - 1])
    }

    /// The decoded value of a string node (lone surrogates become U+FFFD).
    ///
    /// Inlined: the rule engine asks it of every key and string it walks,
    /// and most have no escape, so the answer is one read of the node's
    /// record and a borrow (the call cost as much again).
    #[inline]
    pub fn str(&self, id: NodeId) -> Option<Cow<'_, str>> {
        let raw = self.str_raw(id)?;
        Some(if self.is_escaped(id) {
            Cow::Owned(decode(raw))
        } else {
            Cow::Borrowed(raw)
        })
    }

    /// The decoded bytes of a string node, borrowed unless it has escapes;
    /// empty for any other node. For matching a key against keywords with a
    /// `match` on byte strings, which compiles to a branch on the length and
    /// then on the bytes rather than one comparison a keyword.
    #[inline]
    pub fn str_bytes(&self, id: NodeId) -> Cow<'_, [u8]> {
        match self.unescaped_bytes(id) {
            Some(b) => Cow::Borrowed(b),
            None => match self.str(id) {
                Some(s) => Cow::Owned(s.into_owned().into_bytes()),
                None => Cow::Borrowed(&[]),
            },
        }
    }

    /// Whether a string node's decoded text is empty or white space only
    /// (`str::trim`); None for any other node. Most texts answer from
    /// their first character, without decoding a copy of, say, a whole
    /// tool description: a first character that is neither white space nor
    /// an escape's backslash is the decoded text's first character too.
    pub fn str_is_blank(&self, id: NodeId) -> Option<bool> {
        let raw = self.str_raw(id)?;
        match raw.chars().next() {
            None => Some(true),
            Some(c) if c != '\\' && !c.is_whitespace() => Some(false),
            _ => self.str(id).map(|s| s.trim().is_empty()),
        }
    }

    /// Whether two string nodes decode to the same text (false when either
    /// is not a string): the raw bytes compared when neither has an escape,
    /// nothing decoded.
    pub fn same_str(&self, a: NodeId, b: NodeId) -> bool {
        match (self.unescaped_bytes(a), self.unescaped_bytes(b)) {
            (Some(x), Some(y)) => x == y,
            _ => match (self.str(a), self.str(b)) {
                (Some(x), Some(y)) => x == y,
                _ => false,
            },
        }
    }

    /// The elements of an array node, as a slice. The first call on a
    /// document builds the child lists of all its containers (four bytes per
    /// node, twice); [`Document::children`] walks one without them.
    pub fn array(&self, id: NodeId) -> Option<&[NodeId]> {
        (self.node(id).kind() == Kind::Array).then(|| self.entries(id))
    }

    /// The children of a container as a slice: an array's elements, or an
    /// object's keys and values alternating (`[k0, v0, k1, v1, …]`, source
    /// order, duplicates included); empty for anything else. Built on first
    /// use like [`Document::array`]'s.
    pub fn entries(&self, id: NodeId) -> &[NodeId] {
        let n = self.node(id);
        if !matches!(n.kind(), Kind::Array | Kind::Object) {
            return &[];
        }
        let lists = self.lists.get_or_init(|| self.build_lists());
        let first = lists.first[id as usize] as usize;
        &lists.children[first..first + n.len() as usize]
    }

    fn build_lists(&self) -> Lists {
        let mut first = vec![0u32; self.nodes.len()];
        let mut children = Vec::new();
        for (id, n) in self.nodes.iter().enumerate() {
            if matches!(n.kind(), Kind::Array | Kind::Object) {
                first[id] = children.len() as u32;
                children.extend(self.children(id as NodeId));
            }
        }
        Lists { first, children }
    }

    /// The children of a container, in source order: an array's elements,
    /// or an object's keys and values alternating (`k0, v0, k1, v1, …`,
    /// duplicates included); nothing for anything else. Reached by skipping
    /// each child's subtree, with no child list: the cheapest walk over a
    /// container, for hot loops such as the loaders and the fingerprint.
    pub fn children(&self, id: NodeId) -> Children<'_> {
        let n = self.node(id);
        let len = match n.kind() {
            Kind::Array | Kind::Object => n.len(),
            _ => 0,
        };
        Children {
            nodes: &self.nodes,
            next: id + 1,
            left: len,
        }
    }

    /// Where the data of node `id`'s subtree sits, for [`Document::warm`]: its
    /// raw text and its node records (pre-order keeps them together).
    pub fn footprint(&self, id: NodeId) -> Footprint {
        let Some(n) = self.nodes.get(id as usize) else {
            return Footprint::default();
        };
        Footprint {
            text: (n.start, n.end),
            nodes: (id, n.next),
        }
    }

    /// Reads one word from each cache line of a [`Footprint`]. The result
    /// means nothing; pass it to [`std::hint::black_box`].
    ///
    /// A large file does not fit in the CPU caches, and a walk that jumps
    /// between subtrees (the fingerprint visits tools in name order) stalls on
    /// one memory read after another. Warming a subtree a few steps before
    /// walking it, with every address known up front, lets those reads
    /// overlap. Only speed depends on it.
    pub fn warm(&self, f: &Footprint) -> u64 {
        let mut acc = 0u64;
        let text = self.text.as_bytes();
        let span = text
            .get(f.text.0 as usize..f.text.1 as usize)
            .unwrap_or_default();
        for &b in span.iter().step_by(64) {
            acc = acc.wrapping_add(b as u64);
        }
        let step = (64 / std::mem::size_of::<Node>()).max(1);
        let nodes = self
            .nodes
            .get(f.nodes.0 as usize..f.nodes.1 as usize)
            .unwrap_or_default();
        for node in nodes.iter().step_by(step) {
            acc = acc.wrapping_add(node.start as u64);
        }
        acc
    }

    /// Reads the first byte of a [`Footprint`]'s text and its first node
    /// record, for a caller that touches many subtrees in one tight loop so
    /// that their first memory reads (and page-table walks) overlap, before
    /// [`Document::warm`] fetches the rest. The result means nothing; pass
    /// it to [`std::hint::black_box`].
    #[inline]
    pub fn touch(&self, f: &Footprint) -> u64 {
        let t = self
            .text
            .as_bytes()
            .get(f.text.0 as usize)
            .copied()
            .unwrap_or(0) as u64;
        let n = self
            .nodes
            .get(f.nodes.0 as usize)
            .map_or(0, |n| n.start as u64);
        t.wrapping_add(n)
    }

    /// The members of an object node as `(key, value)` pairs, in source order,
    /// duplicates included.
    pub fn members(&self, id: NodeId) -> Option<Members<'_>> {
        (self.node(id).kind() == Kind::Object).then(|| Members(self.children(id)))
    }

    /// Number of members of an object (duplicates included) or elements of an array.
    pub fn len(&self, id: NodeId) -> usize {
        let n = self.node(id);
        match n.kind() {
            Kind::Object => n.len() as usize / 2,
            Kind::Array => n.len() as usize,
            _ => 0,
        }
    }

    /// True if a container has no entries (or the node is not a container).
    pub fn is_empty(&self, id: NodeId) -> bool {
        self.len(id) == 0
    }

    /// True if string node `key` decodes to `name`.
    pub fn key_is(&self, key: NodeId, name: &str) -> bool {
        let n = self.node(key);
        if n.kind() != Kind::String {
            return false;
        }
        if n.flags() & F_ESCAPED == 0 {
            // The length comes from the node: a key of another length is
            // ruled out without reading the text (a cache miss in a large file).
            let (start, end) = (n.start as usize + 1, n.end as usize - 1);
            return end - start == name.len()
                && &self.text.as_bytes()[start..end] == name.as_bytes();
        }
        self.str(key).is_some_and(|s| s == name)
    }

    /// The member `name` of an object. With duplicate keys the last one wins, as in
    /// JavaScript's `JSON.parse` and Python's `json.loads`.
    pub fn get(&self, obj: NodeId, name: &str) -> Option<NodeId> {
        self.get_entry(obj, name).map(|(_, v)| v)
    }

    /// The member `name` of an object as `(key, value)`, last duplicate winning.
    pub fn get_entry(&self, obj: NodeId, name: &str) -> Option<(NodeId, NodeId)> {
        let mut found = None;
        for (k, v) in self.members(obj)? {
            if self.key_is(k, name) {
                found = Some((k, v));
            }
        }
        found
    }

    /// The string member `name` of an object, decoded.
    pub fn get_str(&self, obj: NodeId, name: &str) -> Option<Cow<'_, str>> {
        self.get(obj, name).and_then(|v| self.str(v))
    }

    /// Converts the node to a `serde_json::Value` (duplicates: last wins; numbers
    /// that `serde_json` cannot hold exactly become their nearest `f64`).
    pub fn to_value(&self, id: NodeId) -> serde_json::Value {
        use serde_json::Value;
        match self.kind(id) {
            Kind::Null => Value::Null,
            Kind::Bool => Value::Bool(self.as_bool(id).unwrap_or(false)),
            Kind::Number => {
                let raw = self.raw(id);
                serde_json::from_str::<serde_json::Number>(raw)
                    .map(Value::Number)
                    .or_else(|_| {
                        raw.parse::<f64>()
                            .ok()
                            .and_then(serde_json::Number::from_f64)
                            .map(Value::Number)
                            .ok_or(())
                    })
                    .unwrap_or(Value::Null)
            }
            Kind::String => Value::String(self.str(id).unwrap_or_default().into_owned()),
            Kind::Array => Value::Array(self.children(id).map(|c| self.to_value(c)).collect()),
            Kind::Object => {
                let mut map = serde_json::Map::new();
                for (k, v) in self.members(id).into_iter().flatten() {
                    map.insert(
                        self.str(k).unwrap_or_default().into_owned(),
                        self.to_value(v),
                    );
                }
                Value::Object(map)
            }
        }
    }

    /// The last node id inside the subtree rooted at `id` (inclusive).
    fn subtree_end(&self, id: NodeId) -> NodeId {
        self.node(id).next - 1
    }

    /// The RFC 6901 JSON pointer of a node. For an object key, the pointer of
    /// its value. Duplicate keys share a pointer.
    pub fn pointer(&self, target: NodeId) -> String {
        let mut out = String::new();
        let mut cur = self.root();
        while cur != target {
            let n = *self.node(cur);
            let children = self.entries(cur);
            // Children ids ascend; the subtree holding `target` starts at the
            // greatest child id not above it.
            let idx = match children.binary_search(&target) {
                Ok(i) => i,
                Err(0) => return out,
                Err(i) => i - 1,
            };
            match n.kind() {
                Kind::Array => {
                    out.push('/');
                    out.push_str(&idx.to_string());
                    cur = children[idx];
                }
                Kind::Object => {
                    let pair = idx / 2;
                    let key = children[pair * 2];
                    push_pointer_token(&mut out, &self.str(key).unwrap_or_default());
                    if key == target {
                        return out;
                    }
                    cur = children[pair * 2 + 1];
                }
                _ => return out,
            }
            if self.subtree_end(cur) < target && cur != target {
                return out;
            }
        }
        out
    }

    /// Resolves an RFC 6901 JSON pointer (last duplicate key wins).
    pub fn resolve(&self, pointer: &str) -> Option<NodeId> {
        let mut cur = self.root();
        if pointer.is_empty() {
            return Some(cur);
        }
        let rest = pointer.strip_prefix('/')?;
        for tok in rest.split('/') {
            let tok = tok.replace("~1", "/").replace("~0", "~");
            cur = match self.kind(cur) {
                Kind::Object => self.get(cur, &tok)?,
                Kind::Array => self.children(cur).nth(tok.parse::<usize>().ok()?)?,
                _ => return None,
            };
        }
        Some(cur)
    }

    /// Maps a byte range of a string node's decoded text to the raw bytes that
    /// encode it (escapes included whole). Out-of-range offsets are clamped.
    pub fn raw_span_of_decoded(&self, id: NodeId, decoded: Range<usize>) -> Span {
        let n = *self.node(id);
        let base = n.start as usize + 1;
        let Some(raw) = self.str_raw(id) else {
            return self.span(id);
        };
        if n.flags() & F_ESCAPED == 0 {
            let s = decoded.start.min(raw.len());
            let e = decoded.end.clamp(s, raw.len());
            return Span::new(base + s, base + e);
        }
        let segs = segments(raw);
        let map = |off: usize, is_end: bool| -> usize {
            for s in &segs {
                let inside = if is_end {
                    off > s.decoded && off <= s.decoded + s.decoded_len
                } else {
                    off >= s.decoded && off < s.decoded + s.decoded_len
                };
                if inside {
                    return if s.plain {
                        s.raw + (off - s.decoded)
                    } else if is_end {
                        s.raw + s.raw_len
                    } else {
                        s.raw
                    };
                }
            }
            if is_end || off > 0 {
                raw.len()
            } else {
                0
            }
        };
        let start = map(decoded.start, false);
        let end = if decoded.end <= decoded.start {
            start
        } else {
            map(decoded.end, true)
        };
        Span::new(base + start, base + end.max(start))
    }

    /// Maps characters `chars` (counted in Unicode scalar values) of a string
    /// node's decoded text to raw bytes.
    pub fn raw_span_of_chars(&self, id: NodeId, chars: Range<usize>) -> Span {
        let text = self.str(id).unwrap_or_default();
        let byte_at = |c: usize| {
            text.char_indices()
                .nth(c)
                .map(|(b, _)| b)
                .unwrap_or(text.len())
        };
        self.raw_span_of_decoded(id, byte_at(chars.start)..byte_at(chars.end))
    }

    /// 1-based line and column (in characters) of a byte offset.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        line_col(&self.text, offset)
    }
}

/// The children of a container, from [`Document::children`].
#[derive(Clone, Debug)]
pub struct Children<'a> {
    nodes: &'a [Node],
    next: NodeId,
    left: u32,
}

impl Iterator for Children<'_> {
    type Item = NodeId;

    #[inline]
    fn next(&mut self) -> Option<NodeId> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let id = self.next;
        // A parsed document's links are consistent; an id out of range ends
        // the walk rather than panicking.
        match self.nodes.get(id as usize) {
            Some(n) => self.next = n.next,
            None => self.left = 0,
        }
        Some(id)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

impl ExactSizeIterator for Children<'_> {}

/// The members of an object as `(key, value)` pairs, from [`Document::members`].
#[derive(Clone, Debug)]
pub struct Members<'a>(Children<'a>);

impl Iterator for Members<'_> {
    type Item = (NodeId, NodeId);

    #[inline]
    fn next(&mut self) -> Option<(NodeId, NodeId)> {
        let k = self.0.next()?;
        let v = self.0.next()?;
        Some((k, v))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.0.left as usize / 2;
        (n, Some(n))
    }
}

impl ExactSizeIterator for Members<'_> {}

/// 1-based line and column (in characters) of byte `offset` in `text`.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = count_newlines(before.as_bytes()) + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = text[line_start..offset].chars().count() + 1;
    (line, col)
}

/// The number of `\n` bytes in `bytes`.
///
/// Findings' line numbers count the line breaks before them, over much of a
/// file. Written as 32-byte blocks whose matches are summed in a byte, so the
/// compiler turns each block into a few vector instructions; the plain
/// `filter(..).count()` compiled to two bytes a step (1.6% of the rule
/// engine's instructions on the real servers).
pub fn count_newlines(bytes: &[u8]) -> usize {
    let mut blocks = bytes.chunks_exact(32);
    let mut n = 0;
    for block in &mut blocks {
        // At most 32 per block: fits the byte.
        n += usize::from(block.iter().map(|&b| u8::from(b == b'\n')).sum::<u8>());
    }
    n + blocks.remainder().iter().filter(|&&b| b == b'\n').count()
}

fn push_pointer_token(out: &mut String, key: &str) {
    out.push('/');
    for c in key.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
}

/// The decoded text of a string's raw text with escapes (lone surrogates
/// become U+FFFD), for [`Document::str`]. Not inlined: it is the rare path.
#[inline(never)]
fn decode(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    for_each_unit(raw, |u| match u {
        Unit::Text(t) => out.push_str(t),
        Unit::Char(c) => out.push(c),
        Unit::LoneSurrogate(_) => out.push('\u{fffd}'),
    });
    out
}

/// A piece of a string's raw text, for decoders.
#[derive(Debug)]
pub enum Unit<'a> {
    /// A run of text without escapes.
    Text(&'a str),
    /// One escaped character (a surrogate pair is one character).
    Char(char),
    /// An escaped UTF-16 surrogate without its partner.
    LoneSurrogate(u16),
}

/// Walks the raw text between a string's quotes, already validated by the
/// parser, as runs of plain text and decoded escapes. The fingerprint encoders
/// use this so that lone surrogates survive exactly.
pub fn for_each_unit<'a>(raw: &'a str, mut f: impl FnMut(Unit<'a>)) {
    for_each_unit_at(raw, |_, _, u| f(u));
}

/// Like [`for_each_unit`], also giving each unit's raw byte range.
fn for_each_unit_at<'a>(raw: &'a str, mut f: impl FnMut(usize, usize, Unit<'a>)) {
    let b = raw.as_bytes();
    let mut i = 0;
    let mut run = 0;
    while i < b.len() {
        // The next escape, found by `memchr`: descriptions run for hundreds
        // of bytes between escapes.
        match memchr::memchr(b'\\', &b[i..]) {
            Some(at) => i += at,
            None => break,
        }
        if run < i {
            f(run, i, Unit::Text(&raw[run..i]));
        }
        let start = i;
        let esc = b.get(i + 1).copied().unwrap_or(b'\\');
        i += 2;
        let unit = match esc {
            b'"' => Unit::Char('"'),
            b'\\' => Unit::Char('\\'),
            b'/' => Unit::Char('/'),
            b'b' => Unit::Char('\u{8}'),
            b'f' => Unit::Char('\u{c}'),
            b'n' => Unit::Char('\n'),
            b'r' => Unit::Char('\r'),
            b't' => Unit::Char('\t'),
            _ => {
                let hi = hex4(&b[i.min(b.len())..]).unwrap_or(0xfffd);
                i += 4;
                if (0xd800..0xdc00).contains(&hi)
                    && b.get(i) == Some(&b'\\')
                    && b.get(i + 1) == Some(&b'u')
                {
                    match hex4(&b[i + 2..]) {
                        Some(lo) if (0xdc00..0xe000).contains(&lo) => {
                            i += 6;
                            let c = 0x10000 + ((hi as u32 - 0xd800) << 10) + (lo as u32 - 0xdc00);
                            Unit::Char(char::from_u32(c).unwrap_or('\u{fffd}'))
                        }
                        _ => Unit::LoneSurrogate(hi),
                    }
                } else if (0xd800..0xe000).contains(&hi) {
                    Unit::LoneSurrogate(hi)
                } else {
                    Unit::Char(char::from_u32(hi as u32).unwrap_or('\u{fffd}'))
                }
            }
        };
        f(start, i.min(b.len()), unit);
        run = i.min(b.len());
    }
    if run < b.len() {
        f(run, b.len(), Unit::Text(&raw[run..]));
    }
}

fn segments(raw: &str) -> Vec<Segment> {
    let mut segs = Vec::new();
    let mut decoded = 0;
    for_each_unit_at(raw, |s, e, u| {
        let (dlen, plain) = match u {
            Unit::Text(t) => (t.len(), true),
            Unit::Char(c) => (c.len_utf8(), false),
            Unit::LoneSurrogate(_) => ('\u{fffd}'.len_utf8(), false),
        };
        segs.push(Segment {
            decoded,
            raw: s,
            decoded_len: dlen,
            raw_len: e - s,
            plain,
        });
        decoded += dlen;
    });
    segs
}

fn hex4(b: &[u8]) -> Option<u16> {
    if b.len() < 4 {
        return None;
    }
    let mut v: u16 = 0;
    for &c in &b[..4] {
        v = v * 16 + (c as char).to_digit(16)? as u16;
    }
    Some(v)
}

fn char_len(src: &[u8], pos: usize) -> usize {
    match src.get(pos) {
        Some(&b) if b < 0x80 => 1,
        Some(&b) if b >= 0xf0 => 4,
        Some(&b) if b >= 0xe0 => 3,
        Some(_) => 2,
        None => 0,
    }
}

struct Parser<'a> {
    src: &'a [u8],
    pos: usize,
    opts: &'a ParseOptions,
    nodes: Vec<Node>,
    /// Keys of the objects being parsed, innermost last, for the duplicate
    /// check when each closes.
    keys: Vec<NodeId>,
    duplicates: Vec<DuplicateKey>,
    depth: usize,
}

/// A mask with the high bit set in bytes of `x` (little-endian) that are `"`,
/// `\\` or below 0x20 (SWAR: the classic "has a zero byte" / "has a byte less
/// than n" tests). Non-zero exactly when such a byte exists, and its lowest set
/// bit marks the first one exactly (a borrow only carries upwards from a
/// flagged byte, so only bytes above the first can be flagged wrongly).
#[inline]
fn special_mask(x: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let has_zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
    let quote = has_zero(x ^ (ONES * b'"' as u64));
    let backslash = has_zero(x ^ (ONES * b'\\' as u64));
    let control = x.wrapping_sub(ONES * 0x20) & !x & HIGHS;
    quote | backslash | control
}

impl Parser<'_> {
    fn err<T>(&self, kind: ErrorKind, start: usize, end: usize) -> Result<T, ParseError> {
        Err(ParseError {
            kind,
            span: Span::new(start, end.min(self.src.len()).max(start)),
        })
    }

    fn unexpected<T>(&self, what: &'static str) -> Result<T, ParseError> {
        if self.pos >= self.src.len() {
            return self.err(
                ErrorKind::UnexpectedEof(what),
                self.src.len(),
                self.src.len(),
            );
        }
        if self.src[self.pos] == 0 {
            return self.err(ErrorKind::NulByte, self.pos, self.pos + 1);
        }
        let len = char_len(self.src, self.pos);
        self.err(ErrorKind::Unexpected(what), self.pos, self.pos + len)
    }

    /// Skips whitespace (and comments, for JSONC).
    #[inline]
    fn skip_ws(&mut self) -> Result<(), ParseError> {
        // Called around every token: inline the common case, a token right
        // here (whitespace and control characters are all at or below b' ').
        match self.src.get(self.pos) {
            Some(&b) if b > b' ' && b != b'/' => Ok(()),
            _ => self.skip_ws_slow(),
        }
    }

    fn skip_ws_slow(&mut self) -> Result<(), ParseError> {
        loop {
            while let Some(&b) = self.src.get(self.pos) {
                if matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
                    self.pos += 1;
                    // Pretty-printed files indent with runs of spaces.
                    while self.src.get(self.pos..self.pos + 8) == Some(&b"        "[..]) {
                        self.pos += 8;
                    }
                } else {
                    break;
                }
            }
            if self.opts.jsonc && self.src.get(self.pos) == Some(&b'/') {
                match self.src.get(self.pos + 1) {
                    Some(b'/') => {
                        while let Some(&b) = self.src.get(self.pos) {
                            if b == b'\n' {
                                break;
                            }
                            self.pos += 1;
                        }
                        continue;
                    }
                    Some(b'*') => {
                        let start = self.pos;
                        self.pos += 2;
                        loop {
                            if self.pos + 1 >= self.src.len() {
                                return self.err(
                                    ErrorKind::UnexpectedEof("`*/` closing the comment"),
                                    start,
                                    start + 2,
                                );
                            }
                            if self.src[self.pos] == b'*' && self.src[self.pos + 1] == b'/' {
                                self.pos += 2;
                                break;
                            }
                            self.pos += 1;
                        }
                        continue;
                    }
                    _ => {}
                }
            }
            return Ok(());
        }
    }

    fn push(&mut self, kind: Kind, start: usize) -> NodeId {
        let id = self.nodes.len() as NodeId;
        self.nodes.push(Node {
            start: start as u32,
            end: start as u32,
            next: id + 1,
            meta: kind as u32,
        });
        id
    }

    fn value(&mut self) -> Result<NodeId, ParseError> {
        let start = self.pos;
        match self.src.get(self.pos) {
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'"') => self.string(),
            Some(b't') => self.literal(b"true", Kind::Bool, F_TRUE),
            Some(b'f') => self.literal(b"false", Kind::Bool, 0),
            Some(b'n') => self.literal(b"null", Kind::Null, 0),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => {
                let _ = start;
                self.unexpected("a JSON value")
            }
        }
    }

    fn literal(&mut self, word: &[u8], kind: Kind, flags: u8) -> Result<NodeId, ParseError> {
        let start = self.pos;
        if self.src.len() >= start + word.len() && &self.src[start..start + word.len()] == word {
            let id = self.push(kind, start);
            self.pos += word.len();
            let n = &mut self.nodes[id as usize];
            n.end = self.pos as u32;
            n.set_flags(flags);
            Ok(id)
        } else {
            self.unexpected("a JSON value")
        }
    }

    fn number(&mut self) -> Result<NodeId, ParseError> {
        let s = self.src;
        let start = self.pos;
        let mut i = start;
        if s.get(i) == Some(&b'-') {
            i += 1;
        }
        match s.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => {
                while matches!(s.get(i), Some(b'0'..=b'9')) {
                    i += 1;
                }
            }
            _ => return self.err(ErrorKind::BadNumber, start, i + 1),
        }
        if s.get(i) == Some(&b'.') {
            i += 1;
            if !matches!(s.get(i), Some(b'0'..=b'9')) {
                return self.err(ErrorKind::BadNumber, start, i + 1);
            }
            while matches!(s.get(i), Some(b'0'..=b'9')) {
                i += 1;
            }
        }
        if matches!(s.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(s.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            if !matches!(s.get(i), Some(b'0'..=b'9')) {
                return self.err(ErrorKind::BadNumber, start, i + 1);
            }
            while matches!(s.get(i), Some(b'0'..=b'9')) {
                i += 1;
            }
        }
        // A digit right after a leading zero ("01") is not JSON.
        if matches!(s.get(i), Some(b'0'..=b'9')) {
            return self.err(ErrorKind::BadNumber, start, i + 1);
        }
        let id = self.push(Kind::Number, start);
        self.pos = i;
        self.nodes[id as usize].end = i as u32;
        Ok(id)
    }

    fn string(&mut self) -> Result<NodeId, ParseError> {
        let s = self.src;
        let start = self.pos;
        let mut i = start + 1;
        let mut flags = 0;
        loop {
            // Fast path over plain bytes. Most strings are short (keys, type
            // names): look at them eight bytes at a time while none of those
            // is `"`, `\` or a control character. A string still going after
            // 16 bytes is text (a description): find its next `"` or `\` with
            // memchr (vectorised), then check the run before it for control
            // characters in one pass that the compiler vectorises too.
            let mut words = 0;
            while let Some(chunk) = s.get(i..i + 8) {
                let mut word = [0u8; 8];
                word.copy_from_slice(chunk);
                let mask = special_mask(u64::from_le_bytes(word));
                if mask != 0 {
                    // Straight to the first special byte.
                    i += (mask.trailing_zeros() / 8) as usize;
                    break;
                }
                i += 8;
                words += 1;
                if words == 2 {
                    let rest = &s[i..];
                    let run = &rest[..memchr::memchr2(b'"', b'\\', rest).unwrap_or(rest.len())];
                    let control = run.iter().fold(false, |any, &b| any | (b < 0x20));
                    // With a control character, stop at it: the byte loop
                    // below and the error report take over from there.
                    i += match control {
                        false => run.len(),
                        true => run.iter().position(|&b| b < 0x20).unwrap_or(0),
                    };
                    break;
                }
            }
            while let Some(&b) = s.get(i) {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                i += 1;
            }
            match s.get(i) {
                None => {
                    return self.err(
                        ErrorKind::UnexpectedEof("`\"` closing the string"),
                        start,
                        start + 1,
                    )
                }
                Some(b'"') => {
                    i += 1;
                    break;
                }
                Some(b'\\') => {
                    flags |= F_ESCAPED;
                    match s.get(i + 1) {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => i += 2,
                        Some(b'u') => {
                            let Some(hi) = hex4(s.get(i + 2..).unwrap_or_default()) else {
                                return self.err(
                                    ErrorKind::BadUnicodeEscape,
                                    i,
                                    (i + 6).min(s.len()),
                                );
                            };
                            i += 6;
                            if (0xd800..0xdc00).contains(&hi) {
                                let paired = s.get(i) == Some(&b'\\')
                                    && s.get(i + 1) == Some(&b'u')
                                    && hex4(s.get(i + 2..).unwrap_or_default())
                                        .is_some_and(|lo| (0xdc00..0xe000).contains(&lo));
                                if paired {
                                    i += 6;
                                } else {
                                    flags |= F_LONE_SURROGATE;
                                }
                            } else if (0xdc00..0xe000).contains(&hi) {
                                flags |= F_LONE_SURROGATE;
                            }
                        }
                        None => {
                            return self.err(
                                ErrorKind::UnexpectedEof("`\"` closing the string"),
                                start,
                                start + 1,
                            )
                        }
                        Some(_) => {
                            return self.err(ErrorKind::BadEscape, i, i + 1 + char_len(s, i + 1))
                        }
                    }
                }
                Some(&b) => return self.err(ErrorKind::ControlInString(b), i, i + 1),
            }
        }
        let id = self.push(Kind::String, start);
        self.pos = i;
        let n = &mut self.nodes[id as usize];
        n.end = i as u32;
        n.set_flags(flags);
        Ok(id)
    }

    fn enter(&mut self) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > self.opts.max_depth {
            return self.err(
                ErrorKind::TooDeep(self.opts.max_depth),
                self.pos,
                self.pos + 1,
            );
        }
        Ok(())
    }

    /// Closes container `id` with `len` entries (an object's keys and values
    /// both count).
    fn close(&mut self, id: NodeId, len: usize) -> Result<(), ParseError> {
        let limit = self.opts.max_entries.min(MAX_ENTRIES);
        if len > limit {
            let start = self.nodes[id as usize].start as usize;
            return self.err(ErrorKind::TooManyEntries(limit), start, start + 1);
        }
        let next = self.nodes.len() as u32;
        let n = &mut self.nodes[id as usize];
        n.next = next;
        n.set_len(len as u32);
        n.end = self.pos as u32;
        self.depth -= 1;
        Ok(())
    }

    fn array(&mut self) -> Result<NodeId, ParseError> {
        self.enter()?;
        let id = self.push(Kind::Array, self.pos);
        let mut len = 0;
        self.pos += 1;
        self.skip_ws()?;
        if self.src.get(self.pos) == Some(&b']') {
            self.pos += 1;
            self.close(id, 0)?;
            return Ok(id);
        }
        loop {
            self.value()?;
            len += 1;
            self.skip_ws()?;
            match self.src.get(self.pos) {
                Some(b',') => {
                    self.pos += 1;
                    self.skip_ws()?;
                    if self.opts.jsonc && self.src.get(self.pos) == Some(&b']') {
                        self.pos += 1;
                        break;
                    }
                }
                Some(b']') => {
                    self.pos += 1;
                    break;
                }
                _ => return self.unexpected("`,` or `]`"),
            }
        }
        self.close(id, len)?;
        Ok(id)
    }

    fn object(&mut self) -> Result<NodeId, ParseError> {
        self.enter()?;
        let id = self.push(Kind::Object, self.pos);
        let mark = self.keys.len();
        self.pos += 1;
        self.skip_ws()?;
        if self.src.get(self.pos) == Some(&b'}') {
            self.pos += 1;
            self.close(id, 0)?;
            return Ok(id);
        }
        loop {
            if self.src.get(self.pos) != Some(&b'"') {
                return self.unexpected("a string key");
            }
            let k = self.string()?;
            self.skip_ws()?;
            if self.src.get(self.pos) != Some(&b':') {
                return self.unexpected("`:`");
            }
            self.pos += 1;
            self.skip_ws()?;
            self.value()?;
            self.keys.push(k);
            self.skip_ws()?;
            match self.src.get(self.pos) {
                Some(b',') => {
                    self.pos += 1;
                    self.skip_ws()?;
                    if self.opts.jsonc && self.src.get(self.pos) == Some(&b'}') {
                        self.pos += 1;
                        break;
                    }
                }
                Some(b'}') => {
                    self.pos += 1;
                    break;
                }
                _ => return self.unexpected("`,` or `}`"),
            }
        }
        let len = 2 * (self.keys.len() - mark);
        self.find_duplicates(id, mark);
        self.keys.truncate(mark);
        self.close(id, len)?;
        Ok(id)
    }

    /// Records duplicate keys among the keys in `keys[mark..]`.
    fn find_duplicates(&mut self, object: NodeId, mark: usize) {
        let members = &self.keys[mark..];
        let n = members.len();
        if n < 2 {
            return;
        }
        // Keys compare by their decoded value. Unescaped keys are compared as
        // raw bytes (no decoding, no UTF-8 check: the parser checked the text
        // up front); escaped ones are decoded once. A lone surrogate cannot be
        // held in UTF-8, so it is written as the bytes ED A0 80..ED BF BF
        // (its WTF-8 form), which no valid UTF-8 text contains: `"\ud800"`
        // and a key spelled with a literal backslash never compare equal.
        let src = self.src;
        let nodes = &self.nodes;
        // Nearly every object has a handful of unescaped keys: compare them
        // pairwise, lengths first (from the nodes), raw bytes only when the
        // lengths agree, with no allocation. Escaped keys take the decoding path.
        if n <= 16 && (0..n).all(|j| nodes[members[j] as usize].flags() & F_ESCAPED == 0) {
            let len = |j: usize| {
                let k = &nodes[members[j] as usize];
                k.end - k.start
            };
            let raw = |j: usize| {
                let k = &nodes[members[j] as usize];
                &src[k.start as usize + 1..k.end as usize - 1]
            };
            let mut found = Vec::new();
            for j in 1..n {
                if let Some(i) = (0..j).find(|&i| len(i) == len(j) && raw(i) == raw(j)) {
                    found.push((members[i], members[j]));
                }
            }
            for (first, second) in found {
                self.duplicates.push(DuplicateKey {
                    object,
                    first,
                    second,
                });
            }
            return;
        }
        let key_bytes = |k: NodeId| -> Cow<'_, [u8]> {
            let node = &nodes[k as usize];
            let raw = &src[node.start as usize + 1..node.end as usize - 1];
            if node.flags() & F_ESCAPED == 0 {
                return Cow::Borrowed(raw);
            }
            let raw = std::str::from_utf8(raw).unwrap_or_default();
            let mut out = Vec::with_capacity(raw.len());
            for_each_unit(raw, |u| match u {
                Unit::Text(t) => out.extend_from_slice(t.as_bytes()),
                Unit::Char(c) => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
                Unit::LoneSurrogate(s) => out.extend_from_slice(&[
                    0xe0 | (s >> 12) as u8,
                    0x80 | ((s >> 6) & 0x3f) as u8,
                    0x80 | (s & 0x3f) as u8,
                ]),
            });
            Cow::Owned(out)
        };
        let mut found = Vec::new();
        if n <= 16 {
            let keys: Vec<Cow<'_, [u8]>> = (0..n).map(|j| key_bytes(members[j])).collect();
            for j in 1..n {
                if let Some(i) = (0..j).find(|&i| keys[i] == keys[j]) {
                    found.push((members[i], members[j]));
                }
            }
        } else {
            let mut seen: std::collections::HashMap<Cow<'_, [u8]>, NodeId> =
                std::collections::HashMap::with_capacity(n);
            for &k in members {
                match seen.entry(key_bytes(k)) {
                    std::collections::hash_map::Entry::Occupied(mut e) => {
                        found.push((*e.get(), k));
                        e.insert(k);
                    }
                    std::collections::hash_map::Entry::Vacant(e) => {
                        e.insert(k);
                    }
                }
            }
        }
        for (first, second) in found {
            self.duplicates.push(DuplicateKey {
                object,
                first,
                second,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Document, ParseError> {
        Document::parse(s.as_bytes().to_vec(), &ParseOptions::default())
    }

    #[test]
    fn counts_newlines_in_blocks_and_tail() {
        // Every length around the 32-byte blocks, newlines at varied places,
        // and whole blocks of newlines (the per-block byte sum at its maximum).
        for len in 0..200 {
            for step in [1, 2, 3, 7, 31, 32, 33] {
                let bytes: Vec<u8> = (0..len)
                    .map(|i| if i % step == 0 { b'\n' } else { b'a' })
                    .collect();
                let want = bytes.iter().filter(|&&b| b == b'\n').count();
                assert_eq!(count_newlines(&bytes), want, "len {len} step {step}");
            }
        }
        assert_eq!(count_newlines(&[b'\n'; 1000]), 1000);
        assert_eq!(count_newlines("é\n\u{2028}\r\n".as_bytes()), 2);
    }

    /// `str_is_blank`, `same_str` and `str_bytes` answer as the decoded
    /// texts do, escapes, white space outside ASCII and lone surrogates
    /// included.
    #[test]
    fn string_shortcuts_agree_with_decoded_text() {
        let strings = [
            r#""""#,
            r#"" ""#,
            r#""x""#,
            r#"" x""#,
            r#""\u0020""#,
            r#""\u0020x""#,
            r#""\n\t""#,
            r#""\nx""#,
            "\"\u{a0}\"",
            "\"\u{2003}y\"",
            r#""\u00a0""#,
            r#""\ud800""#,
            r#""\ufffd""#,
            "\"\u{fffd}\"",
            r#""\u0078""#,
            r#""a/b""#,
            r#""a\/b""#,
        ];
        let d = parse(&format!("[{}, 1, null]", strings.join(", "))).unwrap();
        let items = d.array(d.root()).unwrap();
        for &a in items {
            let text = d.str(a);
            assert_eq!(
                d.str_is_blank(a),
                text.as_ref().map(|t| t.trim().is_empty()),
                "{}",
                d.raw(a)
            );
            assert_eq!(
                &*d.str_bytes(a),
                text.as_ref().map_or(&[][..], |t| t.as_bytes()),
                "{}",
                d.raw(a)
            );
            for &b in items {
                let want = matches!((&text, d.str(b)), (Some(x), Some(y)) if *x == y);
                assert_eq!(d.same_str(a, b), want, "{} {}", d.raw(a), d.raw(b));
            }
        }
    }

    #[test]
    fn spans_of_values() {
        let d = parse(r#"{"a": [1, "x\n", true], "b": null}"#).unwrap();
        let a = d.get(d.root(), "a").unwrap();
        assert_eq!(d.raw(a), r#"[1, "x\n", true]"#);
        let items = d.array(a).unwrap();
        assert_eq!(d.raw(items[1]), r#""x\n""#);
        assert_eq!(d.str(items[1]).unwrap(), "x\n");
        assert_eq!(d.as_bool(items[2]), Some(true));
        assert_eq!(d.pointer(items[1]), "/a/1");
        assert_eq!(d.resolve("/a/1"), Some(items[1]));
        assert_eq!(d.pointer(d.get(d.root(), "b").unwrap()), "/b");
    }

    #[test]
    fn decoded_offsets_map_to_raw_bytes() {
        // Decoded: "café \n naïve 😀 end" — escapes of 6 and 12 bytes stand for
        // shorter decoded text, so the mapping must account for each one.
        let src = r#"{"d": "caf\u00e9 \n na\u00efve \ud83d\ude00 end"}"#;
        let d = parse(src).unwrap();
        let s = d.get(d.root(), "d").unwrap();
        let text = d.str(s).unwrap().into_owned();
        assert_eq!(text, "café \n naïve 😀 end");
        // Characters 10..20 of the decoded text: "ve 😀 end".
        let chars: String = text.chars().skip(10).take(10).collect();
        assert_eq!(chars, "ve 😀 end");
        let span = d.raw_span_of_chars(s, 10..20);
        assert_eq!(&src[span.range()], r#"ve \ud83d\ude00 end"#);
        // "é" alone maps to its whole escape.
        let span = d.raw_span_of_chars(s, 3..4);
        assert_eq!(&src[span.range()], r#"\u00e9"#);
        // "\n" alone.
        let span = d.raw_span_of_chars(s, 5..6);
        assert_eq!(&src[span.range()], r#"\n"#);
        // Plain text before any escape.
        let span = d.raw_span_of_chars(s, 0..3);
        assert_eq!(&src[span.range()], "caf");
        // Empty range.
        let span = d.raw_span_of_chars(s, 4..4);
        assert!(span.is_empty());
    }

    #[test]
    fn swar_special_byte_test_matches_bytewise() {
        let special = |b: u8| b == b'"' || b == b'\\' || b < 0x20;
        let first = |w: &[u8; 8]| {
            let m = special_mask(u64::from_le_bytes(*w));
            (m != 0).then(|| (m.trailing_zeros() / 8) as usize)
        };
        // Every byte value in every lane, over a background of plain bytes.
        for background in [b'a', 0x7f, 0x80, 0xff, b'!', b'#'] {
            for lane in 0..8 {
                for b in 0..=255u8 {
                    let mut w = [background; 8];
                    w[lane] = b;
                    let want = w.iter().position(|&x| special(x));
                    assert_eq!(first(&w), want, "{w:?}");
                    // A second special byte above the first never moves it.
                    for hi in lane + 1..8 {
                        for extra in [b'"', b'\\', 0, 0x1f] {
                            let mut w2 = w;
                            w2[hi] = extra;
                            let want = w2.iter().position(|&x| special(x));
                            assert_eq!(first(&w2), want, "{w2:?}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn whitespace_runs_of_every_length() {
        // Spaces, newlines, tabs and carriage returns in runs across the
        // eight-byte steps, and an error right after a run still points at
        // its byte.
        for len in 0..40 {
            for fill in [" ", "\n", "\t", "\r\n", " \t", "\n   "] {
                let ws: String = fill.repeat(len);
                let d = parse(&format!(
                    "{ws}{{{ws}\"a\"{ws}:{ws}[{ws}1{ws},{ws}2{ws}]{ws}}}{ws}"
                ))
                .unwrap();
                assert_eq!(d.len(d.get(d.root(), "a").unwrap()), 2);
                let src = format!("[1,{ws}x]");
                let e = parse(&src).unwrap_err();
                assert_eq!(e.span.start, src.find('x').unwrap(), "{src:?}");
                let src = format!("[1,{ws}\u{0b}]");
                let e = parse(&src).unwrap_err();
                assert_eq!(e.span.start, src.find('\u{0b}').unwrap(), "{src:?}");
                let src = format!("[1,{ws}");
                let e = parse(&src).unwrap_err();
                assert_eq!(e.span.start, src.len(), "{src:?}");
            }
        }
    }

    #[test]
    fn duplicate_keys_of_one_length() {
        // Keys of one length that differ only after their first byte, only in
        // it, or not at all; empty keys.
        let d = parse(r#"{"abcdefgh_1": 1, "abcdefgh_2": 2, "abcdefgh_1": 3}"#).unwrap();
        assert_eq!(d.duplicates().len(), 1);
        assert_eq!(d.span(d.duplicates()[0].second).start, 35);
        let d = parse(r#"{"type": 1, "enum": 2, "typf": 3, "a": 4, "b": 5}"#).unwrap();
        assert!(d.duplicates().is_empty());
        let d = parse(r#"{"type": 1, "enum": 2, "type": 3}"#).unwrap();
        assert_eq!(d.duplicates().len(), 1);
        let d = parse(r#"{"":1,"":2}"#).unwrap();
        assert_eq!(d.duplicates().len(), 1);
        let d = parse(r#"{"":1,"a":2}"#).unwrap();
        assert!(d.duplicates().is_empty());
    }

    #[test]
    fn lone_surrogate_key_is_not_a_duplicate_of_its_spelling() {
        let d = parse(r#"{"\ud800": 1, "\\ud800": 2, "\ud800": 3}"#).unwrap();
        assert_eq!(d.duplicates().len(), 1);
        assert_eq!(d.raw(d.duplicates()[0].second), r#""\ud800""#);
    }

    #[test]
    fn duplicate_keys_are_kept() {
        let d = parse(r#"{"description": "safe", "x": 1, "description": "evil"}"#).unwrap();
        assert_eq!(d.duplicates().len(), 1);
        assert_eq!(d.get_str(d.root(), "description").unwrap(), "evil");
        let dup = d.duplicates()[0];
        assert_eq!(d.raw(dup.first), r#""description""#);
        assert!(d.span(dup.first).start < d.span(dup.second).start);
        // Escaped spelling of the same key is a duplicate too.
        let d = parse(r#"{"a": 1, "\u0061": 2}"#).unwrap();
        assert_eq!(d.duplicates().len(), 1);
    }

    #[test]
    fn many_keys_use_hash_path() {
        let mut s = String::from("{");
        for i in 0..40 {
            s.push_str(&format!("\"k{i}\": {i},"));
        }
        s.push_str("\"k7\": 0}");
        let d = parse(&s).unwrap();
        assert_eq!(d.duplicates().len(), 1);
    }

    #[test]
    fn errors_have_locations() {
        let cases: &[(&[u8], ErrorKind, usize)] = &[
            (b"{\"a\": 1,}", ErrorKind::Unexpected("a string key"), 8),
            (b"[1 2]", ErrorKind::Unexpected("`,` or `]`"), 3),
            (b"{\"a\": \"x\ty\"}", ErrorKind::ControlInString(9), 8),
            (b"{\"a\": \"\\q\"}", ErrorKind::BadEscape, 7),
            (b"{\"a\": \"\\u12\"}", ErrorKind::BadUnicodeEscape, 7),
            (b"[01]", ErrorKind::BadNumber, 1),
            (b"[1.]", ErrorKind::BadNumber, 1),
            (b"[-]", ErrorKind::BadNumber, 1),
            (b"{} x", ErrorKind::TrailingGarbage, 3),
            (b"[1]\0", ErrorKind::NulByte, 3),
            (b"[\0]", ErrorKind::NulByte, 1),
            (b"\"ab\xffcd\"", ErrorKind::InvalidUtf8, 3),
            (b"", ErrorKind::Empty, 0),
            (b"  ", ErrorKind::Empty, 0),
            (b"[NaN]", ErrorKind::Unexpected("a JSON value"), 1),
            (b"\xef\xbb\xbf{}", ErrorKind::ByteOrderMark, 0),
            (b"{\"a\"", ErrorKind::UnexpectedEof("`:`"), 4),
            (
                b"\"abc",
                ErrorKind::UnexpectedEof("`\"` closing the string"),
                0,
            ),
        ];
        for (src, kind, at) in cases {
            let e = Document::parse(src.to_vec(), &ParseOptions::default()).unwrap_err();
            assert_eq!(&e.kind, kind, "{:?}", String::from_utf8_lossy(src));
            assert_eq!(e.span.start, *at, "{:?}", String::from_utf8_lossy(src));
        }
    }

    #[test]
    fn depth_limit() {
        let deep = "[".repeat(100_000);
        let e = parse(&deep).unwrap_err();
        assert_eq!(e.kind, ErrorKind::TooDeep(DEFAULT_MAX_DEPTH));
        let ok = format!("{}{}", "[".repeat(100), "]".repeat(100));
        assert!(parse(&ok).is_ok());
    }

    #[test]
    fn size_limit() {
        let opts = ParseOptions {
            max_size: 10,
            ..Default::default()
        };
        let e = Document::parse(b"[1,2,3,4,5,6]".to_vec(), &opts).unwrap_err();
        assert!(matches!(
            e.kind,
            ErrorKind::TooLarge {
                size: 13,
                limit: 10
            }
        ));
    }

    #[test]
    fn entry_limit() {
        let opts = ParseOptions {
            max_entries: 4,
            ..Default::default()
        };
        assert!(Document::parse(b"[[1,2,3,4],{\"a\":1,\"b\":2}]".to_vec(), &opts).is_ok());
        let e = Document::parse(b"[1,[1,2,3,4,5]]".to_vec(), &opts).unwrap_err();
        assert_eq!(e.kind, ErrorKind::TooManyEntries(4));
        assert_eq!(e.span, Span::new(3, 4));
        let e = Document::parse(b"{\"a\":1,\"b\":2,\"c\":3}".to_vec(), &opts).unwrap_err();
        assert_eq!(e.kind, ErrorKind::TooManyEntries(4));
        // The cap is what a node can hold, whatever is asked.
        let opts = ParseOptions {
            max_entries: usize::MAX,
            ..Default::default()
        };
        assert!(Document::parse(b"[]".to_vec(), &opts).is_ok());
        assert_eq!(std::mem::size_of::<Node>(), 16);
    }

    #[test]
    fn jsonc_when_asked() {
        let src = "{\n // comment\n \"a\": [1, 2,], /* x */ \"b\": 1,\n}";
        assert!(parse(src).is_err());
        let opts = ParseOptions {
            jsonc: true,
            ..Default::default()
        };
        let d = Document::parse(src.as_bytes().to_vec(), &opts).unwrap();
        assert_eq!(d.len(d.get(d.root(), "a").unwrap()), 2);
    }

    #[test]
    fn lone_surrogates() {
        let d = parse(r#"["a\ud800b", "\udc00"]"#).unwrap();
        let a = d.array(d.root()).unwrap();
        assert!(d.has_lone_surrogate(a[0]));
        assert_eq!(d.str(a[0]).unwrap(), "a\u{fffd}b");
        assert!(d.has_lone_surrogate(a[1]));
    }

    #[test]
    fn children_walk_matches_child_lists() {
        // Nested, empty and scalar-only containers, duplicate keys: the
        // skipping walk, the slices built on first use, the pointers and the
        // subtree ends all agree for every node.
        let src = r#"{"a": [], "b": {}, "c": [1, [2, [3, {}]], {"d": [[]]}], "e": {"f": {"g": 1}, "h": [null, true]}, "a": "x"}"#;
        let d = parse(src).unwrap();
        for id in 0..d.node_count() as NodeId {
            let walked: Vec<NodeId> = d.children(id).collect();
            assert_eq!(walked, d.entries(id), "node {id}");
            assert_eq!(d.children(id).len(), walked.len());
            if d.kind(id) == Kind::Object {
                let pairs: Vec<(NodeId, NodeId)> = d.members(id).unwrap().collect();
                assert_eq!(pairs.len() * 2, walked.len());
                assert_eq!(d.members(id).unwrap().len(), pairs.len());
            }
            // A subtree is every node from its root to its end, and its text
            // holds theirs.
            let end = d.subtree_end(id);
            for inner in id..=end {
                assert!(d.span(inner).start >= d.span(id).start);
                assert!(d.span(inner).end <= d.span(id).end);
            }
            if (end as usize) + 1 < d.node_count() {
                assert!(d.span(end + 1).start >= d.span(id).end);
            }
            let p = d.pointer(id);
            let back = d.resolve(&p).unwrap();
            // Keys resolve to their value; duplicates to the last one.
            assert!(back == id || d.kind(id) == Kind::String || p == "/a", "{p}");
        }
        assert_eq!(d.children(d.get(d.root(), "c").unwrap()).len(), 3);
        assert_eq!(d.children(d.get(d.root(), "a").unwrap()).len(), 0);
        assert_eq!(
            d.resolve("/c/1/1/1"),
            d.array(
                d.array(d.array(d.get(d.root(), "c").unwrap()).unwrap()[1])
                    .unwrap()[1]
            )
            .unwrap()
            .get(1)
            .copied()
        );
    }

    #[test]
    fn pointer_escapes() {
        let d = parse(r#"{"a/b": {"c~d": [0, {"e": 1}]}}"#).unwrap();
        let e = d.resolve("/a~1b/c~0d/1/e").unwrap();
        assert_eq!(d.raw(e), "1");
        assert_eq!(d.pointer(e), "/a~1b/c~0d/1/e");
    }
}
