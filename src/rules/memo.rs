//! Reuse of the text rules' findings for a text already checked.
//!
//! Manifests repeat themselves: on the 56 real servers of the shared datasets
//! 69% of the model-visible fields (36% of their bytes) are a text already
//! seen in the same check (`"The ID of the project"`, a parameter named
//! `limit`, an enum of formats), and an audit of several versions of one
//! server repeats nearly everything. The built-in text rules (the declarative
//! rules, the learned rule, hidden-content checks) read a field's text,
//! whether it is a key, and what [`crate::rules::engine::Rule::text_context`]
//! says they read of its path, and nothing else. So the engine keys their
//! findings on exactly that, and for an equal key places the same findings
//! (rule, message, notes, and the range within the decoded text) on the new
//! field's bytes. A rule that does not declare what it reads (`text_context`
//! is `TextContext::Any`, the default) turns the memo off.
//!
//! A user's rule file can also limit a rule to some fields and tools by
//! globs (`applies_to`, `tools`). Those are asked only where the rule's
//! literals occur in a text ([`crate::rules::pattern::PatternSet::check`]
//! says when), and a text for which one was asked is not kept: it is checked
//! afresh wherever it appears. Keying every field on the globs' answers
//! instead meant matching every field's path against them, which made a
//! check of the 56 real servers about a third slower with a single such
//! rule, whether or not its literals occurred.
//!
//! The memo lives for one [`crate::rules::engine::Engine::check`] and holds
//! about [`MAX_BYTES`] at most (texts, findings, and an allowance for each
//! entry's bookkeeping); beyond that, fields are checked afresh. The budget
//! counts bytes used: the two buffers grow by doubling, so what is allocated
//! can reach about twice that, and the short list of contexts is not
//! counted. A check
//! spread over several threads keeps one memo a thread, each with a share
//! of that budget: a text repeated on servers that different threads check
//! is checked once by each.

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};

use foldhash::fast::RandomState;

use crate::finding::{Confidence, Severity};

/// The memo's default budget in bytes.
pub const MAX_BYTES: usize = 64 << 20;

/// What an entry costs besides its text and findings' strings (the entry,
/// the hash slot, the findings' headers), counted against the budget so that
/// many short texts cannot exceed it.
const ENTRY_BYTES: usize = 96;

/// A range of a field's decoded text (None: the whole field).
pub type Range = Option<(usize, usize)>;

/// One finding of a text, without its place: what a replay copies. The place
/// (file, server, subject, pointer, span, line) is found anew for each field.
#[derive(Clone, Debug)]
pub struct Recorded {
    /// The rule's id.
    pub rule: String,
    /// Its severity as reported.
    pub severity: Severity,
    /// Its confidence.
    pub confidence: Confidence,
    /// The message, as the rule left it.
    pub message: String,
    /// The help text.
    pub help: Option<String>,
    /// The primary span's label.
    pub label: String,
    /// The notes, as the rule left them.
    pub notes: Vec<String>,
    /// The range of the decoded text the finding covers.
    pub range: Range,
}

impl Recorded {
    /// Bytes counted against the memo's budget.
    fn size(&self) -> usize {
        ENTRY_BYTES
            + self.rule.len()
            + self.message.len()
            + self.help.as_ref().map_or(0, String::len)
            + self.label.len()
            + self.notes.iter().map(String::len).sum::<usize>()
    }
}

/// The memo's table: the hash of a context and a text → the index of the
/// newest entry with that hash (older ones are chained through
/// [`Entry::next`]). The keys are already foldhash's output, so the table
/// hashes them no further.
type Table = HashMap<u64, usize, BuildHasherDefault<Prehashed>>;

