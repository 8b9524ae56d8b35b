//! `cargo xtask`: the project's own automation (see README.md).
//!
//! One module per subcommand; cargo is run through the `CARGO` variable and
//! from the workspace root, so the commands work from any directory.

mod bench;
mod check_server;
mod conformance;
mod dist;
mod hosts;
mod mutants;
mod outcome;
mod peers;
mod readme;
mod smoke;
mod stress;
mod test;

use std::{
    path::{Path, PathBuf},
    process::{Command, ExitCode},
};

use anyhow::{Context, Result, bail};
use mcp_conformance_report::exit;

const USAGE: &str = "\
usage: cargo xtask <command>

commands:
  bench [--quick] [--skip-conformance]
           build in release and measure every performance figure beside its
           reference; prints a table, writes target/bench/bench.json
           (docs/benchmarks.md)
  check-server [OPTIONS] -- <COMMAND> [ARGS]...
           grade any MCP stdio server's lifecycle (`mcp-conformance server`;
           docs/server-check.md); exits 0 pass, 1 fail, 2 usage error
  conformance [FILTER] [--nextest] [--partition SPEC]
              [--expected-failures FILE] [--report-dir DIR]
           run the conformance scenarios and write reports to
           target/conformance/ (`cargo xtask conformance --help` for more)
  conformance --rules
           list each rule of docs/contract.md with the scenarios that
           prove it, and the rules that have none
  dist [--release] [--only wheel,npm,archive] [--out DIR]
           build the PyPI wheel, the npm packages and the binstall archive
           (with its sha256) of mcp-conformance for this machine's target
           into target/dist (docs/releasing.md)
  hosts [--offline | --render-only] [BIN...]
           install the real hosts pinned in xtask/hosts/package.json under
           target/hosts (npm registry; not with --offline), grade each with
           `mcp-conformance host`; writes target/hosts/hosts.json and the
           table of docs/hosts.md
  mutants [-- CARGO-MUTANTS-ARGS]
           run cargo-mutants (installed if missing) on the client's
           lifecycle code with the scenario suite as the only test; prints
           the score and the surviving mutants (minutes; docs/mutants.md)
  peers [--runs N] [--render-only]
           install the Python and TypeScript MCP SDKs under target/peers
           from the drivers' pinned manifests, grade them, rmcp and this
           project's client N times (default 3) with `mcp-conformance
           client --scenarios`; writes target/peers/peers.json and
           docs/peers.md, a cell that differs between runs marked unstable
           (needs the package registries; docs/client-check.md)
  readme [--write]
           run or check every command of README.md as its markers say,
           check its sample output and crate map (docs/readme-check.md);
           --write first rewrites the sample output from a real run
  smoke    build the fixture servers and run the fixture smoke check
  stress [--runs N] [--hogs K] [FILTER]
           build once, run the scenario suite N times (default 5) beside K
           busy-loop processes (default 2), print each scenario's pass rate,
           flakiest first; fails if any scenario failed any run
  test     run every test under cargo-nextest (installed if missing),
           then `readme`; extra arguments go to `cargo nextest run`

exit status: 0 done, 1 something failed, 2 usage error, 3 (conformance,
check-server) no verdict reached; see docs/exit-codes.md
";

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let command = args.next();
    if command.as_deref() == Some(stress::HOG_COMMAND) {
        // Hidden: one busy loop of `cargo xtask stress`, started by it.
        stress::hog();
    }
    if command.as_deref() == Some("check-server") {
        // Its own exit code (0/1/2) is the answer, so it bypasses `dispatch`.
        return check_server::run(args.collect()).unwrap_or_else(|error| {
            eprintln!("error: {error:#}");
            ExitCode::from(exit::NO_VERDICT)
        });
    }
    match dispatch() {
        Ok(()) => ExitCode::from(exit::SUCCESS),
        Err(error) => {
            // Plain `{:#}`: the cause chain without a backtrace.
            eprintln!("error: {error:#}");
            ExitCode::from(outcome::code(&error))
        }
    }
}

fn dispatch() -> Result<()> {
    let mut args = std::env::args().skip(1);
    match args.next().as_deref() {
        Some("bench") => bench::run(args.collect()),
        Some("conformance") => conformance::run(args.collect()),
        Some("dist") => dist::run(args.collect()),
        Some("hosts") => hosts::run(args.collect()),
        Some("mutants") => mutants::run(args.collect()),
        Some("peers") => peers::run(args.collect()),
        Some("readme") => readme::run(args.collect()),
        Some("smoke") => smoke::run(args.collect()),
        Some("stress") => stress::run(args.collect()),
        Some("test") => test::run(args.collect()),
        Some("help" | "--help" | "-h") | None => {
            print!("{USAGE}");
            Ok(())
        }
        Some(other) => Err(outcome::usage(anyhow::anyhow!(
            "unknown command `{other}`\n\n{USAGE}"
        ))),
    }
}

/// The workspace root: the parent of this crate's directory.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives inside the workspace")
        .to_path_buf()
}

/// `cargo` as the one running us, started in the workspace root.
pub fn cargo() -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command.current_dir(root());
    clean_cargo_env(&mut command);
    command
}

/// Removes from `command`'s environment what `cargo run` gave xtask as a
/// running crate (CARGO_PKG_*, CARGO_MANIFEST_DIR...). Build scripts that
/// watch them (ring's) would rebuild whenever xtask and a plain cargo
/// alternate; what xtask starts gets the user's environment instead.
pub fn clean_cargo_env(command: &mut Command) {
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        let injected = name.starts_with("CARGO_PKG_")
            || name.starts_with("CARGO_BIN_")
            || [
                "CARGO_MANIFEST_DIR",
                "CARGO_MANIFEST_PATH",
                "CARGO_MANIFEST_LINKS",
                "CARGO_CRATE_NAME",
                "CARGO_PRIMARY_PACKAGE",
                "OUT_DIR",
            ]
            .contains(&name.as_ref());
        if injected {
            command.env_remove(name.as_ref());
        }
    }
}

/// Runs `command`, failing with its description when it fails.
pub fn run_checked(mut command: Command, what: &str) -> Result<()> {
    let status = command
        .status()
        .with_context(|| format!("cannot run {what}"))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}
