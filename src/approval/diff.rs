//! Diffing two versions of a server, parameter by parameter.
//!
//! Both sides are [`Server`]s over their own [`Document`]s, from any input
//! kind. Values are compared in canonical form (keys sorted, no whitespace,
//! numbers as Python's `json.dumps` writes them), so reordered tools or keys
//! and reformatted files are not changes. Where two values differ the diff
//! recurses: tool fields, annotations, then JSON Schema through `properties`,
//! `items`, `anyOf`/`oneOf`/`allOf`, `$defs`, `additionalProperties` and the
//! other subschema keywords, down to the keyword that changed.
//!
//! Tools are paired by name (the n-th tool of a name with the n-th of the same
//! name, so a duplicated name cannot hide). A removed and an added tool that
//! are alike (same input schema and similar description, or nearly the same
//! description and parameters) are one renamed tool.
//!
//! Severities follow the table in [`crate::finding::change`]. Text is diffed
//! word by word (`similar`): inserted words make a text change "new text"
//! (high), deletions alone are low, whitespace alone is info. A [`RuleHook`]
//! lets the rules engine look at every new value; a change whose new value
//! trips a rule is high and names the rule.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::time::Duration;

use serde_json::Value;
use similar::{ChangeTag, TextDiff};

use crate::finding::change::{Change, ChangeKind, Location, Subject};
use crate::finding::{LineIndex, Severity};
use crate::fingerprint::{canonical, Scheme};
use crate::manifest::json::{Document, Kind, NodeId};
use crate::manifest::{Loaded, Server};

/// Called on the node of each new value (a changed description, an added
/// parameter's schema …) with its document; returns the ids of the rules the
/// value trips. The rules engine plugs in here.
pub type RuleHook<'h> = dyn Fn(&Document, NodeId) -> Vec<String> + 'h;

/// Options of a diff.
#[derive(Default, Clone, Copy)]
pub struct DiffOptions<'h> {
    /// Runs the rules on new values, when set.
    pub rules: Option<&'h RuleHook<'h>>,
}

/// One side of a diff: a server, its document, and the file it came from.
#[derive(Clone, Copy)]
pub struct Side<'a> {
    /// The file, for locations.
    pub file: &'a str,
    /// The document the server's node ids point into.
    pub doc: &'a Document,
    /// The server.
    pub server: &'a Server,
}

impl<'a> Side<'a> {
    /// The side for `server` of `loaded`.
    pub fn of(loaded: &'a Loaded, server: &'a Server, file: &'a str) -> Self {
        Side {
            file,
            doc: &loaded.doc,
            server,
        }
    }
}

/// Words inserted and deleted between two texts (whitespace-only tokens are
/// not counted), by a word-level diff with a time limit for hostile inputs.
pub fn word_stats(old: &str, new: &str) -> (usize, usize) {
    if old == new {
        return (0, 0);
    }
    let diff = TextDiff::configure()
        .timeout(Duration::from_millis(250))
        .diff_words(old, new);
    let mut ins = 0;
    let mut del = 0;
    for c in diff.iter_all_changes() {
        if c.value().trim().is_empty() {
            continue;
        }
        match c.tag() {
            ChangeTag::Insert => ins += 1,
            ChangeTag::Delete => del += 1,
            ChangeTag::Equal => {}
        }
    }
    (ins, del)
}

/// Words that are new in `new`: inserted tokens whose core (ASCII
/// punctuation trimmed, lowercased) is not among the deleted tokens, so
/// "Nested option." → "Nested." is a deletion, not new text. Invisible
/// characters are not punctuation: inserting them is new text.
pub fn new_words(old: &str, new: &str) -> usize {
    if old == new {
        return 0;
    }
    let diff = TextDiff::configure()
        .timeout(Duration::from_millis(250))
        .diff_words(old, new);
    let core = |s: &str| {
        s.trim_matches(|c: char| c.is_ascii_punctuation() || c.is_whitespace())
            .to_lowercase()
    };
    let mut deleted: Vec<String> = Vec::new();
    let mut inserted: Vec<String> = Vec::new();
    for c in diff.iter_all_changes() {
        if c.value().trim().is_empty() {
            continue;
        }
        match c.tag() {
            ChangeTag::Delete => deleted.push(core(c.value())),
            ChangeTag::Insert => inserted.push(core(c.value())),
            ChangeTag::Equal => {}
        }
    }
    inserted
        .iter()
        .filter(|w| !w.is_empty() && !deleted.contains(w))
        .count()
}

/// Severity and summary of a text change: new words make it new text
/// (`new_text`), deletions alone `removed`, whitespace alone info.
fn text_severity(
    old: &str,
    new: &str,
    new_text: Severity,
    removed: Severity,
) -> (Severity, String, bool) {
    let (ins, del) = word_stats(old, new);
    if ins == 0 && del == 0 {
        return (Severity::Info, "whitespace only".into(), false);
    }
    let summary = format!("+{ins} words, -{del} words");
    if new_words(old, new) > 0 {
        (new_text, summary, true)
    } else {
        (removed, summary, false)
    }
}

fn lower(s: Severity) -> Severity {
    match s {
        Severity::High => Severity::Medium,
        Severity::Medium => Severity::Low,
        _ => Severity::Info,
    }
}

fn ptr(base: &str, token: &str) -> String {
    let mut out = String::with_capacity(base.len() + token.len() + 1);
    out.push_str(base);
    out.push('/');
    for c in token.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
    out
}

/// What the changes being emitted are about.
#[derive(Clone)]
struct Ctx {
    subject: Subject,
    name: Option<String>,
    /// Under `outputSchema`: severities one level lower, except new text.
    output: bool,
}

/// A side's object members, decoded, duplicates resolved as JSON parsers do
/// (the last value wins, at the first key's position).
fn entries(doc: &Document, obj: Option<NodeId>) -> Vec<(String, NodeId)> {
    let mut out: Vec<(String, NodeId)> = Vec::new();
    let Some(obj) = obj else { return out };
    let Some(members) = doc.members(obj) else {
        return out;
    };
    for (k, v) in members {
        let key = doc.str(k).unwrap_or_default().into_owned();
        match out.iter_mut().find(|(n, _)| *n == key) {
            Some(slot) => slot.1 = v,
            None => out.push((key, v)),
        }
    }
    out
}

fn lookup(entries: &[(String, NodeId)], key: &str) -> Option<NodeId> {
    entries.iter().find(|(k, _)| k == key).map(|&(_, v)| v)
}

