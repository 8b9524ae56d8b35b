//! `cargo xtask smoke`: build every fixture binary and run the fixture
//! integration tests, which drive each one through real pipes.

use anyhow::Result;

use crate::{cargo, run_checked};

const HELP: &str = "\
usage: cargo xtask smoke [LIBTEST-ARGS]...

Builds every fixture binary and runs the fixture integration tests
(`mcp-fixtures`' test `it`), which drive each fixture through real pipes.
Arguments go to the test binary (a filter, --nocapture...).
";

pub fn run(extra: Vec<String>) -> Result<()> {
    if matches!(extra.as_slice(), [flag] if flag == "-h" || flag == "--help") {
        print!("{HELP}");
        return Ok(());
    }
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
