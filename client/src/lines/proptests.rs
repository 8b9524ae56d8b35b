//! Property tests (proptest) of the stdout line framer ([`BoundedLines`]) over arbitrary byte
//! streams cut into arbitrary chunks. A unit test, since the framer is not public; the config
//! loader's property test is in `tests/it/properties.rs`.
//!
//! The framer's memory is measured by a counting allocator that counts only on the thread and
//! only while a test asks it to, so the other unit tests of the crate are not affected.

use std::{
    alloc::{GlobalAlloc, Layout, System},
    cell::Cell,
    collections::VecDeque,
    pin::Pin,
    task::{Context, Poll},
};

use proptest::prelude::*;
use tokio::io::{AsyncRead, BufReader, ReadBuf};

use super::{BoundedLines, Line};

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
