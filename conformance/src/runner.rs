//! Runs one scenario against the real client and real fixture processes,
//! observes the process table afterwards, and checks the expectations
//! (`observe`); the session steps live in `session`.

mod observe;
mod session;

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use mcp_stdio_client::rmcp::model::CallToolResult;
use mcp_stdio_client::{
    ClientError, CloseOutcome, Event, EventKind, EventLog, Session, StdioClient,
    config::{Config, ServerConfig, StdioConfig, Transport, parse_duration},
    error_chain as chain,
};
use nix::{sys::signal::kill, unistd::Pid};
use serde_json::Value;

use crate::{
    capture::Capture,
    observer::{self, MARKER_ENV},
    outcome::{LoadOutcome, LoadedServer, Normalizer, Outcome, StepOutcome, SurvivorOutcome},
    scenario::{Bucket, KillTarget, Scenario, ServerSpec, Step, StepExpect, fixture_binary},
};

/// The `gh` a session scenario uses unless it names one: absent on purpose,
/// so no scenario depends on the machine's gh or its login.
const NO_GH: &str = "/nonexistent/gh-for-scenarios";

/// Defaults for a `server:` scenario that does not set them: short, so the
/// suite takes seconds.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
pub const DEFAULT_GRACE: Duration = Duration::from_secs(1);
/// Bound on `wait_ledger` and on cleanup.
const WAIT_BOUND: Duration = Duration::from_secs(10);
/// How long the final survivor scan waits for SIGKILLed processes to vanish.
const SURVIVOR_SETTLE: Duration = Duration::from_secs(1);

/// One explicit expectation and whether it held.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Check {
    pub id: String,
    pub passed: bool,
    pub message: String,
}

/// Everything a run produced.
#[derive(Debug)]
pub struct Run {
    pub outcome: Outcome,
    pub checks: Vec<Check>,
    /// The unnormalized client log, printed when a scenario fails.
    pub log: String,
}

impl Run {
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|check| check.passed)
    }

    /// The failed checks, one per line.
    pub fn failures(&self) -> String {
        self.checks
            .iter()
            .filter(|check| !check.passed)
            .map(|check| format!("{}: {}", check.id, check.message))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Runs `scenario` (named `name`) to the end on a runtime of its own and
/// returns what happened. Never leaves a marked process behind.
pub fn run(name: &str, scenario: &Scenario) -> Run {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    observer::become_subreaper();
    let marker = format!(
        "mcpconf-{}-{}-{}",
        name.replace(['/', ' '], "_"),
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    );
    let tmp = tempfile::tempdir().expect("a temp dir for the ledger");
    let capture = Capture::default();
    let mut exec = Exec::new(
        name,
        scenario,
        marker,
        tmp.path().to_owned(),
        capture.clone(),
    );

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    {
        let _guard = tracing::subscriber::set_default(capture.subscriber(scenario.log_level));
        runtime.block_on(exec.execute());
    }
    drop(runtime);
    exec.finish(capture.text())
}

struct Exec<'a> {
    name: &'a str,
    capture: Capture,
    session: Option<Session>,
    /// Pid and group of every stdio server a session started.
    session_leaders: Vec<(i32, i32)>,
    scenario: &'a Scenario,
    marker: String,
    tmp: PathBuf,
    fixtures: Result<PathBuf, String>,
    config: Option<Config>,
    server: Option<ServerConfig>,
    client: Option<Arc<StdioClient>>,
    leader: Option<(i32, i32)>,
    events: Vec<Event>,
    stdout_skipped: u64,
    stderr_lines: u64,
    session_events: Vec<String>,
    outcome: Outcome,
    checks: Vec<Check>,
    /// What the client itself said: error messages and Debug output.
    words: Vec<String>,
    normalizer: Normalizer,
}

