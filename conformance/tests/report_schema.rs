//! The scenario report of real scenario runs validates against the
//! published schema (`report/schema/report-v2.schema.json`): the runner in
//! process, its results judged and rendered as `cargo xtask conformance`
//! does, without a nested cargo. The other modes' real reports are checked
//! against the schema by their own tests: every report `server_check.rs`,
//! `client_check.rs` and `client_host.rs` read goes through
//! `of_the_schema`.

use std::{collections::BTreeSet, time::Instant};

use mcp_conformance::{load_scenario, run_scenario, scenarios_root};
use mcp_conformance_report::{
    baseline::Baseline,
    json,
    results::{RESULT_SCHEMA, ScenarioResult},
    schema,
    verdict::{Report, RunInfo, Selection},
};
use serde_json::Value;

/// Two real scenario runs, a third scenario selected that wrote no result
/// (as when its trial crashed), and a baseline expecting a passing one to
/// fail: the report.json `cargo xtask conformance` writes of them.
#[test]
fn a_scenario_report_matches_the_schema() {
    let names = ["lifecycle/eof-close", "lifecycle/sigterm-escalation"];
    let results: Vec<ScenarioResult> = names
        .iter()
        .map(|name| {
            let file = scenarios_root().join(format!("{name}.yaml"));
            let scenario = load_scenario(&file).expect("the scenario loads");
            let start = Instant::now();
            // The result file the scenario runner writes of a trial.
            let run = run_scenario(name, &scenario);
            ScenarioResult {
                schema: RESULT_SCHEMA,
                name: (*name).to_owned(),
                description: scenario.description.clone(),
                rules: scenario.rules.clone(),
                passed: run.passed(),
                duration_ms: start.elapsed().as_millis() as u64,
                checks: run.checks.clone(),
                failure: (!run.passed()).then(|| run.failures()),
            }
        })
        .collect();
    assert!(results.iter().all(|r| r.passed), "{results:#?}");
    let crashed = "lifecycle/close-after-crash";
    let all: BTreeSet<String> = names
        .iter()
        .chain([&crashed])
        .map(|n| n.to_string())
        .collect();
    let selection = Selection {
        selected: all.clone(),
        all,
    };
    let baseline = Baseline::parse(
        "expected_failures:\n  - scenario: lifecycle/eof-close\n    reason: a stale entry\n",
        "ci/expected.yaml",
    )
    .unwrap();
    let run = RunInfo {
        filter: Some("lifecycle/".into()),
        ..RunInfo::default()
    };
    let report = Report::new(run, &selection, results, Some(&baseline));
    let text = json::render(&report);
    let value: Value = serde_json::from_str(&text).unwrap();
    if let Err(errors) = schema::validate(&value) {
        panic!("report.json does not match the schema: {errors:#?}\n{text}");
    }
    assert_eq!(value["kind"], "scenarios");
    assert_eq!(value["verdict"], "fail");
    assert_eq!(value["settings"]["filter"], "lifecycle/");
    let verdicts: Vec<(&str, &str)> = value["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["id"].as_str().unwrap(), c["verdict"].as_str().unwrap()))
        .collect();
    assert_eq!(
        verdicts,
        [
            (crashed, "error"),
            ("lifecycle/eof-close", "fail"),
            ("lifecycle/sigterm-escalation", "pass"),
        ]
    );
    let stale = &value["checks"][1];
    assert_eq!(stale["baseline"]["stale"], true, "{stale:#}");
    assert!(
        stale["rows"]
            .as_array()
            .is_some_and(|rows| !rows.is_empty())
    );
    assert_eq!(stale["figures"]["duration"]["unit"], "ms");
    assert_eq!(
        value["totals"],
        serde_json::json!({"checks": 3, "pass": 1, "fail": 1, "warn": 0, "skip": 0, "info": 0, "error": 1})
    );
}
