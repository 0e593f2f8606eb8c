//! The article's fingerprint, byte for byte, in both of its languages.
//!
//! The article hashes the canonical JSON of the tool list (tools sorted by name,
//! keys sorted, no whitespace) with SHA-256 and keeps 16 hex digits. Its
//! TypeScript and Python programs agree only on ASCII text and integers:
//!
//! | | [`Scheme::Ts`] (`JSON.stringify`) | [`Scheme::Python`] (`json.dumps(sort_keys=True, separators=(",",":"))`) |
//! |---|---|---|
//! | key and tool order | UTF-16 code units | code points |
//! | non-ASCII text | written as UTF-8 | `\uXXXX` escapes, surrogate pairs above U+FFFF |
//! | DEL (U+007F) | literal | `\u007f` |
//! | `1.0`, `1e2` | `1`, `100` | `1.0`, `100.0` |
//! | `1e16` | `10000000000000000` | `1e+16` |
//! | integers above 2^53 | rounded to a double | exact |
//! | `1e400` | `null` | `Infinity` |
//!
//! So `café` or `1.0` anywhere in a tool list gives two different fingerprints;
//! mcplint computes both and accepts either when it checks one ([`matches()`]).
//!
//! Both encoders work from the raw JSON text, not from decoded Rust strings, so
//! escaped lone surrogates (which both languages accept) survive exactly, and
//! number digits are never lost to a lossy intermediate.
//!
//! The article leaves prompts, resources and the server's instructions out of
//! its fingerprint although a rug pull can change them; [`context_digest`]
//! covers those (documented in the README).

use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt;

use sha2::{Digest, Sha256};

use crate::manifest::json::{for_each_unit, Document, Kind, NodeId, Unit};
use crate::manifest::Server;

/// Which of the article's two programs to reproduce.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Scheme {
    /// The article's TypeScript (RFC 8785-style canonical JSON).
    Ts,
    /// The article's Python (`json.dumps(sort_keys=True, separators=(",",":"))`).
    Python,
}

impl Scheme {
    /// Both schemes, the default first.
    pub const ALL: [Scheme; 2] = [Scheme::Ts, Scheme::Python];

    /// The scheme's name.
    pub fn name(self) -> &'static str {
        match self {
            Scheme::Ts => "ts",
            Scheme::Python => "python",
        }
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A SHA-256 digest.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub [u8; 32]);

impl Fingerprint {
    /// All 64 hex digits.
    pub fn full(&self) -> String {
        crate::display::hex(&self.0)
    }
    /// The article's 16 hex digits.
    pub fn short(&self) -> String {
        crate::display::hex(&self.0[..8])
    }
    /// True if `hex` (16 to 64 hex digits, any case) is a prefix of this digest.
    pub fn matches_hex(&self, hex: &str) -> bool {
        let hex = hex.trim().to_ascii_lowercase();
        hex.len() >= 16 && hex.len() <= 64 && self.full().starts_with(&hex)
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({})", self.full())
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.short())
    }
}

/// Buffered writer into SHA-256 (or a byte vector, for tests and `canonical`).
///
/// Writes only append to the buffer; [`Writer::write_value`] hands it to the
/// hasher in large chunks once it holds 64 KiB, so the per-byte pushes of the
/// canonical writer carry no flush check.
struct Out<'a> {
    buf: Vec<u8>,
    hasher: Option<&'a mut Sha256>,
}

/// Size at which the buffer is handed to the hasher.
const CHUNK: usize = 1 << 16;

impl Out<'_> {
    #[inline]
    fn push(&mut self, b: u8) {
        self.buf.push(b);
    }
    #[inline]
    fn extend(&mut self, s: &[u8]) {
        self.buf.extend_from_slice(s);
    }
    #[inline]
    fn flush_if_full(&mut self) {
        if self.buf.len() >= CHUNK {
            if let Some(h) = self.hasher.as_deref_mut() {
                h.update(&self.buf);
                self.buf.clear();
            }
        }
    }
    fn finish(mut self) -> Vec<u8> {
        if let Some(h) = self.hasher.take() {
            h.update(&self.buf);
            self.buf.clear();
        }
        self.buf
    }
}

/// One object member on the writer's sort stack: the key's first eight bytes
/// as a big-endian number (zero-padded), its raw text, and the key and value
/// nodes.
#[derive(Clone, Copy)]
struct Member<'d> {
    prefix: u64,
    raw: &'d [u8],
    key: NodeId,
    value: NodeId,
}

/// The canonical JSON writer of one scheme over one document.
///
/// One writer serves a whole digest, so the scratch space for sorting object
/// members is allocated once rather than once per object.
struct Writer<'d, 'h> {
    doc: &'d Document,
    scheme: Scheme,
    out: Out<'h>,
    /// Members of the objects being written, innermost object last: each
    /// object sorts its members in its own tail of this stack.
    members: Vec<Member<'d>>,
}

impl<'d, 'h> Writer<'d, 'h> {
    fn new(doc: &'d Document, scheme: Scheme, hasher: Option<&'h mut Sha256>) -> Self {
        let cap = if hasher.is_some() { CHUNK + 4096 } else { 0 };
        Writer {
            doc,
            scheme,
            out: Out {
                buf: Vec::with_capacity(cap),
                hasher,
            },
            members: Vec::with_capacity(64),
        }
    }
}

/// The canonical text of one value under `scheme` (for tests and debugging).
pub fn canonical(doc: &Document, node: NodeId, scheme: Scheme) -> Vec<u8> {
    let mut w = Writer::new(doc, scheme, None);
    w.write_value(node);
    w.out.finish()
}

