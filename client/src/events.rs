//! Lifecycle events: emitted as structured tracing events and kept in a
//! bounded log on the client, so a harness can record them without scraping
//! text.

use std::{
    collections::VecDeque,
    fmt,
    sync::{Mutex, OnceLock},
    time::{Duration, Instant},
};

use serde::Serialize;
use tokio::sync::broadcast;

/// How a child process ended, as the reaper saw it.
pub use mcp_stdio_process::ChildExit;

/// Which step of close ended the child. Deserialize too: the conformance
/// scenarios name expected paths in the same words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClosePath {
    /// It had already exited before close began (crash, external kill).
    Exited,
    /// It exited after its stdin was closed, within EOF_GRACE.
    Eof,
    /// It needed SIGTERM to its process group, and exited within TERM_GRACE.
    Sigterm,
    /// It needed SIGKILL to its process group.
    Sigkill,
}

impl ClosePath {
    /// The stable id: `exited`, `eof`, `sigterm`, `sigkill`.
    pub fn as_str(self) -> &'static str {
        match self {
            ClosePath::Exited => "exited",
            ClosePath::Eof => "eof",
            ClosePath::Sigterm => "sigterm",
            ClosePath::Sigkill => "sigkill",
        }
    }
}

impl fmt::Display for ClosePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a stdout line was not passed on as JSON-RPC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// Not JSON at all (a banner, a log line).
    NotJson,
    /// JSON, but not a JSON-RPC message this client understands.
    NotJsonRpc,
    /// Longer than the stdout line bound.
    Oversized,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum EventKind {
    /// The child is running, in process group `pgid` (which is its pid).
    Spawned {
        /// The child's pid.
        pid: u32,
        /// The child's process group id.
        pgid: u32,
    },
    /// Start-up completed: the server's name and version, the protocol
    /// version and the era chosen.
    Initialized {
        /// The server's name for itself.
        server: String,
        /// The server's version.
        version: String,
        /// The protocol version agreed.
        protocol: String,
        /// The era start-up chose.
        era: crate::era::Era,
    },
    /// The `server/discover` probe of `auto` failed in a way that means a
    /// legacy server; `initialize` follows.
    EraFallback {
        /// What the probe got.
        fallback: crate::era::Fallback,
    },
    /// The server exited unexpectedly and the restart policy starts it again
    /// (restart `attempt` of `of`) after `delay_ms`.
    Restarting {
        /// This restart's number, from 1.
        attempt: u32,
        /// Restarts allowed.
        of: u32,
        /// The wait before it starts, in milliseconds.
        delay_ms: u64,
    },
    /// A request failed; `kind` is [`crate::ClientError::kind`].
    RequestFailed {
        /// The request's method (`tools/call`...).
        method: String,
        /// Why it failed.
        kind: crate::error::ErrorKind,
    },
    /// A stdout line was dropped; `count` is the running total. `prefix` is
    /// the server's own words (see docs/client.md on redaction scope).
    StdoutLineSkipped {
        /// Why it was skipped.
        reason: SkipReason,
        /// Lines skipped so far, this one included.
        count: u64,
        /// The line's first 80 characters.
        prefix: String,
    },
    /// Replies to the server's requests were dropped because the bytes
    /// waiting for its stdin were at the bound (a server that floods requests
    /// and does not read): `count` is the running total, reported at 1, 2, 4,
    /// 8...; `backlog_bytes` what was waiting at that moment.
    StdinRepliesDropped {
        /// Replies dropped so far.
        count: u64,
        /// Bytes waiting to be written at that moment.
        backlog_bytes: u64,
    },
    /// Close entered a phase: `eof` (stdin closed), `sigterm`, `sigkill`.
    ClosePhase {
        /// The phase entered.
        phase: ClosePath,
    },
    /// The reaper saw the child exit.
    Exited {
        /// How it ended.
        status: ChildExit,
    },
    /// After the leader ended, members of its group were still alive and got SIGKILL.
    GroupSwept,
    /// Containment (opt-in: [`crate::Contain`]) ended what the server started
    /// outside its process group: `killed` live processes, by `method`
    /// (`cgroup`, in the cgroup `cgroup`; `tracked`; `none` where neither
    /// works).
    Contained {
        /// How the server was contained.
        method: crate::contain::ContainMethod,
        /// Live processes killed.
        killed: u32,
        /// The cgroup's directory, with the `cgroup` method.
        #[serde(skip_serializing_if = "Option::is_none")]
        cgroup: Option<String>,
    },
    /// Close finished.
    Closed {
        /// The step that ended the child.
        path: ClosePath,
        /// How long close took, in milliseconds.
        elapsed_ms: u64,
    },
}

