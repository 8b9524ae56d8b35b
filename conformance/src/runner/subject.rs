//! The subject under test: what the steps drive. The library in process
//! ([`Library`]), or an external client program through a driver
//! ([`External`]); the seam is an enum so each subject says plainly what it
//! can do and report. A subject reports in neutral terms
//! ([`Failure`], [`CloseReport`]): the steps and the recording do not know
//! which one ran.

pub(crate) mod external;
pub(crate) mod library;

use std::time::Duration;

use mcp_stdio_client::{ErrorKind, config::ServerConfig};

pub(crate) use external::External;
pub(crate) use library::{Library, describe};

use super::env::Env;
use crate::scenario::ClosePath;

pub(crate) enum Subject {
    Library(Library),
    External(External),
}

/// A failed step, as the subject reports it.
#[derive(Debug, Clone)]
pub(crate) struct Failure {
    /// The error's kind, when the subject can tell it (the library can).
    pub kind: Option<ErrorKind>,
    /// The whole message, causes included.
    pub message: String,
    /// What the client itself said, for `secrets_absent` (without the
    /// server's own stderr lines).
    pub words: Vec<String>,
}

/// A tool call's answer.
#[derive(Debug, Clone)]
pub(crate) struct CallReply {
    /// The text of the first content block.
    pub text: Option<String>,
    /// Whether the subject reports the content at all (a driver may not).
    pub reported: bool,
    pub is_error: bool,
}

/// What a close reported. The library reports all of it; other subjects
/// leave what they cannot know empty and the harness infers it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CloseReport {
    pub path: Option<ClosePath>,
    pub status: Option<mcp_stdio_client::ChildExit>,
    pub group_swept: Option<bool>,
    /// Live processes containment killed (the library reports it).
    pub contained: Option<u32>,
    pub elapsed: Duration,
    /// The client's message, when its close failed (a driver can say so).
    pub error: Option<String>,
    /// The client's own word on whether it had reaped its server when close
    /// returned (a version 2 driver may say, from its SDK's state read in
    /// the same instant: `reaped` in the close answer). Only ever makes the
    /// `at_return.reaped` check stricter: the harness's own sight of the
    /// process table still has to agree.
    pub reaped_by_client: Option<bool>,
}

/// What a client says about its server (only the library can be asked).
#[derive(Debug, Clone)]
pub(crate) struct ClientReport {
    /// The server's name, as configured.
    pub name: String,
    /// Restarts under the server's restart policy.
    pub restarts: u32,
    pub pid: u32,
    pub pgid: u32,
    /// `serverInfo.name` from the handshake.
    pub server_name: Option<String>,
    pub exit_status: Option<mcp_stdio_client::ChildExit>,
    pub stderr_lines: u64,
    pub stderr_tail: Vec<String>,
}

/// The server process the subject started: its pid and process group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Leader {
    pub pid: u32,
    pub pgid: u32,
}

impl Leader {
    /// `pid`, with its group as the process table has it; `fallback` only
    /// when the process is already gone. Both must be the harness's own
    /// observations (the ledger, the process table), never a client's word.
    pub fn seen(pid: u32, fallback: u32) -> Self {
        let pgid = mcp_stdio_process::table::group_of(pid).unwrap_or(fallback);
        Leader { pid, pgid }
    }

    /// The server the in-process client started, as the harness itself sees
    /// it: a `started` record of the ledger written by a child of this
    /// process, or a process carrying the scenario's marker whose parent is
    /// this process. The client's `reported` pid only chooses among them (a
    /// session starts several) and is ignored when it names none of them, so
    /// a client reporting pid 0 or 1 can never make the harness signal its
    /// own process group, pid 1 or, through kill(-1), every process.
    /// `taken`: servers already known, skipped when the report is ignored.
    pub fn observed(env: &Env, reported: u32, taken: &[Leader]) -> Option<Self> {
        let me = std::process::id();
        let ledger = env.ledger();
        let started: Vec<&super::env::Record> = ledger
            .iter()
            .filter(|r| r.event == "started" && r.ppid == me && r.pid > 1)
            .collect();
        let marked: Vec<crate::observer::Marked> = crate::observer::marked(&env.marker)
            .into_iter()
            .filter(|m| m.pid > 1 && crate::observer::parent_of(m.pid) == Some(me))
            .collect();
        let fallback = |pid: u32| {
            started
                .iter()
                .find(|r| r.pid == pid)
                .map(|r| r.pgid)
                .or_else(|| marked.iter().find(|m| m.pid == pid).and_then(|m| m.pgid))
        };
        let ours = |pid: u32| fallback(pid).is_some() && pid != me;
        let free = |pid: &u32| !taken.iter().any(|l| l.pid == *pid);
        let pid = if ours(reported) {
            reported
        } else {
            // The newest server first: ledger order is start order.
            started
                .iter()
                .rev()
                .map(|r| r.pid)
                .chain(marked.iter().map(|m| m.pid))
                .find(free)?
        };
        let leader = Leader::seen(pid, fallback(pid)?);
        (leader.pgid > 1).then_some(leader)
    }
}

