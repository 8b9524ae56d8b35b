//! The report: verdicts per check, and its renderings: a table for people,
//! and the one report model (`mcp_conformance_report::model`, schema 2),
//! from which the JSON and JUnit XML are rendered.

use std::{fmt::Write as _, time::Duration};

use mcp_conformance_report::model;
use serde::Serialize;
use serde_json::Value;

use super::{era::Era, instance::StderrLog, options::CheckId};

/// Notes kept per check; the rest are summed up in a last "… and N more".
pub const MAX_NOTES: usize = 20;

/// One check's or one case's verdict: the report model's (schema 2), whose
/// order (least to most severe) lets `max` merge repetitions.
pub use mcp_conformance_report::model::Verdict;

/// A sub-result of a check (`eof.exit` has one per situation).
#[derive(Debug, Clone, PartialEq)]
pub struct CaseResult {
    pub name: &'static str,
    pub verdict: Verdict,
    pub summary: String,
}

/// The result of one check, merged over repetitions.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckResult {
    pub id: &'static str,
    pub required: bool,
    pub verdict: Verdict,
    pub summary: String,
    /// One line on how to fix a failure (or a warning).
    pub hint: Option<String>,
    pub cases: Vec<CaseResult>,
    /// Lines shown under the check in the table (offending stdout lines, survivors).
    pub notes: Vec<String>,
    /// Structured data (timings, offenders, survivors) for tools.
    pub details: Value,
}

impl CheckResult {
    pub fn new(id: CheckId, verdict: Verdict, summary: impl Into<String>) -> CheckResult {
        CheckResult {
            id: id.as_str(),
            required: id.required(),
            verdict,
            summary: summary.into(),
            hint: None,
            cases: Vec::new(),
            notes: Vec::new(),
            details: Value::Null,
        }
    }

    /// Sets the notes from `notes`, of `total` in all: the first
    /// [`MAX_NOTES`] and, when there are more, "… and N more", so a report
    /// stays small whatever the server did.
    pub fn set_notes(&mut self, notes: impl IntoIterator<Item = String>, total: u64) {
        self.notes = notes.into_iter().take(MAX_NOTES).collect();
        let more = total.saturating_sub(self.notes.len() as u64);
        if more > 0 {
            self.notes.push(format!("… and {more} more"));
        }
    }

    /// Whether this result fails the run.
    pub fn fails(&self) -> bool {
        self.required && self.verdict == Verdict::Fail
    }
}

/// The options as reported (milliseconds).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OptionsView {
    pub timeout_ms: u128,
    pub probe_timeout_ms: u128,
    pub latency_bound_ms: u128,
    pub eof_grace_ms: u128,
    pub term_grace_ms: u128,
    pub idle_ms: u128,
    pub settle_ms: u128,
    pub cpu_window_ms: u128,
    pub busy_percent: u32,
}

/// The whole report of one `mcp-conformance server` invocation.
#[derive(Debug, Clone)]
pub struct Report {
    /// COMMAND as given (its file name only in stable output). Arguments are
    /// counted, never printed: they may hold secrets.
    pub command: String,
    pub args: usize,
    /// `serverInfo` from the first successful handshake.
    pub server: Option<String>,
    /// The protocol eras the server serves: `modern` (`server/discover`),
    /// `legacy` (`initialize`).
    pub eras: Vec<Era>,
    /// The era the runs used: the best one the server serves.
    pub era: Option<Era>,
    pub repeat: u32,
    pub options: OptionsView,
    pub checks: Vec<CheckResult>,
    /// Each run's stderr, for `-v`.
    pub stderr: Vec<(String, StderrLog)>,
}

impl Report {
    pub fn passed(&self) -> bool {
        !self.checks.iter().any(CheckResult::fails)
    }

