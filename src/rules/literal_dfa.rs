//! A dense Aho-Corasick automaton for the declarative rules' prefilter.
//!
//! [`crate::rules::pattern::PatternSet`] looks for some 2,000 short literals
//! in every model-visible field and needs every occurrence (overlapping), but
//! nothing else: no leftmost semantics, no match objects. The `aho-corasick`
//! crate's overlapping search returns one match per call, which cost about
//! 7 ns per byte here whatever the automaton's size. This automaton is a plain
//! transition table over byte classes: one load per byte, and a comparison
//! that singles out the states where a literal ends (they are numbered
//! last), so a scan is a tight loop that only records those states.

/// The transition table: `next[(state << shift) + class]` is the next state.
/// Rows are a power of two long so that a shift, not a multiply, finds one.
/// Match states are numbered last, so one comparison tells them apart, and
/// a scan reports the state itself (until 2026-12-03 the row's last entry
/// held the state's index among the match states: a second load per match,
/// in the row's other cache line for most classes). Two-byte entries while
/// the states fit, four-byte ones beyond: the scan waits on one load per
/// byte, and the smaller the table the more of
/// it stays in cache (with the 358 built-in patterns of 2026-11-30 the ASCII
/// automaton had 7,553 states of 64 entries: 967 KB). Cutting the literals
/// to their first 8, 6, 5 or 4 bytes (5,097 down to 1,871 states) did not
/// make a whole run faster: the false starts it adds cost about what the
/// smaller table saves.
#[derive(Clone, Debug)]
enum Table {
    Small(Vec<u16>),
    Large(Vec<u32>),
}

/// Every literal's occurrences in a text, found in one pass.
#[derive(Clone, Debug)]
pub struct LiteralDfa {
    /// Byte to class: bytes that occur in no literal share class 0.
    class: [u16; 256],
    /// log2 of a row's length (see [`Table`]).
    shift: u32,
    /// The transitions.
    next: Table,
    /// States from this one on end at least one literal.
    first_match: u32,
    /// The literals ending in match state `m` (with those ending in its
    /// suffixes) are `outs[out_start[m]..out_start[m + 1]]`, where `m` is
    /// the state's index among the match states.
    out_start: Vec<u32>,
    /// See `out_start`.
    outs: Vec<u32>,
}

