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
    pub offset: u64,
    /// 1-based line number.
    pub line: u64,
    /// How many lines it spans (more than 1 for pretty-printed JSON).
    pub lines: usize,
    pub diagnoses: Vec<Diagnosis>,
    /// The first characters, with control characters and bad bytes escaped.
    pub excerpt: String,
}

/// The verdict on one stdout stream.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Purity {
    pub bytes: u64,
    pub messages: u64,
    /// Offending lines in all; only the first [`MAX_OFFENDERS`] are kept in `offenders`.
    pub offending: u64,
    pub offenders: Vec<Offender>,
    /// Lines longer than [`MAX_LINE`]: judged by their first `MAX_LINE` bytes
    /// (a valid beginning of a JSON value counts as a message).
    pub partly_checked: u64,
}

/// Offenders kept with their details; the rest are only counted.
pub const MAX_OFFENDERS: usize = 100;
/// How much of one line is kept to judge it; a longer line is judged by its beginning.
pub const MAX_LINE: usize = 16 << 20;
const EXCERPT_CHARS: usize = 60;
/// How far a possibly pretty-printed message is followed before giving up.
const MAX_PRETTY_LINES: usize = 1_000;
const MAX_PRETTY_BYTES: usize = 1 << 20;

/// Diagnoses every line of `bytes` (the whole stream at once).
#[cfg(test)]
pub fn analyse(bytes: &[u8]) -> Purity {
    let mut stream = Stream::default();
    stream.feed(bytes, |_, _| {});
    stream.finish(|_, _| {})
}

/// `stdout.purity` over a stream, fed as it arrives: memory stays bounded
/// (one line of at most [`MAX_LINE`] bytes, the lines of one possibly
/// pretty-printed message, [`MAX_OFFENDERS`] offenders) whatever the amount
/// of output, so any amount of valid output passes.
#[derive(Debug, Clone, Default)]
pub struct Stream {
    judge: Judge,
    /// The line being read: its first bytes, up to `MAX_LINE`.
    line: Vec<u8>,
    /// Its length so far, however long.
    line_len: u64,
    line_offset: u64,
    /// Its 1-based number, less one.
    lines_done: u64,
}

impl Stream {
    /// Feeds the next bytes. `on_line` gets every completed line (without
    /// its `\n`; only its first `MAX_LINE` bytes, and `true`, when longer).
    pub fn feed(&mut self, bytes: &[u8], mut on_line: impl FnMut(&[u8], bool)) {
        self.judge.purity.bytes += bytes.len() as u64;
        for piece in bytes.split_inclusive(|b| *b == b'\n') {
            let (body, terminated) = match piece.strip_suffix(b"\n") {
                Some(body) => (body, true),
                None => (piece, false),
            };
            let room = MAX_LINE.saturating_sub(self.line.len());
            self.line.extend_from_slice(&body[..body.len().min(room)]);
            self.line_len += body.len() as u64;
            if terminated {
                self.end_line(true, &mut on_line);
            }
        }
    }

    /// The stream has ended: judges the last line (without a newline, if
    /// any) and whatever was held back, and returns the verdict.
    pub fn finish(mut self, mut on_line: impl FnMut(&[u8], bool)) -> Purity {
        if self.line_len > 0 {
            self.end_line(false, &mut on_line);
        }
        self.judge.flush();
        self.judge.purity
    }

    /// The verdict as if the stream ended now.
    pub fn snapshot(&self) -> Purity {
        self.clone().finish(|_, _| {})
    }

    fn end_line(&mut self, terminated: bool, on_line: &mut impl FnMut(&[u8], bool)) {
        let overlong = self.line_len > self.line.len() as u64;
        on_line(&self.line, overlong);
        self.lines_done += 1;
        self.judge.line(LineRef {
            offset: self.line_offset,
            number: self.lines_done,
            raw: &self.line,
            overlong,
            terminated,
        });
        self.line_offset += self.line_len + u64::from(terminated);
        self.line_len = 0;
        self.line.clear();
    }
}

