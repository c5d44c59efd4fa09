//! Configuration: every parameter is declared once (key, kind, unit, default, description), so
//! `ipisim describe`, validation and the docs all come from the same table. A run is
//! `machine profile + kernel preset + scenario + --set overrides`, resolved here into typed structs.
//! The declarations live in the layers above, so config names none of them: the root gathers them
//! into a [`Schema`] for [`resolve`] (`crate::resolve`), and `ipisim describe` is the root's too.

mod builtin;
mod param;
mod resolve;
mod typed;

pub use builtin::{builtin_kernel, builtin_machine, kernel_names, machine_names};
pub use param::{format_size, parse_size, Kind, Param, Value, MAX_CYCLES, MAX_DURATION, MAX_SIZE};
pub use resolve::{resolve, CostEntry, Resolved, RunRequest, Schema};
pub use typed::FromValue;
pub(crate) use typed::{named_enum, params};

use std::fmt;

/// A user mistake: which file (or `--set`), which key, and why. Printed as one line.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    pub file: String,
    pub key: String,
    pub reason: String,
}

impl ConfigError {
    pub fn new(file: impl Into<String>, key: impl Into<String>, reason: impl Into<String>) -> Self {
        ConfigError {
            file: file.into(),
            key: key.into(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.file.is_empty(), self.key.is_empty()) {
            (false, false) => write!(f, "{}: {}: {}", self.file, self.key, self.reason),
            (false, true) => write!(f, "{}: {}", self.file, self.reason),
            (true, false) => write!(f, "{}: {}", self.key, self.reason),
            (true, true) => write!(f, "{}", self.reason),
        }
    }
}

impl std::error::Error for ConfigError {}
