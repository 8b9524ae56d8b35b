//! An external client program, driven through the driver protocol
//! (`docs/client-check.md`) with the harness's own driver client
//! (`crate::driver`). It reports nothing of its own but the driver's
//! answers (ok, or an error with the client's message): the server it
//! started is found in the ledger, its close path is inferred from the
//! ledger, and its timings are the harness's round trips, counted from
//! when its driver was ready (answered `hello`), never including the
//! driver's start-up. Its close is timed against the graces it declared in
//! `hello` (protocol 2), else those asked of it.

use std::time::{Duration, Instant};

use mcp_stdio_client::config::{ServerConfig, Transport};
use serde_json::{Value, json};

use super::{CallReply, CloseReport, Failure, Leader};

/// How long a client's zombie children may take to be reaped at the end of
/// the steps before they count (as the survivors' settle).
const ZOMBIE_SETTLE: Duration = Duration::from_secs(1);
use crate::{
    driver::{self, Driver, DriverError, Hello},
    runner::env::{Env, ancestry, children_of},
};

/// Extra time on top of the client's own bounds before the harness calls a
/// driver's silence "no answer": generous, so a loaded machine does not
/// change a verdict.
const SLACK: Duration = Duration::from_secs(10);
/// How long a driver told to `exit` may take to end.
const EXIT_BOUND: Duration = Duration::from_secs(5);

pub(crate) struct External {
    /// The driver command.
    argv: Vec<String>,
    driver: Option<Driver>,
    /// The client holds a server (a `connect` succeeded, no `exit` since).
    pub connected: bool,
    /// The server the last successful `connect` started.
    pub leader: Option<Leader>,
    /// The process that started that server (its parent in the ledger's
    /// `started` record): the client, the driver itself or a process under
    /// it.
    pub client: Option<u32>,
    /// The bound on start-up and requests, and the graces, of that connect.
    timeout: Duration,
    graces: (Duration, Duration),
    /// What the last driver said in `hello` (`None`: version 1).
    hello: Option<Hello>,
    /// When the last `connect` was sent, its driver ready: where the
    /// connect's time starts.
    pub connect_sent: Option<Instant>,
    /// What went wrong with the driver itself (not with the client it
    /// drives): each fails the scenario, since a missing answer must never
    /// pass for an expected error.
    pub problems: Vec<String>,
    /// Zombies among the client's own children when the steps ended, while
    /// the client program was still running to reap them.
    pub zombies_at_end: u32,
    /// The driver's stderr (the client's own log), kept when it ends.
    pub stderr: String,
}

impl External {
    pub fn new(argv: Vec<String>) -> Self {
        External {
            argv,
            driver: None,
            connected: false,
            leader: None,
            client: None,
            timeout: super::super::DEFAULT_TIMEOUT,
            graces: (super::super::DEFAULT_GRACE, super::super::DEFAULT_GRACE),
            hello: None,
            connect_sent: None,
            problems: Vec::new(),
            zombies_at_end: 0,
            stderr: String::new(),
        }
    }

    pub fn leaders(&self) -> Vec<Leader> {
        self.leader.into_iter().collect()
    }

    /// The graces the client really closes with, given those `asked` of it:
    /// the ones its driver declared in `hello`, else `asked`.
    pub fn graces(&self, asked: (Duration, Duration)) -> (Duration, Duration) {
        self.hello
            .as_ref()
            .map_or(asked, |hello| hello.graces(asked))
    }

