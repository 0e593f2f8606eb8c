//! `whitespace-padding`: long runs of whitespace that push text out of view
//! (line jumping).

use super::code_rule;
use crate::display::is_invisible;
use crate::rules::engine::{Field, Rule, RuleMeta, Scope, Sink, TextContext};
use crate::rules::normalize::Normalized;

code_rule!(WhitespacePadding, "whitespace-padding", "long run of whitespace or blank lines in model-visible text", Medium, Medium,
    ["hidden"],
    "Remove the padding and read what follows it.",
    what: "A run of at least 40 whitespace or invisible characters, or at least 6 consecutive blank lines, inside a text field.",
    why: "Clients show the first lines of a description; padding pushes the payload below the fold or off to the right (line jumping), where no reviewer looks.",
    example: "\"description\": \"Tells a joke.\\n\\n\\n\\n\\n\\n\\n\\n<IMPORTANT>...</IMPORTANT>\"",
    remedy: "Descriptions need no padding; collapse it.");

/// Minimum run of whitespace characters.
const RUN: usize = 40;
/// Minimum number of newlines in one run.
const NEWLINES: usize = 7;

/// The longest run (start, end, characters, line breaks) of characters marked
/// as padding that is long enough to report and is followed by other text.
/// `chars` yields each character's byte offset, whether it is padding and
/// whether it is a line break.
fn longest_run(
    chars: impl Iterator<Item = (usize, bool, bool)>,
) -> Option<(usize, usize, usize, usize)> {
    let mut start = None;
    let mut count = 0;
    let mut newlines = 0;
    let mut best: Option<(usize, usize, usize, usize)> = None;
    for (i, pad, newline) in chars {
        if pad {
            if start.is_none() {
                start = Some(i);
                count = 0;
                newlines = 0;
            }
            count += 1;
            newlines += usize::from(newline);
        } else if let Some(s) = start.take() {
            if (count >= RUN || newlines >= NEWLINES) && best.is_none_or(|b| count > b.2) {
                best = Some((s, i, count, newlines));
            }
        }
    }
    best
}

/// True for a byte that begins a padding character: ASCII whitespace, or
/// the first byte of a non-ASCII whitespace or invisible character's UTF-8
/// form (`U+0085`, `U+00A0`, `U+00AD`: C2; `U+034F`: CD; `U+061C`: D8;
/// `U+115F`..`U+180F`: E1; `U+2000`..`U+206F`: E2; `U+3000`, `U+3164`: E3;
/// `U+FE00`..`U+FFF8`: EF; `U+1BCA0`, `U+1D173`..: F0; tags: F3). The test
/// below holds it to every character.
const PAD_LEAD: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = matches!(
            b,
            b' ' | b'\t'..=b'\r' | 0xc2 | 0xcd | 0xd8 | 0xe1 | 0xe2 | 0xe3 | 0xef | 0xf0 | 0xf3
        );
        i += 1;
    }
    t
};

/// The longest run of characters whose first byte is in [`PAD_LEAD`]
/// (continuation bytes neither count nor break it): at least the longest
/// run of padding characters, since each of them counts one. (Counting every
/// non-ASCII byte, as an earlier version did, let through most text with a
/// dash, quotes or an emoji near a space, and all non-Latin text, for the
/// character scan to rule out.)
fn pad_run(text: &str) -> usize {
    let (mut run, mut best) = (0usize, 0usize);
    for &b in text.as_bytes() {
        // A continuation byte (10xxxxxx) belongs to the character before.
        if b & 0xc0 == 0x80 {
            continue;
        }
        run = if PAD_LEAD[usize::from(b)] { run + 1 } else { 0 };
        best = best.max(run);
    }
    best
}

/// Each character of `text` as [`longest_run`] takes it: its byte offset,
/// whether it is padding, whether it is a line break. ASCII bytes are
/// classed by byte and only other characters decoded, which gives what
/// `char_indices` gives (an ASCII byte is a character, never an invisible
/// one) at a fraction of the cost on mostly ASCII text.
fn padding_chars(text: &str) -> impl Iterator<Item = (usize, bool, bool)> + '_ {
    let bytes = text.as_bytes();
    let mut i = 0;
    std::iter::from_fn(move || {
        let (at, &b) = (i, bytes.get(i)?);
        if b < 0x80 {
            i += 1;
            return Some((at, matches!(b, b' ' | b'\t'..=b'\r'), b == b'\n'));
        }
        // `i` is on a character boundary: the previous step ended one.
        let c = text[at..].chars().next()?;
        i += c.len_utf8();
        Some((at, c.is_whitespace() || is_invisible(c), false))
    })
}