/// One line, borrowed.
#[derive(Debug, Clone, Copy)]
struct LineRef<'a> {
    offset: u64,
    number: u64,
    /// Without the `\n`; only the first `MAX_LINE` bytes when `overlong`.
    raw: &'a [u8],
    overlong: bool,
    terminated: bool,
}

/// One line held back while a pretty-printed message may be spanning it.
#[derive(Debug, Clone)]
struct HeldLine {
    offset: u64,
    number: u64,
    raw: Vec<u8>,
    overlong: bool,
    terminated: bool,
}

impl HeldLine {
    fn as_ref(&self) -> LineRef<'_> {
        LineRef {
            offset: self.offset,
            number: self.number,
            raw: &self.raw,
            overlong: self.overlong,
            terminated: self.terminated,
        }
    }
}

/// The line-by-line judgement.
#[derive(Debug, Clone, Default)]
struct Judge {
    purity: Purity,
    seen_message: bool,
    /// Lines that may be one pretty-printed message, the first one first,
    /// and those lines joined by `\n`.
    held: Vec<HeldLine>,
    joined: Vec<u8>,
}

/// Whether a line is JSON, and JSON-RPC.
enum Json {
    Rpc,
    NotRpc,
    Invalid,
}

impl Judge {
    fn line(&mut self, line: LineRef<'_>) {
        if self.held.is_empty() {
            self.judge(line);
        } else {
            self.hold(line);
        }
    }

    /// Judges a line that no pretty-printed message spans.
    fn judge(&mut self, line: LineRef<'_>) {
        let (mut diagnoses, body) = encoding(line.raw);
        let trimmed = body.trim_ascii();
        if trimmed.is_empty() {
            // A blank line carries no message; line-based clients skip it.
            // A CRLF blank line is still reported (it is usually framing).
            diagnoses.retain(|d| *d != Diagnosis::InvalidUtf8);
        } else if starts_with_ignore_case(trimmed, b"content-length:") || contains_header(trimmed) {
            diagnoses.push(Diagnosis::ContentLengthFraming);
        } else if line.overlong {
            // Too long to keep whole: a valid beginning of a JSON value is
            // taken for a message; the rest of the line is not checked.
            if json_prefix(trimmed) {
                self.seen_message = true;
                self.purity.messages += 1;
                self.purity.partly_checked += 1;
            } else {
                diagnoses.push(self.text(trimmed));
            }
        } else {
            match json(trimmed) {
                Json::Rpc => {
                    self.seen_message = true;
                    self.purity.messages += 1;
                }
                Json::NotRpc => diagnoses.push(Diagnosis::NotJsonRpc),
                Json::Invalid if matches!(trimmed.first(), Some(b'{' | b'[')) => {
                    // Maybe the first line of a pretty-printed message: hold
                    // it (and the next lines) until that is decided.
                    self.hold(line);
                    return;
                }
                Json::Invalid => diagnoses.push(self.text(trimmed)),
            }
        }
        if !line.terminated && !line.raw.is_empty() {
            diagnoses.push(Diagnosis::PartialLastLine);
        }
        self.offend(line, 1, diagnoses);
    }

    /// Banner, log line or text: a line that is not JSON at all.
    fn text(&self, trimmed: &[u8]) -> Diagnosis {
        if self.purity.offenders.len() >= MAX_OFFENDERS {
            // Only counted from here on: which kind of text it is does not matter.
            Diagnosis::Text
        } else if looks_like_log(trimmed) {
            Diagnosis::LogLine
        } else if !self.seen_message {
            Diagnosis::Banner
        } else {
            Diagnosis::Text
        }
    }

    fn offend(&mut self, line: LineRef<'_>, lines: usize, diagnoses: Vec<Diagnosis>) {
        if diagnoses.is_empty() {
            return;
        }
        self.purity.offending += 1;
        if self.purity.offenders.len() < MAX_OFFENDERS {
            self.purity.offenders.push(Offender {
                offset: line.offset,
                line: line.number,
                lines,
                diagnoses,
                excerpt: excerpt(line.raw),
            });
        }
    }

