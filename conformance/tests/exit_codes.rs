//! The exit codes of every `mcp-conformance` mode (docs/exit-codes.md):
//! usage errors exit `exit::USAGE`, help and a passing run `exit::SUCCESS`,
//! a failed check `exit::FAILURE`, each through the built executable. The
//! codes of a failed server, client or scenario run are asserted beside
//! those runs (`server_check.rs`, `client_check.rs`, `connect_cli.rs`); the
//! signal codes in `interrupted.rs`.

use std::process::{Command, Output};

use mcp_conformance_report::exit;

const EXE: &str = env!("CARGO_BIN_EXE_mcp-conformance");

fn run(args: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    Command::new(EXE)
        .args(args)
        .current_dir(dir.path())
        .env("HOME", dir.path())
        .output()
        .unwrap()
}

fn assert_code(args: &[&str], code: u8) -> String {
    let output = run(args);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(
        output.status.code(),
        Some(i32::from(code)),
        "{args:?}\nstdout: {}\nstderr: {stderr}",
        String::from_utf8_lossy(&output.stdout)
    );
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    stderr
}

#[test]
fn the_codes_are_distinct() {
    let codes = [
        exit::SUCCESS,
        exit::FAILURE,
        exit::USAGE,
        exit::NO_VERDICT,
        exit::SIGNALLED_BASE,
    ];
    let distinct: std::collections::BTreeSet<u8> = codes.into_iter().collect();
    assert_eq!(distinct.len(), codes.len());
    assert_eq!(
        [exit::SUCCESS, exit::FAILURE, exit::USAGE, exit::NO_VERDICT],
        [0, 1, 2, 3]
    );
}

#[test]
fn usage_errors_of_every_mode_exit_usage() {
    for args in [
        &[][..],
        &["no-such-mode"],
        &["server"],
        &["server", "--repeat", "0", "--", "/bin/true"],
        &["server", "--", "no-such-server-anywhere"],
        &["client"],
        &["client", "--", "/nonexistent/driver"],
        &["connect", "list-tools"],
        &["connect", "--config", "no-such-config.yaml", "list-tools"],
        &["scenarios", "--no-such-flag"],
        &["scenarios", "zzz-no-such-scenario"],
        &["client", "zzz-no-such-check", "--", EXE, "driver", "naive"],
        &["fixture", "no-such-fixture"],
        &["driver"],
        &["driver", "no-such-driver"],
        &["driver", "naive", "--mode", "no-such-mode"],
        &["driver", "naive", "--protocol", "3"],
        &["driver", "naive", "--fixed-graces", "2000"],
        &["driver", "rmcp", "--unexpected"],
    ] {
        assert_code(args, exit::USAGE);
    }
}

#[test]
fn help_and_version_exit_success() {
    for args in [
        &["--help"][..],
        &["--version"],
        &["server", "--help"],
        &["client", "--help"],
        &["connect", "--help"],
        &["scenarios", "--help"],
        &["driver", "--help"],
        &["driver", "naive", "--help"],
        &["scenarios", "--list"],
    ] {
        assert_code(args, exit::SUCCESS);
    }
}

/// A driver ends with the code its program would: 0 when its input ends,
/// 1 when its client library cannot load (`--cannot-load`, as node exits).
#[test]
fn drivers_exit_as_their_programs_do() {
    for driver in ["stdio-client", "rmcp", "naive"] {
        // Stdin is empty (null): the driver's input ends at once.
        let output = Command::new(EXE)
            .args(["driver", driver])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{driver}: {output:?}");
    }
    let stderr = assert_code(&["driver", "naive", "--cannot-load"], exit::FAILURE);
    assert!(stderr.contains("ERR_MODULE_NOT_FOUND"), "{stderr}");
}
