//! The command line: argument parsing, dispatch, exit codes.
//!
//! Exit codes: 0 ok; 1 findings or changes at or above the threshold; 2 bad
//! input or usage. Every command lives in its own file here.

mod approve;
pub mod check;
mod diff;
mod fetch;
mod fingerprint;
mod inspect;
pub mod rules;
mod runner;
mod verify;

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::{CommandFactory, Parser, Subcommand};

use crate::manifest::json::{ParseOptions, DEFAULT_MAX_DEPTH, DEFAULT_MAX_SIZE};
use crate::manifest::load::{LoadError, LoadOptions};
use crate::manifest::InputKind;

/// Exit code: success, nothing to report.
pub const EXIT_OK: i32 = 0;
/// Exit code: findings or changes at or above the threshold.
pub const EXIT_FINDINGS: i32 = 1;
/// Exit code: bad input or usage.
pub const EXIT_ERROR: i32 = 2;

const AFTER_HELP: &str = "\
Examples:
  mcplint check tools.json ~/.cursor/mcp.json          lint manifests and configs
  mcplint check --format sarif captures/ > mcplint.sarif
  mcplint fetch npm:@modelcontextprotocol/server-memory@2026.8.31 -o memory.json
  mcplint diff approved.json current.json               what changed, parameter by parameter
  mcplint approve --reason \"reviewed tool text\"         record approvals for mcplint.toml servers
  mcplint verify                                        start-time gate: quiet when nothing changed
  mcplint fingerprint --check \"$WEATHER_MCP_FINGERPRINT\" tools.json
  mcplint explain model-directive-tag

Exit codes: 0 ok, 1 findings or changes, 2 bad input or usage.";

/// mcplint: decide whether a third-party MCP server may be trusted, and prove
/// it again every time the server changes.
#[derive(Debug, Parser)]
#[command(name = "mcplint", version, about, after_help = AFTER_HELP)]
pub struct Cli {
    /// How inputs are read (format, size and depth limits): global options.
    #[command(flatten)]
    pub input: InputArgs,
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// Options for reading inputs, shared by every command.
#[derive(Debug, clap::Args)]
pub struct InputArgs {
    /// Treat every input as this kind instead of recognising it from content.
    #[arg(long, global = true, value_name = "KIND")]
    pub input_format: Option<InputKind>,
    /// Refuse input files larger than this many bytes.
    #[arg(long, global = true, value_name = "BYTES", default_value_t = DEFAULT_MAX_SIZE)]
    pub max_size: usize,
    /// Refuse JSON nested deeper than this.
    #[arg(long, global = true, value_name = "N", default_value_t = DEFAULT_MAX_DEPTH)]
    pub max_depth: usize,
}

impl InputArgs {
    /// The loader options these arguments select.
    pub fn load_options(&self) -> LoadOptions {
        LoadOptions {
            parse: ParseOptions {
                max_depth: self.max_depth,
                max_size: self.max_size,
                jsonc: false,
                ..ParseOptions::default()
            },
            format: self.input_format,
        }
    }
}

/// Output format for commands that report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// For people at a terminal.
    Human,
    /// Versioned JSON for programs.
    Json,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show what was loaded: servers, tools, parameters, counts.
    Inspect(inspect::Args),
    /// Print the article's fingerprint of each file's tool list.
    Fingerprint(fingerprint::Args),
    /// Record a review of servers in mcplint.toml as approvals.
    Approve(approve::Args),
    /// Show what changed between two manifests, or since the approvals.
    Diff(diff::Args),
    /// Check current manifests against the approvals (quiet when all match).
    Verify(verify::Args),
    /// Run the rules over manifests and report findings.
    Check(check::Args),
    /// List the rules, or run rule files' own tests (`rules test`).
    Rules(rules::Args),
    /// Print a rule's documentation.
    Explain(rules::ExplainArgs),
    /// Start a server in a throwaway microVM and capture what it offers.
    Fetch(Box<fetch::Args>),
    /// Build or inspect the microVM guest image.
    Runner(runner::Args),
    /// Print a shell completion script.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// Runs mcplint with the process's arguments and returns the exit code.
pub fn main() -> i32 {
    install_miette_hook();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { EXIT_ERROR } else { EXIT_OK };
        }
    };
    run(cli)
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> i32 {
    let opts = cli.input.load_options();
    let result = match cli.command {
        Command::Inspect(args) => inspect::run(&args, &opts),
        Command::Fingerprint(args) => fingerprint::run(&args, &opts),
        Command::Approve(args) => Ok(approve::run(&args, &opts)),
        Command::Diff(args) => Ok(diff::run(&args, &opts)),
        Command::Verify(args) => Ok(verify::run(&args, &opts)),
        Command::Check(args) => check::run(&args, &opts),
        Command::Rules(args) => rules::run(&args, &opts),
        Command::Explain(args) => rules::explain(&args, &opts),
        Command::Fetch(args) => {
            return match fetch::run(&args) {
                Ok(code) => code,
                Err(e) => {
                    eprintln!("mcplint: fetch failed: {e}");
                    EXIT_ERROR
                }
            }
        }
        Command::Runner(args) => {
            return match runner::run(&args) {
                Ok(code) => code,
                Err(e) => {
                    eprintln!("mcplint: {e}");
                    EXIT_ERROR
                }
            }
        }
        Command::Completions { shell } => {
            let mut cmd = Cli::command();
            clap_complete::generate(shell, &mut cmd, "mcplint", &mut std::io::stdout());
            Ok(EXIT_OK)
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            report_error(e);
            EXIT_ERROR
        }
    }
}

/// Prints an error as a miette diagnostic on stderr.
pub fn report_error(e: impl Into<miette::Report>) {
    let report: miette::Report = e.into();
    eprintln!("{report:?}");
}

fn install_miette_hook() {
    let color = std::io::stderr().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let _ = miette::set_hook(Box::new(move |_| {
        Box::new(
            miette::MietteHandlerOpts::new()
                .color(color)
                .unicode(true)
                .terminal_links(false)
                .build(),
        )
    }));
}

/// True when stdout should get colour: a terminal and no `NO_COLOR`.
pub fn stdout_color() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Loads every input path, for commands that take `PATH...`.
pub fn load_inputs(
    paths: &[PathBuf],
    opts: &LoadOptions,
) -> Result<Vec<crate::manifest::Loaded>, LoadError> {
    let args: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    crate::manifest::load::load_all(&args, opts)
}
