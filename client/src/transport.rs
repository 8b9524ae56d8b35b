//! The client's side of the stdio transport, over the child's pipes.
//!
//! rmcp's own async read/write transport drops unparsable lines silently (at
//! `debug`), so the framing is ours, and it runs inside rmcp's own calls, with
//! no task or channel between rmcp and the pipes: [`ChildTransport::receive`]
//! reads and frames stdout itself and guards it (non-JSON and oversized lines
//! are skipped, warned about and counted), and [`ChildTransport::send`] writes
//! the message to stdin at once with a non-blocking write. Each message thus
//! crosses no hand-off between tasks (one each way before), which is most of
//! what a sequential call costs beyond rmcp's own work (docs/benchmarks.md).
//! Once rmcp lets go of the transport (its service ended, or a start-up that
//! failed), a drain task reads stdout on to EOF with the same guard, so the
//! child never blocks on a full stdout pipe and the skipped-line count is
//! final by close.
//!
//! Stdin stays the client's: closing it is a decision of the client's close
//! sequence ([`Pipes::close_stdin`]), not of rmcp's teardown, and works even
//! when the child stopped reading. What a write could not take at once (a
//! full pipe, a partial write) waits in a backlog that a writer task, started
//! only then, writes when the pipe has room; the next messages queue behind
//! it, so the order on the pipe is the order of the sends.
//!
//! That backlog is bounded. rmcp answers every request the server sends (a
//! `ping`, say) through [`ChildTransport::send`], and runs each send as a task
//! of its own, so neither a bounded channel nor a send that waits would stop
//! it: the backlog would only move into rmcp's tasks. Instead the bytes of
//! every message accepted and not yet written are counted, and a reply to the
//! server that would take the backlog over [`MAX_STDIN_BACKLOG`] is dropped,
//! counted, and reported. A server that floods requests and never reads its
//! stdin therefore costs a bounded amount of memory, and reading its stdout
//! never stops, so the answers to the client's own requests still arrive. The
//! client's own requests and notifications are never dropped: each is one the
//! caller asked for, and a request the server never reads fails by its
//! TIMEOUT.

use std::{
    collections::VecDeque,
    io,
    pin::Pin,
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicU64, Ordering},
    },
    task::{Context, Poll, Waker},
};

use rmcp::{
    RoleClient,
    model::{ClientJsonRpcMessage, JsonRpcMessage, ServerJsonRpcMessage},
    transport::Transport,
};
use tokio::{
    io::{AsyncWrite, BufReader},
    process::{ChildStderr, ChildStdin, ChildStdout},
    sync::{Notify, watch},
};

use crate::{
    events::{EventKind, EventLog, SkipReason},
    lines::{BoundedLines, Line, prefix},
};

/// Longest stdout line accepted as a message (rmcp's own default).
pub(crate) const MAX_STDOUT_LINE: usize = 16 * 1024 * 1024;
/// Longest stderr line logged whole; longer ones are logged truncated.
pub(crate) const MAX_STDERR_LINE: usize = 8 * 1024;
/// How many stderr lines are kept for a child-exited error.
pub(crate) const STDERR_TAIL_LINES: usize = 20;
/// How many characters of a skipped stdout line a warning shows.
const SKIPPED_PREFIX_CHARS: usize = 80;
/// The stderr read buffer. Stderr is the server's log, read line by line
/// and never on a latency path: a small buffer costs a few more reads of a
/// chatty server and saves 7 KiB per connected server against the default.
const STDERR_BUFFER: usize = 1024;
/// Most bytes that may wait to be written to the server's stdin before
/// replies to the server's own requests are dropped (a single message is
/// always accepted into an empty backlog, whatever its size).
pub const MAX_STDIN_BACKLOG: u64 = 1024 * 1024;

/// What waits to be written to the server's stdin, and what was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StdinBacklog {
    /// Messages queued and not yet written.
    pub messages: u64,
    /// Their bytes, newlines included.
    pub bytes: u64,
    /// Replies to the server's requests dropped so far because the backlog
    /// was full.
    pub replies_dropped: u64,
}

/// The server's stdin, shared by the transport (which writes at once when
/// nothing waits), the backlog writer task and [`Pipes`] (which closes it).
struct Stdin {
    state: Mutex<StdinState>,
    /// Messages ever accepted (written at once or queued).
    queued: AtomicU64,
    /// Messages wholly written.
    written: AtomicU64,
    /// Bytes accepted and not yet wholly written.
    backlog_bytes: AtomicU64,
    replies_dropped: AtomicU64,
    /// Wakes [`Pipes::wait_flushed`]: a queued message was written, or the
    /// pipe is gone.
    progress: Notify,
    /// Wakes the writer task when close took the pipe away under it.
    closed: Notify,
}

