//! One server process under test: spawned in its own process group with a
//! unique marker, spoken to in raw JSON-RPC lines, its stdout kept byte for
//! byte, and everything it started killed and reaped when it is dropped.
//!
//! The JSON-RPC here is deliberately minimal and hand-written: `stdout.purity`
//! needs the raw bytes, and a check must be able to send a request and then
//! close stdin at a moment of its choosing, which no client library offers.

use std::{
    collections::{BTreeMap, BTreeSet, VecDeque},
    path::PathBuf,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use mcp_stdio_process::{self as process, ChildExit, ExitWatch, Marker, Signal, marker, table};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    process::{ChildStderr, ChildStdin, ChildStdout},
    sync::{Notify, watch},
};

use super::purity::{self, Purity};
use crate::observer::{self, MARKER_ENV};

/// How much of the end of stderr is kept for `-v`.
const STDERR_KEPT: usize = 64 << 10;
/// How many of the server's own requests (`ping`) wait for an answer at
/// most; beyond that they are dropped unanswered, so a server that floods
/// requests cannot make the checker's memory grow.
const MAX_SERVER_REQUESTS: usize = 64;
/// How long cleanup waits for SIGKILLed processes to vanish.
const CLEANUP_BOUND: Duration = Duration::from_secs(5);
/// How long a write of the checker's own message may wait for room in the
/// server's stdin, when no deadline of its own bounds it sooner.
const WRITE_BOUND: Duration = Duration::from_secs(5);
/// The longest write to a pipe that is atomic (4096 on Linux, 512 on
/// macOS): a reply no longer than this is written whole or not at all.
const PIPE_BUF: usize = nix::libc::PIPE_BUF;

/// Why a server could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("cannot start `{command}`")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
}

/// Why a request got no usable answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RequestError {
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("the server exited ({0}) before answering")]
    Exited(ChildExit),
    #[error("the server closed its stdout before answering")]
    StdoutClosed,
    #[error("cannot write to the server's stdin: {0}")]
    Write(String),
    #[error("the server answered with JSON-RPC error {code}: {message}")]
    ErrorAnswer {
        code: i64,
        message: String,
        /// The error's `data`, if any (a version refusal lists the
        /// supported versions there).
        data: Option<Value>,
    },
}

/// How much the server wrote to stdout, and when it started. The bytes
/// themselves are judged as they arrive (`stdout.purity`), not kept.
#[derive(Debug, Default, Clone)]
pub struct StdoutLog {
    pub total: u64,
    pub first_byte: Option<Instant>,
}

/// `stdout.purity` over the server's stdout: fed while it is read, decided
/// at EOF.
enum PurityState {
    Reading(purity::Stream),
    Done(Purity),
}

/// What the stdout reader hands over to the requests: answers to the
/// requests in flight, and the server's own requests. Everything else (a
/// notification, an answer nobody waits for) is dropped as it is read, so
/// memory stays bounded whatever the server writes.
#[derive(Default)]
struct Inbox {
    state: Mutex<InboxState>,
    /// Woken when an answer or a server request arrives.
    arrived: Notify,
}

#[derive(Default)]
struct InboxState {
    /// Ids of our requests not answered yet.
    waiting: BTreeSet<i64>,
    answers: BTreeMap<i64, Value>,
    /// The server's requests (`id`, `method`), oldest first.
    requests: VecDeque<(Value, String)>,
}

/// The members of a message that say where it goes.
#[derive(serde::Deserialize)]
struct Envelope {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    method: Option<String>,
}