    /// Adds a line to the held ones and decides, when it can, whether they
    /// are one pretty-printed message.
    fn hold(&mut self, line: LineRef<'_>) {
        self.joined.extend_from_slice(line.raw);
        self.joined.push(b'\n');
        self.held.push(HeldLine {
            offset: line.offset,
            number: line.number,
            raw: line.raw.to_vec(),
            overlong: line.overlong,
            terminated: line.terminated,
        });
        if self.held.len() == 1 {
            return;
        }
        // The joined lines can only be a whole value once a line ends one.
        if matches!(line.raw.trim_ascii_end().last(), Some(b'}' | b']')) {
            match serde_json::from_slice::<serde::de::IgnoredAny>(&self.joined) {
                Ok(_) => return self.pretty(),
                Err(error) if !error.is_eof() => return self.not_pretty(),
                Err(_) => {}
            }
        }
        if line.overlong
            || !line.terminated
            || self.held.len() >= MAX_PRETTY_LINES
            || self.joined.len() >= MAX_PRETTY_BYTES
        {
            self.not_pretty();
        }
    }

    /// The held lines are one pretty-printed message.
    fn pretty(&mut self) {
        let held = std::mem::take(&mut self.held);
        self.joined.clear();
        let first = &held[0];
        let last = &held[held.len() - 1];
        let (mut diagnoses, _) = encoding(&first.raw);
        diagnoses.push(Diagnosis::PrettyPrintedJson);
        if !last.terminated && !last.raw.is_empty() {
            diagnoses.push(Diagnosis::PartialLastLine);
        }
        self.seen_message = true;
        self.offend(first.as_ref(), held.len(), diagnoses);
    }

    /// The held lines are not one message: the first one is text, and the
    /// others are judged again from scratch.
    fn not_pretty(&mut self) {
        let held = std::mem::take(&mut self.held);
        self.joined.clear();
        let first = &held[0];
        let (mut diagnoses, body) = encoding(&first.raw);
        diagnoses.push(self.text(body.trim_ascii()));
        if !first.terminated && !first.raw.is_empty() {
            diagnoses.push(Diagnosis::PartialLastLine);
        }
        self.offend(first.as_ref(), 1, diagnoses);
        for line in &held[1..] {
            self.line(line.as_ref());
        }
    }

    /// The stream has ended: what is held is decided now.
    fn flush(&mut self) {
        while !self.held.is_empty() {
            self.not_pretty();
        }
    }
}

/// The BOM, CRLF and UTF-8 diagnoses of a raw line, and its body without
/// the BOM and the CR.
fn encoding(raw: &[u8]) -> (Vec<Diagnosis>, &[u8]) {
    let mut diagnoses = Vec::new();
    let mut body = raw;
    if let Some(rest) = body.strip_prefix(b"\xEF\xBB\xBF") {
        diagnoses.push(Diagnosis::Bom);
        body = rest;
    }
    if let Some(rest) = body.strip_suffix(b"\r") {
        diagnoses.push(Diagnosis::Crlf);
        body = rest;
    }
    if std::str::from_utf8(body).is_err() {
        diagnoses.push(Diagnosis::InvalidUtf8);
    }
    (diagnoses, body)
}

/// The members of a JSON-RPC message that decide whether it is one, read
/// without building the rest of the value.
#[derive(serde::Deserialize)]
struct Shape {
    jsonrpc: Option<String>,
    #[serde(default, deserialize_with = "present")]
    method: bool,
    #[serde(default, deserialize_with = "present")]
    result: bool,
    #[serde(default, deserialize_with = "present")]
    error: bool,
}

/// True for a member that is there, whatever its value (`null` included).
fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    serde::de::IgnoredAny::deserialize(deserializer).map(|_| true)
}

use serde::Deserialize as _;

