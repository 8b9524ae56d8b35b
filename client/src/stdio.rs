//! [`StdioClient`]: one stdio MCP server, from spawn to a close that leaves
//! nothing behind (docs/contract.md, section 4: `4.start.*` to `4.guarantee.residual`).

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicU32, Ordering},
    },
    time::{Duration, Instant},
};

use mcp_stdio_process::{self as process, Containment, ExitWatch};
use nix::sys::signal::Signal;
use rmcp::{
    RoleClient,
    model::{
        CallToolResult, ClientConfig, ClientRequest, JsonObject, ServerPeerInfo, ServerResult, Tool,
    },
    service::{Peer, PeerRequestOptions, RunningService, ServiceError},
};
use serde::Serialize;
use tokio::sync::{OnceCell, broadcast};

use crate::{
    command_path,
    config::{ServerConfig, StdioConfig, Transport},
    contain::{Contain, Contained},
    era::{Era, EraSetting, RestartPolicy},
    error::{ClientError, Detail, service_error},
    events::{ChildExit, ClosePath, Event, EventKind, EventLog},
    handshake,
    requests::{call_tool_via, client_identity, list_all_tools},
    transport::{self, Pipes},
};

/// How long the client waits for the child's last stderr lines before it
/// builds a child-exited error.
const STDERR_SETTLE: Duration = Duration::from_millis(250);
/// Upper bound on waiting for the reaper after SIGKILL. [`StdioClient`]'s `Drop` and a
/// dropped connect future block for at most this plus [`process::REAP_BOUND`]
/// (documented on [`StdioClient`] as 6 s).
const SIGKILL_REAP_BOUND: Duration = Duration::from_secs(5);
/// How long the reaper holds a child's `exited` event back until the
/// connect has logged `spawned`: microseconds in practice; only a bound.
const SPAWN_ANNOUNCE_BOUND: Duration = Duration::from_secs(1);
/// How long the group sweep waits for stragglers to disappear.
const SWEEP_SETTLE: Duration = Duration::from_millis(500);
/// How long containment waits for what it killed (SIGKILL) to be gone: the
/// kernel ends such processes at once; this only bounds one stuck in the
/// kernel.
const CONTAIN_SETTLE: Duration = Duration::from_secs(1);

/// How close ended: see [`StdioClient::close`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CloseOutcome {
    /// The step that ended the child.
    pub path: ClosePath,
    /// How the child ended; `None` only if it could not be reaped even after
    /// SIGKILL (never seen in practice; logged as an error).
    pub status: Option<ChildExit>,
    /// From the call to close until it returned.
    #[serde(serialize_with = "as_millis")]
    pub elapsed: Duration,
    /// True when members of the server's process group outlived the leader
    /// and were killed by the sweep (a sidecar, a launcher's grandchild).
    pub group_swept: bool,
    /// With containment on ([`Contain`]): how the server was contained and how many
    /// processes it started outside its group (`setsid`, daemons) were still alive and
    /// killed. `None` with containment off.
    pub contained: Option<Contained>,
}

fn as_millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_millis() as u64)
}

