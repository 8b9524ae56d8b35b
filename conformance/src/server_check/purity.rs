//! `stdout.purity`: reads a server's raw stdout and diagnoses every line that
//! is not one JSON-RPC message on one `\n`-terminated line.
//!
//! Pure functions over bytes, so every diagnosis is unit-tested here; the
//! process-level tests only confirm that real output reaches it intact.

use serde::Serialize;

/// What is wrong with one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Diagnosis {
    /// Text before the first message that is not a log line (a greeting, a version string).
    Banner,
    /// Looks like a logger's output: a level word, a `[tag]`, a timestamp.
    LogLine,
    /// Other non-JSON text after the first message.
    Text,
    /// One message spread over several lines.
    PrettyPrintedJson,
    /// `Content-Length:` headers (LSP-style framing), which MCP stdio does not use.
    ContentLengthFraming,
    /// Valid JSON that is not a JSON-RPC 2.0 message.
    NotJsonRpc,
    /// The line ends in `\r\n`.
    Crlf,
    /// A UTF-8 byte order mark.
    Bom,
    /// Bytes that are not UTF-8.
    InvalidUtf8,
    /// The last line has no terminating newline.
    PartialLastLine,
}

impl Diagnosis {
    pub fn describe(self) -> &'static str {
        match self {
            Diagnosis::Banner => "banner",
            Diagnosis::LogLine => "log line",
            Diagnosis::Text => "text",
            Diagnosis::PrettyPrintedJson => "pretty-printed JSON",
            Diagnosis::ContentLengthFraming => "Content-Length framing",
            Diagnosis::NotJsonRpc => "JSON but not JSON-RPC",
            Diagnosis::Crlf => "CRLF line ending",
            Diagnosis::Bom => "byte order mark",
            Diagnosis::InvalidUtf8 => "invalid UTF-8",
            Diagnosis::PartialLastLine => "partial last line (no newline)",
        }
    }
}

/// One offending line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Offender {
    /// Byte offset of the line's first byte in the server's stdout.
    pub offset: usize,
    /// 1-based line number.
    pub line: usize,
    /// How many lines it spans (more than 1 for pretty-printed JSON).
    pub lines: usize,
    pub diagnoses: Vec<Diagnosis>,
    /// The first characters, with control characters and bad bytes escaped.
    pub excerpt: String,
}

/// The verdict on one stdout stream.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Purity {
    pub bytes: usize,
    pub messages: usize,
    pub offenders: Vec<Offender>,
}

const EXCERPT_CHARS: usize = 60;
/// How far a pretty-printed message is followed before giving up.
const MAX_PRETTY_LINES: usize = 10_000;

/// Diagnoses every line of `bytes`.
pub fn analyse(bytes: &[u8]) -> Purity {
    let lines = split(bytes);
    let mut purity = Purity {
        bytes: bytes.len(),
        ..Purity::default()
    };
    let mut seen_message = false;
    let mut i = 0;
    while i < lines.len() {
        let (offset, raw, terminated) = lines[i];
        let mut diagnoses = Vec::new();
        let mut spans = 1;
        let mut body = raw;
        if let Some(rest) = body.strip_prefix(b"\xEF\xBB\xBF") {
            diagnoses.push(Diagnosis::Bom);
            body = rest;
        }
        if let Some(rest) = body.strip_suffix(b"\r") {
            diagnoses.push(Diagnosis::Crlf);
            body = rest;
        }
        let text = std::str::from_utf8(body);
        if text.is_err() {
            diagnoses.push(Diagnosis::InvalidUtf8);
        }
        let trimmed = body.trim_ascii();
        if trimmed.is_empty() {
            // A blank line carries no message; line-based clients skip it.
            // A CRLF blank line is still reported (it is usually framing).
            diagnoses.retain(|d| *d != Diagnosis::InvalidUtf8);
        } else if starts_with_ignore_case(trimmed, b"content-length:") || contains_header(trimmed) {
            diagnoses.push(Diagnosis::ContentLengthFraming);
        } else {
            match serde_json::from_slice::<serde_json::Value>(trimmed) {
                Ok(value) if is_json_rpc(&value) => {
                    seen_message = true;
                    purity.messages += 1;
                }
                Ok(_) => diagnoses.push(Diagnosis::NotJsonRpc),
                Err(_) => match pretty_span(&lines[i..], trimmed) {
                    Some(n) => {
                        diagnoses.push(Diagnosis::PrettyPrintedJson);
                        spans = n;
                        seen_message = true;
                    }
                    None if looks_like_log(trimmed) => diagnoses.push(Diagnosis::LogLine),
                    None if !seen_message => diagnoses.push(Diagnosis::Banner),
                    None => diagnoses.push(Diagnosis::Text),
                },
            }
        }
        let last = i + spans - 1;
        if !lines[last].2 && !lines[last].1.is_empty() {
            diagnoses.push(Diagnosis::PartialLastLine);
        }
        let _ = terminated;
        if !diagnoses.is_empty() {
            purity.offenders.push(Offender {
                offset,
                line: i + 1,
                lines: spans,
                diagnoses,
                excerpt: excerpt(raw),
            });
        }
        i += spans;
    }
    purity
}