impl Inbox {
    fn lock(&self) -> std::sync::MutexGuard<'_, InboxState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes one protocol line from the reader.
    fn deliver(&self, line: &[u8]) {
        // Lenient for the protocol's sake: a BOM, CR or spaces do not stop
        // the handshake (`stdout.purity` reports them separately).
        let line = line
            .strip_prefix(b"\xEF\xBB\xBF")
            .unwrap_or(line)
            .trim_ascii();
        if line.is_empty() {
            return;
        }
        let Ok(envelope) = serde_json::from_slice::<Envelope>(line) else {
            return;
        };
        let mut state = self.lock();
        match (envelope.method, envelope.id) {
            (Some(method), Some(id)) => {
                if state.requests.len() >= MAX_SERVER_REQUESTS {
                    return;
                }
                state.requests.push_back((id, method));
            }
            (None, Some(id)) => {
                let Some(id) = id.as_i64().filter(|id| state.waiting.contains(id)) else {
                    return;
                };
                let Ok(message) = serde_json::from_slice::<Value>(line) else {
                    return;
                };
                state.waiting.remove(&id);
                state.answers.insert(id, message);
            }
            _ => return,
        }
        drop(state);
        self.arrived.notify_one();
    }
}

/// What the server wrote to stderr: counted, and its end kept.
#[derive(Debug, Default, Clone)]
pub struct StderrLog {
    pub tail: Vec<u8>,
    pub bytes: u64,
    pub lines: u64,
}

impl StderrLog {
    /// The last `n` lines, lossily decoded.
    pub fn last_lines(&self, n: usize) -> Vec<String> {
        let text = String::from_utf8_lossy(&self.tail);
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..]
            .iter()
            .map(|l| (*l).to_owned())
            .collect()
    }
}

/// A server's stdin, closable by the instance or by an interrupt.
struct StdinSlot {
    /// `None` while a write is under way, or once closed.
    stdin: Option<ChildStdin>,
    closed: bool,
}

/// What an interrupt needs to close one live server.
#[derive(Clone)]
struct LiveServer {
    exit: ExitWatch,
    stdin: Arc<Mutex<StdinSlot>>,
    /// Its marker: with runs at the same time, an orphan re-parented to
    /// this process is told apart by it.
    marker: String,
}

/// Every server started and not yet cleaned up: on SIGINT, SIGTERM or
/// SIGHUP the CLI closes them from here ([`close_live`], [`kill_live`]).
static LIVE: Mutex<BTreeMap<u64, LiveServer>> = Mutex::new(BTreeMap::new());

/// Locks a mutex, whether or not a panic poisoned it.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Closes every live server with the close ladder: stdin EOF, `eof_grace`;
/// SIGTERM to the groups of those still running, `term_grace`; SIGKILL to
/// the groups of those still running. Dropping the instances afterwards
/// sweeps whatever is left (strays included).
pub async fn close_live(eof_grace: Duration, term_grace: Duration) {
    let live: Vec<LiveServer> = lock(&LIVE).values().cloned().collect();
    for server in &live {
        let mut slot = lock(&server.stdin);
        slot.closed = true;
        // Dropping the pipe's write end is the EOF; a write under way (its
        // end is in the paused check) is dropped with it later.
        slot.stdin = None;
    }
    let wait_all = |grace: Duration| {
        let live = &live;
        async move {
            let deadline = tokio::time::Instant::now() + grace;
            for server in live {
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                server.exit.wait_for(left).await;
            }
        }
    };
    wait_all(eof_grace).await;
    for server in live.iter().filter(|s| s.exit.now().is_none()) {
        server.exit.signal_all(Signal::SIGTERM);
    }
    wait_all(term_grace).await;
    for server in live.iter().filter(|s| s.exit.now().is_none()) {
        server.exit.signal_all(Signal::SIGKILL);
    }
}

/// SIGKILL to the group of every live server, at once (a second interrupt).
pub fn kill_live() {
    for server in lock(&LIVE).values() {
        server.exit.signal_all(Signal::SIGKILL);
    }
}

/// The program to run and its arguments.
#[derive(Debug, Clone)]
pub struct Target {
    /// The program, resolved as the client resolves it.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// What the user typed as COMMAND, for messages.
    pub display: String,
}