/// The article's fingerprint of a list of tool objects.
pub fn tools_fingerprint(doc: &Document, tools: &[NodeId], scheme: Scheme) -> Fingerprint {
    let mut hasher = Sha256::new();
    {
        let mut w = Writer::new(doc, scheme, Some(&mut hasher));
        w.write_sorted_array(tools, "name");
        w.out.finish();
    }
    Fingerprint(hasher.finalize().into())
}

/// The article's fingerprint of a server's tools: the same digest as
/// [`tools_fingerprint`] over their nodes.
///
/// The tools are ordered by the names the loader already decoded
/// ([`Tool::name`](crate::manifest::Tool::name), the last `name` member as
/// with `JSON.parse`), so the sort reads those compact strings instead of
/// looking each name up again in a large document's scattered text. A name
/// holding U+FFFD may stand for an escaped lone surrogate, which the decoded
/// string cannot tell apart: those are ordered from the document.
pub fn server_fingerprint(doc: &Document, server: &Server, scheme: Scheme) -> Fingerprint {
    let items: Vec<(NodeId, SortKey<'_>)> = server
        .tools
        .iter()
        .map(|t| {
            let key = if t.name.contains('\u{fffd}') {
                SortKey::of(doc, t.name_node, scheme)
            } else {
                SortKey::text(Cow::Borrowed(t.name.as_str()), scheme)
            };
            (t.node, key)
        })
        .collect();
    let mut hasher = Sha256::new();
    {
        let mut w = Writer::new(doc, scheme, Some(&mut hasher));
        w.write_sorted(&items);
        w.out.finish();
    }
    Fingerprint(hasher.finalize().into())
}

/// mcplint's second digest, over what the article's leaves out: the canonical
/// JSON (under `scheme`) of
/// `{"instructions": …, "prompts": [by name], "resourceTemplates": [by name], "resources": [by name]}`,
/// with `instructions` `null` when the server gives none.
pub fn context_digest(doc: &Document, server: &Server, scheme: Scheme) -> Fingerprint {
    let mut hasher = Sha256::new();
    {
        let mut w = Writer::new(doc, scheme, Some(&mut hasher));
        w.out.extend(b"{\"instructions\":");
        match server.instructions {
            Some(i) => w.write_value(i),
            None => w.out.extend(b"null"),
        }
        w.out.extend(b",\"prompts\":");
        let prompts: Vec<NodeId> = server.prompts.iter().map(|p| p.node).collect();
        w.write_sorted_array(&prompts, "name");
        w.out.extend(b",\"resourceTemplates\":");
        let templates: Vec<NodeId> = server.resource_templates.iter().map(|r| r.node).collect();
        w.write_sorted_array(&templates, "name");
        w.out.extend(b",\"resources\":");
        let resources: Vec<NodeId> = server.resources.iter().map(|r| r.node).collect();
        w.write_sorted_array(&resources, "name");
        w.out.push(b'}');
        w.out.finish();
    }
    Fingerprint(hasher.finalize().into())
}

/// Which scheme, if any, gives `hex` (16 to 64 hex digits) for `tools`.
pub fn matches(doc: &Document, tools: &[NodeId], hex: &str) -> Option<Scheme> {
    Scheme::ALL
        .into_iter()
        .find(|&s| tools_fingerprint(doc, tools, s).matches_hex(hex))
}

/// A string decoded for ordering.
enum SortKey<'a> {
    /// A string without lone surrogates, and whether it holds a character
    /// at or above U+E000 (lead byte 0xEE or more), the only ones whose UTF-16
    /// order differs from their code point (and so UTF-8 byte) order. Keys
    /// without one compare as bytes in both schemes: one scan per key instead
    /// of a UTF-16 walk per comparison.
    Text(Cow<'a, str>, bool),
    /// A string with lone surrogates: its UTF-16 code units (Ts) or code points
    /// with surrogates kept as such (Python).
    Units(Vec<u32>),
    /// No such member.
    Missing,
}

impl<'a> SortKey<'a> {
    /// The key of a decoded string without lone surrogates.
    fn text(text: Cow<'a, str>, scheme: Scheme) -> Self {
        let high = scheme == Scheme::Ts && text.bytes().any(|b| b >= 0xee);
        SortKey::Text(text, high)
    }

    /// The key of string node `n`.
    fn of(doc: &'a Document, n: NodeId, scheme: Scheme) -> Self {
        if !doc.has_lone_surrogate(n) {
            return SortKey::text(doc.str(n).unwrap_or_default(), scheme);
        }
        let raw = doc.str_raw(n).unwrap_or_default();
        let mut units = Vec::new();
        let push_char = |c: char, units: &mut Vec<u32>| match scheme {
            Scheme::Ts => {
                let mut b = [0u16; 2];
                units.extend(c.encode_utf16(&mut b).iter().map(|&u| u as u32));
            }
            Scheme::Python => units.push(c as u32),
        };
        for_each_unit(raw, |u| match u {
            Unit::Text(t) => t.chars().for_each(|c| push_char(c, &mut units)),
            Unit::Char(c) => push_char(c, &mut units),
            Unit::LoneSurrogate(s) => units.push(s as u32),
        });
        SortKey::Units(units)
    }

    fn units(&self, scheme: Scheme) -> Vec<u32> {
        match self {
            SortKey::Units(u) => u.clone(),
            SortKey::Text(t, _) => match scheme {
                Scheme::Ts => t.encode_utf16().map(|u| u as u32).collect(),
                Scheme::Python => t.chars().map(|c| c as u32).collect(),
            },
            SortKey::Missing => Vec::new(),
        }
    }

    fn cmp(&self, other: &Self, scheme: Scheme) -> Ordering {
        match (self, other) {
            (SortKey::Missing, SortKey::Missing) => Ordering::Equal,
            (SortKey::Missing, _) => Ordering::Less,
            (_, SortKey::Missing) => Ordering::Greater,
            (SortKey::Text(a, a_high), SortKey::Text(b, b_high)) => match scheme {
                // UTF-8 byte order is code point order.
                Scheme::Ts if *a_high || *b_high => cmp_utf16(a, b),
                // Most keys differ in their first byte: decide that inline
                // rather than through a memcmp call.
                _ => match (a.as_bytes().first(), b.as_bytes().first()) {
                    (Some(x), Some(y)) if x != y => x.cmp(y),
                    _ => a.as_bytes().cmp(b.as_bytes()),
                },
            },
            _ => self.units(scheme).cmp(&other.units(scheme)),
        }
    }
}

/// Compares two strings by UTF-16 code units, as JavaScript's `<` does,
/// without transcoding: only a supplementary character (encoded from
/// U+D800) against a BMP character at or above U+E000 orders differently from
/// code points.
pub fn cmp_utf16(a: &str, b: &str) -> Ordering {
    let (ab, bb) = (a.as_bytes(), b.as_bytes());
    // UTF-8 byte order is code point order, so only the first differing
    // character matters. Bytes before it are shared, and a UTF-8 lead byte
    // fixes the length of its character, so the character boundary at or
    // before the first differing byte is the same in both strings.
    let Some(mut i) = ab.iter().zip(bb).position(|(x, y)| x != y) else {
        return ab.len().cmp(&bb.len());
    };
    while !a.is_char_boundary(i) {
        i -= 1;
    }
    match (a[i..].chars().next(), b[i..].chars().next()) {
        (Some(x), Some(y)) => {
            let (ux, uy) = (first_unit(x), first_unit(y));
            if ux != uy {
                ux.cmp(&uy)
            } else {
                x.cmp(&y)
            }
        }
        // Unreachable: both have a byte at `i`.
        (x, y) => x.cmp(&y),
    }
}

fn first_unit(c: char) -> u32 {
    let c = c as u32;
    if c >= 0x10000 {
        0xd800 + ((c - 0x10000) >> 10)
    } else {
        c
    }
}

/// One item of a list being sorted by name: the first 16 bytes of its name
/// as a big-endian number (`hi`, `lo`) when `prefixed`, and its index.
#[derive(Clone, Copy)]
struct SortSlot {
    hi: u64,
    lo: u64,
    prefixed: bool,
    index: u32,
}

/// The first eight bytes of `b`, zero-padded, as a big-endian number: two
/// such prefixes that differ order as the whole byte strings do, because a
/// string's text never holds a zero byte (a NUL must be escaped), so padding
/// sorts a shorter string first exactly as being a prefix does.
#[inline]
fn prefix8(b: &[u8]) -> u64 {
    if let Some(head) = b.first_chunk::<8>() {
        return u64::from_be_bytes(*head);
    }
    // Shorter keys (`type`, `name`, `items`): byte by byte, no copy call.
    let mut p = 0u64;
    for &c in b {
        p = p << 8 | u64::from(c);
    }
    // An empty key is all padding (a shift by 64 would overflow).
    p.checked_shl(8 * (8 - b.len() as u32)).unwrap_or(0)
}

impl<'d> Writer<'d, '_> {
    /// Writes `items` sorted by their string member `key` (stable; items
    /// without it sort first, as `undefined` and missing keys never compare
    /// less).
    fn write_sorted_array(&mut self, items: &[NodeId], key: &str) {
        let (doc, scheme) = (self.doc, self.scheme);
        let keyed: Vec<(NodeId, SortKey<'_>)> = items
            .iter()
            .map(|&n| {
                let k = doc
                    .get(n, key)
                    .filter(|&v| doc.kind(v) == Kind::String)
                    .map(|v| SortKey::of(doc, v, scheme))
                    .unwrap_or(SortKey::Missing);
                (n, k)
            })
            .collect();
        self.write_sorted(&keyed);
    }

    /// Writes the array of `items` (node, sort key) sorted by key, stably.
    fn write_sorted(&mut self, items: &[(NodeId, SortKey<'_>)]) {
        let (doc, scheme) = (self.doc, self.scheme);
        // Each item gets where its data sits, to warm it before it is
        // written: see below. Working that out here, in source order, costs
        // little.
        //
        // What is sorted is a small record per item (moving the keys
        // themselves around would cost more than comparing them), with the
        // first 16 bytes of its key, zero-padded, when the key orders as plain
        // bytes. Two such prefixes that differ order exactly as the whole keys
        // do (see `prefix8`), so most comparisons of a large list (100,000
        // tools) are decided without reading the keys; equal prefixes fall back
        // to the full comparison.
        let mut footprints = Vec::with_capacity(items.len());
        let mut order: Vec<SortSlot> = Vec::with_capacity(items.len());
        for (index, (n, k)) in items.iter().enumerate() {
            footprints.push(doc.footprint(*n));
            let prefix = match k {
                SortKey::Text(t, false) => {
                    let mut p = [0u8; 16];
                    let len = t.len().min(16);
                    p[..len].copy_from_slice(&t.as_bytes()[..len]);
                    Some(u128::from_be_bytes(p))
                }
                _ => None,
            };
            order.push(SortSlot {
                hi: prefix.map_or(0, |p| (p >> 64) as u64),
                lo: prefix.map_or(0, |p| p as u64),
                prefixed: prefix.is_some(),
                index: index as u32,
            });
        }
        // Equal keys keep their list order through the index: the result is
        // that of a stable sort, without a stable sort's scratch buffer.
        order.sort_unstable_by(|a, b| {
            if a.prefixed && b.prefixed && (a.hi, a.lo) != (b.hi, b.lo) {
                (a.hi, a.lo).cmp(&(b.hi, b.lo))
            } else {
                items[a.index as usize]
                    .1
                    .cmp(&items[b.index as usize].1, scheme)
                    .then(a.index.cmp(&b.index))
            }
        });
        // In name order, a large list jumps all over the document, and
        // writing each item would wait on one cache miss after another: warm
        // the item a few places ahead so that its memory reads overlap.
        //
        // A warm stalls on its first reads, though: the page-table walk and
        // the first cache line of each of the item's two regions (text and
        // node records). So every BATCH items, the items BATCH to 2*BATCH
        // places ahead get just those first reads, together in one tight
        // loop, where all of them are in flight at once: one stall for the
        // batch instead of one per item (measured: about 10 ms less on
        // 100,000 tools).
        const AHEAD: usize = 4;
        const BATCH: usize = 16;
        self.out.push(b'[');
        for (i, slot) in order.iter().enumerate() {
            if i % BATCH == 0 {
                let mut acc = 0u64;
                for s in order.iter().skip(i + BATCH).take(BATCH) {
                    acc = acc.wrapping_add(doc.touch(&footprints[s.index as usize]));
                }
                std::hint::black_box(acc);
            }
            if let Some(ahead) = order.get(i + AHEAD) {
                std::hint::black_box(doc.warm(&footprints[ahead.index as usize]));
            }
            if i > 0 {
                self.out.push(b',');
            }
            self.write_value(items[slot.index as usize].0);
        }
        self.out.push(b']');
    }

    fn write_value(&mut self, n: NodeId) {
        self.out.flush_if_full();
        let doc = self.doc;
        // Most values are strings without escapes, which JSON.stringify
        // writes as they are (unescaped JSON text holds no `"`, `\\` or
        // control character): one read of the node.
        if self.scheme == Scheme::Ts {
            if let Some(raw) = doc.unescaped_bytes(n) {
                self.out.push(b'"');
                self.out.extend(raw);
                self.out.push(b'"');
                return;
            }
        }
        match doc.kind(n) {
            Kind::Null => self.out.extend(b"null"),
            Kind::Bool => self.out.extend(if doc.as_bool(n) == Some(true) {
                b"true"
            } else {
                b"false"
            }),
            Kind::Number => write_number(doc.raw(n), self.scheme, &mut self.out),
            Kind::String => self.write_string(n),
            Kind::Array => {
                self.out.push(b'[');
                for (i, c) in doc.children(n).enumerate() {
                    if i > 0 {
                        self.out.push(b',');
                    }
                    self.write_value(c);
                }
                self.out.push(b']');
            }
            Kind::Object => self.write_object(n),
        }
    }

    /// The raw text of key `k` when its order under the scheme is the order
    /// of those raw bytes: no escapes (so the raw text is the decoded text,
    /// whose UTF-8 byte order is code point order) and, for ts, no character
    /// from U+E000 up, the only ones whose UTF-16 order differs.
    #[inline]
    fn byte_ordered_key(&self, k: NodeId) -> Option<&'d [u8]> {
        let raw = self.doc.unescaped_bytes(k)?;
        if self.scheme == Scheme::Ts && raw.iter().any(|&b| b >= 0xee) {
            return None;
        }
        Some(raw)
    }

    fn write_object(&mut self, n: NodeId) {
        let doc = self.doc;
        // Fast path, taken by nearly every real object: all keys order as
        // their raw bytes, so they sort on an 8-byte prefix read once per key
        // with no decoding, in the writer's reused stack.
        let mark = self.members.len();
        for (key, value) in doc.members(n).into_iter().flatten() {
            let Some(raw) = self.byte_ordered_key(key) else {
                self.members.truncate(mark);
                return self.write_object_decoded(n);
            };
            self.members.push(Member {
                prefix: prefix8(raw),
                raw,
                key,
                value,
            });
        }
        // Stable, so among duplicate keys the last stays last; it is the one
        // that JSON.parse and json.loads keep.
        self.members[mark..].sort_by(|a, b| a.prefix.cmp(&b.prefix).then_with(|| a.raw.cmp(b.raw)));
        // Only a document with duplicate keys can have equal neighbours here.
        let dedupe = !doc.duplicates().is_empty();
        let end = self.members.len();
        self.out.push(b'{');
        let mut first = true;
        for i in mark..end {
            let m = self.members[i];
            if dedupe && i + 1 < end {
                let next = self.members[i + 1];
                if next.prefix == m.prefix && next.raw == m.raw {
                    continue;
                }
            }
            if !first {
                self.out.push(b',');
            }
            first = false;
            if self.scheme == Scheme::Ts {
                // A byte-ordered key is unescaped text, which JSON.stringify
                // writes as it is.
                self.out.push(b'"');
                self.out.extend(m.raw);
                self.out.extend(b"\":");
            } else {
                self.write_string(m.key);
                self.out.push(b':');
            }
            self.write_value(m.value);
        }
        self.out.push(b'}');
        self.members.truncate(mark);
    }

    /// The general case: keys with escapes, lone surrogates or (ts)
    /// characters whose UTF-16 order differs from their code point order.
    fn write_object_decoded(&mut self, n: NodeId) {
        let (doc, scheme) = (self.doc, self.scheme);
        let mut members: Vec<(SortKey<'_>, NodeId, NodeId)> = doc
            .members(n)
            .into_iter()
            .flatten()
            .map(|(k, v)| (SortKey::of(doc, k, scheme), k, v))
            .collect();
        // Stable, so among duplicate keys the last stays last; it is the one that
        // JSON.parse and json.loads keep.
        members.sort_by(|a, b| a.0.cmp(&b.0, scheme));
        // Only a document with duplicate keys can have equal neighbours here.
        let dedupe = !doc.duplicates().is_empty();
        self.out.push(b'{');
        let mut first = true;
        for i in 0..members.len() {
            if dedupe
                && i + 1 < members.len()
                && members[i].0.cmp(&members[i + 1].0, scheme) == Ordering::Equal
            {
                continue;
            }
            if !first {
                self.out.push(b',');
            }
            first = false;
            self.write_string(members[i].1);
            self.out.push(b':');
            self.write_value(members[i].2);
        }
        self.out.push(b'}');
    }

    fn write_string(&mut self, n: NodeId) {
        let (doc, scheme) = (self.doc, self.scheme);
        let out = &mut self.out;
        let raw = doc.str_raw(n).unwrap_or_default();
        out.push(b'"');
        let plain_ok = |t: &str| match scheme {
            // Printable ASCII except the two characters that need escaping is
            // written as is by both languages; JavaScript also writes any other
            // character from U+0020 up literally.
            Scheme::Python => t
                .bytes()
                .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\'),
            Scheme::Ts => t.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\'),
        };
        // Unescaped JSON string text holds no `"`, `\\` or control character (the
        // parser refuses them), so for ts it is already what JSON.stringify writes.
        if !doc.is_escaped(n) && (scheme == Scheme::Ts || plain_ok(raw)) {
            out.extend(raw.as_bytes());
        } else {
            for_each_unit(raw, |u| match u {
                Unit::Text(t) if plain_ok(t) => out.extend(t.as_bytes()),
                Unit::Text(t) => t.chars().for_each(|c| write_char(c, scheme, out)),
                Unit::Char(c) => write_char(c, scheme, out),
                // Both languages write a lone surrogate as a lowercase \u escape.
                Unit::LoneSurrogate(s) => write_u_escape(s as u32, out),
            });
        }
        out.push(b'"');
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn write_u_escape(u: u32, out: &mut Out<'_>) {
    out.extend(&[
        b'\\',
        b'u',
        HEX[(u >> 12 & 0xf) as usize],
        HEX[(u >> 8 & 0xf) as usize],
        HEX[(u >> 4 & 0xf) as usize],
        HEX[(u & 0xf) as usize],
    ]);
}

fn write_char(c: char, scheme: Scheme, out: &mut Out<'_>) {
    match c {
        '"' => out.extend(b"\\\""),
        '\\' => out.extend(b"\\\\"),
        '\n' => out.extend(b"\\n"),
        '\r' => out.extend(b"\\r"),
        '\t' => out.extend(b"\\t"),
        '\u{8}' => out.extend(b"\\b"),
        '\u{c}' => out.extend(b"\\f"),
        c if (c as u32) < 0x20 => write_u_escape(c as u32, out),
        c if scheme == Scheme::Ts || (' '..='~').contains(&c) => {
            let mut b = [0u8; 4];
            out.extend(c.encode_utf8(&mut b).as_bytes());
        }
        c => {
            let mut b = [0u16; 2];
            for &u in c.encode_utf16(&mut b).iter() {
                write_u_escape(u as u32, out);
            }
        }
    }
}

/// Shortest round-trip digits and decimal point position of a finite, non-zero
/// double: `x = 0.d1d2d3… × 10^point`.
///
/// Rust's `{:e}` prints the shortest digits that round-trip, but when `x` lies
/// exactly halfway between the two closest candidates of that length it does
/// not pick the even one, as ECMAScript's Number::toString and Python's repr
/// do: `931443840231012.25` prints as `…012.3` in Rust and `…012.2` in both
/// languages (found by the oracle property test). Such ties are detected and
/// resolved to the even candidate.
fn shortest_digits(x: f64) -> (String, i32) {
    let x = x.abs();
    let s = format!("{x:e}");
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let mut digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    let exp: i32 = exp.parse().unwrap_or(0);
    let k = digits.len();
    // A tie needs x to be exactly a (k+1)-digit decimal ending in 5. The
    // cheap (k+1)-digit rounding rules most values out before the exact
    // expansion (at most 767 significant digits for a double) is computed.
    let near = format!("{x:.k$e}");
    let near_digits: String = near
        .split('e')
        .next()
        .unwrap_or("")
        .chars()
        .filter(|c| c.is_ascii_digit())
        .collect();
    if near_digits.ends_with('5') {
        let exact = format!("{x:.800e}");
        let (em, ee) = exact.split_once('e').unwrap_or((&exact, "0"));
        let exact_digits: String = em.chars().filter(|c| c.is_ascii_digit()).collect();
        let exact_digits = exact_digits.trim_end_matches('0');
        if exact_digits.len() == k + 1
            && exact_digits.ends_with('5')
            && ee.parse::<i32>().ok() == Some(exp)
        {
            let lower = &exact_digits[..k];
            let last = lower.as_bytes()[k - 1] - b'0';
            let even = if last % 2 == 0 {
                Some(lower.to_string())
            } else if last < 9 {
                Some(format!("{}{}", &lower[..k - 1], last + 1))
            } else {
                None
            };
            // Use it only if it still reads back as x (it does, being as
            // close as Rust's choice, but a binade edge is not worth a bug).
            if let Some(even) = even {
                let back = format!("0.{even}e{}", exp + 1).parse::<f64>().ok();
                if back == Some(x) {
                    digits = even;
                }
            }
        }
    }
    (digits, exp + 1)
}

fn is_integer_literal(raw: &str) -> bool {
    !raw.contains(['.', 'e', 'E'])
}

/// A decimal literal without exponent, `-?int.frac`, whose value is not zero
/// and has at most 15 significant digits.
///
/// Every such decimal is the shortest round-trip form of the double nearest
/// to it (doubles hold 15 significant decimal digits exactly, so no shorter
/// decimal reads back as the same double), so both languages print exactly
/// its digits and only the layout needs working out: no float formatting.
struct ShortDecimal<'a> {
    negative: bool,
    /// The integer digits as written (`0` for values below one).
    int: &'a str,
    /// The fraction digits without trailing zeros (leading zeros kept).
    frac: &'a str,
    /// Decimal point position: the value is `0.d1d2… × 10^point`.
    point: i32,
}

impl<'a> ShortDecimal<'a> {
    fn parse(raw: &'a str) -> Option<Self> {
        let (negative, body) = match raw.strip_prefix('-') {
            Some(b) => (true, b),
            None => (false, raw),
        };
        let (int, frac) = body.split_once('.')?;
        if frac.contains(['e', 'E']) {
            return None;
        }
        let frac = frac.trim_end_matches('0');
        let (significant, point) = if int == "0" {
            let lead = frac.len() - frac.trim_start_matches('0').len();
            (frac.len() - lead, -(lead as i32))
        } else {
            (int.len() + frac.len(), int.len() as i32)
        };
        (significant > 0 && significant <= 15).then_some(ShortDecimal {
            negative,
            int,
            frac,
            point,
        })
    }

    /// Writes it as ECMAScript's Number::toString (`point > -6`: no
    /// exponent) or Python's float repr (`point > -4`), if that layout is
    /// positional; false (nothing written) otherwise.
    fn write(&self, scheme: Scheme, out: &mut Out<'_>) -> bool {
        let positional = match scheme {
            Scheme::Ts => self.point > -6,
            Scheme::Python => self.point > -4,
        };
        if !positional {
            return false;
        }
        if self.negative {
            out.push(b'-');
        }
        out.extend(self.int.as_bytes());
        if !self.frac.is_empty() {
            out.push(b'.');
            out.extend(self.frac.as_bytes());
        } else if scheme == Scheme::Python {
            out.extend(b".0");
        }
        true
    }
}

fn write_number(raw: &str, scheme: Scheme, out: &mut Out<'_>) {
    // Short decimals (`0.5`, `1.25`, `100.0`) are common in schemas and costly
    // to format through f64.
    if let Some(d) = ShortDecimal::parse(raw) {
        if d.write(scheme, out) {
            return;
        }
    }
    match scheme {
        Scheme::Python => {
            if is_integer_literal(raw) {
                // Python ints are exact at any size; "-0" is int 0.
                if raw.trim_start_matches('-').bytes().all(|b| b == b'0') {
                    out.push(b'0');
                } else {
                    out.extend(raw.as_bytes());
                }
                return;
            }
            out.extend(python_float_repr(raw.parse::<f64>().unwrap_or(f64::NAN)).as_bytes());
        }
        // An integer literal of at most 15 digits is exact as a double, and
        // ECMAScript prints such a double as its digits: copy it (the common
        // case; formatting through f64 is slow). "-0" is 0 in JavaScript.
        Scheme::Ts if raw.len() <= 15 && is_integer_literal(raw) && raw != "-0" => {
            out.extend(raw.as_bytes())
        }
        Scheme::Ts => out.extend(js_number(raw.parse::<f64>().unwrap_or(f64::NAN)).as_bytes()),
    }
}

/// Python's `repr(float)` as `json.dumps` writes it.
pub fn python_float_repr(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    let (d, point) = shortest_digits(x);
    let mut s = String::new();
    if x < 0.0 {
        s.push('-');
    }
    let k = d.len() as i32;
    if point <= -4 || point > 16 {
        s.push_str(&d[..1]);
        if k > 1 {
            s.push('.');
            s.push_str(&d[1..]);
        }
        let e = point - 1;
        s.push('e');
        s.push(if e < 0 { '-' } else { '+' });
        s.push_str(&format!("{:02}", e.abs()));
    } else if point <= 0 {
        s.push_str("0.");
        s.push_str(&"0".repeat((-point) as usize));
        s.push_str(&d);
    } else if point < k {
        s.push_str(&d[..point as usize]);
        s.push('.');
        s.push_str(&d[point as usize..]);
    } else {
        s.push_str(&d);
        s.push_str(&"0".repeat((point - k) as usize));
        s.push_str(".0");
    }
    s
}

/// ECMAScript's `Number::toString` as `JSON.stringify` writes it (non-finite
/// numbers become `null`).
pub fn js_number(x: f64) -> String {
    if !x.is_finite() {
        return "null".into();
    }
    if x == 0.0 {
        return "0".into();
    }
    let (d, n) = shortest_digits(x);
    let k = d.len() as i32;
    let mut s = String::new();
    if x < 0.0 {
        s.push('-');
    }
    if k <= n && n <= 21 {
        s.push_str(&d);
        s.push_str(&"0".repeat((n - k) as usize));
    } else if 0 < n && n <= 21 {
        s.push_str(&d[..n as usize]);
        s.push('.');
        s.push_str(&d[n as usize..]);
    } else if -6 < n && n <= 0 {
        s.push_str("0.");
        s.push_str(&"0".repeat((-n) as usize));
        s.push_str(&d);
    } else {
        let e = n - 1;
        s.push_str(&d[..1]);
        if k > 1 {
            s.push('.');
            s.push_str(&d[1..]);
        }
        s.push('e');
        s.push(if e < 0 { '-' } else { '+' });
        s.push_str(&e.abs().to_string());
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::json::ParseOptions;

    fn doc(s: &str) -> Document {
        Document::parse(s.as_bytes().to_vec(), &ParseOptions::default()).unwrap()
    }

    fn canon(s: &str, scheme: Scheme) -> String {
        let d = doc(s);
        String::from_utf8(canonical(&d, d.root(), scheme)).unwrap()
    }

    #[test]
    fn ties_between_shortest_candidates_go_to_the_even_digit() {
        // Exactly 931443840231012.25: .2 and .3 both read back; both languages print .2.
        assert_eq!(js_number(931443840231012.2), "931443840231012.2");
        assert_eq!(python_float_repr(931443840231012.2), "931443840231012.2");
        assert_eq!(js_number(0.5), "0.5");
        assert_eq!(js_number(1.5e300), "1.5e+300");
        assert_eq!(js_number(5e-324), "5e-324");
    }

    #[test]
    fn short_decimals_print_as_through_f64() {
        // The fast path for short decimals against the general formatter, over
        // every layout: integer parts of 1 to 15 digits, fractions with leading
        // and trailing zeros, values below 1e-5, and 15 or 16 significant digits.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut checked = 0;
        for _ in 0..20_000 {
            let digits = |len: u64, next: &mut dyn FnMut(u64) -> u64| -> String {
                (0..len)
                    .map(|_| char::from(b'0' + next(10) as u8))
                    .collect()
            };
            let int = match next(3) {
                0 => "0".to_string(),
                _ => {
                    let len = 1 + next(16);
                    let rest = digits(len - 1, &mut next);
                    format!("{}{rest}", 1 + next(9))
                }
            };
            let zeros = "0".repeat(next(8) as usize);
            let frac_len = next(17);
            let frac = format!(
                "{zeros}{}{}",
                digits(frac_len, &mut next),
                "0".repeat(next(3) as usize)
            );
            let sign = if next(4) == 0 { "-" } else { "" };
            let raw = format!("{sign}{int}.{frac}");
            let x: f64 = raw.parse().unwrap();
            for (scheme, slow) in [
                (Scheme::Ts, js_number(x)),
                (Scheme::Python, python_float_repr(x)),
            ] {
                let mut out = Out {
                    buf: Vec::new(),
                    hasher: None,
                };
                if ShortDecimal::parse(&raw).is_some_and(|d| d.write(scheme, &mut out)) {
                    assert_eq!(String::from_utf8(out.buf).unwrap(), slow, "{scheme} {raw}");
                    checked += 1;
                }
            }
        }
        assert!(checked > 10_000, "only {checked} took the fast path");
    }

    #[test]
    fn numbers_in_both_languages() {
        let cases = [
            ("1", "1", "1"),
            ("-0", "0", "0"),
            ("-0.0", "0", "-0.0"),
            ("1.0", "1", "1.0"),
            ("1e2", "100", "100.0"),
            ("1E16", "10000000000000000", "1e+16"),
            ("1e15", "1000000000000000", "1000000000000000.0"),
            ("1e21", "1e+21", "1e+21"),
            ("1e20", "100000000000000000000", "1e+20"),
            ("0.0001", "0.0001", "0.0001"),
            ("0.00001", "0.00001", "1e-05"),
            ("1e-7", "1e-7", "1e-07"),
            ("1.5e-7", "1.5e-7", "1.5e-07"),
            ("0.1", "0.1", "0.1"),
            ("0.5", "0.5", "0.5"),
            ("-0.50", "-0.5", "-0.5"),
            ("100.00", "100", "100.0"),
            ("0.000001", "0.000001", "1e-06"),
            ("0.0000001", "1e-7", "1e-07"),
            ("0.0010", "0.001", "0.001"),
            (
                "123456789012345.5",
                "123456789012345.5",
                "123456789012345.5",
            ),
            ("0.000", "0", "0.0"),
            ("123.456", "123.456", "123.456"),
            ("9007199254740993", "9007199254740992", "9007199254740993"),
            (
                "12345678901234567890",
                "12345678901234567000",
                "12345678901234567890",
            ),
            ("1e400", "null", "Infinity"),
            ("-1e400", "null", "-Infinity"),
            ("5e-324", "5e-324", "5e-324"),
            (
                "1.7976931348623157e308",
                "1.7976931348623157e+308",
                "1.7976931348623157e+308",
            ),
        ];
        for (raw, ts, py) in cases {
            assert_eq!(canon(raw, Scheme::Ts), ts, "ts {raw}");
            assert_eq!(canon(raw, Scheme::Python), py, "python {raw}");
        }
    }

    #[test]
    fn strings_in_both_languages() {
        let s = r#""caf\u00e9 \u2028 \u007f \ud83d\ude00 \u0001 \n \"q\" \/ \ud800""#;
        assert_eq!(
            canon(s, Scheme::Ts),
            "\"café \u{2028} \u{7f} 😀 \\u0001 \\n \\\"q\\\" / \\ud800\""
        );
        assert_eq!(
            canon(s, Scheme::Python),
            r#""caf\u00e9 \u2028 \u007f \ud83d\ude00 \u0001 \n \"q\" / \ud800""#
        );
    }

    #[test]
    fn key_order_differs_between_languages() {
        // U+FF21 (fullwidth A) vs U+1F600: code points put U+FF21 first, UTF-16
        // code units put the emoji's high surrogate (U+D83D) first.
        let s = "{\"\u{ff21}\":1,\"\u{1f600}\":2,\"a\":3}";
        assert_eq!(
            canon(s, Scheme::Ts),
            "{\"a\":3,\"\u{1f600}\":2,\"\u{ff21}\":1}"
        );
        assert_eq!(
            canon(s, Scheme::Python),
            "{\"a\":3,\"\\uff21\":1,\"\\ud83d\\ude00\":2}"
        );
    }

    #[test]
    fn duplicate_keys_last_wins() {
        assert_eq!(
            canon(r#"{"b":1,"a":2,"b":3}"#, Scheme::Ts),
            r#"{"a":2,"b":3}"#
        );
    }

    #[test]
    fn article_example_fingerprint() {
        // The article's `reviewed` list; both of its programs print this value
        // (checked against ../shared/oracles in tests/fingerprint_oracle.rs).
        let d = doc(
            r#"[{"name":"get_forecast","description":"Forecast for a city for the next three days.","inputSchema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]"#,
        );
        let tools = d.array(d.root()).unwrap().to_vec();
        let ts = tools_fingerprint(&d, &tools, Scheme::Ts);
        let py = tools_fingerprint(&d, &tools, Scheme::Python);
        assert_eq!(ts, py, "ASCII-only lists agree across schemes");
        let canon = String::from_utf8(canonical(&d, d.root(), Scheme::Ts)).unwrap();
        let expected = Sha256::digest(canon.as_bytes());
        assert_eq!(ts.0.as_slice(), expected.as_slice());
        assert_eq!(matches(&d, &tools, &ts.short()), Some(Scheme::Ts));
        assert_eq!(matches(&d, &tools, "0000000000000000"), None);
    }

    #[test]
    fn server_fingerprint_orders_by_the_loaded_names_as_by_the_document() {
        // The loader's decoded names stand in for the document's: names equal
        // but for an escaped lone surrogate and a literal U+FFFD (both decode
        // to U+FFFD), duplicate `name` keys (the last wins), escapes, and
        // characters whose UTF-16 and code point orders differ.
        let text = r#"{"tools": [
            {"name": "b\ud800", "x": 1},
            {"name": "b\ufffd", "x": 2},
            {"name": "b\udc00", "x": 3},
            {"name": "zz", "name": "a", "x": 4},
            {"name": "\uff21", "x": 5},
            {"name": "\ud83d\ude00", "x": 6},
            {"name": "a", "x": 7},
            {"name": "caf\u00e9", "x": 8},
            {"name": "same-prefix-longer-than-16-bytes-2", "x": 9},
            {"name": "same-prefix-longer-than-16-bytes-10", "x": 10}
        ]}"#;
        let loaded = crate::manifest::load::load_bytes(
            std::path::Path::new("t.json"),
            text.as_bytes().to_vec(),
            &crate::manifest::load::LoadOptions::default(),
        )
        .unwrap();
        let server = &loaded.servers[0];
        let nodes: Vec<NodeId> = server.tools.iter().map(|t| t.node).collect();
        for scheme in Scheme::ALL {
            assert_eq!(
                server_fingerprint(&loaded.doc, server, scheme),
                tools_fingerprint(&loaded.doc, &nodes, scheme),
                "{scheme}"
            );
        }
    }

    #[test]
    fn prefixes_order_as_the_bytes() {
        // Strings of 0 to 11 bytes over a small alphabet (so prefixes are
        // often shared), no NUL: differing prefixes order as the strings do.
        let alphabet = [b'a', b'b', 0x7f, 0xc3, 0xff];
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut strings = Vec::new();
        for _ in 0..2_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 12) as usize;
            strings.push(
                (0..len)
                    .map(|i| alphabet[(seed >> (8 + i * 3)) as usize % 5])
                    .collect::<Vec<u8>>(),
            );
        }
        for a in &strings {
            for b in strings.iter().take(200) {
                let (pa, pb) = (prefix8(a), prefix8(b));
                if pa != pb {
                    assert_eq!(pa.cmp(&pb), a.cmp(b), "{a:?} {b:?}");
                } else {
                    assert_eq!(a[..a.len().min(8)], b[..b.len().min(8)]);
                }
            }
        }
    }

    #[test]
    fn utf16_comparison() {
        assert_eq!(cmp_utf16("\u{ff21}", "\u{1f600}"), Ordering::Greater);
        assert_eq!(cmp_utf16("\u{d7ff}", "\u{1f600}"), Ordering::Less);
        assert_eq!(cmp_utf16("a", "ab"), Ordering::Less);
        assert_eq!(cmp_utf16("\u{10000}", "\u{10001}"), Ordering::Less);
    }
}
