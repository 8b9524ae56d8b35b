//! `mcp-conformance`: grade MCP servers and drive configured servers by hand.
//! A thin `main`: each subcommand lives in the library.

use std::process::ExitCode;

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
}

fn main() -> ExitCode {
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
        Command::Connect(args) => mcp_conformance::connect::run(args),
        Command::Client(args) => mcp_conformance::client_check::main(args),
    })
}
