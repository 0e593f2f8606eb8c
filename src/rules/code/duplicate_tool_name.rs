//! `duplicate-tool-name`: two tools of one server share a name.

use foldhash::HashMap;

use super::code_rule;
use crate::finding::Subject;
use crate::rules::engine::{related, Rule, RuleMeta, Scope, Sink};

code_rule!(DuplicateToolName, "duplicate-tool-name", "two tools of one server have the same name", Medium, High,
    ["schema"],
    "Tool names must be unique within a server; find out which definition clients will use.",
    what: "A tool name that appears more than once in one server's tool list.",
    why: "Clients keep one of the two, and which one differs between clients: a reviewer may approve the harmless twin while the model calls the other.",
    example: "[{\"name\": \"send\", ...}, {\"name\": \"send\", ...}]",
    remedy: "Rename or remove one.");

impl Rule for DuplicateToolName {
    fn meta(&self) -> &RuleMeta {
        &self.meta
    }

    fn levels(&self) -> crate::rules::engine::Levels {
        crate::rules::engine::Levels::NONE
    }

    fn check_server(&self, scope: &Scope<'_>, out: &mut Sink) {
        // foldhash: the standard SipHash cost about 700 instructions a tool
        // here, for a lookup whose order nothing depends on.
        let mut seen: HashMap<&str, u32> =
            HashMap::with_capacity_and_hasher(scope.server.tools.len(), Default::default());
        for t in &scope.server.tools {
            if let Some(&first) = seen.get(t.name.as_str()) {
                out.set_subject(Subject::Tool, Some(t.name.clone()));
                let f = out.emit(
                    scope,
                    &self.meta,
                    t.name_node,
                    None,
                    format!(
                        "tool `{}` is defined twice",
                        crate::display::visible(&t.name)
                    ),
                    "second definition",
                );
                f.related
                    .push(related(scope.doc, first, None, "first definition"));
            } else {
                seen.insert(&t.name, t.name_node);
            }
        }
        out.set_subject(Subject::Server, None);
    }
}
