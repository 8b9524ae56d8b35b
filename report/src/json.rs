//! `report.json`: the machine-readable report (schema 1, see
//! docs/conformance-report.md). Deterministic: sorted by scenario name, no
//! timestamps or paths of this machine; only durations vary between runs.

use serde::Serialize;

use crate::{
    results::Check,
    verdict::{Report, Totals},
};

/// The report.json schema version; bump it when a field is removed or its
/// meaning changes (adding a field does not).
pub const REPORT_SCHEMA: u32 = 1;

#[derive(Serialize)]
struct Document<'a> {
    schema: u32,
    tool: &'static str,
    generated_by: &'static str,
    run: Run<'a>,
    verdict: &'static str,
    totals: JsonTotals,
    problems: &'a [String],
    scenarios: Vec<Scenario<'a>>,
}

#[derive(Serialize)]
struct Run<'a> {
    runner: &'static str,
    filter: Option<&'a str>,
    partition: Option<&'a str>,
    expected_failures: Option<&'a str>,
}

#[derive(Serialize)]
struct JsonTotals {
    scenarios: usize,
    passed: usize,
    failed: usize,
    expected_failures: usize,
    stale: usize,
    checks: usize,
    checks_failed: usize,
    duration_ms: u64,
}

impl From<Totals> for JsonTotals {
    fn from(totals: Totals) -> Self {
        let Totals {
            scenarios,
            passed,
            failed,
            expected_failures,
            stale,
            checks,
            checks_failed,
            duration_ms,
        } = totals;
        Self {
            scenarios,
            passed,
            failed,
            expected_failures,
            stale,
            checks,
            checks_failed,
            duration_ms,
        }
    }
}

#[derive(Serialize)]
struct Scenario<'a> {
    name: &'a str,
    group: &'a str,
    description: &'a str,
    rules: &'a [String],
    result: &'static str,
    passed: bool,
    result_file: bool,
    expected_failure_reason: Option<&'a str>,
    duration_ms: u64,
    checks: &'a [Check],
    failure: Option<&'a str>,
}

/// Renders report.json, pretty-printed, with a final newline.
pub fn render(report: &Report) -> String {
    let document = Document {
        schema: REPORT_SCHEMA,
        tool: "mcp-conformance",
        generated_by: "cargo xtask conformance",
        run: Run {
            runner: report.run.runner(),
            filter: report.run.filter.as_deref(),
            partition: report.run.partition.as_deref(),
            expected_failures: report.baseline.as_deref(),
        },
        verdict: if report.ok() { "pass" } else { "fail" },
        totals: report.totals().into(),
        problems: &report.problems,
        scenarios: report
            .entries
            .iter()
            .map(|entry| Scenario {
                name: &entry.result.name,
                group: entry.group(),
                description: &entry.result.description,
                rules: &entry.result.rules,
                result: entry.status.key(),
                passed: entry.result.passed,
                result_file: !entry.result_missing,
                expected_failure_reason: entry.expected_reason.as_deref(),
                duration_ms: entry.result.duration_ms,
                checks: &entry.result.checks,
                failure: entry.result.failure.as_deref(),
            })
            .collect(),
    };
    let mut text = serde_json::to_string_pretty(&document).expect("the report serializes");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::test_support::sample_report;

    #[test]
    fn report_json_shape() {
        let report = sample_report();
        let value: Value = serde_json::from_str(&render(&report)).unwrap();
        assert_eq!(value["schema"], 1);
        assert_eq!(value["tool"], "mcp-conformance");
        assert_eq!(value["generated_by"], "cargo xtask conformance");
        assert_eq!(
            value["run"],
            json!({"runner": "cargo-test", "filter": null, "partition": null,
                   "expected_failures": "ci/expected-failures.yaml"})
        );
        assert_eq!(value["verdict"], "fail");
        assert_eq!(
            value["totals"],
            json!({"scenarios": 5, "passed": 2, "failed": 1, "expected_failures": 1, "stale": 1,
                   "checks": 6, "checks_failed": 2, "duration_ms": 2656})
        );
        assert_eq!(value["problems"], json!([]));

        let names: Vec<&str> = value["scenarios"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "lifecycle/eof-close",
                "lifecycle/known",
                "lifecycle/stale",
                "lifecycle/wedged",
                "redaction/argv-<&>\"'"
            ]
        );
        assert_eq!(
            value["scenarios"][0],
            json!({
                "name": "lifecycle/eof-close",
                "group": "lifecycle",
                "description": "synthetic lifecycle/eof-close",
                "rules": ["4.close.eof"],
                "result": "pass",
                "passed": true,
                "result_file": true,
                "expected_failure_reason": null,
                "duration_ms": 120,
                "checks": [
                    {"id": "lifecycle/eof-close::close.path", "passed": true, "message": "close ended by eof"},
                    {"id": "lifecycle/eof-close::close.time", "passed": true, "message": "< grace"}
                ],
                "failure": null
            })
        );
        assert_eq!(value["scenarios"][1]["result"], "expected-failure");
        assert_eq!(
            value["scenarios"][1]["expected_failure_reason"],
            "client ignores SIGTERM"
        );
        assert_eq!(value["scenarios"][2]["result"], "stale");
        assert_eq!(value["scenarios"][3]["result"], "fail");
        assert!(
            value["scenarios"][3]["failure"]
                .as_str()
                .unwrap()
                .contains("\u{1b}[31m")
        );
    }

    #[test]
    fn identical_runs_render_identically() {
        assert_eq!(render(&sample_report()), render(&sample_report()));
        assert!(render(&sample_report()).ends_with("}\n"));
    }
}
