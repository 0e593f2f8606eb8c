//! Reuse of the text rules' findings for a text already checked.
//!
//! Manifests repeat themselves: on the 56 real servers of the shared datasets
//! 69% of the model-visible fields (36% of their bytes) are a text already
//! seen in the same check (`"The ID of the project"`, a parameter named
//! `limit`, an enum of formats), and an audit of several versions of one
//! server repeats nearly everything. The text rules (the declarative rules,
//! the learned rule, hidden-content checks) read a field's text, whether it
//! is a key, and what [`crate::rules::engine::Rule::text_context`] and
//! [`crate::rules::pattern::PatternSet::context`] say they read of its path
//! and tool, and nothing else. So the engine keys their findings on exactly
//! that, and for an equal key places the same findings (rule, message,
//! notes, and the span within the decoded text) on the new field's bytes.
//!
//! The memo lives for one [`crate::rules::engine::Engine::check`] and holds
//! at most [`MAX_BYTES`] of text, so a huge input costs at most that much
//! more memory; beyond it fields are checked afresh.

use std::collections::HashMap;

use foldhash::fast::RandomState;

use crate::finding::Finding;

/// Most bytes of text kept as keys (beyond them nothing more is kept).
pub const MAX_BYTES: usize = 64 << 20;

/// One finding of a text, to be placed again: the finding as first reported
/// (its location fields are replaced on reuse) and the range of the decoded
/// text it covers (None: the whole field).
pub type Recorded = (Finding, Option<(usize, usize)>);

/// Text → its findings. foldhash costs a fraction of SipHash on short
/// strings (the std hasher took 7% of a check here); it is seeded per
/// process, so a manifest cannot be written to make its texts collide.
type Texts = HashMap<Box<str>, Vec<Recorded>, RandomState>;

/// The findings of every text checked so far in one check.
#[derive(Default)]
pub struct TextMemo {
    /// The context of the field being checked (see [`TextMemo::context`]).
    context: Vec<u32>,
    /// Per context (see [`TextMemo::context`]): text → its findings.
    /// Contexts are few (key or value, a value slot, a user rule's globs):
    /// a list searched from the one used last.
    map: Vec<(Box<[u32]>, Texts)>,
    /// The index in `map` of the current context, if it is there.
    current: Option<usize>,
    /// Bytes of text held as keys.
    bytes: usize,
}

impl TextMemo {
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

    /// The index of the current context in `map`, found once per field.
    fn find_context(&mut self) -> Option<usize> {
        if self.current.is_none() {
            self.current = self.map.iter().position(|(c, _)| **c == self.context[..]);
        }
        self.current
    }

    /// Records the findings of `text` in the current context, unless the
    /// memo is full.
    pub fn insert(&mut self, text: &str, found: Vec<Recorded>) {
        if self.bytes + text.len() > MAX_BYTES {
            return;
        }
        self.bytes += text.len();
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
    fn stops_keeping_beyond_its_bound() {
        let mut m = TextMemo::default();
        at(&mut m, &[0]);
        let big = "x".repeat(MAX_BYTES - 3);
        m.insert(&big, Vec::new());
        assert!(m.get(&big).is_some());
        m.insert("abcd", Vec::new());
        assert!(m.get("abcd").is_none(), "over the bound: not kept");
        m.insert("abc", Vec::new());
        assert!(m.get("abc").is_some(), "exactly at the bound: kept");
    }
}
