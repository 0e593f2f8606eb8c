//! `mcplint diff [APPROVED CURRENT]`: what changed, parameter by parameter.

use std::path::{Path, PathBuf};

use crate::approval::check::{check_config, Mode};
use crate::approval::diff::{diff_loaded, DiffOptions};
use crate::approval::rules_hook::{LazyRules, Rules};
use crate::approval::store;
use crate::config::Config;
use crate::finding::Severity;
use crate::manifest::load::{load_file, LoadOptions};
use crate::manifest::Loaded;
use crate::report::diff::{render, DiffFormat};

/// Arguments of `mcplint diff`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
With two files, compares them (any input kinds; an approval file is one).
Without, compares every server in mcplint.toml with its approval and
reports servers without approvals, moved pins and stale approvals.

Exit codes: 0 nothing changed (at or above --fail-on), 1 something changed,
2 bad input.

Examples:
  mcplint diff .mcplint/approvals/weather.json captures/weather.json
  mcplint diff --format markdown > comment.md
  mcplint diff --format sarif > mcplint.sarif")]
pub struct Args {
    /// The approved (old) manifest.
    #[arg(value_name = "APPROVED", requires = "current")]
    pub approved: Option<PathBuf>,
    /// The current (new) manifest.
    #[arg(value_name = "CURRENT")]
    pub current: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = DiffFormat::Human)]
    pub format: DiffFormat,
    /// The project configuration (servers, approvals, `[rules]` settings).
    #[arg(long, value_name = "PATH", default_value = "mcplint.toml")]
    pub config: PathBuf,
    /// Do not run the rules on new text.
    #[arg(long)]
    pub no_rules: bool,
    /// Exit 1 only for changes at or above this severity (all are printed).
    #[arg(long, value_enum, default_value_t = Severity::Info, value_name = "SEVERITY")]
    pub fail_on: Severity,
}

/// Loads a manifest; an approval file is checked against its fingerprints.
pub fn load_manifest(path: &Path, opts: &LoadOptions) -> miette::Result<Loaded> {
    let loaded = load_file(path, opts)?;
    let root = loaded.doc.root();
    if loaded.doc.kind(root) == crate::manifest::Kind::Object
        && loaded.doc.get(root, "mcplint_approval").is_some()
    {
        return Ok(store::load(path, opts)?.loaded);
    }
    Ok(loaded)
}

/// Runs the command; errors are printed and give exit code 2.
pub fn run(args: &Args, opts: &LoadOptions) -> i32 {
    match run_inner(args, opts) {
        Ok(code) => code,
        Err(e) => {
            super::report_error(e);
            super::EXIT_ERROR
        }
    }
}

fn run_inner(args: &Args, opts: &LoadOptions) -> miette::Result<i32> {
    let color = args.format == DiffFormat::Human && super::stdout_color();
    if let (Some(a), Some(c)) = (&args.approved, &args.current) {
        let before = load_manifest(a, opts)?;
        let after = load_manifest(c, opts)?;
        // The project's [rules] settings apply when there is a project.
        let cfg = if args.config.is_file() {
            Some(Config::load(&args.config)?)
        } else {
            None
        };
        let mut changes = diff_loaded(&before, &after, DiffOptions::default())
            .map_err(|e| miette::miette!("{e}"))?;
        // Only when something changed are the rules built and run on the new text.
        if !changes.is_empty() && !args.no_rules {
            let index = Rules::new(cfg.as_ref())?.index(&after);
            let hook = |doc: &crate::manifest::json::Document,
                        node: crate::manifest::json::NodeId| {
                index.rules_in(doc, node)
            };
            changes = diff_loaded(&before, &after, DiffOptions { rules: Some(&hook) })
                .map_err(|e| miette::miette!("{e}"))?;
        }
        print!("{}", render(&changes, args.format, color));
        return Ok(if changes.iter().any(|c| c.severity >= args.fail_on) {
            super::EXIT_FINDINGS
        } else {
            super::EXIT_OK
        });
    }
    let cfg = Config::load(&args.config)?;
    let rules = LazyRules::new(Some(&cfg), !args.no_rules);
    let outcome = check_config(&cfg, opts, Mode::Diff, &rules);
    print!("{}", render(&outcome.changes, args.format, color));
    for name in &outcome.reordered {
        eprintln!(
            "mcplint: {}: the fingerprint differs but nothing changed in meaning (the order inside a list changed)",
            crate::display::visible(name)
        );
    }
    for e in outcome.errors.iter() {
        eprintln!("{e:?}");
    }
    let code = outcome.exit_code();
    if code == super::EXIT_FINDINGS
        && outcome.reordered.is_empty()
        && !outcome.changes.iter().any(|c| c.severity >= args.fail_on)
    {
        return Ok(super::EXIT_OK);
    }
    Ok(code)
}