/// Keys of both sides: the old side's order, then keys only the new side has.
fn union_keys<'e>(b: &'e [(String, NodeId)], a: &'e [(String, NodeId)]) -> Vec<&'e str> {
    let mut keys: Vec<&str> = b.iter().map(|(k, _)| k.as_str()).collect();
    for (k, _) in a {
        if !keys.contains(&k.as_str()) {
            keys.push(k);
        }
    }
    keys
}

fn string_set(doc: &Document, node: Option<NodeId>) -> Vec<String> {
    node.and_then(|n| doc.array(n))
        .map(|a| {
            a.iter()
                .filter_map(|&n| doc.str(n).map(|s| s.into_owned()))
                .collect()
        })
        .unwrap_or_default()
}

fn hash_bytes(b: &[u8]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    b.hash(&mut h);
    h.finish()
}

const BOUNDS: &[&str] = &[
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "minContains",
    "maxContains",
];

/// Keywords holding one subschema.
const SUBSCHEMA: &[&str] = &[
    "items",
    "additionalItems",
    "unevaluatedItems",
    "contains",
    "not",
    "if",
    "then",
    "else",
    "propertyNames",
];

/// Keywords holding a list of subschemas.
const SCHEMA_LISTS: &[&str] = &["anyOf", "oneOf", "allOf", "prefixItems"];

/// Keywords holding a map of named subschemas.
const SCHEMA_MAPS: &[&str] = &[
    "$defs",
    "definitions",
    "patternProperties",
    "dependentSchemas",
];

/// The annotation hints, their defaults in the MCP spec, and the value that
/// claims more power.
const HINTS: &[(&str, bool, bool)] = &[
    ("readOnlyHint", false, false),
    ("destructiveHint", true, true),
    ("openWorldHint", true, true),
    ("idempotentHint", false, false),
];

/// The diff engine for one pair of servers.
struct Differ<'a, 'h> {
    b: Side<'a>,
    a: Side<'a>,
    opts: DiffOptions<'h>,
    server: String,
    b_lines: Option<LineIndex>,
    a_lines: Option<LineIndex>,
    out: Vec<Change>,
}

impl Differ<'_, '_> {
    fn same(&self, b: NodeId, a: NodeId) -> bool {
        let (bd, ad) = (self.b.doc, self.a.doc);
        match (bd.kind(b), ad.kind(a)) {
            (Kind::String, Kind::String) => bd.str(b) == ad.str(a),
            (Kind::Bool, Kind::Bool) => bd.as_bool(b) == ad.as_bool(a),
            (Kind::Null, Kind::Null) => true,
            (Kind::Number, Kind::Number) => same_number(bd.raw(b), ad.raw(a)),
            (x, y) if x != y => false,
            _ => canonical(bd, b, Scheme::Python) == canonical(ad, a, Scheme::Python),
        }
    }

    /// Like [`Self::same`] for optional members; a member set to `null` is
    /// the same as an absent one (as the loaders read them).
    fn same_opt(&self, b: Option<NodeId>, a: Option<NodeId>) -> bool {
        let b = b.filter(|&n| self.b.doc.kind(n) != Kind::Null);
        let a = a.filter(|&n| self.a.doc.kind(n) != Kind::Null);
        match (b, a) {
            (None, None) => true,
            (Some(b), Some(a)) => self.same(b, a),
            _ => false,
        }
    }

    fn location(&mut self, after: bool, node: NodeId) -> Location {
        let (side, lines) = if after {
            (self.a, &mut self.a_lines)
        } else {
            (self.b, &mut self.b_lines)
        };
        let text = side.doc.text();
        let idx = lines.get_or_insert_with(|| LineIndex::new(text));
        let span = side.doc.span(node);
        let (line, column) = idx.line_col(text, span.start);
        let (end_line, end_column) = idx.line_col(text, span.end);
        Location {
            file: side.file.to_string(),
            span,
            line,
            column,
            end_line,
            end_column,
        }
    }

    /// Emits a change with before/after values taken from nodes.
    #[allow(clippy::too_many_arguments)]
    fn emit(
        &mut self,
        ctx: &Ctx,
        kind: ChangeKind,
        severity: Severity,
        path: String,
        b: Option<NodeId>,
        a: Option<NodeId>,
        message: String,
    ) {
        let before = b.map(|n| self.b.doc.to_value(n));
        let after = a.map(|n| self.a.doc.to_value(n));
        self.emit_values(ctx, kind, severity, path, (before, b), (after, a), message);
    }

    /// Emits a change with explicit values and the nodes to locate them by.
    #[allow(clippy::too_many_arguments)]
    fn emit_values(
        &mut self,
        ctx: &Ctx,
        kind: ChangeKind,
        mut severity: Severity,
        path: String,
        (before, b_loc): (Option<Value>, Option<NodeId>),
        (after, a_loc): (Option<Value>, Option<NodeId>),
        mut message: String,
    ) {
        let mut rules = Vec::new();
        if let (Some(hook), Some(node), Some(_)) = (self.opts.rules, a_loc, after.as_ref()) {
            rules = hook(self.a.doc, node);
            rules.sort();
            rules.dedup();
            if !rules.is_empty() {
                severity = Severity::High;
                message.push_str(&format!("; the new text trips {}", rules.join(", ")));
            }
        }
        let before_location = b_loc.map(|n| self.location(false, n));
        let after_location = a_loc.map(|n| self.location(true, n));
        self.out.push(Change {
            kind,
            severity,
            server: self.server.clone(),
            subject: ctx.subject,
            tool: ctx.name.clone(),
            path,
            before,
            after,
            before_location,
            after_location,
            rules,
            message,
        });
    }

    /// A string field (title, description, instructions …) that differs.
    #[allow(clippy::too_many_arguments)]
    fn text_field(
        &mut self,
        ctx: &Ctx,
        kind: ChangeKind,
        what: &str,
        path: String,
        b: Option<NodeId>,
        a: Option<NodeId>,
        new_text: Severity,
        removed: Severity,
    ) {
        if self.same_opt(b, a) {
            return;
        }
        let bs = b.and_then(|n| self.b.doc.str(n)).map(|s| s.into_owned());
        let as_ = a.and_then(|n| self.a.doc.str(n)).map(|s| s.into_owned());
        let (bt, at) = (bs.as_deref().unwrap_or(""), as_.as_deref().unwrap_or(""));
        let odd = |d: &Document, n: Option<NodeId>| {
            n.is_some_and(|n| !matches!(d.kind(n), Kind::String | Kind::Null))
        };
        let non_string = odd(self.b.doc, b) || odd(self.a.doc, a);
        let (mut sev, summary, inserted) = if non_string {
            (new_text, "value is not a string".to_string(), true)
        } else {
            text_severity(bt, at, new_text, removed)
        };
        let verb = match (b, a) {
            (None, _) => "added",
            (_, None) => "removed",
            _ => "changed",
        };
        if ctx.output && !inserted {
            sev = lower(sev);
        }
        self.emit(
            ctx,
            kind,
            sev,
            path,
            b,
            a,
            format!("{what} {verb} ({summary})"),
        );
    }

