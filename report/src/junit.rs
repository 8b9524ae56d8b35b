//! JUnit XML, for CI test viewers: a writer ([`Suite`], [`Case`]) and the
//! one mapping of a [`Report`] of any kind onto it ([`render`]), used by
//! `report.xml` and by `mcp-conformance server|client --junit`.
//! Hand-written: the format is small, and escaping is the only subtle part.

use std::fmt::Write;

use crate::model::{Check, Kind, Report, TOOL, Verdict};

/// One `<testsuite>`, written inside a `<testsuites>` of the same name.
#[derive(Debug, Clone, Default)]
pub struct Suite {
    /// The suite's name (`mcp-conformance server`, `scenarios`).
    pub name: String,
    /// The whole run's time, when it was measured.
    pub time_ms: Option<u64>,
    /// Its test cases, in order.
    pub cases: Vec<Case>,
}

/// One `<testcase>`.
#[derive(Debug, Clone, Default)]
pub struct Case {
    /// The case's class: its group (`lifecycle`), or the suite's name.
    pub classname: String,
    /// The case's name within its class.
    pub name: String,
    /// How long it took, when it was measured.
    pub time_ms: Option<u64>,
    /// How it ended.
    pub result: CaseResult,
    /// What a CI viewer shows beside the case.
    pub system_out: Option<String>,
}

/// How a case ended, as JUnit sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum CaseResult {
    /// Passed: no child element.
    #[default]
    Pass,
    /// `<failure type="..." message="...">text</failure>`.
    Failure {
        /// The failure's `type` attribute, if any.
        kind: Option<String>,
        /// The one-line `message` attribute.
        message: String,
        /// The element's text: the details.
        text: String,
    },
    /// `<skipped message="..."/>`.
    Skipped {
        /// Why it did not run.
        message: String,
    },
}

impl Suite {
    /// The XML document.
    pub fn render(&self) -> String {
        let tests = self.cases.len();
        let failures = self
            .cases
            .iter()
            .filter(|case| matches!(case.result, CaseResult::Failure { .. }))
            .count();
        let skipped = self
            .cases
            .iter()
            .filter(|case| matches!(case.result, CaseResult::Skipped { .. }))
            .count();
        let time = self
            .time_ms
            .map(|ms| format!(" time=\"{}\"", seconds(ms)))
            .unwrap_or_default();
        let counts = format!(
            "name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\"{time}",
            attribute(&self.name)
        );
        let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        writeln!(out, "<testsuites {counts}>").unwrap();
        writeln!(out, "  <testsuite {counts}>").unwrap();
        for case in &self.cases {
            case.write(&mut out);
        }
        out.push_str("  </testsuite>\n</testsuites>\n");
        out
    }
}

impl Case {
    fn write(&self, out: &mut String) {
        let time = self
            .time_ms
            .map(|ms| format!(" time=\"{}\"", seconds(ms)))
            .unwrap_or_default();
        writeln!(
            out,
            "    <testcase classname=\"{}\" name=\"{}\"{time}>",
            attribute(&self.classname),
            attribute(&self.name),
        )
        .unwrap();
        match &self.result {
            CaseResult::Pass => {}
            CaseResult::Failure {
                kind,
                message,
                text: body,
            } => {
                let kind = kind
                    .as_deref()
                    .map(|kind| format!(" type=\"{}\"", attribute(kind)))
                    .unwrap_or_default();
                writeln!(
                    out,
                    "      <failure{kind} message=\"{}\">{}</failure>",
                    attribute(message),
                    text(body)
                )
                .unwrap();
            }
            CaseResult::Skipped { message } => {
                writeln!(out, "      <skipped message=\"{}\"/>", attribute(message)).unwrap();
            }
        }
        if let Some(system_out) = &self.system_out {
            writeln!(out, "      <system-out>{}</system-out>", text(system_out)).unwrap();
        }
        out.push_str("    </testcase>\n");
    }
}

