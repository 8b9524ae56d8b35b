//! `mcp-conformance client` end to end: this project's client through its
//! driver passes every check, and each deliberately broken driver fails
//! exactly the checks its mistake should fail, with readable messages.

use std::{collections::BTreeSet, process::Command};

use serde_json::Value;

use mcp_conformance::CLIENT_CHECK_IDS as ALL_IDS;

/// The executable under test; its `driver` subcommand is every driver here
/// (`driver stdio-client`, `driver rmcp`, `driver naive [--mode MODE]`).
const EXE: &str = env!("CARGO_BIN_EXE_mcp-conformance");

/// Runs the client check on `driver` and returns its exit code and report.
fn check(driver: &[&str]) -> (i32, Value) {
    check_with(&[], driver)
}

/// [`check`] with more options before the `--`.
fn check_with(options: &[&str], driver: &[&str]) -> (i32, Value) {
    let output = Command::new(env!("CARGO_BIN_EXE_mcp-conformance"))
        .args(["client", "--json"])
        .args(options)
        .arg("--")
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
    let code = output.status.code().unwrap_or(-1);
    (code, of_the_schema(report))
}

/// `report`, checked against the published JSON Schema: every report a
/// test here reads is one of `report/schema/report-v2.schema.json`.
fn of_the_schema(report: Value) -> Value {
    let errors = mcp_conformance_report::schema::validate(&report).err();
    assert_eq!(errors, None, "not of the schema: {report:#}");
    report
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
    let (code, report) = check(&[EXE, "driver", "stdio-client"]);
    assert_all_ids(&report);
    assert_eq!(failing(&report), BTreeSet::new(), "{report:#}");
    assert_eq!(code, 0);
    assert_eq!(report["subject"]["era"], "modern");
    // It claims containment when asked, and keeps the claim.
    let escaped = summary(&report, "close.escaped");
    assert_eq!(
        verdict(&report, "close.escaped"),
        "pass",
        "close.escaped: {escaped}"
    );
    assert!(escaped.contains("claims containment"), "{escaped}");
    let sigterm = &report["checks"][2];
    assert!(
        sigterm["figures"]["eof_to_sigterm"]["value"]
            .as_u64()
            .unwrap()
            >= 400,
        "{sigterm}"
    );
}

/// Runs `mode` of the naive driver and checks the set of failures.
fn naive(mode: Option<&str>, expected: &[&str]) -> Value {
    let mut argv = vec![EXE, "driver", "naive"];
    if let Some(mode) = mode {
        argv.extend(["--mode", mode]);
    }
    let (code, report) = check(&argv);
    assert_all_ids(&report);
    let expected: BTreeSet<String> = expected.iter().map(|s| s.to_string()).collect();
    assert_eq!(failing(&report), expected, "{report:#}");
    assert_eq!(code, if expected.is_empty() { 0 } else { 1 });
    assert_eq!(report["subject"]["era"], "legacy");
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

fn verdict<'a>(report: &'a Value, id: &str) -> &'a str {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .and_then(|c| c["verdict"].as_str())
        .unwrap()
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
    let report = naive(None, &[]);
    // It claims no containment: the escapee is information only.
    assert_eq!(verdict(&report, "close.escaped"), "info");
    assert!(summary(&report, "close.escaped").contains("outlived close"));
}

