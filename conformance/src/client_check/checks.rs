//! The checks: each run starts the driver, has it drive the client under
//! test against one fixture, and grades only what the harness observes
//! itself (the fixture's ledger, the process table, timings, the driver's
//! answers). A driver cannot grade itself.

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use serde_json::{Value, json};

use super::report::{CheckResult, Verdict};
use crate::{
    driver::{self, Answer, Driver, DriverError},
    observer::{self, MARKER_ENV, Marked},
};

/// The graces and bounds the harness asks the client for, where the client
/// has such settings.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub eof_grace: Duration,
    pub term_grace: Duration,
    pub timeout: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            eof_grace: Duration::from_millis(500),
            term_grace: Duration::from_millis(500),
            timeout: Duration::from_secs(5),
        }
    }
}

/// Every check id, in report order.
pub const CHECK_IDS: &[&str] = &[
    "close.eof_first",
    "close.graceful",
    "close.sigterm",
    "close.sigkill",
    "close.group",
    "close.sidecar",
    "close.escaped",
    "handshake.bounded",
    "death.fast",
    "wedge.no_kill",
    "wedge.cancel",
    "stderr.drained",
    "stdout.tolerant",
    "exit.clean",
    "exit.abrupt",
];

/// Extra time on top of the client's own bounds before the harness calls a
/// wait "never": generous, so a loaded machine does not change a verdict.
const SLACK: Duration = Duration::from_secs(10);

/// Slack over the client's own close schedule (its EOF and SIGTERM graces,
/// as it declared them in `hello`, else as asked) before a wait for what it
/// started to be gone ends in a verdict. A client may end a server on that
/// schedule after its call returned (the TypeScript SDK ends the server of
/// a failed start 2 s later, on its own timer): a wait that ends exactly
/// when the client acts is a coin flip, so every such wait is the whole
/// schedule plus this.
const SETTLE: Duration = Duration::from_secs(3);

/// One run: a temp dir with the ledger, a unique marker, the driver.
pub struct Run {
    dir: crate::tempdirs::TempDir,
    marker: String,
    fixtures: PathBuf,
    pub driver: Driver,
    pub timing: Timing,
}

impl Run {
    /// A fresh driver, ready (it answered `hello`), for one run.
    pub fn start(driver: &[String], fixtures: &Path, timing: Timing) -> Result<Run, DriverError> {
        let mut run = Run::with_driver(Driver::spawn(driver)?, fixtures, timing)?;
        match run.driver.hello() {
            Ok(()) => Ok(run),
            Err(error) => {
                run.finish();
                Err(error)
            }
        }
    }

    /// A run with `driver`, already started (and, unless the caller then
    /// calls [`Driver::hello`], already ready).
    pub fn with_driver(
        driver: Driver,
        fixtures: &Path,
        timing: Timing,
    ) -> Result<Run, DriverError> {
        let dir = crate::tempdirs::tempdir("client").map_err(|io| DriverError::Start {
            program: "a temporary directory".into(),
            args: 0,
            io,
        })?;
        let marker = format!(
            "client-check-{}-{}",
            std::process::id(),
            dir.path()
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        );
        driver::set_current(&driver, marker.clone());
        Ok(Run {
            driver,
            dir,
            marker,
            fixtures: fixtures.to_owned(),
            timing,
        })
    }

    /// The EOF and SIGTERM graces the client really closes with: those it
    /// declared in `hello`, else those asked of it.
    pub fn graces(&self) -> (Duration, Duration) {
        let asked = (self.timing.eof_grace, self.timing.term_grace);
        self.driver
            .hello_said()
            .map_or(asked, |hello| hello.graces(asked))
    }

    /// How long to wait for what the client started to be gone: its whole
    /// close schedule, plus [`SETTLE`].
    pub fn settle(&self) -> Duration {
        let (eof, term) = self.graces();
        eof + term + SETTLE
    }

    fn ledger_path(&self) -> PathBuf {
        self.dir.path().join("ledger.jsonl")
    }

