//! Property tests (proptest) of the two parsers that read what others wrote: the stdout line
//! framer (`lines::BoundedLines`) over arbitrary byte streams cut into arbitrary chunks, and
//! the config loader over arbitrary YAML and JSON documents.
//!
//! The framer's memory is measured by a counting allocator that counts only on the thread and
//! only while a test asks it to, so the other tests of this binary are not affected.

use std::{
    alloc::{GlobalAlloc, Layout, System},
    cell::Cell,
    collections::VecDeque,
    pin::Pin,
    sync::mpsc,
    task::{Context, Poll},
    time::Duration,
};

use mcp_stdio_client::{
    config::Config,
    lines::{BoundedLines, Line},
};
use proptest::prelude::*;
use serde_json::Value;
use tokio::io::{AsyncRead, BufReader, ReadBuf};

// ---------------------------------------------------------------------------------------------
// A per-thread allocation counter

struct Counting;

thread_local! {
    static TRACKING: Cell<bool> = const { Cell::new(false) };
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

// SAFETY: every call is passed on to the system allocator unchanged; the bookkeeping only
// touches const-initialised thread-locals, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        // SAFETY: the caller's contract is passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-(layout.size() as isize));
        // SAFETY: the caller's contract is passed on as is.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Counted as the new block appearing before the old one goes: the peak of a copy.
        count(new_size as isize);
        count(-(layout.size() as isize));
        // SAFETY: the caller's contract is passed on as is.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn count(delta: isize) {
    // `try_with`: during thread teardown the slots may be gone; nothing is tracked then.
    let _ = TRACKING.try_with(|tracking| {
        if tracking.get() {
            LIVE.with(|live| {
                live.set(live.get() + delta);
                PEAK.with(|peak| peak.set(peak.get().max(live.get())));
            });
        }
    });
}

/// Runs `f` and returns its result with the peak of the bytes this thread allocated and had
/// not freed while it ran.
fn peak_allocated<T>(f: impl FnOnce() -> T) -> (T, isize) {
    LIVE.with(|live| live.set(0));
    PEAK.with(|peak| peak.set(0));
    TRACKING.with(|tracking| tracking.set(true));
    let result = f();
    TRACKING.with(|tracking| tracking.set(false));
    (result, PEAK.with(Cell::get))
}

// ---------------------------------------------------------------------------------------------
// The line framer

/// A reader that hands out its input in the given chunks, one chunk per read at most (a chunk
/// larger than the caller's buffer is handed out in parts). It never allocates while read, so
/// the allocations counted during a read are the framer's.
struct Chunked {
    chunks: VecDeque<Vec<u8>>,
    /// The chunk being handed out; chunks are kept, not dropped, so no free during a read
    /// can lower the count either.
    index: usize,
    /// How much of that chunk was handed out already.
    offset: usize,
}

impl AsyncRead for Chunked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let (index, offset) = (self.index, self.offset);
        if let Some(chunk) = self.chunks.get(index) {
            let n = (chunk.len() - offset).min(buf.remaining());
            buf.put_slice(&chunk[offset..offset + n]);
            if offset + n < chunk.len() {
                self.offset += n;
            } else {
                self.index += 1;
                self.offset = 0;
            }
        }
        Poll::Ready(Ok(()))
    }
}

/// Cuts `bytes` at the given (sorted, deduplicated) points.
fn chunks(bytes: &[u8], mut cuts: Vec<usize>) -> VecDeque<Vec<u8>> {
    cuts.retain(|&cut| cut > 0 && cut < bytes.len());
    cuts.sort_unstable();
    cuts.dedup();
    let mut out = VecDeque::new();
    let mut from = 0;
    for cut in cuts.into_iter().chain(std::iter::once(bytes.len())) {
        if cut > from {
            out.push_back(bytes[from..cut].to_vec());
        }
        from = cut;
    }
    out
}

/// What the framer must produce: every newline-terminated line, and a last unterminated one;
/// a line over `max` as its length and its first bytes.
fn model(bytes: &[u8], max: usize) -> Vec<Line> {
    let mut lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    // After the last newline there is either a partial line or nothing.
    if lines.last().is_some_and(|last| last.is_empty()) {
        lines.pop();
    }
    lines
        .into_iter()
        .map(|line| {
            if line.len() > max {
                Line::Oversized {
                    len: line.len(),
                    prefix: line[..line.len().min(max + 1).min(120)].to_vec(),
                }
            } else {
                Line::Complete(line.to_vec())
            }
        })
        .collect()
}

