//! The client check's report: one verdict per check id, as a table for
//! people and as the one report model (`mcp_conformance_report::model`,
//! schema 2), from which the JSON and JUnit XML are rendered.

use std::{borrow::Cow, collections::BTreeMap};

use std::fmt::Write as _;

use mcp_conformance_report::model;
use serde_json::Value;

pub use mcp_conformance_report::model::Verdict;

/// One check's result.
#[derive(Debug, Clone)]
pub struct CheckResult {
    /// The stable check id (`close.sigterm`; `scenario:<group>/<name>` for
    /// a scenario run with `--scenarios`).
    pub id: Cow<'static, str>,
    pub verdict: Verdict,
    pub summary: String,
    /// One line on what the client would need to change.
    pub fix: Option<&'static str>,
    /// Measured figures, for tools and the SDK comparison: an object of
    /// milliseconds whose names end in `_ms` (a null is a figure not
    /// measured). The report model holds each as `{value, unit: "ms"}`
    /// under its name without the suffix.
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
        if matches!(self.verdict, Verdict::Fail | Verdict::Warn | Verdict::Error) {
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
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// The driver's program, as given. Its arguments are counted, never printed: they may
    /// hold secrets (as `server` mode does with the server's).
    pub driver: String,
    /// How many arguments the driver was given.
    pub args: usize,
    /// The protocol era the client spoke (`modern`, `legacy`, or `unknown`).
    pub era: String,
    /// The driver protocol version the driver spoke (absent for a host
    /// graded from the outside).
    pub protocol: Option<u32>,
    /// What a version 2 driver said about its client in `hello`: the client
    /// library, its eras, the settings it grades by.
    pub hello: Option<crate::driver::Hello>,
    /// A host graded from the outside (`client --grade`, `host`): the
    /// report's kind is `host` and its table names the host, not a client.
    pub host: bool,
    pub checks: Vec<CheckResult>,
}

/// `program (+N arguments)`: how the harness names a program it runs, here and in messages,
/// without printing the arguments.
pub fn subject(program: &str, args: usize) -> String {
    format!("{program}{}", crate::driver::arguments_suffix(args))
}

impl Report {
    /// The report about `argv` (program and arguments): the program as given, the arguments
    /// counted.
    pub fn about(argv: &[String], era: String, checks: Vec<CheckResult>) -> Report {
        Report {
            driver: argv.first().cloned().unwrap_or_default(),
            args: argv.len().saturating_sub(1),
            era,
            checks,
            ..Report::default()
        }
    }

    /// True when no check failed and none was an error.
    pub fn passed(&self) -> bool {
        !self
            .checks
            .iter()
            .any(|c| matches!(c.verdict, Verdict::Fail | Verdict::Error))
    }

    /// The exit code this report stands for: 0 when it passed, 1 when a
    /// check failed, 3 (no verdict) when nothing failed but a check could
    /// not judge (`host.tools_called`: no tool reached its server, so the
    /// run proves little).
    pub fn exit_code(&self) -> u8 {
        if self.checks.iter().any(|c| c.verdict == Verdict::Fail) {
            mcp_conformance_report::exit::FAILURE
        } else if self.passed() {
            mcp_conformance_report::exit::SUCCESS
        } else {
            mcp_conformance_report::exit::NO_VERDICT
        }
    }

    /// The report as the one model: `kind: client` (`host` for a host graded
    /// from the outside); the subject is the
    /// driver (its arguments counted), the era, the driver protocol and the
    /// client library its `hello` names (the whole `hello` in `details`);
    /// every check is required.
    pub fn to_model(&self) -> model::Report {
        let subject = model::Subject {
            program: Some(self.driver.clone()),
            args: self.args,
            name: self.hello.as_ref().map(|hello| hello.client.name.clone()),
            version: self
                .hello
                .as_ref()
                .map(|hello| hello.client.version.clone()),
            era: Some(self.era.clone()),
            protocol: self.protocol,
            details: self
                .hello
                .as_ref()
                .and_then(|hello| serde_json::to_value(hello).ok())
                .unwrap_or(Value::Null),
            ..model::Subject::default()
        };
        let checks = self
            .checks
            .iter()
            .map(|check| {
                let mut out =
                    model::Check::new(check.id.to_string(), check.verdict, check.summary.clone());
                out.fix = check.fix.map(str::to_owned);
                out.figures = figures(&check.figures);
                out
            })
            .collect();
        model::Report::new(
            if self.host {
                model::Kind::Host
            } else {
                model::Kind::Client
            },
            model::Environment::current(env!("CARGO_PKG_VERSION")),
            subject,
            self.passed(),
            checks,
        )
    }

    /// The JSON report (schema 2).
    pub fn to_json(&self) -> String {
        self.to_model().to_json()
    }

    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let role = if self.host { "host" } else { "client" };
        let _ = writeln!(out, "{role}: {}", subject(&self.driver, self.args));
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

    /// JUnit XML, by the one mapping of the report model.
    pub fn to_junit(&self) -> String {
        mcp_conformance_report::junit::render(&self.to_model())
    }
}

/// The model's figures from a check's `{"name_ms": n, "name": n}`: a name
/// ending in `_ms` is a number of milliseconds, one ending in `_bytes` a
/// number of bytes, each under its name without the suffix; any other name
/// is a count (`servers_offered`). Nulls (not measured) are left out.
fn figures(figures: &Value) -> BTreeMap<String, model::Figure> {
    let mut out = BTreeMap::new();
    for (name, value) in figures.as_object().into_iter().flatten() {
        let Some(number) = value.as_u64() else {
            continue;
        };
        let (name, unit) = if let Some(name) = name.strip_suffix("_ms") {
            (name, model::Unit::Ms)
        } else if let Some(name) = name.strip_suffix("_bytes") {
            (name, model::Unit::Bytes)
        } else {
            (name.as_str(), model::Unit::Count)
        };
        out.insert(
            name.to_owned(),
            model::Figure {
                value: number.into(),
                unit,
            },
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn figures_become_milliseconds_by_name_and_unmeasured_ones_go() {
        let got = figures(&json!({ "eof_to_exit_ms": null, "close_ms": 12 }));
        assert_eq!(got.len(), 1);
        let counts = figures(&json!({ "servers_offered": 7, "flood_bytes": 9 }));
        assert_eq!(counts["servers_offered"].unit, model::Unit::Count);
        assert_eq!(counts["flood"].unit, model::Unit::Bytes);
        assert_eq!(got["close"], model::Figure::ms(12));
        assert!(figures(&Value::Null).is_empty());
    }
}
