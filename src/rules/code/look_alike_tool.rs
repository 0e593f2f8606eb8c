//! `look-alike-tool`: a tool on one server of an agent imitates a tool on
//! another (the "function overlapping" attack).
//!
//! Names are split into words (snake, kebab, dotted and camel case) and
//! plurals and verb endings are folded; descriptions are compared as sets of
//! words (description words plus parameter-name words, stop words dropped)
//! with the Jaccard index. Graded:
//! - **medium**: the same name in another spelling (`sendEmail`, `send-email`,
//!   `sendemail` for `send_email`), or one word off by a typo (`send_mail`,
//!   `send_emial`); or the same words in another order or number
//!   (`email_send`, `send_emails`) when the descriptions agree (Jaccard ≥
//!   [`DESC_AGREE`]).
//! - **low**: the same words in another order or number with unrelated
//!   descriptions (unrelated products name functions this way too:
//!   `list_teams`/`teams-list` on the shared benign servers), or names that
//!   differ but descriptions and parameters that overlap (Jaccard ≥
//!   [`DESC_JACCARD`], at least [`DESC_MIN_SHARED`] shared words, parameter
//!   names agreeing).
//! - One-word names (`search`, `query`, `fetch`) are common on unrelated
//!   servers: their near collisions count only when the descriptions agree.
//!
//! Names equal up to case and `-`/`_` are `cross-server-tool-name`'s.

use std::collections::HashMap;

use super::code_rule;
use crate::finding::{Severity, Subject};
use crate::manifest::Tool;
use crate::rules::engine::{Rule, RuleMeta, Scope, Sink};

code_rule!(LookAlikeTool, "look-alike-tool", "a tool imitates a tool of another server of the same agent", Medium, Medium,
    ["cross-server"],
    "Compare the two tools: keep the server you trust and disable the look-alike.",
    what: "Across the servers of one agent (one client config, or inputs given with `--together`), a tool that imitates another server's tool. Names are split into words (snake, kebab, dotted, camel case) with plurals and verb endings folded; descriptions are compared as word sets (description words plus parameter-name words) by Jaccard index. Medium: the same name in another spelling (`sendEmail` for `send_email`), one word off by a typo (`send_mail`, `send_emial`), or the same words reordered or pluralised (`email_send`) with descriptions that agree (Jaccard >= 0.3). Low: reordered words with unrelated descriptions, or different names whose descriptions and parameters overlap (Jaccard >= 0.5, at least 5 shared words). One-word names such as `search` count only when the descriptions agree. Identical names are `cross-server-tool-name`'s.",
    why: "Function overlapping: a malicious server publishes a look-alike of a trusted tool, often with a slightly more flattering description, so the model picks it and the attacker sees the arguments (mail bodies, file contents, credentials).",
    example: "Server `mail` offers `send_email` (\"Send an email to a recipient\"); server `helper` offers `sendEmail` (\"Sends an e-mail to the recipient, faster\").",
    remedy: "Remove the server you do not trust, or disable the overlapping tool in the client.");

/// Minimum token-set Jaccard similarity of description + parameter words for
/// the functions of two tools to overlap. On the 56 shared benign servers
/// checked together, 0.5 keeps unrelated tools apart while paraphrased copies
/// of one tool (the attack) stay well above it.
pub const DESC_JACCARD: f64 = 0.5;
/// Token-set Jaccard at which two descriptions agree enough to confirm a
/// weaker name signal (reordered words, one-word names).
pub const DESC_AGREE: f64 = 0.3;
/// Minimum number of shared words, so short descriptions ("Adds two numbers")
/// cannot overlap by chance.
pub const DESC_MIN_SHARED: usize = 5;

/// Words too common in tool descriptions to say anything about a function.
const STOP: &[&str] = &[
    "the",
    "and",
    "for",
    "with",
    "from",
    "that",
    "this",
    "are",
    "was",
    "were",
    "will",
    "can",
    "you",
    "your",
    "use",
    "used",
    "using",
    "into",
    "over",
    "all",
    "any",
    "not",
    "but",
    "its",
    "has",
    "have",
    "had",
    "each",
    "which",
    "when",
    "where",
    "what",
    "who",
    "how",
    "also",
    "may",
    "one",
    "more",
    "than",
    "then",
    "them",
    "they",
    "their",
    "there",
    "these",
    "those",
    "such",
    "only",
    "other",
    "some",
    "most",
    "via",
    "per",
    "about",
    "been",
    "being",
    "both",
    "out",
    "our",
    "tool",
    "returns",
    "return",
    "given",
    "specified",
    "optional",
    "default",
    "should",
    "must",
];

