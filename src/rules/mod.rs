//! Rules: normalisation, the engine, declarative pattern rules, code rules and
//! `mcplint.toml` configuration.

pub mod code;
pub mod config;
pub mod decoded;
pub mod engine;
pub mod fragment;
pub mod literal_dfa;
pub mod memo;
pub mod normalize;
pub mod pattern;

use std::path::PathBuf;

pub use engine::{Engine, Rule, RuleMeta};
pub use pattern::{PatternSet, RuleFileError};

/// Builds the engine: built-in code rules, the embedded rule files (unless
/// `builtin_patterns` is false) and the rule files of `dirs`.
pub fn build_engine(dirs: &[PathBuf], builtin_patterns: bool) -> Result<Engine, RuleFileError> {
    let mut sources = if builtin_patterns {
        PatternSet::builtin_sources()
    } else {
        Vec::new()
    };
    for d in dirs {
        sources.extend(PatternSet::dir_sources(d)?);
    }
    let patterns = PatternSet::compile(sources)?;
    Engine::new(code::all(), patterns)
        .map_err(|id| RuleFileError::plain("rules", format!("two rules have the id `{id}`")))
}