    /// The `server` of a `connect`: `fixture-<name>` with the marker first.
    pub fn server(&self, fixture: &str, args: &[String]) -> Value {
        let mut argv = vec![format!("--marker={}", self.marker)];
        argv.extend(args.iter().cloned());
        json!({
            "command": self.fixtures.join(format!("fixture-{fixture}")),
            "args": argv,
            "env": {
                mcp_fixtures::ledger::LEDGER_ENV: self.ledger_path(),
                MARKER_ENV: self.marker,
                // The fixtures end themselves if this harness is killed.
                mcp_stdio_process::ANCHOR_ENV: mcp_stdio_process::Anchor::this_process()
                    .map(|anchor| anchor.to_string())
                    .unwrap_or_default(),
            },
            "cwd": Value::Null,
        })
    }

    /// `connect` to `fixture`, with the run's timing.
    pub fn connect(&mut self, fixture: &str, args: &[&str]) -> Result<Answer, DriverError> {
        let args: Vec<String> = args
            .iter()
            .map(|a| {
                a.replace("{fixtures}", &self.fixtures.to_string_lossy())
                    .replace("{marker}", &self.marker)
            })
            .collect();
        let server = self.server(fixture, &args);
        let timing = self.timing;
        self.driver.request(
            "connect",
            json!({
                "server": server,
                "timeout_ms": timing.timeout.as_millis() as u64,
                "eof_grace_ms": timing.eof_grace.as_millis() as u64,
                "term_grace_ms": timing.term_grace.as_millis() as u64,
                "contain": true,
            }),
            timing.timeout + SLACK,
        )
    }

    pub fn call(&mut self, tool: &str, arguments: Value) -> Result<Answer, DriverError> {
        let timing = self.timing;
        self.driver.request(
            "call_tool",
            json!({
                "name": tool,
                "arguments": arguments,
                "timeout_ms": timing.timeout.as_millis() as u64,
            }),
            timing.timeout + SLACK,
        )
    }

    pub fn close(&mut self) -> Result<Answer, DriverError> {
        let (eof, term) = self.graces();
        self.driver.request("close", json!({}), eof + term + SLACK)
    }

    /// `exit`, and the wait for the driver to end: a client may run its
    /// close schedule as its program exits.
    pub fn exit(&mut self) -> bool {
        let (eof, term) = self.graces();
        let _ = self.driver.request("exit", json!({}), SLACK);
        self.driver.wait_exit(eof + term + SLACK)
    }

