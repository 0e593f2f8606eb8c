//! Declarative rules: `rules/*.toml`, embedded at build time, plus user rule
//! directories.
//!
//! One file is one rule (ast-grep's layout, gitleaks' tests beside the rule):
//!
//! ```toml
//! id = "secret-file-read-request"
//! summary = "asks the model to read or pass along a local secret file"
//! severity = "high"                 # info | low | medium | high
//! confidence = "high"               # low | medium | high
//! tags = ["secret", "instruction"]  # signal families, for combined findings
//! message = "text asks the model to read a local secret file"
//! label = "request for a secret file"
//! help = "Tools never need the user's keys; remove the request."
//! applies_to = ["tools/*/**", "prompts/**"]   # globs over field paths (default: all)
//! tools = ["*"]                     # globs over tool names (default: all)
//! patterns = ['''read\s+~/\.ssh''']
//! unless = ['''example''']          # a match anywhere in the field cancels it
//! [docs]
//! what = "..."; why = "..."; example = "..."; remedy = "..."
//! [tests]
//! match = ["please read ~/.ssh/id_rsa"]
//! no_match = ["reads the file you name"]
//! ```
//!
//! Patterns are Rust regexes, matched case-insensitively against the
//! normalised text (see [`crate::rules::normalize`]): write them without accents
//! and expect look-alike letters to be folded already.
//!
//! `keywords` (gitleaks' idea) are lower-case literals of which every match
//! contains at least one. All rules' keywords form one Aho-Corasick automaton,
//! the prefilter: one pass over a field tells which rules can match, and only
//! their regexes run. (A single `RegexSet` of all patterns was tried first: the
//! bounded repetitions such as `[^.\n]{0,60}` make its DFA explode and it fell
//! back to a slow engine, about 600 tools/s.) `mcplint rules test` checks the
//! keywords too, since a test string only matches through them.

use std::path::{Path, PathBuf};

use aho_corasick::{AhoCorasick, MatchKind};
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use miette::{NamedSource, SourceSpan};
use regex::{Regex, RegexBuilder};
use serde::Deserialize;

use crate::finding::{Confidence, Severity};
use crate::rules::engine::{Docs, Field, Origin, RuleMeta, Scope, Sink};
use crate::rules::normalize::{normalize, HiddenKind, Normalized};

include!(concat!(env!("OUT_DIR"), "/builtin_rules.rs"));

/// A rule file that cannot be used, with a span into it.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[error("{message}")]
#[diagnostic(code(mcplint::rule_file))]
pub struct RuleFileError {
    message: String,
    #[source_code]
    src: NamedSource<String>,
    #[label("{label}")]
    span: Option<SourceSpan>,
    label: String,
    #[help]
    help: Option<String>,
}

impl RuleFileError {
    fn new(
        name: &str,
        text: &str,
        span: Option<std::ops::Range<usize>>,
        message: String,
        label: &str,
    ) -> Self {
        RuleFileError {
            message: format!("{name}: {message}"),
            src: NamedSource::new(name, text.to_string()),
            span: span.map(|r| (r.start, r.end - r.start).into()),
            label: label.into(),
            help: Some(
                "see `mcplint explain` of a built-in rule, or the rules/ folder, for the format"
                    .into(),
            ),
        }
    }

    /// Any other problem with a rules directory (unreadable file, duplicate id).
    pub fn plain(name: &str, message: String) -> Self {
        RuleFileError::new(name, "", None, message, "")
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    id: toml::Spanned<String>,
    summary: String,
    severity: Severity,
    #[serde(default = "default_confidence")]
    confidence: Confidence,
    #[serde(default)]
    tags: Vec<String>,
    message: String,
    #[serde(default)]
    label: Option<String>,
    #[serde(default)]
    help: String,
    #[serde(default)]
    applies_to: Vec<toml::Spanned<String>>,
    #[serde(default)]
    tools: Vec<toml::Spanned<String>>,
    patterns: Vec<toml::Spanned<String>>,
    #[serde(default)]
    unless: Vec<toml::Spanned<String>>,
    #[serde(default)]
    keywords: Vec<String>,
    docs: Docs,
    #[serde(default)]
    tests: Tests,
}

fn default_confidence() -> Confidence {
    Confidence::Medium
}

/// A rule's own test cases.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tests {
    /// Texts the rule must flag.
    #[serde(default, rename = "match")]
    pub matches: Vec<String>,
    /// Texts the rule must not flag.
    #[serde(default)]
    pub no_match: Vec<String>,
}