/// A connected stdio MCP server: one child process, in a process group of its own, from spawn
/// to a close that leaves nothing of that group behind.
///
/// # Connecting
///
/// [`StdioClient::connect`] takes a [`ServerConfig`] as loaded; [`StdioClient::builder`] does
/// the same with options (an [`EventLog`] the caller keeps, another TIMEOUT, era or grace).
/// Either resolves COMMAND, spawns it, and completes the MCP start-up within TIMEOUT. A connect
/// that fails has already killed the child's group and reaped the child when the error returns.
///
/// # Closing
///
/// [`StdioClient::close`] ends the server and says how ([`CloseOutcome::path`]):
///
/// - [`ClosePath::Exited`]: the child had already exited (it crashed, or someone killed it);
///   close only sweeps its group and reaps it.
/// - [`ClosePath::Eof`]: the child exited within EOF_GRACE (default 2 s) of its stdin being
///   closed, which is how a well-behaved server stops.
/// - [`ClosePath::Sigterm`]: it needed SIGTERM to its process group, and exited within
///   TERM_GRACE (default 2 s).
/// - [`ClosePath::Sigkill`]: it needed SIGKILL to its group.
///
/// In every case, members of the group that outlive the leader (a sidecar, a launcher's
/// grandchild) are ended too ([`CloseOutcome::group_swept`]), and the child is reaped before
/// close returns. Close is idempotent: every call, concurrent or later, gets the same outcome.
///
/// With containment on ([`ConnectOptions::contain`]), what the server started outside its
/// group and session (`setsid`, a daemon) is ended too, after the group, before close returns
/// ([`CloseOutcome::contained`]); without it, such a process outlives close. Containment
/// also applies to drop and to a failed or abandoned connect, which then block up to 1 s
/// more than stated below.
///
/// ```
/// use mcp_stdio_client::{ClosePath, StdioClient, config::{ServerConfig, StdioConfig}};
///
/// # // A minimal legacy-era MCP server in sh: it answers `initialize` with the version it
/// # // was offered, ignores everything else, and exits when its stdin ends.
/// # const SH: &str = r#"while IFS= read -r line; do case "$line" in *'"method":"initialize"'*)
/// #   id=$(printf '%s' "$line" | sed 's/.*"id":\([0-9]*\).*/\1/')
/// #   v=$(printf '%s' "$line" | sed 's/.*"protocolVersion":"\([^"]*\)".*/\1/')
/// #   printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"%s","capabilities":{},"serverInfo":{"name":"sh","version":"1"}}}\n' "$id" "$v";;
/// # esac; done"#;
/// # async fn demo() -> Result<(), mcp_stdio_client::ClientError> {
/// // SH: a minimal MCP server in sh (hidden here) that answers `initialize` (the legacy
/// // era), then reads until its stdin ends, and exits: the `eof` path.
/// let mut stdio = StdioConfig::new("sh");
/// stdio.args = vec!["-c".into(), SH.into()];
/// let server = ServerConfig::stdio("sh-server", stdio);
/// let client = StdioClient::builder(&server)
///     .era(mcp_stdio_client::EraSetting::Legacy)
///     .connect()
///     .await?;
/// assert_eq!(client.pid(), client.pgid(), "the child leads a group of its own");
/// let outcome = client.close().await;
/// assert_eq!(outcome.path, ClosePath::Eof);
/// assert!(outcome.status.is_some_and(|status| status.success()));
/// # Ok(())
/// # }
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(demo()).unwrap();
/// ```
///
/// A server that ignores EOF and SIGTERM is killed, after both graces:
///
/// ```
/// use std::time::Duration;
/// use mcp_stdio_client::{ClosePath, StdioClient, config::{ServerConfig, StdioConfig}};
///
/// # // A minimal legacy-era MCP server in sh: it answers `initialize` with the version it
/// # // was offered, ignores everything else, and exits when its stdin ends.
/// # const SH: &str = r#"while IFS= read -r line; do case "$line" in *'"method":"initialize"'*)
/// #   id=$(printf '%s' "$line" | sed 's/.*"id":\([0-9]*\).*/\1/')
/// #   v=$(printf '%s' "$line" | sed 's/.*"protocolVersion":"\([^"]*\)".*/\1/')
/// #   printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"%s","capabilities":{},"serverInfo":{"name":"sh","version":"1"}}}\n' "$id" "$v";;
/// # esac; done"#;
/// # async fn demo() -> Result<(), mcp_stdio_client::ClientError> {
/// let mut stdio = StdioConfig::new("sh");
/// // The same server, but it ignores SIGTERM and keeps running after EOF.
/// let script = format!("trap '' TERM; {SH}\nwhile :; do sleep 1; done");
/// stdio.args = vec!["-c".into(), script];
/// let server = ServerConfig::stdio("stubborn", stdio);
/// let client = StdioClient::builder(&server)
///     .era(mcp_stdio_client::EraSetting::Legacy)
///     .eof_grace(Duration::from_millis(100))
///     .term_grace(Duration::from_millis(100))
///     .connect()
///     .await?;
/// let outcome = client.close().await;
/// assert_eq!(outcome.path, ClosePath::Sigkill);
/// # Ok(())
/// # }
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(demo()).unwrap();
/// ```
///
/// # Dropping
///
/// Dropping a client that was not closed (the last handle to the running server, to be
/// exact: a request in flight holds one too) kills the server at once, without the graces of
/// close: SIGKILL to its process group and to the child, stdin closed, then the thread
/// **blocks until the child is reaped, for at most 6 s** (5 s for the exit after SIGKILL,
/// which the kernel delivers at once in practice, and 1 s for the reap). Close first when
/// the server deserves the graces; drop is the safety net, not the way to stop a server.
///
/// ```
/// use mcp_stdio_client::{StdioClient, config::{ServerConfig, StdioConfig}};
///
/// # // A minimal legacy-era MCP server in sh: it answers `initialize` with the version it
/// # // was offered, ignores everything else, and exits when its stdin ends.
/// # const SH: &str = r#"while IFS= read -r line; do case "$line" in *'"method":"initialize"'*)
/// #   id=$(printf '%s' "$line" | sed 's/.*"id":\([0-9]*\).*/\1/')
/// #   v=$(printf '%s' "$line" | sed 's/.*"protocolVersion":"\([^"]*\)".*/\1/')
/// #   printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"%s","capabilities":{},"serverInfo":{"name":"sh","version":"1"}}}\n' "$id" "$v";;
/// # esac; done"#;
/// # async fn demo() -> Result<(), mcp_stdio_client::ClientError> {
/// let mut stdio = StdioConfig::new("sh");
/// stdio.args = vec!["-c".into(), SH.into()];
/// let server = ServerConfig::stdio("dropped", stdio);
/// let client = StdioClient::builder(&server)
///     .era(mcp_stdio_client::EraSetting::Legacy)
///     .connect()
///     .await?;
/// let pid = client.pid();
/// drop(client);
/// // Killed and reaped by the time drop returned: not even a zombie is left.
/// assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
/// # Ok(())
/// # }
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(demo()).unwrap();
/// ```
///
/// # Cancellation
///
/// - A dropped [`connect`](StdioClient::connect) future (a caller's own timeout, a
///   `select!` that lost) kills the child it spawned, as a failed connect does: SIGKILL to the
///   group, reaped, in the future's `Drop` (blocking for at most the same 6 s).
///
///   ```
///   use std::{sync::Arc, time::{Duration, Instant}};
///   use mcp_stdio_client::{ChildExit, EventKind, EventLog, StdioClient};
///   use mcp_stdio_client::config::{ServerConfig, StdioConfig};
///
///   # async fn demo() {
///   // A "server" that never answers start-up.
///   let mut stdio = StdioConfig::new("sleep");
///   stdio.args = vec!["30".into()];
///   let server = ServerConfig::stdio("silent", stdio);
///   let events = Arc::new(EventLog::new("silent", Instant::now()));
///   let connect = StdioClient::builder(&server).events(events.clone()).connect();
///   assert!(tokio::time::timeout(Duration::from_millis(300), connect).await.is_err());
///   // The abandoned connect killed and reaped its child before the timeout returned.
///   let exited = events.snapshot().into_iter().any(|event| {
///       event.kind == EventKind::Exited { status: ChildExit::Signal(9) }
///   });
///   assert!(exited, "{:?}", events.snapshot());
///   # }
///   # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(demo());
///   ```
/// - A dropped request future ([`list_tools`](StdioClient::list_tools),
///   [`call_tool`](StdioClient::call_tool)) abandons the request; the server keeps running
///   and the client stays usable. TIMEOUT bounds each request the same way: the request is
///   cancelled, the server left running.
/// - A dropped [`close`](StdioClient::close) future stops the ladder where it was (close runs
///   in the caller's task, nothing in the background). The next call to close runs the
///   ladder again from the start (stdin is already closed, so the EOF step only waits its
///   grace), and dropping the client kills the server as above.
pub struct StdioClient {
    /// The running server process; replaced only by an opt-in restart.
    current: Mutex<Arc<Inner>>,
    name: String,
    stdio: StdioConfig,
    timeout: Duration,
    events: Arc<EventLog>,
    /// Held while a request decides whether to restart, through the
    /// restart, and by close: one restart at a time, never during a close.
    restart_turn: tokio::sync::Mutex<()>,
    /// Restarts done so far; written only under `restart_turn`.
    restarts: AtomicU32,
    /// Containment of every server process this client starts.
    contain: Contain,
}

