//! Normalisation before matching.
//!
//! Rules match on a canonical form of the text so that an attacker cannot dodge
//! a pattern with a zero-width space, a Cyrillic `о`, full-width letters or an
//! accent. Every step keeps a map back to byte offsets in the *decoded* string,
//! so a match on the normalised text still points at the exact raw bytes
//! (through `Document::raw_span_of_decoded`).
//!
//! Steps, in order, per character:
//! 1. invisible characters (zero-width, bidi controls, Unicode tag characters,
//!    variation selectors) are recorded and removed; the ASCII text hidden in
//!    tag characters (U+E0020..U+E007E) is decoded and kept as a note;
//! 2. ANSI escape sequences and other C0/C1 controls (except tab, CR, LF) are
//!    recorded and removed (whole CSI/OSC sequences, so `ESC[2K` leaves nothing);
//! 3. NFKC, applied per character (full-width, ligatures, math alphanumerics);
//! 4. accents on Latin letters are dropped (`é` → `e`), so patterns are written
//!    without them;
//! 5. lower case;
//! 6. confusable folding: a small table of common Cyrillic and Greek look-alikes
//!    of Latin letters, applied only inside words that also contain a Latin
//!    letter (mixed-script words), so Russian or Greek text stays matchable by
//!    its own patterns. The table is not Unicode's full `confusables.txt`.

use unicode_normalization::char::{decompose_canonical, is_combining_mark};
use unicode_normalization::UnicodeNormalization;

use crate::display::is_invisible;

/// What kind of hidden character was removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HiddenKind {
    /// Zero-width spaces and joiners, word joiner, BOM, soft hyphen and other
    /// default-ignorable characters.
    ZeroWidth,
    /// Bidirectional controls (LRM, RLM, embeddings, overrides, isolates).
    Bidi,
    /// Unicode tag characters U+E0000..U+E007F.
    Tag,
    /// Variation selectors.
    Variation,
    /// An ANSI escape sequence.
    Ansi,
    /// Another C0 or C1 control character.
    Control,
}

impl HiddenKind {
    /// A short human name.
    pub fn name(self) -> &'static str {
        match self {
            HiddenKind::ZeroWidth => "zero-width character",
            HiddenKind::Bidi => "bidirectional control",
            HiddenKind::Tag => "Unicode tag character",
            HiddenKind::Variation => "variation selector",
            HiddenKind::Ansi => "ANSI escape sequence",
            HiddenKind::Control => "control character",
        }
    }
}

/// One removed hidden character or escape sequence, by decoded byte range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hidden {
    /// What it is.
    pub kind: HiddenKind,
    /// Its bytes in the decoded text.
    pub start: usize,
    /// One past its last byte.
    pub end: usize,
}

/// Normalised text with a map back to the decoded text.
#[derive(Clone, Debug, Default)]
pub struct Normalized {
    /// The text rules match on.
    pub text: String,
    /// For each byte of `text`, the decoded byte range of the character it came
    /// from; `None` when the text is unchanged byte for byte (plain ASCII).
    map: Option<Vec<(u32, u32)>>,
    /// Hidden characters and escapes that were removed.
    pub hidden: Vec<Hidden>,
    /// ASCII text spelled in Unicode tag characters, if any.
    pub tag_text: String,
    /// True if a confusable look-alike was folded inside a mixed-script word.
    pub mixed_script: bool,
    /// The longest run of base64-alphabet bytes (`A-Za-z0-9+/_-`) in the
    /// *input* text: blob checks skip text whose runs are too short.
    pub blob_run: usize,
    /// The longest run of ASCII whitespace bytes in the input text.
    pub space_run: usize,
    /// The longest run of ASCII hex digits in the input text (blob checks
    /// skip hex decoding when it is too short).
    pub hex_run: usize,
    /// True if the input was printable ASCII (plus tab, CR, LF), so `text` is
    /// that input lower-cased: ASCII, and the same bytes as the input.
    /// Checks that would otherwise ask `is_ascii` of the text read this.
    pub plain: bool,
    /// True if `text` holds a `<` or a `]`, with which HTML comments and
    /// Markdown's comment idiom begin (`html-comment` skips text without).
    pub markup: bool,
}

/// The base64 alphabets, by byte: bit 0 the standard one, bit 1 the
/// URL-safe one (neither with padding). The run count here takes either;
/// the blob scan ([`crate::rules::decoded`]) tells them apart. One load a
/// byte where that scan tested both alphabets byte by byte (about 40 M
/// instructions of a bench run).
pub(crate) const B64_CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        let alnum = b.is_ascii_alphanumeric();
        t[i] = (alnum || b == b'+' || b == b'/') as u8
            | (((alnum || b == b'_' || b == b'-') as u8) << 1);
        i += 1;
    }
    t
};

