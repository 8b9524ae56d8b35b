//! `report.json`: the scenario run as the one report model (schema 2, see
//! [`crate::model`] and docs/conformance-report.md). Deterministic: sorted
//! by scenario name, no timestamps or paths of this machine; only durations
//! vary between runs.
//!
//! A scenario is one check: `pass` → `pass`; `fail` → `fail`, or `error`
//! when the runner wrote no result file; an expected failure → `warn` with
//! its `baseline` entry; a stale entry → `fail` with `baseline.stale`. The
//! scenario's own checks are its rows.

use serde_json::{Map, Value};

use crate::{
    model::{self, BaselineEntry, Check, Environment, Figure, Kind, Row, Subject, Verdict},
    verdict::{Entry, Report, Status, plural},
};

/// The client the scenarios run: the harness's reference client.
const REFERENCE_CLIENT: &str = "mcp-stdio-client";

/// The scenario run as the one report model.
pub fn model(report: &Report) -> model::Report {
    let checks = report
        .entries
        .iter()
        .map(|entry| check(report, entry))
        .collect();
    let subject = Subject {
        name: Some(REFERENCE_CLIENT.to_owned()),
        ..Subject::default()
    };
    let mut document = model::Report::new(
        Kind::Scenarios,
        Environment::current(env!("CARGO_PKG_VERSION")),
        subject,
        report.ok(),
        checks,
    );
    let text = |value: Option<&str>| value.map_or(Value::Null, Value::from);
    document.settings = Map::from_iter([
        ("runner".to_owned(), Value::from(report.run.runner())),
        ("filter".to_owned(), text(report.run.filter.as_deref())),
        (
            "partition".to_owned(),
            text(report.run.partition.as_deref()),
        ),
        (
            "expected_failures".to_owned(),
            text(report.baseline.as_deref()),
        ),
    ]);
    document.problems = report.problems.clone();
    document
}

/// One scenario as a check.
fn check(report: &Report, entry: &Entry) -> Check {
    let result = &entry.result;
    let failure_line = || {
        result
            .failure
            .as_deref()
            .unwrap_or_default()
            .lines()
            .find(|line| !line.trim().is_empty())
            .unwrap_or("failed")
            .to_owned()
    };
    let reason = entry.expected_reason.clone().unwrap_or_default();
    let (verdict, summary, fix) = match entry.status {
        Status::Pass => (
            Verdict::Pass,
            format!("{} passed", plural(result.checks.len(), "check")),
            None,
        ),
        Status::Fail if entry.result_missing => (Verdict::Error, failure_line(), None),
        Status::Fail => (Verdict::Fail, failure_line(), None),
        Status::ExpectedFailure => (Verdict::Warn, format!("expected failure: {reason}"), None),
        Status::Stale => {
            let baseline = report.baseline.as_deref().unwrap_or("the baseline");
            (
                Verdict::Fail,
                format!("stale: passed, but {baseline} expects it to fail ({reason})"),
                Some(format!("remove the entry from {baseline}")),
            )
        }
    };
    let mut check = Check::new(result.name.clone(), verdict, summary);
    check.fix = fix;
    check.description = Some(result.description.clone()).filter(|d| !d.is_empty());
    check.rules = result.rules.clone();
    check
        .figures
        .insert("duration".to_owned(), Figure::ms(result.duration_ms));
    check.rows = result
        .checks
        .iter()
        .map(|row| Row {
            id: row.id.clone(),
            verdict: if row.passed {
                Verdict::Pass
            } else {
                Verdict::Fail
            },
            summary: row.message.clone(),
        })
        .collect();
    check.failure = result.failure.clone();
    check.baseline = entry.expected_reason.as_ref().map(|reason| BaselineEntry {
        reason: reason.clone(),
        stale: entry.status == Status::Stale,
    });
    check
}

