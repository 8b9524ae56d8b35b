//! Turns what the runner listed and wrote into a verdict per scenario and for
//! the run: the baseline is applied here, and every inconsistency between
//! the listing, the result files and the baseline becomes a problem.

use std::collections::BTreeSet;

use crate::{Result, bail};

use crate::{baseline::Baseline, results::ScenarioResult};

/// Which scenarios the runner knows, and which of them this run selected
/// (after the filter and the partition). Names carry no `scenarios::` prefix.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// Every scenario the runner knows.
    pub all: BTreeSet<String>,
    /// Those this run selected.
    pub selected: BTreeSet<String>,
}

/// How the runner was invoked, recorded in the reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunInfo {
    /// Run by nextest (rather than `cargo test`).
    pub nextest: bool,
    /// The name filter the run was given, if any.
    pub filter: Option<String>,
    /// The partition (`count:1/2`) the run was given, if any.
    pub partition: Option<String>,
}

impl RunInfo {
    /// `cargo-test` or `nextest`.
    pub fn runner(&self) -> &'static str {
        if self.nextest {
            "nextest"
        } else {
            "cargo-test"
        }
    }

    /// " matching `x` in partition y", or "" for an unrestricted run.
    fn restriction(&self) -> String {
        let mut text = String::new();
        if let Some(filter) = &self.filter {
            text.push_str(&format!(" matching `{filter}`"));
        }
        if let Some(partition) = &self.partition {
            text.push_str(&format!(" in partition {partition}"));
        }
        text
    }
}

/// A scenario's place in the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Passed.
    Pass,
    /// Failed, and the baseline does not list it.
    Fail,
    /// Failed, and the baseline says it does.
    ExpectedFailure,
    /// Passed, but the baseline says it fails: the baseline is out of date.
    Stale,
}

impl Status {
    /// The word in the table and the Markdown report.
    pub fn label(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "FAIL",
            Status::ExpectedFailure => "expected failure",
            Status::Stale => "STALE",
        }
    }

    /// The value in report.json.
    pub fn key(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::ExpectedFailure => "expected-failure",
            Status::Stale => "stale",
        }
    }

    /// Whether this status fails the run.
    pub fn is_bad(self) -> bool {
        matches!(self, Status::Fail | Status::Stale)
    }
}

/// One scenario in the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// What the runner wrote (or a stand-in when it wrote nothing).
    pub result: ScenarioResult,
    /// Its place in the verdict.
    pub status: Status,
    /// The baseline's reason, when the scenario is listed there.
    pub expected_reason: Option<String>,
    /// True when the runner selected the scenario but wrote no result file.
    pub result_missing: bool,
}

impl Entry {
    /// `lifecycle` for `lifecycle/eof-close`; empty for a name without `/`.
    pub fn group(&self) -> &str {
        self.result
            .name
            .rsplit_once('/')
            .map_or("", |(group, _)| group)
    }

    /// `eof-close` for `lifecycle/eof-close`.
    pub fn leaf(&self) -> &str {
        self.result
            .name
            .rsplit_once('/')
            .map_or(&self.result.name, |(_, leaf)| leaf)
    }
}

/// Counts over the report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Scenarios selected.
    pub scenarios: usize,
    /// Those that passed.
    pub passed: usize,
    /// Those that failed unexpectedly.
    pub failed: usize,
    /// Those that failed as the baseline says.
    pub expected_failures: usize,
    /// Baseline entries that passed (or ran no more) and should go.
    pub stale: usize,
    /// Checks over every scenario.
    pub checks: usize,
    /// Those that failed.
    pub checks_failed: usize,
    /// The sum of the scenarios' durations (they may have run in parallel).
    pub duration_ms: u64,
}

/// The whole verdict of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// How the runner was invoked.
    pub run: RunInfo,
    /// The baseline file as the user named it.
    pub baseline: Option<String>,
    /// Sorted by scenario name.
    pub entries: Vec<Entry>,
    /// Inconsistencies that fail the run whatever the scenarios did.
    pub problems: Vec<String>,
}

