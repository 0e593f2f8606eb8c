//! Visible rendering of hostile text.
//!
//! Text from a manifest is written by a stranger. Before any of it reaches a
//! terminal, control characters, ANSI escapes and invisible characters are
//! replaced by a visible stand-in (`⟨ESC⟩`, `⟨U+200B⟩`), so a description cannot
//! clear the screen, hide a line, or smuggle text past a reviewer.
//!
//! [`visible`] rewrites a string; [`VisibleSource`] rewrites a whole file and
//! remaps byte spans into the rewritten text, so diagnostics still point at the
//! right characters.

use std::fmt::Write as _;

/// True for characters that render as nothing, or that reorder or hide text:
/// zero-width characters, bidi controls, Unicode tag characters, variation
/// selectors and other default-ignorable code points.
pub fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{00ad}'                // soft hyphen
        | '\u{034f}'              // combining grapheme joiner
        | '\u{061c}'              // Arabic letter mark
        | '\u{115f}' | '\u{1160}' // Hangul fillers
        | '\u{17b4}' | '\u{17b5}'
        | '\u{180b}'..='\u{180f}' // Mongolian selectors
        | '\u{200b}'..='\u{200f}' // zero-width space, joiners, LRM, RLM
        | '\u{202a}'..='\u{202e}' // bidi embeddings and overrides
        | '\u{2060}'..='\u{206f}' // word joiner, invisible operators, bidi isolates
        | '\u{3164}'              // Hangul filler
        | '\u{fe00}'..='\u{fe0f}' // variation selectors
        | '\u{feff}'              // zero-width no-break space
        | '\u{ffa0}'
        | '\u{fff0}'..='\u{fff8}'
        | '\u{1bca0}'..='\u{1bca3}'
        | '\u{1d173}'..='\u{1d17a}'
        | '\u{e0000}'..='\u{e0fff}' // tags and variation selectors supplement
    )
}

/// True for C0 and C1 control characters and DEL.
pub fn is_control(c: char) -> bool {
    c.is_control()
}

/// True if `c` must be shown as a stand-in. Newline and tab are kept when
/// `keep_layout` is set (they are how text is laid out, not hidden).
pub fn needs_escape(c: char, keep_layout: bool) -> bool {
    if keep_layout && (c == '\n' || c == '\t') {
        return false;
    }
    is_control(c) || is_invisible(c) || c == '\u{2028}' || c == '\u{2029}'
}

/// The visible stand-in for one character.
pub fn stand_in(c: char) -> String {
    let name = match c {
        '\u{1b}' => "ESC",
        '\0' => "NUL",
        '\r' => "CR",
        '\n' => "LF",
        '\t' => "TAB",
        '\u{7f}' => "DEL",
        '\u{8}' => "BS",
        '\u{7}' => "BEL",
        _ => "",
    };
    if name.is_empty() {
        format!("⟨U+{:04X}⟩", c as u32)
    } else {
        format!("⟨{name}⟩")
    }
}

/// `s` with every control and invisible character replaced by its stand-in.
/// Newlines and tabs are kept when `keep_layout` is set.
pub fn visible_with(s: &str, keep_layout: bool) -> String {
    if !s.chars().any(|c| needs_escape(c, keep_layout)) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if needs_escape(c, keep_layout) {
            out.push_str(&stand_in(c));
        } else {
            out.push(c);
        }
    }
    out
}

/// `s` on one line, every control and invisible character shown as a stand-in.
pub fn visible(s: &str) -> String {
    visible_with(s, false)
}

/// `s` shortened to at most `max` characters (with `…`), then made visible.
pub fn visible_short(s: &str, max: usize) -> String {
    let mut t: String = s.chars().take(max).collect();
    if s.chars().nth(max).is_some() {
        t.push('…');
    }
    visible(&t)
}

/// A whole source text made safe to print, with a map from original byte
/// offsets to offsets in the safe text.
#[derive(Clone, Debug)]
pub struct VisibleSource {
    /// The rewritten text.
    pub text: String,
    /// `(original offset, shift)` at each rewritten character, ascending; the
    /// shift applies from that offset on.
    shifts: Vec<(usize, isize)>,
}

impl VisibleSource {
    /// Rewrites `original` (newlines and tabs kept). Invalid UTF-8 is shown as U+FFFD
    /// stand-ins of the same width in bytes so later offsets stay close.
    pub fn new(original: &str) -> Self {
        let mut text = String::with_capacity(original.len());
        let mut shifts = Vec::new();
        let mut shift: isize = 0;
        for (i, c) in original.char_indices() {
            if needs_escape(c, true) {
                let s = stand_in(c);
                shift += s.len() as isize - c.len_utf8() as isize;
                shifts.push((i + c.len_utf8(), shift));
                text.push_str(&s);
            } else {
                text.push(c);
            }
        }
        VisibleSource { text, shifts }
    }

    /// Maps an offset in the original text to the rewritten text. An offset
    /// inside a rewritten character maps to the start of its stand-in.
    pub fn map(&self, offset: usize) -> usize {
        let idx = self.shifts.partition_point(|&(at, _)| at <= offset);
        let shift = if idx == 0 { 0 } else { self.shifts[idx - 1].1 };
        (offset as isize + shift).max(0) as usize
    }

    /// Maps a span `(start, len)` into the rewritten text.
    pub fn map_span(&self, start: usize, end: usize) -> miette::SourceSpan {
        let s = self.map(start);
        let e = self.map(end).max(s);
        (s, e - s).into()
    }
}

/// Writes `bytes` as lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_are_shown() {
        assert_eq!(visible("a\u{1b}[8mb"), "a⟨ESC⟩[8mb");
        assert_eq!(visible("x\u{200b}y"), "x⟨U+200B⟩y");
        assert_eq!(visible("tag\u{e0041}"), "tag⟨U+E0041⟩");
        assert_eq!(visible("l1\nl2"), "l1⟨LF⟩l2");
        assert_eq!(visible_with("l1\nl2", true), "l1\nl2");
        assert_eq!(visible("\u{202e}abc"), "⟨U+202E⟩abc");
        assert_eq!(visible("plain café"), "plain café");
    }

    #[test]
    fn source_offsets_are_remapped() {
        let src = "ab\u{1b}cd\u{200b}ef";
        let v = VisibleSource::new(src);
        assert_eq!(v.text, "ab⟨ESC⟩cd⟨U+200B⟩ef");
        let c = src.find('c').unwrap();
        assert_eq!(&v.text[v.map(c)..v.map(c) + 2], "cd");
        let e = src.find('e').unwrap();
        assert_eq!(&v.text[v.map(e)..v.map(e) + 2], "ef");
        assert_eq!(v.map(0), 0);
        // The ESC itself maps to the start of its stand-in.
        assert!(v.text[v.map(2)..].starts_with("⟨ESC⟩"));
    }
}
