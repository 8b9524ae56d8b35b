//! The command line of the `mcp-conformance` executable: one subcommand per
//! mode, each handed to the module that implements it. The executable
//! itself (`src/bin/mcp-conformance.rs`) only adds what must happen before
//! parsing: running a fixture.

use clap::{Parser, Subcommand};
use mcp_conformance_report::exit;

use crate::{client_check, connect, drivers, host_run, keeper, server_check, suite};

/// The parsed command line of `mcp-conformance`.
#[derive(Parser)]
#[command(
    name = "mcp-conformance",
    version,
    about = "Lifecycle conformance checks for MCP stdio servers and clients"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Grade an MCP stdio server's lifecycle: `server [OPTIONS] -- <COMMAND> [ARGS]...`
    Server(server_check::Args),
    /// Connect to configured servers, do one thing, close, and show the lifecycle.
    Connect(connect::Args),
    /// Grade an MCP stdio client through a driver: `client [OPTIONS] [FILTER] -- <DRIVER>...`
    Client(client_check::Args),
    /// Grade a real host unattended: `host [OPTIONS] -- <HOST COMMAND>...`
    Host(host_run::Args),
    /// Started by `server` in a session of its own: kills what the checker
    /// started if the checker dies first (see `docs/server-check.md`).
    #[command(hide = true)]
    Keeper(keeper::Args),
    /// Run the built-in scenario suite against the built-in fixtures.
    Scenarios(suite::Args),
    /// Run one of this project's drivers, for `client` (test equipment):
    /// `driver stdio-client`, `driver rmcp`, `driver naive [--mode MODE]`.
    #[command(subcommand)]
    Driver(drivers::Driver),
    /// Run a fixture server: `fixture <NAME> [FLAGS]...` (`fixture well-behaved --help`).
    Fixture {
        /// The fixture: well-behaved, eof-ignoring, term-ignoring, wedged, crash,
        /// slow, launcher, lingering, escaping, stdout-polluting, stderr-flooding,
        /// secret-echoing.
        name: String,
        /// The fixture's own flags.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        flags: Vec<std::ffi::OsString>,
    },
}

impl Cli {
    /// Runs the subcommand to its end; returns the exit code
    /// (`mcp_conformance_report::exit`).
    ///
    /// `fixture <NAME>` is the executable's to run before parsing (its flags
    /// are the fixture's, not clap's); reaching it here means the name was
    /// not a name.
    pub fn run(self) -> u8 {
        match self.command {
            Command::Server(args) => server_check::main(args),
            Command::Keeper(args) => keeper::main(args),
            Command::Connect(args) => connect::run(args),
            Command::Client(args) => client_check::main(args),
            Command::Host(args) => host_run::main(args),
            Command::Scenarios(args) => suite::main(args),
            Command::Driver(driver) => drivers::main(driver),
            // Reached only without a name (the executable takes a name
            // before parsing): clap has already refused that, so this is a
            // name that starts with `-`.
            Command::Fixture { name, .. } => {
                eprintln!("mcp-conformance fixture: `{name}` is not a fixture name");
                exit::USAGE
            }
        }
    }
}