/// Byte classes for `runs`: bit 0 base64 alphabet (either of
/// [`B64_CLASS`]), bit 1 ASCII whitespace, bit 2 not plain ASCII (see
/// [`plain_ascii`]), bit 3 hex digit, bit 4 `<` or `]` (see
/// [`Normalized::markup`]).
static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        if B64_CLASS[i] != 0 {
            t[i] = 1;
        }
        if matches!(b, b' ' | b'\t'..=b'\r') {
            t[i] = 2;
        }
        if !((b >= 0x20 && b < 0x7f) || b == b'\n' || b == b'\t' || b == b'\r') {
            t[i] |= 4;
        }
        if b.is_ascii_hexdigit() {
            t[i] |= 8;
        }
        if b == b'<' || b == b']' {
            t[i] |= 16;
        }
        i += 1;
    }
    t
};

/// What one pass over a text tells (see `runs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Runs {
    /// Longest run of base64-alphabet bytes.
    blob: usize,
    /// Longest run of ASCII whitespace.
    space: usize,
    /// Longest run of hex digits.
    hex: usize,
    /// The text is [`plain_ascii`].
    plain: bool,
    /// The text holds a `<` or a `]`.
    markup: bool,
}

/// The longest base64-alphabet, ASCII whitespace and hex-digit runs of `s`,
/// in one pass (every code rule that looks for them bails out on these),
/// and whether `s` is [`plain_ascii`].
fn runs(s: &str) -> Runs {
    let mut c = RunCounter::default();
    for &b in s.as_bytes() {
        c.push(b);
    }
    c.finish()
}

/// `runs` a byte at a time, so that another loop over the same bytes (the
/// pattern prefilter's automaton, which waits on a load per byte) can count
/// them for free: see [`normalize_text_into`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunCounter {
    b: usize,
    best_b: usize,
    w: usize,
    best_w: usize,
    h: usize,
    best_h: usize,
    classes: u8,
}

impl RunCounter {
    /// Counts the next byte.
    #[inline(always)]
    pub fn push(&mut self, c: u8) {
        let class = CLASS[usize::from(c)];
        self.classes |= class;
        self.b = if class & 1 != 0 { self.b + 1 } else { 0 };
        self.w = if class & 2 != 0 { self.w + 1 } else { 0 };
        self.h = if class & 8 != 0 { self.h + 1 } else { 0 };
        self.best_b = self.best_b.max(self.b);
        self.best_w = self.best_w.max(self.w);
        self.best_h = self.best_h.max(self.h);
    }

    /// The runs of the bytes pushed so far.
    pub fn finish(&self) -> Runs {
        Runs {
            blob: self.best_b,
            space: self.best_w,
            hex: self.best_h,
            plain: self.classes & 4 == 0,
            markup: self.classes & 16 != 0,
        }
    }
}

/// Width of one lane of [`PackedRuns`]: 20 bits of count and a guard bit.
const LANE: u32 = 21;
/// The lowest bit of each of the three lanes (blob, space, hex).
const LANE_ONES: u64 = 1 | 1 << LANE | 1 << (2 * LANE);
/// The guard bit of each lane.
const LANE_GUARDS: u64 = LANE_ONES << (LANE - 1);

/// For each [`CLASS`] value, the lanes of [`PackedRuns`] whose run goes on
/// (all 21 bits set) while the others start again from zero: lane 0 for
/// class bit 0 (base64), lane 1 for bit 1 (whitespace), lane 2 for bit 3 (hex).
static LANE_MASK: [u64; 32] = {
    let mut t = [0u64; 32];
    let lane = (1u64 << LANE) - 1;
    let mut c = 0;
    while c < 32 {
        if c & 1 != 0 {
            t[c] |= lane;
        }
        if c & 2 != 0 {
            t[c] |= lane << LANE;
        }
        if c & 8 != 0 {
            t[c] |= lane << (2 * LANE);
        }
        c += 1;
    }
    t
};

/// [`RunCounter`] with its three runs packed in the lanes of one `u64` (and
/// their best lengths in another), so that a byte costs a few word
/// operations instead of three increments and three maxima: for texts
/// shorter than [`PackedRuns::MAX_LEN`], whose runs fit a lane's 20 bits.
#[derive(Clone, Copy, Debug)]
pub struct PackedRuns {
    /// The current runs, one a lane.
    cur: u64,
    /// One more than the longest runs so far, one a lane: the bias makes
    /// "the current run is longer" a plain borrow test (see `push`).
    best: u64,
    classes: u8,
}

impl Default for PackedRuns {
    fn default() -> Self {
        PackedRuns {
            cur: 0,
            best: LANE_ONES,
            classes: 0,
        }
    }
}

impl PackedRuns {
    /// Texts shorter than this (in bytes) can be counted: a run then fits
    /// in 20 bits, and a best length plus its bias in 21.
    pub const MAX_LEN: usize = 1 << (LANE - 1);

