//! The client's side of the stdio transport, over the child's pipes.
//!
//! rmcp's own async read/write transport drops unparsable lines silently (at
//! `debug`), so the framing is ours: a reader task guards stdout (non-JSON and
//! oversized lines are skipped, warned about and counted) and a writer task
//! owns stdin, so closing stdin is a decision of the client's close sequence,
//! not of rmcp's teardown, and works even when the child stopped reading.
//!
//! What waits to be written to stdin is bounded. rmcp answers every request
//! the server sends (a `ping`, say) through [`ChildTransport::send`], and runs
//! each send as a task of its own, so neither a bounded channel nor a send
//! that waits would stop it: the backlog would only move into rmcp's tasks.
//! Instead the bytes of every message queued and not yet written are counted,
//! and a reply to the server that would take the backlog over
//! [`MAX_STDIN_BACKLOG`] is dropped, counted, and reported. A server that
//! floods requests and never reads its stdin therefore costs a bounded amount
//! of memory, and reading its stdout never stops, so the answers to the
//! client's own requests still arrive. The client's own requests and
//! notifications are never dropped: each is one the caller asked for, and a
//! request the server never reads fails by its TIMEOUT.

use std::{
    collections::VecDeque,
    io,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
};

use rmcp::{
    RoleClient,
    model::{ClientJsonRpcMessage, JsonRpcMessage, ServerJsonRpcMessage},
    transport::Transport,
};
use tokio::{
    io::{AsyncWriteExt, BufReader},
    process::{ChildStderr, ChildStdin, ChildStdout},
    sync::{mpsc, watch},
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

/// The counters the transport, the writer task and [`Pipes`] share.
#[derive(Default)]
struct StdinCounters {
    /// Messages ever accepted into the queue.
    queued: AtomicU64,
    /// Bytes accepted and not yet written.
    backlog_bytes: AtomicU64,
    replies_dropped: AtomicU64,
}

/// What rmcp talks to.
pub(crate) struct ChildTransport {
    incoming: mpsc::Receiver<ServerJsonRpcMessage>,
    /// Serialized messages, newline included. Unbounded as a channel: what
    /// may enter it is bounded by [`ChildTransport::send`].
    outgoing: mpsc::UnboundedSender<Vec<u8>>,
    counters: Arc<StdinCounters>,
    events: Arc<EventLog>,
}

impl Transport<RoleClient> for ChildTransport {
    type Error = io::Error;

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        std::future::ready(self.enqueue(item))
    }

    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        self.incoming.recv().await
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.incoming.close();
        Ok(())
    }
}

impl ChildTransport {
    /// Queues `item` for the writer, or drops it when it is a reply to the
    /// server and the backlog is full. Decided here, synchronously: rmcp
    /// spawns the future `send` returns, so waiting in it would bound nothing.
    fn enqueue(&self, item: ClientJsonRpcMessage) -> io::Result<()> {
        let reply = matches!(item, JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_));
        let mut bytes = serde_json::to_vec(&item).map_err(io::Error::other)?;
        bytes.push(b'\n');
        let len = bytes.len() as u64;
        let counters = &self.counters;
        // rmcp's service loop is the only sender, so nothing can slip in
        // between this check and the increment; the writer only decreases it.
        let backlog = counters.backlog_bytes.load(Ordering::SeqCst);
        if reply && backlog > 0 && backlog + len > MAX_STDIN_BACKLOG {
            let dropped = counters.replies_dropped.fetch_add(1, Ordering::SeqCst) + 1;
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
        counters.backlog_bytes.fetch_add(len, Ordering::SeqCst);
        counters.queued.fetch_add(1, Ordering::SeqCst);
        self.outgoing.send(bytes).map_err(|_| {
            counters.backlog_bytes.fetch_sub(len, Ordering::SeqCst);
            counters.queued.fetch_sub(1, Ordering::SeqCst);
            io::Error::new(io::ErrorKind::BrokenPipe, "the server's stdin is closed")
        })
    }
}

/// Control over the running pipe tasks.
pub(crate) struct Pipes {
    close_stdin: watch::Sender<bool>,
    stdout_done: watch::Receiver<bool>,
    counters: Arc<StdinCounters>,
    written: watch::Receiver<u64>,
    pub stdout_skipped: Arc<AtomicU64>,
    pub stderr: Arc<StderrTail>,
}

impl Pipes {
    /// Closes the child's stdin (EOF), even if a write to it is blocked.
    pub fn close_stdin(&self) {
        self.close_stdin.send_replace(true);
    }

    /// Waits up to `within` until every message queued so far has been
    /// written to the child's stdin.
    pub async fn wait_flushed(&self, within: std::time::Duration) {
        let queued = self.counters.queued.load(Ordering::SeqCst);
        let mut written = self.written.clone();
        let _ = tokio::time::timeout(within, written.wait_for(|n| *n >= queued)).await;
    }

    /// What waits to be written to the child's stdin, and how many replies
    /// were dropped because too much did.
    pub fn stdin_backlog(&self) -> StdinBacklog {
        let queued = self.counters.queued.load(Ordering::SeqCst);
        StdinBacklog {
            messages: queued.saturating_sub(*self.written.borrow()),
            bytes: self.counters.backlog_bytes.load(Ordering::SeqCst),
            replies_dropped: self.counters.replies_dropped.load(Ordering::SeqCst),
        }
    }

