//! The scenario file format (`docs/scenarios.md`): loading, with errors that
//! name the file and the line, and validation beyond the YAML shape.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    time::Duration,
};

use serde::Deserialize;

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
    #[serde(default)]
    pub steps: Vec<Step>,
    #[serde(default)]
    pub expect: Expect,
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
    pub fixture: Option<String>,
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
    pub timeout: Option<String>,
    pub eof_grace: Option<String>,
    pub term_grace: Option<String>,
    /// ERA: `auto` (default), `modern` or `legacy`.
    pub era: Option<mcp_stdio_client::EraSetting>,
    /// PROBE_TIMEOUT: the bound on the `server/discover` probe of `auto`.
    pub probe_timeout: Option<String>,
    /// RESTART: restarts allowed after an unexpected exit (default 0).
    pub restart: Option<u32>,
    /// RESTART_BACKOFF: the wait before the first restart.
    pub restart_backoff: Option<String>,
}

fn default_server_name() -> String {
    "server".to_owned()
}

/// One step. Steps run in order; each checks its own `expect`.
///
/// Written as a one-key map (`- close: {expect: ...}`); yaml_serde would
/// want YAML tags (`!close`) for an externally tagged enum, so the map is
/// read first and turned into a variant.
#[derive(Debug, Deserialize)]
#[serde(try_from = "StepMap")]
pub enum Step {
    /// Spawn the server and complete the handshake (`StdioClient::connect`).
    Connect(ConnectStep),
    ListTools(PlainStep),
    Call(CallStep),
    /// Send a signal to the child (or its group) from outside the client.
    Kill(KillStep),
    /// Wait (bounded) until the ledger has a matching record.
    WaitLedger(WaitLedgerStep),
    Close(PlainStep),
    /// Call close from several tasks at once; every outcome must be equal.
    CloseConcurrently(ConcurrentCloseStep),
    /// Drop the client without closing it.
    Drop(EmptyStep),
    /// `Session::build` over every server of `config`.
    BuildSession(BuildSessionStep),
    /// `Session::discover_tools`.
    DiscoverTools(DiscoverToolsStep),
    /// `Session::call` by qualified name (`mcp_<server>_<tool>`).
    SessionCall(CallStep),
    /// `Session::close`: every server at once.
    CloseSession(CloseSessionStep),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuildSessionStep {
    /// The `gh` program for AUTH gh (default: one that does not exist, so a
    /// scenario never depends on the machine's gh).
    pub gh_command: Option<String>,
    #[serde(default)]
    pub expect: BuildSessionExpect,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuildSessionExpect {
    /// The servers that started, exactly.
    pub started: Option<Vec<String>>,
    /// The servers that failed, with their error kind, exactly.
    #[serde(default)]
    pub failed: BTreeMap<String, String>,
    /// The build took less than this (a bound, e.g. well under the sum of
    /// the servers' handshake delays).
    pub faster_than: Option<String>,
    /// How many times `gh auth token` ran.
    pub gh_runs: Option<u32>,
    /// No warning was logged while building.
    #[serde(default)]
    pub no_warnings: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiscoverToolsStep {
    #[serde(default)]
    pub expect: DiscoverExpect,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiscoverExpect {
    pub count: Option<usize>,
    /// Qualified names that must be offered.
    #[serde(default)]
    pub contains: Vec<String>,
    /// Flags of named tools.
    #[serde(default)]
    pub flags: BTreeMap<String, ToolFlags>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolFlags {
    pub requires_consent: bool,
    pub serial: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CloseSessionStep {
    #[serde(default)]
    pub expect: CloseSessionExpect,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CloseSessionExpect {
    /// How each stdio server's close ended.
    #[serde(default)]
    pub paths: BTreeMap<String, String>,
    /// The whole close took less than this (concurrent: about the slowest).
    pub faster_than: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StepMap {
    connect: Option<ConnectStep>,
    list_tools: Option<PlainStep>,
    call: Option<CallStep>,
    kill: Option<KillStep>,
    wait_ledger: Option<WaitLedgerStep>,
    close: Option<PlainStep>,
    close_concurrently: Option<ConcurrentCloseStep>,
    drop: Option<EmptyStep>,
    build_session: Option<BuildSessionStep>,
    discover_tools: Option<DiscoverToolsStep>,
    session_call: Option<CallStep>,
    close_session: Option<CloseSessionStep>,
}

impl TryFrom<StepMap> for Step {
    type Error = String;

    fn try_from(map: StepMap) -> Result<Self, Self::Error> {
        let mut steps: Vec<Step> = [
            map.connect.map(Step::Connect),
            map.list_tools.map(Step::ListTools),
            map.call.map(Step::Call),
            map.kill.map(Step::Kill),
            map.wait_ledger.map(Step::WaitLedger),
            map.close.map(Step::Close),
            map.close_concurrently.map(Step::CloseConcurrently),
            map.drop.map(Step::Drop),
            map.build_session.map(Step::BuildSession),
            map.discover_tools.map(Step::DiscoverTools),
            map.session_call.map(Step::SessionCall),
            map.close_session.map(Step::CloseSession),
        ]
        .into_iter()
        .flatten()
        .collect();
        match steps.len() {
            1 => Ok(steps.remove(0)),
            0 => Err("a step needs one of: connect, list_tools, call, kill, wait_ledger, close, \
                      close_concurrently, drop, build_session, discover_tools, session_call, close_session"
                .into()),
            _ => Err("a step has exactly one key (write each step as its own list item)".into()),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectStep {
    /// With `config`: which server to connect (default: the only one).
    pub server: Option<String>,
    #[serde(default)]
    pub expect: StepExpect,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlainStep {
    #[serde(default)]
    pub expect: StepExpect,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmptyStep {}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallStep {
    pub tool: String,
    #[serde(default)]
    pub args: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    pub expect: StepExpect,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KillStep {
    #[serde(default = "default_kill_signal")]
    pub signal: String,
    /// `child` (default) or `group`.
    #[serde(default)]
    pub target: KillTarget,
}

fn default_kill_signal() -> String {
    "SIGKILL".to_owned()
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KillTarget {
    #[default]
    Child,
    Group,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WaitLedgerStep {
    pub event: String,
    pub fixture: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConcurrentCloseStep {
    pub count: usize,
    #[serde(default)]
    pub expect: StepExpect,
}

/// What a step must produce. Absent fields are not checked, except that a
/// step without `error` must succeed.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepExpect {
    /// The error kind the step must fail with.
    pub error: Option<String>,
    #[serde(default)]
    pub message_contains: Vec<String>,
    #[serde(default)]
    pub message_not_contains: Vec<String>,
    /// `call`: the text of the first content block.
    pub text: Option<String>,
    /// `call`: the tool-level error flag.
    pub is_error: Option<bool>,
    /// `list_tools`: how many tools.
    pub count: Option<usize>,
    /// `close`: how it ended: `eof`, `sigterm`, `sigkill`, `exited`.
    pub path: Option<String>,
    /// `close`: `exit status 0`, `signal 9 (SIGKILL)`...
    pub status: Option<String>,
    /// `close`: whether the group sweep found stragglers.
    pub group_swept: Option<bool>,
    /// The time bucket the step must land in (see [`Bucket`]).
    pub within: Option<Bucket>,
}

/// Time buckets: what a timing assertion means, robust to a loaded machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Bucket {
    /// Under `min(250 ms, TIMEOUT / 2)`: "at once".
    Fast,
    /// Under TIMEOUT (but not fast).
    BeforeTimeout,
    /// At least TIMEOUT, under TIMEOUT + 2 s.
    AtTimeout,
    /// TIMEOUT + 2 s or more.
    Late,
    /// Close: under EOF_GRACE.
    BeforeEofGrace,
    /// Close: at least EOF_GRACE, under EOF_GRACE + TERM_GRACE.
    WithinTermGrace,
    /// Close: at least EOF_GRACE + TERM_GRACE.
    AfterTermGrace,
}

impl Bucket {
    pub fn is_close_bucket(self) -> bool {
        matches!(
            self,
            Bucket::BeforeEofGrace | Bucket::WithinTermGrace | Bucket::AfterTermGrace
        )
    }

    /// The bucket of a request-like step that took `elapsed` under `timeout`.
    pub fn of_request(elapsed: Duration, timeout: Duration) -> Bucket {
        if elapsed < Duration::from_millis(250).min(timeout / 2) {
            Bucket::Fast
        } else if elapsed < timeout {
            Bucket::BeforeTimeout
        } else if elapsed < timeout + Duration::from_secs(2) {
            Bucket::AtTimeout
        } else {
            Bucket::Late
        }
    }

    /// The bucket of a close that took `elapsed`.
    pub fn of_close(elapsed: Duration, eof_grace: Duration, term_grace: Duration) -> Bucket {
        if elapsed < eof_grace {
            Bucket::BeforeEofGrace
        } else if elapsed < eof_grace + term_grace {
            Bucket::WithinTermGrace
        } else {
            Bucket::AfterTermGrace
        }
    }
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
#[derive(Debug, thiserror::Error)]
#[error("{}{}: {message}", file.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct ScenarioError {
    pub file: PathBuf,
    pub line: Option<usize>,
    pub message: String,
}

/// Loads and validates one scenario file.
pub fn load(file: &Path) -> Result<Scenario, ScenarioError> {
    let text = std::fs::read_to_string(file).map_err(|error| ScenarioError {
        file: file.to_owned(),
        line: None,
        message: format!("cannot read: {error}"),
    })?;
    parse(&text, file)
}

/// Parses and validates scenario `text` read from `file`.
pub fn parse(text: &str, file: &Path) -> Result<Scenario, ScenarioError> {
    let scenario: Scenario = yaml_serde::from_str(text).map_err(|error| ScenarioError {
        file: file.to_owned(),
        line: error.location().map(|l| l.line()),
        message: error.to_string(),
    })?;
    validate(&scenario).map_err(|(needle, message)| ScenarioError {
        file: file.to_owned(),
        line: needle.and_then(|needle| line_of(text, &needle)),
        message,
    })?;
    validate_rules(&scenario.rules).map_err(|(id, message)| ScenarioError {
        file: file.to_owned(),
        line: id.and_then(|id| line_of_rule(text, &id)),
        message,
    })?;
    Ok(scenario)
}

/// Every id in `rules:` must be defined by docs/contract.md, as embedded in
/// this binary (so the check needs no checkout). Returns the offending id,
/// to find its line, and the message.
fn validate_rules(ids: &[String]) -> Result<(), Invalid> {
    let rules = crate::contract::rules().map_err(|error| {
        (
            None,
            format!("cannot check `rules:`: the embedded contract is malformed: {error}"),
        )
    })?;
    for id in ids {
        if rules.iter().any(|rule| &rule.id == id) {
            continue;
        }
        let hint = match crate::contract::suggest(id, rules) {
            Some(near) => format!("did you mean `{near}`? "),
            None => String::new(),
        };
        return Err((
            Some(id.clone()),
            format!(
                "unknown rule `{id}`: {hint}the rule ids are the headings of {}; \
                 a new rule is added there first (see its \"Adding a rule\")",
                crate::contract::PATH
            ),
        ));
    }
    Ok(())
}

/// The 1-based line of rule `id` in the `rules:` list: the first line from
/// the top-level `rules:` key on that holds it (an id may also appear in a
/// description, before the list).
fn line_of_rule(text: &str, id: &str) -> Option<usize> {
    let start = text.lines().position(|line| line.starts_with("rules:"))?;
    text.lines()
        .enumerate()
        .skip(start)
        .find(|(_, line)| {
            line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '_'))
                .any(|token| token == id)
        })
        .map(|(index, _)| index + 1)
}

/// The 1-based line of the first occurrence of `needle`.
fn line_of(text: &str, needle: &str) -> Option<usize> {
    text.lines()
        .position(|line| line.contains(needle))
        .map(|index| index + 1)
}

type Invalid = (Option<String>, String);

fn validate(scenario: &Scenario) -> Result<(), Invalid> {
    match (&scenario.server, &scenario.config) {
        (Some(_), Some(_)) => {
            return Err((
                Some("config:".into()),
                "give `server` or `config`, not both".into(),
            ));
        }
        (None, None) => return Err((None, "give a `server` to run or a `config` to load".into())),
        _ => {}
    }
    if let Some(server) = &scenario.server {
        validate_server(server)?;
    }
    if scenario.config.is_none() && scenario.expect.load.is_some() {
        return Err((
            Some("load:".into()),
            "`expect.load` needs a `config`".into(),
        ));
    }
    let mut connected = false;
    let mut session = false;
    for (index, step) in scenario.steps.iter().enumerate() {
        let at = |what: &str| Some(what.to_owned());
        match step {
            Step::Connect(step) => {
                connected = true;
                validate_expect(&step.expect, "connect", &[])?;
            }
            Step::BuildSession(step) => {
                if scenario.config.is_none() {
                    return Err((
                        at("build_session"),
                        "`build_session` needs a `config`".into(),
                    ));
                }
                session = true;
                validate_bound(&step.expect.faster_than)?;
            }
            Step::DiscoverTools(_) | Step::SessionCall(_) | Step::CloseSession(_) if !session => {
                return Err((
                    None,
                    format!("step {} runs before `build_session`", index + 1),
                ));
            }
            Step::DiscoverTools(_) => {}
            Step::SessionCall(step) => {
                validate_expect(&step.expect, "call", &["text", "is_error"])?
            }
            Step::CloseSession(step) => {
                validate_bound(&step.expect.faster_than)?;
                for path in step.expect.paths.values() {
                    if !["eof", "sigterm", "sigkill", "exited"].contains(&path.as_str()) {
                        return Err((Some(path.clone()), format!("unknown close path `{path}`")));
                    }
                }
            }
            _ if !connected => {
                return Err((
                    None,
                    format!("step {} runs before any `connect`", index + 1),
                ));
            }
            Step::ListTools(step) => validate_expect(&step.expect, "list_tools", &["count"])?,
            Step::Call(step) => validate_expect(&step.expect, "call", &["text", "is_error"])?,
            Step::Close(step) => {
                validate_expect(&step.expect, "close", &["path", "status", "group_swept"])?
            }
            Step::CloseConcurrently(step) => {
                if step.count < 2 {
                    return Err((
                        at("close_concurrently"),
                        "close_concurrently needs a count of 2 or more".into(),
                    ));
                }
                validate_expect(&step.expect, "close", &["path", "status", "group_swept"])?;
            }
            Step::Kill(step) => {
                mcp_fixtures::cli::parse_signal(&step.signal).map_err(|e| (at(&step.signal), e))?;
            }
            Step::WaitLedger(_) | Step::Drop(_) => {}
        }
    }
    Ok(())
}

fn validate_bound(bound: &Option<String>) -> Result<(), Invalid> {
    if let Some(bound) = bound {
        mcp_stdio_client::config::parse_duration(bound)
            .map_err(|error| (Some(bound.clone()), format!("faster_than: {error}")))?;
    }
    Ok(())
}

fn validate_server(server: &ServerSpec) -> Result<(), Invalid> {
    match (&server.fixture, &server.command) {
        (Some(fixture), None) => {
            let name = fixture_binary(fixture);
            if !mcp_fixtures::locate::FIXTURES.contains(&name.as_str()) {
                return Err((
                    Some(fixture.clone()),
                    format!(
                        "no fixture named `{fixture}`; the fixtures are: {}",
                        mcp_fixtures::locate::FIXTURES.join(", ")
                    ),
                ));
            }
        }
        (None, Some(_)) => {}
        _ => {
            return Err((
                Some("server:".into()),
                "a server needs exactly one of `fixture` and `command`".into(),
            ));
        }
    }
    for (field, value) in [
        ("timeout", &server.timeout),
        ("eof_grace", &server.eof_grace),
        ("term_grace", &server.term_grace),
        ("probe_timeout", &server.probe_timeout),
        ("restart_backoff", &server.restart_backoff),
    ] {
        if let Some(value) = value {
            mcp_stdio_client::config::parse_duration(value)
                .map_err(|error| (Some(format!("{field}:")), format!("{field}: {error}")))?;
        }
    }
    Ok(())
}

fn validate_expect(expect: &StepExpect, step: &str, allowed: &[&str]) -> Result<(), Invalid> {
    if let Some(kind) = &expect.error
        && mcp_stdio_client::ErrorKind::parse(kind).is_none()
    {
        let kinds: Vec<&str> = mcp_stdio_client::ErrorKind::ALL
            .iter()
            .map(|kind| kind.as_str())
            .collect();
        return Err((
            Some(kind.clone()),
            format!(
                "unknown error kind `{kind}`; the kinds are: {}",
                kinds.join(", ")
            ),
        ));
    }
    let given = [
        ("text", expect.text.is_some()),
        ("is_error", expect.is_error.is_some()),
        ("count", expect.count.is_some()),
        ("path", expect.path.is_some()),
        ("status", expect.status.is_some()),
        ("group_swept", expect.group_swept.is_some()),
    ];
    for (field, present) in given {
        if present && !allowed.contains(&field) {
            return Err((
                Some(format!("{field}:")),
                format!("`expect.{field}` does not apply to `{step}`"),
            ));
        }
    }
    if let Some(path) = &expect.path
        && !["eof", "sigterm", "sigkill", "exited"].contains(&path.as_str())
    {
        return Err((
            Some(path.clone()),
            format!("unknown close path `{path}` (eof, sigterm, sigkill, exited)"),
        ));
    }
    if let Some(bucket) = expect.within
        && bucket.is_close_bucket() != (step == "close")
    {
        return Err((
            Some("within:".into()),
            format!("time bucket `{bucket:?}` does not apply to `{step}`"),
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
mod tests {
    use super::*;

    fn error(text: &str) -> String {
        parse(text, Path::new("scenarios/x.yaml"))
            .unwrap_err()
            .to_string()
    }

    const OK: &str = "description: d\nserver: {fixture: well-behaved}\nsteps:\n  - connect: {}\n";

    #[test]
    fn a_valid_scenario_loads() {
        let scenario = parse(OK, Path::new("x.yaml")).unwrap();
        assert!(matches!(scenario.steps[0], Step::Connect(_)));
    }

    #[test]
    fn an_unknown_field_names_the_file_line_and_field() {
        let text = "description: d\nserver: {fixture: well-behaved}\nexpect:\n  survivers: []\n";
        let message = error(text);
        assert!(message.starts_with("scenarios/x.yaml:4: "), "{message}");
        assert!(message.contains("unknown field `survivers`"), "{message}");
    }

    #[test]
    fn an_unknown_step_is_an_error() {
        let message = error(
            "description: d\nserver: {fixture: well-behaved}\nsteps:\n  - connect: {}\n  - sleep: {ms: 5}\n",
        );
        assert!(message.contains("scenarios/x.yaml:5"), "{message}");
        assert!(message.contains("unknown field `sleep`"), "{message}");
    }

    #[test]
    fn a_missing_fixture_names_the_line() {
        let message = error("description: d\nserver:\n  fixture: nope\n");
        assert_eq!(
            message.lines().next().unwrap().split(": ").next().unwrap(),
            "scenarios/x.yaml:3"
        );
        assert!(message.contains("no fixture named `nope`"), "{message}");
    }

    #[test]
    fn unparsable_yaml_names_the_line() {
        let message = error("description: d\nserver: {fixture: [\n");
        assert!(message.starts_with("scenarios/x.yaml:"), "{message}");
    }

    #[test]
    fn semantic_mistakes_are_errors() {
        let before_connect =
            error("description: d\nserver: {fixture: well-behaved}\nsteps:\n  - close: {}\n");
        assert!(
            before_connect.contains("runs before any `connect`"),
            "{before_connect}"
        );
        let kind = error(
            "description: d\nserver: {fixture: well-behaved}\nsteps:\n  - connect: {expect: {error: oops}}\n",
        );
        assert!(kind.contains("unknown error kind `oops`"), "{kind}");
        let misplaced = error(
            "description: d\nserver: {fixture: well-behaved}\nsteps:\n  - connect: {}\n  - call: {tool: echo, expect: {path: eof}}\n",
        );
        assert!(
            misplaced.contains("`expect.path` does not apply to `call`"),
            "{misplaced}"
        );
        let bucket = error(
            "description: d\nserver: {fixture: well-behaved}\nsteps:\n  - connect: {expect: {within: before_eof_grace}}\n",
        );
        assert!(bucket.contains("does not apply to `connect`"), "{bucket}");
        let both = error("description: d\nserver: {fixture: well-behaved}\nconfig: x\n");
        assert!(both.contains("not both"), "{both}");
        let neither = error("description: d\n");
        assert!(neither.contains("give a `server`"), "{neither}");
        let two_keys = error(
            "description: d\nserver: {fixture: well-behaved}\nsteps:\n  - {connect: {}, close: {}}\n",
        );
        assert!(two_keys.contains("exactly one key"), "{two_keys}");
    }

    #[test]
    fn rule_ids_must_be_in_the_contract() {
        let known = "description: d\nrules: [\"4.close.eof\", \"4.guarantee\"]\nserver: {fixture: well-behaved}\n";
        assert_eq!(
            parse(known, Path::new("x.yaml")).unwrap().rules,
            ["4.close.eof", "4.guarantee"]
        );
        // The unknown id is on the third line of a block list.
        let message = error(
            "description: mentions 4.close.eoff\nrules:\n  - 4.close.eof\n  - 4.close.eoff\nserver: {fixture: well-behaved}\n",
        );
        assert!(
            message.starts_with(
                "scenarios/x.yaml:4: unknown rule `4.close.eoff`: did you mean `4.close.eof`? "
            ),
            "{message}"
        );
        assert!(message.contains("docs/contract.md"), "{message}");
        let flow = error(
            "description: d\nrules: [\"4.close.eof\", \"9.nothing\"]\nserver: {fixture: well-behaved}\n",
        );
        assert!(
            flow.starts_with("scenarios/x.yaml:2: unknown rule `9.nothing`: the rule ids"),
            "{flow}"
        );
    }

    #[test]
    fn discovery_sorts_skips_dotfiles_and_snapshots() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("b")).unwrap();
        std::fs::create_dir_all(dir.path().join("snapshots")).unwrap();
        for file in [
            "b/z.yaml",
            "a.yaml",
            ".hidden.yaml",
            "snapshots/s.yaml",
            "notes.md",
        ] {
            std::fs::write(dir.path().join(file), "").unwrap();
        }
        let names: Vec<String> = discover(dir.path())
            .unwrap()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(names, ["a", "b/z"]);
    }

    #[test]
    fn buckets_are_robust_boundaries() {
        let ms = Duration::from_millis;
        assert_eq!(Bucket::of_request(ms(10), ms(300)), Bucket::Fast);
        assert_eq!(Bucket::of_request(ms(200), ms(300)), Bucket::BeforeTimeout);
        assert_eq!(Bucket::of_request(ms(300), ms(300)), Bucket::AtTimeout);
        assert_eq!(Bucket::of_request(ms(2400), ms(300)), Bucket::Late);
        assert_eq!(
            Bucket::of_close(ms(5), ms(200), ms(200)),
            Bucket::BeforeEofGrace
        );
        assert_eq!(
            Bucket::of_close(ms(250), ms(200), ms(200)),
            Bucket::WithinTermGrace
        );
        assert_eq!(
            Bucket::of_close(ms(400), ms(200), ms(200)),
            Bucket::AfterTermGrace
        );
    }
}
