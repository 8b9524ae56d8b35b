//! `cargo xtask test`: the project's test command. Installs cargo-nextest if
//! it is missing (the suite checks its own nextest listing), then runs every
//! test of the workspace under nextest.

use anyhow::Result;

use crate::{cargo, run_checked};

pub fn run(extra: Vec<String>) -> Result<()> {
    ensure_nextest()?;
    let mut test = cargo();
    test.args(["nextest", "run", "--workspace"]);
    test.args(extra);
    run_checked(test, "the test suite")
}

/// Installs cargo-nextest with `cargo install --locked` when `cargo nextest`
/// does not run.
pub fn ensure_nextest() -> Result<()> {
    let present = cargo()
        .args(["nextest", "--version"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !present {
        eprintln!("cargo-nextest is missing: installing it (cargo install cargo-nextest --locked)");
        let mut install = cargo();
        install.args(["install", "cargo-nextest", "--locked"]);
        run_checked(install, "installing cargo-nextest")?;
    }
    Ok(())
}
