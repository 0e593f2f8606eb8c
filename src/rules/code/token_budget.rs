//! `token-budget`: the whole tool list is expensive to keep in context.

use super::code_rule;
use crate::rules::engine::{Rule, RuleMeta, Scope, Sink};

code_rule!(TokenBudget, "token-budget", "the server's tool list costs many context tokens", Low, Low,
    ["schema"],
    "Consider enabling only the tools you need.",
    what: "A server whose tool list (names, descriptions and schemas, as sent) is estimated above 20,000 tokens. The estimate is bytes / 4, the usual rule of thumb for English text and JSON with byte-pair tokenizers; real counts vary by model by about ±25%.",
    why: "Every tool list is sent with every request. Large lists crowd out the user's context, cost money, and give a poisoned description more room to hide.",
    example: "A server with 150 tools and long descriptions (about 120 kB).",
    remedy: "Disable unneeded tools in the client, or pick a smaller server.");

/// Budget in estimated tokens.
pub const BUDGET: usize = 20_000;

impl Rule for TokenBudget {
    fn meta(&self) -> &RuleMeta {
        &self.meta
    }

    fn levels(&self) -> crate::rules::engine::Levels {
        crate::rules::engine::Levels::NONE
    }

    fn check_server(&self, scope: &Scope<'_>, out: &mut Sink) {
        let Some(tools) = scope.server.tools_node else {
            return;
        };
        let bytes: usize = scope
            .server
            .tools
            .iter()
            .map(|t| scope.doc.span(t.node).len())
            .sum();
        let tokens = bytes / 4;
        if tokens > BUDGET {
            let f = out.emit(
                scope,
                &self.meta,
                tools,
                None,
                format!(
                    "tool list of {} tools is about {tokens} tokens (budget {BUDGET})",
                    scope.server.tools.len()
                ),
                "this list",
            );
            // Point at the opening bracket, not the whole list.
            f.span.end = f.span.start + 1;
        }
    }
}