/// Byte streams with many newlines, long runs without one, and every byte value.
fn stream() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        3 => proptest::collection::vec(any::<u8>(), 0..16),
        2 => Just(b"\n".to_vec()),
        1 => (0usize..3000).prop_map(|n| vec![b'x'; n]),
        1 => Just(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r\n".to_vec()),
    ];
    proptest::collection::vec(piece, 0..24).prop_map(|pieces| pieces.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn the_framer_frames_exactly_the_lines_within_its_bound(
        bytes in stream(),
        cuts in proptest::collection::vec(0usize..20_000, 0..32),
        capacity in 1usize..64,
        max in 1usize..200,
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let mut framer =
            BoundedLines::new(BufReader::with_capacity(capacity, Chunked { chunks: chunks(&bytes, cuts), index: 0, offset: 0 }), max);
        let mut got = Vec::new();
        let mut worst = 0;
        loop {
            // The reader never waits, so this thread does all the work of each call.
            let (line, peak) = peak_allocated(|| runtime.block_on(framer.next_line()));
            worst = worst.max(peak);
            match line.expect("reading from memory cannot fail") {
                Some(line) => got.push(line),
                None => break,
            }
        }
        prop_assert_eq!(got, model(&bytes, max));
        // One line in the making (at most max + 1 bytes, in a buffer that may have doubled
        // once), counted twice while it is copied to a larger buffer: never the stream.
        let bound = 4 * (max as isize + 1) + 256;
        prop_assert!(
            worst <= bound,
            "{} bytes held while framing {} bytes with a bound of {}",
            worst, bytes.len(), max
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The config loader

/// Keys that reach the loader's interesting paths, and some that do not.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec![
            "MCP_SERVERS", "mcpServers", "COMMAND", "command", "ARGS", "args", "ENV", "env",
            "DIR", "cwd", "URL", "url", "TIMEOUT", "EOF_GRACE", "TERM_GRACE", "ERA",
            "PROBE_TIMEOUT", "AUTH", "TOKEN", "USERNAME", "READONLY", "SERIAL", "type",
            "headers", "defaults", "DEFAULTS",
        ]).prop_map(str::to_owned),
        1 => "[a-zA-Z_$ {}.-]{0,12}",
    ]
}

/// Scalars that look like what configs hold: durations, URLs, `${VAR}`s, paths.
fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        prop::sample::select(vec![
            "300ms",
            "2s",
            "5m",
            "1h",
            "0s",
            "-1s",
            "http://127.0.0.1:1/mcp",
            "https://user:pw@example.invalid/x?token=abc",
            "${HOME}",
            "${NOPE}",
            "${",
            "$${X}",
            "/bin/true",
            "npx",
            "auto",
            "legacy",
            "modern",
            "bearer",
            "basic",
            "gh",
            "none",
        ])
        .prop_map(Value::from),
        ".{0,24}".prop_map(Value::from),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            proptest::collection::btree_map(key(), inner, 0..6)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// Documents: a value as JSON or YAML, under a real top-level key or not, or any text.
fn document() -> impl Strategy<Value = String> {
    let top = prop::sample::select(vec!["MCP_SERVERS", "mcpServers", "other"]);
    let servers = (
        top,
        proptest::collection::btree_map("[a-z]{1,6}", value(), 0..4),
    )
        .prop_map(|(top, servers)| {
            let servers = Value::Object(servers.into_iter().collect());
            serde_json::json!({ top: servers })
        });
    let value = prop_oneof![servers, value()];
    prop_oneof![
        value.clone().prop_map(|v| v.to_string()),
        value.prop_map(|v| yaml_serde::to_string(&v).unwrap_or_default()),
        ".{0,200}",
        proptest::collection::vec(any::<u8>(), 0..200)
            .prop_map(|bytes| String::from_utf8_lossy(&bytes).into_owned()),
    ]
}

/// The name the loader is given for the document: every error must carry it.
const SOURCE: &str = "fuzzed-config.yaml";

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn the_config_loader_never_panics_never_hangs_and_names_the_file(text in document()) {
        // On its own thread, so a hang fails the test (after a bound far above the few
        // milliseconds the worst document within the limits takes) instead of stalling it,
        // and a panic is caught as one.
        let (tx, rx) = mpsc::channel();
        let input = text.clone();
        std::thread::spawn(move || {
            let env = |name: &str| (name == "HOME").then(|| "/home/fuzz".to_owned());
            let result = std::panic::catch_unwind(|| {
                Config::from_str_with_env(&input, SOURCE, &env).map_err(|e| e.to_string())
            });
            let _ = tx.send(result);
        });
        let result = rx.recv_timeout(Duration::from_secs(20));
        let result = match result {
            Ok(result) => result,
            Err(_) => return Err(TestCaseError::fail(format!("the loader hung on {text:?}"))),
        };
        let loaded = result.map_err(|_| TestCaseError::fail(format!("the loader panicked on {text:?}")))?;
        if let Err(message) = loaded {
            prop_assert!(
                message.starts_with(SOURCE),
                "the error does not name the file first: {message:?} (document {text:?})"
            );
        }
    }
}
