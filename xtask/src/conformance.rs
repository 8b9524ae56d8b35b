//! `cargo xtask conformance`: the project's main job. Builds the fixtures and
//! the scenario runner, runs the scenarios (under `cargo test` or nextest,
//! optionally one shard), judges them from the result files the runner
//! writes, applies the expected-failures baseline, and writes report.json,
//! report.xml (JUnit) and report.md. See docs/conformance-report.md.
//!
//! `run` only orchestrates; everything it decides or renders is a function
//! of data in the `mcp-conformance-report` crate, tested there without
//! running cargo.

pub(crate) mod cli;
pub(crate) mod rules;
pub(crate) mod runner;

// The judging and the reports themselves live in the report crate: this
// module only runs things and writes files.
#[cfg(test)]
use mcp_conformance_report::test_support;
use mcp_conformance_report::{baseline, contract, json, junit, markdown, results, table, verdict};

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use self::{
    baseline::Baseline,
    verdict::{Report, RunInfo, Selection},
};
use crate::{
    outcome::{no_verdict, usage},
    root,
    test::ensure_nextest,
};

/// The report files, in the report directory.
const REPORT_FILES: [&str; 3] = ["report.json", "report.xml", "report.md"];

/// The whole command. Its errors carry their exit code (docs/exit-codes.md):
/// a usage error (the command line, the baseline file, a FILTER that selects
/// nothing) 2, failed scenarios 1, anything that left no verdict 3.
pub fn run(args: Vec<String>) -> Result<()> {
    let options = match cli::parse(&args).map_err(usage)? {
        cli::Command::Help => {
            print!("{}", cli::HELP);
            return Ok(());
        }
        cli::Command::Run(options) => options,
        cli::Command::Rules => return rules::run(),
    };
    // A broken baseline fails before anything is built.
    let baseline = options
        .expected_failures
        .as_deref()
        .map(Baseline::load)
        .transpose()
        .map_err(usage)?;
    let report = judge(&options, baseline.as_ref()).map_err(no_verdict)?;
    // The one error that is a verdict: scenarios failed (or went stale).
    Ok(report.verdict()?)
}

/// Builds, runs and judges; prints the table and writes the reports.
fn judge(options: &cli::Options, baseline: Option<&Baseline>) -> Result<Report> {
    let report_dir = match &options.report_dir {
        Some(dir) => std::path::absolute(dir)
            .with_context(|| format!("bad report directory {}", dir.display()))
            .map_err(usage)?,
        None => root().join("target").join("conformance"),
    };
    let info = options.run_info();

    if options.nextest {
        ensure_nextest()?;
    }
    runner::build()?;
    // Cleared before anything can fail, so no report of an earlier run is
    // left behind to be mistaken for this one's.
    let results_dir = prepare_report_dir(&report_dir)?;
    let selection = runner::list(options)?;
    verdict::check_selection(&info, &selection).map_err(|error| {
        // A FILTER that selects nothing is the command line's; a runner
        // that lists nothing is broken.
        let error = anyhow::Error::from(error);
        if selection.all.is_empty() {
            error
        } else {
            usage(error)
        }
    })?;

    eprintln!(
        "running {} under {} ({}={})",
        verdict::plural(selection.selected.len(), "scenario"),
        info.runner(),
        runner::RESULTS_ENV,
        results_dir.display()
    );
    let runner_succeeded = runner::run(options, &results_dir)?;
    let report = evaluate(info, &selection, &results_dir, runner_succeeded, baseline)?;

    print!("{}", table::render(&report));
    write_reports(&report, &report_dir)?;
    eprintln!(
        "reports: {}/{{{}}}",
        report_dir.display(),
        REPORT_FILES.join(",")
    );
    Ok(report)
}

/// Empties `<report_dir>/results` and removes earlier reports; returns the
/// results directory.
fn prepare_report_dir(report_dir: &Path) -> Result<PathBuf> {
    let results_dir = report_dir.join("results");
    if results_dir.exists() {
        std::fs::remove_dir_all(&results_dir)
            .with_context(|| format!("cannot empty {}", results_dir.display()))?;
    }
    std::fs::create_dir_all(&results_dir)
        .with_context(|| format!("cannot create {}", results_dir.display()))?;
    for file in REPORT_FILES {
        let path = report_dir.join(file);
        if path.exists() {
            std::fs::remove_file(&path)
                .with_context(|| format!("cannot remove {}", path.display()))?;
        }
    }
    Ok(results_dir)
}

/// Reads the result files and judges them. Fails when the runner wrote none
/// although scenarios were selected: then there is nothing to judge.
fn evaluate(
    info: RunInfo,
    selection: &Selection,
    results_dir: &Path,
    runner_succeeded: bool,
    baseline: Option<&Baseline>,
) -> Result<Report> {
    let results = results::read_dir(results_dir)?;
    verdict::check_results_present(selection.selected.len(), results.len(), runner_succeeded)?;
    Ok(Report::new(info, selection, results, baseline))
}