    /// Where [`External::graces`] come from, for messages.
    pub fn graces_source(&self) -> &'static str {
        Hello::graces_source(self.hello.as_ref())
    }

    /// The client's own line: the process that started the server and its
    /// ancestors (the driver, the harness and up), else the driver's.
    pub fn own_line(&self) -> Vec<u32> {
        let driver = self.driver.as_ref().map(|d| d.pid());
        let mut line = self.client.map(ancestry).unwrap_or_default();
        for pid in driver.map(ancestry).unwrap_or_default() {
            if !line.contains(&pid) {
                line.push(pid);
            }
        }
        line
    }

    /// Sends `op` and waits for the answer; a driver that does not answer
    /// is a problem, and reads as a failure with no client message.
    fn request(&mut self, op: &str, fields: Value, within: Duration) -> Result<Value, Failure> {
        let Some(driver) = self.driver.as_mut() else {
            return Err(failure("no driver is running".into()));
        };
        match driver.request(op, fields, within) {
            Ok(answer) => answer.map_err(failure),
            Err(error) => {
                let message = driver_error(&error);
                self.problems.push(format!("`{op}`: {message}"));
                if matches!(error, DriverError::Ended { .. }) {
                    self.connected = false;
                }
                Err(failure(message))
            }
        }
    }

    /// A fresh driver (one server per driver process), then `connect` with
    /// the server's argv, env, cwd, TIMEOUT and graces.
    pub fn connect(&mut self, server: &ServerConfig, env: &Env) -> Result<Leader, Failure> {
        self.end_driver();
        self.leader = None;
        self.hello = None;
        self.connect_sent = None;
        self.client = None;
        let Transport::Stdio(stdio) = &server.transport else {
            return Err(failure("a driver connects stdio servers only".into()));
        };
        match Driver::spawn(&self.argv) {
            Ok(driver) => {
                // A Ctrl-C of `mcp-conformance client --scenarios` ends this
                // driver and whatever carries the run's marker.
                if let Some(marker) = stdio.env.get(crate::observer::MARKER_ENV) {
                    driver::set_current(&driver, marker.clone());
                }
                self.driver = Some(driver);
            }
            Err(error) => {
                let message = driver_error(&error);
                self.problems.push(message.clone());
                return Err(failure(message));
            }
        }
        // Ready first: the connect is timed from here, not from the spawn.
        let ready = self.driver.as_mut().map(Driver::hello);
        if let Some(Err(error)) = ready {
            let message = driver_error(&error);
            self.problems.push(format!("`hello`: {message}"));
            self.end_driver();
            return Err(failure(message));
        }
        self.hello = self.driver.as_ref().and_then(|d| d.hello_said().cloned());
        self.timeout = server.timeout;
        self.graces = (stdio.eof_grace, stdio.term_grace);
        let fields = json!({
            "server": {
                "command": stdio.command,
                "args": stdio.args,
                "env": stdio.env,
                "cwd": stdio.dir,
            },
            "timeout_ms": millis(server.timeout),
            "eof_grace_ms": millis(stdio.eof_grace),
            "term_grace_ms": millis(stdio.term_grace),
            // The harness's runs contain, where the client can.
            "contain": true,
        });
        self.connect_sent = Some(Instant::now());
        let result = self.request("connect", fields, server.timeout + SLACK);
        result?;
        self.connected = true;
        let driver = self.driver.as_ref().map_or(0, |d| d.pid());
        let found = find_leader(env, driver);
        self.client = found.map(|(_, client)| client);
        let leader = found.map(|(leader, _)| leader);
        if leader.is_none() {
            self.problems.push(
                "the client connected, but no process it started is in the ledger or the process table"
                    .into(),
            );
        }
        self.leader = leader;
        leader.ok_or_else(|| failure("the server the client started was not found".into()))
    }

    pub fn list_tools(&mut self) -> Result<Option<usize>, Failure> {
        let answer = self.request("list_tools", json!({}), self.timeout + SLACK)?;
        Ok(answer["count"].as_u64().map(|n| n as usize))
    }

    pub fn call(
        &mut self,
        tool: &str,
        args: serde_json::Map<String, Value>,
    ) -> Result<CallReply, Failure> {
        let fields = json!({
            "name": tool,
            "arguments": args,
            "timeout_ms": millis(self.timeout),
        });
        let answer = self.request("call_tool", fields, self.timeout + SLACK)?;
        Ok(CallReply {
            text: answer["text"].as_str().map(str::to_owned),
            reported: answer.get("text").is_some(),
            is_error: answer["is_error"].as_bool().unwrap_or(false),
        })
    }

    /// `close`, timed by the harness; the path is left to the ledger.
    pub fn close(&mut self) -> CloseReport {
        let (eof, term) = self.graces(self.graces);
        let start = Instant::now();
        let result = self.request("close", json!({}), eof + term + SLACK);
        let elapsed = start.elapsed();
        let reaped_by_client = result
            .as_ref()
            .ok()
            .and_then(|answer| answer["reaped"].as_bool());
        CloseReport {
            path: None,
            status: None,
            group_swept: None,
            contained: None,
            elapsed,
            error: result.err().map(|f| f.message),
            reaped_by_client,
        }
    }

    /// `exit`: the program ends without closing, as a host quits.
    pub fn exit(&mut self) {
        if self.driver.is_some() {
            let _ = self.request("exit", json!({}), EXIT_BOUND);
        }
        self.connected = false;
        self.end_driver();
    }

    /// The end of the steps: the zombies the client left among its own
    /// children while it still runs, then the program ends (`exit`).
    /// Returns what to record.
    pub fn end(&mut self) -> Vec<&'static str> {
        let Some(driver) = &self.driver else {
            return Vec::new();
        };
        // Told by the observer's zombie detector (the process table's
        // state), the one every zombie verdict rests on: the tests that run
        // deliberately failing clients prove it sees.
        //
        // A zombie the client reaps a moment later (a runtime that reaps on
        // its next SIGCHLD round, after the driver answered) is no fault;
        // one still there after the settle is: counted then, so the verdict
        // does not depend on which side of that moment the table was read.
        let zombies = || {
            children_of(driver.pid())
                .into_iter()
                .filter(|(pid, _)| crate::observer::is_zombie(*pid))
                .count() as u32
        };
        let settle = Instant::now() + ZOMBIE_SETTLE;
        self.zombies_at_end = loop {
            let now = zombies();
            if now == 0 || Instant::now() > settle {
                break now;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let was_connected = self.connected;
        self.exit();
        if was_connected {
            vec!["exit (implicit, end of steps)"]
        } else {
            Vec::new()
        }
    }

    /// Ends the driver (it was told to exit, or is abandoned), reaped either
    /// way; keeps its stderr.
    fn end_driver(&mut self) {
        // A client may run its close schedule as its program ends.
        let (eof, term) = self.graces(self.graces);
        if let Some(mut driver) = self.driver.take() {
            driver::end_current(|| driver.finish(eof + term + EXIT_BOUND));
            self.stderr.push_str(&driver.stderr());
        }
    }
}

/// The server a driver's client started: the first fixture whose parent is
/// the driver (or a process of the driver's group, for a driver that runs
/// its client under a wrapper); else a child of the driver in the process
/// table (a server that writes no ledger). With it, the process that
/// started it.
fn find_leader(env: &Env, driver: u32) -> Option<(Leader, u32)> {
    if driver == 0 {
        return None;
    }
    let started: Vec<_> = env
        .ledger()
        .into_iter()
        .filter(|r| r.event == "started")
        .collect();
    let record = started.iter().find(|r| r.ppid == driver).or_else(|| {
        started
            .iter()
            .find(|r| mcp_stdio_process::table::group_of(r.ppid) == Some(driver))
    });
    if let Some(record) = record {
        return Some((Leader::seen(record.pid, record.pgid), record.ppid));
    }
    children_of(driver)
        .into_iter()
        .map(|(pid, _)| (Leader::seen(pid, pid), driver))
        .next()
}

fn failure(message: String) -> Failure {
    Failure {
        kind: None,
        words: vec![message.clone()],
        message,
    }
}

fn driver_error(error: &DriverError) -> String {
    let mut message = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        message.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    message
}

fn millis(span: Duration) -> u64 {
    span.as_millis() as u64
}
