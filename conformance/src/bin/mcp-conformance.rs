//! `mcp-conformance`: grade MCP servers and drive configured servers by hand.
//! A thin `main`: each subcommand lives in the library. The drivers that
//! grade clients through `client` are a subcommand too (`driver`), so an
//! install puts this one executable on the PATH and nothing else.
//!
//! It also carries every fixture server: `mcp-conformance fixture <name>
//! [FLAGS]` runs one, and so does this executable started through a link
//! named `fixture-<name>` (how `mcp-conformance scenarios` provides them).
//! Both are decided before anything else runs, so a fixture process is the
//! fixture alone.

use std::{ffi::OsString, path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};
use mcp_conformance::{exit, server_check};

#[derive(Parser)]
#[command(
    name = "mcp-conformance",
    version,
    about = "Lifecycle conformance checks for MCP stdio servers and clients"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Grade an MCP stdio server's lifecycle: `server [OPTIONS] -- <COMMAND> [ARGS]...`
    Server(server_check::Args),
    /// Connect to configured servers, do one thing, close, and show the lifecycle.
    Connect(mcp_conformance::connect::Args),
    /// Grade an MCP stdio client through a driver: `client [OPTIONS] [FILTER] -- <DRIVER>...`
    Client(mcp_conformance::client_check::Args),
    /// Grade a real host unattended: `host [OPTIONS] -- <HOST COMMAND>...`
    Host(mcp_conformance::host_run::Args),
    /// Started by `server` in a session of its own: kills what the checker
    /// started if the checker dies first (see `docs/server-check.md`).
    #[command(hide = true)]
    Keeper(mcp_conformance::keeper::Args),
    /// Run the built-in scenario suite against the built-in fixtures.
    Scenarios(mcp_conformance::suite::Args),
    /// Run one of this project's drivers, for `client` (test equipment):
    /// `driver stdio-client`, `driver rmcp`, `driver naive [--mode MODE]`.
    #[command(subcommand)]
    Driver(mcp_conformance::drivers::Driver),
    /// Run a fixture server: `fixture <NAME> [FLAGS]...` (`fixture well-behaved --help`).
    Fixture {
        /// The fixture: well-behaved, eof-ignoring, term-ignoring, wedged, crash,
        /// slow, launcher, lingering, escaping, stdout-polluting, stderr-flooding,
        /// secret-echoing.
        name: String,
        /// The fixture's own flags.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        flags: Vec<OsString>,
    },
}

fn main() -> ExitCode {
    let argv: Vec<OsString> = std::env::args_os().collect();
    let argv0 = argv.first().cloned().unwrap_or_default();
    // Started through a `fixture-*` link: be that fixture, re-run through
    // the same link for a sidecar.
    let link_name = PathBuf::from(&argv0)
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .filter(|name| name.starts_with("fixture-"));
    if let Some(name) = link_name {
        return fixture(&name, PathBuf::from(&argv0), Vec::new(), argv[1..].to_vec());
    }
    // `fixture <name> ...` is taken as is, before clap sees it: every flag
    // after the name is the fixture's, `--help` included.
    if argv.get(1).is_some_and(|arg| arg == "fixture")
        && let Some(name) = argv
            .get(2)
            .filter(|name| !name.to_string_lossy().starts_with('-'))
    {
        let name = name.to_string_lossy().into_owned();
        let selector = vec!["fixture".into(), name.clone().into()];
        return match std::env::current_exe() {
            Ok(exe) => fixture(&name, exe, selector, argv[3..].to_vec()),
            Err(error) => {
                eprintln!("mcp-conformance fixture: cannot find this executable: {error}");
                ExitCode::from(exit::USAGE)
            }
        };
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            let _ = error.print();
            return ExitCode::from(if error.use_stderr() {
                exit::USAGE
            } else {
                exit::SUCCESS
            });
        }
    };
    ExitCode::from(match cli.command {
        Command::Server(args) => server_check::main(args),
        Command::Keeper(args) => mcp_conformance::keeper::main(args),
        Command::Connect(args) => mcp_conformance::connect::run(args),
        Command::Client(args) => mcp_conformance::client_check::main(args),
        Command::Host(args) => mcp_conformance::host_run::main(args),
        Command::Scenarios(args) => mcp_conformance::suite::main(args),
        Command::Driver(driver) => mcp_conformance::drivers::main(driver),
        // Reached only without a name (taken above): clap has already
        // refused that, so this is a name that starts with `-`.
        Command::Fixture { name, .. } => {
            eprintln!("mcp-conformance fixture: `{name}` is not a fixture name");
            exit::USAGE
        }
    })
}

/// Runs fixture `name` with `flags`; returns only when there is no such
/// fixture.
fn fixture(
    name: &str,
    program: PathBuf,
    selector: Vec<OsString>,
    flags: impl IntoIterator<Item = OsString>,
) -> ExitCode {
    match mcp_fixtures::bins::run(name, program, selector, flags) {
        Ok(never) => match never {},
        Err(error) => {
            eprintln!("mcp-conformance fixture: {error}");
            ExitCode::from(exit::USAGE)
        }
    }
}
