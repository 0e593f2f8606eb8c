//! The official registry's `server.json` (in progress).

use super::{Ctx, LoadError};
use crate::manifest::Server;

/// Loads a `server.json`.
pub fn load(ctx: &Ctx<'_>) -> Result<Vec<Server>, LoadError> {
    Err(LoadError::UnknownFormat {
        path: ctx.path.display().to_string(),
        message: "server.json is not supported yet".into(),
    })
}
