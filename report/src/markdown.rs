//! `report.md`: a report of any kind as Markdown, rendered from the one
//! model ([`crate::model`]), for a CI job summary or a pull request comment.
//! Each rule id links to its section of docs/contract.md.

use std::{
    collections::BTreeSet,
    fmt::Write,
    path::{Component, Path, PathBuf},
};

use crate::{
    model::{Check, Kind, Report, Verdict},
    table::{format_duration, format_totals},
    verdict::{Status, Totals, plural},
};

/// How report.md links rule ids to docs/contract.md.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleLinks {
    /// The contract's path relative to the report's directory
    /// (`../../docs/contract.md` for the default `target/conformance`).
    pub href: String,
    /// The ids the contract defines; any other id is written without a link
    /// rather than as a link to nowhere.
    pub ids: BTreeSet<String>,
}

impl RuleLinks {
    /// Links from a report written in `report_dir` to the contract at
    /// `contract`, which defines the rules `ids`.
    pub fn new(report_dir: &Path, contract: &Path, ids: BTreeSet<String>) -> Self {
        Self {
            href: relative_href(report_dir, contract),
            ids,
        }
    }

    /// `[4.close.eof](../../docs/contract.md#4.close.eof)`, or the plain
    /// id, for a table cell.
    fn link(&self, id: &str) -> String {
        if self.ids.contains(id) {
            format!("[{}]({}#{id})", table_text(id), self.href)
        } else {
            table_text(id)
        }
    }
}

/// `to` relative to the directory `from`, both made absolute and
/// normalized without touching the file system, as a URL path (bytes outside
/// a safe set percent-encoded).
fn relative_href(from: &Path, to: &Path) -> String {
    let normalize = |path: &Path| -> Vec<String> {
        let mut parts: Vec<String> = Vec::new();
        let absolute = std::path::absolute(path).unwrap_or_else(|_| PathBuf::from(path));
        for component in absolute.components() {
            match component {
                Component::ParentDir => {
                    parts.pop();
                }
                Component::Normal(part) => parts.push(part.to_string_lossy().into_owned()),
                Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            }
        }
        parts
    };
    let (from, to) = (normalize(from), normalize(to));
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let parts: Vec<String> = std::iter::repeat_n("..".to_owned(), from.len() - common)
        .chain(to[common..].iter().cloned())
        .collect();
    let mut href = String::new();
    for byte in parts.join("/").bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~/".contains(&byte) {
            href.push(char::from(byte));
        } else {
            write!(href, "%{byte:02X}").unwrap();
        }
    }
    href
}

/// A scenario's place in the verdict, read back from its check.
fn status(check: &Check) -> Status {
    match &check.baseline {
        Some(entry) if entry.stale => Status::Stale,
        Some(_) => Status::ExpectedFailure,
        None if check.fails() => Status::Fail,
        None => Status::Pass,
    }
}

/// The scenario counts of the table and report.md, from the model.
fn scenario_totals(report: &Report) -> Totals {
    let mut totals = Totals {
        scenarios: report.checks.len(),
        ..Totals::default()
    };
    for check in &report.checks {
        match status(check) {
            Status::Pass => totals.passed += 1,
            Status::Fail => totals.failed += 1,
            Status::ExpectedFailure => totals.expected_failures += 1,
            Status::Stale => totals.stale += 1,
        }
        totals.checks += check.rows.len();
        totals.checks_failed += check
            .rows
            .iter()
            .filter(|row| row.verdict.is_failure())
            .count();
        totals.duration_ms += check.millis("duration").unwrap_or_default();
    }
    totals
}