impl LiteralDfa {
    /// Builds the automaton of `lits` (non-empty byte strings; literal `i`
    /// is reported as `i`).
    pub fn new(lits: &[Vec<u8>]) -> LiteralDfa {
        let mut class = [0u16; 256];
        let mut used = [false; 256];
        for l in lits {
            for &b in l {
                used[usize::from(b)] = true;
            }
        }
        // Classes in the order of how often their byte occurs in text, most
        // often first (space, then English letter frequency, then common
        // punctuation, then the rest by value): the transitions that nearly
        // all bytes take are then a row's first 64 bytes (with two-byte
        // entries), which span one or two cache lines (the table is not
        // aligned to a line) where they spanned three or four.
        let mut classes = 1usize;
        let common = b" etaoinshrdlcumwfgypbvkjxqz._-,";
        for b in common.iter().map(|&b| usize::from(b)).chain(0..256) {
            if used[b] && class[b] == 0 {
                class[b] = classes as u16;
                classes += 1;
            }
        }
        const NONE: u32 = u32::MAX;
        let stride = classes;
        // The trie, dense from the start (state 0 is the root).
        let mut next: Vec<u32> = vec![NONE; stride];
        let mut ends: Vec<Vec<u32>> = vec![Vec::new()];
        for (i, l) in lits.iter().enumerate() {
            let mut s = 0usize;
            for &b in l {
                let c = usize::from(class[usize::from(b)]);
                let t = next[s * stride + c];
                s = if t == NONE {
                    let n = ends.len();
                    next[s * stride + c] = n as u32;
                    next.extend(std::iter::repeat_n(NONE, stride));
                    ends.push(Vec::new());
                    n
                } else {
                    t as usize
                };
            }
            ends[s].push(i as u32);
        }
        let states = ends.len();
        // Breadth first: failure links, inherited outputs, and the missing
        // transitions filled in from the failure state (already complete,
        // being shallower).
        let mut fail = vec![0u32; states];
        let mut queue = std::collections::VecDeque::new();
        for t in &mut next[..stride] {
            match *t {
                NONE => *t = 0,
                child => queue.push_back(child),
            }
        }
        while let Some(s) = queue.pop_front() {
            let s = s as usize;
            let inherited = ends[fail[s] as usize].clone();
            ends[s].extend(inherited);
            for c in 0..stride {
                let t = next[s * stride + c];
                let via_fail = next[fail[s] as usize * stride + c];
                if t == NONE {
                    next[s * stride + c] = via_fail;
                } else {
                    fail[t as usize] = via_fail;
                    queue.push_back(t);
                }
            }
        }
        // Renumber: states without output first (the root stays 0), then
        // the match states, so that one comparison tells them apart.
        let mut order: Vec<usize> = (0..states).filter(|&s| ends[s].is_empty()).collect();
        let first_match = order.len();
        order.extend((0..states).filter(|&s| !ends[s].is_empty()));
        let shift = classes.next_power_of_two().trailing_zeros();
        let row = 1usize << shift;
        let mut new_id = vec![0u32; states];
        for (n, &s) in order.iter().enumerate() {
            new_id[s] = n as u32;
        }
        let mut table = Vec::with_capacity(states * row);
        let mut out_start = vec![0u32];
        let mut outs = Vec::new();
        for &s in &order {
            table.extend(
                next[s * stride..(s + 1) * stride]
                    .iter()
                    .map(|&t| new_id[t as usize]),
            );
            table.extend(std::iter::repeat_n(0, row - stride));
            // Match states come last, in this order: the `m`th is
            // `first_match + m` (see `Table`).
            if !ends[s].is_empty() {
                let mut o = ends[s].clone();
                o.sort_unstable();
                o.dedup();
                outs.extend(o);
                out_start.push(outs.len() as u32);
            }
        }
        let next = if states <= usize::from(u16::MAX) {
            Table::Small(table.iter().map(|&t| t as u16).collect())
        } else {
            Table::Large(table)
        };
        LiteralDfa {
            class,
            shift,
            next,
            first_match: first_match as u32,
            out_start,
            outs,
        }
    }

    /// The match states' numbers (see [`LiteralDfa::scan`]), in order.
    pub fn match_states(&self) -> std::ops::Range<u32> {
        self.first_match..self.first_match + (self.out_start.len() - 1) as u32
    }

    /// Appends `(end, m)` to `out` for every offset `end` (one past the last
    /// byte) where at least one literal ends, `m` being the match state
    /// reached there: the literals are [`LiteralDfa::outputs`]`(m)`.
    pub fn scan(&self, text: &[u8], out: &mut Vec<(u32, u32)>) {
        self.scan_each(text, out, |_| {});
    }

    /// [`LiteralDfa::scan`], and also the OR of `marks[b]` over the bytes `b`
    /// of `text`: the caller learns which of some chosen bytes occur without
    /// a pass of its own (the scan waits on each transition's load, so the
    /// extra work per byte is nearly free) and without the automaton holding
    /// them as one-byte literals, which would end a literal at nearly every
    /// position.
    pub fn scan_and_mark(&self, text: &[u8], out: &mut Vec<(u32, u32)>, marks: &[u64; 256]) -> u64 {
        let mut marked = 0u64;
        self.scan_each(text, out, |b| marked |= marks[usize::from(b)]);
        marked
    }

    /// [`LiteralDfa::scan`] that also calls `each` with every byte, in the
    /// same loop.
    #[inline(always)]
    pub fn scan_each(&self, text: &[u8], out: &mut Vec<(u32, u32)>, each: impl FnMut(u8)) {
        match &self.next {
            Table::Small(t) => self.scan_table(t, text, out, each),
            Table::Large(t) => self.scan_table(t, text, out, each),
        }
    }

    #[inline(always)]
    fn scan_table<T: Copy + Into<u32>>(
        &self,
        next: &[T],
        text: &[u8],
        out: &mut Vec<(u32, u32)>,
        mut each: impl FnMut(u8),
    ) {
        let (shift, first_match) = (self.shift, self.first_match as usize);
        let mut s = 0usize;
        for (i, &b) in text.iter().enumerate() {
            s = next[(s << shift) + usize::from(self.class[usize::from(b)])].into() as usize;
            each(b);
            if s >= first_match {
                out.push((i as u32 + 1, s as u32));
            }
        }
    }

