//! Captures what the client logs during one scenario, so the runner can check
//! that secrets never appear in it and that the child's stderr was forwarded.
//!
//! A scenario runs on a current-thread runtime on its own thread, so a
//! thread-local default subscriber sees every log line of its tasks (only the
//! client's reaper thread logs elsewhere, and it logs no configuration).

use std::{
    io::Write,
    sync::{Arc, Mutex},
};

use mcp_stdio_client::RedactingWriter;
use tracing_subscriber::fmt::MakeWriter;

use crate::scenario::LogLevel;

/// The target and message of the log line that forwards one child stderr line.
pub const STDERR_LINE_MARK: &str = "mcp_stdio_client::transport: stderr ";

#[derive(Clone, Default)]
pub struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Capture {
    type Writer = Capture;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

impl Capture {
    /// A plain-text subscriber at `level` writing into this capture.
    pub fn subscriber(&self, level: LogLevel) -> impl tracing::Subscriber + Send + Sync + use<> {
        let level = match level {
            LogLevel::Trace => tracing::Level::TRACE,
            LogLevel::Debug => tracing::Level::DEBUG,
            LogLevel::Info => tracing::Level::INFO,
        };
        tracing_subscriber::fmt()
            .with_max_level(level)
            .with_ansi(false)
            .without_time()
            // The same redaction as the CLI's log: URL secrets in any crate's lines.
            .with_writer({
                let capture = self.clone();
                move || RedactingWriter::new(capture.clone())
            })
            .finish()
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }
}

/// Splits a captured log into the client's own lines and the lines that
/// forward the child's stderr (the server's words).
pub fn split_log(log: &str) -> (Vec<&str>, Vec<&str>) {
    log.lines()
        .partition(|line| !line.contains(STDERR_LINE_MARK))
}
