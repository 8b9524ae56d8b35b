//! A line reader with a hard bound on line length, so a child that writes a
//! gigabyte without a newline costs the client at most the bound in memory.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// One line read from a child's stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Line {
    /// The line's bytes, without the newline (a trailing `\r` is kept).
    Complete(Vec<u8>),
    /// A line longer than the bound: its bytes were dropped; `len` of them
    /// were seen, the first `prefix` are kept for diagnostics.
    Oversized { len: usize, prefix: Vec<u8> },
}

/// How much of an oversized line is kept for a warning.
const PREFIX_KEPT: usize = 120;

/// Reads newline-delimited lines of at most `max_len` bytes.
pub(crate) struct BoundedLines<R> {
    reader: R,
    max_len: usize,
    current: Vec<u8>,
    seen: usize,
}

impl<R: AsyncBufRead + Unpin> BoundedLines<R> {
    pub(crate) fn new(reader: R, max_len: usize) -> Self {
        Self {
            reader,
            max_len,
            current: Vec::new(),
            seen: 0,
        }
    }

    /// The next line, or `None` at end of input. A last line without a
    /// newline is returned as a line.
    pub(crate) async fn next_line(&mut self) -> std::io::Result<Option<Line>> {
        loop {
            let buf = self.reader.fill_buf().await?;
            if buf.is_empty() {
                if self.seen == 0 {
                    return Ok(None);
                }
                return Ok(Some(self.take()));
            }
            let (chunk, consumed, done) = match buf.iter().position(|b| *b == b'\n') {
                Some(at) => (&buf[..at], at + 1, true),
                None => (buf, buf.len(), false),
            };
            self.seen += chunk.len();
            let room = (self.max_len + 1).saturating_sub(self.current.len());
            self.current
                .extend_from_slice(&chunk[..chunk.len().min(room)]);
            self.reader.consume(consumed);
            if done {
                return Ok(Some(self.take()));
            }
        }
    }

    fn take(&mut self) -> Line {
        let seen = std::mem::take(&mut self.seen);
        let mut bytes = std::mem::take(&mut self.current);
        if seen > self.max_len {
            bytes.truncate(PREFIX_KEPT);
            Line::Oversized {
                len: seen,
                prefix: bytes,
            }
        } else {
            Line::Complete(bytes)
        }
    }
}

/// A printable, bounded prefix of a line for log messages.
pub(crate) fn prefix(bytes: &[u8], max_chars: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out: String = text.chars().take(max_chars).collect();
    if text.chars().count() > max_chars {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], max: usize) -> Vec<Line> {
        // A tiny buffer so lines span many fill_buf calls.
        let reader = tokio::io::BufReader::with_capacity(3, input);
        let mut lines = BoundedLines::new(reader, max);
        let mut out = Vec::new();
        while let Some(line) = lines.next_line().await.unwrap() {
            out.push(line);
        }
        out
    }

    #[tokio::test]
    async fn splits_on_newlines_and_keeps_a_last_partial_line() {
        let got = lines(b"one\ntwo\r\n\nlast", 10).await;
        assert_eq!(
            got,
            [
                Line::Complete(b"one".to_vec()),
                Line::Complete(b"two\r".to_vec()),
                Line::Complete(b"".to_vec()),
                Line::Complete(b"last".to_vec()),
            ]
        );
    }

    #[tokio::test]
    async fn drops_oversized_lines_and_recovers() {
        let got = lines(b"short\n0123456789ABCDEF\nok\n", 10).await;
        assert_eq!(got[0], Line::Complete(b"short".to_vec()));
        assert_eq!(
            got[1],
            Line::Oversized {
                len: 16,
                prefix: b"0123456789A".to_vec()
            }
        );
        assert_eq!(got[2], Line::Complete(b"ok".to_vec()));
    }

    #[tokio::test]
    async fn a_line_of_exactly_the_bound_is_kept() {
        let got = lines(b"0123456789\n", 10).await;
        assert_eq!(got, [Line::Complete(b"0123456789".to_vec())]);
    }

    #[test]
    fn prefix_is_bounded_in_characters() {
        assert_eq!(prefix("héllo wörld".as_bytes(), 5), "héllo…");
        assert_eq!(prefix(b"abc", 5), "abc");
    }
}