/// A [`std::hash::Hasher`] for keys that are already hashes: a `u64` is
/// its own hash.
#[derive(Default)]
struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` keys come here; anything else is folded in all the same.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// No further entry with the same hash.
const END: usize = usize::MAX;

/// One text checked: where its text and findings are kept, and its context.
#[derive(Clone, Copy, Debug)]
struct Entry {
    /// The index of its context in [`TextMemo::contexts`].
    context: usize,
    /// Its text's bytes in [`TextMemo::texts`].
    text: (usize, usize),
    /// Its findings in [`TextMemo::found`].
    found: (usize, usize),
    /// The next older entry with the same hash, or [`END`].
    next: usize,
}

/// Where [`TextMemo::insert`] puts a text that [`TextMemo::get`] did not
/// find: the hash and context `get` computed, so that they are not computed
/// twice.
#[derive(Clone, Copy, Debug)]
pub struct Slot {
    hash: u64,
    context: usize,
}

/// The findings of every text checked so far in one check.
///
/// Every text is copied into one string and every finding into one vector,
/// and the table maps a hash to an entry's index: no allocation per entry,
/// and dropping the memo frees a handful of buffers rather than one per text
/// (the earlier map of boxed strings cost about 5% of a check in `malloc`,
/// hashing each new text twice, and `free`).
pub struct TextMemo {
    /// The context of the field being checked (see [`TextMemo::context`]).
    context: Vec<u32>,
    /// Every context met so far. Contexts are few (key or value, a value
    /// slot): a list searched once per field, the previous field's context
    /// first.
    contexts: Vec<Box<[u32]>>,
    /// The index in `contexts` of the current context, once found.
    current: Option<usize>,
    /// The index in `contexts` of the previous field's context.
    previous: usize,
    /// Hash of (context, text) → the newest entry with that hash.
    table: Table,
    /// Every text kept.
    entries: Vec<Entry>,
    /// Their texts, one after the other.
    texts: String,
    /// Their findings, one text's after the other.
    found: Vec<Recorded>,
    /// Hashes (context, text) pairs; its seed is random per process, which
    /// is enough for a run over files that cannot see it. foldhash costs a
    /// fraction of SipHash on short strings (the std hasher took 7% of a
    /// check here).
    hasher: RandomState,
    /// Bytes counted so far.
    bytes: usize,
    /// The budget.
    budget: usize,
}

impl Default for TextMemo {
    fn default() -> Self {
        TextMemo::with_budget(MAX_BYTES)
    }
}

impl TextMemo {
    /// A memo that keeps about `budget` bytes at most.
    pub fn with_budget(budget: usize) -> Self {
        TextMemo {
            context: Vec::new(),
            contexts: Vec::new(),
            current: None,
            previous: 0,
            table: Table::default(),
            entries: Vec::new(),
            texts: String::new(),
            found: Vec::new(),
            hasher: RandomState::default(),
            bytes: 0,
            budget,
        }
    }

    /// The context of the next [`TextMemo::get`] and [`TextMemo::insert`],
    /// emptied for the caller to fill: whether the field is a key, and what
    /// the rules read of its path and tool, as the engine builds it (the same
    /// number of entries for every field).
    pub fn context(&mut self) -> &mut Vec<u32> {
        self.context.clear();
        self.current = None;
        &mut self.context
    }

    /// The findings recorded for `text` in the current context, or where
    /// [`TextMemo::insert`] is to put them.
    pub fn get(&mut self, text: &str) -> Result<&[Recorded], Slot> {
        let context = self.find_context();
        let hash = self.hasher.hash_one((context, text));
        self.lookup(Slot { hash, context }, text)
    }

    /// The findings of `text` in the context of `slot`, whose hash is
    /// `slot.hash`; or `slot` again when it is not there.
    fn lookup(&self, slot: Slot, text: &str) -> Result<&[Recorded], Slot> {
        let mut at = self.table.get(&slot.hash).copied().unwrap_or(END);
        while at != END {
            let e = &self.entries[at];
            if e.context == slot.context && &self.texts[e.text.0..e.text.1] == text {
                return Ok(&self.found[e.found.0..e.found.1]);
            }
            at = e.next;
        }
        Err(slot)
    }

    /// True if a text of `len` bytes still fits (so that a full memo costs
    /// no recording).
    pub fn has_room(&self, len: usize) -> bool {
        self.bytes + ENTRY_BYTES + len <= self.budget
    }

    /// The index of the current context in `contexts`, found once per field
    /// (and added if new).
    fn find_context(&mut self) -> usize {
        if let Some(i) = self.current {
            return i;
        }
        // Compared a number at a time: a context has a few, and `==` on
        // slices calls `memcmp` (a tenth of the memo's cost).
        let same = |c: &[u32]| {
            c.len() == self.context.len() && c.iter().zip(&self.context).all(|(a, b)| a == b)
        };
        let i = if self.contexts.get(self.previous).is_some_and(|c| same(c)) {
            self.previous
        } else if let Some(i) = self.contexts.iter().position(|c| same(c)) {
            i
        } else {
            self.contexts.push(self.context[..].into());
            self.contexts.len() - 1
        };
        self.current = Some(i);
        self.previous = i;
        i
    }

    /// Records the findings of `text`, which [`TextMemo::get`] did not find
    /// and gave `slot` for, unless they do not fit.
    pub fn insert(&mut self, slot: Slot, text: &str, found: Vec<Recorded>) {
        let size = ENTRY_BYTES + text.len() + found.iter().map(Recorded::size).sum::<usize>();
        if self.bytes + size > self.budget {
            return;
        }
        self.bytes += size;
        let index = self.entries.len();
        let next = self.table.insert(slot.hash, index).unwrap_or(END);
        let (t, f) = (self.texts.len(), self.found.len());
        self.texts.push_str(text);
        self.found.extend(found);
        self.entries.push(Entry {
            context: slot.context,
            text: (t, self.texts.len()),
            found: (f, self.found.len()),
            next,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A memo with `context` set.
    fn at(m: &mut TextMemo, context: &[u32]) {
        m.context().extend_from_slice(context);
    }

    /// Looks `text` up and records `found` for it if it is not there, as the
    /// engine does.
    fn put(m: &mut TextMemo, text: &str, found: Vec<Recorded>) {
        if let Err(slot) = m.get(text) {
            m.insert(slot, text, found);
        }
    }

    /// The number of findings recorded for `text`, if it is there.
    fn count(m: &mut TextMemo, text: &str) -> Option<usize> {
        m.get(text).ok().map(<[_]>::len)
    }

    fn finding(message: &str) -> Recorded {
        Recorded {
            rule: "r".into(),
            severity: Severity::Low,
            confidence: Confidence::Low,
            message: message.into(),
            help: None,
            label: String::new(),
            notes: vec!["n".repeat(50)],
            range: None,
        }
    }

    #[test]
    fn keys_on_context_and_text() {
        let mut m = TextMemo::default();
        at(&mut m, &[0]);
        put(&mut m, "limit", Vec::new());
        put(&mut m, "query", vec![finding("q")]);
        assert_eq!(count(&mut m, "limit"), Some(0));
        assert!(count(&mut m, "Limit").is_none(), "another text");
        at(&mut m, &[1]);
        assert!(count(&mut m, "limit").is_none(), "another context");
        put(&mut m, "limit", vec![finding("a"), finding("b")]);
        at(&mut m, &[0, 0]);
        assert!(count(&mut m, "limit").is_none(), "a longer context");
        // Each context keeps its own findings, whichever came first.
        at(&mut m, &[0]);
        assert_eq!(count(&mut m, "limit"), Some(0));
        assert_eq!(
            m.get("query").ok().map(|f| f[0].message.clone()),
            Some("q".into())
        );
        at(&mut m, &[1]);
        let found = m.get("limit").expect("kept");
        assert_eq!(
            (found[0].message.as_str(), found[1].message.as_str()),
            ("a", "b")
        );
    }

    /// Texts whose hashes are equal are told apart by their bytes and
    /// their context.
    #[test]
    fn equal_hashes_are_chained() {
        let mut m = TextMemo::default();
        at(&mut m, &[0]);
        let context = m.find_context();
        let slot = Slot { hash: 7, context };
        m.insert(slot, "first", vec![finding("1")]);
        m.insert(slot, "second", Vec::new());
        m.insert(
            Slot {
                hash: 7,
                context: context + 1,
            },
            "first",
            Vec::new(),
        );
        let message =
            |r: Result<&[Recorded], Slot>| r.ok().map(|f| f.first().map(|f| f.message.clone()));
        assert_eq!(message(m.lookup(slot, "first")), Some(Some("1".into())));
        assert_eq!(message(m.lookup(slot, "second")), Some(None));
        assert!(m.lookup(slot, "third").is_err());
        assert!(m.lookup(Slot { hash: 8, context }, "first").is_err());
    }

    #[test]
    fn stops_keeping_beyond_its_budget() {
        let finding = finding(&"m".repeat(100));
        // Room for one short text with its finding, not for two.
        let one = ENTRY_BYTES + 3 + finding.size();
        let mut m = TextMemo::with_budget(one + ENTRY_BYTES + 2);
        at(&mut m, &[0]);
        assert!(m.has_room(3));
        put(&mut m, "abc", vec![finding.clone()]);
        assert!(count(&mut m, "abc").is_some());
        assert!(!m.has_room(3), "the findings count too");
        put(&mut m, "def", vec![finding]);
        assert!(count(&mut m, "def").is_none(), "over the budget: not kept");
        assert!(m.has_room(2));
        put(&mut m, "gh", Vec::new());
        assert!(count(&mut m, "gh").is_some(), "exactly at the budget: kept");
    }
}
