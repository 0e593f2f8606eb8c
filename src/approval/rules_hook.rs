//! Running the rules on new text: the bridge from the rules engine to the
//! diff's [`RuleHook`](crate::approval::diff::RuleHook).
//!
//! The engine runs once over the current manifest; a change's new value trips
//! a rule when a finding of medium or high severity lies inside the value's
//! bytes. Ignores from `mcplint.toml` apply, so an ignored finding does not
//! raise a change. Low and info findings (a missing description, a long
//! text) do not make a change high.

use std::cell::OnceCell;
use std::path::Path;

use crate::approval::diff::{diff_servers, DiffOptions, Side};
use crate::finding::change::Change;

use crate::finding::Severity;
use crate::manifest::json::{Document, NodeId};
use crate::manifest::Loaded;
use crate::rules::config::Config as RulesConfig;
use crate::rules::Engine;

/// The engine and the `[rules]` settings that apply to it.
pub struct Rules {
    engine: Engine,
    config: Option<RulesConfig>,
}

impl Rules {
    /// The built-in rules, configured by `cfg`'s `[rules]` and `rules-dirs`
    /// when there is a project configuration.
    pub fn new(cfg: Option<&crate::config::Config>) -> miette::Result<Rules> {
        let config = match cfg {
            Some(c) => Some(rules_config(c)?),
            None => None,
        };
        let dirs = config
            .as_ref()
            .map(|c| c.rules_dirs.clone())
            .unwrap_or_default();
        let mut engine = crate::rules::build_engine(&dirs, true)?;
        if let Some(c) = &config {
            let unknown = engine.configure(c.settings.clone());
            if let Some(id) = unknown.first() {
                return Err(c.unknown_rule(id).into());
            }
        }
        Ok(Rules { engine, config })
    }

    /// Runs the rules over `after` and keeps what new values can trip.
    pub fn index(&self, after: &Loaded) -> NewTextRules {
        let mut findings = self.engine.check(std::slice::from_ref(after), false);
        if let Some(c) = &self.config {
            c.apply(&self.engine, &mut findings);
        }
        let path = after.display_path();
        let mut hits: Vec<(usize, usize, String)> = findings
            .into_iter()
            .filter(|f| f.severity >= Severity::Medium && f.path == path)
            .map(|f| (f.span.start, f.span.end, f.rule))
            .collect();
        hits.sort();
        NewTextRules { hits }
    }
}

/// `[rules]` settings of a project configuration. The rules engine's own
/// parser reads the file when it accepts it whole; otherwise it reads only
/// the `rules-dirs` and `[rules]` keys, re-serialised.
fn rules_config(cfg: &crate::config::Config) -> miette::Result<RulesConfig> {
    if let Ok(c) = RulesConfig::parse(&cfg.path, cfg.text.clone()) {
        return Ok(c);
    }
    let mut t = toml::Table::new();
    if let Some(d) = &cfg.rules_dirs {
        t.insert("rules-dirs".into(), d.clone());
    }
    if let Some(r) = &cfg.rules {
        t.insert("rules".into(), toml::Value::Table(r.clone()));
    }
    let text = toml::to_string(&t).map_err(|e| miette::miette!("{}: {e}", cfg.path.display()))?;
    let path: &Path = &cfg.path;
    Ok(RulesConfig::parse(path, text)?)
}

/// Rule findings of one manifest, by byte range.
pub struct NewTextRules {
    hits: Vec<(usize, usize, String)>,
}

impl NewTextRules {
    /// Ids of the rules with a finding inside `node`'s bytes.
    pub fn rules_in(&self, doc: &Document, node: NodeId) -> Vec<String> {
        let span = doc.span(node);
        let first = self.hits.partition_point(|h| h.0 < span.start);
        let mut out: Vec<String> = self.hits[first..]
            .iter()
            .take_while(|h| h.0 < span.end.max(span.start + 1))
            .filter(|h| h.1 <= span.end)
            .map(|h| h.2.clone())
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

/// The rules, built on first use: building the engine compiles every rule's
/// patterns, which `verify` should not pay for when nothing changed.
pub struct LazyRules<'c> {
    cfg: Option<&'c crate::config::Config>,
    enabled: bool,
    cell: OnceCell<Result<Rules, String>>,
}

impl<'c> LazyRules<'c> {
    /// Rules configured by `cfg`; none at all unless `enabled`.
    pub fn new(cfg: Option<&'c crate::config::Config>, enabled: bool) -> Self {
        LazyRules {
            cfg,
            enabled,
            cell: OnceCell::new(),
        }
    }

    /// The rules (built now if need be), `None` when disabled, or the
    /// rendered error that stopped them from being built.
    pub fn get(&self) -> Result<Option<&Rules>, String> {
        if !self.enabled {
            return Ok(None);
        }
        match self
            .cell
            .get_or_init(|| Rules::new(self.cfg).map_err(|e| format!("{e:?}")))
        {
            Ok(r) => Ok(Some(r)),
            Err(e) => Err(e.clone()),
        }
    }
}

/// Diffs two servers; when anything changed, diffs again with the rules run
/// on the new text of `after_loaded` (the file `after` comes from), so the
/// engine is built and run only when there is new text to judge.
pub fn diff_judged(
    before: Side<'_>,
    after: Side<'_>,
    after_loaded: &Loaded,
    rules: &LazyRules<'_>,
) -> Result<Vec<Change>, String> {
    let plain = diff_servers(before, after, DiffOptions::default());
    if plain.is_empty() {
        return Ok(plain);
    }
    let Some(rules) = rules.get()? else {
        return Ok(plain);
    };
    let index = rules.index(after_loaded);
    let hook = |doc: &Document, node: NodeId| index.rules_in(doc, node);
    Ok(diff_servers(
        before,
        after,
        DiffOptions { rules: Some(&hook) },
    ))
}