/// One event, timed from the start of `connect`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    /// Since the start of `connect` (serialized as milliseconds).
    #[serde(serialize_with = "as_millis")]
    pub at: Duration,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
}

fn as_millis<S: serde::Serializer>(at: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(at.as_millis() as u64)
}

/// How many events the log keeps; older ones are dropped (a flood of skipped
/// stdout lines must not grow memory without bound).
pub const EVENT_LOG_CAPACITY: usize = 4096;

/// The per-client event log: a bounded buffer of every [`Event`] and a broadcast of new
/// ones. A host that wants the events of a connect that may fail creates one and hands it
/// to [`crate::ConnectOptions::events`]; it keeps what was recorded whatever the outcome.
pub struct EventLog {
    server: String,
    start: Instant,
    events: Mutex<VecDeque<Event>>,
    /// Made by the first [`EventLog::subscribe`]: most sessions never
    /// subscribe, and a broadcast channel allocates its whole ring (256
    /// events, about 30 KiB) when it is made, which was the largest part of
    /// a connected server's memory (docs/benchmarks.md, "Calls and memory").
    tx: OnceLock<broadcast::Sender<Event>>,
}

impl EventLog {
    /// An empty log for server `server`; event times are measured from `start`.
    pub fn new(server: impl Into<String>, start: Instant) -> Self {
        Self {
            server: server.into(),
            start,
            events: Mutex::new(VecDeque::new()),
            tx: OnceLock::new(),
        }
    }

    /// Records `kind`, logs it with tracing, and tells subscribers.
    pub(crate) fn emit(&self, kind: EventKind) {
        trace(&self.server, &kind);
        let event = Event {
            at: self.start.elapsed(),
            kind,
        };
        // Cloned only when someone ever subscribed.
        let broadcast = self.tx.get().map(|tx| (tx, event.clone()));
        {
            let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
            if events.len() == EVENT_LOG_CAPACITY {
                events.pop_front();
            }
            events.push_back(event);
        }
        if let Some((tx, event)) = broadcast {
            let _ = tx.send(event);
        }
    }

    /// The events recorded so far (at most [`EVENT_LOG_CAPACITY`], the newest).
    pub fn snapshot(&self) -> Vec<Event> {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect()
    }

    /// A receiver of the events recorded from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.tx
            .get_or_init(|| broadcast::channel(256).0)
            .subscribe()
    }
}

fn trace(server: &str, kind: &EventKind) {
    use tracing::{debug, info, warn};
    match kind {
        EventKind::Spawned { pid, pgid } => info!(server, pid, pgid, "spawned stdio server"),
        EventKind::Initialized {
            server: name,
            version,
            protocol,
            era,
        } => {
            info!(server, server_name = %name, server_version = %version, protocol = %protocol, era = %era, "start-up complete")
        }
        EventKind::Restarting {
            attempt,
            of,
            delay_ms,
        } => {
            warn!(
                server,
                attempt, of, delay_ms, "stdio server exited; restarting it"
            )
        }
        EventKind::EraFallback { fallback } => {
            info!(server, fallback = ?fallback, "server/discover failed; falling back to initialize")
        }
        EventKind::RequestFailed { method, kind } => {
            warn!(server, method = %method, kind = %kind, "request failed")
        }
        EventKind::StdoutLineSkipped {
            reason,
            count,
            prefix,
        } => warn!(
            server,
            reason = ?reason,
            count,
            prefix = %prefix,
            "skipped a stdout line that is not a JSON-RPC message"
        ),
        EventKind::StdinRepliesDropped {
            count,
            backlog_bytes,
        } => warn!(
            server,
            count,
            backlog_bytes,
            "dropped replies to the server's requests: it is not reading its stdin"
        ),
        EventKind::ClosePhase { phase } => debug!(server, phase = %phase, "close phase"),
        EventKind::Exited { status } => info!(server, status = %status, "stdio server exited"),
        EventKind::GroupSwept => {
            info!(
                server,
                "killed processes left in the server's process group"
            )
        }
        EventKind::Contained {
            method,
            killed,
            cgroup,
        } => {
            let cgroup = cgroup.as_deref().unwrap_or("");
            let method = method.as_str();
            if *killed > 0 {
                info!(
                    server,
                    method,
                    killed,
                    cgroup,
                    "killed processes the server started outside its process group"
                )
            } else {
                debug!(server, method, cgroup, "containment found nothing left")
            }
        }
        EventKind::Closed { path, elapsed_ms } => {
            info!(server, path = %path, elapsed_ms, "stdio server closed")
        }
    }
}