    /// Counts the next byte.
    #[inline(always)]
    pub fn push(&mut self, c: u8) {
        let class = CLASS[usize::from(c)];
        self.classes |= class;
        // Lanes that go on grow by one, the others drop to zero.
        self.cur = (self.cur + LANE_ONES) & LANE_MASK[usize::from(class)];
        // A run grows by one at a time, so it beats the best only by
        // reaching best + 1, the biased best: then the lane's subtraction
        // does not borrow, its guard bit stays set, and the best grows by one.
        let longer = ((self.cur | LANE_GUARDS) - self.best) & LANE_GUARDS;
        self.best += longer >> (LANE - 1);
    }

    /// The [`RunCounter`] that the same bytes would have given.
    pub fn counter(&self) -> RunCounter {
        let lane = |x: u64, k: u32| ((x >> (k * LANE)) & ((1 << LANE) - 1)) as usize;
        RunCounter {
            b: lane(self.cur, 0),
            best_b: lane(self.best, 0) - 1,
            w: lane(self.cur, 1),
            best_w: lane(self.best, 1) - 1,
            h: lane(self.cur, 2),
            best_h: lane(self.best, 2) - 1,
            classes: self.classes,
        }
    }
}

impl Normalized {
    /// Records the invisible character `c` (see [`is_invisible`]) found at
    /// bytes `start..end` of the source, with its kind; a tag character that
    /// spells printable ASCII adds that letter to `tag_text`.
    fn push_invisible(&mut self, c: char, start: usize, end: usize) {
        let kind = match c {
            '\u{e0000}'..='\u{e007f}' => HiddenKind::Tag,
            '\u{200e}'
            | '\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
            | '\u{061c}' => HiddenKind::Bidi,
            '\u{fe00}'..='\u{fe0f}' | '\u{e0100}'..='\u{e01ef}' | '\u{180b}'..='\u{180f}' => {
                HiddenKind::Variation
            }
            _ => HiddenKind::ZeroWidth,
        };
        if kind == HiddenKind::Tag {
            let v = c as u32 - 0xe0000;
            if (0x20..0x7f).contains(&v) {
                self.tag_text.push(char::from(v as u8));
            }
        }
        self.hidden.push(Hidden { kind, start, end });
    }

    /// Sets the runs counted after [`normalize_text_into`] (and
    /// [`Normalized::markup`], which for plain ASCII text the same count
    /// tells: lower-casing moves neither `<` nor `]`). Other text's
    /// `markup` must be read from its normalised form after this call, as
    /// `normalize_other` does (full-width `＜` folds to `<`).
    pub fn set_runs(&mut self, r: Runs) {
        (self.blob_run, self.space_run, self.hex_run) = (r.blob, r.space, r.hex);
        self.markup = r.markup;
    }

    /// Maps a byte range of `text` to a byte range of the decoded input.
    pub fn to_decoded(&self, start: usize, end: usize) -> (usize, usize) {
        match &self.map {
            None => (start, end),
            Some(m) => {
                if m.is_empty() {
                    return (0, 0);
                }
                let s = m[start.min(m.len() - 1)].0 as usize;
                let e = if end == 0 {
                    s
                } else {
                    m[(end - 1).min(m.len() - 1)].1 as usize
                };
                (s, e.max(s))
            }
        }
    }
}

/// [`normalize`] into `n`, reusing its buffers: printable ASCII text (most
/// text) costs no allocation once the buffer is big enough.
pub fn normalize_into(s: &str, n: &mut Normalized) {
    // One pass tells both the runs and whether the text is plain ASCII.
    let r = runs(s);
    if r.plain {
        fill_plain(s, n);
        n.set_runs(r);
    } else {
        normalize_other(s, r, n);
    }
}

/// True if `s` is printable ASCII plus tab, CR and LF only ([`runs`] tells
/// the same in its pass). Eight bytes at a time: a few operations on a word
/// find whether any of its bytes is outside `0x20..0x7f` (most words of a
/// description are not), and only such a word is looked at byte by byte
/// for a tab or a line break. (A fold over the bytes, which the compiler
/// vectorised poorly, cost about 3 instructions a byte.)
fn plain_ascii(s: &str) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut words = s.as_bytes().chunks_exact(8);
    for w in &mut words {
        let mut word = [0u8; 8];
        word.copy_from_slice(w);
        let x = u64::from_le_bytes(word);
        // Each byte's high bit: set in `x` for a non-ASCII byte; set in
        // `(x | HIGH) - 0x20 * ONES` for a low seven bits of 0x20 or more
        // (no byte borrows from the next); set in `(x & !HIGH) + ONES` for
        // low seven bits of 0x7f (no byte carries into the next).
        let odd = (x | !((x | HIGH) - 0x20 * ONES) | ((x & !HIGH) + ONES)) & HIGH;
        if odd != 0 && !w.iter().all(|&b| plain_byte(b)) {
            return false;
        }
    }
    words.remainder().iter().all(|&b| plain_byte(b))
}