/// Lines as (offset, bytes without `\n`, terminated by `\n`).
fn split(bytes: &[u8]) -> Vec<(usize, &[u8], bool)> {
    let mut lines = Vec::new();
    let mut offset = 0;
    for chunk in bytes.split_inclusive(|b| *b == b'\n') {
        match chunk.strip_suffix(b"\n") {
            Some(line) => lines.push((offset, line, true)),
            None => lines.push((offset, chunk, false)),
        }
        offset += chunk.len();
    }
    lines
}

fn is_json_rpc(value: &serde_json::Value) -> bool {
    value.get("jsonrpc").and_then(serde_json::Value::as_str) == Some("2.0")
        && (value.get("method").is_some()
            || value.get("result").is_some()
            || value.get("error").is_some())
}

/// If a line that opens a JSON value is the start of one spread over
/// several lines, how many lines it spans.
fn pretty_span(lines: &[(usize, &[u8], bool)], first: &[u8]) -> Option<usize> {
    if !matches!(first.first(), Some(b'{' | b'[')) {
        return None;
    }
    let mut joined: Vec<u8> = Vec::new();
    for (n, (_, line, _)) in lines.iter().enumerate().take(MAX_PRETTY_LINES) {
        joined.extend_from_slice(line);
        joined.push(b'\n');
        if n > 0 && serde_json::from_slice::<serde_json::Value>(&joined).is_ok() {
            return Some(n + 1);
        }
    }
    None
}

fn starts_with_ignore_case(text: &[u8], prefix: &[u8]) -> bool {
    text.len() >= prefix.len() && text[..prefix.len()].eq_ignore_ascii_case(prefix)
}

/// A JSON body glued to the next frame's header: `{...}Content-Length: 42`.
fn contains_header(text: &[u8]) -> bool {
    text.windows(15)
        .any(|w| w.eq_ignore_ascii_case(b"content-length:"))
}

/// A level word, a `[tag]` or a timestamp at the start of the line.
fn looks_like_log(text: &[u8]) -> bool {
    let text = String::from_utf8_lossy(text);
    let upper = text.trim_start().to_ascii_uppercase();
    const LEVELS: [&str; 9] = [
        "TRACE", "DEBUG", "INFO", "NOTICE", "WARN", "WARNING", "ERROR", "FATAL", "LOG",
    ];
    let level = LEVELS.iter().any(|level| {
        upper.starts_with(level)
            && upper[level.len()..]
                .chars()
                .next()
                .is_none_or(|c| !c.is_ascii_alphanumeric())
    });
    let tag = upper.starts_with('[')
        && upper[1..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric());
    let bytes = upper.as_bytes();
    let date = bytes.len() >= 10
        && bytes[..4].iter().all(u8::is_ascii_digit)
        && bytes[4] == b'-'
        && bytes[5..7].iter().all(u8::is_ascii_digit);
    let time = bytes.len() >= 8 && bytes[..2].iter().all(u8::is_ascii_digit) && bytes[2] == b':';
    level || tag || date || time
}

