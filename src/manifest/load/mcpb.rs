//! MCPB bundles: `manifest.json` and `.mcpb` zip files (in progress).

use std::path::Path;

use super::{Ctx, LoadError, LoadOptions};
use crate::manifest::{Loaded, Server};

/// Loads an MCPB `manifest.json`.
pub fn load_manifest(ctx: &Ctx<'_>) -> Result<Vec<Server>, LoadError> {
    Err(LoadError::UnknownFormat {
        path: ctx.path.display().to_string(),
        message: "MCPB manifests are not supported yet".into(),
    })
}

/// Loads a `.mcpb` bundle.
pub fn load_bundle(path: &Path, _bytes: &[u8], _opts: &LoadOptions) -> Result<Loaded, LoadError> {
    Err(LoadError::UnknownFormat {
        path: path.display().to_string(),
        message: "MCPB bundles are not supported yet".into(),
    })
}
