//! Client configs (in progress).

use std::path::Path;

use super::{Ctx, LoadError, LoadOptions};
use crate::manifest::{Loaded, Server};

/// Loads an `mcpServers` config.
pub fn load_mcp_servers(ctx: &Ctx<'_>) -> Result<Vec<Server>, LoadError> {
    Err(LoadError::UnknownFormat {
        path: ctx.path.display().to_string(),
        message: "client configs are not supported yet".into(),
    })
}

/// Loads a VS Code `mcp.json`.
pub fn load_vscode(ctx: &Ctx<'_>) -> Result<Vec<Server>, LoadError> {
    load_mcp_servers(ctx)
}

/// Loads a Codex `config.toml`.
pub fn load_codex(path: &Path, _bytes: Vec<u8>, _opts: &LoadOptions) -> Result<Loaded, LoadError> {
    Err(LoadError::UnknownFormat {
        path: path.display().to_string(),
        message: "Codex configs are not supported yet".into(),
    })
}