#[test]
fn claiming_containment_without_it_fails_close_escaped() {
    let report = naive(Some("claims-containment"), &["close.escaped"]);
    let escaped = summary(&report, "close.escaped");
    assert!(
        escaped.contains("claims containment") && escaped.contains("outlived close"),
        "{escaped}"
    );
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
    // Names are whole (the kernel's own name of a process is cut at 15
    // bytes: `fixture-eof-ign`, `fixture-lingeri`).
    let group = summary(&report, "close.group");
    assert!(group.contains("fixture-eof-ignoring (pid "), "{group}");
    let sidecar = summary(&report, "close.sidecar");
    assert!(
        sidecar.contains("fixture-lingering-sidecar (pid "),
        "{sidecar}"
    );
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

/// Live processes whose argv carries a marker of the client check run by
/// `harness` (the marker names the harness's pid).
fn started_by(harness: u32) -> Vec<u32> {
    use mcp_stdio_process::table;
    let needle = format!("--marker=client-check-{harness}-");
    table::pids()
        .into_iter()
        .filter(|pid| table::is_alive(*pid))
        .filter(|pid| {
            table::cmdline(*pid).is_some_and(|argv| argv.iter().any(|a| a.starts_with(&needle)))
        })
        .collect()
}

#[test]
fn ctrl_c_ends_the_driver_and_every_server_and_exits_130() {
    use std::{
        os::unix::process::CommandExt,
        time::{Duration, Instant},
    };

    // A driver stuck in a start-up that never ends: plenty of time to press Ctrl-C.
    let mut cli = Command::new(env!("CARGO_BIN_EXE_mcp-conformance"))
        .args(["client", "handshake", "--", EXE, "driver", "naive"])
        .args(["--mode", "no-handshake-timeout"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let harness = cli.id();
    let deadline = Instant::now() + Duration::from_secs(10);
    while started_by(harness).is_empty() {
        assert!(Instant::now() < deadline, "the fixture never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    // As a terminal does: SIGINT to the foreground process group.
    assert!(
        mcp_stdio_process::signal::signal_group(harness, mcp_stdio_process::Signal::SIGINT)
            .unwrap(),
        "the harness's group is signalled"
    );
    let status = cli.wait().unwrap();
    let left = started_by(harness);
    assert_eq!(status.code(), Some(130), "{status}");
    assert_eq!(left, Vec::<u32>::new(), "servers left after Ctrl-C");
}

#[test]
fn the_junit_report_has_one_case_per_check() {
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("client.xml");
    let output = Command::new(env!("CARGO_BIN_EXE_mcp-conformance"))
        .args(["client", "--junit"])
        .arg(&junit)
        .args(["close.s", "--", EXE, "driver", "naive"])
        .args(["--mode", "pid-signals"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let xml = std::fs::read_to_string(&junit).unwrap();
    for id in ["close.sigterm", "close.sigkill", "close.sidecar"] {
        assert!(xml.contains(&format!("name=\"{id}\"")), "{id}: {xml}");
    }
    assert_eq!(xml.matches("<failure").count(), 1, "{xml}");
    assert!(
        xml.contains("sweep its process group"),
        "the fix is in the failure: {xml}"
    );
}

/// rmcp's own `TokioChildProcess`, graded on the checks that never wait on
/// its fixed 3 s graces (the others take 6 s and more; `cargo xtask peers`
/// grades them all). What it fails, it fails for real: a program that
/// returns from `main` without closing drops the runtime with rmcp's kill
/// task in it, so an EOF-ignoring server outlives the program.
#[test]
fn rmcps_own_client_on_the_checks_that_do_not_wait_on_its_graces() {
    let mut verdicts = Vec::new();
    let mut reports = Vec::new();
    for filter in [
        "close.graceful",
        "handshake",
        "death",
        "wedge",
        "std",
        "exit.",
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_mcp-conformance"))
            .args(["client", "--json", filter, "--", EXE, "driver", "rmcp"])
            .output()
            .expect("run mcp-conformance");
        let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
            panic!(
                "not a JSON report ({error}): {}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
        for check in report["checks"].as_array().unwrap() {
            verdicts.push((
                check["id"].as_str().unwrap().to_owned(),
                check["verdict"].as_str().unwrap().to_owned(),
            ));
        }
        reports.push(report);
    }
    let expected: Vec<(String, String)> = [
        ("close.graceful", "pass"),
        ("handshake.bounded", "pass"),
        ("death.fast", "pass"),
        ("wedge.no_kill", "pass"),
        ("wedge.cancel", "pass"),
        ("stderr.drained", "pass"),
        ("stdout.tolerant", "pass"),
        ("exit.clean", "pass"),
        ("exit.abrupt", "fail"),
    ]
    .iter()
    .map(|(id, verdict)| (id.to_string(), verdict.to_string()))
    .collect();
    assert_eq!(verdicts, expected, "{reports:#?}");
    // The era comes from the well-behaved server's run (`close.graceful`).
    assert_eq!(reports[0]["subject"]["era"], "legacy");
    let abrupt = summary(reports.last().unwrap(), "exit.abrupt");
    assert!(
        abrupt.contains("saw stdin EOF and no signal")
            && abrupt.contains("still alive after the program exited"),
        "{abrupt}"
    );
}

/// Runs the client check with `--scenarios` and `filter` on `driver`.
fn check_scenarios(filter: &str, driver: &[&str]) -> (i32, Value) {
    check_with(&["--scenarios", filter], driver)
}

#[test]
fn scenarios_through_a_driver_are_rows_of_the_report() {
    // The escalation scenarios, each a row; our client passes them all.
    let filter = "scenario:lifecycle/sig";
    let (code, report) = check_scenarios(filter, &[EXE, "driver", "stdio-client"]);
    let ids: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "scenario:lifecycle/sigkill-escalation",
            "scenario:lifecycle/sigterm-escalation"
        ],
        "{report:#}"
    );
    assert_eq!(failing(&report), BTreeSet::new(), "{report:#}");
    assert_eq!(code, 0);

    // A client that SIGKILLs the pid at once fails both, saying what the
    // ledger shows instead.
    let naive = [EXE, "driver", "naive", "--mode", "kill-pid"];
    let (code, report) = check_scenarios(filter, &naive);
    assert_eq!(failing(&report).len(), 2, "{report:#}");
    let summary = report["checks"][1]["summary"].as_str().unwrap();
    assert!(
        summary.contains("says the close ended by sigkill, expected sigterm"),
        "{summary}"
    );
    assert_eq!(code, 1);
}

/// The driver's arguments may hold secrets (a token its client needs): like `server` mode, the
/// report names the driver by its program and counts its arguments, never prints them: in the
/// table, the JSON report, the JUnit file, and the error when the driver cannot start.
#[test]
fn the_drivers_arguments_are_counted_never_printed() {
    let secret = "sk-driver-arg-51f0";
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("client.xml");
    // sh runs the driver; the secret is the script's $0, so the driver never sees it.
    let driver = ["sh", "-c", "exec \"$1\" driver stdio-client", secret, EXE];
    let table = Command::new(env!("CARGO_BIN_EXE_mcp-conformance"))
        .args(["client", "--junit"])
        .arg(&junit)
        .args(["death.fast", "--"])
        .args(driver)
        .output()
        .unwrap();
    let json = Command::new(env!("CARGO_BIN_EXE_mcp-conformance"))
        .args(["client", "--json", "death.fast", "--"])
        .args(driver)
        .output()
        .unwrap();
    let unstartable = Command::new(env!("CARGO_BIN_EXE_mcp-conformance"))
        .args(["client", "--", "/nonexistent/driver", "--token", secret])
        .output()
        .unwrap();
    let text = |output: &std::process::Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    };
    let (table, json_text, unstartable) = (text(&table), text(&json), text(&unstartable));
    let junit = std::fs::read_to_string(&junit).unwrap();
    eprintln!("{table}\n{json_text}\n{junit}\n{unstartable}");
    for (what, output) in [
        ("table", &table),
        ("json", &json_text),
        ("junit", &junit),
        ("start error", &unstartable),
    ] {
        assert!(!output.contains(secret), "{what}: {output}");
        assert!(!output.contains("exec"), "{what}: {output}");
    }
    assert!(table.contains("client: sh (+4 arguments)"), "{table}");
    let report: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(report["subject"]["program"], "sh", "{report:#}");
    assert_eq!(report["subject"]["args"], 4, "{report:#}");
    assert!(
        junit.contains("name=\"mcp-conformance client sh\""),
        "{junit}"
    );
    assert!(
        unstartable.contains("cannot start the driver `/nonexistent/driver` (+2 arguments)"),
        "{unstartable}"
    );
}

/// A driver command that is not on the PATH is a usage error that says so,
/// and what to do; one given by a path that does not exist says why too.
#[test]
fn a_driver_not_on_the_path_is_said_so() {
    let run = |driver: &str| {
        let output = Command::new(EXE)
            .args(["client", "--", driver, "--secret-flag"])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{output:?}");
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    assert_eq!(
        run("no-such-driver-anywhere"),
        "mcp-conformance client: cannot start the driver `no-such-driver-anywhere` \
         (+1 argument): `no-such-driver-anywhere` is not on the PATH; fix: install it or add \
         its directory to PATH, or give the program's path (`./no-such-driver-anywhere` for \
         one in the current directory)\n"
    );
    let stderr = run("/nonexistent/driver");
    assert!(
        stderr
            .contains("cannot start the driver `/nonexistent/driver` (+1 argument): No such file"),
        "{stderr}"
    );
}

/// The figure of `id` named `figure`, in milliseconds.
fn figure(report: &Value, id: &str, figure: &str) -> u64 {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .filter(|c| c["figures"][figure]["unit"] == "ms")
        .and_then(|c| c["figures"][figure]["value"].as_u64())
        .unwrap_or_else(|| panic!("no {figure} in {id}: {report:#}"))
}

/// Close times are graded by the graces a client declares in `hello`
/// (protocol 2), not by the ones asked of it: a client that closes on its
/// own declared 2 s + 2 s passes a scenario whose graces (300 ms + 1 s) it
/// never takes, and one that declares 500 ms + 500 ms but waits 2 s fails.
#[test]
fn close_times_are_graded_by_the_declared_graces() {
    let (code, report) = check_scenarios(
        "scenario:lifecycle/launcher-eof-ignoring",
        &[EXE, "driver", "naive", "--fixed-graces", "2000,2000"],
    );
    assert_eq!(failing(&report), BTreeSet::new(), "{report:#}");
    assert_eq!(code, 0);
    assert_eq!(
        report["subject"]["details"]["settings"]["graces"], "fixed",
        "{report:#}"
    );

    let (code, report) = check_scenarios(
        "scenario:lifecycle/sigterm-escalation",
        &[
            EXE,
            "driver",
            "naive",
            "--fixed-graces",
            "2000,2000",
            "--declare-graces",
            "500,500",
        ],
    );
    let row = summary(&report, "scenario:lifecycle/sigterm-escalation");
    assert!(
        row.contains("steps[2].within")
            && row.contains("expected within_term_grace with EOF_GRACE 500 ms and TERM_GRACE 500 ms as the client declared them"),
        "{row}"
    );
    assert_eq!(code, 1);
}

/// A client that ends the server of a failed start on its own close
/// schedule, after its connect returned (the TypeScript SDK does, 2 s
/// later), passes `handshake.bounded`: the harness waits out the schedule
/// it declared, plus slack, rather than a fixed 2 s.
#[test]
fn handshake_bounded_waits_out_the_declared_close_schedule() {
    let (code, report) = check(&[
        EXE,
        "driver",
        "naive",
        "--mode",
        "cleanup-later",
        "--fixed-graces",
        "2500,2000",
    ]);
    assert_all_ids(&report);
    assert_eq!(failing(&report), BTreeSet::new(), "{report:#}");
    assert_eq!(code, 0);
}

/// A driver whose interpreter takes seconds to load its client library is
/// timed from when it was ready (its answer to `hello`), never from its
/// start: version 2, and version 1 too (whose answer to `hello` is an
/// error, given once it reads its stdin).
#[test]
fn a_slow_starting_driver_is_timed_from_its_hello() {
    for protocol in ["2", "1"] {
        let (code, report) = check_scenarios(
            "handshake",
            &[
                EXE,
                "driver",
                "naive",
                "--startup-delay",
                "3000",
                "--protocol",
                protocol,
            ],
        );
        let ids: Vec<&str> = report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_str().unwrap())
            .collect();
        assert_eq!(
            ids,
            [
                "handshake.bounded",
                "scenario:failure/exit-during-handshake",
                "scenario:failure/handshake-timeout"
            ],
            "{report:#}"
        );
        assert_eq!(failing(&report), BTreeSet::new(), "{report:#}");
        assert_eq!(code, 0);
        // TIMEOUT is 1 s: the 3 s start-up is no part of it.
        let gave_up = figure(&report, "handshake.bounded", "gave_up");
        assert!((1000..3000).contains(&gave_up), "{gave_up} ms: {report:#}");
        assert_eq!(
            report["subject"]["protocol"],
            protocol.parse::<u64>().unwrap()
        );
        assert_eq!(
            report["subject"]["details"].is_object(),
            protocol == "2",
            "{report:#}"
        );
    }
}

/// A version 1 driver (no `hello`: it answers it with an error) is graded
/// as before, on every check, by the graces asked of it.
#[test]
fn a_version_1_driver_passes_every_check() {
    let (code, report) = check(&[EXE, "driver", "naive", "--protocol", "1"]);
    assert_all_ids(&report);
    assert_eq!(failing(&report), BTreeSet::new(), "{report:#}");
    assert_eq!(code, 0);
    assert_eq!(report["subject"]["protocol"], 1);
    assert!(report.get("hello").is_none(), "{report:#}");
    assert_eq!(report["subject"]["era"], "legacy");
}

/// A driver that cannot load its client library (node: `Cannot find
/// package`, then a stack trace) ends before it answers `hello`: the check
/// could not run (exit 2) and says the driver's own error line, whatever
/// filter was given; no report, no column of failures.
#[test]
fn a_driver_that_cannot_load_its_client_could_not_run() {
    for options in [&[][..], &["--scenarios", "scenario:lifecycle/eof"][..]] {
        let output = Command::new(env!("CARGO_BIN_EXE_mcp-conformance"))
            .args(["client", "--json"])
            .args(options)
            .arg("--")
            .args([EXE, "driver", "naive", "--cannot-load"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(output.stdout.is_empty(), "no report: {stderr}");
        assert!(
            stderr.contains("the driver ended before it answered `hello` (exit status 1)"),
            "{stderr}"
        );
        assert!(
            stderr.contains("Error [ERR_MODULE_NOT_FOUND]: Cannot find package '@example/mcp-sdk'"),
            "{stderr}"
        );
    }
}

/// A client that starts its servers as session leaders (the Python SDK
/// does) gives them no way to leave their group: `setpgid` fails with
/// EPERM. The `left-group-*` scenarios do not apply to it: each row is a
/// skip that says why, from the fixture's ledger, not a FAIL after a wait
/// for a `left_group` that never comes; and a skip fails nothing.
#[test]
fn a_session_leader_client_gets_skips_on_the_left_group_scenarios() {
    let naive = [EXE, "driver", "naive", "--mode", "session-leader"];
    let (code, report) = check_scenarios("scenario:lifecycle/left-group", &naive);
    let rows = report["checks"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{report:#}");
    for row in rows {
        assert_eq!(row["verdict"], "skip", "{row}");
        let summary = row["summary"].as_str().unwrap();
        assert!(
            summary.contains("precondition does not hold")
                && summary.contains("left_group_failed")
                && summary.contains("Operation not permitted"),
            "{summary}"
        );
    }
    assert_eq!(code, 0, "{report:#}");
}

/// A client that never reads the server's stderr and then closes its end:
/// the server's writes fail, so it goes on and answers. Its ledger records
/// the bytes it could really write and that the flood was cut short, and
/// `stderr.drained` fails on that (it passed before: the ledger recorded
/// the whole flood as written).
#[test]
fn closing_the_servers_stderr_instead_of_reading_it_fails_stderr_drained() {
    let report = naive(Some("unread-stderr"), &["stderr.drained"]);
    let drained = summary(&report, "stderr.drained");
    assert!(
        drained.contains("stopped reading the server's stderr")
            && drained.contains("of 4194304 bytes before its handshake answer"),
        "{drained}"
    );
}

/// A client that closes correctly but never reaps its server leaves a
/// zombie: `exit.clean` fails on it alone, told by the observer's zombie
/// detector (with `process/src/table.rs`'s `state` blind, this fails).
#[test]
fn never_reaping_the_server_fails_exit_clean() {
    let report = naive(Some("zombie"), &["exit.clean"]);
    let clean = summary(&report, "exit.clean");
    assert!(clean.contains("zombie"), "{clean}");
}
