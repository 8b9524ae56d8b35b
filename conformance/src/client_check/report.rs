//! The client check's report: one verdict per check id, as a table for
//! people, versioned JSON and JUnit XML.

use std::borrow::Cow;

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::Value;

pub use crate::server_check::report::Verdict;

/// Version of the JSON report; bumped on any incompatible change.
pub const SCHEMA: u32 = 1;

/// One check's result.
#[derive(Debug, Clone, Serialize)]
pub struct CheckResult {
    /// The stable check id (`close.sigterm`; `scenario:<group>/<name>` for
    /// a scenario run with `--scenarios`).
    pub id: Cow<'static, str>,
    pub verdict: Verdict,
    pub summary: String,
    /// One line on what the client would need to change.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<&'static str>,
    /// Measured figures (milliseconds), for tools and the SDK comparison.
    #[serde(skip_serializing_if = "Value::is_null")]
    pub figures: Value,
}

impl CheckResult {
    pub fn new(
        id: impl Into<Cow<'static, str>>,
        verdict: Verdict,
        summary: impl Into<String>,
    ) -> CheckResult {
        CheckResult {
            id: id.into(),
            verdict,
            summary: summary.into(),
            fix: None,
            figures: Value::Null,
        }
    }

    pub fn fix(mut self, fix: &'static str) -> CheckResult {
        if matches!(self.verdict, Verdict::Fail | Verdict::Warn) {
            self.fix = Some(fix);
        }
        self
    }

    pub fn figures(mut self, figures: Value) -> CheckResult {
        self.figures = figures;
        self
    }
}

/// The whole report.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub schema: u32,
    /// The driver's program, as given. Its arguments are counted, never printed: they may
    /// hold secrets (as `server` mode does with the server's).
    pub driver: String,
    /// How many arguments the driver was given.
    pub args: usize,
    /// The protocol era the client spoke (`modern`, `legacy`, or `unknown`).
    pub era: String,
    /// The driver protocol version the driver spoke (absent for a host
    /// graded from the outside).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<u32>,
    /// What a version 2 driver said about its client in `hello`: the client
    /// library, its eras, the settings it grades by.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hello: Option<super::driver::Hello>,
    pub checks: Vec<CheckResult>,
}

/// `program (+N arguments)`: how the harness names a program it runs, here and in messages,
/// without printing the arguments.
pub fn subject(program: &str, args: usize) -> String {
    format!("{program}{}", arguments_suffix(args))
}

/// ` (+N arguments)` (` (+1 argument)`), or nothing without arguments: the words `server`
/// mode uses for its server's arguments.
pub fn arguments_suffix(args: usize) -> String {
    match args {
        0 => String::new(),
        1 => " (+1 argument)".to_owned(),
        n => format!(" (+{n} arguments)"),
    }
}

impl Report {
    /// The report about `argv` (program and arguments): the program as given, the arguments
    /// counted.
    pub fn about(argv: &[String], era: String, checks: Vec<CheckResult>) -> Report {
        Report {
            schema: SCHEMA,
            driver: argv.first().cloned().unwrap_or_default(),
            args: argv.len().saturating_sub(1),
            era,
            checks,
            ..Report::default()
        }
    }

    /// True when no check failed.
    pub fn passed(&self) -> bool {
        !self.checks.iter().any(|c| c.verdict == Verdict::Fail)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("the report serializes")
    }

    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "client: {}", subject(&self.driver, self.args));
        if let Some(hello) = &self.hello {
            let settings = &hello.settings;
            let ms = |value: Option<u64>| value.map_or("none".to_owned(), |ms| format!("{ms} ms"));
            let _ = writeln!(
                out,
                "library: {} {} (driver protocol {}; graces {}: EOF {}, SIGTERM {})",
                hello.client.name,
                hello.client.version,
                hello.protocol,
                serde_json::to_value(settings.graces)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                ms(settings.eof_grace_ms),
                ms(settings.term_grace_ms),
            );
        }
        let _ = writeln!(out, "era: {}", self.era);
        let _ = writeln!(out);
        // Wide enough for the longest id (scenario rows are long), and at
        // least the width the check ids have always had.
        let width = self
            .checks
            .iter()
            .map(|c| c.id.len() + 2)
            .max()
            .unwrap_or(0)
            .max(20);
        let _ = writeln!(out, "{:<width$}{:<8}SUMMARY", "CHECK", "RESULT");
        for check in &self.checks {
            let _ = writeln!(
                out,
                "{:<width$}{:<8}{}",
                check.id,
                check.verdict.label(),
                check.summary
            );
            if let Some(fix) = check.fix {
                let _ = writeln!(out, "{:<pad$}fix: {fix}", "", pad = width + 8);
            }
        }
        let failed = self
            .checks
            .iter()
            .filter(|c| c.verdict == Verdict::Fail)
            .count();
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "verdict: {} ({} checks, {failed} failed)",
            if failed == 0 { "pass" } else { "FAIL" },
            self.checks.len()
        );
        out
    }

    /// JUnit XML, through the project's one JUnit writer: one case per
    /// check; warnings and information pass, skips are skipped.
    pub fn to_junit(&self) -> String {
        use mcp_conformance_report::junit::{Case, CaseResult, Suite};
        let cases = self
            .checks
            .iter()
            .map(|check| {
                let body = match check.fix {
                    Some(fix) => format!("{}\nfix: {fix}", check.summary),
                    None => check.summary.clone(),
                };
                let (result, system_out) = match check.verdict {
                    Verdict::Fail => (
                        CaseResult::Failure {
                            kind: None,
                            message: check.summary.clone(),
                            text: body,
                        },
                        None,
                    ),
                    Verdict::Skip => (
                        CaseResult::Skipped {
                            message: check.summary.clone(),
                        },
                        None,
                    ),
                    _ => (
                        CaseResult::Pass,
                        Some(format!("{}: {body}", check.verdict.label())),
                    ),
                };
                Case {
                    classname: "mcp-conformance.client".into(),
                    name: check.id.to_string(),
                    time_ms: None,
                    result,
                    system_out,
                }
            })
            .collect();
        Suite {
            name: format!("mcp-conformance client {}", self.driver),
            time_ms: None,
            cases,
        }
        .render()
    }
}