impl<'a> Exec<'a> {
    fn new(
        name: &'a str,
        scenario: &'a Scenario,
        marker: String,
        tmp: PathBuf,
        capture: Capture,
    ) -> Self {
        let fixtures = mcp_fixtures::locate::fixtures_dir().map(Path::to_path_buf);
        let mut normalizer = Normalizer::default();
        normalizer.add(tmp.to_string_lossy(), "[TMP]");
        if let Ok(dir) = &fixtures {
            normalizer.add(dir.to_string_lossy(), "[FIXTURES]");
        }
        normalizer.add(marker.clone(), "[MARKER]");
        if let Ok(path) = std::env::var("PATH") {
            normalizer.add(path, "[PATH]");
        }
        Self {
            name,
            capture,
            session: None,
            session_leaders: Vec::new(),
            scenario,
            marker,
            tmp,
            fixtures,
            config: None,
            server: None,
            client: None,
            leader: None,
            events: Vec::new(),
            stdout_skipped: 0,
            stderr_lines: 0,
            session_events: Vec::new(),
            outcome: Outcome::default(),
            checks: Vec::new(),
            words: Vec::new(),
            normalizer,
        }
    }

    fn ledger_path(&self) -> PathBuf {
        self.tmp.join("ledger.jsonl")
    }

    fn check(&mut self, id: &str, passed: bool, message: impl Into<String>) {
        self.checks.push(Check {
            id: format!("{}::{id}", self.name),
            passed,
            message: message.into(),
        });
    }

    /// `{fixtures}`, `{marker}` and `{tmp}` in a scenario string.
    fn substitute(&self, text: &str) -> String {
        let fixtures = self
            .fixtures
            .as_deref()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        text.replace("{fixtures}", &fixtures)
            .replace("{marker}", &self.marker)
            .replace("{tmp}", &self.tmp.to_string_lossy())
    }

    async fn execute(&mut self) {
        if let Err(error) = &self.fixtures {
            let error = error.clone();
            self.check(
                "fixtures",
                false,
                format!("cannot find the fixture binaries: {error}"),
            );
            return;
        }
        if let Some(spec) = &self.scenario.server {
            self.server = Some(self.server_from_spec(spec));
        }
        if let Some(text) = &self.scenario.config {
            self.load_config(text);
        }
        for (index, step) in self.scenario.steps.iter().enumerate() {
            self.step(index, step).await;
        }
        if let Some(session) = self.session.take() {
            self.collect_session(&session);
            drop(session);
            self.outcome.steps.push(StepOutcome {
                step: "drop session (implicit, end of steps)".into(),
                result: "ok".into(),
                ..StepOutcome::default()
            });
        }
        if let Some(client) = self.client.take() {
            self.collect(&client);
            let closed = client
                .events()
                .iter()
                .any(|e| matches!(e.kind, EventKind::Closed { .. }));
            drop(client);
            if !closed {
                self.outcome.steps.push(StepOutcome {
                    step: "drop (implicit, end of steps)".into(),
                    result: "ok".into(),
                    ..StepOutcome::default()
                });
            }
        }
    }

    fn server_from_spec(&mut self, spec: &ServerSpec) -> ServerConfig {
        let fixtures = self.fixtures.clone().unwrap_or_default();
        let mut stdio = match (&spec.fixture, &spec.command) {
            (Some(fixture), _) => {
                let mut stdio =
                    StdioConfig::new(fixtures.join(fixture_binary(fixture)).to_string_lossy());
                stdio.args.push(format!("--marker={}", self.marker));
                stdio
            }
            (None, Some(command)) => StdioConfig::new(self.substitute(command)),
            (None, None) => unreachable!("validated: fixture or command"),
        };
        stdio
            .args
            .extend(spec.args.iter().map(|arg| self.substitute(arg)));
        for (key, value) in &spec.env {
            stdio.env.insert(key.clone(), self.substitute(value));
        }
        stdio.dir = spec
            .dir
            .as_deref()
            .map(|dir| PathBuf::from(self.substitute(dir)));
        let duration = |value: &Option<String>, default| {
            value
                .as_deref()
                .map_or(default, |v| parse_duration(v).expect("validated"))
        };
        stdio.eof_grace = duration(&spec.eof_grace, DEFAULT_GRACE);
        stdio.term_grace = duration(&spec.term_grace, DEFAULT_GRACE);
        stdio.era = spec.era.unwrap_or_default();
        stdio.probe_timeout = duration(&spec.probe_timeout, stdio.probe_timeout);
        stdio.restart.attempts = spec.restart.unwrap_or(0);
        stdio.restart.backoff = duration(&spec.restart_backoff, stdio.restart.backoff);
        self.mark(&mut stdio);
        let mut server = ServerConfig::stdio(spec.name.clone(), stdio);
        server.timeout = duration(&spec.timeout, DEFAULT_TIMEOUT);
        server
    }