struct Inner {
    name: String,
    pid: u32,
    pgid: u32,
    timeout: Duration,
    eof_grace: Duration,
    term_grace: Duration,
    exit: ExitWatch,
    /// What ends, at close, whatever the server started outside its group.
    containment: Option<Arc<Containment>>,
    events: Arc<EventLog>,
    pipes: Pipes,
    service: Mutex<Option<RunningService<RoleClient, ClientConfig>>>,
    peer: Peer<RoleClient>,
    server_info: Option<Arc<ServerPeerInfo>>,
    era: Era,
    closed: OnceCell<CloseOutcome>,
}

/// A connect with options: made by [`StdioClient::builder`], run by
/// [`ConnectOptions::connect`]. Each option overrides the server's configured value.
#[must_use = "a builder does nothing until `connect` is awaited"]
pub struct ConnectOptions {
    server: ServerConfig,
    events: Option<Arc<EventLog>>,
    stdio: StdioOptions,
    contain: Contain,
}

/// The options that override a stdio server's configured values.
#[derive(Default)]
struct StdioOptions {
    era: Option<EraSetting>,
    probe_timeout: Option<Duration>,
    eof_grace: Option<Duration>,
    term_grace: Option<Duration>,
    restart: Option<RestartPolicy>,
}

impl StdioOptions {
    fn apply(self, stdio: &mut StdioConfig) {
        let StdioOptions {
            era,
            probe_timeout,
            eof_grace,
            term_grace,
            restart,
        } = self;
        stdio.era = era.unwrap_or(stdio.era);
        stdio.probe_timeout = probe_timeout.unwrap_or(stdio.probe_timeout);
        stdio.eof_grace = eof_grace.unwrap_or(stdio.eof_grace);
        stdio.term_grace = term_grace.unwrap_or(stdio.term_grace);
        stdio.restart = restart.unwrap_or(stdio.restart);
    }
}

impl ConnectOptions {
    /// Records the lifecycle events into `events`, which the caller keeps: a connect that
    /// fails (a child that dies during start-up, a handshake timeout) still leaves its events
    /// there (`spawned`, `exited`...). Without it the client keeps its own log
    /// ([`StdioClient::events`]).
    pub fn events(mut self, events: Arc<EventLog>) -> Self {
        self.events = Some(events);
        self
    }

