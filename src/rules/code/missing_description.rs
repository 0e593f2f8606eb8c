//! `missing-description`: a tool without a description.

use super::code_rule;
use crate::manifest::Tool;
use crate::rules::engine::{Rule, RuleMeta, Scope, Sink};

code_rule!(MissingDescription, "missing-description", "tool has no description", Info, High,
    ["schema"],
    "Ask the publisher for a description; a model will guess what the tool does from its name.",
    what: "A tool with no `description`, or an empty one.",
    why: "Without a description the model picks the tool by name alone, and a reviewer has nothing to approve.",
    example: "{\"name\": \"run\", \"inputSchema\": {...}}",
    remedy: "Describe the tool.");

impl Rule for MissingDescription {
    fn meta(&self) -> &RuleMeta {
        &self.meta
    }

    fn levels(&self) -> crate::rules::engine::Levels {
        crate::rules::engine::Levels::NONE
    }

    fn check_tool(&self, scope: &Scope<'_>, tool: &Tool, out: &mut Sink) {
        // Without decoding a copy of the description (most have escapes).
        let empty = tool
            .description
            .is_none_or(|d| scope.doc.str_is_blank(d) != Some(false));
        if empty {
            let at = tool.description.unwrap_or(tool.name_node);
            out.emit(
                scope,
                &self.meta,
                at,
                None,
                format!(
                    "tool `{}` has no description",
                    crate::display::visible(&tool.name)
                ),
                "no description",
            );
        }
    }
}