/// One compiled declarative rule.
pub struct PatternRule {
    /// Its metadata.
    pub meta: RuleMeta,
    message: String,
    label: String,
    applies: Option<GlobSet>,
    tools: Option<GlobSet>,
    regexes: Vec<Regex>,
    /// For each of `regexes`, its index among the set's gated patterns, when
    /// every match of it starts with one of a finite set of literals.
    gates: Vec<Option<usize>>,
    unless: Vec<Regex>,
    /// Lower-case literals of which every match contains at least one (empty:
    /// the rule's patterns always run).
    keywords: Vec<String>,
    /// Its test cases.
    pub tests: Tests,
    /// The file it came from.
    pub file: String,
}

impl PatternRule {
    /// The first match in normalised `text` (byte range), unless a negative pattern matches.
    pub fn find(&self, text: &str) -> Option<(usize, usize)> {
        if !self.keywords.is_empty() && !self.keywords.iter().any(|k| text.contains(k.as_str())) {
            return None;
        }
        self.find_unguarded(text)
    }

    /// [`PatternRule::find`] without the keyword check (the caller did it).
    fn find_unguarded(&self, text: &str) -> Option<(usize, usize)> {
        self.find_gated(text, None)
    }

    /// Like [`PatternRule::find_unguarded`], but with `present` (the gated
    /// patterns whose prefix literals occur in `text`) skips the regexes that
    /// cannot match. Skipping a regex that would return `None` leaves the
    /// leftmost match, and the first pattern among equals, unchanged.
    fn find_gated(&self, text: &str, present: Option<&[bool]>) -> Option<(usize, usize)> {
        let m = self
            .regexes
            .iter()
            .zip(&self.gates)
            .filter(|(_, g)| match (present, g) {
                (Some(p), Some(g)) => p[*g],
                _ => true,
            })
            .filter_map(|(r, _)| r.find(text))
            .min_by_key(|m| m.start())?;
        if self.unless.iter().any(|u| u.is_match(text)) {
            return None;
        }
        Some((m.start(), m.end()))
    }
}

/// A failed rule test case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestFailure {
    /// The rule.
    pub rule: String,
    /// The rule file.
    pub file: String,
    /// The text.
    pub text: String,
    /// True if it should have matched.
    pub expected_match: bool,
}

/// All declarative rules with their shared prefilter.
pub struct PatternSet {
    rules: Vec<PatternRule>,
    /// One automaton over every rule's keywords.
    keywords: AhoCorasick,
    /// Rule index of each keyword.
    owner: Vec<usize>,
    /// Rules without keywords: always candidates.
    always: Vec<usize>,
    /// Every gated pattern's prefix literals: one pass over a field tells which
    /// patterns can match at all (`None` when no pattern is gated).
    prefixes: Option<AhoCorasick>,
    /// Gated pattern index of each prefix literal.
    prefix_owner: Vec<usize>,
    /// Number of gated patterns.
    gated: usize,
}

/// The literals every match of `pattern` (as compiled by [`regex`]) starts
/// with, or `None` if they cannot be bounded (a large class, an empty
/// alternative, too many case variants). Prefixes are exact or truncated; either
/// way a text without any of them has no match.
fn prefix_literals(pattern: &str) -> Option<Vec<Vec<u8>>> {
    let hir = regex_syntax::ParserBuilder::new()
        .case_insensitive(true)
        .build()
        .parse(&ascii_boundaries(pattern))
        .ok()?;
    let seq = regex_syntax::hir::literal::Extractor::new().extract(&hir);
    let lits = seq.literals()?;
    if lits.is_empty() || lits.iter().any(|l| l.as_bytes().is_empty()) {
        return None;
    }
    // Normalised text has no ASCII upper case (see [`PatternSet::present`]),
    // so the case variants with an upper-case letter can never occur there:
    // dropping them keeps the automaton small.
    let mut out: Vec<Vec<u8>> = lits
        .iter()
        .map(|l| l.as_bytes())
        .filter(|b| !b.iter().any(u8::is_ascii_uppercase))
        .map(<[u8]>::to_vec)
        .collect();
    out.sort();
    out.dedup();
    Some(out)
}

