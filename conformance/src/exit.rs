//! Exit codes of the `mcp-conformance` binary, in one place (asserted in tests).

/// Every required check passed (or the command did what was asked).
pub const SUCCESS: u8 = 0;
/// A check failed, or the server/client under test misbehaved.
pub const FAILURE: u8 = 1;
/// The command line or the input was unusable (clap's own code for usage errors).
pub const USAGE: u8 = 2;