    /// Every scenario process carries the marker in its environment and the
    /// ledger path; fixtures also get it in argv.
    fn mark(&self, stdio: &mut StdioConfig) {
        stdio.env.insert(MARKER_ENV.into(), self.marker.clone());
        stdio.env.insert(
            mcp_fixtures::ledger::LEDGER_ENV.into(),
            self.ledger_path().to_string_lossy().into_owned(),
        );
    }

    fn load_config(&mut self, text: &str) {
        let fixtures = self
            .fixtures
            .as_deref()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let builtins = [
            ("FIXTURES", fixtures),
            ("MARKER", self.marker.clone()),
            ("LEDGER", self.ledger_path().to_string_lossy().into_owned()),
        ];
        let lookup = |var: &str| {
            self.scenario.config_env.get(var).cloned().or_else(|| {
                builtins
                    .iter()
                    .find(|(name, _)| *name == var)
                    .map(|(_, value)| value.clone())
            })
        };
        let source = format!("{}.config", self.name);
        let mut load = LoadOutcome::default();
        match Config::from_str_with_env(text, &source, &lookup) {
            Ok(mut config) => {
                load.ok = true;
                for server in config.servers.values_mut() {
                    load.servers.push(LoadedServer {
                        name: server.name.clone(),
                        transport: match server.transport {
                            Transport::Stdio(_) => "stdio".into(),
                            Transport::Http(_) => "http".into(),
                        },
                        requires_consent: server.requires_consent,
                        serial: server.serial,
                    });
                    self.words.push(format!("{server:?}"));
                    self.words.push(config_display(server));
                    if let Transport::Stdio(stdio) = &mut server.transport {
                        self.mark(stdio);
                    }
                }
                self.config = Some(config);
            }
            Err(error) => {
                let text = chain(&error);
                self.words.push(text.clone());
                self.words.push(format!("{error:?}"));
                load.error = Some(self.normalizer.apply(&text));
            }
        }
        self.outcome.load = Some(load);
    }

