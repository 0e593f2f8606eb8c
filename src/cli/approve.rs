//! `mcplint approve [SERVER...] --reason "..."`: record what was reviewed.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;

use crate::approval::diff::Side;
use crate::approval::rules_hook::{diff_judged, LazyRules};
use crate::approval::source::current_manifest;
use crate::approval::store::{self, ApprovalMeta, Fingerprints};
use crate::config::Config;
use crate::display::visible;
use crate::manifest::load::LoadOptions;
use crate::report::diff::human;

/// Arguments of `mcplint approve`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Stores, for each server, the complete manifest in canonical form with both
fingerprints, the source pin, who approved it, when, and why, in one JSON
file per server under the approvals folder (default .mcplint/approvals/).
An existing approval is never replaced silently: the diff is shown and
--yes, or a confirmation at the terminal, is needed.

Examples:
  mcplint approve --reason \"reviewed all tool descriptions\"
  mcplint approve weather --reason \"bump to 1.3.0, new forecast_hours param\" --yes")]
pub struct Args {
    /// Servers to approve (all in mcplint.toml when none are named).
    #[arg(value_name = "SERVER")]
    pub servers: Vec<String>,
    /// Why this is approved (required; recorded in the approval).
    #[arg(long, value_name = "TEXT")]
    pub reason: String,
    /// Who approves (default: `git config user.name` and `user.email`).
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
    /// Replace existing approvals without asking.
    #[arg(long)]
    pub yes: bool,
    /// The project configuration.
    #[arg(long, value_name = "PATH", default_value = "mcplint.toml")]
    pub config: PathBuf,
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

/// Asks on the terminal; false unless the answer is y or yes.
fn confirm(question: &str) -> bool {
    eprint!("{question} [y/N] ");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() {
        return false;
    }
    matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

fn run_inner(args: &Args, opts: &LoadOptions) -> miette::Result<i32> {
    let reason = args.reason.trim();
    if reason.is_empty() {
        miette::bail!("--reason must say why this is approved");
    }
    let cfg = Config::load(&args.config)?;
    for name in &args.servers {
        if cfg.server(name).is_none() {
            let known: Vec<&str> = cfg.servers.iter().map(|s| s.name.as_str()).collect();
            miette::bail!(
                "no server `{}` in {} (it lists: {})",
                visible(name),
                cfg.path.display(),
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            );
        }
    }
    let by = match &args.by {
        Some(b) if !b.trim().is_empty() => b.trim().to_string(),
        _ => {
            let dir = cfg
                .path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(std::path::Path::new("."));
            store::git_identity(dir).ok_or_else(|| {
                miette::miette!("who approves? pass --by NAME or set git config user.name")
            })?
        }
    };
    let rules = LazyRules::new(Some(&cfg), true);
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    let mut code = super::EXIT_OK;
    for sc in cfg
        .servers
        .iter()
        .filter(|s| args.servers.is_empty() || args.servers.contains(&s.name))
    {
        let current = match current_manifest(sc, opts) {
            Ok(c) => c,
            Err(e) => {
                super::report_error(e);
                code = super::EXIT_ERROR;
                continue;
            }
        };
        let server = current.server();
        let fingerprints = Fingerprints::of(&current.loaded.doc, server);
        let path = store::approval_path(&cfg.approvals, &sc.name);
        if path.exists() {
            let name = visible(&sc.name);
            match store::load(&path, opts) {
                Ok(old) => {
                    let same_pin = old.meta.source.as_deref() == Some(sc.source_text.as_str());
                    if same_pin && old.meta.fingerprints == fingerprints {
                        println!(
                            "{name}: unchanged since approved by {} at {}; nothing to do",
                            visible(&old.meta.approved_by),
                            visible(&old.meta.approved_at)
                        );
                        continue;
                    }
                    let before_file = path.display().to_string();
                    let after_file = current.loaded.display_path();
                    let mut changes = diff_judged(
                        Side::of(&old.loaded, old.server(), &before_file),
                        Side::of(&current.loaded, server, &after_file),
                        &current.loaded,
                        &rules,
                    )
                    .map_err(|e| miette::miette!("{e}"))?;
                    for c in &mut changes {
                        c.server = sc.name.clone();
                    }
                    println!(
                        "{name}: the approval of {} by {} would be replaced",
                        visible(&old.meta.approved_at),
                        visible(&old.meta.approved_by)
                    );
                    if !same_pin {
                        println!(
                            "  source pin: {} → {}",
                            visible(old.meta.source.as_deref().unwrap_or("(none)")),
                            visible(&sc.source_text)
                        );
                    }
                    print!("{}", human(&changes, super::stdout_color()));
                }
                Err(e) => {
                    println!("{name}: the existing approval cannot be read and would be replaced:");
                    super::report_error(e);
                }
            }
            if !args.yes {
                if !interactive {
                    eprintln!(
                        "mcplint: refusing to replace the approval of {name} without --yes (or a confirmation at a terminal)"
                    );
                    code = super::EXIT_ERROR;
                    continue;
                }
                if !confirm(&format!("Replace the approval of {name}?")) {
                    println!("{name}: approval kept");
                    code = code.max(super::EXIT_FINDINGS);
                    continue;
                }
            }
        }
        let meta = ApprovalMeta {
            server: sc.name.clone(),
            source: Some(sc.source_text.clone()),
            integrity: current.integrity.clone(),
            package: current.package.clone(),
            approved_at: store::now_rfc3339(),
            approved_by: by.clone(),
            reason: reason.to_string(),
            fingerprints,
        };
        if let Err(e) = store::write(&path, &current.loaded.doc, server, &meta) {
            super::report_error(e);
            code = super::EXIT_ERROR;
            continue;
        }
        println!(
            "approved {} ({} tool{}; fingerprint {} ts / {} python) → {}",
            visible(&sc.name),
            server.tools.len(),
            if server.tools.len() == 1 { "" } else { "s" },
            &meta.fingerprints.ts[..16],
            &meta.fingerprints.python[..16],
            visible(&path.display().to_string())
        );
    }
    Ok(code)
}
