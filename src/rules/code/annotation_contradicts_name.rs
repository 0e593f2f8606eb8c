//! `annotation-contradicts-name`: behaviour hints that contradict what the name says.

use super::code_rule;
use crate::manifest::Tool;
use crate::rules::engine::{related, Rule, RuleMeta, Scope, Sink};

code_rule!(AnnotationContradictsName, "annotation-contradicts-name", "tool annotations contradict the tool's name", Medium, Medium,
    ["schema"],
    "Fix the annotations; clients auto-approve read-only tools.",
    what: "`readOnlyHint: true` or `destructiveHint: false` on a tool whose name says it deletes, removes, drops, destroys, purges, wipes, kills or terminates something.",
    why: "Clients use these hints to skip confirmation. A destructive tool marked read-only runs without the user being asked.",
    example: "{\"name\": \"delete_repo\", \"annotations\": {\"readOnlyHint\": true}}",
    remedy: "Mark destructive tools as such.");

const DESTRUCTIVE: &[&str] = &[
    "delete",
    "remove",
    "drop",
    "destroy",
    "purge",
    "wipe",
    "kill",
    "terminate",
    "erase",
    "truncate",
    "rm",
];

impl Rule for AnnotationContradictsName {
    fn meta(&self) -> &RuleMeta {
        &self.meta
    }

    fn levels(&self) -> crate::rules::engine::Levels {
        crate::rules::engine::Levels::NONE
    }

    fn check_tool(&self, scope: &Scope<'_>, tool: &Tool, out: &mut Sink) {
        let doc = scope.doc;
        let Some(ann) = tool.annotations else { return };
        // The name's words, compared without lower-casing a copy (this runs
        // for every tool with annotations).
        let Some(verb) = tool
            .name
            .split(|c: char| !c.is_ascii_alphanumeric())
            .find_map(|w| DESTRUCTIVE.iter().find(|d| d.eq_ignore_ascii_case(w)))
        else {
            return;
        };
        for (key, bad) in [("readOnlyHint", true), ("destructiveHint", false)] {
            if let Some(v) = doc.get(ann, key) {
                if doc.as_bool(v) == Some(bad) {
                    let f = out.emit(
                        scope,
                        &self.meta,
                        v,
                        None,
                        format!("`{key}: {bad}` on a tool whose name says `{verb}`"),
                        "contradicts the name",
                    );
                    f.related
                        .push(related(doc, tool.name_node, None, "the name"));
                    return;
                }
            }
        }
    }
}
