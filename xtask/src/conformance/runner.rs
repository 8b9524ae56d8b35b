//! Drives the scenario runner (`mcp-conformance`'s `scenarios` test) through
//! cargo: building it, listing its scenarios, running them.

use std::{collections::BTreeSet, path::Path, process::Stdio};

use anyhow::{Context, Result, bail};

use super::{cli::Options, verdict::Selection};
use crate::{cargo, run_checked};

const PACKAGE: &str = "mcp-conformance";
const TEST: &str = "scenarios";
/// Every trial name starts with this; scenario names are what follows.
const PREFIX: &str = "scenarios::";
/// Where the runner writes one result file per scenario.
pub const RESULTS_ENV: &str = "MCP_CONFORMANCE_RESULTS_DIR";

/// Builds the fixture servers and the runner, with cargo's progress on
/// stderr. `cargo nextest` builds with the same profile, so it reuses this.
pub fn build() -> Result<()> {
    let mut fixtures = cargo();
    fixtures.args(["build", "--package", "mcp-fixtures", "--bins"]);
    run_checked(fixtures, "building the fixtures")?;
    let mut runner = cargo();
    runner.args(["test", "--package", PACKAGE, "--test", TEST, "--no-run"]);
    run_checked(runner, "building the scenario runner")
}

/// Asks the runner which scenarios exist and which of them `options`
/// selects, using the same filter semantics as the run itself.
pub fn list(options: &Options) -> Result<Selection> {
    if options.nextest {
        let mut list = cargo();
        list.args(list_args(options));
        return parse_nextest_list(&output(list, "listing the scenarios (cargo nextest list)")?);
    }
    let libtest_list = |filter: Option<&str>| -> Result<BTreeSet<String>> {
        let mut list = cargo();
        list.args(list_args(&Options {
            filter: filter.map(str::to_owned),
            ..Options::default()
        }));
        parse_libtest_list(&output(list, "listing the scenarios")?)
    };
    let all = libtest_list(None)?;
    let selected = match &options.filter {
        Some(filter) => libtest_list(Some(filter))?,
        None => all.clone(),
    };
    Ok(Selection { all, selected })
}

/// Runs the selected scenarios with their results written to
/// `results_dir`. Returns whether the runner succeeded, which is not the
/// verdict: a failing scenario makes it fail too.
pub fn run(options: &Options, results_dir: &Path) -> Result<bool> {
    let mut run = cargo();
    // The runner's progress goes to stderr: stdout is for the summary.
    run.args(run_args(options))
        .env(RESULTS_ENV, results_dir)
        .stdout(std::io::stderr());
    let status = run.status().context("cannot run the scenario runner")?;
    Ok(status.success())
}

/// cargo's arguments for listing: with nextest, every scenario with its
/// match status under the filter and partition; without, libtest's terse
/// list of the scenarios matching the filter.
fn list_args(options: &Options) -> Vec<String> {
    let mut args: Vec<String> = if options.nextest {
        let mut args = vec![
            "nextest",
            "list",
            "--cargo-quiet",
            "--package",
            PACKAGE,
            "--test",
            TEST,
        ];
        args.extend(["--message-format", "json"]);
        args.into_iter().map(str::to_owned).collect()
    } else {
        [
            "test",
            "--quiet",
            "--package",
            PACKAGE,
            "--test",
            TEST,
            "--",
            "--list",
            "--format",
            "terse",
        ]
        .map(str::to_owned)
        .to_vec()
    };
    if let Some(partition) = &options.partition {
        args.extend(["--partition".to_owned(), partition.clone()]);
    }
    args.extend(options.filter.clone());
    args
}

/// cargo's arguments for the run. Under nextest, `--no-fail-fast`: every
/// selected scenario must run for the report to be complete.
fn run_args(options: &Options) -> Vec<String> {
    let mut args: Vec<String> = if options.nextest {
        [
            "nextest",
            "run",
            "--package",
            PACKAGE,
            "--test",
            TEST,
            "--no-fail-fast",
        ]
        .map(str::to_owned)
        .to_vec()
    } else {
        ["test", "--package", PACKAGE, "--test", TEST, "--"]
            .map(str::to_owned)
            .to_vec()
    };
    if let Some(partition) = &options.partition {
        args.extend(["--partition".to_owned(), partition.clone()]);
    }
    args.extend(options.filter.clone());
    args
}

