//! The scenario file format (`docs/scenarios.md`): the typed model
//! (`steps`, `values`), loading with errors that name the file and the line,
//! the size and nesting bounds checked before parsing (`limits`), and the
//! few checks that span fields (`validate`).

pub mod limits;
mod lines;
pub mod steps;
pub mod values;

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use mcp_conformance_report::contract;
use serde::Deserialize;

pub use steps::*;
pub use values::*;

/// One scenario file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// One sentence: what this scenario proves.
    pub description: String,
    /// The rules of docs/contract.md it covers (`4.close.eof`,
    /// `1.validate.4`...); an id the contract does not define is a load error.
    #[serde(default)]
    pub rules: Vec<String>,
    /// The stdio server under test (exclusive with `config`).
    pub server: Option<ServerSpec>,
    /// A whole configuration document (YAML or desktop JSON) to load
    /// (exclusive with `server`).
    pub config: Option<String>,
    /// Variables visible to `${VAR}` expansion in `config` (besides
    /// `FIXTURES`, `MARKER` and `LEDGER`, which the runner provides). The
    /// process environment is not consulted, so a scenario is deterministic.
    #[serde(default)]
    pub config_env: BTreeMap<String, String>,
    /// Log level captured from the client: `trace`, `debug` (default) or `info`.
    #[serde(default)]
    pub log_level: LogLevel,
    /// The subjects it runs against: `library` always; `external` adds a
    /// run through a driver. Absent: the default of
    /// [`Scenario::default_subjects`].
    pub subjects: Option<Vec<SubjectKind>>,
    /// What to do, in order.
    #[serde(default, deserialize_with = "steps::steps")]
    pub steps: Vec<Step>,
    /// What must hold once the steps are done.
    #[serde(default)]
    pub expect: Expect,
}

/// A kind of subject under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubjectKind {
    /// This project's library, in process.
    Library,
    /// A client program driven through the driver protocol
    /// (`docs/client-check.md`), graded only from what the harness observes.
    External,
}

impl Scenario {
    /// Whether the scenario runs against an external client too: as
    /// declared, or by default when nothing in it needs the library in
    /// process.
    pub fn applies_to_external(&self) -> bool {
        match &self.subjects {
            Some(subjects) => subjects.contains(&SubjectKind::External),
            None => self.library_only().is_none(),
        }
    }

    /// The default `subjects`: with `external` unless something in the
    /// scenario needs the library in process.
    pub fn default_subjects(&self) -> Vec<SubjectKind> {
        match self.library_only() {
            Some(_) => vec![SubjectKind::Library],
            None => vec![SubjectKind::Library, SubjectKind::External],
        }
    }

