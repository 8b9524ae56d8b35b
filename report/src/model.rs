//! The one report every mode writes (schema 2): `cargo xtask conformance`
//! (`kind: scenarios`), `mcp-conformance server` and `mcp-conformance
//! client`. Each mode fills a [`Report`]; its JSON is the serialisation of
//! this model, and JUnit ([`crate::junit::render`]) and Markdown
//! ([`crate::markdown::render`]) are rendered from it. The JSON Schema is
//! `report/schema/report-v2.schema.json` ([`crate::schema`]);
//! docs/conformance-report.md describes the fields and the mapping from
//! schema 1.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The report schema version; bump it when a field is removed or its
/// meaning changes (adding an optional field does not).
pub const SCHEMA: u32 = 2;

/// The name every report gives its tool.
pub const TOOL: &str = "mcp-conformance";

/// One run's report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// [`SCHEMA`].
    pub schema: u32,
    /// Which mode wrote it.
    pub kind: Kind,
    /// Where and by what it was written.
    pub environment: Environment,
    /// What was checked.
    pub subject: Subject,
    /// The options the run was graded with (per kind; see the docs).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub settings: Map<String, Value>,
    /// `pass` or `fail`: whether the run passed, as the mode's exit status says.
    pub verdict: Verdict,
    /// The checks counted by verdict.
    pub totals: Totals,
    /// Inconsistencies that fail the run whatever the checks said (a
    /// baseline naming no scenario, a result nobody asked for).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
    /// The checks, in the order the mode ran them (scenarios: by name).
    pub checks: Vec<Check>,
}

/// Which mode wrote a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// `cargo xtask conformance`: the scenario suite against the reference client.
    Scenarios,
    /// `mcp-conformance server`: one stdio server graded from the outside.
    Server,
    /// `mcp-conformance client`: one client library through its driver, or a
    /// host graded from what it left behind (`--grade`).
    Client,
    /// `mcp-conformance host`: a host application graded as it runs servers.
    Host,
}

impl Kind {
    /// The name the JSON report gives the mode (`server`, `scenarios`).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Scenarios => "scenarios",
            Kind::Server => "server",
            Kind::Client => "client",
            Kind::Host => "host",
        }
    }
}

/// What wrote the report, and where. No host name, user or path: a report
/// is shared, and two runs on one machine render alike.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Environment {
    /// [`TOOL`].
    pub tool: String,
    /// The version of the tool (the crate that wrote the report).
    pub version: String,
    /// `linux`, as Rust's `std::env::consts::OS` names it.
    pub os: String,
    /// `x86_64`, as Rust's `std::env::consts::ARCH` names it.
    pub arch: String,
}

impl Environment {
    /// This machine, for a tool of `version`.
    pub fn current(version: &str) -> Self {
        Self {
            tool: TOOL.to_owned(),
            version: version.to_owned(),
            os: std::env::consts::OS.to_owned(),
            arch: std::env::consts::ARCH.to_owned(),
        }
    }
}

/// What was checked. The program is named as given and its arguments are
/// only counted: they may hold secrets.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Subject {
    /// The program run (server mode's COMMAND, client mode's driver or
    /// host); absent for scenarios, which run the reference client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
    /// How many arguments the program was given.
    #[serde(default)]
    pub args: usize,
    /// What the subject calls itself: a server's `serverInfo` (`name
    /// version`), a driver's client library, the reference client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its version, when it says it apart from its name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The protocol era the runs used (`modern`, `legacy`, `unknown`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub era: Option<String>,
    /// The eras the subject serves (server mode).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub eras: Vec<String>,
    /// The driver protocol version a driver spoke (client mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<u32>,
    /// What else the subject said about itself (client mode: the driver's
    /// `hello`).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub details: Value,
}

/// A verdict, of a check, a row or the run. Ordered from least to most
/// severe, so `max` merges repetitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Not run: a precondition the subject cannot meet, or not asked for.
    Skip,
    /// Reported for information only; never fails.
    Info,
    /// Judged and met.
    Pass,
    /// Worth a look, but not a failure (in scenarios: a failure the
    /// expected-failures baseline lists).
    Warn,
    /// Judged and not met: fails the run when the check is required.
    Fail,
    /// The check could not judge: its runner crashed or wrote nothing.
    Error,
}

impl Verdict {
    /// The word in tables: failures and errors in capitals.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Skip => "skip",
            Verdict::Info => "info",
            Verdict::Pass => "pass",
            Verdict::Warn => "warn",
            Verdict::Fail => "FAIL",
            Verdict::Error => "ERROR",
        }
    }

    /// The word in the JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Skip => "skip",
            Verdict::Info => "info",
            Verdict::Pass => "pass",
            Verdict::Warn => "warn",
            Verdict::Fail => "fail",
            Verdict::Error => "error",
        }
    }

    /// Whether a required check with this verdict fails the run.
    pub fn is_failure(self) -> bool {
        matches!(self, Verdict::Fail | Verdict::Error)
    }
}