/// Renders a report of any kind as JUnit XML: one `<testcase>` per check.
///
/// The one mapping from verdicts to JUnit: a check that fails the run
/// ([`Check::fails`]) is a `<failure type="fail|error|stale">` (message: the
/// summary; text: the whole failure text, or the summary, rows, notes and
/// fix); `skip` and a failure the baseline expects are `<skipped>`; `pass`,
/// `info`, `warn` and an optional check's failure pass, with the verdict and
/// the details in `<system-out>`. Scenarios are grouped into classes by
/// their group (`scenarios.lifecycle`); a mode's checks are in
/// `mcp-conformance.<kind>`. Problems, when there are any, become one extra
/// failing test case so a CI viewer does not show a failed run as green.
pub fn render(report: &Report) -> String {
    let name = match &report.subject.program {
        Some(program) => format!("{TOOL} {} {program}", report.kind.as_str()),
        None => TOOL.to_owned(),
    };
    let timed = report
        .checks
        .iter()
        .any(|check| check.millis(DURATION).is_some());
    let mut suite = Suite {
        name,
        time_ms: timed.then(|| {
            report
                .checks
                .iter()
                .filter_map(|check| check.millis(DURATION))
                .sum()
        }),
        cases: report
            .checks
            .iter()
            .map(|check| case(report.kind, check))
            .collect(),
    };
    if !report.problems.is_empty() {
        suite.cases.push(Case {
            classname: "conformance".into(),
            name: "report consistency".into(),
            time_ms: Some(0),
            result: CaseResult::Failure {
                kind: Some("problem".into()),
                message: crate::verdict::plural(report.problems.len(), "problem"),
                text: report.problems.join("\n"),
            },
            system_out: None,
        });
    }
    suite.render()
}

/// The figure that holds a check's time.
const DURATION: &str = "duration";

/// One check's test case.
fn case(kind: Kind, check: &Check) -> Case {
    let scenario = kind == Kind::Scenarios;
    let (classname, name) = if scenario {
        match check.id.rsplit_once('/') {
            Some((group, leaf)) => (
                format!("scenarios.{}", group.replace('/', ".")),
                leaf.to_owned(),
            ),
            None => ("scenarios".to_owned(), check.id.clone()),
        }
    } else {
        (format!("{TOOL}.{}", kind.as_str()), check.id.clone())
    };
    let expected = check.baseline.as_ref().filter(|entry| !entry.stale);
    let result = if check.fails() {
        let kind = match &check.baseline {
            Some(entry) if entry.stale => "stale",
            _ => check.verdict.as_str(),
        };
        CaseResult::Failure {
            kind: Some(kind.to_owned()),
            message: check.summary.clone(),
            text: check
                .failure
                .clone()
                .unwrap_or_else(|| body(check, !scenario)),
        }
    } else if check.verdict == Verdict::Skip || expected.is_some() {
        CaseResult::Skipped {
            message: check.summary.clone(),
        }
    } else {
        CaseResult::Pass
    };
    let system_out = if scenario {
        Some(scenario_out(check))
    } else if result == CaseResult::Pass {
        Some(format!("{}: {}", check.verdict.label(), body(check, true)))
    } else {
        None
    };
    Case {
        classname,
        name,
        time_ms: check.millis(DURATION),
        result,
        system_out,
    }
}

/// The summary, then (with `rows`) each row, each note and the fix.
fn body(check: &Check, rows: bool) -> String {
    let mut body = check.summary.clone();
    if rows {
        for row in &check.rows {
            write!(
                body,
                "\n{}: {} {}",
                row.id,
                row.verdict.label(),
                row.summary
            )
            .unwrap();
        }
    }
    for note in &check.notes {
        write!(body, "\n{note}").unwrap();
    }
    if let Some(fix) = &check.fix {
        write!(body, "\nfix: {fix}").unwrap();
    }
    body
}

/// What a CI viewer shows beside a scenario's test case: rules, checks and,
/// for an expected failure, the failure text it tolerated.
fn scenario_out(check: &Check) -> String {
    let mut out = String::new();
    if let Some(description) = check.description.as_deref().filter(|d| !d.is_empty()) {
        writeln!(out, "{description}").unwrap();
    }
    writeln!(out, "rules: {}", crate::table::rules_cell(&check.rules)).unwrap();
    for row in &check.rows {
        writeln!(out, "[{}] {}: {}", row.verdict.label(), row.id, row.summary).unwrap();
    }
    if let Some(entry) = check.baseline.as_ref().filter(|entry| !entry.stale) {
        writeln!(out, "expected failure ({}):", entry.reason).unwrap();
        writeln!(out, "{}", check.failure.as_deref().unwrap_or_default()).unwrap();
    }
    out
}

/// Milliseconds as JUnit's seconds with three decimals.
fn seconds(ms: u64) -> String {
    format!("{}.{:03}", ms / 1000, ms % 1000)
}

/// Escapes `value` for element content.
pub fn text(value: &str) -> String {
    escape(value, false)
}

/// Escapes `value` for a double-quoted attribute; whitespace is written as
/// character references, since parsers normalise literal newlines and tabs
/// in attributes to spaces.
pub fn attribute(value: &str) -> String {
    escape(value, true)
}