struct StdinState {
    /// `None` once close closed stdin or a write failed (the child closed
    /// its end, or died): later sends fail.
    pipe: Option<ChildStdin>,
    /// Messages not yet wholly written, oldest first. Empty in the common
    /// case: a send writes its message at once when nothing waits.
    backlog: VecDeque<Vec<u8>>,
    /// Bytes of the front message already written.
    offset: usize,
}

impl Stdin {
    fn state(&self) -> MutexGuard<'_, StdinState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One message wholly written.
    fn wrote(&self, len: usize) {
        self.backlog_bytes.fetch_sub(len as u64, Ordering::SeqCst);
        self.written.fetch_add(1, Ordering::SeqCst);
    }

    /// The pipe is gone (closed, or a write failed): dropping it closes the
    /// child's stdin, and what waited will never be written.
    fn gone(&self, state: &mut StdinState) {
        state.pipe = None;
        state.backlog = VecDeque::new();
        state.offset = 0;
        self.closed.notify_one();
        self.progress.notify_waiters();
    }

    /// Writes what the pipe takes now from the backlog, front first: ready
    /// once the backlog is empty or the pipe gone (an error when a write
    /// failed, which makes it gone); pending while the pipe is full, with
    /// `cx`'s waker registered for room.
    fn write_backlog(&self, state: &mut StdinState, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            let Some(pipe) = state.pipe.as_mut() else {
                return Poll::Ready(Ok(()));
            };
            let Some(front) = state.backlog.front() else {
                return Poll::Ready(Ok(()));
            };
            match Pin::new(pipe).poll_write(cx, &front[state.offset..]) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => {
                    self.gone(state);
                    return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
                }
                Poll::Ready(Ok(n)) => {
                    state.offset += n;
                    if state.offset == front.len() {
                        let len = front.len();
                        state.backlog.pop_front();
                        state.offset = 0;
                        self.wrote(len);
                        self.progress.notify_waiters();
                    }
                }
            }
        }
    }
}

/// Writes as much of `bytes` as the pipe takes now, without waiting: how many
/// bytes were written, which is fewer than `bytes.len()` when the pipe is full.
fn try_write(pipe: &mut ChildStdin, bytes: &[u8]) -> io::Result<usize> {
    // A waker that does nothing: this only asks whether the pipe takes the
    // bytes now (pending means full, or this task's tokio budget spent);
    // waiting for room is the writer task's, with its own waker. No writer
    // task waits while this runs: it is called only with an empty backlog.
    let mut cx = Context::from_waker(Waker::noop());
    let mut written = 0;
    while written < bytes.len() {
        match Pin::new(&mut *pipe).poll_write(&mut cx, &bytes[written..]) {
            Poll::Pending => break,
            Poll::Ready(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
            Poll::Ready(Ok(n)) => written += n,
            Poll::Ready(Err(error)) => return Err(error),
        }
    }
    Ok(written)
}

/// Writes the backlog as the pipe makes room, until it is empty or the pipe
/// is gone. Started by a send that left a backlog; at most one runs at a time
/// (the backlog is non-empty exactly while one does).
async fn write_backlog(stdin: Arc<Stdin>) {
    let written = std::future::poll_fn(|cx| {
        let mut state = stdin.state();
        stdin.write_backlog(&mut state, cx)
    });
    tokio::select! {
        // Close takes the pipe away; nothing is left to write.
        _ = stdin.closed.notified() => {}
        _ = written => {}
    }
}

/// The stdout reader and its guard.
struct StdoutReader {
    lines: BoundedLines<BufReader<ChildStdout>>,
    events: Arc<EventLog>,
    skipped: Arc<AtomicU64>,
    done: watch::Sender<bool>,
}

impl StdoutReader {
    /// The next JSON-RPC message on stdout, skipping (and reporting) the lines
    /// that are not one; `None` at EOF. Cancel-safe: a partly read line is
    /// kept in `lines`, and nothing after the read awaits.
    async fn next_message(&mut self) -> Option<ServerJsonRpcMessage> {
        loop {
            // A read error on a pipe means the same as EOF here: no more messages.
            let Ok(Some(line)) = self.lines.next_line().await else {
                self.done.send_replace(true);
                return None;
            };
            let bytes = match &line {
                Line::Complete(bytes) => bytes.as_slice(),
                Line::Oversized { prefix, .. } => {
                    self.skip(SkipReason::Oversized, prefix);
                    continue;
                }
            };
            let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
            if bytes.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<ServerJsonRpcMessage>(bytes) {
                Ok(message) => return Some(message),
                Err(_) if serde_json::from_slice::<serde_json::Value>(bytes).is_ok() => {
                    self.skip(SkipReason::NotJsonRpc, bytes)
                }
                Err(_) => self.skip(SkipReason::NotJson, bytes),
            }
        }
    }

    fn skip(&self, reason: SkipReason, bytes: &[u8]) {
        let count = self.skipped.fetch_add(1, Ordering::Relaxed) + 1;
        self.events.emit(EventKind::StdoutLineSkipped {
            reason,
            count,
            prefix: prefix(bytes, SKIPPED_PREFIX_CHARS),
        });
    }
}

/// What rmcp talks to.
pub(crate) struct ChildTransport {
    /// Taken by `Drop`, which hands it to the drain task.
    stdout: Option<StdoutReader>,
    stdin: Arc<Stdin>,
    events: Arc<EventLog>,
}

impl Transport<RoleClient> for ChildTransport {
    type Error = io::Error;

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        std::future::ready(self.write(item))
    }

    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        self.stdout.as_mut()?.next_message().await
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // Stdout is read on to EOF by the drain task once rmcp drops the
        // transport; stdin is closed by the client's close sequence.
        Ok(())
    }
}