fn json(text: &[u8]) -> Json {
    // Most garbage is plain text: no need to build a parse error for it.
    if !matches!(
        text.first(),
        Some(b'{' | b'[' | b'"' | b'-' | b'0'..=b'9' | b't' | b'f' | b'n')
    ) {
        return Json::Invalid;
    }
    let rpc = |jsonrpc: Option<&str>, method: bool, result: bool, error: bool| {
        if jsonrpc == Some("2.0") && (method || result || error) {
            Json::Rpc
        } else {
            Json::NotRpc
        }
    };
    match serde_json::from_slice::<Shape>(text) {
        Ok(shape) => rpc(
            shape.jsonrpc.as_deref(),
            shape.method,
            shape.result,
            shape.error,
        ),
        // Valid JSON of another shape (not an object, a non-string
        // `jsonrpc`, a repeated member): the whole value decides.
        Err(error) if error.is_data() => match serde_json::from_slice::<serde_json::Value>(text) {
            Ok(value) => rpc(
                value.get("jsonrpc").and_then(serde_json::Value::as_str),
                value.get("method").is_some(),
                value.get("result").is_some(),
                value.get("error").is_some(),
            ),
            Err(_) => Json::Invalid,
        },
        Err(_) => Json::Invalid,
    }
}

/// True when `text` is the valid beginning of a JSON value (cut short).
fn json_prefix(text: &[u8]) -> bool {
    matches!(text.first(), Some(b'{' | b'['))
        && serde_json::from_slice::<serde::de::IgnoredAny>(text).is_err_and(|e| e.is_eof())
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

    fn diagnoses(bytes: &[u8]) -> Vec<(u64, Vec<Diagnosis>)> {
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
        let second = 18 + MSG.len() as u64 + 1;
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

    #[test]
    fn fed_a_byte_at_a_time_the_verdict_is_the_same() {
        let pretty = "{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 1,\n  \"result\": {}\n}\n";
        let out = format!("banner\n{MSG}\r\n{pretty}{{ not json\n[log] x\n{MSG}\n\u{feff}{MSG}");
        let whole = analyse(out.as_bytes());
        let mut stream = Stream::default();
        let mut lines = Vec::new();
        for byte in out.as_bytes() {
            stream.feed(std::slice::from_ref(byte), |line, _| {
                lines.push(line.to_vec())
            });
        }
        assert_eq!(stream.snapshot(), whole);
        let streamed = stream.finish(|line, _| lines.push(line.to_vec()));
        assert_eq!(streamed, whole);
        assert_eq!(
            lines.len(),
            out.split('\n').count(),
            "every line, the last one too"
        );
        assert_eq!(whole.offending, 6, "{whole:#?}");
        assert_eq!(whole.offenders[2].diagnoses, [Diagnosis::PrettyPrintedJson]);
        assert_eq!(whole.offenders[3].diagnoses, [Diagnosis::Text]);
        assert_eq!(
            whole.offenders[5].diagnoses,
            [Diagnosis::Bom, Diagnosis::PartialLastLine]
        );
    }

    #[test]
    fn offenders_are_counted_but_only_the_first_ones_kept() {
        let purity = analyse(&b"y\n".repeat(10_000));
        assert_eq!(purity.offending, 10_000);
        assert_eq!(purity.offenders.len(), MAX_OFFENDERS);
        assert_eq!(
            purity.offenders[MAX_OFFENDERS - 1].line,
            MAX_OFFENDERS as u64
        );
    }

    #[test]
    fn a_line_longer_than_the_cap_is_judged_by_its_beginning() {
        let long = |data: &str| {
            let mut line =
                br#"{"jsonrpc":"2.0","method":"notifications/message","params":{"data":""#.to_vec();
            line.resize(MAX_LINE + 10, b'x');
            line.extend_from_slice(format!("{data}\n{MSG}\n").as_bytes());
            line
        };
        let purity = analyse(&long("\"}}"));
        assert_eq!(purity.offending, 0, "{:?}", purity.offenders);
        assert_eq!((purity.messages, purity.partly_checked), (2, 1));
        let mut text = b"hello ".repeat(MAX_LINE / 4);
        text.push(b'\n');
        let purity = analyse(&text);
        assert_eq!(purity.offenders[0].diagnoses, [Diagnosis::Banner]);
        assert!(purity.offenders[0].excerpt.len() < 200);
    }
}
