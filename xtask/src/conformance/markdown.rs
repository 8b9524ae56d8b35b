//! `report.md`: the report as Markdown, for a CI job summary or a pull
//! request comment.

use std::fmt::Write;

use super::{
    table::{format_duration, format_rules, format_totals},
    verdict::{Report, Status},
};

/// Renders report.md: a verdict line, the table, failure details, problems.
pub fn render(report: &Report) -> String {
    let mut out = String::from("# MCP stdio conformance report\n\n");
    let verdict = if report.ok() { "pass" } else { "fail" };
    let none = "none".to_owned();
    writeln!(
        out,
        "Verdict: **{verdict}**. Runner: {}; filter: {}; partition: {}; expected failures: {}.\n",
        report.run.runner(),
        report.run.filter.as_deref().map_or(none.clone(), code),
        report.run.partition.as_deref().map_or(none.clone(), code),
        report.baseline.as_deref().map_or(none, code),
    )
    .unwrap();
    writeln!(out, "{}\n", format_totals(&report.totals())).unwrap();

    out.push_str("| Scenario | Rules | Result | Time |\n| --- | --- | --- | ---: |\n");
    for entry in &report.entries {
        let result = match entry.status {
            Status::Pass => "pass".to_owned(),
            status => format!("**{}**", status.label()),
        };
        writeln!(
            out,
            "| {} | {} | {result} | {} |",
            code(&entry.result.name),
            table_text(&format_rules(entry)),
            format_duration(entry.result.duration_ms),
        )
        .unwrap();
    }

    if report
        .entries
        .iter()
        .any(|entry| entry.status != Status::Pass)
    {
        out.push_str("\n## Failures\n");
    }
    for entry in &report.entries {
        let reason = entry.expected_reason.as_deref().unwrap_or_default();
        match entry.status {
            Status::Pass => continue,
            Status::Fail => {}
            Status::ExpectedFailure => {
                writeln!(
                    out,
                    "\n### expected failure: {}\n",
                    code(&entry.result.name)
                )
                .unwrap();
                writeln!(out, "Listed in the baseline: {}", inline_text(reason)).unwrap();
            }
            Status::Stale => {
                let baseline = report.baseline.as_deref().unwrap_or("the baseline");
                writeln!(out, "\n### STALE: {}\n", code(&entry.result.name)).unwrap();
                writeln!(
                    out,
                    "Passed, but {} expects it to fail ({}): remove the entry.",
                    code(baseline),
                    inline_text(reason)
                )
                .unwrap();
                continue;
            }
        }
        if entry.status == Status::Fail {
            writeln!(out, "\n### FAIL: {}", code(&entry.result.name)).unwrap();
        }
        out.push('\n');
        out.push_str(&fenced(
            entry
                .result
                .failure
                .as_deref()
                .unwrap_or("(no failure text)"),
        ));
    }

    if !report.problems.is_empty() {
        out.push_str("\n## Problems\n\n");
        for problem in &report.problems {
            writeln!(out, "- {}", inline_text(problem)).unwrap();
        }
    }
    out
}

/// An inline code span that survives backticks, pipes (inside a table) and
/// newlines in `value`.
fn code(value: &str) -> String {
    let value = value.replace(['\n', '\r'], " ").replace('|', "\\|");
    let longest = longest_backtick_run(&value);
    let ticks = "`".repeat(longest + 1);
    if longest > 0 || value.starts_with(' ') || value.ends_with(' ') {
        format!("{ticks} {value} {ticks}")
    } else {
        format!("{ticks}{value}{ticks}")
    }
}

/// Plain text in a table cell.
fn table_text(value: &str) -> String {
    inline_text(value).replace('|', "\\|")
}

/// Plain text on one line, with Markdown and HTML syntax escaped.
fn inline_text(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.replace(['\n', '\r'], " ").chars() {
        if matches!(
            c,
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '#' | '|' | '~' | '&'
        ) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A fenced `text` block whose fence is longer than any backtick run in
/// `body`, so the body cannot close it. Control characters (ANSI colour
/// codes, say) are written out visibly, as in report.xml.
fn fenced(body: &str) -> String {
    let fence = "`".repeat((longest_backtick_run(body) + 1).max(3));
    let mut visible = String::with_capacity(body.len());
    for c in body.replace("\r\n", "\n").trim_end().chars() {
        if c.is_control() && c != '\n' && c != '\t' {
            write!(visible, "\\u{{{:x}}}", u32::from(c)).unwrap();
        } else {
            visible.push(c);
        }
    }
    format!("{fence}text\n{visible}\n{fence}\n")
}

fn longest_backtick_run(value: &str) -> usize {
    value.split(|c| c != '`').map(str::len).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::{super::test_support::sample_report, *};

    #[test]
    fn markdown_report() {
        let expected = r#"# MCP stdio conformance report

Verdict: **fail**. Runner: cargo-test; filter: none; partition: none; expected failures: `ci/expected-failures.yaml`.

5 scenarios: 2 pass, 1 FAIL, 1 expected failure, 1 STALE; 6 checks, 2 failed; 2.65 s in total

| Scenario | Rules | Result | Time |
| --- | --- | --- | ---: |
| `lifecycle/eof-close` | 4.close.eof | pass | 120 ms |
| `lifecycle/known` | 4.close.sigterm | **expected failure** | 30 ms |
| `lifecycle/stale` | - | **STALE** | 5 ms |
| `lifecycle/wedged` | 4.close.kill, 4.reap | **FAIL** | 2.50 s |
| `redaction/argv-<&>"'` | 7.redact.argv | pass | 1 ms |

## Failures

### expected failure: `lifecycle/known`

Listed in the baseline: client ignores SIGTERM

```text
sigterm ignored
```

### STALE: `lifecycle/stale`

Passed, but `ci/expected-failures.yaml` expects it to fail (fixed upstream?): remove the entry.

### FAIL: `lifecycle/wedged`

```text
expected close by "eof", got <sigkill> & more
  at check lifecycle/wedged::close.path

snapshot mismatch: \u{1b}[31m-old\u{1b}[0m\u{1}
```
"#;
        assert_eq!(render(&sample_report()), expected);
    }

    #[test]
    fn escaping() {
        assert_eq!(code("a|b"), "`a\\|b`");
        assert_eq!(code("a`b"), "`` a`b ``");
        assert_eq!(inline_text("*x* <y> a_b\nc"), "\\*x\\* \\<y\\> a\\_b c");
        assert_eq!(fenced("has ``` inside"), "````text\nhas ``` inside\n````\n");
    }

    #[test]
    fn problems_section() {
        let mut report = sample_report();
        report
            .problems
            .push("ef.yaml lists `x/y`, which is not a scenario".into());
        assert!(
            render(&report)
                .ends_with("\n## Problems\n\n- ef.yaml lists \\`x/y\\`, which is not a scenario\n")
        );
    }
}
