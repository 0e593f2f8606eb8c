//! Approvals: what a person reviewed, kept as files in the repository, and
//! the diff that says exactly what changed since.
//!
//! [`diff`] compares two versions of a server parameter by parameter;
//! [`store`] reads and writes one approval file per server.

pub mod check;
pub mod diff;
pub mod rules_hook;
pub mod source;
pub mod store;
