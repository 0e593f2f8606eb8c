//! `mcplint verify`: the start-time gate. Quiet when everything matches.

use std::path::PathBuf;

use crate::approval::check::{check_config, Mode};
use crate::approval::rules_hook::LazyRules;
use crate::config::Config;
use crate::display::visible;
use crate::fingerprint::{matches, server_fingerprint, Scheme};
use crate::manifest::load::LoadOptions;
use crate::manifest::Completeness;
use crate::report::diff::{render, DiffFormat};

/// Arguments of `mcplint verify`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Compares every server in mcplint.toml with its approval by fingerprint;
prints the diff and exits 1 on any difference, prints nothing and exits 0
when everything matches. With --fingerprint, checks one manifest against a
fingerprint of either scheme (16 to 64 hex digits), as the article does at
start-up.

Examples:
  mcplint verify
  mcplint verify --fingerprint \"$WEATHER_MCP_FINGERPRINT\" tools.json")]
pub struct Args {
    /// Check FILE against this fingerprint instead of the approvals.
    #[arg(long, value_name = "HEX", requires = "file")]
    pub fingerprint: Option<String>,
    /// The manifest to check with --fingerprint.
    #[arg(value_name = "FILE", requires = "fingerprint")]
    pub file: Option<PathBuf>,
    /// Output format for the diff on mismatch.
    #[arg(long, value_enum, default_value_t = DiffFormat::Human)]
    pub format: DiffFormat,
    /// The project configuration.
    #[arg(long, value_name = "PATH", default_value = "mcplint.toml")]
    pub config: PathBuf,
    /// Do not run the rules on the new text of a changed server.
    #[arg(long)]
    pub no_rules: bool,
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
    if let (Some(hex), Some(file)) = (&args.fingerprint, &args.file) {
        let hex = hex.trim();
        if hex.len() < 16 || hex.len() > 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            miette::bail!(
                "--fingerprint needs 16 to 64 hex digits, got {:?}",
                visible(hex)
            );
        }
        let loaded = super::diff::load_manifest(file, opts)?;
        let servers: Vec<_> = loaded
            .servers
            .iter()
            .filter(|s| s.completeness != Completeness::LaunchOnly)
            .collect();
        let [server] = servers.as_slice() else {
            miette::bail!(
                "{}: --fingerprint checks one server's tools; this file holds {}",
                visible(&loaded.display_path()),
                servers.len()
            );
        };
        let nodes: Vec<_> = server.tools.iter().map(|t| t.node).collect();
        if matches(&loaded.doc, &nodes, hex).is_some() {
            return Ok(super::EXIT_OK);
        }
        println!(
            "{}: fingerprint mismatch: expected {}, now {} (ts scheme) / {} (python scheme)",
            visible(&loaded.display_path()),
            hex.to_ascii_lowercase(),
            server_fingerprint(&loaded.doc, server, Scheme::Ts).short(),
            server_fingerprint(&loaded.doc, server, Scheme::Python).short(),
        );
        return Ok(super::EXIT_FINDINGS);
    }
    let cfg = Config::load(&args.config)?;
    let rules = LazyRules::new(Some(&cfg), !args.no_rules);
    let outcome = check_config(&cfg, opts, Mode::Verify, &rules);
    if !outcome.changes.is_empty() {
        let color = args.format == DiffFormat::Human && super::stdout_color();
        print!("{}", render(&outcome.changes, args.format, color));
    }
    for name in &outcome.reordered {
        println!(
            "{}: the fingerprint differs from the approval but nothing changed in meaning (the order inside a list changed); approve again",
            visible(name)
        );
    }
    for e in outcome.errors.iter() {
        eprintln!("{e:?}");
    }
    Ok(outcome.exit_code())
}