    /// Every ledger record so far.
    pub fn ledger(&self) -> Vec<Value> {
        std::fs::read_to_string(self.ledger_path())
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    /// The records of `fixture-<name>` (or `fixture-<name>-sidecar`).
    pub fn records(&self, fixture: &str) -> Vec<Value> {
        let name = format!("fixture-{fixture}");
        self.ledger()
            .into_iter()
            .filter(|r| r["fixture"] == json!(name))
            .collect()
    }

    /// Live processes this run started.
    pub fn alive(&self) -> Vec<Marked> {
        observer::marked(&self.marker)
    }

    /// Waits up to `within` until nothing this run started is alive; returns
    /// what is left.
    pub fn wait_gone(&self, within: Duration) -> Vec<Marked> {
        let deadline = Instant::now() + within;
        loop {
            let alive = self.alive();
            if alive.is_empty() || Instant::now() >= deadline {
                return alive;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Zombies among the fixture processes whose parent is still the driver:
    /// servers the client never reaped.
    pub fn unreaped(&self) -> Vec<u32> {
        let driver = self.driver.pid();
        let mut pids: Vec<u32> = self
            .ledger()
            .iter()
            .filter_map(|r| observer::pid_in(&r["pid"]))
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids.into_iter()
            .filter(|pid| observer::is_zombie(*pid) && observer::parent_of(*pid) == Some(driver))
            .collect()
    }

    /// Ends the driver and everything the run started, whatever happened.
    pub fn finish(mut self) {
        driver::end_current(|| {
            self.driver.finish(Duration::from_secs(2));
            let killed =
                observer::kill_and_reap(&self.marker, &Default::default(), Duration::from_secs(5));
            let pids: Vec<u32> = self
                .ledger()
                .iter()
                .filter_map(|r| observer::pid_in(&r["pid"]))
                .chain(killed)
                .collect();
            observer::reap(pids.into_iter(), Instant::now() + Duration::from_secs(1));
        });
    }
}

/// The events of `records`, by name.
fn names(records: &[Value]) -> Vec<&str> {
    records.iter().filter_map(|r| r["event"].as_str()).collect()
}

/// The time of the first record named `event`.
fn at(records: &[Value], event: &str) -> Option<u64> {
    records
        .iter()
        .find(|r| r["event"] == json!(event))
        .and_then(|r| r["t_ms"].as_u64())
}

/// The first `signal` record's signal name and time.
fn first_signal(records: &[Value]) -> Option<(String, u64)> {
    records
        .iter()
        .find(|r| r["event"] == json!("signal"))
        .map(|r| {
            (
                r["signal"].as_str().unwrap_or("?").to_owned(),
                r["t_ms"].as_u64().unwrap_or(0),
            )
        })
}

/// `name (pid N), ...`: each process by its whole name, the ledger's
/// fixture name when it wrote one (`fixture-lingering-sidecar`), else the
/// observer's (argv[0]'s file name; the kernel's 15-byte name is cut).
fn listed(run: &Run, alive: &[Marked]) -> String {
    let ledger = run.ledger();
    alive
        .iter()
        .map(|m| {
            let name = ledger
                .iter()
                .find(|r| r["pid"] == json!(m.pid))
                .and_then(|r| r["fixture"].as_str())
                .unwrap_or(&m.name);
            format!("{name} (pid {})", m.pid)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn driver_failed(id: &'static str, error: &DriverError) -> CheckResult {
    CheckResult::new(id, Verdict::Fail, format!("{error}"))
        .fix("the driver must answer every request (see docs/client-check.md)")
}

/// The era the client spoke, from what the server saw first.
pub fn era_of(records: &[Value]) -> &'static str {
    let methods: Vec<&str> = records
        .iter()
        .filter(|r| r["event"] == json!("request"))
        .filter_map(|r| r["method"].as_str())
        .collect();
    if methods.contains(&"initialize") {
        "legacy"
    } else if methods.contains(&"server/discover") {
        "modern"
    } else {
        "unknown"
    }
}

/// `close.graceful`, `exit.clean` (and the era): a well-behaved server.
pub fn graceful(run: &mut Run, era: &mut String) -> Vec<CheckResult> {
    let mut results = Vec::new();
    if let Err(error) = run.connect("well-behaved", &[]) {
        return vec![driver_failed("close.graceful", &error)];
    }
    let _ = run.call("echo", json!({ "text": "hello" }));
    let started = Instant::now();
    let closed = run.close();
    let close_ms = started.elapsed().as_millis() as u64;
    let records = run.records("well-behaved");
    *era = era_of(&records).to_owned();
    let events = names(&records);
    let eof = at(&records, "stdin_eof");
    let exit = at(&records, "exit");
    results.push(match (&closed, eof, first_signal(&records)) {
        (Err(error), _, _) => driver_failed("close.graceful", error),
        (_, _, Some((signal, _))) => CheckResult::new(
            "close.graceful",
            Verdict::Fail,
            format!("a server that exits on stdin EOF got {signal}; events {events:?}"),
        )
        .fix("close the server's stdin first and wait for it to exit before any signal"),
        (_, None, None) => CheckResult::new(
            "close.graceful",
            Verdict::Fail,
            format!("the server never saw stdin EOF; events {events:?}"),
        )
        .fix("close the server's stdin on close"),
        (Ok(_), Some(eof), None) => CheckResult::new(
            "close.graceful",
            Verdict::Pass,
            format!(
                "ended by stdin EOF alone, {} ms after EOF; close took {close_ms} ms",
                exit.unwrap_or(eof).saturating_sub(eof)
            ),
        )
        .figures(
            json!({ "eof_to_exit_ms": exit.map(|e| e.saturating_sub(eof)), "close_ms": close_ms }),
        ),
    });
    let unreaped = run.unreaped();
    let exited = run.exit();
    let left = run.wait_gone(run.settle());
    results.push(if !unreaped.is_empty() {
        CheckResult::new(
            "exit.clean",
            Verdict::Fail,
            format!("after close the client had not reaped its server (zombie pids {unreaped:?})"),
        )
        .fix("wait for (reap) the server process after it exits")
    } else if !left.is_empty() {
        CheckResult::new(
            "exit.clean",
            Verdict::Fail,
            format!("alive after the driver exited: {}", listed(run, &left)),
        )
        .fix("end every process the client started before the program exits")
    } else if !exited {
        CheckResult::new(
            "exit.clean",
            Verdict::Fail,
            "the driver did not exit after `exit` (something holds it open)",
        )
        .fix("do not wait on processes or pipes the client no longer owns at exit")
    } else {
        CheckResult::new(
            "exit.clean",
            Verdict::Pass,
            "nothing left alive and no zombie after close and exit",
        )
    });
    results
}

/// `close.eof_first` and `close.sigterm`: a server that ignores EOF.
pub fn sigterm(run: &mut Run) -> Vec<CheckResult> {
    if let Err(error) = run.connect("eof-ignoring", &[]) {
        return vec![driver_failed("close.sigterm", &error)];
    }
    let closed = run.close();
    let left = run.wait_gone(run.settle());
    let records = run.records("eof-ignoring");
    let eof = at(&records, "stdin_eof");
    let signal = first_signal(&records);
    // The same minimum as host mode: a signal in the instant of the EOF
    // is a race, not "EOF first" (docs/contract.md, 4.close.eof).
    let min = super::host::EOF_GAP_MIN.as_millis() as u64;
    let eof_first = match (eof, &signal) {
        (Some(eof), Some((_, signal_at))) if eof + min <= *signal_at => CheckResult::new(
            "close.eof_first",
            Verdict::Pass,
            "stdin was closed before any signal",
        )
        .figures(json!({ "eof_to_signal_ms": signal_at - eof })),
        (Some(eof), Some((signal, signal_at))) if eof <= *signal_at => CheckResult::new(
            "close.eof_first",
            Verdict::Fail,
            format!(
                "{signal} came {} ms after stdin EOF, under the {min} ms that make EOF first",
                signal_at - eof
            ),
        )
        .fix("close the server's stdin first, then wait a grace, then signal"),
        (Some(_), None) => CheckResult::new(
            "close.eof_first",
            Verdict::Pass,
            "stdin was closed before the server ended",
        ),
        (None, _) => CheckResult::new(
            "close.eof_first",
            Verdict::Fail,
            "the server never saw stdin EOF before it was ended",
        )
        .fix("close the server's stdin first: EOF is the stdio transport's shutdown signal"),
        (Some(_), Some((signal, _))) => CheckResult::new(
            "close.eof_first",
            Verdict::Fail,
            format!("{signal} arrived before stdin EOF"),
        )
        .fix("close the server's stdin first, then wait a grace, then signal"),
    };
    let term = match (&closed, eof, &signal, left.is_empty()) {
        (Err(error), ..) => driver_failed("close.sigterm", error),
        (_, _, _, false) => CheckResult::new(
            "close.sigterm",
            Verdict::Fail,
            format!("still alive after close: {}", listed(run, &left)),
        )
        .fix("after the EOF grace, send SIGTERM to the server's process group"),
        (_, Some(eof), Some((name, signal_at)), true) if name == "SIGTERM" => CheckResult::new(
            "close.sigterm",
            Verdict::Pass,
            format!("SIGTERM {} ms after EOF", signal_at.saturating_sub(eof)),
        )
        .figures(json!({ "eof_to_sigterm_ms": signal_at.saturating_sub(eof) })),
        (_, _, Some((name, _)), true) => CheckResult::new(
            "close.sigterm",
            Verdict::Fail,
            format!("ended by {name}, not SIGTERM"),
        )
        .fix("escalate with SIGTERM before SIGKILL"),
        (_, _, None, true) => CheckResult::new(
            "close.sigterm",
            Verdict::Fail,
            "ended without SIGTERM (SIGKILL at once, or killed otherwise)",
        )
        .fix("escalate with SIGTERM, and give it a grace, before SIGKILL"),
    };
    vec![eof_first, term]
}

/// `close.sigkill`: a server that ignores EOF and SIGTERM.
pub fn sigkill(run: &mut Run) -> Vec<CheckResult> {
    if let Err(error) = run.connect("term-ignoring", &[]) {
        return vec![driver_failed("close.sigkill", &error)];
    }
    let started = Instant::now();
    let closed = run.close();
    let close_ms = started.elapsed().as_millis() as u64;
    let left = run.wait_gone(run.settle());
    vec![match (&closed, left.is_empty()) {
        (Err(error), _) => driver_failed("close.sigkill", error),
        (_, false) => CheckResult::new(
            "close.sigkill",
            Verdict::Fail,
            format!(
                "a server that ignores EOF and SIGTERM is still alive: {}",
                listed(run, &left)
            ),
        )
        .fix("after the SIGTERM grace, send SIGKILL to the process group"),
        (Ok(_), true) => CheckResult::new(
            "close.sigkill",
            Verdict::Pass,
            format!("killed; close took {close_ms} ms"),
        )
        .figures(json!({ "close_ms": close_ms })),
    }]
}

/// `close.group`: a launcher (`npx`-like, no signal forwarding) whose child
/// ignores EOF.
pub fn group(run: &mut Run) -> Vec<CheckResult> {
    if let Err(error) = run.connect(
        "launcher",
        &["--", "{fixtures}/fixture-eof-ignoring", "--marker={marker}"],
    ) {
        return vec![driver_failed("close.group", &error)];
    }
    let closed = run.close();
    let left = run.wait_gone(run.settle());
    vec![match (&closed, left.is_empty()) {
        (Err(error), _) => driver_failed("close.group", error),
        (_, false) => CheckResult::new(
            "close.group",
            Verdict::Fail,
            format!("the launcher's child survived: {}", listed(run, &left)),
        )
        .fix("signal the server's whole process group (kill(-pgid)), not only its pid"),
        (Ok(_), true) => {
            let got = first_signal(&run.records("eof-ignoring"))
                .map(|(s, _)| s)
                .unwrap_or_else(|| "SIGKILL".into());
            CheckResult::new(
                "close.group",
                Verdict::Pass,
                format!("the launcher's child was ended too ({got})"),
            )
        }
    }]
}

/// `close.sidecar`: a server that exits on EOF but leaves a sidecar in its group.
pub fn sidecar(run: &mut Run) -> Vec<CheckResult> {
    if let Err(error) = run.connect("lingering", &[]) {
        return vec![driver_failed("close.sidecar", &error)];
    }
    let closed = run.close();
    let left = run.wait_gone(run.settle());
    vec![match (&closed, left.is_empty()) {
        (Err(error), _) => driver_failed("close.sidecar", error),
        (_, false) => CheckResult::new(
            "close.sidecar",
            Verdict::Fail,
            format!(
                "left in the server's group after close: {}",
                listed(run, &left)
            ),
        )
        .fix("after the server exits, sweep its process group (SIGTERM, grace, SIGKILL)"),
        (Ok(_), true) => CheckResult::new(
            "close.sidecar",
            Verdict::Pass,
            "the sidecar left in the group was ended",
        ),
    }]
}

/// `close.escaped`: a sidecar that called `setsid`. A client that claims
/// containment (its `connect` answer says `"contain": true`) must end it by
/// the time close returns; for any other client it is information only.
pub fn escaped(run: &mut Run) -> Vec<CheckResult> {
    // The claim: the driver's `hello` (version 2), or its `connect` answer.
    let declared = run
        .driver
        .hello_said()
        .is_some_and(|hello| hello.settings.contain);
    let claims = match run.connect("escaping", &[]) {
        Ok(Ok(result)) => declared || result["contain"] == json!(true),
        Ok(Err(_)) => declared,
        Err(error) => return vec![driver_failed("close.escaped", &error)],
    };
    let closed = run.close();
    // A client that claims containment is judged at the instant close
    // returned, as the group is; otherwise the old, lenient look.
    let left = if claims {
        run.alive()
    } else {
        run.wait_gone(Duration::from_millis(500))
    };
    vec![match (claims, &closed, left.is_empty()) {
        (true, Err(error), _) => driver_failed("close.escaped", error),
        (true, Ok(_), false) => CheckResult::new(
            "close.escaped",
            Verdict::Fail,
            format!(
                "the client claims containment, but the setsid sidecar outlived close: {}",
                listed(run, &left)
            ),
        )
        .fix("end what the server started outside its group: a cgroup per server (cgroup.kill), or its descendants tracked as a subreaper"),
        (true, Ok(_), true) => CheckResult::new(
            "close.escaped",
            Verdict::Pass,
            "the client claims containment, and the setsid sidecar was ended by the time close returned",
        ),
        (false, _, true) => CheckResult::new(
            "close.escaped",
            Verdict::Info,
            "the setsid sidecar was ended too",
        ),
        (false, _, false) => CheckResult::new(
            "close.escaped",
            Verdict::Info,
            format!(
                "the setsid sidecar outlived close (expected of a client without containment: no group signal reaches it): {}",
                listed(run, &left)
            ),
        ),
    }]
}

/// `handshake.bounded`: a server that never completes start-up.
pub fn handshake(run: &mut Run) -> Vec<CheckResult> {
    run.timing.timeout = Duration::from_secs(1);
    let started = Instant::now();
    let connected = run.connect("wedged", &["--never-initialize"]);
    let waited = started.elapsed();
    // A client may end the server of a failed start on its close schedule,
    // after its connect returned: the whole schedule, plus slack.
    let settle = run.settle();
    let left = run.wait_gone(settle);
    let waited_ms = waited.as_millis() as u64;
    vec![match connected {
        Err(DriverError::NoAnswer { .. }) => CheckResult::new(
            "handshake.bounded",
            Verdict::Fail,
            format!("still waiting for start-up after {waited_ms} ms (TIMEOUT was 1 s)"),
        )
        .fix("bound the handshake (initialize or server/discover) by a timeout"),
        Err(error) => driver_failed("handshake.bounded", &error),
        Ok(Ok(_)) => CheckResult::new(
            "handshake.bounded",
            Verdict::Fail,
            "the client said it connected to a server that never answered",
        ),
        Ok(Err(_)) if !left.is_empty() => CheckResult::new(
            "handshake.bounded",
            Verdict::Fail,
            format!(
                "gave up after {waited_ms} ms but left the server running {} ms later: {}",
                settle.as_millis(),
                listed(run, &left)
            ),
        )
        .fix("kill (and reap) the server when start-up fails"),
        Ok(Err(message)) => CheckResult::new(
            "handshake.bounded",
            Verdict::Pass,
            format!(
                "gave up after {waited_ms} ms and left nothing: {}",
                first_line(&message)
            ),
        )
        .figures(json!({ "gave_up_ms": waited_ms })),
    }]
}

fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or("");
    if line.chars().count() > 100 {
        format!("{}…", line.chars().take(100).collect::<String>())
    } else {
        line.to_owned()
    }
}

/// `death.fast`: the server crashes mid-session.
pub fn death(run: &mut Run) -> Vec<CheckResult> {
    if let Err(error) = run.connect("crash", &["--on-call", "2", "--exit-code", "3"]) {
        return vec![driver_failed("death.fast", &error)];
    }
    let _ = run.call("echo", json!({ "text": "one" }));
    let _ = run.call("echo", json!({ "text": "two" }));
    let started = Instant::now();
    let next = run.call("echo", json!({ "text": "three" }));
    let ms = started.elapsed().as_millis() as u64;
    vec![match next {
        Err(error) => driver_failed("death.fast", &error),
        Ok(Ok(_)) => CheckResult::new(
            "death.fast",
            Verdict::Fail,
            "a call to a dead server succeeded",
        ),
        Ok(Err(message)) if ms < 1000 => {
            let says =
                message.contains('3') && (message.contains("exit") || message.contains("status"));
            CheckResult::new(
                "death.fast",
                Verdict::Pass,
                format!(
                    "the next call failed after {ms} ms; {}: {}",
                    if says {
                        "the message says how it died"
                    } else {
                        "the message does not say how it died"
                    },
                    first_line(&message)
                ),
            )
            .figures(json!({ "next_call_failed_ms": ms }))
        }
        Ok(Err(message)) => CheckResult::new(
            "death.fast",
            Verdict::Fail,
            format!(
                "the next call failed only after {ms} ms: {}",
                first_line(&message)
            ),
        )
        .fix("watch the child's exit and fail requests at once when it is gone"),
    }]
}

/// `wedge.no_kill` and `wedge.cancel`: a call that never gets an answer.
pub fn wedge(run: &mut Run) -> Vec<CheckResult> {
    run.timing.timeout = Duration::from_secs(1);
    if let Err(error) = run.connect("well-behaved", &[]) {
        return vec![driver_failed("wedge.no_kill", &error)];
    }
    let started = Instant::now();
    let stuck = run.call("sleep_ms", json!({ "ms": 600_000 }));
    let ms = started.elapsed().as_millis() as u64;
    let after = run.call("echo", json!({ "text": "still there" }));
    let records = run.records("well-behaved");
    let events = names(&records);
    let cancelled = events.contains(&"cancelled");
    let ended = events.contains(&"exit") || events.contains(&"signal");
    let no_kill = match (&stuck, &after) {
        (Err(error), _) | (_, Err(error)) => driver_failed("wedge.no_kill", error),
        (Ok(Ok(_)), _) => CheckResult::new(
            "wedge.no_kill",
            Verdict::Fail,
            "a 10-minute call returned within the timeout",
        ),
        (Ok(Err(_)), Ok(Ok(_))) if !ended => CheckResult::new(
            "wedge.no_kill",
            Verdict::Pass,
            format!("the call timed out after {ms} ms; the server was not killed and the next call worked"),
        )
        .figures(json!({ "timed_out_ms": ms })),
        (Ok(Err(_)), _) if ended => CheckResult::new(
            "wedge.no_kill",
            Verdict::Fail,
            format!("a timed-out call ended the server; events {events:?}"),
        )
        .fix("a request timeout must fail that request only, not kill the server"),
        (Ok(Err(_)), next) => CheckResult::new(
            "wedge.no_kill",
            Verdict::Fail,
            format!(
                "after the timeout the next call failed: {}",
                match next {
                    Ok(Err(message)) => first_line(message),
                    _ => String::new(),
                }
            ),
        )
        .fix("keep the session usable after a request timeout"),
    };
    let cancel = CheckResult::new(
        "wedge.cancel",
        if cancelled {
            Verdict::Pass
        } else {
            Verdict::Fail
        },
        if cancelled {
            "the timed-out call was cancelled with notifications/cancelled".to_owned()
        } else {
            "no notifications/cancelled for the timed-out call".to_owned()
        },
    )
    .fix("send notifications/cancelled for a request you stop waiting for");
    let _ = run.close();
    vec![no_kill, cancel]
}

/// `stderr.drained`: a server that floods stderr before it answers.
pub fn stderr(run: &mut Run) -> Vec<CheckResult> {
    let started = Instant::now();
    let connected = run.connect(
        "stderr-flooding",
        &[
            "--bytes",
            "4194304",
            "--per-call-bytes",
            "1048576",
            "--record-call-floods",
        ],
    );
    let called = match connected {
        Ok(Ok(_)) => run.call("echo", json!({ "text": "hello" })),
        other => other,
    };
    let ms = started.elapsed().as_millis() as u64;
    let _ = run.close();
    // What the server could write, from its ledger: a client that closes
    // the pipe instead of reading it lets the server go on (its writes
    // fail), and must not pass for one that drained it.
    let cut_short: Vec<String> = run
        .records("stderr-flooding")
        .iter()
        .filter(|r| r["event"] == json!("stderr_flood") && r["cut_short"] == json!(true))
        .map(|r| {
            format!(
                "{} of {} bytes{} ({})",
                r["bytes"],
                r["requested"],
                r["call"]
                    .as_u64()
                    .map_or(" before its handshake answer".to_owned(), |n| format!(
                        " in call {n}"
                    )),
                r["error"].as_str().unwrap_or("write failed")
            )
        })
        .collect();
    vec![match called {
        Ok(Ok(_)) if !cut_short.is_empty() => CheckResult::new(
            "stderr.drained",
            Verdict::Fail,
            format!(
                "the client stopped reading the server's stderr: the server could write only {}",
                cut_short.join("; ")
            ),
        )
        .fix(
            "read the server's stderr continuously (or inherit it); a full pipe blocks the server",
        ),
        Ok(Ok(_)) => CheckResult::new(
            "stderr.drained",
            Verdict::Pass,
            format!("connected and called through 5 MiB of stderr in {ms} ms"),
        )
        .figures(json!({ "connect_and_call_ms": ms })),
        Ok(Err(message)) => CheckResult::new(
            "stderr.drained",
            Verdict::Fail,
            format!("failed behind a stderr flood: {}", first_line(&message)),
        )
        .fix(
            "read the server's stderr continuously (or inherit it); a full pipe blocks the server",
        ),
        Err(error) => CheckResult::new(
            "stderr.drained",
            Verdict::Fail,
            format!("stuck behind a stderr flood: {error}"),
        )
        .fix(
            "read the server's stderr continuously (or inherit it); a full pipe blocks the server",
        ),
    }]
}

/// `stdout.tolerant`: banner lines on stdout (a warning, not a failure).
pub fn stdout(run: &mut Run) -> Vec<CheckResult> {
    let connected = run.connect("stdout-polluting", &[]);
    let listed_tools = match connected {
        Ok(Ok(_)) => run
            .driver
            .request("list_tools", json!({}), run.timing.timeout + SLACK),
        other => other,
    };
    let _ = run.close();
    vec![match listed_tools {
        Ok(Ok(_)) => CheckResult::new(
            "stdout.tolerant",
            Verdict::Pass,
            "banner and log lines on stdout did not break the session",
        ),
        Ok(Err(message)) => CheckResult::new(
            "stdout.tolerant",
            Verdict::Warn,
            format!(
                "non-JSON stdout lines broke the session: {}",
                first_line(&message)
            ),
        )
        .fix("skip (and log) stdout lines that are not JSON-RPC instead of failing"),
        Err(error) => CheckResult::new("stdout.tolerant", Verdict::Warn, format!("{error}"))
            .fix("skip (and log) stdout lines that are not JSON-RPC instead of failing"),
    }]
}

/// `exit.abrupt`: the program ends without calling close.
pub fn abrupt(run: &mut Run) -> Vec<CheckResult> {
    if let Err(error) = run.connect("eof-ignoring", &[]) {
        return vec![driver_failed("exit.abrupt", &error)];
    }
    let exited = run.exit();
    let left = run.wait_gone(run.settle());
    let records = run.records("eof-ignoring");
    let saw = match (at(&records, "stdin_eof"), first_signal(&records)) {
        (Some(_), Some((signal, _))) => format!("the server saw stdin EOF, then {signal}"),
        (Some(_), None) => "the server saw stdin EOF and no signal".to_owned(),
        (None, Some((signal, _))) => format!("the server saw {signal} without EOF"),
        (None, None) => "the server saw neither EOF nor a catchable signal".to_owned(),
    };
    vec![if !exited {
        CheckResult::new(
            "exit.abrupt",
            Verdict::Fail,
            format!("the program did not exit; {saw}"),
        )
        .fix("do not block program exit on servers")
    } else if left.is_empty() {
        CheckResult::new("exit.abrupt", Verdict::Pass, format!("nothing left; {saw}"))
    } else {
        CheckResult::new(
            "exit.abrupt",
            Verdict::Fail,
            format!(
                "{saw}; still alive after the program exited: {}",
                listed(run, &left)
            ),
        )
        .fix("when the client is dropped or the program exits, kill the servers' process groups")
    }]
}