impl Rule for WhitespacePadding {
    fn meta(&self) -> &RuleMeta {
        &self.meta
    }

    fn levels(&self) -> crate::rules::engine::Levels {
        crate::rules::engine::Levels::TEXT
    }

    fn text_context(&self) -> TextContext {
        TextContext::TextOnly
    }

    fn check_text(&self, scope: &Scope<'_>, field: &Field<'_>, norm: &Normalized, out: &mut Sink) {
        let text = field.text.as_ref();
        if text.len() < NEWLINES {
            return;
        }
        // The longest run of padding characters there may be: for ASCII text
        // the longest whitespace run, counted already (`norm.plain` answers
        // `is_ascii` for most text without a pass); for other text, a byte
        // pass's bound.
        let ascii = norm.plain || text.is_ascii();
        let run = if ascii { norm.space_run } else { pad_run(text) };
        // A run long enough to report has at least `NEWLINES` characters, and
        // one shorter than `RUN` needs `NEWLINES` line breaks (indented text
        // has long runs of spaces and few line breaks).
        if run < NEWLINES
            || (run < RUN && crate::manifest::json::count_newlines(text.as_bytes()) < NEWLINES)
        {
            return;
        }
        // Pure ASCII text (most of it) is scanned by byte: the same runs, since
        // every ASCII byte is one character and no ASCII character is invisible.
        let best = if ascii {
            longest_run(
                text.bytes()
                    .enumerate()
                    .map(|(i, b)| (i, matches!(b, b' ' | b'\t'..=b'\r'), b == b'\n')),
            )
        } else {
            longest_run(padding_chars(text))
        };
        // Trailing padding hides nothing after it.
        if let Some((s, e, count, newlines)) = best {
            out.emit(
                scope,
                &self.meta,
                field.node,
                Some((s, e)),
                format!("{count} whitespace characters ({newlines} line breaks) in a row"),
                "padding",
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `pad_run` bounds the reported run, and `padding_chars` gives what the
    /// plain scan by character gives.
    #[test]
    fn byte_passes_agree_with_the_character_scan() {
        use proptest::prelude::*;
        let plain = |t: &str| -> Vec<(usize, bool, bool)> {
            t.char_indices()
                .map(|(i, c)| (i, c.is_whitespace() || is_invisible(c), c == '\n'))
                .collect()
        };
        let padded = format!("a{}b", "\u{200b}\n".repeat(7));
        assert!(pad_run(&padded) >= 14 && longest_run(padding_chars(&padded)).is_some());
        assert!(pad_run("a — “b” — c — d 言語の文章です") < NEWLINES);
        proptest!(ProptestConfig::with_cases(3000), |(t in "[a. \t\n\u{85}\u{a0}\u{ad}\u{200b}\u{2028}\u{3000}\u{3164}\u{feff}\u{1d173}\u{e0041}é言—😀]{0,60}")| {
            prop_assert_eq!(padding_chars(&t).collect::<Vec<_>>(), plain(&t));
            if let Some((_, _, count, _)) = longest_run(plain(&t).into_iter()) {
                prop_assert!(pad_run(&t) >= count, "{:?}", t);
            }
        });
    }

    /// Every padding character (whitespace or invisible) begins with a byte
    /// of [`PAD_LEAD`], so `pad_run` counts it.
    #[test]
    fn pad_lead_holds_every_padding_character() {
        for c in (0..=0x10ffff).filter_map(char::from_u32) {
            if c.is_whitespace() || is_invisible(c) {
                let mut buf = [0u8; 4];
                let lead = c.encode_utf8(&mut buf).as_bytes()[0];
                assert!(PAD_LEAD[usize::from(lead)], "{c:?}");
            }
        }
    }
}