/// Renders report.json, pretty-printed, with a final newline.
pub fn render(report: &Report) -> String {
    model(report).to_json()
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::{
        test_support::{passed, sample_report, selection},
        verdict::RunInfo,
    };

    #[test]
    fn report_json_shape() {
        let report = sample_report();
        let value: Value = serde_json::from_str(&render(&report)).unwrap();
        assert_eq!(value["schema"], 2);
        assert_eq!(value["kind"], "scenarios");
        assert_eq!(value["environment"]["tool"], "mcp-conformance");
        assert_eq!(value["environment"]["os"], std::env::consts::OS);
        assert_eq!(
            value["subject"],
            json!({"args": 0, "name": "mcp-stdio-client"})
        );
        assert_eq!(
            value["settings"],
            json!({"runner": "cargo-test", "filter": null, "partition": null,
                   "expected_failures": "ci/expected-failures.yaml"})
        );
        assert_eq!(value["verdict"], "fail");
        assert_eq!(
            value["totals"],
            json!({"checks": 5, "pass": 2, "fail": 2, "warn": 1, "skip": 0, "info": 0, "error": 0})
        );
        assert!(value.get("problems").is_none());

        let ids: Vec<&str> = value["checks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap())
            .collect();
        assert_eq!(
            ids,
            [
                "lifecycle/eof-close",
                "lifecycle/known",
                "lifecycle/stale",
                "lifecycle/wedged",
                "redaction/argv-<&>\"'"
            ]
        );
        assert_eq!(
            value["checks"][0],
            json!({
                "id": "lifecycle/eof-close",
                "verdict": "pass",
                "required": true,
                "summary": "2 checks passed",
                "description": "synthetic lifecycle/eof-close",
                "rules": ["4.close.eof"],
                "figures": {"duration": {"value": 120, "unit": "ms"}},
                "rows": [
                    {"id": "lifecycle/eof-close::close.path", "verdict": "pass", "summary": "close ended by eof"},
                    {"id": "lifecycle/eof-close::close.time", "verdict": "pass", "summary": "< grace"}
                ]
            })
        );
        let known = &value["checks"][1];
        assert_eq!(known["verdict"], "warn");
        assert_eq!(
            known["baseline"],
            json!({"reason": "client ignores SIGTERM", "stale": false})
        );
        assert_eq!(known["failure"], "sigterm ignored");
        let stale = &value["checks"][2];
        assert_eq!(stale["verdict"], "fail");
        assert_eq!(stale["baseline"]["stale"], true);
        assert_eq!(
            stale["fix"],
            "remove the entry from ci/expected-failures.yaml"
        );
        let wedged = &value["checks"][3];
        assert_eq!(wedged["verdict"], "fail");
        assert_eq!(
            wedged["summary"],
            "expected close by \"eof\", got <sigkill> & more"
        );
        assert_eq!(wedged["rows"][1]["verdict"], "fail");
        assert!(wedged["failure"].as_str().unwrap().contains("\u{1b}[31m"));
    }

    #[test]
    fn a_missing_result_file_is_an_error() {
        let selection = selection(&["a/pass", "a/crashed"], None);
        let report = Report::new(RunInfo::default(), &selection, vec![passed("a/pass")], None);
        let model = model(&report);
        assert_eq!(model.checks[0].id, "a/crashed");
        assert_eq!(model.checks[0].verdict, Verdict::Error);
        assert!(model.checks[0].fails());
        assert_eq!(model.verdict, Verdict::Fail);
        assert_eq!(model.totals.error, 1);
    }

    #[test]
    fn the_model_reads_back_what_it_wrote() {
        let model = model(&sample_report());
        let back: model::Report = serde_json::from_str(&model.to_json()).unwrap();
        assert_eq!(back, model);
    }

    #[test]
    fn identical_runs_render_identically() {
        assert_eq!(render(&sample_report()), render(&sample_report()));
        assert!(render(&sample_report()).ends_with("}\n"));
    }
}
