//! `invisible-unicode`: zero-width characters, bidi controls and Unicode tag
//! characters in model-visible text.

use super::code_rule;
use crate::finding::Severity;
use crate::rules::engine::{Field, Rule, RuleMeta, Scope, Sink, TextContext};
use crate::rules::normalize::{HiddenKind, Normalized};

code_rule!(InvisibleUnicode, "invisible-unicode", "model-visible text contains invisible Unicode characters", Medium, High,
    ["hidden"],
    "Remove the invisible characters; if text was hidden in them, treat the server as hostile.",
    what: "Zero-width characters, bidirectional controls, variation selectors outside emoji, and Unicode tag characters (U+E0000..U+E007F) in any text a model reads. Text spelled in tag characters is decoded and shown.",
    why: "A reviewer sees nothing, but the model reads every code point. Tag characters can carry a whole hidden instruction; bidi controls reorder what the reviewer sees; runs of invisible characters push text out of view.",
    example: "\"description\": \"Gets the weather.\\u200e\\u200e\\u200e<IMPORTANT>...\"",
    remedy: "Descriptions have no reason to contain invisible characters. Remove them and re-review the text they surrounded.");

/// True if `c` is part of an emoji sequence (ZWJ, VS-16 follow emoji).
fn emojiish(c: char) -> bool {
    matches!(c as u32, 0x2190..=0x2BFF | 0x1F000..=0x1FAFF | 0x3030 | 0x303D | 0x3297 | 0x3299 | 0xA9 | 0xAE)
}

impl Rule for InvisibleUnicode {
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
        // Nothing was removed from most text (all plain ASCII text).
        if norm.hidden.is_empty() {
            return;
        }
        let text = field.text.as_ref();
        let hidden: Vec<_> = norm
            .hidden
            .iter()
            .filter(|h| {
                matches!(
                    h.kind,
                    HiddenKind::ZeroWidth
                        | HiddenKind::Bidi
                        | HiddenKind::Tag
                        | HiddenKind::Variation
                )
            })
            .filter(|h| {
                // Emoji presentation selectors and zero-width joiners inside emoji
                // sequences are how emoji are written, not hiding.
                let c = text[h.start..].chars().next().unwrap_or(' ');
                if matches!(c, '\u{fe0f}' | '\u{fe0e}' | '\u{200d}') {
                    let prev = text[..h.start].chars().next_back().unwrap_or(' ');
                    return !(emojiish(prev) || prev == '\u{fe0f}');
                }
                true
            })
            .collect();
        let (Some(first), Some(last)) = (hidden.first(), hidden.last()) else {
            return;
        };
        let tags = hidden.iter().filter(|h| h.kind == HiddenKind::Tag).count();
        let mut kinds: Vec<&str> = hidden.iter().map(|h| h.kind.name()).collect();
        kinds.sort();
        kinds.dedup();
        let f = out.emit(
            scope,
            &self.meta,
            field.node,
            Some((first.start, last.end)),
            format!(
                "{} invisible character(s) ({}) in model-visible text",
                hidden.len(),
                kinds.join(", ")
            ),
            "invisible characters here",
        );
        if tags > 0
            || hidden.len() >= 8
            || hidden.iter().any(|h| {
                h.kind == HiddenKind::Bidi && text[h.start..].starts_with(['\u{202e}', '\u{202d}'])
            })
        {
            f.severity = Severity::High;
        }
        if !norm.tag_text.is_empty() {
            f.notes.push(format!(
                "text hidden in tag characters: {}",
                crate::display::visible(&norm.tag_text)
            ));
        }
    }
}
