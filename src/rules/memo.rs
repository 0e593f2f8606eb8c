//! Reuse of the text rules' findings for a text already checked.
//!
//! Manifests repeat themselves: on the 56 real servers of the shared datasets
//! 69% of the model-visible fields (36% of their bytes) are a text already
//! seen in the same check (`"The ID of the project"`, a parameter named
//! `limit`, an enum of formats), and an audit of several versions of one
//! server repeats nearly everything. The built-in text rules (the declarative
//! rules, the learned rule, hidden-content checks) read a field's text,
//! whether it is a key, and what [`crate::rules::engine::Rule::text_context`]
//! and [`crate::rules::pattern::PatternSet::context`] say they read of its
//! path and tool, and nothing else. So the engine keys their findings on
//! exactly that, and for an equal key places the same findings (rule,
//! message, notes, and the range within the decoded text) on the new field's
//! bytes. A rule that does not declare what it reads (`text_context` gives
//! `None`) turns the memo off for the fields it is asked about.
//!
//! The memo lives for one [`crate::rules::engine::Engine::check`] and holds
//! about [`MAX_BYTES`] at most (texts, findings, and an allowance for each
//! entry's bookkeeping); beyond that, fields are checked afresh. A check
//! spread over several threads keeps one memo a thread, each with a share
//! of that budget: a text repeated on servers that different threads check
//! is checked once by each.

use std::collections::HashMap;

use foldhash::fast::RandomState;

use crate::finding::{Confidence, Severity};

/// The memo's default budget in bytes.
pub const MAX_BYTES: usize = 64 << 20;

/// What an entry costs besides its text and findings' strings (the key's
/// allocation, the hash slot, the vector's header), counted against the
/// budget so that many short texts cannot exceed it.
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

/// Text → its findings. foldhash costs a fraction of SipHash on short
/// strings (the std hasher took 7% of a check here); its seed is random per
/// process, which is enough for a run over files that cannot see it.
type Texts = HashMap<Box<str>, Vec<Recorded>, RandomState>;

/// The findings of every text checked so far in one check.
pub struct TextMemo {
    /// The context of the field being checked (see [`TextMemo::context`]).
    context: Vec<u32>,
    /// Per context (see [`TextMemo::context`]): text → its findings.
    /// Contexts are few (key or value, a value slot, a user rule's globs):
    /// a list searched once per field.
    map: Vec<(Box<[u32]>, Texts)>,
    /// The index in `map` of the current context, if it is there.
    current: Option<usize>,
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
            map: Vec::new(),
            current: None,
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

    /// The findings recorded for `text` in the current context.
    pub fn get(&mut self, text: &str) -> Option<&[Recorded]> {
        let i = self.find_context()?;
        self.map[i].1.get(text).map(Vec::as_slice)
    }

    /// True if a text of `len` bytes still fits (so that a full memo costs
    /// no recording).
    pub fn has_room(&self, len: usize) -> bool {
        self.bytes + ENTRY_BYTES + len <= self.budget
    }

    /// The index of the current context in `map`, found once per field.
    fn find_context(&mut self) -> Option<usize> {
        if self.current.is_none() {
            self.current = self.map.iter().position(|(c, _)| **c == self.context[..]);
        }
        self.current
    }

    /// Records the findings of `text` in the current context, unless they
    /// do not fit.
    pub fn insert(&mut self, text: &str, found: Vec<Recorded>) {
        let size = ENTRY_BYTES + text.len() + found.iter().map(Recorded::size).sum::<usize>();
        if self.bytes + size > self.budget {
            return;
        }
        self.bytes += size;
        let i = match self.find_context() {
            Some(i) => i,
            None => {
                self.map.push((self.context[..].into(), Texts::default()));
                self.map.len() - 1
            }
        };
        self.current = Some(i);
        self.map[i].1.insert(text.into(), found);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A memo with `context` set.
    fn at(m: &mut TextMemo, context: &[u32]) {
        m.context().extend_from_slice(context);
    }

    #[test]
    fn keys_on_context_and_text() {
        let mut m = TextMemo::default();
        at(&mut m, &[0]);
        m.insert("limit", Vec::new());
        assert_eq!(m.get("limit").map(<[_]>::len), Some(0));
        assert!(m.get("Limit").is_none(), "another text");
        at(&mut m, &[1]);
        assert!(m.get("limit").is_none(), "another context");
        at(&mut m, &[0, 0]);
        assert!(m.get("limit").is_none(), "a longer context");
    }

    #[test]
    fn stops_keeping_beyond_its_budget() {
        let finding = Recorded {
            rule: "r".into(),
            severity: Severity::Low,
            confidence: Confidence::Low,
            message: "m".repeat(100),
            help: None,
            label: String::new(),
            notes: vec!["n".repeat(50)],
            range: None,
        };
        // Room for one short text with its finding, not for two.
        let one = ENTRY_BYTES + 3 + finding.size();
        let mut m = TextMemo::with_budget(one + ENTRY_BYTES + 2);
        at(&mut m, &[0]);
        assert!(m.has_room(3));
        m.insert("abc", vec![finding.clone()]);
        assert!(m.get("abc").is_some());
        assert!(!m.has_room(3), "the findings count too");
        m.insert("def", vec![finding]);
        assert!(m.get("def").is_none(), "over the budget: not kept");
        assert!(m.has_room(2));
        m.insert("gh", Vec::new());
        assert!(m.get("gh").is_some(), "exactly at the budget: kept");
    }
}
