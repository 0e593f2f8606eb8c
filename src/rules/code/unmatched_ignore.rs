//! `unmatched-ignore`: an ignore entry in `mcplint.toml` that matched no finding.
//! Its findings come from [`crate::rules::config`]; the rule has no check of its own.

use super::code_rule;
use crate::rules::engine::{Rule, RuleMeta};

code_rule!(UnmatchedIgnore, "unmatched-ignore", "an ignore entry in mcplint.toml matched no finding", Low, High,
    ["config"],
    "Delete the stale entry, or fix its server/tool so it matches.",
    what: "An `[[rules.ID.ignore]]` entry that suppressed nothing in this run.",
    why: "Stale ignores hide the next real finding that happens to match them, and make the config lie about what was reviewed (cargo-deny's unmatched-skip).",
    example: "[[rules.ansi-escape.ignore]]\nserver = \"weather\"\ntool = \"renamed_tool\"\nreason = \"colours in help text\"",
    remedy: "Remove or update the entry.");

impl Rule for UnmatchedIgnore {
    fn meta(&self) -> &RuleMeta {
        &self.meta
    }

    fn levels(&self) -> crate::rules::engine::Levels {
        crate::rules::engine::Levels::NONE
    }
}
