//! `cargo xtask smoke`: build every fixture binary and run the fixture
//! integration tests, which drive each one through real pipes.

use anyhow::Result;

use crate::{cargo, run_checked};

pub fn run(extra: Vec<String>) -> Result<()> {
    let mut build = cargo();
    build.args(["build", "--package", "mcp-fixtures", "--bins"]);
    run_checked(build, "building the fixtures")?;

    let mut test = cargo();
    test.args(["test", "--package", "mcp-fixtures", "--test", "it", "--"]);
    test.args(extra);
    run_checked(test, "the fixture smoke check")?;
    eprintln!("fixture smoke check passed: every fixture behaves as docs/fixtures.md says");
    Ok(())
}
