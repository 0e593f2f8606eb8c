//! Reports: rendering findings and changes.

pub mod diff;
