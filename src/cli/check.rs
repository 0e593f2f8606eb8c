//! `mcplint check [PATH...]`: run every rule and report findings.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use crate::finding::Severity;
use crate::manifest::load::{LoadError, LoadOptions};
use crate::report::{Report, Stats};
use crate::rules::config::Config;

/// Output formats of `check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CheckFormat {
    /// miette diagnostics for people.
    Human,
    /// Versioned JSON (`"version": 1`).
    Json,
    /// SARIF 2.1.0.
    Sarif,
    /// GitHub Actions workflow commands.
    Github,
    /// A Markdown table.
    Markdown,
}

/// Arguments of `mcplint check`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  mcplint check tools.json
  mcplint check captures/ --format sarif > mcplint.sarif
  mcplint check ~/.cursor/mcp.json --fail-on high
  mcplint check a.json b.json --together      # one agent uses both servers
  mcplint check tools.json --rules my-rules/ --config mcplint.toml

Exit codes: 0 no finding at or above --fail-on, 1 findings, 2 bad input.")]
pub struct Args {
    /// Files, directories or globs.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = CheckFormat::Human)]
    pub format: CheckFormat,
    /// Exit 1 when a finding has at least this severity.
    #[arg(long, value_enum, default_value_t = Severity::Medium, value_name = "SEVERITY")]
    pub fail_on: Severity,
    /// Also load rule files (`*.toml`) from this directory (repeatable).
    #[arg(long = "rules", value_name = "DIR")]
    pub rules: Vec<PathBuf>,
    /// Do not load the built-in declarative rules (for developing rule sets).
    #[arg(long)]
    pub no_builtin_rules: bool,
    /// Configuration file (default: ./mcplint.toml when it exists).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Treat all inputs as servers of one agent (enables cross-server rules
    /// across files).
    #[arg(long)]
    pub together: bool,
    /// Check servers on this many threads (default: one per core). The
    /// findings and their order do not depend on it.
    #[arg(long, short = 'j', value_name = "N")]
    pub jobs: Option<std::num::NonZeroUsize>,
}

/// Runs the command.
pub fn run(args: &Args, opts: &LoadOptions) -> Result<i32, LoadError> {
    let config = match &args.config {
        Some(p) => match Config::load(p) {
            Ok(c) => Some(c),
            Err(e) => {
                super::report_error(e);
                return Ok(super::EXIT_ERROR);
            }
        },
        None => {
            let p = PathBuf::from("mcplint.toml");
            if p.is_file() {
                match Config::load(&p) {
                    Ok(c) => Some(c),
                    Err(e) => {
                        super::report_error(e);
                        return Ok(super::EXIT_ERROR);
                    }
                }
            } else {
                None
            }
        }
    };
    let mut dirs = args.rules.clone();
    if let Some(c) = &config {
        dirs.extend(c.rules_dirs.iter().cloned());
    }
    let mut engine = match crate::rules::build_engine(&dirs, !args.no_builtin_rules) {
        Ok(e) => e,
        Err(e) => {
            super::report_error(e);
            return Ok(super::EXIT_ERROR);
        }
    };
    if let Some(c) = &config {
        let unknown = engine.configure(c.settings.clone());
        if let Some(id) = unknown.first() {
            super::report_error(c.unknown_rule(id));
            return Ok(super::EXIT_ERROR);
        }
    }
    let loaded = super::load_inputs(&args.paths, opts)?;
    engine.set_threads(args.jobs.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get()),
        |n| n.get(),
    ));
    let mut findings = engine.check(&loaded, args.together);
    let mut sources: HashMap<String, Arc<String>> = HashMap::new();
    for l in &loaded {
        sources.insert(l.display_path(), Arc::new(l.doc.text().to_string()));
    }
    let mut ignored = 0;
    if let Some(c) = &config {
        ignored = c.apply(&engine, &mut findings);
        if let Some(p) = &c.path {
            sources.insert(p.display().to_string(), Arc::new(c.text().to_string()));
        }
    }
    let stats = Stats {
        files: loaded.len(),
        servers: loaded.iter().map(|l| l.servers.len()).sum(),
        tools: loaded
            .iter()
            .flat_map(|l| &l.servers)
            .map(|s| s.tools.len())
            .sum(),
        ignored,
    };
    let report = Report {
        lines: Default::default(),
        findings: &findings,
        sources: &sources,
        engine: &engine,
        stats,
    };
    let text = match args.format {
        CheckFormat::Human => {
            let width = std::env::var("COLUMNS")
                .ok()
                .and_then(|c| c.parse().ok())
                .unwrap_or(100);
            crate::report::human::render(&report, super::stdout_color(), width)
        }
        CheckFormat::Json => crate::report::json::render(&report),
        CheckFormat::Sarif => crate::report::sarif::render(&report),
        CheckFormat::Github => crate::report::github::render(&report),
        CheckFormat::Markdown => crate::report::markdown::render(&report),
    };
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
    let fail = findings.iter().any(|f| f.severity >= args.fail_on);
    Ok(if fail {
        super::EXIT_FINDINGS
    } else {
        super::EXIT_OK
    })
}
