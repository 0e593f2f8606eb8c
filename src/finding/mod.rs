//! Findings and changes: the one currency every check produces and every
//! renderer consumes.

pub mod change;

use std::fmt;

/// How bad a finding or change is.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing; not a problem by itself.
    Info,
    /// A weak signal.
    Low,
    /// Needs a reviewer's attention.
    Medium,
    /// Refuse until a person has looked.
    High,
}

impl Severity {
    /// The lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How sure a rule is that a match is what it claims.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    /// Often wrong.
    Low,
    /// Usually right.
    Medium,
    /// Almost always right.
    High,
}