/// Splits a name into lowercase words at `_`, `-`, `.`, spaces, digits
/// boundaries kept, and camel case (`sendEmail`, `HTTPRequest`).
pub fn name_words(name: &str) -> Vec<String> {
    let chars: Vec<char> = name.chars().collect();
    let mut words = Vec::new();
    let mut cur = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            continue;
        }
        let prev = i.checked_sub(1).map(|j| chars[j]);
        let next = chars.get(i + 1).copied();
        let boundary = c.is_uppercase()
            && prev.is_some_and(|p| {
                p.is_lowercase()
                    || p.is_ascii_digit()
                    || (p.is_uppercase() && next.is_some_and(|n| n.is_lowercase()))
            });
        if boundary && !cur.is_empty() {
            words.push(std::mem::take(&mut cur));
        }
        cur.extend(c.to_lowercase());
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

/// Folds plurals and verb endings: `emails` → `email`, `queries` → `query`,
/// `sending` → `send`, `searched` → `search`, and a final `e` so `create`,
/// `created` and `creating` meet at `creat`. Deliberately light: only endings
/// that keep at least three letters of stem.
pub fn stem(w: &str) -> String {
    let mut s = strip_ending(w);
    if s.len() > 4 && s.ends_with('e') {
        s.pop();
    }
    s
}

fn strip_ending(w: &str) -> String {
    let n = w.len();
    if !w.is_ascii() {
        return w.to_string();
    }
    if n > 4 && w.ends_with("ies") {
        return format!("{}y", &w[..n - 3]);
    }
    if n > 4
        && (w.ends_with("sses") || w.ends_with("xes") || w.ends_with("ches") || w.ends_with("shes"))
    {
        return w[..n - 2].to_string();
    }
    if n > 3 && w.ends_with('s') && !w.ends_with("ss") && !w.ends_with("us") {
        return w[..n - 1].to_string();
    }
    if n > 5 && w.ends_with("ing") {
        return w[..n - 3].to_string();
    }
    if n > 4 && w.ends_with("ed") {
        return w[..n - 2].to_string();
    }
    w.to_string()
}

/// Edit distance counting insertions, deletions, substitutions and swaps of
/// two adjacent letters (optimal string alignment), giving up (returning
/// `limit + 1`) once every alignment is past `limit`.
pub fn edit_distance(a: &str, b: &str, limit: usize) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    if a.len().abs_diff(b.len()) > limit {
        return limit + 1;
    }
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        cur[0] = i;
        let mut best = cur[0];
        for j in 1..=b.len() {
            let sub = prev[j - 1] + usize::from(a[i - 1] != b[j - 1]);
            let mut d = sub.min(prev[j] + 1).min(cur[j - 1] + 1);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(before[j - 2] + 1);
            }
            cur[j] = d;
            best = best.min(d);
        }
        if best > limit {
            return limit + 1;
        }
        std::mem::swap(&mut before, &mut prev);
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()].min(limit + 1)
}

/// Two differing words are the same word misspelt: one edit apart from four
/// letters (`mail`/`email`, `emial`/`email`), two from eight. Three-letter
/// words (`get`/`set`) never are, and neither are a word and a longer word
/// containing it (`board`/`dashboard`, `sheet`/`spreadsheet`): on the shared
/// benign servers those are different functions.
fn words_near(a: &str, b: &str) -> bool {
    let m = a.chars().count().min(b.chars().count());
    if m < 4 {
        return false;
    }
    let limit = if m >= 8 { 2 } else { 1 };
    edit_distance(a, b, limit) <= limit
}

/// How two names nearly collide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Near {
    /// The same words in the same order, another case style
    /// (`sendEmail`/`send_email`) or split differently (`sendmail`/`send_mail`).
    Spelling,
    /// One word differs by a typo (`send_mail`/`send_email`).
    Typo,
    /// The same words after folding plurals and verb endings, in any order
    /// (`email_send`/`send_emails`). Unrelated products name their own
    /// functions this way too (`list_teams`/`teams-list`), so alone it is weak.
    Reordered,
}