static NEXT: AtomicU64 = AtomicU64::new(0);

/// Set by the CLI, which starts no process but the servers it checks: then
/// every process re-parented to it came from a server. A library caller may
/// have children of its own, so there only orphans in another session (they
/// called `setsid`) or seen earlier under the server are taken.
static ALL_ORPHANS_ARE_SERVERS: AtomicBool = AtomicBool::new(false);

/// Declares that this process starts no child but the servers it checks
/// (the `mcp-conformance server` CLI), so every orphan re-parented to it is
/// one of theirs.
pub fn all_orphans_are_servers() {
    ALL_ORPHANS_ARE_SERVERS.store(true, Ordering::SeqCst);
}

/// A running (or exited) server under test.
pub struct Instance {
    pub pid: u32,
    pub pgid: u32,
    pub marker: String,
    pub started: Instant,
    /// Shared with the registry of live servers, so an interrupt can close it.
    stdin: Arc<Mutex<StdinSlot>>,
    /// This instance's key in [`LIVE`].
    live_key: u64,
    exit: ExitWatch,
    exited_at: Arc<Mutex<Option<Instant>>>,
    stdout: Arc<Mutex<StdoutLog>>,
    stdout_done: watch::Receiver<bool>,
    purity: Arc<Mutex<PurityState>>,
    stderr: Arc<Mutex<StderrLog>>,
    stderr_done: watch::Receiver<bool>,
    inbox: Arc<Inbox>,
    next_id: i64,
    /// The `_meta` every request carries once the modern era is chosen
    /// (MCP 2026-07-28 has no session: each request names its version).
    request_meta: Option<Value>,
    /// Tell the stdout and stderr readers to stop and drop their pipes.
    close_output: watch::Sender<bool>,
    /// Every pid seen carrying the marker, so cleanup can reap orphans that
    /// were re-parented to this process (the subreaper).
    seen: BTreeSet<u32>,
    /// When the server started (clock ticks since boot): nothing of its
    /// making started before.
    start_ticks: u64,
    /// Processes found without the marker (`pid`, start ticks): in the
    /// server's group, under the server, or re-parented to this process.
    unmarked: BTreeSet<(u32, u64)>,
    cleaned: bool,
}

