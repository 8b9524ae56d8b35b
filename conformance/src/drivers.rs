//! `mcp-conformance driver <CLIENT>`: the drivers (`docs/client-check.md`)
//! this project grades clients with, as a subcommand of the one installed
//! executable rather than executables of their own, so that installing the
//! tool puts only `mcp-conformance` on the PATH. They are test equipment:
//! `mcp-conformance client -- mcp-conformance driver stdio-client` grades
//! this project's client through the same protocol as any other client.

pub mod naive;
mod protocol;
pub mod rmcp;
pub mod stdio_client;

/// Which driver to run.
#[derive(Debug, clap::Subcommand)]
pub enum Driver {
    /// This project's client, `mcp-stdio-client`.
    StdioClient,
    /// rmcp's own stdio client (`TokioChildProcess`), as its documentation
    /// shows it.
    Rmcp,
    /// A deliberately simple reference client, correct unless `--mode` picks
    /// one lifecycle mistake (or another choice a client may make).
    Naive(naive::Args),
}

/// Runs `driver` until its input ends or it is told to exit; returns the
/// exit code.
pub fn main(driver: Driver) -> u8 {
    match driver {
        Driver::StdioClient => stdio_client::main(),
        Driver::Rmcp => rmcp::main(),
        Driver::Naive(args) => naive::main(&args),
    }
}
