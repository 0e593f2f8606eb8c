//! `mcplint rules` (list rules), `mcplint rules test [DIR]` (run rule files'
//! own test cases) and `mcplint explain ID` (print a rule's docs).

use std::path::PathBuf;

use crate::display::visible;
use crate::manifest::load::{LoadError, LoadOptions};
use crate::rules::{build_engine, PatternSet, RuleMeta};

/// Output formats of `rules`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RulesFormat {
    /// One line per rule.
    Human,
    /// JSON array.
    Json,
    /// Markdown reference.
    Markdown,
}

/// Arguments of `mcplint rules`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  mcplint rules
  mcplint rules --format markdown > RULES.md
  mcplint rules test                 # the built-in rule files' own tests
  mcplint rules test my-rules/       # a directory of your rule files")]
pub struct Args {
    /// Output format.
    #[arg(long, value_enum, default_value_t = RulesFormat::Human)]
    pub format: RulesFormat,
    /// Also load rule files from this directory.
    #[arg(long = "rules", value_name = "DIR")]
    pub rules: Vec<PathBuf>,
    /// What to do instead of listing the rules.
    #[command(subcommand)]
    pub action: Option<Action>,
}

/// Sub-actions of `rules`.
#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// Run the `[tests]` of rule files: built-in ones, or those of DIR.
    Test {
        /// A directory of rule files (default: the built-in rules).
        dir: Option<PathBuf>,
    },
}

/// Arguments of `mcplint explain`.
#[derive(Debug, clap::Args)]
pub struct ExplainArgs {
    /// The rule id.
    pub id: String,
    /// Also load rule files from this directory.
    #[arg(long = "rules", value_name = "DIR")]
    pub rules: Vec<PathBuf>,
}

/// Runs `mcplint rules`.
pub fn run(args: &Args, _opts: &LoadOptions) -> Result<i32, LoadError> {
    if let Some(Action::Test { dir }) = &args.action {
        return Ok(test(dir.as_ref()));
    }
    let engine = match build_engine(&args.rules, true) {
        Ok(e) => e,
        Err(e) => {
            super::report_error(e);
            return Ok(super::EXIT_ERROR);
        }
    };
    let metas = engine.metas();
    let text = match args.format {
        RulesFormat::Human => {
            let w = metas.iter().map(|m| m.id.len()).max().unwrap_or(0);
            let mut s = String::new();
            for m in &metas {
                s.push_str(&format!(
                    "{:<w$}  {:<6}  {}\n",
                    m.id,
                    m.severity.name(),
                    m.summary
                ));
            }
            s.push_str(&format!(
                "{} rules; `mcplint explain ID` prints one rule's docs\n",
                metas.len()
            ));
            s
        }
        RulesFormat::Json => {
            let v: Vec<serde_json::Value> = metas.iter().map(|m| meta_json(m)).collect();
            let mut s = serde_json::to_string_pretty(&v).unwrap_or_default();
            s.push('\n');
            s
        }
        RulesFormat::Markdown => {
            let mut s = String::from(
                "# mcplint rules\n\n| Rule | Severity | Kind | Summary |\n|---|---|---|---|\n",
            );
            for m in &metas {
                s.push_str(&format!(
                    "| [`{}`](#{}) | {} | {} | {} |\n",
                    m.id,
                    m.id,
                    m.severity,
                    kind(m),
                    m.summary
                ));
            }
            for m in &metas {
                s.push_str(&format!("\n## {}\n\n", m.id));
                s.push_str(&explain_text(m));
            }
            s
        }
    };
    print!("{text}");
    Ok(super::EXIT_OK)
}

fn kind(m: &RuleMeta) -> &'static str {
    if m.code {
        "code"
    } else {
        "declarative"
    }
}

fn meta_json(m: &RuleMeta) -> serde_json::Value {
    serde_json::json!({
        "id": m.id,
        "summary": m.summary,
        "severity": m.severity,
        "confidence": m.confidence,
        "tags": m.tags,
        "kind": kind(m),
        "help": m.help,
        "docs": m.docs,
        "origin": match &m.origin { crate::rules::engine::Origin::Builtin => "builtin".to_string(), crate::rules::engine::Origin::File(p) => p.display().to_string() },
    })
}

/// A rule's docs as text (also Markdown).
pub fn explain_text(m: &RuleMeta) -> String {
    format!(
        "{}\n\nSeverity: {} · confidence: {} · kind: {} · tags: {}\n\n### What it flags\n{}\n\n### Why it matters\n{}\n\n### Example\n```\n{}\n```\n\n### Remedy\n{}\n",
        m.summary,
        m.severity,
        m.confidence,
        kind(m),
        m.tags.join(", "),
        m.docs.what.trim(),
        m.docs.why.trim(),
        m.docs.example.trim(),
        m.docs.remedy.trim()
    )
}

/// Runs `mcplint explain ID`.
pub fn explain(args: &ExplainArgs, _opts: &LoadOptions) -> Result<i32, LoadError> {
    let engine = match build_engine(&args.rules, true) {
        Ok(e) => e,
        Err(e) => {
            super::report_error(e);
            return Ok(super::EXIT_ERROR);
        }
    };
    match engine.meta(&args.id) {
        Some(m) => {
            print!("# {}\n\n{}", m.id, explain_text(m));
            Ok(super::EXIT_OK)
        }
        None => {
            eprintln!(
                "mcplint: no rule `{}`; `mcplint rules` lists them",
                visible(&args.id)
            );
            Ok(super::EXIT_ERROR)
        }
    }
}

fn test(dir: Option<&PathBuf>) -> i32 {
    let sources = match dir {
        Some(d) => match PatternSet::dir_sources(d) {
            Ok(s) => s,
            Err(e) => {
                super::report_error(e);
                return super::EXIT_ERROR;
            }
        },
        None => PatternSet::builtin_sources(),
    };
    let set = match PatternSet::compile(sources) {
        Ok(s) => s,
        Err(e) => {
            super::report_error(e);
            return super::EXIT_ERROR;
        }
    };
    let fails = set.self_test();
    let cases: usize = set
        .rules()
        .iter()
        .map(|r| r.tests.matches.len() + r.tests.no_match.len())
        .sum();
    for f in &fails {
        let want = if f.expected_match {
            "should match"
        } else {
            "should not match"
        };
        println!(
            "FAIL {} ({}): {want}: {}",
            f.rule,
            visible(&f.file),
            visible(&f.text)
        );
    }
    println!(
        "{} rules, {} test cases, {} failed",
        set.rules().len(),
        cases,
        fails.len()
    );
    if fails.is_empty() {
        super::EXIT_OK
    } else {
        super::EXIT_FINDINGS
    }
}