    /// Bound on start-up and on each request (TIMEOUT).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.server.timeout = timeout;
        self
    }

    /// Which protocol era to speak (ERA).
    pub fn era(mut self, era: EraSetting) -> Self {
        self.stdio.era = Some(era);
        self
    }

    /// Bound on the `server/discover` probe of [`EraSetting::Auto`] (PROBE_TIMEOUT).
    pub fn probe_timeout(mut self, probe_timeout: Duration) -> Self {
        self.stdio.probe_timeout = Some(probe_timeout);
        self
    }

    /// Wait after closing stdin before SIGTERM (EOF_GRACE).
    pub fn eof_grace(mut self, grace: Duration) -> Self {
        self.stdio.eof_grace = Some(grace);
        self
    }

    /// Wait after SIGTERM before SIGKILL (TERM_GRACE).
    pub fn term_grace(mut self, grace: Duration) -> Self {
        self.stdio.term_grace = Some(grace);
        self
    }

    /// Restart after an unexpected exit (RESTART, RESTART_BACKOFF).
    pub fn restart(mut self, restart: RestartPolicy) -> Self {
        self.stdio.restart = Some(restart);
        self
    }

    /// Containment: `true` ([`Contain::On`]) ends at close everything the server started,
    /// also what left its process group or session (`setsid`, daemons), in a cgroup v2 of
    /// its own where one can be made, else by tracking its descendants (this process then
    /// becomes a child subreaper). Off by default. See docs/client.md, "Containment".
    ///
    /// ```
    /// use mcp_stdio_client::{Contain, StdioClient, config::{ServerConfig, StdioConfig}};
    ///
    /// let server = ServerConfig::stdio("fs", StdioConfig::new("mcp-server-fs"));
    /// let _on = StdioClient::builder(&server).contain(true);
    /// let _fallback_only = StdioClient::builder(&server).contain(Contain::Tracked);
    /// ```
    pub fn contain(mut self, contain: impl Into<Contain>) -> Self {
        self.contain = contain.into();
        self
    }

    /// Spawns the server and completes start-up; see [`StdioClient::connect`].
    pub async fn connect(self) -> Result<StdioClient, ClientError> {
        let server = self.server;
        let events = self
            .events
            .unwrap_or_else(|| Arc::new(EventLog::new(&server.name, Instant::now())));
        let Transport::Stdio(mut stdio) = server.transport else {
            return Err(ClientError::new(&server.name, Detail::NotStdio));
        };
        self.stdio.apply(&mut stdio);
        let inner = start(
            &server.name,
            &stdio,
            server.timeout,
            events.clone(),
            self.contain,
        )
        .await?;
        Ok(StdioClient {
            current: Mutex::new(inner),
            name: server.name.clone(),
            stdio,
            timeout: server.timeout,
            events,
            restart_turn: tokio::sync::Mutex::new(()),
            restarts: AtomicU32::new(0),
            contain: self.contain,
        })
    }
}

impl StdioClient {
    /// Spawns the server and completes the MCP start-up within its TIMEOUT.
    /// On any failure the child is cleaned up completely (stdin closed, group
    /// killed, child reaped) before the error returns. A server with a URL is
    /// refused ([`ErrorKind::NotStdio`](crate::ErrorKind::NotStdio)).
    ///
    /// ```
    /// use mcp_stdio_client::{ErrorKind, StdioClient, config::{ServerConfig, StdioConfig}};
    ///
    /// # async fn demo() {
    /// let server = ServerConfig::stdio("missing", StdioConfig::new("no-such-mcp-server"));
    /// let error = StdioClient::connect(&server).await.err().unwrap();
    /// assert_eq!(error.kind(), ErrorKind::NotFound);
    /// assert_eq!(error.server(), "missing");
    /// # }
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(demo());
    /// ```
    pub async fn connect(server: &ServerConfig) -> Result<StdioClient, ClientError> {
        Self::builder(server).connect().await
    }

    /// A connect with options (an event log the caller keeps, another TIMEOUT, era or
    /// grace); [`ConnectOptions::connect`] runs it.
    pub fn builder(server: &ServerConfig) -> ConnectOptions {
        ConnectOptions {
            server: server.clone(),
            events: None,
            stdio: StdioOptions::default(),
            contain: Contain::Off,
        }
    }