    /// The first thing that only the library in process can do or report,
    /// with what to say about it: a `config:` (the client's own config
    /// format), a server setting the driver protocol does not carry, a
    /// library-only step, or `secrets_absent` (what a client writes in its
    /// log is seen only in process).
    fn library_only(&self) -> Option<(At, String)> {
        if self.config.is_some() {
            return Some((
                At::Key("config"),
                "a `config` is loaded with this project's config format; a driver takes one server"
                    .into(),
            ));
        }
        if let Some(server) = &self.server {
            let fields = [
                ("era", server.era.is_some()),
                ("probe_timeout", server.probe_timeout.is_some()),
                ("restart", server.restart.is_some()),
                ("restart_backoff", server.restart_backoff.is_some()),
            ];
            if let Some((field, _)) = fields.iter().find(|(_, set)| *set) {
                return Some((
                    At::NestedKey(field),
                    format!(
                        "the server's `{field}` is a setting of this project's client; the driver protocol does not carry it"
                    ),
                ));
            }
        }
        if let Some(index) = self.steps.iter().position(|step| !step.external()) {
            let step = &self.steps[index];
            return Some((
                At::Step(index),
                format!(
                    "step {} (`{}`) drives the library in process; no driver can take it",
                    index + 1,
                    step.key()
                ),
            ));
        }
        if !self.expect.secrets_absent.is_empty() {
            return Some((
                At::NestedKey("secrets_absent"),
                "`secrets_absent` reads the client's own log, seen only in process".into(),
            ));
        }
        None
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogLevel {
    Trace,
    #[default]
    Debug,
    Info,
}

/// The server under test, built into a stdio config by the runner.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSpec {
    /// The server's name in errors and logs (default `server`).
    #[serde(default = "default_server_name")]
    pub name: String,
    /// A fixture, by binary name with or without `fixture-` (`well-behaved`).
    pub fixture: Option<Fixture>,
    /// Any other command (absolute, DIR-relative or looked up in PATH).
    pub command: Option<String>,
    /// Arguments; `{fixtures}` is the fixture directory, `{marker}` the
    /// scenario's marker and `{tmp}` its temporary directory. Fixtures get
    /// `--marker=<marker>` first, always.
    #[serde(default)]
    pub args: Vec<String>,
    /// Added to the child's environment (with the same substitutions).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub dir: Option<String>,
    pub timeout: Option<Span>,
    pub eof_grace: Option<Span>,
    pub term_grace: Option<Span>,
    /// ERA: `auto` (default), `modern` or `legacy`.
    pub era: Option<mcp_stdio_client::EraSetting>,
    /// PROBE_TIMEOUT: the bound on the `server/discover` probe of `auto`.
    pub probe_timeout: Option<Span>,
    /// RESTART: restarts allowed after an unexpected exit (default 0).
    pub restart: Option<u32>,
    /// RESTART_BACKOFF: the wait before the first restart.
    pub restart_backoff: Option<Span>,
}

fn default_server_name() -> String {
    "server".to_owned()
}

/// What must hold after the steps.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// The processes allowed (and required) to survive: by default none.
    #[serde(default)]
    pub survivors: Vec<SurvivorExpect>,
    /// Zombies left: always checked, by default 0.
    #[serde(default)]
    pub zombies: u32,
    #[serde(default)]
    pub ledger: Vec<LedgerExpect>,
    /// Strings that must appear nowhere in what the client itself wrote:
    /// its logs (minus the child's stderr lines), errors, events, the outcome.
    #[serde(default)]
    pub secrets_absent: Vec<String>,
    /// The child's stderr as the client forwarded it.
    pub stderr: Option<StderrExpect>,
    /// Stdout lines the client skipped.
    pub stdout_skipped: Option<CountExpect>,
    /// Files that must exist after the run (`{tmp}` is the scenario's own
    /// temporary directory): what a process wrote on its way out.
    #[serde(default)]
    pub files: Vec<String>,
    /// For `config` scenarios: the load result.
    pub load: Option<LoadExpect>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SurvivorExpect {
    /// The fixture name it recorded in the ledger (`fixture-escaping-sidecar`).
    pub fixture: String,
    /// Whether it left the server's process group.
    pub left_group: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LedgerExpect {
    /// The fixture name recorded in the ledger.
    pub fixture: String,
    /// Exactly these events, in this order.
    pub events: Option<Vec<String>>,
    /// These events appear (each at least once).
    #[serde(default)]
    pub contains: Vec<String>,
    /// These events never appear.
    #[serde(default)]
    pub absent: Vec<String>,
    /// These events appear in this relative order.
    #[serde(default)]
    pub order: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StderrExpect {
    pub min_lines: Option<u64>,
    /// Substrings that some forwarded stderr line (the stderr log records)
    /// must contain.
    #[serde(default)]
    pub contains: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CountExpect {
    pub min: Option<u64>,
    pub max: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadExpect {
    /// Whether the config must load.
    pub ok: bool,
    #[serde(default)]
    pub error_contains: Vec<String>,
    #[serde(default)]
    pub error_not_contains: Vec<String>,
    /// Effective flags of loaded servers.
    #[serde(default)]
    pub servers: Vec<ServerFlags>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerFlags {
    pub name: String,
    /// `stdio` or `http`.
    pub transport: Option<String>,
    pub requires_consent: Option<bool>,
    pub serial: Option<bool>,
}

/// A scenario file that cannot be used.
#[derive(Debug)]
pub struct ScenarioError {
    /// The scenario file.
    pub file: PathBuf,
    /// The 1-based line the mistake is on, when it has one.
    pub line: Option<usize>,
    /// What kind of mistake it is.
    pub kind: ScenarioErrorKind,
    /// The mistake and, where there is one, the fix.
    pub message: String,
}

/// What is wrong with a scenario file, for tests and tools to tell apart
/// (the message says it for people).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScenarioErrorKind {
    /// The file cannot be read.
    Read,
    /// The file is not UTF-8.
    NotUtf8,
    /// Larger than [`limits::MAX_BYTES`].
    TooLarge,
    /// Nested deeper than [`limits::MAX_DEPTH`].
    TooDeep,
    /// Not valid YAML, not the scenario format, or a cross-field mistake.
    Invalid,
}

impl std::fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.file.display())?;
        match (self.kind, self.line) {
            // "x.yaml is not UTF-8: ...": the line is in the message, after
            // the decoder's words.
            (ScenarioErrorKind::NotUtf8, _) => write!(f, " is not UTF-8: {}", self.message),
            (_, Some(line)) => write!(f, ":{line}: {}", self.message),
            (_, None) => write!(f, ": {}", self.message),
        }
    }
}

impl std::error::Error for ScenarioError {}

impl ScenarioError {
    fn new(file: &Path, line: Option<usize>, kind: ScenarioErrorKind, message: String) -> Self {
        ScenarioError {
            file: file.to_owned(),
            line,
            kind,
            message,
        }
    }
}

/// Loads and validates one scenario file. At most one byte more than the
/// size bound is read, so a huge file (or a device) fails at once.
pub fn load(file: &Path) -> Result<Scenario, ScenarioError> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    std::fs::File::open(file)
        .and_then(|opened| {
            opened
                .take(limits::MAX_BYTES as u64 + 1)
                .read_to_end(&mut bytes)
        })
        .map_err(|error| {
            ScenarioError::new(
                file,
                None,
                ScenarioErrorKind::Read,
                format!("cannot read: {error}"),
            )
        })?;
    parse_bytes(&bytes, file)
}

/// Parses and validates the scenario file `bytes` read from `file` (an
/// embedded scenario is kept as bytes, so a file that is not UTF-8 fails
/// here, as that one scenario, rather than the build of the whole crate).
pub fn parse_bytes(bytes: &[u8], file: &Path) -> Result<Scenario, ScenarioError> {
    if bytes.len() > limits::MAX_BYTES {
        return Err(too_large(file));
    }
    let text = std::str::from_utf8(bytes).map_err(|error| {
        let valid = &bytes[..error.valid_up_to()];
        let line = valid.iter().filter(|&&byte| byte == b'\n').count() + 1;
        ScenarioError::new(
            file,
            Some(line),
            ScenarioErrorKind::NotUtf8,
            format!("{error} (line {line}); save it as UTF-8"),
        )
    })?;
    parse(text, file)
}

fn too_large(file: &Path) -> ScenarioError {
    ScenarioError::new(
        file,
        None,
        ScenarioErrorKind::TooLarge,
        format!(
            "the file is larger than {} KiB; a scenario is a few kilobytes, so check that this is \
             the right file",
            limits::MAX_BYTES / 1024
        ),
    )
}

/// Parses and validates scenario `text` read from `file`.
pub fn parse(text: &str, file: &Path) -> Result<Scenario, ScenarioError> {
    if text.len() > limits::MAX_BYTES {
        return Err(too_large(file));
    }
    if let Some(line) = limits::line_beyond(text.as_bytes(), limits::MAX_DEPTH) {
        return Err(ScenarioError::new(
            file,
            Some(line),
            ScenarioErrorKind::TooDeep,
            format!(
                "lists and mappings are nested more than {} levels deep; a scenario needs \
                 about 8, so check the brackets and indentation here",
                limits::MAX_DEPTH
            ),
        ));
    }
    let error = |line, message| ScenarioError::new(file, line, ScenarioErrorKind::Invalid, message);
    let scenario: Scenario = yaml_serde::from_str(text).map_err(|e| {
        let message = e.to_string();
        let line = e
            .location()
            .map(|l| lines::refine(text, l.line(), &message));
        error(line, message)
    })?;
    validate(&scenario).map_err(|(at, message)| error(at.line(text), message))?;
    validate_rules(&scenario.rules)
        .map_err(|(id, message)| error(id.and_then(|id| lines::of_rule(text, &id)), message))?;
    Ok(scenario)
}

/// Where in the file a cross-field mistake is.
#[derive(Debug)]
enum At {
    Nowhere,
    Key(&'static str),
    NestedKey(&'static str),
    Step(usize),
}

impl At {
    fn line(&self, text: &str) -> Option<usize> {
        match self {
            At::Nowhere => None,
            At::Key(key) => lines::of_key(text, key),
            At::NestedKey(key) => lines::of_nested_key(text, key),
            At::Step(index) => lines::of_step(text, *index),
        }
    }
}

/// The checks that span fields (each field's own type is checked as it is
/// read).
fn validate(scenario: &Scenario) -> Result<(), (At, String)> {
    match (&scenario.server, &scenario.config) {
        (Some(_), Some(_)) => {
            return Err((
                At::Key("config"),
                "give `server` or `config`, not both".into(),
            ));
        }
        (None, None) => {
            return Err((
                At::Nowhere,
                "give a `server` to run or a `config` to load".into(),
            ));
        }
        _ => {}
    }
    if let Some(server) = &scenario.server
        && server.fixture.is_some() == server.command.is_some()
    {
        return Err((
            At::Key("server"),
            "a server needs exactly one of `fixture` and `command`".into(),
        ));
    }
    if scenario.config.is_none() && scenario.expect.load.is_some() {
        return Err((
            At::NestedKey("load"),
            "`expect.load` needs a `config`".into(),
        ));
    }
    if let Some(subjects) = &scenario.subjects {
        if !subjects.contains(&SubjectKind::Library) {
            return Err((
                At::Key("subjects"),
                "every scenario runs against the library: `subjects` must include `library`".into(),
            ));
        }
        if subjects.contains(&SubjectKind::External)
            && let Some((at, why)) = scenario.library_only()
        {
            return Err((at, format!("declared for `external` subjects, but {why}")));
        }
    }
    let mut connected = false;
    let mut session = false;
    for (index, step) in scenario.steps.iter().enumerate() {
        let number = index + 1;
        match step {
            Step::Connect(_) | Step::AbandonConnect(_) => connected = true,
            Step::BuildSession(_) if scenario.config.is_none() => {
                return Err((At::Step(index), "`build_session` needs a `config`".into()));
            }
            Step::BuildSession(_) => session = true,
            Step::DiscoverTools(_) | Step::SessionCall(_) | Step::CloseSession(_) if !session => {
                return Err((
                    At::Step(index),
                    format!(
                        "step {number} (`{}`) runs before `build_session`",
                        step.key()
                    ),
                ));
            }
            Step::DiscoverTools(_) | Step::SessionCall(_) | Step::CloseSession(_) => {}
            _ if !connected => {
                return Err((
                    At::Step(index),
                    format!("step {number} (`{}`) runs before any `connect`", step.key()),
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Every id in `rules:` must be defined by docs/contract.md, as embedded in
/// this binary (so the check needs no checkout). Returns the offending id,
/// to find its line, and the message.
fn validate_rules(ids: &[String]) -> Result<(), (Option<String>, String)> {
    let rules = contract::rules().map_err(|error| {
        (
            None,
            format!("cannot check `rules:`: the embedded contract is malformed: {error}"),
        )
    })?;
    for id in ids {
        if rules.iter().any(|rule| &rule.id == id) {
            continue;
        }
        let hint = match contract::suggest(id, rules) {
            Some(near) => format!("did you mean `{near}`? "),
            None => String::new(),
        };
        return Err((
            Some(id.clone()),
            format!(
                "unknown rule `{id}`: {hint}the rule ids are the headings of {}; \
                 a new rule is added there first (see its \"Adding a rule\")",
                contract::PATH
            ),
        ));
    }
    Ok(())
}

/// `well-behaved` → `fixture-well-behaved`; a full name is kept.
pub fn fixture_binary(name: &str) -> String {
    if name.starts_with("fixture-") {
        name.to_owned()
    } else {
        format!("fixture-{name}")
    }
}

/// Every `*.yaml` scenario under `root`, as (name, path), sorted by name.
/// The name is the path relative to `root` without `.yaml`, with `/`
/// separators. Dotfiles and dot-directories are skipped.
pub fn discover(root: &Path) -> std::io::Result<Vec<(String, PathBuf)>> {
    let mut found = Vec::new();
    walk(root, root, &mut found)?;
    found.sort();
    Ok(found)
}

fn walk(root: &Path, dir: &Path, found: &mut Vec<(String, PathBuf)>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let name = entry.file_name();
        if name.to_string_lossy().starts_with('.') {
            continue;
        }
        if entry.file_type()?.is_dir() {
            if name != "snapshots" {
                walk(root, &path, found)?;
            }
        } else if path.extension().is_some_and(|ext| ext == "yaml") {
            let relative = path
                .strip_prefix(root)
                .expect("walked from root")
                .with_extension("");
            let name = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/");
            found.push((name, path));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