fn escape(value: &str, in_attribute: bool) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // A literal CR would be normalised away by the parser.
            '\r' => out.push_str("&#13;"),
            '\n' | '\t' if in_attribute => write!(out, "&#{};", u32::from(c)).unwrap(),
            '\n' | '\t' => out.push(c),
            // XML 1.0 cannot carry these at all, not even as character
            // references, so they are written out visibly instead (ANSI
            // colour codes in a failure text become `\u{1b}[31m`).
            '\u{0}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}' => {
                write!(out, "\\u{{{:x}}}", u32::from(c)).unwrap();
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::sample_report;

    #[test]
    fn escapes_markup_and_control_characters() {
        assert_eq!(text("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;");
        assert_eq!(text("l1\nl2\tx\r\n"), "l1\nl2\tx&#13;\n");
        assert_eq!(attribute("l1\nl2\tx\r"), "l1&#10;l2&#9;x&#13;");
        assert_eq!(
            text("\u{1b}[31mred\u{0}\u{7}\u{ffff}"),
            "\\u{1b}[31mred\\u{0}\\u{7}\\u{ffff}"
        );
        assert_eq!(text("é ✓ \u{85}"), "é ✓ \u{85}");
    }

    #[test]
    fn junit_report() {
        let expected = r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="mcp-conformance" tests="5" failures="2" errors="0" skipped="1" time="2.656">
  <testsuite name="mcp-conformance" tests="5" failures="2" errors="0" skipped="1" time="2.656">
    <testcase classname="scenarios.lifecycle" name="eof-close" time="0.120">
      <system-out>synthetic lifecycle/eof-close
rules: 4.close.eof
[pass] lifecycle/eof-close::close.path: close ended by eof
[pass] lifecycle/eof-close::close.time: &lt; grace
</system-out>
    </testcase>
    <testcase classname="scenarios.lifecycle" name="known" time="0.030">
      <skipped message="expected failure: client ignores SIGTERM"/>
      <system-out>synthetic lifecycle/known
rules: 4.close.sigterm
[FAIL] lifecycle/known::close.path: close ended by eof
expected failure (client ignores SIGTERM):
sigterm ignored
</system-out>
    </testcase>
    <testcase classname="scenarios.lifecycle" name="stale" time="0.005">
      <failure type="stale" message="stale: passed, but ci/expected-failures.yaml expects it to fail (fixed upstream?)">stale: passed, but ci/expected-failures.yaml expects it to fail (fixed upstream?)
fix: remove the entry from ci/expected-failures.yaml</failure>
      <system-out>synthetic lifecycle/stale
rules: -
</system-out>
    </testcase>
    <testcase classname="scenarios.lifecycle" name="wedged" time="2.500">
      <failure type="fail" message="expected close by &quot;eof&quot;, got &lt;sigkill&gt; &amp; more">expected close by &quot;eof&quot;, got &lt;sigkill&gt; &amp; more
  at check lifecycle/wedged::close.path

snapshot mismatch: \u{1b}[31m-old\u{1b}[0m\u{1}
</failure>
      <system-out>synthetic lifecycle/wedged
rules: 4.close.kill, 4.reap
[pass] lifecycle/wedged::spawn: spawned
[FAIL] lifecycle/wedged::close.path: expected eof, got &lt;sigkill&gt;
</system-out>
    </testcase>
    <testcase classname="scenarios.redaction" name="argv-&lt;&amp;&gt;&quot;&apos;" time="0.001">
      <system-out>synthetic redaction/argv-&lt;&amp;&gt;&quot;&apos;
rules: 7.redact.argv
[pass] redaction/argv-&lt;&amp;&gt;&quot;&apos;::close.path: close ended by eof
</system-out>
    </testcase>
  </testsuite>
</testsuites>
"#;
        assert_eq!(render(&crate::json::model(&sample_report())), expected);
    }

    #[test]
    fn problems_become_a_failing_test_case() {
        let mut report = sample_report();
        report
            .problems
            .push("ef.yaml lists `x/<y>`, which is not a scenario".into());
        let xml = render(&crate::json::model(&report));
        assert!(
            xml.contains(r#"<testsuite name="mcp-conformance" tests="6" failures="3" errors="0""#),
            "{xml}"
        );
        assert!(xml.contains(
            "<testcase classname=\"conformance\" name=\"report consistency\" time=\"0.000\">\n      \
             <failure type=\"problem\" message=\"1 problem\">ef.yaml lists `x/&lt;y&gt;`, which is not a scenario</failure>"
        ));
    }
}
