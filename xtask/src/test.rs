//! `cargo xtask test`: the project's test command. Installs cargo-nextest if
//! it is missing (the suite checks its own nextest listing), checks the
//! gates (`cargo fmt --check`, clippy with warnings denied on every target),
//! checks the client library's documentation (`missing_docs` and broken links are errors), runs
//! every test of the workspace under nextest, then the client's doctests
//! (nextest does not run doctests), a build of the client without its
//! default features (no HTTP, so no reqwest and no TLS), and last `cargo
//! xtask readme`: every command of the README, run or checked.

use anyhow::Result;

use crate::{cargo, run_checked};

/// The library whose public API is documented and doctested here.
const CLIENT: &str = "mcp-stdio-client";

const HELP: &str = "\
usage: cargo xtask test [NEXTEST-ARGS]...

Checks the gates (cargo fmt --check; cargo clippy --workspace --all-targets
-- -D warnings), then runs every test of the workspace under cargo-nextest
(installed if missing), after checking the client's documentation; then the client's doctests, a
build of the client without its default features, and `cargo xtask readme`
(every command of README.md). Arguments go to `cargo nextest run`; with any,
the doctests, that build and the README check are still run.
";

pub fn run(extra: Vec<String>) -> Result<()> {
    if matches!(extra.as_slice(), [flag] if flag == "-h" || flag == "--help") {
        print!("{HELP}");
        return Ok(());
    }
    ensure_nextest()?;
    gates()?;
    client_docs()?;
    let mut test = cargo();
    test.args(["nextest", "run", "--workspace"]);
    test.args(&extra);
    run_checked(test, "the test suite")?;
    // The same filters; a filter that keeps none of them is no failure.
    let mut dist = cargo();
    dist.args(["nextest", "run", "-p", "xtask", "--test", "dist"])
        .args(["--ignore-default-filter", "--no-tests=pass"]);
    dist.args(&extra);
    run_checked(dist, "the packaging tests (wheel, npm, archive)")?;
    let mut doctests = cargo();
    doctests.args(["test", "--doc", "-p", CLIENT]);
    run_checked(doctests, "the client's doctests")?;
    // The library only: a host's build. Its own feature set, so a few dependencies are
    // checked again (measured: under a minute on a loaded 2-core machine; docs/client.md).
    let mut stdio_only = cargo();
    stdio_only.args(["check", "-p", CLIENT, "--lib", "--no-default-features"]);
    run_checked(stdio_only, "the client without its default features")?;
    crate::readme::run(Vec::new())
}

/// The gates CI runs before any test: the workspace is formatted, and clippy
/// finds nothing on any target (warnings are errors).
fn gates() -> Result<()> {
    for (component, probe) in [("rustfmt", "fmt"), ("clippy", "clippy")] {
        if !runs(cargo().args([probe, "--version"])) {
            eprintln!("{component} is missing: installing it (rustup component add {component})");
            let mut add = std::process::Command::new("rustup");
            add.args(["component", "add", component]);
            run_checked(add, &format!("rustup component add {component}"))?;
        }
    }
    let mut fmt = cargo();
    fmt.args(["fmt", "--all", "--check"]);
    run_checked(fmt, "cargo fmt --check (run `cargo fmt --all`)")?;
    let mut clippy = cargo();
    clippy.args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]);
    run_checked(
        clippy,
        "cargo clippy --workspace --all-targets -- -D warnings",
    )
}

/// Documents the client with rustdoc's warnings (`missing_docs`, which the crate sets to
/// warn, and broken intra-doc links) denied. `RUSTDOCFLAGS` reaches only rustdoc, not
/// rustc: no dependency is built again with other flags, unlike `RUSTFLAGS=-D missing-docs`.
fn client_docs() -> Result<()> {
    let mut doc = cargo();
    doc.args(["doc", "-p", CLIENT, "--no-deps"]);
    doc.env("RUSTDOCFLAGS", "-D warnings");
    run_checked(doc, "the client's documentation (missing docs are errors)")
}

/// Installs cargo-nextest with `cargo install --locked` when `cargo nextest`
/// does not run.
pub fn ensure_nextest() -> Result<()> {
    if !runs(cargo().args(["nextest", "--version"])) {
        eprintln!("cargo-nextest is missing: installing it (cargo install cargo-nextest --locked)");
        let mut install = cargo();
        install.args(["install", "cargo-nextest", "--locked"]);
        run_checked(install, "installing cargo-nextest")?;
    }
    Ok(())
}

/// Whether `command` runs and succeeds (its output discarded): the probe for a tool.
fn runs(command: &mut std::process::Command) -> bool {
    command
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}