impl Report {
    /// Combines the runner's listing, its result files and the baseline.
    ///
    /// A selected scenario without a result file counts as failed. A
    /// baseline entry for a scenario the runner does not know is a problem;
    /// one for a scenario this run did not select (filter, partition) is
    /// neither checked nor stale.
    pub fn new(
        run: RunInfo,
        selection: &Selection,
        results: Vec<ScenarioResult>,
        baseline: Option<&Baseline>,
    ) -> Self {
        let mut problems = Vec::new();
        let mut results = results;
        let written: BTreeSet<String> = results.iter().map(|result| result.name.clone()).collect();
        for result in &results {
            if !selection.all.contains(&result.name) {
                problems.push(format!(
                    "the runner wrote a result for `{}`, which its listing does not contain",
                    result.name
                ));
            }
        }
        for name in selection.selected.difference(&written) {
            results.push(ScenarioResult::missing(name));
        }
        results.sort_by(|a, b| a.name.cmp(&b.name));

        if let Some(baseline) = baseline {
            for scenario in baseline.entries.keys() {
                if !selection.all.contains(scenario) && !written.contains(scenario) {
                    problems.push(format!(
                        "{} lists `{scenario}`, which is not a scenario: remove or rename the entry",
                        baseline.origin
                    ));
                }
            }
        }

        let entries = results
            .into_iter()
            .map(|result| {
                let expected_reason = baseline
                    .and_then(|baseline| baseline.entries.get(&result.name))
                    .cloned();
                let status = match (result.passed, expected_reason.is_some()) {
                    (true, false) => Status::Pass,
                    (true, true) => Status::Stale,
                    (false, false) => Status::Fail,
                    (false, true) => Status::ExpectedFailure,
                };
                let result_missing = !written.contains(&result.name);
                Entry {
                    result,
                    status,
                    expected_reason,
                    result_missing,
                }
            })
            .collect();
        Self {
            run,
            baseline: baseline.map(|baseline| baseline.origin.clone()),
            entries,
            problems,
        }
    }

    /// The counts over the report.
    pub fn totals(&self) -> Totals {
        let mut totals = Totals {
            scenarios: self.entries.len(),
            ..Totals::default()
        };
        for entry in &self.entries {
            match entry.status {
                Status::Pass => totals.passed += 1,
                Status::Fail => totals.failed += 1,
                Status::ExpectedFailure => totals.expected_failures += 1,
                Status::Stale => totals.stale += 1,
            }
            totals.checks += entry.result.checks.len();
            totals.checks_failed += entry
                .result
                .checks
                .iter()
                .filter(|check| !check.passed)
                .count();
            totals.duration_ms += entry.result.duration_ms;
        }
        totals
    }

    /// Whether the run succeeds: nothing failed unexpectedly, nothing is
    /// stale, no problems, and at least one scenario ran.
    pub fn ok(&self) -> bool {
        !self.entries.is_empty()
            && self.problems.is_empty()
            && self.entries.iter().all(|entry| !entry.status.is_bad())
    }

    /// `Ok` when the run succeeds, else an error that sums up why.
    pub fn verdict(&self) -> Result<()> {
        if self.ok() {
            return Ok(());
        }
        let totals = self.totals();
        let mut reasons = Vec::new();
        if totals.failed > 0 {
            reasons.push(format!("{} failed", plural(totals.failed, "scenario")));
        }
        if totals.stale > 0 {
            let baseline = self.baseline.as_deref().unwrap_or("the baseline");
            reasons.push(format!(
                "{} passed but {baseline} expects failure (update it)",
                plural(totals.stale, "scenario")
            ));
        }
        if !self.problems.is_empty() {
            reasons.push(plural(self.problems.len(), "problem"));
        }
        if self.entries.is_empty() {
            reasons.push(format!("no scenario ran{}", self.run.restriction()));
        }
        bail!("conformance failed: {}", reasons.join(", "))
    }
}

/// Fails when the runner lists no scenario, or none for this filter and
/// partition: a run that checks nothing must not pass.
pub fn check_selection(run: &RunInfo, selection: &Selection) -> Result<()> {
    if selection.all.is_empty() {
        bail!("the scenario runner lists no scenarios: is scenarios/ empty?");
    }
    if selection.selected.is_empty() {
        bail!(
            "no scenario{} (the runner lists {}); nothing was run",
            run.restriction(),
            plural(selection.all.len(), "scenario")
        );
    }
    Ok(())
}

/// Fails when the runner was meant to run scenarios but wrote no result
/// file at all: then there is nothing to judge, and the runner's exit status
/// says whether it broke or ignored `MCP_CONFORMANCE_RESULTS_DIR`.
pub fn check_results_present(
    selected: usize,
    written: usize,
    runner_succeeded: bool,
) -> Result<()> {
    if selected == 0 || written > 0 {
        return Ok(());
    }
    if runner_succeeded {
        bail!(
            "the scenario runner succeeded but wrote no result files for {}: \
             does it honour MCP_CONFORMANCE_RESULTS_DIR?",
            plural(selected, "selected scenario")
        );
    }
    bail!(
        "the scenario runner failed before writing any result file ({} selected): \
         it did not build, or its harness crashed; see its output above",
        plural(selected, "scenario")
    )
}