impl Subject {
    pub fn library(&mut self) -> Option<&mut Library> {
        match self {
            Subject::Library(library) => Some(library),
            Subject::External(_) => None,
        }
    }

    pub fn external(&mut self) -> Option<&mut External> {
        match self {
            Subject::Library(_) => None,
            Subject::External(external) => Some(external),
        }
    }

    /// Whether a close reports its own path and exit status (else the
    /// harness infers the path from the ledger, and the status is unknown).
    pub fn reports_close(&self) -> bool {
        matches!(self, Subject::Library(_))
    }

    /// What the client reports about its server, when it can be asked.
    pub fn report(&self) -> Option<ClientReport> {
        match self {
            Subject::Library(library) => library.report(),
            Subject::External(_) => None,
        }
    }

    /// When the last connect's time starts, where it is not when the step
    /// began: an external subject first starts its driver and waits until
    /// it is ready, which is no part of the client's connect.
    pub fn connect_sent(&self) -> Option<std::time::Instant> {
        match self {
            Subject::Library(_) => None,
            Subject::External(external) => external.connect_sent,
        }
    }

    pub fn connected(&self) -> bool {
        match self {
            Subject::Library(library) => library.client.is_some(),
            Subject::External(external) => external.connected,
        }
    }

    /// Every server started so far (a session's too), by pid and group.
    pub fn leaders(&self) -> Vec<Leader> {
        match self {
            Subject::Library(library) => library.leaders(),
            Subject::External(external) => external.leaders(),
        }
    }

    /// The client's own line of processes: the process that started the
    /// servers and its ancestors (the harness and up). Checks on a server's
    /// group never count them as its members: a client may leave its
    /// servers in its own group.
    pub fn own_line(&self) -> Vec<u32> {
        match self {
            Subject::Library(_) => super::env::ancestry(std::process::id()),
            Subject::External(external) => external.own_line(),
        }
    }

    /// Connects `server`; `options` (the library only: the step checked)
    /// go through the client's builder.
    pub async fn connect(
        &mut self,
        server: &ServerConfig,
        options: Option<&crate::scenario::ConnectOptions>,
        env: &Env,
    ) -> Result<Leader, Failure> {
        match self {
            Subject::Library(library) => library.connect(server, options, env).await,
            Subject::External(external) => external.connect(server, env),
        }
    }

    /// The number of tools, when the subject reports it.
    pub async fn list_tools(&mut self) -> Result<Option<usize>, Failure> {
        match self {
            Subject::Library(library) => library.list_tools().await.map(Some),
            Subject::External(external) => external.list_tools(),
        }
    }

    pub async fn call(
        &mut self,
        tool: &str,
        args: serde_json::Map<String, serde_json::Value>,
    ) -> Result<CallReply, Failure> {
        match self {
            Subject::Library(library) => library.call(tool, args).await,
            Subject::External(external) => external.call(tool, args),
        }
    }

    pub async fn close(&mut self) -> CloseReport {
        match self {
            Subject::Library(library) => library.close().await,
            Subject::External(external) => external.close(),
        }
    }

    /// Drops the client without closing it (for a driver: `exit`, the
    /// program ends).
    pub async fn drop_client(&mut self) {
        match self {
            Subject::Library(library) => library.drop_client(),
            Subject::External(external) => external.exit(),
        }
    }

    /// The end of the steps: whatever is still connected is dropped, as a
    /// program that ends drops it. Returns what to record, if anything.
    pub async fn end(&mut self) -> Vec<&'static str> {
        match self {
            Subject::Library(library) => library.end(),
            Subject::External(external) => external.end(),
        }
    }
}
