//! The human summary printed to stdout: a table of scenarios, the totals,
//! then each failure's text and any problems.

use std::fmt::Write;

use crate::verdict::{Entry, Report, Status, Totals, plural};

/// `123 ms` under a second, `1.23 s` from there on.
pub fn format_duration(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{}.{:02} s", ms / 1000, ms % 1000 / 10)
    }
}

/// `-` when a scenario names no rule.
pub fn format_rules(entry: &Entry) -> String {
    rules_cell(&entry.result.rules)
}

/// The rules, comma-separated; `-` for none.
pub fn rules_cell(rules: &[String]) -> String {
    if rules.is_empty() {
        "-".to_owned()
    } else {
        rules.join(", ")
    }
}

/// `5 scenarios: 3 pass, 1 FAIL, ...; 12 checks, 1 failed; 1.20 s`.
pub fn format_totals(totals: &Totals) -> String {
    format!(
        "{}: {} pass, {} FAIL, {} expected failure, {} STALE; {}, {} failed; {} in total",
        plural(totals.scenarios, "scenario"),
        totals.passed,
        totals.failed,
        totals.expected_failures,
        totals.stale,
        plural(totals.checks, "check"),
        totals.checks_failed,
        format_duration(totals.duration_ms),
    )
}

/// Renders the whole stdout summary.
pub fn render(report: &Report) -> String {
    let header = ["SCENARIO", "RULES", "RESULT", "TIME"];
    let rows: Vec<[String; 4]> = report
        .entries
        .iter()
        .map(|entry| {
            [
                entry.result.name.clone(),
                format_rules(entry),
                entry.status.label().to_owned(),
                format_duration(entry.result.duration_ms),
            ]
        })
        .collect();
    let mut widths = header.map(|cell| cell.chars().count());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }

    let mut out = String::new();
    let mut line = |cells: [&str; 4]| {
        let [name, rules, result, time] = cells;
        let [w0, w1, w2, w3] = widths;
        let row = format!("{name:<w0$}  {rules:<w1$}  {result:<w2$}  {time:>w3$}");
        out.push_str(row.trim_end());
        out.push('\n');
    };
    line(header);
    for row in &rows {
        line([&row[0], &row[1], &row[2], &row[3]]);
    }
    out.push('\n');
    out.push_str(&format_totals(&report.totals()));
    out.push('\n');

    for entry in &report.entries {
        let name = &entry.result.name;
        match entry.status {
            Status::Pass => continue,
            Status::Fail => writeln!(out, "\nFAIL {name}").unwrap(),
            Status::ExpectedFailure => {
                let reason = entry.expected_reason.as_deref().unwrap_or_default();
                writeln!(out, "\nexpected failure {name} (baseline: {reason})").unwrap();
            }
            Status::Stale => {
                let reason = entry.expected_reason.as_deref().unwrap_or_default();
                let baseline = report.baseline.as_deref().unwrap_or("the baseline");
                writeln!(
                    out,
                    "\nSTALE {name}: passed, but {baseline} expects it to fail ({reason}); remove the entry"
                )
                .unwrap();
                continue;
            }
        }
        out.push_str(&indent(
            entry
                .result
                .failure
                .as_deref()
                .unwrap_or("(no failure text)"),
            "    ",
        ));
    }

    if !report.problems.is_empty() {
        out.push_str("\nproblems:\n");
        for problem in &report.problems {
            writeln!(out, "  - {problem}").unwrap();
        }
    }
    out
}

/// Prefixes every non-empty line of `text` with `prefix`; ends with a newline.
fn indent(text: &str, prefix: &str) -> String {
    let mut out = String::new();
    for line in text.trim_end().lines() {
        if !line.trim().is_empty() {
            out.push_str(prefix);
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::sample_report;

    #[test]
    fn durations() {
        assert_eq!(format_duration(0), "0 ms");
        assert_eq!(format_duration(999), "999 ms");
        assert_eq!(format_duration(1000), "1.00 s");
        assert_eq!(format_duration(61_239), "61.23 s");
    }

    #[test]
    fn table_totals_and_failure_details() {
        let expected = "\
SCENARIO              RULES                 RESULT              TIME
lifecycle/eof-close   4.close.eof           pass              120 ms
lifecycle/known       4.close.sigterm       expected failure   30 ms
lifecycle/stale       -                     STALE               5 ms
lifecycle/wedged      4.close.kill, 4.reap  FAIL              2.50 s
redaction/argv-<&>\"'  7.redact.argv         pass                1 ms

5 scenarios: 2 pass, 1 FAIL, 1 expected failure, 1 STALE; 6 checks, 2 failed; 2.65 s in total

expected failure lifecycle/known (baseline: client ignores SIGTERM)
    sigterm ignored

STALE lifecycle/stale: passed, but ci/expected-failures.yaml expects it to fail (fixed upstream?); remove the entry

FAIL lifecycle/wedged
    expected close by \"eof\", got <sigkill> & more
      at check lifecycle/wedged::close.path

    snapshot mismatch: \u{1b}[31m-old\u{1b}[0m\u{1}
";
        assert_eq!(render(&sample_report()), expected);
    }

    #[test]
    fn problems_are_listed() {
        let mut report = sample_report();
        report
            .problems
            .push("ef.yaml lists `x/y`, which is not a scenario".into());
        assert!(
            render(&report)
                .ends_with("\nproblems:\n  - ef.yaml lists `x/y`, which is not a scenario\n")
        );
    }
}
