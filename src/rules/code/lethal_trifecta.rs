//! `lethal-trifecta`: one agent can read private data, ingest untrusted
//! content and send data out.

use super::code_rule;
use crate::finding::Subject;
use crate::manifest::Tool;
use crate::rules::engine::{Rule, RuleMeta, Scope, Sink};

code_rule!(LethalTrifecta, "lethal-trifecta", "the agent's servers together can read private data, ingest untrusted content and send data out", Low, Low,
    ["cross-server"],
    "Split these servers across agents, or require confirmation for the sending tools.",
    what: "Across the servers of one agent: at least one tool that reads private data (files, mail, databases, repositories), one that ingests untrusted content (web pages, search results, issues, messages from others), and one that can send data out (HTTP requests, mail, messages, uploads). Classification is by tool name and description keywords, so it is a heuristic.",
    why: "Simon Willison's lethal trifecta: untrusted content can carry a prompt injection that makes the model read private data and send it away. Each server is harmless alone.",
    example: "A filesystem server, a web-fetch server and a Slack server in one client config.",
    remedy: "Keep the three capabilities in separate agents, or approve each send by hand.");

const PRIVATE: &[&str] = &[
    "read_file",
    "read_text_file",
    "read_multiple",
    "file",
    "email",
    "gmail",
    "inbox",
    "query",
    "database",
    "sql",
    "repository",
    "repo",
    "drive",
    "calendar",
    "contacts",
    "secret",
    "document",
];
const UNTRUSTED: &[&str] = &[
    "fetch", "browse", "scrape", "crawl", "web", "search", "url", "issue", "comment", "webpage",
    "navigate", "rss",
];
const SENDS: &[&str] = &[
    "send",
    "post",
    "upload",
    "publish",
    "webhook",
    "http_request",
    "create_issue",
    "comment",
    "message",
    "tweet",
    "share",
    "email",
];

fn has(tool: &Tool, name_words: &[&str]) -> bool {
    let n = tool.name.to_ascii_lowercase();
    name_words.iter().any(|w| n.contains(w))
}

impl Rule for LethalTrifecta {
    fn meta(&self) -> &RuleMeta {
        &self.meta
    }

    fn levels(&self) -> crate::rules::engine::Levels {
        crate::rules::engine::Levels::NONE
    }

    fn check_agent(&self, servers: &[Scope<'_>], out: &mut Sink) {
        let find = |words: &[&str]| -> Option<(usize, &Tool)> {
            servers.iter().enumerate().find_map(|(i, s)| {
                s.server
                    .tools
                    .iter()
                    .find(|t| has(t, words))
                    .map(|t| (i, t))
            })
        };
        let (Some((pi, p)), Some((ui, u)), Some((si, s))) =
            (find(PRIVATE), find(UNTRUSTED), find(SENDS))
        else {
            return;
        };
        // One server doing all three is that server's design, not a combination.
        if pi == ui && ui == si {
            return;
        }
        let scope = &servers[si];
        out.set_subject(Subject::Tool, Some(s.name.clone()));
        let f = out.emit(scope, &self.meta, s.name_node, None,
            format!("`{}` can send data out while `{}` reads private data and `{}` ingests untrusted content", crate::display::visible(&s.name), crate::display::visible(&p.name), crate::display::visible(&u.name)),
            "sends data out");
        f.notes.push(format!(
            "private data: {} ({})",
            crate::display::visible(&p.name),
            servers[pi].loaded.display_path()
        ));
        f.notes.push(format!(
            "untrusted content: {} ({})",
            crate::display::visible(&u.name),
            servers[ui].loaded.display_path()
        ));
        out.set_subject(Subject::Server, None);
    }
}