impl Near {
    fn describe(self) -> &'static str {
        match self {
            Near::Spelling => "the same name in another spelling",
            Near::Typo => "the name differs by a typo",
            Near::Reordered => "the same words in another order or number",
        }
    }
}

/// How two names nearly collide, or `None`.
fn names_near(a: &Facts, b: &Facts) -> Option<Near> {
    if a.joined == b.joined {
        return Some(Near::Spelling);
    }
    if a.stems.len() != b.stems.len() {
        return None;
    }
    if a.stems == b.stems {
        return Some(Near::Reordered);
    }
    // Exactly one word differs (as multisets), and only by a typo.
    let mut only_a: Vec<&String> = Vec::new();
    let mut rest: Vec<&String> = b.stems.iter().collect();
    for w in &a.stems {
        if let Some(i) = rest.iter().position(|x| *x == w) {
            rest.remove(i);
        } else {
            only_a.push(w);
        }
    }
    (only_a.len() == 1 && rest.len() == 1 && words_near(only_a[0], rest[0])).then_some(Near::Typo)
}

/// What the rule compares, computed once per tool.
struct Facts {
    /// Name words, stemmed and sorted.
    stems: Vec<String>,
    /// Name words joined in order, unstemmed.
    joined: String,
    /// Exact-clash key (as `cross-server-tool-name` compares).
    key: String,
    /// Description words and parameter-name words, stemmed, as interned ids
    /// (sorted, unique) so that comparing two tools is a merge of integers.
    tokens: Vec<u32>,
    /// Parameter-name words, stemmed, interned (sorted, unique).
    params: Vec<u32>,
}

/// Word → id, shared by all the tools of one agent.
type Interner = HashMap<String, u32>;

fn intern(ids: &mut Interner, w: String) -> u32 {
    let next = ids.len() as u32;
    *ids.entry(w).or_insert(next)
}

fn facts(scope: &Scope<'_>, tool: &Tool, ids: &mut Interner) -> Facts {
    let words = name_words(&tool.name);
    let mut stems: Vec<String> = words.iter().map(|w| stem(w)).collect();
    stems.sort();
    let mut tokens = Vec::new();
    if let Some(text) = tool.description.and_then(|d| scope.doc.str(d)) {
        for w in text
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.chars().count() >= 3)
        {
            let w = w.to_lowercase();
            if !STOP.contains(&w.as_str()) {
                tokens.push(intern(ids, stem(&w)));
            }
        }
    }
    let mut params = Vec::new();
    for p in tool.params(scope.doc) {
        if let Some(k) = scope.doc.str(p.key) {
            for w in name_words(&k) {
                params.push(intern(ids, stem(&w)));
            }
        }
    }
    params.sort_unstable();
    params.dedup();
    tokens.extend_from_slice(&params);
    tokens.sort_unstable();
    tokens.dedup();
    Facts {
        stems,
        joined: words.concat(),
        key: tool.name.to_ascii_lowercase().replace('-', "_"),
        tokens,
        params,
    }
}

/// Jaccard index of two sorted, unique id lists, and the number shared.
fn jaccard(a: &[u32], b: &[u32]) -> (f64, usize) {
    let (mut i, mut j, mut shared) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                shared += 1;
                i += 1;
                j += 1;
            }
        }
    }
    let union = a.len() + b.len() - shared;
    if union == 0 {
        return (0.0, 0);
    }
    (shared as f64 / union as f64, shared)
}

/// The severity and the reason for a pair, or `None` if they do not look alike.
fn grade(a: &Facts, b: &Facts) -> Option<(Severity, String)> {
    let near = names_near(a, b);
    // Most pairs: names apart and word sets too different in size to overlap
    // (Jaccard is at most the smaller set over the larger).
    let (small, large) = (
        a.tokens.len().min(b.tokens.len()),
        a.tokens.len().max(b.tokens.len()),
    );
    if near.is_none() && (small < DESC_MIN_SHARED || (small as f64) < DESC_JACCARD * large as f64) {
        return None;
    }
    let (j, shared) = jaccard(&a.tokens, &b.tokens);
    let params_agree =
        (a.params.is_empty() && b.params.is_empty()) || jaccard(&a.params, &b.params).0 >= 0.5;
    let overlap = j >= DESC_JACCARD && shared >= DESC_MIN_SHARED && params_agree;
    let agree = j >= DESC_AGREE && shared >= 2;
    let one_word = a.stems.len() == 1 && b.stems.len() == 1;
    let both = |n: Near| format!("{}, and the descriptions agree ({j:.2})", n.describe());
    match near {
        // Generic one-word names (`search`, `query`) need the function to match too.
        Some(n) if one_word => (overlap || agree).then(|| (Severity::Medium, both(n))),
        Some(n @ (Near::Spelling | Near::Typo)) => Some(if agree {
            (Severity::Medium, both(n))
        } else {
            (Severity::Medium, n.describe().to_string())
        }),
        Some(Near::Reordered) if agree => Some((Severity::Medium, both(Near::Reordered))),
        Some(Near::Reordered) => Some((Severity::Low, Near::Reordered.describe().to_string())),
        None if overlap => Some((
            Severity::Low,
            format!("the descriptions and parameters overlap ({j:.2})"),
        )),
        None => None,
    }
}