/// [`plain_ascii`] a byte at a time, which it must agree with.
#[cfg(test)]
fn plain_ascii_bytes(s: &str) -> bool {
    s.bytes().all(plain_byte)
}

/// [`normalize_into`], except that for plain ASCII input (see
/// [`Normalized::plain`]) the runs (`blob_run`, `space_run`, `hex_run`, and
/// `markup`) are left for the caller to count over `n.text` with a [`RunCounter`] and set
/// with [`Normalized::set_runs`]; returns true when it did so. Lower-casing
/// changes none of the bytes' classes, so the runs of `n.text` are those of
/// `s`. The engine counts them in the pattern prefilter's loop.
pub fn normalize_text_into(s: &str, n: &mut Normalized) -> bool {
    if !plain_ascii(s) {
        normalize_other(s, runs(s), n);
        return false;
    }
    fill_plain(s, n);
    (n.blob_run, n.space_run, n.hex_run, n.markup) = (0, 0, 0, false);
    true
}

/// Fills `n` from plain ASCII `s` (see [`Normalized::plain`]): the text
/// lower-cased into the reused buffer, nothing hidden, no offset map; the
/// runs are the caller's to set.
fn fill_plain(s: &str, n: &mut Normalized) {
    n.text.clear();
    n.text.push_str(s);
    n.text.make_ascii_lowercase();
    n.map = None;
    n.hidden.clear();
    n.tag_text.clear();
    n.mixed_script = false;
    n.plain = true;
}

/// True if lower-casing or NFKC changes `c` (ASCII upper case, Cyrillic
/// upper case, the long s `ſ`, the Kelvin sign ...): normalised text never
/// contains such a character, so the pattern prefilter leaves literals with
/// one out (see [`crate::rules::pattern`]).
pub fn folded_away(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_uppercase();
    }
    let mut lower = c.to_lowercase();
    if !(lower.next() == Some(c) && lower.next().is_none()) {
        return true;
    }
    let mut nfkc = std::iter::once(c).nfkc();
    !(nfkc.next() == Some(c) && nfkc.next().is_none())
}

/// Normalises `s` (already JSON-decoded). See the module docs for the steps.
pub fn normalize(s: &str) -> Normalized {
    let mut n = Normalized::default();
    normalize_into(s, &mut n);
    n
}

/// True for the bytes of plain ASCII text (see [`Normalized::plain`]).
fn plain_byte(b: u8) -> bool {
    matches!(b, b' '..=b'~' | b'\n' | b'\t' | b'\r')
}

/// Normalises `s`, which is not plain ASCII and whose runs are `r`, into
/// `n` (reusing its buffers).
///
/// Runs of plain ASCII bytes, most of such text (an em dash or an emoji in
/// a long English description), are lower-cased and mapped a run at a time;
/// the other characters one by one. Look-alikes are folded afterwards, and
/// only when the text holds one (this costs a copy of the text as
/// characters). It gives what the character-by-character version kept in
/// the tests gives.
fn normalize_other(s: &str, r: Runs, n: &mut Normalized) {
    n.text.clear();
    let mut map = n.map.take().unwrap_or_default();
    map.clear();
    n.hidden.clear();
    n.tag_text.clear();
    n.mixed_script = false;
    n.plain = false;
    n.set_runs(r);
    let bytes = s.as_bytes();
    let mut confusables = false;
    let mut i = 0;
    while i < s.len() {
        // Printable ASCII, tab, CR and LF are none of the cases below:
        // lower-cased, one byte for one byte. (A run stops at an ASCII
        // control or at the first byte of another character: `i` stays on
        // a character boundary.)
        let run = bytes[i..]
            .iter()
            .position(|&b| !plain_byte(b))
            .unwrap_or(s.len() - i);
        if run > 0 {
            let at = n.text.len();
            n.text.push_str(&s[i..i + run]);
            n.text[at..].make_ascii_lowercase();
            map.extend((i..i + run).map(|j| (j as u32, j as u32 + 1)));
            i += run;
            continue;
        }
        let Some(c) = s[i..].chars().next() else {
            break;
        };
        let end = i + c.len_utf8();
        if c == '\u{1b}' {
            let last = escape_end(s, end);
            n.hidden.push(Hidden {
                kind: HiddenKind::Ansi,
                start: i,
                end: last,
            });
            i = last;
            continue;
        }
        // Every ASCII character left is a control (DEL among them).
        if c.is_control() {
            n.hidden.push(Hidden {
                kind: HiddenKind::Control,
                start: i,
                end,
            });
            i = end;
            continue;
        }
        if is_invisible(c) {
            n.push_invisible(c, i, end);
            i = end;
            continue;
        }
        let (i32_, e32) = (i as u32, end as u32);
        // A combining accent after a Latin letter (one byte, so the last
        // entry of the map is its own): drop it (accent folding).
        if is_combining_mark(c)
            && n.text
                .as_bytes()
                .last()
                .is_some_and(u8::is_ascii_alphabetic)
        {
            if let Some(last) = map.last_mut() {
                last.1 = e32;
            }
            i = end;
            continue;
        }
        fold_char(c, |l| {
            confusables |= confusable(l).is_some();
            n.text.push(l);
            map.extend(std::iter::repeat_n((i32_, e32), l.len_utf8()));
        });
        i = end;
    }
    if confusables {
        // Each character with the decoded range of its first byte (all its
        // bytes have the same one).
        let mut out: Vec<(char, u32, u32)> = n
            .text
            .char_indices()
            .map(|(k, c)| (c, map[k].0, map[k].1))
            .collect();
        fold_confusables(&mut out, &mut n.mixed_script);
        n.text.clear();
        map.clear();
        for (c, a, b) in out {
            n.text.push(c);
            map.extend(std::iter::repeat_n((a, b), c.len_utf8()));
        }
    }
    n.map = Some(map);
    // NFKC makes `<` of `＜` and `]` of `］`: the input's bytes do not tell.
    n.markup = memchr::memchr2(b'<', b']', n.text.as_bytes()).is_some();
}

