//! The library in process: `StdioClient` and `Session` of
//! `mcp-stdio-client`, driven directly. It reports more than any external
//! client can (error kinds, the close outcome, lifecycle events).

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use mcp_stdio_client::{
    ClientError, Connection, ErrorKind, Event, EventKind, EventLog, Session, StdioClient,
    config::ServerConfig, error_chain as chain,
};
use serde_json::Value;

use super::{CallReply, ClientReport, CloseReport, Env, Failure, Leader};
use crate::scenario::ConnectOptions;

#[derive(Default)]
pub(crate) struct Library {
    pub client: Option<Arc<StdioClient>>,
    pub session: Option<Session>,
    /// The server the last `connect` started.
    pub leader: Option<Leader>,
    /// Every stdio server a session started.
    pub session_leaders: Vec<Leader>,
    /// The last thing the client reported, kept when it goes away.
    pub last_report: Option<ClientReport>,
    /// Servers whose connect was abandoned half-way (found in the ledger).
    pub abandoned: Vec<Leader>,
    /// Servers the client replaced by restarting (the newest last).
    pub replaced: Vec<Leader>,
    /// The client's events, kept when it goes away.
    pub events: Vec<Event>,
    pub stdout_skipped: u64,
    /// Every session server's events, as `server: event`.
    pub session_events: Vec<String>,
}

/// The kind of a client error: the one place that asks.
pub(crate) fn kind_of(error: &ClientError) -> ErrorKind {
    error.kind()
}

impl Failure {
    /// A client error, with what the client itself said (its message and
    /// Debug output minus the server's own stderr lines attached to it).
    pub(crate) fn of(error: &ClientError) -> Self {
        let message = chain(error);
        let mut own = message.clone();
        let mut debug = format!("{error:?}");
        for line in error.stderr_tail() {
            own = own.replace(line.as_str(), "");
            debug = debug.replace(&format!("{line:?}"), "");
        }
        Failure {
            kind: Some(kind_of(error)),
            message,
            words: vec![own, debug],
        }
    }
}

impl Library {
    pub fn leaders(&self) -> Vec<Leader> {
        self.leader
            .into_iter()
            .chain(self.session_leaders.iter().copied())
            .chain(self.abandoned.iter().copied())
            .chain(self.replaced.iter().copied())
            .collect()
    }

    /// After a step: when the client has restarted its server (its restart
    /// policy), the server the harness follows from then on is the new one,
    /// as the harness sees it (a child of the harness in the ledger); the
    /// old one stays among the leaders, for the final observation.
    pub fn follow_restart(&mut self, env: &Env) {
        let (Some(client), Some(leader)) = (&self.client, self.leader) else {
            return;
        };
        if client.restarts() == 0 || client.pid() == leader.pid {
            return;
        }
        let taken = self.leaders();
        // Only a server the harness saw start and does not know yet: a
        // report naming anything else changes nothing.
        if let Some(fresh) =
            Leader::observed(env, client.pid(), &taken).filter(|fresh| fresh.pid == client.pid())
        {
            self.replaced.push(leader);
            self.leader = Some(fresh);
        }
    }

    pub async fn connect(
        &mut self,
        server: &ServerConfig,
        options: Option<&ConnectOptions>,
        env: &Env,
    ) -> Result<Leader, Failure> {
        // The caller's event log: a failed connect keeps its events.
        let log = Arc::new(EventLog::new(&server.name, Instant::now()));
        // The harness's own runs contain: what a server starts outside its
        // group is ended at close, unless the scenario turns it off.
        let contain = options.and_then(|o| o.contain).unwrap_or(true);
        let mut builder = StdioClient::builder(server)
            .events(log.clone())
            .contain(contain);
        if let Some(options) = options {
            let ConnectOptions {
                timeout,
                era,
                probe_timeout,
                eof_grace,
                term_grace,
                contain: _,
            } = options.clone();
            if let Some(timeout) = timeout {
                builder = builder.timeout(timeout.0);
            }
            if let Some(era) = era {
                builder = builder.era(era);
            }
            if let Some(probe) = probe_timeout {
                builder = builder.probe_timeout(probe.0);
            }
            if let Some(grace) = eof_grace {
                builder = builder.eof_grace(grace.0);
            }
            if let Some(grace) = term_grace {
                builder = builder.term_grace(grace.0);
            }
        }
        match builder.connect().await {
            Ok(client) => {
                // What the harness sees, not what the client says: the
                // report is compared with it (`reported_pid`), and every
                // signal the harness sends goes there.
                let Some(leader) = Leader::observed(env, client.pid(), &self.leaders()) else {
                    self.client = Some(Arc::new(client));
                    return Err(Failure {
                        kind: None,
                        message: "the harness sees no server process this client started \
                                  (no child of the harness carries the scenario's marker)"
                            .into(),
                        words: Vec::new(),
                    });
                };
                self.leader = Some(leader);
                self.client = Some(Arc::new(client));
                Ok(leader)
            }
            Err(error) => {
                // A failed connect returns after the reaper, which records
                // `exited` before it reports: the log is whole.
                self.events = log.snapshot();
                Err(Failure::of(&error))
            }
        }
    }