/// Writes report.json, report.xml and report.md into `report_dir`.
fn write_reports(report: &Report, report_dir: &Path) -> Result<()> {
    let ids = contract::rules()
        .map(|rules| rules.iter().map(|rule| rule.id.clone()).collect())
        .unwrap_or_default();
    let links = markdown::RuleLinks::new(report_dir, &root().join(contract::PATH), ids);
    // One model, three renderings.
    let model = json::model(report);
    let renders = [
        model.to_json(),
        junit::render(&model),
        markdown::render(&model, &links),
    ];
    for (file, text) in REPORT_FILES.into_iter().zip(renders) {
        let path = report_dir.join(file);
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{test_support::*, verdict::Status, *};

    fn write_result(dir: &Path, result: &results::ScenarioResult) {
        let text = serde_json::to_string(result).unwrap();
        std::fs::write(dir.join(results::file_name(&result.name)), text).unwrap();
    }

    #[test]
    fn judges_result_files_from_a_directory() {
        let report_dir = tempfile::tempdir().unwrap();
        let results_dir = prepare_report_dir(report_dir.path()).unwrap();
        write_result(&results_dir, &passed("lifecycle/eof-close"));
        write_result(&results_dir, &failed("lifecycle/known", "sigterm ignored"));
        // Not a result file: ignored.
        std::fs::write(results_dir.join("notes.txt"), "x").unwrap();

        let selection = selection(
            &["lifecycle/eof-close", "lifecycle/known", "failure/crashed"],
            None,
        );
        let baseline = baseline(&[("lifecycle/known", "client ignores SIGTERM")]);
        let report = evaluate(
            RunInfo::default(),
            &selection,
            &results_dir,
            false,
            Some(&baseline),
        )
        .unwrap();
        let statuses: Vec<_> = report
            .entries
            .iter()
            .map(|entry| (entry.result.name.as_str(), entry.status))
            .collect();
        assert_eq!(
            statuses,
            [
                ("failure/crashed", Status::Fail),
                ("lifecycle/eof-close", Status::Pass),
                ("lifecycle/known", Status::ExpectedFailure),
            ]
        );

        write_reports(&report, report_dir.path()).unwrap();
        for file in REPORT_FILES {
            assert!(report_dir.path().join(file).is_file(), "{file}");
        }
        // The report written is of the published schema.
        let text = std::fs::read_to_string(report_dir.path().join("report.json")).unwrap();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        if let Err(errors) = mcp_conformance_report::schema::validate(&value) {
            panic!("report.json does not match the schema: {errors:#?}\n{text}");
        }
        assert_eq!(value["checks"][0]["verdict"], "error", "{text}");
        // A new run starts from nothing.
        let results_dir = prepare_report_dir(report_dir.path()).unwrap();
        assert_eq!(std::fs::read_dir(&results_dir).unwrap().count(), 0);
        for file in REPORT_FILES {
            assert!(!report_dir.path().join(file).exists(), "{file}");
        }
    }

    #[test]
    fn no_result_files_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let selection = selection(&["lifecycle/eof-close"], None);
        let error = evaluate(RunInfo::default(), &selection, dir.path(), false, None).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("failed before writing any result file"),
            "{error}"
        );
    }

    #[test]
    fn bad_result_files_are_errors_naming_the_file() {
        let cases = [
            ("a__b.json", "{not json".to_owned(), "is not JSON"),
            (
                "a__b.json",
                r#"{"schema": 2, "name": "a/b"}"#.to_owned(),
                "has result schema 2",
            ),
            (
                "a__b.json",
                r#"{"schema": 1, "name": "a/b"}"#.to_owned(),
                "does not match result schema 1",
            ),
            (
                "other.json",
                serde_json::to_string(&passed("a/b")).unwrap(),
                "should be named a__b.json",
            ),
        ];
        for (file, text, message) in cases {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join(file), text).unwrap();
            let error = format!("{:#}", results::read_dir(dir.path()).unwrap_err());
            assert!(error.contains(message), "{error}");
            assert!(error.contains(file), "{error}");
        }
    }

    #[test]
    fn reads_the_documented_result_example() {
        // The example in docs/conformance-report.md and the runner's brief.
        let text = r#"{
          "schema": 1,
          "name": "lifecycle/eof-close",
          "description": "A well-behaved server ends on stdin EOF, well before EOF_GRACE.",
          "rules": ["4.close.eof"],
          "passed": true,
          "duration_ms": 123,
          "checks": [ {"id": "lifecycle/eof-close::close.path", "passed": true, "message": "close ended by eof"} ],
          "failure": null
        }"#;
        let result = results::parse(text, "example").unwrap();
        assert_eq!(result.name, "lifecycle/eof-close");
        assert_eq!(result.checks[0].id, "lifecycle/eof-close::close.path");
        assert_eq!(
            results::file_name(&result.name),
            "lifecycle__eof-close.json"
        );
    }
}
