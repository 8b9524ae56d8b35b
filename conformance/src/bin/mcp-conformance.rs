//! `mcp-conformance`: grade MCP servers and drive configured servers by hand.
//! A thin `main`: the command line and each subcommand live in the library
//! ([`mcp_conformance::Cli`]). The drivers that
//! grade clients through `client` are a subcommand too (`driver`), so an
//! install puts this one executable on the PATH and nothing else.
//!
//! It also carries every fixture server: `mcp-conformance fixture <name>
//! [FLAGS]` runs one, and so does this executable started through a link
//! named `fixture-<name>` (how `mcp-conformance scenarios` provides them).
//! Both are decided before anything else runs, so a fixture process is the
//! fixture alone.

use std::{ffi::OsString, path::PathBuf, process::ExitCode};

use clap::Parser;
use mcp_conformance::Cli;
use mcp_conformance_report::exit;

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
    ExitCode::from(cli.run())
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
