//! Code rules: what patterns cannot express. One file per rule, named after
//! its id; [`all`] is the registry (an explicit list, as in zizmor).

mod additional_properties_open;
mod annotation_contradicts_name;
mod ansi_escape;
mod cross_server_reference;
mod cross_server_tool_name;
mod duplicate_json_key;
mod duplicate_tool_name;
mod encoded_text_blob;
mod homoglyph_name;
mod html_comment;
mod instruction_with_payload;
mod invisible_unicode;
mod lethal_trifecta;
mod look_alike_tool;
mod missing_description;
mod poisoning_like_sentence;
mod required_undefined;
mod sentence_in_value;
mod token_budget;
mod tool_name_invalid;
mod undocumented_parameter;
mod unmatched_ignore;
mod whitespace_padding;

use crate::rules::engine::Rule;

/// Every built-in code rule.
pub fn all() -> Vec<Box<dyn Rule>> {
    vec![
        Box::new(additional_properties_open::AdditionalPropertiesOpen::new()),
        Box::new(annotation_contradicts_name::AnnotationContradictsName::new()),
        Box::new(ansi_escape::AnsiEscape::new()),
        Box::new(cross_server_reference::CrossServerReference::new()),
        Box::new(cross_server_tool_name::CrossServerToolName::new()),
        Box::new(duplicate_json_key::DuplicateJsonKey::new()),
        Box::new(duplicate_tool_name::DuplicateToolName::new()),
        Box::new(encoded_text_blob::EncodedTextBlob::new()),
        Box::new(homoglyph_name::HomoglyphName::new()),
        Box::new(html_comment::HtmlComment::new()),
        Box::new(instruction_with_payload::InstructionWithPayload::new()),
        Box::new(invisible_unicode::InvisibleUnicode::new()),
        Box::new(lethal_trifecta::LethalTrifecta::new()),
        Box::new(look_alike_tool::LookAlikeTool::new()),
        Box::new(missing_description::MissingDescription::new()),
        Box::new(poisoning_like_sentence::PoisoningLikeSentence::new()),
        Box::new(required_undefined::RequiredUndefined::new()),
        Box::new(sentence_in_value::SentenceInValue::new()),
        Box::new(token_budget::TokenBudget::new()),
        Box::new(tool_name_invalid::ToolNameInvalid::new()),
        Box::new(undocumented_parameter::UndocumentedParameter::new()),
        Box::new(unmatched_ignore::UnmatchedIgnore::new()),
        Box::new(whitespace_padding::WhitespacePadding::new()),
    ]
}

/// Declares a code rule struct holding its metadata, with `new()` and `meta()`.
macro_rules! code_rule {
    ($name:ident, $id:literal, $summary:literal, $sev:ident, $conf:ident, [$($tag:literal),*], $help:literal,
     what: $what:literal, why: $why:literal, example: $ex:literal, remedy: $rem:literal) => {
        #[doc = $summary]
        pub struct $name {
            meta: $crate::rules::engine::RuleMeta,
        }
        impl $name {
            /// The rule with its metadata.
            pub fn new() -> Self {
                $name {
                    meta: $crate::rules::engine::RuleMeta::code(
                        $id,
                        $summary,
                        $crate::finding::Severity::$sev,
                        $crate::finding::Confidence::$conf,
                        &[$($tag),*],
                        $help,
                        [$what, $why, $ex, $rem],
                    ),
                }
            }
        }
    };
}
pub(crate) use code_rule;

#[cfg(test)]
mod tests {
    /// Each rule's `levels` says `text: true` exactly when its file defines
    /// `check_text`, and `schema: true` exactly when it defines
    /// `check_schema`: the engine does not call a level a rule says it lacks,
    /// so a rule that gains one must say so.
    #[test]
    fn levels_match_the_methods_defined() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/rules/code");
        let mut checked = 0;
        for e in std::fs::read_dir(&dir).expect("src/rules/code") {
            let path = e.expect("entry").path();
            if path.file_name().is_some_and(|n| n == "mod.rs") {
                continue;
            }
            let src = std::fs::read_to_string(&path).expect("rule source");
            let declared = match (
                src.contains("fn check_text"),
                src.contains("fn check_schema"),
            ) {
                (true, true) => "Levels::BOTH",
                (true, false) => "Levels::TEXT",
                (false, true) => "Levels::SCHEMA",
                (false, false) => "Levels::NONE",
            };
            // A text rule says what it reads besides the text, or the memo
            // (`rules::memo`) is off for every field.
            assert!(
                !src.contains("fn check_text") || src.contains("fn text_context"),
                "{}: a text rule without `text_context`",
                path.display()
            );
            assert!(
                src.contains(declared),
                "{}: expected `{declared}`",
                path.display()
            );
            checked += 1;
        }
        assert_eq!(checked, super::all().len());
    }
}