    /// The literals that end where match state `m` is reached.
    pub fn outputs(&self, m: u32) -> &[u32] {
        let m = (m - self.first_match) as usize;
        &self.outs[self.out_start[m] as usize..self.out_start[m + 1] as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aho_corasick::{AhoCorasick, MatchKind};
    use proptest::prelude::*;

    /// Every (start, end, literal) occurrence, sorted.
    fn ours(lits: &[Vec<u8>], text: &[u8]) -> Vec<(usize, usize, usize)> {
        let dfa = LiteralDfa::new(lits);
        let mut hits = Vec::new();
        dfa.scan(text, &mut hits);
        let mut out = Vec::new();
        for (end, m) in hits {
            for &l in dfa.outputs(m) {
                let end = end as usize;
                out.push((end - lits[l as usize].len(), end, l as usize));
            }
        }
        out.sort_unstable();
        out
    }

    fn oracle(lits: &[Vec<u8>], text: &[u8]) -> Vec<(usize, usize, usize)> {
        let ac = AhoCorasick::builder()
            .match_kind(MatchKind::Standard)
            .build(lits)
            .expect("automaton");
        let mut out: Vec<_> = ac
            .find_overlapping_iter(text)
            .map(|m| (m.start(), m.end(), m.pattern().as_usize()))
            .collect();
        out.sort_unstable();
        out
    }

    #[test]
    fn finds_every_overlapping_occurrence() {
        let lits: Vec<Vec<u8>> = ["he", "she", "his", "hers", "e", "ſh", "s", "hershe"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect();
        for t in ["ushers", "", "hershey ſhe his", "xxxx", "hehehe"] {
            assert_eq!(
                ours(&lits, t.as_bytes()),
                oracle(&lits, t.as_bytes()),
                "{t}"
            );
        }
    }

    /// `scan_and_mark` finds what `scan` finds and marks the bytes present.
    #[test]
    fn marks_the_bytes_present() {
        let lits: Vec<Vec<u8>> = ["he", "she", "hers"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect();
        let dfa = LiteralDfa::new(&lits);
        let mut marks = [0u64; 256];
        marks[usize::from(b'.')] = 1;
        marks[usize::from(b's')] = 2;
        marks[usize::from(b'S')] = 2;
        marks[usize::from(b'@')] = 4;
        for (t, want) in [("ushers.", 3), ("", 0), ("he", 0), ("a@b", 4), ("S", 2)] {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            dfa.scan(t.as_bytes(), &mut a);
            assert_eq!(dfa.scan_and_mark(t.as_bytes(), &mut b, &marks), want, "{t}");
            assert_eq!(a, b, "{t}");
        }
    }

    /// More states than two-byte entries can number: the four-byte table
    /// finds the same occurrences.
    #[test]
    fn large_automaton_uses_four_byte_entries() {
        // 41 bytes: 41^3 three-byte literals, about 70,600 states.
        let alphabet: Vec<u8> = (b'0'..=b'X').collect();
        let mut lits = Vec::new();
        for &a in &alphabet {
            for &b in &alphabet {
                for &c in &alphabet {
                    lits.push(vec![a, b, c]);
                }
            }
        }
        let dfa = LiteralDfa::new(&lits);
        assert!(
            matches!(dfa.next, Table::Large(_)),
            "{} literals",
            lits.len()
        );
        let text: Vec<u8> = (0..600u32)
            .map(|i| alphabet[(i * 7919 % alphabet.len() as u32) as usize])
            .collect();
        assert_eq!(ours(&lits, &text), oracle(&lits, &text));
        assert!(!ours(&lits, &text).is_empty());
    }

    #[test]
    fn agrees_with_aho_corasick() {
        proptest!(ProptestConfig::with_cases(500), |(
            lits in proptest::collection::vec("[a-dé.]{1,5}", 1..30),
            text in "[a-eé. ]{0,80}",
        )| {
            let mut lits: Vec<Vec<u8>> = lits.into_iter().map(String::into_bytes).collect();
            lits.sort();
            lits.dedup();
            prop_assert_eq!(ours(&lits, text.as_bytes()), oracle(&lits, text.as_bytes()));
        });
    }
}