/// Runs `command` and returns its stdout; its stderr goes to ours.
fn output(mut command: std::process::Command, what: &str) -> Result<String> {
    let output = command
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("cannot run {what}"))?;
    if !output.status.success() {
        bail!("{what} failed ({})", output.status);
    }
    String::from_utf8(output.stdout).with_context(|| format!("{what} printed non-UTF-8 output"))
}

/// Scenario names from libtest's `--list --format terse` (`NAME: test`).
fn parse_libtest_list(stdout: &str) -> Result<BTreeSet<String>> {
    stdout
        .lines()
        .filter_map(|line| line.strip_suffix(": test"))
        .map(scenario_name)
        .collect()
}

/// All scenarios and the selected ones from `cargo nextest list
/// --message-format json`: a test is selected when its filter match status
/// is `matches` (not excluded by the filter, the partition, or `#[ignore]`).
fn parse_nextest_list(stdout: &str) -> Result<Selection> {
    let list: serde_json::Value =
        serde_json::from_str(stdout).context("cannot parse `cargo nextest list` JSON output")?;
    let suites = list["rust-suites"]
        .as_object()
        .context("`cargo nextest list` output has no `rust-suites`")?;
    let mut selection = Selection::default();
    for suite in suites.values() {
        let Some(cases) = suite["testcases"].as_object() else {
            continue;
        };
        for (name, case) in cases {
            let name = scenario_name(name)?;
            if case["filter-match"]["status"] == "matches" {
                selection.selected.insert(name.clone());
            }
            selection.all.insert(name);
        }
    }
    Ok(selection)
}

fn scenario_name(trial: &str) -> Result<String> {
    match trial.strip_prefix(PREFIX) {
        Some(name) if !name.is_empty() => Ok(name.to_owned()),
        _ => bail!("the runner lists a trial named `{trial}`, not `{PREFIX}<group>/<name>`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libtest_list() {
        let stdout = "scenarios::lifecycle/eof-close: test\nscenarios::failure/dead: test\n\n";
        let names = parse_libtest_list(stdout).unwrap();
        assert_eq!(
            names.into_iter().collect::<Vec<_>>(),
            ["failure/dead", "lifecycle/eof-close"]
        );
        let error = parse_libtest_list("other: test\n").unwrap_err().to_string();
        assert_eq!(
            error,
            "the runner lists a trial named `other`, not `scenarios::<group>/<name>`"
        );
    }

    #[test]
    fn nextest_list() {
        // Trimmed from real `cargo nextest list --message-format json` output.
        let stdout = r#"{"test-count": 3, "rust-suites": {"mcp-conformance::scenarios": {
            "binary-id": "mcp-conformance::scenarios", "testcases": {
              "scenarios::failure/dead-child": {"kind": "test", "ignored": false,
                "filter-match": {"status": "mismatch", "reason": "string"}},
              "scenarios::lifecycle/eof-close": {"kind": "test", "ignored": false,
                "filter-match": {"status": "matches"}},
              "scenarios::lifecycle/sigterm": {"kind": "test", "ignored": false,
                "filter-match": {"status": "mismatch", "reason": "partition"}}}}}}"#;
        let selection = parse_nextest_list(stdout).unwrap();
        assert_eq!(selection.all.len(), 3);
        assert_eq!(
            selection.selected.into_iter().collect::<Vec<_>>(),
            ["lifecycle/eof-close"]
        );
    }

    #[test]
    fn cargo_arguments() {
        let plain = Options {
            filter: Some("lifecycle/".into()),
            ..Options::default()
        };
        assert_eq!(
            run_args(&plain).join(" "),
            "test --package mcp-conformance --test scenarios -- lifecycle/"
        );
        assert_eq!(
            list_args(&plain).join(" "),
            "test --quiet --package mcp-conformance --test scenarios -- --list --format terse lifecycle/"
        );
        let sharded = Options {
            nextest: true,
            partition: Some("count:2/2".into()),
            ..plain
        };
        assert_eq!(
            run_args(&sharded).join(" "),
            "nextest run --package mcp-conformance --test scenarios --no-fail-fast --partition count:2/2 lifecycle/"
        );
        assert_eq!(
            list_args(&sharded).join(" "),
            "nextest list --cargo-quiet --package mcp-conformance --test scenarios --message-format json \
             --partition count:2/2 lifecycle/"
        );
    }
}