    /// The report as the one model: `kind: server`; the subject is the
    /// command (its arguments counted), the server's `serverInfo` and eras;
    /// the settings are the options and `repeat`; a check's `hint` is its
    /// `fix`, its cases are its rows.
    pub fn to_model(&self) -> model::Report {
        let subject = model::Subject {
            program: Some(self.command.clone()),
            args: self.args,
            name: self.server.clone(),
            era: self.era.map(|era| era.as_str().to_owned()),
            eras: self
                .eras
                .iter()
                .map(|era| era.as_str().to_owned())
                .collect(),
            ..model::Subject::default()
        };
        let checks = self
            .checks
            .iter()
            .map(|check| {
                let mut out = model::Check::new(check.id, check.verdict, check.summary.clone());
                out.required = check.required;
                out.fix = check.hint.clone();
                out.rows = check
                    .cases
                    .iter()
                    .map(|case| model::Row {
                        id: case.name.to_owned(),
                        verdict: case.verdict,
                        summary: case.summary.clone(),
                    })
                    .collect();
                out.notes = check.notes.clone();
                out.details = check.details.clone();
                out
            })
            .collect();
        let mut report = model::Report::new(
            model::Kind::Server,
            model::Environment::current(env!("CARGO_PKG_VERSION")),
            subject,
            self.passed(),
            checks,
        );
        let mut settings = match serde_json::to_value(&self.options) {
            Ok(Value::Object(map)) => map,
            _ => unreachable!("the options serialize as an object"),
        };
        settings.insert("repeat".into(), Value::from(self.repeat));
        report.settings = settings;
        report
    }

    /// The JSON report (schema 2).
    pub fn to_json(&self) -> String {
        self.to_model().to_json()
    }

    /// The table for people. `verbose` adds every note and the servers' stderr.
    pub fn to_table(&self, verbose: bool) -> String {
        let mut out = String::new();
        let args = match self.args {
            0 => String::new(),
            1 => " (+1 argument)".into(),
            n => format!(" (+{n} arguments)"),
        };
        let runs = if self.repeat == 1 {
            String::new()
        } else {
            format!(", {} repetitions", self.repeat)
        };
        let _ = writeln!(out, "mcp-conformance server: {}{args}{runs}", self.command);
        if let Some(server) = &self.server {
            let _ = writeln!(out, "server: {server}");
        }
        if let Some(era) = self.era {
            let mut eras: Vec<&str> = self.eras.iter().map(|e| e.as_str()).collect();
            // A modern handshake asks `initialize` only for handshake.legacy.
            if !self.eras.contains(&Era::Legacy)
                && !self.checks.iter().any(|c| c.id == "handshake.legacy")
            {
                eras.push("legacy not checked");
            }
            let served = eras.join(", ");
            let _ = writeln!(out, "eras: {served} (the runs use {})", era.as_str());
        }
        let width = self
            .checks
            .iter()
            .flat_map(|c| {
                std::iter::once(c.id.len()).chain(c.cases.iter().map(|k| k.name.len() + 2))
            })
            .max()
            .unwrap_or(5)
            .max(5);
        let _ = writeln!(out, "{:width$}  {:7} DETAIL", "CHECK", "RESULT");
        let pad = " ".repeat(width + 2 + 8);
        for check in &self.checks {
            let _ = writeln!(
                out,
                "{:width$}  {:7} {}",
                check.id,
                check.verdict.label(),
                check.summary
            );
            if check.cases.len() > 1 || check.cases.iter().any(|c| c.verdict != check.verdict) {
                for case in &check.cases {
                    let name = format!("  {}", case.name);
                    let _ = writeln!(
                        out,
                        "{name:width$}  {:7} {}",
                        case.verdict.label(),
                        case.summary
                    );
                }
            }
            let shown = if verbose {
                check.notes.len()
            } else {
                check.notes.len().min(5)
            };
            for note in &check.notes[..shown] {
                let _ = writeln!(out, "{pad}{note}");
            }
            if shown < check.notes.len() {
                let _ = writeln!(
                    out,
                    "{pad}… {} more lines (-v shows them)",
                    check.notes.len() - shown
                );
            }
            if let Some(hint) = &check.hint
                && check.verdict >= Verdict::Warn
            {
                let _ = writeln!(out, "{pad}fix: {hint}");
            }
        }
        let required = self
            .checks
            .iter()
            .filter(|c| c.required && c.verdict != Verdict::Skip)
            .count();
        let failed = self.checks.iter().filter(|c| c.fails()).count();
        let _ = if failed == 0 {
            writeln!(out, "verdict: pass ({required} required checks passed)")
        } else {
            writeln!(
                out,
                "verdict: FAIL ({failed} of {required} required checks failed)"
            )
        };
        if verbose {
            for (run, log) in &self.stderr {
                if log.bytes == 0 {
                    continue;
                }
                let _ = writeln!(
                    out,
                    "\nstderr of the {run} run ({} lines, {} bytes; the last 40 lines):",
                    log.lines, log.bytes
                );
                for line in log.last_lines(40) {
                    let _ = writeln!(out, "  | {line}");
                }
            }
        }
        out
    }