impl Drop for ChildTransport {
    fn drop(&mut self) {
        let Some(mut reader) = self.stdout.take() else {
            return;
        };
        if *reader.done.borrow() {
            return;
        }
        // Keep reading, so the child never blocks on a full stdout pipe and
        // its last lines are still guarded and counted. Without a runtime
        // (one being shut down) the pipe is simply closed.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { while reader.next_message().await.is_some() {} });
        }
    }
}

impl ChildTransport {
    /// Writes `item` to stdin, or queues what the pipe did not take, or drops
    /// it when it is a reply to the server and the backlog is full. Decided
    /// here, synchronously: rmcp spawns the future `send` returns, so waiting
    /// in it would bound nothing.
    fn write(&self, item: ClientJsonRpcMessage) -> io::Result<()> {
        let reply = matches!(item, JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_));
        let mut bytes = serde_json::to_vec(&item).map_err(io::Error::other)?;
        bytes.push(b'\n');
        let len = bytes.len() as u64;
        let stdin = &*self.stdin;
        // The lock orders the sends on the pipe and makes the check and the
        // increment of the backlog one step.
        let mut state = stdin.state();
        if state.pipe.is_none() {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the server's stdin is closed",
            ));
        }
        let backlog = stdin.backlog_bytes.load(Ordering::SeqCst);
        if reply && backlog > 0 && backlog + len > MAX_STDIN_BACKLOG {
            let dropped = stdin.replies_dropped.fetch_add(1, Ordering::SeqCst) + 1;
            drop(state);
            // Reported at 1, 2, 4, 8...: a flood must not flood the log too.
            if dropped.is_power_of_two() {
                self.events.emit(EventKind::StdinRepliesDropped {
                    count: dropped,
                    backlog_bytes: backlog,
                });
            }
            // Ok, not an error: rmcp would log every failed reply at ERROR.
            return Ok(());
        }
        stdin.backlog_bytes.fetch_add(len, Ordering::SeqCst);
        stdin.queued.fetch_add(1, Ordering::SeqCst);
        if !state.backlog.is_empty() {
            // Behind what waits: the writer task is running and takes it.
            state.backlog.push_back(bytes);
            return Ok(());
        }
        let written = match state.pipe.as_mut().map(|pipe| try_write(pipe, &bytes)) {
            Some(Ok(written)) => written,
            // The child closed its stdin or died; the reaper reports why.
            // Accepted and lost, as a message queued before the failure;
            // the sends after this one fail.
            _ => {
                stdin.gone(&mut state);
                return Ok(());
            }
        };
        if written == bytes.len() {
            stdin.wrote(bytes.len());
            return Ok(());
        }
        state.backlog.push_back(bytes);
        state.offset = written;
        drop(state);
        tokio::spawn(write_backlog(self.stdin.clone()));
        Ok(())
    }
}

/// Control over the child's pipes.
pub(crate) struct Pipes {
    stdin: Arc<Stdin>,
    stdout_done: watch::Receiver<bool>,
    pub stdout_skipped: Arc<AtomicU64>,
    pub stderr: Arc<StderrTail>,
}

impl Pipes {
    /// Closes the child's stdin (EOF), even if a write to it is blocked: what
    /// still waits in the backlog is abandoned, as the server stopped reading.
    pub fn close_stdin(&self) {
        let mut state = self.stdin.state();
        if state.pipe.is_some() {
            self.stdin.gone(&mut state);
        }
    }

