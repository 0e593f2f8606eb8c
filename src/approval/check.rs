//! Comparing every server of `mcplint.toml` with its approval: the work
//! behind `mcplint diff` (no arguments) and `mcplint verify`.
//!
//! Besides the diff of each server, it reports what is wrong with the
//! approvals themselves: a server without one (`server-unapproved`), a source
//! pin moved without a new approval (`pin-changed`), and an approval whose
//! server is no longer in `mcplint.toml` (`approval-stale`).

use crate::approval::diff::Side;
use crate::approval::rules_hook::{diff_judged, LazyRules};
use crate::approval::source::current_manifest;
use crate::approval::store::{self, Fingerprints};
use crate::config::Config;
use crate::finding::change::{Change, ChangeKind, Location};
use crate::manifest::json::{line_col, Span};
use crate::manifest::load::LoadOptions;

/// How thorough to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Diff every server.
    Diff,
    /// Compare fingerprints first; diff only servers that differ.
    Verify,
}

/// What a check found.
#[derive(Default)]
pub struct Outcome {
    /// Every change, server by server.
    pub changes: Vec<Change>,
    /// Servers whose manifest or approval could not be read.
    pub errors: Vec<miette::Report>,
    /// Servers whose fingerprints differ although the diff finds nothing
    /// semantic (the order inside an array changed).
    pub reordered: Vec<String>,
}

impl Outcome {
    /// Exit code: 2 on errors, 1 on changes, 0 when everything matches.
    pub fn exit_code(&self) -> i32 {
        if !self.errors.is_empty() {
            2
        } else if !self.changes.is_empty() || !self.reordered.is_empty() {
            1
        } else {
            0
        }
    }
}

fn location(file: &str, text: &str, span: Span) -> Location {
    let (line, column) = line_col(text, span.start);
    let (end_line, end_column) = line_col(text, span.end);
    Location {
        file: file.to_string(),
        span,
        line,
        column,
        end_line,
        end_column,
    }
}

/// Compares every server in `cfg` with its approval. With `rules`, the
/// rules run on the new text of every change.
pub fn check_config(
    cfg: &Config,
    opts: &LoadOptions,
    mode: Mode,
    rules: &LazyRules<'_>,
) -> Outcome {
    let mut out = Outcome::default();
    let cfg_file = cfg.path.display().to_string();
    for sc in &cfg.servers {
        let path = store::approval_path(&cfg.approvals, &sc.name);
        if !path.exists() {
            let mut c = Change::server_level(
                &sc.name,
                ChangeKind::ServerUnapproved,
                format!(
                    "no approval at {}: review it and run `mcplint approve {}`",
                    path.display(),
                    sc.name
                ),
            );
            c.after_location = Some(location(&cfg_file, &cfg.text, sc.name_span));
            out.changes.push(c);
            continue;
        }
        let approval = match store::load(&path, opts) {
            Ok(a) => a,
            Err(e) => {
                out.errors.push(e.into());
                continue;
            }
        };
        if approval.meta.source.as_deref() != Some(sc.source_text.as_str()) {
            let mut c = Change::server_level(
                &sc.name,
                ChangeKind::PinChanged,
                format!(
                    "source pin changed from `{}` to `{}` without a new approval",
                    approval.meta.source.as_deref().unwrap_or("(none)"),
                    sc.source_text
                ),
            );
            c.path = "/source".into();
            c.before = approval.meta.source.clone().map(serde_json::Value::String);
            c.after = Some(serde_json::Value::String(sc.source_text.clone()));
            c.after_location = Some(location(&cfg_file, &cfg.text, sc.source_span));
            out.changes.push(c);
        }
        let current = match current_manifest(sc, opts) {
            Ok(c) => c,
            Err(e) => {
                out.errors.push(e.into());
                continue;
            }
        };
        // A server.json source keeps its pin inside that file: compare the
        // package it resolves to now with the one approved.
        if approval.meta.package.is_some() && current.package != approval.meta.package {
            let mut c = Change::server_level(
                &sc.name,
                ChangeKind::PinChanged,
                format!(
                    "`{}` now names `{}`, approved as `{}`, without a new approval",
                    sc.source_text,
                    current.package.as_deref().unwrap_or("(no package)"),
                    approval.meta.package.as_deref().unwrap_or("(none)"),
                ),
            );
            c.path = "/package".into();
            c.before = approval.meta.package.clone().map(serde_json::Value::String);
            c.after = current.package.clone().map(serde_json::Value::String);
            c.after_location = Some(location(&cfg_file, &cfg.text, sc.source_span));
            out.changes.push(c);
        }
        if mode == Mode::Verify {
            let now = Fingerprints::of(&current.loaded.doc, current.server());
            if approval.meta.fingerprints.matches(&now) {
                continue;
            }
        }
        let before_file = path.display().to_string();
        let after_file = current.loaded.display_path();
        let mut changes = match diff_judged(
            Side::of(&approval.loaded, approval.server(), &before_file),
            Side::of(&current.loaded, current.server(), &after_file),
            &current.loaded,
            rules,
        ) {
            Ok(c) => c,
            Err(e) => {
                out.errors.push(miette::miette!("{e}"));
                continue;
            }
        };
        // Name changes by the server's config name, whatever serverInfo says.
        for c in &mut changes {
            c.server = sc.name.clone();
        }
        if changes.is_empty() {
            let now = Fingerprints::of(&current.loaded.doc, current.server());
            if !approval.meta.fingerprints.matches(&now) {
                out.reordered.push(sc.name.clone());
            }
        }
        out.changes.extend(changes);
    }
    match store::list(&cfg.approvals) {
        Ok(files) => {
            for (name, path) in files {
                if cfg.server(&name).is_none() {
                    let mut c = Change::server_level(
                        &name,
                        ChangeKind::ApprovalStale,
                        format!(
                            "approval {} names a server that mcplint.toml no longer lists",
                            path.display()
                        ),
                    );
                    c.before_location = Some(Location {
                        file: path.display().to_string(),
                        span: Span::new(0, 0),
                        line: 1,
                        column: 1,
                        end_line: 1,
                        end_column: 1,
                    });
                    out.changes.push(c);
                }
            }
        }
        Err(e) => out.errors.push(miette::miette!(
            "{}: cannot list approvals: {e}",
            cfg.approvals.display()
        )),
    }
    out
}