    /// The running server process.
    fn inner(&self) -> Arc<Inner> {
        self.current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The server to send a request to: the current one, or, when it has
    /// exited unexpectedly and the restart policy allows, a new one started
    /// after the policy's backoff. Without a policy a dead server stays dead
    /// and the request fails at once with how it died.
    async fn ready(&self) -> Result<Arc<Inner>, ClientError> {
        let policy = self.stdio.restart;
        if policy.attempts == 0 {
            return Ok(self.inner());
        }
        // One request at a time decides: one that waited here while another
        // restarted the server finds the fresh one alive and uses it.
        let _turn = self.restart_turn.lock().await;
        let inner = self.inner();
        let done = self.restarts();
        if inner.exit.now().is_none() || inner.closed.initialized() || done >= policy.attempts {
            return Ok(inner);
        }
        let delay = policy.delay(done);
        let attempt = done + 1;
        self.restarts.store(attempt, Ordering::Relaxed);
        self.events.emit(EventKind::Restarting {
            attempt,
            of: policy.attempts,
            delay_ms: delay.as_millis() as u64,
        });
        tokio::time::sleep(delay).await;
        let fresh = start(
            &self.name,
            &self.stdio,
            self.timeout,
            self.events.clone(),
            self.contain,
        )
        .await?;
        // The dead one is swept and reaped like any close (path `exited`).
        inner.close().await;
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = fresh.clone();
        Ok(fresh)
    }

    /// Restarts done so far under the restart policy.
    pub fn restarts(&self) -> u32 {
        self.restarts.load(Ordering::Relaxed)
    }
}

/// Spawns the server and runs start-up; see [`StdioClient::connect`].
async fn start(
    name: &str,
    stdio: &StdioConfig,
    timeout: Duration,
    events: Arc<EventLog>,
    contain: Contain,
) -> Result<Arc<Inner>, ClientError> {
    // Checked before anything is spawned: nothing can fail on it later,
    // with a child already running.
    if name.contains('\0') {
        return Err(ClientError::new(name, Detail::InvalidName));
    }
    let env_path = stdio.env.get("PATH").map(std::ffi::OsStr::new);
    let inherited = command_path::inherited_path();
    let program = command_path::resolve(
        &stdio.command,
        stdio.dir.as_deref(),
        env_path,
        inherited.as_deref(),
    )
    .map_err(|source| ClientError::new(name, Detail::Resolve(source)))?;
    // The exit observer (a task on the reactor) reports the exit; a child
    // that exits at once could otherwise be logged `exited` before this task
    // logs `spawned`. The observer waits (bounded) until `spawned` is out; a
    // dropped sender (a failed spawn) lets it go at once.
    let (announced, spawned_out) = std::sync::mpsc::sync_channel::<()>(1);
    let on_exit = {
        let events = events.clone();
        move |status| {
            let _ = spawned_out.recv_timeout(SPAWN_ANNOUNCE_BOUND);
            events.emit(EventKind::Exited { status })
        }
    };
    // Made before the spawn: the child joins the cgroup before it runs a
    // single instruction of the program. Dropped on a failed spawn, it
    // removes the cgroup.
    let containment = contain.prepare().map(Arc::new);
    let child = process::spawn_contained(
        &program,
        &stdio.args,
        stdio.dir.as_deref(),
        &stdio.env,
        name,
        containment.as_deref(),
        on_exit,
    )
    .map_err(|source| {
        ClientError::new(
            name,
            Detail::Spawn {
                command: stdio.command.clone(),
                source,
            },
        )
    })?;
    // A process group id is a pid, which `std::process::Child::id` gives as a `u32`.
    let pgid = child.pgid;
    events.emit(EventKind::Spawned {
        pid: child.pid,
        pgid,
    });
    let _ = announced.send(());
    let (transport, pipes) = transport::start(
        name,
        child.stdin,
        child.stdout,
        child.stderr,
        events.clone(),
    );
    let exit = child.exit;
    // Until the client exists, this guard owns the child: if this future
    // is dropped half-way, the group is killed and the child reaped.
    let guard = process::KillGuard::with_containment(exit.clone(), containment.clone());
    let fail = |error: ClientError| {
        let pipes = &pipes;
        let exit = exit.clone();
        let containment = containment.clone();
        async move {
            // What the child started is found while it still links to it.
            if let Some(containment) = &containment {
                containment.track();
            }
            // SIGKILL first: a failed start gets no grace, and a child
            // that saw EOF first would make its end depend on a race.
            // The pid is still reserved (the child is not reaped before
            // `release`), so neither signal can reach a stranger.
            exit.signal_all(Signal::SIGKILL);
            pipes.close_stdin();
            let _ = exit.wait_for(SIGKILL_REAP_BOUND).await;
            end_containment(containment).await;
            exit.release();
            error
        }
    };

    // The probe is bounded by PROBE_TIMEOUT, and the whole start-up,
    // probe and fallback together, by TIMEOUT.
    // Kept until the end of this function: a failed start must not close
    // stdin (by dropping the transport) before the kill.
    let transport = handshake::slot(transport);
    // A probe bounded by TIMEOUT itself leaves no time for the fallback:
    // then TIMEOUT alone bounds it. With both timers due at the same
    // instant, which fired first was a race, and the loser sent
    // `initialize` to a server it was about to kill.
    let probe = if stdio.probe_timeout < timeout {
        stdio.probe_timeout
    } else {
        timeout.saturating_mul(2)
    };
    let handshake = tokio::time::timeout(
        timeout,
        handshake::start(transport.clone(), stdio.era, probe, client_identity()),
    );
    let child_exited = |status| {
        let pipes = &pipes;
        async move {
            // Its last words first: stderr is read until EOF (bounded).
            pipes.stderr.wait_done(STDERR_SETTLE).await;
            ClientError::new(
                name,
                Detail::ChildExited {
                    status,
                    stderr_tail: pipes.stderr.lines(),
                },
            )
        }
    };
    let started = tokio::select! {
        biased;
        result = handshake => match result {
            Ok(Ok(running)) => Ok(running),
            // A handshake that failed because the child died says so.
            Ok(Err(error)) => {
                if let Some(fallback) = error.probe.clone() {
                    events.emit(EventKind::EraFallback { fallback });
                }
                // A server that answered unacceptably is a handshake
                // failure; a connection that ended may be a death.
                let died = if error.is_protocol_refusal() {
                    None
                } else {
                    exit.wait_for(STDERR_SETTLE).await
                };
                match died {
                    Some(status) => Err(child_exited(status).await),
                    None => Err(ClientError::new(name, Detail::Handshake {
                        reason: error.to_string(),
                        stderr_tail: pipes.stderr.lines(),
                    })),
                }
            }
            Err(_) => Err(ClientError::new(name, Detail::HandshakeTimeout {
                timeout,
                stderr_tail: pipes.stderr.lines(),
            })),
        },
        status = exit.wait() => Err(child_exited(status).await),
    };
    let (running, started) = match started {
        Ok((running, started)) => {
            if let Some(fallback) = started.fell_back.clone() {
                events.emit(EventKind::EraFallback { fallback });
            }
            (running, started)
        }
        Err(error) => return Err(fail(error).await),
    };

    // `initialized` is queued by now: let it reach the pipe, so that
    // "connected" means the whole handshake was sent.
    pipes.wait_flushed(timeout).await;
    let server_info = running.peer().peer_info();
    if let Some(info) = &server_info {
        let (server, version) = match &info.server_info {
            Some(implementation) => (implementation.name.clone(), implementation.version.clone()),
            None => (String::new(), String::new()),
        };
        events.emit(EventKind::Initialized {
            server,
            version,
            protocol: info.protocol_version.to_string(),
            era: started.era,
        });
    }
    let peer = running.peer().clone();
    // Sidecars started during start-up are known from now on, even if the
    // server dies before close (tracking only; a cgroup needs no scan).
    if let Some(containment) = &containment {
        containment.track();
    }
    guard.disarm();
    Ok(Arc::new(Inner {
        name: name.to_owned(),
        pid: child.pid,
        pgid,
        timeout,
        eof_grace: stdio.eof_grace,
        term_grace: stdio.term_grace,
        exit,
        containment,
        events,
        pipes,
        service: Mutex::new(Some(running)),
        peer,
        server_info,
        era: started.era,
        closed: OnceCell::new(),
    }))
}

impl StdioClient {
    /// The server's name in the config.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The child's pid (also its process group id). After a restart, the new child's.
    pub fn pid(&self) -> u32 {
        self.inner().pid
    }

