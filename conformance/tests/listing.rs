//! The scenario harness as nextest sees it: every scenario file is listed as
//! its own test, by the name `scenarios::<group>/<name>`, and each scenario
//! that applies to external clients once more as
//! `scenarios::external/<group>/<name>`; nothing else.

use mcp_conformance::{discover_scenarios, load_scenario, scenarios_root};

#[test]
fn nextest_lists_every_scenario_under_its_name() {
    // Without the test crate's own cargo variables: with them, ring's build
    // script would see a changed environment, rebuild, and relink binaries
    // that other tests are running.
    let mut command = mcp_fixtures::locate::cargo_command();
    let output = command
        // `--workspace`, as the test command builds: listing one package alone
        // unifies features differently and would rebuild half the tree.
        .args([
            "nextest",
            "list",
            "--workspace",
            "-E",
            "binary_id(mcp-conformance::scenarios)",
        ])
        .args(["--message-format", "json"])
        .current_dir(scenarios_root().parent().unwrap())
        .output()
        .expect("cargo nextest runs (cargo xtask test installs it)");
    assert!(
        output.status.success(),
        "cargo nextest list failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let listing: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("nextest's JSON listing");
    let suite = &listing["rust-suites"]["mcp-conformance::scenarios"];
    let mut listed: Vec<String> = suite["testcases"]
        .as_object()
        .expect("the scenarios suite is listed")
        .keys()
        .cloned()
        .collect();
    listed.sort();

    let found = discover_scenarios(&scenarios_root()).unwrap();
    let mut expected: Vec<String> = found
        .iter()
        .map(|(name, _)| format!("scenarios::{name}"))
        .collect();
    assert!(
        expected.len() >= 40,
        "the suite has its scenarios: {}",
        expected.len()
    );
    let external: Vec<String> = found
        .iter()
        .filter(|(_, file)| load_scenario(file).unwrap().applies_to_external())
        .map(|(name, _)| format!("scenarios::external/{name}"))
        .collect();
    assert!(
        external.len() >= 20,
        "the lifecycle, failure and streams scenarios run through a driver: {}",
        external.len()
    );
    expected.extend(external);
    expected.sort();
    assert_eq!(listed, expected);
    for name in &listed {
        assert!(!name.contains(": "), "nextest splits on \": \": {name}");
        assert!(!name.contains('\\'), "forward slashes only: {name}");
    }
}

#[test]
fn every_scenario_file_loads() {
    let mut errors = Vec::new();
    for (_, file) in discover_scenarios(&scenarios_root()).unwrap() {
        if let Err(error) = load_scenario(&file) {
            errors.push(error.to_string());
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}