/// `1 scenario`, `2 scenarios`.
pub fn plural(count: usize, noun: &str) -> String {
    if count == 1 {
        format!("{count} {noun}")
    } else {
        format!("{count} {noun}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::*;

    #[test]
    fn baseline_tolerates_failures_and_flags_stale_entries() {
        let selection = selection(&["a/pass", "a/fail", "a/known", "a/fixed"], None);
        let results = vec![
            passed("a/pass"),
            failed("a/fail", "boom"),
            failed("a/known", "still broken"),
            passed("a/fixed"),
        ];
        let baseline = baseline(&[("a/known", "client lacks X"), ("a/fixed", "was broken")]);
        let report = Report::new(RunInfo::default(), &selection, results, Some(&baseline));
        let statuses: Vec<_> = report
            .entries
            .iter()
            .map(|entry| (entry.result.name.as_str(), entry.status))
            .collect();
        assert_eq!(
            statuses,
            [
                ("a/fail", Status::Fail),
                ("a/fixed", Status::Stale),
                ("a/known", Status::ExpectedFailure),
                ("a/pass", Status::Pass),
            ]
        );
        assert!(report.problems.is_empty());
        let error = report.verdict().unwrap_err().to_string();
        assert_eq!(
            error,
            "conformance failed: 1 scenario failed, \
             1 scenario passed but ef.yaml expects failure (update it)"
        );
    }

    #[test]
    fn only_expected_failures_pass_the_run() {
        let selection = selection(&["a/pass", "a/known"], None);
        let results = vec![passed("a/pass"), failed("a/known", "still broken")];
        let baseline = baseline(&[("a/known", "client lacks X")]);
        let report = Report::new(RunInfo::default(), &selection, results, Some(&baseline));
        assert!(report.ok());
        report.verdict().unwrap();
        assert_eq!(report.totals().expected_failures, 1);
    }

    #[test]
    fn baseline_entry_for_an_unknown_scenario_is_a_problem() {
        let selection = selection(&["a/pass"], None);
        let baseline = baseline(&[("a/gone", "renamed")]);
        let report = Report::new(
            RunInfo::default(),
            &selection,
            vec![passed("a/pass")],
            Some(&baseline),
        );
        assert_eq!(
            report.problems,
            ["ef.yaml lists `a/gone`, which is not a scenario: remove or rename the entry"]
        );
        assert_eq!(
            report.verdict().unwrap_err().to_string(),
            "conformance failed: 1 problem"
        );
    }

    #[test]
    fn baseline_entry_outside_the_selection_is_neither_stale_nor_missing() {
        // `a/known` exists but the filter left it out, so it did not run.
        let selection = selection(&["a/pass", "a/known"], Some(&["a/pass"]));
        let baseline = baseline(&[("a/known", "client lacks X")]);
        let run = RunInfo {
            filter: Some("pass".into()),
            ..RunInfo::default()
        };
        let report = Report::new(run, &selection, vec![passed("a/pass")], Some(&baseline));
        assert!(report.ok(), "{report:?}");
        assert_eq!(report.entries.len(), 1);
    }

    #[test]
    fn selected_scenario_without_a_result_file_fails() {
        let selection = selection(&["a/pass", "a/crashed"], None);
        let report = Report::new(RunInfo::default(), &selection, vec![passed("a/pass")], None);
        let crashed = &report.entries[0];
        assert_eq!(crashed.result.name, "a/crashed");
        assert_eq!(crashed.status, Status::Fail);
        assert!(crashed.result_missing);
        assert!(
            crashed
                .result
                .failure
                .as_deref()
                .unwrap()
                .contains("no result file")
        );
        assert!(!report.ok());
    }

    #[test]
    fn result_for_an_unlisted_scenario_is_a_problem() {
        let selection = selection(&["a/pass"], None);
        let report = Report::new(
            RunInfo::default(),
            &selection,
            vec![passed("a/pass"), passed("b/odd")],
            None,
        );
        assert_eq!(
            report.problems,
            ["the runner wrote a result for `b/odd`, which its listing does not contain"]
        );
    }

    #[test]
    fn an_empty_selection_is_an_error_not_a_pass() {
        let run = RunInfo {
            filter: Some("nope".into()),
            partition: Some("count:1/2".into()),
            nextest: true,
        };
        let error = check_selection(&run, &selection(&["a/x", "a/y"], Some(&[]))).unwrap_err();
        assert_eq!(
            error.to_string(),
            "no scenario matching `nope` in partition count:1/2 (the runner lists 2 scenarios); nothing was run"
        );
        let error = check_selection(&RunInfo::default(), &Selection::default()).unwrap_err();
        assert!(error.to_string().contains("lists no scenarios"), "{error}");
        check_selection(&RunInfo::default(), &selection(&["a/x"], None)).unwrap();

        let report = Report::new(run, &Selection::default(), Vec::new(), None);
        assert!(!report.ok());
        assert!(
            report
                .verdict()
                .unwrap_err()
                .to_string()
                .contains("no scenario ran matching `nope`")
        );
    }

    #[test]
    fn no_result_files_at_all_is_an_error() {
        let error = check_results_present(3, 0, false).unwrap_err().to_string();
        assert!(
            error.contains("failed before writing any result file (3 scenarios selected)"),
            "{error}"
        );
        let error = check_results_present(1, 0, true).unwrap_err().to_string();
        assert!(error.contains("MCP_CONFORMANCE_RESULTS_DIR"), "{error}");
        check_results_present(3, 1, false).unwrap();
        check_results_present(0, 0, false).unwrap();
    }
}