    async fn step(&mut self, index: usize, step: &Step) {
        let id = format!("steps[{}]", index + 1);
        match step {
            Step::Connect(step) => {
                let server = match (&step.server, &self.config) {
                    (Some(name), Some(config)) => config.servers.get(name).cloned(),
                    (None, Some(config)) if config.servers.len() == 1 => {
                        config.servers.values().next().cloned()
                    }
                    (None, Some(_)) => None,
                    (_, None) => self.server.clone(),
                };
                let Some(server) = server else {
                    self.check(
                        &format!("{id}.connect"),
                        false,
                        "no such server to connect (did the config load?)",
                    );
                    return;
                };
                self.words.push(format!("{server:?}"));
                let timeout = server.timeout;
                let start = Instant::now();
                // The caller's event log: a failed connect keeps its events.
                let log = Arc::new(EventLog::new(&server.name, Instant::now()));
                let result = StdioClient::builder(&server)
                    .events(log.clone())
                    .connect()
                    .await;
                let bucket = Bucket::of_request(start.elapsed(), timeout);
                self.server = Some(server);
                let mut out = self.step_outcome("connect", &step.expect, bucket);
                match result {
                    Ok(client) => {
                        self.leader = Some((client.pid() as i32, client.pgid() as i32));
                        self.normalizer.add_pid(client.pid() as i32);
                        self.client = Some(Arc::new(client));
                        self.expect_ok(&id, &step.expect, &mut out);
                    }
                    Err(error) => {
                        // A failed connect returns after the reaper, which
                        // records `exited` before it reports: the log is whole.
                        self.events = log.snapshot();
                        self.expect_error(&id, &step.expect, &error, &mut out)
                    }
                }
                self.outcome.steps.push(out);
            }
            Step::ListTools(step) => {
                let Some(client) = self.client.clone() else {
                    return self.no_client(&id);
                };
                let start = Instant::now();
                let result = client.list_tools().await;
                let mut out =
                    self.step_outcome("list_tools", &step.expect, self.request_bucket(start));
                match result {
                    Ok(tools) => {
                        out.count = Some(tools.len());
                        if let Some(count) = step.expect.count {
                            self.check(
                                &format!("{id}.count"),
                                tools.len() == count,
                                format!("{} tools, expected {count}", tools.len()),
                            );
                        }
                        self.expect_ok(&id, &step.expect, &mut out);
                    }
                    Err(error) => self.expect_error(&id, &step.expect, &error, &mut out),
                }
                self.outcome.steps.push(out);
            }
            Step::Call(step) => {
                let Some(client) = self.client.clone() else {
                    return self.no_client(&id);
                };
                let start = Instant::now();
                let result = client.call_tool(&step.tool, Some(step.args.clone())).await;
                let label = format!("call {}", step.tool);
                let out = self.step_outcome(&label, &step.expect, self.request_bucket(start));
                self.record_call(&id, &step.expect, result, out);
            }
            Step::Kill(step) => {
                let signal = mcp_fixtures::cli::parse_signal(&step.signal).expect("validated");
                let Some((pid, pgid)) = self.leader else {
                    return self.no_client(&id);
                };
                let target = match step.target {
                    KillTarget::Child => pid,
                    KillTarget::Group => -pgid,
                };
                let sent = kill(Pid::from_raw(target), signal);
                self.check(
                    &format!("{id}.kill"),
                    sent.is_ok(),
                    format!("{} to the {:?}: {sent:?}", signal.as_str(), step.target),
                );
                self.outcome.steps.push(StepOutcome {
                    step: format!("kill {} {:?}", signal.as_str(), step.target).to_lowercase(),
                    result: if sent.is_ok() { "ok" } else { "error" }.into(),
                    ..StepOutcome::default()
                });
            }
            Step::WaitLedger(step) => {
                let deadline = Instant::now() + WAIT_BOUND;
                let found = loop {
                    let found = self.ledger().into_iter().any(|record| {
                        record["event"] == step.event.as_str()
                            && step
                                .fixture
                                .as_ref()
                                .is_none_or(|f| record["fixture"] == fixture_binary(f).as_str())
                    });
                    if found || Instant::now() > deadline {
                        break found;
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                };
                let what = match &step.fixture {
                    Some(fixture) => format!("{} from {}", step.event, fixture_binary(fixture)),
                    None => step.event.clone(),
                };
                self.check(
                    &format!("{id}.wait_ledger"),
                    found,
                    format!(
                        "ledger event {what} {}",
                        if found { "seen" } else { "not seen within 10s" }
                    ),
                );
                self.outcome.steps.push(StepOutcome {
                    step: format!("wait_ledger {what}"),
                    result: if found { "ok" } else { "error" }.into(),
                    ..StepOutcome::default()
                });
            }
            Step::Close(step) => {
                let Some(client) = self.client.clone() else {
                    return self.no_client(&id);
                };
                let outcome = client.close().await;
                let out = self.close_outcome(&id, "close", &step.expect, outcome);
                self.outcome.steps.push(out);
            }
            Step::CloseConcurrently(step) => {
                let Some(client) = self.client.clone() else {
                    return self.no_client(&id);
                };
                let mut tasks = tokio::task::JoinSet::new();
                for _ in 0..step.count {
                    let client = client.clone();
                    tasks.spawn(async move { client.close().await });
                }
                let outcomes: Vec<CloseOutcome> = tasks.join_all().await;
                let agree = outcomes.windows(2).all(|w| w[0] == w[1]);
                self.check(
                    &format!("{id}.agree"),
                    agree,
                    format!(
                        "{} concurrent closes {}",
                        step.count,
                        if agree { "agree" } else { "disagree" }
                    ),
                );
                let closed = client
                    .events()
                    .iter()
                    .filter(|e| matches!(e.kind, EventKind::Closed { .. }))
                    .count();
                self.check(
                    &format!("{id}.once"),
                    closed == 1,
                    format!("the close sequence ran {closed} time(s)"),
                );
                let label = format!("close x{}", step.count);
                let out = self.close_outcome(&id, &label, &step.expect, outcomes[0]);
                self.outcome.steps.push(out);
            }
            Step::BuildSession(step) => self.build_session(&id, step).await,
            Step::DiscoverTools(step) => self.discover_tools(&id, step).await,
            Step::SessionCall(step) => {
                let Some(session) = &self.session else {
                    return self.no_client(&id);
                };
                let start = Instant::now();
                let result = session.call(&step.tool, Some(step.args.clone())).await;
                let label = format!("session_call {}", step.tool);
                let out = self.step_outcome(&label, &step.expect, self.request_bucket(start));
                match result {
                    Ok(result) => self.record_call(&id, &step.expect, Ok(result), out),
                    Err(mcp_stdio_client::SessionError::Client(error)) => {
                        self.record_call(&id, &step.expect, Err(error), out)
                    }
                    Err(error) => {
                        let mut out = out;
                        out.result = "error".into();
                        out.message = Some(error.to_string());
                        self.check(
                            &format!("{id}.result"),
                            false,
                            format!("{label} failed: {error}"),
                        );
                        self.outcome.steps.push(out);
                    }
                }
            }
            Step::CloseSession(step) => self.close_session(&id, step).await,
            Step::Drop(_) => {
                let Some(client) = self.client.take() else {
                    return self.no_client(&id);
                };
                self.collect(&client);
                drop(client);
                self.outcome.steps.push(StepOutcome {
                    step: "drop".into(),
                    result: "ok".into(),
                    ..StepOutcome::default()
                });
            }
        }
    }

    /// Checks a tool call's result (or error) against the step's `expect`
    /// and records the step.
    fn record_call(
        &mut self,
        id: &str,
        expect: &StepExpect,
        result: Result<CallToolResult, ClientError>,
        mut out: StepOutcome,
    ) {
        match result {
            Ok(result) => {
                let value = serde_json::to_value(&result).unwrap_or(Value::Null);
                let text = value["content"][0]["text"].as_str().map(str::to_owned);
                let is_error = result.is_error.unwrap_or(false);
                if let Some(expected) = &expect.text {
                    let got = text.clone().unwrap_or_default();
                    self.check(
                        &format!("{id}.text"),
                        &got == expected,
                        format!("text {got:?}, expected {expected:?}"),
                    );
                }
                if let Some(expected) = expect.is_error {
                    self.check(
                        &format!("{id}.is_error"),
                        is_error == expected,
                        format!("isError {is_error}, expected {expected}"),
                    );
                }
                out.text = text.map(|t| self.normalizer.apply(&t));
                out.is_error = Some(is_error);
                self.expect_ok(id, expect, &mut out);
            }
            Err(error) => self.expect_error(id, expect, &error, &mut out),
        }
        self.outcome.steps.push(out);
    }

    fn no_client(&mut self, id: &str) {
        self.check(
            &format!("{id}.client"),
            false,
            "no connected client for this step (connect failed or was dropped)",
        );
    }

    fn request_bucket(&self, start: Instant) -> Bucket {
        let timeout = self.server.as_ref().map_or(DEFAULT_TIMEOUT, |s| s.timeout);
        Bucket::of_request(start.elapsed(), timeout)
    }

    fn step_outcome(&mut self, step: &str, expect: &StepExpect, bucket: Bucket) -> StepOutcome {
        if let Some(expected) = expect.within {
            let index = self.outcome.steps.len() + 1;
            self.check(
                &format!("steps[{index}].within"),
                bucket == expected,
                format!("{step} took {bucket:?}, expected {expected:?}"),
            );
        }
        StepOutcome {
            step: step.into(),
            time: expect.within.map(|_| bucket),
            ..StepOutcome::default()
        }
    }

    fn expect_ok(&mut self, id: &str, expect: &StepExpect, out: &mut StepOutcome) {
        out.result = "ok".into();
        match &expect.error {
            Some(kind) => self.check(
                &format!("{id}.result"),
                false,
                format!("{} succeeded, expected error {kind}", out.step),
            ),
            None => self.check(
                &format!("{id}.result"),
                true,
                format!("{} succeeded", out.step),
            ),
        }
    }

    fn expect_error(
        &mut self,
        id: &str,
        expect: &StepExpect,
        error: &ClientError,
        out: &mut StepOutcome,
    ) {
        let full = chain(error);
        let mut own = full.clone();
        for line in error.stderr_tail() {
            own = own.replace(line.as_str(), "");
        }
        self.words.push(own);
        let mut debug = format!("{error:?}");
        for line in error.stderr_tail() {
            debug = debug.replace(&format!("{line:?}"), "");
        }
        self.words.push(debug);
        out.result = "error".into();
        out.kind = Some(error.kind().as_str().into());
        out.message = Some(
            self.normalizer
                .apply(full.lines().next().unwrap_or_default()),
        );
        match &expect.error {
            Some(kind) => self.check(
                &format!("{id}.error"),
                *kind == error.kind().as_str(),
                format!(
                    "{} failed with {}, expected {kind}: {full}",
                    out.step,
                    error.kind()
                ),
            ),
            None => self.check(
                &format!("{id}.result"),
                false,
                format!("{} failed: {full}", out.step),
            ),
        }
        for needle in &expect.message_contains {
            self.check(
                &format!("{id}.message"),
                full.contains(needle.as_str()),
                format!("message must contain {needle:?}: {full}"),
            );
        }
        for needle in &expect.message_not_contains {
            self.check(
                &format!("{id}.message"),
                !full.contains(needle.as_str()),
                format!("message must not contain {needle:?}: {full}"),
            );
        }
    }

    fn close_outcome(
        &mut self,
        id: &str,
        label: &str,
        expect: &StepExpect,
        outcome: CloseOutcome,
    ) -> StepOutcome {
        let (eof, term) = match self.server.as_ref().map(|s| &s.transport) {
            Some(Transport::Stdio(stdio)) => (stdio.eof_grace, stdio.term_grace),
            _ => (DEFAULT_GRACE, DEFAULT_GRACE),
        };
        let bucket = Bucket::of_close(outcome.elapsed, eof, term);
        let mut out = self.step_outcome(label, expect, bucket);
        out.result = "ok".into();
        out.path = Some(outcome.path.to_string());
        out.status = outcome.status.map(|s| s.to_string());
        out.group_swept = Some(outcome.group_swept);
        if let Some(path) = &expect.path {
            self.check(
                &format!("{id}.path"),
                outcome.path.as_str() == path,
                format!("close ended by {}, expected {path}", outcome.path),
            );
        }
        if let Some(status) = &expect.status {
            let got = out.status.clone().unwrap_or_else(|| "not reaped".into());
            self.check(
                &format!("{id}.status"),
                &got == status,
                format!("child ended with {got}, expected {status}"),
            );
        }
        if let Some(swept) = expect.group_swept {
            self.check(
                &format!("{id}.group_swept"),
                outcome.group_swept == swept,
                format!("group_swept {}, expected {swept}", outcome.group_swept),
            );
        }
        self.check(
            &format!("{id}.reaped"),
            outcome.status.is_some(),
            "the child was reaped by close",
        );
        // The guarantee holds when close returns, not some time later.
        let alive = self.alive_now();
        let expected = self.expected_survivors();
        self.check(
            &format!("{id}.nothing_left"),
            alive == expected,
            format!(
                "alive when close returned: {}; expected: {}",
                describe_survivors(&alive),
                describe_survivors(&expected)
            ),
        );
        out
    }

    /// Marked processes alive right now, named by their ledger fixture.
    fn alive_now(&self) -> Vec<SurvivorOutcome> {
        let fixture_of = self.fixture_of();
        let groups: Vec<i32> = self.leaders().map(|(_, pgid)| pgid).collect();
        let mut alive: Vec<SurvivorOutcome> = observer::marked(&self.marker)
            .iter()
            .map(|s| SurvivorOutcome {
                name: fixture_of
                    .get(&s.pid)
                    .cloned()
                    .unwrap_or_else(|| s.name.clone()),
                left_group: !s.pgid.is_some_and(|pgid| groups.contains(&pgid)),
            })
            .collect();
        alive.sort();
        alive
    }

    /// Pid and group of every server started: the client's and the session's.
    fn leaders(&self) -> impl Iterator<Item = (i32, i32)> + '_ {
        self.leader
            .into_iter()
            .chain(self.session_leaders.iter().copied())
    }

