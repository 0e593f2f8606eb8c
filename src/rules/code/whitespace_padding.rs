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

/// True if `text` has `NEWLINES` bytes in a row that are ASCII whitespace
/// or belong to non-ASCII characters. Every padding character is one or the
/// other (the invisible ones are all non-ASCII), and a run long enough to
/// report has at least `NEWLINES` characters, so text without such bytes
/// has none.
fn may_pad(text: &str) -> bool {
    let mut run = 0;
    for &b in text.as_bytes() {
        run = if b >= 0x80 || matches!(b, b' ' | b'\t'..=b'\r') {
            run + 1
        } else {
            0
        };
        if run >= NEWLINES {
            return true;
        }
    }
    false
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
        // A run long enough to report has at least `NEWLINES` characters, so
        // ASCII text without that many whitespace bytes in a row has none.
        // (`norm.plain` answers `is_ascii` for most text without a pass.)
        let ascii = norm.plain || text.is_ascii();
        if text.len() < NEWLINES || (ascii && norm.space_run < NEWLINES) {
            return;
        }
        // Other text is scanned by character below (about 60 instructions
        // a character, most of them ASCII); a byte pass rules most of it out.
        if !ascii && !may_pad(text) {
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
            longest_run(
                text.char_indices()
                    .map(|(i, c)| (i, c.is_whitespace() || is_invisible(c), c == '\n')),
            )
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

    /// Text that `may_pad` rules out has no run to report.
    #[test]
    fn may_pad_rules_out_only_text_without_padding() {
        use proptest::prelude::*;
        let runs = |t: &str| {
            longest_run(
                t.char_indices()
                    .map(|(i, c)| (i, c.is_whitespace() || is_invisible(c), c == '\n')),
            )
        };
        let padded = format!("a{}b", "\u{200b}\n".repeat(7));
        assert!(may_pad(&padded) && runs(&padded).is_some());
        proptest!(ProptestConfig::with_cases(3000), |(t in "[a. \t\n\u{a0}\u{200b}\u{3000}\u{e0041}é言]{0,60}")| {
            prop_assert!(may_pad(&t) || runs(&t).is_none(), "{:?}", t);
        });
    }
}