/// The checks counted by verdict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    /// Every check.
    pub checks: usize,
    /// Those that passed.
    pub pass: usize,
    /// Those that failed.
    pub fail: usize,
    /// Those that warned.
    pub warn: usize,
    /// Those skipped.
    pub skip: usize,
    /// Those reported for information.
    pub info: usize,
    /// Those that could not be judged.
    pub error: usize,
}

impl Totals {
    /// Counts `checks`.
    pub fn of(checks: &[Check]) -> Self {
        let mut totals = Totals {
            checks: checks.len(),
            ..Totals::default()
        };
        for check in checks {
            *match check.verdict {
                Verdict::Pass => &mut totals.pass,
                Verdict::Fail => &mut totals.fail,
                Verdict::Warn => &mut totals.warn,
                Verdict::Skip => &mut totals.skip,
                Verdict::Info => &mut totals.info,
                Verdict::Error => &mut totals.error,
            } += 1;
        }
        totals
    }
}

/// One check (in scenarios: one scenario).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// Stable across runs and versions: `eof.exit`, `close.sigterm`,
    /// `lifecycle/eof-close`.
    pub id: String,
    /// What the check found.
    pub verdict: Verdict,
    /// Whether a `fail` (or `error`) here fails the run; an optional
    /// check's failure is reported only.
    pub required: bool,
    /// One line: what was seen.
    pub summary: String,
    /// One line on what to change, for a failure or a warning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    /// What the check checks (scenarios: the scenario's description).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The contract rules (docs/contract.md) it proves.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<String>,
    /// Measured numbers, by name, each with its unit.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub figures: BTreeMap<String, Figure>,
    /// Sub-results: a server check's situations, a scenario's checks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rows: Vec<Row>,
    /// Lines shown under the check (offending stdout lines, survivors).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The whole failure text, when there is more than a line of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// The expected-failures baseline's entry for this check (scenarios).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<BaselineEntry>,
    /// Structured data for tools, per check (timings, offenders, survivors).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub details: Value,
}

impl Check {
    /// A required check with nothing but its verdict and summary.
    pub fn new(id: impl Into<String>, verdict: Verdict, summary: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            verdict,
            required: true,
            summary: summary.into(),
            fix: None,
            description: None,
            rules: Vec::new(),
            figures: BTreeMap::new(),
            rows: Vec::new(),
            notes: Vec::new(),
            failure: None,
            baseline: None,
            details: Value::Null,
        }
    }

    /// Whether this check fails the run.
    pub fn fails(&self) -> bool {
        self.required && self.verdict.is_failure()
    }

    /// A figure's value in milliseconds, when it has one in that unit.
    pub fn millis(&self, name: &str) -> Option<u64> {
        self.figures
            .get(name)
            .filter(|figure| figure.unit == Unit::Ms)
            .and_then(|figure| figure.value.as_u64())
    }
}

/// A number and its unit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    /// The number.
    pub value: serde_json::Number,
    /// What it counts.
    pub unit: Unit,
}

impl Figure {
    /// `ms` milliseconds.
    pub fn ms(ms: u64) -> Self {
        Self {
            value: ms.into(),
            unit: Unit::Ms,
        }
    }
}

/// The units figures are in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// Milliseconds.
    Ms,
    /// Bytes.
    Bytes,
    /// A count of things.
    Count,
    /// A percentage, 0 to 100.
    Percent,
}

/// A sub-result of a check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Row {
    /// Stable within its check (`after-handshake`; a scenario's
    /// `lifecycle/eof-close::close.path`).
    pub id: String,
    /// What the row found.
    pub verdict: Verdict,
    /// One line saying what was seen.
    pub summary: String,
}

/// A check the expected-failures baseline lists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaselineEntry {
    /// The baseline's reason.
    pub reason: String,
    /// The check passed although the baseline expects it to fail: the
    /// baseline is out of date, and the run fails until the entry goes.
    pub stale: bool,
}

impl Report {
    /// A report of `kind` about `subject`, with its totals counted; the
    /// verdict is the mode's: `passed`.
    pub fn new(
        kind: Kind,
        environment: Environment,
        subject: Subject,
        passed: bool,
        checks: Vec<Check>,
    ) -> Self {
        Self {
            schema: SCHEMA,
            kind,
            environment,
            subject,
            settings: Map::new(),
            verdict: if passed { Verdict::Pass } else { Verdict::Fail },
            totals: Totals::of(&checks),
            problems: Vec::new(),
            checks,
        }
    }

    /// Whether the run passed.
    pub fn passed(&self) -> bool {
        self.verdict == Verdict::Pass
    }

    /// The JSON, pretty-printed, with a final newline.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).expect("the report serializes");
        text.push('\n');
        text
    }

    /// A setting as text, for renderings.
    pub fn setting(&self, name: &str) -> Option<&str> {
        self.settings.get(name).and_then(Value::as_str)
    }
}
