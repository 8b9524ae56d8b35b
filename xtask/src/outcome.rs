//! How a `cargo xtask` command ended, as its exit code: the constants are the
//! `mcp-conformance` executable's own (`mcp_conformance_report::exit`), so
//! both entry points say the same thing with the
//! same number. `docs/exit-codes.md` has the table.

use std::fmt;

use mcp_conformance_report::exit;

/// The command line (or an input it names) is unusable: exit 2.
#[derive(Debug)]
pub struct Usage(anyhow::Error);

/// The run could not reach a verdict (a build failed, the runner crashed
/// before writing results, a report could not be written): exit 3.
#[derive(Debug)]
pub struct NoVerdict(anyhow::Error);

/// Marks `error` as a usage error.
pub fn usage(error: impl Into<anyhow::Error>) -> anyhow::Error {
    Usage(error.into()).into()
}

/// Marks `error` as one that left no verdict, unless it is already marked
/// (a usage error stays one).
pub fn no_verdict(error: anyhow::Error) -> anyhow::Error {
    if error.is::<Usage>() || error.is::<NoVerdict>() {
        error
    } else {
        NoVerdict(error).into()
    }
}

/// The exit code for `error`: 2 for a usage error, 3 for no verdict, else 1
/// (something checked failed: scenarios, tests, a build asked for).
pub fn code(error: &anyhow::Error) -> u8 {
    if error.is::<Usage>() {
        exit::USAGE
    } else if error.is::<NoVerdict>() {
        exit::NO_VERDICT
    } else {
        exit::FAILURE
    }
}

// The wrapped error prints as it did unwrapped, its causes included.
impl fmt::Display for Usage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#}", self.0)
    }
}

impl fmt::Display for NoVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#}", self.0)
    }
}

impl std::error::Error for Usage {}
impl std::error::Error for NoVerdict {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_has_its_own_code_and_prints_as_before() {
        let plain = anyhow::anyhow!("inner").context("outer");
        assert_eq!(code(&plain), exit::FAILURE);
        let shown = format!("{plain:#}");
        let marked = usage(plain);
        assert_eq!(code(&marked), exit::USAGE);
        assert_eq!(format!("{marked:#}"), shown);
        // A usage error stays one when the caller marks what is left.
        assert_eq!(code(&no_verdict(marked)), exit::USAGE);
        let broken = no_verdict(anyhow::anyhow!("the build failed"));
        assert_eq!(code(&broken), exit::NO_VERDICT);
        assert_eq!(format!("{broken:#}"), "the build failed");
        let codes = [exit::SUCCESS, exit::FAILURE, exit::USAGE, exit::NO_VERDICT];
        let distinct: std::collections::BTreeSet<u8> = codes.into_iter().collect();
        assert_eq!(distinct.len(), codes.len());
    }
}
