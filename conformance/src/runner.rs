//! Runs one scenario against a subject (the library in process, or an
//! external client program through a driver) and real fixture processes, and checks the expectations. Its parts:
//! the environment (`env`: marker, temp dir, ledger, process table), the
//! subject under test (`subject`), the recording (`record`: checks and the
//! outcome), the server under test (`server`), one file per step kind
//! (`steps/`), and the observation after the steps (`observe`).

mod consistency;
mod env;
mod observe;
mod record;
mod server;
mod steps;
mod subject;

use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};

use mcp_stdio_client::config::{Config, ServerConfig};

use crate::{
    capture::Capture,
    observer,
    outcome::{Normalizer, StepOutcome},
    scenario::Scenario,
};
use env::Env;
use record::Recording;
use subject::{External, Library, Subject};

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

/// One explicit expectation and whether it held: the check of the result
/// file the scenario runner writes, one type from the run to the report.
pub use mcp_conformance_report::results::Check;

/// Everything a run produced.
#[derive(Debug)]
pub struct Run {
    /// The normalized outcome of the scenario (what the snapshot holds).
    pub outcome: crate::outcome::Outcome,
    /// Every check the run made, in order.
    pub checks: Vec<Check>,
    /// The unnormalized client log, printed when a scenario fails.
    pub log: String,
    /// Why the scenario does not apply to this client, when a precondition
    /// failed (the fixture's ledger says so): the run stopped there. Not a
    /// pass: a caller that grades other clients reports it as a skip, with
    /// this reason; this project's own client must never be skipped.
    pub skipped: Option<String>,
}

impl Run {
    /// Every expectation held (and the scenario applied).
    pub fn passed(&self) -> bool {
        self.skipped.is_none() && self.checks.iter().all(|check| check.passed)
    }

