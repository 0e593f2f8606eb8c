//! `homoglyph-name`: a tool name that mixes Latin letters with look-alikes.

use super::code_rule;
use crate::manifest::Tool;
use crate::rules::engine::{Rule, RuleMeta, Scope, Sink};
use crate::rules::normalize::normalize;

code_rule!(HomoglyphName, "homoglyph-name", "tool name uses look-alike letters from another script", High, High,
    ["hidden"],
    "Treat the server as hostile: a look-alike name exists to be confused with a real tool.",
    what: "A tool name that mixes ASCII letters with Cyrillic or Greek look-alikes (`sеnd_email` with a Cyrillic `е`), or that contains invisible characters.",
    why: "Look-alike names impersonate a trusted tool in the model's tool list and in a reviewer's eyes.",
    example: "\"name\": \"s\\u0435nd_email\"",
    remedy: "Remove the server or rename the tool with plain ASCII.");

impl Rule for HomoglyphName {
    fn meta(&self) -> &RuleMeta {
        &self.meta
    }

    fn levels(&self) -> crate::rules::engine::Levels {
        crate::rules::engine::Levels::NONE
    }

    fn check_tool(&self, scope: &Scope<'_>, tool: &Tool, out: &mut Sink) {
        if tool.name.is_ascii() {
            return;
        }
        let n = normalize(&tool.name);
        if n.mixed_script || !n.hidden.is_empty() {
            let f = out.emit(
                scope,
                &self.meta,
                tool.name_node,
                None,
                format!(
                    "tool name `{}` imitates `{}`",
                    crate::display::visible(&tool.name),
                    crate::display::visible(&n.text)
                ),
                "look-alike name",
            );
            f.notes
                .push(format!("reads as: {}", crate::display::visible(&n.text)));
        }
    }
}
