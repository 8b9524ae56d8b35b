//! The external subject grades what it observes: this project's
//! deliberately broken driver (`mcp-driver-naive --mode ...`) run through
//! the scenario runner fails exactly the checks its mistake breaks, and the
//! same driver without a mistake passes. (The scenarios harness runs every
//! applicable scenario through the correct Rust driver.)

use mcp_conformance::{runner, scenario, scenarios_root};

/// The ids of the failed checks of `scenario` run through the naive driver
/// in `mode` (`None`: no mistake), without the scenario's name.
fn failed(name: &str, mode: Option<&str>) -> Vec<String> {
    let file = scenarios_root().join(format!("{name}.yaml"));
    let scenario = scenario::load(&file).unwrap();
    assert!(scenario.applies_to_external(), "{name}");
    let mut driver = vec![env!("CARGO_BIN_EXE_mcp-driver-naive").to_owned()];
    if let Some(mode) = mode {
        driver.extend(["--mode".to_owned(), mode.to_owned()]);
    }
    let run = runner::run_external(&format!("external/{name}"), &scenario, &driver);
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