    /// The child's process group id: its pid, since it leads a group of its own.
    pub fn pgid(&self) -> u32 {
        self.inner().pgid
    }

    /// What the server said about itself in the handshake.
    pub fn server_info(&self) -> Option<Arc<ServerPeerInfo>> {
        self.inner().server_info.clone()
    }

    /// The protocol era start-up chose for the running server.
    pub fn era(&self) -> Era {
        self.inner().era
    }

    /// How the child ended, if the reaper has collected it.
    pub fn exit_status(&self) -> Option<ChildExit> {
        self.inner().exit.now()
    }

    /// Stdout lines skipped so far (not JSON-RPC, or oversized).
    pub fn stdout_lines_skipped(&self) -> u64 {
        self.inner().pipes.stdout_skipped.load(Ordering::Relaxed)
    }

    /// What waits to be written to the server's stdin (bounded: docs/client.md).
    pub fn stdin_backlog(&self) -> crate::transport::StdinBacklog {
        self.inner().pipes.stdin_backlog()
    }

    /// Stderr lines read (and logged) so far.
    pub fn stderr_lines(&self) -> u64 {
        self.inner().pipes.stderr.count()
    }

    /// The last stderr lines.
    pub fn stderr_tail(&self) -> Vec<String> {
        self.inner().pipes.stderr.lines()
    }

    /// The lifecycle events so far.
    pub fn events(&self) -> Vec<Event> {
        self.events.snapshot()
    }

    /// Lifecycle events from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    /// Every tool the server offers (all pages), each page bounded by TIMEOUT.
    pub async fn list_tools(&self) -> Result<Vec<Tool>, ClientError> {
        let inner = self.ready().await?;
        list_all_tools(&self.name, |request| inner.request(request, "tools/list")).await
    }

    /// Calls `tool` with `arguments`, bounded by TIMEOUT. A tool that reports
    /// an error (`isError: true`) is a successful call: look at the result.
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: Option<JsonObject>,
    ) -> Result<CallToolResult, ClientError> {
        let inner = self.ready().await?;
        call_tool_via(&self.name, tool, arguments, |request| {
            inner.request(request, "tools/call")
        })
        .await
    }

