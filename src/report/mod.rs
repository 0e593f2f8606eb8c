//! Renderers: one [`Report`] in, text out. Every format renders the same
//! findings; none of them prints manifest text without making it safe first.
//!
//! - [`human`]: miette diagnostics with labels on the exact bytes;
//! - [`json`]: the frozen, versioned wire format (`"version": 1`);
//! - [`sarif`]: SARIF 2.1.0 for code-scanning upload;
//! - [`github`]: GitHub Actions workflow commands;
//! - [`markdown`]: a table for a PR comment or job summary.
//!
//! [`diff`] renders changes (from `mcplint diff` and `verify`) in the same five formats.

pub mod diff;
pub mod github;
pub mod human;
pub mod json;
pub mod markdown;
pub mod sarif;

use std::collections::HashMap;
use std::sync::Arc;

use crate::finding::{Counts, Finding};
use crate::rules::Engine;

/// What was checked, for summaries.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct Stats {
    /// Input files.
    pub files: usize,
    /// Servers.
    pub servers: usize,
    /// Tools.
    pub tools: usize,
    /// Findings removed by ignores in `mcplint.toml`.
    pub ignored: usize,
}

/// Everything a renderer needs.
pub struct Report<'a> {
    /// Line indexes of `sources`, built on first use.
    pub lines: std::sync::OnceLock<HashMap<String, crate::finding::LineIndex>>,
    /// The findings, sorted.
    pub findings: &'a [Finding],
    /// Raw text of each input file by its path as given (and of the config).
    pub sources: &'a HashMap<String, Arc<String>>,
    /// The rules, for metadata.
    pub engine: &'a Engine,
    /// Counts of what was checked.
    pub stats: Stats,
}

impl Report<'_> {
    /// Counts by severity.
    pub fn counts(&self) -> Counts {
        Counts::of(self.findings)
    }

    /// 1-based line and column (in characters) of a byte offset in `path`.
    pub fn line_col(&self, path: &str, offset: usize) -> (usize, usize) {
        let lines = self.lines.get_or_init(|| {
            self.sources
                .iter()
                .map(|(p, t)| (p.clone(), crate::finding::LineIndex::new(t)))
                .collect()
        });
        match (self.sources.get(path), lines.get(path)) {
            (Some(t), Some(idx)) => idx.line_col(t, offset),
            _ => (1, 1),
        }
    }

    /// The one-line summary.
    pub fn summary_line(&self) -> String {
        let c = self.counts();
        if c.total() == 0 {
            return format!(
                "no findings in {} file(s), {} server(s), {} tool(s){}",
                self.stats.files,
                self.stats.servers,
                self.stats.tools,
                ignored(self.stats.ignored)
            );
        }
        format!(
            "{} finding(s): {} high, {} medium, {} low, {} info in {} file(s), {} server(s), {} tool(s){}",
            c.total(),
            c.high,
            c.medium,
            c.low,
            c.info,
            self.stats.files,
            self.stats.servers,
            self.stats.tools,
            ignored(self.stats.ignored)
        )
    }
}

fn ignored(n: usize) -> String {
    if n == 0 {
        String::new()
    } else {
        format!(" ({n} ignored by config)")
    }
}
