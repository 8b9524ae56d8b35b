//! JUnit XML, for CI test viewers: one writer ([`Suite`], [`Case`]) shared
//! by the conformance report (`report.xml`, [`render`]) and the server
//! check (`mcp-conformance server --junit`). Hand-written: the format is
//! small, and escaping is the only subtle part.

use std::fmt::Write;

use crate::verdict::{Entry, Report, Status};

/// One `<testsuite>`, written inside a `<testsuites>` of the same name.
#[derive(Debug, Clone, Default)]
pub struct Suite {
    pub name: String,
    /// The whole run's time, when it was measured.
    pub time_ms: Option<u64>,
    pub cases: Vec<Case>,
}

/// One `<testcase>`.
#[derive(Debug, Clone, Default)]
pub struct Case {
    pub classname: String,
    pub name: String,
    pub time_ms: Option<u64>,
    pub result: CaseResult,
    /// What a CI viewer shows beside the case.
    pub system_out: Option<String>,
}

/// How a case ended, as JUnit sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum CaseResult {
    #[default]
    Pass,
    /// `<failure type="..." message="...">text</failure>`.
    Failure {
        kind: Option<String>,
        message: String,
        text: String,
    },
    /// `<skipped message="..."/>`.
    Skipped { message: String },
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

/// Renders report.xml: one `<testsuite name="mcp-conformance">` with one
/// `<testcase>` per scenario. Expected failures are `<skipped>`, stale ones
/// and real failures are `<failure>`; problems, when there are any, become
/// one extra failing test case so a CI viewer does not show a failed run as
/// green.
pub fn render(report: &Report) -> String {
    let mut suite = Suite {
        name: "mcp-conformance".into(),
        time_ms: Some(report.totals().duration_ms),
        cases: report
            .entries
            .iter()
            .map(|entry| case(report, entry))
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

/// One scenario's test case.
fn case(report: &Report, entry: &Entry) -> Case {
    let classname = if entry.group().is_empty() {
        "scenarios".to_owned()
    } else {
        format!("scenarios.{}", entry.group().replace('/', "."))
    };
    let failure_text = entry.result.failure.as_deref().unwrap_or_default();
    let reason = entry.expected_reason.as_deref().unwrap_or_default();
    let result = match entry.status {
        Status::Pass => CaseResult::Pass,
        Status::Fail => CaseResult::Failure {
            kind: Some("fail".into()),
            message: failure_text
                .lines()
                .find(|line| !line.trim().is_empty())
                .unwrap_or("failed")
                .to_owned(),
            text: failure_text.to_owned(),
        },
        Status::ExpectedFailure => CaseResult::Skipped {
            message: format!("expected failure: {reason}"),
        },
        Status::Stale => {
            let baseline = report.baseline.as_deref().unwrap_or("the baseline");
            let message = format!("stale: passed, but {baseline} expects it to fail ({reason})");
            CaseResult::Failure {
                kind: Some("stale".into()),
                text: format!("{message}; remove the entry"),
                message,
            }
        }
    };
    Case {
        classname,
        name: entry.leaf().to_owned(),
        time_ms: Some(entry.result.duration_ms),
        result,
        system_out: Some(system_out(entry)),
    }
}

/// What a CI viewer shows beside the test case: rules, checks and, for an
/// expected failure, the failure text it tolerated.
fn system_out(entry: &Entry) -> String {
    let mut out = String::new();
    if !entry.result.description.is_empty() {
        writeln!(out, "{}", entry.result.description).unwrap();
    }
    writeln!(out, "rules: {}", crate::table::format_rules(entry)).unwrap();
    for check in &entry.result.checks {
        let mark = if check.passed { "pass" } else { "FAIL" };
        writeln!(out, "[{mark}] {}: {}", check.id, check.message).unwrap();
    }
    if entry.status == Status::ExpectedFailure {
        let reason = entry.expected_reason.as_deref().unwrap_or_default();
        writeln!(out, "expected failure ({reason}):").unwrap();
        writeln!(
            out,
            "{}",
            entry.result.failure.as_deref().unwrap_or_default()
        )
        .unwrap();
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
      <failure type="stale" message="stale: passed, but ci/expected-failures.yaml expects it to fail (fixed upstream?)">stale: passed, but ci/expected-failures.yaml expects it to fail (fixed upstream?); remove the entry</failure>
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
        assert_eq!(render(&sample_report()), expected);
    }

    #[test]
    fn problems_become_a_failing_test_case() {
        let mut report = sample_report();
        report
            .problems
            .push("ef.yaml lists `x/<y>`, which is not a scenario".into());
        let xml = render(&report);
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
