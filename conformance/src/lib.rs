//! The conformance harness: scenario files (`scenarios/`), a runner that
//! drives the real client through them against real fixture processes, and
//! the process observer that proves nothing was left behind; and
//! `server_check`, which grades any MCP stdio server's lifecycle.
//!
//! `docs/scenarios.md` describes the scenario format; `docs/contract.md`
//! holds the rules scenarios cite (embedded here as [`contract`]).

pub mod capture;
pub mod client_check;
pub mod connect;
pub mod contract;
pub mod drivers;
pub mod exit;
pub mod failure_log;
pub mod host_run;
pub mod interrupt;
pub mod keeper;
pub mod logging;
pub mod observer;
pub mod outcome;
pub mod runner;
pub mod scenario;
pub mod server_check;
pub mod suite;
pub mod tempdirs;

/// The `scenarios/` directory of this workspace.
pub fn scenarios_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("conformance/ lives in the workspace")
        .join("scenarios")
}