impl Rule for LookAlikeTool {
    fn meta(&self) -> &RuleMeta {
        &self.meta
    }

    fn levels(&self) -> crate::rules::engine::Levels {
        crate::rules::engine::Levels::NONE
    }

    fn check_agent(&self, servers: &[Scope<'_>], out: &mut Sink) {
        let mut ids = Interner::new();
        let all: Vec<Vec<Facts>> = servers
            .iter()
            .map(|s| {
                s.server
                    .tools
                    .iter()
                    .map(|t| facts(s, t, &mut ids))
                    .collect()
            })
            .collect();
        for (i, a, k, b) in crate::rules::engine::server_pairs(servers) {
            for (t, ft) in a.server.tools.iter().zip(&all[i]) {
                for (o, fo) in b.server.tools.iter().zip(&all[k]) {
                    if ft.key == fo.key {
                        continue; // cross-server-tool-name reports it
                    }
                    let Some((severity, why)) = grade(ft, fo) else {
                        continue;
                    };
                    out.set_subject(Subject::Tool, Some(t.name.clone()));
                    let f = out.emit(
                        a,
                        &self.meta,
                        t.name_node,
                        None,
                        format!(
                            "tool `{}` of server `{}` looks like `{}` of server `{}`: {why}",
                            crate::display::visible(&t.name),
                            crate::display::visible(&a.server.name),
                            crate::display::visible(&o.name),
                            crate::display::visible(&b.server.name)
                        ),
                        "look-alike of another server's tool",
                    );
                    f.severity = severity;
                    crate::rules::engine::point_at_other_tool(
                        f,
                        a,
                        b,
                        o,
                        "the other tool",
                        "the other server's tool",
                    );
                }
            }
        }
        out.set_subject(Subject::Server, None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_case_styles() {
        assert_eq!(name_words("sendEmail"), ["send", "email"]);
        assert_eq!(name_words("send-email.v2"), ["send", "email", "v2"]);
        assert_eq!(name_words("HTTPRequest"), ["http", "request"]);
        assert_eq!(name_words("get_URL"), ["get", "url"]);
    }

    #[test]
    fn stems_fold_plurals_and_verbs() {
        assert_eq!(stem("emails"), "email");
        assert_eq!(stem("queries"), "query");
        assert_eq!(stem("sending"), "send");
        assert_eq!(stem("searched"), "search");
        assert_eq!(stem("status"), "status");
        assert_eq!(stem("databases"), stem("database"));
        assert_eq!(stem("created"), stem("create"));
        assert_eq!(stem("updating"), stem("update"));
        assert_eq!(stem("classes"), "class");
        assert_eq!(stem("access"), "access");
    }

    #[test]
    fn edit_distance_is_bounded() {
        assert_eq!(edit_distance("email", "emial", 2), 1);
        assert_eq!(edit_distance("abcd", "badc", 3), 2);
        assert_eq!(edit_distance("mail", "email", 2), 1);
        assert_eq!(edit_distance("abc", "abcdefgh", 2), 3);
        assert_eq!(edit_distance("kitten", "sitting", 5), 3);
    }

    #[test]
    fn near_words() {
        assert!(words_near("mail", "email"));
        assert!(words_near("messag", "mesag"));
        assert!(!words_near("board", "dashboard"));
        assert!(!words_near("get", "set"));
        assert!(!words_near("read", "write"));
        assert!(!words_near("issue", "comment"));
    }
}
