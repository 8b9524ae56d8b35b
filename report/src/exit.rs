//! Exit codes of every entry point, in one place: the `mcp-conformance`
//! executable (each mode) and `cargo xtask` both use these. They are part of
//! the interface CI tools read, so they live here with the report format,
//! not in the harness. Asserted in tests; the table is `docs/exit-codes.md`.

/// Every required check passed (or the command did what was asked).
pub const SUCCESS: u8 = 0;
/// A check failed, or the server/client under test misbehaved.
pub const FAILURE: u8 = 1;
/// The command line or the input was unusable (clap's own code for usage errors).
pub const USAGE: u8 = 2;
/// No verdict could be reached for a reason that is neither the input nor
/// the thing under test: a build failed, the scenario runner crashed before
/// it wrote a result, a report could not be written (`cargo xtask
/// conformance`).
pub const NO_VERDICT: u8 = 3;
/// Ended by a signal it handles (SIGHUP, SIGINT, SIGTERM): 128 plus the
/// signal's number (129, 130, 143), after closing what it started.
pub const SIGNALLED_BASE: u8 = 128;