    /// Closes the server: stdin EOF, then EOF_GRACE; SIGTERM to the process
    /// group, then TERM_GRACE; SIGKILL to the group; reap; sweep the group.
    /// Returns as soon as the child is gone. Idempotent and safe to call
    /// concurrently: every caller gets the same outcome.
    pub async fn close(&self) -> CloseOutcome {
        // Not while a restart is starting a new process.
        let _turn = self.restart_turn.lock().await;
        self.inner().close().await
    }
}

impl Inner {
    async fn close(&self) -> CloseOutcome {
        *self.closed.get_or_init(|| self.close_sequence()).await
    }

    async fn request(
        &self,
        request: ClientRequest,
        method: &str,
    ) -> Result<ServerResult, ClientError> {
        let result = self.try_request(request, method).await;
        if let Err(error) = &result {
            self.events.emit(EventKind::RequestFailed {
                method: method.to_owned(),
                kind: error.kind(),
            });
        }
        result
    }

    async fn try_request(
        &self,
        request: ClientRequest,
        method: &str,
    ) -> Result<ServerResult, ClientError> {
        if self.closed.initialized() {
            return Err(ClientError::new(&self.name, Detail::Closed));
        }
        // A dead child fails every request at once, without touching the transport.
        if let Some(status) = self.exit.now() {
            return Err(self.exited(status));
        }
        let options = PeerRequestOptions::with_timeout(self.timeout);
        let handle = match self.peer.send_request_with_option(request, options).await {
            Ok(handle) => handle,
            Err(error) => return Err(self.transport_failure(method, error).await),
        };
        tokio::select! {
            biased;
            response = handle.await_response() => match response {
                Ok(result) => Ok(result),
                Err(error) => Err(self.transport_failure(method, error).await),
            },
            status = self.exit.wait() => {
                self.pipes.stderr.wait_done(STDERR_SETTLE).await;
                Err(self.exited(status))
            }
        }
    }

    /// Maps an rmcp failure to the error the contract wants: a dead child is
    /// reported as such, not as a bare "transport closed".
    async fn transport_failure(&self, method: &str, error: ServiceError) -> ClientError {
        match error {
            ServiceError::Timeout { .. }
            | ServiceError::McpError(_)
            | ServiceError::UnexpectedResponse => service_error(&self.name, method, error),
            _ => match self.exit.wait_for(STDERR_SETTLE).await {
                Some(status) => {
                    self.pipes.stderr.wait_done(STDERR_SETTLE).await;
                    self.exited(status)
                }
                None if self.closed.initialized() => ClientError::new(&self.name, Detail::Closed),
                None => ClientError::new(&self.name, Detail::StdoutClosed),
            },
        }
    }

    fn exited(&self, status: ChildExit) -> ClientError {
        ClientError::new(
            &self.name,
            Detail::ChildExited {
                status,
                stderr_tail: self.pipes.stderr.lines(),
            },
        )
    }

    async fn close_sequence(&self) -> CloseOutcome {
        let start = Instant::now();
        // Before the ladder: once the server exits, its children's parent
        // link points at the subreaper, not at it (tracking only).
        if let Some(containment) = &self.containment {
            containment.track();
        }
        let (path, status, group_gone) = match self.exit.now() {
            Some(status) => {
                self.pipes.close_stdin();
                (ClosePath::Exited, Some(status), false)
            }
            None => self.stop_child().await,
        };
        if status.is_none() {
            tracing::error!(server = %self.name, pid = self.pid, "child did not exit after SIGKILL");
        }
        // The unreaped leader keeps the group id reserved while the group is
        // swept; only then may it be reaped.
        let group_swept = self.sweep_group(path, group_gone).await;
        // Then what left the group: still before the release, so a tracked
        // scan from the server's pid cannot reach a stranger.
        let cgroup = self.containment.as_ref().and_then(|c| c.cgroup());
        let contained = end_containment(self.containment.clone()).await;
        if let Some(contained) = contained {
            self.events.emit(EventKind::Contained {
                method: contained.method,
                killed: contained.killed,
                cgroup: cgroup.map(|dir| dir.display().to_string()),
            });
        }
        self.exit.release();
        // The child's last stderr lines are logged, and its last stdout lines
        // handled, before close returns (bounded: a descendant outside the
        // group may hold the pipes open).
        self.pipes.stderr.wait_done(STDERR_SETTLE).await;
        self.pipes.wait_stdout_done(STDERR_SETTLE).await;
        self.stop_service().await;
        let outcome = CloseOutcome {
            path,
            status,
            elapsed: start.elapsed(),
            group_swept,
            contained,
        };
        self.events.emit(EventKind::Closed {
            path,
            elapsed_ms: outcome.elapsed.as_millis() as u64,
        });
        outcome
    }