    fn diff(&mut self) {
        let tool_ctx = |name: &str| Ctx {
            subject: Subject::Tool,
            name: Some(name.to_string()),
            output: false,
        };
        let (bs, as_) = (self.b.server, self.a.server);

        // Tools: pair by (name, occurrence).
        let pairs = pair_by_name(
            bs.tools.iter().map(|t| t.name.as_str()),
            as_.tools.iter().map(|t| t.name.as_str()),
        );
        let mut removed = Vec::new();
        let mut added = Vec::new();
        for p in &pairs {
            match *p {
                (Some(i), Some(j)) => {
                    let (bt, at) = (bs.tools[i].node, as_.tools[j].node);
                    if !self.same(bt, at) {
                        self.diff_tool(&tool_ctx(&as_.tools[j].name), bt, at);
                    }
                }
                (Some(i), None) => removed.push(i),
                (None, Some(j)) => added.push(j),
                (None, None) => {}
            }
        }
        let renames = self.find_renames(&removed, &added);
        let renamed_b: std::collections::HashSet<usize> = renames.iter().map(|r| r.0).collect();
        let renamed_a: std::collections::HashSet<usize> = renames.iter().map(|r| r.1).collect();
        for &(i, j) in &renames {
            let (bt, at) = (&bs.tools[i], &as_.tools[j]);
            let ctx = tool_ctx(&at.name);
            self.emit(
                &ctx,
                ChangeKind::ToolRenamed,
                ChangeKind::ToolRenamed.base_severity(),
                "/name".into(),
                Some(bt.name_node),
                Some(at.name_node),
                format!("tool `{}` renamed to `{}`", bt.name, at.name),
            );
            self.diff_tool(&ctx, bt.node, at.node);
        }
        for &i in removed.iter().filter(|i| !renamed_b.contains(i)) {
            let t = &bs.tools[i];
            self.emit(
                &tool_ctx(&t.name),
                ChangeKind::ToolRemoved,
                ChangeKind::ToolRemoved.base_severity(),
                String::new(),
                Some(t.node),
                None,
                format!("tool `{}` removed", t.name),
            );
        }
        for &j in added.iter().filter(|j| !renamed_a.contains(j)) {
            let t = &as_.tools[j];
            let params = t.params(self.a.doc).len();
            self.emit(
                &tool_ctx(&t.name),
                ChangeKind::ToolAdded,
                ChangeKind::ToolAdded.base_severity(),
                String::new(),
                None,
                Some(t.node),
                format!(
                    "tool `{}` added ({params} parameter{})",
                    t.name,
                    if params == 1 { "" } else { "s" }
                ),
            );
        }

        self.diff_prompts();
        self.diff_resources(false);
        self.diff_resources(true);

        let server_ctx = Ctx {
            subject: Subject::Server,
            name: None,
            output: false,
        };
        self.text_field(
            &server_ctx,
            ChangeKind::InstructionsChanged,
            "instructions",
            "/instructions".into(),
            bs.instructions,
            as_.instructions,
            Severity::High,
            Severity::Low,
        );
        if !self.same_opt(bs.server_info, as_.server_info) {
            let be = entries(self.b.doc, bs.server_info);
            let ae = entries(self.a.doc, as_.server_info);
            for key in union_keys(&be, &ae) {
                let (b, a) = (lookup(&be, key), lookup(&ae, key));
                if !self.same_opt(b, a) {
                    self.emit(
                        &server_ctx,
                        ChangeKind::ServerInfoChanged,
                        Severity::Info,
                        ptr("/serverInfo", key),
                        b,
                        a,
                        format!("serverInfo `{key}` changed"),
                    );
                }
            }
        }
    }

