//! The `mcp-conformance` executable on its own, as `cargo install` leaves
//! it: copied out of the target directory, run from a directory outside the
//! checkout, with no cargo reachable and no fixture binaries beside it. It
//! must still grade a server, be every fixture (`mcp-conformance fixture
//! <name>`, sidecars included), and run its built-in scenarios.

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

/// A lone copy of the executable in a fresh directory.
struct Installed {
    dir: tempfile::TempDir,
}

impl Installed {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("bin")).unwrap();
        std::fs::copy(
            env!("CARGO_BIN_EXE_mcp-conformance"),
            Self::exe_in(dir.path()),
        )
        .unwrap();
        Self { dir }
    }

    fn exe_in(dir: &Path) -> PathBuf {
        dir.join("bin").join("mcp-conformance")
    }

    fn exe(&self) -> PathBuf {
        Self::exe_in(self.dir.path())
    }

    /// Runs the copy with `args` from its own directory, with cargo out of
    /// reach: a step that needed the checkout or a build would fail.
    fn run(&self, args: &[&str]) -> Output {
        let mut command = Command::new(self.exe());
        command
            .args(args)
            .current_dir(self.dir.path())
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("CARGO", "/nonexistent/cargo")
            .env("HOME", self.dir.path());
        command.output().unwrap()
    }
}

fn text(output: &Output) -> String {
    format!(
        "exit: {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn the_lone_executable_grades_its_own_well_behaved_fixture() {
    let installed = Installed::new();
    let exe = installed.exe();
    let output = installed.run(&[
        "server",
        "--",
        exe.to_str().unwrap(),
        "fixture",
        "well-behaved",
    ]);
    let report = text(&output);
    assert_eq!(output.status.code(), Some(0), "{report}");
    assert!(report.contains("verdict: pass"), "{report}");
}

/// A sidecar re-runs the fixture that started it: through `fixture
/// lingering` again, not as a bare `mcp-conformance --sidecar` (which would
/// be a usage error, and leave nothing behind to find).
#[test]
fn a_fixture_run_by_the_executable_starts_its_sidecar() {
    let installed = Installed::new();
    let exe = installed.exe();
    let output = installed.run(&[
        "server",
        "--check",
        "eof.descendants",
        "--",
        exe.to_str().unwrap(),
        "fixture",
        "lingering",
    ]);
    let report = text(&output);
    assert_eq!(output.status.code(), Some(1), "{report}");
    assert!(report.contains("left behind"), "{report}");
    assert!(
        report.contains("still in the server's process group"),
        "{report}"
    );
}

/// The scenarios that start fixtures by path, through the launcher, by
/// `PATH` lookup and with sidecars pass from the built-in copies.
#[test]
fn the_built_in_scenarios_run_without_the_checkout() {
    let installed = Installed::new();
    let output = installed.run(&["scenarios", "lifecycle/l"]);
    let report = text(&output);
    assert_eq!(output.status.code(), Some(0), "{report}");
    assert!(
        report.contains("ok      lifecycle/lingering-sidecar"),
        "{report}"
    );
    assert!(
        report.contains("ok      lifecycle/launcher-well-behaved"),
        "{report}"
    );
    assert!(report.contains(" passed, 0 failed"), "{report}");

    let output = installed.run(&["scenarios", "failure/env-path-resolution"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
}

#[test]
fn an_unknown_fixture_is_a_usage_error_listing_the_fixtures() {
    let installed = Installed::new();
    let output = installed.run(&["fixture", "nope"]);
    let report = text(&output);
    assert_eq!(output.status.code(), Some(2), "{report}");
    assert!(report.contains("no fixture named `nope`"), "{report}");
    assert!(report.contains("well-behaved, eof-ignoring"), "{report}");
}

/// Flags after the name are the fixture's: `--help` prints the fixture's
/// own usage under its binary name.
#[test]
fn a_fixtures_flags_are_its_own() {
    let installed = Installed::new();
    let output = installed.run(&["fixture", "slow", "--help"]);
    let report = text(&output);
    assert_eq!(output.status.code(), Some(0), "{report}");
    assert!(report.contains("Usage: fixture-slow"), "{report}");
    assert!(report.contains("--delay-ms"), "{report}");
}

/// A client author who installed the tool has its drivers too: the lone
/// executable grades this project's client through its own `driver
/// stdio-client`, and rmcp's and the naive reference's, with nothing else
/// installed and no checkout (the drivers are test equipment carried by the
/// tool, not executables of their own on the PATH).
#[test]
fn the_lone_executable_carries_the_drivers_a_client_author_needs() {
    let installed = Installed::new();
    let exe = installed.exe();
    let exe = exe.to_str().unwrap();
    for driver in [&["stdio-client"][..], &["rmcp"], &["naive"]] {
        let mut args = vec!["client", "close.graceful", "--", exe, "driver"];
        args.extend(driver);
        let output = installed.run(&args);
        let report = text(&output);
        assert_eq!(output.status.code(), Some(0), "{driver:?}: {report}");
        assert!(report.contains("close.graceful      pass"), "{report}");
        assert!(report.contains("verdict: pass"), "{report}");
    }
    // And the mistake a mode makes is graded as one.
    let output = installed.run(&[
        "client",
        "close.eof_first",
        "--",
        exe,
        "driver",
        "naive",
        "--mode",
        "kill-pid",
    ]);
    let report = text(&output);
    assert_eq!(output.status.code(), Some(1), "{report}");
    assert!(report.contains("close.eof_first     FAIL"), "{report}");
}
