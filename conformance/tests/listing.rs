//! The scenario harness as nextest sees it: every scenario file is listed as
//! its own test, by the name `scenarios::<group>/<name>`, and nothing else.

use std::process::Command;

use mcp_conformance::{scenario, scenarios_root};

#[test]
fn nextest_lists_every_scenario_under_its_name() {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args(["nextest", "list", "--package", "mcp-conformance", "--test", "scenarios"])
        .args(["--message-format", "json"])
        .current_dir(scenarios_root().parent().unwrap())
        .output()
        .expect("cargo nextest runs (cargo xtask test installs it)");
    assert!(
        output.status.success(),
        "cargo nextest list failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let listing: serde_json::Value = serde_json::from_slice(&output.stdout).expect("nextest's JSON listing");
    let suite = &listing["rust-suites"]["mcp-conformance::scenarios"];
    let mut listed: Vec<String> = suite["testcases"]
        .as_object()
        .expect("the scenarios suite is listed")
        .keys()
        .cloned()
        .collect();
    listed.sort();

    let expected: Vec<String> = scenario::discover(&scenarios_root())
        .unwrap()
        .into_iter()
        .map(|(name, _)| format!("scenarios::{name}"))
        .collect();
    assert!(expected.len() >= 40, "the suite has its scenarios: {}", expected.len());
    assert_eq!(listed, expected);
    for name in &listed {
        assert!(!name.contains(": "), "nextest splits on \": \": {name}");
        assert!(!name.contains('\\'), "forward slashes only: {name}");
    }
}

#[test]
fn every_scenario_file_loads() {
    let mut errors = Vec::new();
    for (_, file) in scenario::discover(&scenarios_root()).unwrap() {
        if let Err(error) = scenario::load(&file) {
            errors.push(error.to_string());
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}
