//! `cross-server-tool-name`: two servers of one agent offer a tool with the same name.

use super::code_rule;
use crate::finding::Subject;
use crate::rules::engine::{Rule, RuleMeta, Scope, Sink};

code_rule!(CrossServerToolName, "cross-server-tool-name", "two servers of one agent offer a tool with the same name", Medium, High,
    ["cross-server"],
    "Decide which server should own the name; disable the other tool or server.",
    what: "The same tool name on two servers that one agent uses (the servers of one client config, or inputs given with `--together`). Names that differ only in case or `-`/`_` count as the same.",
    why: "The model cannot tell which one it calls, and clients resolve the clash differently: a squatting server can capture calls meant for a trusted one.",
    example: "Server `files` and server `helper` both offer `read_file`.",
    remedy: "Remove one server, or disable the clashing tool.");

fn key(name: &str) -> String {
    name.to_ascii_lowercase().replace('-', "_")
}

impl Rule for CrossServerToolName {
    fn meta(&self) -> &RuleMeta {
        &self.meta
    }

    fn levels(&self) -> crate::rules::engine::Levels {
        crate::rules::engine::Levels::NONE
    }

    fn check_agent(&self, servers: &[Scope<'_>], out: &mut Sink) {
        for (_, a, _, b) in crate::rules::engine::server_pairs(servers) {
            for t in &a.server.tools {
                if let Some(o) = b.server.tools.iter().find(|o| key(&o.name) == key(&t.name)) {
                    out.set_subject(Subject::Tool, Some(t.name.clone()));
                    let f = out.emit(
                        a,
                        &self.meta,
                        t.name_node,
                        None,
                        format!(
                            "tool `{}` of server `{}` clashes with `{}` of server `{}`",
                            crate::display::visible(&t.name),
                            crate::display::visible(&a.server.name),
                            crate::display::visible(&o.name),
                            crate::display::visible(&b.server.name)
                        ),
                        "same name as another server's tool",
                    );
                    crate::rules::engine::point_at_other_tool(
                        f,
                        a,
                        b,
                        o,
                        "other definition",
                        "other server's tool",
                    );
                }
            }
        }
        out.set_subject(Subject::Server, None);
    }
}