    /// JUnit XML, by the one mapping of the report model.
    pub fn to_junit(&self) -> String {
        mcp_conformance_report::junit::render(&self.to_model())
    }
}

/// Formats times and pids, either as measured or, for snapshots, stably:
/// a time becomes its bucket against the bound that matters for it, a pid
/// disappears.
#[derive(Debug, Clone, Copy)]
pub struct Fmt {
    /// Snapshot form: times as buckets, no pids.
    pub stable: bool,
}

impl Fmt {
    /// `12 ms`, `1.20 s`; stable: `< NAME` or `>= NAME`.
    pub fn dur(self, d: Duration, bound_name: &str, bound: Duration) -> String {
        if self.stable {
            if d < bound {
                format!("< {bound_name}")
            } else {
                format!(">= {bound_name}")
            }
        } else {
            human(d)
        }
    }

    /// A time for the JSON details.
    pub fn ms(self, d: Duration, bound_name: &str, bound: Duration) -> Value {
        if self.stable {
            Value::from(self.dur(d, bound_name, bound))
        } else {
            Value::from(d.as_millis() as u64)
        }
    }

    /// ` (pid 123)`, or nothing when stable.
    pub fn pid(self, pid: u32) -> String {
        if self.stable {
            String::new()
        } else {
            format!(" (pid {pid})")
        }
    }

    /// Where a stdout line starts: `byte 57 (line 3)`; stable: `line 3`.
    pub fn offset(self, offset: u64, line: u64) -> String {
        if self.stable {
            format!("line {line}")
        } else {
            format!("byte {offset} (line {line})")
        }
    }

    /// A server's words; stable: every run of digits becomes `N` (pids, times).
    pub fn text(self, text: &str) -> String {
        if !self.stable {
            return text.to_owned();
        }
        let mut out = String::with_capacity(text.len());
        let mut in_digits = false;
        for c in text.chars() {
            if c.is_ascii_digit() {
                if !in_digits {
                    out.push('N');
                }
                in_digits = true;
            } else {
                out.push(c);
                in_digits = false;
            }
        }
        out
    }

    /// `pid` as JSON; stable: `null`.
    pub(crate) fn pid_value(self, pid: u32) -> Value {
        if self.stable {
            Value::Null
        } else {
            Value::from(pid)
        }
    }
}

pub use crate::units::human;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_bucketed_when_stable() {
        let fmt = Fmt { stable: true };
        assert_eq!(
            fmt.dur(
                Duration::from_millis(5),
                "eof-grace",
                Duration::from_secs(1)
            ),
            "< eof-grace"
        );
        assert_eq!(
            fmt.dur(Duration::from_secs(2), "eof-grace", Duration::from_secs(1)),
            ">= eof-grace"
        );
        assert_eq!(
            Fmt { stable: false }.dur(Duration::from_millis(1500), "x", Duration::ZERO),
            "1.50 s"
        );
        assert_eq!(human(Duration::from_millis(7)), "7 ms");
    }
}