    /// Starts a connect and drops its future once `reached()` names the
    /// server it started (polled every few milliseconds, up to `bound`);
    /// returns that pid and its state letter at the instant the drop
    /// returned (`None`: reaped). `Err` with what happened instead when the
    /// connect ended first or `reached` never held.
    pub async fn abandon_connect(
        &mut self,
        server: &ServerConfig,
        reached: impl Fn() -> Option<u32>,
        bound: Duration,
    ) -> Result<(u32, Option<char>), String> {
        let log = Arc::new(EventLog::new(&server.name, Instant::now()));
        let mut connect = Box::pin(
            StdioClient::builder(server)
                .events(log)
                .contain(true)
                .connect(),
        );
        let deadline = Instant::now() + bound;
        loop {
            tokio::select! {
                result = &mut connect => {
                    return Err(match result {
                        Ok(_) => "the connect completed before it could be abandoned".into(),
                        Err(error) => format!("the connect failed before it could be abandoned: {}", chain(&error)),
                    });
                }
                () = tokio::time::sleep(Duration::from_millis(5)) => {
                    if let Some(pid) = reached() {
                        // Dropped here, half-way: whatever it started must
                        // go, the child reaped before the drop returns.
                        drop(connect);
                        return Ok((pid, super::super::env::state_of(pid)));
                    }
                    if Instant::now() > deadline {
                        return Err("the server never got that far".into());
                    }
                }
            }
        }
    }

    /// What the client reports about its server, to compare with what the
    /// harness sees.
    pub fn report(&self) -> Option<ClientReport> {
        self.client.as_deref().map(report_of)
    }

    fn client(&self) -> Result<Arc<StdioClient>, Failure> {
        self.client.clone().ok_or_else(|| Failure {
            kind: None,
            message: "no connected client".into(),
            words: Vec::new(),
        })
    }

    pub async fn list_tools(&mut self) -> Result<usize, Failure> {
        let client = self.client()?;
        let result = client.list_tools().await;
        result.map(|tools| tools.len()).map_err(|e| Failure::of(&e))
    }

    pub async fn call(
        &mut self,
        tool: &str,
        args: serde_json::Map<String, Value>,
    ) -> Result<CallReply, Failure> {
        let client = self.client()?;
        let result = client.call_tool(tool, Some(args)).await;
        result.map(|r| reply(&r)).map_err(|e| Failure::of(&e))
    }

    /// `count` calls of `tool` at once: each one's answer and how long it
    /// took, in the order the calls were made.
    pub async fn call_concurrently(
        &mut self,
        count: usize,
        tool: &str,
        args: &serde_json::Map<String, Value>,
    ) -> Vec<(Result<CallReply, Failure>, Duration)> {
        let Ok(client) = self.client() else {
            return Vec::new();
        };
        let calls = (0..count).map(|_| {
            let client = client.clone();
            let args = args.clone();
            async move {
                let start = Instant::now();
                let result = client.call_tool(tool, Some(args)).await;
                (
                    result.map(|r| reply(&r)).map_err(|e| Failure::of(&e)),
                    start.elapsed(),
                )
            }
        });
        futures::future::join_all(calls).await
    }

