//! `report.md`: the report as Markdown, for a CI job summary or a pull
//! request comment. Each rule id links to its section of docs/contract.md.

use std::{
    collections::BTreeSet,
    fmt::Write,
    path::{Component, Path, PathBuf},
};

use crate::{
    table::{format_duration, format_totals},
    verdict::{Report, Status},
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

/// Renders report.md: a verdict line, the table, failure details, problems.
pub fn render(report: &Report, links: &RuleLinks) -> String {
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
        let rules = if entry.result.rules.is_empty() {
            "-".to_owned()
        } else {
            let linked: Vec<String> = entry.result.rules.iter().map(|id| links.link(id)).collect();
            linked.join(", ")
        };
        writeln!(
            out,
            "| {} | {rules} | {result} | {} |",
            code(&entry.result.name),
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
        assert_eq!(render(&sample_report(), &links()), expected);
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
            render(&report, &links())
                .ends_with("\n## Problems\n\n- ef.yaml lists \\`x/y\\`, which is not a scenario\n")
        );
    }
}
