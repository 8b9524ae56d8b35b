//! The external subject grades what it observes: this project's
//! deliberately broken driver (`mcp-conformance driver naive --mode
//! ...`) run through
//! the scenario runner fails exactly the checks its mistake breaks, and the
//! same driver without a mistake passes. (The scenarios harness runs every
//! applicable scenario through the correct Rust driver.)

use mcp_conformance::{Run, load_scenario, run_scenario_external, scenarios_root};

/// The ids of the failed checks of `scenario` run through the naive driver
/// in `mode` (`None`: no mistake), without the scenario's name.
fn failed(name: &str, mode: Option<&str>) -> Vec<String> {
    failed_ids(&run(name, mode), name, mode)
}

/// `scenario` run through the naive driver in `mode`.
fn run(name: &str, mode: Option<&str>) -> Run {
    let file = scenarios_root().join(format!("{name}.yaml"));
    let scenario = load_scenario(&file).unwrap();
    assert!(scenario.applies_to_external(), "{name}");
    let mut driver: Vec<String> = [env!("CARGO_BIN_EXE_mcp-conformance"), "driver", "naive"]
        .map(str::to_owned)
        .to_vec();
    if let Some(mode) = mode {
        driver.extend(["--mode".to_owned(), mode.to_owned()]);
    }
    run_scenario_external(&format!("external/{name}"), &scenario, &driver)
}

fn failed_ids(run: &Run, name: &str, mode: Option<&str>) -> Vec<String> {
    let mut ids: Vec<String> = run
        .checks
        .iter()
        .filter(|c| !c.passed)
        .map(|c| {
            c.id.split_once("::")
                .map_or(c.id.clone(), |(_, id)| id.to_owned())
        })
        .collect();
    ids.dedup();
    if !ids.is_empty() {
        eprintln!("{name} {mode:?}:\n{}", run.failures());
    }
    ids
}

#[test]
fn a_correct_client_passes_through_its_driver() {
    assert_eq!(
        failed("lifecycle/sigterm-escalation", None),
        Vec::<String>::new()
    );
    // Legacy era: its `notifications/initialized` is not counted against the
    // exact events the scenario expects.
    assert_eq!(failed("lifecycle/eof-close", None), Vec::<String>::new());
    // The tool's `isError` reaches the harness as the protocol's `is_error`
    // (the naive driver once answered with the raw result, and this row
    // failed for the driver's reason, not the client's).
    assert_eq!(
        failed("failure/tool-error-is-a-result", None),
        Vec::<String>::new()
    );
}

#[test]
fn a_client_that_kills_the_pid_without_eof_fails_the_path_and_the_ledger_order() {
    assert_eq!(
        failed("lifecycle/sigterm-escalation", Some("kill-pid")),
        [
            "steps[2].within",
            "steps[2].path",
            "ledger.fixture-eof-ignoring.order"
        ]
    );
}

#[test]
fn a_client_that_never_escalates_leaves_the_server_when_close_returns() {
    let ids = failed("lifecycle/sigterm-escalation", Some("no-escalation"));
    for id in [
        "steps[2].at_return.group_empty",
        "steps[2].at_return.reaped",
        "steps[2].nothing_left",
    ] {
        assert!(ids.iter().any(|i| i == id), "{id} in {ids:?}");
    }
}

/// A client that says it had not reaped its server when close returned (the
/// TypeScript SDK returns right after its SIGKILL; its driver reads Node's
/// own state in that instant) fails `at_return.reaped`, whatever the table
/// shows a moment later: the verdict does not hang on that moment.
#[test]
fn a_client_that_says_it_had_not_reaped_fails_at_return_reaped() {
    assert_eq!(
        failed("lifecycle/sigkill-escalation", Some("says-unreaped")),
        ["steps[2].at_return.reaped"]
    );
    assert_eq!(
        failed("lifecycle/sigkill-escalation", None),
        Vec::<String>::new()
    );
}

#[test]
fn a_client_that_signals_the_pid_leaves_the_sidecar() {
    let ids = failed("lifecycle/lingering-sidecar", Some("pid-signals"));
    assert!(ids.iter().any(|i| i == "steps[3].nothing_left"), "{ids:?}");
}

#[test]
fn a_client_that_exits_without_closing_leaves_the_launcher_tree() {
    let ids = failed("lifecycle/drop-without-close", Some("exit-without-close"));
    assert!(ids.iter().any(|i| i == "survivors"), "{ids:?}");
}