    /// EOF, then SIGTERM, then SIGKILL, each step only if the child still lives.
    /// The last field is true when the group was seen empty after the child's
    /// exit (the SIGTERM path waits for that), so the sweep need not look again.
    async fn stop_child(&self) -> (ClosePath, Option<ChildExit>, bool) {
        self.events.emit(EventKind::ClosePhase {
            phase: ClosePath::Eof,
        });
        self.pipes.close_stdin();
        if let Some(status) = self.exit.wait_for(self.eof_grace).await {
            return (ClosePath::Eof, Some(status), false);
        }
        self.events.emit(EventKind::ClosePhase {
            phase: ClosePath::Sigterm,
        });
        let deadline = Instant::now() + self.term_grace;
        // By pid as well as by group: a child that moved to another group
        // must still get every step of the ladder.
        self.exit.signal_all(Signal::SIGTERM);
        if let Some(status) = self.exit.wait_until(deadline).await {
            // Every member of the group got the SIGTERM, not only the leader:
            // a launcher that dies at once must not cost its grandchild the
            // rest of TERM_GRACE to shut down in. The sweep gets what is left.
            let gone = self.exit.wait_group_gone(deadline).await;
            return (ClosePath::Sigterm, Some(status), gone);
        }
        self.events.emit(EventKind::ClosePhase {
            phase: ClosePath::Sigkill,
        });
        self.exit.signal_all(Signal::SIGKILL);
        (
            ClosePath::Sigkill,
            self.exit.wait_for(SIGKILL_REAP_BOUND).await,
            false,
        )
    }

    /// Ends whatever is left in the server's process group after the leader
    /// ended (even gracefully): sidecars, a launcher's grandchildren. They
    /// get SIGTERM and TERM_GRACE to shut down in (a sidecar may hold state
    /// worth saving), then SIGKILL; members that already had their SIGTERM
    /// and grace in the ladder (`path` is sigterm or sigkill) go straight to
    /// SIGKILL. Returns true when there was something to end. `gone`: the
    /// group was already seen without a live member after the leader's exit;
    /// then no pass over the process table is made again (nothing can have
    /// joined it since: no member was left to fork, and the leader is a
    /// zombie we hold), which was a second pass, through the watcher's
    /// tick, on the path between the child's exit and close returning.
    async fn sweep_group(&self, path: ClosePath, gone: bool) -> bool {
        // Zombies waiting for their new parent count for killpg but are not
        // alive: only live members make this a sweep.
        let swept = !gone && self.exit.group_alive().await;
        if swept {
            self.events.emit(EventKind::GroupSwept);
            if matches!(path, ClosePath::Exited | ClosePath::Eof) {
                let _ = self.exit.signal_group(Signal::SIGTERM);
                self.wait_group_gone(Instant::now() + self.term_grace).await;
            }
        }
        let _ = self.exit.signal_group(Signal::SIGKILL);
        if swept {
            // Killed processes disappear once their new parent reaps them;
            // wait briefly so "after close, nothing is alive" holds for
            // observers too.
            self.wait_group_gone(Instant::now() + SWEEP_SETTLE).await;
        }
        swept
    }

    /// Waits until no live process is left in the group, or `deadline`.
    /// The process table is scanned once per tick for every server closing
    /// at the same time, not once per server (`mcp_stdio_process::group`).
    async fn wait_group_gone(&self, deadline: Instant) {
        self.exit.wait_group_gone(deadline).await;
    }

    /// Ends rmcp's service task: the child is gone, so its stdout is at EOF
    /// and the task finishes promptly; the bound only guards against a
    /// descendant outside the group holding stdout open.
    async fn stop_service(&self) {
        let running = self
            .service
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(running) = running {
            let _ = tokio::time::timeout(Duration::from_millis(200), running.cancel()).await;
        }
    }
}

/// Ends what `containment` holds (blocking work, off the runtime's threads),
/// bounded by [`CONTAIN_SETTLE`]; `None` without containment.
async fn end_containment(containment: Option<Arc<Containment>>) -> Option<Contained> {
    let containment = containment?;
    let ending = containment.clone();
    match tokio::task::spawn_blocking(move || ending.end(CONTAIN_SETTLE)).await {
        Ok(ended) => Some(ended),
        // No blocking thread (a runtime shutting down): end it here.
        Err(_) => Some(containment.end(CONTAIN_SETTLE)),
    }
}

impl Drop for Inner {
    /// Dropping without close still kills the group and reaps the child.
    fn drop(&mut self) {
        if self.closed.initialized() {
            return;
        }
        if let Some(containment) = &self.containment {
            containment.track();
        }
        // The whole group (a launcher's grandchild outlives its leader), and
        // before stdin closes, so nothing gets a grace it was not given.
        self.exit.signal_all(Signal::SIGKILL);
        self.pipes.close_stdin();
        let status = self.exit.wait_blocking(SIGKILL_REAP_BOUND);
        if let Some(containment) = &self.containment {
            containment.end(CONTAIN_SETTLE);
        }
        self.exit.release();
        match status {
            Some(status) => {
                tracing::info!(server = %self.name, status = %status, "stdio server killed on drop")
            }
            None => {
                tracing::error!(server = %self.name, pid = self.pid, "child not reaped after SIGKILL on drop")
            }
        }
    }
}