    fn expected_survivors(&self) -> Vec<SurvivorOutcome> {
        let mut expected: Vec<SurvivorOutcome> = self
            .scenario
            .expect
            .survivors
            .iter()
            .map(|s| SurvivorOutcome {
                name: fixture_binary(&s.fixture),
                left_group: s.left_group,
            })
            .collect();
        expected.sort();
        expected
    }

    /// pid → fixture name, from the ledger's records.
    fn fixture_of(&self) -> BTreeMap<i32, String> {
        let mut fixture_of = BTreeMap::new();
        for record in self.ledger() {
            let pid = record["pid"].as_i64().unwrap_or(0) as i32;
            let fixture = record["fixture"].as_str().unwrap_or("?").to_owned();
            fixture_of.entry(pid).or_insert(fixture);
        }
        fixture_of
    }

    /// Keeps what the client knows before it goes away.
    fn collect(&mut self, client: &StdioClient) {
        self.events = client.events();
        self.stdout_skipped = client.stdout_lines_skipped();
    }

    fn ledger(&self) -> Vec<Value> {
        std::fs::read_to_string(self.ledger_path())
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }
}

fn describe_survivors(list: &[SurvivorOutcome]) -> String {
    if list.is_empty() {
        return "none".to_owned();
    }
    list.iter()
        .map(|s| {
            format!(
                "{}{}",
                s.name,
                if s.left_group {
                    " (left the group)"
                } else {
                    " (in the group)"
                }
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// One line per lifecycle event for the snapshot.
fn describe(kind: &EventKind) -> Option<String> {
    Some(match kind {
        EventKind::Spawned { .. } => "spawned".into(),
        EventKind::Initialized {
            server,
            protocol,
            era,
            ..
        } => format!("initialized {server} ({era} {protocol})"),
        EventKind::Restarting { attempt, of, .. } => format!("restarting {attempt} of {of}"),
        EventKind::EraFallback { fallback } => match fallback {
            mcp_stdio_client::Fallback::Error { code, .. } => {
                format!("era_fallback error {code}")
            }
            mcp_stdio_client::Fallback::Silent { .. } => "era_fallback silent".into(),
        },
        EventKind::RequestFailed { method, kind } => format!("request_failed {method} {kind}"),
        EventKind::StdoutLineSkipped { .. } | EventKind::StdinRepliesDropped { .. } => return None,
        EventKind::ClosePhase { phase } => format!("close_phase {phase}"),
        EventKind::Exited { status } => format!("exited {status}"),
        EventKind::GroupSwept => "group_swept".into(),
        EventKind::Closed { path, .. } => format!("closed {path}"),
    })
}

fn config_display(server: &ServerConfig) -> String {
    let mut config = Config::default();
    config.servers.insert(server.name.clone(), server.clone());
    config.to_string()
}