    /// Waits up to `within` for the stdout reader to reach EOF and handle
    /// every line before it (so counts of skipped lines are final).
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

/// Starts the stdout reader, the stdin writer and the stderr drain.
pub(crate) fn start(
    server: &str,
    stdin: ChildStdin,
    stdout: ChildStdout,
    stderr: ChildStderr,
    events: Arc<EventLog>,
) -> (ChildTransport, Pipes) {
    let (in_tx, in_rx) = mpsc::channel(64);
    let (out_tx, out_rx) = mpsc::unbounded_channel();
    let (close_tx, close_rx) = watch::channel(false);
    let (stdout_done_tx, stdout_done_rx) = watch::channel(false);
    let (written_tx, written_rx) = watch::channel(0u64);
    let counters = Arc::new(StdinCounters::default());
    let skipped = Arc::new(AtomicU64::new(0));
    let skipped_for_reader = skipped.clone();
    let tail = Arc::new(StderrTail::default());
    let reader_events = events.clone();
    tokio::spawn(async move {
        read_stdout(stdout, in_tx, reader_events, skipped_for_reader).await;
        stdout_done_tx.send_replace(true);
    });
    tokio::spawn(write_stdin(
        stdin,
        out_rx,
        close_rx,
        written_tx,
        counters.clone(),
    ));
    tokio::spawn(drain_stderr(server.to_owned(), stderr, tail.clone()));
    (
        ChildTransport {
            incoming: in_rx,
            outgoing: out_tx,
            counters: counters.clone(),
            events,
        },
        Pipes {
            close_stdin: close_tx,
            stdout_done: stdout_done_rx,
            counters,
            written: written_rx,
            stdout_skipped: skipped,
            stderr: tail,
        },
    )
}

async fn read_stdout(
    stdout: ChildStdout,
    tx: mpsc::Sender<ServerJsonRpcMessage>,
    events: Arc<EventLog>,
    skipped: Arc<AtomicU64>,
) {
    let mut lines = BoundedLines::new(BufReader::new(stdout), MAX_STDOUT_LINE);
    let skip = |reason: SkipReason, bytes: &[u8]| {
        let count = skipped.fetch_add(1, Ordering::Relaxed) + 1;
        events.emit(EventKind::StdoutLineSkipped {
            reason,
            count,
            prefix: prefix(bytes, SKIPPED_PREFIX_CHARS),
        });
    };
    // A read error on a pipe means the same as EOF here: no more messages.
    while let Ok(Some(line)) = lines.next_line().await {
        let bytes = match &line {
            Line::Complete(bytes) => bytes.as_slice(),
            Line::Oversized { prefix, .. } => {
                skip(SkipReason::Oversized, prefix);
                continue;
            }
        };
        let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        if bytes.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<ServerJsonRpcMessage>(bytes) {
            Ok(message) => {
                if tx.send(message).await.is_err() {
                    // rmcp has stopped; keep draining so the child never
                    // blocks on a full stdout pipe.
                    continue;
                }
            }
            Err(_) if serde_json::from_slice::<serde_json::Value>(bytes).is_ok() => {
                skip(SkipReason::NotJsonRpc, bytes)
            }
            Err(_) => skip(SkipReason::NotJson, bytes),
        }
    }
}

/// How long close lets messages that were already queued reach a child that
/// is still reading, before stdin is closed regardless.
const FLUSH_ON_CLOSE: std::time::Duration = std::time::Duration::from_millis(100);

async fn write_stdin(
    mut stdin: ChildStdin,
    mut rx: mpsc::UnboundedReceiver<Vec<u8>>,
    mut close: watch::Receiver<bool>,
    written: watch::Sender<u64>,
    counters: Arc<StdinCounters>,
) {
    let done = |message: &[u8]| {
        counters
            .backlog_bytes
            .fetch_sub(message.len() as u64, Ordering::SeqCst);
        written.send_modify(|n| *n += 1);
    };
    // Until close: write each message as it comes. Close may interrupt a
    // write that is blocked on a child that stopped reading.
    loop {
        let message = tokio::select! {
            biased;
            _ = close.wait_for(|close| *close) => break,
            message = rx.recv() => match message {
                Some(message) => message,
                None => return,
            },
        };
        let outcome = tokio::select! {
            biased;
            _ = close.wait_for(|close| *close) => return,
            outcome = write_line(&mut stdin, &message) => outcome,
        };
        if outcome.is_err() {
            // The child closed its stdin or died; the reaper reports why.
            return;
        }
        done(&message);
    }
    // Close was asked for: what rmcp had already queued (the `initialized`
    // notification of a client closed right after connect, say) still goes
    // out, briefly, so the child sees every message before EOF.
    let _ = tokio::time::timeout(FLUSH_ON_CLOSE, async {
        while let Ok(message) = rx.try_recv() {
            if write_line(&mut stdin, &message).await.is_err() {
                return;
            }
            done(&message);
        }
    })
    .await;
    // Dropping `stdin` closes the pipe: the child sees EOF.
}

async fn write_line(stdin: &mut ChildStdin, line: &[u8]) -> io::Result<()> {
    stdin.write_all(line).await?;
    stdin.flush().await
}

async fn drain_stderr(server: String, stderr: ChildStderr, tail: Arc<StderrTail>) {
    let mut lines = BoundedLines::new(BufReader::new(stderr), MAX_STDERR_LINE);
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
