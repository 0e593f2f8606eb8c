//! `mcplint inspect PATH...`: what was loaded.

use std::path::PathBuf;

use serde_json::{json, Value};

use super::Format;
use crate::display::{visible, visible_short};
use crate::fingerprint::{context_digest, server_fingerprint, Scheme};
use crate::manifest::json::{Document, Kind};
use crate::manifest::load::{LoadError, LoadOptions};
use crate::manifest::{Loaded, Server};

/// Arguments of `mcplint inspect`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  mcplint inspect tools.json
  mcplint inspect ~/.cursor/mcp.json .vscode/mcp.json
  mcplint inspect --format json 'captures/*.json'")]
pub struct Args {
    /// Files, directories or globs.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// Runs the command.
pub fn run(args: &Args, opts: &LoadOptions) -> Result<i32, LoadError> {
    let loaded = super::load_inputs(&args.paths, opts)?;
    match args.format {
        Format::Json => {
            let v = json!({
                "version": 1,
                "inputs": loaded.iter().map(input_json).collect::<Vec<_>>(),
            });
            println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        }
        Format::Human => {
            for l in &loaded {
                print_human(l);
            }
        }
    }
    Ok(super::EXIT_OK)
}

fn schema_type(doc: &Document, schema: u32) -> String {
    match doc.get(schema, "type") {
        Some(t) if doc.kind(t) == Kind::String => doc.str(t).unwrap_or_default().into_owned(),
        Some(t) if doc.kind(t) == Kind::Array => doc
            .array(t)
            .unwrap_or_default()
            .iter()
            .filter_map(|&n| doc.str(n).map(|s| s.into_owned()))
            .collect::<Vec<_>>()
            .join("|"),
        _ => {
            if doc.get(schema, "anyOf").is_some() || doc.get(schema, "oneOf").is_some() {
                "union".into()
            } else {
                "any".into()
            }
        }
    }
}

fn print_human(l: &Loaded) {
    let doc = &l.doc;
    println!(
        "{} ({}): {} server(s)",
        visible(&l.display_path()),
        l.kind.name(),
        l.servers.len()
    );
    for s in &l.servers {
        let mut facts = vec![
            format!("{} tools", s.tools.len()),
            format!("{} parameters", s.param_count(doc)),
            format!("{} prompts", s.prompts.len()),
            format!("{} resources", s.resources.len()),
            format!("{} templates", s.resource_templates.len()),
        ];
        if let Some(v) = s.protocol_version.and_then(|v| doc.str(v)) {
            facts.push(format!("protocol {}", visible(&v)));
        }
        if s.instructions.is_some() {
            facts.push("has instructions".into());
        }
        println!("  server {}: {}", visible(&s.name), facts.join(", "));
        if let Some(launch) = &s.launch {
            println!(
                "    launch ({}): {}",
                visible(&launch.client),
                visible(&launch_summary(launch))
            );
        }
        if s.completeness == crate::manifest::Completeness::Partial {
            println!("    (static tool list: the running server may list more, with schemas)");
        }
        if !s.tools.is_empty() {
            println!(
                "    fingerprint {} (ts)  {} (python)  context {}",
                server_fingerprint(doc, s, Scheme::Ts),
                server_fingerprint(doc, s, Scheme::Python),
                context_digest(doc, s, Scheme::Ts)
            );
        }
        for t in &s.tools {
            let params: Vec<String> = t
                .params(doc)
                .iter()
                .map(|p| {
                    let name = visible_short(&doc.str(p.key).unwrap_or_default(), 40);
                    let ty = schema_type(doc, p.schema);
                    format!("{name}{}: {ty}", if p.required { "*" } else { "" })
                })
                .collect();
            let (line, _) = doc.line_col(doc.span(t.node).start);
            println!(
                "    tool {} (line {line}) ({})",
                visible_short(&t.name, 80),
                params.join(", ")
            );
        }
        for p in &s.prompts {
            println!("    prompt {}", visible_short(&p.name, 80));
        }
        for r in &s.resources {
            println!("    resource {}", visible_short(&r.name, 80));
        }
        for r in &s.resource_templates {
            println!("    template {}", visible_short(&r.name, 80));
        }
    }
}

fn launch_summary(l: &crate::manifest::Launch) -> String {
    use crate::manifest::Transport;
    let mut s = match &l.transport {
        Transport::Stdio { command, args, .. } => {
            let mut v = vec![command.value.clone()];
            v.extend(args.iter().map(|a| a.value.clone()));
            v.join(" ")
        }
        Transport::Http { url, .. } => format!("http {}", url.value),
        Transport::Sse { url, .. } => format!("sse {}", url.value),
    };
    if let Some(p) = &l.package {
        s.push_str(&format!(
            " [{}:{}{}]",
            p.registry,
            p.identifier.value,
            p.version
                .as_ref()
                .map(|v| format!("@{}", v.value))
                .unwrap_or_default()
        ));
    }
    if l.disabled {
        s.push_str(" (disabled)");
    }
    s
}

fn server_json(l: &Loaded, s: &Server) -> Value {
    let doc = &l.doc;
    let tools: Vec<Value> = s
        .tools
        .iter()
        .map(|t| {
            let (line, column) = doc.line_col(doc.span(t.node).start);
            json!({
                "name": t.name,
                "pointer": doc.pointer(t.node),
                "line": line,
                "column": column,
                "params": t.params(doc).iter().map(|p| json!({
                    "name": doc.str(p.key).unwrap_or_default(),
                    "type": schema_type(doc, p.schema),
                    "required": p.required,
                    "pointer": doc.pointer(p.schema),
                })).collect::<Vec<_>>(),
                "unknownFields": t.unknown.iter().map(|&(k, _)| doc.str(k).unwrap_or_default().into_owned()).collect::<Vec<_>>(),
            })
        })
        .collect();
    let fingerprints =
        if s.tools.is_empty() && s.completeness == crate::manifest::Completeness::LaunchOnly {
            Value::Null
        } else {
            json!({
                "ts": server_fingerprint(doc, s, Scheme::Ts).full(),
                "python": server_fingerprint(doc, s, Scheme::Python).full(),
                "context": context_digest(doc, s, Scheme::Ts).full(),
            })
        };
    json!({
        "name": s.name,
        "completeness": s.completeness,
        "protocolVersion": s.protocol_version.and_then(|v| doc.str(v)).map(|v| v.into_owned()),
        "serverInfo": s.server_info.map(|i| doc.to_value(i)),
        "hasInstructions": s.instructions.is_some(),
        "counts": {
            "tools": s.tools.len(),
            "parameters": s.param_count(doc),
            "prompts": s.prompts.len(),
            "resources": s.resources.len(),
            "resourceTemplates": s.resource_templates.len(),
        },
        "fingerprints": fingerprints,
        "tools": tools,
        "prompts": s.prompts.iter().map(|p| p.name.clone()).collect::<Vec<_>>(),
        "resources": s.resources.iter().map(|r| r.name.clone()).collect::<Vec<_>>(),
        "resourceTemplates": s.resource_templates.iter().map(|r| r.name.clone()).collect::<Vec<_>>(),
        "launch": s.launch.as_ref().map(|l| serde_json::to_value(l).unwrap_or(Value::Null)),
    })
}

fn input_json(l: &Loaded) -> Value {
    json!({
        "path": l.display_path(),
        "kind": l.kind.name(),
        "duplicateKeys": l.doc.duplicates().iter().map(|d| {
            let (line, column) = l.doc.line_col(l.doc.span(d.second).start);
            json!({"key": l.doc.str(d.second).unwrap_or_default(), "pointer": l.doc.pointer(d.second), "line": line, "column": column})
        }).collect::<Vec<_>>(),
        "servers": l.servers.iter().map(|s| server_json(l, s)).collect::<Vec<_>>(),
    })
}