    /// Waits up to `within` until every message queued so far has been
    /// written to the child's stdin (or the pipe is gone).
    pub async fn wait_flushed(&self, within: std::time::Duration) {
        let stdin = &*self.stdin;
        let queued = stdin.queued.load(Ordering::SeqCst);
        let flushed = async {
            loop {
                let progress = stdin.progress.notified();
                tokio::pin!(progress);
                // Registered before the check, so no wake-up falls between.
                progress.as_mut().enable();
                if stdin.written.load(Ordering::SeqCst) >= queued || stdin.state().pipe.is_none() {
                    return;
                }
                progress.await;
            }
        };
        let _ = tokio::time::timeout(within, flushed).await;
    }

    /// What waits to be written to the child's stdin, and how many replies
    /// were dropped because too much did.
    pub fn stdin_backlog(&self) -> StdinBacklog {
        let stdin = &*self.stdin;
        let queued = stdin.queued.load(Ordering::SeqCst);
        StdinBacklog {
            messages: queued.saturating_sub(stdin.written.load(Ordering::SeqCst)),
            bytes: stdin.backlog_bytes.load(Ordering::SeqCst),
            replies_dropped: stdin.replies_dropped.load(Ordering::SeqCst),
        }
    }

    /// Waits up to `within` for stdout to reach EOF with every line before it
    /// handled (so counts of skipped lines are final): read by rmcp's calls
    /// while its service runs, by the drain task after.
    pub async fn wait_stdout_done(&self, within: std::time::Duration) {
        let mut done = self.stdout_done.clone();
        let _ = tokio::time::timeout(within, done.wait_for(|done| *done)).await;
    }
}

/// The last lines the child wrote to stderr.
pub(crate) struct StderrTail {
    lines: Mutex<VecDeque<String>>,
    count: AtomicU64,
    done: watch::Sender<bool>,
}

impl Default for StderrTail {
    fn default() -> Self {
        Self {
            lines: Mutex::default(),
            count: AtomicU64::new(0),
            done: watch::channel(false).0,
        }
    }
}

impl StderrTail {
    fn push(&self, line: String) {
        let mut lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        if lines.len() == STDERR_TAIL_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    pub fn lines(&self) -> Vec<String> {
        self.lines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect()
    }

    /// Lines read so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Waits up to `within` for stderr to reach EOF, so the tail attached to
    /// an exit error holds the child's last words.
    pub async fn wait_done(&self, within: std::time::Duration) {
        let mut done = self.done.subscribe();
        let _ = tokio::time::timeout(within, done.wait_for(|done| *done)).await;
    }
}

/// Wraps the child's pipes: the transport for rmcp, and the stderr drain.
pub(crate) fn start(
    server: &str,
    stdin: ChildStdin,
    stdout: ChildStdout,
    stderr: ChildStderr,
    events: Arc<EventLog>,
) -> (ChildTransport, Pipes) {
    let (stdout_done, stdout_done_rx) = watch::channel(false);
    let skipped = Arc::new(AtomicU64::new(0));
    let tail = Arc::new(StderrTail::default());
    let stdin = Arc::new(Stdin {
        state: Mutex::new(StdinState {
            pipe: Some(stdin),
            backlog: VecDeque::new(),
            offset: 0,
        }),
        queued: AtomicU64::new(0),
        written: AtomicU64::new(0),
        backlog_bytes: AtomicU64::new(0),
        replies_dropped: AtomicU64::new(0),
        progress: Notify::new(),
        closed: Notify::new(),
    });
    tokio::spawn(drain_stderr(server.to_owned(), stderr, tail.clone()));
    (
        ChildTransport {
            stdout: Some(StdoutReader {
                lines: BoundedLines::new(BufReader::new(stdout), MAX_STDOUT_LINE),
                events: events.clone(),
                skipped: skipped.clone(),
                done: stdout_done,
            }),
            stdin: stdin.clone(),
            events,
        },
        Pipes {
            stdin,
            stdout_done: stdout_done_rx,
            stdout_skipped: skipped,
            stderr: tail,
        },
    )
}

async fn drain_stderr(server: String, stderr: ChildStderr, tail: Arc<StderrTail>) {
    let reader = BufReader::with_capacity(STDERR_BUFFER, stderr);
    let mut lines = BoundedLines::new(reader, MAX_STDERR_LINE);
    while let Ok(Some(line)) = lines.next_line().await {
        let text = match line {
            Line::Complete(bytes) => {
                let bytes = bytes.strip_suffix(b"\r").unwrap_or(&bytes);
                String::from_utf8_lossy(bytes).into_owned()
            }
            Line::Oversized { len, prefix } => format!(
                "{}… [line truncated: {len} bytes]",
                String::from_utf8_lossy(&prefix)
            ),
        };
        // The server's own words, logged as they are (docs/client.md).
        tracing::info!(server = %server, line = %text, "stderr");
        tail.push(text);
    }
    tail.done.send_replace(true);
}