    pub async fn close(&mut self) -> CloseReport {
        let client = self.client.clone().expect("the step checked for a client");
        let report = report(client.close().await);
        self.last_report = self.report();
        report
    }

    /// `count` closes at once: their reports, and how many times the close
    /// sequence ran (by the client's `closed` events).
    pub async fn close_concurrently(&mut self, count: usize) -> (Vec<CloseReport>, usize) {
        let client = self.client.clone().expect("the step checked for a client");
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..count {
            let client = client.clone();
            tasks.spawn(async move { client.close().await });
        }
        let reports = tasks.join_all().await.into_iter().map(report).collect();
        self.last_report = self.report();
        let sequences = client
            .events()
            .iter()
            .filter(|e| matches!(e.kind, EventKind::Closed { .. }))
            .count();
        (reports, sequences)
    }

    pub fn drop_client(&mut self) {
        if let Some(client) = self.client.take() {
            self.collect(&client);
        }
    }

    pub fn end(&mut self) -> Vec<&'static str> {
        let mut ended = Vec::new();
        if let Some(session) = self.session.take() {
            self.collect_session(&session);
            drop(session);
            ended.push("drop session (implicit, end of steps)");
        }
        if let Some(client) = self.client.take() {
            self.collect(&client);
            let closed = client
                .events()
                .iter()
                .any(|e| matches!(e.kind, EventKind::Closed { .. }));
            drop(client);
            if !closed {
                ended.push("drop (implicit, end of steps)");
            }
        }
        ended
    }

    /// Keeps what the client knows before it goes away.
    pub fn collect(&mut self, client: &StdioClient) {
        // `client` was taken out of `self.client` already: asking `report()`
        // here would record nothing (and the stderr checks never ran).
        self.last_report = Some(report_of(client));
        self.events = client.events();
        self.stdout_skipped = client.stdout_lines_skipped();
    }

    /// Keeps every stdio server's events, as `server: event`.
    pub fn collect_session(&mut self, session: &Session) {
        let names: Vec<String> = session.servers().map(str::to_owned).collect();
        for name in names {
            if let Some(Connection::Stdio(client)) = session.connection(&name) {
                self.session_events.extend(
                    client
                        .events()
                        .iter()
                        .filter_map(|e| describe(&e.kind))
                        .map(|e| format!("{name}: {e}")),
                );
                self.stdout_skipped += client.stdout_lines_skipped();
            }
        }
    }
}

pub(crate) fn reply(result: &mcp_stdio_client::CallToolResult) -> CallReply {
    let value = serde_json::to_value(result).unwrap_or(Value::Null);
    CallReply {
        text: value["content"][0]["text"].as_str().map(str::to_owned),
        reported: true,
        is_error: result.is_error.unwrap_or(false),
    }
}

fn report(outcome: mcp_stdio_client::CloseOutcome) -> CloseReport {
    CloseReport {
        path: Some(outcome.path),
        status: outcome.status,
        group_swept: Some(outcome.group_swept),
        contained: outcome.contained.map(|c| c.killed),
        elapsed: outcome.elapsed,
        error: None,
        reaped_by_client: None,
    }
}

/// One line per lifecycle event for the snapshot.
pub(crate) fn describe(kind: &EventKind) -> Option<String> {
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
        // Whether a process the server left was still dying when containment
        // looked can depend on the machine's load (a PR_SET_PDEATHSIG
        // sidecar); a scenario asserts the count with `contained:` instead.
        EventKind::Contained { .. } => return None,
        EventKind::Closed { path, .. } => format!("closed {path}"),
    })
}

/// What `client` reports about its server, to compare with what the harness
/// sees. Taken from the client given, not from `Library::client`: when the
/// client goes away (`collect`) it has already been taken out.
fn report_of(client: &StdioClient) -> ClientReport {
    ClientReport {
        name: client.name().to_owned(),
        restarts: client.restarts(),
        pid: client.pid(),
        pgid: client.pgid(),
        server_name: client
            .server_info()
            .and_then(|info| info.server_info.as_ref().map(|i| i.name.clone())),
        exit_status: client.exit_status(),
        stderr_lines: client.stderr_lines(),
        stderr_tail: client.stderr_tail(),
    }
}
