//! Approvals: what a person reviewed, kept as files in the repository, and
//! the diff that says exactly what changed since.
//!
//! - [`diff`] compares two versions of a server parameter by parameter;
//! - [`store`] reads and writes one approval file per server;
//! - [`source`] turns a `[servers.NAME]` entry into its current manifest (the
//!   one place where the runner plugs in);
//! - [`check`] compares every server of `mcplint.toml` with its approval and
//!   reports unapproved servers, moved pins and stale approvals;
//! - [`rules_hook`] runs the rules engine on the new text of changes.

pub mod check;
pub mod diff;
pub mod rules_hook;
pub mod source;
pub mod store;