/// The contract has a client that is dropped close stdin and kill the group
/// (`4.drop`): one that runs its whole close ladder as its program ends
/// (EOF, SIGTERM, SIGKILL) leaves a ledger that shows those steps, and is as
/// correct as this project's client, which kills at once after the EOF.
#[test]
fn a_client_that_runs_the_close_ladder_as_it_exits_passes_the_drop_scenarios() {
    assert_eq!(
        failed("lifecycle/drop-without-close", Some("ladder-on-exit")),
        Vec::<String>::new()
    );
}

#[test]
fn a_client_that_keeps_its_servers_in_its_own_group_is_not_counted_as_a_member() {
    // The TypeScript SDK's way: no process group of the server's own, so the
    // group the harness looks at when close returns is the client's, the
    // driver in it. The driver is the client, not a member left behind.
    let run = run("lifecycle/sigterm-escalation", Some("same-group"));
    assert_eq!(
        failed_ids(&run, "lifecycle/sigterm-escalation", Some("same-group")),
        Vec::<String>::new()
    );
    let group = run
        .checks
        .iter()
        .find(|c| c.id.ends_with("at_return.group_empty"))
        .expect("the group is checked");
    assert!(
        group
            .message
            .contains("not counting the client's own process")
            && group.message.contains("in the group"),
        "{}",
        group.message
    );
}

#[test]
fn a_session_leader_client_is_skipped_on_left_group_scenarios_not_failed() {
    for name in [
        "lifecycle/left-group-sigterm",
        "lifecycle/left-group-sigkill",
        "lifecycle/left-group-sidecar-behind",
    ] {
        let run = run(name, Some("session-leader"));
        let why = run.skipped.as_deref().unwrap_or_else(|| {
            panic!(
                "{name}: not skipped; failed:\n{}",
                failed_ids(&run, name, Some("session-leader")).join("\n")
            )
        });
        assert!(
            why.contains("left_group_failed") && why.contains("Operation not permitted"),
            "{name}: {why}"
        );
        // The wait ended on the ledger's word, not on its bound.
        assert!(
            !run.checks.iter().any(|c| c.id.ends_with(".wait_ledger")),
            "{name}: {:?}",
            run.checks
        );
        assert!(!run.passed(), "a skip is not a pass");
    }
}

#[test]
fn a_client_that_closes_the_servers_stderr_fails_the_flood_scenario() {
    let ids = failed("streams/stderr-giant-line", Some("unread-stderr"));
    assert!(
        ids.iter()
            .any(|i| i == "ledger.fixture-stderr-flooding.stderr_drained"),
        "{ids:?}"
    );
}

/// The observer is proven by clients that fail on purpose: each mistake
/// must show in the verdict, with the reason the observer alone can give.
/// A blind process-table scan (no process seen, no zombie told) passes
/// every scenario with this project's own client, which leaves nothing:
/// these rows fail under it. (Mutating `process/src/table.rs` so that
/// `snapshot` returns nothing, or `state` returns `None`, fails this test.)
#[test]
fn the_observer_sees_what_failing_clients_leave() {
    // (mode, scenario, [(failed check, words its message must hold)])
    type Case<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)]);
    let cases: &[Case] = &[
        // Left running: survivors, found by the marker in the table.
        (
            "exit-without-close",
            "lifecycle/drop-without-close",
            &[("survivors", "fixture-launcher (in the group)")],
        ),
        // A grandchild left behind: the launcher's child, signalled by pid.
        (
            "pid-signals",
            "lifecycle/launcher-eof-ignoring",
            &[("nothing_left", "fixture-eof-ignoring (in the group)")],
        ),
        // Still alive when close returned.
        (
            "no-escalation",
            "lifecycle/sigterm-escalation",
            &[(
                "steps[2].nothing_left",
                "fixture-eof-ignoring (in the group)",
            )],
        ),
        // Never reaped: a zombie of the client while it runs.
        (
            "zombie",
            "lifecycle/eof-close",
            &[("zombies", "1 zombie(s), expected 0")],
        ),
    ];
    let mut missed = Vec::new();
    for (mode, name, expected) in cases {
        let run = run(name, Some(mode));
        for (id, words) in *expected {
            let seen = run.checks.iter().any(|c| {
                !c.passed
                    && c.id.rsplit("::").next().is_some_and(|i| i.ends_with(id))
                    && c.message.contains(words)
            });
            if !seen {
                missed.push(format!(
                    "{mode} on {name}: no failed `{id}` saying {words:?}; failed:\n{}",
                    run.failures()
                ));
            }
        }
    }
    assert!(missed.is_empty(), "{}", missed.join("\n\n"));
}