/// Calls `each` with what one character of text becomes once normalised:
/// NFKC, then accent folding (a precomposed Latin letter whose canonical
/// decomposition starts with an ASCII letter becomes that letter), then
/// lower case.
fn fold_char(c: char, mut each: impl FnMut(char)) {
    for k in std::iter::once(c).nfkc() {
        let mut base = None;
        decompose_canonical(k, |d| {
            if base.is_none() {
                base = Some(d);
            }
        });
        let k = match base {
            Some(b) if b.is_ascii_alphabetic() && b != k => b,
            _ => k,
        };
        for l in k.to_lowercase() {
            each(l);
        }
    }
}

/// Where an escape sequence whose ESC ends at `at` in `s` ends: CSI (ESC [
/// params final), OSC (ESC ] ... BEL or ST), or ESC plus one character.
fn escape_end(s: &str, at: usize) -> usize {
    let mut chars = s[at..].char_indices().map(|(j, c)| (at + j, c)).peekable();
    let after = |(j, c): (usize, char)| j + c.len_utf8();
    let mut last = at;
    match chars.peek().map(|&(_, c)| c) {
        Some('[') => {
            if let Some(x) = chars.next() {
                last = after(x);
            }
            for (j, c2) in chars.by_ref() {
                last = after((j, c2));
                if ('\u{40}'..='\u{7e}').contains(&c2) {
                    break;
                }
            }
        }
        Some(']') => {
            if let Some(x) = chars.next() {
                last = after(x);
            }
            while let Some((j, c2)) = chars.next() {
                last = after((j, c2));
                if c2 == '\u{7}' {
                    break;
                }
                if c2 == '\u{1b}' && chars.peek().map(|&(_, c)| c) == Some('\\') {
                    if let Some(x) = chars.next() {
                        last = after(x);
                    }
                    break;
                }
            }
        }
        Some(_) => {
            if let Some(x) = chars.next() {
                last = after(x);
            }
        }
        None => {}
    }
    last
}

/// The Latin letter a Cyrillic or Greek look-alike stands for (lower case).
fn confusable(c: char) -> Option<char> {
    Some(match c {
        'а' => 'a',
        'в' => 'b',
        'с' => 'c',
        'е' | 'ё' => 'e',
        'һ' => 'h',
        'і' => 'i',
        'ј' => 'j',
        'к' => 'k',
        'м' => 'm',
        'н' => 'h',
        'о' => 'o',
        'р' => 'p',
        'ѕ' => 's',
        'т' => 't',
        'у' => 'y',
        'х' => 'x',
        'ԁ' => 'd',
        'ԛ' => 'q',
        'ԝ' => 'w',
        'α' => 'a',
        'β' => 'b',
        'ε' => 'e',
        'ι' => 'i',
        'κ' => 'k',
        'ν' => 'v',
        'ο' => 'o',
        'ρ' => 'p',
        'τ' => 't',
        'υ' => 'u',
        'χ' => 'x',
        'ɑ' => 'a',
        'ı' => 'i',
        _ => return None,
    })
}