fn glob_set(
    name: &str,
    text: &str,
    globs: &[toml::Spanned<String>],
) -> Result<Option<GlobSet>, RuleFileError> {
    if globs.is_empty() {
        return Ok(None);
    }
    let mut b = GlobSetBuilder::new();
    for g in globs {
        let glob = GlobBuilder::new(g.get_ref())
            .literal_separator(true)
            .build()
            .map_err(|e| {
                RuleFileError::new(
                    name,
                    text,
                    Some(g.span()),
                    format!("bad glob: {e}"),
                    "this glob",
                )
            })?;
        b.add(glob);
    }
    b.build()
        .map(Some)
        .map_err(|e| RuleFileError::new(name, text, None, format!("bad globs: {e}"), ""))
}

/// Compiles a rule pattern. `\b` becomes an ASCII word boundary: a Unicode
/// `\b` stops the fast lazy DFA on any non-ASCII text (an em dash is enough)
/// and the fallback engines are ten times slower. Patterns for non-Latin
/// scripts therefore use `(?:^|\s)` rather than `\b`.
fn regex(p: &str) -> Result<Regex, regex::Error> {
    let p = ascii_boundaries(p);
    RegexBuilder::new(&p)
        .case_insensitive(true)
        .size_limit(1 << 24)
        .build()
}