/// Renders a report of any kind as Markdown: a verdict line, the table,
/// failure details, problems. Scenarios show their rules (linked), result
/// and time; a mode's checks their result and summary.
pub fn render(report: &Report, links: &RuleLinks) -> String {
    let mut out = String::from("# MCP stdio conformance report\n\n");
    let verdict = report.verdict.as_str();
    let none = "none".to_owned();
    let scenarios = report.kind == Kind::Scenarios;
    if scenarios {
        writeln!(
            out,
            "Verdict: **{verdict}**. Runner: {}; filter: {}; partition: {}; expected failures: {}.\n",
            report.setting("runner").unwrap_or("-"),
            report.setting("filter").map_or(none.clone(), code),
            report.setting("partition").map_or(none.clone(), code),
            report.setting("expected_failures").map_or(none, code),
        )
        .unwrap();
        writeln!(out, "{}\n", format_totals(&scenario_totals(report))).unwrap();
        out.push_str("| Scenario | Rules | Result | Time |\n| --- | --- | --- | ---: |\n");
    } else {
        let subject = &report.subject;
        let mut about = format!("{} mode", report.kind.as_str());
        if let Some(program) = &subject.program {
            write!(about, " on {}", code(program)).unwrap();
            if subject.args > 0 {
                write!(about, " (+{})", plural(subject.args, "argument")).unwrap();
            }
        }
        if let Some(name) = &subject.name {
            write!(about, "; subject: {}", inline_text(name)).unwrap();
        }
        if let Some(era) = &subject.era {
            write!(about, "; era: {}", inline_text(era)).unwrap();
        }
        writeln!(out, "Verdict: **{verdict}**. {about}.\n").unwrap();
        let totals = &report.totals;
        writeln!(
            out,
            "{}: {} pass, {} FAIL, {} warn, {} skip, {} info, {} ERROR\n",
            plural(totals.checks, "check"),
            totals.pass,
            totals.fail,
            totals.warn,
            totals.skip,
            totals.info,
            totals.error,
        )
        .unwrap();
        out.push_str("| Check | Result | Summary |\n| --- | --- | --- |\n");
    }
    for check in &report.checks {
        if scenarios {
            let result = match status(check) {
                Status::Pass => "pass".to_owned(),
                status => format!("**{}**", status.label()),
            };
            let rules = if check.rules.is_empty() {
                "-".to_owned()
            } else {
                let linked: Vec<String> = check.rules.iter().map(|id| links.link(id)).collect();
                linked.join(", ")
            };
            writeln!(
                out,
                "| {} | {rules} | {result} | {} |",
                code(&check.id),
                format_duration(check.millis("duration").unwrap_or_default()),
            )
            .unwrap();
        } else {
            let result = match check.verdict {
                Verdict::Pass | Verdict::Info | Verdict::Skip => check.verdict.label().to_owned(),
                verdict => format!("**{}**", verdict.label()),
            };
            writeln!(
                out,
                "| {} | {result} | {} |",
                code(&check.id),
                table_text(&check.summary)
            )
            .unwrap();
        }
    }

    let shown = |check: &&Check| {
        if scenarios {
            status(check) != Status::Pass
        } else {
            check.verdict >= Verdict::Warn
        }
    };
    if report.checks.iter().any(|check| shown(&check)) {
        out.push_str("\n## Failures\n");
    }
    for check in report.checks.iter().filter(shown) {
        if !scenarios {
            writeln!(
                out,
                "\n### {}: {}\n",
                check.verdict.label(),
                code(&check.id)
            )
            .unwrap();
            writeln!(out, "{}", inline_text(&check.summary)).unwrap();
            if let Some(fix) = &check.fix {
                writeln!(out, "\nFix: {}", inline_text(fix)).unwrap();
            }
            if let Some(failure) = &check.failure {
                out.push('\n');
                out.push_str(&fenced(failure));
            }
            continue;
        }
        let reason = check
            .baseline
            .as_ref()
            .map(|entry| entry.reason.as_str())
            .unwrap_or_default();
        match status(check) {
            Status::Pass => continue,
            Status::Fail => writeln!(out, "\n### FAIL: {}", code(&check.id)).unwrap(),
            Status::ExpectedFailure => {
                writeln!(out, "\n### expected failure: {}\n", code(&check.id)).unwrap();
                writeln!(out, "Listed in the baseline: {}", inline_text(reason)).unwrap();
            }
            Status::Stale => {
                let baseline = report
                    .setting("expected_failures")
                    .unwrap_or("the baseline");
                writeln!(out, "\n### STALE: {}\n", code(&check.id)).unwrap();
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
        out.push('\n');
        out.push_str(&fenced(
            check.failure.as_deref().unwrap_or("(no failure text)"),
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
    use super::*;
    use crate::test_support::sample_report;

    #[test]
    fn markdown_report() {
        let expected = r#"# MCP stdio conformance report

Verdict: **fail**. Runner: cargo-test; filter: none; partition: none; expected failures: `ci/expected-failures.yaml`.

5 scenarios: 2 pass, 1 FAIL, 1 expected failure, 1 STALE; 6 checks, 2 failed; 2.65 s in total

| Scenario | Rules | Result | Time |
| --- | --- | --- | ---: |
| `lifecycle/eof-close` | [4.close.eof](../../docs/contract.md#4.close.eof) | pass | 120 ms |
| `lifecycle/known` | [4.close.sigterm](../../docs/contract.md#4.close.sigterm) | **expected failure** | 30 ms |
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
        assert_eq!(
            render(&crate::json::model(&sample_report()), &links()),
            expected
        );
    }

    /// Links for the ids of the sample report that the contract defines.
    fn links() -> RuleLinks {
        RuleLinks {
            href: "../../docs/contract.md".into(),
            ids: ["4.close.eof", "4.close.sigterm"].map(str::to_owned).into(),
        }
    }

    #[test]
    fn rule_links_point_at_the_contract_from_the_report() {
        let ids = ["4.close.eof", "4.fast_failure"].map(str::to_owned).into();
        let links = RuleLinks::new(
            Path::new("/w/target/conformance"),
            Path::new("/w/docs/contract.md"),
            ids,
        );
        assert_eq!(links.href, "../../docs/contract.md");
        assert!(links.ids.contains("4.close.eof"));
        assert!(!links.ids.contains("4.close.kill"));
        assert_eq!(
            links.link("4.fast_failure"),
            "[4.fast\\_failure](../../docs/contract.md#4.fast_failure)"
        );
        assert_eq!(links.link("a|b"), "a\\\\|b");
    }

    #[test]
    fn relative_hrefs() {
        let href = |from: &str, to: &str| relative_href(Path::new(from), Path::new(to));
        assert_eq!(
            href("/w/target/conformance", "/w/docs/contract.md"),
            "../../docs/contract.md"
        );
        assert_eq!(href("/w", "/w/docs/contract.md"), "docs/contract.md");
        assert_eq!(
            href("/w/a/../out", "/w/docs/contract.md"),
            "../docs/contract.md"
        );
        assert_eq!(
            href("/tmp/my reports", "/w/docs/contract.md"),
            "../../w/docs/contract.md"
        );
        assert_eq!(
            href("/w", "/w/my docs/c (1).md"),
            "my%20docs/c%20%281%29.md"
        );
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
            render(&crate::json::model(&report), &links())
                .ends_with("\n## Problems\n\n- ef.yaml lists \\`x/y\\`, which is not a scenario\n")
        );
    }
}