/// Folds look-alikes inside words that mix Latin letters with them.
fn fold_confusables(out: &mut [(char, u32, u32)], mixed: &mut bool) {
    let mut i = 0;
    while i < out.len() {
        if !out[i].0.is_alphanumeric() {
            i += 1;
            continue;
        }
        let start = i;
        let mut latin = false;
        let mut other = false;
        while i < out.len() && (out[i].0.is_alphanumeric() || out[i].0 == '_') {
            let c = out[i].0;
            if c.is_ascii_alphabetic() {
                latin = true;
            } else if confusable(c).is_some() {
                other = true;
            }
            i += 1;
        }
        if latin && other {
            *mixed = true;
            for e in &mut out[start..i] {
                if let Some(l) = confusable(e.0) {
                    e.0 = l;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The normalisation as it was written first, character by character:
    /// what [`normalize`] must give.
    fn normalize_by_char(s: &str) -> Normalized {
        // Fast path: printable ASCII plus tab/CR/LF only needs lower-casing.
        let r = runs(s);
        if r.plain {
            return Normalized {
                text: s.to_ascii_lowercase(),
                blob_run: r.blob,
                space_run: r.space,
                hex_run: r.hex,
                plain: true,
                ..Normalized::default()
            };
        }
        let mut out: Vec<(char, u32, u32)> = Vec::with_capacity(s.len());
        let mut n = Normalized {
            blob_run: r.blob,
            space_run: r.space,
            hex_run: r.hex,
            ..Normalized::default()
        };
        let mut chars = s.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            let end = i + c.len_utf8();
            // Printable ASCII, tab, CR and LF (most characters even of text that
            // is not plain ASCII) are none of the cases below but the last:
            // lower-cased, one byte for one byte.
            if matches!(c, ' '..='~' | '\n' | '\t' | '\r') {
                out.push((c.to_ascii_lowercase(), i as u32, end as u32));
                continue;
            }
            if c == '\u{1b}' {
                // A whole escape sequence: CSI (ESC [ params final), OSC (ESC ] ... BEL/ST),
                // or ESC plus one character.
                let mut last = end;
                match chars.peek().map(|&(_, c)| c) {
                    Some('[') => {
                        let (j, c2) = chars.next().unwrap_or((i, '['));
                        last = j + c2.len_utf8();
                        for (j, c2) in chars.by_ref() {
                            last = j + c2.len_utf8();
                            if ('\u{40}'..='\u{7e}').contains(&c2) {
                                break;
                            }
                        }
                    }
                    Some(']') => {
                        let (j, c2) = chars.next().unwrap_or((i, ']'));
                        last = j + c2.len_utf8();
                        while let Some((j, c2)) = chars.next() {
                            last = j + c2.len_utf8();
                            if c2 == '\u{7}' {
                                break;
                            }
                            if c2 == '\u{1b}' && chars.peek().map(|&(_, c)| c) == Some('\\') {
                                if let Some((j, c3)) = chars.next() {
                                    last = j + c3.len_utf8();
                                }
                                break;
                            }
                        }
                    }
                    Some(_) => {
                        if let Some((j, c2)) = chars.next() {
                            last = j + c2.len_utf8();
                        }
                    }
                    None => {}
                }
                n.hidden.push(Hidden {
                    kind: HiddenKind::Ansi,
                    start: i,
                    end: last,
                });
                continue;
            }
            if c.is_control() && !matches!(c, '\n' | '\t' | '\r') {
                n.hidden.push(Hidden {
                    kind: HiddenKind::Control,
                    start: i,
                    end,
                });
                continue;
            }
            if is_invisible(c) {
                n.push_invisible(c, i, end);
                continue;
            }
            let (i32_, e32) = (i as u32, end as u32);
            if c.is_ascii() {
                out.push((c.to_ascii_lowercase(), i32_, e32));
                continue;
            }
            if is_combining_mark(c) {
                // A combining accent after a Latin letter: drop it (accent folding).
                if out.last().is_some_and(|&(p, _, _)| p.is_ascii_alphabetic()) {
                    if let Some(last) = out.last_mut() {
                        last.2 = e32;
                    }
                    continue;
                }
            }
            fold_char(c, |l| out.push((l, i32_, e32)));
        }
        fold_confusables(&mut out, &mut n.mixed_script);
        let mut map = Vec::with_capacity(out.len());
        n.text.reserve(out.len());
        for (c, a, b) in out {
            n.text.push(c);
            for _ in 0..c.len_utf8() {
                map.push((a, b));
            }
        }
        n.map = Some(map);
        n
    }

    /// [`normalize`] gives what [`normalize_by_char`] gives: text, map,
    /// hidden characters, tag text, runs and flags.
    #[test]
    fn normalize_equals_by_char() {
        use proptest::prelude::*;
        // What a normalisation holds besides its runs and `markup`.
        fn parts(n: &Normalized) -> impl PartialEq + std::fmt::Debug + '_ {
            (
                &n.text,
                &n.map,
                &n.hidden,
                &n.tag_text,
                n.mixed_script,
                n.plain,
            )
        }
        let check = |t: &str| {
            let (a, b) = (normalize(t), normalize_by_char(t));
            assert_eq!(parts(&a), parts(&b), "{t:?}");
            assert_eq!(
                (a.blob_run, a.space_run, a.hex_run),
                (b.blob_run, b.space_run, b.hex_run)
            );
            assert_eq!(a.markup, a.text.contains(['<', ']']), "{t:?}");
            // Reused buffers give the same, whatever they held before.
            let mut m = normalize("\u{200b}Ab\u{1b}[2K о\u{301}");
            assert!(!normalize_text_into(t, &mut m) || m.text == a.text);
            assert_eq!(parts(&m), parts(&a), "{t:?}");
        };
        for t in [
            "",
            "Price.\u{1b}[F\u{1b}[2KIMPORTANT: x\u{1b}[0m",
            "a\u{1b}]0;title\u{7}b\u{1b}]8;;x\u{1b}\\c\u{1b}",
            "\u{1b}[12",
            "ign\u{43e}r\u{435} previous — re\u{301}ve\u{301}lez ＩＧＮＯＲＥ ﬁ",
            "Weather\u{e0072}\u{e0065}\u{e0061}\u{e0064} 🎯\u{fe0f} x\u{200d}y",
            "\u{301}a\u{301}\u{301} Д\u{7f}\u{85}\t\r\n言",
        ] {
            check(t);
        }
        proptest!(ProptestConfig::with_cases(4000), |(t in "[aZ0 .\t\n\u{1b}\\[\\]\u{7}\\\\\u{7f}\u{85}\u{200b}\u{200d}\u{200e}\u{202e}\u{fe0f}\u{e0041}\u{e0100}\u{301}éÉаАеЕοΟıﬁＡ言🎯—<＜］]{0,40}")| {
            check(&t);
        });
    }

    fn back<'a>(src: &'a str, n: &Normalized, needle: &str) -> &'a str {
        let at = n.text.find(needle).expect("needle in normalised text");
        let (s, e) = n.to_decoded(at, at + needle.len());
        &src[s..e]
    }

    #[test]
    fn runs_tell_plain_ascii() {
        for c in (0..0x800u32)
            .chain([0xfeff, 0x1f600, 0xe0041])
            .filter_map(char::from_u32)
        {
            let t = format!("ab{c}d");
            assert_eq!(runs(&t).plain, plain_ascii(&t), "{c:?}");
        }
    }

    /// The word-at-a-time `plain_ascii` agrees with the plain one: every
    /// character of the first planes at every place of a word and the
    /// remainder, and random text.
    #[test]
    fn plain_ascii_agrees_with_the_byte_loop() {
        use proptest::prelude::*;
        for c in (0..0x800u32)
            .chain([0x2028, 0xfeff, 0xffff, 0x1f600, 0xe0041])
            .filter_map(char::from_u32)
        {
            for at in 0..20 {
                let t = format!("{}{c}{}", "a".repeat(at), "Z".repeat(19 - at));
                assert_eq!(plain_ascii(&t), plain_ascii_bytes(&t), "{c:?} at {at}");
            }
        }
        proptest!(ProptestConfig::with_cases(4000), |(t in "[a ~\t\n\r\x00-\x1f\x7f\u{80}-\u{ff}é言🎯]{0,40}")| {
            prop_assert_eq!(plain_ascii(&t), plain_ascii_bytes(&t));
        });
    }

    /// Counting the runs of the lower-cased text, as the engine does after
    /// [`normalize_text_into`], gives what [`normalize_into`] measures.
    #[test]
    fn deferred_runs_equal_measured_runs() {
        use proptest::prelude::*;
        proptest!(ProptestConfig::with_cases(2000), |(t in "[a-hA-H0-9+/_=\\- .\t\n\u{1b}é<\\]]{0,60}")| {
            let mut m = Normalized::default();
            normalize_into(&t, &mut m);
            let mut n = Normalized::default();
            if normalize_text_into(&t, &mut n) {
                let mut c = RunCounter::default();
                for &b in n.text.as_bytes() {
                    c.push(b);
                }
                n.set_runs(c.finish());
            }
            prop_assert_eq!(&n.text, &m.text);
            prop_assert_eq!((n.blob_run, n.space_run, n.hex_run, n.plain, n.markup), (m.blob_run, m.space_run, m.hex_run, m.plain, m.markup));
            prop_assert_eq!(n.plain, plain_ascii(&t));
        });
    }

    /// [`PackedRuns`] counts what [`RunCounter`] counts, current runs
    /// included, for texts of every class mix and for runs at the lanes'
    /// limit.
    #[test]
    fn packed_runs_equal_run_counter() {
        use proptest::prelude::*;
        let same = |bytes: &[u8]| {
            let (mut c, mut p) = (RunCounter::default(), PackedRuns::default());
            for &b in bytes {
                c.push(b);
                p.push(b);
                assert_eq!(p.counter(), c);
            }
        };
        proptest!(ProptestConfig::with_cases(2000), |(t in proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'Z'), Just(b'7'), Just(b'+'), Just(b'_'), Just(b' '), Just(b'\t'), Just(b'<'), Just(b']'), Just(0xc3u8), Just(0x7fu8), any::<u8>()], 0..80))| {
            same(&t);
        });
        // The longest runs a text under the limit can hold, in each lane.
        for b in [b'a', b' ', b'7'] {
            let (mut c, mut p) = (RunCounter::default(), PackedRuns::default());
            for _ in 1..PackedRuns::MAX_LEN {
                c.push(b);
                p.push(b);
            }
            assert_eq!(p.counter(), c);
        }
    }

    #[test]
    fn runs_are_measured() {
        let n = normalize("ab  c\t\n d aGVsbG8_d29y-bGQ= x");
        assert_eq!((n.blob_run, n.space_run, n.hex_run), (16, 3, 3));
        assert_eq!(normalize("x deadBEEF0 é").hex_run, 9);
        let mut m = Normalized::default();
        normalize_into("é  x1+/", &mut m);
        assert_eq!((m.blob_run, m.space_run), (4, 2));
        normalize_into("a b", &mut m);
        assert_eq!((m.blob_run, m.space_run), (1, 1));
    }

    /// No character survives normalisation that [`folded_away`] says cannot
    /// (the prefilter would otherwise run every pattern on such text: still
    /// exact, only slower).
    #[test]
    fn normalised_text_has_nothing_folded_away() {
        let mut text = String::new();
        for c in (0..=0x10ffffu32).filter_map(char::from_u32) {
            text.push(c);
            // Letters next to each other, as in a word (confusable folding).
            text.push('a');
            if text.len() > 4096 {
                let n = normalize(&text);
                let bad = n.text.chars().find(|&c| folded_away(c));
                assert!(bad.is_none(), "{bad:?}");
                text.clear();
            }
        }
        let n = normalize(&text);
        assert!(!n.text.chars().any(folded_away));
        assert!(
            folded_away('A') && folded_away('ſ') && folded_away('\u{212a}') && folded_away('Д')
        );
        assert!(!folded_away('a') && !folded_away('д') && !folded_away('ß') && !folded_away('言'));
    }

    #[test]
    fn ascii_is_lowercased_in_place() {
        let n = normalize("Ignore Previous");
        assert_eq!(n.text, "ignore previous");
        assert_eq!(n.to_decoded(7, 15), (7, 15));
    }

    #[test]
    fn invisible_characters_are_removed_and_mapped() {
        let src = "ig\u{200b}nore this";
        let n = normalize(src);
        assert_eq!(n.text, "ignore this");
        assert_eq!(back(src, &n, "ignore"), "ig\u{200b}nore");
        assert_eq!(n.hidden.len(), 1);
        assert_eq!(n.hidden[0].kind, HiddenKind::ZeroWidth);
    }

    #[test]
    fn tag_characters_are_decoded() {
        let hidden: String = "read ~/.ssh"
            .chars()
            .map(|c| char::from_u32(0xe0000 + c as u32).expect("tag char"))
            .collect();
        let n = normalize(&format!("Weather{hidden}"));
        assert_eq!(n.tag_text, "read ~/.ssh");
        assert_eq!(n.text, "weather");
        assert!(n.hidden.iter().all(|h| h.kind == HiddenKind::Tag));
    }

    #[test]
    fn ansi_sequences_are_removed_whole() {
        let src = "Price.\u{1b}[F\u{1b}[2KIMPORTANT: x\u{1b}[0m";
        let n = normalize(src);
        assert_eq!(n.text, "price.important: x");
        assert_eq!(
            n.hidden
                .iter()
                .filter(|h| h.kind == HiddenKind::Ansi)
                .count(),
            3
        );
        assert_eq!(back(src, &n, "important"), "IMPORTANT");
    }

    #[test]
    fn fullwidth_accents_and_confusables_fold() {
        assert_eq!(normalize("ＩＧＮＯＲＥ").text, "ignore");
        assert_eq!(normalize("révélez").text, "revelez");
        assert_eq!(normalize("re\u{301}ve\u{301}lez").text, "revelez");
        // Cyrillic о and е inside a Latin word.
        let n = normalize("ign\u{43e}r\u{435} previous");
        assert_eq!(n.text, "ignore previous");
        assert!(n.mixed_script);
        // Pure Russian stays Russian.
        assert_eq!(normalize("не говори").text, "не говори");
        // Japanese and Korean survive NFKC per character.
        assert_eq!(
            normalize("ユーザーに言わないで").text,
            "ユーザーに言わないで"
        );
        assert_eq!(normalize("사용자에게").text, "사용자에게");
    }
}
