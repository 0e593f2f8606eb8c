//! `mcplint.toml`: per-rule settings and ignores with reasons.
//!
//! ```toml
//! rules-dirs = ["my-rules"]          # extra rule directories, relative to this file
//!
//! [rules.token-budget]
//! disable = true
//!
//! [rules.whitespace-padding]
//! severity = "low"
//!
//! [[rules.undocumented-parameter.ignore]]
//! server = "git"                     # optional
//! tool = "git_log"                   # optional
//! reason = "documented upstream"     # required
//! ```
//!
//! An ignore that matches nothing becomes an `unmatched-ignore` finding
//! pointing into this file.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use miette::{NamedSource, SourceSpan};
use serde::Deserialize;

use crate::finding::{ByteSpan, Finding, Severity, Subject};
use crate::rules::engine::{Engine, RuleSettings, Sink};

/// A config file that cannot be used.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[error("{message}")]
#[diagnostic(code(mcplint::config))]
pub struct ConfigError {
    message: String,
    #[source_code]
    src: NamedSource<String>,
    #[label("here")]
    span: Option<SourceSpan>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct File {
    #[serde(default)]
    rules_dirs: Vec<toml::Spanned<String>>,
    #[serde(default)]
    rules: BTreeMap<String, RuleCfg>,
    // The same mcplint.toml names the project's servers and where approvals
    // live; `crate::config` validates those keys, so here they are only allowed.
    #[serde(default)]
    #[allow(dead_code)]
    servers: Option<toml::Value>,
    #[serde(default)]
    #[allow(dead_code)]
    approvals: Option<toml::Value>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RuleCfg {
    #[serde(default)]
    disable: bool,
    #[serde(default)]
    severity: Option<Severity>,
    #[serde(default)]
    ignore: Vec<toml::Spanned<IgnoreCfg>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IgnoreCfg {
    #[serde(default)]
    server: Option<String>,
    #[serde(default)]
    tool: Option<String>,
    reason: String,
}

/// One ignore entry.
#[derive(Clone, Debug)]
pub struct Ignore {
    /// The rule.
    pub rule: String,
    /// Only this server, if set.
    pub server: Option<String>,
    /// Only this tool (or prompt/resource), if set.
    pub tool: Option<String>,
    /// Why.
    pub reason: String,
    span: std::ops::Range<usize>,
}

/// A loaded `mcplint.toml`.
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// Where it was read from.
    pub path: Option<PathBuf>,
    text: String,
    /// Per-rule settings.
    pub settings: HashMap<String, RuleSettings>,
    /// Ignores.
    pub ignores: Vec<Ignore>,
    /// Extra rule directories (resolved against the file's directory).
    pub rules_dirs: Vec<PathBuf>,
    rule_spans: HashMap<String, std::ops::Range<usize>>,
}

impl Config {
    /// Reads and validates a config file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            message: format!("{shown}: cannot read: {e}"),
            src: NamedSource::new(&shown, String::new()),
            span: None,
        })?;
        Self::parse(path, text)
    }

    /// Parses config text (`path` is used for messages and relative directories).
    pub fn parse(path: &Path, text: String) -> Result<Config, ConfigError> {
        let shown = path.display().to_string();
        let f: File = toml::from_str(&text).map_err(|e| ConfigError {
            message: format!("{shown}: {}", e.message()),
            src: NamedSource::new(&shown, text.clone()),
            span: e.span().map(|r| (r.start, r.end - r.start).into()),
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        let mut rules_dirs = Vec::new();
        for d in &f.rules_dirs {
            // Relative to this file, not to the working directory, so the
            // same config works from anywhere in the project.
            let dir = base.join(d.get_ref());
            if !dir.is_dir() {
                let span = d.span();
                return Err(ConfigError {
                    message: format!(
                        "{shown}: rules directory `{}` (resolved against the config file's folder to {}) is not a readable directory",
                        d.get_ref(),
                        dir.display()
                    ),
                    src: NamedSource::new(&shown, text.clone()),
                    span: Some((span.start, span.end - span.start).into()),
                });
            }
            rules_dirs.push(dir);
        }
        let mut c = Config {
            path: Some(path.to_path_buf()),
            rules_dirs,
            ..Config::default()
        };
        for (id, r) in f.rules {
            // NOTE: toml's Spanned around a table inside a map fails when the
            // table is only opened through `[[rules.ID.ignore]]`, so the span of
            // a rule's table is found in the text.
            if let Some(at) = text.find(&format!("rules.{id}")) {
                c.rule_spans.insert(id.clone(), at..at + 6 + id.len());
            }
            c.settings.insert(
                id.clone(),
                RuleSettings {
                    disabled: r.disable,
                    severity: r.severity,
                },
            );
            for i in r.ignore {
                let span = i.span();
                let i = i.into_inner();
                if i.reason.trim().is_empty() {
                    return Err(ConfigError {
                        message: format!("{shown}: an ignore needs a written reason"),
                        src: NamedSource::new(&shown, text.clone()),
                        span: Some((span.start, span.end - span.start).into()),
                    });
                }
                c.ignores.push(Ignore {
                    rule: id.clone(),
                    server: i.server,
                    tool: i.tool,
                    reason: i.reason,
                    span,
                });
            }
        }
        c.text = text;
        Ok(c)
    }

    /// An error for a rule id the engine does not know.
    pub fn unknown_rule(&self, id: &str) -> ConfigError {
        let shown = self
            .path
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        ConfigError {
            message: format!("{shown}: unknown rule `{id}` (see `mcplint rules`)"),
            src: NamedSource::new(&shown, self.text.clone()),
            span: self
                .rule_spans
                .get(id)
                .map(|r| (r.start, r.end - r.start).into()),
        }
    }

    /// Removes ignored findings and adds an `unmatched-ignore` finding for every
    /// ignore that matched nothing. Returns the number of findings ignored.
    pub fn apply(&self, engine: &Engine, findings: &mut Vec<Finding>) -> usize {
        let mut used = vec![false; self.ignores.len()];
        let before = findings.len();
        findings.retain(|f| {
            let hit = self.ignores.iter().position(|i| {
                i.rule == f.rule
                    && i.server
                        .as_ref()
                        .is_none_or(|s| f.server.as_deref() == Some(s.as_str()))
                    && i.tool
                        .as_ref()
                        .is_none_or(|t| f.name.as_deref() == Some(t.as_str()))
            });
            if let Some(i) = hit {
                used[i] = true;
            }
            hit.is_none()
        });
        let ignored = before - findings.len();
        let Some(meta) = engine.meta("unmatched-ignore") else {
            return ignored;
        };
        let path = self
            .path
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let mut sink = Sink::default();
        for (i, ig) in self.ignores.iter().enumerate() {
            if used[i] || engine.meta(&ig.rule).is_none() {
                continue;
            }
            let (line, column) = crate::manifest::json::line_col(&self.text, ig.span.start);
            let sev = self
                .settings
                .get("unmatched-ignore")
                .and_then(|s| s.severity)
                .unwrap_or(meta.severity);
            if self
                .settings
                .get("unmatched-ignore")
                .is_some_and(|s| s.disabled)
            {
                continue;
            }
            let f = sink.push(
                meta,
                path.clone(),
                ig.server.clone(),
                Subject::File,
                ig.tool.clone(),
                String::new(),
                ByteSpan::new(ig.span.start, ig.span.end),
                (line, column),
                format!("ignore for `{}` matched no finding", ig.rule),
                "unmatched ignore".into(),
            );
            f.severity = sev;
            f.notes.push(format!("reason given: {}", ig.reason));
        }
        findings.extend(sink.findings);
        ignored
    }

    /// The config text (for rendering findings that point into it).
    pub fn text(&self) -> &str {
        &self.text
    }
}
