//! `mcplint fingerprint FILE...`: the article's fingerprint, one line per file.

use std::path::PathBuf;

use crate::display::visible;
use crate::fingerprint::{context_digest, server_fingerprint, Scheme};
use crate::manifest::load::{LoadError, LoadOptions};

/// Arguments of `mcplint fingerprint`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Prints `<16 hex>  <path>` per file, as the article's programs do. The two
schemes agree only on ASCII text and integers; see the README.

Examples:
  mcplint fingerprint tools.json
  mcplint fingerprint --scheme python --full tools.json
  mcplint fingerprint --check \"$WEATHER_MCP_FINGERPRINT\" tools.json
  mcplint fingerprint --context capture.json")]
pub struct Args {
    /// Files, directories or globs holding tool lists.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Which of the article's programs to reproduce.
    #[arg(long, value_enum, default_value_t = Scheme::Ts)]
    pub scheme: Scheme,
    /// Print all 64 hex digits instead of the article's 16.
    #[arg(long)]
    pub full: bool,
    /// Print mcplint's second digest, over prompts, resources, resource
    /// templates and instructions, instead of the tool fingerprint.
    #[arg(long)]
    pub context: bool,
    /// Check each file against this fingerprint (16 to 64 hex digits, either
    /// scheme); exit 1 if any differs.
    #[arg(long, value_name = "HEX", conflicts_with = "context")]
    pub check: Option<String>,
}

/// Runs the command.
pub fn run(args: &Args, opts: &LoadOptions) -> Result<i32, LoadError> {
    if let Some(hex) = &args.check {
        let ok = hex.len() >= 16 && hex.len() <= 64 && hex.chars().all(|c| c.is_ascii_hexdigit());
        if !ok {
            eprintln!(
                "mcplint: --check needs 16 to 64 hex digits, got {:?}",
                visible(hex)
            );
            return Ok(super::EXIT_ERROR);
        }
    }
    let loaded = super::load_inputs(&args.files, opts)?;
    let mut code = super::EXIT_OK;
    for l in &loaded {
        let path = visible(&l.display_path());
        let servers: Vec<_> = l
            .servers
            .iter()
            .filter(|s| s.completeness != crate::manifest::Completeness::LaunchOnly)
            .collect();
        if servers.is_empty() {
            eprintln!(
                "mcplint: {path}: a {} lists servers, not tools: nothing to fingerprint",
                l.kind.name()
            );
            code = super::EXIT_ERROR;
            continue;
        }
        for s in servers {
            let label = if l.servers.len() > 1 {
                format!("{path}#{}", visible(&s.name))
            } else {
                path.clone()
            };
            if let Some(hex) = &args.check {
                let nodes: Vec<_> = s.tools.iter().map(|t| t.node).collect();
                match crate::fingerprint::matches(&l.doc, &nodes, hex) {
                    Some(scheme) => println!("ok ({scheme} scheme)  {label}"),
                    None => {
                        let ts = server_fingerprint(&l.doc, s, Scheme::Ts);
                        let py = server_fingerprint(&l.doc, s, Scheme::Python);
                        println!("CHANGED (now ts {ts}, python {py})  {label}");
                        code = code.max(super::EXIT_FINDINGS);
                    }
                }
                continue;
            }
            let fp = if args.context {
                context_digest(&l.doc, s, args.scheme)
            } else {
                server_fingerprint(&l.doc, s, args.scheme)
            };
            let hex = if args.full { fp.full() } else { fp.short() };
            println!("{hex}  {label}");
        }
    }
    Ok(code)
}
