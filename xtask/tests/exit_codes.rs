//! `cargo xtask`'s exit codes (docs/exit-codes.md), through the built
//! binary: a usage error is 2, never the 1 of a failed check. Each case
//! fails before anything is built or run.

use std::process::Command;

const XTASK: &str = env!("CARGO_BIN_EXE_xtask");

fn code(args: &[&str]) -> (Option<i32>, String) {
    let output = Command::new(XTASK).args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.code(), stderr)
}

#[test]
fn usage_errors_exit_2() {
    for (args, says) in [
        (
            &["no-such-command"][..],
            "unknown command `no-such-command`",
        ),
        (&["conformance", "--bogus"], "unknown option `--bogus`"),
        (&["conformance", "a", "b"], "only one FILTER is allowed"),
        (
            &["conformance", "--partition", "count:1/2"],
            "--partition needs --nextest",
        ),
        (
            &[
                "conformance",
                "--expected-failures",
                "/nonexistent/baseline.yaml",
            ],
            "/nonexistent/baseline.yaml",
        ),
        (&["readme", "--bogus"], "unknown argument `--bogus`"),
        (&["bench", "--bogus"], "unknown argument `--bogus`"),
        (&["stress", "--runs", "0"], "--runs must be at least 1"),
        (&["peers", "--bogus"], "unknown argument `--bogus`"),
        (&["dist", "--bogus"], "unknown argument `--bogus`"),
        (&["dist", "--only", "sdist"], "unknown kind `sdist`"),
        (&["hosts", "--bogus"], "unknown option `--bogus`"),
        (&["hosts", "no-such-host"], "no host `no-such-host`"),
    ] {
        let (code, stderr) = code(args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

#[test]
fn help_exits_0() {
    for args in [
        &["--help"][..],
        &["conformance", "--help"],
        &["readme", "--help"],
        &["test", "--help"],
        &["smoke", "--help"],
        &["stress", "--help"],
        &["peers", "--help"],
        &["bench", "--help"],
        &["mutants", "--help"],
    ] {
        let (code, stderr) = code(args);
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
    }
}
