//! mcplint decides whether a third-party MCP server may be trusted, and proves
//! it again every time the server changes.
//!
//! Data flows one way: inputs are loaded into the [`manifest`] model (with exact
//! byte spans), [`fingerprint`] hashes them as the article does, checks produce
//! [`finding`]s, and the CLI ([`cli`]) renders them. Nothing below imports what
//! is above it.

// Every public item says what it is for (`cargo clippy -- -D warnings`
// turns a missing one into an error).
#![warn(missing_docs)]

pub mod approval;
pub mod cli;
pub mod config;
pub mod display;
pub mod finding;
pub mod fingerprint;
pub mod manifest;
pub mod report;
pub mod rules;
pub mod runner;
pub mod timefmt;