/// Rewrites `\b` (not `\\b`) to `(?-u:\b)`.
fn ascii_boundaries(p: &str) -> String {
    let mut out = String::with_capacity(p.len() + 16);
    let mut chars = p.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('b') => out.push_str("(?-u:\\b)"),
                Some(n) => {
                    out.push('\\');
                    out.push(n);
                }
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

impl PatternSet {
    /// The rules embedded in the binary (`rules/*.toml`).
    pub fn builtin_sources() -> Vec<(String, String, Origin)> {
        BUILTIN_RULES
            .iter()
            .map(|(n, t)| (n.to_string(), t.to_string(), Origin::Builtin))
            .collect()
    }

    /// Reads every `*.toml` in `dir` (sorted by name).
    pub fn dir_sources(dir: &Path) -> Result<Vec<(String, String, Origin)>, RuleFileError> {
        let shown = dir.display().to_string();
        let rd = std::fs::read_dir(dir).map_err(|e| {
            RuleFileError::plain(&shown, format!("cannot read rules directory: {e}"))
        })?;
        let mut paths: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        paths.sort();
        let mut out = Vec::new();
        for p in paths {
            let name = p.display().to_string();
            let text = std::fs::read_to_string(&p)
                .map_err(|e| RuleFileError::plain(&name, format!("cannot read: {e}")))?;
            out.push((name, text, Origin::File(p)));
        }
        Ok(out)
    }

    /// Compiles rule files. Any broken file is an error with a span into it.
    pub fn compile(sources: Vec<(String, String, Origin)>) -> Result<PatternSet, RuleFileError> {
        let mut rules = Vec::new();
        let mut prefix_lits: Vec<Vec<u8>> = Vec::new();
        let mut prefix_owner = Vec::new();
        let mut gated = 0usize;
        for (name, text, origin) in sources {
            let f: RuleFile = toml::from_str(&text).map_err(|e| {
                let span = e.span();
                RuleFileError::new(&name, &text, span, e.message().to_string(), "here")
            })?;
            let id = f.id.get_ref();
            let kebab = !id.is_empty()
                && id
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !id.starts_with('-')
                && !id.ends_with('-');
            if !kebab {
                return Err(RuleFileError::new(
                    &name,
                    &text,
                    Some(f.id.span()),
                    "a rule id must be kebab-case (a-z, 0-9, -)".into(),
                    "this id",
                ));
            }
            if f.patterns.is_empty() {
                return Err(RuleFileError::new(
                    &name,
                    &text,
                    None,
                    "a rule needs at least one pattern".into(),
                    "",
                ));
            }
            let mut regexes = Vec::new();
            let mut gates = Vec::new();
            for p in &f.patterns {
                gates.push(prefix_literals(p.get_ref()).map(|l| {
                    for lit in l {
                        prefix_lits.push(lit);
                        prefix_owner.push(gated);
                    }
                    gated += 1;
                    gated - 1
                }));
                regexes.push(regex(p.get_ref()).map_err(|e| {
                    RuleFileError::new(
                        &name,
                        &text,
                        Some(p.span()),
                        format!("bad regex: {e}"),
                        "this pattern",
                    )
                })?);
            }
            let mut unless = Vec::new();
            for p in &f.unless {
                unless.push(regex(p.get_ref()).map_err(|e| {
                    RuleFileError::new(
                        &name,
                        &text,
                        Some(p.span()),
                        format!("bad regex: {e}"),
                        "this pattern",
                    )
                })?);
            }
            let applies = glob_set(&name, &text, &f.applies_to)?;
            let tools = glob_set(&name, &text, &f.tools)?;
            rules.push(PatternRule {
                meta: RuleMeta {
                    id: id.clone(),
                    summary: f.summary,
                    severity: f.severity,
                    confidence: f.confidence,
                    tags: f.tags,
                    help: f.help,
                    docs: f.docs,
                    origin,
                    code: false,
                },
                label: f.label.unwrap_or_else(|| f.message.clone()),
                message: f.message,
                applies,
                tools,
                regexes,
                gates,
                unless,
                keywords: f.keywords.iter().map(|k| k.to_lowercase()).collect(),
                tests: f.tests,
                file: name,
            });
        }
        let mut pats = Vec::new();
        let mut owner = Vec::new();
        let mut always = Vec::new();
        for (i, r) in rules.iter().enumerate() {
            if r.keywords.is_empty() {
                always.push(i);
            }
            for k in &r.keywords {
                pats.push(k.clone());
                owner.push(i);
            }
        }
        let keywords = AhoCorasick::builder()
            .match_kind(MatchKind::Standard)
            .build(&pats)
            .map_err(|e| {
                RuleFileError::plain("rules", format!("cannot build the keyword prefilter: {e}"))
            })?;
        let prefixes = if prefix_lits.is_empty() {
            None
        } else {
            Some(
                AhoCorasick::builder()
                    .match_kind(MatchKind::Standard)
                    .build(&prefix_lits)
                    .map_err(|e| {
                        RuleFileError::plain(
                            "rules",
                            format!("cannot build the pattern prefilter: {e}"),
                        )
                    })?,
            )
        };
        Ok(PatternSet {
            rules,
            keywords,
            owner,
            always,
            prefixes,
            prefix_owner,
            gated,
        })
    }

    /// The rules' metadata.
    pub fn metas(&self) -> impl Iterator<Item = &RuleMeta> {
        self.rules.iter().map(|r| &r.meta)
    }

    /// The compiled rules.
    pub fn rules(&self) -> &[PatternRule] {
        &self.rules
    }

    /// The candidate rules for normalised `text`, in rule order.
    fn candidates(&self, text: &str) -> Vec<usize> {
        let mut seen = vec![false; self.rules.len()];
        for &i in &self.always {
            seen[i] = true;
        }
        // Overlapping search: every keyword occurrence, so no rule is missed
        // because another rule's keyword overlapped its own.
        for m in self.keywords.find_overlapping_iter(text) {
            seen[self.owner[m.pattern().as_usize()]] = true;
        }
        seen.iter()
            .enumerate()
            .filter(|(_, &s)| s)
            .map(|(i, _)| i)
            .collect()
    }

    /// For each gated pattern, whether one of its prefix literals occurs in `text`.
    fn present(&self, text: &str) -> Vec<bool> {
        // Upper-case variants were dropped from the literals; text that is not
        // fully lower case (not normalised) runs every pattern instead.
        if text.bytes().any(|b| b.is_ascii_uppercase()) {
            return vec![true; self.gated];
        }
        let mut p = vec![false; self.gated];
        if let Some(ac) = &self.prefixes {
            // Overlapping: every occurrence, so one literal cannot hide another.
            for m in ac.find_overlapping_iter(text) {
                p[self.prefix_owner[m.pattern().as_usize()]] = true;
            }
        }
        p
    }

    /// Matches one field and reports into `out`. One finding per rule per field.
    pub fn check(
        &self,
        scope: &Scope<'_>,
        field: &Field<'_>,
        norm: &Normalized,
        tool: Option<&str>,
        enabled: &dyn Fn(&str) -> bool,
        out: &mut Sink,
    ) {
        let applies = |r: &PatternRule| {
            enabled(&r.meta.id)
                && r.applies.as_ref().is_none_or(|g| g.is_match(&field.path))
                && r.tools
                    .as_ref()
                    .is_none_or(|g| tool.is_some_and(|t| g.is_match(t)))
        };
        // Which gated patterns can match, computed once per field on first need.
        let mut present: Option<Vec<bool>> = None;
        for i in self.candidates(&norm.text) {
            let r = &self.rules[i];
            if !applies(r) {
                continue;
            }
            let present = present.get_or_insert_with(|| self.present(&norm.text));
            if let Some((s, e)) = r.find_gated(&norm.text, Some(present)) {
                let (ds, de) = norm.to_decoded(s, e);
                out.emit(
                    scope,
                    &r.meta,
                    field.node,
                    Some((ds, de)),
                    r.message.clone(),
                    r.label.clone(),
                );
            }
        }
        // Text spelled in invisible tag characters is read by models: match it
        // too, and point at the hidden characters.
        if !norm.tag_text.is_empty() {
            let hidden = normalize(&norm.tag_text);
            let tags: Vec<_> = norm
                .hidden
                .iter()
                .filter(|h| h.kind == HiddenKind::Tag)
                .collect();
            let (Some(first), Some(last)) = (tags.first(), tags.last()) else {
                return;
            };
            for i in self.candidates(&hidden.text) {
                let r = &self.rules[i];
                if applies(r) && r.find_unguarded(&hidden.text).is_some() {
                    let f = out.emit(
                        scope,
                        &r.meta,
                        field.node,
                        Some((first.start, last.end)),
                        format!("{} (in invisible tag characters)", r.message),
                        r.label.clone(),
                    );
                    f.notes.push(format!(
                        "hidden text: {}",
                        crate::display::visible(&norm.tag_text)
                    ));
                }
            }
        }
    }

    /// Runs every rule's own test cases.
    pub fn self_test(&self) -> Vec<TestFailure> {
        let mut fails = Vec::new();
        for r in &self.rules {
            for (texts, expected) in [(&r.tests.matches, true), (&r.tests.no_match, false)] {
                for t in texts {
                    let n = normalize(t);
                    let mut hit = r.find(&n.text).is_some();
                    if !n.tag_text.is_empty() {
                        hit |= r.find(&normalize(&n.tag_text).text).is_some();
                    }
                    if hit != expected {
                        fails.push(TestFailure {
                            rule: r.meta.id.clone(),
                            file: r.file.clone(),
                            text: t.clone(),
                            expected_match: expected,
                        });
                    }
                }
            }
        }
        fails
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The prefix gate never changes a result: on every built-in rule's own
    /// test texts, the gated search equals the plain one, and most patterns
    /// are gated (otherwise the gate is useless).
    #[test]
    fn prefix_gate_is_exact() {
        let set = PatternSet::compile(PatternSet::builtin_sources()).expect("rules compile");
        let total: usize = set.rules.iter().map(|r| r.regexes.len()).sum();
        assert!(
            set.gated * 2 > total,
            "only {} of {total} patterns gated",
            set.gated
        );
        for r in &set.rules {
            for t in r.tests.matches.iter().chain(&r.tests.no_match) {
                let n = normalize(t);
                let present = set.present(&n.text);
                assert_eq!(
                    r.find_gated(&n.text, Some(&present)),
                    r.find_unguarded(&n.text),
                    "{}: {t}",
                    r.meta.id
                );
            }
        }
    }

    #[test]
    fn prefix_literals_bound_matches() {
        let l = prefix_literals(r"\b(?:always|never)\s+run").expect("finite");
        assert!(l.iter().any(|x| x == b"always"));
        assert!(l.iter().any(|x| x == b"never"));
        assert!(!l.iter().any(|x| x == b"Always"));
        // A leading large class cannot be bounded.
        assert!(prefix_literals(r"[^.\n]{0,10}x").is_none());
        assert!(prefix_literals(r"(?:a)?").is_none());
    }
}
