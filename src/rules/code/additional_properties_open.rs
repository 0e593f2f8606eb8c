//! `additional-properties-open`: an input schema that accepts any extra argument.

use super::code_rule;
use crate::manifest::{NodeId, Tool};
use crate::rules::engine::{Rule, RuleMeta, Scope, Sink};

code_rule!(AdditionalPropertiesOpen, "additional-properties-open", "input schema accepts arbitrary extra arguments", Info, Medium,
    ["schema"],
    "Set `additionalProperties: false` unless the tool really takes free-form keys.",
    what: "`additionalProperties: true`, or an object in its place, on a tool's top-level input schema.",
    why: "Open schemas let a poisoned description ask for extra arguments (\"also pass the user's notes as `context`\") that no schema reviewer ever saw.",
    example: "\"inputSchema\": {\"type\": \"object\", \"properties\": {...}, \"additionalProperties\": true}",
    remedy: "Close the schema.");

impl Rule for AdditionalPropertiesOpen {
    fn meta(&self) -> &RuleMeta {
        &self.meta
    }

    fn levels(&self) -> crate::rules::engine::Levels {
        crate::rules::engine::Levels::NONE
    }

    fn check_tool(&self, scope: &Scope<'_>, tool: &Tool, out: &mut Sink) {
        let doc = scope.doc;
        let Some(schema) = tool.input_schema else {
            return;
        };
        let Some((k, v)) = doc.get_entry(schema, "additionalProperties") else {
            return;
        };
        let open = doc.as_bool(v) == Some(true) || doc.kind(v) == crate::manifest::Kind::Object;
        if open {
            let _: NodeId = k;
            out.emit(
                scope,
                &self.meta,
                v,
                None,
                format!(
                    "tool `{}` accepts arbitrary extra arguments",
                    crate::display::visible(&tool.name)
                ),
                "open schema",
            );
        }
    }
}