    /// Greedy pairing of removed and added tools that are alike.
    fn find_renames(&self, removed: &[usize], added: &[usize]) -> Vec<(usize, usize)> {
        if removed.is_empty() || added.is_empty() {
            return Vec::new();
        }
        let (bs, as_) = (self.b.server, self.a.server);
        let schema_hash = |doc: &Document, n: Option<NodeId>| {
            n.map(|n| hash_bytes(&canonical(doc, n, Scheme::Python)))
                .unwrap_or(0)
        };
        // Per tool: its schema's hash, its description and its parameter names.
        let info = |doc: &Document, tools: &[crate::manifest::Tool], idx: &[usize]| {
            idx.iter()
                .map(|&i| {
                    let t = &tools[i];
                    (
                        schema_hash(doc, t.input_schema),
                        t.description_text(doc).into_owned(),
                        t.params(doc)
                            .iter()
                            .filter_map(|p| doc.str(p.key).map(|s| s.into_owned()))
                            .collect::<Vec<String>>(),
                    )
                })
                .collect::<Vec<_>>()
        };
        let b_info = info(self.b.doc, &bs.tools, removed);
        let a_info = info(self.a.doc, &as_.tools, added);
        // Candidates: every pair when there are few; otherwise tools with the
        // same description or the same schema. Word
        // diffs are the costly part, so their number has a budget: past it
        // only identical descriptions are compared, which keeps a server that
        // renames all of its 10,000 look-alike tools under a second.
        let all_pairs = removed.len() * added.len() <= 4096;
        let mut by_schema: HashMap<u64, Vec<usize>> = HashMap::new();
        let mut by_desc: HashMap<&str, Vec<usize>> = HashMap::new();
        for (k, info) in a_info.iter().enumerate() {
            by_schema.entry(info.0).or_default().push(k);
            by_desc.entry(info.1.as_str()).or_default().push(k);
        }
        let mut budget: usize = 20_000;
        let mut scored: Vec<(f32, usize, usize)> = Vec::new();
        for (ri, bi) in b_info.iter().enumerate() {
            let mut candidates: Vec<usize> = if all_pairs {
                (0..a_info.len()).collect()
            } else {
                // A bucket of more than 64 look-alikes is ambiguous: any
                // pairing would be a guess, so none is made from it.
                let small = |v: &&Vec<usize>| v.len() <= 64;
                let mut c: Vec<usize> = by_desc
                    .get(bi.1.as_str())
                    .filter(small)
                    .cloned()
                    .unwrap_or_default();
                c.extend(
                    by_schema
                        .get(&bi.0)
                        .filter(small)
                        .into_iter()
                        .flatten()
                        .copied(),
                );
                c
            };
            candidates.sort_unstable();
            candidates.dedup();
            for ai in candidates {
                let a = &a_info[ai];
                let same_schema = bi.0 == a.0;
                let ratio = if bi.1 == a.1 {
                    1.0
                } else if budget == 0 {
                    continue;
                } else {
                    budget -= 1;
                    TextDiff::configure()
                        .timeout(Duration::from_millis(50))
                        .diff_words(bi.1.as_str(), a.1.as_str())
                        .ratio()
                };
                let union =
                    bi.2.iter()
                        .chain(a.2.iter().filter(|p| !bi.2.contains(p)))
                        .count();
                let common = bi.2.iter().filter(|p| a.2.contains(p)).count();
                let jaccard = if union == 0 {
                    1.0
                } else {
                    common as f32 / union as f32
                };
                let alike = (same_schema && ratio >= 0.5) || (ratio >= 0.8 && jaccard >= 0.5);
                if alike {
                    scored.push((ratio + if same_schema { 1.0 } else { jaccard }, ri, ai));
                }
            }
        }
        scored.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.cmp(&y.1)).then(x.2.cmp(&y.2)));
        let mut used_b = vec![false; removed.len()];
        let mut used_a = vec![false; added.len()];
        let mut out = Vec::new();
        for (_, ri, ai) in scored {
            if !used_b[ri] && !used_a[ai] {
                used_b[ri] = true;
                used_a[ai] = true;
                out.push((removed[ri], added[ai]));
            }
        }
        out.sort();
        out
    }

    fn diff_tool(&mut self, ctx: &Ctx, bt: NodeId, at: NodeId) {
        let be = entries(self.b.doc, Some(bt));
        let ae = entries(self.a.doc, Some(at));
        for key in union_keys(&be, &ae) {
            let (b, a) = (lookup(&be, key), lookup(&ae, key));
            if key == "name" || self.same_opt(b, a) {
                continue;
            }
            let path = ptr("", key);
            match key {
                "title" => self.text_field(
                    ctx,
                    ChangeKind::TitleChanged,
                    "title",
                    path,
                    b,
                    a,
                    Severity::Medium,
                    Severity::Low,
                ),
                "description" => self.text_field(
                    ctx,
                    ChangeKind::DescriptionChanged,
                    "description",
                    path,
                    b,
                    a,
                    Severity::High,
                    Severity::Low,
                ),
                "annotations" => self.diff_annotations(ctx, b, a),
                "inputSchema" => self.diff_schema(ctx, &path, b, a),
                "outputSchema" => {
                    let null =
                        |d: &Document, n: Option<NodeId>| n.is_none_or(|n| d.kind(n) == Kind::Null);
                    if null(self.b.doc, b) || null(self.a.doc, a) {
                        let verb = if null(self.b.doc, b) {
                            "added"
                        } else {
                            "removed"
                        };
                        self.emit(
                            ctx,
                            ChangeKind::OutputSchemaChanged,
                            ChangeKind::OutputSchemaChanged.base_severity(),
                            path,
                            b,
                            a,
                            format!("outputSchema {verb}"),
                        );
                    } else {
                        let out_ctx = Ctx {
                            output: true,
                            ..ctx.clone()
                        };
                        self.diff_schema(&out_ctx, &path, b, a);
                    }
                }
                "icons" => self.emit(
                    ctx,
                    ChangeKind::IconsChanged,
                    Severity::Low,
                    path,
                    b,
                    a,
                    "icons changed".into(),
                ),
                "_meta" => self.emit(
                    ctx,
                    ChangeKind::MetaChanged,
                    Severity::Low,
                    path,
                    b,
                    a,
                    "_meta changed".into(),
                ),
                _ => self.emit(
                    ctx,
                    ChangeKind::UnknownFieldChanged,
                    Severity::Medium,
                    path,
                    b,
                    a,
                    format!("field `{key}` changed"),
                ),
            }
        }
    }

    fn diff_annotations(&mut self, ctx: &Ctx, b: Option<NodeId>, a: Option<NodeId>) {
        let bad = |d: &Document, n: Option<NodeId>| {
            n.is_some_and(|n| d.kind(n) != Kind::Object && d.kind(n) != Kind::Null)
        };
        if bad(self.b.doc, b) || bad(self.a.doc, a) {
            self.emit(
                ctx,
                ChangeKind::AnnotationChanged,
                Severity::Low,
                "/annotations".into(),
                b,
                a,
                "annotations changed".into(),
            );
            return;
        }
        let be = entries(
            self.b.doc,
            b.filter(|&n| self.b.doc.kind(n) == Kind::Object),
        );
        let ae = entries(
            self.a.doc,
            a.filter(|&n| self.a.doc.kind(n) == Kind::Object),
        );
        for key in union_keys(&be, &ae) {
            let (bv, av) = (lookup(&be, key), lookup(&ae, key));
            if self.same_opt(bv, av) {
                continue;
            }
            let path = ptr("/annotations", key);
            let hint = HINTS.iter().find(|h| h.0 == key);
            let (kind, sev, msg) = match hint {
                Some(&(name, default, escalated)) => {
                    let eff = |d: &Document, n: Option<NodeId>| match n {
                        None => Some(default),
                        Some(n) => d.as_bool(n),
                    };
                    match (eff(self.b.doc, bv), eff(self.a.doc, av)) {
                        (Some(x), Some(y)) if x == y => (
                            ChangeKind::AnnotationChanged,
                            Severity::Info,
                            format!(
                                "{name} now {} explicitly (same meaning)",
                                if av.is_some() { "set" } else { "unset" }
                            ),
                        ),
                        (Some(x), Some(y)) if y == escalated && x != escalated => (
                            ChangeKind::AnnotationEscalated,
                            Severity::High,
                            format!("{name} {x} → {y}: the tool now claims more power"),
                        ),
                        (Some(x), Some(y)) => (
                            ChangeKind::AnnotationChanged,
                            Severity::Low,
                            format!("{name} {x} → {y}"),
                        ),
                        _ => (
                            ChangeKind::AnnotationChanged,
                            Severity::Low,
                            format!("{name} changed (not a boolean)"),
                        ),
                    }
                }
                None => (
                    ChangeKind::AnnotationChanged,
                    Severity::Low,
                    format!("annotation `{key}` changed"),
                ),
            };
            self.emit(ctx, kind, sev, path, bv, av, msg);
        }
    }

    /// Severity for a schema change: one level lower under `outputSchema`.
    fn side(&self, ctx: &Ctx, kind: ChangeKind) -> Severity {
        let s = kind.base_severity();
        if ctx.output {
            lower(s)
        } else {
            s
        }
    }

    fn type_summary(doc: &Document, schema: NodeId) -> String {
        match doc.get(schema, "type") {
            Some(t) if doc.kind(t) == Kind::String => doc.str(t).unwrap_or_default().into_owned(),
            Some(t) if doc.kind(t) == Kind::Array => string_set(doc, Some(t)).join("|"),
            _ => "any".into(),
        }
    }

    /// Diffs two schemas at `path`; a missing side is an empty schema.
    fn diff_schema(&mut self, ctx: &Ctx, path: &str, b: Option<NodeId>, a: Option<NodeId>) {
        if self.same_opt(b, a) {
            return;
        }
        let is_obj = |d: &Document, n: Option<NodeId>| n.is_none_or(|n| d.kind(n) == Kind::Object);
        if !is_obj(self.b.doc, b) || !is_obj(self.a.doc, a) {
            let sev = self.side(ctx, ChangeKind::ParamTypeChanged);
            self.emit(
                ctx,
                ChangeKind::ParamTypeChanged,
                sev,
                path.to_string(),
                b,
                a,
                "schema changed shape".into(),
            );
            return;
        }
        let be = entries(self.b.doc, b);
        let ae = entries(self.a.doc, a);
        let b_req = string_set(self.b.doc, lookup(&be, "required"));
        let a_req = string_set(self.a.doc, lookup(&ae, "required"));
        let b_props = entries(
            self.b.doc,
            lookup(&be, "properties").filter(|&n| self.b.doc.kind(n) == Kind::Object),
        );
        let a_props = entries(
            self.a.doc,
            lookup(&ae, "properties").filter(|&n| self.a.doc.kind(n) == Kind::Object),
        );
        for key in union_keys(&be, &ae) {
            let (bv, av) = (lookup(&be, key), lookup(&ae, key));
            if key == "required" {
                let arr =
                    |d: &Document, n: Option<NodeId>| n.is_none_or(|n| d.kind(n) == Kind::Array);
                if arr(self.b.doc, bv) && arr(self.a.doc, av) {
                    self.diff_required(ctx, path, (&b_req, bv), (&a_req, av), &b_props, &a_props);
                } else if !self.same_opt(bv, av) {
                    // Not a list of names (draft-3 style or malformed): report it whole.
                    let sev = self.side(ctx, ChangeKind::ParamRequiredChanged);
                    self.emit(
                        ctx,
                        ChangeKind::ParamRequiredChanged,
                        sev,
                        ptr(path, key),
                        bv,
                        av,
                        "`required` changed".into(),
                    );
                }
                continue;
            }
            if self.same_opt(bv, av) {
                continue;
            }
            let kpath = ptr(path, key);
            let simple = |k: ChangeKind| Some(k);
            let kind = match key {
                "properties" => {
                    let objs = |d: &Document, n: Option<NodeId>| {
                        n.is_none_or(|n| d.kind(n) == Kind::Object)
                    };
                    if objs(self.b.doc, bv) && objs(self.a.doc, av) {
                        self.diff_properties(ctx, &kpath, &b_props, &a_props, &a_req);
                        None
                    } else {
                        simple(ChangeKind::ParamTypeChanged)
                    }
                }
                "type" => simple(ChangeKind::ParamTypeChanged),
                "enum" | "const" => simple(ChangeKind::ParamEnumChanged),
                "default" => simple(ChangeKind::ParamDefaultChanged),
                "description" => {
                    self.text_field(
                        ctx,
                        ChangeKind::ParamDescriptionChanged,
                        "description",
                        kpath.clone(),
                        bv,
                        av,
                        Severity::High,
                        Severity::Low,
                    );
                    None
                }
                "title" | "examples" | "$comment" => {
                    let both_str = bv.is_none_or(|n| self.b.doc.kind(n) == Kind::String)
                        && av.is_none_or(|n| self.a.doc.kind(n) == Kind::String);
                    if both_str {
                        self.text_field(
                            ctx,
                            ChangeKind::SchemaChanged,
                            key,
                            kpath.clone(),
                            bv,
                            av,
                            Severity::High,
                            Severity::Low,
                        );
                        None
                    } else {
                        simple(ChangeKind::SchemaChanged)
                    }
                }
                "format" => simple(ChangeKind::ParamFormatChanged),
                "pattern" => simple(ChangeKind::ParamPatternChanged),
                k if BOUNDS.contains(&k) => simple(ChangeKind::ParamBoundsChanged),
                "additionalProperties" | "unevaluatedProperties" => {
                    let obj = |d: &Document, n: Option<NodeId>| {
                        n.is_some_and(|n| d.kind(n) == Kind::Object)
                    };
                    if obj(self.b.doc, bv) && obj(self.a.doc, av) {
                        self.diff_schema(ctx, &kpath, bv, av);
                        None
                    } else {
                        simple(ChangeKind::ParamAdditionalPropertiesChanged)
                    }
                }
                k if SUBSCHEMA.contains(&k) => {
                    let arr = |d: &Document, n: Option<NodeId>| {
                        n.is_some_and(|n| d.kind(n) == Kind::Array)
                    };
                    if arr(self.b.doc, bv) && arr(self.a.doc, av) {
                        self.diff_schema_list(ctx, &kpath, bv, av);
                    } else {
                        self.diff_schema(ctx, &kpath, bv, av);
                    }
                    None
                }
                k if SCHEMA_LISTS.contains(&k) => {
                    self.diff_schema_list(ctx, &kpath, bv, av);
                    None
                }
                k if SCHEMA_MAPS.contains(&k) => {
                    self.diff_schema_map(ctx, &kpath, bv, av);
                    None
                }
                _ => simple(ChangeKind::SchemaChanged),
            };
            if let Some(kind) = kind {
                let sev = self.side(ctx, kind);
                let verb = match (bv, av) {
                    (None, _) => "added",
                    (_, None) => "removed",
                    _ => "changed",
                };
                self.emit(ctx, kind, sev, kpath, bv, av, format!("`{key}` {verb}"));
            }
        }
    }

    fn diff_properties(
        &mut self,
        ctx: &Ctx,
        path: &str,
        b_props: &[(String, NodeId)],
        a_props: &[(String, NodeId)],
        a_req: &[String],
    ) {
        for name in union_keys(b_props, a_props) {
            let (bv, av) = (lookup(b_props, name), lookup(a_props, name));
            let ppath = ptr(path, name);
            match (bv, av) {
                (Some(_), Some(_)) => self.diff_schema(ctx, &ppath, bv, av),
                (Some(_), None) => {
                    let sev = self.side(ctx, ChangeKind::ParamRemoved);
                    self.emit(
                        ctx,
                        ChangeKind::ParamRemoved,
                        sev,
                        ppath,
                        bv,
                        None,
                        format!("parameter `{name}` removed"),
                    );
                }
                (None, Some(n)) => {
                    let sev = self.side(ctx, ChangeKind::ParamAdded);
                    let ty = if self.a.doc.kind(n) == Kind::Object {
                        Self::type_summary(self.a.doc, n)
                    } else {
                        "any".into()
                    };
                    let req = if a_req.iter().any(|r| r == name) {
                        "required"
                    } else {
                        "optional"
                    };
                    self.emit(
                        ctx,
                        ChangeKind::ParamAdded,
                        sev,
                        ppath,
                        None,
                        av,
                        format!("parameter `{name}` added ({req}, {ty})"),
                    );
                }
                (None, None) => {}
            }
        }
    }

    fn diff_required(
        &mut self,
        ctx: &Ctx,
        path: &str,
        (b_req, b_node): (&[String], Option<NodeId>),
        (a_req, a_node): (&[String], Option<NodeId>),
        b_props: &[(String, NodeId)],
        a_props: &[(String, NodeId)],
    ) {
        let mut names: Vec<&String> = b_req.iter().filter(|n| !a_req.contains(n)).collect();
        names.extend(a_req.iter().filter(|n| !b_req.contains(n)));
        // A name listed twice is one parameter.
        names.sort();
        names.dedup();
        for name in names {
            let in_b = lookup(b_props, name).is_some();
            let in_a = lookup(a_props, name).is_some();
            if in_b != in_a {
                // An added or removed parameter: its own change says it.
                continue;
            }
            let now = a_req.contains(name);
            let sev = if now {
                self.side(ctx, ChangeKind::ParamRequiredChanged)
            } else {
                Severity::Low
            };
            let target = if in_a {
                ptr(&ptr(path, "properties"), name)
            } else {
                ptr(path, "required")
            };
            let msg = if now {
                format!("parameter `{name}` is now required")
            } else {
                format!("parameter `{name}` is now optional")
            };
            self.emit_values(
                ctx,
                ChangeKind::ParamRequiredChanged,
                sev,
                target,
                (Some(Value::Bool(!now)), b_node),
                (Some(Value::Bool(now)), a_node),
                msg,
            );
        }
    }

    fn diff_schema_list(&mut self, ctx: &Ctx, path: &str, b: Option<NodeId>, a: Option<NodeId>) {
        let bl = b
            .and_then(|n| self.b.doc.array(n))
            .unwrap_or_default()
            .to_vec();
        let al = a
            .and_then(|n| self.a.doc.array(n))
            .unwrap_or_default()
            .to_vec();
        if (b.is_some() && self.b.doc.kind(b.unwrap_or(0)) != Kind::Array)
            || (a.is_some() && self.a.doc.kind(a.unwrap_or(0)) != Kind::Array)
        {
            let sev = self.side(ctx, ChangeKind::ParamTypeChanged);
            self.emit(
                ctx,
                ChangeKind::ParamTypeChanged,
                sev,
                path.to_string(),
                b,
                a,
                "schema list changed shape".into(),
            );
            return;
        }
        for i in 0..bl.len().max(al.len()) {
            let (bv, av) = (bl.get(i).copied(), al.get(i).copied());
            let ipath = ptr(path, &i.to_string());
            match (bv, av) {
                (Some(_), Some(_)) => self.diff_schema(ctx, &ipath, bv, av),
                _ => {
                    let sev = self.side(ctx, ChangeKind::ParamTypeChanged);
                    let verb = if bv.is_none() { "added" } else { "removed" };
                    self.emit(
                        ctx,
                        ChangeKind::ParamTypeChanged,
                        sev,
                        ipath,
                        bv,
                        av,
                        format!("alternative {i} {verb}"),
                    );
                }
            }
        }
    }

    fn diff_schema_map(&mut self, ctx: &Ctx, path: &str, b: Option<NodeId>, a: Option<NodeId>) {
        let be = entries(self.b.doc, b);
        let ae = entries(self.a.doc, a);
        for key in union_keys(&be, &ae) {
            let (bv, av) = (lookup(&be, key), lookup(&ae, key));
            let kpath = ptr(path, key);
            match (bv, av) {
                (Some(_), Some(_)) => self.diff_schema(ctx, &kpath, bv, av),
                _ => {
                    let sev = self.side(ctx, ChangeKind::SchemaChanged);
                    let verb = if bv.is_none() { "added" } else { "removed" };
                    self.emit(
                        ctx,
                        ChangeKind::SchemaChanged,
                        sev,
                        kpath,
                        bv,
                        av,
                        format!("subschema `{key}` {verb}"),
                    );
                }
            }
        }
    }

    fn diff_prompts(&mut self) {
        let (bs, as_) = (self.b.server, self.a.server);
        let pairs = pair_by_name(
            bs.prompts.iter().map(|p| p.name.as_str()),
            as_.prompts.iter().map(|p| p.name.as_str()),
        );
        for p in pairs {
            let bp = p.0.map(|i| &bs.prompts[i]);
            let ap = p.1.map(|j| &as_.prompts[j]);
            let name = ap.or(bp).map(|p| p.name.clone());
            let ctx = Ctx {
                subject: Subject::Prompt,
                name: name.clone(),
                output: false,
            };
            let name = name.unwrap_or_default();
            match (bp, ap) {
                (Some(bp), None) => self.emit(
                    &ctx,
                    ChangeKind::PromptRemoved,
                    Severity::Low,
                    String::new(),
                    Some(bp.node),
                    None,
                    format!("prompt `{name}` removed"),
                ),
                (None, Some(ap)) => self.emit(
                    &ctx,
                    ChangeKind::PromptAdded,
                    Severity::Medium,
                    String::new(),
                    None,
                    Some(ap.node),
                    format!("prompt `{name}` added"),
                ),
                (Some(bp), Some(ap)) if !self.same(bp.node, ap.node) => {
                    let be = entries(self.b.doc, Some(bp.node));
                    let ae = entries(self.a.doc, Some(ap.node));
                    for key in union_keys(&be, &ae) {
                        let (bv, av) = (lookup(&be, key), lookup(&ae, key));
                        if key == "name" || self.same_opt(bv, av) {
                            continue;
                        }
                        let path = ptr("", key);
                        match key {
                            "description" | "title" => self.text_field(
                                &ctx,
                                ChangeKind::PromptChanged,
                                key,
                                path,
                                bv,
                                av,
                                Severity::High,
                                Severity::Low,
                            ),
                            "arguments" => self.diff_arguments(&ctx, bv, av),
                            _ => self.emit(
                                &ctx,
                                ChangeKind::PromptChanged,
                                Severity::Medium,
                                path,
                                bv,
                                av,
                                format!("prompt field `{key}` changed"),
                            ),
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn diff_arguments(&mut self, ctx: &Ctx, b: Option<NodeId>, a: Option<NodeId>) {
        let args = |d: &Document, n: Option<NodeId>| -> Vec<(String, NodeId)> {
            n.and_then(|n| d.array(n))
                .unwrap_or_default()
                .iter()
                .map(|&arg| {
                    let name = if d.kind(arg) == Kind::String {
                        d.str(arg)
                    } else {
                        d.get_str(arg, "name")
                    };
                    (name.unwrap_or_default().into_owned(), arg)
                })
                .collect()
        };
        let bl = args(self.b.doc, b);
        let al = args(self.a.doc, a);
        let pairs = pair_by_name(
            bl.iter().map(|x| x.0.as_str()),
            al.iter().map(|x| x.0.as_str()),
        );
        for (bi, ai) in pairs {
            match (bi, ai) {
                (Some(i), None) => {
                    let (name, node) = &bl[i];
                    self.emit(
                        ctx,
                        ChangeKind::PromptArgumentRemoved,
                        Severity::Low,
                        format!("/arguments/{i}"),
                        Some(*node),
                        None,
                        format!("argument `{name}` removed"),
                    )
                }
                (None, Some(j)) => {
                    let (name, node) = &al[j];
                    let req = self
                        .a
                        .doc
                        .get(*node, "required")
                        .and_then(|r| self.a.doc.as_bool(r))
                        == Some(true);
                    let what = if req { "required" } else { "optional" };
                    self.emit(
                        ctx,
                        ChangeKind::PromptArgumentAdded,
                        Severity::Medium,
                        format!("/arguments/{j}"),
                        None,
                        Some(*node),
                        format!("argument `{name}` added ({what})"),
                    )
                }
                (Some(i), Some(j)) => {
                    let (name, bn) = &bl[i];
                    let an = al[j].1;
                    if self.same(*bn, an) {
                        continue;
                    }
                    let is_obj = |d: &Document, n: NodeId| d.kind(n) == Kind::Object;
                    if !is_obj(self.b.doc, *bn) || !is_obj(self.a.doc, an) {
                        self.emit(
                            ctx,
                            ChangeKind::PromptArgumentChanged,
                            Severity::Medium,
                            format!("/arguments/{j}"),
                            Some(*bn),
                            Some(an),
                            format!("argument `{name}` changed"),
                        );
                        continue;
                    }
                    let be = entries(self.b.doc, Some(*bn));
                    let ae = entries(self.a.doc, Some(an));
                    for key in union_keys(&be, &ae) {
                        let (bv, av) = (lookup(&be, key), lookup(&ae, key));
                        if self.same_opt(bv, av) {
                            continue;
                        }
                        let path = ptr(&format!("/arguments/{j}"), key);
                        match key {
                            "description" | "title" => self.text_field(
                                ctx,
                                ChangeKind::PromptArgumentChanged,
                                &format!("argument `{name}` {key}"),
                                path,
                                bv,
                                av,
                                Severity::High,
                                Severity::Low,
                            ),
                            "required" => {
                                let now = av.and_then(|n| self.a.doc.as_bool(n)) == Some(true);
                                let sev = if now { Severity::Medium } else { Severity::Low };
                                let state = if now { "required" } else { "optional" };
                                self.emit(
                                    ctx,
                                    ChangeKind::PromptArgumentChanged,
                                    sev,
                                    path,
                                    bv,
                                    av,
                                    format!("argument `{name}` is now {state}"),
                                )
                            }
                            _ => self.emit(
                                ctx,
                                ChangeKind::PromptArgumentChanged,
                                Severity::Medium,
                                path,
                                bv,
                                av,
                                format!("argument `{name}` field `{key}` changed"),
                            ),
                        }
                    }
                }
                (None, None) => {}
            }
        }
    }

    fn diff_resources(&mut self, templates: bool) {
        let (bs, as_) = (self.b.server, self.a.server);
        let (bl, al) = if templates {
            (&bs.resource_templates, &as_.resource_templates)
        } else {
            (&bs.resources, &as_.resources)
        };
        let (added, removed, changed, subject, what) = if templates {
            (
                ChangeKind::ResourceTemplateAdded,
                ChangeKind::ResourceTemplateRemoved,
                ChangeKind::ResourceTemplateChanged,
                Subject::ResourceTemplate,
                "resource template",
            )
        } else {
            (
                ChangeKind::ResourceAdded,
                ChangeKind::ResourceRemoved,
                ChangeKind::ResourceChanged,
                Subject::Resource,
                "resource",
            )
        };
        let pairs = pair_by_name(
            bl.iter().map(|r| r.name.as_str()),
            al.iter().map(|r| r.name.as_str()),
        );
        for (bi, ai) in pairs {
            let br = bi.map(|i| &bl[i]);
            let ar = ai.map(|j| &al[j]);
            let name = ar.or(br).map(|r| r.name.clone()).unwrap_or_default();
            let ctx = Ctx {
                subject,
                name: Some(name.clone()),
                output: false,
            };
            match (br, ar) {
                (Some(r), None) => self.emit(
                    &ctx,
                    removed,
                    Severity::Low,
                    String::new(),
                    Some(r.node),
                    None,
                    format!("{what} `{name}` removed"),
                ),
                (None, Some(r)) => self.emit(
                    &ctx,
                    added,
                    Severity::Medium,
                    String::new(),
                    None,
                    Some(r.node),
                    format!("{what} `{name}` added"),
                ),
                (Some(br), Some(ar)) if !self.same(br.node, ar.node) => {
                    let be = entries(self.b.doc, Some(br.node));
                    let ae = entries(self.a.doc, Some(ar.node));
                    for key in union_keys(&be, &ae) {
                        let (bv, av) = (lookup(&be, key), lookup(&ae, key));
                        if self.same_opt(bv, av) {
                            continue;
                        }
                        let path = ptr("", key);
                        match key {
                            "description" | "title" => self.text_field(
                                &ctx,
                                changed,
                                key,
                                path,
                                bv,
                                av,
                                Severity::High,
                                Severity::Low,
                            ),
                            "uri" | "uriTemplate" | "mimeType" => self.emit(
                                &ctx,
                                changed,
                                Severity::Medium,
                                path,
                                bv,
                                av,
                                format!("{what} `{key}` changed"),
                            ),
                            _ => self.emit(
                                &ctx,
                                changed,
                                Severity::Low,
                                path,
                                bv,
                                av,
                                format!("{what} field `{key}` changed"),
                            ),
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

/// True if two JSON number literals are the same number: integers digit for
/// digit (so integers beyond 2^53 are never rounded together), anything else
/// as doubles (so `1`, `1.0` and `1e0` are one number).
fn same_number(b: &str, a: &str) -> bool {
    if b == a {
        return true;
    }
    let int = |s: &str| !s.contains(['.', 'e', 'E']);
    let norm = |s: &str| {
        let neg = s.starts_with('-');
        let digits = s.trim_start_matches('-').trim_start_matches('0');
        if digits.is_empty() {
            "0".to_string()
        } else if neg {
            format!("-{digits}")
        } else {
            digits.to_string()
        }
    };
    if int(b) && int(a) {
        return norm(b) == norm(a);
    }
    match (b.parse::<f64>(), a.parse::<f64>()) {
        (Ok(x), Ok(y)) => x == y && (int(b) == int(a) || x.abs() < 9_007_199_254_740_992.0),
        _ => false,
    }
}

/// Pairs the n-th occurrence of each name on one side with the n-th on the
/// other. Returns `(before index, after index)` pairs: both set when paired,
/// one set for a removal or an addition. Order: the old side's order, then
/// additions in the new side's order.
pub fn pair_by_name<'n>(
    before: impl Iterator<Item = &'n str>,
    after: impl Iterator<Item = &'n str>,
) -> Vec<(Option<usize>, Option<usize>)> {
    let mut index: HashMap<&str, Vec<usize>> = HashMap::new();
    let after: Vec<&str> = after.collect();
    for (j, name) in after.iter().enumerate().rev() {
        index.entry(name).or_default().push(j);
    }
    let mut used = vec![false; after.len()];
    let mut out = Vec::new();
    for (i, name) in before.enumerate() {
        match index.get_mut(name).and_then(|v| v.pop()) {
            Some(j) => {
                used[j] = true;
                out.push((Some(i), Some(j)));
            }
            None => out.push((Some(i), None)),
        }
    }
    out.extend(
        used.iter()
            .enumerate()
            .filter(|(_, &u)| !u)
            .map(|(j, _)| (None, Some(j))),
    );
    out
}

/// Every change between two versions of a server, in a stable order (by
/// subject and name, then as found).
pub fn diff_servers(before: Side<'_>, after: Side<'_>, opts: DiffOptions<'_>) -> Vec<Change> {
    let mut d = Differ {
        b: before,
        a: after,
        opts,
        server: after.server.name.clone(),
        b_lines: None,
        a_lines: None,
        out: Vec::new(),
    };
    d.diff();
    let mut out = d.out;
    out.sort_by(|x, y| (x.subject, &x.tool).cmp(&(y.subject, &y.tool)));
    out
}

/// Why two files cannot be diffed.
#[derive(Debug, thiserror::Error)]
pub enum PairError {
    /// A side lists servers to launch, not their tools.
    #[error("{path}: a {kind} lists servers to launch, not their tools; fetch a manifest first")]
    LaunchOnly {
        /// The file.
        path: String,
        /// Its input kind.
        kind: &'static str,
    },
}

/// Diffs two loaded files: one server each are paired whatever their names;
/// otherwise servers are paired by name and unpaired ones are reported as
/// added or removed.
pub fn diff_loaded(
    before: &Loaded,
    after: &Loaded,
    opts: DiffOptions<'_>,
) -> Result<Vec<Change>, PairError> {
    let usable = |l: &Loaded| -> Result<Vec<usize>, PairError> {
        let idx: Vec<usize> = l
            .servers
            .iter()
            .enumerate()
            .filter(|(_, s)| s.completeness != crate::manifest::Completeness::LaunchOnly)
            .map(|(i, _)| i)
            .collect();
        if idx.is_empty() {
            return Err(PairError::LaunchOnly {
                path: l.display_path(),
                kind: l.kind.name(),
            });
        }
        Ok(idx)
    };
    let (bi, ai) = (usable(before)?, usable(after)?);
    let (bf, af) = (before.display_path(), after.display_path());
    if bi.len() == 1 && ai.len() == 1 {
        let (bs, as_) = (&before.servers[bi[0]], &after.servers[ai[0]]);
        return Ok(diff_servers(
            Side::of(before, bs, &bf),
            Side::of(after, as_, &af),
            opts,
        ));
    }
    let mut out = Vec::new();
    let pairs = pair_by_name(
        bi.iter().map(|&i| before.servers[i].name.as_str()),
        ai.iter().map(|&j| after.servers[j].name.as_str()),
    );
    for (x, y) in pairs {
        let bs = x.map(|x| &before.servers[bi[x]]);
        let as_ = y.map(|y| &after.servers[ai[y]]);
        match (bs, as_) {
            (Some(bs), Some(as_)) => out.extend(diff_servers(
                Side::of(before, bs, &bf),
                Side::of(after, as_, &af),
                opts,
            )),
            (Some(s), None) | (None, Some(s)) => {
                let added = as_.is_some();
                out.push(Change::server_level(
                    &s.name,
                    if added {
                        ChangeKind::ServerAdded
                    } else {
                        ChangeKind::ServerRemoved
                    },
                    format!(
                        "server `{}` {} ({} tool{})",
                        s.name,
                        if added { "added" } else { "removed" },
                        s.tools.len(),
                        if s.tools.len() == 1 { "" } else { "s" }
                    ),
                ));
            }
            (None, None) => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_index_agrees_with_line_col() {
        let mut text = String::new();
        for i in 0..3000 {
            text.push_str(if i % 7 == 0 { "é\u{1F600}x" } else { "ab" });
            if i % 500 == 0 {
                text.push('\n');
            }
        }
        let idx = LineIndex::new(&text);
        for off in (0..=text.len())
            .filter(|&o| text.is_char_boundary(o))
            .step_by(37)
        {
            assert_eq!(
                idx.line_col(&text, off),
                crate::manifest::json::line_col(&text, off),
                "at {off}"
            );
        }
    }

    #[test]
    fn numbers_compare_by_value() {
        assert!(same_number("1", "1.0"));
        assert!(same_number("100", "1e2"));
        assert!(same_number("-0", "0"));
        assert!(!same_number("9007199254740993", "9007199254740992"));
        assert!(!same_number("1", "2"));
        assert!(!same_number("9007199254740993", "9007199254740992.0"));
    }

    #[test]
    fn pairs_by_name_and_occurrence() {
        let p = pair_by_name(
            ["a", "b", "a"].into_iter(),
            ["a", "c", "a", "a"].into_iter(),
        );
        assert_eq!(
            p,
            vec![
                (Some(0), Some(0)),
                (Some(1), None),
                (Some(2), Some(2)),
                (None, Some(1)),
                (None, Some(3))
            ]
        );
    }
}
