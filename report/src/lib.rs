//! The reports of the MCP stdio conformance suite, as data in and text out:
//! the one report model every mode fills ([`model`], schema 2) and its JSON
//! Schema with a validator ([`schema`]); the per-scenario result files the
//! scenario runner writes ([`results`]), the expected-failures baseline
//! ([`baseline`]), the verdict per scenario and per run ([`verdict`]) and
//! the scenario run as the model ([`json`]); and the renderings — a table
//! for people ([`table`]), JUnit XML ([`junit`]) and Markdown
//! ([`markdown`]), both from the model, for every mode. Nothing here runs a process: `cargo xtask conformance`
//! orchestrates, this crate decides and renders.
//!
//! Two small pieces of the interface live here too, so that CI tools and
//! `cargo xtask` use them without building the harness: the exit codes of
//! every entry point ([`exit`]) and the rules of the contract,
//! `docs/contract.md`, embedded and parsed ([`contract`]).
//!
//! `docs/conformance-report.md` describes the files and their schemas.

pub mod baseline;
pub mod contract;
pub mod exit;
pub mod json;
pub mod junit;
pub mod markdown;
pub mod model;
pub mod results;
pub mod schema;
pub mod table;
#[doc(hidden)]
pub mod test_support;
pub mod verdict;

/// Why a result file, a baseline or a run could not be judged.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// Something in the input is wrong; the message names the file and says
    /// what.
    #[error("{0}")]
    Invalid(String),
    /// A file could not be read or parsed; the message says which.
    #[error("{message}")]
    Context {
        /// What failed, naming the file.
        message: String,
        /// The lower-level error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// This crate's result: [`ReportError`] by default.
pub type Result<T, E = ReportError> = std::result::Result<T, E>;

/// Returns early with [`ReportError::Invalid`], formatted.
macro_rules! bail {
    ($($arg:tt)*) => {
        return Err($crate::ReportError::Invalid(format!($($arg)*)))
    };
}
pub(crate) use bail;

/// Wraps a lower-level error with a message naming what failed.
pub(crate) trait Context<T> {
    fn with_context(self, message: impl FnOnce() -> String) -> Result<T>;
}

impl<T, E: std::error::Error + Send + Sync + 'static> Context<T> for std::result::Result<T, E> {
    fn with_context(self, message: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|source| ReportError::Context {
            message: message(),
            source: Box::new(source),
        })
    }
}