    /// The failed checks, one per line; first the skip, if any.
    pub fn failures(&self) -> String {
        self.skipped
            .iter()
            .map(|why| format!("skipped: {why}"))
            .chain(
                self.checks
                    .iter()
                    .filter(|check| !check.passed)
                    .map(|check| format!("{}: {}", check.id, check.message)),
            )
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Runs `scenario` (named `name`) against the library in process, to the
/// end, on a runtime of its own, and returns what happened. Never leaves a
/// marked process behind.
pub fn run(name: &str, scenario: &Scenario) -> Run {
    run_subject(name, scenario, Subject::Library(Library::default()))
}

/// Runs `scenario` against an external client program, through the driver
/// `driver` (argv), graded only from what the harness observes. The caller
/// checks that the scenario applies to external subjects
/// ([`Scenario::applies_to_external`]); a library-only step fails its check.
pub fn run_external(name: &str, scenario: &Scenario, driver: &[String]) -> Run {
    run_subject(
        name,
        scenario,
        Subject::External(External::new(driver.to_vec())),
    )
}

fn run_subject(name: &str, scenario: &Scenario, subject: Subject) -> Run {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    observer::become_subreaper();
    let marker = format!(
        "mcpconf-{}-{}-{}",
        name.replace(['/', ' ', ':'], "_"),
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    );
    let tmp = crate::tempdirs::tempdir("scenario").expect("a temp dir for the ledger");
    let capture = Capture::default();
    let mut exec = Exec::new(
        name,
        scenario,
        Env::new(marker, tmp.path().to_owned()),
        subject,
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

/// One run in progress.
pub(crate) struct Exec<'a> {
    scenario: &'a Scenario,
    env: Env,
    subject: Subject,
    rec: Recording,
    capture: Capture,
    /// The loaded `config`, if the scenario has one.
    config: Option<Config>,
    /// The server of the last `connect` (or of `server:`).
    server: Option<ServerConfig>,
    /// Stderr lines the client forwarded (logged).
    stderr_lines: u64,
    /// A close already ran (later ones report its outcome again).
    closed: bool,
}

impl<'a> Exec<'a> {
    fn new(
        name: &'a str,
        scenario: &'a Scenario,
        env: Env,
        subject: Subject,
        capture: Capture,
    ) -> Self {
        let mut normalizer = Normalizer::default();
        normalizer.add(env.tmp.to_string_lossy(), "[TMP]");
        if let Ok(dir) = &env.fixtures {
            normalizer.add(dir.to_string_lossy(), "[FIXTURES]");
        }
        normalizer.add(env.marker.clone(), "[MARKER]");
        if let Ok(path) = std::env::var("PATH") {
            normalizer.add(path, "[PATH]");
        }
        Self {
            scenario,
            env,
            subject,
            rec: Recording::new(name, normalizer),
            capture,
            config: None,
            server: None,
            stderr_lines: 0,
            closed: false,
        }
    }

    async fn execute(&mut self) {
        if let Err(error) = &self.env.fixtures {
            let message = format!("cannot find the fixture binaries: {error}");
            self.rec.check("fixtures", false, message);
            return;
        }
        if let Some(spec) = &self.scenario.server {
            self.server = Some(server::from_spec(&self.env, spec));
        }
        if let Some(text) = &self.scenario.config {
            self.load_config(text);
        }
        for (index, step) in self.scenario.steps.iter().enumerate() {
            // A precondition that failed: the rest cannot apply.
            if self.rec.skipped.is_some() {
                break;
            }
            let id = format!("steps[{}]", index + 1);
            steps::run(self, &id, step).await;
            if let Some(library) = self.subject.library() {
                library.follow_restart(&self.env);
            }
        }
        for step in self.subject.end().await {
            self.rec.push(StepOutcome {
                step: step.into(),
                result: "ok".into(),
                ..StepOutcome::default()
            });
        }
    }

    fn load_config(&mut self, text: &str) {
        let (config, load, words) = server::load_config(
            &self.env,
            &self.scenario.config_env,
            text,
            &format!("{}.config", self.rec.name),
            &self.rec.normalizer,
        );
        self.config = config;
        self.rec.words.extend(words);
        self.rec.outcome.load = Some(load);
    }

    /// Groups of every server started, for telling who left its group.
    fn groups(&self) -> Vec<u32> {
        self.subject.leaders().iter().map(|l| l.pgid).collect()
    }

    /// The graces of the server under test: as configured, or, for an
    /// external client, as it declared them (`hello`, protocol 2).
    fn graces(&self) -> (Duration, Duration) {
        let configured = match self.server.as_ref().map(|s| &s.transport) {
            Some(mcp_stdio_client::config::Transport::Stdio(stdio)) => {
                (stdio.eof_grace, stdio.term_grace)
            }
            _ => (DEFAULT_GRACE, DEFAULT_GRACE),
        };
        match &self.subject {
            Subject::External(external) => external.graces(configured),
            Subject::Library(_) => configured,
        }
    }

    fn timeout(&self) -> Duration {
        self.server.as_ref().map_or(DEFAULT_TIMEOUT, |s| s.timeout)
    }

    fn no_client(&mut self, id: &str) {
        self.rec.check(
            &format!("{id}.client"),
            false,
            "no connected client for this step (connect failed or was dropped)",
        );
    }
}

/// The survivors as a sentence.
/// A process's state letter as a check message says it (`None`: reaped).
fn describe_state(state: Option<char>) -> String {
    match state {
        None => "gone (reaped)".to_owned(),
        Some('Z') => "a zombie (not reaped)".to_owned(),
        Some(state) => format!("still there (state {state})"),
    }
}

fn describe_survivors(list: &[crate::outcome::SurvivorOutcome]) -> String {
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

impl Exec<'_> {
    /// The scenario's `expect.survivors`, as the observer names processes.
    fn expected_survivors(&self) -> Vec<crate::outcome::SurvivorOutcome> {
        let mut expected: Vec<_> = self
            .scenario
            .expect
            .survivors
            .iter()
            .map(|s| crate::outcome::SurvivorOutcome {
                name: crate::scenario::fixture_binary(&s.fixture),
                left_group: s.left_group,
            })
            .collect();
        expected.sort();
        expected
    }

    /// A step only the library in process can take.
    fn library_only(&mut self, id: &str, step: &str) {
        self.rec.check(
            &format!("{id}.subject"),
            false,
            format!("`{step}` drives the library in process; this subject cannot take it"),
        );
    }
}