/// A printable prefix: control characters and invalid bytes escaped.
fn excerpt(raw: &[u8]) -> String {
    let mut out = String::new();
    let mut chars = 0;
    for chunk in raw.utf8_chunks() {
        for c in chunk.valid().chars() {
            if chars >= EXCERPT_CHARS {
                out.push('…');
                return out;
            }
            match c {
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{feff}' => out.push_str("\\u{feff}"),
                c if c.is_control() => out.push_str(&c.escape_default().to_string()),
                c => out.push(c),
            }
            chars += 1;
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
            chars += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSG: &str = r#"{"jsonrpc":"2.0","id":1,"result":{}}"#;

    fn diagnoses(bytes: &[u8]) -> Vec<(usize, Vec<Diagnosis>)> {
        analyse(bytes)
            .offenders
            .into_iter()
            .map(|o| (o.offset, o.diagnoses))
            .collect()
    }

    #[test]
    fn clean_output_has_no_offenders() {
        let out = format!("{MSG}\n{MSG}\n\n");
        let purity = analyse(out.as_bytes());
        assert_eq!(purity.messages, 2);
        assert!(purity.offenders.is_empty(), "{purity:?}");
    }

    #[test]
    fn banner_before_and_log_lines_after_with_offsets() {
        let out = format!("Server v1.0 ready\n{MSG}\n[log] sent message 1\nhello there\n");
        let got = diagnoses(out.as_bytes());
        let second = 18 + MSG.len() + 1;
        assert_eq!(
            got,
            [
                (0, vec![Diagnosis::Banner]),
                (second, vec![Diagnosis::LogLine]),
                (second + 21, vec![Diagnosis::Text]),
            ]
        );
    }

    #[test]
    fn log_lines_are_recognised_by_level_tag_or_timestamp() {
        for line in [
            "INFO starting",
            "warning: x",
            "[server] up",
            "2024-01-02 10:00 up",
            "12:00:01 up",
        ] {
            assert!(looks_like_log(line.as_bytes()), "{line}");
        }
        for line in ["Information desk", "Welcome!"] {
            assert!(!looks_like_log(line.as_bytes()), "{line}");
        }
    }

    #[test]
    fn crlf_bom_and_invalid_utf8() {
        let mut bytes = format!("\u{feff}{MSG}\r\n{MSG}\n").into_bytes();
        bytes.extend_from_slice(b"\xff\xfe garbage\n");
        let got = analyse(&bytes);
        assert_eq!(got.offenders[0].offset, 0);
        assert_eq!(
            got.offenders[0].diagnoses,
            [Diagnosis::Bom, Diagnosis::Crlf]
        );
        assert_eq!(
            got.offenders[1].diagnoses,
            [Diagnosis::InvalidUtf8, Diagnosis::Text]
        );
        assert!(
            got.offenders[1].excerpt.starts_with("\\xff\\xfe"),
            "{:?}",
            got.offenders[1]
        );
        assert_eq!(got.messages, 2);
    }

    #[test]
    fn content_length_framing() {
        let out = format!(
            "Content-Length: {}\r\n\r\n{MSG}Content-Length: {}\r\n\r\n{MSG}",
            MSG.len(),
            MSG.len()
        );
        let got = diagnoses(out.as_bytes());
        assert_eq!(
            got[0],
            (0, vec![Diagnosis::Crlf, Diagnosis::ContentLengthFraming])
        );
        assert_eq!(got[1].1, [Diagnosis::Crlf]);
        assert_eq!(got[2].1, [Diagnosis::Crlf, Diagnosis::ContentLengthFraming]);
        assert!(got.last().unwrap().1.contains(&Diagnosis::PartialLastLine));
    }

    #[test]
    fn pretty_printed_json_is_one_offender_spanning_its_lines() {
        let out = "{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 1,\n  \"result\": {}\n}\n";
        let purity = analyse(out.as_bytes());
        assert_eq!(purity.offenders.len(), 1);
        assert_eq!(
            purity.offenders[0].diagnoses,
            [Diagnosis::PrettyPrintedJson]
        );
        assert_eq!(purity.offenders[0].lines, 5);
    }

    #[test]
    fn partial_last_line_and_non_json_rpc() {
        let out = format!("{{\"hello\":1}}\n{MSG}");
        let got = diagnoses(out.as_bytes());
        assert_eq!(
            got,
            [
                (0, vec![Diagnosis::NotJsonRpc]),
                (12, vec![Diagnosis::PartialLastLine])
            ]
        );
    }
}
