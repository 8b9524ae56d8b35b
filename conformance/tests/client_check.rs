//! `mcp-conformance client` end to end: this project's client through its
//! driver passes every check, and each deliberately broken driver fails
//! exactly the checks its mistake should fail, with readable messages.

use std::{collections::BTreeSet, process::Command};

use serde_json::Value;

use mcp_conformance::client_check::checks::CHECK_IDS as ALL_IDS;

/// Runs the client check on `driver` and returns its exit code and report.
fn check(driver: &[&str]) -> (i32, Value) {
    let output = Command::new(env!("CARGO_BIN_EXE_mcp-conformance"))
        .args(["client", "--json", "--"])
        .args(driver)
        .output()
        .expect("run mcp-conformance");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|error| {
        panic!(
            "not a JSON report ({error}):\n{stdout}\nstderr:\n{}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output.status.code().unwrap_or(-1), report)
}

fn failing(report: &Value) -> BTreeSet<String> {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["verdict"] == "fail")
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect()
}

fn assert_all_ids(report: &Value) {
    let ids: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ALL_IDS, "{report:#}");
}

#[test]
fn this_projects_client_passes_every_check() {
    let (code, report) = check(&[env!("CARGO_BIN_EXE_mcp-driver-stdio-client")]);
    assert_all_ids(&report);
    assert_eq!(failing(&report), BTreeSet::new(), "{report:#}");
    assert_eq!(code, 0);
    assert_eq!(report["era"], "modern");
    let sigterm = &report["checks"][2];
    assert!(
        sigterm["figures"]["eof_to_sigterm_ms"].as_u64().unwrap() >= 400,
        "{sigterm}"
    );
}

/// Runs `mode` of the naive driver and checks the set of failures.
fn naive(mode: Option<&str>, expected: &[&str]) -> Value {
    let driver = env!("CARGO_BIN_EXE_mcp-driver-naive");
    let mut argv = vec![driver];
    if let Some(mode) = mode {
        argv.extend(["--mode", mode]);
    }
    let (code, report) = check(&argv);
    assert_all_ids(&report);
    let expected: BTreeSet<String> = expected.iter().map(|s| s.to_string()).collect();
    assert_eq!(failing(&report), expected, "{report:#}");
    assert_eq!(code, if expected.is_empty() { 0 } else { 1 });
    assert_eq!(report["era"], "legacy");
    for check in report["checks"].as_array().unwrap() {
        if check["verdict"] == "fail" {
            assert!(
                check["fix"].is_string(),
                "a failure says what to change: {check}"
            );
        }
    }
    report
}

fn summary<'a>(report: &'a Value, id: &str) -> &'a str {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .and_then(|c| c["summary"].as_str())
        .unwrap()
}

#[test]
fn a_correct_naive_client_passes_in_the_legacy_era() {
    naive(None, &[]);
}

#[test]
fn killing_the_pid_without_eof_fails_the_eof_and_group_checks() {
    let report = naive(
        Some("kill-pid"),
        &[
            "close.eof_first",
            "close.graceful",
            "close.sigterm",
            "close.group",
            "close.sidecar",
        ],
    );
    assert!(summary(&report, "close.eof_first").contains("never saw stdin EOF"));
    assert!(summary(&report, "close.group").contains("the launcher's child survived"));
}

#[test]
fn never_escalating_after_eof_fails_the_escalation_checks() {
    let report = naive(
        Some("no-escalation"),
        &[
            "close.sigterm",
            "close.sigkill",
            "close.group",
            "close.sidecar",
        ],
    );
    assert!(summary(&report, "close.sigkill").contains("still alive"));
}

#[test]
fn signalling_the_pid_instead_of_the_group_fails_the_group_checks() {
    let report = naive(Some("pid-signals"), &["close.group", "close.sidecar"]);
    assert!(summary(&report, "close.sidecar").contains("left in the server's group"));
}

#[test]
fn exiting_without_closing_fails_close_and_exit() {
    let report = naive(
        Some("exit-without-close"),
        &[
            "close.eof_first",
            "close.graceful",
            "close.sigterm",
            "close.sigkill",
            "close.group",
            "close.sidecar",
            "exit.abrupt",
        ],
    );
    assert!(summary(&report, "exit.abrupt").contains("still alive after the program exited"));
}

#[test]
fn an_unbounded_handshake_fails_handshake_bounded() {
    let report = naive(Some("no-handshake-timeout"), &["handshake.bounded"]);
    assert!(summary(&report, "handshake.bounded").contains("still waiting for start-up"));
}

#[test]
fn a_driver_that_cannot_start_is_a_usage_error() {
    let output = Command::new(env!("CARGO_BIN_EXE_mcp-conformance"))
        .args(["client", "--", "/nonexistent/driver"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot start the driver `/nonexistent/driver`"),
        "{stderr}"
    );
}
