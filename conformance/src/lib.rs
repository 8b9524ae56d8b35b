//! The conformance harness: scenario files (`scenarios/`), a runner that
//! drives the real client through them against real fixture processes, and
//! the process observer that proves nothing was left behind; `server`
//! mode, which grades any MCP stdio server's lifecycle; `client` mode, which
//! grades any MCP stdio client through a driver; and `host` mode, which
//! grades a real host unattended.
//!
//! The public surface is what the `mcp-conformance` executable and the
//! integration tests use: the command line ([`Cli`]), the scenario model and
//! runner ([`load_scenario`], [`run_scenario`]), the server check as a
//! library ([`check_server`]) and a few facts the tests assert against. The
//! modules themselves are private; `docs/architecture.md` draws their
//! dependency order. The exit codes and the contract's rules are in
//! `mcp_conformance_report` (`exit`, `contract`), which tools can use
//! without building this crate.
//!
//! `docs/scenarios.md` describes the scenario format; `docs/contract.md`
//! holds the rules scenarios cite.

mod capture;
mod cli;
mod client_check;
mod connect;
mod driver;
mod drivers;
mod failure_log;
mod host_run;
mod interrupt;
mod keeper;
mod logging;
mod observer;
mod outcome;
mod runner;
mod runtime;
mod scenario;
mod server_check;
mod suite;
mod tempdirs;
mod units;

pub use cli::Cli;
pub use client_check::checks::CHECK_IDS as CLIENT_CHECK_IDS;
pub use failure_log::report as failure_log;
pub use host_run::model::{Api as ModelApi, Endpoint as ModelEndpoint, FINAL_TEXT};
pub use keeper::{Finish as KeeperFinish, start_from_until_dropped as start_keeper};
pub use runner::{Check, Run, run as run_scenario, run_external as run_scenario_external};
pub use scenario::{
    Scenario, ScenarioError, discover as discover_scenarios, load as load_scenario,
};
pub use server_check::{
    CheckId as ServerCheckId, Fmt as ServerReportFormat, Options as ServerOptions,
    ServerCheckError, Target as ServerTarget, run as check_server, target as server_target,
};

/// The `scenarios/` directory of this workspace.
pub fn scenarios_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("conformance/ lives in the workspace")
        .join("scenarios")
}