impl Instance {
    /// Spawns the target in a new process group, with the full environment
    /// plus the marker. Must run inside a tokio runtime.
    pub fn spawn(target: &Target) -> Result<Instance, SpawnError> {
        let marker = Marker::new("mcp-server-check").as_str().to_owned();
        let env = [(MARKER_ENV.to_owned(), marker.clone())]
            .into_iter()
            .collect();
        let exited_at = Arc::new(Mutex::new(None));
        let on_exit = {
            let exited_at = exited_at.clone();
            move |_| *exited_at.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now())
        };
        // Told to the keeper before the spawn: a checker killed right after
        // it leaves a server the keeper can find.
        crate::keeper::marker(&marker);
        let started = Instant::now();
        let spawned = crate::keeper::spawning(|| {
            process::spawn(
                &target.program,
                &target.args,
                None,
                &env,
                "server-check",
                on_exit,
            )
        })
        .map_err(|source| SpawnError::Spawn {
            command: target.display.clone(),
            source,
        })?;
        crate::keeper::server(spawned.pid, spawned.pgid);
        let start_ticks = table::stat(spawned.pid).map_or(0, |stat| stat.start_ticks);
        let stdout = Arc::new(Mutex::new(StdoutLog::default()));
        let stderr = Arc::new(Mutex::new(StderrLog::default()));
        let purity = Arc::new(Mutex::new(PurityState::Reading(purity::Stream::default())));
        let inbox = Arc::new(Inbox::default());
        let (stdout_done_tx, stdout_done) = watch::channel(false);
        let (stderr_done_tx, stderr_done) = watch::channel(false);
        let (close_output, closing) = watch::channel(false);
        tokio::spawn(read_stdout(
            spawned.stdout,
            stdout.clone(),
            purity.clone(),
            inbox.clone(),
            stdout_done_tx,
            closing.clone(),
        ));
        tokio::spawn(read_stderr(
            spawned.stderr,
            stderr.clone(),
            stderr_done_tx,
            closing,
        ));
        let stdin = Arc::new(Mutex::new(StdinSlot {
            stdin: Some(spawned.stdin),
            closed: false,
        }));
        let live_key = NEXT.fetch_add(1, Ordering::Relaxed);
        lock(&LIVE).insert(
            live_key,
            LiveServer {
                exit: spawned.exit.clone(),
                stdin: stdin.clone(),
                marker: marker.clone(),
            },
        );
        Ok(Instance {
            pid: spawned.pid,
            pgid: spawned.pgid,
            marker,
            started,
            stdin,
            live_key,
            exit: spawned.exit,
            exited_at,
            stdout,
            stdout_done,
            purity,
            stderr,
            stderr_done,
            inbox,
            next_id: 1,
            request_meta: None,
            close_output,
            seen: BTreeSet::new(),
            start_ticks,
            unmarked: BTreeSet::new(),
            cleaned: false,
        })
    }

    /// The exit status, if the server has exited.
    pub fn exited(&self) -> Option<(ChildExit, Instant)> {
        let status = self.exit.now()?;
        let at = self
            .exited_at
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .unwrap_or_else(Instant::now);
        Some((status, at))
    }

    /// Waits up to `within` for the server to exit.
    pub async fn wait_exit(&self, within: Duration) -> Option<(ChildExit, Instant)> {
        self.exit.wait_for(within).await?;
        self.exited()
    }

    /// Closes the server's stdin (EOF). Returns when it was closed.
    pub async fn close_stdin(&mut self) -> Instant {
        let stdin = {
            let mut slot = lock(&self.stdin);
            slot.closed = true;
            slot.stdin.take()
        };
        if let Some(mut stdin) = stdin {
            // A flush cannot block for long: our writes are small; bound it anyway.
            let _ = tokio::time::timeout(Duration::from_millis(100), stdin.flush()).await;
            drop(stdin);
        }
        Instant::now()
    }

    /// Signals the server's whole process group.
    pub fn signal(&self, signal: Signal) -> Instant {
        // By pid too: a server that moved to another group still gets it.
        self.exit.signal_all(signal);
        Instant::now()
    }

    /// Writes one JSON-RPC message as one line, giving up after 5 s.
    pub async fn send(&mut self, message: &Value) -> Result<(), RequestError> {
        self.send_within(message, WRITE_BOUND).await
    }

    /// Writes one JSON-RPC message as one line, giving up after `bound`:
    /// a server that stops reading its stdin cannot hold the check longer.
    async fn send_within(&mut self, message: &Value, bound: Duration) -> Result<(), RequestError> {
        // Taken out of the slot for the write, put back after it unless
        // stdin was closed meanwhile (by an interrupt).
        let Some(mut stdin) = lock(&self.stdin).stdin.take() else {
            return Err(RequestError::Write("stdin is closed".into()));
        };
        let mut line = serde_json::to_vec(message).expect("a JSON value serializes");
        line.push(b'\n');
        let write = async {
            stdin.write_all(&line).await?;
            stdin.flush().await
        };
        let written = tokio::time::timeout(bound, write).await;
        {
            let mut slot = lock(&self.stdin);
            if !slot.closed {
                slot.stdin = Some(stdin);
            }
        }
        match written {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(RequestError::Write(error.to_string())),
            Err(_) => Err(RequestError::Write(format!(
                "the server does not read its stdin (nothing written within {})",
                super::report::human(bound)
            ))),
        }
    }

    /// Writes one short line without waiting: all of it, or nothing when
    /// the server's stdin pipe is full (or closed). A write of at most
    /// `PIPE_BUF` bytes to a pipe is atomic, so a line is never cut: a
    /// reply the server has no room for is dropped, not left half-written.
    fn try_send(&mut self, message: &Value) -> bool {
        let mut line = serde_json::to_vec(message).expect("a JSON value serializes");
        line.push(b'\n');
        if line.len() > PIPE_BUF {
            return false;
        }
        let slot = lock(&self.stdin);
        let Some(stdin) = slot.stdin.as_ref() else {
            return false;
        };
        // The pipe is non-blocking (tokio made it so): a full pipe is EAGAIN.
        // Tokio's own readiness cache is untouched: its next write finds out
        // for itself.
        matches!(nix::unistd::write(stdin, &line), Ok(n) if n == line.len())
    }

    /// From now on every request carries `meta` as its `_meta` (the modern era).
    pub fn set_request_meta(&mut self, meta: Value) {
        self.request_meta = Some(meta);
    }

    /// Closes the checker's read ends of the server's stdout and stderr, as
    /// a host that died does: the server's next write to either fails with
    /// EPIPE (or SIGPIPE kills it). Returns once both pipes are closed.
    pub async fn close_output(&mut self) -> Instant {
        let _ = self.close_output.send(true);
        for done in [&mut self.stdout_done, &mut self.stderr_done] {
            // The readers drop their pipe before they say they are done.
            let _ = tokio::time::timeout(Duration::from_secs(1), done.wait_for(|d| *d)).await;
        }
        Instant::now()
    }

    /// Sends a request without waiting for its answer; returns its id.
    pub async fn send_request(&mut self, method: &str, params: Value) -> Result<i64, RequestError> {
        self.send_request_within(method, params, WRITE_BOUND).await
    }

    /// [`Instance::send_request`], its write bounded by `bound`.
    async fn send_request_within(
        &mut self,
        method: &str,
        mut params: Value,
        bound: Duration,
    ) -> Result<i64, RequestError> {
        if let (Some(meta), Some(object)) = (&self.request_meta, params.as_object_mut()) {
            object.insert("_meta".into(), meta.clone());
        }
        let id = self.next_id;
        self.next_id += 1;
        // Registered before it is sent, so the reader keeps the answer.
        self.inbox.lock().waiting.insert(id);
        self.send_within(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
            bound,
        )
        .await?;
        Ok(id)
    }

    /// Sends a request and waits for its result; `within` bounds both, the
    /// write of the request included.
    pub async fn request(
        &mut self,
        method: &str,
        params: Value,
        within: Duration,
    ) -> Result<Value, RequestError> {
        let deadline = tokio::time::Instant::now() + within;
        let id = self.send_request_within(method, params, within).await?;
        self.answer_until(id, deadline, within).await
    }

    /// Waits up to `within` for the answer to request `id`, answering the
    /// server's own requests (`ping`) in the meantime.
    pub async fn answer(&mut self, id: i64, within: Duration) -> Result<Value, RequestError> {
        let deadline = tokio::time::Instant::now() + within;
        self.answer_until(id, deadline, within).await
    }

    /// [`Instance::answer`] until `deadline`; a timeout is reported as
    /// `within`. The deadline is looked at on every turn, and answering the
    /// server's requests never waits (see [`Instance::reply`]), so it fires
    /// on time whatever the server sends and whether or not it reads.
    async fn answer_until(
        &mut self,
        id: i64,
        deadline: tokio::time::Instant,
        within: Duration,
    ) -> Result<Value, RequestError> {
        let exit = self.exit.clone();
        let mut stdout_done = self.stdout_done.clone();
        let inbox = self.inbox.clone();
        loop {
            if let Some(answer) = inbox.lock().answers.remove(&id) {
                return answer_result(&answer);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(RequestError::Timeout(within));
            }
            let request = inbox.lock().requests.pop_front();
            if let Some((request_id, method)) = request {
                self.reply(request_id, &method);
                continue;
            }
            if *stdout_done.borrow() {
                // Stdout closed: wait for the exit (or the deadline) to say which.
                let wait = deadline
                    .saturating_duration_since(tokio::time::Instant::now())
                    .min(Duration::from_millis(250));
                return Err(match exit.wait_for(wait).await {
                    Some(status) => RequestError::Exited(status),
                    None if tokio::time::Instant::now() >= deadline => {
                        RequestError::Timeout(within)
                    }
                    None => RequestError::StdoutClosed,
                });
            }
            tokio::select! {
                () = inbox.arrived.notified() => {}
                _ = stdout_done.changed() => {}
                status = exit.wait() => {
                    // An answer may have been read right before the exit: take it first.
                    if let Some(answer) = inbox.lock().answers.remove(&id) {
                        return answer_result(&answer);
                    }
                    return Err(RequestError::Exited(status));
                }
                () = tokio::time::sleep_until(deadline) => return Err(RequestError::Timeout(within)),
            }
        }
    }

    /// Answers a request of the server's: `ping` as the protocol says, any
    /// other with "method not found" (the checker offers no capabilities).
    /// Never waits: a server that floods requests and stops reading its
    /// stdin gets no more answers once its pipe is full (they are
    /// dropped), instead of holding the check's deadlines.
    fn reply(&mut self, id: Value, method: &str) {
        let reply = if method == "ping" {
            json!({"jsonrpc": "2.0", "id": id, "result": {}})
        } else {
            json!({"jsonrpc": "2.0", "id": id,
                   "error": {"code": -32601, "message": "not supported by mcp-conformance"}})
        };
        // Dropped when there is no room: see above.
        self.try_send(&reply);
    }

    /// The verdict of `stdout.purity` on everything read so far (the whole
    /// stream once stdout has closed).
    pub fn purity(&self) -> Purity {
        match &*self.purity.lock().unwrap_or_else(|e| e.into_inner()) {
            PurityState::Reading(stream) => stream.snapshot(),
            PurityState::Done(purity) => purity.clone(),
        }
    }

    /// Live processes this instance started, the server included: those
    /// carrying its marker (wherever they went), and those that dropped it
    /// (an `exec` with an empty environment) but are in the server's group,
    /// under the server, or re-parented to this process (the subreaper).
    pub fn marked(&mut self) -> Vec<observer::Marked> {
        let mut found = observer::marked(&self.marker);
        self.seen
            .extend(found.iter().map(|m| m.pid).filter(|pid| *pid != self.pid));
        for (pid, stat) in self.unmarked_strays() {
            if found.iter().any(|m| m.pid == pid) {
                continue;
            }
            self.unmarked.insert((pid, stat.start_ticks));
            found.push(observer::Marked {
                pid,
                name: process_name(pid),
                pgid: Some(stat.pgid),
            });
        }
        found.sort_by_key(|m| m.pid);
        found
    }

    /// Whether `pid` was found without the marker.
    pub fn is_unmarked(&self, pid: u32) -> bool {
        self.unmarked.iter().any(|(p, _)| *p == pid)
    }

    /// Live processes of this instance that need no marker to be found: the
    /// members of the server's group; the processes re-parented to this one
    /// that started after the server and are its (see
    /// [`all_orphans_are_servers`]); and everything under either, or under
    /// the server. One scan of `/proc`.
    fn unmarked_strays(&self) -> Vec<(u32, table::Stat)> {
        let me = std::process::id();
        let Some(mine) = table::stat(me) else {
            return Vec::new();
        };
        // The keeper is this process's child, in a session of its own; it
        // is nobody's orphan.
        let keeper = crate::keeper::pid();
        let all_orphans = ALL_ORPHANS_ARE_SERVERS.load(Ordering::SeqCst);
        // The other servers running at the same time (`--jobs`): they are
        // this process's children too, and so may be their orphans.
        let others: Vec<(u32, String)> = lock(&LIVE)
            .iter()
            .filter(|(key, _)| **key != self.live_key)
            .map(|(_, live)| (live.exit.pid(), live.marker.clone()))
            .collect();
        let another_servers = |pid: u32, stat: &table::Stat| {
            others.iter().any(|(leader, marker)| {
                pid == *leader || stat.pgid == *leader || marker::carries(pid, marker)
            })
        };
        let table: Vec<(u32, table::Stat)> = table::snapshot()
            .into_iter()
            .filter(|(_, stat)| stat.is_alive())
            .collect();
        let ours = |pid: u32, stat: &table::Stat| {
            if pid == self.pid {
                return true;
            }
            if stat.pgid == self.pgid {
                return true;
            }
            let orphan = stat.ppid == me
                && Some(pid) != keeper
                && stat.pgid != mine.pgid
                && stat.start_ticks >= self.start_ticks
                && !another_servers(pid, stat);
            orphan
                && (all_orphans
                    || stat.sid != mine.sid
                    || self.unmarked.contains(&(pid, stat.start_ticks)))
        };
        let mut found: BTreeSet<u32> = table
            .iter()
            .filter(|(pid, stat)| ours(*pid, stat))
            .map(|(pid, _)| *pid)
            .collect();
        // Everything under what was found is the server's too.
        loop {
            let before = found.len();
            for (pid, stat) in &table {
                if found.contains(&(stat.ppid)) && stat.start_ticks >= self.start_ticks {
                    found.insert(*pid);
                }
            }
            if found.len() == before {
                break;
            }
        }
        found.remove(&self.pid);
        table
            .into_iter()
            .filter(|(pid, _)| found.contains(pid))
            .collect()
    }

    /// Waits up to `within` until no process carries the marker; returns
    /// what is left. Polls the process table: there is no event to wait on
    /// for a process that is not our child.
    pub async fn settle(&mut self, within: Duration) -> Vec<observer::Marked> {
        let deadline = Instant::now() + within;
        loop {
            let left = self.marked();
            if left.is_empty() || Instant::now() >= deadline {
                return left;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits up to `within` for the server's stdout to reach EOF, so every
    /// message it wrote has been read.
    pub async fn stdout_closed(&mut self, within: Duration) {
        let _ = tokio::time::timeout(within, self.stdout_done.wait_for(|done| *done)).await;
    }

    pub fn stdout(&self) -> StdoutLog {
        self.stdout
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn stderr(&self) -> StderrLog {
        self.stderr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Kills everything this instance started, reaps it, and waits (bounded)
    /// for the output readers to see EOF so the logs are complete.
    pub async fn finish(&mut self) {
        self.cleanup();
        for done in [&mut self.stdout_done, &mut self.stderr_done] {
            let _ = tokio::time::timeout(Duration::from_millis(500), done.wait_for(|d| *d)).await;
        }
    }

    /// SIGKILL to the group, wait for the reaper, then kill and reap by
    /// marker whatever left the group. Blocking; idempotent.
    fn cleanup(&mut self) {
        if self.cleaned {
            return;
        }
        self.cleaned = true;
        {
            let mut slot = lock(&self.stdin);
            slot.closed = true;
            slot.stdin = None;
        }
        self.exit.signal_all(Signal::SIGKILL);
        self.exit.wait_blocking(CLEANUP_BOUND);
        self.marked();
        observer::kill_and_reap(&self.marker, &self.seen, CLEANUP_BOUND);
        self.kill_unmarked(CLEANUP_BOUND);
        // The group's zombies that became ours; the leader stays for `release`.
        mcp_stdio_process::marker::reap_group_zombies(self.pgid, self.pid);
        lock(&LIVE).remove(&self.live_key);
        // The keeper must not signal the group once its id may be reused.
        crate::keeper::done(self.pgid);
        // Only now, with the group empty, may the leader's pid (and so the
        // group id) be freed: no signal above could reach a recycled id.
        self.exit.release();
    }

    /// Kills what dropped the marker (see [`Instance::marked`]) until none
    /// is left or `within` passes (killing one re-parents its children to
    /// this process, to be found by the next scan), then reaps what became
    /// this process's zombie.
    fn kill_unmarked(&mut self, within: Duration) {
        let deadline = Instant::now() + within;
        let mut killed = BTreeSet::new();
        loop {
            let left = self.unmarked_strays();
            if left.is_empty() || Instant::now() > deadline {
                break;
            }
            for (pid, stat) in left {
                self.unmarked.insert((pid, stat.start_ticks));
                let _ = mcp_stdio_process::signal::signal_pid(pid, Signal::SIGKILL);
                killed.insert(pid);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        observer::reap(killed.into_iter(), deadline);
    }
}

/// The kernel's name of `pid` (15 bytes at most), or `?` if it is gone.
fn process_name(pid: u32) -> String {
    table::name(pid).unwrap_or_else(|| "?".into())
}

impl Drop for Instance {
    fn drop(&mut self) {
        // Also on a panic or an early return: nothing the check started may outlive it.
        self.cleanup();
    }
}

/// The result of an answer, or the error it carries.
fn answer_result(message: &Value) -> Result<Value, RequestError> {
    if let Some(error) = message.get("error") {
        return Err(RequestError::ErrorAnswer {
            code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
            message: error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            data: error.get("data").cloned(),
        });
    }
    Ok(message.get("result").cloned().unwrap_or(Value::Null))
}

/// Reads stdout to EOF: counts it, judges its purity line by line, and
/// hands each line to the inbox. Nothing is kept beyond the line being read.
async fn read_stdout(
    mut pipe: ChildStdout,
    log: Arc<Mutex<StdoutLog>>,
    purity: Arc<Mutex<PurityState>>,
    inbox: Arc<Inbox>,
    done: watch::Sender<bool>,
    mut closing: watch::Receiver<bool>,
) {
    let deliver = |line: &[u8], overlong: bool| {
        // A line too long to keep whole cannot be parsed as a message.
        if !overlong {
            inbox.deliver(line);
        }
    };
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = tokio::select! {
            read = pipe.read(&mut buf) => match read {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            },
            Ok(_) = closing.wait_for(|c| *c) => break,
        };
        {
            let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
            if log.first_byte.is_none() {
                log.first_byte = Some(Instant::now());
            }
            log.total += n as u64;
        }
        if let PurityState::Reading(stream) = &mut *purity.lock().unwrap_or_else(|e| e.into_inner())
        {
            stream.feed(&buf[..n], deliver);
        }
        // A server that writes without pause would keep this task busy
        // for good on the single-threaded runtime: let the timers and the
        // checks run between chunks.
        tokio::task::yield_now().await;
    }
    {
        let mut state = purity.lock().unwrap_or_else(|e| e.into_inner());
        if let PurityState::Reading(stream) = &mut *state {
            let stream = std::mem::take(stream);
            *state = PurityState::Done(stream.finish(deliver));
        }
    }
    // Closed before `done` says so: a host-death run relies on it.
    drop(pipe);
    let _ = done.send(true);
}

async fn read_stderr(
    mut pipe: ChildStderr,
    log: Arc<Mutex<StderrLog>>,
    done: watch::Sender<bool>,
    mut closing: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = tokio::select! {
            read = pipe.read(&mut buf) => match read {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            },
            Ok(_) = closing.wait_for(|c| *c) => break,
        };
        let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
        log.bytes += n as u64;
        log.lines += buf[..n].iter().filter(|b| **b == b'\n').count() as u64;
        log.tail.extend_from_slice(&buf[..n]);
        if log.tail.len() > STDERR_KEPT {
            let cut = log.tail.len() - STDERR_KEPT;
            log.tail.drain(..cut);
        }
    }
    drop(pipe);
    let _ = done.send(true);
}
